/* `hookd events …`: publish, list and get events (with their deliveries) through the admin API. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client.h"

enum {
    O_TYPE = 1,
    O_DATA,
    O_DATA_FILE,
    O_ACCOUNT,
    O_RESOURCE_TYPE,
    O_RESOURCE_ID,
    O_RESOURCE_VERSION,
    O_ID,
    O_IDEMPOTENCY_KEY,
    O_LIMIT,
    O_CURSOR,
    O_SINCE,
    O_UNTIL,
};

static const struct option event_options[] = {
    {"type", required_argument, NULL, O_TYPE},
    {"data", required_argument, NULL, O_DATA},
    {"data-file", required_argument, NULL, O_DATA_FILE},
    {"account", required_argument, NULL, O_ACCOUNT},
    {"resource-type", required_argument, NULL, O_RESOURCE_TYPE},
    {"resource-id", required_argument, NULL, O_RESOURCE_ID},
    {"resource-version", required_argument, NULL, O_RESOURCE_VERSION},
    {"id", required_argument, NULL, O_ID},
    {"idempotency-key", required_argument, NULL, O_IDEMPOTENCY_KEY},
    {"limit", required_argument, NULL, O_LIMIT},
    {"cursor", required_argument, NULL, O_CURSOR},
    {"since", required_argument, NULL, O_SINCE},
    {"until", required_argument, NULL, O_UNTIL},
    {NULL, 0, NULL, 0},
};

/* "order/42" from {"type": "order", "id": "42"}; "-" without a resource. */
static void fmt_resource(const struct out *o, const json_t *value, const json_t *row, size_t max,
                         struct out_cell *cell)
{
    const char *type = json_string_value(json_object_get(value, "type"));
    const char *id = json_string_value(json_object_get(value, "id"));
    char text[600];

    if (!json_is_object(value)) {
        out_fmt_text(o, value, row, max, cell);
        return;
    }
    snprintf(text, sizeof text, "%s/%s", type ? type : "-", id ? id : "-");
    out_cell_text(text, strlen(text), max, cell->text, sizeof cell->text);
}

static const struct out_column event_columns[] = {
    {"ID", "id", NULL},
    {"TYPE", "type", NULL},
    {"ACCOUNT", "account", NULL},
    {"RESOURCE", "resource", fmt_resource},
    {"CREATED", "created_at", out_fmt_time},
    {"DISPATCHED", "dispatched_at", out_fmt_time},
    {"ERROR", "error", NULL},
    OUT_COLUMNS_END,
};

static const char *const event_compact[] = {"data", NULL};
static const struct out_subtable event_subtables[] = {{"deliveries", cli_delivery_columns}, {NULL, NULL}};
static const struct out_record_spec event_spec = {NULL, event_compact, event_subtables};

/* The "data" value from --data, --data-file (- for stdin), or {} when neither; NULL after an error. */
static json_t *event_data(const struct cli_args *a)
{
    json_error_t jerr;
    json_t *data;

    if (a->opt[O_DATA] && a->opt[O_DATA_FILE]) {
        fprintf(stderr, "hookd events publish: give --data or --data-file, not both\n");
        return NULL;
    }
    if (a->opt[O_DATA])
        data = json_loads(a->opt[O_DATA], JSON_DECODE_ANY, &jerr);
    else if (a->opt[O_DATA_FILE] && strcmp(a->opt[O_DATA_FILE], "-") == 0)
        data = json_loadf(stdin, JSON_DECODE_ANY, &jerr);
    else if (a->opt[O_DATA_FILE])
        data = json_load_file(a->opt[O_DATA_FILE], JSON_DECODE_ANY, &jerr);
    else
        return json_object();
    if (!data) {
        char where[OUT_CELL_BYTES], why[OUT_CELL_BYTES];
        const char *what = a->opt[O_DATA] ? "--data" : a->opt[O_DATA_FILE];
        /* The parser's words quote the data's bytes. */
        out_cell_text(what, strlen(what), 200, where, sizeof where);
        out_cell_text(jerr.text, strlen(jerr.text), 200, why, sizeof why);
        fprintf(stderr, "hookd events publish: %s is not valid JSON: %s (line %d)\n", where, why, jerr.line);
    }
    return data;
}

static int events_publish(const struct client *c, const struct cli_args *a)
{
    char header[300];
    json_t *body, *data, *resource = NULL;
    long long version = 0;
    int rc;

    if (!a->opt[O_TYPE]) {
        fprintf(stderr, "hookd events publish: --type is required\n");
        return CLI_EXIT_USAGE;
    }
    if (a->opt[O_RESOURCE_VERSION] && !cli_int("resource-version", a->opt[O_RESOURCE_VERSION], 0, INT64_MAX, &version))
        return CLI_EXIT_USAGE;
    if (a->opt[O_IDEMPOTENCY_KEY] &&
        (size_t)snprintf(header, sizeof header, "Idempotency-Key: %s", a->opt[O_IDEMPOTENCY_KEY]) >= sizeof header) {
        fprintf(stderr, "hookd events publish: --idempotency-key is longer than 255 characters\n");
        return CLI_EXIT_USAGE;
    }
    if (!(data = event_data(a)))
        return CLI_EXIT_USAGE;
    body = json_object();
    json_object_set_new(body, "type", json_string(a->opt[O_TYPE]));
    json_object_set_new(body, "data", data);
    if (a->opt[O_ACCOUNT])
        json_object_set_new(body, "account", json_string(a->opt[O_ACCOUNT]));
    if (a->opt[O_ID])
        json_object_set_new(body, "id", json_string(a->opt[O_ID]));
    if (a->opt[O_RESOURCE_TYPE] || a->opt[O_RESOURCE_ID] || a->opt[O_RESOURCE_VERSION]) {
        resource = json_object();
        if (a->opt[O_RESOURCE_TYPE])
            json_object_set_new(resource, "type", json_string(a->opt[O_RESOURCE_TYPE]));
        if (a->opt[O_RESOURCE_ID])
            json_object_set_new(resource, "id", json_string(a->opt[O_RESOURCE_ID]));
        if (a->opt[O_RESOURCE_VERSION])
            json_object_set_new(resource, "version", json_integer(version));
        json_object_set_new(body, "resource", resource);
    }
    rc = cli_show(c, a, "POST", "/v1/events", body, a->opt[O_IDEMPOTENCY_KEY] ? header : NULL, out_view_record,
                  &event_spec);
    json_decref(body);
    return rc;
}

static int events_list(const struct client *c, const struct cli_args *a)
{
    static const struct cli_query_param params[] = {
        {O_TYPE, "type"}, {O_ACCOUNT, "account"}, {O_SINCE, "since"},
        {O_UNTIL, "until"}, {O_LIMIT, "limit"},   {O_CURSOR, "cursor"},
    };
    char path[2048];

    if (!cli_list_path(path, sizeof path, "/v1/events", params, sizeof params / sizeof params[0], O_LIMIT, a))
        return CLI_EXIT_USAGE;
    return cli_show(c, a, "GET", path, NULL, NULL, out_view_list, event_columns);
}

static int events_get(const struct client *c, const struct cli_args *a)
{
    char path[512];

    if (!cli_item_path(path, sizeof path, "/v1/events", a->pos[0], NULL))
        return CLI_EXIT_USAGE;
    return cli_show(c, a, "GET", path, NULL, NULL, out_view_record, &event_spec);
}

static const struct cli_subcommand event_commands[] = {
    {"publish", events_publish,
     CLI_OPT(O_TYPE) | CLI_OPT(O_DATA) | CLI_OPT(O_DATA_FILE) | CLI_OPT(O_ACCOUNT) | CLI_OPT(O_RESOURCE_TYPE) |
         CLI_OPT(O_RESOURCE_ID) | CLI_OPT(O_RESOURCE_VERSION) | CLI_OPT(O_ID) | CLI_OPT(O_IDEMPOTENCY_KEY),
     0,
     "publish --type T [--data JSON | --data-file FILE|-] [--account A] [--resource-type T --resource-id I "
     "--resource-version N] [--id ID] [--idempotency-key K]"},
    {"list", events_list,
     CLI_OPT(O_TYPE) | CLI_OPT(O_ACCOUNT) | CLI_OPT(O_SINCE) | CLI_OPT(O_UNTIL) | CLI_OPT(O_LIMIT) |
         CLI_OPT(O_CURSOR) | CLI_WATCH,
     0, "list [--type T] [--account A] [--since TIME] [--until TIME] [--limit N] [--cursor C]"},
    {"get", events_get, CLI_WATCH, 1, "get ID"},
};

int cmd_events(int argc, char **argv)
{
    return cli_dispatch("events", event_commands, sizeof event_commands / sizeof event_commands[0], event_options,
                        argc, argv);
}
