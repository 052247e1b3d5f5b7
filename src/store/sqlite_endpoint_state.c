/*
 * SQLite backend, per-endpoint delivery state (hookd_endpoint_state): the
 * breaker and auto-disable after attempts (the decision is store_common.c's),
 * one endpoint's state for the API, and its reset. The claims read and update
 * the same rows (sqlite_deliveries.c).
 */
#include "store/sqlite_internal.h"

#include <stdlib.h>
#include <string.h>

#include "core/ids.h"
#include "store/health_sql.h"

enum {
    SQ_STATE_GET = SQ_ENDPOINT_STATE,
    SQ_STATE_SUCCEEDED,
    SQ_STATE_PUT,
    SQ_STATE_DISABLE,
    SQ_STATE_RESET,
    SQ_STATE_EXPIRE_PAUSED,
    SQ_ENDPOINT_STATE_END
};
_Static_assert((int)SQ_ENDPOINT_STATE_END <= (int)SQ_SOURCES, "the endpoint state statements overflow their slots");

static double rnd01(void)
{
    uint64_t r;

    random_bytes(&r, sizeof r);
    return (double)(r >> 11) * 0x1.0p-53;
}

static int sqlite_state_get(struct store *s, const char *endpoint_id, struct endpoint_state *out)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_STATE_GET,
                         "SELECT " STORE_ENDPOINT_STATE_COLUMNS " FROM hookd_endpoint_state WHERE endpoint_id = ?1", &st);

    if (result)
        return result;
    sq_bind_text(st, 1, endpoint_id);
    return sq_row_read(s, st, store_read_endpoint_state, out);
}

static int sqlite_state_get_many(struct store *s, const char *const *endpoint_ids, size_t n,
                                 struct endpoint_state *out)
{
    int result = 0;

    for (size_t i = 0; i < n && result == 0; i++) {
        result = sqlite_state_get(s, endpoint_ids[i], &out[i]);
        if (result == HOOKD_ENOTFOUND) {
            endpoint_state_default(&out[i], endpoint_ids[i]);
            result = 0;
        }
    }
    return result;
}

/* Successes alone on an endpoint that is closed and has not failed change nothing: no write at all. */
static int state_succeeded(struct store *s, const char *endpoint_id, int64_t now)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_STATE_SUCCEEDED,
                         "UPDATE hookd_endpoint_state SET closed_at = CASE WHEN breaker <> 'closed' THEN ?2"
                         " ELSE closed_at END, breaker = 'closed', consecutive_failures = 0, failing_since = NULL,"
                         " opened_at = NULL, next_probe_at = NULL, probe_until = NULL, probe_interval_ms = 0"
                         " WHERE endpoint_id = ?1 AND (breaker <> 'closed' OR consecutive_failures > 0"
                         " OR failing_since IS NOT NULL)",
                         &st);

    if (result)
        return result;
    sq_bind_text(st, 1, endpoint_id);
    sqlite3_bind_int64(st, 2, now);
    return sq_run(s, st, NULL);
}

static int state_put(struct store *s, const struct endpoint_state *e)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_STATE_PUT,
                         "INSERT INTO hookd_endpoint_state(" STORE_ENDPOINT_STATE_COLUMNS ")"
                         " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) ON CONFLICT (endpoint_id) DO UPDATE"
                         " SET breaker = excluded.breaker, consecutive_failures = excluded.consecutive_failures,"
                         " opened_at = excluded.opened_at, next_probe_at = excluded.next_probe_at,"
                         " probe_interval_ms = excluded.probe_interval_ms, probe_until = excluded.probe_until,"
                         " closed_at = excluded.closed_at, failing_since = excluded.failing_since",
                         &st);

    if (result)
        return result;
    sq_bind_text(st, 1, e->endpoint_id);
    sq_bind_text(st, 2, breaker_name(e->breaker));
    sqlite3_bind_int(st, 3, e->consecutive_failures);
    sq_bind_time(st, 4, e->opened_at);
    sq_bind_time(st, 5, e->next_probe_at);
    sqlite3_bind_int64(st, 6, e->probe_interval_ms);
    sq_bind_time(st, 7, e->probe_until);
    sq_bind_time(st, 8, e->closed_at);
    sq_bind_time(st, 9, e->failing_since);
    if (e->tokens_at)
        sqlite3_bind_int64(st, 10, e->tokens_milli);
    sq_bind_time(st, 11, e->tokens_at);
    return sq_run(s, st, NULL);
}

/* Disables an enabled endpoint; *done tells whether it was enabled. */
static int endpoint_disable(struct store *s, const char *endpoint_id, const char *reason, int64_t now, bool *done)
{
    sqlite3_stmt *st;
    int changes = 0, result = sq_stmt(s, SQ_STATE_DISABLE,
                                      "UPDATE hookd_endpoints SET enabled = 0, disabled_reason = ?2, updated_at = ?3,"
                                      " disabled_at = COALESCE(disabled_at, ?3) WHERE id = ?1 AND enabled",
                                      &st);

    if (result)
        return result;
    sq_bind_text(st, 1, endpoint_id);
    sq_bind_text(st, 2, reason);
    sqlite3_bind_int64(st, 3, now);
    result = sq_run(s, st, &changes);
    *done = result == 0 && changes > 0;
    return result;
}

static int record_one(struct store *s, struct endpoint_outcome *o, const struct breaker_policy *p, int64_t now)
{
    struct endpoint_state st;
    char reason[ENDPOINT_DISABLE_REASON_MAX];
    int result;

    o->opened = o->disabled = false;
    if (o->failures <= 0)
        return o->succeeded ? state_succeeded(s, o->endpoint_id, now) : 0;
    result = sqlite_state_get(s, o->endpoint_id, &st);
    if (result == HOOKD_ENOTFOUND) {
        endpoint_state_default(&st, o->endpoint_id);
        result = 0;
    }
    if (result)
        return result;
    endpoint_state_apply(&st, o, p, now, rnd01());
    result = state_put(s, &st);
    if (result == 0 && endpoint_state_disable_due(&st, p, now, reason))
        result = endpoint_disable(s, o->endpoint_id, reason, now, &o->disabled);
    return result;
}

/* SQLite has one writer: reading a row and writing it back needs no lock of its own. */
static int sqlite_state_record(struct store *s, struct endpoint_outcome *o, size_t n, const struct breaker_policy *p,
                               int64_t now)
{
    int result = sq_atomic_begin(s);

    if (result)
        return result;
    for (size_t i = 0; i < n && result == 0; i++)
        result = record_one(s, &o[i], p, now);
    return sq_atomic_end(s, result);
}

static int sqlite_state_reset(struct store *s, const char *endpoint_id)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_STATE_RESET, "DELETE FROM hookd_endpoint_state WHERE endpoint_id = ?1", &st);

    if (result)
        return result;
    sq_bind_text(st, 1, endpoint_id);
    return sq_run(s, st, NULL);
}

static int sqlite_state_expire_paused(struct store *s, int64_t now, int64_t window_ms, int64_t *n)
{
    sqlite3_stmt *st;
    int changes = 0;
    int result = sq_stmt(s, SQ_STATE_EXPIRE_PAUSED,
                         "UPDATE hookd_deliveries AS d INDEXED BY hookd_deliveries_endpoint_status"
                         STORE_EXPIRE_PAUSED_SET " WHERE"
                         STORE_EXPIRE_PAUSED_WHERE("d", "?1", "?2", HEALTH_STATUS_OR("d."),
                                                   "IN (" STORE_PAUSED_ENDPOINTS ")"),
                         &st);

    if (n != NULL)
        *n = 0;
    if (result)
        return result;
    sqlite3_bind_int64(st, 1, now);
    sqlite3_bind_int64(st, 2, window_ms);
    result = sq_run(s, st, &changes);
    if (result == 0 && n != NULL)
        *n = changes;
    return result;
}

const struct store_endpoint_state_ops sqlite_endpoint_state_ops = {
    .record = sqlite_state_record,
    .get = sqlite_state_get,
    .get_many = sqlite_state_get_many,
    .reset = sqlite_state_reset,
    .expire_paused = sqlite_state_expire_paused,
};
