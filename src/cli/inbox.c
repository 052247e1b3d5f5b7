/*
 * `hookd inbox …`: list inbox items with filters, get one, replay one or a
 * bounded range, through the admin API. Readable aligned tables by default,
 * the API's JSON with --json.
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
    O_JSON,
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
    {"json", no_argument, NULL, O_JSON},
    {NULL, 0, NULL, 0},
};

static const char *text_of(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    static char number[32];

    if (json_is_string(v))
        return json_string_value(v);
    if (json_is_integer(v)) {
        snprintf(number, sizeof number, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return number;
    }
    return "-";
}

/* One row's cells; entity as kind/id. */
#define N_COLUMNS 8
static const char *const columns[N_COLUMNS] = {"ID", "SOURCE", "EVENT_ID", "STATUS", "RESULT", "ATTEMPTS",
                                               "RECEIVED", "ERROR"};
static const char *const keys[N_COLUMNS] = {"id", "source", "event_id", "status", "result", "attempts",
                                            "received_at", "error"};
#define CELL_MAX 48 /* longer values are cut with "…" (the --json output has them whole) */

static void cell(char out[CELL_MAX + 4], const char *text)
{
    size_t n = strlen(text);

    if (n <= CELL_MAX)
        snprintf(out, CELL_MAX + 4, "%s", text);
    else
        snprintf(out, CELL_MAX + 4, "%.*s...", CELL_MAX - 3, text);
}

static void print_table(const json_t *data)
{
    size_t width[N_COLUMNS], i;
    json_t *row;
    char buf[CELL_MAX + 4];

    for (size_t k = 0; k < N_COLUMNS; k++)
        width[k] = strlen(columns[k]);
    json_array_foreach(data, i, row) {
        for (size_t k = 0; k < N_COLUMNS; k++) {
            cell(buf, text_of(row, keys[k]));
            if (strlen(buf) > width[k])
                width[k] = strlen(buf);
        }
    }
    for (size_t k = 0; k < N_COLUMNS; k++)
        printf("%-*s%s", k + 1 < N_COLUMNS ? (int)width[k] : 0, columns[k], k + 1 < N_COLUMNS ? "  " : "\n");
    json_array_foreach(data, i, row) {
        for (size_t k = 0; k < N_COLUMNS; k++) {
            cell(buf, text_of(row, keys[k]));
            printf("%-*s%s", k + 1 < N_COLUMNS ? (int)width[k] : 0, buf, k + 1 < N_COLUMNS ? "  " : "\n");
        }
    }
}

static int inbox_list(const struct client *c, const struct cli_args *a)
{
    static const struct {
        int code;
        const char *param;
    } params[] = {
        {O_SOURCE, "source"}, {O_STATUS, "status"}, {O_ENTITY_KIND, "entity_kind"}, {O_ENTITY_ID, "entity_id"},
        {O_SINCE, "since"},   {O_UNTIL, "until"},   {O_LIMIT, "limit"},             {O_CURSOR, "cursor"},
    };
    char path[2048] = "/v1/inbox";
    long long limit;
    json_t *answer;
    int rc;

    if (a->opt[O_LIMIT] && !cli_int("limit", a->opt[O_LIMIT], 1, 1000, &limit))
        return CLI_EXIT_USAGE;
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) {
        if (!cli_path_query(path, sizeof path, params[i].param, a->opt[params[i].code])) {
            fprintf(stderr, "hookd: query too long\n");
            return CLI_EXIT_USAGE;
        }
    }
    if (a->opt[O_JSON])
        return client_call(c, "GET", path, NULL, NULL);
    rc = client_call_json(c, "GET", path, NULL, &answer);
    if (rc != CLI_EXIT_OK)
        return rc;
    print_table(json_object_get(answer, "data"));
    if (json_is_string(json_object_get(answer, "next_cursor")))
        printf("more: --cursor %s\n", json_string_value(json_object_get(answer, "next_cursor")));
    json_decref(answer);
    return CLI_EXIT_OK;
}

static int item_path(char *path, size_t cap, const char *id, const char *suffix)
{
    snprintf(path, cap, "/v1/inbox");
    if (!cli_path_segment(path, cap, id) || strlen(path) + strlen(suffix) >= cap) {
        fprintf(stderr, "hookd: id too long\n");
        return CLI_EXIT_USAGE;
    }
    size_t used = strlen(path);
    snprintf(path + used, cap - used, "%s", suffix);
    return CLI_EXIT_OK;
}

static void print_item(const json_t *it)
{
    static const char *const fields[] = {"id", "source", "event_id", "event_type", "status", "result", "attempts",
                                         "dup_count", "received_at", "processed_at", "next_attempt_at", "error",
                                         NULL};
    const json_t *entity = json_object_get(it, "entity");

    for (size_t i = 0; fields[i]; i++)
        printf("%-16s %s\n", fields[i], text_of(it, fields[i]));
    if (json_is_object(entity))
        printf("%-16s %s/%s\n", "entity", text_of(entity, "kind"), text_of(entity, "id"));
}

static int inbox_get(const struct client *c, const struct cli_args *a)
{
    char path[512];
    json_t *answer;
    int rc = item_path(path, sizeof path, a->pos[0], "");

    if (rc != CLI_EXIT_OK)
        return rc;
    if (a->opt[O_JSON])
        return client_call(c, "GET", path, NULL, NULL);
    rc = client_call_json(c, "GET", path, NULL, &answer);
    if (rc == CLI_EXIT_OK) {
        print_item(answer);
        json_decref(answer);
    }
    return rc;
}

static int inbox_replay(const struct client *c, const struct cli_args *a)
{
    char path[512];
    json_t *answer;
    int rc = item_path(path, sizeof path, a->pos[0], "/replay");

    if (rc != CLI_EXIT_OK)
        return rc;
    if (a->opt[O_JSON])
        return client_call(c, "POST", path, NULL, NULL);
    rc = client_call_json(c, "POST", path, NULL, &answer);
    if (rc == CLI_EXIT_OK) {
        printf("replayed %s: %s\n", text_of(answer, "id"), text_of(answer, "status"));
        json_decref(answer);
    }
    return rc;
}

static int inbox_replay_range(const struct client *c, const struct cli_args *a)
{
    json_t *body = json_object(), *answer = NULL;
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
    if (a->opt[O_JSON]) {
        rc = client_call(c, "POST", "/v1/inbox/replay", body, NULL);
        goto out;
    }
    rc = client_call_json(c, "POST", "/v1/inbox/replay", body, &answer);
    if (rc == CLI_EXIT_OK)
        printf("%s items %s\n", text_of(answer, "count"),
               json_is_true(json_object_get(answer, "dry_run")) ? "would be replayed (dry run)" : "replayed");
out:
    json_decref(answer);
    json_decref(body);
    return rc;
}

static const struct cli_subcommand inbox_commands[] = {
    {"list", inbox_list,
     CLI_OPT(O_SOURCE) | CLI_OPT(O_STATUS) | CLI_OPT(O_ENTITY_KIND) | CLI_OPT(O_ENTITY_ID) | CLI_OPT(O_SINCE) |
         CLI_OPT(O_UNTIL) | CLI_OPT(O_LIMIT) | CLI_OPT(O_CURSOR) | CLI_OPT(O_JSON),
     0,
     "list [--source S] [--status pending|processed|deferred|quarantined] [--entity-kind K] [--entity-id ID] "
     "[--since TIME] [--until TIME] [--limit N] [--cursor C] [--json]"},
    {"get", inbox_get, CLI_OPT(O_JSON), 1, "get ID [--json]"},
    {"replay", inbox_replay, CLI_OPT(O_JSON), 1, "replay ID [--json]"},
    {"replay-range", inbox_replay_range,
     CLI_OPT(O_SOURCE) | CLI_OPT(O_STATUS) | CLI_OPT(O_SINCE) | CLI_OPT(O_UNTIL) | CLI_OPT(O_LIMIT) |
         CLI_OPT(O_DRY_RUN) | CLI_OPT(O_JSON),
     0,
     "replay-range [--source S] [--status quarantined|deferred] [--since TIME] [--until TIME] [--limit N] "
     "[--dry-run] [--json]"},
};

int cmd_inbox(int argc, char **argv)
{
    return cli_dispatch("inbox", inbox_commands, sizeof inbox_commands / sizeof inbox_commands[0], inbox_options,
                        argc, argv);
}
