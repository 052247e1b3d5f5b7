/*
 * SQLite backend, a decision's hold of its entity: the machine's row, the
 * entity's row and its open items, or for an accept's contiguous decision
 * only the open items its step can reach (store_entity_hold_window). One
 * writer per file: the write transaction holds the entity already.
 */
#include "store/sqlite_internal.h"

#include <stdlib.h>
#include <string.h>

/* Statement slots, in this family's range (sqlite_internal.h). */
enum {
    SQ_ENTITY_GET = SQ_HOLD,
    SQ_ENTITY_OPEN,
    SQ_ENTITY_OPEN_KEYS, /* 4: deferred or pending, with the type or without (open_keys_read) */
    SQ_ENTITY_OPEN_ROW = SQ_ENTITY_OPEN_KEYS + 4,
    SQ_HOLD_END
};
_Static_assert((int)SQ_HOLD_END <= (int)SQ_REPLAYS, "the hold's statements overflow their slots");

int sqlite_entity_get(struct store *s, const char *kind, const char *id, struct entity_record *out)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_ENTITY_GET,
                         "SELECT " STORE_ENTITY_COLUMNS " FROM hookd_entities WHERE kind = ?1 AND id = ?2", &st);

    if (result)
        return result;
    sq_bind_text(st, 1, kind);
    sq_bind_text(st, 2, id);
    return sq_row_read(s, st, store_read_entity, out);
}

/*
 * The open items walk hookd_inbox_entity (the entity's items only: without
 * the INDEXED BY, SQLite, which has no statistics, may prefer the status
 * index and read every open item of every entity). The open statuses are one
 * range of that index, 'deferred' to 'pending' (the inbox's check allows no
 * other status between them: 'processed' and 'quarantined' sort after): an
 * IN list that seeks an index is built into an ephemeral table for every run
 * of the statement, and this runs for every decision. In the index's order,
 * not sorted (a sorter for every decision): the step sorts them by version,
 * and which ENTITY_OPEN_MAX of a larger backlog it reads does not matter (an
 * entity with more keeps the retry schedule, machine_step.c).
 */
#define ENTITY_OPEN_WHERE                                                                                    \
    " FROM hookd_inbox INDEXED BY hookd_inbox_entity"                                                        \
    " WHERE entity_kind = ?1 AND entity_id = ?2 AND status >= 'deferred' AND status <= 'pending' LIMIT ?3"

static int entity_open_all(struct store *s, const char *kind, const char *id, struct entity_hold *out)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_ENTITY_OPEN, "SELECT " STORE_INBOX_OPEN_COLUMNS ENTITY_OPEN_WHERE, &st);

    if (result)
        return result;
    sq_bind_text(st, 1, kind);
    sq_bind_text(st, 2, id);
    sqlite3_bind_int(st, 3, ENTITY_OPEN_MAX);
    result = sq_rows_read(s, st, ENTITY_OPEN_MAX, store_read_inbox_open, STORE_ROWS(&out->open, store_free_inbox));
    out->open_total = out->open.n;
    return result;
}

/* An open item as the window sees it first: its row, its version, and whether it is read whatever its version. */
struct open_key {
    int64_t rowid, version;
    bool has_version, always, starts; /* starts: its type may make a new entity */
};

static int key_version_cmp(const void *a, const void *b)
{
    const struct open_key *x = a, *y = b;

    return x->version < y->version ? -1 : x->version > y->version;
}

/* The keys come in the index's order, one source's in version order: most need no sort. */
static bool keys_sorted(const struct open_key *vs, size_t k)
{
    for (size_t i = 1; i < k; i++)
        if (vs[i - 1].version > vs[i].version)
            return false;
    return true;
}

/*
 * The highest version the step can apply (struct hold_window): the top of
 * the run of consecutive versions above a known entity's a, or for a new
 * entity the highest top of the runs from an item that may make it. vs: the
 * n keys with a version and the window's own item, sorted in place.
 */
static int64_t window_top(bool known, int64_t a, struct open_key *vs, size_t k)
{
    int64_t x = a, top = a;
    bool run = known;

    if (!keys_sorted(vs, k))
        qsort(vs, k, sizeof *vs, key_version_cmp);
    if (!known)
        top = INT64_MIN;
    for (size_t i = 0; i < k; i++) {
        if (run && x < INT64_MAX && vs[i].version == x + 1)
            x = vs[i].version;
        else if (run && vs[i].version <= x)
            continue; /* the same version twice, or at or below a known entity's (stale) */
        else if (!known && vs[i].starts)
            x = vs[i].version, run = true; /* a new entity made at this version */
        else
            run = false;
        if (run && x > top)
            top = x;
        if (known && !run)
            break;
    }
    return top;
}

/* The want keys of n marked always, read whole by rowid into out->open. */
static int open_read_whole(struct store *s, const struct open_key *keys, size_t n, size_t want,
                           struct entity_hold *out)
{
    sqlite3_stmt *st;
    int result = 0;

    if (want == 0)
        return 0;
    if (!(out->open.items = calloc(want, sizeof *out->open.items)))
        return HOOKD_ENOMEM;
    result = sq_stmt(s, SQ_ENTITY_OPEN_ROW, "SELECT " STORE_INBOX_OPEN_COLUMNS " FROM hookd_inbox WHERE rowid = ?1",
                     &st);
    for (size_t i = 0; result == 0 && i < n; i++) {
        if (!keys[i].always)
            continue;
        sqlite3_bind_int64(st, 1, keys[i].rowid);
        result = sq_row_read(s, st, store_read_inbox_open, &out->open.items[out->open.n]);
        if (result == 0)
            out->open.n++;
        else if (result == HOOKD_ENOTFOUND)
            result = 0; /* not possible in the write transaction; nothing to read either way */
    }
    return result;
}

/*
 * The windowed hold: each open item's version, next look and type first,
 * from hookd_inbox_entity alone (SQLite migration 30: the entries carry
 * them, so no row is found for this pass), then the whole of those the step
 * can reach, by rowid. In the machine bench an entity holds about twenty
 * deferred gaps at each decision: reading every one whole was a third of the
 * writer's instructions, and finding each one's row for its version and type
 * a fifth. An item is read whatever its version when it is pending, has no
 * version, or is due: a live lease (a worker's, which the accept must see)
 * is only ever taken on an item due, and a lease leaves next_attempt_at as
 * it was, so an item not due holds none (an expired lease left on a deferred
 * item, which a settle keeps, leases nothing).
 */
/* The open items' keys as the window's first pass reads them (open_keys_read). */
struct open_keys {
    struct open_key *v;
    size_t n, cap;
    bool all; /* an item that may make a new entity has no version: every item may pass */
};

/*
 * One status's range of the entity's open items from hookd_inbox_entity
 * alone, up to limit: rowid, version and next look, and the type when the
 * entity is new (may_start asks it). Each status is a range of its own, so no
 * entry's status is read, and a known entity's pass reads no type: each
 * column read costs about as much as the step to the entry (measured: a
 * pass over 25 entries, 79k instructions with the status and type, 54k
 * without).
 */
static int open_keys_read(struct store *s, bool pending, const char *kind, const char *id, size_t limit,
                          const struct hold_window *w, bool typed, struct open_keys *k)
{
    static const char *const sql[2][2] = {
        {"SELECT rowid, version, next_attempt_at FROM hookd_inbox INDEXED BY hookd_inbox_entity"
         " WHERE entity_kind = ?1 AND entity_id = ?2 AND status = 'deferred' LIMIT ?3",
         "SELECT rowid, version, next_attempt_at, event_type FROM hookd_inbox INDEXED BY hookd_inbox_entity"
         " WHERE entity_kind = ?1 AND entity_id = ?2 AND status = 'deferred' LIMIT ?3"},
        {"SELECT rowid, version, next_attempt_at FROM hookd_inbox INDEXED BY hookd_inbox_entity"
         " WHERE entity_kind = ?1 AND entity_id = ?2 AND status = 'pending' LIMIT ?3",
         "SELECT rowid, version, next_attempt_at, event_type FROM hookd_inbox INDEXED BY hookd_inbox_entity"
         " WHERE entity_kind = ?1 AND entity_id = ?2 AND status = 'pending' LIMIT ?3"},
    };
    sqlite3_stmt *st;
    int rc, result = sq_stmt(s, SQ_ENTITY_OPEN_KEYS + 2 * pending + typed, sql[pending][typed], &st);

    if (result || limit == 0)
        return result;
    sq_bind_text(st, 1, kind);
    sq_bind_text(st, 2, id);
    sqlite3_bind_int64(st, 3, (int64_t)limit);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (k->n == k->cap) {
            size_t more = k->cap ? k->cap * 2 : 64;
            struct open_key *p = realloc(k->v, more * sizeof *p);
            if (!p) {
                result = HOOKD_ENOMEM;
                break;
            }
            k->v = p;
            k->cap = more;
        }
        const char *type = typed ? (const char *)sqlite3_column_text(st, 3) : NULL;
        bool due = sqlite3_column_type(st, 2) == SQLITE_NULL || sqlite3_column_int64(st, 2) <= w->now;
        struct open_key *key = &k->v[k->n++];
        *key = (struct open_key){.rowid = sqlite3_column_int64(st, 0),
                                 .has_version = sqlite3_column_type(st, 1) != SQLITE_NULL,
                                 .version = sqlite3_column_int64(st, 1),
                                 .always = pending || due,
                                 .starts = type && w->may_start && w->may_start(type, w->arg)};
        k->all = k->all || (key->starts && !key->has_version);
    }
    if (result == 0 && rc != SQLITE_DONE)
        result = sq_error(s, rc);
    sq_reset(st);
    return result;
}

static int entity_open_window(struct store *s, const char *kind, const char *id, const struct hold_window *w,
                              struct entity_hold *out)
{
    struct open_keys ks = {0};
    struct open_key *keys, *vs = NULL;
    size_t n, want = 0, k = 0;
    bool known = out->known, all;
    int result = open_keys_read(s, false, kind, id, ENTITY_OPEN_MAX, w, !known, &ks);

    if (result == 0)
        result = open_keys_read(s, true, kind, id, ENTITY_OPEN_MAX - ks.n, w, !known, &ks);
    keys = ks.v;
    n = ks.n;
    all = ks.all;
    out->open_total = n;
    bool own_starts = !known && w->event_type && w->may_start && w->may_start(w->event_type, w->arg);
    all = all || (own_starts && !w->has_version);
    if (result == 0 && !(vs = malloc((n + 1) * sizeof *vs)))
        result = HOOKD_ENOMEM;
    if (result == 0) {
        for (size_t i = 0; i < n; i++)
            if (keys[i].has_version)
                vs[k++] = keys[i];
        if (w->has_version) { /* in its place among the sorted ones, after those of its version */
            size_t at = k;
            while (at > 0 && vs[at - 1].version > w->version)
                at--;
            memmove(vs + at + 1, vs + at, (k - at) * sizeof *vs);
            vs[at] = (struct open_key){.version = w->version, .has_version = true, .starts = own_starts};
            k++;
        }
        int64_t top = window_top(known, out->entity.version, vs, k);
        for (size_t i = 0; i < n; i++) {
            keys[i].always = all || keys[i].always || !keys[i].has_version || top == INT64_MAX ||
                             (top != INT64_MIN && keys[i].version <= top + 1);
            want += keys[i].always;
        }
    }
    if (result == 0)
        result = open_read_whole(s, keys, n, want, out);
    free(keys);
    free(vs);
    return result;
}

/* The machine's row as the window's caller read it in this transaction (one writer: the same row). */
static int machine_copy(const struct machine_record *m, struct machine_record *out)
{
    *out = *m;
    out->definition = strdup(m->definition);
    return out->definition ? 0 : HOOKD_ENOMEM;
}

/* The write transaction holds the entity already (one writer per file). */
int sqlite_entity_hold(struct store *s, const char *machine, const char *kind, const char *id,
                       const struct hold_window *w, struct entity_hold *out)
{
    int result = w && w->machine && strcmp(w->machine->name, machine) == 0 && w->machine->definition
                     ? machine_copy(w->machine, &out->machine)
                     : sqlite_machine_get(s, machine, &out->machine);

    out->machine_found = result == 0;
    if (result == HOOKD_ENOTFOUND)
        result = 0;
    if (result == 0) {
        result = sqlite_entity_get(s, kind, id, &out->entity);
        out->known = result == 0;
        if (result == HOOKD_ENOTFOUND)
            result = 0;
    }
    /* A known entity without a version takes any version: every open item may pass. */
    if (result == 0)
        result = w && (!out->known || out->entity.has_version) ? entity_open_window(s, kind, id, w, out)
                                                               : entity_open_all(s, kind, id, out);
    if (result)
        entity_hold_free(out);
    return result;
}
