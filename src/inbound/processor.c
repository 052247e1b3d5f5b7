/*
 * Inbox workers: claims of due items through a writer, the forward handler
 * on an HTTP engine of its own (driven by this loop), and each step's outcome
 * as one fenced writer op (the machine handler is machine_handler.c). Logs
 * carry item ids, sources and outcomes only.
 */
#include "inbound/processor.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "inbound/processor_internal.h"
#include "inbound/source_cache.h"
#include "hub.h"
#include "log.h"
#include "ops/metrics.h"
#include "net/http_client.h"
#include "store/writer.h"

#define PART "inbox"

void processor_job_free(struct job *j)
{
    if (j->rq) {
        explicit_bzero(j->rq, sizeof *j->rq); /* header values may be secrets */
        free(j->rq);
    }
    inbox_item_free(&j->it);
    free(j);
}

/* ---- the classifier: what the application's answer means ------------------------------------ */

int forward_classify(const struct http_client_result *res)
{
    if (res->transport == TRANSPORT_BLOCKED)
        return FORWARD_REJECT; /* the address policy refuses it: trying again cannot help */
    if (res->transport != TRANSPORT_OK)
        return FORWARD_RETRY; /* timeout, refused connection, DNS */
    if (res->status >= 200 && res->status < 300)
        return FORWARD_OK;
    if (res->status == 409 || res->status == 425)
        return FORWARD_DEFER;
    if (res->status == 429 || res->status >= 500)
        return FORWARD_RETRY;
    return FORWARD_REJECT; /* other 4xx, and 1xx/3xx (redirects are not followed) */
}

/* ---- claims (op on the claim writer's thread; the rest on the loop) ------------------------------ */

static int op_claim(struct store *s, void *arg)
{
    struct processor *p = arg;
    int64_t now = clock_now_ms();

    return store_inbox_claim_due(s, p->deps.node, now, now + p->deps.lease_ms, p->claim_limit, &p->claimed);
}

static void op_claim_done(void *arg, int result)
{
    struct processor *p = arg;

    pthread_mutex_lock(&p->mu);
    p->claim_result = result;
    p->claim_finished = true;
    pthread_mutex_unlock(&p->mu);
    http_engine_wakeup(p->engine);
    atomic_fetch_sub(&p->outstanding, 1);
}

/*
 * A claim walks past the due items whose entity is busy (taken here, in
 * flight): while many are in flight, claims for one or two freed slots would
 * repeat that walk for each; so, while work is in flight, a claim waits until
 * a quarter of the slots (up to a full batch) are free. On a shared store a
 * claim is also a transaction on the server: while work is in flight, claims
 * are at least claim_gather_ms apart (at 1,000 events/s each completion
 * otherwise claimed the one or two items received meanwhile: 0.4 claims per
 * event), unless a whole batch is free.
 */
static int64_t claim_due(const struct processor *p) { return p->claim_done_at + p->deps.claim_gather_ms; }

static void claim_maybe(struct processor *p)
{
    int room = p->deps.workers - p->in_flight;
    int batch = p->deps.workers > STORE_LIST_MAX ? STORE_LIST_MAX : p->deps.workers;

    p->claim_held_until = 0;
    if (!p->want_claim || room <= 0 || p->claim_running)
        return;
    if (p->in_flight > 0 && room < (batch + 3) / 4)
        return; /* want_claim stays set: the next completions ask again */
    if (p->in_flight > 0 && room < batch && clock_mono_ms() < claim_due(p)) {
        p->claim_held_until = claim_due(p); /* the loop's wait ends then */
        return;
    }
    p->want_claim = false;
    p->claim_running = true;
    p->claim_limit = room > STORE_LIST_MAX ? STORE_LIST_MAX : room;
    atomic_fetch_add(&p->outstanding, 1);
    if (writer_submit(p->deps.claimer, op_claim, op_claim_done, p) != 0) {
        atomic_fetch_sub(&p->outstanding, 1);
        p->claim_running = false;
    }
}

/* ---- outcomes --------------------------------------------------------------------------------------- */

int processor_op_complete(struct store *s, void *arg)
{
    struct job *j = arg;
    return store_inbox_complete(s, &j->r, clock_now_ms());
}

void processor_op_complete_done(void *arg, int result)
{
    struct job *j = arg;
    struct processor *p = j->p;

    if (result == HOOKD_ESTALE)
        log_debug(PART, "item %s: lease lost meanwhile, outcome dropped", j->it.id);
    else if (result != 0)
        log_warn(PART, "item %s: outcome not written (%s); it is taken again after its lease", j->it.id,
                 hookd_strerror(result));
    else
        metrics_inbox_outcome(j->r.status);
    pthread_mutex_lock(&p->mu);
    j->next = p->written;
    p->written = j;
    pthread_mutex_unlock(&p->mu);
    http_engine_wakeup(p->engine);
    atomic_fetch_sub(&p->outstanding, 1);
}

/* Hands the outcome in j->r to the writer; the job comes back on p->written. */
void processor_outcome_write(struct processor *p, struct job *j)
{
    j->r.id = j->it.id;
    j->r.lease_owner = p->deps.node;
    j->r.lease_token = j->it.lease_token;
    if (j->r.status == INBOX_PENDING || j->r.status == INBOX_DEFERRED) {
        if (j->r.next_attempt_at < p->next_due)
            p->next_due = j->r.next_attempt_at;
    }
    atomic_fetch_add(&p->outstanding, 1);
    if (writer_submit(p->deps.writer, processor_op_complete, processor_op_complete_done, j) != 0) {
        atomic_fetch_sub(&p->outstanding, 1);
        p->in_flight--;
        processor_job_free(j);
    }
}

static int64_t schedule_at(const struct source_def *def, const struct processor *p, int n, bool clamp, bool *past)
{
    const int64_t *sched = def->n_retry_schedule ? def->retry_schedule_ms : p->deps.retry.schedule_ms;
    size_t len = def->n_retry_schedule ? def->n_retry_schedule : p->deps.retry.n_schedule;

    *past = false;
    if (len == 0) {
        *past = true;
        return 0;
    }
    if ((size_t)n > len) {
        if (!clamp) {
            *past = true;
            return 0;
        }
        n = (int)len;
    }
    return sched[n - 1];
}

/*
 * The step's outcome from the application's answer (attempt n = attempts + 1):
 * 2xx processed; 409/425 deferred until max_defer, then quarantined; other
 * 4xx quarantined; 5xx, 429 and transport errors retried on the schedule,
 * then quarantined.
 */
static void outcome_decide(struct processor *p, struct job *j, const struct source_def *def,
                           const struct http_client_result *res)
{
    int64_t now = clock_now_ms();
    int64_t max_defer = def->max_defer_ms ? def->max_defer_ms : p->deps.max_defer_ms;
    int n = j->it.attempts + 1;
    bool past;
    int64_t delay;

    j->r.attempts = n;
    j->r.result = NULL;
    if (res->transport == TRANSPORT_OK)
        snprintf(j->error, sizeof j->error, "the application answered %d", res->status);
    else
        snprintf(j->error, sizeof j->error, "%s", res->error[0] ? res->error : "no answer");
    j->r.error = j->error;
    switch (res->outcome) {
    case FORWARD_OK:
        j->r.status = INBOX_PROCESSED;
        j->r.result = "forwarded";
        j->r.error = NULL;
        break;
    case FORWARD_DEFER: {
        int64_t since = j->it.deferred_at ? j->it.deferred_at : now;
        if (now - since >= max_defer) {
            j->r.status = INBOX_QUARANTINED;
            snprintf(j->error + strlen(j->error), sizeof j->error - strlen(j->error),
                     "; deferred for longer than max_defer");
            break;
        }
        delay = schedule_at(def, p, n, true, &past);
        j->r.status = INBOX_DEFERRED;
        j->r.next_attempt_at = now + delay;
        if (j->r.next_attempt_at > since + max_defer)
            j->r.next_attempt_at = since + max_defer; /* the last look falls on the limit */
        break;
    }
    case FORWARD_RETRY:
        delay = schedule_at(def, p, n, false, &past);
        if (past) {
            j->r.status = INBOX_QUARANTINED;
            snprintf(j->error + strlen(j->error), sizeof j->error - strlen(j->error),
                     "; retry schedule exhausted after %d attempts", n);
        } else {
            j->r.status = INBOX_PENDING;
            j->r.next_attempt_at = now + delay;
        }
        break;
    default:
        j->r.status = INBOX_QUARANTINED;
        break;
    }
    log_debug(PART, "item %s of %s: attempt %d -> %s", j->it.id, j->it.source, n, inbox_status_name(j->r.status));
}

/* ---- the forward handler ---------------------------------------------------------------------------- */

static void forward_done(void *arg, const struct http_client_result *res)
{
    struct job *j = arg;
    struct processor *p = j->p;
    struct source_ref ref;

    if (res->cancelled) {
        p->in_flight--;
        processor_job_free(j);
        return;
    }
    if (source_cache_get(p->deps.sources, j->it.source, &ref) == 0) {
        outcome_decide(p, j, ref.def, res);
        source_cache_put(p->deps.sources, &ref);
    } else {
        struct source_def none = {0};
        outcome_decide(p, j, &none, res);
    }
    processor_outcome_write(p, j);
}

/* Builds and submits the signed POST; false when it cannot be sent (j->r then holds the outcome). */
static bool forward_start(struct processor *p, struct job *j, const struct source_def *def)
{
    const struct signature_scheme *sw = signature_scheme_find(SIGNATURE_SCHEME_DEFAULT);
    const char *secret = def->forward_secret.key;
    char sig[SIGNATURE_HEADER_MAX];
    int64_t ts = clock_now_ms() / 1000;
    size_t len = strlen(j->it.payload), n = 0;
    int rc;

    /* webhook-id is the inbox item's id: stable across retries and replays, unique across sources. */
    const struct signature_message msg = {.id = j->it.id, .timestamp_s = ts, .body = j->it.payload, .body_len = len};
    if (!sw || !secret || sw->sign(&msg, &secret, 1, sig, sizeof sig) != 0 || !sig[0]) {
        snprintf(j->error, sizeof j->error, "cannot sign the forward request (handler.forward.secret)");
        goto refused;
    }
    snprintf(j->url, sizeof j->url, "%s", def->forward_url);
    snprintf(j->lines[n++], HEADER_LINE_MAX, "Content-Type: application/json");
    snprintf(j->lines[n++], HEADER_LINE_MAX, "webhook-id: %s", j->it.id);
    snprintf(j->lines[n++], HEADER_LINE_MAX, "webhook-timestamp: %" PRId64, ts);
    snprintf(j->lines[n++], HEADER_LINE_MAX, "webhook-signature: %s", sig);
    snprintf(j->lines[n++], HEADER_LINE_MAX, "hookd-inbox-id: %s", j->it.id);
    snprintf(j->lines[n++], HEADER_LINE_MAX, "hookd-source: %s", j->it.source);
    snprintf(j->lines[n++], HEADER_LINE_MAX, "hookd-event-id: %s", j->it.event_id);
    snprintf(j->lines[n++], HEADER_LINE_MAX, "hookd-attempt: %d", j->it.attempts + 1);
    if (j->it.event_type)
        snprintf(j->lines[n++], HEADER_LINE_MAX, "hookd-event-type: %s", j->it.event_type);
    for (size_t i = 0; i < n; i++)
        j->headers[i] = j->lines[i];
    const struct http_client_request req = {
        .method = "POST",
        .url = j->url,
        .headers = j->headers,
        .n_headers = n,
        .body = j->it.payload,
        .body_len = len,
        .classify = forward_classify,
    };
    rc = http_engine_submit(p->engine, &req, forward_done, j);
    if (rc == 0)
        return true;
    snprintf(j->error, sizeof j->error, "cannot send the forward request: %s", hookd_strerror(rc));
refused:
    j->r.attempts = j->it.attempts + 1;
    j->r.status = INBOX_QUARANTINED;
    j->r.error = j->error;
    return false;
}

static bool job_start(struct processor *p, struct job *j)
{
    struct source_ref ref;
    int rc = source_cache_get(p->deps.sources, j->it.source, &ref);

    if (rc == HOOKD_ENOTFOUND) {
        j->r.attempts = j->it.attempts;
        j->r.status = INBOX_QUARANTINED;
        snprintf(j->error, sizeof j->error, "the source %s no longer exists", j->it.source);
        j->r.error = j->error;
        processor_outcome_write(p, j);
        return true;
    }
    if (rc != 0) { /* the cache cannot read the store: look again soon, keep the attempt count */
        j->r.attempts = j->it.attempts;
        j->r.status = j->it.status == INBOX_DEFERRED ? INBOX_DEFERRED : INBOX_PENDING;
        j->r.next_attempt_at = clock_now_ms() + PROCESSOR_POLL_MS;
        j->r.error = j->it.error;
        j->idle = true;
        processor_outcome_write(p, j);
        return false;
    }
    if (ref.def->machine) {
        machine_start(p, j, ref.def);
        source_cache_put(p->deps.sources, &ref);
        return true;
    }
    if (!ref.def->forward_url) {
        /* Nothing processes this source's items yet: they wait, unchanged, for a handler. */
        j->r.attempts = j->it.attempts;
        j->r.status = j->it.status;
        j->r.next_attempt_at = clock_now_ms() + PROCESSOR_NO_HANDLER_MS;
        j->r.error = j->it.error;
        j->r.result = NULL;
        j->idle = true;
        source_cache_put(p->deps.sources, &ref);
        processor_outcome_write(p, j);
        return false;
    }
    if (!forward_start(p, j, ref.def))
        processor_outcome_write(p, j);
    source_cache_put(p->deps.sources, &ref);
    return true;
}

/* ---- the loop ------------------------------------------------------------------------------------------- */

static void hand_overs(struct processor *p)
{
    struct inbox_list claimed = {0};
    struct job *written;
    bool finished;
    int result;

    pthread_mutex_lock(&p->mu);
    finished = p->claim_finished;
    result = p->claim_result;
    if (finished) {
        claimed = p->claimed;
        p->claimed = (struct inbox_list){0};
        p->claim_finished = false;
        p->claim_running = false;
    }
    if (finished)
        p->claim_done_at = clock_mono_ms();
    written = p->written;
    p->written = NULL;
    struct job *reconcile = p->to_reconcile;
    p->to_reconcile = NULL;
    pthread_mutex_unlock(&p->mu);

    while (reconcile) {
        struct job *j = reconcile;
        reconcile = j->next;
        if (atomic_load(&p->stopping)) {
            p->in_flight--;
            processor_job_free(j); /* its lease expires, or the node's restart frees it */
        } else {
            machine_reconcile_start(p, j);
        }
    }

    bool emitted = false;
    while (written) {
        struct job *j = written;
        written = j->next;
        p->in_flight--;
        if (!j->idle)
            p->want_claim = true; /* its entity is free, its slot too */
        emitted = emitted || j->emitted;
        processor_job_free(j);
    }
    p->outbox_wake = p->outbox_wake || emitted || atomic_exchange(&p->accept_emitted, false);
    if (!finished)
        return;
    if (atomic_load(&p->stopping)) {
        inbox_list_free(&claimed); /* their leases expire, or the node's restart frees them */
        return;
    }
    if (result != 0) {
        log_debug(PART, "claim failed: %s", hookd_strerror(result));
        inbox_list_free(&claimed);
        return;
    }
    size_t worked = 0;
    for (size_t i = 0; i < claimed.n; i++) {
        struct job *j = calloc(1, sizeof *j);
        if (!j) {
            inbox_item_free(&claimed.items[i]); /* its lease expires */
            continue;
        }
        j->p = p;
        j->it = claimed.items[i];
        memset(&claimed.items[i], 0, sizeof claimed.items[i]);
        p->in_flight++;
        worked += job_start(p, j);
    }
    /* A full batch: there may be more, unless it was all items nothing processes (they wait for the poll). */
    if (claimed.n >= (size_t)p->claim_limit && worked > 0)
        p->want_claim = true;
    inbox_list_free(&claimed);
}

/*
 * The decision connections do not notify (store_quiet_outbox): the relay
 * learns of their events from here, at most every PROCESSOR_RELAY_WAKE_MS
 * (waking it per decision had it fan out, one transaction each, for nearly
 * every event). Returns the ms until a wake-up still owed is due, or -1.
 */
static int64_t relay_wake_maybe(struct processor *p)
{
    int64_t mono = clock_mono_ms(), due = p->outbox_woken_at + PROCESSOR_RELAY_WAKE_MS;

    if (!p->outbox_wake)
        return -1;
    if (mono < due)
        return due - mono;
    p->outbox_wake = false;
    p->outbox_woken_at = mono;
    hub_notify(p->deps.hub, HUB_OUTBOX_CHANGED);
    return -1;
}

static void *processor_main(void *arg)
{
    struct processor *p = arg;
    int64_t last_poll = 0;

    while (!atomic_load(&p->stopping)) {
        int64_t now = clock_now_ms(), wait;

        if (atomic_exchange(&p->woken, false))
            p->want_claim = true;
        if (now - last_poll >= PROCESSOR_POLL_MS || now >= p->next_due) {
            last_poll = now;
            p->want_claim = true;
            if (now >= p->next_due)
                p->next_due = INT64_MAX;
        }
        hand_overs(p);
        claim_maybe(p);
        http_engine_run(p->engine);
        hand_overs(p);
        claim_maybe(p);
        int64_t relay_wait = relay_wake_maybe(p);
        now = clock_now_ms();
        wait = last_poll + PROCESSOR_POLL_MS - now;
        if (p->next_due != INT64_MAX && p->next_due - now < wait)
            wait = p->next_due - now;
        if (relay_wait >= 0 && relay_wait < wait)
            wait = relay_wait;
        if (p->claim_held_until && p->claim_held_until - clock_mono_ms() < wait)
            wait = p->claim_held_until - clock_mono_ms(); /* a claim held back by claim_gather_ms */
        if (wait < 0)
            wait = 0;
        if (!atomic_load(&p->woken))
            http_engine_wait(p->engine, (int)wait);
    }
    return NULL;
}

void processor_wake(void *arg)
{
    struct processor *p = arg;

    if (!atomic_exchange(&p->woken, true))
        http_engine_wakeup(p->engine);
}

int processor_start(const struct processor_deps *deps, struct processor **out)
{
    struct processor *p = calloc(1, sizeof *p);
    int rc;

    *out = NULL;
    if (!p)
        return HOOKD_ENOMEM;
    p->deps = *deps;
    if (p->deps.workers < 1)
        p->deps.workers = 1;
    /* A lease shorter than a forward could let another worker take the item while it is in flight. */
    if (p->deps.lease_ms < p->deps.timeout_ms + p->deps.connect_timeout_ms + PROCESSOR_LEASE_MARGIN_MS)
        p->deps.lease_ms = p->deps.timeout_ms + p->deps.connect_timeout_ms + PROCESSOR_LEASE_MARGIN_MS;
    p->next_due = INT64_MAX;
    p->want_claim = true;
    pthread_mutex_init(&p->mu, NULL);
    const struct http_engine_options eo = {
        .max_transfers = p->deps.workers,
        .connect_timeout_ms = deps->connect_timeout_ms,
        .timeout_ms = deps->timeout_ms,
        .response_max = 1024,
        .allow_private_networks = deps->allow_private_networks,
    };
    rc = http_engine_create(&eo, &p->engine);
    if (rc == 0)
        rc = machine_cache_create(&p->machines);
    if (rc == 0 && pthread_create(&p->thread, NULL, processor_main, p) != 0)
        rc = HOOKD_ENOMEM;
    if (rc != 0) {
        http_engine_destroy(p->engine);
        machine_cache_destroy(p->machines);
        pthread_mutex_destroy(&p->mu);
        free(p);
        return rc;
    }
    log_info(PART, "%d inbox workers", p->deps.workers);
    *out = p;
    return 0;
}

void processor_stop(struct processor *p)
{
    struct timespec pause = {.tv_sec = 0, .tv_nsec = 1000000};

    if (!p)
        return;
    atomic_store(&p->stopping, true);
    http_engine_wakeup(p->engine);
    pthread_join(p->thread, NULL);
    http_engine_cancel_all(p->engine); /* their done frees each job */
    /* The writers still run: wait for the done of every op handed to them, which touch p. */
    while (atomic_load(&p->outstanding) > 0)
        nanosleep(&pause, NULL);
    hand_overs(p); /* frees written jobs; claimed items are dropped with their leases */
    while (p->written || p->to_reconcile)
        hand_overs(p);
    http_engine_destroy(p->engine);
    machine_cache_destroy(p->machines);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
