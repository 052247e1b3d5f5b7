/*
 * Store conformance, replays on either backend (HOOKD_TEST_STORE): the
 * count of a delivery filter, a replay's record, its batches' items and
 * counts, and its progress counted from its deliveries' statuses now;
 * lists newest first, by account, with a cursor.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "store_fixture.h"

/* n dead deliveries of fx's account to one new endpoint; their ids into ids. */
static void dead_scene(struct fixture *fx, struct endpoint *ep, size_t n, char ids[][HOOKD_ID_MAX])
{
    int64_t now = clock_now_ms();
    struct job_list jobs;

    drain_due(fx);
    endpoint_make(fx, ep);
    for (size_t i = 0; i < n; i++) {
        struct event ev;
        struct delivery d;
        event_make(fx, "order.paid", &ev);
        delivery_make(fx, ev.id, ep->id, now - 1000, &d);
        snprintf(ids[i], HOOKD_ID_MAX, "%s", d.id);
        event_free(&ev);
        delivery_free(&d);
    }
    assert_int_equal(claim(fx, "n1", now, now + 60000, &jobs), (int)n);
    for (size_t i = 0; i < jobs.n; i++)
        complete(fx, &jobs.items[i], DELIVERY_DEAD, 1, 400, now, 0, 0);
    job_list_free(&jobs);
}

static void test_delivery_count(void **state)
{
    struct fixture *fx = *state;
    char ids[5][HOOKD_ID_MAX];
    struct endpoint ep;
    int64_t n = -1;

    dead_scene(fx, &ep, 5, ids);
    struct delivery_filter f = {.endpoint_id = ep.id, .status = DELIVERY_DEAD, .before_id = ids[0], .limit = 1};
    assert_int_equal(store_delivery_count(fx->s, &f, &n), 0);
    assert_int_equal(n, 5); /* the cursor and limit are not the count's */
    f.status = DELIVERY_SKIPPED;
    assert_int_equal(store_delivery_count(fx->s, &f, &n), 0);
    assert_int_equal(n, 0);
    f = (struct delivery_filter){.account = fx->account, .status = -1};
    assert_int_equal(store_delivery_count(fx->s, &f, &n), 0);
    assert_int_equal(n, 5);
    f.since = clock_now_ms() + 60000;
    assert_int_equal(store_delivery_count(fx->s, &f, &n), 0);
    assert_int_equal(n, 0);
    f = (struct delivery_filter){.status = 99};
    assert_int_equal(store_delivery_count(fx->s, &f, &n), HOOKD_EINVAL);
    endpoint_free(&ep);
}

static void test_delivery_replay_many(void **state)
{
    struct fixture *fx = *state;
    char ids[3][HOOKD_ID_MAX];
    struct endpoint ep;
    struct delivery d = {0};
    int64_t now = clock_now_ms();
    bool replayed[4] = {true, true, true, true};

    dead_scene(fx, &ep, 3, ids);
    /* One pending already (replayed before), one unknown: neither is touched. */
    assert_int_equal(store_delivery_replay(fx->s, ids[1], now, &d), 0);
    delivery_free(&d);
    const char *batch[4] = {ids[0], ids[1], "dlv_unknown", ids[2]};
    assert_int_equal(store_delivery_replay_many(fx->s, batch, 4, 1u << DELIVERY_SKIPPED, now, replayed), 0);
    for (int i = 0; i < 4; i++)
        assert_false(replayed[i]); /* dead is not skipped */
    assert_int_equal(store_delivery_replay_many(fx->s, batch, 4, 1u << DELIVERY_DEAD, now + 7, replayed), 0);
    assert_true(replayed[0]);
    assert_false(replayed[1]);
    assert_false(replayed[2]);
    assert_true(replayed[3]);
    assert_int_equal(store_delivery_get(fx->s, ids[0], &d), 0);
    assert_int_equal(d.status, DELIVERY_PENDING);
    assert_int_equal(d.attempt_count, 0);
    assert_int_equal(d.next_attempt_at, now + 7);
    assert_null(d.lease_owner);
    delivery_free(&d);
    assert_int_equal(store_delivery_get(fx->s, ids[1], &d), 0);
    assert_int_equal(d.next_attempt_at, now); /* the earlier replay's */
    delivery_free(&d);
    assert_int_equal(store_delivery_replay_many(fx->s, batch, 0, 1u << DELIVERY_DEAD, now, replayed), 0);
    endpoint_free(&ep);
}

static void test_replay_record_and_progress(void **state)
{
    struct fixture *fx = *state;
    char ids[4][HOOKD_ID_MAX];
    const char *batch[4];
    struct endpoint ep;
    struct replay r = {0}, got = {0};
    struct delivery d = {0};
    int64_t now = clock_now_ms();

    dead_scene(fx, &ep, 4, ids);
    id_new(r.id, "rpl_");
    r.actor = "tok_x";
    r.account = fx->account;
    r.kind = REPLAY_RANGE;
    r.filter = "{\"status\":\"dead\"}";
    r.created_at = now;
    r.matched = 4;
    assert_int_equal(store_replay_insert(fx->s, &r), 0);
    assert_int_equal(store_replay_insert(fx->s, &r), HOOKD_EEXISTS);
    /* Two batches: three replayed and one skipped, then the end. */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(store_delivery_replay(fx->s, ids[i], now, &d), 0);
        delivery_free(&d);
        batch[i] = ids[i];
    }
    assert_int_equal(store_replay_record(fx->s, r.id, batch, 2, 0, false, now), 0);
    assert_int_equal(store_replay_get(fx->s, r.id, &got), 0);
    assert_int_equal(got.finished_at, 0);
    assert_int_equal(got.replayed, 2);
    replay_free(&got);
    assert_int_equal(store_replay_record(fx->s, r.id, batch + 2, 1, 1, true, now + 5), 0);
    assert_int_equal(store_replay_record(fx->s, "rpl_none", batch, 1, 0, true, now), HOOKD_ENOTFOUND);
    assert_int_equal(store_replay_get(fx->s, r.id, &got), 0);
    assert_string_equal(got.id, r.id);
    assert_string_equal(got.actor, "tok_x");
    assert_string_equal(got.account, fx->account);
    assert_int_equal(got.kind, REPLAY_RANGE);
    assert_string_equal(got.filter, "{\"status\":\"dead\"}");
    assert_int_equal(got.created_at, now);
    assert_int_equal(got.finished_at, now + 5);
    assert_int_equal(got.matched, 4);
    assert_int_equal(got.replayed, 3);
    assert_int_equal(got.skipped, 1);
    assert_int_equal(got.pending, 3); /* replayed: pending again */
    assert_int_equal(got.delivered + got.failed + got.superseded, 0);
    replay_free(&got);

    /* Progress follows the deliveries: one delivered, one dead again. */
    struct job_list jobs;
    assert_int_equal(claim(fx, "n1", now + 10, now + 60000, &jobs), 3);
    complete(fx, &jobs.items[0], DELIVERY_DELIVERED, 1, 200, now + 10, 0, 0);
    complete(fx, &jobs.items[1], DELIVERY_DEAD, 1, 400, now + 10, 0, 0);
    job_list_free(&jobs);
    assert_int_equal(store_replay_get(fx->s, r.id, &got), 0);
    assert_int_equal(got.pending, 1);
    assert_int_equal(got.delivered, 1);
    assert_int_equal(got.failed, 1);
    replay_free(&got);
    assert_int_equal(store_replay_get(fx->s, "rpl_none", &got), HOOKD_ENOTFOUND);
    endpoint_free(&ep);
}

static void test_replay_list(void **state)
{
    struct fixture *fx = *state;
    struct replay r = {0};
    struct replay_list l = {0};
    char ids[3][HOOKD_ID_MAX];

    for (int i = 0; i < 3; i++) {
        id_new(r.id, "rpl_");
        snprintf(ids[i], sizeof ids[i], "%s", r.id);
        r.actor = "admin";
        r.account = i == 2 ? NULL : fx->account;
        r.kind = REPLAY_EVENT;
        r.filter = "{}";
        r.created_at = clock_now_ms();
        assert_int_equal(store_replay_insert(fx->s, &r), 0);
    }
    assert_int_equal(store_replay_list(fx->s, &(struct replay_filter){.account = fx->account, .limit = 10}, &l), 0);
    assert_int_equal(l.n, 2);
    assert_true(strcmp(l.items[0].id, l.items[1].id) > 0); /* newest first */
    assert_int_equal(l.items[0].kind, REPLAY_EVENT);
    char cursor[HOOKD_ID_MAX];
    snprintf(cursor, sizeof cursor, "%s", l.items[0].id);
    replay_list_free(&l);
    assert_int_equal(
        store_replay_list(fx->s, &(struct replay_filter){.account = fx->account, .before_id = cursor, .limit = 10}, &l),
        0);
    assert_int_equal(l.n, 1);
    assert_string_not_equal(l.items[0].id, cursor);
    replay_list_free(&l);
    assert_int_equal(store_replay_list(fx->s, &(struct replay_filter){.limit = 1}, &l), 0);
    assert_int_equal(l.n, 1);
    replay_list_free(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_delivery_count, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delivery_replay_many, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replay_record_and_progress, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replay_list, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
