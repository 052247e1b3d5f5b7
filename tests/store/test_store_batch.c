/*
 * The store conformance suite, part 4: the batch methods. delivery_insert_many
 * (every column round-trips, present rows are skipped, one invalid row refuses
 * the whole call) and delivery_complete_many (a result code per item, each
 * applied one leaves exactly what delivery_complete leaves, a refused one
 * changes nothing). Uses the store_*() wrappers only (fixture: store_fixture.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "store/store_fixture.h"

/* Text that must survive array literals and quoting on every backend. */
#define AWKWARD_TEXT "a \"quoted\", {braced} \\ back\\slash\nNULL é"

/* ---- helpers ------------------------------------------------------------- */

/* A pending row for insert_many, not inserted; its strings are borrowed. */
static void row_fill(struct fixture *fx, const char *event_id, const char *endpoint_id, int64_t next_at,
                     struct delivery *d)
{
    memset(d, 0, sizeof *d);
    id_new(d->id, "dlv_");
    snprintf(d->event_id, sizeof d->event_id, "%s", event_id);
    snprintf(d->endpoint_id, sizeof d->endpoint_id, "%s", endpoint_id);
    d->account = fx->account;
    d->status = DELIVERY_PENDING;
    d->next_attempt_at = next_at;
}

static void str_expect(const char *got, const char *want)
{
    if (want)
        assert_string_equal(got, want);
    else
        assert_null(got);
}

/* Every column of the stored row is the one given. */
static void delivery_columns_expect(struct fixture *fx, const struct delivery *want)
{
    struct delivery got;

    assert_int_equal(store_delivery_get(fx->s, want->id, &got), 0);
    assert_string_equal(got.id, want->id);
    assert_string_equal(got.event_id, want->event_id);
    assert_string_equal(got.endpoint_id, want->endpoint_id);
    str_expect(got.account, want->account);
    assert_string_equal(delivery_status_name(got.status), delivery_status_name(want->status));
    assert_int_equal(got.attempt_count, want->attempt_count);
    assert_int_equal(got.next_attempt_at, want->next_attempt_at);
    assert_int_equal(got.last_status_code, want->last_status_code);
    str_expect(got.last_error, want->last_error);
    assert_int_equal(got.first_attempt_at, want->first_attempt_at);
    assert_int_equal(got.last_attempt_at, want->last_attempt_at);
    assert_int_equal(got.delivered_at, want->delivered_at);
    assert_int_equal(got.created_at, want->created_at);
    str_expect(got.lease_owner, want->lease_owner);
    assert_int_equal(got.lease_until, want->lease_until);
    assert_int_equal(got.lease_token, want->lease_token);
    delivery_free(&got);
}

static void delivery_absent(struct fixture *fx, const char *id)
{
    struct delivery got;

    assert_int_equal(store_delivery_get(fx->s, id, &got), HOOKD_ENOTFOUND);
}

static int attempts_of(struct fixture *fx, const char *delivery_id)
{
    struct attempt_list al;
    int n;

    assert_int_equal(store_attempt_list(fx->s, delivery_id, &al), 0);
    n = (int)al.n;
    attempt_list_free(&al);
    return n;
}

static const struct delivery_job *job_find(const struct job_list *jobs, const char *id)
{
    for (size_t i = 0; i < jobs->n; i++) {
        if (strcmp(jobs->items[i].d.id, id) == 0)
            return &jobs->items[i];
    }
    fail_msg("delivery %s was not claimed", id);
    return NULL;
}

/* Still pending and leased exactly as the claim left it: nothing was applied. */
static void delivery_untouched(struct fixture *fx, const struct delivery_job *j)
{
    struct delivery got;

    assert_int_equal(store_delivery_get(fx->s, j->d.id, &got), 0);
    assert_int_equal(got.status, DELIVERY_PENDING);
    assert_int_equal(got.attempt_count, 0);
    assert_int_equal(got.next_attempt_at, j->d.next_attempt_at);
    assert_int_equal(got.last_status_code, 0);
    assert_null(got.last_error);
    assert_int_equal(got.first_attempt_at, 0);
    assert_int_equal(got.last_attempt_at, 0);
    assert_int_equal(got.delivered_at, 0);
    assert_string_equal(got.lease_owner, j->d.lease_owner);
    assert_int_equal(got.lease_until, j->d.lease_until);
    assert_int_equal(got.lease_token, j->d.lease_token);
    delivery_free(&got);
    assert_int_equal(attempts_of(fx, j->d.id), 0);
}

/* a and b (two deliveries) are in the same state, and have the same attempts. */
static void same_state_expect(struct fixture *fx, const char *a_id, const char *b_id)
{
    struct delivery a, b;
    struct attempt_list al, bl;

    assert_int_equal(store_delivery_get(fx->s, a_id, &a), 0);
    assert_int_equal(store_delivery_get(fx->s, b_id, &b), 0);
    assert_string_equal(delivery_status_name(a.status), delivery_status_name(b.status));
    assert_int_equal(a.attempt_count, b.attempt_count);
    assert_int_equal(a.next_attempt_at, b.next_attempt_at);
    assert_int_equal(a.last_status_code, b.last_status_code);
    str_expect(a.last_error, b.last_error);
    assert_int_equal(a.first_attempt_at, b.first_attempt_at);
    assert_int_equal(a.last_attempt_at, b.last_attempt_at);
    assert_int_equal(a.delivered_at, b.delivered_at);
    str_expect(a.lease_owner, b.lease_owner);
    assert_int_equal(a.lease_until, b.lease_until);
    assert_int_equal(a.lease_token, b.lease_token);
    delivery_free(&a);
    delivery_free(&b);

    assert_int_equal(store_attempt_list(fx->s, a_id, &al), 0);
    assert_int_equal(store_attempt_list(fx->s, b_id, &bl), 0);
    assert_int_equal(al.n, bl.n);
    for (size_t i = 0; i < al.n; i++) {
        assert_string_equal(al.items[i].delivery_id, a_id);
        assert_int_equal(al.items[i].n, bl.items[i].n);
        assert_int_equal(al.items[i].started_at, bl.items[i].started_at);
        assert_int_equal(al.items[i].duration_ms, bl.items[i].duration_ms);
        assert_int_equal(al.items[i].status_code, bl.items[i].status_code);
        str_expect(al.items[i].error_class, bl.items[i].error_class);
        str_expect(al.items[i].error, bl.items[i].error);
        str_expect(al.items[i].response, bl.items[i].response);
        str_expect(al.items[i].node, bl.items[i].node);
    }
    attempt_list_free(&al);
    attempt_list_free(&bl);
}

/* A first attempt that succeeded, for the job's current lease. */
static struct delivery_result delivered_result(const struct delivery_job *j, int64_t started)
{
    return (struct delivery_result){
        .delivery_id = j->d.id,
        .lease_owner = j->d.lease_owner,
        .lease_token = j->d.lease_token,
        .status = DELIVERY_DELIVERED,
        .attempt = {.n = 1, .started_at = started, .duration_ms = 7, .status_code = 200, .response = "ok",
                    .node = j->d.lease_owner},
    };
}

/* ---- insert_many --------------------------------------------------------- */

/* Rows of every shape come back column for column; a leased one stays its owner's until the lease ends. */
static void test_insert_many_rows_readable(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct event evs[4];
    struct endpoint ep;
    struct delivery ds[4];
    struct job_list jobs;

    drain_due(fx);
    endpoint_make(fx, &ep);
    for (int i = 0; i < 4; i++)
        event_make(fx, "order.paid", &evs[i]);

    /* Pending, not due for a while. */
    row_fill(fx, evs[0].id, ep.id, now + 100000, &ds[0]);
    ds[0].created_at = now - 5;
    /* Retrying after two attempts, unleased with an old token, no account. */
    row_fill(fx, evs[1].id, ep.id, now + 200000, &ds[1]);
    ds[1].account = NULL;
    ds[1].status = DELIVERY_RETRYING;
    ds[1].attempt_count = 2;
    ds[1].last_status_code = 503;
    ds[1].last_error = AWKWARD_TEXT;
    ds[1].first_attempt_at = now - 1000;
    ds[1].last_attempt_at = now - 500;
    ds[1].created_at = now - 2000;
    ds[1].lease_token = 7;
    /* Due, and leased to the inserting node (the relay's hand-off). */
    row_fill(fx, evs[2].id, ep.id, now - 10, &ds[2]);
    ds[2].lease_owner = "node-r";
    ds[2].lease_until = now + 60000;
    ds[2].lease_token = 3;
    ds[2].created_at = now - 10;
    /* Final: delivered, no next attempt. */
    row_fill(fx, evs[3].id, ep.id, 0, &ds[3]);
    ds[3].status = DELIVERY_DELIVERED;
    ds[3].attempt_count = 1;
    ds[3].last_status_code = 200;
    ds[3].first_attempt_at = now - 300;
    ds[3].last_attempt_at = now - 300;
    ds[3].delivered_at = now - 290;
    ds[3].created_at = now - 400;

    assert_int_equal(store_delivery_insert_many(fx->s, ds, 4), 0);
    for (int i = 0; i < 4; i++)
        delivery_columns_expect(fx, &ds[i]);

    /* The live lease keeps another node off it; the others are not due or final. */
    assert_int_equal(claim(fx, "node-b", now, now + 1000, &jobs), 0);
    job_list_free(&jobs);
    assert_int_equal(claim(fx, "node-b", now + 59999, now + 61000, &jobs), 0);
    job_list_free(&jobs);
    /* Once it expired, the next claim takes it with the next token. */
    assert_int_equal(claim(fx, "node-b", now + 60001, now + 90000, &jobs), 1);
    assert_string_equal(jobs.items[0].d.id, ds[2].id);
    assert_string_equal(jobs.items[0].d.lease_owner, "node-b");
    assert_int_equal(jobs.items[0].d.lease_token, 4);
    job_list_free(&jobs);

    for (int i = 0; i < 4; i++)
        event_free(&evs[i]);
    endpoint_free(&ep);
}

/* A row whose id or (event, endpoint) is present is skipped; the others of the call go in. */
static void test_insert_many_skips_present(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct scene sc;
    struct event e2, e3;
    struct endpoint ep2;
    struct delivery ds[4], kept;
    struct delivery_list l;
    struct delivery_filter f = {.status = -1, .limit = 10};

    scene_make(fx, now + 1000, &sc);
    event_make(fx, "order.paid", &e2);
    event_make(fx, "order.paid", &e3);
    endpoint_make(fx, &ep2);
    assert_int_equal(store_delivery_get(fx->s, sc.d.id, &kept), 0);

    row_fill(fx, e2.id, sc.ep.id, now + 2000, &ds[0]);          /* new */
    row_fill(fx, e3.id, sc.ep.id, now + 3000, &ds[1]);          /* present id, new pair */
    snprintf(ds[1].id, sizeof ds[1].id, "%s", sc.d.id);
    row_fill(fx, sc.ev.id, sc.ep.id, now + 4000, &ds[2]);       /* new id, present pair */
    ds[2].status = DELIVERY_RETRYING;
    ds[2].attempt_count = 3;
    row_fill(fx, e3.id, ep2.id, now + 5000, &ds[3]);            /* new */
    ds[3].created_at = now;
    ds[0].created_at = now;

    assert_int_equal(store_delivery_insert_many(fx->s, ds, 4), 0);
    delivery_columns_expect(fx, &ds[0]);
    delivery_columns_expect(fx, &ds[3]);
    delivery_absent(fx, ds[2].id);
    /* The present row is left as it was. */
    delivery_columns_expect(fx, &kept);
    /* e3 has only its ep2 delivery: the row with the taken id went nowhere. */
    f.event_id = e3.id;
    assert_int_equal(store_delivery_list(fx->s, &f, &l), 0);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.items[0].id, ds[3].id);
    delivery_list_free(&l);
    f.event_id = sc.ev.id;
    assert_int_equal(store_delivery_list(fx->s, &f, &l), 0);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.items[0].id, sc.d.id);
    delivery_list_free(&l);

    /* All of them present: still not an error, and nothing changes. */
    assert_int_equal(store_delivery_insert_many(fx->s, ds, 4), 0);
    delivery_columns_expect(fx, &ds[0]);
    delivery_columns_expect(fx, &kept);

    delivery_free(&kept);
    event_free(&e2);
    event_free(&e3);
    endpoint_free(&ep2);
    scene_free(&sc);
}

/* One invalid row anywhere in the call: EINVAL and none of the rows is inserted. */
static void test_insert_many_invalid_inserts_none(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct event evs[3];
    struct endpoint ep;
    struct delivery ds[3];

    endpoint_make(fx, &ep);
    for (int i = 0; i < 3; i++) {
        event_make(fx, "order.paid", &evs[i]);
        row_fill(fx, evs[i].id, ep.id, now + 1000, &ds[i]);
        ds[i].created_at = now;
    }
    for (int bad = 0; bad < 5; bad++) {
        for (int at = 0; at < 3; at += 2) { /* first row, last row */
            struct delivery rows[3];
            memcpy(rows, ds, sizeof rows);
            switch (bad) {
            case 0: rows[at].id[0] = '\0'; break;
            case 1: rows[at].event_id[0] = '\0'; break;
            case 2: rows[at].endpoint_id[0] = '\0'; break;
            case 3: rows[at].status = (enum delivery_status)99; break;
            default: rows[at].status = (enum delivery_status)-1; break;
            }
            assert_false(delivery_insertable(&rows[at]));
            assert_int_equal(store_delivery_insert_many(fx->s, rows, 3), HOOKD_EINVAL);
            for (int i = 0; i < 3; i++)
                delivery_absent(fx, ds[i].id);
        }
    }
    /* The same rows, all valid, go in. */
    assert_int_equal(store_delivery_insert_many(fx->s, ds, 3), 0);
    for (int i = 0; i < 3; i++)
        delivery_columns_expect(fx, &ds[i]);

    for (int i = 0; i < 3; i++)
        event_free(&evs[i]);
    endpoint_free(&ep);
}

static void test_insert_many_empty(void **state)
{
    struct fixture *fx = *state;
    struct delivery unused;
    int results[1] = {12345};

    memset(&unused, 0, sizeof unused);
    assert_int_equal(store_delivery_insert_many(fx->s, &unused, 0), 0);
    assert_int_equal(store_delivery_insert_many(fx->s, NULL, 0), 0);
    assert_int_equal(store_delivery_complete_many(fx->s, NULL, 0, clock_now_ms(), results), 0);
    /* Inside a transaction too, which stays usable. */
    assert_int_equal(store_begin(fx->s), 0);
    assert_int_equal(store_delivery_insert_many(fx->s, &unused, 0), 0);
    assert_int_equal(store_meta_set(fx->s, fx->account, "x"), 0);
    assert_int_equal(store_commit(fx->s), 0);
}

/* In the caller's transaction: rolled back with it, committed with it, and a refused call keeps what came before. */
static void test_insert_many_in_transaction(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct event evs[4];
    struct endpoint ep;
    struct delivery ds[4];

    endpoint_make(fx, &ep);
    for (int i = 0; i < 4; i++) {
        event_make(fx, "order.paid", &evs[i]);
        row_fill(fx, evs[i].id, ep.id, now + 1000, &ds[i]);
        ds[i].created_at = now;
    }
    assert_int_equal(store_begin(fx->s), 0);
    assert_int_equal(store_delivery_insert_many(fx->s, ds, 2), 0);
    delivery_columns_expect(fx, &ds[0]); /* visible inside */
    assert_int_equal(store_rollback(fx->s), 0);
    delivery_absent(fx, ds[0].id);
    delivery_absent(fx, ds[1].id);

    assert_int_equal(store_begin(fx->s), 0);
    assert_int_equal(store_delivery_insert_many(fx->s, ds, 2), 0);
    {
        struct delivery rows[2] = {ds[2], ds[3]};
        rows[1].endpoint_id[0] = '\0';
        assert_int_equal(store_delivery_insert_many(fx->s, rows, 2), HOOKD_EINVAL);
    }
    assert_int_equal(store_commit(fx->s), 0);
    delivery_columns_expect(fx, &ds[0]);
    delivery_columns_expect(fx, &ds[1]);
    delivery_absent(fx, ds[2].id);
    delivery_absent(fx, ds[3].id);

    for (int i = 0; i < 4; i++)
        event_free(&evs[i]);
    endpoint_free(&ep);
}

/* ---- complete_many ------------------------------------------------------- */

#define MIXED_N 8

/*
 * Result case i for job j. Cases: 0 delivered, 1 retrying at a given time,
 * 2 wrong token, 3 no lease_owner, 4 wrong owner, 5 bad status, 6 no
 * delivery_id, 7 retrying after a transport error with no time given.
 */
static struct delivery_result mixed_result(int i, const struct delivery_job *j, int64_t now)
{
    struct delivery_result r = delivered_result(j, now + 5);

    switch (i) {
    case 0:
        r.attempt.duration_ms = 12;
        r.attempt.response = AWKWARD_TEXT;
        break;
    case 1:
        r.status = DELIVERY_RETRYING;
        r.next_attempt_at = now + 5000;
        r.attempt.status_code = 503;
        r.attempt.error = "HTTP error";
        r.attempt.response = "busy";
        break;
    case 2: r.lease_token++; break;
    case 3: r.lease_owner = NULL; break;
    case 4: r.lease_owner = "node-x"; break;
    case 5: r.status = (enum delivery_status)99; break;
    case 6: r.delivery_id = NULL; break;
    default:
        r.status = DELIVERY_RETRYING;
        r.attempt.status_code = 0;
        r.attempt.error_class = "timeout";
        r.attempt.error = "timed out after 10000 ms";
        r.attempt.response = NULL;
        r.attempt.node = NULL; /* the lease owner */
        break;
    }
    return r;
}

static const int mixed_expect[MIXED_N] = {0, 0, HOOKD_ESTALE, HOOKD_EINVAL, HOOKD_ESTALE, HOOKD_EINVAL,
                                          HOOKD_EINVAL, 0};

/*
 * One call with applied, fenced-out and invalid results: a code for each, and
 * every delivery ends exactly as delivery_complete of the same result leaves
 * a twin delivery (claimed in the same claim).
 */
static void test_complete_many_mixed(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms(), done_at = now + 20;
    struct event evs[2 * MIXED_N];
    struct endpoint ep;
    struct delivery ds[2 * MIXED_N], got;
    struct job_list jobs;
    struct delivery_result rs[MIXED_N];
    const struct delivery_job *js[2 * MIXED_N];
    int results[MIXED_N];
    struct attempt_list al;

    drain_due(fx);
    endpoint_make(fx, &ep);
    for (int i = 0; i < 2 * MIXED_N; i++) {
        event_make(fx, "order.paid", &evs[i]);
        delivery_make(fx, evs[i].id, ep.id, now - MIXED_N + i % MIXED_N, &ds[i]); /* a twin is due with its pair */
    }
    assert_int_equal(claim(fx, "node-a", now, now + 30000, &jobs), 2 * MIXED_N);
    for (int i = 0; i < 2 * MIXED_N; i++)
        js[i] = job_find(&jobs, ds[i].id);

    for (int i = 0; i < MIXED_N; i++) {
        rs[i] = mixed_result(i, js[i], now);
        results[i] = 12345;
    }
    assert_int_equal(store_delivery_complete_many(fx->s, rs, MIXED_N, done_at, results), 0);
    for (int i = 0; i < MIXED_N; i++)
        assert_int_equal(results[i], mixed_expect[i]);
    /* The twins, one delivery_complete each, with the same results. */
    for (int i = 0; i < MIXED_N; i++) {
        struct delivery_result r = mixed_result(i, js[MIXED_N + i], now);
        assert_int_equal(store_delivery_complete(fx->s, &r, done_at), mixed_expect[i]);
    }
    for (int i = 0; i < MIXED_N; i++)
        same_state_expect(fx, ds[i].id, ds[MIXED_N + i].id);

    /* Delivered: final, unleased, its attempt recorded as given. */
    assert_int_equal(store_delivery_get(fx->s, ds[0].id, &got), 0);
    assert_int_equal(got.status, DELIVERY_DELIVERED);
    assert_int_equal(got.attempt_count, 1);
    assert_int_equal(got.next_attempt_at, 0);
    assert_int_equal(got.last_status_code, 200);
    assert_null(got.last_error);
    assert_int_equal(got.first_attempt_at, now + 5);
    assert_int_equal(got.last_attempt_at, now + 5);
    assert_int_equal(got.delivered_at, done_at);
    assert_null(got.lease_owner);
    assert_int_equal(got.lease_until, 0);
    assert_int_equal(got.lease_token, js[0]->d.lease_token);
    delivery_free(&got);
    assert_int_equal(store_attempt_list(fx->s, ds[0].id, &al), 0);
    assert_int_equal(al.n, 1);
    assert_string_equal(al.items[0].delivery_id, ds[0].id);
    assert_int_equal(al.items[0].n, 1);
    assert_int_equal(al.items[0].started_at, now + 5);
    assert_int_equal(al.items[0].duration_ms, 12);
    assert_int_equal(al.items[0].status_code, 200);
    assert_null(al.items[0].error_class);
    assert_null(al.items[0].error);
    assert_string_equal(al.items[0].response, AWKWARD_TEXT);
    assert_string_equal(al.items[0].node, "node-a");
    attempt_list_free(&al);

    /* Retrying: due at the time given, unleased. */
    assert_int_equal(store_delivery_get(fx->s, ds[1].id, &got), 0);
    assert_int_equal(got.status, DELIVERY_RETRYING);
    assert_int_equal(got.attempt_count, 1);
    assert_int_equal(got.next_attempt_at, now + 5000);
    assert_int_equal(got.last_status_code, 503);
    assert_string_equal(got.last_error, "HTTP error");
    assert_int_equal(got.first_attempt_at, now + 5);
    assert_int_equal(got.delivered_at, 0);
    assert_null(got.lease_owner);
    delivery_free(&got);
    assert_int_equal(store_attempt_list(fx->s, ds[1].id, &al), 0);
    assert_int_equal(al.n, 1);
    assert_int_equal(al.items[0].status_code, 503);
    assert_string_equal(al.items[0].error, "HTTP error");
    assert_string_equal(al.items[0].response, "busy");
    attempt_list_free(&al);

    /* Retrying after a transport error, no time given: due at once, no status code. */
    assert_int_equal(store_delivery_get(fx->s, ds[7].id, &got), 0);
    assert_int_equal(got.status, DELIVERY_RETRYING);
    assert_int_equal(got.attempt_count, 1);
    assert_int_equal(got.next_attempt_at, done_at);
    assert_int_equal(got.last_status_code, 0);
    assert_string_equal(got.last_error, "timed out after 10000 ms");
    assert_null(got.lease_owner);
    delivery_free(&got);
    assert_int_equal(store_attempt_list(fx->s, ds[7].id, &al), 0);
    assert_int_equal(al.n, 1);
    assert_int_equal(al.items[0].status_code, 0);
    assert_string_equal(al.items[0].error_class, "timeout");
    assert_null(al.items[0].response);
    assert_string_equal(al.items[0].node, "node-a");
    attempt_list_free(&al);

    /* Fenced out and invalid: untouched, still leased by the real owner, no attempt. */
    for (int i = 2; i <= 6; i++)
        delivery_untouched(fx, js[i]);
    /* The real owner can still complete the fenced-out one. */
    {
        struct delivery_result r = delivered_result(js[2], now + 30);
        int one = 12345;
        assert_int_equal(store_delivery_complete_many(fx->s, &r, 1, now + 40, &one), 0);
        assert_int_equal(one, 0);
        delivery_expect(fx, ds[2].id, DELIVERY_DELIVERED, 1);
        assert_int_equal(attempts_of(fx, ds[2].id), 1);
    }

    job_list_free(&jobs);
    for (int i = 0; i < 2 * MIXED_N; i++) {
        event_free(&evs[i]);
        delivery_free(&ds[i]);
    }
    endpoint_free(&ep);
}

/* A 410 result disables its endpoint; the same request on a fenced-out result does not. */
static void test_complete_many_disables_endpoint(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct scene gone, stale, ok;
    struct job_list jobs;
    struct delivery_result rs[3];
    int results[3] = {12345, 12345, 12345};
    struct endpoint ep;
    const struct delivery_job *jg, *js, *jo;

    drain_due(fx);
    scene_make(fx, now - 3, &gone);
    scene_make(fx, now - 2, &stale);
    scene_make(fx, now - 1, &ok);
    assert_int_equal(claim(fx, "node-a", now, now + 30000, &jobs), 3);
    jg = job_find(&jobs, gone.d.id);
    js = job_find(&jobs, stale.d.id);
    jo = job_find(&jobs, ok.d.id);
    rs[0] = delivered_result(jg, now);
    rs[0].status = DELIVERY_DEAD;
    rs[0].attempt.status_code = 410;
    rs[0].attempt.error = "gone";
    rs[0].disable_endpoint_reason = "endpoint answered 410 Gone";
    rs[1] = rs[0];
    rs[1].delivery_id = js->d.id;
    rs[1].lease_token = js->d.lease_token + 1;
    rs[1].disable_endpoint_reason = "fenced out: must not apply";
    rs[2] = delivered_result(jo, now);
    assert_int_equal(store_delivery_complete_many(fx->s, rs, 3, now + 1, results), 0);
    assert_int_equal(results[0], 0);
    assert_int_equal(results[1], HOOKD_ESTALE);
    assert_int_equal(results[2], 0);

    assert_int_equal(store_endpoint_get(fx->s, gone.ep.id, &ep), 0);
    assert_false(ep.enabled);
    assert_string_equal(ep.disabled_reason, "endpoint answered 410 Gone");
    endpoint_free(&ep);
    assert_int_equal(store_endpoint_get(fx->s, stale.ep.id, &ep), 0);
    assert_true(ep.enabled);
    assert_null(ep.disabled_reason);
    endpoint_free(&ep);
    assert_int_equal(store_endpoint_get(fx->s, ok.ep.id, &ep), 0);
    assert_true(ep.enabled);
    endpoint_free(&ep);
    delivery_expect(fx, gone.d.id, DELIVERY_DEAD, 1);
    assert_int_equal(attempts_of(fx, gone.d.id), 1);
    delivery_untouched(fx, js);
    delivery_expect(fx, ok.d.id, DELIVERY_DELIVERED, 1);

    job_list_free(&jobs);
    scene_free(&gone);
    scene_free(&stale);
    scene_free(&ok);
}

/* Inside the caller's transaction: undone by its rollback, kept by its commit. */
static void test_complete_many_in_transaction(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct scene a, b;
    struct job_list jobs;
    struct delivery_result rs[2];
    int results[2];

    drain_due(fx);
    scene_make(fx, now - 2, &a);
    scene_make(fx, now - 1, &b);
    assert_int_equal(claim(fx, "node-a", now, now + 30000, &jobs), 2);
    rs[0] = delivered_result(job_find(&jobs, a.d.id), now);
    rs[1] = delivered_result(job_find(&jobs, b.d.id), now);
    rs[1].status = DELIVERY_RETRYING;
    rs[1].next_attempt_at = now + 1000;
    rs[1].attempt.status_code = 500;

    assert_int_equal(store_begin(fx->s), 0);
    results[0] = results[1] = 12345;
    assert_int_equal(store_delivery_complete_many(fx->s, rs, 2, now + 1, results), 0);
    assert_int_equal(results[0], 0);
    assert_int_equal(results[1], 0);
    delivery_expect(fx, a.d.id, DELIVERY_DELIVERED, 1); /* visible inside */
    assert_int_equal(store_rollback(fx->s), 0);
    delivery_untouched(fx, job_find(&jobs, a.d.id));
    delivery_untouched(fx, job_find(&jobs, b.d.id));

    assert_int_equal(store_begin(fx->s), 0);
    results[0] = results[1] = 12345;
    assert_int_equal(store_delivery_complete_many(fx->s, rs, 2, now + 1, results), 0);
    assert_int_equal(results[0], 0);
    assert_int_equal(results[1], 0);
    assert_int_equal(store_commit(fx->s), 0);
    delivery_expect(fx, a.d.id, DELIVERY_DELIVERED, 1);
    delivery_expect(fx, b.d.id, DELIVERY_RETRYING, 1);
    assert_int_equal(attempts_of(fx, a.d.id), 1);
    assert_int_equal(attempts_of(fx, b.d.id), 1);

    job_list_free(&jobs);
    scene_free(&a);
    scene_free(&b);
}

#define MANY_N 300

/* Many rows in both directions: MANY_N inserted in one call, claimed, completed in one call. */
static void test_complete_many_large(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct endpoint ep;
    struct event *evs = calloc(MANY_N, sizeof *evs);
    struct delivery *ds = calloc(MANY_N, sizeof *ds);
    struct delivery_result *rs = calloc(MANY_N, sizeof *rs);
    int *results = calloc(MANY_N, sizeof *results);
    struct delivery_list l;
    struct delivery_filter f = {.status = DELIVERY_DELIVERED, .limit = STORE_LIST_MAX};
    struct job_list jobs;
    struct delivery got;

    assert_non_null(evs);
    assert_non_null(ds);
    assert_non_null(rs);
    assert_non_null(results);
    drain_due(fx);
    endpoint_make(fx, &ep);
    for (int i = 0; i < MANY_N; i++) {
        event_make(fx, "order.paid", &evs[i]);
        row_fill(fx, evs[i].id, ep.id, now - MANY_N + i, &ds[i]);
    }
    assert_int_equal(store_delivery_insert_many(fx->s, ds, MANY_N), 0);
    assert_int_equal(store_delivery_claim_due(fx->s, "node-a", now, now + 30000, MANY_N, &(struct lease_limits){0}, &jobs), 0);
    assert_int_equal(jobs.n, MANY_N);
    for (size_t i = 0; i < jobs.n; i++) {
        rs[i] = delivered_result(&jobs.items[i], now + (int64_t)i);
        results[i] = 12345;
    }
    assert_int_equal(store_delivery_complete_many(fx->s, rs, MANY_N, now + MANY_N + 10, results), 0);
    for (int i = 0; i < MANY_N; i++)
        assert_int_equal(results[i], 0);
    job_list_free(&jobs);

    for (int i = 0; i < MANY_N; i++) {
        struct attempt_list al;
        assert_int_equal(store_delivery_get(fx->s, ds[i].id, &got), 0);
        assert_int_equal(got.status, DELIVERY_DELIVERED);
        assert_int_equal(got.attempt_count, 1);
        assert_int_equal(got.delivered_at, now + MANY_N + 10);
        assert_null(got.lease_owner);
        delivery_free(&got);
        assert_int_equal(store_attempt_list(fx->s, ds[i].id, &al), 0);
        assert_int_equal(al.n, 1);
        assert_int_equal(al.items[0].n, 1);
        assert_int_equal(al.items[0].status_code, 200);
        attempt_list_free(&al);
    }
    f.endpoint_id = ep.id;
    assert_int_equal(store_delivery_list(fx->s, &f, &l), 0);
    assert_int_equal(l.n, MANY_N);
    delivery_list_free(&l);
    assert_int_equal(claim(fx, "node-a", now + 100000, now + 200000, &jobs), 0);
    job_list_free(&jobs);

    for (int i = 0; i < MANY_N; i++)
        event_free(&evs[i]);
    endpoint_free(&ep);
    free(evs);
    free(ds);
    free(rs);
    free(results);
}

/*
 * Snippets are bytes: NULs, Latin-1, gzip, every byte value come back exactly
 * with their length and truncation flag, through complete_many and complete.
 */
static void test_attempt_response_bytes(void **state)
{
    static const char nul_body[] = "a\0b\0\0c";
    static const char latin1[] = "Fehler: Ung\xfcltig \xa9";
    static const unsigned char gzip[] = {0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xcb, 0x48};
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    char all_bytes[256];
    struct {
        const char *p;
        size_t len;
        bool truncated;
    } cases[] = {
        {nul_body, sizeof nul_body - 1, false},
        {latin1, sizeof latin1 - 1, true},
        {(const char *)gzip, sizeof gzip, false},
        {all_bytes, sizeof all_bytes, true},
    };
    enum { N = sizeof cases / sizeof cases[0] };
    struct event evs[2 * N];
    struct endpoint ep;
    struct delivery ds[2 * N];
    struct job_list jobs;
    struct delivery_result rs[N];
    int results[N];

    for (int i = 0; i < 256; i++)
        all_bytes[i] = (char)i;
    drain_due(fx);
    endpoint_make(fx, &ep);
    for (int i = 0; i < 2 * N; i++) {
        event_make(fx, "order.paid", &evs[i]);
        delivery_make(fx, evs[i].id, ep.id, now - 10, &ds[i]);
    }
    assert_int_equal(claim(fx, "node-a", now, now + 30000, &jobs), 2 * N);
    for (int i = 0; i < 2 * N; i++) {
        struct delivery_result r = delivered_result(job_find(&jobs, ds[i].id), now);
        r.attempt.response = (char *)cases[i % N].p;
        r.attempt.response_len = cases[i % N].len;
        r.attempt.response_truncated = cases[i % N].truncated;
        if (i < N)
            rs[i] = r;
        else
            assert_int_equal(store_delivery_complete(fx->s, &r, now + 1), 0);
    }
    assert_int_equal(store_delivery_complete_many(fx->s, rs, N, now + 1, results), 0);
    for (int i = 0; i < 2 * N; i++) {
        struct attempt_list al;
        if (i < N)
            assert_int_equal(results[i], 0);
        assert_int_equal(store_attempt_list(fx->s, ds[i].id, &al), 0);
        assert_int_equal(al.n, 1);
        assert_int_equal(al.items[0].response_len, cases[i % N].len);
        assert_memory_equal(al.items[0].response, cases[i % N].p, cases[i % N].len);
        assert_int_equal(al.items[0].response[al.items[0].response_len], '\0');
        assert_int_equal(al.items[0].response_truncated, cases[i % N].truncated);
        attempt_list_free(&al);
    }
    job_list_free(&jobs);
    for (int i = 0; i < 2 * N; i++)
        event_free(&evs[i]);
    endpoint_free(&ep);
}

/* Rows written before snippets were bytes (text in the old column) read as they were. */
static void test_attempt_response_old_rows(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct event ev;
    struct endpoint ep;
    struct delivery d;
    struct attempt_list al;
    char sql[512];

    endpoint_make(fx, &ep);
    event_make(fx, "order.paid", &ev);
    delivery_make(fx, ev.id, ep.id, now, &d);
    snprintf(sql, sizeof sql,
             "INSERT INTO hookd_attempts(delivery_id, n, started_at, duration_ms, status_code, response, node)"
             " VALUES ('%s', 1, %lld, 3, 500, 'old text \u00e9', 'node-old')",
             d.id, (long long)now);
    fixture_sql(fx, sql);
    assert_int_equal(store_attempt_list(fx->s, d.id, &al), 0);
    assert_int_equal(al.n, 1);
    assert_string_equal(al.items[0].response, "old text \u00e9");
    assert_int_equal(al.items[0].response_len, strlen("old text \u00e9"));
    assert_false(al.items[0].response_truncated);
    attempt_list_free(&al);
    event_free(&ev);
    endpoint_free(&ep);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_insert_many_rows_readable),
        T(test_insert_many_skips_present),
        T(test_insert_many_invalid_inserts_none),
        T(test_insert_many_empty),
        T(test_insert_many_in_transaction),
        T(test_complete_many_mixed),
        T(test_complete_many_disables_endpoint),
        T(test_complete_many_in_transaction),
        T(test_complete_many_large),
        T(test_attempt_response_bytes),
        T(test_attempt_response_old_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
