/*
 * The dispatcher: one event-loop thread that runs the HTTP engine
 * (net/http_client.h) and keeps the delivery policy. It holds a bounded
 * window of leased deliveries, signs and POSTs them within global and
 * per-endpoint in-flight caps, classifies each outcome (core/retry.h), records
 * the attempt through the writer (fenced by the lease token), and claims due
 * retries from the store when their time comes.
 *
 *   dispatcher_start           start the loop thread
 *   dispatcher_enqueue         hand over leased jobs (ownership passes)
 *   dispatcher_enqueue_tentative  the same before their fan-out has committed:
 *                              sent at once, results held until
 *   dispatcher_fanout_decided  that fan-out committed or rolled back
 *   dispatcher_room            free slots in the window (for the relay's backpressure)
 *   dispatcher_endpoint_window what one endpoint may hold of the window now (its fair share)
 *   dispatcher_endpoint_view   what it holds, whether it answers, whether it may be handed jobs directly
 *   dispatcher_window_moving   whether any endpoint answered just now (the window frees)
 *   dispatcher_wake            something may be due in the store (replay, start-up)
 *   dispatcher_endpoints_changed  reload endpoint settings before the next send
 *   dispatcher_stop            finish or abandon in-flight requests (leases expire), join
 */
#ifndef HOOKD_OUTBOUND_DISPATCHER_H
#define HOOKD_OUTBOUND_DISPATCHER_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/retry.h"
#include "store/store.h"

struct dispatcher;
struct hub;
struct writer;

/*
 * What the dispatcher uses, given when it starts (copied; the pointers are
 * borrowed and must outlive the dispatcher).
 */
struct dispatcher_deps {
    const char *store;          /* DSN of the endpoint cache's own read connection */
    const char *node;           /* lease owner name of this process */
    struct writer *writer;      /* attempt results and lease releases (and claims when claimer is NULL) */
    struct writer *claimer;     /* shared stores: claims on a connection of their own; NULL: on writer */
    struct hub *hub;            /* told of endpoints the dispatcher disables (410); may be NULL */
    struct retry_policy retry;  /* global schedule; an endpoint's own schedule overrides it */
    int64_t timeout_ms;         /* per attempt, unless the endpoint sets its own */
    int64_t connect_timeout_ms;
    int64_t response_max;       /* response snippet kept per attempt, bytes */
    int64_t lease_ms;           /* lease of claimed deliveries */
    int max_in_flight;          /* whole dispatcher */
    int endpoint_max_in_flight; /* per endpoint unless it sets its own */
    int window;                 /* deliveries held in memory */
    bool allow_private_networks;
    struct breaker_policy breaker; /* circuit breaker and auto-disable */
    int64_t ramp_ms;            /* after a breaker closed, the endpoint's cap grows from 1 over this */
    int64_t drain_timeout_ms;   /* at stop, in-flight attempts get this long to finish; 0: 2 s */
};

__attribute__((warn_unused_result)) int dispatcher_start(const struct dispatcher_deps *deps, struct dispatcher **out);
/* Takes ownership of jobs->items (jobs is emptied). Never blocks. */
void dispatcher_enqueue(struct dispatcher *q, struct job_list *jobs);
/*
 * For a fan-out whose transaction is still open (the caller holds its rows
 * locked): the jobs are sent at once, but their attempt results wait until
 * dispatcher_fanout_decided() has been called with the number returned here
 * (0: nothing was handed over). Either way the results are written then: if
 * the fan-out rolled back, its delivery rows never existed and the writes
 * change nothing (fenced out); the events are fanned out again and sent again
 * with the same webhook-id. Fan-outs are numbered in the order they are handed
 * over, and each must be decided before the next is handed over.
 */
uint64_t dispatcher_enqueue_tentative(struct dispatcher *q, struct job_list *jobs);
void dispatcher_fanout_decided(struct dispatcher *q, uint64_t fanout);
int dispatcher_room(struct dispatcher *q);
/* The window divided among the endpoints holding jobs (at least 1): a single-node fan-out hands an endpoint
 * no more leased deliveries than this (or its cap, when larger), the rest waits in the store for claims. */
int dispatcher_endpoint_window(struct dispatcher *q);
/* For the single-node hand-off, from any thread. An endpoint the dispatcher never held is direct. */
struct dispatcher_view {
    int held;       /* jobs it holds of the window */
    int sending;    /* of those, queued or in flight: what takes its slots (an answered one waits for its record) */
    bool answered;  /* it answered within the last 100 ms: what it holds drains */
    bool answering; /* that, or it is new (its first request, or its jobs, younger than that): worth waiting for */
    bool direct;    /* not slow (no transfer waiting past slow_after), not paused, not ramping */
};
void dispatcher_endpoint_view(struct dispatcher *q, const char *endpoint_id, struct dispatcher_view *out);
bool dispatcher_window_moving(struct dispatcher *q);
void dispatcher_wake(struct dispatcher *q);
void dispatcher_endpoints_changed(struct dispatcher *q);
/*
 * Stop in two steps. dispatcher_drain (never blocks): no claims and no new
 * sends from now on; queued (unsent) deliveries give their leases back at
 * once; in-flight attempts finish within drain_timeout_ms and their results
 * are recorded. dispatcher_stop: drains if not draining yet, waits for that,
 * and frees. Leases of work handed over during the drain (a fan-out ending,
 * a claim returning) are left to the caller's store_delivery_release_node.
 */
void dispatcher_drain(struct dispatcher *q);
void dispatcher_stop(struct dispatcher *q);
#endif
