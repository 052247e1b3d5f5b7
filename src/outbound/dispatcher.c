/*
 * The dispatcher: one event-loop thread that sends leased deliveries within
 * global and per-endpoint in-flight caps and records each attempt through the
 * writer. Claims of due deliveries and results written again after a store
 * outage are in claims.c; the state is in dispatcher_internal.h.
 *
 * The transfers are the HTTP engine's (net/http_client.h), run by this loop:
 * the dispatcher builds each signed request (request.c), hands it over with
 * the delivery classifier, and decides the delivery's next state from the
 * result.
 *
 * Threads: the loop owns everything below "loop thread only". Other threads
 * (the relay's and our own writer callbacks) talk to it through the inbox: a
 * mutex-guarded set of lists plus http_engine_wakeup(). A job counts in `held`
 * from the moment it is handed over until its last writer op has committed,
 * which is what bounds the window the relay and the claims may fill.
 */
#include "outbound/dispatcher.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/ids.h"
#include "hub.h"
#include "log.h"
#include "ops/metrics.h"
#include "outbound/dispatcher_internal.h"
#include "outbound/outage.h"

#define PART "dispatcher"
#define STOP_GRACE_MS 2000           /* in-flight transfers get this long at stop (deps.drain_timeout_ms 0) */
#define STOP_OPS_WAIT_MS 10000       /* then their commits get this long */
#define SLOW_AFTER_MS 1000           /* a transfer waiting this long for its answer joins the slow pool */
#define SLOW_POOL_FACTOR 4           /* the slow pool holds this many times max_in_flight */
#define SHARE_EVERY_MS 10            /* the window's fair share is judged again this often at most */
#define ANSWERING_MS 100             /* an endpoint that answered this recently is draining its queue */

/* ---- small helpers ------------------------------------------------------ */

/* xorshift64*: jitter only needs to be uniform, not secret. */
static double rnd01(struct dispatcher *q)
{
    q->rng ^= q->rng >> 12;
    q->rng ^= q->rng << 25;
    q->rng ^= q->rng >> 27;
    return (double)((q->rng * UINT64_C(2685821657736338717)) >> 11) * 0x1.0p-53;
}

static struct job *job_get(struct dispatcher *q)
{
    struct job *j = job_table_new(&q->jobs);

    if (j != NULL)
        j->q = q;
    return j;
}

/* ---- the board (what the relay's single-node hand-off asks) ---------------- */

static uint64_t board_hash(const char *id)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */

    for (; *id != '\0'; id++) {
        h ^= (unsigned char)*id;
        h *= 1099511628211ULL;
    }
    return h;
}

/* Under board_mu: id's entry (added when add; NULL when absent, or out of memory). */
static struct board_entry *board_find(struct dispatcher *q, const char *id, bool add)
{
    if (add && (q->board_n + 1) * 2 > q->board_cap) {
        size_t cap = q->board_cap == 0 ? 64 : q->board_cap * 2;
        struct board_entry *b = calloc(cap, sizeof *b);
        if (b == NULL)
            return NULL;
        for (size_t i = 0; i < q->board_cap; i++) {
            if (q->board[i].id[0] == '\0')
                continue;
            size_t k = board_hash(q->board[i].id) & (cap - 1);
            while (b[k].id[0] != '\0')
                k = (k + 1) & (cap - 1);
            b[k] = q->board[i];
        }
        free(q->board);
        q->board = b;
        q->board_cap = cap;
    }
    if (q->board_cap == 0)
        return NULL;
    for (size_t k = board_hash(id) & (q->board_cap - 1);; k = (k + 1) & (q->board_cap - 1)) {
        struct board_entry *e = &q->board[k];
        if (strcmp(e->id, id) == 0)
            return e;
        if (e->id[0] == '\0') {
            if (!add)
                return NULL;
            snprintf(e->id, sizeof e->id, "%s", id);
            e->direct = true;
            q->board_n++;
            return e;
        }
    }
}

/* Puts st's holdings and whether it may be handed deliveries directly on the board (answered: it just answered). */
static void board_sync(struct dispatcher *q, struct ep_state *st, bool answered)
{
    struct board_entry *e;
    int64_t mono = answered ? clock_mono_ms() : 0;

    st->direct = !st->paused && st->in_flight_slow == 0 && clock_mono_ms() >= st->ramp_until_mono;
    pthread_mutex_lock(&q->board_mu);
    e = board_find(q, st->id, true);
    if (e != NULL) {
        e->held = st->refs;
        e->sending = (int)st->queued + st->in_flight;
        e->direct = st->direct;
        if (answered) {
            e->answered_mono = mono;
            e->waiting_since_mono = 0;
        }
    }
    pthread_mutex_unlock(&q->board_mu);
    if (answered)
        atomic_store(&q->last_answer_mono, mono);
}

/* A transfer of st started: if it is the first since its last answer, the wait for one starts now. */
static void board_note_sent(struct dispatcher *q, struct ep_state *st)
{
    struct board_entry *e;
    int64_t mono = clock_mono_ms();

    pthread_mutex_lock(&q->board_mu);
    e = board_find(q, st->id, true);
    if (e != NULL && e->waiting_since_mono == 0) {
        e->waiting_since_mono = mono;
        atomic_store(&q->last_answer_mono, mono); /* a first send counts as movement, for ANSWERING_MS */
    }
    pthread_mutex_unlock(&q->board_mu);
}

/*
 * Answering: it answered within ANSWERING_MS, or its first request since is
 * younger than that (a newcomer gets the benefit of the doubt that long), or
 * it holds jobs it has not started yet. One that has not answered for longer
 * is stuck as far as the relay is concerned.
 */
void dispatcher_endpoint_view(struct dispatcher *q, const char *endpoint_id, struct dispatcher_view *out)
{
    const struct board_entry *e;
    int64_t mono = clock_mono_ms();

    pthread_mutex_lock(&q->board_mu);
    e = board_find(q, endpoint_id, false);
    out->held = e != NULL ? e->held : 0;
    out->sending = e != NULL ? e->sending : 0;
    out->direct = e != NULL ? e->direct : true;
    out->answered = e != NULL && e->answered_mono != 0 && mono - e->answered_mono < ANSWERING_MS;
    out->answering = e != NULL && (out->answered ||
                                   (e->waiting_since_mono != 0 && mono - e->waiting_since_mono < ANSWERING_MS) ||
                                   (e->waiting_since_mono == 0 && e->held > 0));
    pthread_mutex_unlock(&q->board_mu);
}

bool dispatcher_window_moving(struct dispatcher *q) { return clock_mono_ms() - atomic_load(&q->last_answer_mono) < ANSWERING_MS; }

/*
 * The breaker opens in the store, when the attempts' record commits. Until
 * then an endpoint answering nothing but quick errors would get a new attempt
 * for each failed one: hundreds within one write. Once its failures here since
 * its last success reach the threshold, it starts nothing new while any of
 * them is unrecorded; then the breaker is open (its queue goes back to the
 * store) or, when a success elsewhere reset the stored count, it goes on.
 */
static void breaker_streak_note(struct dispatcher *q, struct job *j)
{
    struct ep_state *st = j->ep;

    if (j->result.status == DELIVERY_DELIVERED) {
        st->fail_streak = 0;
    } else {
        if (st->fail_streak < INT_MAX)
            st->fail_streak++;
        st->failures_unrecorded++;
        j->failure_unrecorded = true;
    }
    st->breaker_due = q->deps.breaker.failures > 0 && st->fail_streak >= q->deps.breaker.failures &&
                      st->failures_unrecorded > 0;
}

/* j's record ended (committed, refused or dropped): a held endpoint may start again. */
static void breaker_failure_settled(struct dispatcher *q, struct job *j)
{
    struct ep_state *st = j->ep;

    if (!j->failure_unrecorded)
        return;
    j->failure_unrecorded = false;
    if (--st->failures_unrecorded == 0 && st->breaker_due) {
        st->breaker_due = false;
        endpoint_cache_mark_ready(&q->cache, st);
    }
}

/* Frees what the job owns and gives its slot in the window back. */
void dispatcher_job_free(struct dispatcher *q, struct job *j)
{
    job_table_remove(&q->jobs, j);
    delivery_job_free(&j->dj);
    free(j->result.attempt.response);
    free(j->supersede_key);
    if (j->ep != NULL) {
        breaker_failure_settled(q, j);
        endpoint_cache_unref(&q->cache, j->ep);
        board_sync(q, j->ep, false);
    }
    atomic_fetch_sub(&q->held, 1);
    job_table_recycle(&q->jobs, j);
}

/* Under mu: one wake-up per drain is enough, and each costs a write to the loop's wake-up pipe. */
bool dispatcher_inbox_wake_needed(struct dispatcher *q)
{
    bool first = !q->woken;

    q->woken = true;
    return first;
}

static void inbox_finished(struct job *j, int result)
{
    struct dispatcher *q = j->q;

    bool wake;

    j->op_result = result;
    j->next = NULL;
    pthread_mutex_lock(&q->mu);
    if (q->finished_tail != NULL)
        q->finished_tail->next = j;
    else
        q->finished = j;
    q->finished_tail = j;
    wake = dispatcher_inbox_wake_needed(q);
    pthread_mutex_unlock(&q->mu);
    if (wake)
        http_engine_wakeup(q->engine);
}

/* ---- writer ops (fn on the writer thread inside the batch; done after commit) -- */

/*
 * Latest mode: a delivery that will be retried gives way to a newer version
 * of its resource that arrived while it was in flight (it becomes
 * superseded, in the transaction that records its attempt).
 */
static int supersede_after(struct store *s, void *const *args, size_t n, const int *results)
{
    const char **eps = NULL, **keys = NULL;
    size_t k = 0;
    int rc = 0;

    for (size_t i = 0; i < n; i++) {
        const struct job *j = args[i];
        k += j->supersede_key != NULL && results[i] == 0;
    }
    if (k == 0)
        return 0;
    eps = malloc(k * sizeof *eps);
    keys = malloc(k * sizeof *keys);
    if (eps == NULL || keys == NULL) {
        rc = HOOKD_ENOMEM;
        goto out;
    }
    k = 0;
    for (size_t i = 0; i < n; i++) {
        const struct job *j = args[i];
        if (j->supersede_key != NULL && results[i] == 0) {
            eps[k] = j->dj.d.endpoint_id;
            keys[k++] = j->supersede_key;
        }
    }
    rc = store_delivery_supersede(s, eps, keys, k, clock_now_ms());
out:
    free(eps);
    free(keys);
    return rc;
}

/*
 * The attempts' verdict on their endpoints, in the same transaction: each
 * endpoint's outcome (a success, then the failures after the last one) goes
 * to the breaker, which may open it or disable the endpoint; the jobs learn
 * which. Fenced-out attempts count too: they were real requests.
 */
static int endpoints_after(struct dispatcher *q, struct store *s, void *const *args, size_t n, const int *results)
{
    struct endpoint_outcome *o = calloc(n, sizeof *o);
    size_t k = 0;
    int rc;

    if (o == NULL)
        return HOOKD_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const struct job *j = args[i];
        struct endpoint_outcome *e = NULL;
        if (results[i] == HOOKD_EINVAL)
            continue;
        for (size_t x = 0; x < k && e == NULL; x++) {
            if (strcmp(o[x].endpoint_id, j->dj.d.endpoint_id) == 0)
                e = &o[x];
        }
        if (e == NULL) {
            e = &o[k++];
            e->endpoint_id = j->dj.d.endpoint_id;
        }
        if (j->result.status == DELIVERY_DELIVERED) {
            e->succeeded = true;
            e->failures = 0;
            e->first_failure_at = 0;
        } else if (e->failures++ == 0) {
            e->first_failure_at = j->result.attempt.started_at;
        }
    }
    rc = store_endpoint_state_record(s, o, k, &q->deps.breaker, clock_now_ms());
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct job *j = args[i];
        for (size_t x = 0; x < k; x++) {
            if (strcmp(o[x].endpoint_id, j->dj.d.endpoint_id) == 0) {
                j->breaker_opened = o[x].opened;
                j->endpoint_disabled = o[x].disabled;
            }
        }
    }
    free(o);
    return rc;
}

/*
 * The attempts' health figures (store health_record), in the same
 * transaction: every attempt counts, fenced-out ones too (they were real
 * requests), but only recorded results move the retry flow: a delivery that
 * became retrying, or stopped being it. Once a minute the buckets older than
 * HEALTH_KEEP_MS go in the same write.
 */
static int health_after(struct dispatcher *q, struct store *s, void *const *args, size_t n, const int *results)
{
    struct health_attempt *h = calloc(n > 0 ? n : 1, sizeof *h);
    int64_t now = clock_now_ms(), minute = now - now % HEALTH_MINUTE_MS, purge_before = 0;
    size_t k = 0;
    int rc;

    if (h == NULL)
        return HOOKD_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const struct job *j = args[i];
        const struct delivery_result *r = &j->result;
        bool was = j->dj.d.status == DELIVERY_RETRYING, is = r->status == DELIVERY_RETRYING;
        if (results[i] == HOOKD_EINVAL)
            continue;
        h[k++] = (struct health_attempt){
            .endpoint_id = j->dj.d.endpoint_id,
            .account = j->dj.d.account,
            .node = r->attempt.node ? r->attempt.node : q->deps.node,
            .started_at = r->attempt.started_at,
            .duration_ms = r->attempt.duration_ms,
            .status_code = r->attempt.status_code,
            .error_class = r->attempt.error_class,
            .error = r->attempt.error,
            .succeeded = r->status == DELIVERY_DELIVERED,
            .retry_delta = results[i] != 0 || was == is ? 0 : is ? 1 : -1,
        };
    }
    if (q->health_purged_minute != minute) {
        purge_before = minute - HEALTH_KEEP_MS;
        q->health_purged_minute = minute;
    }
    rc = store_health_record(s, h, k, purge_before > 0 ? purge_before : 0);
    free(h);
    return rc;
}

static int op_record(struct store *s, void *arg)
{
    struct job *j = arg;
    int rc = store_delivery_complete(s, &j->result, j->recorded_now);

    if (rc == 0)
        rc = supersede_after(s, (void *const *)&arg, 1, &rc);
    if (rc == 0 || rc == HOOKD_ESTALE) {
        int result = rc;
        rc = health_after(j->q, s, (void *const *)&arg, 1, &result);
        rc = rc != 0 ? rc : result;
    }
    if (rc == 0)
        rc = endpoints_after(j->q, s, (void *const *)&arg, 1, &rc);
    return rc;
}

/* Attempt results queued one after another: one multi-row write (the latest of their times is "now"). */
static int group_record(struct store *s, void *const *args, size_t n, int *results)
{
    struct delivery_result *rs = malloc(n * sizeof *rs);
    int64_t now = 0;
    int rc;

    if (rs == NULL)
        return HOOKD_ENOMEM; /* the writer then records them one by one */
    for (size_t i = 0; i < n; i++) {
        const struct job *j = args[i];
        rs[i] = j->result;
        now = j->recorded_now > now ? j->recorded_now : now;
    }
    rc = store_delivery_complete_many(s, rs, n, now, results);
    free(rs);
    if (rc == 0)
        rc = supersede_after(s, args, n, results);
    if (rc == 0 && n > 0)
        rc = health_after(((const struct job *)args[0])->q, s, args, n, results);
    if (rc == 0 && n > 0)
        rc = endpoints_after(((const struct job *)args[0])->q, s, args, n, results);
    return rc;
}

static int op_release(struct store *s, void *arg)
{
    struct job *j = arg;
    return store_delivery_release(s, j->dj.d.id, j->dj.d.lease_owner, j->dj.d.lease_token);
}

static void op_job_done(void *arg, int result) { inbox_finished(arg, result); }

/*
 * Queues the job's write for its phase (JOB_RECORDING: the attempt result;
 * JOB_RELEASING: the lease given back); on refusal (the writer is stopping)
 * the job is dropped and its lease left to expire. The writes are deferred:
 * they wait a few milliseconds for company in the writer, so at low rates
 * they share the fan-out's commit instead of adding one fsync (and one
 * write-lock hold, which the application's own commits would queue behind)
 * per delivery, and results queued together become one statement.
 */
void dispatcher_job_submit(struct dispatcher *q, struct job *j, enum job_phase phase)
{
    int rc;

    j->phase = phase;
    if (phase == JOB_RECORDING)
        rc = writer_submit_grouped(q->deps.writer, op_record, group_record, op_job_done, j);
    else
        rc = writer_submit_deferred(q->deps.writer, op_release, op_job_done, j);
    if (rc != 0) {
        log_limited(&q->lim_writer, LOG_WARN, PART, "cannot queue a write for %s: %s (its lease will expire)",
                    j->dj.d.id, hookd_strerror(rc));
        dispatcher_job_free(q, j);
        return;
    }
    q->outstanding_ops++;
}

/* The job's write for phase, held back (parked) while the fan-out that handed it over may not have committed: the write would not find the row. */
static void job_write(struct dispatcher *q, struct job *j, enum job_phase phase)
{
    if (j->fanout <= q->fanouts_decided) {
        dispatcher_job_submit(q, j, phase);
        return;
    }
    j->phase = phase;
    j->next = NULL;
    if (q->parked_tail != NULL)
        q->parked_tail->next = j;
    else
        q->parked = j;
    q->parked_tail = j;
}

/* ---- scheduling --------------------------------------------------------- */

static void fifo_push(struct dispatcher *q, struct ep_state *st, struct job *j)
{
    j->next = NULL;
    if (st->tail != NULL)
        st->tail->next = j;
    else
        st->head = j;
    st->tail = j;
    st->queued++;
    endpoint_cache_note_busy(&q->cache, st);
    endpoint_cache_mark_ready(&q->cache, st);
}

static struct job *fifo_pop(struct dispatcher *q, struct ep_state *st)
{
    struct job *j = st->head;

    if (j == NULL)
        return NULL;
    st->head = j->next;
    if (st->head == NULL)
        st->tail = NULL;
    st->queued--;
    endpoint_cache_note_busy(&q->cache, st);
    j->next = NULL;
    return j;
}

static struct request *request_take(struct dispatcher *q)
{
    struct request *r = NULL;

    if (q->n_idle > 0)
        return q->idle[--q->n_idle];
    if (q->n_requests >= (1 + SLOW_POOL_FACTOR) * q->max_in_flight)
        return NULL;
    if (request_new(&r) != 0) {
        log_limited(&q->lim_alloc, LOG_ERROR, PART, "cannot create a request");
        return NULL;
    }
    q->requests[q->n_requests++] = r;
    return r;
}

static void request_put(struct dispatcher *q, struct request *r)
{
    r->owner = NULL;
    q->idle[q->n_idle++] = r;
}

static void job_record(struct dispatcher *q, struct job *j, const struct request_outcome *o, const char *response,
                       int64_t started_at);

/* The engine's completion (on the loop, inside http_engine_run): frees the slot at once, then records the attempt. */
static void transfer_done(void *arg, const struct http_client_result *res)
{
    struct request *r = arg;
    struct job *j = r->owner;
    struct dispatcher *q = j->q;
    struct request_outcome o;

    q->in_flight--;
    j->ep->in_flight--;
    metrics_in_flight(-1);
    if (j->slow) {
        q->in_flight_slow--;
        j->ep->in_flight_slow--;
    }
    endpoint_cache_note_busy(&q->cache, j->ep);
    if (!res->cancelled) {
        /* A timeout is no answer: what a hung endpoint holds does not drain, and nothing may wait for it. */
        bool answered = res->transport != TRANSPORT_TIMEOUT;
        if (answered)
            j->ep->answered_mono = clock_mono_ms();
        board_sync(q, j->ep, answered);
    }
    if (res->cancelled) {
        /* Stop: the attempt is abandoned and its lease expires. */
        dispatcher_job_free(q, j);
        request_put(q, r);
        return;
    }
    endpoint_cache_mark_ready(&q->cache, j->ep);
    request_outcome(res, &o);
    job_record(q, j, &o, res->body, res->started_at_ms);
    request_put(q, r);
}

/* Starts one job's POST; a request that cannot even be built counts as a failed attempt. */
static void job_start(struct dispatcher *q, struct job *j, struct request *r)
{
    const struct endpoint *ep = &j->ep->ep;
    int64_t timeout = ep->timeout_ms > 0 ? ep->timeout_ms : q->deps.timeout_ms;
    int64_t now = clock_now_ms();
    int rc;

    const char *stage = "cannot build the request";

    j->phase = JOB_SENDING;
    rc = request_prepare(r, ep, &j->dj.ev, timeout, now);
    if (rc == 0) {
        r->owner = j;
        stage = "the HTTP client refuses the request";
        rc = http_engine_submit(q->engine, &r->http, transfer_done, r);
        if (rc == 0) {
            q->in_flight++;
            j->ep->in_flight++;
            metrics_in_flight(1);
            j->sent_mono = clock_mono_ms();
            j->slow = false;
            board_note_sent(q, j->ep);
            endpoint_cache_note_busy(&q->cache, j->ep);
            return;
        }
    }
    struct request_outcome o = {.err = TRANSPORT_OTHER, .retry_after_ms = -1};
    /* HOOKD_EINVAL is permanent (a body past the request cap, a URL or header line the
     * engine refuses): the same request would fail the same way, so it is dead at once. */
    o.outcome = rc == HOOKD_EINVAL ? OUTCOME_FAIL : retry_classify(o.err, 0);
    snprintf(o.error, sizeof o.error, "%s: %s%s", stage, hookd_strerror(rc),
             rc == HOOKD_EINVAL ? " (payload too large, or a URL or header that cannot be sent)" : "");
    request_put(q, r);
    job_record(q, j, &o, NULL, now);
}

/* Endpoint gone or disabled: hand the lease back so the delivery waits in the store. */
static void endpoint_release_all(struct dispatcher *q, struct ep_state *st)
{
    struct job *j;

    while ((j = fifo_pop(q, st)) != NULL) {
        log_debug(PART, "releasing %s: endpoint %s is %s", j->dj.d.id, st->id,
                  !st->present ? "gone" : st->ep.enabled ? "paused" : "disabled");
        job_write(q, j, JOB_RELEASING);
    }
}

/* What the endpoints a claim holds to their caps (claims_capped) hold of the window, judged at mono. */
struct capped_hold {
    int64_t mono;
    int n, refs;
};

static void capped_hold_add(struct ep_state *st, void *arg)
{
    struct capped_hold *h = arg;

    if (st->refs > 0 && claims_capped(st, h->mono)) {
        h->n++;
        h->refs += st->refs;
    }
}

/*
 * The window's fair share: what one endpoint may hold of it. Endpoints held
 * to their caps (slow, hung, paused: they take no more than their caps) keep
 * what they hold; the rest of the window is shared by the others that hold
 * jobs, the one asking (which may not hold any yet) and one more, so that an
 * endpoint that gets work next finds room. Eight hung endpoints holding 64
 * each leave an answering one a share of the 3,584 left, not an eleventh of
 * the 4,096. Judged every SHARE_EVERY_MS at most (a walk of every endpoint).
 */
static int dispatcher_endpoint_window_of(struct dispatcher *q, int64_t mono)
{
    struct capped_hold h = {.mono = mono};
    int share, left;

    if (q->share_mono != 0 && mono - q->share_mono < SHARE_EVERY_MS)
        return atomic_load(&q->endpoint_window);
    q->share_mono = mono;
    if (q->cache.n_holding > 0)
        endpoint_cache_each(&q->cache, capped_hold_add, &h);
    left = q->deps.window - h.refs;
    share = left / (q->cache.n_holding - h.n + 2);
    return share > 0 ? share : 1;
}

/*
 * The global in-flight cap is shared. With B endpoints busy (jobs queued or in
 * flight), an endpoint's fair share is max_in_flight / (B + 1), at least 1:
 * within it an endpoint may start while any slot is free; beyond it (up to its
 * own cap) only while a share stays free, and only while none of its
 * transfers is slow. A transfer that has waited slow_after for its answer
 * leaves the cap for the slow pool (SLOW_POOL_FACTOR times as large; idle
 * sockets cost little): an endpoint that hangs until its timeout holds its own
 * slots (its cap counts every transfer of it), but after slow_after not the
 * ones the endpoints waiting beside it need.
 */
static int fast_in_flight(const struct dispatcher *q) { return q->in_flight - q->in_flight_slow; }

static bool fair_share_allows(const struct dispatcher *q, const struct ep_state *st)
{
    int share = q->max_in_flight / (q->cache.n_busy + 1), fast = fast_in_flight(q);

    if (share < 1)
        share = 1;
    if (fast >= q->max_in_flight || q->in_flight >= (1 + SLOW_POOL_FACTOR) * q->max_in_flight)
        return false;
    if (st->in_flight - st->in_flight_slow < share)
        return true;
    return st->in_flight_slow == 0 && fast < q->max_in_flight - share;
}

/* Moves transfers that have waited slow_after into the slow pool (every 50 ms at most; while it has room). */
static void slow_sweep(struct dispatcher *q, int64_t mono)
{
    if (q->in_flight == q->in_flight_slow || mono - q->slow_checked_mono < 50)
        return;
    q->slow_checked_mono = mono;
    for (int i = 0; i < q->n_requests && q->in_flight_slow < SLOW_POOL_FACTOR * q->max_in_flight; i++) {
        struct job *j = q->requests[i]->owner;
        if (j == NULL || j->phase != JOB_SENDING || j->slow || mono - j->sent_mono < q->slow_after_ms)
            continue;
        j->slow = true;
        q->in_flight_slow++;
        if (j->ep->in_flight_slow++ == 0)
            board_sync(q, j->ep, false);
    }
}

/*
 * Whether the job's lease still covers an attempt: its timeout and a quarter
 * of the lease more (for the record), or half the lease when that is less,
 * so that a freshly leased job always goes. The leases the dispatcher holds
 * are renewed every third of the lease (claims.c), so a job normally passes;
 * one whose renewals the store refused (down, or slower than the lease) may
 * have its lease run out during the attempt, or already, and on a shared
 * store another node then claims and sends the delivery too. Such a job is
 * given back (fenced: if another node holds it now, the release changes
 * nothing) and claimed again, by any node, with a fresh lease. On a
 * single-node store no other node can take it, and this node's own claims
 * renew the copy it holds (lease_renewed): the job goes.
 */
static bool lease_covers_attempt(const struct dispatcher *q, const struct job *j, int64_t now)
{
    int64_t timeout = j->ep->ep.timeout_ms > 0 ? j->ep->ep.timeout_ms : q->deps.timeout_ms;
    int64_t need = min64(timeout + q->deps.lease_ms / 4, q->deps.lease_ms / 2);

    return q->deps.claimer == NULL || j->dj.d.lease_until - now >= need;
}

/* Starts queued jobs round-robin over endpoints while global and per-endpoint caps allow. */
static void schedule(struct dispatcher *q)
{
    struct ep_state *st, *held_back = NULL;
    int64_t now = clock_now_ms();

    slow_sweep(q, clock_mono_ms());
    while (fast_in_flight(q) < q->max_in_flight && q->in_flight < (1 + SLOW_POOL_FACTOR) * q->max_in_flight &&
           (st = endpoint_cache_next_ready(&q->cache)) != NULL) {
        if (!st->present || !st->ep.enabled) {
            endpoint_release_all(q, st);
            continue;
        }
        if (!fair_share_allows(q, st)) {
            /* Beyond its share: it waits for a slot to free (it is back in the ring below). */
            st->held_next = held_back;
            held_back = st;
            continue;
        }
        struct request *r = request_take(q);
        if (r == NULL) {
            endpoint_cache_mark_ready(&q->cache, st);
            break;
        }
        struct job *j = fifo_pop(q, st);
        if (!lease_covers_attempt(q, j, now)) {
            log_debug(PART, "%s: its lease ends in %lld ms, too soon for an attempt: given back", j->dj.d.id,
                      (long long)(j->dj.d.lease_until - now));
            request_put(q, r);
            dispatcher_job_submit(q, j, JOB_RELEASING);
        } else {
            job_start(q, j, r);
        }
        endpoint_cache_mark_ready(&q->cache, st);
    }
    while (held_back != NULL) {
        st = held_back;
        held_back = st->held_next;
        st->held_next = NULL;
        endpoint_cache_mark_ready(&q->cache, st);
    }
    atomic_store(&q->endpoint_window, dispatcher_endpoint_window_of(q, clock_mono_ms()));
}

/*
 * A delivery claimed again while we still hold it (its lease ran out while it
 * waited here): the held copy takes the new lease and the new copy goes.
 * When the held copy's result is on its way to the writer already, that write
 * carries the old token and meets the new one (ESTALE): job_finished then
 * writes it again with the token taken here, instead of the new copy sending
 * the delivery a second time. (A held copy being released keeps its old
 * token: its release then fails, and the new copy stays and is sent.)
 */
static bool lease_renewed(struct dispatcher *q, struct job *fresh)
{
    struct job *held = job_table_find(&q->jobs, fresh->dj.d.id);
    struct delivery *d;

    if (held == NULL || held->phase == JOB_RELEASING || fresh->dj.d.lease_token <= held->dj.d.lease_token)
        return false;
    d = &held->dj.d;
    d->lease_token = fresh->dj.d.lease_token;
    d->lease_until = fresh->dj.d.lease_until;
    d->unrecorded = fresh->dj.d.unrecorded; /* a claim's copy has its row: its pending one, written meanwhile */
    held->claimed_until = fresh->dj.d.lease_until;
    log_debug(PART, "%s: lease renewed while queued (token %lld)", d->id, (long long)d->lease_token);
    dispatcher_job_free(q, fresh);
    return true;
}

/* Files claimed or handed-over jobs under their endpoints; unknown endpoints trigger one reload. */
void dispatcher_jobs_accept(struct dispatcher *q, struct job_list *list, uint64_t fanout, bool handed)
{
    bool reloaded = false;

    for (size_t i = 0; i < list->n; i++) {
        struct delivery_job *dj = &list->items[i];
        struct job *j = job_get(q);
        struct ep_state *st;

        if (j == NULL) {
            /* Out of memory: drop it; the lease expires and the delivery is claimed again. */
            log_limited(&q->lim_alloc, LOG_ERROR, PART, "out of memory, dropping %s for now", dj->d.id);
            delivery_job_free(dj);
            atomic_fetch_sub(&q->held, 1);
            continue;
        }
        j->dj = *dj;
        j->claimed_until = j->dj.d.lease_until;
        j->fanout = fanout;
        memset(dj, 0, sizeof *dj);
        if (lease_renewed(q, j))
            continue;
        job_table_add(&q->jobs, j);
        st = endpoint_cache_find(&q->cache, j->dj.d.endpoint_id);
        if (st == NULL && !reloaded) {
            reloaded = true;
            if (endpoint_cache_reload(&q->cache) != 0)
                log_limited(&q->lim_store, LOG_WARN, PART, "cannot load endpoints");
            st = endpoint_cache_find(&q->cache, j->dj.d.endpoint_id);
        }
        if (st == NULL)
            st = endpoint_cache_placeholder(&q->cache, j->dj.d.endpoint_id);
        if (st == NULL) {
            log_limited(&q->lim_alloc, LOG_ERROR, PART, "out of memory, dropping %s for now", j->dj.d.id);
            dispatcher_job_free(q, j);
            continue;
        }
        j->ep = st;
        endpoint_cache_ref(&q->cache, st);
        board_sync(q, st, false);
        if (st->paused && (handed || q->claim_seq <= st->paused_claims)) {
            /* Handed over by the relay, or claimed before our record opened the breaker (a claim then
             * takes only the probe, and not before the probe interval): it waits in the store, unsent. */
            log_debug(PART, "releasing %s: endpoint %s is paused", j->dj.d.id, st->id);
            job_write(q, j, JOB_RELEASING);
            continue;
        }
        j->phase = JOB_QUEUED;
        fifo_push(q, st, j);
    }
    free(list->items);
    list->items = NULL;
    list->n = 0;
}

/* ---- outcomes ----------------------------------------------------------- */

/* Decides the delivery's next state from one attempt and queues the fenced write. */
static void job_record(struct dispatcher *q, struct job *j, const struct request_outcome *o, const char *response,
                       int64_t started_at)
{
    int64_t now = clock_now_ms();

    job_set_result(j, &j->ep->policy, o, response, started_at, now, rnd01(q), q->deps.node);
    breaker_streak_note(q, j);
    if (claims_lease_freed(q, j->ep))
        q->freed_since_claim = true;
    free(j->supersede_key);
    j->supersede_key = NULL;
    if (j->result.status == DELIVERY_RETRYING && j->ep->present && j->ep->ep.ordering == ORDERING_LATEST &&
        delivery_order_key(ORDERING_LATEST, &j->dj.ev, &j->supersede_key) != 0)
        log_limited(&q->lim_alloc, LOG_ERROR, PART, "out of memory: %s is retried, not superseded", j->dj.d.id);
    job_write(q, j, JOB_RECORDING);
}

/*
 * The fan-outs up to decided have ended: their held results go to the writer.
 * At stop (drop_rest) the results of fan-outs still open are dropped: their
 * leases expire, if those fan-outs commit at all.
 */
static void parked_release(struct dispatcher *q, uint64_t decided, bool drop_rest)
{
    struct job *j = q->parked, *keep = NULL, *keep_tail = NULL;

    if (decided > q->fanouts_decided)
        q->fanouts_decided = decided;
    q->parked = q->parked_tail = NULL;
    while (j != NULL) {
        struct job *next = j->next;
        j->next = NULL;
        if (j->fanout <= q->fanouts_decided) {
            dispatcher_job_submit(q, j, j->phase);
        } else if (drop_rest) {
            dispatcher_job_free(q, j);
        } else {
            if (keep_tail != NULL)
                keep_tail->next = j;
            else
                keep = j;
            keep_tail = j;
        }
        j = next;
    }
    q->parked = keep;
    q->parked_tail = keep_tail;
}

static void endpoint_release_all(struct dispatcher *q, struct ep_state *st);

/* Its breaker opened: what waits here goes back to the store (no attempt spent), where the probes come from. */
static void breaker_opened(struct dispatcher *q, struct ep_state *st)
{
    if (!st->paused) {
        log_warn(PART, "endpoint %s keeps failing: breaker open, %zu queued deliveries wait in the store", st->id,
                 st->queued);
        st->paused_claims = q->claim_seq;
    }
    st->paused = true;
    endpoint_release_all(q, st);
    board_sync(q, st, false);
}

/* Errors that mean the store is down or busy for now, not that the write is wrong. */
static bool store_down(int err) { return err == HOOKD_EUNAVAIL || err == HOOKD_EIO || err == HOOKD_EBUSY; }

/* A writer op of ours committed (or failed): log, learn the next wake-up, let the job go. */
static void job_finished(struct dispatcher *q, struct job *j)
{
    q->outstanding_ops--;
    if (j->phase == JOB_RECORDING) {
        if (j->op_result == 0) {
            if (q->rewrite_backoff_ms != 0)
                outage_over(PART);
            q->rewrite_backoff_ms = 0;
            log_limiter_reset(&q->lim_writer, PART, "recording attempts");
            job_log_result(j);
            metrics_delivery_recorded(&j->result, j->dj.ev.created_at);
            if (j->result.status == DELIVERY_RETRYING)
                q->next_wake_at = min64(q->next_wake_at, j->result.next_attempt_at);
            /* Claims on a connection of their own see the freed lease only now. */
            if (claims_lease_freed(q, j->ep) && q->due_held_back && q->deps.claimer != NULL)
                q->next_wake_at = 0;
            if (j->breaker_opened)
                breaker_opened(q, j->ep);
            breaker_failure_settled(q, j);
            if (j->result.status == DELIVERY_DELIVERED && j->ep->paused) {
                /* A probe (or a late answer) got through: the breaker closed, claims ramp the backlog up. */
                j->ep->paused = false;
                j->ep->ramp_until_mono = clock_mono_ms() + q->deps.ramp_ms;
                board_sync(q, j->ep, false);
                log_info(PART, "endpoint %s answers again: its breaker closed", j->ep->id);
                q->next_wake_at = 0;
            }
            if (j->endpoint_disabled)
                log_warn(PART, "endpoint %s disabled: failing continuously longer than disable_after", j->ep->id);
            if (j->result.disable_endpoint_reason != NULL || j->endpoint_disabled) {
                /* Ours to reload at once; the hub tells the rest (the relay reads the version anyway). */
                atomic_store(&q->endpoints_dirty, true);
                hub_notify(q->deps.hub, HUB_ENDPOINTS_CHANGED);
            }
            if (j->dj.d.lease_token > j->result.lease_token) {
                /* Our claim took it again after this retry committed (lease_renewed): that lease goes back for the next claim. */
                dispatcher_job_submit(q, j, JOB_RELEASING);
                return;
            }
        } else if (j->op_result == HOOKD_ESTALE && j->result.lease_token < j->dj.d.lease_token) {
            /* Our own claim took it again meanwhile (lease_renewed): the result goes with that lease. */
            log_debug(PART, "%s: recording the attempt again with its renewed lease (token %lld)", j->dj.d.id,
                      (long long)j->dj.d.lease_token);
            j->result.lease_token = j->dj.d.lease_token;
            j->result.unrecorded = j->dj.d.unrecorded ? &j->dj.d : NULL;
            dispatcher_job_submit(q, j, JOB_RECORDING);
            return;
        } else if (j->op_result == HOOKD_ESTALE) {
            log_debug(PART, "%s: lease taken over meanwhile, attempt not recorded", j->dj.d.id);
        } else if (store_down(j->op_result) && !atomic_load(&q->stopping)) {
            if (outage_error(j->op_result))
                outage_log(PART, "cannot record the attempt of %s: %s (will try again)", j->dj.d.id,
                           hookd_strerror(j->op_result));
            else
                log_limited(&q->lim_writer, LOG_WARN, PART, "cannot record the attempt of %s: %s (will try again)",
                            j->dj.d.id, hookd_strerror(j->op_result));
            rewrite_later(q, j);
            return;
        } else {
            log_limited(&q->lim_writer, LOG_WARN, PART, "cannot record the attempt of %s: %s (it will be retried)",
                        j->dj.d.id, hookd_strerror(j->op_result));
        }
    } else if (j->op_result == 0) {
        /* A lease given back ends as a result's does: a held endpoint's rows may go (claims.c, held_own). */
        if (claims_lease_freed(q, j->ep)) {
            q->freed_since_claim = true;
            if (q->due_held_back && q->deps.claimer != NULL)
                q->next_wake_at = 0;
        }
    } else if (j->op_result != HOOKD_ESTALE) {
        log_limited(&q->lim_writer, LOG_WARN, PART, "cannot release %s: %s (its lease will expire)", j->dj.d.id,
                    hookd_strerror(j->op_result));
    }
    dispatcher_job_free(q, j);
}

/* ---- the loop ----------------------------------------------------------- */

static void inbox_drain(struct dispatcher *q, int64_t now)
{
    struct batch *batches;
    struct job *finished;
    uint64_t decided;
    bool claimed, renewed;

    pthread_mutex_lock(&q->mu);
    batches = q->batches;
    finished = q->finished;
    claimed = q->claim_finished;
    renewed = q->renewal_finished;
    q->renewal_finished = false;
    decided = q->fanouts_decided_posted;
    q->batches = q->batches_tail = NULL;
    q->finished = q->finished_tail = NULL;
    q->claim_finished = false;
    q->woken = false;
    pthread_mutex_unlock(&q->mu);

    while (finished != NULL) {
        struct job *next = finished->next;
        job_finished(q, finished);
        finished = next;
    }
    if (claimed)
        claims_finished(q, now);
    if (renewed)
        renewal_finished(q);
    while (batches != NULL) {
        struct batch *next = batches->next;
        if (atomic_load(&q->stopping)) {
            atomic_fetch_sub(&q->held, (int)batches->jobs.n);
            job_list_free(&batches->jobs);
        } else {
            dispatcher_jobs_accept(q, &batches->jobs, batches->fanout, true);
        }
        free(batches);
        batches = next;
    }
    /* After the batches: a fan-out's decision is posted after its jobs. */
    if (decided > q->fanouts_decided || (q->parked != NULL && atomic_load(&q->stopping)))
        parked_release(q, decided, atomic_load(&q->stopping));
}

/*
 * The breaker is the store's, for every node: another node's attempts may
 * open it while jobs of the endpoint wait here. Seen at the next endpoint
 * check (SAFETY_POLL_MS, one read for the endpoints with queued jobs or
 * paused here), such an endpoint pauses here too and its queued jobs go back
 * to the store unsent, as on the node that opened it; only its probe stays
 * (the job whose claim took it as the probe: its lease is the breaker's
 * probe_until). A breaker closed elsewhere (another node's probe got
 * through, the endpoint enabled again) ends the pause here, with the ramp.
 */
static void breaker_seen(struct ep_state *st, const struct endpoint_state *es, void *arg)
{
    struct dispatcher *q = arg;

    if (es->breaker != BREAKER_CLOSED && !st->paused) {
        struct job *j, *keep = NULL, *keep_tail = NULL;
        size_t released = 0;
        st->paused = true;
        /* A claim out now may bring the probe, taken after this read: what claims bring stays. */
        st->paused_claims = 0;
        while ((j = fifo_pop(q, st)) != NULL) {
            if (es->breaker == BREAKER_HALF_OPEN && j->claimed_until == es->probe_until) {
                if (keep_tail != NULL)
                    keep_tail->next = j;
                else
                    keep = j;
                keep_tail = j;
                continue;
            }
            job_write(q, j, JOB_RELEASING);
            released++;
        }
        while ((j = keep) != NULL) {
            keep = j->next;
            fifo_push(q, st, j);
        }
        log_warn(PART,
                 "endpoint %s: its breaker is %s in the store (opened by another node, or before this one started):"
                 " %zu queued deliveries wait in the store",
                 st->id, breaker_name(es->breaker), released);
        board_sync(q, st, false);
    } else if (es->breaker == BREAKER_CLOSED && st->paused) {
        st->paused = false;
        st->fail_streak = 0;
        st->ramp_until_mono = clock_mono_ms() + q->deps.ramp_ms;
        board_sync(q, st, false);
        log_info(PART, "endpoint %s answers again: its breaker closed (seen in the store)", st->id);
        q->next_wake_at = 0;
    }
}

static void endpoints_refresh(struct dispatcher *q, int64_t mono)
{
    bool dirty = atomic_exchange(&q->endpoints_dirty, false);
    bool due = mono - q->endpoints_checked_mono >= SAFETY_POLL_MS;
    int rc;

    if (!dirty && !due)
        return;
    q->endpoints_checked_mono = mono;
    rc = dirty ? endpoint_cache_reload(&q->cache) : endpoint_cache_revalidate(&q->cache);
    if (rc == 0)
        rc = endpoint_cache_breakers(&q->cache, breaker_seen, q);
    if (rc != 0 && outage_error(rc))
        outage_log(PART, "cannot load endpoints: %s", hookd_strerror(rc));
    else if (rc != 0)
        log_limited(&q->lim_store, LOG_WARN, PART, "cannot load endpoints: %s", hookd_strerror(rc));
}

/*
 * Stop: no new sends. Queued jobs give their leases back at once (other nodes
 * take them without waiting for the lease); results the store refused while
 * down are written once more (the attempt happened: sending it again would
 * repeat a completed attempt); in-flight ones get drain_timeout_ms.
 */
static void release_endpoint_queue(struct ep_state *st, void *arg)
{
    struct dispatcher *q = arg;
    struct job *j;

    while ((j = fifo_pop(q, st)) != NULL)
        dispatcher_job_submit(q, j, JOB_RELEASING);
}

static void drain_queued(struct dispatcher *q, bool stopping)
{
    endpoint_cache_each(&q->cache, release_endpoint_queue, q);
    /* While draining, on their schedule; at the end, once more whatever it says. */
    rewrite_due(q, stopping ? INT64_MAX : clock_mono_ms(), false);
    /* Results of fan-outs still open wait for them while the relay may decide them; at stop they go. */
    if (stopping)
        parked_release(q, 0, true);
}

static void abandon_in_flight(struct dispatcher *q) { http_engine_cancel_all(q->engine); }

static int poll_timeout(struct dispatcher *q, int64_t now, int64_t mono)
{
    int64_t t = SAFETY_POLL_MS;

    if (!q->claim_in_flight && dispatcher_room(q) > 0)
        t = min64(t, q->next_wake_at > now ? q->next_wake_at - now : 0);
    if (q->rewrite != NULL)
        t = min64(t, q->rewrite_at_mono > mono ? q->rewrite_at_mono - mono : 0);
    if (!q->renewal_in_flight && atomic_load(&q->held) > 0)
        t = min64(t, q->renew_at_mono > mono ? q->renew_at_mono - mono : 0);
    /* Transfers that may turn slow, and jobs that may wait for the slots they free. */
    if (q->in_flight > q->in_flight_slow && q->cache.ring_head != NULL)
        t = min64(t, 100);
    return (int)t;
}

static void *dispatcher_main(void *arg)
{
    struct dispatcher *q = arg;
    int64_t stop_deadline = 0;
    bool leak = false;

    for (;;) {
        int64_t now = clock_now_ms(), mono = clock_mono_ms();
        bool stopping = atomic_load(&q->stopping), stop_mode = stopping || atomic_load(&q->draining);

        inbox_drain(q, now);
        /* While draining too: attempts in flight keep their leases until their results are recorded. */
        if (!stopping)
            renewal_maybe(q, now, mono);
        if (stop_mode) {
            if (stop_deadline == 0) {
                stop_deadline = mono + (q->deps.drain_timeout_ms > 0 ? q->deps.drain_timeout_ms : STOP_GRACE_MS);
                if (q->in_flight > 0)
                    log_info(PART, "draining: %d attempts in flight get up to %lld ms", q->in_flight,
                             (long long)(stop_deadline - mono));
            }
            drain_queued(q, stopping); /* also what arrived since (a claim's answer, a hand-off) */
            if (q->in_flight > 0 && mono >= stop_deadline) {
                log_warn(PART, "abandoning %d requests in flight at stop (their leases will expire)", q->in_flight);
                abandon_in_flight(q);
            }
            if (stopping && q->in_flight == 0 && q->outstanding_ops == 0 && q->rewrite == NULL && q->parked == NULL)
                break;
            if (stopping && mono >= stop_deadline + STOP_OPS_WAIT_MS) {
                log_error(PART, "%d writes still unanswered at stop; leaving the dispatcher's memory alone",
                          q->outstanding_ops);
                leak = true;
                break;
            }
        } else {
            endpoints_refresh(q, mono);
            rewrite_due(q, mono, false);
            claims_maybe(q, now);
            schedule(q);
        }
        if (http_engine_run(q->engine) > 0 && !stop_mode) {
            /* Due deliveries wait for the leases these results free: no waiting for company. */
            if (q->due_held_back && q->freed_since_claim && q->deps.claimer != NULL)
                writer_flush(q->deps.writer);
            continue; /* slots opened: start what waits before sleeping */
        }
        http_engine_wait(q->engine, stop_mode ? 50 : poll_timeout(q, now, mono));
    }
    return leak ? q : NULL;
}

/* ---- public ------------------------------------------------------------- */

static void dispatcher_free(struct dispatcher *q)
{
    if (q == NULL)
        return;
    /* The engine first: it drops transfers that may still read the requests' bodies. */
    http_engine_destroy(q->engine);
    for (int i = 0; i < q->n_requests; i++)
        request_free(q->requests[i]);
    job_table_destroy(&q->jobs);
    endpoint_cache_destroy(&q->cache);
    free(q->requests);
    free(q->idle);
    free(q->board);
    free(q->claim.capped);
    free(q->claim.full);
    free(q->claim.held);
    renewal_free(q);
    pthread_mutex_destroy(&q->board_mu);
    pthread_mutex_destroy(&q->mu);
    free(q);
}

int dispatcher_start(const struct dispatcher_deps *deps, struct dispatcher **out)
{
    struct dispatcher *q = NULL;
    int max = deps->max_in_flight > 0 ? deps->max_in_flight : 1;
    const struct http_engine_options eopt = {
        .max_transfers = (1 + SLOW_POOL_FACTOR) * max, /* max_in_flight and the slow pool */
        .connect_timeout_ms = deps->connect_timeout_ms,
        .timeout_ms = deps->timeout_ms,
        .response_max = deps->response_max > 0 ? (size_t)deps->response_max : 0,
        .allow_private_networks = deps->allow_private_networks,
    };
    int rc = HOOKD_ENOMEM;

    *out = NULL;
    q = calloc(1, sizeof *q);
    if (q == NULL)
        return HOOKD_ENOMEM;
    pthread_mutex_init(&q->mu, NULL);
    pthread_mutex_init(&q->board_mu, NULL);
    q->deps = *deps;
    q->max_in_flight = max;
    atomic_store(&q->endpoint_window, deps->window > 2 ? deps->window / 2 : 1);
    random_bytes(&q->rng, sizeof q->rng);
    q->rng |= 1; /* xorshift must not start at 0 */
    /* A transfer is slow once it waited a second (or half its timeout, when shorter) for its answer. */
    q->slow_after_ms = deps->timeout_ms / 2 < SLOW_AFTER_MS ? deps->timeout_ms / 2 : SLOW_AFTER_MS;
    if (q->slow_after_ms < 1)
        q->slow_after_ms = 1;
    q->requests = calloc((size_t)((1 + SLOW_POOL_FACTOR) * max), sizeof *q->requests);
    q->idle = calloc((size_t)((1 + SLOW_POOL_FACTOR) * max), sizeof *q->idle);
    if (q->requests == NULL || q->idle == NULL)
        goto fail;
    rc = http_engine_create(&eopt, &q->engine);
    if (rc != 0)
        goto fail;
    rc = job_table_init(&q->jobs, deps->window > 0 ? (size_t)deps->window : 1);
    if (rc == 0)
        rc = endpoint_cache_init(&q->cache, q->deps.store, &q->deps.retry, q->deps.endpoint_max_in_flight);
    if (rc != 0)
        goto fail;
    rc = endpoint_cache_reload(&q->cache);
    if (rc != 0)
        log_warn(PART, "cannot load endpoints yet: %s", hookd_strerror(rc));
    q->endpoints_checked_mono = clock_mono_ms();
    q->next_wake_at = 0; /* claim at once: work left by a previous run of this node */
    if (pthread_create(&q->thread, NULL, dispatcher_main, q) != 0) {
        rc = HOOKD_EIO;
        goto fail;
    }
    pthread_setname_np(q->thread, "hookd-dispatch");
    *out = q;
    return 0;
fail:
    dispatcher_free(q);
    return rc;
}

/* Posts a batch to the inbox; false when it was dropped (no memory, or stopping). */
static bool batch_post(struct dispatcher *q, struct job_list *jobs, uint64_t fanout)
{
    struct batch *b;
    bool wake;

    if (jobs->n == 0) {
        job_list_free(jobs);
        return false;
    }
    b = malloc(sizeof *b);
    if (b == NULL || atomic_load(&q->stopping)) {
        /* Dropped: the leases expire and the deliveries are claimed again. */
        free(b);
        job_list_free(jobs);
        return false;
    }
    b->jobs = *jobs;
    b->fanout = fanout;
    b->next = NULL;
    jobs->items = NULL;
    jobs->n = 0;
    atomic_fetch_add(&q->held, (int)b->jobs.n);
    /*
     * On the board at once, so that the relay's next fan-out counts them (the
     * loop thread puts its own counts there when it takes the batch in).
     */
    pthread_mutex_lock(&q->board_mu);
    for (size_t i = 0; i < b->jobs.n; i++) {
        struct board_entry *e = board_find(q, b->jobs.items[i].d.endpoint_id, true);
        if (e != NULL) {
            e->held++;
            e->sending++;
        }
    }
    pthread_mutex_unlock(&q->board_mu);
    pthread_mutex_lock(&q->mu);
    if (q->batches_tail != NULL)
        q->batches_tail->next = b;
    else
        q->batches = b;
    q->batches_tail = b;
    wake = dispatcher_inbox_wake_needed(q);
    pthread_mutex_unlock(&q->mu);
    if (wake)
        http_engine_wakeup(q->engine);
    return true;
}

void dispatcher_enqueue(struct dispatcher *q, struct job_list *jobs) { (void)batch_post(q, jobs, 0); }

uint64_t dispatcher_enqueue_tentative(struct dispatcher *q, struct job_list *jobs)
{
    uint64_t fanout = atomic_fetch_add(&q->fanouts, 1) + 1;

    return batch_post(q, jobs, fanout) ? fanout : 0;
}

void dispatcher_fanout_decided(struct dispatcher *q, uint64_t fanout)
{
    bool wake;

    if (fanout == 0)
        return;
    pthread_mutex_lock(&q->mu);
    if (fanout > q->fanouts_decided_posted)
        q->fanouts_decided_posted = fanout;
    wake = dispatcher_inbox_wake_needed(q);
    pthread_mutex_unlock(&q->mu);
    if (wake)
        http_engine_wakeup(q->engine);
}

int dispatcher_room(struct dispatcher *q) { return q->deps.window - atomic_load(&q->held); }

int dispatcher_endpoint_window(struct dispatcher *q) { return atomic_load(&q->endpoint_window); }

void dispatcher_wake(struct dispatcher *q)
{
    atomic_store(&q->claim_wanted, true);
    http_engine_wakeup(q->engine);
}

void dispatcher_endpoints_changed(struct dispatcher *q)
{
    atomic_store(&q->endpoints_dirty, true);
    /* An endpoint enabled again has deliveries waiting in the store. */
    atomic_store(&q->claim_wanted, true);
    http_engine_wakeup(q->engine);
}

void dispatcher_drain(struct dispatcher *q)
{
    if (q == NULL)
        return;
    atomic_store(&q->draining, true);
    http_engine_wakeup(q->engine);
}

void dispatcher_stop(struct dispatcher *q)
{
    void *leaked = NULL;

    if (q == NULL)
        return;
    atomic_store(&q->draining, true);
    atomic_store(&q->stopping, true);
    http_engine_wakeup(q->engine);
    pthread_join(q->thread, &leaked);
    if (leaked != NULL)
        return; /* writer callbacks may still arrive: the memory must stay valid */
    /* Batches that arrived after the loop's last drain. */
    inbox_drain(q, clock_now_ms());
    dispatcher_free(q);
}
