/*
 * The store conformance suite, part 2: deliveries. Every status transition,
 * leases and fencing tokens, release, disabled and deleted endpoints, lists
 * and attempts. Uses the store_*() wrappers only (fixture: store_fixture.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "store/sqlite_internal.h" /* the SQLite store's connection: its prepared statements */
#include "store/store_fixture.h"

/* ---- deliveries: status transitions ---------------------------------------- */

static void test_delivery_insert_exists(void **state)
{
    struct fixture *fx = *state;
    struct scene sc;
    struct delivery again, got;

    scene_make(fx, 1000, &sc);
    again = sc.d;
    id_new(again.id, "dlv_"); /* another id, same (event, endpoint) */
    assert_int_equal(store_delivery_insert(fx->s, &again), HOOKD_EEXISTS);
    assert_int_equal(store_delivery_get(fx->s, again.id, &got), HOOKD_ENOTFOUND);
    assert_int_equal(store_delivery_get(fx->s, sc.d.id, &got), 0);
    assert_string_equal(got.event_id, sc.ev.id);
    assert_string_equal(got.endpoint_id, sc.ep.id);
    assert_string_equal(got.account, fx->account);
    assert_int_equal(got.status, DELIVERY_PENDING);
    assert_int_equal(got.next_attempt_at, 1000);
    assert_int_equal(got.attempt_count, 0);
    assert_null(got.lease_owner);
    delivery_free(&got);
    scene_free(&sc);
}

/* The relay inserts deliveries already leased to its node. */
static void test_delivery_insert_leased(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct event ev;
    struct endpoint ep;
    struct delivery d = {.status = DELIVERY_PENDING, .lease_owner = "node-r", .lease_until = now + 60000,
                         .lease_token = 1, .next_attempt_at = now}, got;
    struct job_list jobs;

    drain_due(fx);
    event_make(fx, "order.paid", &ev);
    endpoint_make(fx, &ep);
    id_new(d.id, "dlv_");
    snprintf(d.event_id, sizeof d.event_id, "%s", ev.id);
    snprintf(d.endpoint_id, sizeof d.endpoint_id, "%s", ep.id);
    assert_int_equal(store_delivery_insert(fx->s, &d), 0);
    assert_int_equal(store_delivery_get(fx->s, d.id, &got), 0);
    assert_string_equal(got.lease_owner, "node-r");
    assert_int_equal(got.lease_until, now + 60000);
    assert_int_equal(got.lease_token, 1);
    delivery_free(&got);
    assert_int_equal(claim(fx, "node-b", now, now + 1000, &jobs), 0);
    job_list_free(&jobs);
    event_free(&ev);
    endpoint_free(&ep);
}

static void test_pending_to_delivered(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct scene sc;
    struct job_list jobs;
    struct attempt_list al;
    struct delivery got;

    drain_due(fx);
    scene_make(fx, now - 10, &sc);
    assert_int_equal(claim(fx, "node-a", now, now + 30000, &jobs), 1);
    assert_string_equal(jobs.items[0].d.id, sc.d.id);
    assert_string_equal(jobs.items[0].d.lease_owner, "node-a");
    assert_int_equal(jobs.items[0].d.lease_until, now + 30000);
    assert_int_equal(jobs.items[0].d.lease_token, 1);
    assert_string_equal(jobs.items[0].ev.id, sc.ev.id);
    assert_string_equal(jobs.items[0].ev.type, "order.paid");
    assert_string_equal(jobs.items[0].ev.payload, "{\"n\":1}");
    complete(fx, &jobs.items[0], DELIVERY_DELIVERED, 1, 200, now + 5, 0, 0);
    job_list_free(&jobs);

    assert_int_equal(store_delivery_get(fx->s, sc.d.id, &got), 0);
    assert_int_equal(got.status, DELIVERY_DELIVERED);
    assert_int_equal(got.attempt_count, 1);
    assert_int_equal(got.last_status_code, 200);
    assert_null(got.last_error);
    assert_int_equal(got.next_attempt_at, 0);
    assert_int_equal(got.first_attempt_at, now + 5);
    assert_int_equal(got.last_attempt_at, now + 5);
    assert_int_equal(got.delivered_at, now + 17);
    assert_null(got.lease_owner);
    assert_int_equal(got.lease_until, 0);
    assert_int_equal(got.lease_token, 1);
    delivery_free(&got);

    assert_int_equal(store_attempt_list(fx->s, sc.d.id, &al), 0);
    assert_int_equal(al.n, 1);
    assert_int_equal(al.items[0].n, 1);
    assert_int_equal(al.items[0].status_code, 200);
    assert_int_equal(al.items[0].started_at, now + 5);
    assert_int_equal(al.items[0].duration_ms, 12);
    assert_string_equal(al.items[0].node, "node-a");
    assert_string_equal(al.items[0].response, "ok");
    assert_string_equal(al.items[0].delivery_id, sc.d.id);
    attempt_list_free(&al);
    /* Delivered rows are never claimed again. */
    assert_int_equal(claim(fx, "node-a", now + 100000, now + 200000, &jobs), 0);
    job_list_free(&jobs);
    scene_free(&sc);
}

static void test_pending_retrying_delivered(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct scene sc;
    struct job_list jobs;
    struct delivery got;
    struct attempt_list al;
    int64_t at;

    drain_due(fx);
    scene_make(fx, now, &sc);
    assert_int_equal(claim(fx, "node-a", now, now + 30000, &jobs), 1);
    complete(fx, &jobs.items[0], DELIVERY_RETRYING, 1, 503, now, now + 5000, 0);
    job_list_free(&jobs);
    assert_int_equal(store_delivery_get(fx->s, sc.d.id, &got), 0);
    assert_int_equal(got.status, DELIVERY_RETRYING);
    assert_int_equal(got.next_attempt_at, now + 5000);
    assert_int_equal(got.last_status_code, 503);
    assert_string_equal(got.last_error, "HTTP error");
    assert_null(got.lease_owner);
    assert_int_equal(got.delivered_at, 0);
    delivery_free(&got);

    assert_int_equal(store_delivery_next_due(fx->s, &at), 0);
    assert_true(at <= now + 5000);
    assert_int_equal(claim(fx, "node-a", now + 4999, now + 40000, &jobs), 0); /* not due yet */
    job_list_free(&jobs);
    assert_int_equal(claim(fx, "node-a", now + 5000, now + 40000, &jobs), 1);
    assert_int_equal(jobs.items[0].d.lease_token, 2);
    complete(fx, &jobs.items[0], DELIVERY_DELIVERED, 2, 204, now + 5001, 0, 0);
    job_list_free(&jobs);
    delivery_expect(fx, sc.d.id, DELIVERY_DELIVERED, 2);
    assert_int_equal(store_delivery_get(fx->s, sc.d.id, &got), 0);
    assert_int_equal(got.first_attempt_at, now); /* kept from the first attempt */
    assert_int_equal(got.last_attempt_at, now + 5001);
    assert_int_equal(got.last_status_code, 204);
    assert_null(got.last_error);
    delivery_free(&got);
    assert_int_equal(store_attempt_list(fx->s, sc.d.id, &al), 0);
    assert_int_equal(al.n, 2);
    assert_int_equal(al.items[0].n, 1);
    assert_int_equal(al.items[0].status_code, 503);
    assert_string_equal(al.items[0].error, "HTTP error");
    assert_int_equal(al.items[1].n, 2);
    assert_int_equal(al.items[1].status_code, 204);
    attempt_list_free(&al);
    scene_free(&sc);
}

static void test_retrying_to_dead(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct scene sc;
    struct job_list jobs;
    struct delivery got;

    drain_due(fx);
    scene_make(fx, now, &sc);
    assert_int_equal(claim(fx, "node-a", now, now + 30000, &jobs), 1);
    complete(fx, &jobs.items[0], DELIVERY_RETRYING, 1, 500, now, now + 10, 0);
    job_list_free(&jobs);
    assert_int_equal(claim(fx, "node-a", now + 10, now + 30000, &jobs), 1);
    complete(fx, &jobs.items[0], DELIVERY_DEAD, 2, 500, now + 10, 0, 0);
    job_list_free(&jobs);
    assert_int_equal(store_delivery_get(fx->s, sc.d.id, &got), 0);
    assert_int_equal(got.status, DELIVERY_DEAD);
    assert_int_equal(got.attempt_count, 2);
    assert_int_equal(got.next_attempt_at, 0);
    assert_int_equal(got.delivered_at, 0);
    delivery_free(&got);
    assert_int_equal(claim(fx, "node-a", now + 100000, now + 200000, &jobs), 0);
    job_list_free(&jobs);
    scene_free(&sc);
}

/* Replay: a dead delivery is pending again at once, with a fresh schedule and its attempts kept; an open
 * one is refused (ECONFLICT, left as it is), however often asked. */
static void test_replay(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct scene sc;
    struct job_list jobs;
    struct delivery got;
    struct attempt_list al;

    drain_due(fx);
    scene_make(fx, now, &sc);
    /* Pending (and then leased: in flight): not replayable. */
    assert_int_equal(store_delivery_replay(fx->s, sc.d.id, now, &got), HOOKD_ECONFLICT);
    assert_int_equal(got.status, DELIVERY_PENDING);
    delivery_free(&got);
    assert_int_equal(claim(fx, "node-a", now, now + 30000, &jobs), 1);
    assert_int_equal(store_delivery_replay(fx->s, sc.d.id, now, &got), HOOKD_ECONFLICT);
    assert_string_equal(got.lease_owner, "node-a");
    delivery_free(&got);
    complete(fx, &jobs.items[0], DELIVERY_DEAD, 1, 500, now, 0, 0);
    job_list_free(&jobs);

    assert_int_equal(store_delivery_replay(fx->s, sc.d.id, now + 50, &got), 0);
    assert_int_equal(got.status, DELIVERY_PENDING);
    assert_int_equal(got.attempt_count, 0);
    assert_int_equal(got.next_attempt_at, now + 50);
    assert_int_equal(got.first_attempt_at, 0);
    assert_null(got.lease_owner);
    delivery_free(&got);
    /* A second replay finds it pending: one send, not two. */
    assert_int_equal(store_delivery_replay(fx->s, sc.d.id, now + 60, &got), HOOKD_ECONFLICT);
    delivery_free(&got);
    assert_int_equal(claim(fx, "node-b", now + 100, now + 30000, &jobs), 1);
    assert_string_equal(jobs.items[0].d.id, sc.d.id);
    complete(fx, &jobs.items[0], DELIVERY_DELIVERED, 1, 200, now + 100, 0, 0);
    job_list_free(&jobs);
    assert_int_equal(store_attempt_list(fx->s, sc.d.id, &al), 0);
    assert_int_equal(al.n, 2);
    assert_int_equal(al.items[0].status_code, 500); /* in the order they were made */
    assert_int_equal(al.items[1].status_code, 200);
    attempt_list_free(&al);
    /* Delivered: may be sent again (a resend on request). */
    assert_int_equal(store_delivery_replay(fx->s, sc.d.id, now + 200, &got), 0);
    assert_int_equal(got.delivered_at, 0);
    delivery_free(&got);
    assert_int_equal(store_delivery_replay(fx->s, "dlv_absent", now, &got), HOOKD_ENOTFOUND);
    scene_free(&sc);
}

/* ---- deliveries: leases and fencing ----------------------------------------- */

static void test_claim_skips_leased(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct scene a, b;
    struct job_list jobs;

    drain_due(fx);
    scene_make(fx, now - 20, &a);
    scene_make(fx, now - 10, &b);
    assert_int_equal(store_delivery_claim_due(fx->s, "node-a", now, now + 30000, 1, &(struct lease_limits){0}, &jobs), 0);
    assert_int_equal(jobs.n, 1);
    assert_string_equal(jobs.items[0].d.id, a.d.id); /* earliest first */
    job_list_free(&jobs);
    assert_int_equal(claim(fx, "node-b", now, now + 30000, &jobs), 1);
    assert_string_equal(jobs.items[0].d.id, b.d.id);
    job_list_free(&jobs);
    assert_int_equal(claim(fx, "node-c", now + 29999, now + 60000, &jobs), 0);
    job_list_free(&jobs);
    scene_free(&a);
    scene_free(&b);
}

static void test_expired_lease_reclaimed_and_stale_complete(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct scene sc;
    struct job_list first, second;
    struct attempt_list al;
    struct delivery got;

    drain_due(fx);
    scene_make(fx, now, &sc);
    assert_int_equal(claim(fx, "node-a", now, now + 1000, &first), 1);
    assert_int_equal(first.items[0].d.lease_token, 1);
    assert_int_equal(claim(fx, "node-b", now + 2000, now + 32000, &second), 1);
    assert_string_equal(second.items[0].d.id, sc.d.id);
    assert_string_equal(second.items[0].d.lease_owner, "node-b");
    assert_int_equal(second.items[0].d.lease_token, 2);

    /* node-a comes back late: fenced out, and nothing changes. */
    complete(fx, &first.items[0], DELIVERY_DELIVERED, 1, 200, now + 2500, 0, HOOKD_ESTALE);
    assert_int_equal(store_delivery_get(fx->s, sc.d.id, &got), 0);
    assert_int_equal(got.status, DELIVERY_PENDING);
    assert_int_equal(got.attempt_count, 0);
    assert_string_equal(got.lease_owner, "node-b");
    assert_int_equal(got.lease_token, 2);
    assert_int_equal(got.first_attempt_at, 0);
    delivery_free(&got);
    assert_int_equal(store_attempt_list(fx->s, sc.d.id, &al), 0);
    assert_int_equal(al.n, 0);
    attempt_list_free(&al);
    /* The wrong owner with the right token is fenced out too. */
    free(first.items[0].d.lease_owner);
    first.items[0].d.lease_owner = strdup("node-a");
    first.items[0].d.lease_token = 2;
    complete(fx, &first.items[0], DELIVERY_DELIVERED, 1, 200, now + 2500, 0, HOOKD_ESTALE);

    complete(fx, &second.items[0], DELIVERY_DELIVERED, 1, 200, now + 2600, 0, 0);
    delivery_expect(fx, sc.d.id, DELIVERY_DELIVERED, 1);
    job_list_free(&first);
    job_list_free(&second);
    scene_free(&sc);
}

/* The same node re-claims after its own lease expired: the old token is stale. */
static void test_stale_token_same_owner(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct scene sc;
    struct job_list first, second;
    struct attempt_list al;

    drain_due(fx);
    scene_make(fx, now, &sc);
    assert_int_equal(claim(fx, "node-a", now, now + 1000, &first), 1);
    assert_int_equal(claim(fx, "node-a", now + 2000, now + 32000, &second), 1);
    assert_int_equal(second.items[0].d.lease_token, first.items[0].d.lease_token + 1);
    complete(fx, &first.items[0], DELIVERY_DELIVERED, 1, 200, now + 2500, 0, HOOKD_ESTALE);
    delivery_expect(fx, sc.d.id, DELIVERY_PENDING, 0);
    assert_int_equal(store_delivery_release(fx->s, sc.d.id, "node-a", first.items[0].d.lease_token), HOOKD_ESTALE);
    assert_int_equal(store_attempt_list(fx->s, sc.d.id, &al), 0);
    assert_int_equal(al.n, 0);
    attempt_list_free(&al);
    complete(fx, &second.items[0], DELIVERY_DELIVERED, 1, 200, now + 2600, 0, 0);
    delivery_expect(fx, sc.d.id, DELIVERY_DELIVERED, 1);
    job_list_free(&first);
    job_list_free(&second);
    scene_free(&sc);
}

static void test_release_and_release_node(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct scene a, b;
    struct job_list jobs;
    struct delivery got;

    drain_due(fx);
    scene_make(fx, now - 2, &a);
    scene_make(fx, now - 1, &b);
    assert_int_equal(claim(fx, "node-a", now, now + 30000, &jobs), 2);
    assert_int_equal(store_delivery_release(fx->s, a.d.id, "node-a", jobs.items[0].d.lease_token + 1), HOOKD_ESTALE);
    assert_int_equal(store_delivery_release(fx->s, a.d.id, "node-x", jobs.items[0].d.lease_token), HOOKD_ESTALE);
    assert_int_equal(store_delivery_release(fx->s, a.d.id, "node-a", jobs.items[0].d.lease_token), 0);
    assert_int_equal(store_delivery_get(fx->s, a.d.id, &got), 0);
    assert_null(got.lease_owner);
    assert_int_equal(got.lease_token, 1);
    assert_int_equal(got.status, DELIVERY_PENDING);
    delivery_free(&got);
    job_list_free(&jobs);
    /* Released: claimable again at once, with a new token. */
    assert_int_equal(claim(fx, "node-c", now, now + 30000, &jobs), 1);
    assert_string_equal(jobs.items[0].d.id, a.d.id);
    assert_int_equal(jobs.items[0].d.lease_token, 2);
    job_list_free(&jobs);

    /* node-a restarts: its lease on b goes, node-c keeps a. */
    assert_int_equal(store_delivery_release_node(fx->s, "node-a"), 0);
    assert_int_equal(store_delivery_get(fx->s, b.d.id, &got), 0);
    assert_null(got.lease_owner);
    delivery_free(&got);
    assert_int_equal(store_delivery_get(fx->s, a.d.id, &got), 0);
    assert_string_equal(got.lease_owner, "node-c");
    delivery_free(&got);
    assert_int_equal(claim(fx, "node-d", now, now + 30000, &jobs), 1);
    assert_string_equal(jobs.items[0].d.id, b.d.id);
    job_list_free(&jobs);
    scene_free(&a);
    scene_free(&b);
}

static void test_disabled_endpoint_not_claimed(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms(), at;
    struct scene sc;
    struct job_list jobs;

    drain_due(fx);
    scene_make(fx, now, &sc);
    assert_int_equal(store_endpoint_set_enabled(fx->s, sc.ep.id, false, "paused", now), 0);
    assert_int_equal(claim(fx, "node-a", now, now + 30000, &jobs), 0);
    job_list_free(&jobs);
    assert_int_equal(store_endpoint_set_enabled(fx->s, sc.ep.id, true, NULL, now), 0);
    assert_int_equal(store_delivery_next_due(fx->s, &at), 0);
    assert_int_equal(at, now);
    assert_int_equal(store_endpoint_set_enabled(fx->s, sc.ep.id, false, "paused", now), 0);
    /* next_due ignores it too. */
    if (!getenv("HOOKD_TEST_STORE"))
        assert_int_equal(store_delivery_next_due(fx->s, &at), HOOKD_ENOTFOUND);
    assert_int_equal(store_endpoint_set_enabled(fx->s, sc.ep.id, true, NULL, now), 0);
    assert_int_equal(claim(fx, "node-a", now, now + 30000, &jobs), 1);
    job_list_free(&jobs);
    scene_free(&sc);
}

static void test_next_due(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms(), at;
    struct scene a, b;
    struct job_list jobs;

    drain_due(fx);
    if (!getenv("HOOKD_TEST_STORE"))
        assert_int_equal(store_delivery_next_due(fx->s, &at), HOOKD_ENOTFOUND);
    scene_make(fx, now + 500000, &a);
    scene_make(fx, now + 700000, &b);
    assert_int_equal(store_delivery_next_due(fx->s, &at), 0);
    assert_int_equal(at, now + 500000);
    /* A leased row does not count until its lease expires. */
    assert_int_equal(store_delivery_claim_due(fx->s, "node-a", now + 500000, now + 900000, 1, &(struct lease_limits){0}, &jobs), 0);
    assert_int_equal(jobs.n, 1);
    job_list_free(&jobs);
    assert_int_equal(store_delivery_next_due(fx->s, &at), 0);
    assert_int_equal(at, now + 700000);
    scene_free(&a);
    scene_free(&b);
}

static void test_complete_disables_endpoint(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct scene sc;
    struct job_list jobs;
    struct endpoint ep;
    struct delivery_result r;

    drain_due(fx);
    scene_make(fx, now, &sc);
    assert_int_equal(claim(fx, "node-a", now, now + 30000, &jobs), 1);
    r = (struct delivery_result){.delivery_id = sc.d.id, .lease_owner = "node-a",
                                 .lease_token = jobs.items[0].d.lease_token, .status = DELIVERY_DEAD,
                                 .attempt = {.n = 1, .started_at = now, .status_code = 410, .error = "gone"},
                                 .disable_endpoint_reason = "endpoint answered 410 Gone"};
    assert_int_equal(store_delivery_complete(fx->s, &r, now + 1), 0);
    job_list_free(&jobs);
    assert_int_equal(store_endpoint_get(fx->s, sc.ep.id, &ep), 0);
    assert_false(ep.enabled);
    assert_string_equal(ep.disabled_reason, "endpoint answered 410 Gone");
    endpoint_free(&ep);
    delivery_expect(fx, sc.d.id, DELIVERY_DEAD, 1);
    scene_free(&sc);
}

static void test_endpoint_delete_kills_open_deliveries(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct event e1, e2, e3;
    struct endpoint ep;
    struct delivery pending, retrying, delivered, got;
    struct job_list jobs;

    drain_due(fx);
    endpoint_make(fx, &ep);
    event_make(fx, "a.b", &e1);
    event_make(fx, "a.b", &e2);
    event_make(fx, "a.b", &e3);
    delivery_make(fx, e1.id, ep.id, now - 3, &delivered);
    delivery_make(fx, e2.id, ep.id, now - 2, &retrying);
    assert_int_equal(claim(fx, "node-a", now, now + 30000, &jobs), 2);
    complete(fx, &jobs.items[0], DELIVERY_DELIVERED, 1, 200, now, 0, 0);
    complete(fx, &jobs.items[1], DELIVERY_RETRYING, 1, 500, now, now + 1, 0);
    job_list_free(&jobs);
    delivery_make(fx, e3.id, ep.id, now, &pending);
    assert_int_equal(claim(fx, "node-a", now, now + 30000, &jobs), 1); /* leased while deleted */
    job_list_free(&jobs);

    assert_int_equal(store_endpoint_delete(fx->s, ep.id), 0);
    assert_int_equal(store_delivery_get(fx->s, pending.id, &got), 0);
    assert_int_equal(got.status, DELIVERY_DEAD);
    assert_string_equal(got.last_error, "endpoint deleted");
    assert_null(got.lease_owner);
    delivery_free(&got);
    assert_int_equal(store_delivery_get(fx->s, retrying.id, &got), 0);
    assert_int_equal(got.status, DELIVERY_DEAD);
    assert_string_equal(got.last_error, "endpoint deleted");
    assert_int_equal(got.next_attempt_at, 0);
    delivery_free(&got);
    delivery_expect(fx, delivered.id, DELIVERY_DELIVERED, 1);
    assert_int_equal(store_endpoint_delete(fx->s, ep.id), HOOKD_ENOTFOUND);
    assert_int_equal(claim(fx, "node-a", now + 100000, now + 200000, &jobs), 0);
    job_list_free(&jobs);
    event_free(&e1);
    event_free(&e2);
    event_free(&e3);
    endpoint_free(&ep);
    delivery_free(&pending);
    delivery_free(&retrying);
    delivery_free(&delivered);
}

/* ---- deliveries: lists ------------------------------------------------------ */

static void test_delivery_list_filters_cursor(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct event evs[4];
    struct endpoint ep1, ep2;
    struct delivery ds[5];
    struct delivery_list l;
    struct delivery_filter f = {.account = fx->account, .status = -1, .limit = 2};
    struct job_list jobs;

    drain_due(fx);
    endpoint_make(fx, &ep1);
    endpoint_make(fx, &ep2);
    for (int i = 0; i < 4; i++)
        event_make(fx, "order.paid", &evs[i]);
    for (int i = 0; i < 4; i++)
        delivery_make(fx, evs[i].id, ep1.id, now, &ds[i]);
    delivery_make(fx, evs[0].id, ep2.id, now + 100000, &ds[4]);
    assert_int_equal(store_delivery_claim_due(fx->s, "node-a", now, now + 1000, 1, &(struct lease_limits){0}, &jobs), 0);
    assert_int_equal(jobs.n, 1);
    complete(fx, &jobs.items[0], DELIVERY_DELIVERED, 1, 200, now, 0, 0);
    job_list_free(&jobs);

    /* Pages newest first, by id, until the list is exhausted. */
    char seen[5][HOOKD_ID_MAX];
    size_t n_seen = 0;
    for (int page = 0; page < 10; page++) {
        assert_int_equal(store_delivery_list(fx->s, &f, &l), 0);
        for (size_t i = 0; i < l.n; i++) {
            assert_true(n_seen < 5);
            if (n_seen)
                assert_true(strcmp(seen[n_seen - 1], l.items[i].id) > 0);
            snprintf(seen[n_seen++], HOOKD_ID_MAX, "%s", l.items[i].id);
        }
        size_t n = l.n;
        delivery_list_free(&l);
        if (n < 2)
            break;
        f.before_id = seen[n_seen - 1];
    }
    assert_int_equal(n_seen, 5);

    f = (struct delivery_filter){.endpoint_id = ep2.id, .status = -1, .limit = 10};
    assert_int_equal(store_delivery_list(fx->s, &f, &l), 0);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.items[0].id, ds[4].id);
    delivery_list_free(&l);
    f = (struct delivery_filter){.event_id = evs[0].id, .status = -1, .limit = 10};
    assert_int_equal(store_delivery_list(fx->s, &f, &l), 0);
    assert_int_equal(l.n, 2);
    delivery_list_free(&l);
    f = (struct delivery_filter){.account = fx->account, .status = DELIVERY_DELIVERED, .limit = 10};
    assert_int_equal(store_delivery_list(fx->s, &f, &l), 0);
    assert_int_equal(l.n, 1);
    assert_int_equal(l.items[0].status, DELIVERY_DELIVERED);
    delivery_list_free(&l);
    f = (struct delivery_filter){.account = fx->account, .status = DELIVERY_PENDING, .endpoint_id = ep1.id,
                                 .limit = 10};
    assert_int_equal(store_delivery_list(fx->s, &f, &l), 0);
    assert_int_equal(l.n, 3);
    delivery_list_free(&l);
    /* created_at defaults to the insert time. */
    f = (struct delivery_filter){.account = fx->account, .status = -1, .since = now + 100000, .limit = 10};
    assert_int_equal(store_delivery_list(fx->s, &f, &l), 0);
    assert_int_equal(l.n, 0);
    delivery_list_free(&l);
    f = (struct delivery_filter){.account = fx->account, .status = -1, .since = now - 1000, .until = now + 100000,
                                 .limit = 10};
    assert_int_equal(store_delivery_list(fx->s, &f, &l), 0);
    assert_int_equal(l.n, 5);
    delivery_list_free(&l);
    f = (struct delivery_filter){.account = fx->account, .status = -1, .until = now - 1000, .limit = 10};
    assert_int_equal(store_delivery_list(fx->s, &f, &l), 0);
    assert_int_equal(l.n, 0);
    delivery_list_free(&l);
    f = (struct delivery_filter){.account = fx->account, .status = 99, .limit = 10};
    assert_int_equal(store_delivery_list(fx->s, &f, &l), HOOKD_EINVAL);

    for (int i = 0; i < 4; i++) {
        event_free(&evs[i]);
        delivery_free(&ds[i]);
    }
    delivery_free(&ds[4]);
    endpoint_free(&ep1);
    endpoint_free(&ep2);
}

/*
 * own_endpoints (an account token's view): of the account's deliveries only
 * those to endpoints of that account; one to an account-less endpoint (the
 * operator's), or to an endpoint of another account, is out of the list and
 * the count, whatever other filters come with it.
 */
static void test_delivery_list_own_endpoints(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct endpoint own, ops, other;
    struct event ev;
    struct delivery ds[3];
    struct delivery_list l;
    int64_t n = -1;

    endpoint_make(fx, &own);
    endpoint_make(fx, &ops);
    endpoint_make(fx, &other);
    free(ops.account);
    ops.account = NULL;
    assert_int_equal(store_endpoint_update(fx->s, &ops), 0);
    free(other.account);
    other.account = strdup("acct_someone_else");
    assert_int_equal(store_endpoint_update(fx->s, &other), 0);
    event_make(fx, "order.paid", &ev);
    delivery_make(fx, ev.id, own.id, now, &ds[0]);
    delivery_make(fx, ev.id, ops.id, now, &ds[1]);
    delivery_make(fx, ev.id, other.id, now, &ds[2]);

    struct delivery_filter all = {.account = fx->account, .event_id = ev.id, .status = -1, .limit = 10};
    struct delivery_filter held = all;
    held.own_endpoints = true;
    assert_int_equal(store_delivery_list(fx->s, &all, &l), 0);
    assert_int_equal(l.n, 3);
    delivery_list_free(&l);
    assert_int_equal(store_delivery_list(fx->s, &held, &l), 0);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.items[0].id, ds[0].id);
    delivery_list_free(&l);
    assert_int_equal(store_delivery_count(fx->s, &held, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(store_delivery_count(fx->s, &all, &n), 0);
    assert_int_equal(n, 3);
    held.endpoint_id = ops.id;
    assert_int_equal(store_delivery_list(fx->s, &held, &l), 0);
    assert_int_equal(l.n, 0);
    delivery_list_free(&l);
    held.endpoint_id = NULL;
    held.status = DELIVERY_PENDING;
    held.before_id = "dlv_zzzzzzzz";
    assert_int_equal(store_delivery_list(fx->s, &held, &l), 0);
    assert_int_equal(l.n, 1);
    delivery_list_free(&l);
    /* Without an account the flag means nothing (no account to hold to). */
    held = (struct delivery_filter){.event_id = ev.id, .own_endpoints = true, .status = -1, .limit = 10};
    assert_int_equal(store_delivery_count(fx->s, &held, &n), 0);
    assert_int_equal(n, 3);

    for (int i = 0; i < 3; i++)
        delivery_free(&ds[i]);
    event_free(&ev);
    endpoint_free(&own);
    endpoint_free(&ops);
    endpoint_free(&other);
}

/*
 * A claim takes no delivery whose event row is gone (deleted by SQL): it is
 * neither leased nor returned, so no lease is left behind; its neighbours are
 * claimed with their own event's fields.
 */
static void test_claim_skips_delivery_without_event(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct event evs[3];
    struct endpoint ep;
    struct delivery ds[3], got;
    struct job_list jobs;
    char sql[160];

    drain_due(fx);
    endpoint_make(fx, &ep);
    for (int i = 0; i < 3; i++) {
        event_make(fx, i == 1 ? "order.gone" : "order.paid", &evs[i]);
        delivery_make(fx, evs[i].id, ep.id, now - 10 + i, &ds[i]);
    }
    snprintf(sql, sizeof sql, "DELETE FROM hookd_outbox WHERE id = '%s'", evs[1].id);
    fixture_sql(fx, sql);
    assert_int_equal(claim(fx, "node-a", now, now + 30000, &jobs), 2);
    assert_string_equal(jobs.items[0].d.id, ds[0].id);
    assert_string_equal(jobs.items[0].ev.id, evs[0].id);
    assert_string_equal(jobs.items[0].ev.type, "order.paid");
    assert_string_equal(jobs.items[1].d.id, ds[2].id);
    assert_string_equal(jobs.items[1].ev.id, evs[2].id);
    assert_string_equal(jobs.items[1].ev.payload, evs[2].payload);
    assert_int_equal(jobs.items[1].ev.seq, evs[2].seq);
    job_list_free(&jobs);
    assert_int_equal(store_delivery_get(fx->s, ds[1].id, &got), 0);
    assert_null(got.lease_owner);
    assert_int_equal(got.status, DELIVERY_PENDING);
    delivery_free(&got);
    for (int i = 0; i < 3; i++) {
        event_free(&evs[i]);
        delivery_free(&ds[i]);
    }
    endpoint_free(&ep);
}

/*
 * Every status as a filter, alone, with the endpoint and with the account,
 * in lists and counts: each finds its own rows and no other. (On PostgreSQL
 * hookd_deliveries_status leaves delivered rows out, and the other statuses'
 * statements say so in their text: a delivered filter must still find them,
 * the others must not lose theirs.)
 */
static void test_delivery_list_count_each_status(void **state)
{
    enum { PER_STATUS = 2, STATUSES = DELIVERY_SKIPPED + 1 };
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct endpoint ep, other;
    struct event evs[STATUSES * PER_STATUS];
    struct delivery ds[STATUSES * PER_STATUS], noise;
    struct delivery_list l;
    int64_t n;

    drain_due(fx);
    endpoint_make(fx, &ep);
    endpoint_make(fx, &other);
    for (int i = 0; i < STATUSES * PER_STATUS; i++) {
        event_make(fx, "order.paid", &evs[i]);
        memset(&ds[i], 0, sizeof ds[i]);
        id_new(ds[i].id, "dlv_");
        snprintf(ds[i].event_id, sizeof ds[i].event_id, "%s", evs[i].id);
        snprintf(ds[i].endpoint_id, sizeof ds[i].endpoint_id, "%s", ep.id);
        ds[i].account = fx->account;
        ds[i].status = (enum delivery_status)(i / PER_STATUS);
        ds[i].next_attempt_at = delivery_status_open(ds[i].status) ? now + 3600000 : 0;
        assert_int_equal(store_delivery_insert(fx->s, &ds[i]), 0);
        ds[i].account = NULL;
    }
    /* A delivered row of another endpoint: the endpoint filters must leave it out. */
    memset(&noise, 0, sizeof noise);
    id_new(noise.id, "dlv_");
    snprintf(noise.event_id, sizeof noise.event_id, "%s", evs[0].id);
    snprintf(noise.endpoint_id, sizeof noise.endpoint_id, "%s", other.id);
    noise.account = fx->account;
    noise.status = DELIVERY_DELIVERED;
    assert_int_equal(store_delivery_insert(fx->s, &noise), 0);
    noise.account = NULL;
    for (int st = 0; st < STATUSES; st++) {
        const struct delivery_filter filters[] = {
            {.account = fx->account, .status = st, .limit = 100},
            {.endpoint_id = ep.id, .status = st, .limit = 100},
            {.endpoint_id = ep.id, .account = fx->account, .status = st, .limit = 100},
        };
        for (size_t k = 0; k < sizeof filters / sizeof filters[0]; k++) {
            bool extra = k == 0 && st == DELIVERY_DELIVERED; /* the other endpoint's row */
            assert_int_equal(store_delivery_list(fx->s, &filters[k], &l), 0);
            assert_int_equal(l.n, PER_STATUS + extra);
            for (size_t i = 0; i < l.n; i++)
                assert_int_equal(l.items[i].status, st);
            if (!extra) {
                /* Newest first: the later of the two comes first. */
                assert_string_equal(l.items[0].id, ds[st * PER_STATUS + 1].id);
                assert_string_equal(l.items[1].id, ds[st * PER_STATUS].id);
            }
            delivery_list_free(&l);
            assert_int_equal(store_delivery_count(fx->s, &filters[k], &n), 0);
            assert_int_equal(n, PER_STATUS + extra);
        }
    }
    for (int i = 0; i < STATUSES * PER_STATUS; i++) {
        event_free(&evs[i]);
        delivery_free(&ds[i]);
    }
    delivery_free(&noise);
    endpoint_free(&ep);
    endpoint_free(&other);
}

/*
 * Lease renewal: fenced by owner and token, open deliveries only; a lease past
 * its end that no claim has taken is still the holder's; the caps count the
 * renewed lease (PostgreSQL: hookd_inflight follows).
 */
static void test_renew(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct scene a, b, c;
    struct delivery a2, got;
    struct event ev2;
    struct job_list jobs, taken;

    drain_due(fx);
    scene_make(fx, now - 3, &a);
    scene_make(fx, now - 2, &b);
    scene_make(fx, now - 1, &c);
    assert_int_equal(claim(fx, "node-a", now, now + 1000, &jobs), 3);
    assert_string_equal(jobs.items[0].d.id, a.d.id);
    assert_string_equal(jobs.items[1].d.id, b.d.id);
    assert_string_equal(jobs.items[2].d.id, c.d.id);
    complete(fx, &jobs.items[2], DELIVERY_DELIVERED, 1, 200, now + 10, 0, 0);

    {
        const char *ids[] = {a.d.id, b.d.id, c.d.id, "dlv_unknown"};
        int64_t tokens[] = {jobs.items[0].d.lease_token, jobs.items[1].d.lease_token + 1,
                            jobs.items[2].d.lease_token, 1};
        bool renewed[4] = {true, true, true, true};
        assert_int_equal(store_delivery_renew(fx->s, "node-a", ids, tokens, 4, now + 60000, renewed), 0);
        assert_true(renewed[0]);
        assert_false(renewed[1]); /* not its token */
        assert_false(renewed[2]); /* recorded: no lease left */
        assert_false(renewed[3]);
        /* Another node cannot renew what node-a holds. */
        assert_int_equal(store_delivery_renew(fx->s, "node-x", ids, tokens, 1, now + 90000, renewed), 0);
        assert_false(renewed[0]);
        assert_int_equal(store_delivery_renew(fx->s, "node-a", ids, tokens, 0, now + 90000, NULL), 0);
    }
    assert_int_equal(store_delivery_get(fx->s, a.d.id, &got), 0);
    assert_int_equal(got.lease_until, now + 60000);
    assert_string_equal(got.lease_owner, "node-a");
    assert_int_equal(got.lease_token, jobs.items[0].d.lease_token);
    delivery_free(&got);
    delivery_expect(fx, c.d.id, DELIVERY_DELIVERED, 1);

    /* Past the first lease: node-b takes b (not renewed), not a; a's endpoint counts a's renewed lease. */
    event_make(fx, "order.paid", &ev2);
    delivery_make(fx, ev2.id, a.ep.id, now, &a2);
    assert_int_equal(claim_capped(fx, "node-b", now + 2000, now + 32000, 100, 1, &taken), 1);
    assert_string_equal(taken.items[0].d.id, b.d.id);
    /* node-a's renewal of b now meets node-b's lease: fenced out, node-b's lease untouched. */
    {
        const char *ids[] = {b.d.id};
        int64_t tokens[] = {jobs.items[1].d.lease_token};
        bool renewed[1];
        assert_int_equal(store_delivery_renew(fx->s, "node-a", ids, tokens, 1, now + 90000, renewed), 0);
        assert_false(renewed[0]);
    }
    assert_int_equal(store_delivery_get(fx->s, b.d.id, &got), 0);
    assert_string_equal(got.lease_owner, "node-b");
    assert_int_equal(got.lease_until, now + 32000);
    delivery_free(&got);
    complete(fx, &taken.items[0], DELIVERY_DELIVERED, 1, 200, now + 2100, 0, 0);
    job_list_free(&taken);

    /* A lease past its end that nobody took yet is still node-a's: renewed, so no claim takes it. */
    {
        const char *ids[] = {a.d.id};
        int64_t tokens[] = {jobs.items[0].d.lease_token};
        bool renewed[1];
        assert_int_equal(store_delivery_renew(fx->s, "node-a", ids, tokens, 1, now + 61000, renewed), 0);
        assert_true(renewed[0]);
        assert_int_equal(store_delivery_renew(fx->s, "node-a", ids, tokens, 1, now + 120000, renewed), 0);
        assert_true(renewed[0]);
    }
    assert_int_equal(claim_capped(fx, "node-b", now + 100000, now + 130000, 100, 1, &taken), 0);
    job_list_free(&taken);
    /* Once it ends unrenewed, a claim takes it, and then its second delivery once a is done. */
    assert_int_equal(claim_capped(fx, "node-b", now + 121000, now + 150000, 100, 1, &taken), 1);
    assert_string_equal(taken.items[0].d.id, a.d.id);
    job_list_free(&taken);
    job_list_free(&jobs);
    delivery_free(&a2);
    event_free(&ev2);
    scene_free(&a);
    scene_free(&b);
    scene_free(&c);
}

/* ---- the status checks (SQLite: comparisons, no ephemeral table) ------------ */

/* How many of the opcodes of SQLite's program for sql are `opcode`. */
static int sqlite_opcodes(struct fixture *fx, const char *sql, const char *opcode)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    char *q = sqlite3_mprintf("EXPLAIN %s", sql);
    int n = 0, rc = q ? sqlite3_open(fx->dsn + 7, &db) : SQLITE_NOMEM;

    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, q, -1, &st, NULL);
    if (rc != SQLITE_OK)
        print_error("%s: %s\n", sql, sqlite3_errmsg(db));
    while (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        n += strcmp((const char *)sqlite3_column_text(st, 1), opcode) == 0;
    sqlite3_finalize(st);
    sqlite3_close(db);
    sqlite3_free(q);
    assert_int_equal(rc, SQLITE_OK);
    return n;
}

/* Whether sql, run on fx's store through a connection of its own, succeeds. */
static bool sql_ok(struct fixture *fx, const char *sql)
{
    bool ok;

    if (strncmp(fx->dsn, "sqlite:", 7) == 0) {
        sqlite3 *db = NULL;
        ok = sqlite3_open(fx->dsn + 7, &db) == SQLITE_OK && sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK;
        sqlite3_close(db);
    } else {
        PGconn *c = PQconnectdb(fx->dsn);
        PGresult *r = PQstatus(c) == CONNECTION_OK ? PQexec(c, sql) : NULL;
        ok = r && PQresultStatus(r) == PGRES_COMMAND_OK;
        PQclear(r);
        PQfinish(c);
    }
    return ok;
}

/*
 * A delivery's status is checked at every write, written by hookd or by SQL:
 * each status is accepted, anything else refused. On SQLite the check and the
 * health index's predicate are comparisons (migration
 * deliveries_status_compare): an IN list of more than two values made SQLite
 * build an ephemeral table at every insert and completion of a delivery. The
 * health queries still find their index.
 */
static void test_status_checks(void **state)
{
    static const char *const statuses[] = {"retrying", "delivered", "dead", "superseded", "skipped", "pending"};
    static const char *const refused[] = {"bogus", "Pending", "pending ", "", "delivered'); --"};
    struct fixture *fx = *state;
    struct scene sc;
    char sql[512], plan[4096];

    scene_make(fx, clock_now_ms(), &sc);
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++) {
        snprintf(sql, sizeof sql, "UPDATE hookd_deliveries SET status = '%s' WHERE id = '%s'", statuses[i], sc.d.id);
        assert_true(sql_ok(fx, sql));
    }
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char *q = sqlite3_mprintf("UPDATE hookd_deliveries SET status = %Q WHERE id = %Q", refused[i], sc.d.id);
        assert_non_null(q);
        assert_false(sql_ok(fx, q));
        sqlite3_free(q);
    }
    snprintf(sql, sizeof sql, "UPDATE hookd_deliveries SET status = NULL WHERE id = '%s'", sc.d.id);
    assert_false(sql_ok(fx, sql));
    scene_free(&sc);
    if (strncmp(fx->dsn, "sqlite:", 7) != 0)
        return;
    assert_int_equal(sqlite_opcodes(fx,
                                    "INSERT INTO hookd_deliveries(id, event_id, endpoint_id, status, created_at)"
                                    " VALUES ('dlv_x', 'evt_x', 'ep_x', 'pending', 0)",
                                    "OpenEphemeral"),
                     0);
    assert_int_equal(sqlite_opcodes(fx,
                                    "UPDATE hookd_deliveries SET status = 'delivered', lease_owner = NULL"
                                    " WHERE id = 'dlv_x'",
                                    "OpenEphemeral"),
                     0);
    fixture_plan(fx,
                 "SELECT status, count(*) FROM hookd_deliveries WHERE endpoint_id = ?1 AND (status = 'pending'"
                 " OR status = 'retrying' OR status = 'dead' OR status = 'skipped') GROUP BY status",
                 "", plan, sizeof plan);
    assert_non_null(strstr(plan, "hookd_deliveries_endpoint_status"));
}

/*
 * On SQLite, the writes of a delivery's life (its fan-out insert, the claim's
 * lease, the completion, its attempt) have no RETURNING clause and no
 * ephemeral table: SQLite runs RETURNING as a trigger, which gives the
 * one-row write a statement journal (a copy of every page it writes) and an
 * ephemeral table for its rows, more than the write itself costs. Read from
 * the statements the store prepared for one delivery's life, so a clause
 * added back to any of them fails here.
 */
static void test_lifecycle_writes_plain(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct job_list jobs;
    struct scene sc;
    int seen = 0;

    if (strncmp(fx->dsn, "sqlite:", 7) != 0)
        return;
    drain_due(fx);
    scene_make(fx, now - 1, &sc);
    assert_int_equal(claim(fx, "node-a", now, now + 30000, &jobs), 1);
    complete(fx, &jobs.items[0], DELIVERY_DELIVERED, 1, 200, now, 0, 0);
    job_list_free(&jobs);
    for (sqlite3_stmt *st = sqlite3_next_stmt(fx->s->db, NULL); st != NULL; st = sqlite3_next_stmt(fx->s->db, st)) {
        const char *sql = sqlite3_sql(st);
        if (strncmp(sql, "INSERT INTO hookd_deliveries", 28) != 0 && strncmp(sql, "UPDATE hookd_deliveries", 23) != 0 &&
            strncmp(sql, "INSERT INTO hookd_attempts", 26) != 0)
            continue;
        seen++;
        if (strstr(sql, "RETURNING") != NULL || sqlite_opcodes(fx, sql, "OpenEphemeral") != 0)
            print_error("a delivery's write keeps rows aside: %s\n", sql);
        assert_null(strstr(sql, "RETURNING"));
        assert_int_equal(sqlite_opcodes(fx, sql, "OpenEphemeral"), 0);
    }
    assert_true(seen >= 4); /* the insert, the lease, the completion and the attempt at least */
    scene_free(&sc);
}

/*
 * The probe of a half-open breaker is the delivery whose lease is the
 * breaker's probe_until: its renewal moves probe_until with it, so no claim
 * takes a second probe while it is renewed; a renewal of another delivery
 * leaves the breaker alone. PostgreSQL: a breaker row another transaction
 * holds is not waited for, and its probe is then not renewed either (the two
 * stay in step for the next renewal).
 */
static void test_renew_probe(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct scene a;
    struct delivery second;
    struct event ev2;
    struct job_list jobs, none;
    char sql[512];

    drain_due(fx);
    scene_make(fx, now - 1, &a);
    event_make(fx, "order.paid", &ev2);
    delivery_make(fx, ev2.id, a.ep.id, now - 1, &second);
    snprintf(sql, sizeof sql,
             "INSERT INTO hookd_endpoint_state(endpoint_id, breaker, next_probe_at) VALUES ('%s', 'open', %lld)",
             a.ep.id, (long long)(now - 1));
    fixture_sql(fx, sql);
    assert_int_equal(claim(fx, "node-a", now, now + 1000, &jobs), 1); /* one probe */
    snprintf(sql, sizeof sql, "SELECT probe_until FROM hookd_endpoint_state WHERE endpoint_id = '%s'", a.ep.id);
    assert_int_equal(fixture_sql_int(fx, sql), now + 1000);
    {
        const char *ids[] = {jobs.items[0].d.id};
        int64_t tokens[] = {jobs.items[0].d.lease_token};
        bool renewed[1] = {false};
        assert_int_equal(store_delivery_renew(fx->s, "node-a", ids, tokens, 1, now + 5000, renewed), 0);
        assert_true(renewed[0]);
    }
    assert_int_equal(fixture_sql_int(fx, sql), now + 5000);
    /* Past the first lease the probe is still out: no second one. */
    assert_int_equal(claim(fx, "node-b", now + 2000, now + 3000, &none), 0);
    job_list_free(&none);
    if (strncmp(fx->dsn, "sqlite:", 7) != 0) {
        PGconn *c = PQconnectdb(fx->dsn);
        char lock[256];
        snprintf(lock, sizeof lock, "BEGIN; SELECT 1 FROM hookd_endpoint_state WHERE endpoint_id = '%s' FOR UPDATE",
                 a.ep.id);
        PGresult *r = PQexec(c, lock);
        assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
        PQclear(r);
        const char *ids[] = {jobs.items[0].d.id};
        int64_t tokens[] = {jobs.items[0].d.lease_token};
        bool renewed[1] = {true};
        assert_int_equal(store_delivery_renew(fx->s, "node-a", ids, tokens, 1, now + 9000, renewed), 0);
        assert_false(renewed[0]); /* its breaker row is held: neither moves */
        r = PQexec(c, "ROLLBACK");
        PQclear(r);
        PQfinish(c);
        assert_int_equal(fixture_sql_int(fx, sql), now + 5000);
        assert_int_equal(store_delivery_renew(fx->s, "node-a", ids, tokens, 1, now + 9000, renewed), 0);
        assert_true(renewed[0]);
        assert_int_equal(fixture_sql_int(fx, sql), now + 9000);
    }
    /* Left as the next tests expect: the probe recorded, the breaker gone, the rest drained. */
    complete(fx, &jobs.items[0], DELIVERY_DELIVERED, 1, 200, now + 10, 0, 0);
    snprintf(sql, sizeof sql, "DELETE FROM hookd_endpoint_state WHERE endpoint_id = '%s'", a.ep.id);
    fixture_sql(fx, sql);
    drain_due(fx);
    job_list_free(&jobs);
    delivery_free(&second);
    event_free(&ev2);
    scene_free(&a);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

/* ---- unrecorded deliveries (DESIGN §3): leased at fan-out, their row written by their first result ---- */

struct unrecorded {
    struct event ev;
    struct delivery d;
};

/* An unrecorded delivery of a new event to ep, leased to node until lease_until with token 1. */
static void unrecorded_make(struct fixture *fx, const struct endpoint *ep, const char *node, int64_t now,
                            int64_t lease_until, struct unrecorded *u)
{
    event_make(fx, "order.paid", &u->ev);
    u->d = (struct delivery){.status = DELIVERY_PENDING, .lease_owner = (char *)node, .lease_until = lease_until,
                             .lease_token = 1, .next_attempt_at = now, .created_at = now - 7, .unrecorded = true,
                             .account = fx->account};
    id_new(u->d.id, "dlv_");
    snprintf(u->d.event_id, sizeof u->d.event_id, "%s", u->ev.id);
    snprintf(u->d.endpoint_id, sizeof u->d.endpoint_id, "%s", ep->id);
}

static struct delivery_result unrecorded_result(const struct unrecorded *u, int64_t token, enum delivery_status st,
                                                int code, int64_t started, int64_t next_at)
{
    return (struct delivery_result){
        .delivery_id = u->d.id, .lease_owner = u->d.lease_owner, .lease_token = token, .status = st,
        .next_attempt_at = next_at, .unrecorded = &u->d,
        .attempt = {.n = 1, .started_at = started, .duration_ms = 9, .status_code = code, .response = "ok",
                    .error = code >= 300 ? "HTTP error" : NULL, .node = u->d.lease_owner},
    };
}

/*
 * The contract holds on both stores (a backend may write the row at once, as
 * SQLite does): the first result writes the delivery in its new state with one
 * attempt, a stale token is fenced out, the lease renews, and a lease given
 * back, freed by its node's restart, or run out leaves the delivery pending,
 * claimable at once, and sent again.
 */
static void test_unrecorded_lifecycle(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct endpoint ep;
    struct unrecorded u[6];
    struct delivery ds[6], got;
    struct attempt_list al;
    struct job_list jobs;
    int results[3];
    bool renewed[2];

    drain_due(fx);
    endpoint_make(fx, &ep);
    for (int i = 0; i < 6; i++) {
        unrecorded_make(fx, &ep, "node-a", now, i == 4 ? now + 1000 : now + 30000, &u[i]);
        ds[i] = u[i].d;
    }
    ds[5].unrecorded = false; /* one with its row at once, in the same statement */
    assert_int_equal(store_delivery_insert_many(fx->s, ds, 6), 0);
    /* Not due for anyone else while leased. */
    assert_int_equal(claim(fx, "node-b", now, now + 30000, &jobs), 0);
    job_list_free(&jobs);
    /* Seen before its first result (on PostgreSQL through hookd_deliveries_all): pending, leased. */
    assert_int_equal(store_delivery_get(fx->s, u[0].d.id, &got), 0);
    assert_int_equal(got.status, DELIVERY_PENDING);
    assert_string_equal(got.lease_owner, "node-a");
    assert_string_equal(got.account, fx->account);
    assert_string_equal(got.event_id, u[0].ev.id);
    assert_int_equal(got.created_at, now - 7);
    assert_int_equal(got.attempt_count, 0);
    delivery_free(&got);
    struct delivery_filter f = {.event_id = u[0].ev.id, .status = DELIVERY_PENDING, .limit = 10};
    struct delivery_list dl;
    int64_t count;
    assert_int_equal(store_delivery_list(fx->s, &f, &dl), 0);
    assert_int_equal(dl.n, 1);
    assert_string_equal(dl.items[0].id, u[0].d.id);
    delivery_list_free(&dl);
    f.status = -1;
    assert_int_equal(store_delivery_count(fx->s, &f, &count), 0);
    assert_int_equal(count, 1);

    /* First results: delivered, retrying, and one with a stale token. */
    struct delivery_result rs[3] = {
        unrecorded_result(&u[0], 1, DELIVERY_DELIVERED, 200, now + 1, 0),
        unrecorded_result(&u[1], 1, DELIVERY_RETRYING, 503, now + 2, now + 5000),
        unrecorded_result(&u[2], 2, DELIVERY_DELIVERED, 200, now + 3, 0),
    };
    assert_int_equal(store_delivery_complete_many(fx->s, rs, 3, now + 20, results), 0);
    assert_int_equal(results[0], 0);
    assert_int_equal(results[1], 0);
    assert_int_equal(results[2], HOOKD_ESTALE);
    assert_int_equal(store_delivery_get(fx->s, u[0].d.id, &got), 0);
    assert_int_equal(got.status, DELIVERY_DELIVERED);
    assert_string_equal(got.event_id, u[0].ev.id);
    assert_string_equal(got.endpoint_id, ep.id);
    assert_string_equal(got.account, fx->account);
    assert_int_equal(got.attempt_count, 1);
    assert_int_equal(got.last_status_code, 200);
    assert_int_equal(got.first_attempt_at, now + 1);
    assert_int_equal(got.delivered_at, now + 20);
    assert_int_equal(got.created_at, now - 7);
    assert_null(got.lease_owner);
    delivery_free(&got);
    assert_int_equal(store_attempt_list(fx->s, u[0].d.id, &al), 0);
    assert_int_equal(al.n, 1);
    assert_int_equal(al.items[0].n, 1);
    assert_int_equal(al.items[0].status_code, 200);
    assert_int_equal(al.items[0].duration_ms, 9);
    assert_string_equal(al.items[0].node, "node-a");
    assert_string_equal(al.items[0].response, "ok");
    attempt_list_free(&al);
    assert_int_equal(store_delivery_get(fx->s, u[1].d.id, &got), 0);
    assert_int_equal(got.status, DELIVERY_RETRYING);
    assert_int_equal(got.next_attempt_at, now + 5000);
    assert_int_equal(got.attempt_count, 1);
    assert_null(got.lease_owner);
    delivery_free(&got);
    /* The same result again changes nothing: its lease is gone. */
    assert_int_equal(store_delivery_complete_many(fx->s, rs, 1, now + 21, results), 0);
    assert_int_equal(results[0], HOOKD_ESTALE);
    assert_int_equal(store_attempt_list(fx->s, u[0].d.id, &al), 0);
    assert_int_equal(al.n, 1);
    attempt_list_free(&al);

    /* Renewed with its token only. */
    const char *ids[2] = {u[2].d.id, u[3].d.id};
    const int64_t tokens[2] = {1, 9};
    assert_int_equal(store_delivery_renew(fx->s, "node-a", ids, tokens, 2, now + 40000, renewed), 0);
    assert_true(renewed[0]);
    assert_false(renewed[1]);

    /* Given back unsent: pending, unleased, claimable at once with a new token. */
    assert_int_equal(store_delivery_release(fx->s, u[2].d.id, "node-a", 2), HOOKD_ESTALE);
    assert_int_equal(store_delivery_release(fx->s, u[2].d.id, "node-a", 1), 0);
    assert_int_equal(store_delivery_get(fx->s, u[2].d.id, &got), 0);
    assert_int_equal(got.status, DELIVERY_PENDING);
    assert_int_equal(got.attempt_count, 0);
    assert_null(got.lease_owner);
    assert_string_equal(got.event_id, u[2].ev.id);
    delivery_free(&got);
    assert_int_equal(claim(fx, "node-b", now, now + 30000, &jobs), 1);
    assert_string_equal(jobs.items[0].d.id, u[2].d.id);
    assert_int_equal(jobs.items[0].d.lease_token, 2);
    assert_string_equal(jobs.items[0].ev.id, u[2].ev.id);
    job_list_free(&jobs);

    /* Its lease run out (its node gone): the next claim after that takes it. */
    assert_int_equal(claim(fx, "node-b", now + 3000, now + 33000, &jobs), 1);
    assert_string_equal(jobs.items[0].d.id, u[4].d.id);
    assert_int_equal(jobs.items[0].d.lease_token, 2);
    job_list_free(&jobs);

    /* node-a starts again: its unrecorded u[3] and the recorded u[5] become claimable. */
    assert_int_equal(store_delivery_release_node(fx->s, "node-a"), 0);
    assert_int_equal(claim(fx, "node-c", now + 3000, now + 33000, &jobs), 2);
    for (size_t i = 0; i < jobs.n; i++)
        assert_true(strcmp(jobs.items[i].d.id, u[3].d.id) == 0 || strcmp(jobs.items[i].d.id, u[5].d.id) == 0);
    job_list_free(&jobs);
    for (int i = 0; i < 6; i++)
        event_free(&u[i].ev);
    endpoint_free(&ep);
}

/*
 * The first attempt of an unrecorded delivery is stored with its row on
 * PostgreSQL (attempt1_*, DESIGN §3), as a row of hookd_attempts on SQLite:
 * either way it is listed as attempt 1 with every field, a snippet's bytes
 * (a NUL, bytes that are not UTF-8) and its truncated flag included, and the
 * attempts after it (a retry, a replay's) follow it in the order they were
 * made. No attempt is counted twice (hookd_attempts_all: every attempt once).
 */
static void test_unrecorded_first_attempt(void **state)
{
    static const char snippet[] = "\xff\x00ok\xfe\x80";
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct endpoint ep;
    struct unrecorded u[2];
    struct delivery ds[2], got;
    struct attempt_list al;
    struct job_list jobs;
    int results[2];
    char sql[256];

    drain_due(fx);
    endpoint_make(fx, &ep);
    for (int i = 0; i < 2; i++) {
        unrecorded_make(fx, &ep, "node-a", now, now + 30000, &u[i]);
        ds[i] = u[i].d;
    }
    assert_int_equal(store_delivery_insert_many(fx->s, ds, 2), 0);
    struct delivery_result rs[2] = {
        unrecorded_result(&u[0], 1, DELIVERY_DELIVERED, 200, now + 1, 0),
        unrecorded_result(&u[1], 1, DELIVERY_RETRYING, 0, now + 2, now),
    };
    rs[0].attempt.response = (char *)snippet;
    rs[0].attempt.response_len = sizeof snippet - 1;
    rs[0].attempt.response_truncated = true;
    rs[0].attempt.duration_ms = 17;
    rs[1].attempt.error_class = "timeout";
    rs[1].attempt.error = "timed out after 10 s";
    rs[1].attempt.response = NULL;
    assert_int_equal(store_delivery_complete_many(fx->s, rs, 2, now + 20, results), 0);
    assert_int_equal(results[0], 0);
    assert_int_equal(results[1], 0);

    /* Delivered at once: exactly one attempt, with its fields. */
    assert_int_equal(store_attempt_list(fx->s, u[0].d.id, &al), 0);
    assert_int_equal(al.n, 1);
    assert_int_equal(al.items[0].n, 1);
    assert_string_equal(al.items[0].delivery_id, u[0].d.id);
    assert_int_equal(al.items[0].started_at, now + 1);
    assert_int_equal(al.items[0].duration_ms, 17);
    assert_int_equal(al.items[0].status_code, 200);
    assert_null(al.items[0].error_class);
    assert_null(al.items[0].error);
    assert_int_equal(al.items[0].response_len, sizeof snippet - 1);
    assert_memory_equal(al.items[0].response, snippet, sizeof snippet - 1);
    assert_true(al.items[0].response_truncated);
    assert_string_equal(al.items[0].node, "node-a");
    attempt_list_free(&al);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM hookd_attempts_all WHERE delivery_id = '%s'", u[0].d.id);
    assert_int_equal(fixture_sql_int(fx, sql), 1);
    if (strncmp(fx->dsn, "sqlite:", 7) != 0) { /* PostgreSQL: one row for the delivery and its attempt */
        snprintf(sql, sizeof sql, "SELECT count(*) FROM hookd_attempts WHERE delivery_id = '%s'", u[0].d.id);
        assert_int_equal(fixture_sql_int(fx, sql), 0);
    }

    /* Failed first (a transport error, no snippet), then retried: attempts 1 and 2, in order. */
    assert_int_equal(claim(fx, "node-b", now + 5, now + 30000, &jobs), 1);
    assert_string_equal(jobs.items[0].d.id, u[1].d.id);
    assert_int_equal(jobs.items[0].d.attempt_count, 1);
    complete(fx, &jobs.items[0], DELIVERY_DELIVERED, 2, 204, now + 6, 0, 0);
    job_list_free(&jobs);
    assert_int_equal(store_attempt_list(fx->s, u[1].d.id, &al), 0);
    assert_int_equal(al.n, 2);
    assert_int_equal(al.items[0].n, 1);
    assert_int_equal(al.items[0].status_code, 0);
    assert_string_equal(al.items[0].error_class, "timeout");
    assert_string_equal(al.items[0].error, "timed out after 10 s");
    assert_null(al.items[0].response);
    assert_false(al.items[0].response_truncated);
    assert_int_equal(al.items[0].started_at, now + 2);
    assert_int_equal(al.items[1].n, 2);
    assert_int_equal(al.items[1].status_code, 204);
    assert_string_equal(al.items[1].node, "node-b");
    attempt_list_free(&al);
    assert_int_equal(store_delivery_get(fx->s, u[1].d.id, &got), 0);
    assert_int_equal(got.status, DELIVERY_DELIVERED);
    assert_int_equal(got.attempt_count, 2);
    assert_int_equal(got.first_attempt_at, now + 2);
    assert_int_equal(got.last_attempt_at, now + 6);
    delivery_free(&got);

    /* Replayed after it was delivered: the first attempt stays as it was, the replay's follows it (a replay
     * starts the count again, DESIGN §4). */
    assert_int_equal(store_delivery_replay(fx->s, u[0].d.id, now + 50, &got), 0);
    assert_int_equal(got.attempt_count, 0);
    delivery_free(&got);
    assert_int_equal(claim(fx, "node-b", now + 100, now + 30000, &jobs), 1);
    assert_string_equal(jobs.items[0].d.id, u[0].d.id);
    complete(fx, &jobs.items[0], DELIVERY_DELIVERED, 1, 202, now + 100, 0, 0);
    job_list_free(&jobs);
    assert_int_equal(store_attempt_list(fx->s, u[0].d.id, &al), 0);
    assert_int_equal(al.n, 2);
    assert_int_equal(al.items[0].status_code, 200);
    assert_int_equal(al.items[0].started_at, now + 1);
    assert_true(al.items[0].response_truncated);
    assert_int_equal(al.items[0].response_len, sizeof snippet - 1);
    assert_int_equal(al.items[1].n, 1);
    assert_int_equal(al.items[1].status_code, 202);
    assert_int_equal(al.items[1].started_at, now + 100);
    attempt_list_free(&al);
    for (int i = 0; i < 2; i++)
        event_free(&u[i].ev);
    endpoint_free(&ep);
}

/* A fan-out leaves its own node's leases out of the slots and counts what it sends itself (lease_limits.own). */
static void test_slots_leave_out_own_leases(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct endpoint ep;
    struct unrecorded u[3];
    struct delivery ds[3];
    int slots;

    drain_due(fx);
    endpoint_make(fx, &ep);
    unrecorded_make(fx, &ep, "node-a", now, now + 30000, &u[0]);
    unrecorded_make(fx, &ep, "node-a", now, now + 30000, &u[1]);
    unrecorded_make(fx, &ep, "node-b", now, now + 30000, &u[2]);
    for (int i = 0; i < 3; i++)
        ds[i] = u[i].d;
    assert_int_equal(store_delivery_insert_many(fx->s, ds, 3), 0);
    const char *ids[1] = {ep.id};
    struct lease_limits lim = {.default_cap = 10};
    assert_int_equal(store_delivery_slots(fx->s, now, &lim, ids, 1, &slots), 0);
    assert_int_equal(slots, 7);
    lim.own = "node-a";
    assert_int_equal(store_delivery_slots(fx->s, now, &lim, ids, 1, &slots), 0);
    assert_int_equal(slots, 9);
    lim.own = "node-b";
    assert_int_equal(store_delivery_slots(fx->s, now, &lim, ids, 1, &slots), 0);
    assert_int_equal(slots, 8);
    assert_int_equal(store_delivery_release_node(fx->s, "node-a"), 0);
    assert_int_equal(store_delivery_release_node(fx->s, "node-b"), 0);
    drain_due(fx);
    for (int i = 0; i < 3; i++)
        event_free(&u[i].ev);
    endpoint_free(&ep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_delivery_insert_exists),
        T(test_delivery_insert_leased),
        T(test_pending_to_delivered),
        T(test_pending_retrying_delivered),
        T(test_retrying_to_dead),
        T(test_replay),
        T(test_claim_skips_leased),
        T(test_expired_lease_reclaimed_and_stale_complete),
        T(test_stale_token_same_owner),
        T(test_release_and_release_node),
        T(test_renew),
        T(test_renew_probe),
        T(test_disabled_endpoint_not_claimed),
        T(test_next_due),
        T(test_complete_disables_endpoint),
        T(test_endpoint_delete_kills_open_deliveries),
        T(test_delivery_list_filters_cursor),
        T(test_delivery_list_own_endpoints),
        T(test_delivery_list_count_each_status),
        T(test_claim_skips_delivery_without_event),
        T(test_status_checks),
        T(test_lifecycle_writes_plain),
        T(test_unrecorded_lifecycle),
        T(test_unrecorded_first_attempt),
        T(test_slots_leave_out_own_leases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
