/*
 * The dispatcher: one event-loop thread on libcurl multi. It holds a bounded
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
 *   dispatcher_wake            something may be due in the store (replay, start-up)
 *   dispatcher_endpoints_changed  reload endpoint settings before the next send
 *   dispatcher_stop            finish or abandon in-flight requests (leases expire), join
 */
#ifndef HOOKD_OUTBOUND_DISPATCHER_H
#define HOOKD_OUTBOUND_DISPATCHER_H
#include <stddef.h>
#include <stdint.h>
#include "store/store.h"

struct daemon;
struct dispatcher;

__attribute__((warn_unused_result)) int dispatcher_start(struct daemon *d, struct dispatcher **out);
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
void dispatcher_wake(struct dispatcher *q);
void dispatcher_endpoints_changed(struct dispatcher *q);
void dispatcher_stop(struct dispatcher *q);
#endif
