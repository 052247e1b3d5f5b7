/*
 * The public outbox contract: hookd_publish() inside the application's own
 * transaction on its own sqlite3 connection, and a bare SQL INSERT.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "hookd.h"
#include "json_corpus.h"
#include "store/schema/sqlite.h"
#include "store/store.h"

struct fixture {
    char dir[64];
    char path[128];
    sqlite3 *app;       /* the application's plain connection */
    struct store *hookd; /* hookd's view of the same file */
};

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof *fx);
    char dsn[160];

    assert_non_null(fx);
    snprintf(fx->dir, sizeof fx->dir, "/tmp/hookd-publish-XXXXXX");
    assert_non_null(mkdtemp(fx->dir));
    snprintf(fx->path, sizeof fx->path, "%s/app.db", fx->dir);
    snprintf(dsn, sizeof dsn, "sqlite:%s", fx->path);
    assert_int_equal(store_open(dsn, &fx->hookd), 0);
    assert_int_equal(store_migrate(fx->hookd), 0);
    assert_int_equal(sqlite3_open(fx->path, &fx->app), SQLITE_OK);
    sqlite3_busy_timeout(fx->app, 5000);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    static const char *const suffixes[] = {"", "-wal", "-shm"};
    char path[160];

    sqlite3_close(fx->app);
    store_close(fx->hookd);
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        snprintf(path, sizeof path, "%s%s", fx->path, suffixes[i]);
        unlink(path);
    }
    rmdir(fx->dir);
    free(fx);
    return 0;
}

static void app_exec(struct fixture *fx, const char *sql)
{
    char *err = NULL;

    if (sqlite3_exec(fx->app, sql, NULL, NULL, &err) != SQLITE_OK)
        fail_msg("%s: %s", sql, err ? err : "?");
}

/* Number of outbox rows with this id, as the application sees them. */
static int outbox_count(struct fixture *fx, const char *id)
{
    sqlite3_stmt *st;
    int n = -1;

    assert_int_equal(sqlite3_prepare_v2(fx->app, "SELECT count(*) FROM hookd_outbox WHERE id = ?1", -1, &st, NULL),
                     SQLITE_OK);
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return n;
}

static void test_rollback_leaves_no_event(void **state)
{
    struct fixture *fx = *state;
    struct hookd_event ev = {.type = "order.paid", .data_json = "{\"order\":1}"};
    char id[HOOKD_ID_MAX] = "";

    app_exec(fx, "BEGIN");
    assert_int_equal(hookd_publish(fx->app, &ev, id), 0);
    assert_memory_equal(id, "evt_", 4);
    assert_int_equal(outbox_count(fx, id), 1); /* visible inside the transaction */
    app_exec(fx, "ROLLBACK");
    assert_int_equal(outbox_count(fx, id), 0);
}

static void test_commit_stores_the_event(void **state)
{
    struct fixture *fx = *state;
    struct hookd_event ev = {.type = "order.paid", .account = "acme", .resource_type = "order",
                             .resource_id = "o_42", .resource_version = 3, .has_resource_version = 1,
                             .data_json = "{\"order\":42,\"total\":\"9.90\"}"};
    char id[HOOKD_ID_MAX] = "";
    int64_t before = clock_now_ms();
    struct event got;
    bool changed;

    assert_int_equal(store_changed(fx->hookd, &changed), 0);
    app_exec(fx, "BEGIN IMMEDIATE; CREATE TABLE app_orders(id INTEGER PRIMARY KEY);"
                 " INSERT INTO app_orders VALUES (42)");
    assert_int_equal(hookd_publish(fx->app, &ev, id), 0);
    app_exec(fx, "COMMIT");

    /* hookd notices the commit and reads the row back with every field. */
    assert_int_equal(store_changed(fx->hookd, &changed), 0);
    assert_true(changed);
    assert_int_equal(store_event_get(fx->hookd, id, &got), 0);
    assert_string_equal(got.type, "order.paid");
    assert_string_equal(got.account, "acme");
    assert_string_equal(got.resource_type, "order");
    assert_string_equal(got.resource_id, "o_42");
    assert_true(got.has_resource_version);
    assert_int_equal(got.resource_version, 3);
    assert_string_equal(got.payload, "{\"order\":42,\"total\":\"9.90\"}");
    assert_true(got.created_at >= before && got.created_at <= clock_now_ms());
    assert_int_equal(got.dispatched_at, 0);
    assert_true(got.seq > 0);
    event_free(&got);
}

static void test_caller_id(void **state)
{
    struct fixture *fx = *state;
    struct hookd_event ev = {.id = "evt_mine-1", .type = "user.created", .data_json = "[1,2]"};
    char id[HOOKD_ID_MAX] = "";

    assert_int_equal(hookd_publish(fx->app, &ev, id), 0); /* autocommit: commits at once */
    assert_string_equal(id, "evt_mine-1");
    assert_int_equal(outbox_count(fx, "evt_mine-1"), 1);
    assert_int_equal(hookd_publish(fx->app, &ev, NULL), HOOKD_EEXISTS);
    assert_int_equal(outbox_count(fx, "evt_mine-1"), 1);
}

static void test_bare_sql_insert(void **state)
{
    struct fixture *fx = *state;
    int64_t before = clock_now_ms();
    struct event_list l;

    app_exec(fx, "INSERT INTO hookd_outbox(event_type, payload) VALUES ('order.paid','{\"a\":1}')");
    assert_int_equal(store_outbox_fetch(fx->hookd, 0, 10, &l), 0);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.items[0].type, "order.paid");
    assert_string_equal(l.items[0].payload, "{\"a\":1}");
    /* "evt_" + 12 hex digits of milliseconds + 20 random hex digits. */
    assert_int_equal(strlen(l.items[0].id), 36);
    assert_memory_equal(l.items[0].id, "evt_", 4);
    assert_int_equal(strspn(l.items[0].id + 4, "0123456789abcdef"), 32);
    /* The SQL clock and ours agree to within a few seconds. */
    assert_true(l.items[0].created_at >= before - 5000 && l.items[0].created_at <= clock_now_ms() + 5000);
    char ms_hex[13];
    snprintf(ms_hex, sizeof ms_hex, "%012llx", (unsigned long long)l.items[0].created_at);
    assert_memory_equal(l.items[0].id + 4, ms_hex, 12); /* one "now" per statement */
    event_list_free(&l);

    /* Only event_type is required. */
    app_exec(fx, "INSERT INTO hookd_outbox(event_type) VALUES ('ping')");
    assert_int_equal(store_outbox_fetch(fx->hookd, 0, 10, &l), 0);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.items[1].payload, "{}");
    assert_string_not_equal(l.items[0].id, l.items[1].id);
    event_list_free(&l);
}

static void test_invalid_input(void **state)
{
    struct fixture *fx = *state;
    static const struct hookd_event bad[] = {
        {.type = "order.paid", .data_json = "{\"a\":"},       /* truncated JSON */
        {.type = "order.paid", .data_json = "not json"},
        {.type = "order.paid", .data_json = NULL},
        {.type = "order paid", .data_json = "{}"},            /* space in type */
        {.type = "order.*", .data_json = "{}"},               /* a pattern is not a type */
        {.type = "", .data_json = "{}"},
        {.type = NULL, .data_json = "{}"},
        {.id = "has space", .type = "order.paid", .data_json = "{}"},
        {.id = "", .type = "order.paid", .data_json = "{}"},
        {.type = "order.paid", .account = "acme\r\nX-Injected: yes", .data_json = "{}"}, /* the outbox's check */
        {.type = "order.paid", .resource_id = "r\x1b[31m", .data_json = "{}"},
    };
    struct event_list l;
    char id[HOOKD_ID_MAX];

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(hookd_publish(fx->app, &bad[i], id), HOOKD_EINVAL);
    assert_int_equal(hookd_publish(NULL, &bad[0], id), HOOKD_EINVAL);
    assert_int_equal(hookd_publish(fx->app, NULL, id), HOOKD_EINVAL);
    assert_int_equal(store_outbox_fetch(fx->hookd, 0, 10, &l), 0);
    assert_int_equal(l.n, 0);
    event_list_free(&l);
}

/* data_json is judged by the one validator: each corpus case is stored or refused as the corpus says. */
static void test_json_corpus(void **state)
{
    struct fixture *fx = *state;
    size_t n_valid = 0;
    struct event_list l;

    for (size_t i = 0; i < JSON_CORPUS_N; i++) {
        struct hookd_event ev = {.type = "corpus.case", .data_json = json_corpus[i].text};
        int rc = hookd_publish(fx->app, &ev, NULL);

        if (rc != (json_corpus[i].valid ? 0 : HOOKD_EINVAL))
            fail_msg("case %zu (%s): %s", i, json_corpus[i].text, hookd_strerror(rc));
        n_valid += json_corpus[i].valid;
    }
    assert_int_equal(store_outbox_fetch(fx->hookd, 0, STORE_LIST_MAX, &l), 0);
    assert_int_equal(l.n, n_valid);
    for (size_t i = 0, k = 0; i < JSON_CORPUS_N; i++) {
        if (json_corpus[i].valid)
            assert_string_equal(l.items[k++].payload, json_corpus[i].text); /* byte for byte */
    }
    event_list_free(&l);
}

/* Without hookd's tables (hookd never ran on this file) the insert fails cleanly. */
static void test_no_schema(void **state)
{
    struct fixture *fx = *state;
    struct hookd_event ev = {.type = "order.paid", .data_json = "{}"};
    char path[160];
    sqlite3 *db;

    snprintf(path, sizeof path, "%s/empty.db", fx->dir);
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(hookd_publish(db, &ev, NULL), HOOKD_EIO);
    sqlite3_close(db);
    unlink(path);
}


/* The value of a one-column, one-row query on db, as text ("" for none). */
static void query_text(sqlite3 *db, const char *sql, char *out, size_t cap)
{
    sqlite3_stmt *st = NULL;

    out[0] = '\0';
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) != NULL)
        snprintf(out, cap, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
}

/*
 * Migration 26 moves the outbox's rules from triggers into CHECK constraints
 * by rebuilding the table: a file at version 25 with rows (one written before
 * the rules, as the trigger-less schema let it) keeps every row and seq, the
 * rules hold on insert and update with the column named, the legacy row can
 * still be marked (the relay's rejection), and the indexes are back.
 * Migration 27 then edits the constraints' text into cheaper expressions that
 * refuse the same values.
 */
static void test_outbox_rules_move_into_the_table(void **state)
{
    struct fixture *fx = *state;
    char path[160], dsn[176], v[256], *err = NULL;
    struct store *s;
    sqlite3 *db;

    snprintf(path, sizeof path, "%s/v25.db", fx->dir);
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "CREATE TABLE hookd_schema (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)",
                                  NULL, NULL, NULL), SQLITE_OK);
    for (size_t i = 0; i < sqlite_migrations_count && sqlite_migrations[i].version <= 25; i++) {
        char rec[96];
        assert_int_equal(sqlite3_exec(db, sqlite_migrations[i].sql, NULL, NULL, &err), SQLITE_OK);
        snprintf(rec, sizeof rec, "INSERT INTO hookd_schema VALUES (%d, 0)", sqlite_migrations[i].version);
        assert_int_equal(sqlite3_exec(db, rec, NULL, NULL, NULL), SQLITE_OK);
    }
    assert_int_equal(sqlite3_exec(db,
                                  "INSERT INTO hookd_outbox(seq, id, event_type, idempotency_key) VALUES (7, 'evt_a', 'a.b', 'k1');"
                                  "DROP TRIGGER hookd_outbox_check_insert;"
                                  "INSERT INTO hookd_outbox(seq, id, event_type) VALUES (9, 'evt_bad' || char(13) || char(10), 'a.b');",
                                  NULL, NULL, &err), SQLITE_OK);
    snprintf(dsn, sizeof dsn, "sqlite:%s", path);
    assert_int_equal(store_open(dsn, &s), 0);
    assert_int_equal(store_migrate(s), 0);
    store_close(s);

    char latest[16];
    snprintf(latest, sizeof latest, "%d", sqlite_migrations[sqlite_migrations_count - 1].version);
    query_text(db, "SELECT max(version) FROM hookd_schema", v, sizeof v);
    assert_string_equal(v, latest);
    /* Migration 27's cheaper expressions replaced the old ones in the table's text. */
    query_text(db,
               "SELECT (instr(sql, 'char(31)') = 0) || (instr(sql, 'X''2A5B012D1F7F5D2A''') > 0)"
               " || (instr(sql, 'id GLOB ''evt_[0-9a-f]') > 0) FROM sqlite_master WHERE name = 'hookd_outbox'",
               v, sizeof v);
    assert_string_equal(v, "111");
    query_text(db, "SELECT group_concat(seq || ':' || length(id), ',') FROM (SELECT * FROM hookd_outbox ORDER BY seq)", v,
               sizeof v);
    assert_string_equal(v, "7:5,9:9");
    query_text(db, "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'hookd_outbox'", v, sizeof v);
    assert_string_equal(v, "0");
    query_text(db,
               "SELECT group_concat(name, ',') FROM (SELECT name FROM sqlite_master WHERE type = 'index'"
               " AND tbl_name = 'hookd_outbox' AND name LIKE 'hookd_%' ORDER BY name)",
               v, sizeof v);
    assert_string_equal(v, "hookd_outbox_idempotency,hookd_outbox_odd_id,hookd_outbox_odd_time,hookd_outbox_resource,"
                           "hookd_outbox_undispatched");

    /* The rules, on insert and on update, name the column. */
    static const struct {
        const char *sql, *rule;
    } refused[] = {
        {"INSERT INTO hookd_outbox(id, event_type) VALUES ('evt_x' || char(10), 'a.b')", "hookd_outbox.id must be"},
        {"INSERT INTO hookd_outbox(event_type) VALUES ('a b')", "hookd_outbox.event_type must be"},
        {"INSERT INTO hookd_outbox(event_type, account) VALUES ('a.b', 'acme' || char(127))", "hookd_outbox.account"},
        {"INSERT INTO hookd_outbox(event_type, resource_type) VALUES ('a.b', char(27))", "hookd_outbox.resource_type"},
        {"INSERT INTO hookd_outbox(event_type, resource_id) VALUES ('a.b', 'r' || char(0) || 'x')", "hookd_outbox.resource_id"},
        {"INSERT INTO hookd_outbox(event_type, resource_id) VALUES ('a.b', 'r' || char(1))", "hookd_outbox.resource_id"},
        {"INSERT INTO hookd_outbox(event_type, resource_id) VALUES ('a.b', char(31) || 'r')", "hookd_outbox.resource_id"},
        {"INSERT INTO hookd_outbox(event_type, account) VALUES ('a.b', 'a' || char(9) || 'b')", "hookd_outbox.account"},
        /* The generated id's shape is only a shortcut: a character more, or a NUL after it, is refused. */
        {"INSERT INTO hookd_outbox(id, event_type) VALUES ('evt_0123456789abcdef0123456789abcdef!', 'a.b')",
         "hookd_outbox.id must be"},
        {"INSERT INTO hookd_outbox(id, event_type) VALUES ('evt_0123456789abcdef0123456789abcdef' || char(0), 'a.b')",
         "hookd_outbox.id must be"},
        {"UPDATE hookd_outbox SET id = 'evt_a' || char(13) WHERE seq = 7", "hookd_outbox.id must be"},
        {"INSERT INTO hookd_outbox(event_type, idempotency_key) VALUES ('a.b', 'k1')", "UNIQUE"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        assert_int_not_equal(sqlite3_exec(db, refused[i].sql, NULL, NULL, &err), SQLITE_OK);
        assert_non_null(strstr(err, refused[i].rule));
        sqlite3_free(err);
        err = NULL;
    }
    /* The legacy row can be marked as the relay rejects it; good rows go in bare. */
    assert_int_equal(sqlite3_exec(db,
                                  "UPDATE hookd_outbox SET dispatched_at = 1, error = 'event id contains control characters'"
                                  " WHERE seq = 9;"
                                  "INSERT INTO hookd_outbox(event_type, account) VALUES ('order.paid', 'Müller GmbH');",
                                  NULL, NULL, &err), SQLITE_OK);
    query_text(db, "SELECT count(*) || ' ' || max(seq) FROM hookd_outbox", v, sizeof v);
    assert_string_equal(v, "3 10");
    query_text(db, "PRAGMA ignore_check_constraints", v, sizeof v);
    assert_string_equal(v, "0");
    sqlite3_close(db);
    unlink(path);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_rollback_leaves_no_event), T(test_commit_stores_the_event), T(test_caller_id),
        T(test_bare_sql_insert),          T(test_invalid_input),           T(test_json_corpus),
        T(test_no_schema),                T(test_outbox_rules_move_into_the_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
