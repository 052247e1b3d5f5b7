/*
 * PostgreSQL backend, inbox: the receiver's insert-or-duplicate (one
 * INSERT … ON CONFLICT DO UPDATE: concurrent copies of one event, from any
 * node, wait on the row and count as duplicates), reads and filtered lists.
 */
#include "store/postgres_internal.h"

#include "store/inbox_sql.h"

#include <stdlib.h>
#include <string.h>

/* Statement slots, in this family's range (postgres_internal.h). */
enum {
    PG_INBOX_INSERT = PG_INBOX,
    PG_INBOX_GET,
    PG_INBOX_LIST,
    PG_INBOX_LIST_LAST = PG_INBOX_LIST + IB_F_COMBINATIONS - 1,
    PG_INBOX_CLAIM_LOCK,
    PG_INBOX_CLAIM,
    PG_INBOX_COMPLETE,
    PG_INBOX_REPLAY,
    PG_INBOX_RANGE_COUNT,
    PG_INBOX_RANGE_REPLAY,
    PG_INBOX_RELEASE_NODE,
    PG_INBOX_INSERT_MANY,
    PG_INBOX_END
};
_Static_assert((int)PG_INBOX_END <= (int)PG_REJECTIONS, "the inbox statements overflow their slots");

/* What a copy of a stored event does to its row (both statements below). */
#define INBOX_ON_DUPLICATE                                                                                   \
    " ON CONFLICT (source, event_id) DO UPDATE SET dup_count = i.dup_count + 1,"                             \
    " last_dup_at = excluded.received_at,"                                                                    \
    " conflict_count = i.conflict_count"                                                                      \
    "  + CASE WHEN i.payload_sha256 <> excluded.payload_sha256 THEN 1 ELSE 0 END"

static void outcome_read(const PGresult *res, int row, const struct inbox_item *it, struct inbox_outcome *out)
{
    pg_col_id(res, row, 0, out->id);
    out->dup_count = (int)pg_col_i64(res, row, 1);
    out->duplicate = out->dup_count > 0;
    out->conflicting = out->duplicate && strcmp(PQgetvalue(res, row, 2), it->payload_sha256) != 0;
}

static int postgres_inbox_insert(struct store *s, struct inbox_item *it, struct inbox_outcome *out)
{
    struct store_value v[STORE_INBOX_NVALUES];
    struct pg_params p = {.n = 0};
    PGresult *res;
    int result;

    memset(out, 0, sizeof *out);
    result = store_inbox_values(it, v);
    if (result)
        return result;
    pg_param_values(&p, v, STORE_INBOX_NVALUES);
    result = pg_run(s, PG_INBOX_INSERT,
                    "INSERT INTO hookd_inbox AS i(" STORE_INBOX_INSERT_COLUMNS ")"
                    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)" INBOX_ON_DUPLICATE
                    " RETURNING i.id, i.dup_count, i.payload_sha256",
                    &p, &res);
    if (result)
        return result;
    if (PQntuples(res) != 1)
        result = HOOKD_EIO;
    else
        outcome_read(res, 0, it, out);
    PQclear(res);
    return result;
}

/*
 * The items of a group by (source, event_id): open addressing over a power of
 * two at least twice n, each slot 0 (empty) or an item's index + 1. The first
 * copy of an event goes into the statement; a later copy in the same group
 * would make ON CONFLICT DO UPDATE touch a row twice (an error), so it runs
 * after it, alone, and counts as its duplicate, as in queue order.
 */
struct key_index {
    size_t *slot;
    size_t mask;
};

static uint64_t key_hash(const char *source, const char *event_id)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */

    for (const char *c = source; *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ULL;
    h = (h ^ 0xff) * 1099511628211ULL; /* the separator: a byte no text holds */
    for (const char *c = event_id; *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ULL;
    return h;
}

/* The index of the first item of (source, event_id), or, when absent, adds item `add` (when < n) and returns it. */
static size_t key_find(struct key_index *k, struct inbox_item *const *items, const char *source,
                       const char *event_id, size_t add)
{
    size_t i = (size_t)key_hash(source, event_id) & k->mask;

    for (; k->slot[i] != 0; i = (i + 1) & k->mask) {
        const struct inbox_item *it = items[k->slot[i] - 1];
        if (strcmp(it->source, source) == 0 && strcmp(it->event_id, event_id) == 0)
            return k->slot[i] - 1;
    }
    if (add != SIZE_MAX)
        k->slot[i] = add + 1;
    return add;
}

/* unnest's columns, in STORE_INBOX_INSERT_COLUMNS order, with their types. */
#define INBOX_UNNEST                                                                                         \
    "unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::text[]," \
    " $9::text[], $10::boolean[], $11::text[], $12::bigint[], $13::bigint[])"

/*
 * One statement for the group: the rows unnested from one array per column,
 * inserted in key order (two nodes inserting overlapping groups take the
 * rows' locks in one order, so they wait, never deadlock), each row's outcome
 * found by its key in the RETURNING rows.
 */
static int insert_group(struct store *s, struct inbox_item *const *items, size_t n, const size_t *first,
                        struct key_index *k, struct inbox_outcome *outs)
{
    struct pg_array a[STORE_INBOX_NVALUES] = {{0}};
    struct store_value v[STORE_INBOX_NVALUES];
    struct pg_params p = {.n = 0};
    PGresult *res = NULL;
    size_t unique = 0;
    int result = 0;

    for (size_t i = 0; i < n && result == 0; i++) {
        if (first[i] != i)
            continue;
        unique++;
        result = store_inbox_values(items[i], v);
        for (int c = 0; c < STORE_INBOX_NVALUES && result == 0; c++)
            pg_array_value(&a[c], &v[c]);
    }
    for (int c = 0; c < STORE_INBOX_NVALUES && result == 0; c++) {
        const char *literal = pg_array_end(&a[c]);
        if (!literal)
            result = HOOKD_ENOMEM;
        else if (v[c].type == STORE_V_TEXT || v[c].type == STORE_V_BOOL)
            pg_param_text_array(&p, c + 1, literal); /* bool: 0 and 1, cast by the statement */
        else
            pg_param_i64_array(&p, c + 1, literal);
    }
    if (result == 0)
        result = pg_run(s, PG_INBOX_INSERT_MANY,
                        "INSERT INTO hookd_inbox AS i(" STORE_INBOX_INSERT_COLUMNS ")"
                        " SELECT * FROM " INBOX_UNNEST " AS u(" STORE_INBOX_INSERT_COLUMNS ")"
                        " ORDER BY u.source COLLATE \"C\", u.event_id COLLATE \"C\"" INBOX_ON_DUPLICATE
                        " RETURNING i.id, i.dup_count, i.payload_sha256, i.source, i.event_id",
                        &p, &res);
    if (result == 0 && (size_t)PQntuples(res) != unique)
        result = HOOKD_EIO;
    for (int row = 0; result == 0 && row < PQntuples(res); row++) {
        size_t j = key_find(k, items, PQgetvalue(res, row, 3), PQgetvalue(res, row, 4), SIZE_MAX);
        if (j == SIZE_MAX || outs[j].id[0] != '\0')
            result = HOOKD_EIO; /* a row of no item, or twice */
        else
            outcome_read(res, row, items[j], &outs[j]);
    }
    PQclear(res);
    for (int c = 0; c < STORE_INBOX_NVALUES; c++)
        pg_array_free(&a[c]);
    return result;
}

static int postgres_inbox_insert_many(struct store *s, struct inbox_item *const *items, size_t n,
                                      struct inbox_outcome *outs)
{
    struct key_index k = {NULL, 0};
    size_t *first, cap = 4;
    int result = 0;

    if (n == 1)
        return postgres_inbox_insert(s, items[0], &outs[0]);
    if (n == 0)
        return 0;
    memset(outs, 0, n * sizeof *outs);
    while (cap < 2 * n)
        cap *= 2;
    k.mask = cap - 1;
    k.slot = calloc(cap, sizeof *k.slot);
    first = malloc(n * sizeof *first);
    if (!k.slot || !first) {
        result = HOOKD_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n && result == 0; i++) {
        if (items[i]->source[0] == '\0' || !items[i]->event_id)
            result = HOOKD_EINVAL;
        else
            first[i] = key_find(&k, items, items[i]->source, items[i]->event_id, i);
    }
    if (result == 0)
        result = insert_group(s, items, n, first, &k, outs);
    for (size_t i = 0; i < n && result == 0; i++) {
        if (first[i] != i)
            result = postgres_inbox_insert(s, items[i], &outs[i]);
    }
out:
    free(k.slot);
    free(first);
    return result;
}

static int postgres_inbox_get(struct store *s, const char *id, struct inbox_item *out)
{
    struct pg_params p = {.n = 0};

    pg_param_text(&p, 1, id);
    return pg_get(s, PG_INBOX_GET, "SELECT " STORE_INBOX_COLUMNS " FROM hookd_inbox WHERE id = $1", &p,
                  store_read_inbox, out);
}

/* Newest first (ids sort by creation time); the received_at range is since <= received_at < until. */
static int postgres_inbox_list(struct store *s, const struct inbox_filter *f, struct inbox_list *out)
{
    char terms[FILTER_SQL_MAX];
    struct store_sql q = {.len = 0};
    struct pg_params p = {.n = 0};
    int mask = inbox_filter_mask(f);

    store_sql_add(&q, "SELECT " STORE_INBOX_COLUMNS " FROM hookd_inbox WHERE true");
    inbox_filter_sql(mask, '$', terms);
    store_sql_add(&q, terms);
    store_sql_add(&q, " ORDER BY id DESC LIMIT $8");
    /* Every parameter is declared, used by this combination or not. */
    pg_param_text(&p, 1, f->source);
    pg_param_text(&p, 2, mask & IB_F_STATUS ? inbox_status_name((enum inbox_status)f->status) : NULL);
    pg_param_text(&p, 3, f->entity_kind);
    pg_param_text(&p, 4, f->entity_id);
    pg_param_i64(&p, 5, f->since);
    pg_param_i64(&p, 6, f->until);
    pg_param_text(&p, 7, f->before_id);
    pg_param_int(&p, 8, store_list_limit(f->limit));
    return pg_list(s, PG_INBOX_LIST + mask, q.text, &p, store_read_inbox, STORE_ROWS(out, store_free_inbox));
}

/*
 * Two nodes that claimed at once could each take a different item of one
 * entity, each not yet seeing the other's lease. A transaction-scoped
 * advisory lock taken in a statement of its own serializes the claims: the
 * claim's statement then starts after the previous claim committed, and its
 * snapshot sees that claim's leases (READ COMMITTED: a snapshot per statement).
 */
static int postgres_inbox_claim_due(struct store *s, const char *node, int64_t now, int64_t lease_until, int limit,
                                    struct inbox_list *out)
{
    struct pg_params p = {.n = 0};
    int result;

    out->items = NULL;
    out->n = 0;
    result = pg_atomic_begin(s);
    if (result)
        return result;
    result = pg_run_command(s, PG_INBOX_CLAIM_LOCK, "SELECT pg_advisory_xact_lock(" INBOX_CLAIM_LOCK_KEY ")", NULL,
                            NULL);
    if (result == 0) {
        pg_param_text(&p, 1, node);
        pg_param_i64(&p, 2, now);
        pg_param_i64(&p, 3, lease_until);
        pg_param_int(&p, 4, limit);
        result = pg_list(s, PG_INBOX_CLAIM,
                         "UPDATE hookd_inbox SET lease_owner = $1, lease_until = $3, lease_token = lease_token + 1"
                         " WHERE id IN (SELECT i.id FROM hookd_inbox i"
                         "  WHERE " INBOX_CLAIMABLE("$2")
                         "  AND i.source NOT IN (" INBOX_LIBRARY_SOURCES_PG ")"
                         "  ORDER BY i.next_attempt_at, i.id LIMIT $4 FOR UPDATE SKIP LOCKED)"
                         " RETURNING " STORE_INBOX_COLUMNS,
                         &p, store_read_inbox, STORE_ROWS(out, store_free_inbox));
    }
    return pg_atomic_end(s, result);
}

struct pg_stmt pg_inbox_complete_stmt(const struct inbox_result *r, int64_t now, struct pg_params *p)
{
    bool open = r->status == INBOX_PENDING || r->status == INBOX_DEFERRED;

    pg_param_text(p, 1, r->id);
    pg_param_text(p, 2, r->lease_owner);
    pg_param_i64(p, 3, r->lease_token);
    pg_param_text(p, 4, inbox_status_name(r->status));
    pg_param_int(p, 5, r->attempts);
    if (open)
        pg_param_i64(p, 6, r->next_attempt_at ? r->next_attempt_at : now);
    else
        pg_param_null(p, 6, PG_OID_INT8);
    pg_param_text(p, 7, r->result);
    pg_param_text(p, 8, r->error);
    pg_param_i64(p, 9, now);
    return (struct pg_stmt){PG_INBOX_COMPLETE,
                            "UPDATE hookd_inbox SET status = $4, attempts = $5, next_attempt_at = $6, result = $7,"
                            " error = $8, processed_at = CASE WHEN $4 = 'processed' THEN $9 ELSE processed_at END,"
                            " deferred_at = CASE WHEN $4 = 'deferred' THEN COALESCE(deferred_at, $9) END,"
                            " lease_owner = NULL, lease_until = NULL"
                            " WHERE id = $1 AND lease_owner = $2 AND lease_token = $3",
                            p};
}

static int postgres_inbox_complete(struct store *s, const struct inbox_result *r, int64_t now)
{
    struct pg_params p = {.n = 0};
    struct pg_stmt st = pg_inbox_complete_stmt(r, now, &p);
    int64_t rows = 0;
    int result = pg_run_command(s, st.slot, st.sql, st.p, &rows);

    return result == 0 && rows == 0 ? HOOKD_ESTALE : result;
}

static int postgres_inbox_replay(struct store *s, const char *id, int64_t now, struct inbox_item *out)
{
    struct pg_params p = {.n = 0};
    struct inbox_item tmp;
    int result;

    pg_param_text(&p, 1, id);
    pg_param_i64(&p, 2, now);
    result = pg_get(s, PG_INBOX_REPLAY,
                    "UPDATE hookd_inbox SET status = 'pending', attempts = 0, next_attempt_at = $2,"
                    " deferred_at = NULL, result = NULL, lease_owner = NULL, lease_until = NULL,"
                    " lease_token = lease_token + 1"
                    " WHERE id = $1 AND status IN ('quarantined', 'deferred')"
                    " AND (lease_until IS NULL OR lease_until <= $2) RETURNING " STORE_INBOX_COLUMNS,
                    &p, store_read_inbox, out ? out : &tmp);
    if (result == 0 && !out)
        inbox_item_free(&tmp);
    if (result == HOOKD_ENOTFOUND) {
        result = postgres_inbox_get(s, id, &tmp);
        if (result == 0) {
            inbox_item_free(&tmp);
            result = HOOKD_ECONFLICT;
        }
    }
    return result;
}

#define RANGE_WHERE                                                                                          \
    " WHERE status = $2 AND ($1::text IS NULL OR source = $1) AND ($3::bigint = 0 OR received_at >= $3)"     \
    " AND ($4::bigint = 0 OR received_at < $4) AND (lease_until IS NULL OR lease_until <= $5)"

static int postgres_inbox_replay_range(struct store *s, const struct inbox_filter *f, bool dry_run, int64_t now,
                                       int64_t *count)
{
    struct pg_params p = {.n = 0};
    PGresult *res;
    int result;

    *count = 0;
    pg_param_text(&p, 1, f->source);
    pg_param_text(&p, 2, inbox_status_name((enum inbox_status)f->status));
    pg_param_i64(&p, 3, f->since);
    pg_param_i64(&p, 4, f->until);
    pg_param_i64(&p, 5, now);
    pg_param_int(&p, 6, f->limit);
    if (!dry_run)
        return pg_run_command(s, PG_INBOX_RANGE_REPLAY,
                              "UPDATE hookd_inbox SET status = 'pending', attempts = 0, next_attempt_at = $5,"
                              " deferred_at = NULL, result = NULL, lease_token = lease_token + 1"
                              " WHERE id IN (SELECT id FROM hookd_inbox" RANGE_WHERE
                              " ORDER BY id LIMIT $6 FOR UPDATE SKIP LOCKED)",
                              &p, count);
    result = pg_run(s, PG_INBOX_RANGE_COUNT,
                    "SELECT count(*) FROM (SELECT id FROM hookd_inbox" RANGE_WHERE " LIMIT $6) r", &p, &res);
    if (result)
        return result;
    *count = pg_col_i64(res, 0, 0);
    PQclear(res);
    return 0;
}

static int postgres_inbox_release_node(struct store *s, const char *node)
{
    struct pg_params p = {.n = 0};

    pg_param_text(&p, 1, node);
    return pg_run_command(s, PG_INBOX_RELEASE_NODE,
                          "UPDATE hookd_inbox SET lease_owner = NULL, lease_until = NULL"
                          " WHERE status IN ('pending', 'deferred') AND lease_owner = $1", /* only open items hold leases */
                          &p, NULL);
}

const struct store_inbox_ops postgres_inbox_ops = {
    .insert = postgres_inbox_insert,
    .insert_many = postgres_inbox_insert_many,
    .get = postgres_inbox_get,
    .list = postgres_inbox_list,
    .claim_due = postgres_inbox_claim_due,
    .complete = postgres_inbox_complete,
    .replay = postgres_inbox_replay,
    .replay_range = postgres_inbox_replay_range,
    .release_node = postgres_inbox_release_node,
};
