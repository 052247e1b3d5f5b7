/*
 * Prometheus metrics: this process's counters and histograms (relaxed
 * atomics, no lock: the hot paths call one metrics_*() line each), and the
 * text exposition of GET /metrics, which adds the store's cluster-wide
 * gauges (queue depth, inbox depth, breakers, alerts), read at most once per
 * METRICS_STORE_TTL_MS and cached.
 *
 *   metrics_count / metrics_add     bump a counter
 *   metrics_delivery_recorded       an attempt result committed: attempts by class, outcome, latency
 *   metrics_fanout                  a fan-out: events and the deliveries it made, by status
 *   metrics_inbound_stored / _rejected   the receiver's answers
 *   metrics_inbox_outcome           a processing step's committed outcome
 *   metrics_store_commit            one writer batch committed: its latency and size
 *   metrics_in_flight               this process's attempts in flight (+1 / -1)
 *   metrics_render                  the exposition text (version 0.0.4)
 */
#ifndef HOOKD_OPS_METRICS_H
#define HOOKD_OPS_METRICS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

struct delivery;
struct delivery_result;
struct store;

enum metric_counter {
    METRIC_EVENTS_PUBLISHED,  /* outbox rows this node fanned out (each row is fanned out by one node) */
    METRIC_DELIVERIES_CREATED,
    METRIC_DELIVERIES_SKIPPED, /* created skipped: endpoint disabled */
    METRIC_DELIVERIES_DELIVERED,
    METRIC_DELIVERIES_RETRYING,
    METRIC_DELIVERIES_DEAD,
    METRIC_ATTEMPTS_2XX,
    METRIC_ATTEMPTS_3XX,
    METRIC_ATTEMPTS_4XX,
    METRIC_ATTEMPTS_5XX,
    METRIC_ATTEMPTS_OTHER,     /* 1xx or an unknown code */
    METRIC_ATTEMPTS_ERROR,     /* no answer: connect error, timeout, … */
    METRIC_DELIVERY_CLAIMS,    /* claims of due deliveries this node's dispatcher ran */
    METRIC_FANOUT_HELD,        /* fan-out turns held back for room (an endpoint's slots, the window, a hand-off's record) */
    METRIC_INBOUND_ACCEPTED,
    METRIC_INBOUND_DUPLICATE,
    METRIC_INBOUND_REJECTED_BAD_SIGNATURE,
    METRIC_INBOUND_REJECTED_MISSING_SIGNATURE,
    METRIC_INBOUND_REJECTED_STALE_TIMESTAMP,
    METRIC_INBOUND_REJECTED_MALFORMED_JSON,
    METRIC_INBOUND_REJECTED_MISSING_FIELD,
    METRIC_INBOUND_REJECTED_INVALID_FIELD,
    METRIC_INBOUND_REJECTED_TOO_LARGE,
    METRIC_INBOUND_REJECTED_OTHER,
    METRIC_INBOX_PROCESSED,
    METRIC_INBOX_RETRIED,
    METRIC_INBOX_DEFERRED,
    METRIC_INBOX_QUARANTINED,
    METRIC_ALERTS_OPENED,
    METRIC_ALERTS_RESOLVED,
    METRIC_RETENTION_DELIVERIES,
    METRIC_RETENTION_EVENTS,
    METRIC_RETENTION_INBOX,
    METRIC_COUNTERS
};

#define METRICS_STORE_TTL_MS 5000 /* store-derived gauges are read at most this often, by default */
/* [server] metrics_refresh: how long the store's gauges are cached (0: read at every scrape). */
void metrics_set_store_ttl(int64_t ms);

void metrics_count(enum metric_counter c);
void metrics_add(enum metric_counter c, uint64_t n);
/* One committed attempt result; event_created_at (ms) times a delivery's commit → 2xx latency. */
void metrics_delivery_recorded(const struct delivery_result *r, int64_t event_created_at);
void metrics_fanout(size_t events, const struct delivery *ds, size_t n);
void metrics_inbound_stored(bool duplicate);
void metrics_inbound_rejected(const char *reason);
void metrics_inbox_outcome(int inbox_status);
void metrics_store_commit(int64_t duration_us, size_t ops);
void metrics_in_flight(int delta);
/* CLOCK_MONOTONIC microseconds, for timing what metrics_store_commit observes. */
int64_t metrics_now_us(void);

/* A snapshot of the counters (tests): value of c now. */
uint64_t metrics_counter_value(enum metric_counter c);

/*
 * Appends the exposition to out: this process's families, then the store's
 * gauges (cached; s is used only when the cache is older than
 * METRICS_STORE_TTL_MS, and may be NULL: the store families are then left out).
 * node names this process in hookd_node_info. 0 or a negative hookd_error.
 */
__attribute__((warn_unused_result)) int metrics_render(struct buf *out, struct store *s, const char *node,
                                                       int64_t now_ms);
#endif
