/*
 * The store conformance suite: per-endpoint delivery state. endpoint_state_record
 * opens the breaker after the configured failures and disables an endpoint
 * failing longer than disable_after; the claims lease nothing to an open
 * endpoint until its probe is due, then one probe (half_open), ramp the cap
 * after it closes, and spend a rate limit's tokens. Uses the store_*()
 * wrappers only (fixture: store_fixture.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "store/store_fixture.h"

static const struct breaker_policy policy = {.failures = 3, .probe_ms = 1000, .probe_max_ms = 4000,
                                             .disable_after_ms = 60000};

/* An endpoint with n pending deliveries due at due (each of an event of its own). */
static void endpoint_with_backlog(struct fixture *fx, int rate_limit, int max_in_flight, int n, int64_t due,
                                  struct endpoint *ep)
{
    memset(ep, 0, sizeof *ep);
    id_new(ep->id, "ep_");
    ep->account = strdup(fx->account);
    ep->url = strdup("http://127.0.0.1:9/hook");
    ep->enabled = true;
    ep->rate_limit = rate_limit;
    ep->max_in_flight = max_in_flight;
    assert_int_equal(store_endpoint_insert(fx->s, ep), 0);
    for (int i = 0; i < n; i++) {
        struct event ev;
        struct delivery d;
        event_make(fx, "st.x", &ev);
        delivery_make(fx, ev.id, ep->id, due, &d);
        event_free(&ev);
        delivery_free(&d);
    }
}

static int claim_at(struct fixture *fx, int64_t now, int64_t ramp_ms, struct job_list *jobs)
{
    struct lease_limits lim = {.default_cap = 0, .ramp_ms = ramp_ms};

    assert_int_equal(store_delivery_claim_due(fx->s, "node-s", now, now + 30000, 100, &lim, jobs), 0);
    return (int)jobs->n;
}

/* How many of jobs are endpoint_id's (on a shared database, earlier tests' endpoints may be due too). */
static int jobs_of(const struct job_list *jobs, const char *endpoint_id)
{
    int n = 0;

    for (size_t i = 0; i < jobs->n; i++)
        n += strcmp(jobs->items[i].d.endpoint_id, endpoint_id) == 0;
    return n;
}

static void finish(struct fixture *fx, struct job_list *jobs, enum delivery_status st, int64_t at)
{
    for (size_t i = 0; i < jobs->n; i++)
        complete(fx, &jobs->items[i], st, jobs->items[i].d.attempt_count + 1, st == DELIVERY_DELIVERED ? 200 : 503,
                 at, st == DELIVERY_RETRYING ? at : 0, 0);
    job_list_free(jobs);
}

static void test_breaker_opens_probes_and_ramps(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct endpoint ep;
    struct endpoint_state st;
    struct job_list jobs;

    drain_due(fx);
    endpoint_with_backlog(fx, 0, 4, 12, now - 10, &ep);
    assert_int_equal(store_endpoint_state_get(fx->s, ep.id, &st), HOOKD_ENOTFOUND);
    /* Two failures then a success: nothing opens, the count starts again. */
    struct endpoint_outcome o = {.endpoint_id = ep.id, .failures = 2, .first_failure_at = now};
    assert_int_equal(store_endpoint_state_record(fx->s, &o, 1, &policy, now), 0);
    assert_false(o.opened);
    o = (struct endpoint_outcome){.endpoint_id = ep.id, .succeeded = true};
    assert_int_equal(store_endpoint_state_record(fx->s, &o, 1, &policy, now), 0);
    assert_int_equal(store_endpoint_state_get(fx->s, ep.id, &st), 0);
    assert_int_equal(st.consecutive_failures, 0);
    assert_int_equal(st.failing_since, 0);
    /* Three in a row open it: nothing is claimed until the probe is due. */
    o = (struct endpoint_outcome){.endpoint_id = ep.id, .failures = 3, .first_failure_at = now};
    assert_int_equal(store_endpoint_state_record(fx->s, &o, 1, &policy, now), 0);
    assert_true(o.opened);
    assert_int_equal(store_endpoint_state_get(fx->s, ep.id, &st), 0);
    assert_int_equal(st.breaker, BREAKER_OPEN);
    assert_true(st.next_probe_at == now + 1000);
    assert_int_equal(claim_at(fx, now + 999, 0, &jobs), 0);
    job_list_free(&jobs);
    /* The probe: one delivery, the breaker half open with its lease; no second one meanwhile. */
    assert_int_equal(claim_at(fx, now + 1000, 0, &jobs), 1);
    assert_int_equal(store_endpoint_state_get(fx->s, ep.id, &st), 0);
    assert_int_equal(st.breaker, BREAKER_HALF_OPEN);
    struct job_list none;
    assert_int_equal(claim_at(fx, now + 1001, 0, &none), 0);
    job_list_free(&none);
    /* The probe fails: open again, twice the interval. */
    finish(fx, &jobs, DELIVERY_RETRYING, now + 1100);
    o = (struct endpoint_outcome){.endpoint_id = ep.id, .failures = 1, .first_failure_at = now + 1100};
    assert_int_equal(store_endpoint_state_record(fx->s, &o, 1, &policy, now + 1100), 0);
    assert_true(o.opened);
    assert_int_equal(store_endpoint_state_get(fx->s, ep.id, &st), 0);
    assert_true(st.next_probe_at == now + 1100 + 2000);
    /* The next probe succeeds: closed, and the cap (4) ramps up over 4 s from 1. */
    assert_int_equal(claim_at(fx, now + 3100, 0, &jobs), 1);
    finish(fx, &jobs, DELIVERY_DELIVERED, now + 3200);
    o = (struct endpoint_outcome){.endpoint_id = ep.id, .succeeded = true};
    assert_int_equal(store_endpoint_state_record(fx->s, &o, 1, &policy, now + 3200), 0);
    assert_int_equal(store_endpoint_state_get(fx->s, ep.id, &st), 0);
    assert_int_equal(st.breaker, BREAKER_CLOSED);
    assert_true(st.closed_at == now + 3200);
    assert_int_equal(claim_at(fx, now + 3300, 4000, &jobs), 1); /* ceil(4 × 100 / 4000) */
    finish(fx, &jobs, DELIVERY_DELIVERED, now + 3300);
    assert_int_equal(claim_at(fx, now + 5200, 4000, &jobs), 2); /* ceil(4 × 2000 / 4000) */
    finish(fx, &jobs, DELIVERY_DELIVERED, now + 5200);
    assert_int_equal(claim_at(fx, now + 7300, 4000, &jobs), 4); /* ramped: the full cap */
    finish(fx, &jobs, DELIVERY_DELIVERED, now + 7300);
    endpoint_free(&ep);
}

static void test_rate_limit_tokens(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct endpoint ep;
    struct job_list jobs;

    drain_due(fx);
    endpoint_with_backlog(fx, 2, 0, 10, now - 10, &ep);
    assert_int_equal(claim_at(fx, now, 0, &jobs), 2); /* the burst: rate_limit */
    finish(fx, &jobs, DELIVERY_DELIVERED, now);
    assert_int_equal(claim_at(fx, now + 100, 0, &jobs), 0);
    job_list_free(&jobs);
    assert_int_equal(claim_at(fx, now + 500, 0, &jobs), 1); /* 2/s: one token per 500 ms */
    finish(fx, &jobs, DELIVERY_DELIVERED, now + 500);
    assert_int_equal(claim_at(fx, now + 900, 0, &jobs), 0);
    job_list_free(&jobs);
    assert_int_equal(claim_at(fx, now + 10000, 0, &jobs), 2); /* refilled only up to the burst */
    finish(fx, &jobs, DELIVERY_DELIVERED, now + 10000);
    endpoint_free(&ep);
}

/*
 * A bucket updated by a clock far ahead (another node's, or a claim at a time
 * far away): claims at this clock neither fail (PostgreSQL's integer range
 * was overrun, failing every claim of every endpoint) nor wait for that time
 * nor lease beyond the burst: the bucket is taken as full and kept from now.
 */
static void test_rate_limit_clock_ahead(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms(), far = INT64_MAX / 4;
    struct endpoint ep;
    struct job_list jobs;

    drain_due(fx);
    endpoint_with_backlog(fx, 2, 0, 10, now - 10, &ep);
    claim_at(fx, far, 0, &jobs);
    assert_int_equal(jobs_of(&jobs, ep.id), 2);
    finish(fx, &jobs, DELIVERY_DELIVERED, far);
    /* Stamped far ahead: not believed, full. Then kept at this clock: 2/s. */
    claim_at(fx, now, 0, &jobs);
    assert_int_equal(jobs_of(&jobs, ep.id), 2);
    finish(fx, &jobs, DELIVERY_DELIVERED, now);
    claim_at(fx, now + 100, 0, &jobs);
    assert_int_equal(jobs_of(&jobs, ep.id), 0);
    job_list_free(&jobs);
    claim_at(fx, now + 600, 0, &jobs);
    assert_int_equal(jobs_of(&jobs, ep.id), 1);
    finish(fx, &jobs, DELIVERY_DELIVERED, now + 600);
    claim_at(fx, now + 60000, 0, &jobs);
    assert_int_equal(jobs_of(&jobs, ep.id), 2); /* never past the burst */
    finish(fx, &jobs, DELIVERY_DELIVERED, now + 60000);
    endpoint_free(&ep);
}

static void test_disable_after_continuous_failure(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct endpoint ep, got;
    struct endpoint_state st;

    endpoint_with_backlog(fx, 0, 0, 0, now, &ep);
    struct endpoint_outcome o = {.endpoint_id = ep.id, .failures = 1, .first_failure_at = now};
    assert_int_equal(store_endpoint_state_record(fx->s, &o, 1, &policy, now), 0);
    o = (struct endpoint_outcome){.endpoint_id = ep.id, .failures = 1, .first_failure_at = now + 59000};
    assert_int_equal(store_endpoint_state_record(fx->s, &o, 1, &policy, now + 59000), 0);
    assert_false(o.disabled);
    o = (struct endpoint_outcome){.endpoint_id = ep.id, .failures = 1, .first_failure_at = now + 60000};
    assert_int_equal(store_endpoint_state_record(fx->s, &o, 1, &policy, now + 60000), 0);
    assert_true(o.disabled);
    assert_int_equal(store_endpoint_get(fx->s, ep.id, &got), 0);
    assert_false(got.enabled);
    assert_non_null(strstr(got.disabled_reason, "failing continuously since"));
    endpoint_free(&got);
    /* Already disabled: not again (the first reason stays). */
    o = (struct endpoint_outcome){.endpoint_id = ep.id, .failures = 1, .first_failure_at = now + 61000};
    assert_int_equal(store_endpoint_state_record(fx->s, &o, 1, &policy, now + 61000), 0);
    assert_false(o.disabled);
    /* Reset: as new. */
    assert_int_equal(store_endpoint_state_reset(fx->s, ep.id), 0);
    assert_int_equal(store_endpoint_state_get(fx->s, ep.id, &st), HOOKD_ENOTFOUND);
    endpoint_free(&ep);
}

/* A paused endpoint's deliveries past their window die without an attempt; a live lease (the probe) and closed endpoints are left alone. */
static void test_expire_paused(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms(), n = -1;
    struct endpoint paused, fine;
    struct job_list jobs;

    drain_due(fx);
    endpoint_with_backlog(fx, 0, 4, 3, now - 10, &paused);
    struct endpoint_outcome o = {.endpoint_id = paused.id, .failures = 3, .first_failure_at = now};
    assert_int_equal(store_endpoint_state_record(fx->s, &o, 1, &policy, now), 0);
    assert_true(o.opened);
    /* The probe, once due, is leased (and in flight past the window). */
    claim_at(fx, now + 1500, 0, &jobs);
    assert_int_equal(jobs_of(&jobs, paused.id), 1);
    size_t probe = 0;
    while (strcmp(jobs.items[probe].d.endpoint_id, paused.id) != 0)
        probe++;
    endpoint_with_backlog(fx, 0, 4, 2, now - 10, &fine);
    /* Inside the window: nothing. */
    assert_int_equal(store_endpoint_state_expire_paused(fx->s, now + 2000, 3600000, &n), 0);
    assert_int_equal(n, 0);
    /* Past it: the two waiting ones, not the probe, not the closed endpoint's. */
    assert_int_equal(store_endpoint_state_expire_paused(fx->s, now + 2000, 1000, &n), 0);
    assert_int_equal(n, 2);
    delivery_expect(fx, jobs.items[probe].d.id, DELIVERY_PENDING, 0);
    struct delivery_filter f = {.endpoint_id = paused.id, .status = DELIVERY_DEAD, .limit = 10};
    struct delivery_list dead = {0};
    assert_int_equal(store_delivery_list(fx->s, &f, &dead), 0);
    assert_int_equal(dead.n, 2);
    for (size_t i = 0; i < dead.n; i++) {
        assert_int_equal(dead.items[i].attempt_count, 0);
        assert_non_null(strstr(dead.items[i].last_error, "retry window exceeded while the endpoint was paused"));
        assert_int_equal(dead.items[i].next_attempt_at, 0);
    }
    delivery_list_free(&dead);
    f.endpoint_id = fine.id;
    f.status = DELIVERY_PENDING;
    assert_int_equal(store_delivery_list(fx->s, &f, &dead), 0);
    assert_int_equal(dead.n, 2);
    delivery_list_free(&dead);
    /* Again: nothing more (idempotent, every node may run it). */
    assert_int_equal(store_endpoint_state_expire_paused(fx->s, now + 2000, 1000, &n), 0);
    assert_int_equal(n, 0);
    job_list_free(&jobs);
    endpoint_free(&paused);
    endpoint_free(&fine);
}

/* Many endpoints' states in one read: stored rows as stored, the rest the default (closed). */
static void test_state_get_many(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct endpoint a, b, c;
    struct endpoint_state st[4];

    endpoint_make(fx, &a);
    endpoint_make(fx, &b);
    endpoint_make(fx, &c);
    struct endpoint_outcome o = {.endpoint_id = b.id, .failures = 3, .first_failure_at = now};
    assert_int_equal(store_endpoint_state_record(fx->s, &o, 1, &policy, now), 0);
    assert_true(o.opened);
    o = (struct endpoint_outcome){.endpoint_id = c.id, .failures = 1, .first_failure_at = now};
    assert_int_equal(store_endpoint_state_record(fx->s, &o, 1, &policy, now), 0);
    const char *ids[] = {a.id, b.id, "ep_unknown", c.id};
    memset(st, 0x5a, sizeof st);
    assert_int_equal(store_endpoint_state_get_many(fx->s, ids, 4, st), 0);
    assert_string_equal(st[0].endpoint_id, a.id);
    assert_int_equal(st[0].breaker, BREAKER_CLOSED);
    assert_int_equal(st[0].opened_at, 0);
    assert_string_equal(st[1].endpoint_id, b.id);
    assert_int_equal(st[1].breaker, BREAKER_OPEN);
    assert_int_equal(st[1].opened_at, now);
    assert_string_equal(st[2].endpoint_id, "ep_unknown");
    assert_int_equal(st[2].breaker, BREAKER_CLOSED);
    assert_string_equal(st[3].endpoint_id, c.id);
    assert_int_equal(st[3].breaker, BREAKER_CLOSED);
    assert_int_equal(st[3].consecutive_failures, 1);
    assert_int_equal(store_endpoint_state_get_many(fx->s, ids, 0, NULL), 0);
    endpoint_free(&a);
    endpoint_free(&b);
    endpoint_free(&c);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_breaker_opens_probes_and_ramps),
        T(test_rate_limit_tokens),
        T(test_disable_after_continuous_failure),
        T(test_expire_paused),
        T(test_rate_limit_clock_ahead),
        T(test_state_get_many),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
