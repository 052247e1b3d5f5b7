/*
 * PostgreSQL backend, account tokens: insert, read, revoke, and the active
 * set and version counter every node's auth cache reloads from. Only hashes
 * are stored.
 */
#include "store/postgres_internal.h"

#include <string.h>

/* Statement slots, in this family's range (postgres_internal.h). */
enum {
    PG_TOKEN_INSERT = PG_TOKENS,
    PG_TOKEN_GET,
    PG_TOKEN_LIST,
    PG_TOKEN_LIST_ACCOUNT,
    PG_TOKEN_ACTIVE,
    PG_TOKEN_REVOKE,
    PG_TOKEN_VERSION,
    PG_TOKENS_END
};
_Static_assert((int)PG_TOKENS_END <= (int)PG_OPS, "the tokens statements overflow their slots");

static int postgres_token_insert(struct store *s, const struct api_token *t)
{
    struct pg_params p = {.n = 0};

    pg_param_text(&p, 1, t->id);
    pg_param_text(&p, 2, t->account);
    pg_param_text(&p, 3, token_scope_name(t->scope));
    pg_param_text(&p, 4, t->hash);
    pg_param_text(&p, 5, t->description);
    pg_param_text(&p, 6, t->created_by ? t->created_by : "admin");
    pg_param_i64(&p, 7, t->created_at);
    pg_param_i64(&p, 8, t->expires_at);
    pg_param_time(&p, 9, t->revoked_at);
    return pg_run_command(s, PG_TOKEN_INSERT,
                          "INSERT INTO hookd_tokens(id, account, scope, token_hash, description, created_by, created_at,"
                          " expires_at, revoked_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                          &p, NULL);
}

#define TOKEN_SELECT "SELECT " STORE_TOKEN_COLUMNS " FROM hookd_tokens"

static int postgres_token_get(struct store *s, const char *id, struct api_token *out)
{
    return pg_get_by_id(s, PG_TOKEN_GET, PG_BY_ID_SQL(TOKEN_SELECT, "id"), id, store_read_token, out, sizeof *out);
}

static int postgres_token_list(struct store *s, const struct token_filter *f, struct token_list *out)
{
    return pg_list_newest(s, PG_TOKEN_LIST, PG_NEWEST_SQL(TOKEN_SELECT, "id"), PG_TOKEN_LIST_ACCOUNT,
                          PG_NEWEST_OF_SQL(TOKEN_SELECT, "id", "account"), f->before_id, f->account, f->limit,
                          store_read_token, STORE_ROWS(out, store_free_token));
}

static int postgres_token_list_active(struct store *s, int64_t now, struct token_list *out)
{
    struct pg_params p = {.n = 0};

    out->items = NULL;
    out->n = 0;
    pg_param_i64(&p, 1, now);
    pg_param_int(&p, 2, STORE_TOKENS_MAX);
    return pg_list(s, PG_TOKEN_ACTIVE,
                   "SELECT " STORE_TOKEN_COLUMNS " FROM hookd_tokens WHERE revoked_at IS NULL AND expires_at > $1"
                   " ORDER BY id LIMIT $2",
                   &p, store_read_token, STORE_ROWS(out, store_free_token));
}

static int postgres_token_revoke(struct store *s, const char *id, int64_t at)
{
    struct pg_params p = {.n = 0};
    PGresult *res;
    int result;

    pg_param_text(&p, 1, id);
    pg_param_i64(&p, 2, at);
    /* Revoked now, or why not: absent (no row) or revoked already (a row, not updated). */
    result = pg_run(s, PG_TOKEN_REVOKE,
                    "WITH u AS (UPDATE hookd_tokens SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL"
                    "  RETURNING id)"
                    " SELECT (SELECT count(*) FROM u), (SELECT count(*) FROM hookd_tokens WHERE id = $1)",
                    &p, &res);
    if (result)
        return result;
    if (PQntuples(res) < 1 || pg_col_i64(res, 0, 1) == 0)
        result = HOOKD_ENOTFOUND;
    else if (pg_col_i64(res, 0, 0) == 0)
        result = HOOKD_ECONFLICT;
    PQclear(res);
    return result;
}

/* Bumped by a trigger on every statement that writes hookd_tokens; it moves only at commit. */
static int postgres_token_version(struct store *s, int64_t *version)
{
    return pg_meta_counter(s, PG_TOKEN_VERSION, PG_META_COUNTER_SQL("tokens_version"), version);
}

const struct store_token_ops postgres_token_ops = {
    .insert = postgres_token_insert,
    .get = postgres_token_get,
    .list = postgres_token_list,
    .list_active = postgres_token_list_active,
    .revoke = postgres_token_revoke,
    .version = postgres_token_version,
};
