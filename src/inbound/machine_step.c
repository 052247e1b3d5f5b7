/*
 * A machine decision inside a store transaction: hold the entity, decide,
 * write the entity, the transitions row and the emitted event, then let the
 * entity's deferred items through that the change unblocked.
 */
#include "inbound/machine_step.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define PART "machine"

/*
 * The entity as the decision sees it (NULL state and no version when it is
 * not known yet) and its other open items, read once when the decision took
 * hold of it (store_entity_hold); done marks the ones this decision settled.
 */
struct entity_view {
    struct entity_record rec;
    bool known;
    bool dirty; /* rec changed since it was read: written once, when the step ends (entity_flush) */
    struct inbox_list open;
    bool *done;
};

/* Takes over what h read about the entity (h keeps the machine record). */
static int entity_view_take(struct entity_hold *h, struct entity_view *e)
{
    e->rec = h->entity;
    e->known = h->known;
    e->open = h->open;
    h->entity = (struct entity_record){0};
    h->known = false;
    h->open = (struct inbox_list){0};
    if (e->open.n > 1)
        qsort(e->open.items, e->open.n, sizeof e->open.items[0], machine_version_order);
    if (e->open.n && !(e->done = calloc(e->open.n, sizeof *e->done)))
        return HOOKD_ENOMEM;
    return 0;
}

/* A chain of applied events writes the entity's row once, with where the chain ended. */
static int entity_flush(struct store *s, struct entity_view *e, int rc)
{
    if (rc == 0 && e->dirty)
        rc = store_entity_put(s, &e->rec);
    e->dirty = false;
    return rc;
}

static void entity_view_free(struct entity_view *e)
{
    entity_record_free(&e->rec);
    inbox_list_free(&e->open);
    free(e->done);
}

static int transition_log(struct store *s, const struct machine_step_context *c, const struct inbox_item *it,
                          const char *from, const char *to, enum transition_result result, const char *reason)
{
    struct transition_record t = {
        .source = (char *)it->source,
        .kind = it->entity_kind,
        .entity_id = it->entity_id,
        .event_id = it->event_id,
        .from_state = (char *)from,
        .to_state = (char *)to,
        .has_version = it->has_version,
        .version = it->version,
        .result = (char *)transition_result_name(result),
        .reason = (char *)reason,
        .worker = (char *)c->node,
        .at = c->now,
    };

    snprintf(t.inbox_id, sizeof t.inbox_id, "%s", it->id);
    return store_transition_insert(s, &t);
}

/* The emitted event: order.status_changed with the entity, both states, the version and the source's event. */
static int emit(struct store *s, const struct machine *m, const struct inbox_item *it, const char *from,
                const char *to, const struct machine_step_context *c, const struct machine_snapshot *snap,
                struct machine_outcome *out)
{
    char key[HOOKD_ID_MAX + 32];
    struct event ev = {0}, existing = {0};
    json_t *data;
    int rc;

    if (!m->emit)
        return 0;
    data = json_pack("{s:{s:s,s:s},s:o,s:s,s:o,s:s,s:s,s:s,s:o}", "entity", "kind", it->entity_kind, "id",
                     it->entity_id, "previous_state", from ? json_string(from) : json_null(), "state", to, "version",
                     it->has_version ? json_integer(it->version) : json_null(), "source", it->source,
                     "source_event_id", it->event_id, "inbox_id", it->id, "event_type",
                     it->event_type ? json_string(it->event_type) : json_null());
    if (data && snap) {
        json_object_set_new(data, "version", snap->has_version ? json_integer(snap->version) : json_null());
        json_object_set_new(data, "reconciled", json_true());
    }
    if (!data)
        return HOOKD_ENOMEM;
    ev.payload = json_dumps(data, JSON_COMPACT);
    json_decref(data);
    if (!ev.payload)
        return HOOKD_ENOMEM;
    /* One emitted event per applied item, whatever happens: the key makes a second insert a no-op. */
    snprintf(key, sizeof key, "hookd.machine:%s%s", it->id, snap ? ":reconciled" : "");
    ev.type = m->emit;
    ev.resource_type = it->entity_kind;
    ev.resource_id = it->entity_id;
    ev.has_resource_version = snap ? snap->has_version : it->has_version;
    ev.resource_version = snap ? snap->version : it->version;
    ev.idempotency_key = key;
    ev.created_at = c->now;
    rc = store_event_insert(s, &ev, &existing);
    if (rc == 0)
        out->emitted++;
    if (rc == HOOKD_EEXISTS) {
        event_free(&existing);
        rc = 0;
    }
    free(ev.payload);
    return rc;
}

/* Applies the decision's transition: the entity (written at the step's end), transitions row, emitted event. */
static int apply(struct store *s, const struct machine *m, const struct machine_step_context *c,
                 const struct inbox_item *it, struct entity_view *e, const struct machine_decision *d,
                 struct machine_outcome *out)
{
    char *from = e->rec.state, *to = strdup(d->to), *last = strdup(it->event_id);
    int rc;

    if (!to || !last) {
        free(to);
        free(last);
        return HOOKD_ENOMEM;
    }
    if (!e->known) {
        e->rec.kind = strdup(it->entity_kind);
        e->rec.id = strdup(it->entity_id);
        if (!e->rec.kind || !e->rec.id) {
            free(to);
            free(last);
            return HOOKD_ENOMEM;
        }
        e->known = true;
    }
    e->rec.state = to;
    free(e->rec.last_event_id);
    e->rec.last_event_id = last;
    if (d->sets_version) {
        e->rec.has_version = true;
        e->rec.version = it->version;
    }
    e->rec.updated_at = c->now;
    e->dirty = true;
    rc = transition_log(s, c, it, from, to, TRANSITION_APPLIED, NULL);
    if (rc == 0)
        rc = emit(s, m, it, from, to, c, NULL, out);
    free(from);
    return rc;
}

static int64_t defer_wait(const struct machine_step_context *c, int n)
{
    if (c->n_schedule == 0)
        return 60000;
    if (n < 1)
        n = 1;
    return c->schedule_ms[(size_t)n > c->n_schedule ? c->n_schedule - 1 : (size_t)n - 1];
}

/* Deferred, or quarantined once deferred for max_defer: into out (status, error, next look). */
static void defer_or_quarantine(const struct machine_step_context *c, const struct inbox_item *it,
                                const struct machine_decision *d, struct machine_outcome *out)
{
    int64_t since = it->status == INBOX_DEFERRED && it->deferred_at ? it->deferred_at : c->now;

    if (c->now - since >= c->max_defer_ms) {
        out->status = INBOX_QUARANTINED;
        snprintf(out->error, sizeof out->error, "%s; deferred for longer than max_defer", d->reason);
        return;
    }
    out->status = INBOX_DEFERRED;
    snprintf(out->error, sizeof out->error, "%s", d->reason);
    out->next_attempt_at = c->now + defer_wait(c, out->attempts);
    if (out->next_attempt_at > since + c->max_defer_ms)
        out->next_attempt_at = since + c->max_defer_ms; /* the last look falls on the limit */
}

int machine_version_order(const void *a, const void *b)
{
    const struct inbox_item *x = a, *y = b;

    if (x->has_version != y->has_version)
        return x->has_version ? -1 : 1;
    if (x->has_version && x->version != y->version)
        return x->version < y->version ? -1 : 1;
    if (x->received_at != y->received_at)
        return x->received_at < y->received_at ? -1 : 1;
    return strcmp(x->id, y->id);
}

/*
 * Self-healing: the entity moved (or the claimed item waits), so its other
 * open items, deferred or not taken yet, may pass now. In version order, as
 * often as a pass applies something (a pass may unblock an item it looked at
 * before); only applied and stale ones are written, the others keep waiting
 * for their own turn. Items leased by a worker are left to it.
 */
static int reevaluate(struct store *s, const struct machine *m, const struct machine_step_context *c,
                      const struct inbox_item *current, struct entity_view *e, struct machine_outcome *out)
{
    int rc = 0;

    for (bool changed = true; rc == 0 && changed;) {
        changed = false;
        for (size_t i = 0; rc == 0 && i < e->open.n; i++) {
            const struct inbox_item *it = &e->open.items[i];
            struct machine_decision d;
            struct inbox_settle st = {.id = it->id, .status = INBOX_PROCESSED};

            if (e->done[i] || strcmp(it->id, current->id) == 0 || (it->lease_owner && it->lease_until > c->now))
                continue;
            machine_decide(m, e->rec.state, e->rec.has_version, e->rec.version, it->event_type, it->has_version,
                           it->version, &d);
            if (d.verdict != VERDICT_APPLY && d.verdict != VERDICT_STALE)
                continue; /* still waiting: its own schedule looks at it again */
            if (d.verdict == VERDICT_APPLY) {
                rc = apply(s, m, c, it, e, &d, out);
                st.result = "applied";
            } else {
                rc = transition_log(s, c, it, e->rec.state, NULL, TRANSITION_STALE, d.reason);
                st.result = "stale";
            }
            if (rc == 0)
                rc = store_inbox_settle(s, &st, c->now);
            if (rc == HOOKD_ESTALE) {
                /* Taken by a worker since the list was read: a real conflict, let the op be undone and run again. */
                rc = HOOKD_EBUSY;
            }
            if (rc == 0) {
                e->done[i] = true;
                out->settled++;
                if (d.verdict == VERDICT_APPLY) {
                    out->applied++;
                    changed = true;
                }
            }
        }
    }
    return rc;
}

/* The decision d on item it, written: stale, applied (then the entity's deferred items), or deferred/quarantined. */
static int decide_and_write(struct store *s, const struct machine *m, const struct machine_step_context *c,
                            const struct inbox_item *it, struct entity_view *e, const struct machine_decision *d,
                            struct machine_outcome *out)
{
    int rc;

    switch (d->verdict) {
    case VERDICT_STALE:
        out->status = INBOX_PROCESSED;
        out->result = "stale";
        return transition_log(s, c, it, e->rec.state, NULL, TRANSITION_STALE, d->reason);
    case VERDICT_APPLY:
        out->status = INBOX_PROCESSED;
        out->result = "applied";
        rc = apply(s, m, c, it, e, d, out);
        if (rc == 0) {
            out->applied++;
            rc = reevaluate(s, m, c, it, e, out);
        }
        return rc;
    default:
        break;
    }
    /* Waiting: the entity's other open items may move it first (an earlier version not taken yet). */
    int applied_before = out->applied;
    rc = reevaluate(s, m, c, it, e, out);
    if (rc)
        return rc;
    if (out->applied > applied_before) {
        struct machine_decision again;
        machine_decide(m, e->rec.state, e->rec.has_version, e->rec.version, it->event_type, it->has_version,
                       it->version, &again);
        if (again.verdict == VERDICT_APPLY || again.verdict == VERDICT_STALE)
            return decide_and_write(s, m, c, it, e, &again, out);
    }
    defer_or_quarantine(c, it, d, out);
    /* A gap comes back when reconciliation is due, if the source can reconcile. */
    if (out->status == INBOX_DEFERRED && d->verdict == VERDICT_GAP && c->may_reconcile) {
        int64_t since = it->status == INBOX_DEFERRED && it->deferred_at ? it->deferred_at : c->now;
        int64_t due = since + c->reconcile_after_ms;
        if (due > c->now && due < out->next_attempt_at)
            out->next_attempt_at = due;
    }
    rc = transition_log(s, c, it, e->rec.state, NULL,
                        out->status == INBOX_QUARANTINED ? TRANSITION_QUARANTINED : TRANSITION_DEFERRED, out->error);
    if (rc == 0 && out->status == INBOX_QUARANTINED)
        log_warn(PART, "item %s of %s quarantined by machine %s (deferred past max_defer)", it->id, it->source,
                 m->name);
    return rc;
}

int machine_step(struct store *s, const struct machine *m, const struct machine_step_context *c,
                 const struct inbox_item *it, struct entity_hold *h, struct machine_outcome *out)
{
    struct entity_view e = {0};
    struct machine_decision d;
    int rc;

    memset(out, 0, sizeof *out);
    out->attempts = it->attempts + 1;
    if (!it->entity_kind || !it->entity_id) {
        out->status = INBOX_QUARANTINED;
        snprintf(out->error, sizeof out->error, "the event names no entity (the source's entity.id)");
        return 0;
    }
    rc = entity_view_take(h, &e);
    if (rc == 0) {
        machine_decide(m, e.rec.state, e.rec.has_version, e.rec.version, it->event_type, it->has_version,
                       it->version, &d);
        /* A gap that has waited past reconcile_after: the provider is asked first (nothing written now). */
        if (d.verdict == VERDICT_GAP && c->may_reconcile && it->status == INBOX_DEFERRED && it->deferred_at &&
            c->now - it->deferred_at >= c->reconcile_after_ms && c->now - it->deferred_at < c->max_defer_ms)
            out->needs_reconcile = true;
        else
            rc = decide_and_write(s, m, c, it, &e, &d, out);
    }
    rc = entity_flush(s, &e, rc);
    entity_view_free(&e);
    return rc;
}

int64_t machine_reconcile_backoff_ms(int n)
{
    int64_t ms = 500;

    for (int i = 1; i < n && ms < 60000; i++)
        ms *= 2;
    return ms < 60000 ? ms : 60000;
}

static bool machine_has_state(const struct machine *m, const char *state)
{
    for (size_t i = 0; i < m->n_states; i++)
        if (strcmp(m->states[i], state) == 0)
            return true;
    return false;
}

int machine_step_reconciled(struct store *s, const struct machine *m, const struct machine_step_context *c,
                            const struct inbox_item *it, const struct machine_snapshot *snap, struct entity_hold *h,
                            struct machine_outcome *out)
{
    struct entity_view e = {0};
    struct machine_decision d;
    int rc;

    memset(out, 0, sizeof *out);
    out->attempts = it->attempts + 1;
    if (!machine_has_state(m, snap->state)) {
        struct machine_decision why = {.verdict = VERDICT_NOT_ALLOWED};
        snprintf(why.reason, sizeof why.reason, "reconciliation: the provider's state is not a state of machine %s",
                 m->name);
        defer_or_quarantine(c, it, &why, out);
        if (out->status == INBOX_DEFERRED)
            out->next_attempt_at = c->now + machine_reconcile_backoff_ms(out->attempts);
        return 0;
    }
    rc = entity_view_take(h, &e);
    if (rc)
        goto out;
    /* Never backwards: an entity already past the provider's version keeps what it has. */
    bool behind = snap->has_version && e.rec.has_version && snap->version < e.rec.version;
    if (!behind) {
        char *from = e.rec.state, *to = strdup(snap->state);
        bool changed = !from || strcmp(from, snap->state) != 0;
        if (!to) {
            rc = HOOKD_ENOMEM;
            goto out;
        }
        if (!e.known && (!(e.rec.kind = strdup(it->entity_kind)) || !(e.rec.id = strdup(it->entity_id)))) {
            free(to);
            rc = HOOKD_ENOMEM;
            goto out;
        }
        e.known = true;
        e.rec.state = to;
        if (snap->has_version) {
            e.rec.has_version = true;
            e.rec.version = snap->version;
        }
        e.rec.updated_at = c->now;
        rc = store_entity_put(s, &e.rec);
        if (rc == 0) {
            struct transition_record t = {
                .source = (char *)it->source, .kind = it->entity_kind, .entity_id = it->entity_id,
                .event_id = it->event_id, .from_state = from, .to_state = to, .has_version = snap->has_version,
                .version = snap->version, .result = (char *)transition_result_name(TRANSITION_RECONCILED),
                .reason = "the provider's state and version", .worker = (char *)c->node, .at = c->now,
            };
            snprintf(t.inbox_id, sizeof t.inbox_id, "%s", it->id);
            rc = store_transition_insert(s, &t);
        }
        if (rc == 0 && changed)
            rc = emit(s, m, it, from, to, c, snap, out);
        free(from);
        if (rc)
            goto out;
    }
    if (!it->has_version || m->versioning == VERSIONING_NONE) {
        /* The provider's answer is the truth this event was about: nothing is left to apply. */
        out->status = INBOX_PROCESSED;
        out->result = "reconciled";
        rc = reevaluate(s, m, c, it, &e, out);
        goto out;
    }
    machine_decide(m, e.rec.state, e.rec.has_version, e.rec.version, it->event_type, it->has_version, it->version,
                   &d);
    rc = decide_and_write(s, m, c, it, &e, &d, out);
    if (rc == 0 && d.verdict != VERDICT_APPLY)
        rc = reevaluate(s, m, c, it, &e, out); /* the versions at or below the provider's turn stale */
out:
    rc = entity_flush(s, &e, rc);
    entity_view_free(&e);
    return rc;
}
