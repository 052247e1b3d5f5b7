/*
 * The store conformance suite, part 3: per-endpoint in-flight caps at claim
 * time. Another node's live leases count, expired ones do not, an endpoint's
 * own max_in_flight overrides the default, no cap means no cap, a full
 * endpoint does not hold back others, a claim names the endpoints it held back,
 * and two nodes claiming at once do not both fill the same free slots. Uses the store_*() wrappers only (fixture:
 * store_fixture.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "store/store_fixture.h"

/* An enabled endpoint with its own max_in_flight (0: the claim's default cap). */
static void endpoint_make_capped(struct fixture *fx, int max_in_flight, struct endpoint *ep)
{
    memset(ep, 0, sizeof *ep);
    id_new(ep->id, "ep_");
    ep->account = strdup(fx->account);
    ep->url = strdup("http://127.0.0.1:9/hook");
    ep->enabled = true;
    ep->max_in_flight = max_in_flight;
    assert_int_equal(store_endpoint_insert(fx->s, ep), 0);
}

#define CAP_MAX_ROWS 8

/* An endpoint and n (<= CAP_MAX_ROWS) pending deliveries to it, due at first_due, first_due + 1, … */
struct cap_scene {
    struct endpoint ep;
    struct event evs[CAP_MAX_ROWS];
    struct delivery ds[CAP_MAX_ROWS];
    int n;
};

static void cap_scene_make(struct fixture *fx, int max_in_flight, int n, int64_t first_due, struct cap_scene *sc)
{
    assert_true(n <= CAP_MAX_ROWS);
    sc->n = n;
    endpoint_make_capped(fx, max_in_flight, &sc->ep);
    for (int i = 0; i < n; i++) {
        event_make(fx, "order.paid", &sc->evs[i]);
        delivery_make(fx, sc->evs[i].id, sc->ep.id, first_due + i, &sc->ds[i]);
    }
}

static void cap_scene_free(struct cap_scene *sc)
{
    endpoint_free(&sc->ep);
    for (int i = 0; i < sc->n; i++) {
        event_free(&sc->evs[i]);
        delivery_free(&sc->ds[i]);
    }
}

/* Another node's live lease counts against the cap; cap 0 is no cap at all. */
static void test_cap_counts_other_nodes_leases(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct cap_scene sc;
    struct event ev;
    struct delivery held = {.status = DELIVERY_PENDING, .lease_owner = "node-x", .lease_until = now + 60000,
                            .lease_token = 1, .next_attempt_at = now - 100};
    struct job_list jobs;

    drain_due(fx);
    cap_scene_make(fx, 0, 4, now - 4, &sc);
    event_make(fx, "order.paid", &ev);
    id_new(held.id, "dlv_");
    snprintf(held.event_id, sizeof held.event_id, "%s", ev.id);
    snprintf(held.endpoint_id, sizeof held.endpoint_id, "%s", sc.ep.id);
    assert_int_equal(store_delivery_insert(fx->s, &held), 0);

    assert_int_equal(claim_capped(fx, "node-a", now, now + 30000, 100, 3, &jobs), 2);
    assert_string_equal(jobs.items[0].d.id, sc.ds[0].id); /* earliest first */
    assert_string_equal(jobs.items[1].d.id, sc.ds[1].id);
    job_list_free(&jobs);
    assert_int_equal(claim_capped(fx, "node-b", now, now + 30000, 100, 3, &jobs), 0); /* 1 + 2 leased: full */
    job_list_free(&jobs);
    assert_int_equal(claim_capped(fx, "node-b", now, now + 30000, 100, 0, &jobs), 2); /* no cap */
    assert_string_equal(jobs.items[0].d.id, sc.ds[2].id);
    assert_string_equal(jobs.items[1].d.id, sc.ds[3].id);
    job_list_free(&jobs);
    delivery_expect(fx, held.id, DELIVERY_PENDING, 0);
    event_free(&ev);
    cap_scene_free(&sc);
}

/*
 * A claim says when an endpoint took all its free slots (more of its rows may
 * be due, so the dispatcher need not ask next_due), and not when its due rows
 * ran out first.
 */
static void test_cap_claim_reports_more_due(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    bool more_due = false;
    struct lease_limits lim = {.default_cap = 2, .more_due = &more_due};
    struct cap_scene sc;
    struct job_list jobs;

    drain_due(fx);
    cap_scene_make(fx, 0, 3, now - 3, &sc);
    assert_int_equal(store_delivery_claim_due(fx->s, "node-a", now, now + 30000, 100, &lim, &jobs), 0);
    assert_int_equal(jobs.n, 2); /* the cap */
    assert_true(more_due);
    job_list_free(&jobs);
    /* Cap 4 (two slots free now), one row left: it ran out before the slots did. */
    more_due = false;
    lim.default_cap = 4;
    assert_int_equal(store_delivery_claim_due(fx->s, "node-b", now, now + 30000, 100, &lim, &jobs), 0);
    assert_int_equal(jobs.n, 1);
    assert_string_equal(jobs.items[0].d.id, sc.ds[2].id);
    assert_false(more_due);
    job_list_free(&jobs);
    /* Nothing due: nothing taken, nothing said. */
    assert_int_equal(store_delivery_claim_due(fx->s, "node-b", now, now + 30000, 100, &lim, &jobs), 0);
    assert_int_equal(jobs.n, 0);
    assert_false(more_due);
    job_list_free(&jobs);
    cap_scene_free(&sc);
}

static bool held_has(char (*held)[HOOKD_ID_MAX], size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(held[i], id) == 0)
            return true;
    return false;
}

/*
 * A claim names the endpoints whose due rows it left for their own limits: a
 * full one (another node's lease fills it), one that took all its free slots
 * with rows to spare; not one whose due rows ran out first, capped or not, nor
 * one with nothing due. The count goes on past the room.
 */
static void test_cap_claim_reports_held(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    char held[4][HOOKD_ID_MAX];
    size_t n_held = 0;
    struct lease_limits lim = {.default_cap = 0, .held = held, .held_room = 4, .n_held = &n_held};
    struct cap_scene a, b, c, d;
    struct event ev;
    struct delivery leased = {.status = DELIVERY_PENDING, .lease_owner = "node-x", .lease_until = now + 60000,
                              .lease_token = 1, .next_attempt_at = now - 100};
    struct job_list jobs;

    drain_due(fx);
    cap_scene_make(fx, 2, 3, now - 40, &a); /* takes 2 of 3 */
    cap_scene_make(fx, 0, 1, now - 30, &b); /* uncapped: takes its row */
    cap_scene_make(fx, 1, 1, now - 20, &c); /* full: another node's lease below */
    cap_scene_make(fx, 4, 1, now - 10, &d); /* takes its row, 3 slots to spare */
    event_make(fx, "order.paid", &ev);
    id_new(leased.id, "dlv_");
    snprintf(leased.event_id, sizeof leased.event_id, "%s", ev.id);
    snprintf(leased.endpoint_id, sizeof leased.endpoint_id, "%s", c.ep.id);
    assert_int_equal(store_delivery_insert(fx->s, &leased), 0);

    assert_int_equal(store_delivery_claim_due(fx->s, "node-a", now, now + 30000, 100, &lim, &jobs), 0);
    assert_int_equal(jobs.n, 4); /* 2 of a, b's, d's */
    job_list_free(&jobs);
    assert_int_equal(n_held, 2);
    assert_true(held_has(held, n_held, a.ep.id));
    assert_true(held_has(held, n_held, c.ep.id));

    /* Again: a is full now (1 due, 2 leased), c still; b and d have nothing due. */
    n_held = 0;
    assert_int_equal(store_delivery_claim_due(fx->s, "node-a", now, now + 30000, 100, &lim, &jobs), 0);
    assert_int_equal(jobs.n, 0);
    job_list_free(&jobs);
    assert_int_equal(n_held, 2);
    assert_true(held_has(held, n_held, a.ep.id));
    assert_true(held_has(held, n_held, c.ep.id));

    /* Room for one: both counted, one named. */
    n_held = 0;
    lim.held_room = 1;
    assert_int_equal(store_delivery_claim_due(fx->s, "node-a", now, now + 30000, 100, &lim, &jobs), 0);
    job_list_free(&jobs);
    assert_int_equal(n_held, 2);
    assert_true(strcmp(held[0], a.ep.id) == 0 || strcmp(held[0], c.ep.id) == 0);

    event_free(&ev);
    cap_scene_free(&a);
    cap_scene_free(&b);
    cap_scene_free(&c);
    cap_scene_free(&d);
}

/* A lease that ran out no longer counts: its delivery is claimable again instead. */
static void test_cap_expired_leases_do_not_count(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct cap_scene sc;
    struct job_list jobs;

    drain_due(fx);
    cap_scene_make(fx, 0, 3, now - 3, &sc);
    assert_int_equal(claim_capped(fx, "node-x", now, now + 1000, 1, 2, &jobs), 1);
    assert_string_equal(jobs.items[0].d.id, sc.ds[0].id);
    job_list_free(&jobs);
    assert_int_equal(claim_capped(fx, "node-a", now + 500, now + 30000, 100, 2, &jobs), 1); /* ds[0] counts */
    assert_string_equal(jobs.items[0].d.id, sc.ds[1].id);
    job_list_free(&jobs);
    /* At now + 2000 node-x's lease ran out: one slot is free, and ds[0] (earliest) takes it. */
    assert_int_equal(claim_capped(fx, "node-b", now + 2000, now + 32000, 100, 2, &jobs), 1);
    assert_string_equal(jobs.items[0].d.id, sc.ds[0].id);
    assert_int_equal(jobs.items[0].d.lease_token, 2);
    job_list_free(&jobs);
    assert_int_equal(claim_capped(fx, "node-c", now + 2000, now + 32000, 100, 2, &jobs), 0);
    job_list_free(&jobs);
    cap_scene_free(&sc);
}

/* An endpoint's own max_in_flight overrides the default, up or down, and applies without one. */
static void test_cap_endpoint_override(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct cap_scene small, big;
    struct job_list jobs;

    drain_due(fx);
    cap_scene_make(fx, 1, 3, now - 10, &small);
    cap_scene_make(fx, 4, 5, now - 5, &big);
    assert_int_equal(claim_capped(fx, "node-a", now, now + 30000, 100, 2, &jobs), 5);
    assert_string_equal(jobs.items[0].d.id, small.ds[0].id);
    for (int i = 1; i < 5; i++)
        assert_string_equal(jobs.items[i].d.id, big.ds[i - 1].id);
    job_list_free(&jobs);
    /* Both full: neither a larger default nor none at all lets more through. */
    assert_int_equal(claim_capped(fx, "node-b", now, now + 30000, 100, 10, &jobs), 0);
    job_list_free(&jobs);
    assert_int_equal(claim_capped(fx, "node-b", now, now + 30000, 100, 0, &jobs), 0);
    job_list_free(&jobs);
    cap_scene_free(&small);
    cap_scene_free(&big);
}

static void test_cap_zero_is_unlimited(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct cap_scene sc;
    struct job_list jobs;

    drain_due(fx);
    cap_scene_make(fx, 0, 6, now - 6, &sc);
    assert_int_equal(claim_capped(fx, "node-a", now, now + 30000, 4, 0, &jobs), 4); /* only the limit bounds it */
    job_list_free(&jobs);
    assert_int_equal(claim_capped(fx, "node-b", now, now + 30000, 100, -1, &jobs), 2);
    job_list_free(&jobs);
    cap_scene_free(&sc);
}

/* A full endpoint's backlog does not hold back other endpoints' due rows behind it. */
static void test_cap_full_endpoint_does_not_block_others(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct cap_scene busy, other;
    struct job_list jobs;

    drain_due(fx);
    cap_scene_make(fx, 1, 6, now - 100, &busy);
    cap_scene_make(fx, 0, 3, now - 10, &other);
    assert_int_equal(claim_capped(fx, "node-a", now, now + 30000, 3, 0, &jobs), 3);
    assert_string_equal(jobs.items[0].d.id, busy.ds[0].id);
    assert_string_equal(jobs.items[1].d.id, other.ds[0].id);
    assert_string_equal(jobs.items[2].d.id, other.ds[1].id);
    job_list_free(&jobs);
    cap_scene_free(&busy);
    cap_scene_free(&other);
}

/* The limit earliest of every endpoint's allowed rows, however their times interleave. */
static void test_cap_earliest_across_endpoints(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    static const int caps[4] = {1, 2, 0, 3};
    /* (endpoint, row) of the expected claims, earliest first. */
    static const int first[6][2] = {{0, 0}, {1, 0}, {2, 0}, {3, 0}, {1, 1}, {2, 1}};
    static const int second[5][2] = {{3, 1}, {2, 2}, {3, 2}, {2, 3}, {2, 4}};
    struct cap_scene sc[4];
    struct job_list jobs;

    drain_due(fx);
    for (int k = 0; k < 4; k++) {
        endpoint_make_capped(fx, caps[k], &sc[k].ep);
        sc[k].n = 5;
        for (int j = 0; j < 5; j++) {
            event_make(fx, "order.paid", &sc[k].evs[j]);
            delivery_make(fx, sc[k].evs[j].id, sc[k].ep.id, now - 1000 + j * 10 + k * 3, &sc[k].ds[j]);
        }
    }
    assert_int_equal(claim_capped(fx, "node-a", now, now + 30000, 6, 0, &jobs), 6);
    for (int i = 0; i < 6; i++)
        assert_string_equal(jobs.items[i].d.id, sc[first[i][0]].ds[first[i][1]].id);
    job_list_free(&jobs);
    assert_int_equal(claim_capped(fx, "node-b", now, now + 30000, 100, 0, &jobs), 5);
    for (int i = 0; i < 5; i++)
        assert_string_equal(jobs.items[i].d.id, sc[second[i][0]].ds[second[i][1]].id);
    job_list_free(&jobs);
    for (int k = 0; k < 4; k++)
        cap_scene_free(&sc[k]);
}

/* Another node: its own connection; claim in a transaction held open for hold_us. */
struct claim_thread {
    const char *dsn, *node;
    int64_t now;
    int cap;
    int hold_us;
    int result, claimed;
    pthread_t th;
};

static void *claim_thread_main(void *arg)
{
    struct claim_thread *t = arg;
    struct store *s = NULL;
    struct job_list jobs = {0};

    t->result = store_open(t->dsn, &s);
    if (t->result == 0)
        t->result = store_begin(s);
    if (t->result == 0)
        t->result = store_delivery_claim_due(s, t->node, t->now, t->now + 30000, 100, &(struct lease_limits){.default_cap = t->cap}, &jobs);
    t->claimed = (int)jobs.n;
    job_list_free(&jobs);
    if (t->hold_us)
        usleep((useconds_t)t->hold_us);
    if (t->result == 0)
        t->result = store_commit(s);
    store_close(s);
    return NULL;
}

static void claim_thread_start(struct fixture *fx, struct claim_thread *t, const char *node, int64_t now, int cap,
                               int hold_us)
{
    *t = (struct claim_thread){.dsn = fx->dsn, .node = node, .now = now, .cap = cap, .hold_us = hold_us,
                               .result = -100, .claimed = -1};
    assert_int_equal(pthread_create(&t->th, NULL, claim_thread_main, t), 0);
}

static int claim_thread_join(struct claim_thread *t)
{
    pthread_join(t->th, NULL);
    assert_int_equal(t->result, 0);
    return t->claimed;
}

/* The endpoint's deliveries that are leased now. */
static int leased_count(struct fixture *fx, const char *endpoint_id)
{
    struct delivery_filter f = {.endpoint_id = endpoint_id, .status = -1, .limit = 100};
    struct delivery_list l;
    int leased = 0;

    assert_int_equal(store_delivery_list(fx->s, &f, &l), 0);
    for (size_t i = 0; i < l.n; i++)
        leased += l.items[i].lease_owner != NULL;
    delivery_list_free(&l);
    return leased;
}

/* Two nodes claiming at once do not both fill the same free slots: the second
 * waits for the first's transaction and then sees its leases (SQLite), or
 * leaves the endpoint to the claim in progress (PostgreSQL). */
static void test_cap_concurrent_claims(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct cap_scene sc;
    struct claim_thread b;
    struct job_list jobs;

    drain_due(fx);
    cap_scene_make(fx, 0, 4, now - 4, &sc);
    assert_int_equal(store_begin(fx->s), 0);
    assert_int_equal(claim_capped(fx, "node-a", now, now + 30000, 100, 2, &jobs), 2);
    job_list_free(&jobs);
    claim_thread_start(fx, &b, "node-b", now, 2, 0);
    usleep(300000);
    assert_int_equal(store_commit(fx->s), 0);
    assert_int_equal(claim_thread_join(&b), 0);
    assert_int_equal(leased_count(fx, sc.ep.id), 2);
    cap_scene_free(&sc);
}

/*
 * The race a snapshot alone would lose: node-a claims while an earlier
 * delivery is being inserted (not yet committed, so a cannot see it); once
 * that insert commits, node-b must not take it on top of a's uncommitted
 * lease, though its snapshot shows the endpoint with no lease at all.
 */
static void test_cap_concurrent_claim_and_late_insert(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct cap_scene sc;
    struct event late_ev;
    struct delivery late;
    struct claim_thread a, b;

    drain_due(fx);
    cap_scene_make(fx, 1, 2, now - 5, &sc);
    event_make(fx, "order.paid", &late_ev);
    assert_int_equal(store_begin(fx->s), 0);
    delivery_make(fx, late_ev.id, sc.ep.id, now - 10, &late); /* the earliest, uncommitted */
    claim_thread_start(fx, &a, "node-a", now, 0, 900000);    /* holds its claim for 0.9 s */
    usleep(200000);
    assert_int_equal(store_commit(fx->s), 0);
    usleep(100000);
    claim_thread_start(fx, &b, "node-b", now, 0, 0);
    assert_int_equal(claim_thread_join(&a) + claim_thread_join(&b), 1);
    assert_int_equal(leased_count(fx, sc.ep.id), 1);
    event_free(&late_ev);
    delivery_free(&late);
    cap_scene_free(&sc);
}

/*
 * An endpoint the caller names as full of its own leases (lease_limits.full)
 * is held, with none of its rows leased, and the claim goes on with the
 * others; a backend may take the hint or look for itself: the answer is the
 * same.
 */
static void test_cap_claim_full_of_own_leases(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    char held[4][HOOKD_ID_MAX], full[1][HOOKD_ID_MAX];
    size_t n_held = 0;
    struct lease_limits lim = {.default_cap = 0, .held = held, .held_room = 4, .n_held = &n_held};
    struct cap_scene a, b;
    struct job_list jobs;

    drain_due(fx);
    cap_scene_make(fx, 2, 3, now - 40, &a); /* the first claim takes 2 of 3: full of node-a's leases */
    assert_int_equal(store_delivery_claim_due(fx->s, "node-a", now, now + 30000, 100, &lim, &jobs), 0);
    assert_int_equal(jobs.n, 2);
    job_list_free(&jobs);
    assert_int_equal(n_held, 1);
    assert_true(held_has(held, n_held, a.ep.id));

    cap_scene_make(fx, 0, 1, now - 30, &b); /* uncapped, due after a's rows */
    snprintf(full[0], sizeof full[0], "%s", a.ep.id);
    lim.full = (const char (*)[HOOKD_ID_MAX])full;
    lim.n_full = 1;
    n_held = 0;
    assert_int_equal(store_delivery_claim_due(fx->s, "node-a", now, now + 30000, 100, &lim, &jobs), 0);
    assert_int_equal(jobs.n, 1);
    assert_string_equal(jobs.items[0].d.endpoint_id, b.ep.id);
    job_list_free(&jobs);
    assert_int_equal(n_held, 1);
    assert_true(held_has(held, n_held, a.ep.id));
    assert_int_equal(leased_count(fx, a.ep.id), 2);

    cap_scene_free(&a);
    cap_scene_free(&b);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_cap_counts_other_nodes_leases),
        T(test_cap_claim_reports_more_due),
        T(test_cap_claim_reports_held),
        T(test_cap_claim_full_of_own_leases),
        T(test_cap_expired_leases_do_not_count),
        T(test_cap_endpoint_override),
        T(test_cap_zero_is_unlimited),
        T(test_cap_full_endpoint_does_not_block_others),
        T(test_cap_earliest_across_endpoints),
        T(test_cap_concurrent_claims),
        T(test_cap_concurrent_claim_and_late_insert),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
