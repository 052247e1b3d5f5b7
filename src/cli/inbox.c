/*
 * `hookd inbox …`: list inbox items with filters, get one, replay one or a
 * bounded range, through the admin API (shown through output.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client.h"

enum {
    O_SOURCE = 1,
    O_STATUS,
    O_ENTITY_KIND,
    O_ENTITY_ID,
    O_SINCE,
    O_UNTIL,
    O_LIMIT,
    O_CURSOR,
    O_DRY_RUN,
};

static const struct option inbox_options[] = {
    {"source", required_argument, NULL, O_SOURCE},
    {"status", required_argument, NULL, O_STATUS},
    {"entity-kind", required_argument, NULL, O_ENTITY_KIND},
    {"entity-id", required_argument, NULL, O_ENTITY_ID},
    {"since", required_argument, NULL, O_SINCE},
    {"until", required_argument, NULL, O_UNTIL},
    {"limit", required_argument, NULL, O_LIMIT},
    {"cursor", required_argument, NULL, O_CURSOR},
    {"dry-run", no_argument, NULL, O_DRY_RUN},
    {NULL, 0, NULL, 0},
};

static const struct out_column inbox_columns[] = {
    {"ID", "id", NULL},
    {"SOURCE", "source", NULL},
    {"EVENT_ID", "event_id", NULL},
    {"STATUS", "status", out_fmt_status},
    {"RESULT", "result", NULL},
    {"ATTEMPTS", "attempts", NULL},
    {"RECEIVED", "received_at", out_fmt_time},
    {"ERROR", "error", NULL},
    OUT_COLUMNS_END,
};
static const char *const item_compact[] = {"payload", NULL};
static const struct out_record_spec item_spec = {NULL, item_compact, NULL};

/* "replayed ID: pending" */
static void replayed_view(const struct out *o, FILE *f, const json_t *answer, const void *arg)
{
    struct out_cell id, status;

    (void)o;
    (void)arg;
    fprintf(f, "replayed %s: %s\n", out_word(answer, "id", &id), out_word(answer, "status", &status));
}

/* "N items would be replayed (dry run)" / "N items replayed" */
static void replayed_range_view(const struct out *o, FILE *f, const json_t *answer, const void *arg)
{
    struct out_cell count;

    (void)o;
    (void)arg;
    fprintf(f, "%s items %s\n", out_word(answer, "count", &count),
            json_is_true(json_object_get(answer, "dry_run")) ? "would be replayed (dry run)" : "replayed");
}

static int inbox_list(const struct client *c, const struct cli_args *a)
{
    static const struct cli_query_param params[] = {
        {O_SOURCE, "source"}, {O_STATUS, "status"}, {O_ENTITY_KIND, "entity_kind"}, {O_ENTITY_ID, "entity_id"},
        {O_SINCE, "since"},   {O_UNTIL, "until"},   {O_LIMIT, "limit"},             {O_CURSOR, "cursor"},
    };
    char path[2048];

    if (!cli_list_path(path, sizeof path, "/v1/inbox", params, sizeof params / sizeof params[0], O_LIMIT, a))
        return CLI_EXIT_USAGE;
    return cli_show(c, a, "GET", path, NULL, NULL, out_view_list, inbox_columns);
}

static int inbox_get(const struct client *c, const struct cli_args *a)
{
    char path[512];

    if (!cli_item_path(path, sizeof path, "/v1/inbox", a->pos[0], NULL))
        return CLI_EXIT_USAGE;
    return cli_show(c, a, "GET", path, NULL, NULL, out_view_record, &item_spec);
}

static int inbox_replay(const struct client *c, const struct cli_args *a)
{
    char path[512];

    if (!cli_item_path(path, sizeof path, "/v1/inbox", a->pos[0], "/replay"))
        return CLI_EXIT_USAGE;
    return cli_show(c, a, "POST", path, NULL, NULL, replayed_view, NULL);
}

static int inbox_replay_range(const struct client *c, const struct cli_args *a)
{
    json_t *body = json_object();
    long long limit = 0;
    int rc = CLI_EXIT_USAGE;

    if (!body)
        return CLI_EXIT_USAGE;
    if (a->opt[O_LIMIT] && !cli_int("limit", a->opt[O_LIMIT], 1, 10000, &limit))
        goto out;
    if (a->opt[O_SOURCE])
        json_object_set_new(body, "source", json_string(a->opt[O_SOURCE]));
    if (a->opt[O_STATUS])
        json_object_set_new(body, "status", json_string(a->opt[O_STATUS]));
    if (a->opt[O_SINCE])
        json_object_set_new(body, "since", json_string(a->opt[O_SINCE]));
    if (a->opt[O_UNTIL])
        json_object_set_new(body, "until", json_string(a->opt[O_UNTIL]));
    if (limit)
        json_object_set_new(body, "limit", json_integer(limit));
    json_object_set_new(body, "dry_run", json_boolean(a->opt[O_DRY_RUN] != NULL));
    rc = cli_show(c, a, "POST", "/v1/inbox/replay", body, NULL, replayed_range_view, NULL);
out:
    json_decref(body);
    return rc;
}

static const struct cli_subcommand inbox_commands[] = {
    {"list", inbox_list,
     CLI_OPT(O_SOURCE) | CLI_OPT(O_STATUS) | CLI_OPT(O_ENTITY_KIND) | CLI_OPT(O_ENTITY_ID) | CLI_OPT(O_SINCE) |
         CLI_OPT(O_UNTIL) | CLI_OPT(O_LIMIT) | CLI_OPT(O_CURSOR) | CLI_WATCH,
     0,
     "list [--source S] [--status pending|processed|deferred|quarantined] [--entity-kind K] [--entity-id ID] "
     "[--since TIME] [--until TIME] [--limit N] [--cursor C]"},
    {"get", inbox_get, CLI_WATCH, 1, "get ID"},
    {"replay", inbox_replay, 0, 1, "replay ID"},
    {"replay-range", inbox_replay_range,
     CLI_OPT(O_SOURCE) | CLI_OPT(O_STATUS) | CLI_OPT(O_SINCE) | CLI_OPT(O_UNTIL) | CLI_OPT(O_LIMIT) |
         CLI_OPT(O_DRY_RUN),
     0,
     "replay-range [--source S] [--status quarantined|deferred] [--since TIME] [--until TIME] [--limit N] "
     "[--dry-run]"},
};

int cmd_inbox(int argc, char **argv)
{
    return cli_dispatch("inbox", inbox_commands, sizeof inbox_commands / sizeof inbox_commands[0], inbox_options,
                        argc, argv);
}
