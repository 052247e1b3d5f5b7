/*
 * Store torture mode: the outbound path (publish, fan-out, deliver, retry,
 * dead) runs in-process against a scripted sink once per store call it makes,
 * the n-th call failing each time (store_fault_inject). After each run: no
 * crash, every delivery reached the state its endpoint calls for, no delivery
 * took an illegal status transition (a trigger logs every one), no attempt
 * number was recorded twice or skipped; leaks are ASan's to report at exit.
 * Runs on the store of HOOKD_TEST_STORE (a fresh database per run) or SQLite.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "core/retry.h"
#include "outbound/dispatcher.h"
#include "outbound/relay.h"
#include "store/writer.h"
#include "store_fixture.h"

#define EVENTS 3
#define ENDPOINTS 3 /* ok (200), flaky (500 on the first request of an event, then 200), bad (400: dead) */
#define RUN_TIMEOUT_MS 20000
#define MAX_RUNS 400 /* a bound on the runs, whatever the clean run counted */

static const char *const endpoint_paths[ENDPOINTS] = {"/ok", "/flaky", "/bad"};

/* ---- the sink: one thread, one request per connection --------------------------- */

struct sink {
    int fd, port;
    pthread_t thread;
    atomic_bool stop;
    pthread_mutex_t mu;
    char seen[64][HOOKD_ID_MAX]; /* webhook-ids the flaky path has failed once, this run */
    int n_seen;
    atomic_int requests;
};

/* Case-insensitive search for a header's value in the header block; copies it into out. */
static void header_value(const char *head, const char *name, char *out, size_t n)
{
    size_t len = strlen(name);
    out[0] = '\0';
    for (const char *line = strstr(head, "\r\n"); line && line[2] != '\r'; line = strstr(line + 2, "\r\n")) {
        const char *p = line + 2;
        if (strncasecmp(p, name, len) == 0 && p[len] == ':') {
            p += len + 1;
            while (*p == ' ')
                p++;
            size_t v = strcspn(p, "\r");
            snprintf(out, n, "%.*s", (int)(v < n ? v : n - 1), p);
            return;
        }
    }
}

static int sink_status(struct sink *k, const char *path, const char *id)
{
    if (strcmp(path, "/ok") == 0)
        return 200;
    if (strcmp(path, "/bad") == 0)
        return 400;
    int status = 500;
    pthread_mutex_lock(&k->mu);
    for (int i = 0; i < k->n_seen; i++)
        if (strcmp(k->seen[i], id) == 0)
            status = 200;
    if (status == 500 && k->n_seen < 64)
        snprintf(k->seen[k->n_seen++], HOOKD_ID_MAX, "%s", id);
    pthread_mutex_unlock(&k->mu);
    return status;
}

static void sink_serve(struct sink *k, int c)
{
    char buf[65536], path[256] = "", id[HOOKD_ID_MAX], cl[32], reply[128];
    size_t used = 0;
    char *end = NULL;
    struct timeval tv = {.tv_sec = 2};

    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    /* Bounded by the buffer: headers, then the body Content-Length announces. */
    while (used < sizeof buf - 1) {
        ssize_t r = recv(c, buf + used, sizeof buf - 1 - used, 0);
        if (r <= 0)
            return;
        used += (size_t)r;
        buf[used] = '\0';
        if (!end)
            end = strstr(buf, "\r\n\r\n");
        if (end) {
            header_value(buf, "content-length", cl, sizeof cl);
            size_t want = (size_t)(end + 4 - buf) + strtoul(cl, NULL, 10);
            if (used >= want)
                break;
        }
    }
    if (!end || sscanf(buf, "POST %255s HTTP/1.1", path) != 1)
        return;
    header_value(buf, "webhook-id", id, sizeof id);
    int status = sink_status(k, path, id);
    int n = snprintf(reply, sizeof reply, "HTTP/1.1 %d X\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok", status);
    if (send(c, reply, (size_t)n, MSG_NOSIGNAL) == n)
        atomic_fetch_add(&k->requests, 1);
}

static void *sink_main(void *arg)
{
    struct sink *k = arg;
    while (!atomic_load(&k->stop)) {
        struct pollfd p = {.fd = k->fd, .events = POLLIN};
        if (poll(&p, 1, 20) <= 0)
            continue;
        int c = accept(k->fd, NULL, NULL);
        if (c < 0)
            continue;
        sink_serve(k, c);
        close(c);
    }
    return NULL;
}

static void sink_start(struct sink *k)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;

    memset(k, 0, sizeof *k);
    pthread_mutex_init(&k->mu, NULL);
    k->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(k->fd >= 0);
    assert_int_equal(bind(k->fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(k->fd, 128), 0);
    assert_int_equal(getsockname(k->fd, (struct sockaddr *)&a, &len), 0);
    k->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&k->thread, NULL, sink_main, k), 0);
}

static void sink_stop(struct sink *k)
{
    atomic_store(&k->stop, true);
    pthread_join(k->thread, NULL);
    close(k->fd);
    pthread_mutex_destroy(&k->mu);
}

/* ---- plain SQL on either backend (the checks read around the wrappers) ------------- */

struct sql {
    sqlite3 *lite;
    PGconn *pg;
};

static void sql_open(struct sql *q, const char *dsn)
{
    memset(q, 0, sizeof *q);
    if (strstr(dsn, "://")) {
        q->pg = PQconnectdb(dsn);
        assert_int_equal(PQstatus(q->pg), CONNECTION_OK);
    } else {
        assert_int_equal(sqlite3_open_v2(dsn + strlen("sqlite:"), &q->lite, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
        sqlite3_busy_timeout(q->lite, 5000);
    }
}

static void sql_close(struct sql *q)
{
    if (q->pg)
        PQfinish(q->pg);
    if (q->lite)
        sqlite3_close(q->lite);
}

static void sql_exec(struct sql *q, const char *lite_sql, const char *pg_sql)
{
    if (q->pg) {
        PGresult *r = PQexec(q->pg, pg_sql);
        if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
            fail_msg("%s: %s", pg_sql, PQerrorMessage(q->pg));
        PQclear(r);
    } else {
        char *err = NULL;
        if (sqlite3_exec(q->lite, lite_sql, NULL, NULL, &err) != SQLITE_OK)
            fail_msg("%s: %s", lite_sql, err ? err : "?");
    }
}

typedef void (*row_fn)(void *arg, int ncol, const char *const *cols);

/* Runs a query without parameters and calls fn for each row (NULL columns as ""). */
static void sql_rows(struct sql *q, const char *query, row_fn fn, void *arg)
{
    const char *cols[8];
    if (q->pg) {
        PGresult *r = PQexec(q->pg, query);
        if (PQresultStatus(r) != PGRES_TUPLES_OK)
            fail_msg("%s: %s", query, PQerrorMessage(q->pg));
        int nc = PQnfields(r) < 8 ? PQnfields(r) : 8;
        for (int i = 0; i < PQntuples(r); i++) {
            for (int c = 0; c < nc; c++)
                cols[c] = PQgetvalue(r, i, c);
            fn(arg, nc, cols);
        }
        PQclear(r);
        return;
    }
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(q->lite, query, -1, &st, NULL), SQLITE_OK);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int nc = sqlite3_column_count(st) < 8 ? sqlite3_column_count(st) : 8;
        for (int c = 0; c < nc; c++) {
            const unsigned char *t = sqlite3_column_text(st, c);
            cols[c] = t ? (const char *)t : "";
        }
        fn(arg, nc, cols);
    }
    assert_int_equal(rc, SQLITE_DONE);
    sqlite3_finalize(st);
}

/* Logs every status a delivery is given: inserted (from "") and changed. */
static void transitions_log_install(struct sql *q)
{
    sql_exec(q,
             "CREATE TABLE torture_transitions (delivery_id TEXT, from_status TEXT, to_status TEXT);"
             "CREATE TRIGGER torture_ai AFTER INSERT ON hookd_deliveries BEGIN"
             " INSERT INTO torture_transitions VALUES (new.id, '', new.status); END;"
             "CREATE TRIGGER torture_au AFTER UPDATE OF status ON hookd_deliveries"
             " WHEN old.status <> new.status BEGIN"
             " INSERT INTO torture_transitions VALUES (new.id, old.status, new.status); END;",
             "CREATE TABLE torture_transitions (delivery_id text, from_status text, to_status text);"
             "CREATE FUNCTION torture_log() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
             " IF TG_OP = 'INSERT' THEN INSERT INTO torture_transitions VALUES (NEW.id, '', NEW.status);"
             " ELSIF OLD.status IS DISTINCT FROM NEW.status THEN"
             "  INSERT INTO torture_transitions VALUES (NEW.id, OLD.status, NEW.status); END IF;"
             " RETURN NULL; END $$;"
             "CREATE TRIGGER torture_tr AFTER INSERT OR UPDATE ON hookd_deliveries"
             " FOR EACH ROW EXECUTE FUNCTION torture_log();");
}

/* ---- one run ------------------------------------------------------------------------- */

struct run {
    struct fixture *fx;
    struct sink *sink;
    struct fresh_store fs;
    struct sql q;
    struct writer *writer, *claimer;
    struct dispatcher *dispatcher;
    struct relay *relay;
    char account[HOOKD_ID_MAX];
    char endpoint_ids[ENDPOINTS][HOOKD_ID_MAX];
};

struct publish_op {
    struct event ev;
    const char *account;
};

static int op_publish(struct store *s, void *arg)
{
    struct publish_op *o = arg;
    event_free(&o->ev);
    memset(&o->ev, 0, sizeof o->ev);
    o->ev.type = strdup("order.paid");
    o->ev.account = strdup(o->account);
    o->ev.payload = strdup("{\"n\":1}");
    if (!o->ev.type || !o->ev.account || !o->ev.payload)
        return HOOKD_ENOMEM;
    return store_event_insert(s, &o->ev, NULL);
}

static void run_start(struct run *r, struct fixture *fx, struct sink *sink)
{
    struct store *s;
    char url[128];

    memset(r, 0, sizeof *r);
    pthread_mutex_lock(&sink->mu); /* a new run: its events are new to the flaky path */
    sink->n_seen = 0;
    pthread_mutex_unlock(&sink->mu);
    r->fx = fx;
    r->sink = sink;
    fresh_store_make(fx, &r->fs);
    id_new(r->account, "acct_");
    assert_int_equal(store_open(r->fs.dsn, &s), 0);
    assert_int_equal(store_migrate(s), 0);
    for (int i = 0; i < ENDPOINTS; i++) {
        struct endpoint ep = {.enabled = true};
        id_new(ep.id, "ep_");
        snprintf(r->endpoint_ids[i], HOOKD_ID_MAX, "%s", ep.id);
        snprintf(url, sizeof url, "http://127.0.0.1:%d%s", sink->port, endpoint_paths[i]);
        ep.url = url;
        ep.account = r->account;
        assert_int_equal(store_endpoint_insert(s, &ep), 0);
    }
    store_close(s);
    sql_open(&r->q, r->fs.dsn);
    transitions_log_install(&r->q);

    struct writer_options wopt = {.max_batch = 64};
    assert_int_equal(writer_start(r->fs.dsn, &wopt, &r->writer), 0);
    if (!store_find(r->fs.dsn)->single_node) {
        wopt.lazy_commit = true;
        assert_int_equal(writer_start(r->fs.dsn, &wopt, &r->claimer), 0);
    }
    struct dispatcher_deps dd = {
        .store = r->fs.dsn,
        .node = "torture",
        .writer = r->writer,
        .claimer = r->claimer,
        .timeout_ms = 2000,
        .connect_timeout_ms = 1000,
        .response_max = 256,
        .lease_ms = 1000, /* a lost lease comes back soon */
        .max_in_flight = 16,
        .endpoint_max_in_flight = 4,
        .window = 64,
        .allow_private_networks = true,
    };
    retry_policy_default(&dd.retry);
    dd.retry.schedule_ms[0] = dd.retry.schedule_ms[1] = dd.retry.schedule_ms[2] = 50;
    dd.retry.n_schedule = 3;
    dd.retry.jitter = 0;
    assert_int_equal(dispatcher_start(&dd, &r->dispatcher), 0);
    struct relay_deps rd = {
        .store = r->fs.dsn,
        .node = "torture",
        .lease_ms = 1000,
        .endpoint_max_in_flight = 4,
        .writer = r->writer,
        .dispatcher = r->dispatcher,
    };
    assert_int_equal(relay_start(&rd, &r->relay), 0);
}

/* The application's side: a publish that failed is tried again, as a client would after a 503. */
static void run_publish(struct run *r)
{
    for (int i = 0; i < EVENTS; i++) {
        struct publish_op o = {.account = r->account};
        int rc = -1;
        for (int tries = 0; rc != 0 && tries < 50; tries++) {
            rc = writer_exec(r->writer, op_publish, &o);
            if (rc != 0)
                usleep(20 * 1000);
        }
        event_free(&o.ev);
        assert_int_equal(rc, 0);
        relay_wake(r->relay);
    }
}

struct tally {
    int rows;
    int wrong; /* deliveries not in the state their endpoint calls for (yet) */
    const struct run *r;
    char detail[256];
};

static void tally_row(void *arg, int ncol, const char *const *c)
{
    /* endpoint_id, status, attempt_count */
    struct tally *t = arg;
    int attempts = (int)strtol(c[2], NULL, 10);
    bool ok;

    t->rows++;
    if (strcmp(c[0], t->r->endpoint_ids[0]) == 0)
        ok = strcmp(c[1], "delivered") == 0;
    else if (strcmp(c[0], t->r->endpoint_ids[1]) == 0)
        /* At least 2 attempts, unless the record of a failed one was lost with its fan-out
         * (the rows never existed; the event was fanned out and sent again: same webhook-id). */
        ok = strcmp(c[1], "delivered") == 0 && attempts >= 1;
    else
        ok = strcmp(c[1], "dead") == 0 && attempts >= 1;
    if (!ok) {
        t->wrong++;
        snprintf(t->detail, sizeof t->detail, "endpoint %s: %s after %d attempts", c[0], c[1], attempts);
    }
}

/* Waits until every delivery is in its expected final state; false at the time bound. */
static bool run_settled(struct run *r, char *detail, size_t n)
{
    int64_t until = clock_mono_ms() + RUN_TIMEOUT_MS;
    struct tally t;

    do {
        t = (struct tally){.r = r};
        sql_rows(&r->q, "SELECT endpoint_id, status, attempt_count FROM hookd_deliveries", tally_row, &t);
        if (t.rows == EVENTS * ENDPOINTS && t.wrong == 0)
            return true;
        usleep(20 * 1000);
    } while (clock_mono_ms() < until);
    snprintf(detail, n, "%d of %d deliveries, %d not settled (%s)", t.rows, EVENTS * ENDPOINTS, t.wrong,
             t.detail);
    return false;
}

static void run_stop(struct run *r)
{
    relay_stop(r->relay);
    dispatcher_stop(r->dispatcher);
    if (r->claimer)
        writer_stop(r->claimer);
    writer_stop(r->writer);
}

/*
 * Legal status changes of a delivery (DESIGN §5): into pending at insert, then forward only. A
 * delivery sent without its row (unrecorded, on a shared store: DESIGN §3) has its row written by
 * its first result, in the state that attempt left it in.
 */
static bool transition_legal(const char *from, const char *to)
{
    static const char *const legal[][2] = {
        {"", "pending"},           {"pending", "retrying"}, {"pending", "delivered"}, {"pending", "dead"},
        {"retrying", "delivered"}, {"retrying", "dead"},    {"", "retrying"},         {"", "delivered"},
        {"", "dead"},
    };
    for (size_t i = 0; i < sizeof legal / sizeof legal[0]; i++)
        if (strcmp(legal[i][0], from) == 0 && strcmp(legal[i][1], to) == 0)
            return true;
    return false;
}

struct audit {
    int illegal;
    char detail[256];
    char last_delivery[HOOKD_ID_MAX];
    long last_n;
    int bad_numbering;
};

static void audit_transition(void *arg, int ncol, const char *const *c)
{
    struct audit *a = arg;
    if (!transition_legal(c[1], c[2])) {
        a->illegal++;
        snprintf(a->detail, sizeof a->detail, "delivery %s: %s -> %s", c[0], c[1][0] ? c[1] : "(insert)", c[2]);
    }
}

/* Attempts in (delivery, n) order: each delivery's numbers run 1, 2, 3, … */
static void audit_attempt(void *arg, int ncol, const char *const *c)
{
    struct audit *a = arg;
    long n = strtol(c[1], NULL, 10);
    if (strcmp(a->last_delivery, c[0]) != 0) {
        snprintf(a->last_delivery, sizeof a->last_delivery, "%s", c[0]);
        a->last_n = 0;
    }
    if (n != a->last_n + 1) {
        a->bad_numbering++;
        snprintf(a->detail, sizeof a->detail, "delivery %s: attempt %ld after %ld", c[0], n, a->last_n);
    }
    a->last_n = n;
}

/* One run with the n-th counted store call failing (n = 0: none). Returns the calls it counted;
 * *fired says whether the fault was met (a run may make fewer calls than the clean one). */
static uint64_t run_once(struct fixture *fx, struct sink *sink, int n, int err, bool *fired_out)
{
    struct run r;
    char detail[300] = "";
    uint64_t base;
    bool fired;

    run_start(&r, fx, sink);
    base = store_fault_calls();
    if (n > 0)
        store_fault_inject(NULL, n, err);
    run_publish(&r);
    bool settled = run_settled(&r, detail, sizeof detail);
    uint64_t calls = store_fault_calls() - base;
    fired = n > 0 && !store_fault_pending();
    store_fault_inject(NULL, 0, 0);
    run_stop(&r);
    if (!settled)
        fail_msg("fault at call %d (%s, %s): %s", n, hookd_strerror(err), fired ? "fired" : "did not fire", detail);

    struct audit a = {0};
    sql_rows(&r.q, "SELECT delivery_id, from_status, to_status FROM torture_transitions", audit_transition, &a);
    if (a.illegal)
        fail_msg("fault at call %d: %d illegal transitions, e.g. %s", n, a.illegal, a.detail);
    sql_rows(&r.q, "SELECT delivery_id, n FROM hookd_attempts_all ORDER BY delivery_id, n", audit_attempt, &a);
    if (a.bad_numbering)
        fail_msg("fault at call %d: attempts numbered wrongly, e.g. %s", n, a.detail);
    sql_close(&r.q);
    fresh_store_drop(fx, &r.fs);
    if (fired_out)
        *fired_out = fired;
    return calls;
}

static void test_torture_each_store_call_fails_once(void **state)
{
    struct fixture *fx = *state;
    static const int errs[] = {HOOKD_EIO, HOOKD_EBUSY, HOOKD_EUNAVAIL};
    struct sink sink;

    /* The test's own setup and checks are neither counted nor failed: only the daemon's parts are. */
    store_fault_exempt_thread(true);
    sink_start(&sink);
    uint64_t calls = run_once(fx, &sink, 0, 0, NULL);
    int runs = calls < MAX_RUNS ? (int)calls : MAX_RUNS;
    int64_t started = clock_mono_ms();
    print_message("clean run: %llu store calls; failing each of the first %d in turn\n", (unsigned long long)calls,
                  runs);
    /* Every call of a run in turn; the errors rotate so each kind meets many places. */
    int fired = 0;
    for (int n = 1; n <= runs; n++) {
        bool f = false;
        (void)run_once(fx, &sink, n, errs[n % 3], &f);
        fired += f;
    }
    print_message("%d runs in %lld ms, the fault met in %d, %d sink requests\n", runs,
                  (long long)(clock_mono_ms() - started), fired, atomic_load(&sink.requests));
    /* Runs vary (timers, batching; a failed call can save the ones after it), so the last few
     * numbers may lie past a run's end; most runs must still meet their fault. */
    assert_true(calls >= 20);
    assert_true(fired * 2 >= runs);
    sink_stop(&sink);
    store_fault_exempt_thread(false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_torture_each_store_call_fails_once, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
