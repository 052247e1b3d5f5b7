/*
 * `hookd tokens create|list|revoke`: account-scoped API tokens through the
 * admin API. The secret is printed once, by create.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/ops_cli.h"

enum { O_ACCOUNT = 1, O_SCOPE, O_TTL, O_EXPIRES_AT, O_DESCRIPTION, O_LIMIT, O_CURSOR, O_JSON };

static const struct option token_options[] = {
    {"account", required_argument, NULL, O_ACCOUNT},         {"scope", required_argument, NULL, O_SCOPE},
    {"ttl", required_argument, NULL, O_TTL},                 {"expires-at", required_argument, NULL, O_EXPIRES_AT},
    {"description", required_argument, NULL, O_DESCRIPTION}, {"limit", required_argument, NULL, O_LIMIT},
    {"cursor", required_argument, NULL, O_CURSOR},           {"json", no_argument, NULL, O_JSON},
    {NULL, 0, NULL, 0},
};

static const char *const record_keys[] = {"id", "account", "scope", "status", "description", "created_by",
                                          "created_at", "expires_at", "revoked_at", NULL};

static int tokens_create(const struct client *c, const struct cli_args *a)
{
    static const struct {
        int code;
        const char *field;
    } fields[] = {{O_ACCOUNT, "account"}, {O_SCOPE, "scope"}, {O_TTL, "ttl"}, {O_EXPIRES_AT, "expires_at"},
                  {O_DESCRIPTION, "description"}};
    json_t *body = json_object(), *answer = NULL;
    char buf[32];
    int rc;

    if (!body)
        return CLI_EXIT_USAGE;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (a->opt[fields[i].code])
            json_object_set_new(body, fields[i].field, json_string(a->opt[fields[i].code]));
    if (a->opt[O_JSON]) {
        rc = client_call(c, "POST", "/v1/tokens", body, NULL);
    } else if ((rc = ops_call_json(c, "POST", "/v1/tokens", body, &answer)) == CLI_EXIT_OK) {
        ops_record(answer, record_keys);
        printf("%-14s %s\n", "token", ops_text(answer, "token", buf));
        printf("(the token is shown this once: hookd keeps only its hash)\n");
    }
    json_decref(answer);
    json_decref(body);
    return rc;
}

static int tokens_list(const struct client *c, const struct cli_args *a)
{
    static const char *const columns[] = {"ID", "ACCOUNT", "SCOPE", "STATUS", "EXPIRES", "DESCRIPTION"};
    static const char *const keys[] = {"id", "account", "scope", "status", "expires_at", "description"};
    char path[2048] = "/v1/tokens";
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

static int tokens_revoke(const struct client *c, const struct cli_args *a)
{
    char path[512] = "/v1/tokens", buf[32];
    json_t *answer;
    int rc;

    if (!cli_path_segment(path, sizeof path, a->pos[0])) {
        fprintf(stderr, "hookd: id too long\n");
        return CLI_EXIT_USAGE;
    }
    if (a->opt[O_JSON])
        return client_call(c, "DELETE", path, NULL, NULL);
    if ((rc = ops_call_json(c, "DELETE", path, NULL, &answer)) == CLI_EXIT_OK) {
        printf("revoked %s\n", ops_text(answer, "id", buf));
        json_decref(answer);
    }
    return rc;
}

static const struct cli_subcommand token_commands[] = {
    {"create", tokens_create,
     CLI_OPT(O_ACCOUNT) | CLI_OPT(O_SCOPE) | CLI_OPT(O_TTL) | CLI_OPT(O_EXPIRES_AT) | CLI_OPT(O_DESCRIPTION) |
         CLI_OPT(O_JSON),
     0, "create --account A [--scope read|read_replay] (--ttl 30d | --expires-at TIME) [--description D] [--json]"},
    {"list", tokens_list, CLI_OPT(O_ACCOUNT) | CLI_OPT(O_LIMIT) | CLI_OPT(O_CURSOR) | CLI_OPT(O_JSON), 0,
     "list [--account A] [--limit N] [--cursor C] [--json]"},
    {"revoke", tokens_revoke, CLI_OPT(O_JSON), 1, "revoke ID [--json]"},
};

int cmd_tokens(int argc, char **argv)
{
    return cli_dispatch("tokens", token_commands, sizeof token_commands / sizeof token_commands[0], token_options,
                        argc, argv);
}
