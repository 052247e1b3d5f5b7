/*
 * The dispatcher: one event-loop thread on libcurl multi. It holds a bounded
 * window of leased deliveries, signs and POSTs them within global and
 * per-endpoint in-flight caps, classifies each outcome (core/retry.h), records
 * the attempt through the writer (fenced by the lease token), and claims due
 * retries from the store when their time comes.
 *
 *   dispatcher_start           start the loop thread
 *   dispatcher_enqueue         hand over leased jobs (ownership passes)
 *   dispatcher_room            free slots in the window (for the relay's backpressure)
 *   dispatcher_wake            something may be due in the store (replay, start-up)
 *   dispatcher_endpoints_changed  reload endpoint settings before the next send
 *   dispatcher_stop            finish or abandon in-flight requests (leases expire), join
 */
#ifndef HOOKD_OUTBOUND_DISPATCHER_H
#define HOOKD_OUTBOUND_DISPATCHER_H
#include <stddef.h>
#include "store/store.h"

struct daemon;
struct dispatcher;

__attribute__((warn_unused_result)) int dispatcher_start(struct daemon *d, struct dispatcher **out);
/* Takes ownership of jobs->items (jobs is emptied). Never blocks. */
void dispatcher_enqueue(struct dispatcher *q, struct job_list *jobs);
int dispatcher_room(struct dispatcher *q);
void dispatcher_wake(struct dispatcher *q);
void dispatcher_endpoints_changed(struct dispatcher *q);
void dispatcher_stop(struct dispatcher *q);
#endif
