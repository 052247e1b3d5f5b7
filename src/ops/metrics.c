/*
 * Prometheus metrics: per-process counters and histograms kept in relaxed
 * atomics (a hot path pays one atomic add), and the text exposition
 * (version 0.0.4) with the store's cluster-wide gauges, cached.
 */
#include "ops/metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "store/store.h"

/* ---- counters ----------------------------------------------------------- */

static _Atomic uint64_t counters[METRIC_COUNTERS];

/* Each counter is one sample of a family: name, then the label pair that sets it apart (NULL: none). */
struct counter_def {
    const char *family;
    const char *label;
    const char *value;
};

static const struct counter_def counter_defs[METRIC_COUNTERS] = {
    [METRIC_EVENTS_PUBLISHED] = {"hookd_events_published_total", NULL, NULL},
    [METRIC_DELIVERIES_CREATED] = {"hookd_deliveries_created_total", NULL, NULL},
    [METRIC_DELIVERIES_SKIPPED] = {"hookd_deliveries_total", "outcome", "skipped"},
    [METRIC_DELIVERIES_DELIVERED] = {"hookd_deliveries_total", "outcome", "delivered"},
    [METRIC_DELIVERIES_RETRYING] = {"hookd_deliveries_total", "outcome", "retrying"},
    [METRIC_DELIVERIES_DEAD] = {"hookd_deliveries_total", "outcome", "dead"},
    [METRIC_ATTEMPTS_2XX] = {"hookd_attempts_total", "class", "2xx"},
    [METRIC_ATTEMPTS_3XX] = {"hookd_attempts_total", "class", "3xx"},
    [METRIC_ATTEMPTS_4XX] = {"hookd_attempts_total", "class", "4xx"},
    [METRIC_ATTEMPTS_5XX] = {"hookd_attempts_total", "class", "5xx"},
    [METRIC_ATTEMPTS_OTHER] = {"hookd_attempts_total", "class", "other"},
    [METRIC_ATTEMPTS_ERROR] = {"hookd_attempts_total", "class", "error"},
    [METRIC_DELIVERY_CLAIMS] = {"hookd_delivery_claims_total", NULL, NULL},
    [METRIC_FANOUT_HELD] = {"hookd_fanout_held_total", NULL, NULL},
    [METRIC_INBOUND_ACCEPTED] = {"hookd_inbound_accepted_total", NULL, NULL},
    [METRIC_INBOUND_DUPLICATE] = {"hookd_inbound_duplicates_total", NULL, NULL},
    [METRIC_INBOUND_REJECTED_BAD_SIGNATURE] = {"hookd_inbound_rejected_total", "reason", "bad_signature"},
    [METRIC_INBOUND_REJECTED_MISSING_SIGNATURE] = {"hookd_inbound_rejected_total", "reason", "missing_signature"},
    [METRIC_INBOUND_REJECTED_STALE_TIMESTAMP] = {"hookd_inbound_rejected_total", "reason", "stale_timestamp"},
    [METRIC_INBOUND_REJECTED_MALFORMED_JSON] = {"hookd_inbound_rejected_total", "reason", "malformed_json"},
    [METRIC_INBOUND_REJECTED_MISSING_FIELD] = {"hookd_inbound_rejected_total", "reason", "missing_field"},
    [METRIC_INBOUND_REJECTED_INVALID_FIELD] = {"hookd_inbound_rejected_total", "reason", "invalid_field"},
    [METRIC_INBOUND_REJECTED_TOO_LARGE] = {"hookd_inbound_rejected_total", "reason", "too_large"},
    [METRIC_INBOUND_REJECTED_OTHER] = {"hookd_inbound_rejected_total", "reason", "other"},
    [METRIC_INBOX_PROCESSED] = {"hookd_inbox_outcomes_total", "outcome", "processed"},
    [METRIC_INBOX_RETRIED] = {"hookd_inbox_outcomes_total", "outcome", "retried"},
    [METRIC_INBOX_DEFERRED] = {"hookd_inbox_outcomes_total", "outcome", "deferred"},
    [METRIC_INBOX_QUARANTINED] = {"hookd_inbox_outcomes_total", "outcome", "quarantined"},
    [METRIC_ALERTS_OPENED] = {"hookd_alerts_opened_total", NULL, NULL},
    [METRIC_ALERTS_RESOLVED] = {"hookd_alerts_resolved_total", NULL, NULL},
    [METRIC_RETENTION_DELIVERIES] = {"hookd_retention_purged_total", "kind", "deliveries"},
    [METRIC_RETENTION_EVENTS] = {"hookd_retention_purged_total", "kind", "events"},
    [METRIC_RETENTION_INBOX] = {"hookd_retention_purged_total", "kind", "inbox_payloads"},
};

struct family_help {
    const char *family;
    const char *help;
};

static const struct family_help helps[] = {
    {"hookd_events_published_total", "Outbox events this node fanned out into deliveries."},
    {"hookd_deliveries_created_total", "Deliveries this node created at fan-out."},
    {"hookd_deliveries_total", "Deliveries by outcome: recorded attempt results (delivered, retrying, dead) and"
                               " deliveries created skipped (endpoint disabled)."},
    {"hookd_attempts_total", "Delivery attempts recorded by this node, by response status class (error: no"
                             " response)."},
    {"hookd_delivery_claims_total", "Claims of due deliveries (retries, rows the caps held back) this node's"
                                    " dispatcher ran."},
    {"hookd_fanout_held_total", "Fan-out turns this node held back for room: an answering endpoint's slots (on"
                                " this node or over the cluster), the window, or hand-offs waiting for their record."},
    {"hookd_inbound_accepted_total", "Inbound webhooks stored (answered 200 accepted) by this node."},
    {"hookd_inbound_duplicates_total", "Inbound webhooks that were duplicates of a stored event (200 no-op)."},
    {"hookd_inbound_rejected_total", "Inbound webhooks refused by this node, by reason."},
    {"hookd_inbox_outcomes_total", "Inbox processing steps recorded by this node, by outcome."},
    {"hookd_alerts_opened_total", "Alerts this node opened."},
    {"hookd_alerts_resolved_total", "Alerts this node resolved."},
    {"hookd_retention_purged_total", "Rows this node's retention purge removed (inbox: payloads dropped)."},
};

void metrics_count(enum metric_counter c) { atomic_fetch_add_explicit(&counters[c], 1, memory_order_relaxed); }
void metrics_add(enum metric_counter c, uint64_t n) { atomic_fetch_add_explicit(&counters[c], n, memory_order_relaxed); }
uint64_t metrics_counter_value(enum metric_counter c) { return atomic_load_explicit(&counters[c], memory_order_relaxed); }

/* ---- histograms ----------------------------------------------------------- */

#define HIST_MAX_BUCKETS 20

struct histogram {
    const char *name;
    const char *help;
    const double *bounds; /* upper bounds, increasing; +Inf is implicit */
    size_t n_bounds;
    double unit;          /* observed integer units per base unit (1e6: microseconds → seconds) */
    _Atomic uint64_t buckets[HIST_MAX_BUCKETS + 1]; /* non-cumulative; the last is +Inf */
    _Atomic uint64_t sum;  /* in observed units */
};

static const double latency_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900,
                                        3600, 21600, 86400};
static const double commit_bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};
static const double batch_bounds[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};

#define NB(a) (sizeof(a) / sizeof((a)[0]))
static struct histogram hist_latency = {
    "hookd_delivery_latency_seconds",
    "From the event's commit to the 2xx that delivered it (recorded by this node).",
    latency_bounds, NB(latency_bounds), 1000.0, {0}, 0};
static struct histogram hist_commit = {
    "hookd_store_commit_seconds", "Store writer batches of this node: BEGIN to COMMIT done.",
    commit_bounds, NB(commit_bounds), 1e6, {0}, 0};
static struct histogram hist_batch = {
    "hookd_store_batch_ops", "Store writer batches of this node: ops committed per batch.",
    batch_bounds, NB(batch_bounds), 1.0, {0}, 0};
_Static_assert(NB(latency_bounds) <= HIST_MAX_BUCKETS, "too many latency buckets");

static void observe(struct histogram *h, uint64_t v)
{
    double x = (double)v / h->unit;
    size_t i = 0;

    while (i < h->n_bounds && x > h->bounds[i])
        i++;
    atomic_fetch_add_explicit(&h->buckets[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum, v, memory_order_relaxed);
}

/* ---- hooks ------------------------------------------------------------------ */

int64_t metrics_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static _Atomic int64_t in_flight;

void metrics_in_flight(int delta) { atomic_fetch_add_explicit(&in_flight, delta, memory_order_relaxed); }

void metrics_delivery_recorded(const struct delivery_result *r, int64_t event_created_at)
{
    int code = r->attempt.status_code;
    enum metric_counter cls = code <= 0              ? METRIC_ATTEMPTS_ERROR
                              : code >= 200 && code < 300 ? METRIC_ATTEMPTS_2XX
                              : code >= 300 && code < 400 ? METRIC_ATTEMPTS_3XX
                              : code >= 400 && code < 500 ? METRIC_ATTEMPTS_4XX
                              : code >= 500 && code < 600 ? METRIC_ATTEMPTS_5XX
                                                          : METRIC_ATTEMPTS_OTHER;

    metrics_count(cls);
    if (r->status == DELIVERY_DELIVERED) {
        int64_t at = r->attempt.started_at + r->attempt.duration_ms;
        metrics_count(METRIC_DELIVERIES_DELIVERED);
        if (event_created_at > 0 && at >= event_created_at)
            observe(&hist_latency, (uint64_t)(at - event_created_at));
    } else if (r->status == DELIVERY_DEAD) {
        metrics_count(METRIC_DELIVERIES_DEAD);
    } else if (r->status == DELIVERY_RETRYING) {
        metrics_count(METRIC_DELIVERIES_RETRYING);
    }
}

void metrics_fanout(size_t events, const struct delivery *ds, size_t n)
{
    size_t skipped = 0;

    for (size_t i = 0; i < n; i++)
        skipped += ds[i].status == DELIVERY_SKIPPED;
    metrics_add(METRIC_EVENTS_PUBLISHED, events);
    metrics_add(METRIC_DELIVERIES_CREATED, n);
    if (skipped > 0)
        metrics_add(METRIC_DELIVERIES_SKIPPED, skipped);
}

void metrics_inbound_stored(bool duplicate) { metrics_count(duplicate ? METRIC_INBOUND_DUPLICATE : METRIC_INBOUND_ACCEPTED); }

void metrics_inbound_rejected(const char *reason)
{
    for (int c = METRIC_INBOUND_REJECTED_BAD_SIGNATURE; c < METRIC_INBOUND_REJECTED_OTHER; c++) {
        if (reason != NULL && strcmp(reason, counter_defs[c].value) == 0) {
            metrics_count((enum metric_counter)c);
            return;
        }
    }
    metrics_count(METRIC_INBOUND_REJECTED_OTHER);
}

void metrics_inbox_outcome(int inbox_status)
{
    switch (inbox_status) {
    case INBOX_PROCESSED: metrics_count(METRIC_INBOX_PROCESSED); break;
    case INBOX_PENDING: metrics_count(METRIC_INBOX_RETRIED); break;
    case INBOX_DEFERRED: metrics_count(METRIC_INBOX_DEFERRED); break;
    case INBOX_QUARANTINED: metrics_count(METRIC_INBOX_QUARANTINED); break;
    default: break;
    }
}

void metrics_store_commit(int64_t duration_us, size_t ops)
{
    observe(&hist_commit, duration_us > 0 ? (uint64_t)duration_us : 0);
    observe(&hist_batch, ops);
}

/* ---- the store's gauges, cached ------------------------------------------------ */

static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static struct store_figures cache_figures;
static struct alert_list cache_alerts;  /* the open alerts */
static int64_t cache_at;                /* ms; 0: never read */
static int64_t cache_read_at;           /* when it was read (for oldest-pending age) */
static int64_t cache_ttl_ms = METRICS_STORE_TTL_MS;

void metrics_set_store_ttl(int64_t ms)
{
    pthread_mutex_lock(&cache_mu);
    cache_ttl_ms = ms;
    cache_at = 0;
    pthread_mutex_unlock(&cache_mu);
}

/* Refreshes the cache when stale; returns whether it holds figures. Under cache_mu. */
static bool cache_refresh(struct store *s, int64_t now)
{
    struct store_figures f;
    struct alert_list open = {0};
    struct alert_filter af = {.status = 0, .limit = STORE_LIST_MAX};

    if (cache_at != 0 && now - cache_at < cache_ttl_ms && now >= cache_at)
        return true;
    if (s == NULL)
        return cache_at != 0;
    if (store_figures(s, now, &f) != 0 || store_alert_list(s, &af, &open) != 0) {
        alert_list_free(&open);
        return cache_at != 0; /* a stale figure beats none; the scrape still answers */
    }
    cache_figures = f;
    alert_list_free(&cache_alerts);
    cache_alerts = open;
    cache_at = cache_read_at = now;
    return true;
}

/* ---- exposition ------------------------------------------------------------------ */

static int family_head(struct buf *out, const char *name, const char *type, const char *help)
{
    return buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static const char *help_of(const char *family)
{
    for (size_t i = 0; i < NB(helps); i++)
        if (strcmp(helps[i].family, family) == 0)
            return helps[i].help;
    return "hookd counter.";
}

/* Every counter, each family's samples together (the defs list a family's samples one after another). */
static int render_counters(struct buf *out)
{
    int r = 0;

    for (int c = 0; c < METRIC_COUNTERS && r == 0; c++) {
        const struct counter_def *d = &counter_defs[c];
        if (c == 0 || strcmp(counter_defs[c - 1].family, d->family) != 0)
            r = family_head(out, d->family, "counter", help_of(d->family));
        if (r == 0 && d->label != NULL)
            r = buf_printf(out, "%s{%s=\"%s\"} %llu\n", d->family, d->label, d->value,
                           (unsigned long long)metrics_counter_value((enum metric_counter)c));
        else if (r == 0)
            r = buf_printf(out, "%s %llu\n", d->family, (unsigned long long)metrics_counter_value((enum metric_counter)c));
    }
    return r;
}

static int render_histogram(struct buf *out, struct histogram *h)
{
    uint64_t cumulative = 0;
    int r = family_head(out, h->name, "histogram", h->help);

    for (size_t i = 0; i <= h->n_bounds && r == 0; i++) {
        cumulative += atomic_load_explicit(&h->buckets[i], memory_order_relaxed);
        if (i < h->n_bounds)
            r = buf_printf(out, "%s_bucket{le=\"%g\"} %llu\n", h->name, h->bounds[i], (unsigned long long)cumulative);
        else
            r = buf_printf(out, "%s_bucket{le=\"+Inf\"} %llu\n", h->name, (unsigned long long)cumulative);
    }
    if (r == 0)
        r = buf_printf(out, "%s_sum %.6f\n%s_count %llu\n", h->name,
                       (double)atomic_load_explicit(&h->sum, memory_order_relaxed) / h->unit, h->name,
                       (unsigned long long)cumulative);
    return r;
}

/* The rules the alerts come from: every one is shown, 0 when none is open, so the label set is fixed. */
static const char *const alert_rules[] = {"retry_backlog", "error_rate",  "no_success", "delivery_delayed",
                                          "dead_letters",  "quarantined", "signature_rejections",
                                          "endpoint_disabled"};

static int render_store(struct buf *out, int64_t now)
{
    static const enum delivery_status shown[] = {DELIVERY_PENDING, DELIVERY_RETRYING, DELIVERY_DEAD, DELIVERY_SKIPPED};
    static const enum inbox_status inbox_shown[] = {INBOX_PENDING, INBOX_DEFERRED, INBOX_QUARANTINED};
    const struct store_figures *f = &cache_figures;
    int64_t age = f->oldest_open_at > 0 && cache_read_at >= f->oldest_open_at ? cache_read_at - f->oldest_open_at : 0;
    int r = family_head(out, "hookd_queue_deliveries", "gauge",
                        "Deliveries in the store by status (cluster-wide; delivered and superseded ones are counted"
                        " by hookd_deliveries_total).");

    for (size_t i = 0; i < NB(shown) && r == 0; i++)
        r = buf_printf(out, "hookd_queue_deliveries{status=\"%s\"} %lld\n", delivery_status_name(shown[i]),
                       (long long)f->deliveries[shown[i]]);
    if (r == 0)
        r = family_head(out, "hookd_outbox_undispatched", "gauge", "Outbox rows not fanned out yet (cluster-wide).");
    if (r == 0)
        r = buf_printf(out, "hookd_outbox_undispatched %lld\n", (long long)f->outbox_undispatched);
    if (r == 0)
        r = family_head(out, "hookd_oldest_pending_age_seconds", "gauge",
                        "Age of the oldest undelivered work: an outbox row not fanned out or an open delivery"
                        " (cluster-wide; 0 when none).");
    if (r == 0)
        r = buf_printf(out, "hookd_oldest_pending_age_seconds %.3f\n", (double)age / 1000.0);
    if (r == 0)
        r = family_head(out, "hookd_deliveries_leased", "gauge",
                        "Deliveries leased to some node now: in flight or queued in a dispatcher (cluster-wide).");
    if (r == 0)
        r = buf_printf(out, "hookd_deliveries_leased %lld\n", (long long)f->leased);
    if (r == 0)
        r = family_head(out, "hookd_endpoints_breaker", "gauge", "Endpoints by circuit-breaker state (cluster-wide).");
    for (int b = BREAKER_CLOSED; b <= BREAKER_HALF_OPEN && r == 0; b++)
        r = buf_printf(out, "hookd_endpoints_breaker{state=\"%s\"} %lld\n", breaker_name((enum breaker_state)b),
                       (long long)f->breakers[b]);
    if (r == 0)
        r = family_head(out, "hookd_endpoints_disabled", "gauge", "Endpoints disabled (cluster-wide).");
    if (r == 0)
        r = buf_printf(out, "hookd_endpoints_disabled %lld\n", (long long)f->endpoints_disabled);
    if (r == 0)
        r = family_head(out, "hookd_inbox_items", "gauge",
                        "Inbox items by open status (cluster-wide; processed ones are counted by"
                        " hookd_inbox_outcomes_total).");
    for (size_t i = 0; i < NB(inbox_shown) && r == 0; i++)
        r = buf_printf(out, "hookd_inbox_items{status=\"%s\"} %lld\n", inbox_status_name(inbox_shown[i]),
                       (long long)f->inbox[inbox_shown[i]]);
    if (r == 0)
        r = family_head(out, "hookd_alerts_open", "gauge", "Open alerts by rule (cluster-wide).");
    for (size_t i = 0; i < NB(alert_rules) && r == 0; i++) {
        long long n = 0;
        for (size_t k = 0; k < cache_alerts.n; k++)
            n += strcmp(cache_alerts.items[k].rule, alert_rules[i]) == 0;
        r = buf_printf(out, "hookd_alerts_open{rule=\"%s\"} %lld\n", alert_rules[i], n);
    }
    if (r == 0)
        r = family_head(out, "hookd_store_figures_age_seconds", "gauge",
                        "How old the cluster-wide figures above are ([server] metrics_refresh caches them, 5 s by default).");
    if (r == 0)
        r = buf_printf(out, "hookd_store_figures_age_seconds %.3f\n", (double)(now - cache_at) / 1000.0);
    return r;
}

/* Label values are escaped as the format asks: backslash, quote and newline. */
static int label_value(struct buf *out, const char *v)
{
    int r = 0;

    for (const char *p = v; *p && r == 0; p++) {
        if (*p == '\\' || *p == '"')
            r = buf_printf(out, "\\%c", *p);
        else if (*p == '\n')
            r = buf_puts(out, "\\n");
        else
            r = buf_append(out, p, 1);
    }
    return r;
}

int metrics_render(struct buf *out, struct store *s, const char *node, int64_t now_ms)
{
    int r = family_head(out, "hookd_node_info", "gauge",
                        "This process: counters are per node (sum them over instances); the store's gauges are"
                        " cluster-wide (every node shows the same).");

    if (r == 0)
        r = buf_puts(out, "hookd_node_info{node=\"");
    if (r == 0)
        r = label_value(out, node ? node : "");
    if (r == 0)
        r = buf_printf(out, "\",version=\"%s\"} 1\n", HOOKD_VERSION);
    if (r == 0)
        r = render_counters(out);
    if (r == 0)
        r = family_head(out, "hookd_in_flight", "gauge", "Delivery attempts in flight in this node's dispatcher.");
    if (r == 0)
        r = buf_printf(out, "hookd_in_flight %lld\n", (long long)atomic_load(&in_flight));
    if (r == 0)
        r = render_histogram(out, &hist_latency);
    if (r == 0)
        r = render_histogram(out, &hist_commit);
    if (r == 0)
        r = render_histogram(out, &hist_batch);
    if (r == 0) {
        pthread_mutex_lock(&cache_mu);
        if (cache_refresh(s, now_ms))
            r = render_store(out, now_ms);
        pthread_mutex_unlock(&cache_mu);
    }
    return r;
}
