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
struct daemon;
struct relay;

__attribute__((warn_unused_result)) int relay_start(struct daemon *d, struct relay **out);
void relay_wake(struct relay *r);
void relay_stop(struct relay *r);
#endif
