/*
 * One machine decision on one inbox item, run inside the caller's store
 * transaction (a writer op for the inbox workers; an application's own
 * transaction for a library handler): the entity is held, the rules of DESIGN
 * §7 decide, and an applied event's entity row, transitions row and emitted
 * outbox event are written together; then the entity's deferred items are
 * re-evaluated at once, in version order (the open items read when the
 * entity was taken, store_entity_hold). Everything the step decided is
 * written in one store call when it ends (store_decision_write). The item
 * itself is not written: the caller records *out with its own fence
 * (inbox_complete).
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
    bool may_reconcile;          /* the source declares a provider API (reconcile) */
    int64_t reconcile_after_ms;  /* a contiguous gap waits this long before asking it */
    /*
     * Also defer the entity's pending items of this source that cannot pass
     * (machine_step.c, defer_pending): where decisions and claims share the
     * one writer (SQLite), the next claim takes them at once and defers them
     * the same way. With decisions on connections of their own (PostgreSQL)
     * many are still pending when their missing version arrives and are
     * applied by its chain without a deferral: set there, the shuffled run
     * deferred 4,974 items instead of 3,671.
     */
    bool defer_pending;
    /*
     * The claimed item's lease (id, lease_owner, lease_token; NULL: none,
     * as for an accept): the step writes the item's outcome with its
     * decision's writes (store_decision_write's complete: one round trip
     * fewer on PostgreSQL) and sets out->completed. A step that writes
     * nothing else leaves it to the caller.
     */
    const struct inbox_result *lease;
};

/* What the provider's API says the entity is (reconciliation). */
struct machine_snapshot {
    const char *state;
    bool has_version;
    int64_t version;
};

struct machine_outcome {
    enum inbox_status status;    /* PROCESSED, DEFERRED or QUARANTINED */
    const char *result;          /* PROCESSED: "applied" or "stale" */
    char error[MACHINE_ERROR_MAX]; /* DEFERRED, QUARANTINED: why ("" otherwise) */
    int attempts;                /* the item's attempts after this step */
    int64_t next_attempt_at;     /* DEFERRED */
    int applied;                 /* events applied by this step, re-evaluated ones included */
    int settled;                 /* deferred items of the entity that this step settled */
    int deferred;                /* pending items of the entity (same source) that this step deferred */
    int emitted;                 /* outbox events this step inserted (the relay is woken after the commit) */
    bool needs_reconcile;        /* nothing was written: ask the provider, then machine_step_reconciled */
    bool completed;              /* the item's outcome was written with the decision (c->lease) */
};

/*
 * it: a claimed item of a machine source; h: what store_entity_hold read for
 * its entity in this transaction (the entity, its open items: taken over by
 * the call; the caller still frees h). Returns 0 with *out filled, or a
 * store error: the caller must then roll back what this call wrote (the
 * writer's savepoint does). An item without an entity is quarantined.
 */
__attribute__((warn_unused_result)) int machine_step(struct store *s, const struct machine *m,
                                                     const struct machine_step_context *c,
                                                     const struct inbox_item *it, struct entity_hold *h,
                                                     struct machine_outcome *out);

/*
 * Reconciliation: the provider's snapshot becomes the entity's state and
 * version (unless the entity already holds a higher version), logged as
 * `reconciled` with an emitted event when the state changed; then the item
 * is decided against it (an item without a version is `reconciled`), and
 * the entity's deferred items at or below the version turn stale, later ones
 * are re-evaluated. A state the machine does not know defers the item.
 */
__attribute__((warn_unused_result)) int machine_step_reconciled(struct store *s, const struct machine *m,
                                                                const struct machine_step_context *c,
                                                                const struct inbox_item *it,
                                                                const struct machine_snapshot *snap,
                                                                struct entity_hold *h,
                                                                struct machine_outcome *out);

/* qsort order of inbox items: by version (items without one last), then received time, then id. */
int machine_version_order(const void *a, const void *b);

/* The wait before reconciliation attempt n (1-based) is tried again after a failure: 500 ms doubling, at most 1 min. */
int64_t machine_reconcile_backoff_ms(int n);
#endif
