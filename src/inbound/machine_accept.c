/*
 * A machine source's item decided and inserted with its outcome in its
 * accept's transaction (one writer: SQLite), instead of an insert, a claim,
 * a decision op and an outcome op.
 */
#include "inbound/machine_accept.h"

#include <string.h>

#include "core/ids.h"

/* Another open item of the entity that a worker holds: the entity is that worker's until it is done. */
static bool entity_leased(const struct entity_hold *h, int64_t now)
{
    for (size_t i = 0; i < h->open.n; i++)
        if (h->open.items[i].lease_owner && h->open.items[i].lease_until > now)
            return true;
    return false;
}

/* A transition from a new entity on this type: machine_decide's rule for an entity not known yet. */
static bool may_start(const char *event_type, void *arg)
{
    return machine_may_pass(arg, NULL, false, 0, event_type, false, 0);
}

int machine_accept_insert(struct store *s, struct machine_cache *mc, const char *machine,
                          const struct machine_step_context *c, struct inbox_item *it, struct machine_outcome *out,
                          bool *decided)
{
    struct entity_hold h = {0};
    struct machine_record rec = {0};
    const struct machine *m = NULL, *first = NULL;
    bool taken = false;
    int rc;

    *decided = false;
    memset(out, 0, sizeof *out);
    if (!machine || !machine[0] || !it->entity_kind || !it->entity_id || (c->may_reconcile && !it->has_version))
        return 0;
    /* One writer: nothing can take the key between this read and the insert. */
    if (store_inbox_taken(s, it->source, it->event_id, &taken) != 0 || taken)
        return 0;
    if (it->id[0] == '\0') {
        int64_t at = id_new_time(it->id, "inb_"); /* id and received_at share one millisecond (stats_sql.h) */
        if (it->received_at == 0)
            it->received_at = at;
    }
    if (it->received_at == 0)
        it->received_at = c->now;
    it->status = INBOX_PENDING;
    it->attempts = 0;
    it->next_attempt_at = it->received_at;
    it->deferred_at = 0;
    /*
     * A contiguous machine's decision reads only the open items it can reach
     * (struct hold_window); the hold takes the machine's row read here (in
     * the same transaction: one writer, the same row), and its copy decides.
     */
    bool window = false;
    if (store_machine_get(s, machine, &rec) == 0 && machine_cache_get(mc, &rec, &first) == 0)
        window = first->versioning == VERSIONING_CONTIGUOUS;
    const struct hold_window w = {.has_version = it->has_version, .version = it->version,
                                  .event_type = it->event_type, .may_start = may_start, .arg = (void *)first,
                                  .now = c->now, .machine = rec.definition ? &rec : NULL};
    rc = store_entity_hold_window(s, machine, it->entity_kind, it->entity_id, window ? &w : NULL, &h);
    machine_record_free(&rec);
    if (rc != 0) {
        machine_cache_put(mc, first);
        return 0; /* only read: the plain insert meets the store's trouble itself */
    }
    rc = 0;
    /* The window's machine is the one deciding (both held: the same cached parse of the same row). */
    if (h.machine_found && !entity_leased(&h, c->now) && machine_cache_get(mc, &h.machine, &m) == 0 &&
        (!window || m == first)) {
        rc = machine_step(s, m, c, it, &h, out);
        if (rc == 0 && !out->needs_reconcile) {
            const struct inbox_settle own = {.id = it->id, .status = out->status, .result = out->result,
                                             .error = out->error[0] ? out->error : NULL,
                                             .next_attempt_at = out->next_attempt_at};
            rc = store_inbox_insert_decided(s, it, &own, out->attempts, c->now);
            *decided = rc == 0;
        }
    }
    machine_cache_put(mc, m);
    machine_cache_put(mc, first);
    entity_hold_free(&h);
    if (!*decided)
        memset(out, 0, sizeof *out);
    return rc;
}
