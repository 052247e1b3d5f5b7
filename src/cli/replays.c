/*
 * `hookd replay …`: replay one delivery, one event (to all or one endpoint)
 * or a bounded range, and list or show the replay records, through the
 * admin API. Aligned tables or key/value lines; the API's JSON with --json.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/ops_cli.h"

enum { O_ENDPOINT = 1, O_ACCOUNT, O_STATUS, O_SINCE, O_UNTIL, O_LIMIT, O_CURSOR, O_DRY_RUN, O_JSON };

static const struct option replay_options[] = {
    {"endpoint", required_argument, NULL, O_ENDPOINT}, {"account", required_argument, NULL, O_ACCOUNT},
    {"status", required_argument, NULL, O_STATUS},     {"since", required_argument, NULL, O_SINCE},
    {"until", required_argument, NULL, O_UNTIL},       {"limit", required_argument, NULL, O_LIMIT},
    {"cursor", required_argument, NULL, O_CURSOR},     {"dry-run", no_argument, NULL, O_DRY_RUN},
    {"json", no_argument, NULL, O_JSON},               {NULL, 0, NULL, 0},
};

static const char *const record_keys[] = {"id", "kind", "actor", "account", "created_at", "finished_at", "matched",
                                          "replayed", "skipped", "done", NULL};

static void print_replay(const json_t *r)
{
    const json_t *p = json_object_get(r, "progress");
    char *filter = json_dumps(json_object_get(r, "filter"), JSON_COMPACT | JSON_SORT_KEYS);
    char a[32], b[32], c[32], d[32];

    ops_record(r, record_keys);
    printf("%-14s %s\n", "filter", filter ? filter : "-");
    printf("%-14s pending %s, delivered %s, failed %s, superseded %s\n", "progress", ops_text(p, "pending", a),
           ops_text(p, "delivered", b), ops_text(p, "failed", c), ops_text(p, "superseded", d));
    free(filter);
}

/* POST path with body; the record (or the delivery) printed. */
static int post_and_print(const struct client *c, const struct cli_args *a, const char *path, json_t *body,
                          bool delivery)
{
    static const char *const delivery_keys[] = {"id", "event_id", "endpoint_id", "status", "replay_id", NULL};
    json_t *answer = NULL;
    int rc;

    if (a->opt[O_JSON]) {
        rc = client_call(c, "POST", path, body, NULL);
    } else if ((rc = ops_call_json(c, "POST", path, body, &answer)) == CLI_EXIT_OK) {
        if (delivery)
            ops_record(answer, delivery_keys);
        else if (json_object_get(answer, "dry_run"))
            printf("%s deliveries would be replayed (dry run)\n", ops_text(answer, "count", (char[32]){0}));
        else
            print_replay(answer);
    }
    json_decref(answer);
    json_decref(body);
    return rc;
}

static int item_path(char *path, size_t cap, const char *base, const char *id, const char *suffix)
{
    snprintf(path, cap, "%s", base);
    if (!cli_path_segment(path, cap, id) || strlen(path) + strlen(suffix) >= cap) {
        fprintf(stderr, "hookd: id too long\n");
        return CLI_EXIT_USAGE;
    }
    strncat(path, suffix, cap - strlen(path) - 1);
    return CLI_EXIT_OK;
}

static int replay_delivery(const struct client *c, const struct cli_args *a)
{
    char path[512];
    int rc = item_path(path, sizeof path, "/v1/deliveries", a->pos[0], "/replay");

    return rc != CLI_EXIT_OK ? rc : post_and_print(c, a, path, json_object(), true);
}

static int replay_event(const struct client *c, const struct cli_args *a)
{
    char path[512];
    json_t *body = json_object();
    int rc = item_path(path, sizeof path, "/v1/events", a->pos[0], "/replay");

    if (rc != CLI_EXIT_OK || !body) {
        json_decref(body);
        return CLI_EXIT_USAGE;
    }
    if (a->opt[O_ENDPOINT])
        json_object_set_new(body, "endpoint_id", json_string(a->opt[O_ENDPOINT]));
    return post_and_print(c, a, path, body, false);
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
    return post_and_print(c, a, "/v1/replays", body, false);
}

static int replay_list(const struct client *c, const struct cli_args *a)
{
    static const char *const columns[] = {"ID", "KIND", "ACTOR", "ACCOUNT", "CREATED", "MATCHED", "REPLAYED",
                                          "SKIPPED", "DONE"};
    static const char *const keys[] = {"id", "kind", "actor", "account", "created_at", "matched", "replayed",
                                       "skipped", "done"};
    char path[2048] = "/v1/replays";
    long long limit;
    json_t *answer;
    int rc;

    if (a->opt[O_LIMIT] && !cli_int("limit", a->opt[O_LIMIT], 1, 1000, &limit))
        return CLI_EXIT_USAGE;
    if (!cli_path_query(path, sizeof path, "account", a->opt[O_ACCOUNT]) ||
        !cli_path_query(path, sizeof path, "limit", a->opt[O_LIMIT]) ||
        !cli_path_query(path, sizeof path, "cursor", a->opt[O_CURSOR])) {
        fprintf(stderr, "hookd: query too long\n");
        return CLI_EXIT_USAGE;
    }
    if (a->opt[O_JSON])
        return client_call(c, "GET", path, NULL, NULL);
    if ((rc = ops_call_json(c, "GET", path, NULL, &answer)) != CLI_EXIT_OK)
        return rc;
    ops_table(json_object_get(answer, "data"), columns, keys, sizeof keys / sizeof keys[0]);
    if (json_is_string(json_object_get(answer, "next_cursor")))
        printf("more: --cursor %s\n", json_string_value(json_object_get(answer, "next_cursor")));
    json_decref(answer);
    return CLI_EXIT_OK;
}

static int replay_get(const struct client *c, const struct cli_args *a)
{
    char path[512];
    json_t *answer;
    int rc = item_path(path, sizeof path, "/v1/replays", a->pos[0], "");

    if (rc != CLI_EXIT_OK)
        return rc;
    if (a->opt[O_JSON])
        return client_call(c, "GET", path, NULL, NULL);
    if ((rc = ops_call_json(c, "GET", path, NULL, &answer)) == CLI_EXIT_OK) {
        print_replay(answer);
        json_decref(answer);
    }
    return rc;
}

static const struct cli_subcommand replay_commands[] = {
    {"delivery", replay_delivery, CLI_OPT(O_JSON), 1, "delivery ID [--json]"},
    {"event", replay_event, CLI_OPT(O_ENDPOINT) | CLI_OPT(O_JSON), 1, "event ID [--endpoint EP] [--json]"},
    {"range", replay_range,
     CLI_OPT(O_ENDPOINT) | CLI_OPT(O_ACCOUNT) | CLI_OPT(O_STATUS) | CLI_OPT(O_SINCE) | CLI_OPT(O_UNTIL) |
         CLI_OPT(O_LIMIT) | CLI_OPT(O_DRY_RUN) | CLI_OPT(O_JSON),
     0,
     "range [--endpoint EP] [--account A] [--status dead|skipped] [--since T] [--until T] [--limit N] [--dry-run] "
     "[--json]"},
    {"list", replay_list, CLI_OPT(O_ACCOUNT) | CLI_OPT(O_LIMIT) | CLI_OPT(O_CURSOR) | CLI_OPT(O_JSON), 0,
     "list [--account A] [--limit N] [--cursor C] [--json]"},
    {"get", replay_get, CLI_OPT(O_JSON), 1, "get ID [--json]"},
};

int cmd_replay(int argc, char **argv)
{
    return cli_dispatch("replay", replay_commands, sizeof replay_commands / sizeof replay_commands[0],
                        replay_options, argc, argv);
}
