/*
 * SQLite backend, inbox: the receiver's insert-or-duplicate (one UPSERT
 * statement, so no check runs outside the write), reads and filtered lists.
 */
#include "store/sqlite_internal.h"

#include <stdio.h>
#include <string.h>

/* Statement slots, in this family's range (sqlite_internal.h). */
enum {
    SQ_INBOX_INSERT = SQ_INBOX,
    SQ_INBOX_GET,
    SQ_INBOX_LIST,
    SQ_INBOX_LIST_LAST = SQ_INBOX_LIST + IB_F_COMBINATIONS - 1,
    SQ_INBOX_END
};
_Static_assert((int)SQ_INBOX_END <= (int)SQ_REJECTIONS, "the inbox statements overflow their slots");

/*
 * The row is inserted, or the one holding (source, event_id) counts a
 * duplicate; RETURNING tells which (a new row has dup_count 0) and gives the
 * stored hash to compare. SQLite has one writer, so the statement is the
 * whole decision.
 */
static int sqlite_inbox_insert(struct store *s, struct inbox_item *it, struct inbox_outcome *out)
{
    struct store_value v[STORE_INBOX_NVALUES];
    sqlite3_stmt *st;
    int rc, result;

    memset(out, 0, sizeof *out);
    result = store_inbox_values(it, v);
    if (result)
        return result;
    result = sq_stmt(s, SQ_INBOX_INSERT,
                     "INSERT INTO hookd_inbox(" STORE_INBOX_INSERT_COLUMNS ")"
                     " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
                     " ON CONFLICT(source, event_id) DO UPDATE SET dup_count = dup_count + 1,"
                     " last_dup_at = excluded.received_at,"
                     " conflict_count = conflict_count + (payload_sha256 <> excluded.payload_sha256)"
                     " RETURNING id, dup_count, payload_sha256",
                     &st);
    if (result)
        return result;
    sq_bind_values(st, v, STORE_INBOX_NVALUES);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const unsigned char *sha = sqlite3_column_text(st, 2);
        sq_col_id(st, 0, out->id);
        out->dup_count = sqlite3_column_int(st, 1);
        out->duplicate = out->dup_count > 0;
        out->conflicting = out->duplicate && (!sha || strcmp((const char *)sha, it->payload_sha256) != 0);
        rc = sqlite3_step(st);
    }
    result = rc == SQLITE_DONE ? 0 : sq_error(s, rc);
    sq_reset(st);
    if (result == 0 && out->id[0] == '\0')
        result = HOOKD_EIO; /* RETURNING gave no row */
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

const struct store_inbox_ops sqlite_inbox_ops = {
    .insert = sqlite_inbox_insert,
    .get = sqlite_inbox_get,
    .list = sqlite_inbox_list,
};
