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

#include <time.h>

#include "store/store_fixture.h"

/* Both dialects' statements of the series, to read their plans. */
#define SP(n) "?" #n
#define STATS_MINUTES STATS_SQLITE_MINUTES
#define STATS_HEX12 STATS_SQLITE_HEX12
#define STATS_ODD STATS_ODD_SQLITE
#define STATS_INDEXED STATS_SQLITE_INDEXED
#include "store/stats_sql.h"
static const char *const sqlite_series[] = {STATS_SQL_EVENTS, STATS_SQL_INBOUND};
#undef SP
#undef STATS_MINUTES
#undef STATS_HEX12
#undef STATS_ODD
#undef STATS_INDEXED
#define SP(n) "$" #n
#define STATS_MINUTES STATS_PG_MINUTES
#define STATS_HEX12 STATS_PG_HEX12
#define STATS_ODD STATS_ODD_PG
#define STATS_INDEXED STATS_PG_INDEXED
static const char *const pg_series[] = {STATS_SQL_EVENTS, STATS_SQL_INBOUND};

#define MIN_MS 60000LL

/* Runs SQL on the fresh store with two times put in (a literal format, so it is checked). */
#define SQL_AT(fresh, fmt, a, b)                                                 \
    do {                                                                         \
        char sql_[512];                                                          \
        snprintf(sql_, sizeof sql_, fmt, (long long)(a), (long long)(b));        \
        fixture_sql(fresh, sql_);                                                \
    } while (0)

/*
 * Now, once at least 10 s of the current minute are left (else at the next
 * minute's start): the tests put "now" rows in minute 9 of a window that ends
 * with this minute, and a run that crossed into the next one (migrations under
 * ASan take seconds) found them in minute 10.
 */
static int64_t now_with_room(void)
{
    int64_t now = clock_now_ms();

    if (now % MIN_MS > MIN_MS - 10000) {
        int64_t wait = MIN_MS - now % MIN_MS + 5;
        struct timespec ts = {.tv_sec = wait / 1000, .tv_nsec = wait % 1000 * 1000000};
        nanosleep(&ts, NULL);
        now = clock_now_ms();
    }
    return now;
}

static void test_minutes_and_rejected(void **state)
{
    struct fixture *fx = *state, fresh = *fx;
    struct fresh_store f;
    struct store *s;
    struct stats_minute m[10];
    struct rejection_count_list rej = {0};
    struct endpoint a = {0}, b = {0};
    int64_t now, since;

    fresh_store_make(fx, &f);
    assert_true(strlen(f.dsn) < sizeof fresh.dsn);
    memcpy(fresh.dsn, f.dsn, strlen(f.dsn) + 1);
    assert_int_equal(store_open(f.dsn, &s), 0);
    assert_int_equal(store_migrate(s), 0);
    now = now_with_room();
    since = now - now % MIN_MS - 9 * MIN_MS;
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

/* The 12 hex digits of ms, as an id holds them. */
static void hex12(int64_t ms, char out[13]) { snprintf(out, 13, "%012llx", (unsigned long long)ms); }

/*
 * The series count by id (store/stats_sql.h): a row whose id encodes its time
 * through the id index, any other through the odd rows' indexes, so every row
 * counts in the minute of its time column whatever its id: hookd's own, a
 * client's id, an id that encodes another minute, upper-case digits, a time
 * outside what 12 digits hold, an id of another prefix.
 */
static void test_minutes_by_id(void **state)
{
    struct fixture *fx = *state, fresh = *fx;
    struct fresh_store f;
    struct store *s;
    struct stats_minute m[10];
    int64_t now, since;
    char h3[13], h5[13], h6[13], sql[1024];
    struct event ev = {0};
    struct inbox_item it = {0};
    struct inbox_outcome out;

    fresh_store_make(fx, &f);
    memcpy(fresh.dsn, f.dsn, strlen(f.dsn) + 1);
    assert_int_equal(store_open(f.dsn, &s), 0);
    assert_int_equal(store_migrate(s), 0);
    now = now_with_room();
    since = now - now % MIN_MS - 9 * MIN_MS;
    fresh.s = s;

    /* Through the store: an event with a client's id, an inbound item with hookd's. */
    snprintf(ev.id, sizeof ev.id, "order-1");
    ev.type = strdup("order.paid");
    ev.payload = strdup("{}");
    assert_int_equal(store_event_insert(s, &ev, NULL), 0);
    snprintf(it.source, sizeof it.source, "shop");
    it.event_id = strdup("e-now");
    it.payload = strdup("{}");
    snprintf(it.payload_sha256, sizeof it.payload_sha256, "%064d", 0);
    assert_int_equal(store_inbox_insert(s, &it, &out), 0);
    /* A new id and its time column share one millisecond. */
    char digits[13];
    memcpy(digits, it.id + 4, 12);
    digits[12] = '\0';
    assert_int_equal(it.received_at, strtoll(digits, NULL, 16));

    hex12(since + 3 * MIN_MS + 7, h3);
    hex12(since + 5 * MIN_MS, h5);
    hex12(since + 6 * MIN_MS + 1, h6);
    snprintf(sql, sizeof sql,
             "INSERT INTO hookd_inbox(id, source, event_id, payload, payload_sha256, received_at) VALUES"
             " ('inb_%sa', 'sql', 'agrees-3', '{}', 'x', %lld),"        /* id and time agree: minute 3 */
             " ('inb_%sb', 'sql', 'moved-to-5', '{}', 'x', %lld),"      /* id says 3, time says 5 */
             " ('inb_%s', 'sql', 'agrees-5', '{}', 'x', %lld),"         /* 12 digits and nothing more */
             " ('inb_%sC', 'sql', 'upper-6', '{}', 'x', %lld),"          /* upper-case digits: by its time, 6 */
             " ('inb_ffffffffffffd', 'sql', 'negative', '{}', 'x', -1),"  /* before 1970: outside */
             " ('inb_ffffffffffffe', 'sql', 'far', '{}', 'x', 281474976710655 + 1)," /* beyond 12 digits */
             " ('evt_%s', 'sql', 'other-prefix', '{}', 'x', %lld)",       /* another prefix: by its time, 8 */
             h3, (long long)(since + 3 * MIN_MS + 7), h3, (long long)(since + 5 * MIN_MS + 10), h5,
             (long long)(since + 5 * MIN_MS), h6, (long long)(since + 6 * MIN_MS + 1), h3,
             (long long)(since + 8 * MIN_MS));
    for (char *p = sql; (p = strstr(p, "inb_")) != NULL; p += 4) /* the upper-case one */
        if (strncmp(p + 4, h6, 12) == 0)
            for (int i = 4; i < 16; i++)
                p[i] = (char)(p[i] >= 'a' && p[i] <= 'f' ? p[i] - 32 : p[i]);
    fixture_sql(&fresh, sql);
    /* An event by a bare INSERT (the SQL default id, its own minute) and one whose id encodes minute 2. */
    fixture_sql(&fresh, "INSERT INTO hookd_outbox(event_type, payload) VALUES ('a', '{}')");
    hex12(since + 2 * MIN_MS, h3);
    snprintf(sql, sizeof sql, "INSERT INTO hookd_outbox(id, event_type, payload, created_at) VALUES ('evt_%s0', 'a', '{}', %lld)",
             h3, (long long)(since + 2 * MIN_MS));
    fixture_sql(&fresh, sql);

    assert_int_equal(store_stats_minutes(s, since, NULL, m, 10), 0);
    assert_int_equal(m[3].inbound, 1);
    assert_int_equal(m[5].inbound, 2);
    assert_int_equal(m[6].inbound, 1);
    assert_int_equal(m[8].inbound, 1);
    assert_int_equal(m[9].inbound, 1);
    assert_int_equal(m[0].inbound + m[1].inbound + m[2].inbound + m[4].inbound + m[7].inbound, 0);
    assert_int_equal(m[2].events, 1);
    assert_int_equal(m[9].events, 2);
    assert_int_equal(m[0].events + m[1].events + m[3].events + m[4].events + m[5].events + m[6].events +
                         m[7].events + m[8].events,
                     0);

    event_free(&ev);
    inbox_item_free(&it);
    store_close(s);
    fresh_store_drop(fx, &f);
}

/* No series reads its table whole: the id index and the odd rows' indexes serve every part. */
static void test_series_plans(void **state)
{
    struct fixture *fx = *state;
    bool pg = strncmp(fx->dsn, "sqlite:", 7) != 0;
    const char *const *series = pg ? pg_series : sqlite_series;
    static const char *const tables[] = {"hookd_outbox", "hookd_inbox"};
    char plan[16384];

    for (int i = 0; i < 2; i++) {
        fixture_plan(fx, series[i], "0, 3600000", plan, sizeof plan);
        if (getenv("HOOKD_TEST_SHOW_PLANS") || plan_scans(plan, tables[i], NULL))
            print_error("%s\n", plan);
        assert_false(plan_scans(plan, tables[i], NULL));
        assert_non_null(strstr(plan, "_odd_id"));
        assert_non_null(strstr(plan, "_odd_time"));
    }
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {T(test_minutes_and_rejected), T(test_minutes_by_id), T(test_series_plans)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
