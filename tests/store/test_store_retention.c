/*
 * Store conformance, retention (both backends): the purge takes only what it
 * may, in batches of the size asked: delivered and superseded deliveries
 * older than the cutoff with their attempts; outbox rows fanned out, as old,
 * without a delivery left (never one with an open, dead or skipped delivery);
 * processed inbox items' payloads, keeping the row and so its idempotency key.
 * Rows are written by SQL, as an application or an older version could.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "store_fixture.h"

#define OLD 1000        /* ms: long before the cutoff */
#define CUTOFF 100000
#define FRESH 200000

/* The test's own empty database in fx (purges look at every row); fx's own DSN is kept to go back to. */
static char home_dsn[256];

static void fresh_begin(struct fixture *fx, struct fresh_store *f)
{
    int n;

    fresh_store_make(fx, f);
    snprintf(home_dsn, sizeof home_dsn, "%s", fx->dsn);
    store_close(fx->s);
    n = snprintf(fx->dsn, sizeof fx->dsn, "%s", f->dsn);
    assert_true(n > 0 && (size_t)n < sizeof fx->dsn);
    assert_int_equal(store_open(fx->dsn, &fx->s), 0);
    assert_int_equal(store_migrate(fx->s), 0);
}

static void fresh_end(struct fixture *fx, struct fresh_store *f)
{
    store_close(fx->s);
    snprintf(fx->dsn, sizeof fx->dsn, "%s", home_dsn);
    assert_int_equal(store_open(fx->dsn, &fx->s), 0); /* the fixture's teardown closes it */
    fresh_store_drop(fx, f);
}

static void sqlf(struct fixture *fx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sqlf(struct fixture *fx, const char *fmt, ...)
{
    char sql[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    fixture_sql(fx, sql);
}

static void event_row(struct fixture *fx, const char *id, int64_t created, bool dispatched)
{
    if (dispatched)
        sqlf(fx, "INSERT INTO hookd_outbox(id, event_type, payload, created_at, dispatched_at)"
                 " VALUES ('%s', 'order.paid', '{}', %lld, %lld)", id, (long long)created, (long long)created);
    else
        sqlf(fx, "INSERT INTO hookd_outbox(id, event_type, payload, created_at) VALUES ('%s', 'order.paid', '{}', %lld)",
             id, (long long)created);
}

static void delivery_row(struct fixture *fx, const char *id, const char *event_id, const char *status, int64_t created)
{
    sqlf(fx, "INSERT INTO hookd_deliveries(id, event_id, endpoint_id, status, created_at, next_attempt_at)"
             " VALUES ('%s', '%s', 'ep_%s', '%s', %lld, %lld)", id, event_id, id, status, (long long)created,
         (long long)created);
    sqlf(fx, "INSERT INTO hookd_attempts(delivery_id, n, started_at, status_code) VALUES ('%s', 1, %lld, 200)", id,
         (long long)created);
}

static bool delivery_present(struct fixture *fx, const char *id)
{
    struct delivery d;
    int rc = store_delivery_get(fx->s, id, &d);

    assert_true(rc == 0 || rc == HOOKD_ENOTFOUND);
    if (rc == 0)
        delivery_free(&d);
    return rc == 0;
}

static size_t attempts_of(struct fixture *fx, const char *id)
{
    struct attempt_list l;
    size_t n;

    assert_int_equal(store_attempt_list(fx->s, id, &l), 0);
    n = l.n;
    attempt_list_free(&l);
    return n;
}

static bool event_present(struct fixture *fx, const char *id)
{
    struct event e;
    int rc = store_event_get(fx->s, id, &e);

    assert_true(rc == 0 || rc == HOOKD_ENOTFOUND);
    if (rc == 0)
        event_free(&e);
    return rc == 0;
}

static void test_purge_deliveries_takes_only_final_old_ones(void **state)
{
    struct fixture *fx = *state;
    struct fresh_store f;
    static const char *const kept[][2] = {{"dlv_dead", "dead"},       {"dlv_skipped", "skipped"},
                                          {"dlv_pending", "pending"}, {"dlv_retrying", "retrying"}};
    int64_t n;

    fresh_begin(fx, &f);
    event_row(fx, "evt_r", OLD, true);
    delivery_row(fx, "dlv_d1", "evt_r", "delivered", OLD);
    sqlf(fx, "INSERT INTO hookd_attempts(delivery_id, n, started_at, status_code) VALUES ('dlv_d1', 2, %d, 500)", OLD);
    delivery_row(fx, "dlv_d2", "evt_r", "delivered", OLD + 1);
    delivery_row(fx, "dlv_d3", "evt_r", "delivered", OLD + 2);
    delivery_row(fx, "dlv_sup", "evt_r", "superseded", OLD + 3);
    for (size_t i = 0; i < 4; i++)
        delivery_row(fx, kept[i][0], "evt_r", kept[i][1], OLD);
    delivery_row(fx, "dlv_new", "evt_r", "delivered", FRESH);

    assert_int_equal(store_purge_deliveries(fx->s, CUTOFF, 2, &n), 0);
    assert_int_equal(n, 2);
    assert_false(delivery_present(fx, "dlv_d1")); /* the oldest first */
    assert_false(delivery_present(fx, "dlv_d2"));
    assert_true(delivery_present(fx, "dlv_d3"));
    assert_int_equal(attempts_of(fx, "dlv_d1"), 0);
    assert_int_equal(store_purge_deliveries(fx->s, CUTOFF, 2, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(store_purge_deliveries(fx->s, CUTOFF, 2, &n), 0);
    assert_int_equal(n, 0);
    assert_false(delivery_present(fx, "dlv_d3"));
    assert_false(delivery_present(fx, "dlv_sup"));
    for (size_t i = 0; i < 4; i++) {
        assert_true(delivery_present(fx, kept[i][0]));
        assert_int_equal(attempts_of(fx, kept[i][0]), 1);
    }
    assert_true(delivery_present(fx, "dlv_new"));
    assert_int_equal(attempts_of(fx, "dlv_new"), 1);
    fresh_end(fx, &f);
}

/* A delivery written by the fan-out leased and unrecorded (DESIGN §3), then delivered by its first result. */
static void unrecorded_delivered(struct fixture *fx, const char *id, const char *event_id, int64_t created)
{
    struct delivery d = {.status = DELIVERY_PENDING, .lease_owner = (char *)"n1", .lease_until = created + 60000,
                         .lease_token = 1, .next_attempt_at = created, .created_at = created, .unrecorded = true};
    struct delivery_result r = {
        .delivery_id = d.id, .lease_owner = "n1", .lease_token = 1, .status = DELIVERY_DELIVERED, .unrecorded = &d,
        .attempt = {.n = 1, .started_at = created + 1, .duration_ms = 3, .status_code = 200, .response = "ok",
                    .node = "n1"},
    };

    snprintf(d.id, sizeof d.id, "%s", id);
    snprintf(d.event_id, sizeof d.event_id, "%s", event_id);
    snprintf(d.endpoint_id, sizeof d.endpoint_id, "ep_%s", id);
    assert_int_equal(store_delivery_insert_many(fx->s, &d, 1), 0);
    assert_int_equal(store_delivery_complete(fx->s, &r, created + 5), 0);
}

/* The first attempt kept in its delivery's row (PostgreSQL) goes with the row; a later attempt's row with it. */
static void test_purge_takes_first_attempts_with_their_delivery(void **state)
{
    struct fixture *fx = *state;
    struct fresh_store f;
    int64_t n;

    fresh_begin(fx, &f);
    event_row(fx, "evt_u", OLD, true);
    unrecorded_delivered(fx, "dlv_u_old", "evt_u", OLD);
    sqlf(fx, "INSERT INTO hookd_attempts(delivery_id, n, started_at, status_code) VALUES ('dlv_u_old', 1, %d, 200)",
         OLD + 50); /* a replay's */
    event_row(fx, "evt_v", FRESH, true);
    unrecorded_delivered(fx, "dlv_u_new", "evt_v", FRESH);
    assert_int_equal(attempts_of(fx, "dlv_u_old"), 2);
    assert_int_equal(fixture_sql_int(fx, "SELECT count(*) FROM hookd_attempts_all"), 3);
    assert_int_equal(store_purge_deliveries(fx->s, CUTOFF, 10, &n), 0);
    assert_int_equal(n, 1);
    assert_false(delivery_present(fx, "dlv_u_old"));
    assert_int_equal(attempts_of(fx, "dlv_u_old"), 0);
    assert_int_equal(attempts_of(fx, "dlv_u_new"), 1);
    assert_int_equal(fixture_sql_int(fx, "SELECT count(*) FROM hookd_attempts_all"), 1);
    assert_int_equal(fixture_sql_int(fx, "SELECT count(*) FROM hookd_attempts WHERE delivery_id = 'dlv_u_old'"), 0);
    fresh_end(fx, &f);
}

/* Scans by seq, `limit` rows a call, until next_seq says 0; returns what it purged. */
static int64_t purge_events_pass(struct fixture *fx, int limit)
{
    int64_t after = 0, next, n, total = 0;

    for (int i = 0; i < 100; i++) {
        assert_int_equal(store_purge_events(fx->s, after, CUTOFF, limit, &next, &n), 0);
        total += n;
        if (next == 0)
            return total;
        assert_true(next > after);
        after = next;
    }
    fail_msg("the scan did not end");
    return total;
}

static void test_purge_events_keeps_every_event_with_a_delivery(void **state)
{
    struct fixture *fx = *state;
    struct fresh_store f;

    fresh_begin(fx, &f);
    event_row(fx, "evt_gone", OLD, true);       /* its deliveries were purged */
    event_row(fx, "evt_dead", OLD, true);       /* a dead letter: kept until resolved */
    delivery_row(fx, "dlv_e_dead", "evt_dead", "dead", OLD);
    event_row(fx, "evt_none", OLD, true);       /* nobody subscribed */
    event_row(fx, "evt_open", OLD, true);       /* still being delivered */
    delivery_row(fx, "dlv_e_open", "evt_open", "retrying", OLD);
    event_row(fx, "evt_skipped", OLD, true);
    delivery_row(fx, "dlv_e_skip", "evt_skipped", "skipped", OLD);
    event_row(fx, "evt_waiting", OLD, false);   /* not fanned out yet */
    event_row(fx, "evt_fresh", FRESH, true);
    event_row(fx, "evt_after", OLD, true);      /* past a fresh row: the next pass's */

    assert_int_equal(purge_events_pass(fx, 2), 2);
    assert_false(event_present(fx, "evt_gone"));
    assert_false(event_present(fx, "evt_none"));
    assert_true(event_present(fx, "evt_dead"));
    assert_true(event_present(fx, "evt_open"));
    assert_true(event_present(fx, "evt_skipped"));
    assert_true(event_present(fx, "evt_waiting"));
    assert_true(event_present(fx, "evt_fresh"));
    assert_true(event_present(fx, "evt_after"));
    assert_int_equal(purge_events_pass(fx, 100), 0);
    /* the dead letter resolved (replayed and delivered), its delivery purged: the event goes */
    sqlf(fx, "UPDATE hookd_deliveries SET status = 'delivered' WHERE id = 'dlv_e_dead'");
    int64_t n;
    assert_int_equal(store_purge_deliveries(fx->s, CUTOFF, 10, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(purge_events_pass(fx, 3), 1);
    assert_false(event_present(fx, "evt_dead"));
    fresh_end(fx, &f);
}

static void inbox_row(struct fixture *fx, const char *id, const char *event_id, const char *status, int64_t processed)
{
    sqlf(fx, "INSERT INTO hookd_inbox(id, source, event_id, payload, payload_sha256, status, received_at, processed_at)"
             " VALUES ('%s', 'src', '%s', '{\"a\":1}', '%064d', '%s', %lld, %lld)", id, event_id, 0, status,
         (long long)processed, (long long)processed);
}

static void test_purge_inbox_drops_payloads_and_keeps_keys(void **state)
{
    struct fixture *fx = *state;
    struct fresh_store f;
    static const char *const kept[][3] = {{"inb_q", "e-q", "quarantined"}, {"inb_d", "e-d", "deferred"},
                                          {"inb_p", "e-p", "pending"}};
    struct inbox_item it;
    struct inbox_outcome out;
    int64_t n;

    fresh_begin(fx, &f);
    inbox_row(fx, "inb_old1", "e-1", "processed", OLD);
    inbox_row(fx, "inb_old2", "e-2", "processed", OLD + 1);
    inbox_row(fx, "inb_new", "e-3", "processed", FRESH);
    for (size_t i = 0; i < 3; i++)
        inbox_row(fx, kept[i][0], kept[i][1], kept[i][2], OLD);
    assert_int_equal(store_purge_inbox(fx->s, CUTOFF, 1, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(store_purge_inbox(fx->s, CUTOFF, 5, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(store_purge_inbox(fx->s, CUTOFF, 5, &n), 0);
    assert_int_equal(n, 0);
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(store_inbox_get(fx->s, i == 0 ? "inb_old1" : "inb_old2", &it), 0);
        assert_string_equal(it.payload, "");
        assert_string_equal(inbox_status_name(it.status), "processed");
        inbox_item_free(&it);
    }
    assert_int_equal(store_inbox_get(fx->s, "inb_new", &it), 0);
    assert_string_equal(it.payload, "{\"a\":1}");
    inbox_item_free(&it);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(store_inbox_get(fx->s, kept[i][0], &it), 0);
        assert_string_equal(it.payload, "{\"a\":1}");
        inbox_item_free(&it);
    }
    /* The key stays: the provider's copy of a purged event is still a duplicate. */
    memset(&it, 0, sizeof it);
    snprintf(it.source, sizeof it.source, "src");
    it.event_id = strdup("e-1");
    it.payload = strdup("{\"a\":1}");
    snprintf(it.payload_sha256, sizeof it.payload_sha256, "%064d", 0);
    assert_int_equal(store_inbox_insert(fx->s, &it, &out), 0);
    assert_true(out.duplicate);
    assert_string_equal(out.id, "inb_old1");
    inbox_item_free(&it);
    fresh_end(fx, &f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_purge_deliveries_takes_only_final_old_ones, setup, teardown),
        cmocka_unit_test_setup_teardown(test_purge_takes_first_attempts_with_their_delivery, setup, teardown),
        cmocka_unit_test_setup_teardown(test_purge_events_keeps_every_event_with_a_delivery, setup, teardown),
        cmocka_unit_test_setup_teardown(test_purge_inbox_drops_payloads_and_keeps_keys, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
