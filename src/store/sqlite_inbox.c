/*
 * SQLite backend, inbox: the receiver's insert-or-duplicate (an insert that skips a
 * taken key, then the duplicate's count, both in the write), reads and filtered lists,
 * the workers' claims (one entity at a time) and fenced completions, replays.
 */
#include "store/sqlite_internal.h"

#include "store/inbox_sql.h"

#include <stdio.h>
#include <string.h>

/* Statement slots, in this family's range (sqlite_internal.h). */
enum {
    SQ_INBOX_INSERT = SQ_INBOX,
    SQ_INBOX_GET,
    SQ_INBOX_LIST,
    SQ_INBOX_LIST_LAST = SQ_INBOX_LIST + IB_F_COMBINATIONS - 1,
    SQ_INBOX_CLAIM,
    SQ_INBOX_COMPLETE,
    SQ_INBOX_REPLAY,
    SQ_INBOX_RANGE_COUNT,
    SQ_INBOX_RANGE_REPLAY,
    SQ_INBOX_RELEASE_NODE,
    SQ_INBOX_DUPLICATE,
    SQ_INBOX_END
};
_Static_assert((int)SQ_INBOX_END <= (int)SQ_REJECTIONS, "the inbox statements overflow their slots");

/*
 * The row is inserted, or the one holding (source, event_id) counts a
 * duplicate. SQLite has one writer, so the two statements are the whole
 * decision: the insert skips a row whose key is taken (and tells so by the
 * rows it changed), then the duplicate's update counts it and gives the
 * stored id and hash to compare. The insert has no RETURNING: SQLite gathers
 * a RETURNING statement's rows in an ephemeral table it builds for each run
 * (about a quarter of an accept's instructions in the store, measured), and a
 * new row's id is already known (store_inbox_values).
 */
static int sqlite_inbox_duplicate(struct store *s, const struct inbox_item *it, struct inbox_outcome *out)
{
    sqlite3_stmt *st;
    int rc, result;

    result = sq_stmt(s, SQ_INBOX_DUPLICATE,
                     "UPDATE hookd_inbox SET dup_count = dup_count + 1, last_dup_at = ?3,"
                     " conflict_count = conflict_count + (payload_sha256 <> ?4)"
                     " WHERE source = ?1 AND event_id = ?2"
                     " RETURNING id, dup_count, payload_sha256",
                     &st);
    if (result)
        return result;
    sq_bind_text(st, 1, it->source);
    sq_bind_text(st, 2, it->event_id);
    sqlite3_bind_int64(st, 3, it->received_at);
    sq_bind_text(st, 4, it->payload_sha256);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const unsigned char *sha = sqlite3_column_text(st, 2);
        sq_col_id(st, 0, out->id);
        out->dup_count = sqlite3_column_int(st, 1);
        out->duplicate = true;
        out->conflicting = !sha || strcmp((const char *)sha, it->payload_sha256) != 0;
        rc = sqlite3_step(st);
    }
    result = rc == SQLITE_DONE ? 0 : sq_error(s, rc);
    sq_reset(st);
    if (result == 0 && out->id[0] == '\0')
        result = HOOKD_EIO; /* the key was taken, and now no row holds it */
    return result;
}

static int sqlite_inbox_insert(struct store *s, struct inbox_item *it, struct inbox_outcome *out)
{
    struct store_value v[STORE_INBOX_NVALUES];
    sqlite3_stmt *st;
    int changes = 0, result;

    memset(out, 0, sizeof *out);
    result = store_inbox_values(it, v);
    if (result)
        return result;
    result = sq_stmt(s, SQ_INBOX_INSERT,
                     "INSERT INTO hookd_inbox(" STORE_INBOX_INSERT_COLUMNS ")"
                     " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
                     " ON CONFLICT(source, event_id) DO NOTHING",
                     &st);
    if (result)
        return result;
    sq_bind_values(st, v, STORE_INBOX_NVALUES);
    result = sq_run(s, st, &changes);
    if (result)
        return result;
    if (changes == 0)
        return sqlite_inbox_duplicate(s, it, out);
    snprintf(out->id, sizeof out->id, "%s", it->id);
    return 0;
}

/* One writer, one prepared statement: the group is the inserts one after another, without a savepoint each. */
static int sqlite_inbox_insert_many(struct store *s, struct inbox_item *const *items, size_t n,
                                    struct inbox_outcome *outs)
{
    int result = 0;

    for (size_t i = 0; i < n && result == 0; i++)
        result = sqlite_inbox_insert(s, items[i], &outs[i]);
    return result;
}

static int sqlite_inbox_get(struct store *s, const char *id, struct inbox_item *out)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_INBOX_GET, "SELECT " STORE_INBOX_COLUMNS " FROM hookd_inbox WHERE id = ?1", &st);

    if (result)
        return result;
    sq_bind_text(st, 1, id);
    return sq_row_read(s, st, store_read_inbox, out);
}

/* Newest first (ids sort by creation time); the received_at range is since <= received_at < until. */
static int sqlite_inbox_list(struct store *s, const struct inbox_filter *f, struct inbox_list *out)
{
    char terms[FILTER_SQL_MAX];
    struct store_sql q = {.len = 0};
    sqlite3_stmt *st;
    int mask = inbox_filter_mask(f), limit = store_list_limit(f->limit), result;

    out->items = NULL;
    out->n = 0;
    store_sql_add(&q, "SELECT " STORE_INBOX_COLUMNS " FROM hookd_inbox WHERE 1");
    inbox_filter_sql(mask, '?', terms);
    store_sql_add(&q, terms);
    store_sql_add(&q, " ORDER BY id DESC LIMIT ?8");
    result = sq_stmt(s, SQ_INBOX_LIST + mask, q.text, &st);
    if (result)
        return result;
    if (mask & IB_F_SOURCE)
        sq_bind_text(st, 1, f->source);
    if (mask & IB_F_STATUS)
        sq_bind_text(st, 2, inbox_status_name((enum inbox_status)f->status));
    if (mask & IB_F_KIND)
        sq_bind_text(st, 3, f->entity_kind);
    if (mask & IB_F_ENTITY)
        sq_bind_text(st, 4, f->entity_id);
    if (mask & IB_F_SINCE)
        sqlite3_bind_int64(st, 5, f->since);
    if (mask & IB_F_UNTIL)
        sqlite3_bind_int64(st, 6, f->until);
    if (mask & IB_F_BEFORE)
        sq_bind_text(st, 7, f->before_id);
    sqlite3_bind_int(st, 8, limit);
    return sq_rows_read(s, st, (size_t)limit, store_read_inbox, STORE_ROWS(out, store_free_inbox));
}

/*
 * One writer per database file: the statement is the whole claim, so no other
 * claim interleaves. The walk is the due index in claim order, stopping after
 * `limit` rows taken; without the INDEXED BY, SQLite (no statistics) prefers
 * hookd_inbox_status and sorts every open item in a temporary B-tree, a cost
 * that follows the backlog (0.2 s for 10,000 open items).
 */
static int sqlite_inbox_claim_due(struct store *s, const char *node, int64_t now, int64_t lease_until, int limit,
                                  struct inbox_list *out)
{
    sqlite3_stmt *st;
    int result;

    out->items = NULL;
    out->n = 0;
    result = sq_stmt(s, SQ_INBOX_CLAIM,
                     "UPDATE hookd_inbox SET lease_owner = ?1, lease_until = ?3, lease_token = lease_token + 1"
                     " WHERE id IN (SELECT i.id FROM hookd_inbox i INDEXED BY hookd_inbox_due"
                     "  WHERE " INBOX_CLAIMABLE("?2")
                     "  AND i.source NOT IN (" INBOX_LIBRARY_SOURCES_SQLITE ")"
                     "  ORDER BY i.next_attempt_at, i.id LIMIT ?4)"
                     " RETURNING " STORE_INBOX_COLUMNS,
                     &st);
    if (result)
        return result;
    sq_bind_text(st, 1, node);
    sqlite3_bind_int64(st, 2, now);
    sqlite3_bind_int64(st, 3, lease_until);
    sqlite3_bind_int(st, 4, limit);
    return sq_rows_read(s, st, (size_t)limit, store_read_inbox, STORE_ROWS(out, store_free_inbox));
}

int sqlite_inbox_complete(struct store *s, const struct inbox_result *r, int64_t now)
{
    sqlite3_stmt *st;
    int changes = 0, result;
    bool open = r->status == INBOX_PENDING || r->status == INBOX_DEFERRED;

    result = sq_stmt(s, SQ_INBOX_COMPLETE,
                     "UPDATE hookd_inbox SET status = ?4, attempts = ?5, next_attempt_at = ?6, result = ?7,"
                     " error = ?8, processed_at = CASE WHEN ?4 = 'processed' THEN ?9 ELSE processed_at END,"
                     " deferred_at = CASE WHEN ?4 = 'deferred' THEN COALESCE(deferred_at, ?9) END,"
                     " lease_owner = NULL, lease_until = NULL"
                     " WHERE id = ?1 AND lease_owner = ?2 AND lease_token = ?3",
                     &st);
    if (result)
        return result;
    sq_bind_text(st, 1, r->id);
    sq_bind_text(st, 2, r->lease_owner);
    sqlite3_bind_int64(st, 3, r->lease_token);
    sq_bind_text(st, 4, inbox_status_name(r->status));
    sqlite3_bind_int(st, 5, r->attempts);
    if (open)
        sqlite3_bind_int64(st, 6, r->next_attempt_at ? r->next_attempt_at : now);
    sq_bind_text(st, 7, r->result);
    sq_bind_text(st, 8, r->error);
    sqlite3_bind_int64(st, 9, now);
    result = sq_run(s, st, &changes);
    return result == 0 && changes == 0 ? HOOKD_ESTALE : result;
}

/* What a replay writes: pending and due now, a new run (attempts from 0, deferral clock stopped). */
#define REPLAY_SET                                                                                           \
    "status = 'pending', attempts = 0, next_attempt_at = ?2, deferred_at = NULL, result = NULL,"            \
    " lease_owner = NULL, lease_until = NULL, lease_token = lease_token + 1"
#define REPLAYABLE(now) "status IN ('quarantined', 'deferred') AND (lease_until IS NULL OR lease_until <= " now ")"

static int sqlite_inbox_replay(struct store *s, const char *id, int64_t now, struct inbox_item *out)
{
    struct inbox_item tmp;
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_INBOX_REPLAY,
                         "UPDATE hookd_inbox SET " REPLAY_SET " WHERE id = ?1 AND " REPLAYABLE("?2")
                         " RETURNING " STORE_INBOX_COLUMNS,
                         &st);

    if (result)
        return result;
    sq_bind_text(st, 1, id);
    sqlite3_bind_int64(st, 2, now);
    result = sq_row_read(s, st, store_read_inbox, out ? out : &tmp);
    if (result == 0 && !out)
        inbox_item_free(&tmp);
    if (result == HOOKD_ENOTFOUND) {
        /* Not replayable: absent, or in another status. */
        result = sqlite_inbox_get(s, id, &tmp);
        if (result == 0) {
            inbox_item_free(&tmp);
            result = HOOKD_ECONFLICT;
        }
    }
    return result;
}

#define RANGE_WHERE                                                                                          \
    " WHERE status = ?2 AND (?1 IS NULL OR source = ?1) AND (?3 = 0 OR received_at >= ?3)"                  \
    " AND (?4 = 0 OR received_at < ?4) AND (lease_until IS NULL OR lease_until <= ?5)"

static int sqlite_inbox_replay_range(struct store *s, const struct inbox_filter *f, bool dry_run, int64_t now,
                                     int64_t *count)
{
    sqlite3_stmt *st;
    int changes = 0, result;

    *count = 0;
    if (dry_run)
        result = sq_stmt(s, SQ_INBOX_RANGE_COUNT,
                         "SELECT count(*) FROM (SELECT id FROM hookd_inbox" RANGE_WHERE " LIMIT ?6)", &st);
    else
        result = sq_stmt(s, SQ_INBOX_RANGE_REPLAY,
                         "UPDATE hookd_inbox SET status = 'pending', attempts = 0, next_attempt_at = ?5,"
                         " deferred_at = NULL, result = NULL, lease_token = lease_token + 1"
                         " WHERE id IN (SELECT id FROM hookd_inbox" RANGE_WHERE " ORDER BY id LIMIT ?6)",
                         &st);
    if (result)
        return result;
    sq_bind_text(st, 1, f->source);
    sq_bind_text(st, 2, inbox_status_name((enum inbox_status)f->status));
    sqlite3_bind_int64(st, 3, f->since);
    sqlite3_bind_int64(st, 4, f->until);
    sqlite3_bind_int64(st, 5, now);
    sqlite3_bind_int(st, 6, f->limit);
    if (!dry_run) {
        result = sq_run(s, st, &changes);
        *count = changes;
        return result;
    }
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *count = sqlite3_column_int64(st, 0);
    result = rc == SQLITE_ROW ? 0 : sq_error(s, rc);
    sq_reset(st);
    return result;
}

static int sqlite_inbox_release_node(struct store *s, const char *node)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_INBOX_RELEASE_NODE,
                         "UPDATE hookd_inbox SET lease_owner = NULL, lease_until = NULL"
                         " WHERE status IN ('pending', 'deferred') AND lease_owner = ?1", /* only open items hold leases */
                         &st);

    if (result)
        return result;
    sq_bind_text(st, 1, node);
    return sq_run(s, st, NULL);
}

const struct store_inbox_ops sqlite_inbox_ops = {
    .insert = sqlite_inbox_insert,
    .insert_many = sqlite_inbox_insert_many,
    .get = sqlite_inbox_get,
    .list = sqlite_inbox_list,
    .claim_due = sqlite_inbox_claim_due,
    .complete = sqlite_inbox_complete,
    .replay = sqlite_inbox_replay,
    .replay_range = sqlite_inbox_replay_range,
    .release_node = sqlite_inbox_release_node,
};
