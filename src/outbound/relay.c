/*
 * The relay thread: notices committed outbox rows (in-process wake-ups, the
 * store's cheap change check, a slow safety poll) and, while the dispatcher
 * has room, fans them out into deliveries leased to this node.
 *
 * Two ways, by store:
 *  - shared stores (several nodes): one transaction on the relay's own
 *    connection (beside the writer's, so fan-out and attempt results proceed
 *    in parallel) locks and marks the rows, asks for each endpoint's free
 *    in-flight slots (its cap minus every node's leases), and inserts the
 *    deliveries, those that fit already leased to this node. The leased ones
 *    go to the dispatcher before the commit (the rows stay locked meanwhile,
 *    so no other node can fan them out): the commit's fsync leaves the
 *    commit→arrival path, and their results wait for the commit in the
 *    dispatcher. The rest are claimed as caps free up, so a slow endpoint
 *    cannot fill the window.
 *  - single-node stores (SQLite): the rows are read, the deliveries handed to
 *    the dispatcher at once, and their recording follows in a deferred writer
 *    op. No other node can fan out the same rows, a crash before the record
 *    commits only means the rows are fanned out (and sent) again with the same
 *    webhook-id, and the fan-out's fsync leaves the commit→arrival path.
 */
#include "outbound/relay.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/filter.h"
#include "core/ids.h"
#include "core/json_check.h"
#include "log.h"
#include "ops/metrics.h"
#include "outbound/dispatcher.h"
#include "outbound/outage.h"
#include "store/store.h"
#include "store/writer.h"

#define PART "relay"
#define TURN_MS 1             /* longest sleep between change checks: half of it is commit→fan-out latency */
#define SAFETY_POLL_MS 1000   /* re-check the outbox even without any signal */
#define FANOUT_BATCH_MAX 256  /* events per writer op */
#define ROUNDS_PER_TURN 64    /* full batches in a row before the next change check */
#define HANDOFFS_UNRECORDED_MAX 8 /* single-node hand-offs whose record is queued, at most, without room */
#define BACKOFF_MIN_MS 10
#define BACKOFF_MAX_MS 1000
#define RELAY_STOP_WAIT_MS 30000 /* relay_stop: the writer's answer to the last hand-offs' records */

struct relay {
    struct relay_deps deps;
    pthread_t thread;
    pthread_mutex_t mu;
    int wake_fd; /* eventfd: relay_wake, relay_stop */
    atomic_bool stop;

    /* Relay thread only: the jobs of the fan-out being made. */
    struct job_list op_jobs;
    size_t op_jobs_cap;
    bool op_left_due; /* shared store: the fan-out left due deliveries unclaimed */
    bool op_waiting;  /* the fan-out stopped to wait for room (look again next turn) */
    int64_t slots_wait_until; /* shared store: an answering endpoint had no slots in the store; mono ms */
    int64_t wait_since_mono;  /* shared store: the fan-out has waited for answering endpoints since (0: not) */
    /*
     * Shared store, per r->eps item: until when (mono ms) the fan-out waits for
     * the endpoint's slots while they turn over on other nodes, though this
     * node holds none of them (0: not); set when a fan-out found it without
     * slots there, turning (fanout_note_contended).
     */
    int64_t *contended_until;
    char wait_for[HOOKD_ID_MAX]; /* single-node: the answering endpoint it waits for ("": none) */

    /* Relay thread only: endpoints, reloaded when their version moves. */
    struct endpoint_list eps;
    int64_t eps_version;
    bool eps_loaded;

    /* Single-node hand-off: rows up to handed_seq went to the dispatcher; a
     * failed record makes the writer thread ask (under mu) to look again from rewind_to. */
    int64_t handed_seq;
    int64_t rewind_to; /* -1: none */
    struct handoff *unrecorded; /* under mu: hand-offs whose leases the store does not show yet */
    pthread_cond_t recorded;    /* with mu: the last unrecorded hand-off was answered (relay_stop waits for it) */

    /* Relay thread only. */
    struct store *rd;
    struct log_limiter lim, reject_lim;
    int64_t backoff_ms, retry_at_mono;
};

/* ---- the shared-store fan-out (relay thread, on the relay's connection) --- */

/* Reloads the endpoints unless those loaded are of the given version. */
static int endpoints_of_version(struct relay *r, struct store *s, int64_t version)
{
    int rc;

    if (r->eps_loaded && version == r->eps_version)
        return 0;
    endpoint_list_free(&r->eps);
    free(r->contended_until);
    r->contended_until = NULL;
    r->eps_loaded = false;
    rc = store_endpoint_list_all(s, &r->eps);
    if (rc != 0)
        return rc;
    /* Indexed like the list: what was learnt of the old one is learnt again at the next fan-out. */
    r->contended_until = calloc(r->eps.n + 1, sizeof *r->contended_until);
    if (r->contended_until == NULL) {
        endpoint_list_free(&r->eps);
        return HOOKD_ENOMEM;
    }
    r->eps_version = version;
    r->eps_loaded = true;
    return 0;
}

static int endpoints_current(struct relay *r, struct store *s)
{
    int64_t version = 0;
    int rc = store_endpoint_version(s, &version);

    return rc != 0 ? rc : endpoints_of_version(r, s, version);
}

static bool endpoint_wants(const struct endpoint *ep, const struct event *ev)
{
    if (ep->account != NULL && (ev->account == NULL || strcmp(ep->account, ev->account) != 0))
        return false;
    return event_type_matches_any((const char *const *)ep->event_types, ep->n_event_types, ev->type);
}

/*
 * The outbox is untrusted input: a row whose id, type, account, resource or
 * payload bytes break the rules of core/event_check.h (the store's reader
 * looked at them whole) gets no deliveries. It is marked with the reason in
 * its `error` column instead, visible as the event's "error", and the relay
 * goes on with the rows after it. The log line names the row by its seq and
 * the reason, never by its contents.
 */
#define REJECT_ERROR_MAX 96
static bool event_rejected(struct relay *r, const struct event *ev, char out[REJECT_ERROR_MAX])
{
    if (ev->bad_field == NULL)
        return false;
    snprintf(out, REJECT_ERROR_MAX, "%s %s", ev->bad_field, ev->bad_reason);
    log_limited(&r->reject_lim, LOG_WARN, PART, "outbox row seq %lld rejected: %s", (long long)ev->seq, out);
    return true;
}

/* Rows inserted with plain SQL are checked here, by the same rule as hookd_publish(). */
static bool payload_is_json(const char *payload)
{
    return payload != NULL && json_text_valid(payload, strlen(payload));
}

static char *dup_or_null(const char *s, bool *ok)
{
    char *p;

    if (s == NULL)
        return NULL;
    p = strdup(s);
    if (p == NULL)
        *ok = false;
    return p;
}

/* What the dispatcher needs of the event: everything but the idempotency key. */
static int event_dup(struct event *dst, const struct event *src)
{
    bool ok = true;

    *dst = *src;
    dst->idempotency_key = NULL;
    dst->type = dup_or_null(src->type, &ok);
    dst->account = dup_or_null(src->account, &ok);
    dst->resource_type = dup_or_null(src->resource_type, &ok);
    dst->resource_id = dup_or_null(src->resource_id, &ok);
    dst->payload = dup_or_null(src->payload, &ok);
    if (!ok) {
        event_free(dst);
        return HOOKD_ENOMEM;
    }
    return 0;
}

/* Appends a job for the just-inserted pending delivery d (strings borrowed; copied here). */
static int job_add(struct relay *r, const struct delivery *d, const struct event *ev)
{
    struct delivery_job *j;
    bool ok = true;

    if (r->op_jobs.n == r->op_jobs_cap) {
        size_t cap = r->op_jobs_cap == 0 ? 64 : r->op_jobs_cap * 2;
        struct delivery_job *grown = realloc(r->op_jobs.items, cap * sizeof *grown);
        if (grown == NULL)
            return HOOKD_ENOMEM;
        r->op_jobs.items = grown;
        r->op_jobs_cap = cap;
    }
    j = &r->op_jobs.items[r->op_jobs.n];
    memset(j, 0, sizeof *j);
    j->d = *d;
    j->d.account = dup_or_null(d->account, &ok);
    j->d.lease_owner = dup_or_null(d->lease_owner, &ok);
    j->d.last_error = NULL;
    j->d.order_key = NULL; /* the plan's; the dispatcher derives it again when it needs it */
    if (!ok || event_dup(&j->ev, ev) != 0) {
        delivery_job_free(j);
        return HOOKD_ENOMEM;
    }
    r->op_jobs.n++;
    return 0;
}

/* One delivery of ev to ep: skipped (disabled), dead (payload not JSON), or
 * pending, due now and, when leased, leased to us. Strings are borrowed from
 * ev and the relay's deps. */
static void delivery_plan(struct relay *r, const struct event *ev, const struct endpoint *ep, bool valid_json,
                          bool leased, int64_t now, struct delivery *out)
{
    struct delivery d;

    memset(&d, 0, sizeof d);
    id_new(d.id, "dlv_");
    snprintf(d.event_id, sizeof d.event_id, "%s", ev->id);
    snprintf(d.endpoint_id, sizeof d.endpoint_id, "%s", ep->id);
    d.account = ev->account; /* borrowed: d is never freed */
    d.created_at = now;
    if (!ep->enabled) {
        d.status = DELIVERY_SKIPPED;
    } else if (!valid_json) {
        d.status = DELIVERY_DEAD;
        d.last_error = "payload is not valid JSON";
    } else {
        d.status = DELIVERY_PENDING;
        d.next_attempt_at = now;
        if (leased) {
            d.lease_owner = (char *)r->deps.node; /* borrowed: the store only reads it, job_add copies it */
            d.lease_until = now + r->deps.lease_ms;
            d.lease_token = 1;
        }
    }
    *out = d;
}

/*
 * Ordering (kept apart from the rest of the fan-out). A delivery of an endpoint
 * in key or latest mode whose event names a resource is never leased at
 * fan-out: the claims take it when it is its resource's oldest open delivery
 * (store.h, claim_due), so no path sends it while an older one is open. It
 * carries the resource's key, the event's seq and version for that; in latest
 * mode, the insert is followed by superseding the older versions.
 */
static bool delivery_ordered(const struct endpoint *ep, const struct event *ev)
{
    return ep->ordering != ORDERING_NONE && ev->resource_type != NULL && ev->resource_id != NULL;
}

static int delivery_order_set(struct delivery *d, const struct endpoint *ep, const struct event *ev)
{
    d->order_seq = ev->seq;
    d->has_order_version = ev->has_resource_version;
    d->order_version = ev->resource_version;
    return delivery_order_key(ep->ordering, ev, &d->order_key);
}

/* Frees the order keys of a plan (the only strings a planned delivery owns). */
static void plan_free_keys(struct delivery *ds, size_t n)
{
    for (size_t i = 0; ds != NULL && i < n; i++) {
        free(ds[i].order_key);
        ds[i].order_key = NULL;
    }
}

/* After the insert, in its transaction: latest-mode keys of the plan supersede their older versions. */
static int plan_supersede(struct store *s, const struct delivery *ds, size_t n, int64_t now)
{
    const char **eps = NULL, **keys = NULL;
    size_t k = 0;
    int rc = 0;

    for (size_t i = 0; i < n; i++)
        k += ds[i].order_key != NULL && ds[i].order_key[0] == 'L';
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
        if (ds[i].order_key != NULL && ds[i].order_key[0] == 'L') {
            eps[k] = ds[i].endpoint_id;
            keys[k++] = ds[i].order_key;
        }
    }
    rc = store_delivery_supersede(s, eps, keys, k, now);
out:
    free(eps);
    free(keys);
    return rc;
}

/* Appends d to the plan (a growable array). */
static int plan_add(struct delivery **ds, size_t *n, size_t *cap, const struct delivery *d)
{
    if (*n == *cap) {
        size_t grown_cap = *cap == 0 ? 64 : *cap * 2;
        struct delivery *grown = realloc(*ds, grown_cap * sizeof *grown);
        if (grown == NULL)
            return HOOKD_ENOMEM;
        *ds = grown;
        *cap = grown_cap;
    }
    (*ds)[(*n)++] = *d;
    return 0;
}

/* Where each endpoint's slots are kept during one fan-out (index into ids/slots; -1: none wanted). */
struct fanout_slots {
    const char **ids;
    int *slots;
    bool *turning;    /* shared store: its slots turn over (lease_limits.turning) */
    int *of_endpoint; /* per r->eps item */
    bool *wait_full;  /* single-node: out of slots, the relay waits for it (it drains) instead of storing */
    size_t n;
};

static void fanout_slots_free(struct fanout_slots *fs)
{
    free(fs->ids);
    free(fs->slots);
    free(fs->turning);
    free(fs->of_endpoint);
    free(fs->wait_full);
}

/*
 * The free slots of each endpoint over the cluster, for this node's fan-out:
 * the store's count of the other nodes' leases (lease_limits.own), less what
 * this node sends or queues for it (the dispatcher's board). Its own leases
 * of deliveries already answered, waiting for their record, hold no slot.
 * Those with slots stay locked to the fan-out's transaction; turning (room
 * for n) says whose slots turn over.
 */
static int fanout_store_slots(struct relay *r, const char *const *ids, size_t n, int *slots, bool *turning)
{
    struct lease_limits lim = {.default_cap = r->deps.endpoint_max_in_flight, .ramp_ms = r->deps.ramp_ms,
                               .own = r->deps.node, .turning = turning};
    int rc = store_delivery_slots(r->rd, clock_now_ms(), &lim, ids, n, slots);

    for (size_t i = 0; rc == 0 && i < n; i++) {
        struct dispatcher_view v;
        if (slots[i] <= 0 || slots[i] == STORE_SLOTS_UNCAPPED)
            continue;
        dispatcher_endpoint_view(r->deps.dispatcher, ids[i], &v);
        slots[i] = slots[i] > v.sending ? slots[i] - v.sending : 0;
    }
    return rc;
}

/*
 * Asks the store how many of the new deliveries of each endpoint may go out
 * leased at once: the endpoints that get sendable deliveries from these
 * events, within their in-flight caps over all nodes, and none for a
 * capped endpoint whose older due deliveries still wait (claims take those
 * first).
 */
static int fanout_slots_get(struct relay *r, struct store *s, const struct event_list *evs, const bool *valid,
                            int64_t now, struct fanout_slots *fs)
{
    memset(fs, 0, sizeof *fs);
    fs->of_endpoint = malloc((r->eps.n + 1) * sizeof *fs->of_endpoint);
    fs->ids = malloc((r->eps.n + 1) * sizeof *fs->ids);
    fs->slots = malloc((r->eps.n + 1) * sizeof *fs->slots);
    fs->turning = calloc(r->eps.n + 1, sizeof *fs->turning);
    if (fs->of_endpoint == NULL || fs->ids == NULL || fs->slots == NULL || fs->turning == NULL)
        return HOOKD_ENOMEM;
    for (size_t k = 0; k < r->eps.n; k++) {
        const struct endpoint *ep = &r->eps.items[k];
        fs->of_endpoint[k] = -1;
        for (size_t i = 0; i < evs->n && ep->enabled; i++) {
            if (valid[i] && endpoint_wants(ep, &evs->items[i])) {
                fs->of_endpoint[k] = (int)fs->n;
                fs->ids[fs->n++] = ep->id;
                break;
            }
        }
    }
    return fanout_store_slots(r, fs->ids, fs->n, fs->slots, fs->turning);
}

/* How long a node remembers an endpoint whose slots other nodes' sends fill and turn over. */
#define CONTENDED_MS 1000

/*
 * The endpoints of this fan-out that had no slots while their leases turn
 * over: their slots are other nodes' (or a backlog the claims drain) and
 * come back within moments, so the next fan-outs wait for them even while
 * this node holds none of them (fanout_answering_limit). Without that, on
 * several nodes, the nodes not sending to an endpoint right now left every
 * event's delivery to it in the store, and once that backlog was there the
 * claims carried almost all deliveries (98 % in a 3-node drain).
 */
static void fanout_note_contended(struct relay *r, const struct fanout_slots *fs)
{
    int64_t until = clock_mono_ms() + CONTENDED_MS;

    for (size_t k = 0; k < r->eps.n; k++) {
        int i = fs->of_endpoint[k];
        if (i >= 0 && fs->slots[i] == 0 && fs->turning[i])
            r->contended_until[k] = until;
    }
}

/*
 * Takes (locks and marks) undispatched rows, inserts their deliveries in one
 * statement. Deliveries that fit their endpoint's free slots and the
 * dispatcher's window go in already leased to this node (and to the
 * dispatcher right after the insert): in the usual case, no backlog, that
 * saves a claim per delivery. The rest go in unleased for the dispatcher's claims.
 * A row present already is kept as it is (insert and mark commit together,
 * so only a row marked undispatched by hand can meet its old deliveries);
 * the job made for it then sends a repeat with the same webhook-id, whose
 * result the lease fences out.
 */
static int fanout_rows(struct relay *r, struct store *s, int limit, size_t *fetched)
{
    struct event_list evs = {0};
    struct fanout_slots fs = {0};
    struct delivery *ds = NULL;
    size_t n_ds = 0, cap = 0, left = 0;
    int64_t now = clock_now_ms(), version = 0;
    bool *valid = NULL;
    int room, rc;

    r->op_left_due = false;
    /* Locked and marked at once (it commits with the rest either way), with the endpoints' version. */
    rc = store_outbox_take(s, limit, now, &evs, &version);
    if (rc != 0 || evs.n == 0)
        goto out;
    *fetched = evs.n;
    valid = malloc(evs.n * sizeof *valid);
    if (valid == NULL) {
        rc = HOOKD_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < evs.n; i++)
        valid[i] = evs.items[i].bad_field == NULL && payload_is_json(evs.items[i].payload);
    rc = endpoints_of_version(r, s, version);
    if (rc == 0)
        rc = fanout_slots_get(r, s, &evs, valid, now, &fs);
    if (rc == 0)
        fanout_note_contended(r, &fs);
    room = dispatcher_room(r->deps.dispatcher);
    for (size_t i = 0; i < evs.n && rc == 0; i++) {
        const struct event *ev = &evs.items[i];
        char why[REJECT_ERROR_MAX];

        if (event_rejected(r, ev, why)) {
            rc = store_outbox_reject(s, ev->seq, why, now);
            continue;
        }
        for (size_t k = 0; k < r->eps.n && rc == 0; k++) {
            int *free_slots = fs.of_endpoint[k] >= 0 ? &fs.slots[fs.of_endpoint[k]] : NULL;
            bool leased;
            struct delivery d;
            if (!endpoint_wants(&r->eps.items[k], ev))
                continue;
            bool ordered = delivery_ordered(&r->eps.items[k], ev);
            leased = free_slots != NULL && *free_slots > 0 && room > 0 && !ordered;
            delivery_plan(r, ev, &r->eps.items[k], valid[i], leased, now, &d);
            if (d.status == DELIVERY_PENDING && leased) {
                (*free_slots)--;
                room--;
                d.unrecorded = true; /* only its lease is written now; its first result writes its row */
                rc = job_add(r, &d, ev);
            } else if (d.status == DELIVERY_PENDING) {
                left++;
                if (ordered)
                    rc = delivery_order_set(&d, &r->eps.items[k], ev);
            }
            if (rc == 0)
                rc = plan_add(&ds, &n_ds, &cap, &d);
            else
                free(d.order_key);
        }
    }
    if (rc == 0)
        rc = store_delivery_insert_many(s, ds, n_ds);
    if (rc == 0)
        rc = plan_supersede(s, ds, n_ds, now);
    if (rc == 0)
        metrics_fanout(evs.n, ds, n_ds);
    r->op_left_due = left > 0;
out:
    fanout_slots_free(&fs);
    plan_free_keys(ds, n_ds);
    free(ds);
    free(valid);
    event_list_free(&evs);
    return rc;
}

/*
 * How many events a shared-store fan-out takes now: no more than any
 * answering or idle endpoint (unordered, not rate-limited, neither slow nor
 * paused) has free slots, so that their deliveries go out at once,
 * unrecorded, instead of into the store for the claims (an answering
 * endpoint's slots come back within moments; 0: wait for them). This
 * node's own leases are counted in memory first (no round trip while they
 * fill the cap), then every node's in the store (fanout_wait_slots). A slow or
 * paused endpoint never holds the fan-out back: its deliveries wait in the
 * store. Those whose store slots the fan-out waits for go into w (room for
 * r->eps.n): the ones that answer this node, and those whose slots other
 * nodes' sends fill and turn over (r->contended_until), which the store
 * must show turning still.
 */
struct fanout_waits {
    const char **ids;
    size_t *of;   /* index into r->eps */
    bool *remote; /* its slots are waited for only while they turn over */
    size_t n;
};

static int fanout_answering_limit(struct relay *r, int limit, struct fanout_waits *w)
{
    int64_t mono = clock_mono_ms();
    /* Without room nothing goes out unrecorded anyway; with it, this node's claims take a backlog's free slots. */
    bool room = dispatcher_room(r->deps.dispatcher) > 0;

    w->n = 0;
    for (size_t k = 0; k < r->eps.n && limit > 0; k++) {
        const struct endpoint *ep = &r->eps.items[k];
        int cap = ep->max_in_flight > 0 ? ep->max_in_flight : r->deps.endpoint_max_in_flight;
        struct dispatcher_view v;

        if (!ep->enabled || ep->rate_limit > 0 || ep->ordering != ORDERING_NONE || cap <= 0)
            continue;
        dispatcher_endpoint_view(r->deps.dispatcher, ep->id, &v);
        /* Slow: its jobs wait for answers (one holding none is new, or idle: its cap is free). */
        if (!v.direct || (!v.answering && v.held > 0))
            continue;
        /*
         * Its backlog in the store holds the fan-out only while it answers: what
         * it holds then drains within moments. An idle one (new, or whose
         * requests just timed out) may not answer at all; the others' events must
         * not wait for its slots (its own deliveries wait in the store).
         */
        bool local = v.held > 0 && v.answered;
        if (local || (room && r->contended_until[k] > mono)) {
            w->ids[w->n] = ep->id;
            w->of[w->n] = k;
            w->remote[w->n++] = !local;
        }
        if (cap - v.sending < limit)
            limit = cap - v.sending > 0 ? cap - v.sending : 0;
    }
    return limit;
}

/* How long the fan-out leaves the store alone after it found an answering endpoint without slots there. */
#define SLOTS_WAIT_MS 5
/* The longest the fan-out waits for the store's slots of answering endpoints before it fans out into the store anyway. */
#define FANOUT_WAIT_MAX_MS 1000

/* Starts the clock of a wait for answering endpoints; true once it has run FANOUT_WAIT_MAX_MS (and again then). */
static bool fanout_waited_enough(struct relay *r)
{
    int64_t mono = clock_mono_ms();

    if (r->wait_since_mono == 0)
        r->wait_since_mono = mono;
    if (mono - r->wait_since_mono < FANOUT_WAIT_MAX_MS)
        return false;
    r->wait_since_mono = 0;
    return true;
}

/*
 * The store's side of fanout_answering_limit, in the fan-out's transaction:
 * the free slots of the endpoints that bound it, over every node. None while
 * the endpoint has a backlog in the store: its new deliveries would only join
 * it, and the claims that drain it would find more behind it each time, so the
 * fan-out waits for them to drain it instead. A remote one (w->remote) bounds
 * it only while its slots turn over; one that stopped is forgotten. Counted
 * under the endpoints' claim locks, which the take keeps (an endpoint with a
 * backlog is not locked, so the claims draining it never find it taken): no
 * other node leases what was counted before this fan-out's leases commit. A
 * count without the locks (a hint, before) was often overtaken: on 3 nodes
 * another node's fan-out took the slots between the count and the take, and
 * the deliveries counted for them went into the store.
 */
static int fanout_wait_slots(struct relay *r, const struct fanout_waits *w, int *limit)
{
    int *slots;
    bool *turning;
    int rc;

    if (w->n == 0)
        return 0;
    slots = malloc(w->n * sizeof *slots);
    turning = calloc(w->n, sizeof *turning);
    rc = slots != NULL && turning != NULL ? fanout_store_slots(r, w->ids, w->n, slots, turning) : HOOKD_ENOMEM;
    for (size_t i = 0; rc == 0 && i < w->n; i++) {
        if (w->remote[i] && !turning[i]) {
            r->contended_until[w->of[i]] = 0; /* hung, or idle: not worth waiting for */
            continue;
        }
        if (w->remote[i] && slots[i] == 0)
            r->contended_until[w->of[i]] = clock_mono_ms() + CONTENDED_MS;
        if (slots[i] != STORE_SLOTS_UNCAPPED && slots[i] < *limit)
            *limit = slots[i];
    }
    free(slots);
    free(turning);
    return rc;
}

/*
 * One shared-store fan-out in its own transaction on the relay's connection.
 * It first asks the store for the slots of the answering endpoints that
 * bound it (w; none: it does not ask), and takes nothing while one has
 * none (r->op_waiting), up to FANOUT_WAIT_MAX_MS in a row.
 * The leased deliveries go to the dispatcher once inserted, before the
 * commit; their results wait for dispatcher_fanout_decided(). If the commit
 * fails, everything is rolled back (the rows stay undispatched, the leases
 * unmade): whatever was sent meanwhile is sent again, with the same
 * webhook-id, when the rows are fanned out again.
 */
static int fan_out_batch(struct relay *r, int *limit_io, const struct fanout_waits *w, size_t *fetched)
{
    uint64_t fanout = 0;
    int limit = *limit_io, rc;

    *fetched = 0;
    r->op_left_due = false; /* set by fanout_rows; a turn that waits leaves nothing for the claims */
    rc = store_begin(r->rd);
    if (rc != 0)
        return rc;
    rc = fanout_wait_slots(r, w, &limit);
    bool wait = rc == 0 && limit <= 0;
    if (wait && fanout_waited_enough(r)) {
        /* Held longer than a moment (the store may hold it for a reason the board does not show): go on. */
        limit = *limit_io;
        wait = false;
    }
    if (wait)
        rc = endpoints_current(r, r->rd); /* one disabled or deleted meanwhile holds nothing next time */
    *limit_io = limit; /* what it asks for: fewer rows than that means the outbox is drained */
    if (wait) {
        /* An answering endpoint is full, or has a backlog, over the cluster: wait for it (commits nothing). */
        r->op_waiting = true;
        r->slots_wait_until = clock_mono_ms() + SLOTS_WAIT_MS;
    } else if (rc == 0) {
        r->wait_since_mono = 0;
        rc = fanout_rows(r, r->rd, limit, fetched);
    }
    if (rc == 0 && r->op_jobs.n > 0)
        fanout = dispatcher_enqueue_tentative(r->deps.dispatcher, &r->op_jobs);
    /*
     * Not waiting for the disk: the fan-out acknowledges nothing. Undone by a
     * crash of the server, its rows are fanned out again (and sent again with
     * the same webhook-ids); and the first attempt result written after it,
     * durably, makes it durable too, for the log is flushed in order.
     */
    rc = rc == 0 ? store_commit_lazy(r->rd) : rc;
    if (rc != 0 && store_rollback(r->rd) != 0)
        log_limited(&r->lim, LOG_WARN, PART, "rollback after a failed fan-out failed too");
    dispatcher_fanout_decided(r->deps.dispatcher, fanout);
    /* Deliveries left in the store for the caps: the dispatcher claims them when slots free up. */
    if (rc == 0 && r->op_left_due)
        dispatcher_wake(r->deps.dispatcher);
    job_list_free(&r->op_jobs);
    r->op_jobs_cap = 0;
    return rc;
}

/*
 * One shared-store fan-out of at most *limit events, bounded by what the
 * answering endpoints can take now (fanout_answering_limit); *limit becomes
 * what it asked the store for. While this node's own sends fill one of them
 * it waits (r->op_waiting, no round trip): they end within moments. While
 * the store shows one without slots (a backlog, other nodes' leases), it
 * asks again every SLOTS_WAIT_MS, and after FANOUT_WAIT_MAX_MS of that it fans
 * out into the store anyway (fan_out_batch).
 */
static int shared_fan_out(struct relay *r, int *limit, size_t *fetched)
{
    struct fanout_waits w = {0};
    int full = *limit, rc = r->eps_loaded ? 0 : endpoints_current(r, r->rd); /* who bounds the first one */

    *fetched = 0;
    if (rc != 0)
        return rc;
    w.ids = malloc((r->eps.n + 1) * sizeof *w.ids);
    w.of = malloc((r->eps.n + 1) * sizeof *w.of);
    w.remote = malloc((r->eps.n + 1) * sizeof *w.remote);
    if (w.ids == NULL || w.of == NULL || w.remote == NULL) {
        rc = HOOKD_ENOMEM;
        goto out;
    }
    *limit = fanout_answering_limit(r, full, &w);
    /* This node's own sends to an answering endpoint: they end within moments, no bound needed. */
    if (*limit == 0 || clock_mono_ms() < r->slots_wait_until)
        r->op_waiting = true; /* an answering endpoint is full: look again next turn */
    else
        rc = fan_out_batch(r, limit, &w, fetched);
out:
    free(w.ids);
    free(w.of);
    free(w.remote);
    return rc;
}

/* ---- single-node hand-off ------------------------------------------------ */

/* Leased deliveries of one endpoint in a hand-off whose record has not committed yet. */
struct handoff_leases {
    char endpoint_id[HOOKD_ID_MAX];
    int n;
};

/* A fan-out already handed to the dispatcher, to be recorded by the writer. */
struct handoff {
    struct relay *r;
    struct event_list evs;    /* owns what ds borrow */
    struct delivery *ds;
    size_t n_ds;
    int64_t *seqs;
    int64_t now;
    struct handoff_leases *leases; /* per endpoint, what this hand-off leased (not in the store until it commits) */
    size_t n_leases;
    struct handoff *next;          /* the relay's list of hand-offs not recorded yet (under mu) */
};

static void handoff_unlist(struct relay *r, struct handoff *h, int64_t rewind_from);

static void handoff_free(struct handoff *h)
{
    event_list_free(&h->evs);
    plan_free_keys(h->ds, h->n_ds);
    free(h->ds);
    free(h->seqs);
    free(h->leases);
    free(h);
}

/* Rows recorded by an earlier run are kept as they are; the send that follows is a harmless repeat. */
static int op_record_handoff(struct store *s, void *arg)
{
    struct handoff *h = arg;
    int rc = store_delivery_insert_many(s, h->ds, h->n_ds);

    if (rc == 0)
        rc = plan_supersede(s, h->ds, h->n_ds, h->now);
    if (rc == 0)
        rc = store_outbox_mark_dispatched(s, h->seqs, h->evs.n, h->now);
    for (size_t i = 0; rc == 0 && i < h->evs.n; i++) {
        const struct event *ev = &h->evs.items[i];
        if (ev->bad_field != NULL && ev->error != NULL)
            rc = store_outbox_reject(s, ev->seq, ev->error, h->now);
    }
    return rc;
}

/*
 * After the commit, on the writer thread. On failure the rows stay
 * undispatched: the relay reads them again (repeats share webhook-ids). The
 * relay is not touched after the unlist: relay_stop may free it then.
 */
static void op_record_handoff_done(void *arg, int result)
{
    struct handoff *h = arg;

    handoff_unlist(h->r, h, result != 0 ? h->seqs[0] - 1 : -1);
    if (result != 0) {
        log_warn(PART, "recording a fan-out of %zu events failed (%s); they will be fanned out again",
                 h->evs.n, hookd_strerror(result));
    } else {
        metrics_fanout(h->evs.n, h->ds, h->n_ds);
    }
    handoff_free(h);
}

/*
 * The per-endpoint side of a single-node hand-off (kept apart from the rest
 * of the fan-out): an endpoint gets leased deliveries only within its free
 * slots, the store's count (its lease limit, where lease_max is its share of
 * the dispatcher's window, minus its leases; none while it has due rows
 * waiting, or while the breaker, a rate limit or a ramp holds it) less the
 * leases of hand-offs not recorded yet. The rest goes into the store unleased
 * for the dispatcher's claims, so one endpoint's backlog never fills the
 * window the others need.
 */
static int handoff_leased_of(struct relay *r, const char *endpoint_id)
{
    int n = 0;

    pthread_mutex_lock(&r->mu);
    for (const struct handoff *h = r->unrecorded; h != NULL; h = h->next) {
        for (size_t i = 0; i < h->n_leases; i++) {
            if (strcmp(h->leases[i].endpoint_id, endpoint_id) == 0)
                n += h->leases[i].n;
        }
    }
    pthread_mutex_unlock(&r->mu);
    return n;
}

/* An answering endpoint's free slots in a hand-off: its share of the window (else its cap) less what it holds. */
static int handoff_allowance(struct relay *r, const struct endpoint *ep, const struct dispatcher_view *v, int share)
{
    int cap = ep->max_in_flight > 0 ? ep->max_in_flight : r->deps.endpoint_max_in_flight;
    int most = v->answered && share > cap ? share : cap;
    int allowance = most - v->held - handoff_leased_of(r, ep->id);

    return allowance > 0 ? allowance : 0;
}

/*
 * Whether the endpoint the last hand-off waited for (r->wait_for) is still
 * full and worth waiting for: then the rows are not read again (reading and
 * checking a batch of rows only to put them back cost the relay more than
 * the hand-offs themselves while one busy endpoint drained a backlog).
 */
static bool handoff_still_waiting(struct relay *r)
{
    struct dispatcher_view v;

    if (r->wait_for[0] == '\0')
        return false;
    for (size_t k = 0; k < r->eps.n; k++) {
        const struct endpoint *ep = &r->eps.items[k];
        if (strcmp(ep->id, r->wait_for) != 0)
            continue;
        if (!ep->enabled || ep->rate_limit > 0)
            break;
        dispatcher_endpoint_view(r->deps.dispatcher, ep->id, &v);
        if (!v.direct || !v.answering)
            break;
        return handoff_allowance(r, ep, &v, dispatcher_endpoint_window(r->deps.dispatcher)) == 0;
    }
    r->wait_for[0] = '\0';
    return false;
}

static int handoff_slots_get(struct relay *r, const struct event_list *evs, const bool *valid, int64_t now,
                             struct fanout_slots *fs)
{
    struct lease_limits lim = {.default_cap = r->deps.endpoint_max_in_flight, .ramp_ms = r->deps.ramp_ms};
    int share = dispatcher_endpoint_window(r->deps.dispatcher), rc = 0;
    const char **strict_ids = NULL;
    int *strict_slots = NULL, *strict_of = NULL;
    size_t n_strict = 0;

    memset(fs, 0, sizeof *fs);
    fs->of_endpoint = malloc((r->eps.n + 1) * sizeof *fs->of_endpoint);
    fs->ids = malloc((r->eps.n + 1) * sizeof *fs->ids);
    fs->slots = malloc((r->eps.n + 1) * sizeof *fs->slots);
    fs->wait_full = calloc(r->eps.n + 1, sizeof *fs->wait_full);
    strict_ids = malloc((r->eps.n + 1) * sizeof *strict_ids);
    strict_slots = malloc((r->eps.n + 1) * sizeof *strict_slots);
    strict_of = malloc((r->eps.n + 1) * sizeof *strict_of);
    if (!fs->of_endpoint || !fs->ids || !fs->slots || !fs->wait_full || !strict_ids || !strict_slots || !strict_of) {
        rc = HOOKD_ENOMEM;
        goto out;
    }
    for (size_t k = 0; k < r->eps.n; k++) {
        const struct endpoint *ep = &r->eps.items[k];
        fs->of_endpoint[k] = -1;
        for (size_t i = 0; i < evs->n && ep->enabled; i++) {
            if (!valid[i] || !endpoint_wants(ep, &evs->items[i]))
                continue;
            struct dispatcher_view v;
            size_t x = fs->n++;
            fs->of_endpoint[k] = (int)x;
            fs->ids[x] = ep->id;
            dispatcher_endpoint_view(r->deps.dispatcher, ep->id, &v);
            if (ep->rate_limit > 0 || !v.direct) {
                /* Rate-limited, slow, paused or ramping: the store's count, within its cap. */
                strict_of[n_strict] = (int)x;
                strict_ids[n_strict++] = ep->id;
            } else {
                /* Answering: its share of the window (else its cap), and the relay waits for it when full. */
                fs->slots[x] = handoff_allowance(r, ep, &v, share);
                fs->wait_full[x] = v.answering;
            }
            break;
        }
    }
    rc = store_delivery_slots(r->rd, now, &lim, strict_ids, n_strict, strict_slots);
    for (size_t i = 0; i < n_strict && rc == 0; i++) {
        int v = strict_slots[i];
        if (v > 0 && v != STORE_SLOTS_UNCAPPED) {
            v -= handoff_leased_of(r, strict_ids[i]);
            v = v < 0 ? 0 : v;
        }
        fs->slots[strict_of[i]] = v;
    }
out:
    free(strict_ids);
    free(strict_slots);
    free(strict_of);
    return rc;
}

/*
 * Whether event ev must wait for room rather than go into the store unleased:
 * one of its deliveries would be leased but for slots of an answering endpoint
 * (it drains: room comes back in moments) or for the window, while the window
 * moves. Waiting keeps the cheap path (hand-off) for busy endpoints; storing
 * keeps stuck ones (hung, paused) from holding everyone's events back.
 */
static bool handoff_must_wait(struct relay *r, const struct event *ev, bool valid, const struct fanout_slots *fs,
                              int room, bool moving)
{
    for (size_t k = 0; k < r->eps.n && valid; k++) {
        const struct endpoint *ep = &r->eps.items[k];
        int x = fs->of_endpoint[k];
        if (x < 0 || !ep->enabled || !endpoint_wants(ep, ev) || delivery_ordered(ep, ev))
            continue;
        if (fs->slots[x] > 0 && room <= 0 && moving)
            return true;
        if (fs->slots[x] == 0 && fs->wait_full[x]) {
            snprintf(r->wait_for, sizeof r->wait_for, "%s", ep->id);
            return true;
        }
    }
    return false;
}

/* Counts a leased delivery of endpoint_id in h (what handoff_leased_of adds up until it is recorded). */
static int handoff_count_lease(struct handoff *h, size_t *cap, const char *endpoint_id)
{
    for (size_t i = 0; i < h->n_leases; i++) {
        if (strcmp(h->leases[i].endpoint_id, endpoint_id) == 0) {
            h->leases[i].n++;
            return 0;
        }
    }
    if (h->n_leases == *cap) {
        size_t grown_cap = *cap == 0 ? 8 : *cap * 2;
        struct handoff_leases *grown = realloc(h->leases, grown_cap * sizeof *grown);
        if (grown == NULL)
            return HOOKD_ENOMEM;
        h->leases = grown;
        *cap = grown_cap;
    }
    snprintf(h->leases[h->n_leases].endpoint_id, HOOKD_ID_MAX, "%s", endpoint_id);
    h->leases[h->n_leases++].n = 1;
    return 0;
}

static int handoffs_unrecorded(struct relay *r)
{
    int n = 0;

    pthread_mutex_lock(&r->mu);
    for (const struct handoff *h = r->unrecorded; h != NULL; h = h->next)
        n++;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static void handoff_list(struct relay *r, struct handoff *h)
{
    pthread_mutex_lock(&r->mu);
    h->next = r->unrecorded;
    r->unrecorded = h;
    pthread_mutex_unlock(&r->mu);
}

/* Takes h off the list, and asks the relay to read again from rewind_from (>= 0) in the same lock. */
static void handoff_unlist(struct relay *r, struct handoff *h, int64_t rewind_from)
{
    pthread_mutex_lock(&r->mu);
    for (struct handoff **pp = &r->unrecorded; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == h) {
            *pp = h->next;
            break;
        }
    }
    if (rewind_from >= 0 && (r->rewind_to < 0 || rewind_from < r->rewind_to))
        r->rewind_to = rewind_from;
    if (r->unrecorded == NULL)
        pthread_cond_broadcast(&r->recorded);
    pthread_mutex_unlock(&r->mu);
}

/*
 * Reads up to limit rows after handed_seq on the relay's own connection, hands
 * the pending deliveries that fit their endpoint's free slots to the
 * dispatcher, and queues their recording (the rest go in unleased, for the
 * claims). The record op is queued before the jobs reach the dispatcher, so
 * every attempt result (queued later on the same FIFO writer) finds its
 * delivery row, and so does the claim the relay asks for.
 */
static int hand_off_batch(struct relay *r, int limit, size_t *fetched)
{
    struct handoff *h = calloc(1, sizeof *h);
    struct fanout_slots fs = {0};
    bool *valid = NULL, left = false, moving;
    size_t cap = 0, leases_cap = 0;
    int room, rc;

    *fetched = 0;
    if (h == NULL)
        return HOOKD_ENOMEM;
    h->r = r;
    h->now = clock_now_ms();
    pthread_mutex_lock(&r->mu);
    if (r->rewind_to >= 0 && r->rewind_to < r->handed_seq)
        r->handed_seq = r->rewind_to;
    r->rewind_to = -1;
    pthread_mutex_unlock(&r->mu);
    rc = endpoints_current(r, r->rd);
    if (rc != 0)
        goto fail;
    if (handoff_still_waiting(r)) {
        r->op_waiting = true;
        goto fail; /* rc is 0 */
    }
    rc = store_outbox_fetch(r->rd, r->handed_seq, limit, &h->evs);
    if (rc != 0 || h->evs.n == 0)
        goto fail;
    h->seqs = malloc(h->evs.n * sizeof *h->seqs);
    valid = malloc(h->evs.n * sizeof *valid);
    if (h->seqs == NULL || valid == NULL) {
        rc = HOOKD_ENOMEM;
        goto fail;
    }
    for (size_t i = 0; i < h->evs.n; i++)
        valid[i] = h->evs.items[i].bad_field == NULL && payload_is_json(h->evs.items[i].payload);
    rc = handoff_slots_get(r, &h->evs, valid, h->now, &fs);
    if (rc != 0)
        goto fail;
    room = dispatcher_room(r->deps.dispatcher);
    moving = dispatcher_window_moving(r->deps.dispatcher);
    for (size_t i = 0; i < h->evs.n; i++) {
        struct event *ev = &h->evs.items[i];
        char why[REJECT_ERROR_MAX];

        if (handoff_must_wait(r, ev, valid[i], &fs, room, moving)) {
            /* This event and the rest wait for room (next turn); those before it go now. */
            for (size_t x = i; x < h->evs.n; x++)
                event_free(&h->evs.items[x]);
            h->evs.n = i;
            r->op_waiting = true;
            break;
        }

        h->seqs[i] = ev->seq;
        if (event_rejected(r, ev, why)) {
            /* The record op writes it (ev->error is the row's column, read NULL: the row is undispatched). */
            free(ev->error);
            if ((ev->error = strdup(why)) == NULL) {
                rc = HOOKD_ENOMEM;
                goto fail;
            }
            continue;
        }
        for (size_t k = 0; k < r->eps.n; k++) {
            int *free_slots = fs.of_endpoint[k] >= 0 ? &fs.slots[fs.of_endpoint[k]] : NULL;
            const struct endpoint *ep = &r->eps.items[k];
            bool leased;
            struct delivery d;
            if (!endpoint_wants(ep, ev))
                continue;
            bool ordered = delivery_ordered(ep, ev);
            leased = free_slots != NULL && *free_slots > 0 && room > 0 && !ordered;
            delivery_plan(r, ev, ep, valid[i], leased, h->now, &d);
            if (d.status == DELIVERY_PENDING && leased) {
                if (*free_slots != STORE_SLOTS_UNCAPPED)
                    (*free_slots)--;
                room--;
                rc = job_add(r, &d, ev);
                if (rc == 0)
                    rc = handoff_count_lease(h, &leases_cap, ep->id);
            } else if (d.status == DELIVERY_PENDING) {
                left = true;
                if (ordered)
                    rc = delivery_order_set(&d, ep, ev);
            }
            if (rc == 0)
                rc = plan_add(&h->ds, &h->n_ds, &cap, &d);
            if (rc != 0) {
                free(d.order_key);
                goto fail;
            }
        }
    }
    if (h->evs.n == 0)
        goto fail; /* all wait (rc is 0) */
    *fetched = h->evs.n;
    r->handed_seq = h->seqs[h->evs.n - 1];
    handoff_list(r, h);
    rc = writer_submit_deferred(r->deps.writer, op_record_handoff, op_record_handoff_done, h);
    if (rc != 0) {
        handoff_unlist(r, h, -1);
        r->handed_seq = h->seqs[0] - 1;
        goto fail;
    }
    if (r->op_jobs.n > 0)
        dispatcher_enqueue(r->deps.dispatcher, &r->op_jobs);
    /* Deliveries left in the store: the claim queued behind the record finds them. */
    if (left)
        dispatcher_wake(r->deps.dispatcher);
    job_list_free(&r->op_jobs);
    r->op_jobs_cap = 0;
    fanout_slots_free(&fs);
    free(valid);
    return 0;
fail:
    job_list_free(&r->op_jobs);
    r->op_jobs_cap = 0;
    fanout_slots_free(&fs);
    free(valid);
    handoff_free(h);
    return rc;
}

/* ---- the relay thread ---------------------------------------------------- */

static void backoff(struct relay *r, const char *what, int rc)
{
    if (outage_error(rc))
        outage_log(PART, "%s: %s", what, hookd_strerror(rc));
    else
        log_limited(&r->lim, LOG_WARN, PART, "%s: %s", what, hookd_strerror(rc));
    r->backoff_ms = r->backoff_ms == 0 ? BACKOFF_MIN_MS : r->backoff_ms * 2;
    if (r->backoff_ms > BACKOFF_MAX_MS)
        r->backoff_ms = BACKOFF_MAX_MS;
    r->retry_at_mono = clock_mono_ms() + r->backoff_ms;
}

static void recovered(struct relay *r)
{
    if (r->backoff_ms != 0) {
        log_limiter_reset(&r->lim, PART, "fan-out");
        outage_over(PART);
    }
    r->backoff_ms = 0;
}

/*
 * Fans out while undispatched rows exist and the dispatcher has room. Returns
 * true when rows are left that must be looked at again without a new signal
 * (no room, an error, or the round limit).
 */
static bool fan_out_pending(struct relay *r)
{
    for (int round = 0; round < ROUNDS_PER_TURN && !atomic_load(&r->stop); round++) {
        bool any = false;
        size_t fetched = 0;
        int room, limit, rc;

        rc = r->rd != NULL ? 0 : store_open(r->deps.store, &r->rd);
        /* A shared store's fan-out finds out itself, in the round trip that locks the rows. */
        if (rc == 0 && store_backend(r->rd)->single_node)
            rc = store_outbox_pending(r->rd, &any);
        else
            any = rc == 0;
        if (rc != 0) {
            store_close(r->rd);
            r->rd = NULL;
            backoff(r, "cannot check the outbox", rc);
            return true;
        }
        if (!any)
            return false;
        /*
         * Without room in the window the rows are still fanned out, into the
         * store, unleased: the claims bring them in as room frees. Stopping
         * here would let endpoints that hold their share of the window (a
         * hung one) hold back everyone else's events. On a single-node store
         * the hand-offs waiting for their record then bound what this costs
         * (with room, the window does).
         */
        room = dispatcher_room(r->deps.dispatcher);
        /* A full window that moves frees room in moments: wait for it without reading the rows again. */
        if (room <= 0 && store_backend(r->rd)->single_node &&
            (dispatcher_window_moving(r->deps.dispatcher) || handoffs_unrecorded(r) >= HANDOFFS_UNRECORDED_MAX))
            return true;
        limit = room > 0 && room < FANOUT_BATCH_MAX ? room : FANOUT_BATCH_MAX;
        r->op_waiting = false;
        if (store_backend(r->rd)->single_node) {
            rc = hand_off_batch(r, limit, &fetched);
        } else {
            rc = shared_fan_out(r, &limit, &fetched);
        }
        if (rc != 0 && atomic_load(&r->stop))
            return false;
        if (rc != 0) {
            backoff(r, "fan-out failed", rc);
            return true;
        }
        recovered(r);
        if (fetched > 0)
            log_debug(PART, "fanned out %zu events", fetched);
        if (r->op_waiting) {
            metrics_count(METRIC_FANOUT_HELD);
            return true;
        }
        /* Fewer than asked: the rest (if any) is someone else's or not committed yet. */
        if ((int)fetched < limit)
            return false;
    }
    return true;
}

/*
 * Waits up to timeout_ms for a wake-up (relay_wake, relay_stop) or for the
 * store's change descriptor to turn readable (fd >= 0: a PostgreSQL
 * notification); returns false when stopping.
 */
static bool wait_turn(struct relay *r, int fd, int timeout_ms, bool *woken)
{
    struct pollfd fds[2] = {{.fd = r->wake_fd, .events = POLLIN}, {.fd = fd, .events = POLLIN}};
    uint64_t n;

    *woken = false;
    if (atomic_load(&r->stop))
        return false;
    if (poll(fds, fd >= 0 ? 2 : 1, timeout_ms) > 0 && (fds[0].revents & POLLIN) &&
        read(r->wake_fd, &n, sizeof n) == (ssize_t)sizeof n)
        *woken = true;
    return !atomic_load(&r->stop);
}

/*
 * How long the next wait may last. While rows may be left (no room in the
 * dispatcher's window, a back-off) or without a change descriptor (SQLite's
 * data_version is asked every turn), TURN_MS; with one (a PostgreSQL
 * LISTEN), until the safety poll, since a notification ends the wait at once.
 */
static int turn_ms(bool backlog, int fd, int64_t polled_at, int64_t mono)
{
    int64_t left = polled_at + SAFETY_POLL_MS - mono;

    if (backlog || fd < 0)
        return TURN_MS;
    return left < TURN_MS ? TURN_MS : (int)left;
}

static void *relay_main(void *arg)
{
    struct relay *r = arg;
    bool backlog = true; /* look at once: rows may have been left by a previous run */
    bool again = false;  /* a notification is waiting already: no wait at all */
    int64_t polled_at = clock_mono_ms();
    bool woken = false;
    int fd = -1;

    while (wait_turn(r, fd, again ? 0 : turn_ms(backlog, fd, polled_at, clock_mono_ms()), &woken)) {
        int64_t mono = clock_mono_ms();
        bool look = woken || backlog || again, changed = false;

        again = false;
        /* Every commit anywhere (ours included) moves the data version; outbox_pending then filters cheaply. */
        if (r->rd != NULL && store_changed(r->rd, &changed) == 0 && changed)
            look = true;
        if (mono - polled_at >= SAFETY_POLL_MS) {
            polled_at = mono;
            look = true;
        }
        if (!look || mono < r->retry_at_mono) {
            backlog = backlog || look;
        } else {
            backlog = fan_out_pending(r);
        }
        fd = r->rd != NULL ? store_changed_fd(r->rd) : -1;
        /* Notifications that came in with the fan-out's results wait in the connection, not on the socket. */
        if (fd >= 0 && store_changed(r->rd, &changed) == 0 && changed)
            again = true;
    }
    return NULL;
}

/* ---- public --------------------------------------------------------------- */

static void relay_free(struct relay *r)
{
    endpoint_list_free(&r->eps);
    free(r->contended_until);
    job_list_free(&r->op_jobs);
    store_close(r->rd);
    if (r->wake_fd >= 0)
        close(r->wake_fd);
    pthread_cond_destroy(&r->recorded);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

int relay_start(const struct relay_deps *deps, struct relay **out)
{
    struct relay *r = calloc(1, sizeof *r);
    int rc;

    *out = NULL;
    if (r == NULL)
        return HOOKD_ENOMEM;
    r->deps = *deps;
    r->rewind_to = -1;
    pthread_mutex_init(&r->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->recorded, &ca);
    pthread_condattr_destroy(&ca);
    r->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (r->wake_fd < 0) {
        rc = HOOKD_EIO;
        goto fail;
    }
    /* The change check needs a connection from the start, or the first commits would go unnoticed. */
    rc = store_open(deps->store, &r->rd);
    if (rc != 0)
        goto fail;
    if (pthread_create(&r->thread, NULL, relay_main, r) != 0) {
        rc = HOOKD_EIO;
        goto fail;
    }
    pthread_setname_np(r->thread, "hookd-relay");
    *out = r;
    return 0;
fail:
    relay_free(r);
    return rc;
}

static void wake_write(struct relay *r)
{
    uint64_t one = 1;

    /* Only fails when the counter is about to overflow: the relay is awake then anyway. */
    if (write(r->wake_fd, &one, sizeof one) != (ssize_t)sizeof one)
        return;
}

void relay_wake(struct relay *r)
{
    if (r != NULL)
        wake_write(r);
}

/*
 * The writer still runs (it stops after the relay) and answers the records
 * of the last hand-offs; their callbacks use the relay, so it is freed only
 * after them. A writer that cannot answer within RELAY_STOP_WAIT_MS keeps
 * the relay: a small leak at exit, never a use after free.
 */
void relay_stop(struct relay *r)
{
    struct timespec until;
    bool left;

    if (r == NULL)
        return;
    atomic_store(&r->stop, true);
    wake_write(r);
    pthread_join(r->thread, NULL);
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += RELAY_STOP_WAIT_MS / 1000;
    pthread_mutex_lock(&r->mu);
    while (r->unrecorded != NULL)
        if (pthread_cond_timedwait(&r->recorded, &r->mu, &until) != 0)
            break;
    left = r->unrecorded != NULL;
    pthread_mutex_unlock(&r->mu);
    if (left) {
        log_warn(PART, "stopping with fan-out records still queued in the writer; they finish without the relay");
        return;
    }
    relay_free(r);
}
