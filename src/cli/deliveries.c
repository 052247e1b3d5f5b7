/* `hookd deliveries …`: list deliveries with filters and get one with its attempts, through the admin API. */
#include <stdio.h>

#include "cli/cli.h"
#include "cli/client.h"

enum {
    O_STATUS = 1,
    O_ENDPOINT,
    O_EVENT,
    O_ACCOUNT,
    O_SINCE,
    O_UNTIL,
    O_LIMIT,
    O_CURSOR,
};

static const struct option delivery_options[] = {
    {"status", required_argument, NULL, O_STATUS},
    {"endpoint", required_argument, NULL, O_ENDPOINT},
    {"event", required_argument, NULL, O_EVENT},
    {"account", required_argument, NULL, O_ACCOUNT},
    {"since", required_argument, NULL, O_SINCE},
    {"until", required_argument, NULL, O_UNTIL},
    {"limit", required_argument, NULL, O_LIMIT},
    {"cursor", required_argument, NULL, O_CURSOR},
    {NULL, 0, NULL, 0},
};

static int deliveries_list(const struct client *c, const struct cli_args *a)
{
    static const struct {
        int code;
        const char *param;
    } params[] = {
        {O_STATUS, "status"}, {O_ENDPOINT, "endpoint_id"}, {O_EVENT, "event_id"}, {O_ACCOUNT, "account"},
        {O_SINCE, "since"},   {O_UNTIL, "until"},          {O_LIMIT, "limit"},    {O_CURSOR, "cursor"},
    };
    char path[2048] = "/v1/deliveries";
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

static int deliveries_get(const struct client *c, const struct cli_args *a)
{
    char path[512] = "/v1/deliveries";

    if (!cli_path_segment(path, sizeof path, a->pos[0])) {
        fprintf(stderr, "hookd: id too long\n");
        return CLI_EXIT_USAGE;
    }
    return client_call(c, "GET", path, NULL, NULL);
}

static const struct cli_subcommand delivery_commands[] = {
    {"list", deliveries_list,
     CLI_OPT(O_STATUS) | CLI_OPT(O_ENDPOINT) | CLI_OPT(O_EVENT) | CLI_OPT(O_ACCOUNT) | CLI_OPT(O_SINCE) |
         CLI_OPT(O_UNTIL) | CLI_OPT(O_LIMIT) | CLI_OPT(O_CURSOR),
     0,
     "list [--status pending|retrying|delivered|dead|superseded|skipped] [--endpoint ID] [--event ID] "
     "[--account A] [--since TIME] [--until TIME] [--limit N] [--cursor C]"},
    {"get", deliveries_get, 0, 1, "get ID"},
};

int cmd_deliveries(int argc, char **argv)
{
    return cli_dispatch("deliveries", delivery_commands, sizeof delivery_commands / sizeof delivery_commands[0],
                        delivery_options, argc, argv);
}
