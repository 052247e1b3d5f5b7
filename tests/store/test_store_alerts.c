/*
 * Store conformance, alerts (both backends): one open alert per rule and
 * subject (a second open is EEXISTS, also from connections racing on
 * PostgreSQL), none again within the quiet period after a resolution, a
 * resolution happens once, lists filter by status and rule newest first;
 * the signals and figures count what the rules and the metrics read.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "store_fixture.h"

static void alert_make(struct alert *a, const char *rule, const char *subject, int64_t at)
{
    memset(a, 0, sizeof *a);
    snprintf(a->rule, sizeof a->rule, "%s", rule);
    a->subject = (char *)subject;
    a->message = (char *)"something happened";
    a->details = (char *)"{\"n\":1}";
    a->opened_at = at;
}

static void test_open_once_resolve_once(void **state)
{
    struct fixture *fx = *state;
    struct alert a, b, out, got;
    char subject[HOOKD_ID_MAX + 8];

    snprintf(subject, sizeof subject, "ep_%s", fx->account); /* unique per run on a shared database */
    alert_make(&a, "error_rate", subject, 1000);
    assert_int_equal(store_alert_open(fx->s, &a, 0), 0);
    assert_true(strncmp(a.id, "alr_", 4) == 0);
    alert_make(&b, "error_rate", subject, 1001);
    assert_int_equal(store_alert_open(fx->s, &b, 0), HOOKD_EEXISTS);
    alert_make(&b, "dead_letters", subject, 1001); /* another rule, the same subject: its own alert */
    assert_int_equal(store_alert_open(fx->s, &b, 0), 0);

    assert_int_equal(store_alert_get(fx->s, a.id, &got), 0);
    assert_string_equal(got.rule, "error_rate");
    assert_string_equal(got.subject, subject);
    assert_string_equal(got.details, "{\"n\":1}");
    assert_int_equal(got.opened_at, 1000);
    assert_int_equal(got.resolved_at, 0);
    alert_free(&got);

    assert_int_equal(store_alert_resolve(fx->s, a.id, 5000, &out), 0);
    assert_int_equal(out.resolved_at, 5000);
    assert_string_equal(out.id, a.id);
    alert_free(&out);
    assert_int_equal(store_alert_resolve(fx->s, a.id, 6000, &out), HOOKD_ENOTFOUND);
    assert_int_equal(store_alert_resolve(fx->s, "alr_missing", 6000, &out), HOOKD_ENOTFOUND);

    /* Within the quiet period (resolved at 5000, quiet since 4000) it does not open again; after it, it does. */
    alert_make(&b, "error_rate", subject, 6000);
    assert_int_equal(store_alert_open(fx->s, &b, 4000), HOOKD_EEXISTS);
    alert_make(&b, "error_rate", subject, 9000);
    assert_int_equal(store_alert_open(fx->s, &b, 5000), 0);
    assert_string_not_equal(b.id, a.id);

    struct alert_list l;
    struct alert_filter f = {.status = 0, .rule = "error_rate", .limit = 1000};
    assert_int_equal(store_alert_list(fx->s, &f, &l), 0);
    size_t mine = 0;
    for (size_t i = 0; i < l.n; i++) {
        assert_int_equal(l.items[i].resolved_at, 0);
        assert_string_equal(l.items[i].rule, "error_rate");
        mine += strcmp(l.items[i].subject, subject) == 0;
        if (i > 0)
            assert_true(strcmp(l.items[i - 1].id, l.items[i].id) > 0);
    }
    assert_int_equal(mine, 1);
    alert_list_free(&l);
    f = (struct alert_filter){.status = 1, .limit = 1000};
    assert_int_equal(store_alert_list(fx->s, &f, &l), 0);
    mine = 0;
    for (size_t i = 0; i < l.n; i++) {
        assert_true(l.items[i].resolved_at > 0);
        mine += strcmp(l.items[i].id, a.id) == 0;
    }
    assert_int_equal(mine, 1);
    alert_list_free(&l);
    /* the cursor: strictly older ids */
    f = (struct alert_filter){.status = -1, .before_id = b.id, .limit = 1000};
    assert_int_equal(store_alert_list(fx->s, &f, &l), 0);
    for (size_t i = 0; i < l.n; i++)
        assert_true(strcmp(l.items[i].id, b.id) < 0);
    alert_list_free(&l);
}

/* Rows written by hand with odd contents read back safely. */
static void test_hand_written_rows(void **state)
{
    struct fixture *fx = *state;
    struct alert got;
    char sql[512], id[HOOKD_ID_MAX];

    id_new(id, "alr_");
    snprintf(sql, sizeof sql,
             "INSERT INTO hookd_alerts(id, rule, subject, message, details, opened_at) VALUES"
             " ('%s', 'nonsense', 'x\ny', 'quote \" and \\ back', 'not json', 7)", id);
    fixture_sql(fx, sql);
    assert_int_equal(store_alert_get(fx->s, id, &got), 0);
    assert_string_equal(got.subject, "x\ny");
    assert_string_equal(got.details, "not json");
    alert_free(&got);
    struct alert out;
    assert_int_equal(store_alert_resolve(fx->s, id, 8, &out), 0);
    alert_free(&out);
}

struct racer {
    const char *dsn;
    const char *subject;
    int result;
};

static void *race_open(void *arg)
{
    struct racer *r = arg;
    struct store *s;
    struct alert a;

    assert_int_equal(store_open(r->dsn, &s), 0);
    alert_make(&a, "quarantined", r->subject, 1000);
    r->result = store_alert_open(s, &a, 0);
    store_close(s);
    return NULL;
}

static void test_concurrent_opens_leave_one(void **state)
{
    struct fixture *fx = *state;
    char subject[HOOKD_ID_MAX + 8];
    struct racer r[6];
    pthread_t t[6];
    int opened = 0;

    postgres_only(fx);
    snprintf(subject, sizeof subject, "src_%s", fx->account);
    for (int i = 0; i < 6; i++) {
        r[i] = (struct racer){.dsn = fx->dsn, .subject = subject};
        assert_int_equal(pthread_create(&t[i], NULL, race_open, &r[i]), 0);
    }
    for (int i = 0; i < 6; i++) {
        pthread_join(t[i], NULL);
        assert_true(r[i].result == 0 || r[i].result == HOOKD_EEXISTS);
        opened += r[i].result == 0;
    }
    assert_int_equal(opened, 1);
}

static void test_signals_and_figures(void **state)
{
    struct fixture *fx = *state;
    struct scene sc;
    struct alert_signal_list sig;
    struct store_figures fig;
    bool retrying = false, oldest = false, attempts = false;

    struct job_list jobs;
    drain_due(fx);
    scene_make(fx, 0, &sc);
    /* the scene's delivery retrying, after a failed attempt now */
    int64_t now = clock_now_ms();
    assert_true(claim(fx, "n1", now, now + 60000, &jobs) >= 1);
    for (size_t i = 0; i < jobs.n; i++)
        if (strcmp(jobs.items[i].d.id, sc.d.id) == 0)
            complete(fx, &jobs.items[i], DELIVERY_RETRYING, 1, 503, now, now + 3600000, 0);
    job_list_free(&jobs);
    assert_int_equal(store_alert_signals(fx->s, now - 1000, &sig), 0);
    for (size_t i = 0; i < sig.n; i++) {
        const struct alert_signal *g = &sig.items[i];
        if (!g->subject || strcmp(g->subject, sc.ep.id) != 0)
            continue;
        if (g->kind == SIGNAL_RETRYING)
            retrying = g->n == 1;
        if (g->kind == SIGNAL_OLDEST_OPEN)
            oldest = g->n > 0;
        if (g->kind == SIGNAL_ATTEMPTS)
            attempts = g->n == 1 && g->m == 0 && g->account && strcmp(g->account, fx->account) == 0;
    }
    alert_signal_list_free(&sig);
    assert_true(retrying);
    assert_true(oldest);
    assert_true(attempts);
    assert_int_equal(store_figures(fx->s, now, &fig), 0);
    assert_true(fig.deliveries[DELIVERY_RETRYING] >= 1);
    assert_int_equal(fig.deliveries[DELIVERY_DELIVERED], -1);
    assert_true(fig.oldest_open_at > 0 && fig.oldest_open_at <= now);
    assert_true(fig.breakers[BREAKER_CLOSED] >= 1);
    scene_free(&sc);
}

/* The signals of one endpoint: attempts (n, m) since, and the creation time of its oldest open delivery. */
static void endpoint_signals(struct fixture *fx, const char *ep, int64_t since, int64_t *attempts, int64_t *ok,
                             int64_t *oldest)
{
    struct alert_signal_list sig;

    *attempts = *ok = *oldest = 0;
    assert_int_equal(store_alert_signals(fx->s, since, &sig), 0);
    for (size_t i = 0; i < sig.n; i++) {
        const struct alert_signal *g = &sig.items[i];
        if (!g->subject || strcmp(g->subject, ep) != 0)
            continue;
        if (g->kind == SIGNAL_ATTEMPTS) {
            *attempts += g->n;
            *ok += g->m;
        }
        if (g->kind == SIGNAL_OLDEST_OPEN) {
            assert_int_equal(*oldest, 0); /* one row an endpoint */
            *oldest = g->n;
        }
    }
    alert_signal_list_free(&sig);
}

/*
 * Deliveries sent before their first result (PostgreSQL keeps only their
 * lease until then, DESIGN §3) are pending for the figures and open for the
 * signals; their first attempts (kept in the delivery row there) count in the
 * failure rate as the attempts after them do. Both backends.
 */
static void test_signals_count_unrecorded(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms(), attempts, ok, oldest;
    struct store_figures before, fig;
    struct endpoint ep;
    struct event ev[3];
    struct delivery ds[3];
    struct job_list jobs;
    int results[2];

    drain_due(fx);
    endpoint_make(fx, &ep);
    assert_int_equal(store_figures(fx->s, now, &before), 0);
    for (int i = 0; i < 3; i++) {
        event_make(fx, "order.paid", &ev[i]);
        ds[i] = (struct delivery){.status = DELIVERY_PENDING, .lease_owner = (char *)"n1", .lease_until = now + 60000,
                                  .lease_token = 1, .next_attempt_at = now, .created_at = now - 7 + i,
                                  .unrecorded = true, .account = fx->account};
        id_new(ds[i].id, "dlv_");
        snprintf(ds[i].event_id, sizeof ds[i].event_id, "%s", ev[i].id);
        snprintf(ds[i].endpoint_id, sizeof ds[i].endpoint_id, "%s", ep.id);
    }
    assert_int_equal(store_delivery_insert_many(fx->s, ds, 3), 0);
    assert_int_equal(store_figures(fx->s, now, &fig), 0);
    assert_int_equal(fig.deliveries[DELIVERY_PENDING] - before.deliveries[DELIVERY_PENDING], 3);
    assert_true(fig.oldest_open_at > 0 && fig.oldest_open_at <= now - 7);
    endpoint_signals(fx, ep.id, now - 1000, &attempts, &ok, &oldest);
    assert_int_equal(oldest, now - 7);
    assert_int_equal(attempts, 0);

    /* First results: one delivered, one failed; the third is still in flight. */
    struct delivery_result rs[2];
    for (int i = 0; i < 2; i++)
        rs[i] = (struct delivery_result){
            .delivery_id = ds[i].id, .lease_owner = "n1", .lease_token = 1,
            .status = i == 0 ? DELIVERY_DELIVERED : DELIVERY_RETRYING, .next_attempt_at = now, .unrecorded = &ds[i],
            .attempt = {.n = 1, .started_at = now + i, .duration_ms = 5, .status_code = i == 0 ? 200 : 503,
                        .node = "n1"},
        };
    assert_int_equal(store_delivery_complete_many(fx->s, rs, 2, now + 10, results), 0);
    assert_int_equal(results[0], 0);
    assert_int_equal(results[1], 0);
    endpoint_signals(fx, ep.id, now - 1000, &attempts, &ok, &oldest);
    assert_int_equal(attempts, 2);
    assert_int_equal(ok, 1);
    assert_int_equal(oldest, now - 6); /* the retrying one: the delivered one is no longer open */
    /* Attempts started before the window are not counted. */
    endpoint_signals(fx, ep.id, now + 1, &attempts, &ok, &oldest);
    assert_int_equal(attempts, 1);
    assert_int_equal(ok, 0);

    /* The failed one's retry is a row of hookd_attempts: counted beside the first attempts. */
    assert_int_equal(claim(fx, "n2", now + 20, now + 60000, &jobs), 1);
    assert_string_equal(jobs.items[0].d.id, ds[1].id);
    complete(fx, &jobs.items[0], DELIVERY_DELIVERED, 2, 200, now + 20, 0, 0);
    job_list_free(&jobs);
    endpoint_signals(fx, ep.id, now - 1000, &attempts, &ok, &oldest);
    assert_int_equal(attempts, 3);
    assert_int_equal(ok, 2);
    assert_int_equal(oldest, now - 5); /* the one still in flight */
    assert_int_equal(store_figures(fx->s, now + 30, &fig), 0);
    assert_int_equal(fig.deliveries[DELIVERY_PENDING] - before.deliveries[DELIVERY_PENDING], 1);
    for (int i = 0; i < 3; i++)
        event_free(&ev[i]);
    endpoint_free(&ep);
}

/* The signals of kind k with subject ep: how many rows, and the last one's n. */
static int signal_of(struct fixture *fx, enum alert_signal_kind k, const char *ep, int64_t since, int64_t *n)
{
    struct alert_signal_list sig;
    int rows = 0;

    *n = 0;
    assert_int_equal(store_alert_signals(fx->s, since, &sig), 0);
    for (size_t i = 0; i < sig.n; i++)
        if (sig.items[i].kind == k && sig.items[i].subject && strcmp(sig.items[i].subject, ep) == 0) {
            rows++;
            *n = sig.items[i].n;
        }
    alert_signal_list_free(&sig);
    return rows;
}

/*
 * The retrying, dead and oldest-open signals are probes per endpoint (not
 * scans of every open and dead delivery): a live endpoint's figures are its
 * own rows' (dead only since the window's start, the oldest open of pending
 * and retrying alike), and an endpoint deleted since reports nothing, though
 * its deliveries, killed by the deletion, are dead within the window.
 */
static void test_signals_probe_live_endpoints(void **state)
{
    struct fixture *fx = *state;
    const int64_t now = clock_now_ms(), day = 86400000;
    const struct {
        enum delivery_status status;
        int64_t created_ago, last_attempt_ago; /* ms before now; -1: no attempt */
    } rows[] = {
        {DELIVERY_DEAD, 20 * day, 60000},     /* died within the window after long retries: counted */
        {DELIVERY_DEAD, 20 * day, 10 * day},  /* died long ago: not */
        {DELIVERY_DEAD, 2000, -1},            /* dead without an attempt, made within the window: counted */
        {DELIVERY_RETRYING, 3000, 2000},
        {DELIVERY_PENDING, 5000, -1},          /* the oldest open one */
        {DELIVERY_DELIVERED, 9 * day, 9 * day}, /* older, but not open */
    };
    const size_t n_rows = sizeof rows / sizeof rows[0];
    struct endpoint live, gone;
    struct event ev[2 * (sizeof rows / sizeof rows[0])];
    struct delivery ds[2 * (sizeof rows / sizeof rows[0])];
    int64_t n;

    drain_due(fx);
    endpoint_make(fx, &live);
    endpoint_make(fx, &gone);
    for (size_t i = 0; i < 2 * n_rows; i++) {
        const size_t k = i % n_rows;
        event_make(fx, "order.paid", &ev[i]); /* one delivery an event and endpoint */
        ds[i] = (struct delivery){.status = rows[k].status, .account = fx->account,
                                  .created_at = now - rows[k].created_ago,
                                  .last_attempt_at = rows[k].last_attempt_ago < 0 ? 0 : now - rows[k].last_attempt_ago,
                                  .attempt_count = rows[k].last_attempt_ago < 0 ? 0 : 3,
                                  .next_attempt_at = rows[k].status == DELIVERY_PENDING ||
                                                             rows[k].status == DELIVERY_RETRYING ? now + day : 0};
        id_new(ds[i].id, "dlv_");
        snprintf(ds[i].event_id, sizeof ds[i].event_id, "%s", ev[i].id);
        snprintf(ds[i].endpoint_id, sizeof ds[i].endpoint_id, "%s", i < n_rows ? live.id : gone.id);
    }
    assert_int_equal(store_delivery_insert_many(fx->s, ds, 2 * n_rows), 0);
    assert_int_equal(store_endpoint_delete(fx->s, gone.id), 0);

    const int64_t since = now - 300000;
    assert_int_equal(signal_of(fx, SIGNAL_DEAD, live.id, since, &n), 1);
    assert_int_equal(n, 2);
    assert_int_equal(signal_of(fx, SIGNAL_RETRYING, live.id, since, &n), 1);
    assert_int_equal(n, 1);
    assert_int_equal(signal_of(fx, SIGNAL_OLDEST_OPEN, live.id, since, &n), 1);
    assert_int_equal(n, now - 5000);
    for (enum alert_signal_kind k = SIGNAL_RETRYING; k <= SIGNAL_DISABLED; k++)
        assert_int_equal(signal_of(fx, k, gone.id, since, &n), 0);

    /* A window that starts after both deaths counts none. */
    assert_int_equal(signal_of(fx, SIGNAL_DEAD, live.id, now - 1000, &n), 0);
    for (size_t i = 0; i < 2 * n_rows; i++)
        event_free(&ev[i]);
    endpoint_free(&live);
    endpoint_free(&gone);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_open_once_resolve_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hand_written_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_opens_leave_one, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signals_and_figures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signals_count_unrecorded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signals_probe_live_endpoints, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
