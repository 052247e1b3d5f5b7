/*
 * The store conformance suite: the stats family (the dashboard's series).
 * On a store of its own: events and inbound items counted in the minute of
 * their time column, the window's edges excluded; attempts and successes of
 * every endpoint and node summed per minute, or one endpoint's alone; the
 * refusals of every source summed by reason. Rows are written by SQL too, as
 * an application or an operator would. Uses the store_*() wrappers only.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "store/store_fixture.h"

#define MIN_MS 60000LL

/* Runs SQL on the fresh store with two times put in (a literal format, so it is checked). */
#define SQL_AT(fresh, fmt, a, b)                                                 \
    do {                                                                         \
        char sql_[512];                                                          \
        snprintf(sql_, sizeof sql_, fmt, (long long)(a), (long long)(b));        \
        fixture_sql(fresh, sql_);                                                \
    } while (0)

static void test_minutes_and_rejected(void **state)
{
    struct fixture *fx = *state, fresh = *fx;
    struct fresh_store f;
    struct store *s;
    struct stats_minute m[10];
    struct rejection_count_list rej = {0};
    struct endpoint a = {0}, b = {0};
    int64_t now = clock_now_ms(), since = now - now % MIN_MS - 9 * MIN_MS;

    fresh_store_make(fx, &f);
    assert_true(strlen(f.dsn) < sizeof fresh.dsn);
    memcpy(fresh.dsn, f.dsn, strlen(f.dsn) + 1);
    assert_int_equal(store_open(f.dsn, &s), 0);
    assert_int_equal(store_migrate(s), 0);
    fresh.s = s;

    /* Nothing yet: every minute zero, no refusal. */
    assert_int_equal(store_stats_minutes(s, since, NULL, m, 10), 0);
    for (int i = 0; i < 10; i++)
        assert_true(m[i].events == 0 && m[i].inbound == 0 && m[i].attempts == 0 && m[i].successes == 0);
    assert_int_equal(store_stats_rejected(s, &rej), 0);
    assert_int_equal(rej.n, 0);

    /* Events: two now through the store, two in minute 4 by SQL, one just before the window, one after it. */
    for (int i = 0; i < 2; i++) {
        struct event ev;
        event_make(&fresh, "order.paid", &ev);
        event_free(&ev);
    }
    SQL_AT(&fresh, "INSERT INTO hookd_outbox(event_type, payload, created_at) VALUES ('a', '{}', %lld), ('a', '{}', %lld)",
           since + 4 * MIN_MS, since + 5 * MIN_MS - 1);
    SQL_AT(&fresh, "INSERT INTO hookd_outbox(event_type, payload, created_at) VALUES ('a', '{}', %lld), ('a', '{}', %lld)",
           since - 1, since + 10 * MIN_MS);
    /* Inbound items: one in minute 0 (its first millisecond), two in minute 7. */
    SQL_AT(&fresh, "INSERT INTO hookd_inbox(id, source, event_id, payload, payload_sha256, received_at) VALUES"
                   " ('inb_1', 'shop', 'e1', '{}', 'x', %lld), ('inb_2', 'shop', 'e2', '{}', 'x', %lld)",
           since, since + 7 * MIN_MS + 5);
    SQL_AT(&fresh, "INSERT INTO hookd_inbox(id, source, event_id, payload, payload_sha256, received_at) VALUES"
                   " ('inb_3', 'other', 'e1', '{}', 'x', %lld), ('inb_4', 'other', 'e9', '{}', 'x', %lld)",
           since + 7 * MIN_MS + 59999, since - MIN_MS);

    /* Attempts: endpoint a by two nodes in minute 2 (3 attempts, 1 success), endpoint b in minute 9. */
    endpoint_make(&fresh, &a);
    endpoint_make(&fresh, &b);
    struct health_attempt att[] = {
        {.endpoint_id = a.id, .node = "n1", .started_at = since + 2 * MIN_MS + 10, .duration_ms = 5, .status_code = 200,
         .succeeded = true},
        {.endpoint_id = a.id, .node = "n2", .started_at = since + 2 * MIN_MS + 20, .duration_ms = 5, .status_code = 401,
         .error = "HTTP 401"},
        {.endpoint_id = a.id, .node = "n2", .started_at = since + 2 * MIN_MS + 30, .duration_ms = 5,
         .error_class = "timeout", .error = "timeout"},
        {.endpoint_id = b.id, .node = "n1", .started_at = since + 9 * MIN_MS, .duration_ms = 5, .status_code = 204,
         .succeeded = true},
    };
    assert_int_equal(store_health_record(s, att, 4, 0), 0);

    assert_int_equal(store_stats_minutes(s, since, NULL, m, 10), 0);
    assert_int_equal(m[4].events, 2);
    assert_int_equal(m[9].events, 2);
    assert_int_equal(m[0].events + m[1].events + m[2].events + m[3].events + m[5].events + m[6].events + m[7].events +
                         m[8].events,
                     0);
    assert_int_equal(m[0].inbound, 1);
    assert_int_equal(m[7].inbound, 2);
    assert_int_equal(m[2].attempts, 3);
    assert_int_equal(m[2].successes, 1);
    assert_int_equal(m[9].attempts, 1);
    assert_int_equal(m[9].successes, 1);
    /* One endpoint: its attempts only, no events or inbound. */
    assert_int_equal(store_stats_minutes(s, since, b.id, m, 10), 0);
    assert_int_equal(m[2].attempts, 0);
    assert_int_equal(m[9].attempts, 1);
    assert_int_equal(m[4].events, 0);
    assert_int_equal(m[7].inbound, 0);
    assert_int_equal(store_stats_minutes(s, since, "ep_unknown", m, 10), 0);
    assert_int_equal(m[2].attempts + m[9].attempts, 0);
    /* A window of one minute, the oldest: only what falls in it. */
    assert_int_equal(store_stats_minutes(s, since, NULL, m, 1), 0);
    assert_int_equal(m[0].inbound, 1);
    assert_int_equal(m[0].events, 0);

    /* Refusals of two sources summed by reason, in reason order, with the latest time. */
    fixture_sql(&fresh, "INSERT INTO hookd_rejection_counts(source, reason, count, last_at) VALUES"
                        " ('shop', 'bad_signature', 3, 100), ('other', 'bad_signature', 4, 200),"
                        " ('shop', 'malformed_json', 1, 50)");
    assert_int_equal(store_stats_rejected(s, &rej), 0);
    assert_int_equal(rej.n, 2);
    assert_string_equal(rej.items[0].reason, "bad_signature");
    assert_int_equal(rej.items[0].count, 7);
    assert_int_equal(rej.items[0].last_at, 200);
    assert_string_equal(rej.items[1].reason, "malformed_json");
    assert_int_equal(rej.items[1].count, 1);
    rejection_count_list_free(&rej);

    endpoint_free(&a);
    endpoint_free(&b);
    store_close(s);
    fresh_store_drop(fx, &f);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {T(test_minutes_and_rejected)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
