/*
 * `hookd alerts [list] [--status open|resolved] [--rule R] [--limit N]
 * [--cursor C]` and `hookd alerts get ID`: the alerts through the admin API,
 * shown by the CLI output rules (design §12 "CLI output").
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client.h"

enum { O_STATUS = 1, O_RULE, O_LIMIT, O_CURSOR };

static const struct option alerts_options[] = {
    {"status", required_argument, NULL, O_STATUS},
    {"rule", required_argument, NULL, O_RULE},
    {"limit", required_argument, NULL, O_LIMIT},
    {"cursor", required_argument, NULL, O_CURSOR},
    {NULL, 0, NULL, 0},
};

static const struct out_column alert_columns[] = {
    {"ID", "id", NULL},
    {"RULE", "rule", NULL},
    {"SUBJECT", "subject", NULL},
    {"STATUS", "status", out_fmt_status},
    {"OPENED", "opened_at", out_fmt_time},
    {"RESOLVED", "resolved_at", out_fmt_time},
    {"MESSAGE", "message", NULL},
    OUT_COLUMNS_END,
};

/* An alert's details (the figures the rule saw) as one line of JSON. */
static const char *const alert_compact[] = {"details", NULL};
static const struct out_record_spec alert_spec = {NULL, alert_compact, NULL};

static int alerts_list(const struct client *c, const struct cli_args *a)
{
    static const struct cli_query_param params[] = {
        {O_STATUS, "status"}, {O_RULE, "rule"}, {O_LIMIT, "limit"}, {O_CURSOR, "cursor"}};
    char path[2048];

    if (!cli_list_path(path, sizeof path, "/v1/alerts", params, sizeof params / sizeof params[0], O_LIMIT, a))
        return CLI_EXIT_USAGE;
    return cli_show(c, a, "GET", path, NULL, NULL, out_view_list, alert_columns);
}

static int alerts_get(const struct client *c, const struct cli_args *a)
{
    char path[512];

    if (!cli_item_path(path, sizeof path, "/v1/alerts", a->pos[0], NULL))
        return CLI_EXIT_USAGE;
    return cli_show(c, a, "GET", path, NULL, NULL, out_view_record, &alert_spec);
}

static const struct cli_subcommand alerts_commands[] = {
    {"list", alerts_list, CLI_OPT(O_STATUS) | CLI_OPT(O_RULE) | CLI_OPT(O_LIMIT) | CLI_OPT(O_CURSOR) | CLI_WATCH, 0,
     "[list] [--status open|resolved] [--rule RULE] [--limit N] [--cursor C]"},
    {"get", alerts_get, CLI_WATCH, 1, "get ID"},
};

/* `hookd alerts` alone, or with options only, lists. */
int cmd_alerts(int argc, char **argv)
{
    char *args[64];
    int n = 0;

    if (argc >= 2 && argv[1][0] != '-')
        return cli_dispatch("alerts", alerts_commands, 2, alerts_options, argc, argv);
    if (argc + 1 > (int)(sizeof args / sizeof args[0])) {
        fprintf(stderr, "hookd alerts: too many arguments\n");
        return CLI_EXIT_USAGE;
    }
    args[n++] = argv[0];
    args[n++] = (char *)"list";
    for (int i = 1; i < argc; i++)
        args[n++] = argv[i];
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
        return cli_dispatch("alerts", alerts_commands, 2, alerts_options, argc, argv);
    return cli_dispatch("alerts", alerts_commands, 2, alerts_options, n, args);
}
