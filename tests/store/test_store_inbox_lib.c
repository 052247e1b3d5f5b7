/*
 * The application's own handler (hookd_inbox_work, include/hookd.h) on either
 * backend (HOOKD_TEST_STORE): each outcome with its business row committed or
 * rolled back with the mark, refusals, the daemon's claims leaving library
 * sources alone (a definition that is not JSON included), one entity at a
 * time, a foreign lease honoured until it expires, an item never taken by a
 * second connection while its transaction runs (even past its lease), a
 * callback that ends hookd's transaction, a hostile note; and the inbox's
 * NOTIFY channel the workers wake on (PostgreSQL).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "store_fixture.h"

#define SHA_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define LIBRARY_DEF                                                                                          \
    "{\"verify\":{\"scheme\":\"none\"},\"handler\":{\"library\":true},\"retry_schedule\":\"100ms,200ms\","    \
    "\"max_defer\":\"1s\"}"

/* The application's side: its own connection, the kind the backend is. */
struct app {
    bool pg;
    sqlite3 *db;
    PGconn *conn;
    struct app *other; /* a second application, for the overlap tests */
    int calls, nested_result, nested_items;
    bool commit_inside;
    int64_t sleep_ms;
    char note[300];
};

static bool is_pg(struct fixture *fx) { return strcmp(store_backend(fx->s)->name, "postgres") == 0; }

static void app_sql(struct app *a, const char *sql)
{
    if (a->pg) {
        PGresult *r = PQexec(a->conn, sql);
        assert_true(PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK);
        PQclear(r);
    } else {
        assert_int_equal(sqlite3_exec(a->db, sql, NULL, NULL, NULL), SQLITE_OK);
    }
}

static void app_open(struct fixture *fx, struct app *a)
{
    memset(a, 0, sizeof *a);
    a->pg = is_pg(fx);
    if (a->pg) {
        a->conn = PQconnectdb(fx->dsn);
        assert_int_equal(PQstatus(a->conn), CONNECTION_OK);
        app_sql(a, "SET client_min_messages = warning");
    } else {
        assert_int_equal(sqlite3_open(fx->dsn + strlen("sqlite:"), &a->db), SQLITE_OK);
        sqlite3_busy_timeout(a->db, 5000);
    }
    app_sql(a, "CREATE TABLE IF NOT EXISTS app_effects (item_id TEXT NOT NULL, event_id TEXT NOT NULL)");
}

static void app_close(struct app *a)
{
    if (a->conn)
        PQfinish(a->conn);
    if (a->db)
        sqlite3_close(a->db);
}

/* One number from a query on the fixture's backend, through the application's connection. */
static long long app_count(struct app *a, const char *sql)
{
    long long n = -1;

    if (a->pg) {
        PGresult *r = PQexec(a->conn, sql);
        assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
        n = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        PQclear(r);
    } else {
        sqlite3_stmt *st;
        assert_int_equal(sqlite3_prepare_v2(a->db, sql, -1, &st, NULL), SQLITE_OK);
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        n = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    return n;
}

static int app_work(struct app *a, const char *source, hookd_inbox_fn fn, const struct hookd_inbox_options *o,
                    struct hookd_inbox_counts *c)
{
    return a->pg ? hookd_inbox_work_pg(a->conn, source, fn, a, o, c) : hookd_inbox_work(a->db, source, fn, a, o, c);
}

/* The business write: one row per call, through the application's connection, inside hookd's transaction. */
static void effect_write(struct app *a, const struct hookd_inbox_item *it)
{
    char sql[512];

    snprintf(sql, sizeof sql, "INSERT INTO app_effects(item_id, event_id) VALUES ('%s', '%s')", it->id, it->event_id);
    app_sql(a, sql);
}

static void nap(int64_t ms)
{
    struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    nanosleep(&t, NULL);
}

/* The outcome by event type: ok, defer, quarantine, fail (after writing). */
static int by_type(void *arg, const struct hookd_inbox_item *it, char *note, size_t note_size)
{
    struct app *a = arg;

    a->calls++;
    assert_int_equal(it->struct_size, sizeof *it);
    assert_null(it->entity_state);
    assert_true(it->payload_len == strlen(it->payload));
    effect_write(a, it);
    if (a->note[0])
        snprintf(note, note_size, "%s", a->note);
    if (a->sleep_ms)
        nap(a->sleep_ms);
    if (a->other) {
        struct hookd_inbox_counts c;
        a->nested_result = app_work(a->other, it->source, by_type, NULL, &c);
        a->nested_items = c.processed + c.deferred + c.quarantined + c.failed;
    }
    if (a->commit_inside)
        app_sql(a, "COMMIT");
    if (strcmp(it->event_type, "defer") == 0)
        return HOOKD_INBOX_DEFERRED;
    if (strcmp(it->event_type, "quarantine") == 0)
        return HOOKD_INBOX_QUARANTINED;
    if (strcmp(it->event_type, "fail") == 0) {
        snprintf(note, note_size, "no stock");
        return -1;
    }
    return HOOKD_INBOX_PROCESSED;
}

static void source_make(struct fixture *fx, char name[SOURCE_NAME_MAX], const char *definition)
{
    struct source src = {0};

    id_new(src.name, "lib_");
    src.definition = strdup(definition);
    src.secrets = strdup("{}");
    assert_int_equal(store_source_insert(fx->s, &src), 0);
    snprintf(name, SOURCE_NAME_MAX, "%s", src.name);
    source_free(&src);
}

static void item_put(struct fixture *fx, const char *source, const char *event_id, const char *type,
                     const char *entity, int64_t at, char id_out[HOOKD_ID_MAX])
{
    struct inbox_item it;
    struct inbox_outcome o;

    memset(&it, 0, sizeof it);
    snprintf(it.source, sizeof it.source, "%s", source);
    it.event_id = strdup(event_id);
    it.event_type = strdup(type);
    it.entity_kind = entity ? strdup("order") : NULL;
    it.entity_id = entity ? strdup(entity) : NULL;
    it.payload = strdup("{\"id\":\"x\",\"data\":{}}");
    snprintf(it.payload_sha256, sizeof it.payload_sha256, "%s", SHA_A);
    it.received_at = at;
    assert_int_equal(store_inbox_insert(fx->s, &it, &o), 0);
    if (id_out)
        snprintf(id_out, HOOKD_ID_MAX, "%s", o.id);
    inbox_item_free(&it);
}

static void expect_item(struct fixture *fx, const char *id, enum inbox_status status, int attempts)
{
    struct inbox_item got;

    assert_int_equal(store_inbox_get(fx->s, id, &got), 0);
    assert_string_equal(inbox_status_name(got.status), inbox_status_name(status));
    assert_int_equal(got.attempts, attempts);
    assert_null(got.lease_owner);
    inbox_item_free(&got);
}

static long long effects_of(struct app *a, const char *item_id)
{
    char sql[256];

    snprintf(sql, sizeof sql, "SELECT count(*) FROM app_effects WHERE item_id = '%s'", item_id);
    return app_count(a, sql);
}

static void test_outcomes_commit_with_their_writes(void **state)
{
    struct fixture *fx = *state;
    char source[SOURCE_NAME_MAX], ok[HOOKD_ID_MAX], defer[HOOKD_ID_MAX], quar[HOOKD_ID_MAX], fail[HOOKD_ID_MAX];
    const int64_t base = clock_now_ms() - 1000;
    struct hookd_inbox_counts c;
    struct inbox_item got;
    struct app a;

    source_make(fx, source, LIBRARY_DEF);
    item_put(fx, source, "e1", "ok", NULL, base, ok);
    item_put(fx, source, "e2", "defer", NULL, base + 1, defer);
    item_put(fx, source, "e3", "quarantine", NULL, base + 2, quar);
    item_put(fx, source, "e4", "fail", NULL, base + 3, fail);
    app_open(fx, &a);
    const int64_t started = clock_now_ms();
    assert_int_equal(app_work(&a, source, by_type, NULL, &c), 4);
    assert_int_equal(c.processed, 1);
    assert_int_equal(c.deferred, 1);
    assert_int_equal(c.quarantined, 1);
    assert_int_equal(c.failed, 1);
    assert_int_equal(c.lost, 0);
    expect_item(fx, ok, INBOX_PROCESSED, 1);
    expect_item(fx, defer, INBOX_DEFERRED, 1);
    expect_item(fx, quar, INBOX_QUARANTINED, 1);
    expect_item(fx, fail, INBOX_PENDING, 1);
    /* The writes of the first three committed with their marks; the failed one's rolled back with its mark. */
    assert_int_equal(effects_of(&a, ok), 1);
    assert_int_equal(effects_of(&a, defer), 1);
    assert_int_equal(effects_of(&a, quar), 1);
    assert_int_equal(effects_of(&a, fail), 0);
    assert_int_equal(store_inbox_get(fx->s, ok, &got), 0);
    assert_string_equal(got.result, "handled");
    assert_true(got.processed_at > 0);
    inbox_item_free(&got);
    assert_int_equal(store_inbox_get(fx->s, fail, &got), 0);
    assert_non_null(strstr(got.error, "no stock"));
    assert_true(got.next_attempt_at >= started + 100); /* the schedule's first step, 100 ms */
    inbox_item_free(&got);

    /* After the schedule's step the retries run: the failing one runs out of schedule. */
    nap(250);
    assert_int_equal(app_work(&a, source, by_type, NULL, &c), 2); /* defer (2nd look), fail (2nd attempt) */
    expect_item(fx, fail, INBOX_PENDING, 2);
    nap(250);
    for (int i = 0; i < 10 && store_inbox_get(fx->s, fail, &got) == 0; i++) {
        bool open = got.status == INBOX_PENDING;
        inbox_item_free(&got);
        if (!open)
            break;
        assert_true(app_work(&a, source, by_type, NULL, &c) >= 0);
        nap(100);
    }
    expect_item(fx, fail, INBOX_QUARANTINED, 3);
    assert_int_equal(effects_of(&a, fail), 0);
    /* Deferred past max_defer (1 s): quarantined. */
    for (int i = 0; i < 40; i++) {
        assert_int_equal(store_inbox_get(fx->s, defer, &got), 0);
        bool open = got.status == INBOX_DEFERRED;
        inbox_item_free(&got);
        if (!open)
            break;
        assert_true(app_work(&a, source, by_type, NULL, &c) >= 0);
        nap(100);
    }
    assert_int_equal(store_inbox_get(fx->s, defer, &got), 0);
    assert_int_equal(got.status, INBOX_QUARANTINED);
    assert_non_null(strstr(got.error, "max_defer"));
    inbox_item_free(&got);
    app_close(&a);
}

static void test_refusals(void **state)
{
    struct fixture *fx = *state;
    char forward[SOURCE_NAME_MAX], lib[SOURCE_NAME_MAX], id[HOOKD_ID_MAX];
    struct hookd_inbox_counts c;
    struct app a;

    source_make(fx, forward, "{\"verify\":{\"scheme\":\"none\"},\"handler\":null}");
    source_make(fx, lib, LIBRARY_DEF);
    item_put(fx, lib, "r1", "ok", NULL, clock_now_ms() - 1000, id);
    app_open(fx, &a);
    assert_int_equal(app_work(&a, forward, by_type, NULL, &c), HOOKD_EINVAL);
    assert_int_equal(app_work(&a, "lib_no_such_source", by_type, NULL, &c), HOOKD_ENOTFOUND);
    assert_int_equal(app_work(&a, lib, NULL, NULL, &c), HOOKD_EINVAL);
    assert_int_equal(a.pg ? hookd_inbox_work_pg(NULL, lib, by_type, &a, NULL, &c)
                          : hookd_inbox_work(NULL, lib, by_type, &a, NULL, &c),
                     HOOKD_EINVAL);
    /* Inside the application's own transaction: refused, nothing taken. */
    app_sql(&a, "BEGIN");
    assert_int_equal(app_work(&a, lib, by_type, NULL, &c), HOOKD_EINVAL);
    app_sql(&a, "ROLLBACK");
    assert_int_equal(a.calls, 0);
    expect_item(fx, id, INBOX_PENDING, 0);
    /* An older caller's smaller options struct: the fields past it take their defaults. */
    struct hookd_inbox_options o = {.struct_size = offsetof(struct hookd_inbox_options, batch), .max_items = 1};
    assert_int_equal(app_work(&a, lib, by_type, &o, &c), 1);
    expect_item(fx, id, INBOX_PROCESSED, 1);
    app_close(&a);
}

static void test_daemon_claims_leave_library_sources(void **state)
{
    struct fixture *fx = *state;
    char lib[SOURCE_NAME_MAX], plain[SOURCE_NAME_MAX], bad[SOURCE_NAME_MAX], lib_item[HOOKD_ID_MAX],
        plain_item[HOOKD_ID_MAX], bad_item[HOOKD_ID_MAX];
    const int64_t base = clock_now_ms() - 9LL * 86400000; /* older than other tests' items */
    struct inbox_list l = {0};
    bool saw_plain = false, saw_bad = false;

    source_make(fx, lib, LIBRARY_DEF);
    source_make(fx, plain, "{\"verify\":{\"scheme\":\"none\"},\"handler\":null}");
    /* A definition plain SQL wrote, not JSON at all, that even mentions "library": its items stay claimable. */
    source_make(fx, bad, "{\"library\": not json");
    item_put(fx, lib, "d1", "ok", NULL, base, lib_item);
    item_put(fx, plain, "d2", "ok", NULL, base + 1, plain_item);
    item_put(fx, bad, "d3", "ok", NULL, base + 2, bad_item);
    assert_int_equal(store_inbox_claim_due(fx->s, "node-a", clock_now_ms(), clock_now_ms() + 60000, 100, &l), 0);
    for (size_t i = 0; i < l.n; i++) {
        assert_string_not_equal(l.items[i].id, lib_item);
        saw_plain |= strcmp(l.items[i].id, plain_item) == 0;
        saw_bad |= strcmp(l.items[i].id, bad_item) == 0;
    }
    inbox_list_free(&l);
    assert_true(saw_plain);
    assert_true(saw_bad);
    expect_item(fx, lib_item, INBOX_PENDING, 0);
}

static void test_one_entity_at_a_time(void **state)
{
    struct fixture *fx = *state;
    char source[SOURCE_NAME_MAX], v1[HOOKD_ID_MAX], v2[HOOKD_ID_MAX], other[HOOKD_ID_MAX];
    const int64_t base = clock_now_ms() - 1000;
    struct hookd_inbox_counts c;
    struct app a;

    source_make(fx, source, LIBRARY_DEF);
    item_put(fx, source, "o1-a", "ok", "o-1", base, v1);
    item_put(fx, source, "o1-b", "ok", "o-1", base + 1, v2);
    item_put(fx, source, "o2-a", "ok", "o-2", base + 2, other);
    app_open(fx, &a);
    /* The first claim takes o-1's earlier item and o-2's; o-1's later one waits for the next. */
    assert_int_equal(app_work(&a, source, by_type, NULL, &c), 2);
    expect_item(fx, v1, INBOX_PROCESSED, 1);
    expect_item(fx, other, INBOX_PROCESSED, 1);
    expect_item(fx, v2, INBOX_PENDING, 0);
    assert_int_equal(app_work(&a, source, by_type, NULL, &c), 1);
    expect_item(fx, v2, INBOX_PROCESSED, 1);
    app_close(&a);
}

static void test_foreign_lease_until_it_expires(void **state)
{
    struct fixture *fx = *state;
    char source[SOURCE_NAME_MAX], id[HOOKD_ID_MAX], sql[256];
    struct hookd_inbox_counts c;
    struct app a;

    source_make(fx, source, LIBRARY_DEF);
    item_put(fx, source, "l1", "ok", NULL, clock_now_ms() - 1000, id);
    app_open(fx, &a);
    /* Another application claimed it and died: its lease holds for 300 ms. */
    snprintf(sql, sizeof sql,
             "UPDATE hookd_inbox SET lease_owner = 'app:gone:1', lease_until = %lld, lease_token = lease_token + 1"
             " WHERE id = '%s'",
             (long long)clock_now_ms() + 300, id);
    app_sql(&a, sql);
    assert_int_equal(app_work(&a, source, by_type, NULL, &c), 0);
    assert_int_equal(a.calls, 0);
    nap(350);
    assert_int_equal(app_work(&a, source, by_type, NULL, &c), 1);
    expect_item(fx, id, INBOX_PROCESSED, 1);
    assert_int_equal(effects_of(&a, id), 1);
    app_close(&a);
}

/* While one connection's callback runs, past its lease, a second application takes nothing of that item. */
static void test_never_two_at_once(void **state)
{
    struct fixture *fx = *state;
    char source[SOURCE_NAME_MAX], id[HOOKD_ID_MAX];
    struct hookd_inbox_options o = {.struct_size = sizeof o, .lease_ms = 50};
    struct hookd_inbox_counts c;
    struct app a, b;

    source_make(fx, source, LIBRARY_DEF);
    item_put(fx, source, "x1", "ok", NULL, clock_now_ms() - 1000, id);
    app_open(fx, &a);
    app_open(fx, &b);
    if (!b.pg)
        sqlite3_busy_timeout(b.db, 100);
    a.other = &b;
    a.sleep_ms = 120; /* the lease (50 ms) runs out inside the callback */
    assert_int_equal(app_work(&a, source, by_type, &o, &c), 1);
    assert_int_equal(c.processed, 1);
    assert_int_equal(b.calls, 0);
    /* PostgreSQL: the row is locked, the claim skips it. SQLite: the write lock is held, the claim is busy. */
    assert_int_equal(a.nested_result, b.pg ? 0 : HOOKD_EBUSY);
    assert_int_equal(a.nested_items, 0);
    expect_item(fx, id, INBOX_PROCESSED, 1);
    assert_int_equal(effects_of(&a, id), 1);
    app_close(&b);
    app_close(&a);
}

static void test_callback_that_ends_the_transaction(void **state)
{
    struct fixture *fx = *state;
    char source[SOURCE_NAME_MAX], id[HOOKD_ID_MAX];
    struct hookd_inbox_counts c;
    struct inbox_item got;
    struct app a;

    source_make(fx, source, LIBRARY_DEF);
    item_put(fx, source, "c1", "ok", NULL, clock_now_ms() - 1000, id);
    app_open(fx, &a);
    a.commit_inside = true;
    assert_int_equal(app_work(&a, source, by_type, NULL, &c), HOOKD_EINVAL);
    assert_int_equal(c.failed, 1);
    assert_int_equal(store_inbox_get(fx->s, id, &got), 0);
    assert_int_equal(got.status, INBOX_PENDING);
    assert_int_equal(got.attempts, 1);
    assert_non_null(strstr(got.error, "ended hookd's transaction"));
    inbox_item_free(&got);
    app_close(&a);
}

static void test_hostile_note(void **state)
{
    struct fixture *fx = *state;
    char source[SOURCE_NAME_MAX], id[HOOKD_ID_MAX];
    struct hookd_inbox_counts c;
    struct inbox_item got;
    struct app a;

    source_make(fx, source, LIBRARY_DEF);
    item_put(fx, source, "n1", "quarantine", NULL, clock_now_ms() - 1000, id);
    app_open(fx, &a);
    /* Control bytes, an invalid UTF-8 sequence and a note longer than the buffer. */
    memset(a.note, 'x', sizeof a.note - 1);
    memcpy(a.note, "bad\n\r\x1b\xff\xc3(\x01 ok \xc3\xa9", 16);
    assert_int_equal(app_work(&a, source, by_type, NULL, &c), 1);
    assert_int_equal(store_inbox_get(fx->s, id, &got), 0);
    assert_int_equal(got.status, INBOX_QUARANTINED);
    assert_true(strncmp(got.error, "bad????" "?(? ok \xc3\xa9xxx", 19) == 0);
    assert_true(strlen(got.error) < 256);
    inbox_item_free(&got);
    app_close(&a);
}

/* The workers' wake-up channel (inbound/inbox_watch.c): an item inserted on another connection, and a replay. */
static void test_watch_inbox_channel(void **state)
{
    struct fixture *fx = *state;
    char source[SOURCE_NAME_MAX], fwd[SOURCE_NAME_MAX], id[HOOKD_ID_MAX], sql[256];
    struct store *w = NULL;
    bool changed = false;
    struct app a;

    postgres_only(fx);
    assert_int_equal(store_open(fx->dsn, &w), 0);
    assert_int_equal(store_watch(w, "hookd_nonsense; DROP TABLE x"), HOOKD_EINVAL);
    assert_int_equal(store_watch(w, STORE_CHANNEL_INBOX), 0);
    assert_int_equal(store_changed(w, &changed), 0); /* LISTEN; reports a change once */
    assert_true(changed);
    assert_int_equal(store_watch(w, STORE_CHANNEL_OUTBOX), HOOKD_EINVAL); /* already listening */
    assert_int_equal(store_changed(w, &changed), 0);
    assert_false(changed);
    /* An outbox row is not an inbox item. */
    struct event ev;
    event_make(fx, "order.paid", &ev);
    event_free(&ev);
    nap(50);
    assert_int_equal(store_changed(w, &changed), 0);
    assert_false(changed);
    /* A new item notifies (whichever source: the trigger looks at no row)... */
    source_make(fx, source, LIBRARY_DEF);
    item_put(fx, source, "w1", "ok", NULL, clock_now_ms() - 1000, id);
    for (int i = 0; i < 100 && !changed; i++) {
        nap(10);
        assert_int_equal(store_changed(w, &changed), 0);
    }
    assert_true(changed);
    /* ...processing it does not (claims and completions would wake every node on every step)... */
    app_open(fx, &a);
    assert_int_equal(app_work(&a, source, by_type, NULL, NULL), 1);
    nap(50);
    assert_int_equal(store_changed(w, &changed), 0);
    assert_false(changed);
    /* ...putting an item back to pending does, */
    snprintf(sql, sizeof sql, "UPDATE hookd_inbox SET status = 'pending' WHERE id = '%s'", id);
    app_sql(&a, sql);
    for (int i = 0; i < 100 && !changed; i++) {
        nap(10);
        assert_int_equal(store_changed(w, &changed), 0);
    }
    assert_true(changed);
    /* and so does a new item of a source the workers process. */
    changed = false;
    source_make(fx, fwd, "{\"handler\":{\"forward\":{\"url\":\"http://127.0.0.1:9/\"}},\"verify\":{\"scheme\":\"none\"}}");
    nap(50);
    assert_int_equal(store_changed(w, &changed), 0);
    changed = false;
    item_put(fx, fwd, "w2", "ok", NULL, clock_now_ms() - 1000, NULL);
    for (int i = 0; i < 100 && !changed; i++) {
        nap(10);
        assert_int_equal(store_changed(w, &changed), 0);
    }
    assert_true(changed);
    app_close(&a);
    store_close(w);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_outcomes_commit_with_their_writes),
        T(test_refusals),
        T(test_daemon_claims_leave_library_sources),
        T(test_one_entity_at_a_time),
        T(test_foreign_lease_until_it_expires),
        T(test_never_two_at_once),
        T(test_callback_that_ends_the_transaction),
        T(test_hostile_note),
        T(test_watch_inbox_channel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
