/*
 * The relay: turns committed outbox rows into deliveries, one per matching
 * endpoint. On a shared store (PostgreSQL) one writer op fetches and claims
 * undispatched rows, inserts the deliveries unleased, marks the rows
 * dispatched and leases what the window and the endpoints' in-flight caps
 * allow; the dispatcher gets those after the commit. On a single-node store
 * (SQLite) the deliveries go to the dispatcher at once and their record
 * follows in a deferred op. Woken in-process after our own commits and by
 * store_changed() (PRAGMA data_version, or LISTEN/NOTIFY) for rows other
 * processes commit. Fans out only while the dispatcher has room, so the
 * backlog stays in the store.
 *
 *   relay_start  start the relay thread
 *   relay_wake   an outbox row was committed in this process
 *   relay_stop   stop and join
 */
#ifndef HOOKD_OUTBOUND_RELAY_H
#define HOOKD_OUTBOUND_RELAY_H
#include <stdint.h>

struct dispatcher;
struct relay;
struct writer;

/* What the relay uses, given when it starts (copied; the pointers are borrowed and must outlive the relay). */
struct relay_deps {
    const char *store;             /* DSN of the relay's own connection */
    const char *node;              /* lease owner of the deliveries it leases */
    int64_t lease_ms;
    int endpoint_max_in_flight;    /* default cap for the free-slot count of a fan-out */
    int64_t ramp_ms;               /* breaker ramp: a recovering endpoint's leases come from the claims */
    struct writer *writer;         /* single-node stores: records the fan-outs handed over */
    struct dispatcher *dispatcher; /* downstream: gets the leased deliveries, is asked for room */
};

__attribute__((warn_unused_result)) int relay_start(const struct relay_deps *deps, struct relay **out);
void relay_wake(struct relay *r);
void relay_stop(struct relay *r);
#endif
