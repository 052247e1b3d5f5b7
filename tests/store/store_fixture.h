/*
 * Shared by the store conformance suite's programs (test_store*.c): the
 * fixture (DSN from HOOKD_TEST_STORE, a sqlite: path or a postgres:// URL,
 * else a fresh SQLite file per test), helpers that build events, endpoints
 * and deliveries through the wrappers, and a database of a test's own
 * (fresh_store_make) for the tests that need an empty one. Tests must not
 * depend on an empty shared database: it may hold earlier runs' rows.
 * Include after <cmocka.h>.
 */
#ifndef HOOKD_TESTS_STORE_FIXTURE_H
#define HOOKD_TESTS_STORE_FIXTURE_H
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libpq-fe.h>
#include <sqlite3.h>

#include "core/clock.h"
#include "core/ids.h"
#include "store/store.h"

/* Each program uses some of the helpers. */
#define FIXTURE __attribute__((unused))

struct fixture {
    char dir[64];  /* temp dir, empty when HOOKD_TEST_STORE is used */
    char dsn[256];
    struct store *s;
    char account[HOOKD_ID_MAX]; /* unique per test */
};

FIXTURE static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof *fx);
    const char *env = getenv("HOOKD_TEST_STORE");

    assert_non_null(fx);
    if (env && env[0]) {
        snprintf(fx->dsn, sizeof fx->dsn, "%s", env);
    } else {
        snprintf(fx->dir, sizeof fx->dir, "/tmp/hookd-store-XXXXXX");
        assert_non_null(mkdtemp(fx->dir));
        snprintf(fx->dsn, sizeof fx->dsn, "sqlite:%s/store.db", fx->dir);
    }
    assert_int_equal(store_open(fx->dsn, &fx->s), 0);
    assert_int_equal(store_migrate(fx->s), 0);
    id_new(fx->account, "acct_");
    *state = fx;
    return 0;
}

FIXTURE static int teardown(void **state)
{
    struct fixture *fx = *state;
    static const char *const suffixes[] = {"", "-wal", "-shm"};
    char path[128];

    store_fault_inject(NULL, 0, 0);
    store_close(fx->s);
    if (fx->dir[0]) {
        for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
            snprintf(path, sizeof path, "%s/store.db%s", fx->dir, suffixes[i]);
            unlink(path);
        }
        rmdir(fx->dir);
    }
    free(fx);
    return 0;
}

/* ---- helpers ----------------------------------------------------------- */

/* Skips the test unless fx's store is PostgreSQL (several connections decide at once only there). */
FIXTURE static void postgres_only(struct fixture *fx)
{
    if (strcmp(store_backend(fx->s)->name, "postgres") != 0)
        skip(); /* SQLite has one writer: no other connection decides at the same time */
}

FIXTURE static void event_make(struct fixture *fx, const char *type, struct event *ev)
{
    memset(ev, 0, sizeof *ev);
    ev->type = strdup(type);
    ev->account = strdup(fx->account);
    ev->payload = strdup("{\"n\":1}");
    assert_int_equal(store_event_insert(fx->s, ev, NULL), 0);
}

FIXTURE static void endpoint_make(struct fixture *fx, struct endpoint *ep)
{
    memset(ep, 0, sizeof *ep);
    id_new(ep->id, "ep_");
    ep->account = strdup(fx->account);
    ep->url = strdup("http://127.0.0.1:9/hook");
    ep->enabled = true;
    assert_int_equal(store_endpoint_insert(fx->s, ep), 0);
}

FIXTURE static void delivery_make(struct fixture *fx, const char *event_id, const char *endpoint_id,
                                  int64_t next_at, struct delivery *d)
{
    memset(d, 0, sizeof *d);
    id_new(d->id, "dlv_");
    snprintf(d->event_id, sizeof d->event_id, "%s", event_id);
    snprintf(d->endpoint_id, sizeof d->endpoint_id, "%s", endpoint_id);
    d->account = fx->account; /* borrowed, not freed */
    d->status = DELIVERY_PENDING;
    d->next_attempt_at = next_at;
    assert_int_equal(store_delivery_insert(fx->s, d), 0);
    d->account = NULL;
}

/* One event, one enabled endpoint, one pending delivery due at `due`. */
struct scene {
    struct event ev;
    struct endpoint ep;
    struct delivery d;
};

FIXTURE static void scene_make(struct fixture *fx, int64_t due, struct scene *sc)
{
    event_make(fx, "order.paid", &sc->ev);
    endpoint_make(fx, &sc->ep);
    delivery_make(fx, sc->ev.id, sc->ep.id, due, &sc->d);
}

FIXTURE static void scene_free(struct scene *sc)
{
    event_free(&sc->ev);
    endpoint_free(&sc->ep);
    delivery_free(&sc->d);
}

/* On a shared database, finishes every open delivery that earlier tests left
 * (due or not, leased or not: the claim time is far in the future), so the
 * claims of a test see its own rows only. */
FIXTURE static void drain_due(struct fixture *fx)
{
    const int64_t until = INT64_MAX / 4;

    for (int round = 0; round < 1000; round++) {
        struct job_list jobs;
        assert_int_equal(store_delivery_claim_due(fx->s, "drain", until, until + 1000, 500, &(struct lease_limits){0}, &jobs), 0);
        for (size_t i = 0; i < jobs.n; i++) {
            struct delivery_result r = {.delivery_id = jobs.items[i].d.id, .lease_owner = "drain",
                                        .lease_token = jobs.items[i].d.lease_token, .status = DELIVERY_DEAD,
                                        .attempt = {.n = 1, .started_at = until}};
            assert_int_equal(store_delivery_complete(fx->s, &r, until), 0);
        }
        size_t n = jobs.n;
        job_list_free(&jobs);
        if (n == 0)
            return;
    }
    fail_msg("drain_due did not finish");
}

/* A claim of up to 100 without a default in-flight cap. */
FIXTURE static int claim(struct fixture *fx, const char *node, int64_t now, int64_t lease_until, struct job_list *jobs)
{
    assert_int_equal(store_delivery_claim_due(fx->s, node, now, lease_until, 100, &(struct lease_limits){0}, jobs), 0);
    return (int)jobs->n;
}

/* A claim of up to limit with default_cap as the daemon's endpoint_max_in_flight. */
FIXTURE static int claim_capped(struct fixture *fx, const char *node, int64_t now, int64_t lease_until, int limit,
                                int default_cap, struct job_list *jobs)
{
    assert_int_equal(store_delivery_claim_due(fx->s, node, now, lease_until, limit, &(struct lease_limits){.default_cap = default_cap}, jobs), 0);
    return (int)jobs->n;
}

FIXTURE static void complete(struct fixture *fx, const struct delivery_job *j, enum delivery_status st, int n,
                             int code, int64_t started, int64_t next_at, int expect)
{
    struct delivery_result r = {
        .delivery_id = j->d.id,
        .lease_owner = j->d.lease_owner,
        .lease_token = j->d.lease_token,
        .status = st,
        .next_attempt_at = next_at,
        .attempt = {.n = n, .started_at = started, .duration_ms = 12, .status_code = code,
                    .error = code >= 300 ? "HTTP error" : NULL, .response = "ok", .node = j->d.lease_owner},
    };
    assert_int_equal(store_delivery_complete(fx->s, &r, started + 12), expect);
}

/*
 * Another connection's commit shows in store_changed() within ms. On SQLite at
 * once; PostgreSQL delivers the notification asynchronously, a moment after the
 * inserting transaction's COMMIT returned.
 */
FIXTURE static bool changed_within(struct store *s, int ms)
{
    bool changed = false;

    for (int i = 0; i <= ms && !changed; i++) {
        assert_int_equal(store_changed(s, &changed), 0);
        if (!changed)
            usleep(1000);
    }
    return changed;
}

/* A database of a test's own: a new SQLite file, or a new database on the
 * PostgreSQL server of HOOKD_TEST_STORE (created and dropped through libpq). */
struct fresh_store {
    char dsn[512];
    char dir[64];     /* SQLite: the temp dir */
    char pg_name[64]; /* PostgreSQL: the database */
};

/* Runs one statement on the server of fx->dsn, failing the test on error. */
FIXTURE static void pg_admin(struct fixture *fx, const char *sql)
{
    PGconn *c = PQconnectdb(fx->dsn);
    PGresult *r = PQstatus(c) == CONNECTION_OK ? PQexec(c, sql) : NULL;
    bool ok = r && PQresultStatus(r) == PGRES_COMMAND_OK;

    if (!ok)
        print_error("%s: %s\n", sql, PQerrorMessage(c));
    PQclear(r);
    PQfinish(c);
    assert_true(ok);
}

/* Runs SQL on fx's store through a connection of its own (as an application would), failing the test on error. */
FIXTURE static void fixture_sql(struct fixture *fx, const char *sql)
{
    if (strncmp(fx->dsn, "sqlite:", 7) == 0) {
        sqlite3 *db = NULL;
        char *err = NULL;
        int rc = sqlite3_open(fx->dsn + 7, &db);
        if (rc == SQLITE_OK)
            rc = sqlite3_exec(db, sql, NULL, NULL, &err);
        if (rc != SQLITE_OK)
            print_error("%s: %s\n", sql, err ? err : sqlite3_errmsg(db));
        sqlite3_free(err);
        sqlite3_close(db);
        assert_int_equal(rc, SQLITE_OK);
        return;
    }
    pg_admin(fx, sql);
}

/* One integer from a query run on fx's store through a connection of its own (the first column of the first row). */
FIXTURE static int64_t fixture_sql_int(struct fixture *fx, const char *sql)
{
    int64_t v = 0;
    bool ok = false;

    if (strncmp(fx->dsn, "sqlite:", 7) == 0) {
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;
        if (sqlite3_open(fx->dsn + 7, &db) == SQLITE_OK && sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW) {
            v = sqlite3_column_int64(st, 0);
            ok = true;
        }
        if (!ok)
            print_error("%s: %s\n", sql, sqlite3_errmsg(db));
        sqlite3_finalize(st);
        sqlite3_close(db);
    } else {
        PGconn *c = PQconnectdb(fx->dsn);
        PGresult *r = PQstatus(c) == CONNECTION_OK ? PQexec(c, sql) : NULL;
        ok = r && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0;
        if (ok)
            v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        else
            print_error("%s: %s\n", sql, PQerrorMessage(c));
        PQclear(r);
        PQfinish(c);
    }
    assert_true(ok);
    return v;
}

/*
 * The plan of sql on fx's store into out (n bytes), one line per node:
 * SQLite's EXPLAIN QUERY PLAN details (parameters left unbound); PostgreSQL's
 * generic plan (the one a prepared statement keeps) for the arguments args,
 * with sequential scans priced out, so a "Seq Scan" left in it means no index
 * can serve that part at all.
 */
FIXTURE static void fixture_plan(struct fixture *fx, const char *sql, const char *args, char *out, size_t n)
{
    size_t len = 0;

    out[0] = '\0';
    if (strncmp(fx->dsn, "sqlite:", 7) == 0) {
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;
        char *q = sqlite3_mprintf("EXPLAIN QUERY PLAN %s", sql);
        int rc = q ? sqlite3_open(fx->dsn + 7, &db) : SQLITE_NOMEM;
        if (rc == SQLITE_OK)
            rc = sqlite3_prepare_v2(db, q, -1, &st, NULL);
        if (rc != SQLITE_OK)
            print_error("%s: %s\n", sql, sqlite3_errmsg(db));
        while (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW && len + 1 < n) {
            len += (size_t)snprintf(out + len, n - len, "%s\n", (const char *)sqlite3_column_text(st, 3));
            len = len < n ? len : n - 1;
        }
        sqlite3_finalize(st);
        sqlite3_close(db);
        sqlite3_free(q);
        assert_int_equal(rc, SQLITE_OK);
        return;
    }
    PGconn *c = PQconnectdb(fx->dsn);
    size_t qn = strlen(sql) + strlen(args) + 160;
    char *q = malloc(qn);
    PGresult *r = NULL;

    assert_non_null(q);
    snprintf(q, qn, "SET plan_cache_mode = force_generic_plan; SET enable_seqscan = off; PREPARE hookd_plan AS %s;"
                    " EXPLAIN EXECUTE hookd_plan(%s)", sql, args);
    if (PQstatus(c) == CONNECTION_OK)
        r = PQexec(c, q);
    if (!r || PQresultStatus(r) != PGRES_TUPLES_OK)
        print_error("%s: %s\n", q, PQerrorMessage(c));
    assert_true(r && PQresultStatus(r) == PGRES_TUPLES_OK);
    for (int i = 0; i < PQntuples(r) && len + 1 < n; i++) {
        len += (size_t)snprintf(out + len, n - len, "%s\n", PQgetvalue(r, i, 0));
        len = len < n ? len : n - 1;
    }
    PQclear(r);
    PQfinish(c);
    free(q);
}

/*
 * Whether a plan of fixture_plan reads table (its name or alias) whole: a
 * sequential scan, or SQLite's SCAN of it, bare or over an index other than
 * the partial one named `walk` (NULL: none), which a claim walks in order.
 */
FIXTURE static bool plan_scans(const char *plan, const char *table, const char *walk)
{
    char pg[96], sq[96];
    size_t n;

    snprintf(pg, sizeof pg, "Seq Scan on %s ", table);
    snprintf(sq, sizeof sq, "SCAN %s", table);
    if (strstr(plan, pg))
        return true;
    n = strlen(sq);
    for (const char *p = plan; (p = strstr(p, sq)) != NULL; p += n) {
        const char *eol = strchr(p, '\n'), *idx;
        if (!(p == plan || p[-1] == '\n' || p[-1] == ' ') || !(p[n] == '\n' || p[n] == ' ' || p[n] == '\0'))
            continue;
        idx = strstr(p, "INDEX ");
        if (walk && idx && (!eol || idx < eol) && strncmp(idx + 6, walk, strlen(walk)) == 0)
            continue;
        return true;
    }
    return false;
}

FIXTURE static void fresh_store_make(struct fixture *fx, struct fresh_store *f)
{
    const char *scheme = strstr(fx->dsn, "://"), *path, *query;
    char sql[128];
    int n;

    memset(f, 0, sizeof *f);
    if (!scheme) {
        snprintf(f->dir, sizeof f->dir, "/tmp/hookd-fresh-XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        snprintf(f->dsn, sizeof f->dsn, "sqlite:%s/fresh.db", f->dir);
        return;
    }
    /* postgres://[user@][host][:port]/dbname[?params]: the same URL with another dbname. */
    id_new(f->pg_name, "hookd_test_");
    path = strchr(scheme + 3, '/');
    assert_non_null(path);
    query = strchr(path, '?');
    n = snprintf(f->dsn, sizeof f->dsn, "%.*s/%s%s", (int)(path - fx->dsn), fx->dsn, f->pg_name, query ? query : "");
    assert_true(n > 0 && (size_t)n < sizeof f->dsn);
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", f->pg_name);
    pg_admin(fx, sql);
}

FIXTURE static void fresh_store_drop(struct fixture *fx, struct fresh_store *f)
{
    static const char *const suffixes[] = {"", "-wal", "-shm"};
    char path[128], sql[128];

    if (f->pg_name[0]) {
        snprintf(sql, sizeof sql, "DROP DATABASE %s WITH (FORCE)", f->pg_name);
        pg_admin(fx, sql);
        return;
    }
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        snprintf(path, sizeof path, "%s/fresh.db%s", f->dir, suffixes[i]);
        unlink(path);
    }
    rmdir(f->dir);
}

FIXTURE static void delivery_expect(struct fixture *fx, const char *id, enum delivery_status st, int attempts)
{
    struct delivery d;

    assert_int_equal(store_delivery_get(fx->s, id, &d), 0);
    assert_string_equal(delivery_status_name(d.status), delivery_status_name(st));
    assert_int_equal(d.attempt_count, attempts);
    delivery_free(&d);
}

#endif
