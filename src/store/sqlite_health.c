/*
 * SQLite backend, the health figures: attempt buckets upserted with the
 * attempt results (one statement per row, prepared once; SQLite has one
 * writer), and the reads of store/health_sql.h over them and the deliveries.
 */
#include "store/sqlite_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HP(n) "?" #n
#define HEALTH_STATUS_TERM(q) HEALTH_STATUS_OR(q)
#include "store/health_sql.h"

enum {
    SQ_H_MINUTE = SQ_HEALTH,
    SQ_H_LATENCY,
    SQ_H_FAILURE,
    SQ_H_LAST,
    SQ_H_PURGE_MINUTES,
    SQ_H_PURGE_LATENCIES,
    SQ_H_PURGE_FAILURES,
    SQ_H_COUNTS,
    SQ_H_IN_FLIGHT,
    SQ_H_OLDEST_OPEN,
    SQ_H_NEXT,
    SQ_H_ACTIVITY_LAST,
    SQ_H_ACTIVITY_ERROR,
    SQ_H_WINDOW,
    SQ_H_WINDOW_LATENCY,
    SQ_H_SUMMARY_WINDOWS,
    SQ_H_SUMMARY_FAILURES,
    SQ_H_OLDEST_ALL,
    SQ_H_OLDEST_PENDING,
    SQ_H_OLDEST_RETRYING,
    SQ_H_RESOURCE_ANY,
    SQ_H_RESOURCE_ACCOUNT,
    SQ_HEALTH_END
};
_Static_assert((int)SQ_HEALTH_END <= (int)SQ_SLOTS, "the health statements overflow their slots");

#define SUMMARY_ROWS_MAX 100000 /* endpoints and failure groups one summary reads at most */

static int write_minute(struct store *s, const struct health_minute_row *m)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_H_MINUTE,
                         "INSERT INTO hookd_endpoint_minutes(endpoint_id, minute, node, attempts, successes,"
                         " retries_started, retries_ended) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
                         " ON CONFLICT (endpoint_id, minute, node) DO UPDATE SET attempts = attempts + excluded.attempts,"
                         " successes = successes + excluded.successes,"
                         " retries_started = retries_started + excluded.retries_started,"
                         " retries_ended = retries_ended + excluded.retries_ended",
                         &st);

    if (result)
        return result;
    sq_bind_text(st, 1, m->endpoint_id);
    sqlite3_bind_int64(st, 2, m->minute);
    sq_bind_text(st, 3, m->node);
    sqlite3_bind_int64(st, 4, m->attempts);
    sqlite3_bind_int64(st, 5, m->successes);
    sqlite3_bind_int64(st, 6, m->retries_started);
    sqlite3_bind_int64(st, 7, m->retries_ended);
    return sq_run(s, st, NULL);
}

static int write_latency(struct store *s, const struct health_latency_row *l)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_H_LATENCY,
                         "INSERT INTO hookd_latency_minutes(endpoint_id, minute, node, bucket, count)"
                         " VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (endpoint_id, minute, node, bucket)"
                         " DO UPDATE SET count = count + excluded.count",
                         &st);

    if (result)
        return result;
    sq_bind_text(st, 1, l->endpoint_id);
    sqlite3_bind_int64(st, 2, l->minute);
    sq_bind_text(st, 3, l->node);
    sqlite3_bind_int(st, 4, l->bucket);
    sqlite3_bind_int64(st, 5, l->count);
    return sq_run(s, st, NULL);
}

static int write_failure(struct store *s, const struct health_failure_row *f)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_H_FAILURE,
                         "INSERT INTO hookd_failure_minutes(minute, endpoint_id, account_null, account, status_code,"
                         " error_class, node, count) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
                         " ON CONFLICT (minute, endpoint_id, account_null, account, status_code, error_class, node)"
                         " DO UPDATE SET count = count + excluded.count",
                         &st);

    if (result)
        return result;
    sqlite3_bind_int64(st, 1, f->minute);
    sq_bind_text(st, 2, f->endpoint_id);
    sqlite3_bind_int(st, 3, f->account == NULL);
    sq_bind_text(st, 4, f->account ? f->account : "");
    sqlite3_bind_int(st, 5, f->status_code);
    sq_bind_text(st, 6, f->error_class);
    sq_bind_text(st, 7, f->node);
    sqlite3_bind_int64(st, 8, f->count);
    return sq_run(s, st, NULL);
}

/* The later time wins each column; an error's fields move together with its time. */
static int write_last(struct store *s, const struct health_last_row *l)
{
    sqlite3_stmt *st;
    int result = sq_stmt(
        s, SQ_H_LAST,
        "INSERT INTO hookd_endpoint_last(endpoint_id, node, last_attempt_at, last_success_at, last_error_at,"
        " last_error_status_code, last_error_class, last_error) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
        " ON CONFLICT (endpoint_id, node) DO UPDATE SET"
        " last_attempt_at = max(COALESCE(last_attempt_at, 0), excluded.last_attempt_at),"
        " last_success_at = CASE WHEN excluded.last_success_at > COALESCE(last_success_at, 0)"
        "  THEN excluded.last_success_at ELSE last_success_at END,"
        " last_error_status_code = CASE WHEN excluded.last_error_at > COALESCE(last_error_at, 0)"
        "  THEN excluded.last_error_status_code ELSE last_error_status_code END,"
        " last_error_class = CASE WHEN excluded.last_error_at > COALESCE(last_error_at, 0)"
        "  THEN excluded.last_error_class ELSE last_error_class END,"
        " last_error = CASE WHEN excluded.last_error_at > COALESCE(last_error_at, 0)"
        "  THEN excluded.last_error ELSE last_error END,"
        " last_error_at = CASE WHEN excluded.last_error_at > COALESCE(last_error_at, 0)"
        "  THEN excluded.last_error_at ELSE last_error_at END",
        &st);

    if (result)
        return result;
    sq_bind_text(st, 1, l->endpoint_id);
    sq_bind_text(st, 2, l->node);
    sqlite3_bind_int64(st, 3, l->last_attempt_at);
    sq_bind_time(st, 4, l->last_success_at);
    sq_bind_time(st, 5, l->last_error_at);
    if (l->last_error_at > 0 && l->last_error_status_code > 0)
        sqlite3_bind_int(st, 6, l->last_error_status_code);
    else
        sqlite3_bind_null(st, 6);
    sq_bind_text(st, 7, l->last_error_at > 0 ? l->last_error_class : NULL);
    sq_bind_text(st, 8, l->last_error_at > 0 && l->has_error_text ? l->last_error : NULL);
    return sq_run(s, st, NULL);
}

static int purge(struct store *s, int slot, const char *sql, int64_t before)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, slot, sql, &st);

    if (result)
        return result;
    sqlite3_bind_int64(st, 1, before);
    return sq_run(s, st, NULL);
}

static int sqlite_health_record(struct store *s, const struct health_attempt *a, size_t n, int64_t purge_before)
{
    struct health_rows r;
    int result = health_rows_build(a, n, &r);

    if (result)
        return result;
    result = sq_atomic_begin(s);
    if (result) {
        health_rows_free(&r);
        return result;
    }
    for (size_t i = 0; i < r.n_minutes && result == 0; i++)
        result = write_minute(s, &r.minutes[i]);
    for (size_t i = 0; i < r.n_latencies && result == 0; i++)
        result = write_latency(s, &r.latencies[i]);
    for (size_t i = 0; i < r.n_failures && result == 0; i++)
        result = write_failure(s, &r.failures[i]);
    for (size_t i = 0; i < r.n_lasts && result == 0; i++)
        result = write_last(s, &r.lasts[i]);
    if (result == 0 && purge_before > 0) {
        result = purge(s, SQ_H_PURGE_MINUTES, HEALTH_SQL_PURGE("hookd_endpoint_minutes"), purge_before);
        if (result == 0)
            result = purge(s, SQ_H_PURGE_LATENCIES, HEALTH_SQL_PURGE("hookd_latency_minutes"), purge_before);
        if (result == 0)
            result = purge(s, SQ_H_PURGE_FAILURES, HEALTH_SQL_PURGE("hookd_failure_minutes"), purge_before);
    }
    health_rows_free(&r);
    return sq_atomic_end(s, result);
}

/* Steps a bound statement's rows into fn(row) (two integer or text columns), then resets it. */
static int each_row(struct store *s, sqlite3_stmt *st, void (*fn)(sqlite3_stmt *st, void *arg), void *arg)
{
    int rc;

    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        fn(st, arg);
    sq_reset(st);
    return rc == SQLITE_DONE ? 0 : sq_error(s, rc);
}

static void count_row(sqlite3_stmt *st, void *arg)
{
    struct health_queue *q = arg;
    const char *status = (const char *)sqlite3_column_text(st, 0);
    int64_t n = sqlite3_column_int64(st, 1);

    if (status == NULL)
        return;
    if (strcmp(status, "pending") == 0)
        q->pending = n;
    else if (strcmp(status, "retrying") == 0)
        q->retrying = n;
    else if (strcmp(status, "dead") == 0)
        q->dead = n;
    else if (strcmp(status, "skipped") == 0)
        q->skipped = n;
}

static int sqlite_health_queue(struct store *s, const char *endpoint_id, int64_t now, struct health_queue *out)
{
    sqlite3_stmt *st;
    int rc, result;

    memset(out, 0, sizeof *out);
    result = sq_stmt(s, SQ_H_COUNTS, HEALTH_SQL_COUNTS, &st);
    if (result == 0) {
        sq_bind_text(st, 1, endpoint_id);
        result = each_row(s, st, count_row, out);
    }
    if (result == 0)
        result = sq_stmt(s, SQ_H_IN_FLIGHT,
                         "SELECT count(*) FROM hookd_deliveries WHERE endpoint_id = ?1 AND lease_owner IS NOT NULL"
                         " AND lease_until >= ?2",
                         &st);
    if (result == 0) {
        sq_bind_text(st, 1, endpoint_id);
        sqlite3_bind_int64(st, 2, now);
        result = sq_get_i64(s, st, &out->in_flight);
    }
    if (result == 0)
        result = sq_stmt(s, SQ_H_OLDEST_OPEN, HEALTH_SQL_OLDEST_OPEN, &st);
    if (result == 0) {
        sq_bind_text(st, 1, endpoint_id);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            sq_col_id(st, 1, out->oldest_event_id);
            out->oldest_open_at = sqlite3_column_int64(st, 2);
        } else if (rc != SQLITE_DONE) {
            result = sq_error(s, rc);
        }
        sq_reset(st);
    }
    if (result == 0)
        result = sq_stmt(s, SQ_H_NEXT,
                         "SELECT next_attempt_at FROM hookd_deliveries WHERE endpoint_id = ?1"
                         " AND status IN ('pending', 'retrying') AND (lease_owner IS NULL OR lease_until < ?2)"
                         " ORDER BY next_attempt_at LIMIT 1",
                         &st);
    if (result == 0) {
        sq_bind_text(st, 1, endpoint_id);
        sqlite3_bind_int64(st, 2, now);
        result = sq_get_i64(s, st, &out->next_attempt_at);
        if (result == HOOKD_ENOTFOUND)
            result = 0;
    }
    return result;
}

static int sqlite_health_activity(struct store *s, const char *endpoint_id, struct health_activity *out)
{
    sqlite3_stmt *st;
    bool ok = true;
    int rc, result;

    memset(out, 0, sizeof *out);
    result = sq_stmt(s, SQ_H_ACTIVITY_LAST, HEALTH_SQL_ACTIVITY_LAST, &st);
    if (result)
        return result;
    sq_bind_text(st, 1, endpoint_id);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        out->last_attempt_at = sqlite3_column_int64(st, 0);
        out->last_success_at = sqlite3_column_int64(st, 1);
    }
    sq_reset(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return sq_error(s, rc);
    result = sq_stmt(s, SQ_H_ACTIVITY_ERROR, HEALTH_SQL_ACTIVITY_ERROR, &st);
    if (result)
        return result;
    sq_bind_text(st, 1, endpoint_id);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        out->last_error_at = sqlite3_column_int64(st, 0);
        out->last_error_status_code = (int)sqlite3_column_int64(st, 1);
        out->last_error_class = sq_col_str(st, 2, &ok);
        out->last_error = sq_col_str(st, 3, &ok);
    }
    sq_reset(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        result = sq_error(s, rc);
    else if (!ok)
        result = HOOKD_ENOMEM;
    if (result)
        health_activity_free(out);
    return result;
}

static void latency_row(sqlite3_stmt *st, void *arg)
{
    struct health_window *w = arg;
    int64_t b = sqlite3_column_int64(st, 0);

    if (b >= 0 && b < HEALTH_LATENCY_BUCKETS)
        w->latency[b] += sqlite3_column_int64(st, 1);
}

static int sqlite_health_window(struct store *s, const char *endpoint_id, int64_t since, struct health_window *out)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_H_WINDOW, HEALTH_SQL_WINDOW, &st);

    memset(out, 0, sizeof *out);
    if (result)
        return result;
    sq_bind_text(st, 1, endpoint_id);
    sqlite3_bind_int64(st, 2, health_minute(since));
    result = sq_row_read(s, st, store_read_health_window, out);
    if (result == HOOKD_ENOTFOUND)
        result = 0;
    snprintf(out->endpoint_id, sizeof out->endpoint_id, "%s", endpoint_id);
    if (result == 0)
        result = sq_stmt(s, SQ_H_WINDOW_LATENCY, HEALTH_SQL_WINDOW_LATENCY, &st);
    if (result == 0) {
        sq_bind_text(st, 1, endpoint_id);
        sqlite3_bind_int64(st, 2, health_minute(since));
        result = each_row(s, st, latency_row, out);
    }
    return result;
}

static int sqlite_health_summary(struct store *s, int64_t since, struct health_window_list *windows,
                                 struct health_failure_list *failures)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_H_SUMMARY_WINDOWS, HEALTH_SQL_SUMMARY_WINDOWS, &st);

    memset(windows, 0, sizeof *windows);
    memset(failures, 0, sizeof *failures);
    if (result)
        return result;
    sqlite3_bind_int64(st, 1, health_minute(since));
    result = sq_rows_read(s, st, SUMMARY_ROWS_MAX, store_read_health_window, STORE_ROWS(windows, NULL));
    if (result == 0)
        result = sq_stmt(s, SQ_H_SUMMARY_FAILURES, HEALTH_SQL_SUMMARY_FAILURES, &st);
    if (result == 0) {
        sqlite3_bind_int64(st, 1, health_minute(since));
        result = sq_rows_read(s, st, SUMMARY_ROWS_MAX, store_read_health_failure,
                              STORE_ROWS(failures, store_free_health_failure));
    }
    if (result)
        health_window_list_free(windows);
    return result;
}

/* The oldest open delivery: each endpoint's two probes, then the winner's row. */
static int sqlite_health_oldest(struct store *s, struct health_oldest *out)
{
    char endpoint[HOOKD_ID_MAX] = "";
    bool retrying = false;
    int64_t best = 0;
    sqlite3_stmt *st;
    int rc, result = sq_stmt(s, SQ_H_OLDEST_ALL, HEALTH_SQL_OLDEST_ALL, &st);

    memset(out, 0, sizeof *out);
    if (result)
        return result;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        for (int c = 1; c <= 2; c++) {
            int64_t at = sqlite3_column_int64(st, c);
            if (sqlite3_column_type(st, c) != SQLITE_NULL && (best == 0 || at < best)) {
                best = at;
                retrying = c == 2;
                sq_col_id(st, 0, endpoint);
            }
        }
    }
    sq_reset(st);
    if (rc != SQLITE_DONE)
        return sq_error(s, rc);
    if (best == 0)
        return 0;
    result = retrying ? sq_stmt(s, SQ_H_OLDEST_RETRYING, HEALTH_SQL_OLDEST_OF("retrying"), &st)
                      : sq_stmt(s, SQ_H_OLDEST_PENDING, HEALTH_SQL_OLDEST_OF("pending"), &st);
    if (result)
        return result;
    sq_bind_text(st, 1, endpoint);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        sq_col_id(st, 0, out->delivery_id);
        sq_col_id(st, 1, out->event_id);
        out->created_at = sqlite3_column_int64(st, 2);
        snprintf(out->endpoint_id, sizeof out->endpoint_id, "%s", endpoint);
    }
    sq_reset(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : sq_error(s, rc);
}

static int sqlite_health_resource(struct store *s, const char *resource_type, const char *resource_id,
                                  const char *account, struct resource_sync_list *out)
{
    sqlite3_stmt *st;
    int result = account ? sq_stmt(s, SQ_H_RESOURCE_ACCOUNT, HEALTH_SQL_RESOURCE_ACCOUNT, &st)
                         : sq_stmt(s, SQ_H_RESOURCE_ANY, HEALTH_SQL_RESOURCE_ANY, &st);

    memset(out, 0, sizeof *out);
    if (result)
        return result;
    sq_bind_text(st, 1, resource_type);
    sq_bind_text(st, 2, resource_id);
    sqlite3_bind_int(st, 3, RESOURCE_SYNC_EVENTS);
    if (account)
        sq_bind_text(st, 4, account);
    return sq_rows_read(s, st, STORE_LIST_MAX, store_read_resource_sync, STORE_ROWS(out, store_free_resource_sync));
}

const struct store_health_ops sqlite_health_ops = {
    .record = sqlite_health_record,
    .queue = sqlite_health_queue,
    .activity = sqlite_health_activity,
    .window = sqlite_health_window,
    .summary = sqlite_health_summary,
    .oldest = sqlite_health_oldest,
    .resource = sqlite_health_resource,
};
