/*
 * A machine source's item decided in the transaction that accepts it, where
 * the accepts and the decisions share one writer (SQLite): the decision
 * comes first and the item is inserted with its outcome, so it needs no
 * claim, lease, outcome op or status change of its own, and an item that
 * arrived before its predecessor is inserted deferred.
 *
 *   machine_accept_insert   decide and insert a new item, or leave it to the plain insert
 */
#ifndef HOOKD_INBOUND_MACHINE_ACCEPT_H
#define HOOKD_INBOUND_MACHINE_ACCEPT_H
#include <stdbool.h>

#include "inbound/machine_cache.h"
#include "inbound/machine_step.h"
#include "store/store.h"

/*
 * it: an accepted item of a source whose handler is the machine named
 * machine, not inserted yet (its id and received_at are set here when
 * empty). With *decided true it was decided by machine_step (with what the
 * decision unblocked) and inserted with its outcome *out. With *decided
 * false and 0 returned nothing was written, and the caller inserts it as
 * usual (pending, for the workers): an item with no entity, one that needs
 * the provider's API first (no version while c->may_reconcile), a duplicate
 * (the plain insert counts it), a machine gone or unreadable (the workers
 * quarantine the item with the reason), an entity one of whose items a
 * worker holds (the lease keeps the entity on that worker). Any other
 * return: the decision failed after it may have written; the caller rolls
 * back to before the call and inserts the item as usual.
 */
__attribute__((warn_unused_result)) int machine_accept_insert(struct store *s, struct machine_cache *mc,
                                                              const char *machine,
                                                              const struct machine_step_context *c,
                                                              struct inbox_item *it, struct machine_outcome *out,
                                                              bool *decided);
#endif
