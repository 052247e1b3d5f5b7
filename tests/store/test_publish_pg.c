/*
 * The public outbox contract on PostgreSQL: hookd_publish_pg() inside the
 * application's own transaction on its own libpq connection, a bare SQL
 * INSERT, and the NOTIFY that wakes relays. Needs HOOKD_TEST_PG (a postgres://
 * URL, e.g. from scripts/pg.sh start); without it every test fails.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/ids.h"
#include "hookd.h"
#include "json_corpus.h"
#include "store/store.h"
#include "pg_exec.h"

struct fixture {
    const char *dsn;
    PGconn *app;         /* the application's plain connection */
    struct store *hookd; /* hookd's view of the same database */
};

static PGconn *connect_or_fail(const char *dsn)
{
    PGconn *c = PQconnectdb(dsn);

    if (PQstatus(c) != CONNECTION_OK)
        fail_msg("cannot connect to HOOKD_TEST_PG: %s", PQerrorMessage(c));
    return c;
}

static int setup(void **state)
{
    const char *dsn = getenv("HOOKD_TEST_PG");
    struct fixture *fx;

    if (!dsn || !dsn[0])
        fail_msg("HOOKD_TEST_PG is not set: start a cluster with scripts/pg.sh start DIR and export its URL");
    fx = calloc(1, sizeof *fx);
    assert_non_null(fx);
    fx->dsn = dsn;
    assert_int_equal(store_open(fx->dsn, &fx->hookd), 0);
    assert_int_equal(store_migrate(fx->hookd), 0);
    fx->app = connect_or_fail(fx->dsn);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;

    PQfinish(fx->app);
    store_close(fx->hookd);
    free(fx);
    return 0;
}

static void app_exec(PGconn *c, const char *sql) { pg_exec_ok(c, sql); }

/* One number from a query with one text parameter, as the application sees it. */
static long long app_number(struct fixture *fx, const char *sql, const char *param)
{
    PGresult *r = PQexecParams(fx->app, sql, 1, NULL, &param, NULL, NULL, 0);
    long long n = -1;

    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
        n = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return n;
}

static long long outbox_count(struct fixture *fx, const char *id)
{
    return app_number(fx, "SELECT count(*) FROM hookd_outbox WHERE id = $1", id);
}

/* Notifications on channel hookd_outbox that reach c within ms. */
static int notifications_within(PGconn *c, int ms)
{
    int64_t until = clock_mono_ms() + ms;
    int n = 0;

    for (int i = 0; i < 10000; i++) {
        struct pollfd pfd = {.fd = PQsocket(c), .events = POLLIN};
        int64_t left = until - clock_mono_ms();
        PGnotify *note;
        if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
            break;
        assert_int_equal(PQconsumeInput(c), 1);
        while ((note = PQnotifies(c)) != NULL) {
            assert_string_equal(note->relname, "hookd_outbox");
            n++;
            PQfreemem(note);
        }
    }
    return n;
}

static void test_rollback_leaves_no_event(void **state)
{
    struct fixture *fx = *state;
    struct hookd_event ev = {.type = "order.paid", .data_json = "{\"order\":1}"};
    char id[HOOKD_ID_MAX] = "";

    app_exec(fx->app, "BEGIN");
    assert_int_equal(hookd_publish_pg(fx->app, &ev, id), 0);
    assert_memory_equal(id, "evt_", 4);
    assert_int_equal(outbox_count(fx, id), 1); /* visible inside the transaction */
    app_exec(fx->app, "ROLLBACK");
    assert_int_equal(outbox_count(fx, id), 0);
}

static void test_commit_stores_the_event(void **state)
{
    struct fixture *fx = *state;
    struct hookd_event ev = {.type = "order.paid", .account = "acme", .resource_type = "order",
                             .resource_id = "o_42", .resource_version = 3, .has_resource_version = 1,
                             .data_json = "{\"order\":42,  \"total\":\"9.90\"}"};
    char id[HOOKD_ID_MAX] = "";
    int64_t before = clock_now_ms();
    struct event got;
    bool changed;

    assert_int_equal(store_changed(fx->hookd, &changed), 0); /* the first call starts listening */
    app_exec(fx->app, "BEGIN");
    app_exec(fx->app, "CREATE TEMP TABLE app_orders(id int PRIMARY KEY); INSERT INTO app_orders VALUES (42)");
    assert_int_equal(hookd_publish_pg(fx->app, &ev, id), 0);
    app_exec(fx->app, "COMMIT");

    /* hookd is woken and reads the row back with every field; the payload byte for byte. */
    for (int i = 0; i < 2000; i++) {
        assert_int_equal(store_changed(fx->hookd, &changed), 0);
        if (changed)
            break;
        usleep(1000);
    }
    assert_true(changed);
    assert_int_equal(store_event_get(fx->hookd, id, &got), 0);
    assert_string_equal(got.type, "order.paid");
    assert_string_equal(got.account, "acme");
    assert_string_equal(got.resource_type, "order");
    assert_string_equal(got.resource_id, "o_42");
    assert_true(got.has_resource_version);
    assert_int_equal(got.resource_version, 3);
    assert_string_equal(got.payload, "{\"order\":42,  \"total\":\"9.90\"}");
    assert_true(got.created_at >= before && got.created_at <= clock_now_ms());
    assert_int_equal(got.dispatched_at, 0);
    assert_true(got.seq > 0);
    event_free(&got);
}

/* A refused publish (taken id, bad JSON) leaves the caller's transaction usable. */
static void test_refusals_keep_the_transaction(void **state)
{
    struct fixture *fx = *state;
    char mine[HOOKD_ID_MAX], id[HOOKD_ID_MAX] = "";
    struct hookd_event ev = {.type = "user.created", .data_json = "[1,2]"};
    struct hookd_event bad = {.type = "user.created", .data_json = "{\"a\":"};
    struct hookd_event ok = {.type = "user.created", .data_json = "{}"};

    id_new(mine, "evt_mine_");
    ev.id = mine;
    assert_int_equal(hookd_publish_pg(fx->app, &ev, id), 0); /* autocommit: commits at once */
    assert_string_equal(id, mine);
    assert_int_equal(outbox_count(fx, mine), 1);

    app_exec(fx->app, "BEGIN");
    assert_int_equal(hookd_publish_pg(fx->app, &ev, NULL), HOOKD_EEXISTS);
    assert_int_equal(hookd_publish_pg(fx->app, &bad, NULL), HOOKD_EINVAL);
    assert_int_equal(PQtransactionStatus(fx->app), PQTRANS_INTRANS);
    assert_int_equal(hookd_publish_pg(fx->app, &ok, id), 0);
    app_exec(fx->app, "COMMIT");
    assert_int_equal(outbox_count(fx, id), 1);
    assert_int_equal(outbox_count(fx, mine), 1);
}

static void test_bare_sql_insert_notifies(void **state)
{
    struct fixture *fx = *state;
    PGconn *relay = connect_or_fail(fx->dsn);
    char type[HOOKD_ID_MAX], ms_hex[13];
    const char *param;
    PGresult *r;
    int64_t before = clock_now_ms(), created;
    const char *id;

    id_new(type, "bare.");
    param = type;
    app_exec(relay, "LISTEN hookd_outbox");

    r = PQexecParams(fx->app, "INSERT INTO hookd_outbox(event_type, payload) VALUES ($1, '{\"a\":1}')", 1, NULL,
                     &param, NULL, NULL, 0);
    assert_int_equal(PQresultStatus(r), PGRES_COMMAND_OK);
    PQclear(r);
    assert_int_equal(notifications_within(relay, 2000), 1);

    r = PQexecParams(fx->app, "SELECT id, payload, created_at FROM hookd_outbox WHERE event_type = $1", 1, NULL,
                     &param, NULL, NULL, 0);
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    assert_int_equal(PQntuples(r), 1);
    id = PQgetvalue(r, 0, 0);
    assert_string_equal(PQgetvalue(r, 0, 1), "{\"a\":1}");
    /* "evt_" + 12 hex digits of milliseconds + 20 random hex digits. */
    assert_int_equal(strlen(id), 36);
    assert_memory_equal(id, "evt_", 4);
    assert_int_equal(strspn(id + 4, "0123456789abcdef"), 32);
    created = strtoll(PQgetvalue(r, 0, 2), NULL, 10);
    assert_true(created >= before - 5000 && created <= clock_now_ms() + 5000);
    snprintf(ms_hex, sizeof ms_hex, "%012llx", (unsigned long long)created);
    assert_memory_equal(id + 4, ms_hex, 12); /* one "now" per statement */
    PQclear(r);

    /* Only event_type is required; the ids differ. */
    app_exec(fx->app, "INSERT INTO hookd_outbox(event_type) VALUES ('ping'), ('ping')");
    assert_int_equal(notifications_within(relay, 2000), 1);
    PQfinish(relay);
}

/* NOTIFY is transactional: nothing for a rollback, one per committing transaction. */
static void test_notify_follows_the_transaction(void **state)
{
    struct fixture *fx = *state;
    PGconn *relay = connect_or_fail(fx->dsn);
    struct hookd_event ev = {.type = "order.paid", .data_json = "{}"};

    app_exec(relay, "LISTEN hookd_outbox");
    app_exec(fx->app, "BEGIN");
    assert_int_equal(hookd_publish_pg(fx->app, &ev, NULL), 0);
    app_exec(fx->app, "ROLLBACK");
    assert_int_equal(notifications_within(relay, 300), 0);

    app_exec(fx->app, "BEGIN");
    assert_int_equal(hookd_publish_pg(fx->app, &ev, NULL), 0);
    assert_int_equal(hookd_publish_pg(fx->app, &ev, NULL), 0);
    assert_int_equal(notifications_within(relay, 200), 0); /* not before the commit */
    app_exec(fx->app, "COMMIT");
    assert_int_equal(notifications_within(relay, 2000), 1);
    assert_int_equal(notifications_within(relay, 200), 0);
    PQfinish(relay);
}

static void test_invalid_input(void **state)
{
    struct fixture *fx = *state;
    static const struct hookd_event bad[] = {
        {.type = "order.paid", .data_json = "{\"a\":"},       /* truncated JSON */
        {.type = "order.paid", .data_json = "not json"},
        {.type = "order.paid", .data_json = ""},
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
    char id[HOOKD_ID_MAX], unique[HOOKD_ID_MAX];
    struct hookd_event marked = bad[0];

    id_new(unique, "evt_bad_");
    marked.id = unique;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(hookd_publish_pg(fx->app, &bad[i], id), HOOKD_EINVAL);
    assert_int_equal(hookd_publish_pg(fx->app, &marked, id), HOOKD_EINVAL);
    assert_int_equal(outbox_count(fx, unique), 0);
    assert_int_equal(hookd_publish_pg(NULL, &bad[0], id), HOOKD_EINVAL);
    assert_int_equal(hookd_publish_pg(fx->app, NULL, id), HOOKD_EINVAL);
}

/* data_json is judged by the one validator: each corpus case is stored or refused as the corpus says. */
static void test_json_corpus(void **state)
{
    struct fixture *fx = *state;
    char id[HOOKD_ID_MAX];

    for (size_t i = 0; i < JSON_CORPUS_N; i++) {
        struct hookd_event ev = {.id = id, .type = "corpus.case", .data_json = json_corpus[i].text};
        int rc;

        id_new(id, "evt_corpus_");
        rc = hookd_publish_pg(fx->app, &ev, NULL);
        if (rc != (json_corpus[i].valid ? 0 : HOOKD_EINVAL))
            fail_msg("case %zu (%s): %s", i, json_corpus[i].text, hookd_strerror(rc));
        assert_int_equal(outbox_count(fx, id), json_corpus[i].valid ? 1 : 0);
    }
}

/* A database hookd never migrated: the insert fails cleanly. */
static void test_no_schema(void **state)
{
    struct fixture *fx = *state;
    struct hookd_event ev = {.type = "order.paid", .data_json = "{}"};
    char name[HOOKD_ID_MAX], sql[128], dsn[512];
    const char *path = strchr(strstr(fx->dsn, "://") + 3, '/'), *query = strchr(path, '?');
    PGconn *c;

    id_new(name, "hookd_empty_");
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", name);
    app_exec(fx->app, sql);
    snprintf(dsn, sizeof dsn, "%.*s/%s%s", (int)(path - fx->dsn), fx->dsn, name, query ? query : "");
    c = connect_or_fail(dsn);
    assert_int_equal(hookd_publish_pg(c, &ev, NULL), HOOKD_EIO);
    PQfinish(c);
    snprintf(sql, sizeof sql, "DROP DATABASE %s WITH (FORCE)", name);
    app_exec(fx->app, sql);
}

/* The server ends the application's session: the publish reports the lost connection. */
static void test_connection_lost(void **state)
{
    struct fixture *fx = *state;
    struct hookd_event ev = {.type = "order.paid", .data_json = "{}"};
    PGconn *victim = connect_or_fail(fx->dsn);
    char pid[16];
    const char *param = pid;
    PGresult *r;

    snprintf(pid, sizeof pid, "%d", PQbackendPID(victim));
    r = PQexecParams(fx->app, "SELECT pg_terminate_backend($1::int)", 1, NULL, &param, NULL, NULL, 0);
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    PQclear(r);
    usleep(100000);
    assert_int_equal(hookd_publish_pg(victim, &ev, NULL), HOOKD_EUNAVAIL);
    PQfinish(victim);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_rollback_leaves_no_event),
        T(test_commit_stores_the_event),
        T(test_refusals_keep_the_transaction),
        T(test_bare_sql_insert_notifies),
        T(test_notify_follows_the_transaction),
        T(test_invalid_input),
        T(test_json_corpus),
        T(test_no_schema),
        T(test_connection_lost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
