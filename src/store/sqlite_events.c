/*
 * SQLite backend, events: hookd_outbox inserts with idempotency keys, reads
 * and lists, and the relay's view of it (undispatched rows, oldest first).
 */
#include "store/sqlite_internal.h"

#include <stdlib.h>
#include <string.h>

/* Statement slots, in this family's range (sqlite_internal.h). */
enum {
    SQ_EVENT_INSERT = SQ_EVENTS,
    SQ_EVENT_BY_ID,
    SQ_EVENT_BY_KEY,
    SQ_OUTBOX_FETCH,
    SQ_OUTBOX_MARK,
    SQ_OUTBOX_PENDING,
    SQ_OUTBOX_REJECT,
    SQ_EVENT_LIST,
    SQ_EVENT_LIST_LAST = SQ_EVENT_LIST + EV_F_COMBINATIONS - 1,
    SQ_EVENTS_END
};
_Static_assert((int)SQ_EVENTS_END <= (int)SQ_ENDPOINTS, "the events statements overflow their slots");

/* One event by its id, or (by_key) by its idempotency key. */
static int event_lookup(struct store *s, bool by_key, const char *key, struct event *out)
{
    static const char *const sql[] = {
        "SELECT " STORE_EVENT_COLUMNS " FROM hookd_outbox o WHERE o.id = ?1",
        "SELECT " STORE_EVENT_COLUMNS " FROM hookd_outbox o WHERE o.idempotency_key = ?1",
    };
    sqlite3_stmt *st;
    int result = sq_stmt(s, by_key ? SQ_EVENT_BY_KEY : SQ_EVENT_BY_ID, sql[by_key], &st);

    if (result)
        return result;
    sq_bind_text(st, 1, key);
    return sq_row_read(s, st, store_read_event, out);
}

static int sqlite_event_get(struct store *s, const char *id, struct event *out)
{
    return event_lookup(s, false, id, out);
}

static int sqlite_event_insert(struct store *s, struct event *ev, struct event *existing)
{
    struct store_value v[STORE_EVENT_NVALUES];
    sqlite3_stmt *st;
    int64_t seq = 0;
    int rc, result;

    if (!ev->type)
        return HOOKD_EINVAL;
    result = sq_stmt(s, SQ_EVENT_INSERT,
                     "INSERT INTO hookd_outbox(" STORE_EVENT_INSERT_COLUMNS ")"
                     " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
                     " ON CONFLICT DO NOTHING RETURNING seq",
                     &st);
    if (result)
        return result;
    store_event_values(ev, v);
    sq_bind_values(st, v, STORE_EVENT_NVALUES);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        seq = sqlite3_column_int64(st, 0);
        rc = sqlite3_step(st);
    }
    if (rc != SQLITE_DONE) {
        result = sq_error(s, rc);
    } else if (seq == 0) {
        /* DO NOTHING fired: the id or the idempotency key is taken. */
        sq_reset(st);
        return store_event_conflict(s, ev, existing, event_lookup);
    }
    sq_reset(st);
    if (result == 0)
        ev->seq = seq;
    return result;
}

/* Newest first; the created_at range is since <= created_at < until. */
static int sqlite_event_list(struct store *s, const struct event_filter *f, struct event_list *out)
{
    char terms[FILTER_SQL_MAX];
    struct store_sql q = {.len = 0};
    sqlite3_stmt *st;
    int mask = event_filter_mask(f);
    int limit = store_list_limit(f->limit), result;

    out->items = NULL;
    out->n = 0;
    store_sql_add(&q, "SELECT " STORE_EVENT_COLUMNS " FROM hookd_outbox o WHERE o.seq < ?5");
    event_filter_sql(mask, '?', terms);
    store_sql_add(&q, terms);
    store_sql_add(&q, " ORDER BY o.seq DESC LIMIT ?6");
    result = sq_stmt(s, SQ_EVENT_LIST + mask, q.text, &st);
    if (result)
        return result;
    if (mask & EV_F_TYPE)
        sq_bind_text(st, 1, f->type);
    if (mask & EV_F_ACCOUNT)
        sq_bind_text(st, 2, f->account);
    if (mask & EV_F_SINCE)
        sqlite3_bind_int64(st, 3, f->since);
    if (mask & EV_F_UNTIL)
        sqlite3_bind_int64(st, 4, f->until);
    sqlite3_bind_int64(st, 5, f->before_seq > 0 ? f->before_seq : INT64_MAX);
    sqlite3_bind_int(st, 6, limit);
    return sq_rows_read(s, st, (size_t)limit, store_read_event, STORE_ROWS(out, store_free_event));
}

static int sqlite_outbox_fetch(struct store *s, int64_t after_seq, int limit, struct event_list *out)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_OUTBOX_FETCH,
                         "SELECT " STORE_EVENT_COLUMNS " FROM hookd_outbox o"
                         " WHERE o.dispatched_at IS NULL AND o.seq > ?2 ORDER BY o.seq LIMIT ?1",
                         &st);

    out->items = NULL;
    out->n = 0;
    if (result)
        return result;
    limit = store_list_limit(limit);
    sqlite3_bind_int(st, 1, limit);
    sqlite3_bind_int64(st, 2, after_seq);
    return sq_rows_read(s, st, (size_t)limit, store_read_event, STORE_ROWS(out, store_free_event));
}

static int sqlite_outbox_mark_dispatched(struct store *s, const int64_t *seqs, size_t n, int64_t at)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_OUTBOX_MARK, "UPDATE hookd_outbox SET dispatched_at = ?1 WHERE seq = ?2", &st);

    if (result || n == 0)
        return result;
    result = sq_atomic_begin(s);
    if (result)
        return result;
    for (size_t i = 0; i < n && result == 0; i++) {
        sqlite3_bind_int64(st, 1, at);
        sqlite3_bind_int64(st, 2, seqs[i]);
        result = sq_run(s, st, NULL);
    }
    return sq_atomic_end(s, result);
}

/* fetch, mark and endpoint_version under one method savepoint (SQLite has one writer: nothing to skip). */
static int sqlite_outbox_take(struct store *s, int limit, int64_t at, struct event_list *out,
                              int64_t *endpoints_version)
{
    int64_t *seqs = NULL, version = 0;
    int result;

    out->items = NULL;
    out->n = 0;
    result = sq_atomic_begin(s);
    if (result)
        return result;
    result = sqlite_outbox_fetch(s, 0, limit, out);
    if (result == 0 && out->n > 0) {
        seqs = malloc(out->n * sizeof *seqs);
        result = seqs ? 0 : HOOKD_ENOMEM;
        for (size_t i = 0; result == 0 && i < out->n; i++)
            seqs[i] = out->items[i].seq;
        if (result == 0)
            result = sqlite_outbox_mark_dispatched(s, seqs, out->n, at);
        if (result == 0)
            result = sqlite_endpoint_ops.version(s, &version);
        free(seqs);
    }
    result = sq_atomic_end(s, result);
    if (result)
        event_list_free(out);
    else if (out->n > 0)
        *endpoints_version = version;
    return result;
}

/* Called every few milliseconds: one probe of the partial index, no table read. */
static int sqlite_outbox_pending(struct store *s, bool *any)
{
    sqlite3_stmt *st;
    int64_t one = 0;
    int result = sq_stmt(s, SQ_OUTBOX_PENDING, "SELECT 1 FROM hookd_outbox WHERE dispatched_at IS NULL LIMIT 1", &st);

    if (result == 0)
        result = sq_get_i64(s, st, &one);
    *any = result == 0;
    return result == HOOKD_ENOTFOUND ? 0 : result;
}

static int sqlite_outbox_reject(struct store *s, int64_t seq, const char *error, int64_t at)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_OUTBOX_REJECT,
                         "UPDATE hookd_outbox SET error = ?1, dispatched_at = coalesce(dispatched_at, ?2) WHERE seq = ?3",
                         &st);

    if (result)
        return result;
    sq_bind_text(st, 1, error);
    sqlite3_bind_int64(st, 2, at);
    sqlite3_bind_int64(st, 3, seq);
    return sq_run(s, st, NULL);
}

const struct store_event_ops sqlite_event_ops = {
    .insert = sqlite_event_insert,
    .get = sqlite_event_get,
    .list = sqlite_event_list,
    .fetch = sqlite_outbox_fetch,
    .mark_dispatched = sqlite_outbox_mark_dispatched,
    .pending = sqlite_outbox_pending,
    .take = sqlite_outbox_take,
    .reject = sqlite_outbox_reject,
};
