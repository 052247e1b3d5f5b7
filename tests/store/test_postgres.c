/*
 * What only the PostgreSQL backend has: recovery after the server ended the
 * session (reconnect, at most once a second, never in the middle of a
 * transaction), LISTEN renewed after a reconnect, and transactions that a
 * failed statement aborted. Each test gets a database of its own on the
 * server of HOOKD_TEST_PG (a postgres:// URL); without it every test fails.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/ids.h"
#include "store/postgres_internal.h"
#include "store/store.h"
#include "pg_exec.h"

struct fixture {
    char name[HOOKD_ID_MAX]; /* the test's database */
    char dsn[512];
    PGconn *admin;           /* on HOOKD_TEST_PG's own database */
    struct store *s;
};

static void admin_exec(struct fixture *fx, const char *sql) { pg_exec_ok(fx->admin, sql); }

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof *fx);
    const char *env = getenv("HOOKD_TEST_PG"), *path, *query;
    char sql[160];

    assert_non_null(fx);
    if (!env || !env[0]) {
        free(fx);
        fail_msg("HOOKD_TEST_PG is not set: start a cluster with scripts/pg.sh start DIR and export its URL");
    }
    fx->admin = PQconnectdb(env);
    if (PQstatus(fx->admin) != CONNECTION_OK)
        fail_msg("cannot connect to HOOKD_TEST_PG: %s", PQerrorMessage(fx->admin));
    /* The same URL with a new database name. */
    id_new(fx->name, "hookd_pgtest_");
    path = strstr(env, "://");
    path = path ? strchr(path + 3, '/') : NULL;
    assert_non_null(path);
    query = strchr(path, '?');
    snprintf(fx->dsn, sizeof fx->dsn, "%.*s/%s%s", (int)(path - env), env, fx->name, query ? query : "");
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", fx->name);
    admin_exec(fx, sql);
    assert_int_equal(store_open(fx->dsn, &fx->s), 0);
    assert_int_equal(store_migrate(fx->s), 0);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    char sql[160];

    store_close(fx->s);
    snprintf(sql, sizeof sql, "DROP DATABASE %s WITH (FORCE)", fx->name);
    admin_exec(fx, sql);
    PQfinish(fx->admin);
    free(fx);
    return 0;
}

/* Ends every session of hookd's on the test's database, as a server restart would. */
static void terminate_sessions(struct fixture *fx)
{
    char sql[256];

    snprintf(sql, sizeof sql,
             "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
             " WHERE datname = '%s' AND application_name = 'hookd'",
             fx->name);
    admin_exec(fx, sql);
    usleep(50000);
}

static int key_lookup(struct store *s, const char *key)
{
    char *v = NULL;
    int r = store_meta_get(s, key, &v);

    free(v);
    return r;
}

static void test_reconnect_after_the_session_ended(void **state)
{
    struct fixture *fx = *state;
    char *v = NULL;

    assert_int_equal(store_meta_set(fx->s, "k", "before"), 0);
    terminate_sessions(fx);
    assert_int_equal(store_meta_get(fx->s, "k", &v), HOOKD_EUNAVAIL); /* finds the connection gone */
    assert_null(v);
    /* The next call reconnects and prepares its statements again. */
    assert_int_equal(store_meta_get(fx->s, "k", &v), 0);
    assert_string_equal(v, "before");
    free(v);
    assert_int_equal(store_meta_set(fx->s, "k", "after"), 0);
    assert_int_equal(store_meta_get(fx->s, "k", &v), 0);
    assert_string_equal(v, "after");
    free(v);
}

/* While the server refuses connections, a connection tries again at most once a second. */
static void test_reconnect_at_most_once_a_second(void **state)
{
    struct fixture *fx = *state;
    char sql[160];
    bool any;

    snprintf(sql, sizeof sql, "ALTER DATABASE %s ALLOW_CONNECTIONS false", fx->name);
    admin_exec(fx, sql);
    terminate_sessions(fx);
    assert_int_equal(store_outbox_pending(fx->s, &any), HOOKD_EUNAVAIL); /* the lost session */
    assert_int_equal(store_outbox_pending(fx->s, &any), HOOKD_EUNAVAIL); /* a refused reconnect */
    snprintf(sql, sizeof sql, "ALTER DATABASE %s ALLOW_CONNECTIONS true", fx->name);
    admin_exec(fx, sql);
    assert_int_equal(store_outbox_pending(fx->s, &any), HOOKD_EUNAVAIL); /* too soon to try again */
    usleep(1100000);
    assert_int_equal(store_outbox_pending(fx->s, &any), 0);
}

/* A transaction lost with its session is never continued on a new one. */
static void test_lost_transaction_is_not_resumed(void **state)
{
    struct fixture *fx = *state;

    assert_int_equal(store_begin(fx->s), 0);
    assert_int_equal(store_meta_set(fx->s, "a", "1"), 0);
    terminate_sessions(fx);
    assert_int_equal(store_meta_set(fx->s, "b", "2"), HOOKD_EUNAVAIL);
    assert_int_equal(store_meta_set(fx->s, "b", "2"), HOOKD_EUNAVAIL); /* no reconnect inside it */
    assert_int_equal(store_savepoint(fx->s), HOOKD_EUNAVAIL);
    assert_int_equal(store_commit(fx->s), HOOKD_EUNAVAIL);
    assert_int_equal(store_rollback(fx->s), 0);
    assert_int_equal(key_lookup(fx->s, "a"), HOOKD_ENOTFOUND); /* reconnected; nothing was committed */
    assert_int_equal(key_lookup(fx->s, "b"), HOOKD_ENOTFOUND);
}

static void test_changed_after_reconnect(void **state)
{
    struct fixture *fx = *state;
    struct store *other;
    struct event ev = {.type = "order.paid"};
    bool changed = false;
    int rc = 0;

    assert_int_equal(store_changed(fx->s, &changed), 0);
    assert_true(changed); /* the first call: look once */
    assert_int_equal(store_changed(fx->s, &changed), 0);
    assert_false(changed);
    terminate_sessions(fx);
    /* Until the loss shows on the socket: no change, then an error, then a
     * reconnect that reports a change (notifications may have been lost). */
    for (int i = 0; i < 1000; i++) {
        rc = store_changed(fx->s, &changed);
        if (rc == 0 && changed)
            break;
        assert_true(rc == 0 || rc == HOOKD_EUNAVAIL);
        usleep(1000);
    }
    assert_int_equal(rc, 0);
    assert_true(changed);
    assert_int_equal(store_changed(fx->s, &changed), 0);
    assert_false(changed);
    /* LISTEN was renewed: another connection's insert is noticed. */
    assert_int_equal(store_open(fx->dsn, &other), 0);
    assert_int_equal(store_event_insert(other, &ev, NULL), 0);
    for (int i = 0; i < 2000 && !changed; i++) {
        assert_int_equal(store_changed(fx->s, &changed), 0);
        if (!changed)
            usleep(1000);
    }
    assert_true(changed);
    store_close(other);
}

/* Invalid UTF-8 is refused by the server: an SQL error inside the transaction. */
static int insert_bad_event(struct store *s)
{
    struct event ev = {.type = "order.paid", .payload = "{\"a\":\"\xff\"}"};

    return store_event_insert(s, &ev, NULL);
}

/* The writer's pattern: a failed op rolls back to its savepoint and the batch goes on. */
static void test_failed_op_rolls_back_to_its_savepoint(void **state)
{
    struct fixture *fx = *state;

    assert_int_equal(store_begin(fx->s), 0);
    assert_int_equal(store_savepoint(fx->s), 0);
    assert_int_equal(store_meta_set(fx->s, "kept", "1"), 0);
    assert_int_equal(store_release(fx->s), 0);
    assert_int_equal(store_savepoint(fx->s), 0);
    assert_int_equal(store_meta_set(fx->s, "undone", "1"), 0);
    assert_int_equal(insert_bad_event(fx->s), HOOKD_EINVAL);
    assert_int_equal(store_rollback_to(fx->s), 0);
    assert_int_equal(store_savepoint(fx->s), 0);
    assert_int_equal(store_meta_set(fx->s, "after", "1"), 0);
    assert_int_equal(store_release(fx->s), 0);
    assert_int_equal(store_commit(fx->s), 0);
    assert_int_equal(key_lookup(fx->s, "kept"), 0);
    assert_int_equal(key_lookup(fx->s, "undone"), HOOKD_ENOTFOUND);
    assert_int_equal(key_lookup(fx->s, "after"), 0);
}

/* An aborted transaction is never reported committed. */
static void test_aborted_transaction_does_not_commit(void **state)
{
    struct fixture *fx = *state;

    /* An op that hides its failed statement: its release fails, and so does the batch. */
    assert_int_equal(store_begin(fx->s), 0);
    assert_int_equal(store_savepoint(fx->s), 0);
    assert_int_equal(store_meta_set(fx->s, "x", "1"), 0);
    assert_int_not_equal(insert_bad_event(fx->s), 0);
    assert_int_equal(store_release(fx->s), HOOKD_EIO);
    assert_int_equal(store_rollback(fx->s), 0);
    assert_int_equal(key_lookup(fx->s, "x"), HOOKD_ENOTFOUND);

    /* Without savepoints: COMMIT of an aborted transaction is a rollback, so an error. */
    assert_int_equal(store_begin(fx->s), 0);
    assert_int_equal(store_meta_set(fx->s, "y", "1"), 0);
    assert_int_not_equal(insert_bad_event(fx->s), 0);
    assert_int_equal(store_commit(fx->s), HOOKD_EIO);
    assert_int_equal(store_rollback(fx->s), 0);
    assert_int_equal(key_lookup(fx->s, "y"), HOOKD_ENOTFOUND);
    assert_int_equal(store_meta_set(fx->s, "z", "1"), 0); /* the connection is fine */
}

/* The count of hookd_meta rows whose key starts with prefix, through a connection of the test's own. */
static int meta_keys(struct fixture *fx, const char *prefix)
{
    PGconn *c = PQconnectdb(fx->dsn);
    char sql[160];
    PGresult *r;
    int n;

    assert_int_equal(PQstatus(c), CONNECTION_OK);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM hookd_meta WHERE key LIKE '%s%%'", prefix);
    r = PQexec(c, sql);
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    n = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    PQfinish(c);
    return n;
}

/*
 * Several statements in one pipeline (pg_run_many): each result comes back;
 * when one fails, its error is returned, no result is, and the statements
 * after it do not run; a BEGIN still pending goes first, so a failure leaves
 * the transaction to be rolled back as a whole.
 */
/* Slots no store method uses (each slot is one statement text on a connection). */
#define SLOT_INSERT (PG_SPARE + 0)
#define SLOT_COUNT (PG_SPARE + 1)
#define SLOT_INSERT_B (PG_SPARE + 2)
#define SLOT_FAIL (PG_SPARE + 3)

static void test_pipelined_statements(void **state)
{
    struct fixture *fx = *state;
    struct pg_params p = {.n = 0};
    PGresult *res[3];

    pg_param_text(&p, 1, "pipe.a");
    assert_int_equal(pg_run_many(fx->s,
                                 (const struct pg_stmt[]){
                                     {SLOT_INSERT, "INSERT INTO hookd_meta(key, value) VALUES ($1, 'x')", &p},
                                     {SLOT_COUNT, "SELECT count(*) FROM hookd_meta WHERE key = $1", &p},
                                 },
                                 2, res),
                     0);
    assert_non_null(res[0]);
    assert_string_equal(PQgetvalue(res[1], 0, 0), "1"); /* the second saw the first */
    PQclear(res[0]);
    PQclear(res[1]);

    /* The first fails (a duplicate key): nothing comes back, the second never ran. */
    assert_int_equal(pg_run_many(fx->s,
                                 (const struct pg_stmt[]){
                                     {SLOT_INSERT, "INSERT INTO hookd_meta(key, value) VALUES ($1, 'x')", &p},
                                     {SLOT_INSERT_B, "INSERT INTO hookd_meta(key, value) VALUES ($1 || '.b', 'y')", &p},
                                 },
                                 2, res),
                     HOOKD_EEXISTS);
    assert_null(res[0]);
    assert_null(res[1]);
    assert_int_equal(meta_keys(fx, "pipe."), 1);

    /* In a transaction whose BEGIN is still pending: the failure aborts it, the rollback undoes the rest. */
    assert_int_equal(store_begin(fx->s), 0);
    pg_param_text(&p, 1, "pipe.c");
    assert_int_equal(pg_run_many(fx->s,
                                 (const struct pg_stmt[]){
                                     {SLOT_INSERT_B, "INSERT INTO hookd_meta(key, value) VALUES ($1 || '.b', 'y')", &p},
                                     {SLOT_FAIL, "SELECT 1 / 0 WHERE $1 IS NOT NULL", &p},
                                 },
                                 2, res),
                     HOOKD_EINVAL); /* division by zero: a data exception */
    assert_null(res[0]); /* the insert's result is dropped with the failure */
    assert_int_equal(store_commit(fx->s), HOOKD_EIO);
    assert_int_equal(store_rollback(fx->s), 0);
    assert_int_equal(meta_keys(fx, "pipe.c"), 0);
    /* The connection is fine afterwards, and its statements stay prepared. */
    assert_int_equal(store_meta_set(fx->s, "pipe.d", "1"), 0);
    assert_int_equal(meta_keys(fx, "pipe."), 2);
}

/* A setting of the store's own session, read through its connection. */
static void assert_setting(struct store *s, const char *name, const char *want)
{
    char sql[96];
    PGresult *r;

    snprintf(sql, sizeof sql, "SELECT current_setting('%s')", name);
    r = PQexec(s->conn, sql);
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    assert_string_equal(PQgetvalue(r, 0, 0), want);
    PQclear(r);
}

/*
 * hookd's sessions price sequential and bitmap scans out (plans made while
 * the tables were nearly empty must not scan whole backlogs later), keep
 * generic plans and run without the JIT; a DSN that sets options of its own gets those instead.
 */
static void test_session_planner_settings(void **state)
{
    struct fixture *fx = *state;
    struct store *own = NULL;
    char dsn[640];

    assert_setting(fx->s, "enable_seqscan", "off");
    assert_setting(fx->s, "enable_bitmapscan", "off");
    assert_setting(fx->s, "jit", "off");
    assert_setting(fx->s, "plan_cache_mode", "force_generic_plan");
    /* The same after a reconnect. */
    terminate_sessions(fx);
    assert_int_equal(key_lookup(fx->s, "k"), HOOKD_EUNAVAIL);
    assert_int_equal(key_lookup(fx->s, "k"), HOOKD_ENOTFOUND);
    assert_setting(fx->s, "enable_seqscan", "off");

    snprintf(dsn, sizeof dsn, "%s%coptions=-c%%20enable_seqscan%%3Don", fx->dsn, strchr(fx->dsn, '?') ? '&' : '?');
    assert_int_equal(store_open(dsn, &own), 0);
    assert_setting(own, "enable_seqscan", "on");
    assert_setting(own, "enable_bitmapscan", "on");
    store_close(own);
}

/*
 * The plan of the delivery list statement that store_delivery_list just
 * prepared for filter f (found by its text among the session's prepared
 * statements: the one naming `needle`), run again as EXPLAIN with the same
 * parameters; *plan is heap text.
 */
static void list_plan(struct store *s, const char *needle, const char *status, char **plan)
{
    char sql[512];
    PGresult *r;
    size_t len = 0;

    snprintf(sql, sizeof sql,
             "SELECT name FROM pg_prepared_statements WHERE statement LIKE 'SELECT %%FROM hookd_deliveries_all d WHERE true%%'"
             " AND statement LIKE '%%ORDER BY d.id DESC%%' AND statement LIKE '%%%s%%'",
             needle);
    r = PQexec(s->conn, sql);
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    assert_int_equal(PQntuples(r), 1);
    snprintf(sql, sizeof sql, "EXPLAIN EXECUTE %s(NULL, NULL, NULL, '%s', 0, 0, NULL, NULL, 100)", PQgetvalue(r, 0, 0),
             status);
    PQclear(r);
    r = PQexec(s->conn, sql);
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    *plan = calloc(1, 4096);
    assert_non_null(*plan);
    for (int i = 0; i < PQntuples(r) && len < 4000; i++)
        len += (size_t)snprintf(*plan + len, 4096 - len, "%s\n", PQgetvalue(r, i, 0));
    PQclear(r);
}

/*
 * hookd_deliveries_status leaves delivered rows out (a completion adds no
 * entry to it): a list of another status still reads it, in a generic plan,
 * because its statement repeats the predicate; a list of delivered ones does
 * not claim it and walks the primary key.
 */
static void test_status_list_uses_undelivered_index(void **state)
{
    struct fixture *fx = *state;
    struct delivery_list l;
    char *plan;
    PGresult *r;

    r = PQexec(fx->s->conn, "SELECT pg_get_indexdef('hookd_deliveries_status'::regclass)");
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    assert_non_null(strstr(PQgetvalue(r, 0, 0), "WHERE (status <> 'delivered'::text)"));
    PQclear(r);

    assert_int_equal(store_delivery_list(fx->s, &(struct delivery_filter){.status = DELIVERY_DEAD, .limit = 10}, &l), 0);
    delivery_list_free(&l);
    list_plan(fx->s, "d.status <> ''delivered''", "dead", &plan);
    assert_non_null(strstr(plan, "hookd_deliveries_status"));
    free(plan);

    assert_int_equal(
        store_delivery_list(fx->s, &(struct delivery_filter){.status = DELIVERY_DELIVERED, .limit = 10}, &l), 0);
    delivery_list_free(&l);
    list_plan(fx->s, "d.status = $4 ORDER BY", "delivered", &plan);
    assert_null(strstr(plan, "hookd_deliveries_status"));
    free(plan);
}

/* Runs sql on the store's own session (the test's database). */
static void session_exec(struct store *s, const char *sql) { pg_exec_ok(s->conn, sql); }

/*
 * An ended ordered delivery wakes its resource's next row by key: the
 * completion's generic plan reads no status index, whatever the statistics
 * said when it was made. Here an ANALYZE saw delivered rows only, and pending
 * ones came after it (a backlog after a quiet spell): with the status written
 * as the literal 'pending', that plan walked every pending delivery through
 * hookd_deliveries_status, with the keys as a filter, in every completion
 * (83,000 rows beside 8 hung endpoints' backlogs).
 */
static void test_completion_wakes_by_key(void **state)
{
    struct fixture *fx = *state;
    int64_t now = 1700000000000;
    struct delivery_result r = {.delivery_id = "dl_none", .lease_owner = "n1", .lease_token = 1,
                                .status = DELIVERY_DELIVERED,
                                .attempt = {.n = 1, .started_at = now, .duration_ms = 1, .status_code = 200}};
    char sql[640];
    int one = -1;
    PGresult *res;
    bool by_key = false, other = false;

    session_exec(fx->s, "ALTER TABLE hookd_deliveries SET (autovacuum_enabled = false)");
    session_exec(fx->s, "INSERT INTO hookd_deliveries(id, event_id, endpoint_id, status, next_attempt_at)"
                        " SELECT 'dl_' || g, 'ev_' || g, 'ep_a', 'delivered', NULL FROM generate_series(1, 3000) g");
    session_exec(fx->s, "ANALYZE hookd_deliveries");
    session_exec(fx->s, "INSERT INTO hookd_deliveries(id, event_id, endpoint_id, status, next_attempt_at)"
                        " SELECT 'dl_' || g, 'ev_' || g, 'ep_b', 'pending', 0 FROM generate_series(3001, 6000) g");
    /* Prepares the statement (its generic plan is made now) and fences the result out: no such lease. */
    assert_int_equal(store_delivery_complete_many(fx->s, &r, 1, now, &one), 0);
    assert_int_equal(one, HOOKD_ESTALE);
    res = PQexec(fx->s->conn, "SELECT name FROM pg_prepared_statements WHERE statement LIKE 'WITH r AS (SELECT * FROM unnest(%'"
                              " AND statement LIKE '%INSERT INTO hookd_attempts%'");
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    assert_int_equal(PQntuples(res), 1);
    snprintf(sql, sizeof sql,
             "EXPLAIN EXECUTE %s('{dl_none}', '{n1}', '{1}', '{delivered}', '{1}', '{0}', '{200}', '{NULL}', '{%lld}',"
             " '{1}', '{NULL}', '{NULL}', '{n1}', '{NULL}', '{0}', %lld, 'pending')",
             PQgetvalue(res, 0, 0), (long long)now, (long long)now);
    PQclear(res);
    res = PQexec(fx->s->conn, sql);
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    /* The wake-up's rows (alias n) come from the primary key, and from no other index. */
    for (int i = 0; i < PQntuples(res); i++) {
        const char *line = PQgetvalue(res, i, 0);
        if (strstr(line, "Scan") == NULL || strstr(line, " on hookd_deliveries n ") == NULL)
            continue;
        if (strstr(line, "using hookd_deliveries_pkey on") != NULL) {
            by_key = true;
        } else {
            other = true;
            print_message("%s\n", line);
        }
    }
    PQclear(res);
    assert_true(by_key);
    assert_false(other);
}

/*
 * A claim finds each endpoint's earliest due row through
 * hookd_deliveries_endpoint_due, whatever the statistics said when its
 * generic plan was made. Here they were taken before the endpoints that now
 * have backlogs existed (their ids are not among the common values), and the
 * due index has grown dead entries since: a plan free to sort chose another
 * index of each endpoint's rows and a sort, reading every open row of every
 * endpoint in each claim.
 */
/*
 * The generic plan of the prepared statement whose text starts as like
 * (args: its EXECUTE arguments) reads an endpoint's due rows through
 * hookd_deliveries_endpoint_due, in its order, without a sort.
 */
static void assert_walks_due_index(struct store *s, const char *like, const char *args)
{
    char sql[256];
    bool due_index = false, sorted = false;
    PGresult *res;

    snprintf(sql, sizeof sql, "SELECT name FROM pg_prepared_statements WHERE statement LIKE '%s'", like);
    res = PQexec(s->conn, sql);
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    assert_int_equal(PQntuples(res), 1);
    snprintf(sql, sizeof sql, "EXPLAIN EXECUTE %s%s", PQgetvalue(res, 0, 0), args);
    PQclear(res);
    res = PQexec(s->conn, sql);
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    for (int i = 0; i < PQntuples(res); i++) {
        const char *line = PQgetvalue(res, i, 0);
        due_index |= strstr(line, "using hookd_deliveries_endpoint_due on hookd_deliveries d ") != NULL;
        sorted |= strstr(line, "Sort Key: d.next_attempt_at") != NULL;
    }
    PQclear(res);
    assert_true(due_index);
    assert_false(sorted);
}

static void test_claim_walks_the_due_index(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct lease_limits lim = {.default_cap = 64};
    struct job_list jobs;
    char sql[256];
    PGresult *res;

    session_exec(fx->s, "ALTER TABLE hookd_deliveries SET (autovacuum_enabled = false)");
    session_exec(fx->s, "INSERT INTO hookd_deliveries(id, event_id, endpoint_id, status, next_attempt_at)"
                        " SELECT 'd' || g, 'e' || g, 'ep_old' || (g % 9), 'delivered', g FROM generate_series(1, 20000) g");
    session_exec(fx->s, "ANALYZE hookd_deliveries");
    session_exec(fx->s, "INSERT INTO hookd_endpoints(id, url, enabled, created_at, updated_at)"
                        " SELECT 'ep_new' || g, 'http://127.0.0.1:9/', true, 0, 0 FROM generate_series(1, 9) g");
    for (int round = 0; round < 3; round++) {
        snprintf(sql, sizeof sql,
                 "INSERT INTO hookd_deliveries(id, event_id, endpoint_id, status, next_attempt_at)"
                 " SELECT 'r%d_' || g, 'f%d_' || g, 'ep_new' || (1 + g %% 9), 'pending', g FROM generate_series(1, 20000) g",
                 round, round);
        session_exec(fx->s, sql);
        if (round < 2)
            session_exec(fx->s, "UPDATE hookd_deliveries SET status = 'delivered' WHERE status = 'pending'");
    }
    /* Prepares the statements (the plans are made now); the rows have no events, so none is taken. */
    assert_int_equal(store_delivery_claim_due(fx->s, "n1", now, now + 30000, 10, &lim, &jobs), 0);
    job_list_free(&jobs);
    snprintf(sql, sizeof sql, "(%lld, 64, 10, '{}')", (long long)now);
    assert_walks_due_index(fx->s, "WITH due AS MATERIALIZED%", sql);
    /* next_due walks each endpoint the same way (its plan made with sorts priced out too). */
    int64_t at = 0;
    assert_int_equal(store_delivery_next_due(fx->s, &at), 0);
    snprintf(sql, sizeof sql, "(%lld)", (long long)now);
    assert_walks_due_index(fx->s, "SELECT min(CASE WHEN st.breaker%", sql);
    /* The setting comes back within the claim's transaction, for the statements after it. */
    assert_int_equal(store_begin(fx->s), 0);
    assert_int_equal(store_delivery_claim_due(fx->s, "n1", now, now + 30000, 10, &lim, &jobs), 0);
    job_list_free(&jobs);
    res = PQexec(fx->s->conn, "SELECT current_setting('enable_sort')");
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    assert_string_equal(PQgetvalue(res, 0, 0), "on");
    PQclear(res);
    assert_int_equal(store_rollback(fx->s), 0);
}

/* ---- the outbox take's floor ------------------------------------------------ */

/* A connection of the application's own on the test's database. */
static PGconn *app_connect(struct fixture *fx)
{
    PGconn *c = PQconnectdb(fx->dsn);

    if (PQstatus(c) != CONNECTION_OK)
        fail_msg("cannot connect: %s", PQerrorMessage(c));
    return c;
}

/* Shared buffers the plan of sql read (EXPLAIN ANALYZE on c). */
static long plan_buffers(PGconn *c, const char *sql)
{
    char explain[512];
    PGresult *res;
    long buffers;

    snprintf(explain, sizeof explain, "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) %s", sql);
    res = PQexec(c, explain);
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    const char *hit = strstr(PQgetvalue(res, 0, 0), "\"Shared Hit Blocks\": ");
    assert_non_null(hit);
    buffers = strtol(hit + strlen("\"Shared Hit Blocks\": "), NULL, 10);
    PQclear(res);
    return buffers;
}

/* The application's INSERT of outbox row id: its seq. */
static int64_t app_insert(PGconn *c, const char *id)
{
    char sql[256];
    PGresult *r;
    int64_t seq;

    snprintf(sql, sizeof sql,
             "INSERT INTO hookd_outbox(id, event_type, payload, created_at) VALUES ('%s', 'order.paid', '{}', 1)"
             " RETURNING seq",
             id);
    r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(c));
    seq = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return seq;
}

/* One take with its floor step due, no scan from the start: the seqs it took, in order (at most 8). */
static size_t take_above_floor(struct store *s, int64_t *seqs)
{
    struct event_list evs = {0};
    int64_t version = 0;
    size_t n;

    s->floor.stepped_at = clock_mono_ms() - PG_OUTBOX_FLOOR_EVERY_MS;
    s->floor.swept_at = clock_mono_ms();
    assert_int_equal(store_outbox_take(s, 8, 1, &evs, &version), 0);
    n = evs.n;
    for (size_t i = 0; i < n && i < 8; i++)
        seqs[i] = evs.items[i].seq;
    event_list_free(&evs);
    return n;
}

/*
 * Dispatched rows stay in hookd_outbox_undispatched as dead entries until
 * VACUUM: the takes start above them. After 20,000 rows the floor is at the
 * last one and its scan reads 2 buffers, where a scan from the start reads
 * every dead entry's page (about 50).
 */
static void test_outbox_take_starts_above_the_dispatched(void **state)
{
    struct fixture *fx = *state;
    PGconn *app = app_connect(fx);
    struct event_list evs = {0};
    int64_t version = 0, seqs[8], last;
    char sql[320];

    pg_exec_ok(app, "ALTER TABLE hookd_outbox SET (autovacuum_enabled = false)");
    pg_exec_ok(app, "INSERT INTO hookd_outbox(id, event_type, payload, created_at)"
                   " SELECT 'ev_' || g, 'order.paid', '{}', 1 FROM generate_series(1, 20000) g");
    last = app_insert(app, "ev_last");
    for (size_t taken = 0, n = 1; n > 0; taken += n) {
        assert_int_equal(store_outbox_take(fx->s, 1000, 1, &evs, &version), 0);
        n = evs.n;
        event_list_free(&evs);
        if (n == 0)
            assert_int_equal(taken, 20001);
    }
    /* Two steps: the first sees the highest seq, the second (every transaction of then ended) moves there. */
    assert_int_equal(take_above_floor(fx->s, seqs), 0);
    assert_int_equal(take_above_floor(fx->s, seqs), 0);
    assert_int_equal(fx->s->floor.floor, last);
    /* What the floor saves: the scan from it against the scan from the start. */
    for (int run = 0; run < 4; run++) {
        int from_start = run % 2;
        snprintf(sql, sizeof sql,
                 "SELECT seq FROM hookd_outbox WHERE dispatched_at IS NULL AND seq > %lld ORDER BY seq LIMIT 8",
                 from_start ? 0LL : (long long)fx->s->floor.floor);
        long buffers = plan_buffers(app, sql);
        if (run < 2)
            continue; /* the first runs read the catalogs too */
        if (from_start)
            assert_true(buffers >= 20);
        else
            assert_true(buffers <= 3);
    }
    /* A new row is taken as before. */
    last = app_insert(app, "ev_next");
    assert_int_equal(take_above_floor(fx->s, seqs), 1);
    assert_int_equal(seqs[0], last);
    PQfinish(app);
}

/*
 * A transaction still open holds a lower seq than rows committed after it:
 * the floor waits below it, and the row is taken as soon as it commits, not
 * at the next scan from the start. The same for a row another node's take
 * holds locked and then gives back.
 */
static void test_outbox_floor_waits_for_open_transactions(void **state)
{
    struct fixture *fx = *state;
    PGconn *app = app_connect(fx), *late = app_connect(fx);
    struct store *other = NULL;
    struct event_list evs = {0};
    int64_t version = 0, seqs[8], early, after, held;

    pg_exec_ok(late, "BEGIN");
    early = app_insert(late, "ev_early");
    after = app_insert(app, "ev_after");
    assert_true(after > early);
    assert_int_equal(take_above_floor(fx->s, seqs), 1);
    assert_int_equal(seqs[0], after);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(take_above_floor(fx->s, seqs), 0);
        assert_true(fx->s->floor.floor < early);
    }
    pg_exec_ok(late, "COMMIT");
    assert_int_equal(take_above_floor(fx->s, seqs), 1);
    assert_int_equal(seqs[0], early);

    /* Another node's take holds a row (and rolls back): the floor stays below it. */
    held = app_insert(app, "ev_held");
    assert_int_equal(store_open(fx->dsn, &other), 0);
    assert_int_equal(store_begin(other), 0);
    assert_int_equal(store_outbox_take(other, 8, 1, &evs, &version), 0);
    assert_int_equal(evs.n, 1);
    event_list_free(&evs);
    after = app_insert(app, "ev_after_held");
    for (int i = 0; i < 4; i++) {
        size_t n = take_above_floor(fx->s, seqs);
        assert_true(n <= 1);
        if (n == 1)
            assert_int_equal(seqs[0], after);
        assert_true(fx->s->floor.floor < held);
    }
    assert_int_equal(store_rollback(other), 0);
    assert_int_equal(take_above_floor(fx->s, seqs), 1);
    assert_int_equal(seqs[0], held);
    store_close(other);
    PQfinish(late);
    PQfinish(app);
}

/*
 * A second take in one transaction steps no floor: the first one's marks may
 * yet roll back, and the rows must then be taken again.
 */
static void test_outbox_floor_ignores_its_own_marks(void **state)
{
    struct fixture *fx = *state;
    PGconn *app = app_connect(fx);
    int64_t seqs[8], a, b;

    assert_int_equal(take_above_floor(fx->s, seqs), 0);
    a = app_insert(app, "ev_a");
    b = app_insert(app, "ev_b");
    assert_int_equal(take_above_floor(fx->s, seqs), 2); /* the step before it saw the highest seq before them */
    assert_int_equal(store_begin(fx->s), 0);
    for (int i = 0; i < 3; i++) {
        char id[16];
        snprintf(id, sizeof id, "ev_c%d", i);
        (void)app_insert(app, id);
    }
    assert_int_equal(take_above_floor(fx->s, seqs), 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(take_above_floor(fx->s, seqs), 0); /* its own marks: no step may count them */
    assert_true(fx->s->floor.floor <= b);
    assert_int_equal(store_rollback(fx->s), 0);
    assert_int_equal(take_above_floor(fx->s, seqs), 3);
    assert_true(seqs[0] > b && a < b);
    PQfinish(app);
}

/*
 * Rows the floor cannot know of, a seq an application wrote below it or a
 * dispatched_at set back to NULL, are taken by the scan from the start
 * (every PG_OUTBOX_SWEEP_EVERY_MS); a reconnect starts from the start too.
 */
static void test_outbox_rows_below_the_floor_are_swept(void **state)
{
    struct fixture *fx = *state;
    PGconn *app = app_connect(fx);
    struct event_list evs = {0};
    int64_t version = 0, seqs[8], low;

    low = app_insert(app, "ev_1");
    for (int i = 2; i <= 5; i++) {
        char id[16];
        snprintf(id, sizeof id, "ev_%d", i);
        (void)app_insert(app, id);
    }
    assert_int_equal(take_above_floor(fx->s, seqs), 5);
    assert_int_equal(take_above_floor(fx->s, seqs), 0);
    assert_int_equal(take_above_floor(fx->s, seqs), 0);
    assert_true(fx->s->floor.floor > low);
    pg_exec_ok(app, "UPDATE hookd_outbox SET dispatched_at = NULL WHERE id = 'ev_1'");
    assert_int_equal(take_above_floor(fx->s, seqs), 0); /* below the floor */
    fx->s->floor.swept_at = clock_mono_ms() - PG_OUTBOX_SWEEP_EVERY_MS;
    assert_int_equal(store_outbox_take(fx->s, 8, 1, &evs, &version), 0);
    assert_int_equal(evs.n, 1);
    assert_int_equal(evs.items[0].seq, low);
    event_list_free(&evs);

    pg_exec_ok(app, "UPDATE hookd_outbox SET dispatched_at = NULL WHERE id = 'ev_1'");
    terminate_sessions(fx);
    assert_int_equal(store_outbox_take(fx->s, 8, 1, &evs, &version), HOOKD_EUNAVAIL);
    assert_int_equal(take_above_floor(fx->s, seqs), 1); /* reconnected: from the start */
    assert_int_equal(seqs[0], low);
    PQfinish(app);
}

/*
 * Completed leases leave dead entries in hookd_inflight's endpoint index, in
 * the range a slot count scans (their lease_until is still ahead), until a
 * vacuum: autovacuum visits once a minute at the most, so store_maintain
 * vacuums the table, at most once a second.
 */
static void test_maintain_vacuums_the_leases(void **state)
{
    struct fixture *fx = *state;
    PGconn *app = app_connect(fx);
    const char *count = "SELECT count(*) FROM hookd_inflight WHERE endpoint_id = 'ep_a' AND lease_until >= 1";
    PGresult *res;

    pg_exec_ok(app, "ALTER TABLE hookd_inflight SET (autovacuum_enabled = false)");
    pg_exec_ok(app, "INSERT INTO hookd_inflight(delivery_id, endpoint_id, owner, lease_until)"
                    " SELECT 'dl_' || g, 'ep_a', 'n1', 9000000000000 FROM generate_series(1, 20000) g");
    pg_exec_ok(app, "DELETE FROM hookd_inflight");
    (void)plan_buffers(app, count); /* the first scan marks the entries dead; they stay in the pages */
    assert_true(plan_buffers(app, count) >= 20);
    assert_int_equal(store_maintain(fx->s), 0);
    assert_true(plan_buffers(app, count) <= 3);
    /* At most once a second: the next call right away vacuums nothing. */
    pg_exec_ok(app, "INSERT INTO hookd_inflight(delivery_id, endpoint_id, owner, lease_until)"
                    " SELECT 'dl_' || g, 'ep_a', 'n1', 9000000000000 FROM generate_series(1, 20000) g");
    pg_exec_ok(app, "DELETE FROM hookd_inflight");
    assert_int_equal(store_maintain(fx->s), 0);
    (void)plan_buffers(app, count);
    assert_true(plan_buffers(app, count) >= 20);
    fx->s->maintained_at -= 1000;
    assert_int_equal(store_maintain(fx->s), 0);
    assert_true(plan_buffers(app, count) <= 3);
    /* Not inside a transaction (VACUUM cannot run there): nothing, and the transaction goes on. */
    assert_int_equal(store_begin(fx->s), 0);
    fx->s->maintained_at -= 1000;
    assert_int_equal(store_maintain(fx->s), 0);
    assert_int_equal(store_meta_set(fx->s, "k", "v"), 0);
    assert_int_equal(store_commit(fx->s), 0);
    res = PQexec(app, "SELECT value FROM hookd_meta WHERE key = 'k'");
    assert_int_equal(PQntuples(res), 1);
    PQclear(res);
    PQfinish(app);
}

/* An outbox seq is taken after its transaction has its id: what the floor's reasoning rests on. */
static void test_outbox_seq_comes_after_the_transaction_id(void **state)
{
    struct fixture *fx = *state;
    PGconn *app = app_connect(fx);
    PGresult *res;

    pg_exec_ok(app, "BEGIN");
    res = PQexec(app, "SELECT hookd_outbox_next_seq() > 0, pg_current_xact_id_if_assigned() IS NOT NULL");
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    assert_string_equal(PQgetvalue(res, 0, 0), "t");
    assert_string_equal(PQgetvalue(res, 0, 1), "t");
    PQclear(res);
    pg_exec_ok(app, "ROLLBACK");
    res = PQexec(app, "SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef"
                      " WHERE adrelid = 'hookd_outbox'::regclass AND adnum = (SELECT attnum FROM pg_attribute"
                      " WHERE attrelid = 'hookd_outbox'::regclass AND attname = 'seq')");
    assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
    assert_string_equal(PQgetvalue(res, 0, 0), "hookd_outbox_next_seq()");
    PQclear(res);
    PQfinish(app);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

/*
 * The paused endpoints' expiry (a claim's first step, every second or more)
 * reads only the rows it expires: its generic plan, as hookd's sessions make
 * it, ranges over the endpoint-status index by creation time. It read a
 * paused endpoint's whole backlog before (the status index's open rows,
 * hashed against the paused endpoints): here 20,000 rows, each time.
 */
static void test_expire_paused_reads_what_expires(void **state)
{
    struct fixture *fx = *state;
    PGconn *app = app_connect(fx);
    int64_t now = clock_now_ms(), n = -1;
    char sql[320];

    pg_exec_ok(app, "SET session_replication_role = replica"); /* rows of their own, without their events */
    pg_exec_ok(app, "INSERT INTO hookd_endpoint_state(endpoint_id, breaker) SELECT 'ep_px' || g, 'open'"
                    " FROM generate_series(1, 4) g");
    snprintf(sql, sizeof sql,
             "INSERT INTO hookd_deliveries(id, event_id, endpoint_id, status, next_attempt_at, created_at)"
             " SELECT 'dlv_px' || g, 'ev_px' || g, 'ep_px' || (g %% 4 + 1), 'pending', %lld, %lld - g"
             " FROM generate_series(1, 20000) g",
             (long long)now, (long long)now);
    pg_exec_ok(app, sql);
    pg_exec_ok(app, "SET session_replication_role = origin");
    pg_exec_ok(app, "ANALYZE hookd_deliveries");
    pg_exec_ok(app, "SET enable_seqscan = off");
    pg_exec_ok(app, "SET enable_bitmapscan = off");
    pg_exec_ok(app, "SET plan_cache_mode = force_generic_plan");
    pg_exec_ok(app, "PREPARE expire(bigint, bigint) AS SELECT count(*) FROM hookd_deliveries d"
                    " WHERE" PG_EXPIRE_PAUSED_WHERE);
    for (int run = 0; run < 3; run++) {
        snprintf(sql, sizeof sql, "EXECUTE expire(%lld, 3600000)", (long long)now);
        long buffers = plan_buffers(app, sql);
        if (run > 0) /* the first reads the catalogs too */
            assert_true(buffers <= 60);
    }
    /* None is past an hour's window; all are past a second's (created up to 20 s ago: the last 19,000). */
    assert_int_equal(store_endpoint_state_expire_paused(fx->s, now, 3600000, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(store_endpoint_state_expire_paused(fx->s, now, 1000, &n), 0);
    assert_int_equal(n, 19000);
    PQfinish(app);
}

/*
 * The alert signals and the metrics' figures run seldom over tables whose
 * size swings: they are planned at each run, never prepared (a prepared
 * statement keeps the generic plan of its first run, made from the
 * statistics of then: at startup, an empty database's).
 */
static void test_reports_are_planned_at_each_run(void **state)
{
    struct fixture *fx = *state;
    struct alert_signal_list sig;
    struct store_figures fig;
    PGresult *r;

    for (int run = 0; run < 2; run++) {
        assert_int_equal(store_alert_signals(fx->s, clock_now_ms() - 300000, &sig), 0);
        alert_signal_list_free(&sig);
        assert_int_equal(store_figures(fx->s, clock_now_ms(), &fig), 0);
        struct alert_list open = {0};
        assert_int_equal(store_alert_list(fx->s, &(struct alert_filter){.status = 0, .limit = 10}, &open), 0);
        alert_list_free(&open); /* a prepared statement beside them */
    }
    r = PQexec(fx->s->conn, "SELECT count(*) FILTER (WHERE statement LIKE '%missing_signature%'),"
                            " count(*) FILTER (WHERE statement LIKE '%SELECT 0, status, NULL, count(*), 0%'),"
                            " count(*) FROM pg_prepared_statements");
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    assert_string_equal(PQgetvalue(r, 0, 0), "0");
    assert_string_equal(PQgetvalue(r, 0, 1), "0");
    assert_true(atoi(PQgetvalue(r, 0, 2)) > 0); /* the alert list is */
    PQclear(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_reconnect_after_the_session_ended),
        T(test_reconnect_at_most_once_a_second),
        T(test_lost_transaction_is_not_resumed),
        T(test_changed_after_reconnect),
        T(test_failed_op_rolls_back_to_its_savepoint),
        T(test_aborted_transaction_does_not_commit),
        T(test_session_planner_settings),
        T(test_pipelined_statements),
        T(test_status_list_uses_undelivered_index),
        T(test_completion_wakes_by_key),
        T(test_claim_walks_the_due_index),
        T(test_outbox_take_starts_above_the_dispatched),
        T(test_outbox_floor_waits_for_open_transactions),
        T(test_outbox_floor_ignores_its_own_marks),
        T(test_outbox_rows_below_the_floor_are_swept),
        T(test_outbox_seq_comes_after_the_transaction_id),
        T(test_maintain_vacuums_the_leases),
        T(test_expire_paused_reads_what_expires),
        T(test_reports_are_planned_at_each_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
