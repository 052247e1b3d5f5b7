/*
 * `hookd tokens create|list|revoke`: account-scoped API tokens through the
 * admin API, shown by the CLI output rules (design §12 "CLI output"). The
 * secret is printed once, by create (with --portal, as the portal's link).
 */
#include <stdio.h>

#include "cli/cli.h"
#include "cli/client.h"

enum { O_ACCOUNT = 1, O_SCOPE, O_TTL, O_EXPIRES_AT, O_DESCRIPTION, O_LIMIT, O_CURSOR, O_PORTAL };

static const struct option token_options[] = {
    {"account", required_argument, NULL, O_ACCOUNT},         {"scope", required_argument, NULL, O_SCOPE},
    {"ttl", required_argument, NULL, O_TTL},                 {"expires-at", required_argument, NULL, O_EXPIRES_AT},
    {"description", required_argument, NULL, O_DESCRIPTION}, {"limit", required_argument, NULL, O_LIMIT},
    {"cursor", required_argument, NULL, O_CURSOR},           {"portal", no_argument, NULL, O_PORTAL},
    {NULL, 0, NULL, 0},
};

static const struct out_column token_columns[] = {
    {"ID", "id", NULL},
    {"ACCOUNT", "account", NULL},
    {"SCOPE", "scope", NULL},
    {"STATUS", "status", out_fmt_status},
    {"CREATED", "created_at", out_fmt_time},
    {"EXPIRES", "expires_at", out_fmt_time},
    {"DESCRIPTION", "description", NULL},
    OUT_COLUMNS_END,
};

/* The record, the token among its lines (this once), and a reminder on stderr. */
static void created_view(const struct out *o, FILE *f, const json_t *answer, const void *arg)
{
    (void)arg;
    out_record(o, f, answer, NULL);
    fprintf(stderr, "(the token is shown this once: hookd keeps only its hash)\n");
}

/*
 * --portal: the portal's link alone on stdout (one line a script can take), what it opens on stderr.
 * The link is the server's portal_url: its configured base and a base64url token, visible ASCII only.
 */
static void portal_view(const struct out *o, FILE *f, const json_t *answer, const void *arg)
{
    const char *link = json_string_value(json_object_get(answer, "portal_url"));
    struct out_cell id, account, scope, expires;

    (void)o;
    (void)arg;
    for (const char *p = link; p && *p; p++) {
        if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f) {
            link = NULL;
            break;
        }
    }
    if (!link) {
        fprintf(stderr, "hookd: the answer has no portal_url (is the server older than the portal?); "
                        "the token was created: %s\n", out_word(answer, "id", &id));
        return;
    }
    fprintf(f, "%s\n", link);
    fprintf(stderr,
            "(the portal of account %s, scope %s, until %s: anyone with the link sees it; "
            "hookd tokens revoke %s ends it)\n",
            out_word(answer, "account", &account), out_word(answer, "scope", &scope),
            out_word(answer, "expires_at", &expires), out_word(answer, "id", &id));
}

/* "revoked tok_…" */
static void revoked_view(const struct out *o, FILE *f, const json_t *answer, const void *arg)
{
    struct out_cell id, status;

    (void)o;
    (void)arg;
    fprintf(f, "revoked %s: %s\n", out_word(answer, "id", &id), out_word(answer, "status", &status));
}

static int tokens_create(const struct client *c, const struct cli_args *a)
{
    static const struct {
        int code;
        const char *field;
    } fields[] = {{O_ACCOUNT, "account"}, {O_SCOPE, "scope"}, {O_TTL, "ttl"}, {O_EXPIRES_AT, "expires_at"},
                  {O_DESCRIPTION, "description"}};
    json_t *body = json_object();
    int rc;

    if (!body)
        return CLI_EXIT_USAGE;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (a->opt[fields[i].code])
            json_object_set_new(body, fields[i].field, json_string(a->opt[fields[i].code]));
    rc = cli_show(c, a, "POST", "/v1/tokens", body, NULL, a->opt[O_PORTAL] ? portal_view : created_view, NULL);
    json_decref(body);
    return rc;
}

static int tokens_list(const struct client *c, const struct cli_args *a)
{
    static const struct cli_query_param params[] = {{O_ACCOUNT, "account"}, {O_LIMIT, "limit"}, {O_CURSOR, "cursor"}};
    char path[2048];

    if (!cli_list_path(path, sizeof path, "/v1/tokens", params, sizeof params / sizeof params[0], O_LIMIT, a))
        return CLI_EXIT_USAGE;
    return cli_show(c, a, "GET", path, NULL, NULL, out_view_list, token_columns);
}

static int tokens_revoke(const struct client *c, const struct cli_args *a)
{
    char path[512];

    if (!cli_item_path(path, sizeof path, "/v1/tokens", a->pos[0], NULL))
        return CLI_EXIT_USAGE;
    return cli_show(c, a, "DELETE", path, NULL, NULL, revoked_view, NULL);
}

static const struct cli_subcommand token_commands[] = {
    {"create", tokens_create,
     CLI_OPT(O_ACCOUNT) | CLI_OPT(O_SCOPE) | CLI_OPT(O_TTL) | CLI_OPT(O_EXPIRES_AT) | CLI_OPT(O_DESCRIPTION) |
         CLI_OPT(O_PORTAL),
     0, "create --account A [--scope read|read_replay] (--ttl 30d | --expires-at TIME) [--description D] [--portal]"},
    {"list", tokens_list, CLI_OPT(O_ACCOUNT) | CLI_OPT(O_LIMIT) | CLI_OPT(O_CURSOR) | CLI_WATCH, 0,
     "list [--account A] [--limit N] [--cursor C]"},
    {"revoke", tokens_revoke, 0, 1, "revoke ID"},
};

int cmd_tokens(int argc, char **argv)
{
    return cli_dispatch("tokens", token_commands, sizeof token_commands / sizeof token_commands[0], token_options,
                        argc, argv);
}
