/*
 * PostgreSQL backend, the health figures: a batch's attempt buckets upserted
 * by four statements (one array per column, unnested) in one round trip,
 * with rows keyed by node so that nodes never wait for each other's counters,
 * and the reads of store/health_sql.h over them and the deliveries (leases
 * counted in hookd_inflight).
 */
#include "store/postgres_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HP(n) "$" #n
#define HEALTH_STATUS_TERM(q) HEALTH_STATUS_IN(q)
#include "store/health_sql.h"

enum {
    PG_H_MINUTE = PG_HEALTH,
    PG_H_LATENCY,
    PG_H_FAILURE,
    PG_H_LAST,
    PG_H_PURGE_MINUTES,
    PG_H_PURGE_LATENCIES,
    PG_H_PURGE_FAILURES,
    PG_H_COUNTS,
    PG_H_IN_FLIGHT,
    PG_H_OLDEST_OPEN,
    PG_H_NEXT,
    PG_H_ACTIVITY_LAST,
    PG_H_ACTIVITY_ERROR,
    PG_H_WINDOW,
    PG_H_WINDOW_LATENCY,
    PG_H_SUMMARY_WINDOWS,
    PG_H_SUMMARY_FAILURES,
    PG_H_OLDEST_ALL,
    PG_H_OLDEST_PENDING,
    PG_H_OLDEST_RETRYING,
    PG_H_RESOURCE_ANY,
    PG_H_RESOURCE_ACCOUNT,
    PG_HEALTH_END
};
_Static_assert((int)PG_HEALTH_END <= (int)PG_SPARE, "the health statements overflow their slots");

#define MAX_COLS 8

/* The array literals of one statement's columns; numeric[c] says which are bigint[]. */
struct columns {
    struct pg_array a[MAX_COLS];
    int n;
};

static int columns_params(struct columns *c, const bool *numeric, struct pg_params *p)
{
    int result = 0;

    for (int i = 0; i < c->n; i++) {
        const char *literal = pg_array_end(&c->a[i]);
        if (!literal)
            result = HOOKD_ENOMEM;
        else if (numeric[i])
            pg_param_i64_array(p, i + 1, literal);
        else
            pg_param_text_array(p, i + 1, literal);
    }
    return result;
}

static void columns_free(struct columns *c)
{
    for (int i = 0; i < MAX_COLS; i++)
        pg_array_free(&c->a[i]);
}

static const char minute_sql[] =
    "INSERT INTO hookd_endpoint_minutes AS t(endpoint_id, minute, node, attempts, successes, retries_started,"
    " retries_ended) SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::bigint[],"
    " $6::bigint[], $7::bigint[]) ON CONFLICT (endpoint_id, minute, node) DO UPDATE SET"
    " attempts = t.attempts + excluded.attempts, successes = t.successes + excluded.successes,"
    " retries_started = t.retries_started + excluded.retries_started,"
    " retries_ended = t.retries_ended + excluded.retries_ended";
static const char latency_sql[] =
    "INSERT INTO hookd_latency_minutes AS t(endpoint_id, minute, node, bucket, count)"
    " SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::bigint[])"
    " ON CONFLICT (endpoint_id, minute, node, bucket) DO UPDATE SET count = t.count + excluded.count";
static const char failure_sql[] =
    "INSERT INTO hookd_failure_minutes AS t(minute, endpoint_id, account_null, account, status_code, error_class,"
    " node, count) SELECT m, e, an <> 0, a, sc, ec, n, c FROM unnest($1::bigint[], $2::text[], $3::bigint[],"
    " $4::text[], $5::bigint[], $6::text[], $7::text[], $8::bigint[]) AS u(m, e, an, a, sc, ec, n, c)"
    " ON CONFLICT (minute, endpoint_id, account_null, account, status_code, error_class, node)"
    " DO UPDATE SET count = t.count + excluded.count";
/* The later time wins each column; an error's fields move together with its time. */
#define NEWER_ERROR "excluded.last_error_at > COALESCE(t.last_error_at, 0)"
static const char last_sql[] =
    "INSERT INTO hookd_endpoint_last AS t(endpoint_id, node, last_attempt_at, last_success_at, last_error_at,"
    " last_error_status_code, last_error_class, last_error) SELECT * FROM unnest($1::text[], $2::text[],"
    " $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], $7::text[], $8::text[])"
    " ON CONFLICT (endpoint_id, node) DO UPDATE SET"
    " last_attempt_at = GREATEST(t.last_attempt_at, excluded.last_attempt_at),"
    " last_success_at = GREATEST(t.last_success_at, excluded.last_success_at),"
    " last_error_status_code = CASE WHEN " NEWER_ERROR " THEN excluded.last_error_status_code"
    "  ELSE t.last_error_status_code END,"
    " last_error_class = CASE WHEN " NEWER_ERROR " THEN excluded.last_error_class ELSE t.last_error_class END,"
    " last_error = CASE WHEN " NEWER_ERROR " THEN excluded.last_error ELSE t.last_error END,"
    " last_error_at = CASE WHEN " NEWER_ERROR " THEN excluded.last_error_at ELSE t.last_error_at END";

static int write_rows(struct store *s, const struct health_rows *r)
{
    static const bool minute_num[] = {false, true, false, true, true, true, true};
    static const bool latency_num[] = {false, true, false, true, true};
    static const bool failure_num[] = {true, false, true, false, true, false, false, true};
    static const bool last_num[] = {false, false, true, true, true, true, false, false};
    struct columns cm = {.n = 7}, cl = {.n = 5}, cf = {.n = 8}, cz = {.n = 8};
    struct pg_params pm = {.n = 0}, pl = {.n = 0}, pf = {.n = 0}, pz = {.n = 0};
    struct pg_stmt st[4];
    PGresult *res[4] = {NULL};
    int n = 0, result = 0;

    for (size_t i = 0; i < r->n_minutes; i++) {
        const struct health_minute_row *m = &r->minutes[i];
        pg_array_text(&cm.a[0], m->endpoint_id);
        pg_array_i64(&cm.a[1], m->minute);
        pg_array_text(&cm.a[2], m->node);
        pg_array_i64(&cm.a[3], m->attempts);
        pg_array_i64(&cm.a[4], m->successes);
        pg_array_i64(&cm.a[5], m->retries_started);
        pg_array_i64(&cm.a[6], m->retries_ended);
    }
    for (size_t i = 0; i < r->n_latencies; i++) {
        const struct health_latency_row *l = &r->latencies[i];
        pg_array_text(&cl.a[0], l->endpoint_id);
        pg_array_i64(&cl.a[1], l->minute);
        pg_array_text(&cl.a[2], l->node);
        pg_array_i64(&cl.a[3], l->bucket);
        pg_array_i64(&cl.a[4], l->count);
    }
    for (size_t i = 0; i < r->n_failures; i++) {
        const struct health_failure_row *f = &r->failures[i];
        pg_array_i64(&cf.a[0], f->minute);
        pg_array_text(&cf.a[1], f->endpoint_id);
        pg_array_i64(&cf.a[2], f->account == NULL);
        pg_array_text(&cf.a[3], f->account ? f->account : "");
        pg_array_i64(&cf.a[4], f->status_code);
        pg_array_text(&cf.a[5], f->error_class);
        pg_array_text(&cf.a[6], f->node);
        pg_array_i64(&cf.a[7], f->count);
    }
    for (size_t i = 0; i < r->n_lasts; i++) {
        const struct health_last_row *z = &r->lasts[i];
        bool err = z->last_error_at > 0;
        pg_array_text(&cz.a[0], z->endpoint_id);
        pg_array_text(&cz.a[1], z->node);
        pg_array_i64(&cz.a[2], z->last_attempt_at);
        pg_array_time(&cz.a[3], z->last_success_at);
        pg_array_time(&cz.a[4], z->last_error_at);
        pg_array_time(&cz.a[5], err ? z->last_error_status_code : 0);
        pg_array_text(&cz.a[6], err ? z->last_error_class : NULL);
        pg_array_text(&cz.a[7], err && z->has_error_text ? z->last_error : NULL);
    }
    result = columns_params(&cm, minute_num, &pm);
    if (result == 0)
        result = columns_params(&cl, latency_num, &pl);
    if (result == 0)
        result = columns_params(&cf, failure_num, &pf);
    if (result == 0)
        result = columns_params(&cz, last_num, &pz);
    if (result == 0) {
        st[n++] = (struct pg_stmt){PG_H_MINUTE, minute_sql, &pm};
        st[n++] = (struct pg_stmt){PG_H_LATENCY, latency_sql, &pl};
        if (r->n_failures > 0)
            st[n++] = (struct pg_stmt){PG_H_FAILURE, failure_sql, &pf};
        st[n++] = (struct pg_stmt){PG_H_LAST, last_sql, &pz};
        result = pg_run_many(s, st, n, res);
        for (int i = 0; i < n; i++)
            PQclear(res[i]);
    }
    columns_free(&cm);
    columns_free(&cl);
    columns_free(&cf);
    columns_free(&cz);
    return result;
}

static int purge(struct store *s, int64_t before)
{
    struct pg_params p = {.n = 0};
    struct pg_stmt st[3];
    PGresult *res[3] = {NULL};
    int result;

    pg_param_i64(&p, 1, before);
    st[0] = (struct pg_stmt){PG_H_PURGE_MINUTES, HEALTH_SQL_PURGE("hookd_endpoint_minutes"), &p};
    st[1] = (struct pg_stmt){PG_H_PURGE_LATENCIES, HEALTH_SQL_PURGE("hookd_latency_minutes"), &p};
    st[2] = (struct pg_stmt){PG_H_PURGE_FAILURES, HEALTH_SQL_PURGE("hookd_failure_minutes"), &p};
    result = pg_run_many(s, st, 3, res);
    for (int i = 0; i < 3; i++)
        PQclear(res[i]);
    return result;
}

static int postgres_health_record(struct store *s, const struct health_attempt *a, size_t n, int64_t purge_before)
{
    struct health_rows r;
    int result;

    if (n == 0 && purge_before <= 0)
        return 0;
    result = health_rows_build(a, n, &r);
    if (result)
        return result;
    result = pg_atomic_begin(s);
    if (result == 0 && n > 0)
        result = write_rows(s, &r);
    if (result == 0 && purge_before > 0)
        result = purge(s, purge_before);
    health_rows_free(&r);
    return pg_atomic_end(s, result);
}

static int postgres_health_queue(struct store *s, const char *endpoint_id, int64_t now, struct health_queue *out)
{
    struct pg_params p1 = {.n = 0}, p2 = {.n = 0};
    struct pg_stmt st[4];
    PGresult *res[4] = {NULL};
    int result;

    memset(out, 0, sizeof *out);
    pg_param_text(&p1, 1, endpoint_id);
    pg_param_text(&p2, 1, endpoint_id);
    pg_param_i64(&p2, 2, now);
    st[0] = (struct pg_stmt){PG_H_COUNTS, HEALTH_SQL_COUNTS, &p1};
    st[1] = (struct pg_stmt){PG_H_IN_FLIGHT,
                             "SELECT count(*) FROM hookd_inflight WHERE endpoint_id = $1 AND lease_until >= $2", &p2};
    st[2] = (struct pg_stmt){PG_H_OLDEST_OPEN, HEALTH_SQL_OLDEST_OPEN, &p1};
    st[3] = (struct pg_stmt){PG_H_NEXT,
                             "SELECT d.next_attempt_at FROM hookd_deliveries d WHERE d.endpoint_id = $1"
                             " AND d.status IN ('pending', 'retrying') AND NOT EXISTS (SELECT 1 FROM hookd_inflight i"
                             " WHERE i.delivery_id = d.id AND i.lease_until >= $2) ORDER BY d.next_attempt_at LIMIT 1",
                             &p2};
    result = pg_run_many(s, st, 4, res);
    if (result == 0) {
        for (int i = 0; i < PQntuples(res[0]); i++) {
            const char *status = PQgetvalue(res[0], i, 0);
            int64_t n = pg_col_i64(res[0], i, 1);
            if (strcmp(status, "pending") == 0)
                out->pending = n;
            else if (strcmp(status, "retrying") == 0)
                out->retrying = n;
            else if (strcmp(status, "dead") == 0)
                out->dead = n;
            else if (strcmp(status, "skipped") == 0)
                out->skipped = n;
        }
        if (PQntuples(res[1]) > 0)
            out->in_flight = pg_col_i64(res[1], 0, 0);
        if (PQntuples(res[2]) > 0) {
            pg_col_id(res[2], 0, 1, out->oldest_event_id);
            out->oldest_open_at = pg_col_i64(res[2], 0, 2);
        }
        if (PQntuples(res[3]) > 0)
            out->next_attempt_at = pg_col_i64(res[3], 0, 0);
    }
    for (int i = 0; i < 4; i++)
        PQclear(res[i]);
    return result;
}

static int postgres_health_activity(struct store *s, const char *endpoint_id, struct health_activity *out)
{
    struct pg_params p = {.n = 0};
    struct pg_stmt st[2];
    PGresult *res[2] = {NULL};
    bool ok = true;
    int result;

    memset(out, 0, sizeof *out);
    pg_param_text(&p, 1, endpoint_id);
    st[0] = (struct pg_stmt){PG_H_ACTIVITY_LAST, HEALTH_SQL_ACTIVITY_LAST, &p};
    st[1] = (struct pg_stmt){PG_H_ACTIVITY_ERROR, HEALTH_SQL_ACTIVITY_ERROR, &p};
    result = pg_run_many(s, st, 2, res);
    if (result == 0) {
        if (PQntuples(res[0]) > 0) {
            out->last_attempt_at = pg_col_i64(res[0], 0, 0);
            out->last_success_at = pg_col_i64(res[0], 0, 1);
        }
        if (PQntuples(res[1]) > 0) {
            out->last_error_at = pg_col_i64(res[1], 0, 0);
            out->last_error_status_code = (int)pg_col_i64(res[1], 0, 1);
            out->last_error_class = pg_col_str(res[1], 0, 2, &ok);
            out->last_error = pg_col_str(res[1], 0, 3, &ok);
        }
        if (!ok) {
            result = HOOKD_ENOMEM;
            health_activity_free(out);
        }
    }
    PQclear(res[0]);
    PQclear(res[1]);
    return result;
}

static int postgres_health_window(struct store *s, const char *endpoint_id, int64_t since, struct health_window *out)
{
    struct pg_params p = {.n = 0};
    struct pg_stmt st[2];
    PGresult *res[2] = {NULL};
    int result;

    memset(out, 0, sizeof *out);
    pg_param_text(&p, 1, endpoint_id);
    pg_param_i64(&p, 2, health_minute(since));
    st[0] = (struct pg_stmt){PG_H_WINDOW, HEALTH_SQL_WINDOW, &p};
    st[1] = (struct pg_stmt){PG_H_WINDOW_LATENCY, HEALTH_SQL_WINDOW_LATENCY, &p};
    result = pg_run_many(s, st, 2, res);
    if (result == 0) {
        if (PQntuples(res[0]) > 0) {
            out->attempts = pg_col_i64(res[0], 0, 1);
            out->successes = pg_col_i64(res[0], 0, 2);
            out->retries_started = pg_col_i64(res[0], 0, 3);
            out->retries_ended = pg_col_i64(res[0], 0, 4);
        }
        for (int i = 0; i < PQntuples(res[1]); i++) {
            int64_t b = pg_col_i64(res[1], i, 0);
            if (b >= 0 && b < HEALTH_LATENCY_BUCKETS)
                out->latency[b] += pg_col_i64(res[1], i, 1);
        }
    }
    snprintf(out->endpoint_id, sizeof out->endpoint_id, "%s", endpoint_id);
    PQclear(res[0]);
    PQclear(res[1]);
    return result;
}

static int postgres_health_summary(struct store *s, int64_t since, struct health_window_list *windows,
                                   struct health_failure_list *failures)
{
    struct pg_params p = {.n = 0};
    int result;

    memset(windows, 0, sizeof *windows);
    memset(failures, 0, sizeof *failures);
    pg_param_i64(&p, 1, health_minute(since));
    result = pg_list(s, PG_H_SUMMARY_WINDOWS, HEALTH_SQL_SUMMARY_WINDOWS, &p, store_read_health_window,
                     STORE_ROWS(windows, NULL));
    if (result == 0)
        result = pg_list(s, PG_H_SUMMARY_FAILURES, HEALTH_SQL_SUMMARY_FAILURES, &p, store_read_health_failure,
                         STORE_ROWS(failures, store_free_health_failure));
    if (result)
        health_window_list_free(windows);
    return result;
}

static int postgres_health_oldest(struct store *s, struct health_oldest *out)
{
    char endpoint[HOOKD_ID_MAX] = "";
    struct pg_params p = {.n = 0};
    PGresult *res = NULL;
    bool retrying = false;
    int64_t best = 0;
    int result;

    memset(out, 0, sizeof *out);
    result = pg_run(s, PG_H_OLDEST_ALL, HEALTH_SQL_OLDEST_ALL, &p, &res);
    if (result)
        return result;
    for (int i = 0; i < PQntuples(res); i++) {
        for (int c = 1; c <= 2; c++) {
            int64_t at = pg_col_i64(res, i, c);
            if (!pg_col_null(res, i, c) && (best == 0 || at < best)) {
                best = at;
                retrying = c == 2;
                pg_col_id(res, i, 0, endpoint);
            }
        }
    }
    PQclear(res);
    if (best == 0)
        return 0;
    pg_param_text(&p, 1, endpoint);
    result = retrying ? pg_run(s, PG_H_OLDEST_RETRYING, HEALTH_SQL_OLDEST_OF("retrying"), &p, &res)
                      : pg_run(s, PG_H_OLDEST_PENDING, HEALTH_SQL_OLDEST_OF("pending"), &p, &res);
    if (result)
        return result;
    if (PQntuples(res) > 0) {
        pg_col_id(res, 0, 0, out->delivery_id);
        pg_col_id(res, 0, 1, out->event_id);
        out->created_at = pg_col_i64(res, 0, 2);
        snprintf(out->endpoint_id, sizeof out->endpoint_id, "%s", endpoint);
    }
    PQclear(res);
    return 0;
}

static int postgres_health_resource(struct store *s, const char *resource_type, const char *resource_id,
                                    const char *account, struct resource_sync_list *out)
{
    struct pg_params p = {.n = 0};

    memset(out, 0, sizeof *out);
    pg_param_text(&p, 1, resource_type);
    pg_param_text(&p, 2, resource_id);
    pg_param_i64(&p, 3, RESOURCE_SYNC_EVENTS);
    if (account) {
        pg_param_text(&p, 4, account);
        return pg_list(s, PG_H_RESOURCE_ACCOUNT, HEALTH_SQL_RESOURCE_ACCOUNT, &p, store_read_resource_sync,
                       STORE_ROWS(out, store_free_resource_sync));
    }
    return pg_list(s, PG_H_RESOURCE_ANY, HEALTH_SQL_RESOURCE_ANY, &p, store_read_resource_sync,
                   STORE_ROWS(out, store_free_resource_sync));
}

const struct store_health_ops postgres_health_ops = {
    .record = postgres_health_record,
    .queue = postgres_health_queue,
    .activity = postgres_health_activity,
    .window = postgres_health_window,
    .summary = postgres_health_summary,
    .oldest = postgres_health_oldest,
    .resource = postgres_health_resource,
};
