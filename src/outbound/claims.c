/*
 * The dispatcher's side of the store: claims of due deliveries (retries, and
 * rows the in-flight caps held back) through the writer, and attempt results
 * the store refused while it was down, kept and written again later so that
 * their deliveries are not sent twice.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "outbound/dispatcher.h"
#include "outbound/dispatcher_internal.h"
#include "outbound/outage.h"
#include "ops/metrics.h"

#define PART "dispatcher"
#define CLAIM_BATCH_MAX 256
#define CLAIM_HELD_ROOM 256 /* endpoints a claim names as held back; beyond, every endpoint counts as held */
#define CLAIM_IDLE_MS 100   /* earliest re-claim when due rows were left that time may free (rate, breaker, ramp, others' leases) */
#define REWRITE_MIN_MS 250  /* first retry of attempt records the store refused while down */
#define REWRITE_MAX_MS 2000 /* the retries' longest interval */
#define EXPIRE_EVERY_MAX_MS 30000 /* paused endpoints' deliveries die this late past their window, at most */

/* ---- claims (op_claim on the writer thread; the rest on the loop) ----------- */

static bool held_by_own_leases(struct dispatcher *q, const struct ep_state *st);

static int op_claim(struct store *s, void *arg)
{
    struct dispatcher *q = arg;
    struct claim *c = &q->claim;
    /* On one node the dispatcher keeps the in-flight caps: an endpoint may hold its share of the window. */
    struct lease_limits lim = {.default_cap = q->deps.endpoint_max_in_flight,
                               .lease_max = store_backend(s)->single_node ? dispatcher_endpoint_window(q) : 0,
                               .ramp_ms = q->deps.ramp_ms,
                               .capped = (const char (*)[HOOKD_ID_MAX])c->capped,
                               .n_capped = c->n_capped,
                               .held = c->held,
                               .held_room = c->held != NULL ? CLAIM_HELD_ROOM : 0,
                               .n_held = &c->n_held,
                               .full = (const char (*)[HOOKD_ID_MAX])c->full,
                               .n_full = c->n_full};
    bool more_due = false;
    int64_t at = 0;
    int rc;

    lim.more_due = &more_due;
    /* A paused endpoint's deliveries get no attempt that could find them past their window: they die here. */
    if (c->expire_window_ms > 0) {
        rc = store_endpoint_state_expire_paused(s, c->now, c->expire_window_ms, &c->expired);
        if (rc != 0)
            return rc;
    }
    c->n_held = 0;
    metrics_count(METRIC_DELIVERY_CLAIMS);
    rc = store_delivery_claim_due(s, q->deps.node, c->now, c->lease_until, c->limit, &lim, &c->jobs);
    if (rc != 0)
        return rc;
    /*
     * A full batch is followed by the next claim at once (claims_finished): its answer would go unused.
     * An endpoint that used up its slots may have more rows due now: that is the answer, or close
     * enough (the claim after the next results finds out), and spares a walk past its leased rows.
     * So do the ones left out as full of our own leases: the last claim left rows of theirs due.
     */
    if (c->jobs.n >= (size_t)c->limit || more_due || c->n_full > 0) {
        c->next_due = c->now;
        return 0;
    }
    rc = store_delivery_next_due(s, &at);
    c->next_due = rc == 0 ? at : NEVER;
    return rc == HOOKD_ENOTFOUND ? 0 : rc;
}

/* A writer op's answer for the loop (writer thread): its result and flag set under mu, the loop woken. */
static void answer_post(struct dispatcher *q, int *slot, bool *finished, int result)
{
    bool wake;

    pthread_mutex_lock(&q->mu);
    *slot = result;
    *finished = true;
    wake = dispatcher_inbox_wake_needed(q);
    pthread_mutex_unlock(&q->mu);
    if (wake)
        http_engine_wakeup(q->engine);
}

static void op_claim_done(void *arg, int result)
{
    struct dispatcher *q = arg;

    answer_post(q, &q->claim.result, &q->claim_finished, result);
}

/*
 * The endpoints a claim holds to their cap: those not direct (their transfers
 * are slow, they are paused or ramping) and those that have not answered
 * within ANSWERING_MS (a stuck one must not fill the window with its backlog).
 * Judged at one instant (mono) for both passes below: judged twice, at two
 * clock readings, the second pass could find more of them than the first
 * counted room for (a heap overflow on a loaded machine).
 */
bool claims_capped(const struct ep_state *st, int64_t mono)
{
    return st->present && (!st->direct || st->answered_mono == 0 || mono - st->answered_mono >= 100);
}

struct capped_pass {
    struct claim *c;
    int64_t mono;
    size_t n, room; /* counted (or collected) so far; room in c->capped */
};

/*
 * Shared store: the endpoints the last claim held that our own leases now
 * fill. The claim leaves them out (lease_limits.full): beside hung endpoints
 * at their caps, each claim walked past their leased rows (64 each, on every
 * claim of the healthy endpoint's backlog) only to learn that they were full.
 */
struct full_pass {
    struct dispatcher *q;
    size_t n, room; /* counted (or collected) so far; room in q->claim.full */
};

static bool claim_full(struct dispatcher *q, const struct ep_state *st)
{
    return st->held_back && held_by_own_leases(q, st);
}

static void full_count(struct ep_state *st, void *arg)
{
    struct full_pass *p = arg;

    p->n += claim_full(p->q, st);
}

static void full_collect(struct ep_state *st, void *arg)
{
    struct full_pass *p = arg;

    if (p->n < p->room && claim_full(p->q, st))
        snprintf(p->q->claim.full[p->n++], HOOKD_ID_MAX, "%s", st->id);
}

static void capped_collect(struct ep_state *st, void *arg)
{
    struct capped_pass *p = arg;

    if (p->n < p->room && claims_capped(st, p->mono))
        snprintf(p->c->capped[p->n++], HOOKD_ID_MAX, "%s", st->id);
}

static void capped_count(struct ep_state *st, void *arg)
{
    struct capped_pass *p = arg;

    p->n += claims_capped(st, p->mono);
}

void claims_maybe(struct dispatcher *q, int64_t now)
{
    struct capped_pass pass = {.c = &q->claim, .mono = clock_mono_ms()};
    struct full_pass fp = {.q = q};
    int room, rc;

    if (q->claim_in_flight || atomic_load(&q->stopping))
        return;
    room = dispatcher_room(q);
    if (room <= 0)
        return;
    /*
     * A result queued since the last claim frees its lease when it commits.
     * When the caps held due rows back and claims share the writer, the claim
     * goes at once, right behind the results in the writer's queue: it then
     * runs in their transaction (or a later one), sees their leases gone and
     * fills the slots without waiting for a commit of its own first. (With a
     * claim writer of its own, job_finished asks for it after the commit.)
     */
    if (!atomic_exchange(&q->claim_wanted, false) && now < q->next_wake_at &&
        !(q->due_held_back && q->freed_since_claim && q->deps.claimer == NULL))
        return;
    char (*held)[HOOKD_ID_MAX] = q->claim.held; /* kept from claim to claim */
    free(q->claim.capped);
    free(q->claim.full);
    memset(&q->claim, 0, sizeof q->claim);
    /* Without room to name them (out of memory), every endpoint counts as held. */
    q->claim.held = held != NULL ? held : calloc(CLAIM_HELD_ROOM, sizeof *q->claim.held);
    endpoint_cache_each(&q->cache, capped_count, &pass);
    if (pass.n > 0 && (q->claim.capped = calloc(pass.n, sizeof *q->claim.capped)) != NULL) {
        pass.room = pass.n;
        pass.n = 0;
        endpoint_cache_each(&q->cache, capped_collect, &pass);
        q->claim.n_capped = pass.n;
    }
    q->claim.limit = room < CLAIM_BATCH_MAX ? room : CLAIM_BATCH_MAX;
    q->claim.capped_mono = pass.mono;
    /* Judged at capped_mono, as held_mark judges them (held_by_own_leases); a claim writer of its own means a shared store. */
    if (q->deps.claimer != NULL)
        endpoint_cache_each(&q->cache, full_count, &fp);
    if (fp.n > 0 && (q->claim.full = calloc(fp.n, sizeof *q->claim.full)) != NULL) {
        fp.room = fp.n;
        fp.n = 0;
        endpoint_cache_each(&q->cache, full_collect, &fp);
        q->claim.n_full = fp.n;
    }
    q->claim.now = now;
    if (q->deps.retry.window_ms > 0 && now >= q->expire_at) {
        /* A twentieth of the window late at most (a second at least, EXPIRE_EVERY_MAX_MS at most). */
        int64_t every = q->deps.retry.window_ms / 20;
        every = every < SAFETY_POLL_MS ? SAFETY_POLL_MS : every > EXPIRE_EVERY_MAX_MS ? EXPIRE_EVERY_MAX_MS : every;
        q->claim.expire_window_ms = q->deps.retry.window_ms;
        q->expire_at = now + every;
    }
    q->claim.lease_until = now + q->deps.lease_ms;
    /* The claimed rows take window slots before they arrive; the unused rest is given back on return. */
    atomic_fetch_add(&q->held, q->claim.limit);
    rc = writer_submit(q->deps.claimer != NULL ? q->deps.claimer : q->deps.writer, op_claim, op_claim_done, q);
    if (rc != 0) {
        atomic_fetch_sub(&q->held, q->claim.limit);
        log_limited(&q->lim_writer, LOG_WARN, PART, "cannot queue a claim: %s", hookd_strerror(rc));
        q->next_wake_at = now + SAFETY_POLL_MS;
        return;
    }
    q->claim_in_flight = true;
    q->claim_seq++;
    q->freed_since_claim = false;
    q->outstanding_ops++;
    /* Completions committed from now on lower this again; the claim's answer sets the rest. */
    q->next_wake_at = NEVER;
}

static void held_clear(struct ep_state *st, void *arg)
{
    (void)arg;
    st->held_back = false;
}

/*
 * Whether the leases this node holds of st fill all a claim lets it lease:
 * its cap (the store's: its own max_in_flight, else the default; none, no
 * cap), or, when the claim did not hold it to its cap, the larger window
 * share as it is now. Then nothing but their ends lets more of its rows go:
 * not time (its breaker, a ramp or a rate limit only lower what it may lease
 * further), nor another node's leases ending (ours alone fill it). Each of
 * those ends asks for a claim (claims_lease_freed), so no idle re-claim
 * need look for one.
 */
static bool held_by_own_leases(struct dispatcher *q, const struct ep_state *st)
{
    int cap = st->present && st->ep.max_in_flight > 0 ? st->ep.max_in_flight : q->deps.endpoint_max_in_flight;
    int limit = cap;

    if (!st->present || cap <= 0)
        return false;
    if (!claims_capped(st, q->claim.capped_mono)) {
        int share = dispatcher_endpoint_window(q);
        limit = share > cap ? share : cap;
    }
    return st->refs >= limit;
}

/*
 * The claim's answer: which endpoints wait for their own slots. Only their
 * results let a claim take more, so a result of any other endpoint (a healthy
 * one beside others held at their caps) asks for no claim: before, each did,
 * and each claim walked the held endpoints' leased rows on the writer, in
 * front of the healthy endpoint's next fan-out. A held endpoint whose lease
 * ended while the claim was out may have a slot the claim did not see. When
 * every held endpoint is full of our own leases (held_own), the next claim
 * waits for one of those to end instead of looking again every CLAIM_IDLE_MS:
 * beside 8 hung endpoints that was about ten claims a second, each walking
 * their leased rows on the writer in front of the healthy endpoint's fan-out.
 */
static void held_mark(struct dispatcher *q)
{
    struct claim *c = &q->claim;
    bool freed = false;

    endpoint_cache_each(&q->cache, held_clear, NULL);
    q->held_all = c->held == NULL || c->n_held > CLAIM_HELD_ROOM;
    q->held_own = !q->held_all && c->n_held > 0;
    for (size_t i = 0; !q->held_all && i < c->n_held; i++) {
        struct ep_state *st = endpoint_cache_find(&q->cache, c->held[i]);
        if (st == NULL) {
            q->held_own = false;
            continue;
        }
        st->held_back = true;
        freed |= st->freed_in_claim == q->claim_seq;
        q->held_own = q->held_own && held_by_own_leases(q, st);
    }
    if (!freed && !q->held_all)
        return;
    q->freed_since_claim = true;
    if (q->deps.claimer != NULL && q->due_held_back)
        q->next_wake_at = 0;
}

/* A lease of st ends (its result queued, or committed): true when claims wait for st's slots. */
bool claims_lease_freed(struct dispatcher *q, struct ep_state *st)
{
    if (q->claim_in_flight)
        st->freed_in_claim = q->claim_seq;
    return q->held_all || st->held_back;
}

void claims_finished(struct dispatcher *q, int64_t now)
{
    struct claim *c = &q->claim;
    int got = (int)c->jobs.n;

    q->claim_in_flight = false;
    q->outstanding_ops--;
    atomic_fetch_sub(&q->held, c->limit - got);
    if (c->result != 0) {
        if (outage_error(c->result))
            outage_log(PART, "cannot claim due deliveries: %s", hookd_strerror(c->result));
        else
            log_limited(&q->lim_store, LOG_WARN, PART, "cannot claim due deliveries: %s", hookd_strerror(c->result));
        /* The writer may have left rows in the list before failing; they were rolled back. */
        atomic_fetch_sub(&q->held, got);
        job_list_free(&c->jobs);
        q->next_wake_at = min64(q->next_wake_at, now + SAFETY_POLL_MS);
        return;
    }
    log_limiter_reset(&q->lim_store, PART, "claiming");
    outage_over(PART);
    if (c->expired > 0)
        log_warn(PART, "%lld deliveries of paused endpoints are dead: their retry window ended while the breaker was open",
                 (long long)c->expired);
    if (got > 0)
        log_debug(PART, "claimed %d due deliveries", got);
    if (atomic_load(&q->stopping)) {
        atomic_fetch_sub(&q->held, got);
        job_list_free(&c->jobs);
        return;
    }
    dispatcher_jobs_accept(q, &c->jobs, 0, false);
    q->due_held_back = got < c->limit && c->next_due <= c->now;
    held_mark(q);
    if (got == c->limit)
        q->next_wake_at = now; /* a full batch: more may be due */
    else if (c->next_due > c->now)
        q->next_wake_at = min64(q->next_wake_at, c->next_due);
    else if (!q->held_own)
        q->next_wake_at = min64(q->next_wake_at, now + CLAIM_IDLE_MS); /* due, yet not ours to take */
    /* Else due, yet held by our own leases only: the next claim waits for one of them to end (held_mark). */
    q->next_wake_at = min64(q->next_wake_at, now + SAFETY_POLL_MS);
}

/* ---- results to write again ------------------------------------------------- */

/* Keeps j (its window slot too) to write its result again once the store may be back. */
void rewrite_later(struct dispatcher *q, struct job *j)
{
    j->next = NULL;
    if (q->rewrite == NULL) {
        q->rewrite = j;
        q->rewrite_backoff_ms = q->rewrite_backoff_ms == 0 ? REWRITE_MIN_MS : q->rewrite_backoff_ms * 2;
        if (q->rewrite_backoff_ms > REWRITE_MAX_MS)
            q->rewrite_backoff_ms = REWRITE_MAX_MS;
        q->rewrite_at_mono = clock_mono_ms() + q->rewrite_backoff_ms;
    } else {
        q->rewrite_tail->next = j;
    }
    q->rewrite_tail = j;
}

/* Sends the kept results to the writer again when their time has come (or drops them at stop). */
void rewrite_due(struct dispatcher *q, int64_t mono, bool drop)
{
    struct job *j = q->rewrite;

    if (j == NULL || (!drop && mono < q->rewrite_at_mono))
        return;
    q->rewrite = q->rewrite_tail = NULL;
    while (j != NULL) {
        struct job *next = j->next;
        if (drop)
            dispatcher_job_free(q, j);
        else
            dispatcher_job_submit(q, j, JOB_RECORDING);
        j = next;
    }
}

/* ---- lease renewal (op_renew on the claim writer; the rest on the loop) ------ */

/*
 * Every lease the dispatcher holds (queued, in flight, or with its result on
 * the way) is extended each third of the lease, in one statement: a queue or
 * an attempt longer than the lease keeps its delivery, so another node never
 * sends it meanwhile. A node that dies stops renewing: its leases end within
 * lease_ms of its last renewal, and other nodes take the work then. A renewal
 * is fenced by the lease token: a delivery another node claimed after our
 * lease ran out (a renewal the store refused while down) is not taken back.
 */
int64_t renewal_interval_ms(const struct dispatcher *q)
{
    int64_t every = q->deps.lease_ms / 3;

    return every > 0 ? every : 1;
}

static bool renewal_wanted(const struct job *j) { return j->phase != JOB_RELEASING; }

static void renewal_count(struct job *j, void *arg)
{
    size_t *n = arg;

    *n += renewal_wanted(j);
}

static void renewal_collect(struct job *j, void *arg)
{
    struct renewal *r = arg;

    if (!renewal_wanted(j) || r->n >= r->cap)
        return;
    snprintf(r->ids[r->n], HOOKD_ID_MAX, "%s", j->dj.d.id);
    r->tokens[r->n] = j->dj.d.lease_token;
    r->n++;
}

/* Room for n leases in r (the arrays only grow); false when out of memory. */
static bool renewal_reserve(struct renewal *r, size_t n)
{
    char(*ids)[HOOKD_ID_MAX];
    const char **idp;
    int64_t *tokens;
    bool *renewed;

    if (n <= r->cap)
        return true;
    n = n < 64 ? 64 : n + n / 2;
    ids = realloc(r->ids, n * sizeof *ids);
    if (ids != NULL)
        r->ids = ids;
    idp = realloc(r->idp, n * sizeof *idp);
    if (idp != NULL)
        r->idp = idp;
    tokens = realloc(r->tokens, n * sizeof *tokens);
    if (tokens != NULL)
        r->tokens = tokens;
    renewed = realloc(r->renewed, n * sizeof *renewed);
    if (renewed != NULL)
        r->renewed = renewed;
    if (ids == NULL || idp == NULL || tokens == NULL || renewed == NULL)
        return false;
    r->cap = n;
    return true;
}

void renewal_free(struct dispatcher *q)
{
    struct renewal *r = &q->renewal;

    free(r->ids);
    free(r->idp);
    free(r->tokens);
    free(r->renewed);
    memset(r, 0, sizeof *r);
}

static int op_renew(struct store *s, void *arg)
{
    struct dispatcher *q = arg;
    struct renewal *r = &q->renewal;

    return store_delivery_renew(s, q->deps.node, r->idp, r->tokens, r->n, r->lease_until, r->renewed);
}

static void op_renew_done(void *arg, int result)
{
    struct dispatcher *q = arg;

    answer_post(q, &q->renewal.result, &q->renewal_finished, result);
}

void renewal_maybe(struct dispatcher *q, int64_t now, int64_t mono)
{
    struct renewal *r = &q->renewal;
    size_t n = 0;
    int rc;

    if (q->renewal_in_flight || mono < q->renew_at_mono)
        return;
    q->renew_at_mono = mono + renewal_interval_ms(q);
    job_table_each(&q->jobs, renewal_count, &n);
    if (n == 0)
        return;
    if (!renewal_reserve(r, n)) {
        log_limited(&q->lim_alloc, LOG_ERROR, PART, "out of memory: %zu leases not renewed this time", n);
        return;
    }
    r->n = 0;
    job_table_each(&q->jobs, renewal_collect, r);
    for (size_t i = 0; i < r->n; i++)
        r->idp[i] = r->ids[i];
    r->lease_until = now + q->deps.lease_ms;
    rc = writer_submit(q->deps.claimer != NULL ? q->deps.claimer : q->deps.writer, op_renew, op_renew_done, q);
    if (rc != 0) {
        log_limited(&q->lim_writer, LOG_WARN, PART, "cannot queue a lease renewal: %s", hookd_strerror(rc));
        return;
    }
    q->renewal_in_flight = true;
    q->outstanding_ops++;
}

void renewal_finished(struct dispatcher *q)
{
    struct renewal *r = &q->renewal;
    size_t renewed = 0;

    q->renewal_in_flight = false;
    q->outstanding_ops--;
    if (r->result != 0) {
        if (outage_error(r->result))
            outage_log(PART, "cannot renew %zu leases: %s", r->n, hookd_strerror(r->result));
        else
            log_limited(&q->lim_store, LOG_WARN, PART, "cannot renew %zu leases: %s", r->n,
                        hookd_strerror(r->result));
        /* Sooner than a whole interval: what the leases have left is shrinking. */
        q->renew_at_mono = min64(q->renew_at_mono, clock_mono_ms() + min64(renewal_interval_ms(q), SAFETY_POLL_MS));
        return;
    }
    for (size_t i = 0; i < r->n; i++) {
        struct job *j;
        if (!r->renewed[i])
            continue; /* recorded or released meanwhile, or taken by another claim: nothing to extend */
        j = job_table_find(&q->jobs, r->ids[i]);
        /* The same lease (a claim of ours may have taken the delivery again since, with a later lease). */
        if (j != NULL && j->dj.d.lease_token == r->tokens[i] && j->dj.d.lease_until < r->lease_until) {
            /* A probe's claimed_until is the breaker's probe_until, which the store moved with it. */
            if (j->claimed_until == j->dj.d.lease_until)
                j->claimed_until = r->lease_until;
            j->dj.d.lease_until = r->lease_until;
            renewed++;
        }
    }
    if (renewed > 0)
        log_debug(PART, "renewed %zu leases until %lld", renewed, (long long)r->lease_until);
}
