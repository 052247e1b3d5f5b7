/*
 * One machine decision on one inbox item, run inside the caller's store
 * transaction (a writer op for the inbox workers; an application's own
 * transaction for a library handler): the entity is held, the rules of DESIGN
 * §7 decide, and an applied event's entity row, transitions row and emitted
 * outbox event are written together; then the entity's deferred items are
 * re-evaluated at once, in version order. The item itself is not written:
 * the caller records *out with its own fence (inbox_complete).
 *
 *   machine_step   decide and write one item (and what it unblocks)
 */
#ifndef HOOKD_INBOUND_MACHINE_STEP_H
#define HOOKD_INBOUND_MACHINE_STEP_H
#include <stdbool.h>
#include <stdint.h>

#include "inbound/machine.h"
#include "store/store.h"

#define MACHINE_ERROR_MAX 256

struct machine_step_context {
    const char *node;            /* the worker, for the transitions log */
    int64_t now;
    int64_t max_defer_ms;        /* deferred this long (since the first deferral of the run): quarantined */
    const int64_t *schedule_ms;  /* the waits between looks at a deferred item (the last repeats) */
    size_t n_schedule;
};

struct machine_outcome {
    enum inbox_status status;    /* PROCESSED, DEFERRED or QUARANTINED */
    const char *result;          /* PROCESSED: "applied" or "stale" */
    char error[MACHINE_ERROR_MAX]; /* DEFERRED, QUARANTINED: why ("" otherwise) */
    int attempts;                /* the item's attempts after this step */
    int64_t next_attempt_at;     /* DEFERRED */
    int applied;                 /* events applied by this step, re-evaluated ones included */
    int settled;                 /* deferred items of the entity that this step settled */
};

/*
 * it: a claimed item of a machine source (entity kind and id set). Returns 0
 * with *out filled, or a store error: the caller must then roll back what
 * this call wrote (the writer's savepoint does).
 */
__attribute__((warn_unused_result)) int machine_step(struct store *s, const struct machine *m,
                                                     const struct machine_step_context *c,
                                                     const struct inbox_item *it, struct machine_outcome *out);
#endif
