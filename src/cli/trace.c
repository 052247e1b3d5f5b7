/*
 * `hookd trace KIND ID` and `hookd audit`: the investigation commands of
 * design §7 through the admin API, shown by the CLI output rules (design §12
 * "CLI output"): an entity's record with its events as a sub-table (one row
 * per event: its decision, versions, times, worker), the audit's checks as
 * key/value lines.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client.h"

enum { O_ORDER = 1, O_SOURCE, O_SINCE, O_UNTIL };

static const struct option trace_options[] = {
    {"order", required_argument, NULL, O_ORDER},
    {"source", required_argument, NULL, O_SOURCE},
    {"since", required_argument, NULL, O_SINCE},
    {"until", required_argument, NULL, O_UNTIL},
    {NULL, 0, NULL, 0},
};

static const struct out_column trace_event_columns[] = {
    {"EVENT_ID", "event_id", NULL},
    {"TYPE", "type", NULL},
    {"VERSION", "version", NULL},
    {"FROM", "from", NULL},
    {"TO", "to", NULL},
    {"RESULT", "result", out_fmt_status},
    {"RECEIVED", "received_at", out_fmt_time},
    {"PROCESSED", "processed_at", out_fmt_time},
    {"WORKER", "worker", NULL},
    {"DUPS", "dup_count", NULL},
    OUT_COLUMNS_END,
};
static const struct out_subtable trace_subtables[] = {{"events", trace_event_columns}, {NULL, NULL}};
static const struct out_record_spec trace_spec = {NULL, NULL, trace_subtables};

static int trace_run(const struct client *c, const struct cli_args *a)
{
    static const struct cli_query_param params[] = {{O_ORDER, "order"}};
    char base[1024] = "/v1/entities", path[2048];

    if (!cli_path_segment(base, sizeof base, a->pos[0]) ||
        !cli_item_path(path, sizeof path, base, a->pos[1], "/trace") ||
        !cli_list_path(base, sizeof base, path, params, 1, 0, a)) {
        fprintf(stderr, "hookd trace: kind or id too long\n");
        return CLI_EXIT_USAGE;
    }
    return cli_show(c, a, "GET", base, NULL, NULL, out_view_record, &trace_spec);
}

static int audit_run(const struct client *c, const struct cli_args *a)
{
    static const struct cli_query_param params[] = {{O_SOURCE, "source"}, {O_SINCE, "since"}, {O_UNTIL, "until"}};
    char path[2048];

    if (!cli_list_path(path, sizeof path, "/v1/audit", params, sizeof params / sizeof params[0], 0, a))
        return CLI_EXIT_USAGE;
    return cli_show(c, a, "GET", path, NULL, NULL, out_view_record, NULL);
}

int cmd_trace(int argc, char **argv)
{
    static const struct cli_subcommand trace = {"", trace_run, CLI_OPT(O_ORDER) | CLI_WATCH, 2,
                                                "KIND ID [--order received|version]"};
    return cli_dispatch_one("trace", &trace, trace_options, argc, argv);
}

int cmd_audit(int argc, char **argv)
{
    static const struct cli_subcommand audit = {"", audit_run, CLI_OPT(O_SOURCE) | CLI_OPT(O_SINCE) | CLI_OPT(O_UNTIL) |
                                                                   CLI_WATCH,
                                                0, "[--source S] [--since TIME] [--until TIME]"};
    return cli_dispatch_one("audit", &audit, trace_options, argc, argv);
}
