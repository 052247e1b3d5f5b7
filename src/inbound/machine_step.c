/*
 * A machine decision inside a store transaction: hold the entity, decide,
 * let the entity's deferred items through that the change unblocked, then
 * write it all at once: the entity, the transitions rows, the emitted
 * events and the settled items.
 */
#include "inbound/machine_step.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/event_check.h"
#include "log.h"

#define PART "machine"
/* The emitted event's data: its strings come from one accepted event (each within the body's limit). */
#define EMITTED_DATA_MAX (64u << 20)

/*
 * What the step writes, gathered as it decides and handed to the store once
 * when it ends (store_decision_write: one round trip on PostgreSQL however
 * many events a chain applies). The rows own their state names, reasons,
 * payloads and keys; the rest points into the items, which outlive the step.
 */
struct step_writes {
    struct transition_record *t;
    size_t nt, cap_t;
    struct event *ev;
    size_t nev, cap_ev;
    struct inbox_settle *st;
    size_t nst, cap_st;
};

/* Room for one more of size bytes in *arr (n used, *cap allocated); false when out of memory. */
static bool grow(void **arr, size_t n, size_t *cap, size_t size)
{
    if (n < *cap)
        return true;
    size_t want = *cap ? *cap * 2 : 8;
    void *p = realloc(*arr, want * size);
    if (!p)
        return false;
    *arr = p;
    *cap = want;
    return true;
}

static void step_writes_free(struct step_writes *w)
{
    for (size_t i = 0; i < w->nt; i++) {
        free(w->t[i].from_state);
        free(w->t[i].to_state);
        free(w->t[i].reason);
    }
    for (size_t i = 0; i < w->nev; i++) {
        free(w->ev[i].payload);
        free(w->ev[i].idempotency_key);
    }
    free(w->t);
    free(w->ev);
    free(w->st);
    memset(w, 0, sizeof *w);
}

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
    size_t open_total; /* the open items the hold saw: open.n, or more when its window left gaps out */
    bool *done;
    struct step_writes w;
};

/* Takes over what h read about the entity (h keeps the machine record). */
static int entity_view_take(struct entity_hold *h, struct entity_view *e)
{
    e->rec = h->entity;
    e->known = h->known;
    e->open = h->open;
    e->open_total = h->open_total > h->open.n ? h->open_total : h->open.n;
    h->entity = (struct entity_record){0};
    h->known = false;
    h->open = (struct inbox_list){0};
    if (e->open.n > 1)
        qsort(e->open.items, e->open.n, sizeof e->open.items[0], machine_version_order);
    if (e->open.n && !(e->done = calloc(e->open.n, sizeof *e->done)))
        return HOOKD_ENOMEM;
    return 0;
}

/*
 * Everything the step decided, written at once: the entity's row (once
 * however many events a chain applied, with where it ended), transitions,
 * emitted events, settled items, and the claimed item's outcome when the
 * caller gave its lease. A settled item taken by a worker since it was read
 * (ESTALE) is a real conflict: EBUSY, so the op is undone and runs again; a
 * lost lease of the claimed item stays ESTALE (the decision is undone, the
 * item is another worker's now).
 */
static int entity_flush(struct store *s, const struct machine_step_context *c, struct entity_view *e,
                        struct machine_outcome *out, int rc)
{
    struct decision_writes dw = {
        .transitions = e->w.t, .n_transitions = e->w.nt, .events = e->w.ev, .n_events = e->w.nev,
        .entity = e->dirty ? &e->rec : NULL, .settles = e->w.st, .n_settles = e->w.nst,
    };
    struct inbox_result r;

    if (rc == 0 && (dw.n_transitions || dw.n_events || dw.entity || dw.n_settles)) {
        if (c->lease && !out->needs_reconcile) {
            r = *c->lease;
            r.status = out->status;
            r.attempts = out->attempts;
            r.next_attempt_at = out->next_attempt_at;
            r.result = out->result;
            r.error = out->error[0] ? out->error : NULL;
            dw.complete = &r;
        }
        rc = store_decision_write(s, &dw, c->now);
        if (rc == HOOKD_ESTALE && !dw.complete_lost)
            rc = HOOKD_EBUSY;
        if (rc == 0) {
            out->emitted += dw.emitted;
            out->completed = dw.complete != NULL;
        }
    }
    e->dirty = false;
    return rc;
}

static void entity_view_free(struct entity_view *e)
{
    entity_record_free(&e->rec);
    inbox_list_free(&e->open);
    free(e->done);
    step_writes_free(&e->w);
}

static char *dup_or_null(const char *v, bool *ok)
{
    char *d = v ? strdup(v) : NULL;

    if (v && !d)
        *ok = false;
    return d;
}

/* A transitions row, written when the step ends (from, to and reason are copied). */
static int transition_add(struct entity_view *e, const struct machine_step_context *c, const struct inbox_item *it,
                          const char *from, const char *to, bool has_version, int64_t version,
                          enum transition_result result, const char *reason)
{
    struct step_writes *w = &e->w;
    bool ok = true;

    if (!grow((void **)&w->t, w->nt, &w->cap_t, sizeof *w->t))
        return HOOKD_ENOMEM;
    struct transition_record *t = &w->t[w->nt];
    *t = (struct transition_record){
        .source = (char *)it->source,
        .kind = it->entity_kind,
        .entity_id = it->entity_id,
        .event_id = it->event_id,
        .from_state = dup_or_null(from, &ok),
        .to_state = dup_or_null(to, &ok),
        .has_version = has_version,
        .version = version,
        .result = (char *)transition_result_name(result),
        .reason = dup_or_null(reason, &ok),
        .worker = (char *)c->node,
        .at = c->now,
    };
    snprintf(t->inbox_id, sizeof t->inbox_id, "%s", it->id);
    w->nt++; /* freed with the others, complete or not */
    return ok ? 0 : HOOKD_ENOMEM;
}

static int transition_log(struct entity_view *e, const struct machine_step_context *c, const struct inbox_item *it,
                          const char *from, const char *to, enum transition_result result, const char *reason)
{
    return transition_add(e, c, it, from, to, it->has_version, it->version, result, reason);
}

/* Appends the JSON text of a version (or null). */
static int json_version(struct buf *b, bool has, int64_t v)
{
    return has ? buf_printf(b, "%" PRId64, v) : buf_puts(b, "null");
}

/*
 * The emitted event's data, {"entity": {"kind", "id"}, "previous_state",
 * "state", "version", "source", "source_event_id", "inbox_id", "event_type"}
 * (+ "reconciled": true), written as text: the writer thread builds one per
 * applied event, and a JSON tree packed and dumped for it cost more than its
 * insert. Strings are escaped by buf_json_string (an invalid UTF-8 byte as
 * U+FFFD; the receiver's JSON parse admits none). NULL when out of memory.
 */
static char *emitted_data(const struct inbox_item *it, const char *from, const char *to,
                          const struct machine_snapshot *snap)
{
    /* Each member's text up to its value, then the value as a JSON string; the version between the two runs. */
    const char *const head[][2] = {{"{\"entity\":{\"kind\":", it->entity_kind}, {",\"id\":", it->entity_id},
                                   {"},\"previous_state\":", from}, {",\"state\":", to}};
    const char *const tail[][2] = {{",\"source\":", it->source}, {",\"source_event_id\":", it->event_id},
                                   {",\"inbox_id\":", it->id}, {",\"event_type\":", it->event_type}};
    struct buf b;
    int rc = 0;

    buf_init(&b, EMITTED_DATA_MAX);
    for (size_t i = 0; rc == 0 && i < sizeof head / sizeof head[0]; i++)
        if ((rc = buf_puts(&b, head[i][0])) == 0)
            rc = buf_json_string(&b, head[i][1]);
    if (rc == 0)
        rc = buf_puts(&b, ",\"version\":");
    if (rc == 0)
        rc = snap ? json_version(&b, snap->has_version, snap->version) : json_version(&b, it->has_version, it->version);
    for (size_t i = 0; rc == 0 && i < sizeof tail / sizeof tail[0]; i++)
        if ((rc = buf_puts(&b, tail[i][0])) == 0)
            rc = buf_json_string(&b, tail[i][1]);
    if (rc == 0)
        rc = buf_puts(&b, snap ? ",\"reconciled\":true}" : "}");
    if (rc) {
        buf_free(&b);
        return NULL;
    }
    return buf_steal(&b);
}

/* The emitted event: order.status_changed with the entity, both states, the version and the source's event. */
static int emit(struct entity_view *e, const struct machine *m, const struct inbox_item *it, const char *from,
                const char *to, const struct machine_step_context *c, const struct machine_snapshot *snap)
{
    struct step_writes *w = &e->w;

    if (!m->emit)
        return 0;
    if (!grow((void **)&w->ev, w->nev, &w->cap_ev, sizeof *w->ev))
        return HOOKD_ENOMEM;
    struct event *ev = &w->ev[w->nev++];
    *ev = (struct event){
        .type = m->emit,
        .resource_type = it->entity_kind,
        .resource_id = it->entity_id,
        .has_resource_version = snap ? snap->has_version : it->has_version,
        .resource_version = snap ? snap->version : it->version,
        .created_at = c->now,
    };
    ev->payload = emitted_data(it, from, to, snap);
    /* One emitted event per applied item, whatever happens: the key makes a second insert a no-op. */
    size_t key_len = strlen("hookd.machine:") + strlen(it->id) + strlen(":reconciled") + 1;
    if ((ev->idempotency_key = malloc(key_len)) != NULL)
        snprintf(ev->idempotency_key, key_len, "hookd.machine:%s%s", it->id, snap ? ":reconciled" : "");
    return ev->payload && ev->idempotency_key ? 0 : HOOKD_ENOMEM;
}

/* Applies the decision's transition: the entity (written at the step's end), transitions row, emitted event. */
static int apply(const struct machine *m, const struct machine_step_context *c, const struct inbox_item *it,
                 struct entity_view *e, const struct machine_decision *d)
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
    rc = transition_log(e, c, it, from, to, TRANSITION_APPLIED, NULL);
    if (rc == 0)
        rc = emit(e, m, it, from, to, c, NULL);
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

/*
 * A deferred item waits for something to change: a contiguous gap for an
 * event of its entity, a transition not allowed for its entity to move or its
 * machine to change. Each applied event re-evaluates the entity's waiting
 * items at once (reevaluate), and a machine's update wakes the deferred items
 * of its sources (store_machine_update): looking at the item on the retry
 * schedule meanwhile would only defer it again (a claim, a decision and a
 * transitions row each time). So it comes back when reconciliation is due
 * (a gap, when the source can reconcile), else at max_defer to be
 * quarantined. An item the re-evaluation could miss keeps the schedule: the
 * entity had more open items than a decision reads (ENTITY_OPEN_MAX).
 */
static void defer_wait_for_change(const struct machine_step_context *c, const struct inbox_item *it,
                                  const struct entity_view *e, enum machine_verdict verdict,
                                  struct machine_outcome *out)
{
    int64_t since = it->status == INBOX_DEFERRED && it->deferred_at ? it->deferred_at : c->now;
    int64_t limit = since + c->max_defer_ms, reconcile = since + c->reconcile_after_ms;
    bool seen = e->open_total < ENTITY_OPEN_MAX; /* the next applied event's re-evaluation reads this item */

    if (verdict == VERDICT_GAP && c->may_reconcile) {
        if (reconcile > c->now && (seen || reconcile < out->next_attempt_at))
            out->next_attempt_at = reconcile < limit ? reconcile : limit;
    } else if (seen) {
        out->next_attempt_at = limit;
    }
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
static int reevaluate(const struct machine *m, const struct machine_step_context *c, const struct inbox_item *current,
                      struct entity_view *e, struct machine_outcome *out)
{
    int rc = 0;

    for (bool changed = true; rc == 0 && changed;) {
        changed = false;
        for (size_t i = 0; rc == 0 && i < e->open.n; i++) {
            const struct inbox_item *it = &e->open.items[i];
            struct machine_decision d;

            if (e->done[i] || strcmp(it->id, current->id) == 0 || (it->lease_owner && it->lease_until > c->now))
                continue;
            /* Most keep waiting: their verdict alone, the reason only for those that pass. */
            if (!machine_may_pass(m, e->rec.state, e->rec.has_version, e->rec.version, it->event_type,
                                  it->has_version, it->version))
                continue;
            machine_decide(m, e->rec.state, e->rec.has_version, e->rec.version, it->event_type, it->has_version,
                           it->version, &d);
            if (d.verdict != VERDICT_APPLY && d.verdict != VERDICT_STALE)
                continue; /* still waiting: its own schedule looks at it again */
            if (d.verdict == VERDICT_APPLY)
                rc = apply(m, c, it, e, &d);
            else
                rc = transition_log(e, c, it, e->rec.state, NULL, TRANSITION_STALE, d.reason);
            if (rc == 0 && !grow((void **)&e->w.st, e->w.nst, &e->w.cap_st, sizeof *e->w.st))
                rc = HOOKD_ENOMEM;
            if (rc == 0) {
                /* Settled when the step's writes go (entity_flush), fenced: taken by a worker meanwhile undoes it. */
                e->w.st[e->w.nst++] = (struct inbox_settle){
                    .id = it->id, .status = INBOX_PROCESSED, .result = d.verdict == VERDICT_APPLY ? "applied" : "stale"};
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
static int decide_and_write(const struct machine *m, const struct machine_step_context *c,
                            const struct inbox_item *it, struct entity_view *e, const struct machine_decision *d,
                            struct machine_outcome *out)
{
    int rc;

    switch (d->verdict) {
    case VERDICT_STALE:
        out->status = INBOX_PROCESSED;
        out->result = "stale";
        return transition_log(e, c, it, e->rec.state, NULL, TRANSITION_STALE, d->reason);
    case VERDICT_APPLY:
        out->status = INBOX_PROCESSED;
        out->result = "applied";
        rc = apply(m, c, it, e, d);
        if (rc == 0) {
            out->applied++;
            rc = reevaluate(m, c, it, e, out);
        }
        return rc;
    default:
        break;
    }
    /* Waiting: the entity's other open items may move it first (an earlier version not taken yet). */
    int applied_before = out->applied;
    rc = reevaluate(m, c, it, e, out);
    if (rc)
        return rc;
    if (out->applied > applied_before) {
        struct machine_decision again;
        machine_decide(m, e->rec.state, e->rec.has_version, e->rec.version, it->event_type, it->has_version,
                       it->version, &again);
        if (again.verdict == VERDICT_APPLY || again.verdict == VERDICT_STALE)
            return decide_and_write(m, c, it, e, &again, out);
    }
    defer_or_quarantine(c, it, d, out);
    if (out->status == INBOX_DEFERRED)
        defer_wait_for_change(c, it, e, d->verdict, out);
    rc = transition_log(e, c, it, e->rec.state, NULL,
                        out->status == INBOX_QUARANTINED ? TRANSITION_QUARANTINED : TRANSITION_DEFERRED, out->error);
    if (rc == 0 && out->status == INBOX_QUARANTINED)
        log_warn(PART, "item %s of %s quarantined by machine %s (deferred past max_defer)", it->id, it->source,
                 m->name);
    return rc;
}

/*
 * The entity's pending items of the claimed item's source that still cannot
 * pass once the step has decided (a gap, or a transition not allowed from
 * where the entity ends), deferred by this step: their own claim would only
 * defer them the same way (same source: the same schedule, max_defer and
 * reconciliation), each a claim, a hold of the entity and an outcome of its
 * own. Each gets its transitions row and waits for a change like any deferred
 * item. An item whose source reconciles and that has no version is left to
 * its claim, which asks the provider first (DESIGN §7 rule 4); items of other
 * sources keep their own rules; applicable ones (the claimed item was stale,
 * so nothing was re-evaluated) are left for their claim to apply.
 */
static int defer_pending(const struct machine *m, const struct machine_step_context *c,
                         const struct inbox_item *current, struct entity_view *e, struct machine_outcome *out)
{
    int rc = 0;

    for (size_t i = 0; c->defer_pending && rc == 0 && i < e->open.n; i++) {
        const struct inbox_item *it = &e->open.items[i];
        struct machine_outcome o = {.attempts = it->attempts + 1};
        struct machine_decision d;

        if (e->done[i] || it->status != INBOX_PENDING || strcmp(it->id, current->id) == 0 ||
            strcmp(it->source, current->source) != 0 || (it->lease_owner && it->lease_until > c->now) ||
            (c->may_reconcile && !it->has_version))
            continue;
        machine_decide(m, e->rec.state, e->rec.has_version, e->rec.version, it->event_type, it->has_version,
                       it->version, &d);
        if (d.verdict == VERDICT_APPLY || d.verdict == VERDICT_STALE)
            continue;
        defer_or_quarantine(c, it, &d, &o);
        if (o.status == INBOX_DEFERRED)
            defer_wait_for_change(c, it, e, d.verdict, &o);
        rc = transition_log(e, c, it, e->rec.state, NULL,
                            o.status == INBOX_QUARANTINED ? TRANSITION_QUARANTINED : TRANSITION_DEFERRED, o.error);
        if (rc == 0 && !grow((void **)&e->w.st, e->w.nst, &e->w.cap_st, sizeof *e->w.st))
            rc = HOOKD_ENOMEM;
        if (rc)
            break;
        /* The error is the transitions row's reason (owned by it until the step's writes go). */
        e->w.st[e->w.nst++] = (struct inbox_settle){.id = it->id, .status = o.status,
                                                    .error = e->w.t[e->w.nt - 1].reason,
                                                    .next_attempt_at = o.next_attempt_at};
        e->done[i] = true;
        out->deferred++;
        if (o.status == INBOX_QUARANTINED)
            log_warn(PART, "item %s of %s quarantined by machine %s (deferred past max_defer)", it->id, it->source,
                     m->name);
    }
    return rc;
}

/*
 * An entity the machine's emitted events could not name: its kind and id are
 * their resource type and id, which the outbox check refuses with a control
 * character, a NUL, invalid UTF-8 or over 255 bytes (core/event_check.h).
 * Every decision on it would be undone by that insert and the item looked at
 * again and again; it is quarantined with the reason instead. Returns true
 * when it was.
 */
static bool entity_unnameable(const struct machine *m, const struct inbox_item *it, struct machine_outcome *out)
{
    const char *why = NULL, *what = "kind";

    if (!m->emit || !it->entity_kind || !it->entity_id)
        return false;
    if ((why = event_label_problem(it->entity_kind, strlen(it->entity_kind))) == NULL) {
        what = "id";
        why = event_label_problem(it->entity_id, strlen(it->entity_id));
    }
    if (!why)
        return false;
    out->status = INBOX_QUARANTINED;
    snprintf(out->error, sizeof out->error, "the entity %s %s: machine %s cannot emit an event naming it", what, why,
             m->name);
    log_warn(PART, "item %s of %s quarantined: the entity %s %s", it->id, it->source, what, why);
    return true;
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
    if (entity_unnameable(m, it, out))
        return 0;
    rc = entity_view_take(h, &e);
    if (rc == 0) {
        machine_decide(m, e.rec.state, e.rec.has_version, e.rec.version, it->event_type, it->has_version,
                       it->version, &d);
        /* A gap that has waited past reconcile_after: the provider is asked first (nothing written now). */
        if (d.verdict == VERDICT_GAP && c->may_reconcile && it->status == INBOX_DEFERRED && it->deferred_at &&
            c->now - it->deferred_at >= c->reconcile_after_ms && c->now - it->deferred_at < c->max_defer_ms)
            out->needs_reconcile = true;
        else
            rc = decide_and_write(m, c, it, &e, &d, out);
        if (rc == 0 && !out->needs_reconcile)
            rc = defer_pending(m, c, it, &e, out);
    }
    rc = entity_flush(s, c, &e, out, rc);
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
    if (entity_unnameable(m, it, out))
        return 0;
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
        e.dirty = true;
        rc = transition_add(&e, c, it, from, to, snap->has_version, snap->version, TRANSITION_RECONCILED,
                            "the provider's state and version");
        if (rc == 0 && changed)
            rc = emit(&e, m, it, from, to, c, snap);
        free(from);
        if (rc)
            goto out;
    }
    if (!it->has_version || m->versioning == VERSIONING_NONE) {
        /* The provider's answer is the truth this event was about: nothing is left to apply. */
        out->status = INBOX_PROCESSED;
        out->result = "reconciled";
        rc = reevaluate(m, c, it, &e, out);
        goto out;
    }
    machine_decide(m, e.rec.state, e.rec.has_version, e.rec.version, it->event_type, it->has_version, it->version,
                   &d);
    rc = decide_and_write(m, c, it, &e, &d, out);
    if (rc == 0 && d.verdict != VERDICT_APPLY)
        rc = reevaluate(m, c, it, &e, out); /* the versions at or below the provider's turn stale */
    if (rc == 0)
        rc = defer_pending(m, c, it, &e, out);
out:
    rc = entity_flush(s, c, &e, out, rc);
    entity_view_free(&e);
    return rc;
}
