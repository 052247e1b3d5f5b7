/*
 * PostgreSQL backend, machines: definitions, entities (held for a decision
 * by a transaction-scoped advisory lock on the pair, so nodes serialize on
 * one entity and no other), the transitions log, the settling of deferred
 * items a re-evaluation decided, and the audit counts.
 */
#include "store/postgres_internal.h"

#include <stdlib.h>
#include <string.h>

#include "core/clock.h"

/* Statement slots, in this family's range (postgres_internal.h). */
enum {
    PG_MACHINE_INSERT = PG_MACHINES,
    PG_MACHINE_UPDATE,
    PG_MACHINE_GET,
    PG_MACHINE_LIST,
    PG_MACHINE_DELETE,
    PG_MACHINE_WAKE,
    PG_ENTITY_LOCK,
    PG_ENTITY_GET,
    PG_ENTITY_PUT,
    PG_ENTITY_OPEN,
    PG_TRANSITION_INSERT,
    PG_TRANSITION_LIST,
    PG_INBOX_SETTLE,
    PG_AUDIT,
    PG_DECISION_TRANSITIONS,
    PG_DECISION_EVENTS,
    PG_DECISION_SETTLES,
    PG_DECISION_EVENT,
    PG_MACHINES_END
};
_Static_assert((int)PG_MACHINES_END <= (int)PG_REPLAYS, "the machines statements overflow their slots");

static int machine_write(struct store *s, const struct machine_record *m, bool update)
{
    static const char insert_sql[] = "INSERT INTO hookd_machines(" STORE_MACHINE_COLUMNS ") VALUES ($1, $2, $3, $4)"
                                     " ON CONFLICT (name) DO NOTHING";
    static const char update_sql[] =
        "UPDATE hookd_machines SET definition = $2, updated_at = $4 WHERE name = $1 AND $3::bigint IS NOT NULL";
    struct pg_params p = {.n = 0};
    int64_t now = clock_now_ms(), rows = 0;
    int result;

    if (m->name[0] == '\0' || !m->definition)
        return HOOKD_EINVAL;
    pg_param_text(&p, 1, m->name);
    pg_param_text(&p, 2, m->definition);
    pg_param_i64(&p, 3, m->created_at ? m->created_at : now);
    pg_param_i64(&p, 4, m->updated_at ? m->updated_at : now);
    result = pg_run_command(s, update ? PG_MACHINE_UPDATE : PG_MACHINE_INSERT, update ? update_sql : insert_sql, &p,
                            &rows);
    if (result == 0 && rows == 0)
        result = update ? HOOKD_ENOTFOUND : HOOKD_EEXISTS;
    if (result == 0 && update) {
        /* The deferred items of its sources are due now (see sqlite_machines.c, machine_wake). */
        struct pg_params w = {.n = 0};
        pg_param_text(&w, 1, m->name);
        pg_param_i64(&w, 2, now);
        result = pg_run_command(s, PG_MACHINE_WAKE,
                                "UPDATE hookd_inbox SET next_attempt_at = $2 WHERE status = 'deferred'"
                                " AND next_attempt_at > $2 AND source IN (SELECT name FROM hookd_sources"
                                " WHERE definition LIKE '%\"machine\"%' AND hookd_source_machine(definition) = $1)",
                                &w, NULL);
    }
    return result;
}

static int postgres_machine_insert(struct store *s, const struct machine_record *m) { return machine_write(s, m, false); }
static int postgres_machine_update(struct store *s, const struct machine_record *m) { return machine_write(s, m, true); }

static const char machine_get_sql[] = "SELECT " STORE_MACHINE_COLUMNS " FROM hookd_machines WHERE name = $1";

static int postgres_machine_get(struct store *s, const char *name, struct machine_record *out)
{
    struct pg_params p = {.n = 0};

    pg_param_text(&p, 1, name);
    return pg_get(s, PG_MACHINE_GET, machine_get_sql, &p, store_read_machine, out);
}

static int postgres_machine_list(struct store *s, const struct machine_filter *f, struct machine_list *out)
{
    struct pg_params p = {.n = 0};

    pg_param_text(&p, 1, f->before_name);
    pg_param_int(&p, 2, store_list_limit(f->limit));
    return pg_list(s, PG_MACHINE_LIST,
                   "SELECT " STORE_MACHINE_COLUMNS " FROM hookd_machines WHERE ($1::text IS NULL OR name < $1)"
                   " ORDER BY name DESC LIMIT $2",
                   &p, store_read_machine, STORE_ROWS(out, store_free_machine));
}

static int postgres_machine_delete(struct store *s, const char *name)
{
    struct pg_params p = {.n = 0};
    int64_t rows = 0;
    int result;

    pg_param_text(&p, 1, name);
    result = pg_run_command(s, PG_MACHINE_DELETE, "DELETE FROM hookd_machines WHERE name = $1", &p, &rows);
    return result == 0 && rows == 0 ? HOOKD_ENOTFOUND : result;
}

/*
 * A lock on the pair, not on its row: the first event of an entity finds no
 * row to lock, and two nodes must still not both create it. The key space is
 * hashtextextended's; a collision only serializes two entities needlessly.
 */
static const char entity_lock_sql[] =
    "SELECT pg_advisory_xact_lock(hashtextextended($1 || chr(31) || $2, 7226080340517711106))";
static const char entity_get_sql[] =
    "SELECT " STORE_ENTITY_COLUMNS " FROM hookd_entities WHERE kind = $1 AND id = $2";

static int postgres_entity_lock(struct store *s, const char *kind, const char *id)
{
    struct pg_params p = {.n = 0};

    pg_param_text(&p, 1, kind);
    pg_param_text(&p, 2, id);
    return pg_run_command(s, PG_ENTITY_LOCK, entity_lock_sql, &p, NULL);
}

static int postgres_entity_get(struct store *s, const char *kind, const char *id, struct entity_record *out)
{
    struct pg_params p = {.n = 0};

    pg_param_text(&p, 1, kind);
    pg_param_text(&p, 2, id);
    return pg_get(s, PG_ENTITY_GET, entity_get_sql, &p, store_read_entity, out);
}

/*
 * One round trip: the lock, then (in the same pipeline, so after it is
 * granted, each statement with its own snapshot) the machine, the entity and
 * its open items. Every open item, whatever the window (w: the accepts'
 * decisions that use one run on SQLite only).
 */
static int postgres_entity_hold(struct store *s, const char *machine, const char *kind, const char *id,
                                const struct hold_window *w, struct entity_hold *out)
{
    struct pg_params key = {.n = 0}, name = {.n = 0}, open = {.n = 0};
    PGresult *res[4];
    int result;

    (void)w;
    pg_param_text(&key, 1, kind);
    pg_param_text(&key, 2, id);
    pg_param_text(&name, 1, machine);
    pg_param_text(&open, 1, kind);
    pg_param_text(&open, 2, id);
    pg_param_int(&open, 3, ENTITY_OPEN_MAX);
    const struct pg_stmt st[4] = {
        {PG_ENTITY_LOCK, entity_lock_sql, &key},
        {PG_MACHINE_GET, machine_get_sql, &name},
        {PG_ENTITY_GET, entity_get_sql, &key},
        {PG_ENTITY_OPEN,
         "SELECT " STORE_INBOX_OPEN_COLUMNS " FROM hookd_inbox WHERE entity_kind = $1 AND entity_id = $2"
         " AND status IN ('pending', 'deferred') LIMIT $3",
         &open},
    };
    result = pg_run_many(s, st, 4, res);
    if (result)
        return result;
    if (PQntuples(res[1]) > 0) {
        result = pg_row_read(res[1], 0, store_read_machine, &out->machine);
        out->machine_found = result == 0;
    }
    if (result == 0 && PQntuples(res[2]) > 0) {
        result = pg_row_read(res[2], 0, store_read_entity, &out->entity);
        out->known = result == 0;
    }
    if (result == 0)
        result = pg_rows_read(res[3], store_read_inbox_open, STORE_ROWS(&out->open, store_free_inbox));
    out->open_total = out->open.n;
    for (int i = 0; i < 4; i++)
        PQclear(res[i]);
    if (result)
        entity_hold_free(out);
    return result;
}

static const char entity_put_sql[] =
    "INSERT INTO hookd_entities(" STORE_ENTITY_COLUMNS ") VALUES ($1, $2, $3, $4, $5, $6)"
    " ON CONFLICT (kind, id) DO UPDATE SET state = excluded.state, version = excluded.version,"
    " last_event_id = excluded.last_event_id, updated_at = excluded.updated_at";

static void entity_put_params(const struct entity_record *e, struct pg_params *p)
{
    pg_param_text(p, 1, e->kind);
    pg_param_text(p, 2, e->id);
    pg_param_text(p, 3, e->state);
    if (e->has_version)
        pg_param_i64(p, 4, e->version);
    else
        pg_param_null(p, 4, PG_OID_INT8);
    pg_param_text(p, 5, e->last_event_id);
    pg_param_i64(p, 6, e->updated_at ? e->updated_at : clock_now_ms());
}

static int postgres_entity_put(struct store *s, const struct entity_record *e)
{
    struct pg_params p = {.n = 0};

    entity_put_params(e, &p);
    return pg_run_command(s, PG_ENTITY_PUT, entity_put_sql, &p, NULL);
}

static const char transition_insert_sql[] =
    "INSERT INTO hookd_transitions(inbox_id, source, kind, entity_id, event_id, from_state, to_state,"
    " version, result, reason, worker, at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
    " RETURNING seq";

static void transition_params(const struct transition_record *t, int64_t now, struct pg_params *p)
{
    pg_param_text(p, 1, t->inbox_id);
    pg_param_text(p, 2, t->source);
    pg_param_text(p, 3, t->kind);
    pg_param_text(p, 4, t->entity_id);
    pg_param_text(p, 5, t->event_id);
    pg_param_text(p, 6, t->from_state);
    pg_param_text(p, 7, t->to_state);
    if (t->has_version)
        pg_param_i64(p, 8, t->version);
    else
        pg_param_null(p, 8, PG_OID_INT8);
    pg_param_text(p, 9, t->result);
    pg_param_text(p, 10, t->reason);
    pg_param_text(p, 11, t->worker);
    pg_param_i64(p, 12, t->at ? t->at : now);
}

static int postgres_transition_insert(struct store *s, struct transition_record *t)
{
    struct pg_params p = {.n = 0};
    PGresult *res;
    int result;

    transition_params(t, clock_now_ms(), &p);
    result = pg_run(s, PG_TRANSITION_INSERT, transition_insert_sql, &p, &res);
    if (result)
        return result;
    if (PQntuples(res) == 1)
        t->seq = pg_col_i64(res, 0, 0);
    else
        result = HOOKD_EIO;
    PQclear(res);
    return result;
}

static int postgres_transition_list(struct store *s, const char *kind, const char *id, struct transition_list *out)
{
    struct pg_params p = {.n = 0};

    out->items = NULL;
    out->n = 0;
    pg_param_text(&p, 1, kind);
    pg_param_text(&p, 2, id);
    pg_param_int(&p, 3, TRANSITION_LIST_MAX);
    return pg_list(s, PG_TRANSITION_LIST,
                   "SELECT " STORE_TRANSITION_COLUMNS " FROM hookd_transitions WHERE kind = $1 AND entity_id = $2"
                   " ORDER BY seq LIMIT $3",
                   &p, store_read_transition, STORE_ROWS(out, store_free_transition));
}

static const char settle_sql[] =
    "UPDATE hookd_inbox SET status = $2, result = $3, error = $4,"
    " next_attempt_at = CASE WHEN $2 = 'deferred' THEN $5::bigint END,"
    " processed_at = CASE WHEN $2 = 'processed' THEN $6 ELSE processed_at END,"
    " deferred_at = CASE WHEN $2 = 'deferred' THEN COALESCE(deferred_at, $6) END,"
    " attempts = attempts + 1"
    " WHERE id = $1 AND status IN ('pending', 'deferred') AND (lease_until IS NULL OR lease_until <= $6)";

static void settle_params(const struct inbox_settle *r, int64_t now, struct pg_params *p)
{
    pg_param_text(p, 1, r->id);
    pg_param_text(p, 2, inbox_status_name(r->status));
    pg_param_text(p, 3, r->result);
    pg_param_text(p, 4, r->error);
    pg_param_i64(p, 5, r->next_attempt_at ? r->next_attempt_at : now);
    pg_param_i64(p, 6, now);
}

static int postgres_inbox_settle(struct store *s, const struct inbox_settle *r, int64_t now)
{
    struct pg_params p = {.n = 0};
    int64_t rows = 0;
    int result;

    settle_params(r, now, &p);
    result = pg_run_command(s, PG_INBOX_SETTLE, settle_sql, &p, &rows);
    return result == 0 && rows == 0 ? HOOKD_ESTALE : result;
}

/*
 * A decision's writes, all in one pipeline: each kind of row one statement,
 * the single-row one when there is one row (the common case: a deferral's
 * transitions row), else one over arrays unnested in order (so seq follows
 * the decision), the settled items through hookd_inbox_settle_many, and
 * last the decided item's own outcome (a round trip of its own before).
 */
#define DECISION_TRANSITION_COLUMNS 12
#define DECISION_SETTLE_COLUMNS 5
_Static_assert(STORE_EVENT_NVALUES == 9, "the events statements bind nine values");

static const char event_insert_sql[] = "INSERT INTO hookd_outbox(" STORE_EVENT_INSERT_COLUMNS ")"
                                       " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING";

struct decision_arrays {
    struct pg_array t[DECISION_TRANSITION_COLUMNS];
    struct pg_array e[STORE_EVENT_NVALUES];
    struct pg_array u[DECISION_SETTLE_COLUMNS];
};

static void decision_arrays_free(struct decision_arrays *a)
{
    for (int c = 0; c < DECISION_TRANSITION_COLUMNS; c++)
        pg_array_free(&a->t[c]);
    for (int c = 0; c < STORE_EVENT_NVALUES; c++)
        pg_array_free(&a->e[c]);
    for (int c = 0; c < DECISION_SETTLE_COLUMNS; c++)
        pg_array_free(&a->u[c]);
}

/* Closes the n arrays into p's parameters 1..n (i64 where int_cols has the bit); false on allocation failure. */
static bool arrays_bind(struct pg_array *a, int n, uint32_t int_cols, struct pg_params *p)
{
    for (int c = 0; c < n; c++) {
        const char *literal = pg_array_end(&a[c]);
        if (!literal)
            return false;
        if (int_cols & (1u << c))
            pg_param_i64_array(p, c + 1, literal);
        else
            pg_param_text_array(p, c + 1, literal);
    }
    return true;
}

static bool transitions_bind(const struct decision_writes *w, int64_t now, struct pg_array *a, struct pg_params *p)
{
    for (size_t i = 0; i < w->n_transitions; i++) {
        const struct transition_record *t = &w->transitions[i];
        int c = 0;
        pg_array_text(&a[c++], t->inbox_id);
        pg_array_text(&a[c++], t->source);
        pg_array_text(&a[c++], t->kind);
        pg_array_text(&a[c++], t->entity_id);
        pg_array_text(&a[c++], t->event_id);
        pg_array_text(&a[c++], t->from_state);
        pg_array_text(&a[c++], t->to_state);
        if (t->has_version)
            pg_array_i64(&a[c++], t->version);
        else
            pg_array_text(&a[c++], NULL);
        pg_array_text(&a[c++], t->result);
        pg_array_text(&a[c++], t->reason);
        pg_array_text(&a[c++], t->worker);
        pg_array_i64(&a[c++], t->at ? t->at : now);
    }
    return arrays_bind(a, DECISION_TRANSITION_COLUMNS, 1u << 7 | 1u << 11, p);
}

static bool events_bind(const struct decision_writes *w, struct pg_array *a, struct pg_params *p)
{
    struct store_value v[STORE_EVENT_NVALUES];
    uint32_t int_cols = 0;

    if (w->n_events == 1) {
        store_event_values(&w->events[0], v);
        pg_param_values(p, v, STORE_EVENT_NVALUES);
        return true;
    }
    for (size_t i = 0; i < w->n_events; i++) {
        store_event_values(&w->events[i], v);
        for (int c = 0; c < STORE_EVENT_NVALUES; c++)
            pg_array_value(&a[c], &v[c]);
    }
    for (int c = 0; c < STORE_EVENT_NVALUES; c++)
        if (v[c].type != STORE_V_TEXT)
            int_cols |= 1u << c;
    return arrays_bind(a, STORE_EVENT_NVALUES, int_cols, p);
}

static bool settles_bind(const struct decision_writes *w, int64_t now, struct pg_array *a, struct pg_params *p)
{
    for (size_t i = 0; i < w->n_settles; i++) {
        const struct inbox_settle *r = &w->settles[i];
        pg_array_text(&a[0], r->id);
        pg_array_text(&a[1], inbox_status_name(r->status));
        pg_array_text(&a[2], r->result);
        pg_array_text(&a[3], r->error);
        pg_array_i64(&a[4], r->next_attempt_at ? r->next_attempt_at : now);
    }
    pg_param_i64(p, DECISION_SETTLE_COLUMNS + 1, now);
    return arrays_bind(a, DECISION_SETTLE_COLUMNS, 1u << 4, p);
}

static int postgres_decision_write(struct store *s, struct decision_writes *w, int64_t now)
{
    struct decision_arrays a = {0};
    struct pg_params tp = {.n = 0}, ep = {.n = 0}, xp = {.n = 0}, up = {.n = 0}, cp = {.n = 0};
    struct pg_stmt st[5];
    PGresult *res[5] = {0};
    int n = 0, events_at = -1, settles_at = -1, complete_at = -1, result = 0;
    bool ok = true;

    if (w->n_transitions == 1) {
        transition_params(&w->transitions[0], now, &tp);
        st[n++] = (struct pg_stmt){PG_TRANSITION_INSERT, transition_insert_sql, &tp};
    } else if (w->n_transitions > 1) {
        ok = transitions_bind(w, now, a.t, &tp);
        st[n++] = (struct pg_stmt){
            PG_DECISION_TRANSITIONS,
            "INSERT INTO hookd_transitions(inbox_id, source, kind, entity_id, event_id, from_state, to_state,"
            " version, result, reason, worker, at)"
            " SELECT c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12 FROM unnest($1, $2, $3, $4, $5, $6, $7, $8,"
            " $9, $10, $11, $12) WITH ORDINALITY AS u(c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, n)"
            " ORDER BY n",
            &tp};
    }
    if (ok && w->n_events) {
        ok = events_bind(w, a.e, &ep);
        events_at = n;
        st[n++] = w->n_events == 1
                      ? (struct pg_stmt){PG_DECISION_EVENT, event_insert_sql, &ep}
                      : (struct pg_stmt){PG_DECISION_EVENTS,
                                         "INSERT INTO hookd_outbox(" STORE_EVENT_INSERT_COLUMNS ")"
                                         " SELECT c1, c2, c3, c4, c5, c6, c7, c8, c9 FROM unnest($1, $2, $3, $4, $5,"
                                         " $6, $7, $8, $9) WITH ORDINALITY AS u(c1, c2, c3, c4, c5, c6, c7, c8, c9, n)"
                                         " ORDER BY n ON CONFLICT DO NOTHING",
                                         &ep};
    }
    if (ok && w->entity) {
        entity_put_params(w->entity, &xp);
        st[n++] = (struct pg_stmt){PG_ENTITY_PUT, entity_put_sql, &xp};
    }
    if (ok && w->n_settles) {
        settles_at = n;
        if (w->n_settles == 1) {
            settle_params(&w->settles[0], now, &up);
            st[n++] = (struct pg_stmt){PG_INBOX_SETTLE, settle_sql, &up};
        } else {
            ok = settles_bind(w, now, a.u, &up);
            st[n++] = (struct pg_stmt){PG_DECISION_SETTLES, "SELECT hookd_inbox_settle_many($1, $2, $3, $4, $5, $6)",
                                       &up};
        }
    }
    if (ok && w->complete) {
        complete_at = n;
        st[n++] = pg_inbox_complete_stmt(w->complete, now, &cp);
    }
    if (!ok)
        result = HOOKD_ENOMEM;
    else if (n > 0)
        result = pg_run_many(s, st, n, res);
    if (result == 0 && events_at >= 0)
        w->emitted = (int)strtol(PQcmdTuples(res[events_at]), NULL, 10);
    if (result == 0 && settles_at >= 0) {
        int64_t settled = w->n_settles == 1 ? strtoll(PQcmdTuples(res[settles_at]), NULL, 10)
                                            : pg_col_i64(res[settles_at], 0, 0);
        if (settled != (int64_t)w->n_settles)
            result = HOOKD_ESTALE; /* one of them was taken meanwhile: the caller undoes the decision */
    }
    if (result == 0 && complete_at >= 0 && strtoll(PQcmdTuples(res[complete_at]), NULL, 10) == 0) {
        w->complete_lost = true; /* the decided item's lease was lost: the decision is undone with it */
        result = HOOKD_ESTALE;
    }
    for (int i = 0; i < n; i++)
        PQclear(res[i]);
    decision_arrays_free(&a);
    return result;
}

/* The items the audit looks at: $1 a source or NULL, received in [$2, $3) (0: open). */
#define AUDIT_SCOPE(i)                                                                                        \
    " ($1::text IS NULL OR " i ".source = $1) AND ($2::bigint = 0 OR " i ".received_at >= $2)"                \
    " AND ($3::bigint = 0 OR " i ".received_at < $3)"

static int postgres_audit(struct store *s, const char *source, int64_t since, int64_t until, struct audit_report *out)
{
    struct pg_params p = {.n = 0};
    PGresult *res;
    int result;

    memset(out, 0, sizeof *out);
    pg_param_text(&p, 1, source);
    pg_param_i64(&p, 2, since);
    pg_param_i64(&p, 3, until);
    result = pg_run(
        s, PG_AUDIT,
        "SELECT (SELECT count(*) FROM hookd_inbox i WHERE i.dup_count > 0 AND" AUDIT_SCOPE("i") "),"
        " (SELECT COALESCE(sum(i.dup_count), 0) FROM hookd_inbox i WHERE i.dup_count > 0 AND" AUDIT_SCOPE("i") "),"
        " (SELECT count(*) FROM hookd_inbox i WHERE i.version IS NOT NULL AND i.entity_id IS NOT NULL AND"
        AUDIT_SCOPE("i") " AND EXISTS (SELECT 1 FROM hookd_inbox h WHERE h.entity_kind = i.entity_kind"
        " AND h.entity_id = i.entity_id AND h.source = i.source AND h.version > i.version"
        " AND (h.received_at < i.received_at OR (h.received_at = i.received_at AND h.id < i.id)))),"
        " (SELECT count(*) FROM (SELECT 1 FROM hookd_transitions t JOIN hookd_inbox i ON i.id = t.inbox_id"
        "  WHERE t.result = 'applied' AND t.version IS NOT NULL AND" AUDIT_SCOPE("i")
        "  GROUP BY t.kind, t.entity_id, t.version HAVING count(*) > 1) a)"
        " + (SELECT count(*) FROM (SELECT 1 FROM hookd_transitions t JOIN hookd_inbox i ON i.id = t.inbox_id"
        "  WHERE t.result = 'applied' AND" AUDIT_SCOPE("i") " GROUP BY t.inbox_id HAVING count(*) > 1) b),"
        " (SELECT count(*) FROM hookd_transitions t JOIN hookd_inbox i ON i.id = t.inbox_id"
        "  WHERE t.result = 'applied' AND i.status <> 'processed' AND" AUDIT_SCOPE("i") "),"
        " (SELECT count(*) FROM hookd_inbox i WHERE i.conflict_count > 0 AND" AUDIT_SCOPE("i") ")",
        &p, &res);
    if (result)
        return result;
    if (PQntuples(res) == 1) {
        out->received_twice = pg_col_i64(res, 0, 0);
        out->extra_copies = pg_col_i64(res, 0, 1);
        out->lower_after_higher = pg_col_i64(res, 0, 2);
        out->applied_twice = pg_col_i64(res, 0, 3);
        out->unprocessed_changes = pg_col_i64(res, 0, 4);
        out->conflicting = pg_col_i64(res, 0, 5);
    } else {
        result = HOOKD_EIO;
    }
    PQclear(res);
    return result;
}

const struct store_machine_ops postgres_machine_ops = {
    .insert = postgres_machine_insert,
    .update = postgres_machine_update,
    .get = postgres_machine_get,
    .list = postgres_machine_list,
    .delete = postgres_machine_delete,
    .entity_lock = postgres_entity_lock,
    .entity_get = postgres_entity_get,
    .entity_hold = postgres_entity_hold,
    .entity_put = postgres_entity_put,
    .transition_insert = postgres_transition_insert,
    .transition_list = postgres_transition_list,
    .settle = postgres_inbox_settle,
    .decision_write = postgres_decision_write,
    .audit = postgres_audit,
};
