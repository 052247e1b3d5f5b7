/*
 * The store conformance suite, part 5: delivery_slots, the in-flight slots a
 * fan-out may fill with deliveries it inserts already leased. The cap and its
 * overrides, every node's live leases counted, due unleased rows served by
 * claims first, unknown and disabled endpoints, results by position, and on
 * PostgreSQL the per-endpoint lock held to the caller's transaction and
 * whether an endpoint's slots turn over (lease_limits.turning). Uses the
 * store_*() wrappers only (fixture: store_fixture.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "store/store_fixture.h"

/* An enabled endpoint with its own max_in_flight (0: the call's default cap). */
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

/* A delivery of endpoint_id (with an event of its own) in state st, due at next_at, leased to owner
 * until lease_until (owner NULL: unleased). */
static void delivery_put(struct fixture *fx, const char *endpoint_id, enum delivery_status st, int64_t next_at,
                         const char *owner, int64_t lease_until)
{
    struct event ev;
    struct delivery d = {.status = st, .next_attempt_at = next_at, .lease_until = lease_until,
                         .lease_token = owner ? 1 : 0};

    event_make(fx, "order.paid", &ev);
    id_new(d.id, "dlv_");
    snprintf(d.event_id, sizeof d.event_id, "%s", ev.id);
    snprintf(d.endpoint_id, sizeof d.endpoint_id, "%s", endpoint_id);
    d.account = fx->account;          /* borrowed, not freed */
    d.lease_owner = (char *)owner;    /* borrowed, not freed */
    if (!delivery_status_open(st))
        d.attempt_count = 1;
    assert_int_equal(store_delivery_insert(fx->s, &d), 0);
    event_free(&ev);
}

/* n live leases of endpoint_id held by owner, due a moment ago (what a fan-out or a claim leaves). */
static void leases_put(struct fixture *fx, const char *endpoint_id, int n, const char *owner, int64_t now)
{
    for (int i = 0; i < n; i++)
        delivery_put(fx, endpoint_id, DELIVERY_PENDING, now - 100, owner, now + 60000);
}

/* The slots of one endpoint through connection s. */
static int slots_on(struct store *s, int64_t now, int default_cap, const char *endpoint_id)
{
    const char *ids[1] = {endpoint_id};
    int slots[1] = {-7};

    assert_int_equal(store_delivery_slots(s, now, &(struct lease_limits){.default_cap = default_cap}, ids, 1, slots), 0);
    return slots[0];
}

static int slots_of(struct fixture *fx, int64_t now, int default_cap, const char *endpoint_id)
{
    return slots_on(fx->s, now, default_cap, endpoint_id);
}

/* No cap is STORE_SLOTS_UNCAPPED; the default cap applies; an endpoint's own max_in_flight overrides it. */
static void test_slots_caps(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct endpoint plain, three;

    endpoint_make_capped(fx, 0, &plain);
    endpoint_make_capped(fx, 3, &three);
    assert_int_equal(slots_of(fx, now, 0, plain.id), STORE_SLOTS_UNCAPPED);
    assert_int_equal(slots_of(fx, now, -1, plain.id), STORE_SLOTS_UNCAPPED); /* a cap <= 0 is none */
    assert_int_equal(slots_of(fx, now, 5, plain.id), 5);
    assert_int_equal(slots_of(fx, now, 1, plain.id), 1);
    assert_int_equal(slots_of(fx, now, 5, three.id), 3); /* down */
    assert_int_equal(slots_of(fx, now, 2, three.id), 3); /* up */
    assert_int_equal(slots_of(fx, now, 0, three.id), 3); /* without a default */
    endpoint_free(&plain);
    endpoint_free(&three);
}

/* Every node's live leases of the endpoint count, from lease_until == now on; expired ones and other
 * endpoints' do not; more leases than the cap give 0, never less. */
static void test_slots_count_live_leases(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct endpoint ep, other, plain;

    endpoint_make_capped(fx, 0, &ep);
    endpoint_make_capped(fx, 0, &other);
    endpoint_make_capped(fx, 0, &plain);
    leases_put(fx, ep.id, 2, "node-x", now);
    leases_put(fx, ep.id, 1, "node-y", now);
    assert_int_equal(slots_of(fx, now, 5, ep.id), 2);
    /* A lease that ran out, on a row not yet due again (so it does not wait to be claimed either). */
    delivery_put(fx, ep.id, DELIVERY_PENDING, now + 60000, "node-x", now - 1);
    assert_int_equal(slots_of(fx, now, 5, ep.id), 2);
    /* A lease that ends right now is still live. */
    delivery_put(fx, ep.id, DELIVERY_PENDING, now - 100, "node-z", now);
    assert_int_equal(slots_of(fx, now, 5, ep.id), 1);
    assert_int_equal(slots_of(fx, now, 4, ep.id), 0);
    assert_int_equal(slots_of(fx, now, 2, ep.id), 0); /* 4 leased, cap 2: not negative */
    assert_int_equal(slots_of(fx, now, 0, ep.id), STORE_SLOTS_UNCAPPED); /* leases do not matter without a cap */
    /* Another endpoint's leases are its own. */
    leases_put(fx, other.id, 5, "node-x", now);
    assert_int_equal(slots_of(fx, now, 3, other.id), 0);
    assert_int_equal(slots_of(fx, now, 8, other.id), 3);
    assert_int_equal(slots_of(fx, now, 5, ep.id), 1);
    assert_int_equal(slots_of(fx, now, 5, plain.id), 5);
    endpoint_free(&ep);
    endpoint_free(&other);
    endpoint_free(&plain);
}

/* Leases a claim took (another node's) count like inserted ones. */
static void test_slots_count_claimed_leases(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct endpoint ep;
    struct job_list jobs;

    drain_due(fx);
    endpoint_make_capped(fx, 4, &ep);
    for (int i = 0; i < 3; i++)
        delivery_put(fx, ep.id, DELIVERY_PENDING, now - 10 + i, NULL, 0);
    assert_int_equal(slots_of(fx, now, 0, ep.id), 0); /* they wait for a claim */
    assert_int_equal(claim(fx, "node-c", now, now + 30000, &jobs), 3);
    job_list_free(&jobs);
    assert_int_equal(slots_of(fx, now, 0, ep.id), 1);
    assert_int_equal(slots_of(fx, now + 30000, 0, ep.id), 1);
    /* Once the leases ran out the rows wait for a claim again: none for a fan-out. */
    assert_int_equal(slots_of(fx, now + 30001, 0, ep.id), 0);
    endpoint_free(&ep);
}

/* Due rows that wait unleased (pending or retrying, due now or earlier, never leased or lease run out)
 * leave no slots: claims serve them first. Rows due later and final rows do not hold anything back. */
/*
 * Rows whose lease ran out are claimed, counted and reported due in the one
 * due order with the rows that hold none (on SQLite they are found through
 * the leases' index, the others through the claims' index); a live lease
 * stays out of all three.
 */
static void test_expired_leases_in_due_order(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms(), at = 0;
    struct endpoint ep;
    struct job_list jobs;

    drain_due(fx);
    endpoint_make_capped(fx, 0, &ep);
    delivery_put(fx, ep.id, DELIVERY_PENDING, now - 40, "node-x", now + 60000); /* live: not due */
    delivery_put(fx, ep.id, DELIVERY_RETRYING, now - 30, NULL, 0);
    delivery_put(fx, ep.id, DELIVERY_PENDING, now - 20, "node-x", now - 1); /* ran out */
    delivery_put(fx, ep.id, DELIVERY_PENDING, now - 10, NULL, 0);
    delivery_put(fx, ep.id, DELIVERY_RETRYING, now - 5, "node-y", now - 100); /* ran out */
    assert_int_equal(store_delivery_next_due(fx->s, &at), 0);
    assert_int_equal(at, now - 30);
    assert_int_equal(slots_of(fx, now, 5, ep.id), 0); /* due rows wait */

    const int64_t want[] = {now - 30, now - 20, now - 10, now - 5};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(store_delivery_claim_due(fx->s, "node-c", now, now + 30000, 1, &(struct lease_limits){0}, &jobs),
                         0);
        assert_int_equal(jobs.n, 1);
        assert_int_equal(jobs.items[0].d.next_attempt_at, want[i]);
        assert_string_equal(jobs.items[0].d.lease_owner, "node-c");
        job_list_free(&jobs);
    }
    assert_int_equal(claim(fx, "node-c", now, now + 30000, &jobs), 0); /* the live lease stays out */
    job_list_free(&jobs);
    assert_int_equal(store_delivery_next_due(fx->s, &at), HOOKD_ENOTFOUND);
    /* Once node-c's leases run out they are due again, the earliest first. */
    assert_int_equal(store_delivery_claim_due(fx->s, "node-d", now + 30001, now + 40000, 2, &(struct lease_limits){0}, &jobs),
                     0);
    assert_int_equal(jobs.n, 2);
    assert_int_equal(jobs.items[0].d.next_attempt_at, now - 30);
    assert_int_equal(jobs.items[1].d.next_attempt_at, now - 20);
    job_list_free(&jobs);
    endpoint_free(&ep);
}

static void test_slots_due_unleased_first(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct endpoint due, due_now, retrying, expired, live, future, final;
    struct job_list jobs;

    drain_due(fx);
    endpoint_make_capped(fx, 0, &due);
    endpoint_make_capped(fx, 0, &due_now);
    endpoint_make_capped(fx, 0, &retrying);
    endpoint_make_capped(fx, 0, &expired);
    endpoint_make_capped(fx, 0, &live);
    endpoint_make_capped(fx, 0, &future);
    endpoint_make_capped(fx, 0, &final);
    delivery_put(fx, due.id, DELIVERY_PENDING, now - 10, NULL, 0);
    delivery_put(fx, due_now.id, DELIVERY_PENDING, now, NULL, 0);
    delivery_put(fx, retrying.id, DELIVERY_RETRYING, now - 10, NULL, 0);
    delivery_put(fx, expired.id, DELIVERY_PENDING, now - 10, "node-x", now - 1);
    delivery_put(fx, live.id, DELIVERY_PENDING, now - 10, "node-x", now + 60000);
    delivery_put(fx, future.id, DELIVERY_PENDING, now + 1, NULL, 0);
    delivery_put(fx, future.id, DELIVERY_RETRYING, now + 60000, NULL, 0);
    delivery_put(fx, final.id, DELIVERY_DELIVERED, 0, NULL, 0);
    delivery_put(fx, final.id, DELIVERY_DEAD, 0, NULL, 0);

    assert_int_equal(slots_of(fx, now, 5, due.id), 0);
    assert_int_equal(slots_of(fx, now, 5, due_now.id), 0);
    assert_int_equal(slots_of(fx, now, 5, retrying.id), 0);
    assert_int_equal(slots_of(fx, now, 5, expired.id), 0);
    assert_int_equal(slots_of(fx, now, 5, live.id), 4); /* a leased due row only counts */
    assert_int_equal(slots_of(fx, now, 5, future.id), 5);
    assert_int_equal(slots_of(fx, now, 5, final.id), 5);
    /* The future rows become due. */
    assert_int_equal(slots_of(fx, now + 1, 5, future.id), 0);

    /* Claimed, the waiting rows are leases: slots again, less those. */
    assert_int_equal(claim(fx, "node-c", now, now + 30000, &jobs), 4);
    job_list_free(&jobs);
    assert_int_equal(slots_of(fx, now, 5, due.id), 4);
    assert_int_equal(slots_of(fx, now, 5, due_now.id), 4);
    assert_int_equal(slots_of(fx, now, 5, retrying.id), 4);
    assert_int_equal(slots_of(fx, now, 5, expired.id), 4);
    endpoint_free(&due);
    endpoint_free(&due_now);
    endpoint_free(&retrying);
    endpoint_free(&expired);
    endpoint_free(&live);
    endpoint_free(&future);
    endpoint_free(&final);
}

/* Without a cap, due rows waiting unleased do not hold new ones back: there are no slots to queue
 * for, and claims take every due row of such an endpoint anyway. */
static void test_slots_due_unleased_first_uncapped(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct endpoint due, future;

    endpoint_make_capped(fx, 0, &due);
    endpoint_make_capped(fx, 0, &future);
    delivery_put(fx, due.id, DELIVERY_RETRYING, now - 10, NULL, 0);
    delivery_put(fx, future.id, DELIVERY_PENDING, now + 60000, NULL, 0);
    assert_int_equal(slots_of(fx, now, 0, future.id), STORE_SLOTS_UNCAPPED);
    /* Without a cap there is nothing to queue behind: claims take every due row anyway. */
    assert_int_equal(slots_of(fx, now, 0, due.id), STORE_SLOTS_UNCAPPED);
    endpoint_free(&due);
    endpoint_free(&future);
}

/* Unknown, disabled and deleted endpoints get 0, with a cap or without. */
static void test_slots_unknown_and_disabled(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct endpoint plain, capped, gone;
    char unknown[HOOKD_ID_MAX];

    id_new(unknown, "ep_");
    assert_int_equal(slots_of(fx, now, 0, unknown), 0);
    assert_int_equal(slots_of(fx, now, 5, unknown), 0);

    endpoint_make_capped(fx, 0, &plain);
    endpoint_make_capped(fx, 2, &capped);
    assert_int_equal(store_endpoint_set_enabled(fx->s, plain.id, false, "test", now), 0);
    assert_int_equal(store_endpoint_set_enabled(fx->s, capped.id, false, "test", now), 0);
    assert_int_equal(slots_of(fx, now, 0, plain.id), 0);
    assert_int_equal(slots_of(fx, now, 5, plain.id), 0);
    assert_int_equal(slots_of(fx, now, 0, capped.id), 0);
    assert_int_equal(store_endpoint_set_enabled(fx->s, plain.id, true, NULL, now), 0);
    assert_int_equal(store_endpoint_set_enabled(fx->s, capped.id, true, NULL, now), 0);
    assert_int_equal(slots_of(fx, now, 0, plain.id), STORE_SLOTS_UNCAPPED);
    assert_int_equal(slots_of(fx, now, 0, capped.id), 2);

    endpoint_make_capped(fx, 0, &gone);
    assert_int_equal(store_endpoint_delete(fx->s, gone.id), 0);
    assert_int_equal(slots_of(fx, now, 0, gone.id), 0);
    endpoint_free(&plain);
    endpoint_free(&capped);
    endpoint_free(&gone);
}

/* One call for many endpoints: each result in its id's position, the same as a call of its own. */
static void test_slots_many_by_position(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    enum { N = 7 };
    struct endpoint uncapped, own, leased, disabled, waiting, full, plain;
    char unknown[HOOKD_ID_MAX];
    const char *ids[N], *reversed[N];
    int slots[N], expect[N], slots_rev[N];

    endpoint_make_capped(fx, -1, &uncapped); /* negative: the default, as 0 */
    endpoint_make_capped(fx, 7, &own);
    endpoint_make_capped(fx, 0, &leased);
    endpoint_make_capped(fx, 0, &disabled);
    endpoint_make_capped(fx, 0, &waiting);
    endpoint_make_capped(fx, 2, &full);
    endpoint_make_capped(fx, 0, &plain);
    id_new(unknown, "ep_");
    leases_put(fx, leased.id, 3, "node-x", now);
    assert_int_equal(store_endpoint_set_enabled(fx->s, disabled.id, false, "test", now), 0);
    delivery_put(fx, waiting.id, DELIVERY_PENDING, now - 1, NULL, 0);
    leases_put(fx, full.id, 2, "node-y", now);

    /* With a default of 4 everything but own and full is capped at 4. */
    ids[0] = own.id, expect[0] = 7;
    ids[1] = leased.id, expect[1] = 1;
    ids[2] = unknown, expect[2] = 0;
    ids[3] = disabled.id, expect[3] = 0;
    ids[4] = waiting.id, expect[4] = 0;
    ids[5] = full.id, expect[5] = 0;
    ids[6] = plain.id, expect[6] = 4;
    for (int i = 0; i < N; i++)
        slots[i] = -7;
    assert_int_equal(store_delivery_slots(fx->s, now, &(struct lease_limits){.default_cap = 4}, ids, N, slots), 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(slots[i], expect[i]);
        assert_int_equal(slots_of(fx, now, 4, ids[i]), expect[i]);
    }
    for (int i = 0; i < N; i++) {
        reversed[i] = ids[N - 1 - i];
        slots_rev[i] = -7;
    }
    assert_int_equal(store_delivery_slots(fx->s, now, &(struct lease_limits){.default_cap = 4}, reversed, N, slots_rev), 0);
    for (int i = 0; i < N; i++)
        assert_int_equal(slots_rev[i], expect[N - 1 - i]);

    /* Without a default: the uncapped ones, and the rest as before. */
    ids[0] = uncapped.id;
    ids[6] = plain.id;
    assert_int_equal(store_delivery_slots(fx->s, now, &(struct lease_limits){.default_cap = 0}, ids, N, slots), 0);
    assert_int_equal(slots[0], STORE_SLOTS_UNCAPPED);
    assert_int_equal(slots[1], STORE_SLOTS_UNCAPPED); /* leased, but no cap */
    assert_int_equal(slots[2], 0);
    assert_int_equal(slots[3], 0);
    /* slots[4], waiting and uncapped: see test_slots_due_unleased_first_uncapped. */
    assert_int_equal(slots[5], 0);
    assert_int_equal(slots[6], STORE_SLOTS_UNCAPPED);

    /* No ids: nothing to do. */
    assert_int_equal(store_delivery_slots(fx->s, now, &(struct lease_limits){.default_cap = 4}, ids, 0, slots), 0);
    endpoint_free(&uncapped);
    endpoint_free(&own);
    endpoint_free(&leased);
    endpoint_free(&disabled);
    endpoint_free(&waiting);
    endpoint_free(&full);
    endpoint_free(&plain);
}

/* The fan-out's pattern: slots, then leased inserts, in one transaction; the same transaction and,
 * after the commit, every connection see the slots taken. A rollback gives them back. */
static void test_slots_fanout_in_transaction(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct endpoint ep;

    endpoint_make_capped(fx, 3, &ep);
    assert_int_equal(store_begin(fx->s), 0);
    assert_int_equal(slots_of(fx, now, 0, ep.id), 3);
    leases_put(fx, ep.id, 2, "node-a", now);
    assert_int_equal(slots_of(fx, now, 0, ep.id), 1); /* again in the same transaction: its own leases count */
    assert_int_equal(store_commit(fx->s), 0);
    assert_int_equal(slots_of(fx, now, 0, ep.id), 1);

    assert_int_equal(store_begin(fx->s), 0);
    assert_int_equal(slots_of(fx, now, 0, ep.id), 1);
    leases_put(fx, ep.id, 1, "node-a", now);
    assert_int_equal(slots_of(fx, now, 0, ep.id), 0);
    assert_int_equal(store_rollback(fx->s), 0);
    assert_int_equal(slots_of(fx, now, 0, ep.id), 1);
    endpoint_free(&ep);
}

/*
 * PostgreSQL: a capped endpoint that got slots stays locked to the caller's transaction. A second
 * connection, in its own transaction, gets 0 for it (but its slots for others) until the first
 * commits or rolls back; an uncapped endpoint is never locked; the lock holder itself is not locked out.
 */
static void test_slots_locked_to_transaction(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct endpoint capped, other, uncapped;
    struct store *b;
    const char *ids[3];
    int slots[3];

    postgres_only(fx);
    endpoint_make_capped(fx, 3, &capped);
    endpoint_make_capped(fx, 2, &other);
    endpoint_make_capped(fx, 0, &uncapped);
    assert_int_equal(store_open(fx->dsn, &b), 0);

    /* Commit ends the lock. */
    assert_int_equal(store_begin(fx->s), 0);
    assert_int_equal(slots_of(fx, now, 0, capped.id), 3);
    assert_int_equal(slots_on(b, now, 0, capped.id), 0); /* b outside a transaction is locked out too */
    assert_int_equal(store_begin(b), 0);
    ids[0] = capped.id, ids[1] = other.id, ids[2] = uncapped.id;
    assert_int_equal(store_delivery_slots(b, now, &(struct lease_limits){.default_cap = 0}, ids, 3, slots), 0);
    assert_int_equal(slots[0], 0);
    assert_int_equal(slots[1], 2);
    assert_int_equal(slots[2], STORE_SLOTS_UNCAPPED);
    /* Now b holds other: a is locked out of it, not out of its own endpoint or the uncapped one. */
    assert_int_equal(slots_of(fx, now, 0, other.id), 0);
    assert_int_equal(slots_of(fx, now, 0, capped.id), 3);
    assert_int_equal(slots_of(fx, now, 0, uncapped.id), STORE_SLOTS_UNCAPPED);
    assert_int_equal(store_commit(b), 0);
    assert_int_equal(store_begin(b), 0);
    assert_int_equal(slots_on(b, now, 0, capped.id), 0); /* a new transaction of b: a still holds it */
    assert_int_equal(store_commit(fx->s), 0);
    assert_int_equal(slots_on(b, now, 0, capped.id), 3);
    assert_int_equal(store_commit(b), 0);

    /* Rollback ends it too. */
    assert_int_equal(store_begin(fx->s), 0);
    assert_int_equal(slots_of(fx, now, 0, capped.id), 3);
    assert_int_equal(store_begin(b), 0);
    assert_int_equal(slots_on(b, now, 0, capped.id), 0);
    assert_int_equal(store_rollback(b), 0);
    assert_int_equal(store_rollback(fx->s), 0);
    assert_int_equal(store_begin(b), 0);
    assert_int_equal(slots_on(b, now, 0, capped.id), 3);
    assert_int_equal(store_commit(b), 0);

    /* Outside a transaction the call's own transaction holds it only while the call runs. */
    assert_int_equal(slots_of(fx, now, 0, capped.id), 3);
    assert_int_equal(store_begin(b), 0);
    assert_int_equal(slots_on(b, now, 0, capped.id), 3);
    assert_int_equal(store_commit(b), 0);

    /* An uncapped endpoint is never locked: both transactions get it at once. */
    assert_int_equal(store_begin(fx->s), 0);
    assert_int_equal(slots_of(fx, now, 0, uncapped.id), STORE_SLOTS_UNCAPPED);
    assert_int_equal(store_begin(b), 0);
    assert_int_equal(slots_on(b, now, 0, uncapped.id), STORE_SLOTS_UNCAPPED);
    /* With a default cap it is capped: a's uncapped call took no lock, so b gets its slots. */
    assert_int_equal(slots_on(b, now, 2, uncapped.id), 2);
    assert_int_equal(store_commit(b), 0);
    assert_int_equal(store_commit(fx->s), 0);

    store_close(b);
    endpoint_free(&capped);
    endpoint_free(&other);
    endpoint_free(&uncapped);
}

/* PostgreSQL: a second connection's leases committed while the first waited to decide count at once. */
static void test_slots_after_other_commit(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct endpoint ep;
    struct store *b;

    postgres_only(fx);
    endpoint_make_capped(fx, 3, &ep);
    assert_int_equal(store_open(fx->dsn, &b), 0);
    assert_int_equal(store_begin(fx->s), 0);
    assert_int_equal(slots_of(fx, now, 0, ep.id), 3);
    leases_put(fx, ep.id, 2, "node-a", now); /* a's fan-out, not committed yet */
    assert_int_equal(store_begin(b), 0);
    assert_int_equal(slots_on(b, now, 0, ep.id), 0);
    assert_int_equal(store_rollback(b), 0);
    assert_int_equal(store_commit(fx->s), 0);
    assert_int_equal(store_begin(b), 0);
    assert_int_equal(slots_on(b, now, 0, ep.id), 1); /* a's two leases are in */
    assert_int_equal(store_commit(b), 0);
    store_close(b);
    endpoint_free(&ep);
}

/* The slots of one endpoint and whether they turn over (lease_limits.turning). */
static int slots_turning(struct fixture *fx, int64_t now, const char *endpoint_id, bool *turning)
{
    const char *ids[1] = {endpoint_id};
    int slots[1] = {-7};

    *turning = true;
    assert_int_equal(store_delivery_slots(fx->s, now, &(struct lease_limits){.default_cap = 0, .turning = turning},
                                          ids, 1, slots), 0);
    return slots[0];
}

/* Ages every lease of endpoint_id by ms (server time): as if made that long ago. */
static void leases_age(struct fixture *fx, const char *endpoint_id, int ms)
{
    char sql[256];

    snprintf(sql, sizeof sql, "UPDATE hookd_inflight SET made_at = made_at - %d WHERE endpoint_id = '%s'", ms,
             endpoint_id);
    fixture_sql(fx, sql);
}

/*
 * PostgreSQL: whether an endpoint's slots turn over, for a fan-out that holds
 * none of them. A cap full of fresh leases does (other nodes' sends end within
 * moments); full of old ones it does not (hung), and a renewal makes no lease
 * fresh. Fewer leases than the cap, with a backlog, do (the claims take those
 * slots at once); an uncapped or rate-limited endpoint never does, nor one
 * whose live leases are all the caller's own.
 */
static void test_slots_turning(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct endpoint busy, backlog, plain, limited;
    bool turning;

    postgres_only(fx);
    endpoint_make_capped(fx, 3, &busy);
    endpoint_make_capped(fx, 3, &backlog);
    endpoint_make_capped(fx, 0, &plain);
    endpoint_make_capped(fx, 2, &limited);
    limited.rate_limit = 10;
    assert_int_equal(store_endpoint_update(fx->s, &limited), 0);

    leases_put(fx, busy.id, 3, "node-x", now);
    assert_int_equal(slots_turning(fx, now, busy.id, &turning), 0);
    assert_true(turning); /* full of leases made just now */
    leases_age(fx, busy.id, 5000);
    assert_int_equal(slots_turning(fx, now, busy.id, &turning), 0);
    assert_false(turning); /* full of leases 5 s old: hung */
    /* A renewal is no new lease. */
    char id[HOOKD_ID_MAX];
    char q[256];
    PGconn *c = PQconnectdb(fx->dsn);
    snprintf(q, sizeof q, "SELECT delivery_id FROM hookd_inflight WHERE endpoint_id = '%s' LIMIT 1", busy.id);
    PGresult *r = PQexec(c, q);
    assert_true(PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1);
    snprintf(id, sizeof id, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    PQfinish(c);
    const char *ids[1] = {id};
    int64_t token = 1;
    bool renewed = false;
    assert_int_equal(store_delivery_renew(fx->s, "node-x", ids, &token, 1, now + 90000, &renewed), 0);
    assert_true(renewed);
    assert_int_equal(slots_turning(fx, now, busy.id, &turning), 0);
    assert_false(turning);
    /* One lease ends (it ran out) and another node's takes its slot: turning again. */
    snprintf(q, sizeof q, "UPDATE hookd_inflight SET lease_until = 0 WHERE delivery_id = '%s'", id);
    fixture_sql(fx, q);
    leases_put(fx, busy.id, 1, "node-y", now);
    assert_int_equal(slots_turning(fx, now, busy.id, &turning), 0);
    assert_true(turning);

    /* A backlog with a free slot: its old lease notwithstanding, the claims lease the rest at once. */
    leases_put(fx, backlog.id, 1, "node-x", now);
    leases_age(fx, backlog.id, 5000);
    delivery_put(fx, backlog.id, DELIVERY_PENDING, now - 10, NULL, 0);
    assert_int_equal(slots_turning(fx, now, backlog.id, &turning), 0);
    assert_true(turning);

    /* Only the caller's own leases: its own dispatcher knows whether they answer (one node: never turning). */
    const char *bids[1] = {backlog.id};
    int bslots[1];
    assert_int_equal(store_delivery_slots(fx->s, now, &(struct lease_limits){.own = "node-x", .turning = &turning},
                                          bids, 1, bslots), 0);
    assert_false(turning);

    leases_put(fx, plain.id, 2, "node-x", now);
    assert_int_equal(slots_turning(fx, now, plain.id, &turning), STORE_SLOTS_UNCAPPED);
    assert_false(turning);
    leases_put(fx, limited.id, 2, "node-x", now);
    assert_int_equal(slots_turning(fx, now, limited.id, &turning), 0);
    assert_false(turning); /* its leases are the claims' */
    endpoint_free(&busy);
    endpoint_free(&backlog);
    endpoint_free(&plain);
    endpoint_free(&limited);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_slots_caps),
        T(test_slots_count_live_leases),
        T(test_slots_count_claimed_leases),
        T(test_slots_due_unleased_first),
        T(test_expired_leases_in_due_order),
        T(test_slots_due_unleased_first_uncapped),
        T(test_slots_unknown_and_disabled),
        T(test_slots_many_by_position),
        T(test_slots_fanout_in_transaction),
        T(test_slots_locked_to_transaction),
        T(test_slots_after_other_commit),
        T(test_slots_turning),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
