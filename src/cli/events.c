/* `hookd events …`: publish, list and get events through the admin API. */
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
    if (!data)
        fprintf(stderr, "hookd events publish: %s is not valid JSON: %s (line %d)\n",
                a->opt[O_DATA] ? "--data" : a->opt[O_DATA_FILE], jerr.text, jerr.line);
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
    rc = client_call(c, "POST", "/v1/events", body, a->opt[O_IDEMPOTENCY_KEY] ? header : NULL);
    json_decref(body);
    return rc;
}

static int events_list(const struct client *c, const struct cli_args *a)
{
    static const struct {
        int code;
        const char *param;
    } params[] = {
        {O_TYPE, "type"}, {O_ACCOUNT, "account"}, {O_SINCE, "since"},
        {O_UNTIL, "until"}, {O_LIMIT, "limit"},   {O_CURSOR, "cursor"},
    };
    char path[2048] = "/v1/events";
    long long limit;

    if (a->opt[O_LIMIT] && !cli_int("limit", a->opt[O_LIMIT], 1, 1000, &limit))
        return CLI_EXIT_USAGE;
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) {
        if (!cli_path_query(path, sizeof path, params[i].param, a->opt[params[i].code])) {
            fprintf(stderr, "hookd: query too long\n");
            return CLI_EXIT_USAGE;
        }
    }
    return client_call(c, "GET", path, NULL, NULL);
}

static int events_get(const struct client *c, const struct cli_args *a)
{
    char path[512] = "/v1/events";

    if (!cli_path_segment(path, sizeof path, a->pos[0])) {
        fprintf(stderr, "hookd: id too long\n");
        return CLI_EXIT_USAGE;
    }
    return client_call(c, "GET", path, NULL, NULL);
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
         CLI_OPT(O_CURSOR),
     0, "list [--type T] [--account A] [--since TIME] [--until TIME] [--limit N] [--cursor C]"},
    {"get", events_get, 0, 1, "get ID"},
};

int cmd_events(int argc, char **argv)
{
    return cli_dispatch("events", event_commands, sizeof event_commands / sizeof event_commands[0], event_options,
                        argc, argv);
}
