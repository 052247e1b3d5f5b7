/*
 * The store conformance suite: the health family. Attempts recorded by two
 * nodes add up in one endpoint's window (attempts, successes, retry flow,
 * latency buckets) and in the summary's failure groups (by endpoint, account,
 * status code or error class); the latest error wins; old buckets are
 * purged; a deleted endpoint's buckets go with it; an endpoint's queue is
 * counted by status with its leases, oldest open and next due; a resource's
 * latest event per endpoint; rows written by SQL with bad bytes are read
 * without harm. Uses the store_*() wrappers only (fixture: store_fixture.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/latency.h"
#include "store/store_fixture.h"

#define HOUR_MS (3600 * 1000LL)

static struct health_attempt attempt(const char *ep, const char *account, const char *node, int64_t at, int ms,
                                     int code, const char *cls, const char *error, int retry_delta)
{
    return (struct health_attempt){.endpoint_id = ep, .account = account, .node = node, .started_at = at,
                                   .duration_ms = ms, .status_code = code, .error_class = cls, .error = error,
                                   .succeeded = code >= 200 && code < 300, .retry_delta = retry_delta};
}

static const struct health_failure *failure_of(const struct health_failure_list *l, const char *ep,
                                               const char *account, int code, const char *cls)
{
    for (size_t i = 0; i < l->n; i++) {
        const struct health_failure *f = &l->items[i];
        if (strcmp(f->endpoint_id, ep) == 0 && f->status_code == code &&
            ((f->account == NULL && account == NULL) || (f->account && account && !strcmp(f->account, account))) &&
            ((f->error_class == NULL && cls == NULL) || (f->error_class && cls && !strcmp(f->error_class, cls))))
            return f;
    }
    return NULL;
}

static void test_record_window_summary(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct endpoint ep;
    struct health_window w;
    struct health_activity a;
    struct health_window_list wl;
    struct health_failure_list fl;
    const struct health_failure *f;
    char long_error[600];

    endpoint_make(fx, &ep);
    memset(long_error, 'x', sizeof long_error - 1);
    long_error[sizeof long_error - 1] = '\0';
    /* Node a: 3 successes of 100 ms, two 401s of account A; node b: two more 401s, a timeout without
     * account, and an old success of yesterday. Batches of each node, some merged in one call. */
    struct health_attempt batch_a[] = {
        attempt(ep.id, fx->account, "node-a", now - 5000, 100, 200, NULL, NULL, 0),
        attempt(ep.id, fx->account, "node-a", now - 4000, 100, 200, NULL, NULL, 0),
        attempt(ep.id, fx->account, "node-a", now - 3000, 100, 204, NULL, NULL, -1),
        attempt(ep.id, fx->account, "node-a", now - 2500, 10, 401, NULL, "HTTP 401", 0),
        attempt(ep.id, fx->account, "node-a", now - 2400, 10, 401, NULL, "HTTP 401", 0),
    };
    struct health_attempt batch_b[] = {
        attempt(ep.id, fx->account, "node-b", now - 2300, 10, 401, NULL, "HTTP 401", 0),
        attempt(ep.id, NULL, "node-b", now - 1000, 2000, 0, "timeout", long_error, 1),
        attempt(ep.id, fx->account, "node-b", now - 2200, 10, 401, NULL, "HTTP 401", 1),
        attempt(ep.id, fx->account, "node-b", now - 20 * HOUR_MS, 50, 200, NULL, NULL, 0),
    };
    assert_int_equal(store_health_record(fx->s, batch_a, 5, 0), 0);
    assert_int_equal(store_health_record(fx->s, batch_b, 4, 0), 0);
    assert_int_equal(store_health_record(fx->s, NULL, 0, 0), 0);

    assert_int_equal(store_health_window(fx->s, ep.id, now - HOUR_MS, &w), 0);
    assert_string_equal(w.endpoint_id, ep.id);
    assert_int_equal(w.attempts, 8);
    assert_int_equal(w.successes, 3);
    assert_int_equal(w.retries_started, 2);
    assert_int_equal(w.retries_ended, 1);
    assert_int_equal(w.latency[latency_bucket(100, HEALTH_LATENCY_BUCKETS)], 3);
    assert_int_equal(w.latency[latency_bucket(10, HEALTH_LATENCY_BUCKETS)], 4);
    assert_int_equal(w.latency[latency_bucket(2000, HEALTH_LATENCY_BUCKETS)], 1);
    int64_t p50 = latency_quantile(w.latency, HEALTH_LATENCY_BUCKETS, 0.5);
    assert_true(p50 >= 8 && p50 <= 12);
    assert_true(latency_quantile(w.latency, HEALTH_LATENCY_BUCKETS, 0.99) >= 1681);
    assert_int_equal(store_health_window(fx->s, ep.id, now - 24 * HOUR_MS, &w), 0);
    assert_int_equal(w.attempts, 9);
    assert_int_equal(w.successes, 4);

    /* The latest attempt, success and error over both nodes; a long error is cut to the cap. */
    assert_int_equal(store_health_activity(fx->s, ep.id, &a), 0);
    assert_int_equal(a.last_attempt_at, now - 1000);
    assert_int_equal(a.last_success_at, now - 3000);
    assert_int_equal(a.last_error_at, now - 1000);
    assert_int_equal(a.last_error_status_code, 0);
    assert_string_equal(a.last_error_class, "timeout");
    assert_int_equal(strlen(a.last_error), HEALTH_ERROR_MAX - 1);
    health_activity_free(&a);
    /* An older error recorded later does not replace it; a newer one does, whole. */
    struct health_attempt older = attempt(ep.id, fx->account, "node-a", now - 9000, 5, 500, NULL, "HTTP 500", 0);
    assert_int_equal(store_health_record(fx->s, &older, 1, 0), 0);
    assert_int_equal(store_health_activity(fx->s, ep.id, &a), 0);
    assert_string_equal(a.last_error_class, "timeout");
    health_activity_free(&a);
    struct health_attempt newer = attempt(ep.id, fx->account, "node-a", now - 500, 5, 503, NULL, "HTTP 503", 0);
    assert_int_equal(store_health_record(fx->s, &newer, 1, 0), 0);
    assert_int_equal(store_health_activity(fx->s, ep.id, &a), 0);
    assert_int_equal(a.last_error_status_code, 503);
    assert_null(a.last_error_class);
    assert_string_equal(a.last_error, "HTTP 503");
    assert_int_equal(a.last_attempt_at, now - 500);
    health_activity_free(&a);

    /* The summary: 4 × 401 of account A (two nodes, one group), 1 timeout without account. */
    assert_int_equal(store_health_summary(fx->s, now - HOUR_MS, &wl, &fl), 0);
    bool found = false;
    for (size_t i = 0; i < wl.n; i++) {
        if (strcmp(wl.items[i].endpoint_id, ep.id) == 0) {
            found = true;
            assert_int_equal(wl.items[i].attempts, 10);
            assert_int_equal(wl.items[i].successes, 3);
        }
    }
    assert_true(found);
    assert_non_null(f = failure_of(&fl, ep.id, fx->account, 401, NULL));
    assert_int_equal(f->count, 4);
    assert_non_null(f = failure_of(&fl, ep.id, NULL, 0, "timeout"));
    assert_int_equal(f->count, 1);
    assert_non_null(f = failure_of(&fl, ep.id, fx->account, 503, NULL));
    assert_int_equal(f->count, 1);
    health_window_list_free(&wl);
    health_failure_list_free(&fl);
    endpoint_free(&ep);
}

static void test_purge_and_delete(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct endpoint ep;
    struct health_window w;
    struct health_activity a;

    endpoint_make(fx, &ep);
    struct health_attempt old[] = {
        attempt(ep.id, fx->account, "node-a", now - 30 * HOUR_MS, 5, 500, NULL, "HTTP 500", 1),
        attempt(ep.id, fx->account, "node-a", now - 2000, 5, 200, NULL, NULL, -1),
    };
    assert_int_equal(store_health_record(fx->s, old, 2, 0), 0);
    assert_int_equal(store_health_window(fx->s, ep.id, now - 48 * HOUR_MS, &w), 0);
    assert_int_equal(w.attempts, 2);
    /* A purge drops the buckets before its time, in every table, and keeps the newer ones. */
    assert_int_equal(store_health_record(fx->s, NULL, 0, now - HEALTH_KEEP_MS), 0);
    assert_int_equal(store_health_window(fx->s, ep.id, now - 48 * HOUR_MS, &w), 0);
    assert_int_equal(w.attempts, 1);
    assert_int_equal(w.latency[latency_bucket(5, HEALTH_LATENCY_BUCKETS)], 1);
    struct health_window_list wl;
    struct health_failure_list fl;
    assert_int_equal(store_health_summary(fx->s, now - 48 * HOUR_MS, &wl, &fl), 0);
    assert_null(failure_of(&fl, ep.id, fx->account, 500, NULL));
    health_window_list_free(&wl);
    health_failure_list_free(&fl);
    /* The latest attempt is not a bucket: it stays until the endpoint goes, then goes with it. */
    assert_int_equal(store_health_activity(fx->s, ep.id, &a), 0);
    assert_int_equal(a.last_error_at, now - 30 * HOUR_MS);
    health_activity_free(&a);
    assert_int_equal(store_endpoint_delete(fx->s, ep.id), 0);
    assert_int_equal(store_health_activity(fx->s, ep.id, &a), 0);
    assert_int_equal(a.last_attempt_at, 0);
    assert_null(a.last_error);
    assert_int_equal(store_health_window(fx->s, ep.id, now - 48 * HOUR_MS, &w), 0);
    assert_int_equal(w.attempts, 0);
    endpoint_free(&ep);
}

static void test_queue_and_oldest(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct endpoint ep, other;
    struct event ev[5];
    struct delivery d[5];
    struct health_queue q;
    struct health_oldest o;
    struct job_list jobs;
    char retry_event[HOOKD_ID_MAX];

    drain_due(fx);
    endpoint_make(fx, &ep);
    endpoint_make(fx, &other);
    assert_int_equal(store_health_queue(fx->s, ep.id, now, &q), 0);
    assert_int_equal(q.pending + q.retrying + q.dead + q.skipped + q.in_flight + q.oldest_open_at + q.next_attempt_at,
                     0);
    for (int i = 0; i < 5; i++) {
        event_make(fx, "h.q", &ev[i]);
        delivery_make(fx, ev[i].id, ep.id, i < 3 ? now - 10 : now + 57000 + 1000 * i, &d[i]);
    }
    /* Claim the three due ones: one delivered, one retrying (due in 90 s), one dead... */
    assert_int_equal(claim(fx, "node-q", now, now + 30000, &jobs), 3);
    complete(fx, &jobs.items[0], DELIVERY_DELIVERED, 1, 200, now, 0, 0);
    complete(fx, &jobs.items[1], DELIVERY_RETRYING, 1, 500, now, now + 90000, 0);
    snprintf(retry_event, sizeof retry_event, "%s", jobs.items[1].d.event_id);
    complete(fx, &jobs.items[2], DELIVERY_DEAD, 1, 400, now, 0, 0);
    job_list_free(&jobs);
    /* ...and the two later ones (due at +60 s and +61 s) pending; the first of them leased (in flight). */
    assert_int_equal(claim(fx, "node-q", now + 61000, now + 120000, &jobs), 2);
    assert_int_equal(store_delivery_release(fx->s, jobs.items[1].d.id, jobs.items[1].d.lease_owner,
                                            jobs.items[1].d.lease_token), 0);
    assert_int_equal(store_health_queue(fx->s, ep.id, now + 61000, &q), 0);
    assert_int_equal(q.pending, 2);
    assert_int_equal(q.retrying, 1);
    assert_int_equal(q.dead, 1);
    assert_int_equal(q.skipped, 0);
    assert_int_equal(q.in_flight, 1);
    assert_int_equal(q.next_attempt_at, now + 61000); /* the released one; the leased one does not count */
    assert_true(q.oldest_open_at > 0 && q.oldest_open_at <= clock_now_ms());
    /* The oldest open one is one of the three open deliveries' events (they may share a millisecond). */
    assert_true(strcmp(q.oldest_event_id, retry_event) == 0 || strcmp(q.oldest_event_id, ev[3].id) == 0 ||
                strcmp(q.oldest_event_id, ev[4].id) == 0);
    assert_int_equal(store_health_oldest(fx->s, &o), 0);
    assert_string_equal(o.endpoint_id, ep.id);
    assert_int_equal(o.created_at, q.oldest_open_at);
    assert_string_equal(o.event_id, q.oldest_event_id);
    job_list_free(&jobs);
    /* Another endpoint's queue is its own. */
    assert_int_equal(store_health_queue(fx->s, other.id, now, &q), 0);
    assert_int_equal(q.pending + q.retrying + q.dead, 0);
    for (int i = 0; i < 5; i++) {
        event_free(&ev[i]);
        delivery_free(&d[i]);
    }
    drain_due(fx);
    endpoint_free(&ep);
    endpoint_free(&other);
}

static void resource_event(struct fixture *fx, const char *type, const char *id, int64_t version, const char *account,
                           struct event *ev)
{
    memset(ev, 0, sizeof *ev);
    ev->type = strdup("sub.updated");
    ev->account = strdup(account);
    ev->resource_type = strdup(type);
    ev->resource_id = strdup(id);
    ev->has_resource_version = true;
    ev->resource_version = version;
    ev->payload = strdup("{}");
    assert_int_equal(store_event_insert(fx->s, ev, NULL), 0);
}

static void test_resource_latest(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct endpoint a, b;
    struct event e1, e2, e3, x;
    struct delivery d;
    struct resource_sync_list l;
    char rid[HOOKD_ID_MAX];

    id_new(rid, "sub_");
    endpoint_make(fx, &a);
    endpoint_make(fx, &b);
    resource_event(fx, "subscription", rid, 1, fx->account, &e1);
    resource_event(fx, "subscription", rid, 2, fx->account, &e2);
    resource_event(fx, "subscription", rid, 3, "acct_other", &e3);
    resource_event(fx, "subscription", "another", 9, fx->account, &x);
    delivery_make(fx, e1.id, a.id, now + HOUR_MS, &d);
    delivery_free(&d);
    delivery_make(fx, e2.id, a.id, now + HOUR_MS, &d);
    delivery_free(&d);
    delivery_make(fx, e1.id, b.id, now + HOUR_MS, &d);
    delivery_free(&d);
    delivery_make(fx, e3.id, b.id, now + HOUR_MS, &d);
    delivery_free(&d);
    delivery_make(fx, x.id, b.id, now + HOUR_MS, &d);
    delivery_free(&d);
    assert_int_equal(store_health_resource(fx->s, "subscription", rid, NULL, &l), 0);
    assert_int_equal(l.n, 2);
    for (size_t i = 0; i < l.n; i++) {
        const struct resource_sync *r = &l.items[i];
        assert_int_equal(r->status, DELIVERY_PENDING);
        assert_true(r->has_version);
        assert_string_equal(r->event_type, "sub.updated");
        if (strcmp(r->endpoint_id, a.id) == 0) {
            assert_string_equal(r->event_id, e2.id);
            assert_int_equal(r->version, 2);
        } else {
            assert_string_equal(r->endpoint_id, b.id);
            assert_string_equal(r->event_id, e3.id);
        }
    }
    resource_sync_list_free(&l);
    /* Only the account's events: b's latest is then e1. */
    assert_int_equal(store_health_resource(fx->s, "subscription", rid, fx->account, &l), 0);
    assert_int_equal(l.n, 2);
    for (size_t i = 0; i < l.n; i++) {
        if (strcmp(l.items[i].endpoint_id, b.id) == 0)
            assert_string_equal(l.items[i].event_id, e1.id);
    }
    resource_sync_list_free(&l);
    assert_int_equal(store_health_resource(fx->s, "subscription", "nothing-here", NULL, &l), 0);
    assert_int_equal(l.n, 0);
    resource_sync_list_free(&l);
    event_free(&e1);
    event_free(&e2);
    event_free(&e3);
    event_free(&x);
    endpoint_free(&a);
    endpoint_free(&b);
}

/* Rows written by SQL with control characters and (on SQLite) invalid UTF-8 are read as they are. */
static void test_hostile_rows(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct endpoint ep;
    struct health_activity a;
    struct health_window_list wl;
    struct health_failure_list fl;
    char sql[1024];
    bool pg = strcmp(store_backend(fx->s)->name, "postgres") == 0;

    endpoint_make(fx, &ep);
    snprintf(sql, sizeof sql,
             "INSERT INTO hookd_endpoint_last(endpoint_id, node, last_attempt_at, last_error_at, last_error_status_code,"
             " last_error_class, last_error) VALUES ('%s', 'evil', %lld, %lld, 99999, 'x%sy', 'bad%s\"\\''')",
             ep.id, (long long)now, (long long)now, pg ? "' || chr(7) || '" : "' || char(7) || '",
             pg ? "' || chr(1) || '" : "' || char(1) || X'FF' || '");
    fixture_sql(fx, sql);
    snprintf(sql, sizeof sql,
             "INSERT INTO hookd_failure_minutes(minute, endpoint_id, account_null, account, status_code, error_class,"
             " node, count) VALUES (%lld, '%s', %s, 'a' || %s, -5, '', 'evil', 3)",
             (long long)(now - now % 60000), ep.id, pg ? "false" : "0", pg ? "chr(27)" : "char(27)");
    fixture_sql(fx, sql);
    assert_int_equal(store_health_activity(fx->s, ep.id, &a), 0);
    assert_int_equal(a.last_error_status_code, 99999);
    assert_non_null(a.last_error_class);
    assert_non_null(a.last_error);
    health_activity_free(&a);
    assert_int_equal(store_health_summary(fx->s, now - HOUR_MS, &wl, &fl), 0);
    assert_non_null(failure_of(&fl, ep.id, "a\x1b", -5, NULL));
    health_window_list_free(&wl);
    health_failure_list_free(&fl);
    endpoint_free(&ep);
}

/* The histogram's buckets (core/latency.h): each duration in the bucket whose bounds hold it, quantiles
 * inside the bucket of their rank. No store needed. */
static void test_latency_buckets(void **state)
{
    int64_t counts[HEALTH_LATENCY_BUCKETS] = {0};

    (void)state;
    assert_int_equal(latency_bucket(0, HEALTH_LATENCY_BUCKETS), 0);
    assert_int_equal(latency_bucket(-5, HEALTH_LATENCY_BUCKETS), 0);
    assert_int_equal(latency_bucket(1, HEALTH_LATENCY_BUCKETS), 1);
    assert_int_equal(latency_bucket(2, HEALTH_LATENCY_BUCKETS), 5);
    assert_int_equal(latency_bucket(INT64_MAX / 2, HEALTH_LATENCY_BUCKETS), HEALTH_LATENCY_BUCKETS - 1);
    for (int64_t ms = 1; ms < 200000; ms = ms * 5 / 4 + 1) {
        int b = latency_bucket(ms, HEALTH_LATENCY_BUCKETS);
        assert_true(latency_bucket_low(b) <= (double)ms && (double)ms < latency_bucket_high(b));
    }
    assert_int_equal(latency_quantile(counts, HEALTH_LATENCY_BUCKETS, 0.5), -1);
    counts[latency_bucket(100, HEALTH_LATENCY_BUCKETS)] = 99;
    counts[latency_bucket(5000, HEALTH_LATENCY_BUCKETS)] = 1;
    int64_t p50 = latency_quantile(counts, HEALTH_LATENCY_BUCKETS, 0.5), p99 = latency_quantile(counts, HEALTH_LATENCY_BUCKETS, 0.99);
    int64_t p100 = latency_quantile(counts, HEALTH_LATENCY_BUCKETS, 1.0);
    assert_true(p50 >= 84 && p50 <= 119);   /* within the bucket of 100 ms (about 19 % wide) */
    assert_true(p99 >= 84 && p99 <= 119);   /* the 99th of 100 is still a 100 ms one */
    assert_true(p100 >= 4096 && p100 <= 6000);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_record_window_summary), T(test_purge_and_delete), T(test_queue_and_oldest),
        T(test_resource_latest),       T(test_hostile_rows),         cmocka_unit_test(test_latency_buckets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
