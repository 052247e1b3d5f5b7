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

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_key),
        T(test_claim_oldest_open_per_resource),
        T(test_supersede_latest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
