/*
 * `hookd endpoints …`: create, list, get, update, delete, disable, enable and
 * rotate-secret through the admin API; writes show the endpoint the API answers.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client.h"

enum {
    O_URL = 1,
    O_ACCOUNT,
    O_TYPES,
    O_SECRET,
    O_ORDERING,
    O_MAX_IN_FLIGHT,
    O_RATE_LIMIT,
    O_TIMEOUT,
    O_RETRY_SCHEDULE,
    O_DESCRIPTION,
    O_LIMIT,
    O_CURSOR,
    O_REASON,
    O_GRACE,
};

static const struct option endpoint_options[] = {
    {"url", required_argument, NULL, O_URL},
    {"account", required_argument, NULL, O_ACCOUNT},
    {"types", required_argument, NULL, O_TYPES},
    {"secret", required_argument, NULL, O_SECRET},
    {"ordering", required_argument, NULL, O_ORDERING},
    {"max-in-flight", required_argument, NULL, O_MAX_IN_FLIGHT},
    {"rate-limit", required_argument, NULL, O_RATE_LIMIT},
    {"timeout", required_argument, NULL, O_TIMEOUT},
    {"retry-schedule", required_argument, NULL, O_RETRY_SCHEDULE},
    {"description", required_argument, NULL, O_DESCRIPTION},
    {"limit", required_argument, NULL, O_LIMIT},
    {"cursor", required_argument, NULL, O_CURSOR},
    {"reason", required_argument, NULL, O_REASON},
    {"grace", required_argument, NULL, O_GRACE},
    {NULL, 0, NULL, 0},
};

#define FIELD_OPTIONS                                                                                           \
    (CLI_OPT(O_URL) | CLI_OPT(O_ACCOUNT) | CLI_OPT(O_TYPES) | CLI_OPT(O_ORDERING) | CLI_OPT(O_MAX_IN_FLIGHT) | \
     CLI_OPT(O_RATE_LIMIT) | CLI_OPT(O_TIMEOUT) | CLI_OPT(O_RETRY_SCHEDULE) | CLI_OPT(O_DESCRIPTION))
#define FIELD_SYNOPSIS                                                                                      \
    "[--account A] [--types order.*,invoice.paid] [--ordering none|key|latest] [--max-in-flight N] "        \
    "[--rate-limit N] [--timeout 10s] [--retry-schedule 1s,2s] [--description D]"

/* "a, b,c" → ["a","b","c"]; empty items are skipped. */
static json_t *split_types(const char *list)
{
    json_t *arr = json_array();
    const char *p = list;

    while (arr && *p) {
        size_t n = strcspn(p, ",");
        const char *start = p;
        while (n > 0 && *start == ' ') {
            start++;
            n--;
        }
        while (n > 0 && start[n - 1] == ' ')
            n--;
        if (n > 0)
            json_array_append_new(arr, json_stringn(start, n));
        p += strcspn(p, ",");
        if (*p == ',')
            p++;
    }
    return arr;
}

/* The endpoint fields given as options, as a body; NULL after printing an error. */
static json_t *fields_body(const struct cli_args *a)
{
    static const struct {
        int code;
        const char *field;
    } text_fields[] = {
        {O_URL, "url"},           {O_ACCOUNT, "account"}, {O_SECRET, "secret"}, {O_ORDERING, "ordering"},
        {O_TIMEOUT, "timeout"},   {O_RETRY_SCHEDULE, "retry_schedule"},         {O_DESCRIPTION, "description"},
    };
    static const struct {
        int code;
        const char *field;
        const char *option;
    } int_fields[] = {
        {O_MAX_IN_FLIGHT, "max_in_flight", "max-in-flight"},
        {O_RATE_LIMIT, "rate_limit", "rate-limit"},
    };
    json_t *body = json_object();
    long long v;

    for (size_t i = 0; body && i < sizeof text_fields / sizeof text_fields[0]; i++) {
        if (a->opt[text_fields[i].code])
            json_object_set_new(body, text_fields[i].field, json_string(a->opt[text_fields[i].code]));
    }
    for (size_t i = 0; body && i < sizeof int_fields / sizeof int_fields[0]; i++) {
        const char *s = a->opt[int_fields[i].code];
        if (!s)
            continue;
        if (!cli_int(int_fields[i].option, s, 0, 1000000000, &v)) {
            json_decref(body);
            return NULL;
        }
        json_object_set_new(body, int_fields[i].field, json_integer(v));
    }
    if (body && a->opt[O_TYPES])
        json_object_set_new(body, "event_types", split_types(a->opt[O_TYPES]));
    if (!body)
        fprintf(stderr, "hookd: out of memory\n");
    return body;
}

/* "enabled" or "disabled" (red). */
static void fmt_enabled(const struct out *o, const json_t *value, const json_t *row, size_t max,
                        struct out_cell *cell)
{
    const char *word = json_is_true(value) ? "enabled" : json_is_false(value) ? "disabled" : "-";

    (void)row;
    out_cell_text(word, strlen(word), max, cell->text, sizeof cell->text);
    cell->colour = o->colour ? out_status_colour(word) : NULL;
}

static const struct out_column endpoint_columns[] = {
    {"ID", "id", NULL},
    {"URL", "url", NULL},
    {"ACCOUNT", "account", NULL},
    {"TYPES", "event_types", out_fmt_list},
    {"STATE", "enabled", fmt_enabled},
    {"BREAKER", "breaker.state", out_fmt_status},
    {"ORDERING", "ordering", NULL},
    {"CREATED", "created_at", out_fmt_time},
    OUT_COLUMNS_END,
};

static const struct out_column secret_columns[] = {
    {"CREATED", "created_at", out_fmt_time},
    {"EXPIRES", "expires_at", out_fmt_time},
    {"PUBLIC_KEY", "public_key", NULL},
    OUT_COLUMNS_END,
};
static const struct out_subtable endpoint_subtables[] = {{"secrets", secret_columns}, {NULL, NULL}};
static const struct out_record_spec endpoint_spec = {NULL, NULL, endpoint_subtables};

/* "/v1/endpoints/ID" + suffix; false after printing an error. */
static bool endpoint_path(char *path, size_t cap, const char *id, const char *suffix)
{
    return cli_item_path(path, cap, "/v1/endpoints", id, suffix);
}

/* Sends body (consumed) and shows the endpoint the API answers. */
static int run_with_body(const struct client *c, const struct cli_args *a, const char *method, const char *path,
                         json_t *body)
{
    int rc;

    if (!body)
        return CLI_EXIT_USAGE;
    rc = cli_show(c, a, method, path, body, NULL, out_view_record, &endpoint_spec);
    json_decref(body);
    return rc;
}

static int endpoints_create(const struct client *c, const struct cli_args *a)
{
    if (!a->opt[O_URL]) {
        fprintf(stderr, "hookd endpoints create: --url is required\n");
        return CLI_EXIT_USAGE;
    }
    return run_with_body(c, a, "POST", "/v1/endpoints", fields_body(a));
}

static int endpoints_list(const struct client *c, const struct cli_args *a)
{
    static const struct cli_query_param params[] = {
        {O_ACCOUNT, "account"}, {O_LIMIT, "limit"}, {O_CURSOR, "cursor"}};
    char path[2048];

    if (!cli_list_path(path, sizeof path, "/v1/endpoints", params, sizeof params / sizeof params[0], O_LIMIT, a))
        return CLI_EXIT_USAGE;
    return cli_show(c, a, "GET", path, NULL, NULL, out_view_list, endpoint_columns);
}

static int endpoints_get(const struct client *c, const struct cli_args *a)
{
    char path[512];
    return endpoint_path(path, sizeof path, a->pos[0], NULL)
               ? cli_show(c, a, "GET", path, NULL, NULL, out_view_record, &endpoint_spec)
               : CLI_EXIT_USAGE;
}

static int endpoints_update(const struct client *c, const struct cli_args *a)
{
    char path[512];
    json_t *body;

    if (!endpoint_path(path, sizeof path, a->pos[0], NULL) || !(body = fields_body(a)))
        return CLI_EXIT_USAGE;
    if (json_object_size(body) == 0) {
        json_decref(body);
        fprintf(stderr, "hookd endpoints update: nothing to change (give at least one field option)\n");
        return CLI_EXIT_USAGE;
    }
    return run_with_body(c, a, "PATCH", path, body);
}

static int endpoints_delete(const struct client *c, const struct cli_args *a)
{
    char path[512];
    return endpoint_path(path, sizeof path, a->pos[0], NULL) ? cli_delete(c, a, path) : CLI_EXIT_USAGE;
}

static int endpoints_disable(const struct client *c, const struct cli_args *a)
{
    char path[512];
    json_t *body = json_object();

    if (!endpoint_path(path, sizeof path, a->pos[0], "/disable")) {
        json_decref(body);
        return CLI_EXIT_USAGE;
    }
    if (body && a->opt[O_REASON])
        json_object_set_new(body, "reason", json_string(a->opt[O_REASON]));
    return run_with_body(c, a, "POST", path, body);
}

static int endpoints_enable(const struct client *c, const struct cli_args *a)
{
    char path[512];
    return endpoint_path(path, sizeof path, a->pos[0], "/enable")
               ? cli_show(c, a, "POST", path, NULL, NULL, out_view_record, &endpoint_spec)
               : CLI_EXIT_USAGE;
}

static int endpoints_rotate(const struct client *c, const struct cli_args *a)
{
    char path[512];
    json_t *body = json_object();

    if (!endpoint_path(path, sizeof path, a->pos[0], "/secret/rotate")) {
        json_decref(body);
        return CLI_EXIT_USAGE;
    }
    if (body && a->opt[O_SECRET])
        json_object_set_new(body, "secret", json_string(a->opt[O_SECRET]));
    if (body && a->opt[O_GRACE])
        json_object_set_new(body, "grace", json_string(a->opt[O_GRACE]));
    return run_with_body(c, a, "POST", path, body);
}

static const struct cli_subcommand endpoint_commands[] = {
    {"create", endpoints_create, FIELD_OPTIONS | CLI_OPT(O_SECRET), 0,
     "create --url URL [--secret whsec_…] " FIELD_SYNOPSIS},
    {"list", endpoints_list, CLI_OPT(O_ACCOUNT) | CLI_OPT(O_LIMIT) | CLI_OPT(O_CURSOR) | CLI_WATCH, 0,
     "list [--account A] [--limit N] [--cursor C]"},
    {"get", endpoints_get, CLI_WATCH, 1, "get ID"},
    {"update", endpoints_update, FIELD_OPTIONS, 1, "update ID [--url URL] " FIELD_SYNOPSIS},
    {"delete", endpoints_delete, 0, 1, "delete ID"},
    {"disable", endpoints_disable, CLI_OPT(O_REASON), 1, "disable ID [--reason R]"},
    {"enable", endpoints_enable, 0, 1, "enable ID"},
    {"rotate-secret", endpoints_rotate, CLI_OPT(O_SECRET) | CLI_OPT(O_GRACE), 1,
     "rotate-secret ID [--secret whsec_…] [--grace 24h]"},
};

int cmd_endpoints(int argc, char **argv)
{
    return cli_dispatch("endpoints", endpoint_commands, sizeof endpoint_commands / sizeof endpoint_commands[0],
                        endpoint_options, argc, argv);
}
