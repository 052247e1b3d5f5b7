/*
 * SQLite backend, machines: definitions, the entity's write, the transitions
 * log, the settling of deferred items a re-evaluation decided, a decision's
 * writes (gathered over an accepts' group) and the audit counts; a
 * decision's reads are sqlite_hold.c's. One writer per file: an entity is
 * held by the write transaction already.
 */
#include "store/sqlite_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"

/* Statement slots, in this family's range (sqlite_internal.h). */
enum {
    SQ_MACHINE_INSERT = SQ_MACHINES,
    SQ_MACHINE_UPDATE,
    SQ_MACHINE_GET,
    SQ_MACHINE_LIST,
    SQ_MACHINE_LIST_AFTER,
    SQ_MACHINE_DELETE,
    SQ_MACHINE_WAKE,
    SQ_ENTITY_PUT,
    SQ_TRANSITION_INSERT,
    SQ_TRANSITION_LIST,
    SQ_INBOX_SETTLE,
    SQ_EMITTED_INSERT,
    SQ_INBOX_TAKEN,
    SQ_INBOX_INSERT_DECIDED,
    SQ_AUDIT_TWICE,
    SQ_AUDIT_LOWER,
    SQ_AUDIT_APPLIED_TWICE,
    SQ_AUDIT_UNPROCESSED,
    SQ_AUDIT_CONFLICTING,
    SQ_GATHER_TRANSITIONS_4,
    SQ_GATHER_TRANSITIONS_16,
    SQ_GATHER_EVENTS_4,
    SQ_GATHER_EVENTS_16,
    SQ_MACHINES_END
};
_Static_assert((int)SQ_MACHINES_END <= (int)SQ_HOLD, "the machines statements overflow their slots");

/*
 * A machine changed: the deferred items of its sources are due now (a
 * transition not allowed before may be allowed now; they wait for a change,
 * not for the retry schedule, machine_step.c). In the update's transaction.
 */
static int machine_wake(struct store *s, const char *name, int64_t now)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_MACHINE_WAKE,
                         "UPDATE hookd_inbox SET next_attempt_at = ?2 WHERE status = 'deferred' AND next_attempt_at > ?2"
                         " AND source IN (SELECT name FROM hookd_sources WHERE CASE WHEN json_valid(definition)"
                         " THEN json_extract(definition, '$.handler.machine') END = ?1)",
                         &st);

    if (result)
        return result;
    sq_bind_text(st, 1, name);
    sqlite3_bind_int64(st, 2, now);
    return sq_run(s, st, NULL);
}

static int machine_write(struct store *s, const struct machine_record *m, bool update)
{
    static const char insert_sql[] = "INSERT INTO hookd_machines(" STORE_MACHINE_COLUMNS ") VALUES (?1, ?2, ?3, ?4)"
                                     " ON CONFLICT(name) DO NOTHING";
    static const char update_sql[] = "UPDATE hookd_machines SET definition = ?2, updated_at = ?4 WHERE name = ?1";
    int64_t now = clock_now_ms();
    sqlite3_stmt *st;
    int changes = 0, result;

    if (m->name[0] == '\0' || !m->definition)
        return HOOKD_EINVAL;
    result = sq_stmt(s, update ? SQ_MACHINE_UPDATE : SQ_MACHINE_INSERT, update ? update_sql : insert_sql, &st);
    if (result)
        return result;
    sq_bind_text(st, 1, m->name);
    sq_bind_text(st, 2, m->definition);
    sqlite3_bind_int64(st, 3, m->created_at ? m->created_at : now);
    sqlite3_bind_int64(st, 4, m->updated_at ? m->updated_at : now);
    result = sq_run(s, st, &changes);
    if (result == 0 && changes == 0)
        result = update ? HOOKD_ENOTFOUND : HOOKD_EEXISTS;
    if (result == 0 && update)
        result = machine_wake(s, m->name, now);
    return result;
}

static int sqlite_machine_insert(struct store *s, const struct machine_record *m) { return machine_write(s, m, false); }
static int sqlite_machine_update(struct store *s, const struct machine_record *m) { return machine_write(s, m, true); }

int sqlite_machine_get(struct store *s, const char *name, struct machine_record *out)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_MACHINE_GET, "SELECT " STORE_MACHINE_COLUMNS " FROM hookd_machines WHERE name = ?1",
                         &st);

    if (result)
        return result;
    sq_bind_text(st, 1, name);
    return sq_row_read(s, st, store_read_machine, out);
}

static int sqlite_machine_list(struct store *s, const struct machine_filter *f, struct machine_list *out)
{
    static const char *const sql[] = {
        "SELECT " STORE_MACHINE_COLUMNS " FROM hookd_machines ORDER BY name DESC LIMIT ?2",
        "SELECT " STORE_MACHINE_COLUMNS " FROM hookd_machines WHERE name < ?1 ORDER BY name DESC LIMIT ?2",
    };
    bool after = f->before_name != NULL;
    int limit = store_list_limit(f->limit), result;
    sqlite3_stmt *st;

    out->items = NULL;
    out->n = 0;
    result = sq_stmt(s, after ? SQ_MACHINE_LIST_AFTER : SQ_MACHINE_LIST, sql[after], &st);
    if (result)
        return result;
    if (after)
        sq_bind_text(st, 1, f->before_name);
    sqlite3_bind_int(st, 2, limit);
    return sq_rows_read(s, st, (size_t)limit, store_read_machine, STORE_ROWS(out, store_free_machine));
}

static int sqlite_machine_delete(struct store *s, const char *name)
{
    sqlite3_stmt *st;
    int changes = 0, result = sq_stmt(s, SQ_MACHINE_DELETE, "DELETE FROM hookd_machines WHERE name = ?1", &st);

    if (result)
        return result;
    sq_bind_text(st, 1, name);
    result = sq_run(s, st, &changes);
    return result == 0 && changes == 0 ? HOOKD_ENOTFOUND : result;
}

/* The write transaction is the lock: SQLite has one writer per file. */
static int sqlite_entity_lock(struct store *s, const char *kind, const char *id)
{
    (void)s;
    (void)kind;
    (void)id;
    return 0;
}

static int sqlite_entity_put(struct store *s, const struct entity_record *e)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_ENTITY_PUT,
                         "INSERT INTO hookd_entities(" STORE_ENTITY_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
                         " ON CONFLICT(kind, id) DO UPDATE SET state = excluded.state, version = excluded.version,"
                         " last_event_id = excluded.last_event_id, updated_at = excluded.updated_at",
                         &st);

    if (result)
        return result;
    sq_bind_text(st, 1, e->kind);
    sq_bind_text(st, 2, e->id);
    sq_bind_text(st, 3, e->state);
    if (e->has_version)
        sqlite3_bind_int64(st, 4, e->version);
    else
        sqlite3_bind_null(st, 4);
    sq_bind_text(st, 5, e->last_event_id);
    sqlite3_bind_int64(st, 6, e->updated_at ? e->updated_at : clock_now_ms());
    return sq_run(s, st, NULL);
}

#define TRANSITION_INSERT_COLUMNS \
    "inbox_id, source, kind, entity_id, event_id, from_state, to_state, version, result, reason, worker, at"
#define TRANSITION_NVALUES 12
#define TRANSITION_INSERT_HEAD "INSERT INTO hookd_transitions(" TRANSITION_INSERT_COLUMNS ")"
#define TRANSITION_INSERT_SQL TRANSITION_INSERT_HEAD " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"

static void transition_values(const struct transition_record *t, struct store_value v[TRANSITION_NVALUES])
{
    const char *text[] = {t->inbox_id, t->source, t->kind, t->entity_id, t->event_id, t->from_state, t->to_state};

    for (int i = 0; i < 7; i++)
        v[i] = (struct store_value){.type = STORE_V_TEXT, .null = !text[i], .text = text[i]};
    v[7] = (struct store_value){.type = STORE_V_I64, .null = !t->has_version, .num = t->version};
    v[8] = (struct store_value){.type = STORE_V_TEXT, .null = !t->result, .text = t->result};
    v[9] = (struct store_value){.type = STORE_V_TEXT, .null = !t->reason, .text = t->reason};
    v[10] = (struct store_value){.type = STORE_V_TEXT, .null = !t->worker, .text = t->worker};
    v[11] = (struct store_value){.type = STORE_V_I64, .num = t->at ? t->at : clock_now_ms()};
}

static int sqlite_transition_insert(struct store *s, struct transition_record *t)
{
    struct store_value v[TRANSITION_NVALUES];
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_TRANSITION_INSERT, TRANSITION_INSERT_SQL, &st);

    if (result)
        return result;
    transition_values(t, v);
    sq_bind_values(st, v, TRANSITION_NVALUES);
    result = sq_run(s, st, NULL);
    if (result == 0)
        t->seq = sqlite3_last_insert_rowid(s->db);
    return result;
}

static int sqlite_transition_list(struct store *s, const char *kind, const char *id, struct transition_list *out)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_TRANSITION_LIST,
                         "SELECT " STORE_TRANSITION_COLUMNS " FROM hookd_transitions WHERE kind = ?1 AND entity_id = ?2"
                         " ORDER BY seq LIMIT ?3",
                         &st);

    out->items = NULL;
    out->n = 0;
    if (result)
        return result;
    sq_bind_text(st, 1, kind);
    sq_bind_text(st, 2, id);
    sqlite3_bind_int(st, 3, TRANSITION_LIST_MAX);
    return sq_rows_read(s, st, TRANSITION_LIST_MAX, store_read_transition, STORE_ROWS(out, store_free_transition));
}

static int sqlite_inbox_settle(struct store *s, const struct inbox_settle *r, int64_t now)
{
    sqlite3_stmt *st;
    int changes = 0, result;

    result = sq_stmt(s, SQ_INBOX_SETTLE,
                     "UPDATE hookd_inbox SET status = ?2, result = ?3, error = ?4,"
                     " next_attempt_at = CASE WHEN ?2 = 'deferred' THEN ?5 END,"
                     " processed_at = CASE WHEN ?2 = 'processed' THEN ?6 ELSE processed_at END,"
                     " deferred_at = CASE WHEN ?2 = 'deferred' THEN COALESCE(deferred_at, ?6) END,"
                     " attempts = attempts + 1"
                     " WHERE id = ?1 AND status IN ('pending', 'deferred') AND (lease_until IS NULL OR lease_until <= ?6)",
                     &st);
    if (result)
        return result;
    sq_bind_text(st, 1, r->id);
    sq_bind_text(st, 2, inbox_status_name(r->status));
    sq_bind_text(st, 3, r->result);
    sq_bind_text(st, 4, r->error);
    sqlite3_bind_int64(st, 5, r->next_attempt_at ? r->next_attempt_at : now);
    sqlite3_bind_int64(st, 6, now);
    result = sq_run(s, st, &changes);
    return result == 0 && changes == 0 ? HOOKD_ESTALE : result;
}

#define EMITTED_INSERT_HEAD "INSERT INTO hookd_outbox(" STORE_EVENT_INSERT_COLUMNS ")"
#define EMITTED_INSERT_TAIL " ON CONFLICT DO NOTHING"
#define EMITTED_INSERT_SQL EMITTED_INSERT_HEAD " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)" EMITTED_INSERT_TAIL

/*
 * An emitted event: inserted unless its idempotency key (hookd.machine:<inbox
 * id>) is taken, when it was emitted already. Without the RETURNING of the
 * events family's insert (SQLite gathers a RETURNING statement's rows in an
 * ephemeral table built for each run): the step needs no seq. *inserted
 * false when the row was there.
 */
static int sqlite_emitted_insert(struct store *s, struct event *ev, bool *inserted)
{
    struct store_value v[STORE_EVENT_NVALUES];
    sqlite3_stmt *st;
    int changes = 0, result = sq_stmt(s, SQ_EMITTED_INSERT, EMITTED_INSERT_SQL, &st);

    *inserted = false;
    if (result)
        return result;
    store_event_values(ev, v);
    sq_bind_values(st, v, STORE_EVENT_NVALUES);
    result = sq_run(s, st, &changes);
    *inserted = result == 0 && changes > 0;
    return result;
}

static int sqlite_inbox_taken(struct store *s, const char *source, const char *event_id, bool *taken)
{
    sqlite3_stmt *st;
    int rc, result = sq_stmt(s, SQ_INBOX_TAKEN, "SELECT 1 FROM hookd_inbox WHERE source = ?1 AND event_id = ?2", &st);

    if (result)
        return result;
    sq_bind_text(st, 1, source);
    sq_bind_text(st, 2, event_id);
    rc = sqlite3_step(st);
    *taken = rc == SQLITE_ROW;
    result = rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : sq_error(s, rc);
    sq_reset(st);
    return result;
}

/*
 * The accepted item inserted with the outcome its machine decided in this
 * transaction: one write of the row instead of an insert and a status change
 * (a status change follows four indexes). The receiver's columns and values
 * (store_inbox_values) with the status, the next look and the outcome's.
 */
static int sqlite_inbox_insert_decided(struct store *s, struct inbox_item *it, const struct inbox_settle *r,
                                       int attempts, int64_t now)
{
    struct store_value v[STORE_INBOX_NVALUES];
    bool open = r->status == INBOX_PENDING || r->status == INBOX_DEFERRED;
    sqlite3_stmt *st;
    int result = store_inbox_values(it, v);

    if (result)
        return result;
    it->status = r->status;
    it->next_attempt_at = open ? (r->next_attempt_at ? r->next_attempt_at : now) : 0;
    v[10] = (struct store_value){.type = STORE_V_TEXT, .text = inbox_status_name(r->status)};
    v[11] = (struct store_value){.type = STORE_V_I64, .null = !open, .num = it->next_attempt_at};
    result = sq_stmt(s, SQ_INBOX_INSERT_DECIDED,
                     "INSERT INTO hookd_inbox(" STORE_INBOX_INSERT_COLUMNS ", attempts, result, error, processed_at,"
                     " deferred_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,"
                     " ?17, ?18)",
                     &st);
    if (result)
        return result;
    sq_bind_values(st, v, STORE_INBOX_NVALUES);
    sqlite3_bind_int(st, 14, attempts);
    sq_bind_text(st, 15, r->result);
    sq_bind_text(st, 16, r->error);
    if (r->status == INBOX_PROCESSED)
        sqlite3_bind_int64(st, 17, now);
    if (r->status == INBOX_DEFERRED)
        sqlite3_bind_int64(st, 18, now);
    return sq_run(s, st, NULL);
}

/*
 * What decision_gather keeps back: the values of each row, their texts
 * copied into blocks that never move (a full block is followed by a new one).
 * Kept on the connection between groups, emptied after each.
 */
#define GATHER_BLOCK_BYTES (64u << 10)
struct gather_block {
    struct gather_block *next;
    size_t used, cap;
    char data[];
};
struct gather_rows {
    struct store_value *v; /* n values a row */
    size_t rows, cap;
};
struct sq_gather {
    bool on;
    struct gather_rows t, e; /* transitions rows (TRANSITION_NVALUES), events (STORE_EVENT_NVALUES) */
    struct gather_block *blocks;
};

static const char *gather_copy(struct sq_gather *g, const char *text)
{
    size_t n = strlen(text) + 1;
    struct gather_block *b = g->blocks;

    if (!b || b->cap - b->used < n) {
        size_t cap = n > GATHER_BLOCK_BYTES ? n : GATHER_BLOCK_BYTES;
        if (!(b = malloc(sizeof *b + cap)))
            return NULL;
        *b = (struct gather_block){.next = g->blocks, .cap = cap};
        g->blocks = b;
    }
    char *d = b->data + b->used;
    memcpy(d, text, n);
    b->used += n;
    return d;
}

/* One more row of n values, its texts copied; false when out of memory. */
static bool gather_row(struct sq_gather *g, struct gather_rows *r, const struct store_value *v, int n)
{
    if (r->rows == r->cap) {
        size_t want = r->cap ? r->cap * 2 : 64;
        struct store_value *p = realloc(r->v, want * (size_t)n * sizeof *p);
        if (!p)
            return false;
        r->v = p;
        r->cap = want;
    }
    struct store_value *row = r->v + r->rows * (size_t)n;
    for (int i = 0; i < n; i++) {
        row[i] = v[i];
        if (v[i].type == STORE_V_TEXT && !v[i].null && !(row[i].text = gather_copy(g, v[i].text)))
            return false;
    }
    r->rows++;
    return true;
}

static void gather_clear(struct sq_gather *g)
{
    while (g->blocks) {
        struct gather_block *b = g->blocks;
        g->blocks = b->next;
        free(b);
    }
    g->t.rows = g->e.rows = 0;
    g->on = false;
}

void sqlite_gather_free(struct store *s)
{
    if (!s->gather)
        return;
    gather_clear(s->gather);
    free(s->gather->t.v);
    free(s->gather->e.v);
    free(s->gather);
    s->gather = NULL;
}

/*
 * The kept rows of one table through statements of 16, 4 and 1 rows (each
 * prepared once: slot16, slot4, and the single-row statement's slot and
 * text), in the order they were kept. *changes: the rows inserted.
 */
static int gather_insert(struct store *s, const struct gather_rows *r, int n, const char *head, const char *tail,
                         int slot16, int slot4, int slot1, const char *sql1, int *changes)
{
    static const int sizes[] = {16, 4, 1};
    const int slots[] = {slot16, slot4, slot1};
    int result = 0;

    *changes = 0;
    for (size_t done = 0, k = 0; result == 0 && done < r->rows;) {
        size_t rows = (size_t)sizes[k];
        if (r->rows - done < rows) {
            k++;
            continue;
        }
        sqlite3_stmt *st;
        char sql[4096];
        const char *text = sql1; /* a slot's text only matters at its first prepare */
        if (rows > 1 && !s->stmts[slots[k]]) { /* "head VALUES (?, …), (?, …) tail" */
            size_t o = (size_t)snprintf(sql, sizeof sql, "%s VALUES ", head);
            for (size_t i = 0; i < rows; i++)
                for (int c = 0; c < n; c++)
                    o += (size_t)snprintf(sql + o, sizeof sql - o, "%s%s", c ? ", ?" : i ? ", (?" : "(?",
                                          c == n - 1 ? ")" : "");
            snprintf(sql + o, sizeof sql - o, "%s", tail);
            text = sql;
        }
        result = sq_stmt(s, slots[k], text, &st);
        for (size_t i = 0; result == 0 && i < rows; i++) {
            const struct store_value *v = r->v + (done + i) * (size_t)n;
            for (int c = 0; c < n; c++) {
                int param = (int)i * n + c + 1;
                if (v[c].null)
                    sqlite3_bind_null(st, param);
                else if (v[c].type == STORE_V_TEXT)
                    sqlite3_bind_text(st, param, v[c].text, -1, SQLITE_STATIC);
                else
                    sqlite3_bind_int64(st, param, v[c].num);
            }
        }
        int inserted = 0;
        if (result == 0)
            result = sq_run(s, st, &inserted);
        *changes += inserted;
        done += rows;
    }
    return result;
}

static int sqlite_decision_gather(struct store *s, int (*fn)(struct store *s, void *arg), void *arg)
{
    struct sq_gather *g = s->gather;
    int changes, result;

    if (!g && !(g = s->gather = calloc(1, sizeof *g)))
        return HOOKD_ENOMEM;
    if (g->on)
        return HOOKD_EINVAL; /* one group at a time */
    gather_clear(g);
    g->on = true;
    result = fn(s, arg);
    g->on = false;
    if (result == 0)
        result = gather_insert(s, &g->t, TRANSITION_NVALUES, TRANSITION_INSERT_HEAD, "", SQ_GATHER_TRANSITIONS_16,
                               SQ_GATHER_TRANSITIONS_4, SQ_TRANSITION_INSERT, TRANSITION_INSERT_SQL, &changes);
    if (result == 0)
        result = gather_insert(s, &g->e, STORE_EVENT_NVALUES, EMITTED_INSERT_HEAD, EMITTED_INSERT_TAIL,
                               SQ_GATHER_EVENTS_16, SQ_GATHER_EVENTS_4, SQ_EMITTED_INSERT, EMITTED_INSERT_SQL,
                               &changes);
    gather_clear(g);
    return result;
}

/*
 * One statement per row: SQLite's statements cost no round trip, and each
 * row's is prepared once; in an accepts' group (decision_gather) the
 * transitions rows and emitted events are kept for its multi-row statements.
 */
static int sqlite_decision_write(struct store *s, struct decision_writes *w, int64_t now)
{
    struct sq_gather *g = s->gather && s->gather->on ? s->gather : NULL;
    struct store_value v[TRANSITION_NVALUES > STORE_EVENT_NVALUES ? TRANSITION_NVALUES : STORE_EVENT_NVALUES];
    int result = 0;

    for (size_t i = 0; g && result == 0 && i < w->n_transitions; i++) {
        transition_values(&w->transitions[i], v);
        result = gather_row(g, &g->t, v, TRANSITION_NVALUES) ? 0 : HOOKD_ENOMEM;
    }
    for (size_t i = 0; g && result == 0 && i < w->n_events; i++) {
        store_event_values(&w->events[i], v);
        result = gather_row(g, &g->e, v, STORE_EVENT_NVALUES) ? 0 : HOOKD_ENOMEM;
        w->emitted += result == 0;
    }
    for (size_t i = 0; !g && result == 0 && i < w->n_transitions; i++)
        result = sqlite_transition_insert(s, &w->transitions[i]);
    for (size_t i = 0; !g && result == 0 && i < w->n_events; i++) {
        bool inserted;
        result = sqlite_emitted_insert(s, &w->events[i], &inserted);
        w->emitted += inserted;
    }
    if (result == 0 && w->entity)
        result = sqlite_entity_put(s, w->entity);
    for (size_t i = 0; result == 0 && i < w->n_settles; i++)
        result = sqlite_inbox_settle(s, &w->settles[i], now);
    if (result == 0 && w->complete) {
        result = sqlite_inbox_complete(s, w->complete, now);
        w->complete_lost = result == HOOKD_ESTALE;
    }
    return result;
}

/* The items the audit looks at: ?1 a source or NULL, received in [?2, ?3) (0: open). */
#define AUDIT_SCOPE(i)                                                                                        \
    " (?1 IS NULL OR " i ".source = ?1) AND (?2 = 0 OR " i ".received_at >= ?2) AND (?3 = 0 OR " i            \
    ".received_at < ?3)"

static int audit_count(struct store *s, int slot, const char *sql, const char *source, int64_t since, int64_t until,
                       int64_t *a, int64_t *b)
{
    sqlite3_stmt *st;
    int rc, result = sq_stmt(s, slot, sql, &st);

    if (result)
        return result;
    sq_bind_text(st, 1, source);
    sqlite3_bind_int64(st, 2, since);
    sqlite3_bind_int64(st, 3, until);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *a = sqlite3_column_int64(st, 0);
        if (b)
            *b = sqlite3_column_int64(st, 1);
    }
    result = rc == SQLITE_ROW ? 0 : sq_error(s, rc);
    sq_reset(st);
    return result;
}

static int sqlite_audit(struct store *s, const char *source, int64_t since, int64_t until, struct audit_report *out)
{
    int result;

    memset(out, 0, sizeof *out);
    result = audit_count(s, SQ_AUDIT_TWICE,
                         "SELECT count(*), COALESCE(sum(i.dup_count), 0) FROM hookd_inbox i WHERE i.dup_count > 0 AND"
                         AUDIT_SCOPE("i"),
                         source, since, until, &out->received_twice, &out->extra_copies);
    if (result == 0)
        result = audit_count(s, SQ_AUDIT_LOWER,
                             "SELECT count(*) FROM hookd_inbox i WHERE i.version IS NOT NULL AND i.entity_id IS NOT NULL"
                             " AND" AUDIT_SCOPE("i") " AND EXISTS (SELECT 1 FROM hookd_inbox h"
                             " WHERE h.entity_kind = i.entity_kind AND h.entity_id = i.entity_id"
                             " AND h.source = i.source AND h.version > i.version AND (h.received_at < i.received_at"
                             " OR (h.received_at = i.received_at AND h.id < i.id)))",
                             source, since, until, &out->lower_after_higher, NULL);
    if (result == 0)
        result = audit_count(s, SQ_AUDIT_APPLIED_TWICE,
                             "SELECT (SELECT count(*) FROM (SELECT 1 FROM hookd_transitions t"
                             "  JOIN hookd_inbox i ON i.id = t.inbox_id WHERE t.result = 'applied'"
                             "  AND t.version IS NOT NULL AND" AUDIT_SCOPE("i")
                             "  GROUP BY t.kind, t.entity_id, t.version HAVING count(*) > 1))"
                             " + (SELECT count(*) FROM (SELECT 1 FROM hookd_transitions t"
                             "  JOIN hookd_inbox i ON i.id = t.inbox_id WHERE t.result = 'applied' AND"
                             AUDIT_SCOPE("i") " GROUP BY t.inbox_id HAVING count(*) > 1))",
                             source, since, until, &out->applied_twice, NULL);
    if (result == 0)
        result = audit_count(s, SQ_AUDIT_UNPROCESSED,
                             "SELECT count(*) FROM hookd_transitions t JOIN hookd_inbox i ON i.id = t.inbox_id"
                             " WHERE t.result = 'applied' AND i.status <> 'processed' AND"
                             AUDIT_SCOPE("i"),
                             source, since, until, &out->unprocessed_changes, NULL);
    if (result == 0)
        result = audit_count(s, SQ_AUDIT_CONFLICTING,
                             "SELECT count(*) FROM hookd_inbox i WHERE i.conflict_count > 0 AND" AUDIT_SCOPE("i"),
                             source, since, until, &out->conflicting, NULL);
    return result;
}

const struct store_machine_ops sqlite_machine_ops = {
    .insert = sqlite_machine_insert,
    .update = sqlite_machine_update,
    .get = sqlite_machine_get,
    .list = sqlite_machine_list,
    .delete = sqlite_machine_delete,
    .entity_lock = sqlite_entity_lock,
    .entity_get = sqlite_entity_get,
    .entity_hold = sqlite_entity_hold,
    .entity_put = sqlite_entity_put,
    .transition_insert = sqlite_transition_insert,
    .transition_list = sqlite_transition_list,
    .settle = sqlite_inbox_settle,
    .decision_write = sqlite_decision_write,
    .inbox_taken = sqlite_inbox_taken,
    .inbox_insert_decided = sqlite_inbox_insert_decided,
    .decision_gather = sqlite_decision_gather,
    .audit = sqlite_audit,
};
