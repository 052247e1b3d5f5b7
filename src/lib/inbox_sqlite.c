/*
 * hookd_inbox_work() on the caller's SQLite connection: the statements of
 * lib/inbox.c's loop. SQLite has one writer per file, so the claim is one
 * statement and each item's transaction (BEGIN IMMEDIATE) holds the write
 * lock from its lease check to its COMMIT.
 */
#include "lib/inbox_lib.h"

#include <stdlib.h>
#include <string.h>

#include "store/inbox_sql.h"

#define ITEM_COLUMNS                                                                                         \
    "id, source, event_id, event_type, entity_kind, entity_id, version, payload, attempts, lease_token,"     \
    " received_at, deferred_at"

/* Prepares sql, or fills *result from the connection's error. */
static sqlite3_stmt *prepare(sqlite3 *db, const char *sql, int *result)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);

    *result = rc == SQLITE_OK ? 0 : lib_sqlite_error(db, rc);
    return st;
}

static int exec_sql(sqlite3 *db, const char *sql)
{
    int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : lib_sqlite_error(db, rc);
}

/* A text column on the heap (NULL for SQL NULL); false when out of memory. */
static bool column_dup(sqlite3_stmt *st, int col, char **out, size_t *len)
{
    const unsigned char *text = sqlite3_column_text(st, col);
    size_t n = (size_t)sqlite3_column_bytes(st, col);

    *out = NULL;
    if (len)
        *len = n;
    if (!text)
        return sqlite3_column_type(st, col) == SQLITE_NULL;
    if (!(*out = malloc(n + 1)))
        return false;
    memcpy(*out, text, n);
    (*out)[n] = '\0';
    return true;
}

static int sqlite_source_definition(void *conn, const char *name, char **out)
{
    sqlite3 *db = conn;
    int result, rc;
    sqlite3_stmt *st = prepare(db, "SELECT definition FROM hookd_sources WHERE name = ?1", &result);

    *out = NULL;
    if (result)
        return result;
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        result = column_dup(st, 0, out, NULL) && *out ? 0 : HOOKD_ENOMEM;
    else
        result = rc == SQLITE_DONE ? HOOKD_ENOTFOUND : lib_sqlite_error(db, rc);
    sqlite3_finalize(st);
    return result;
}

static int sqlite_idle(void *conn) { return sqlite3_get_autocommit(conn) ? 0 : HOOKD_EINVAL; }

static int sqlite_claim(void *conn, const char *source, const char *owner, int64_t now, int64_t lease_until,
                        int limit, struct lib_batch *out)
{
    sqlite3 *db = conn;
    int result, rc;
    sqlite3_stmt *st = prepare(db,
                               "UPDATE hookd_inbox SET lease_owner = ?1, lease_until = ?3, lease_token = lease_token + 1"
                               " WHERE id IN (SELECT i.id FROM hookd_inbox i WHERE i.source = ?5"
                               "  AND " INBOX_CLAIMABLE("?2") " ORDER BY i.next_attempt_at, i.id LIMIT ?4)"
                               " RETURNING " ITEM_COLUMNS,
                               &result);

    out->n = 0;
    if (result)
        return result;
    sqlite3_bind_text(st, 1, owner, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, now);
    sqlite3_bind_int64(st, 3, lease_until);
    sqlite3_bind_int(st, 4, limit);
    sqlite3_bind_text(st, 5, source, -1, SQLITE_STATIC);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW && out->n < LIB_BATCH_MAX) {
        struct lib_item *it = &out->items[out->n++];
        memset(it, 0, sizeof *it);
        bool ok = column_dup(st, 0, &it->id, NULL) && column_dup(st, 1, &it->source, NULL) &&
                  column_dup(st, 2, &it->event_id, NULL) && column_dup(st, 3, &it->event_type, NULL) &&
                  column_dup(st, 4, &it->entity_kind, NULL) && column_dup(st, 5, &it->entity_id, NULL) &&
                  column_dup(st, 7, &it->payload, &it->payload_len);
        it->has_version = sqlite3_column_type(st, 6) != SQLITE_NULL;
        it->version = sqlite3_column_int64(st, 6);
        it->attempts = sqlite3_column_int(st, 8);
        it->lease_token = sqlite3_column_int64(st, 9);
        it->received_at = sqlite3_column_int64(st, 10);
        it->deferred_at = sqlite3_column_int64(st, 11);
        if (!ok || !it->id || !it->source || !it->event_id || !it->payload) {
            rc = SQLITE_NOMEM; /* the claim commits; the items not kept here wait out their leases */
            break;
        }
    }
    result = rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : lib_sqlite_error(db, rc);
    sqlite3_finalize(st); /* finishes the UPDATE when it stopped at the row limit */
    return result;
}

static int sqlite_begin(void *conn, const struct lib_item *it, const char *owner)
{
    sqlite3 *db = conn;
    sqlite3_stmt *st;
    int result = exec_sql(db, "BEGIN IMMEDIATE"), rc;

    if (result)
        return result;
    st = prepare(db,
                 "SELECT 1 FROM hookd_inbox WHERE id = ?1 AND lease_owner = ?2 AND lease_token = ?3"
                 " AND status IN ('pending', 'deferred')",
                 &result);
    if (result == 0) {
        sqlite3_bind_text(st, 1, it->id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, owner, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, it->lease_token);
        rc = sqlite3_step(st);
        result = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? HOOKD_ESTALE : lib_sqlite_error(db, rc);
    }
    sqlite3_finalize(st);
    if (result)
        (void)exec_sql(db, "ROLLBACK");
    return result;
}

/* SQLite keeps a transaction open across a failed statement (or rolls it back itself: then it is ended). */
static int sqlite_usable(void *conn) { return sqlite3_get_autocommit(conn) ? HOOKD_EINVAL : 0; }

static int sqlite_write(void *conn, const struct lib_item *it, const char *owner, const struct lib_step *s,
                        int64_t now)
{
    sqlite3 *db = conn;
    int result, rc;
    bool open = strcmp(s->status, "pending") == 0 || strcmp(s->status, "deferred") == 0;
    sqlite3_stmt *st = prepare(db,
                               "UPDATE hookd_inbox SET status = ?4, attempts = ?5, next_attempt_at = ?6, result = ?7,"
                               " error = ?8, processed_at = CASE WHEN ?4 = 'processed' THEN ?9 ELSE processed_at END,"
                               " deferred_at = CASE WHEN ?4 = 'deferred' THEN COALESCE(deferred_at, ?9) END,"
                               " lease_owner = NULL, lease_until = NULL"
                               " WHERE id = ?1 AND lease_owner = ?2 AND lease_token = ?3",
                               &result);

    if (result)
        return result;
    sqlite3_bind_text(st, 1, it->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, owner, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, it->lease_token);
    sqlite3_bind_text(st, 4, s->status, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 5, s->attempts);
    if (open)
        sqlite3_bind_int64(st, 6, s->next_attempt_at);
    sqlite3_bind_text(st, 7, s->result, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 8, s->error, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 9, now);
    rc = sqlite3_step(st);
    result = rc == SQLITE_DONE ? (sqlite3_changes(db) == 1 ? 0 : HOOKD_ESTALE) : lib_sqlite_error(db, rc);
    sqlite3_finalize(st);
    return result;
}

static int sqlite_commit(void *conn) { return exec_sql(conn, "COMMIT"); }

static void sqlite_rollback(void *conn)
{
    if (!sqlite3_get_autocommit(conn))
        (void)exec_sql(conn, "ROLLBACK");
}

static void sqlite_release(void *conn, const struct lib_item *it, const char *owner)
{
    int result;
    sqlite3_stmt *st = prepare(conn,
                               "UPDATE hookd_inbox SET lease_owner = NULL, lease_until = NULL"
                               " WHERE id = ?1 AND lease_owner = ?2 AND lease_token = ?3",
                               &result);

    if (result)
        return;
    sqlite3_bind_text(st, 1, it->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, owner, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, it->lease_token);
    (void)sqlite3_step(st);
    sqlite3_finalize(st);
}

const struct lib_backend lib_sqlite_backend = {
    .source_definition = sqlite_source_definition,
    .idle = sqlite_idle,
    .claim = sqlite_claim,
    .begin = sqlite_begin,
    .usable = sqlite_usable,
    .write = sqlite_write,
    .commit = sqlite_commit,
    .rollback = sqlite_rollback,
    .release = sqlite_release,
};

int hookd_inbox_work(struct sqlite3 *db, const char *source, hookd_inbox_fn fn, void *arg,
                     const struct hookd_inbox_options *opts, struct hookd_inbox_counts *counts)
{
    return lib_inbox_work(&lib_sqlite_backend, db, source, fn, arg, opts, counts);
}
