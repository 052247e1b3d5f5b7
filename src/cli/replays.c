/*
 * `hookd replay …`: replay one delivery, one event (to all or one endpoint)
 * or a bounded range, and list or show the replay records, through the
 * admin API, shown by the CLI output rules (design §12 "CLI output").
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client.h"

enum { O_ENDPOINT = 1, O_ACCOUNT, O_STATUS, O_SINCE, O_UNTIL, O_LIMIT, O_CURSOR, O_DRY_RUN };

static const struct option replay_options[] = {
    {"endpoint", required_argument, NULL, O_ENDPOINT}, {"account", required_argument, NULL, O_ACCOUNT},
    {"status", required_argument, NULL, O_STATUS},     {"since", required_argument, NULL, O_SINCE},
    {"until", required_argument, NULL, O_UNTIL},       {"limit", required_argument, NULL, O_LIMIT},
    {"cursor", required_argument, NULL, O_CURSOR},     {"dry-run", no_argument, NULL, O_DRY_RUN},
    {NULL, 0, NULL, 0},
};

/* "pending 1, delivered 2, failed 0, superseded 0" from a record's progress. */
static void fmt_progress(const struct out *o, const json_t *value, const json_t *row, size_t max,
                         struct out_cell *cell)
{
    struct out_cell p, d, f, s;
    char text[256];

    if (!json_is_object(value)) {
        out_fmt_text(o, value, row, max, cell);
        return;
    }
    snprintf(text, sizeof text, "pending %s, delivered %s, failed %s, superseded %s",
             out_word(value, "pending", &p), out_word(value, "delivered", &d), out_word(value, "failed", &f),
             out_word(value, "superseded", &s));
    out_cell_text(text, strlen(text), max, cell->text, sizeof cell->text);
}

static const struct out_column replay_columns[] = {
    {"ID", "id", NULL},
    {"KIND", "kind", NULL},
    {"ACTOR", "actor", NULL},
    {"ACCOUNT", "account", NULL},
    {"CREATED", "created_at", out_fmt_time},
    {"MATCHED", "matched", NULL},
    {"REPLAYED", "replayed", NULL},
    {"SKIPPED", "skipped", NULL},
    {"PROGRESS", "progress", fmt_progress},
    {"DONE", "done", NULL},
    OUT_COLUMNS_END,
};

/* A record's filter as one line of JSON; the rest flattened (progress.pending …). */
static const char *const replay_compact[] = {"filter", NULL};
static const struct out_record_spec replay_spec = {NULL, replay_compact, NULL};

/* A dry run as a sentence, a replay record as its key/value block. */
static void replay_view(const struct out *o, FILE *f, const json_t *answer, const void *arg)
{
    struct out_cell count, limit;

    (void)arg;
    if (json_is_true(json_object_get(answer, "dry_run")))
        fprintf(f, "%s deliveries would be replayed (dry run; limit %s)\n", out_word(answer, "count", &count),
                out_word(answer, "limit", &limit));
    else
        out_record(o, f, answer, &replay_spec);
}

/* "replayed DELIVERY: pending (replay rpl_…)" */
static void replayed_delivery_view(const struct out *o, FILE *f, const json_t *answer, const void *arg)
{
    struct out_cell id, status, replay;

    (void)o;
    (void)arg;
    fprintf(f, "replayed %s: %s (replay %s)\n", out_word(answer, "id", &id), out_word(answer, "status", &status),
            out_word(answer, "replay_id", &replay));
}

static int replay_delivery(const struct client *c, const struct cli_args *a)
{
    char path[512];
    json_t *body = json_object();
    int rc = CLI_EXIT_USAGE;

    if (body && cli_item_path(path, sizeof path, "/v1/deliveries", a->pos[0], "/replay"))
        rc = cli_show(c, a, "POST", path, body, NULL, replayed_delivery_view, NULL);
    json_decref(body);
    return rc;
}

static int replay_event(const struct client *c, const struct cli_args *a)
{
    char path[512];
    json_t *body = json_object();
    int rc = CLI_EXIT_USAGE;

    if (a->opt[O_ENDPOINT] && body)
        json_object_set_new(body, "endpoint_id", json_string(a->opt[O_ENDPOINT]));
    if (body && cli_item_path(path, sizeof path, "/v1/events", a->pos[0], "/replay"))
        rc = cli_show(c, a, "POST", path, body, NULL, replay_view, NULL);
    json_decref(body);
    return rc;
}

static int replay_range(const struct client *c, const struct cli_args *a)
{
    static const struct {
        int code;
        const char *field;
    } fields[] = {{O_ENDPOINT, "endpoint_id"}, {O_ACCOUNT, "account"}, {O_STATUS, "status"},
                  {O_SINCE, "since"},          {O_UNTIL, "until"}};
    json_t *body = json_object();
    long long limit = 0;
    int rc;

    if (!body || (a->opt[O_LIMIT] && !cli_int("limit", a->opt[O_LIMIT], 1, 10000, &limit))) {
        json_decref(body);
        return CLI_EXIT_USAGE;
    }
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (a->opt[fields[i].code])
            json_object_set_new(body, fields[i].field, json_string(a->opt[fields[i].code]));
    if (limit)
        json_object_set_new(body, "limit", json_integer(limit));
    json_object_set_new(body, "dry_run", json_boolean(a->opt[O_DRY_RUN] != NULL));
    rc = cli_show(c, a, "POST", "/v1/replays", body, NULL, replay_view, NULL);
    json_decref(body);
    return rc;
}

static int replay_list(const struct client *c, const struct cli_args *a)
{
    static const struct cli_query_param params[] = {{O_ACCOUNT, "account"}, {O_LIMIT, "limit"}, {O_CURSOR, "cursor"}};
    char path[2048];

    if (!cli_list_path(path, sizeof path, "/v1/replays", params, sizeof params / sizeof params[0], O_LIMIT, a))
        return CLI_EXIT_USAGE;
    return cli_show(c, a, "GET", path, NULL, NULL, out_view_list, replay_columns);
}

static int replay_get(const struct client *c, const struct cli_args *a)
{
    char path[512];

    if (!cli_item_path(path, sizeof path, "/v1/replays", a->pos[0], NULL))
        return CLI_EXIT_USAGE;
    return cli_show(c, a, "GET", path, NULL, NULL, replay_view, NULL);
}

static const struct cli_subcommand replay_commands[] = {
    {"delivery", replay_delivery, 0, 1, "delivery ID"},
    {"event", replay_event, CLI_OPT(O_ENDPOINT), 1, "event ID [--endpoint EP]"},
    {"range", replay_range,
     CLI_OPT(O_ENDPOINT) | CLI_OPT(O_ACCOUNT) | CLI_OPT(O_STATUS) | CLI_OPT(O_SINCE) | CLI_OPT(O_UNTIL) |
         CLI_OPT(O_LIMIT) | CLI_OPT(O_DRY_RUN),
     0, "range [--endpoint EP] [--account A] [--status dead|skipped] [--since T] [--until T] [--limit N] [--dry-run]"},
    {"list", replay_list, CLI_OPT(O_ACCOUNT) | CLI_OPT(O_LIMIT) | CLI_OPT(O_CURSOR) | CLI_WATCH, 0,
     "list [--account A] [--limit N] [--cursor C]"},
    {"get", replay_get, CLI_WATCH, 1, "get ID"},
};

int cmd_replay(int argc, char **argv)
{
    return cli_dispatch("replay", replay_commands, sizeof replay_commands / sizeof replay_commands[0],
                        replay_options, argc, argv);
}
