/*
 * The relay: turns committed outbox rows into deliveries, one per matching
 * endpoint, in writer ops (fetch undispatched rows, insert deliveries already
 * leased to this node, mark the rows dispatched: one transaction), then hands
 * the new deliveries to the dispatcher. Woken in-process after our own commits
 * and by store_changed() (PRAGMA data_version) for rows other processes commit.
 * Fans out only while the dispatcher has room, so the backlog stays in the store.
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
