/*
 * The store conformance suite: ordering. In key and latest mode a claim takes
 * only a resource's oldest open delivery (other resources and unordered rows
 * flow), and in latest mode delivery_supersede turns older open, unleased
 * versions into superseded ones, never a leased one and never a newer one.
 * Uses the store_*() wrappers only (fixture: store_fixture.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "store/store_common.h" /* STORE_ORDER_WALK_MAX */
#include "store/store_fixture.h"

/* An ordered delivery of a fresh event of resource (rtype, rid, version; version < 0: none) to ep, due at due. */
static void ordered_put(struct fixture *fx, const struct endpoint *ep, enum ordering_mode m, const char *rid,
                        int64_t version, int64_t due, struct delivery *d)
{
    struct event ev;

    memset(&ev, 0, sizeof ev);
    ev.type = strdup("sub.updated");
    ev.account = strdup(fx->account);
    ev.payload = strdup("{}");
    ev.resource_type = strdup("sub");
    ev.resource_id = strdup(rid);
    ev.has_resource_version = version >= 0;
    ev.resource_version = version;
    assert_int_equal(store_event_insert(fx->s, &ev, NULL), 0);
    memset(d, 0, sizeof *d);
    id_new(d->id, "dlv_");
    snprintf(d->event_id, sizeof d->event_id, "%s", ev.id);
    snprintf(d->endpoint_id, sizeof d->endpoint_id, "%s", ep->id);
    d->status = DELIVERY_PENDING;
    d->next_attempt_at = due;
    d->order_seq = ev.seq;
    d->has_order_version = ev.has_resource_version;
    d->order_version = ev.resource_version;
    assert_int_equal(delivery_order_key(m, &ev, &d->order_key), 0);
    assert_non_null(d->order_key);
    assert_int_equal(store_delivery_insert(fx->s, d), 0);
    event_free(&ev);
}

static bool claimed(const struct job_list *jobs, const char *id)
{
    for (size_t i = 0; i < jobs->n; i++) {
        if (strcmp(jobs->items[i].d.id, id) == 0)
            return true;
    }
    return false;
}

/* The order key: mode, then type and id joined so that no two pairs meet. */
static void test_order_key(void **state)
{
    struct event a = {.resource_type = "order", .resource_id = "12"}, b = {.resource_type = "order1", .resource_id = "2"};
    struct event none = {.resource_type = "order"};
    char *ka, *kb, *kl, *kn;

    (void)state;
    assert_int_equal(delivery_order_key(ORDERING_KEY, &a, &ka), 0);
    assert_int_equal(delivery_order_key(ORDERING_KEY, &b, &kb), 0);
    assert_int_equal(delivery_order_key(ORDERING_LATEST, &a, &kl), 0);
    assert_int_equal(delivery_order_key(ORDERING_KEY, &none, &kn), 0);
    assert_string_not_equal(ka, kb);
    assert_string_not_equal(ka, kl);
    assert_int_equal(kl[0], 'L');
    assert_null(kn);
    assert_int_equal(delivery_order_key(ORDERING_NONE, &a, &kn), 0);
    assert_null(kn);
    free(ka);
    free(kb);
    free(kl);
}

/* Key mode: A2 waits while A1 is open (leased, then retrying), B flows; A2 goes once A1 is delivered. */
static void test_claim_oldest_open_per_resource(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct delivery a1, a2, b1;
    struct job_list jobs;
    struct scene sc;

    drain_due(fx);
    scene_make(fx, now - 5, &sc); /* an unordered row of another endpoint flows too */
    ordered_put(fx, &sc.ep, ORDERING_KEY, "A", 1, now - 3, &a1);
    ordered_put(fx, &sc.ep, ORDERING_KEY, "A", 2, now - 2, &a2);
    ordered_put(fx, &sc.ep, ORDERING_KEY, "B", 1, now - 1, &b1);
    assert_int_equal(claim(fx, "node-a", now, now + 30000, &jobs), 3);
    assert_true(claimed(&jobs, sc.d.id) && claimed(&jobs, a1.id) && claimed(&jobs, b1.id));
    assert_false(claimed(&jobs, a2.id));
    /* A1 fails and will be retried at once: A2 still waits behind it. */
    for (size_t i = 0; i < jobs.n; i++) {
        bool is_a1 = strcmp(jobs.items[i].d.id, a1.id) == 0;
        complete(fx, &jobs.items[i], is_a1 ? DELIVERY_RETRYING : DELIVERY_DELIVERED, 1, is_a1 ? 500 : 200, now,
                 is_a1 ? now : 0, 0);
    }
    job_list_free(&jobs);
    assert_int_equal(claim(fx, "node-a", now + 1, now + 30000, &jobs), 1);
    assert_string_equal(jobs.items[0].d.id, a1.id);
    complete(fx, &jobs.items[0], DELIVERY_DELIVERED, 2, 200, now + 1, 0, 0);
    job_list_free(&jobs);
    assert_int_equal(claim(fx, "node-a", now + 2, now + 30000, &jobs), 1);
    assert_string_equal(jobs.items[0].d.id, a2.id);
    complete(fx, &jobs.items[0], DELIVERY_DEAD, 1, 400, now + 2, 0, 0);
    job_list_free(&jobs);
    delivery_free(&a1);
    delivery_free(&a2);
    delivery_free(&b1);
    scene_free(&sc);
}

/* Latest mode: older open unleased versions become superseded; a leased one may finish; key mode untouched. */
static void test_supersede_latest(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct delivery v1, v2, v3, k1, k2, late;
    struct job_list jobs;
    struct scene sc;

    drain_due(fx);
    scene_make(fx, now + 100000, &sc);
    ordered_put(fx, &sc.ep, ORDERING_LATEST, "A", 1, now - 3, &v1);
    assert_int_equal(claim(fx, "node-a", now, now + 30000, &jobs), 1); /* v1 is in flight */
    ordered_put(fx, &sc.ep, ORDERING_LATEST, "A", 2, now - 2, &v2);
    ordered_put(fx, &sc.ep, ORDERING_LATEST, "A", 3, now - 1, &v3);
    ordered_put(fx, &sc.ep, ORDERING_KEY, "A", 1, now - 1, &k1);
    ordered_put(fx, &sc.ep, ORDERING_KEY, "A", 2, now - 1, &k2);
    const char *eps[] = {sc.ep.id, sc.ep.id};
    const char *keys[] = {v3.order_key, k2.order_key};
    assert_int_equal(store_delivery_supersede(fx->s, eps, keys, 2, now), 0);
    delivery_expect(fx, v1.id, DELIVERY_PENDING, 0); /* leased: may finish */
    delivery_expect(fx, v2.id, DELIVERY_SUPERSEDED, 0);
    delivery_expect(fx, v3.id, DELIVERY_PENDING, 0);
    delivery_expect(fx, k1.id, DELIVERY_PENDING, 0);
    /* v1 fails: once unleased, the next pass supersedes it. */
    complete(fx, &jobs.items[0], DELIVERY_RETRYING, 1, 500, now, now + 100, 0);
    job_list_free(&jobs);
    assert_int_equal(store_delivery_supersede(fx->s, eps, keys, 1, now), 0);
    delivery_expect(fx, v1.id, DELIVERY_SUPERSEDED, 1);
    /* An older version arriving after a newer one supersedes nothing and is superseded itself. */
    ordered_put(fx, &sc.ep, ORDERING_LATEST, "A", 2, now - 1, &late);
    const char *late_keys[] = {late.order_key};
    assert_int_equal(store_delivery_supersede(fx->s, eps, late_keys, 1, now), 0);
    delivery_expect(fx, late.id, DELIVERY_SUPERSEDED, 0);
    delivery_expect(fx, v3.id, DELIVERY_PENDING, 0);
    assert_int_equal(claim(fx, "node-a", now, now + 30000, &jobs), 2); /* v3 and k1 */
    assert_true(claimed(&jobs, v3.id) && claimed(&jobs, k1.id));
    for (size_t i = 0; i < jobs.n; i++)
        complete(fx, &jobs.items[i], DELIVERY_DELIVERED, 1, 200, now, 0, 0);
    job_list_free(&jobs);
    assert_int_equal(claim(fx, "node-a", now, now + 30000, &jobs), 1); /* k2 */
    complete(fx, &jobs.items[0], DELIVERY_DELIVERED, 1, 200, now, 0, 0);
    job_list_free(&jobs);
    delivery_free(&v1);
    delivery_free(&v2);
    delivery_free(&v3);
    delivery_free(&k1);
    delivery_free(&k2);
    delivery_free(&late);
    scene_free(&sc);
}

#define BLOCKED_KEYS 10000

/* Blocked rows (those inserted as dlv_bn…) of endpoint_id still due at now. */
static int64_t blocked_due(struct fixture *fx, const char *endpoint_id, int64_t now)
{
    char sql[512];

    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM hookd_deliveries WHERE endpoint_id = '%s' AND id LIKE 'dlv_bn%%'"
             " AND status = 'pending' AND next_attempt_at <= %lld",
             endpoint_id, (long long)now);
    return fixture_sql_int(fx, sql);
}

/*
 * Key mode with 10,000 blocked resources: each has a head retrying in an hour
 * and a successor due now, all due before the one free resource's delivery.
 * A claim walks at most STORE_ORDER_WALK_MAX blocked rows beyond what it
 * leases and moves each behind its head, so the free delivery is reached
 * after BLOCKED_KEYS / STORE_ORDER_WALK_MAX claims at most, and from then on
 * a claim reads none of the blocked rows. A head that ends wakes its successor.
 */
static void test_blocked_keys_bounded_walk(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms(), head_at = now + 3600000;
    struct endpoint ep;
    struct delivery free_row;
    struct job_list jobs;
    char sql[2048];
    int claims = 0;
    int64_t t0;
    bool got = false;

    drain_due(fx);
    endpoint_make(fx, &ep);
    snprintf(sql, sizeof sql, "UPDATE hookd_endpoints SET ordering = 'key' WHERE id = '%s'", ep.id);
    fixture_sql(fx, sql);
    /* Events h1..hN then n1..nN (outbox order), as an application's bulk insert would. */
    snprintf(sql, sizeof sql,
             "WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < %d)"
             " INSERT INTO hookd_outbox(event_type, payload, resource_type, resource_id, dispatched_at)"
             " SELECT 'blk.h', '{}', 'sub', '%s-' || i, 1 FROM g",
             BLOCKED_KEYS, ep.id);
    fixture_sql(fx, sql);
    snprintf(sql, sizeof sql,
             "WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < %d)"
             " INSERT INTO hookd_outbox(event_type, payload, resource_type, resource_id, dispatched_at)"
             " SELECT 'blk.n', '{}', 'sub', '%s-' || i, 1 FROM g",
             BLOCKED_KEYS, ep.id);
    fixture_sql(fx, sql);
    snprintf(sql, sizeof sql,
             "INSERT INTO hookd_deliveries(id, event_id, endpoint_id, status, attempt_count, next_attempt_at,"
             " created_at, order_key, order_seq)"
             " SELECT CASE WHEN o.event_type = 'blk.h' THEN 'dlv_bh' ELSE 'dlv_bn' END || o.seq, o.id, '%s',"
             " CASE WHEN o.event_type = 'blk.h' THEN 'retrying' ELSE 'pending' END,"
             " CASE WHEN o.event_type = 'blk.h' THEN 1 ELSE 0 END,"
             " CASE WHEN o.event_type = 'blk.h' THEN %lld ELSE %lld + o.seq %% 1000 END, %lld,"
             " 'Ksub:' || o.resource_id, o.seq FROM hookd_outbox o"
             " WHERE o.event_type IN ('blk.h', 'blk.n') AND o.resource_id LIKE '%s-%%'",
             ep.id, (long long)head_at, (long long)(now - 5000), (long long)now, ep.id);
    fixture_sql(fx, sql);
    ordered_put(fx, &ep, ORDERING_KEY, "free", 1, now - 1, &free_row);
    assert_int_equal(blocked_due(fx, ep.id, now), BLOCKED_KEYS);

    /* Each claim moves at most the walk's bound of them, at least one, until the free row is reached. */
    for (int64_t left = BLOCKED_KEYS; !got && claims < BLOCKED_KEYS / STORE_ORDER_WALK_MAX + 2; claims++) {
        int64_t after;
        got = claim(fx, "node-a", now, now + 30000, &jobs) > 0;
        assert_true(jobs.n <= 1);
        if (jobs.n == 1) {
            assert_string_equal(jobs.items[0].d.id, free_row.id);
            complete(fx, &jobs.items[0], DELIVERY_DELIVERED, 1, 200, now, 0, 0);
        }
        job_list_free(&jobs);
        after = blocked_due(fx, ep.id, now);
        if (!got) {
            assert_true(after < left);
            assert_true(left - after <= 100 + STORE_ORDER_WALK_MAX); /* what it may lease, and the bound */
        }
        left = after;
    }
    assert_true(got);
    assert_true(claims <= BLOCKED_KEYS / STORE_ORDER_WALK_MAX + 1);
    print_message("# %d claims to reach the free row behind %d blocked resources\n", claims, BLOCKED_KEYS);
    /* The blocked rows now wait behind their heads: a claim finds nothing of them, reads none. */
    assert_true(blocked_due(fx, ep.id, now) <= 100 + STORE_ORDER_WALK_MAX);
    while (blocked_due(fx, ep.id, now) > 0) {
        assert_int_equal(claim(fx, "node-a", now, now + 30000, &jobs), 0);
        job_list_free(&jobs);
    }
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM hookd_deliveries WHERE endpoint_id = '%s' AND id LIKE 'dlv_bn%%'"
             " AND next_attempt_at = %lld",
             ep.id, (long long)(head_at + 1));
    assert_int_equal(fixture_sql_int(fx, sql), BLOCKED_KEYS);
    t0 = clock_mono_ms();
    assert_int_equal(claim(fx, "node-a", now + 1, now + 30000, &jobs), 0);
    print_message("# a claim past %d blocked resources: %lld ms\n", BLOCKED_KEYS, (long long)(clock_mono_ms() - t0));
    job_list_free(&jobs);

    assert_int_equal(store_endpoint_delete(fx->s, ep.id), 0); /* and its deliveries: not left to drain_due */

    /*
     * A head in flight: a claim moves its successor behind the lease, or a second from the claim
     * when that is sooner. The head delivered then wakes its successor: due at the completion.
     */
    {
        struct endpoint e2;
        struct delivery h, n, got_n;
        endpoint_make(fx, &e2);
        snprintf(sql, sizeof sql, "UPDATE hookd_endpoints SET ordering = 'key' WHERE id = '%s'", e2.id);
        fixture_sql(fx, sql);
        ordered_put(fx, &e2, ORDERING_KEY, "R", 1, now - 2, &h);
        ordered_put(fx, &e2, ORDERING_KEY, "R", 2, now - 1, &n);
        assert_int_equal(claim(fx, "node-a", now, now + 30000, &jobs), 1);
        assert_string_equal(jobs.items[0].d.id, h.id);
        struct job_list none;
        assert_int_equal(claim(fx, "node-b", now + 1, now + 30000, &none), 0);
        job_list_free(&none);
        assert_int_equal(store_delivery_get(fx->s, n.id, &got_n), 0);
        /* Behind the lease, but at most a recheck away (a wake-up a concurrent claim missed costs that). */
        assert_int_equal(got_n.next_attempt_at, now + 1 + STORE_ORDER_INFLIGHT_RECHECK_MS + 1);
        delivery_free(&got_n);
        complete(fx, &jobs.items[0], DELIVERY_DELIVERED, 1, 200, now + 5, 0, 0);
        assert_int_equal(store_delivery_get(fx->s, n.id, &got_n), 0);
        assert_int_equal(got_n.next_attempt_at, now + 5 + 12); /* the completion's time */
        delivery_free(&got_n);
        job_list_free(&jobs);
        assert_int_equal(claim(fx, "node-b", now + 20, now + 30000, &jobs), 1);
        assert_string_equal(jobs.items[0].d.id, n.id);
        job_list_free(&jobs);
        assert_int_equal(store_endpoint_delete(fx->s, e2.id), 0);
        delivery_free(&h);
        delivery_free(&n);
        endpoint_free(&e2);
    }
    delivery_free(&free_row);
    endpoint_free(&ep);
}

/* The delivery job j with its lease token moved by delta: a completion another claim fenced out. */
static struct delivery_job fenced_out(const struct delivery_job *j, int64_t delta)
{
    struct delivery_job f = *j;

    f.d.lease_token += delta;
    return f;
}

/*
 * A completion is fenced whether its delivery is ordered or not (SQLite tells
 * which by the update that matches), and only a final ordered one wakes the
 * next of its key: a fenced-out one changes nothing, an unordered one wakes
 * nothing. Every claim moves the token by exactly one, so a lease taken over
 * after it expired fences out its first holder.
 */
static void test_completion_fenced_ordered_or_not(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct delivery h, n, got;
    struct job_list jobs, again;
    struct scene sc;
    char sql[256];

    drain_due(fx);
    scene_make(fx, now - 5, &sc);
    snprintf(sql, sizeof sql, "UPDATE hookd_endpoints SET ordering = 'key' WHERE id = '%s'", sc.ep.id);
    fixture_sql(fx, sql);
    ordered_put(fx, &sc.ep, ORDERING_KEY, "F", 1, now - 2, &h);
    ordered_put(fx, &sc.ep, ORDERING_KEY, "F", 2, now - 1, &n);
    assert_int_equal(claim(fx, "node-a", now, now + 30000, &jobs), 2); /* the unordered row and h; n waits */
    assert_true(claimed(&jobs, sc.d.id) && claimed(&jobs, h.id));
    assert_int_equal(claim(fx, "node-b", now + 1, now + 30000, &again), 0); /* n is put off behind h's lease */
    job_list_free(&again);
    assert_int_equal(store_delivery_get(fx->s, n.id, &got), 0);
    int64_t waiting = got.next_attempt_at;
    assert_true(waiting > now + 1);
    delivery_free(&got);
    for (size_t i = 0; i < jobs.n; i++) {
        assert_int_equal(jobs.items[i].d.lease_token, 1);
        struct delivery_job old = fenced_out(&jobs.items[i], -1), ahead = fenced_out(&jobs.items[i], 1);
        complete(fx, &old, DELIVERY_DELIVERED, 1, 200, now, 0, HOOKD_ESTALE);
        complete(fx, &ahead, DELIVERY_DELIVERED, 1, 200, now, 0, HOOKD_ESTALE);
        assert_int_equal(store_delivery_get(fx->s, jobs.items[i].d.id, &got), 0);
        assert_int_equal(got.status, DELIVERY_PENDING);
        assert_int_equal(got.attempt_count, 0);
        assert_non_null(got.lease_owner);
        delivery_free(&got);
    }
    assert_int_equal(store_delivery_get(fx->s, n.id, &got), 0);
    assert_int_equal(got.next_attempt_at, waiting); /* no fenced-out completion woke it */
    delivery_free(&got);
    for (size_t i = 0; i < jobs.n; i++) {
        if (strcmp(jobs.items[i].d.id, sc.d.id) == 0)
            complete(fx, &jobs.items[i], DELIVERY_DELIVERED, 1, 200, now + 1, 0, 0);
    }
    assert_int_equal(store_delivery_get(fx->s, n.id, &got), 0);
    assert_int_equal(got.next_attempt_at, waiting); /* nor the unordered one */
    delivery_free(&got);
    for (size_t i = 0; i < jobs.n; i++) {
        if (strcmp(jobs.items[i].d.id, h.id) == 0)
            complete(fx, &jobs.items[i], DELIVERY_DELIVERED, 1, 200, now + 2, 0, 0);
    }
    delivery_expect(fx, h.id, DELIVERY_DELIVERED, 1);
    assert_int_equal(store_delivery_get(fx->s, n.id, &got), 0);
    assert_int_equal(got.next_attempt_at, now + 2 + 12); /* the ordered one's completion woke n */
    delivery_free(&got);
    job_list_free(&jobs);
    /* n's first lease expires and another node takes it over: token 1, then 2; the first holder is fenced out. */
    assert_int_equal(claim(fx, "node-a", now + 20, now + 100, &jobs), 1);
    assert_string_equal(jobs.items[0].d.id, n.id);
    assert_int_equal(jobs.items[0].d.lease_token, 1);
    assert_int_equal(claim(fx, "node-b", now + 101, now + 30000, &again), 1);
    assert_string_equal(again.items[0].d.id, n.id);
    assert_int_equal(again.items[0].d.lease_token, 2);
    complete(fx, &jobs.items[0], DELIVERY_DELIVERED, 1, 200, now + 102, 0, HOOKD_ESTALE);
    delivery_expect(fx, n.id, DELIVERY_PENDING, 0);
    complete(fx, &again.items[0], DELIVERY_DELIVERED, 1, 200, now + 103, 0, 0);
    delivery_expect(fx, n.id, DELIVERY_DELIVERED, 1);
    job_list_free(&jobs);
    job_list_free(&again);
    delivery_free(&h);
    delivery_free(&n);
    scene_free(&sc);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_key),
        T(test_claim_oldest_open_per_resource),
        T(test_supersede_latest),
        T(test_blocked_keys_bounded_walk),
        T(test_completion_fenced_ordered_or_not),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
