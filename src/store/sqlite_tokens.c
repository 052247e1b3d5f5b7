/*
 * SQLite backend, account tokens: insert, read, revoke, and the active set
 * and version counter the auth cache reloads from. Only hashes are stored.
 */
#include "store/sqlite_internal.h"

#include <string.h>

/* Statement slots, in this family's range (sqlite_internal.h). */
enum {
    SQ_TOKEN_INSERT = SQ_TOKENS,
    SQ_TOKEN_GET,
    SQ_TOKEN_LIST,
    SQ_TOKEN_LIST_ACCOUNT,
    SQ_TOKEN_ACTIVE,
    SQ_TOKEN_REVOKE,
    SQ_TOKEN_VERSION,
    SQ_TOKENS_END
};
_Static_assert((int)SQ_TOKENS_END <= (int)SQ_OPS, "the tokens statements overflow their slots");

static int sqlite_token_insert(struct store *s, const struct api_token *t)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_TOKEN_INSERT,
                         "INSERT INTO hookd_tokens(id, account, scope, token_hash, description, created_by, created_at,"
                         " expires_at, revoked_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                         &st);

    if (result)
        return result;
    sq_bind_text(st, 1, t->id);
    sq_bind_text(st, 2, t->account);
    sq_bind_text(st, 3, token_scope_name(t->scope));
    sq_bind_text(st, 4, t->hash);
    sq_bind_text(st, 5, t->description);
    sq_bind_text(st, 6, t->created_by ? t->created_by : "admin");
    sqlite3_bind_int64(st, 7, t->created_at);
    sqlite3_bind_int64(st, 8, t->expires_at);
    sq_bind_time(st, 9, t->revoked_at);
    return sq_run(s, st, NULL);
}

#define TOKEN_SELECT "SELECT " STORE_TOKEN_COLUMNS " FROM hookd_tokens"

static int sqlite_token_get(struct store *s, const char *id, struct api_token *out)
{
    return sq_get_by_id(s, SQ_TOKEN_GET, SQ_BY_ID_SQL(TOKEN_SELECT, "id"), id, store_read_token, out, sizeof *out);
}

static int sqlite_token_list(struct store *s, const struct token_filter *f, struct token_list *out)
{
    return sq_list_newest(s, SQ_TOKEN_LIST, SQ_NEWEST_SQL(TOKEN_SELECT, "id"), SQ_TOKEN_LIST_ACCOUNT,
                          SQ_NEWEST_OF_SQL(TOKEN_SELECT, "id", "account"), f->before_id, f->account, f->limit,
                          store_read_token, STORE_ROWS(out, store_free_token));
}

static int sqlite_token_list_active(struct store *s, int64_t now, struct token_list *out)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_TOKEN_ACTIVE,
                         "SELECT " STORE_TOKEN_COLUMNS " FROM hookd_tokens WHERE revoked_at IS NULL AND expires_at > ?1"
                         " ORDER BY id LIMIT ?2",
                         &st);

    out->items = NULL;
    out->n = 0;
    if (result)
        return result;
    sqlite3_bind_int64(st, 1, now);
    sqlite3_bind_int(st, 2, STORE_TOKENS_MAX);
    return sq_rows_read(s, st, STORE_TOKENS_MAX, store_read_token, STORE_ROWS(out, store_free_token));
}

static int sqlite_token_revoke(struct store *s, const char *id, int64_t at)
{
    sqlite3_stmt *st;
    struct api_token t;
    int changes = 0;
    int result = sq_stmt(s, SQ_TOKEN_REVOKE,
                         "UPDATE hookd_tokens SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL", &st);

    if (result)
        return result;
    sq_bind_text(st, 1, id);
    sqlite3_bind_int64(st, 2, at);
    result = sq_run(s, st, &changes);
    if (result == 0 && changes == 0) {
        result = sqlite_token_get(s, id, &t);
        api_token_free(&t);
        if (result == 0)
            result = HOOKD_ECONFLICT;
    }
    return result;
}

static int sqlite_token_version(struct store *s, int64_t *version)
{
    return sq_meta_counter(s, SQ_TOKEN_VERSION, SQ_META_COUNTER_SQL("tokens_version"), version);
}

const struct store_token_ops sqlite_token_ops = {
    .insert = sqlite_token_insert,
    .get = sqlite_token_get,
    .list = sqlite_token_list,
    .list_active = sqlite_token_list_active,
    .revoke = sqlite_token_revoke,
    .version = sqlite_token_version,
};
