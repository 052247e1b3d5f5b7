/*
 * hookd_inbox_work_pg() on the caller's libpq connection: the statements of
 * lib/inbox.c's loop. Claims take the daemon's advisory lock (the entity rule
 * holds across every claimer, store/inbox_sql.h); each item's transaction
 * locks its row with the lease check (SELECT … FOR UPDATE), so no other
 * claimer takes it while the callback runs, even past the lease.
 */
#include "lib/inbox_lib.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/inbox_sql.h"

#define ITEM_COLUMNS                                                                                         \
    "id, source, event_id, event_type, entity_kind, entity_id, version, payload, attempts, lease_token,"     \
    " received_at, deferred_at"

/* Runs sql with text parameters; *res (may be NULL) keeps the result for the caller to PQclear. */
static int run(PGconn *conn, const char *sql, int n, const char *const *values, ExecStatusType want, PGresult **res)
{
    PGresult *r = PQexecParams(conn, sql, n, NULL, values, NULL, NULL, 0);
    int result = r && PQresultStatus(r) == want ? 0 : lib_pg_error(conn, r);

    if (res && result == 0)
        *res = r;
    else
        PQclear(r);
    return result;
}

static int exec_sql(PGconn *conn, const char *sql) { return run(conn, sql, 0, NULL, PGRES_COMMAND_OK, NULL); }

/* The text of a cell on the heap (NULL for SQL NULL); false when out of memory. */
static bool cell_dup(const PGresult *r, int row, int col, char **out, size_t *len)
{
    size_t n = (size_t)PQgetlength(r, row, col);

    *out = NULL;
    if (len)
        *len = n;
    if (PQgetisnull(r, row, col))
        return true;
    if (!(*out = malloc(n + 1)))
        return false;
    memcpy(*out, PQgetvalue(r, row, col), n);
    (*out)[n] = '\0';
    return true;
}

static int64_t cell_i64(const PGresult *r, int row, int col)
{
    return PQgetisnull(r, row, col) ? 0 : strtoll(PQgetvalue(r, row, col), NULL, 10);
}

static int pg_source_definition(void *conn, const char *name, char **out)
{
    const char *values[1] = {name};
    PGresult *r = NULL;
    int result = run(conn, "SELECT definition FROM hookd_sources WHERE name = $1", 1, values, PGRES_TUPLES_OK, &r);

    *out = NULL;
    if (result == 0)
        result = PQntuples(r) == 0 ? HOOKD_ENOTFOUND : cell_dup(r, 0, 0, out, NULL) && *out ? 0 : HOOKD_ENOMEM;
    PQclear(r);
    return result;
}

static int pg_idle(void *conn)
{
    if (PQstatus(conn) != CONNECTION_OK)
        return HOOKD_EUNAVAIL;
    return PQtransactionStatus(conn) == PQTRANS_IDLE ? 0 : HOOKD_EINVAL;
}

static int pg_claim(void *conn, const char *source, const char *owner, int64_t now, int64_t lease_until, int limit,
                    struct lib_batch *out)
{
    char now_text[24], until_text[24], limit_text[16];
    const char *values[5] = {owner, now_text, until_text, limit_text, source};
    PGresult *r = NULL;
    int result;

    out->n = 0;
    snprintf(now_text, sizeof now_text, "%" PRId64, now);
    snprintf(until_text, sizeof until_text, "%" PRId64, lease_until);
    snprintf(limit_text, sizeof limit_text, "%d", limit);
    result = exec_sql(conn, "BEGIN");
    if (result == 0)
        result = run(conn, "SELECT pg_advisory_xact_lock(" INBOX_CLAIM_LOCK_KEY ")", 0, NULL, PGRES_TUPLES_OK, NULL);
    if (result == 0)
        result = run(conn,
                     "UPDATE hookd_inbox SET lease_owner = $1, lease_until = $3::bigint, lease_token = lease_token + 1"
                     " WHERE id IN (SELECT i.id FROM hookd_inbox i WHERE i.source = $5"
                     "  AND " INBOX_CLAIMABLE("$2::bigint")
                     "  ORDER BY i.next_attempt_at, i.id LIMIT $4::int FOR UPDATE SKIP LOCKED)"
                     " RETURNING " ITEM_COLUMNS,
                     5, values, PGRES_TUPLES_OK, &r);
    if (result == 0)
        result = exec_sql(conn, "COMMIT");
    else if (PQtransactionStatus(conn) != PQTRANS_IDLE)
        (void)exec_sql(conn, "ROLLBACK");
    for (int row = 0; result == 0 && row < PQntuples(r) && out->n < LIB_BATCH_MAX; row++) {
        struct lib_item *it = &out->items[out->n++];
        memset(it, 0, sizeof *it);
        bool ok = cell_dup(r, row, 0, &it->id, NULL) && cell_dup(r, row, 1, &it->source, NULL) &&
                  cell_dup(r, row, 2, &it->event_id, NULL) && cell_dup(r, row, 3, &it->event_type, NULL) &&
                  cell_dup(r, row, 4, &it->entity_kind, NULL) && cell_dup(r, row, 5, &it->entity_id, NULL) &&
                  cell_dup(r, row, 7, &it->payload, &it->payload_len);
        it->has_version = !PQgetisnull(r, row, 6);
        it->version = cell_i64(r, row, 6);
        it->attempts = (int)cell_i64(r, row, 8);
        it->lease_token = cell_i64(r, row, 9);
        it->received_at = cell_i64(r, row, 10);
        it->deferred_at = cell_i64(r, row, 11);
        if (!ok)
            result = HOOKD_ENOMEM; /* the claim committed: these items wait out their leases */
    }
    PQclear(r);
    return result;
}

static int pg_begin(void *conn, const struct lib_item *it, const char *owner)
{
    char token[24];
    const char *values[3] = {it->id, owner, token};
    PGresult *r = NULL;
    int result;

    snprintf(token, sizeof token, "%" PRId64, it->lease_token);
    result = exec_sql(conn, "BEGIN");
    if (result == 0)
        result = run(conn,
                     "SELECT 1 FROM hookd_inbox WHERE id = $1 AND lease_owner = $2 AND lease_token = $3::bigint"
                     " AND status IN ('pending', 'deferred') FOR UPDATE",
                     3, values, PGRES_TUPLES_OK, &r);
    if (result == 0 && PQntuples(r) != 1)
        result = HOOKD_ESTALE;
    PQclear(r);
    if (result && PQtransactionStatus(conn) != PQTRANS_IDLE)
        (void)exec_sql(conn, "ROLLBACK");
    return result;
}

static int pg_usable(void *conn)
{
    switch (PQtransactionStatus(conn)) {
    case PQTRANS_INTRANS:
        return 0;
    case PQTRANS_INERROR:
        return HOOKD_EIO;
    case PQTRANS_UNKNOWN:
        return HOOKD_EUNAVAIL;
    default:
        return HOOKD_EINVAL; /* idle: the callback ended it */
    }
}

static int pg_write(void *conn, const struct lib_item *it, const char *owner, const struct lib_step *s, int64_t now)
{
    char token[24], attempts[16], next[24], now_text[24];
    bool open = strcmp(s->status, "pending") == 0 || strcmp(s->status, "deferred") == 0;
    const char *values[9] = {it->id, owner, token, s->status, attempts, open ? next : NULL, s->result, s->error,
                             now_text};
    PGresult *r = NULL;
    int result;

    snprintf(token, sizeof token, "%" PRId64, it->lease_token);
    snprintf(attempts, sizeof attempts, "%d", s->attempts);
    snprintf(next, sizeof next, "%" PRId64, s->next_attempt_at);
    snprintf(now_text, sizeof now_text, "%" PRId64, now);
    result = run(conn,
                 "UPDATE hookd_inbox SET status = $4, attempts = $5::int, next_attempt_at = $6::bigint, result = $7,"
                 " error = $8, processed_at = CASE WHEN $4 = 'processed' THEN $9::bigint ELSE processed_at END,"
                 " deferred_at = CASE WHEN $4 = 'deferred' THEN COALESCE(deferred_at, $9::bigint) END,"
                 " lease_owner = NULL, lease_until = NULL"
                 " WHERE id = $1 AND lease_owner = $2 AND lease_token = $3::bigint",
                 9, values, PGRES_COMMAND_OK, &r);
    if (result == 0 && strcmp(PQcmdTuples(r), "1") != 0)
        result = HOOKD_ESTALE;
    PQclear(r);
    return result;
}

/* A COMMIT of an aborted transaction answers ROLLBACK: that is not a commit. */
static int pg_commit(void *conn)
{
    PGresult *r = NULL;
    int result = run(conn, "COMMIT", 0, NULL, PGRES_COMMAND_OK, &r);

    if (result == 0 && strcmp(PQcmdStatus(r), "COMMIT") != 0)
        result = HOOKD_EIO;
    PQclear(r);
    return result;
}

static void pg_rollback(void *conn)
{
    if (PQtransactionStatus(conn) == PQTRANS_INTRANS || PQtransactionStatus(conn) == PQTRANS_INERROR)
        (void)exec_sql(conn, "ROLLBACK");
}

static void pg_release(void *conn, const struct lib_item *it, const char *owner)
{
    char token[24];
    const char *values[3] = {it->id, owner, token};

    if (PQtransactionStatus(conn) != PQTRANS_IDLE)
        return;
    snprintf(token, sizeof token, "%" PRId64, it->lease_token);
    (void)run(conn,
              "UPDATE hookd_inbox SET lease_owner = NULL, lease_until = NULL"
              " WHERE id = $1 AND lease_owner = $2 AND lease_token = $3::bigint",
              3, values, PGRES_COMMAND_OK, NULL);
}

const struct lib_backend lib_pg_backend = {
    .source_definition = pg_source_definition,
    .idle = pg_idle,
    .claim = pg_claim,
    .begin = pg_begin,
    .usable = pg_usable,
    .write = pg_write,
    .commit = pg_commit,
    .rollback = pg_rollback,
    .release = pg_release,
};

int hookd_inbox_work_pg(struct pg_conn *conn, const char *source, hookd_inbox_fn fn, void *arg,
                        const struct hookd_inbox_options *opts, struct hookd_inbox_counts *counts)
{
    return lib_inbox_work(&lib_pg_backend, conn, source, fn, arg, opts, counts);
}
