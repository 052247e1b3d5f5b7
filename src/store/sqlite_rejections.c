/*
 * SQLite backend, rejections: the bounded log of refused inbound requests
 * (newest `keep` rows per source) and the per-source, per-reason counters.
 */
#include "store/sqlite_internal.h"

#include <string.h>

/* Statement slots, in this family's range (sqlite_internal.h). */
enum {
    SQ_REJECTION_INSERT = SQ_REJECTIONS,
    SQ_REJECTION_TRIM,
    SQ_REJECTION_COUNT,
    SQ_REJECTION_LIST,
    SQ_REJECTION_COUNTS,
    SQ_REJECTIONS_END
};
_Static_assert((int)SQ_REJECTIONS_END <= (int)SQ_HEALTH, "the rejections statements overflow their slots");

static int sqlite_rejection_insert(struct store *s, struct rejection *r, int keep)
{
    struct store_value v[STORE_REJECTION_NVALUES];
    sqlite3_stmt *ins, *trim, *count;
    int result = store_rejection_values(r, v);

    if (result == 0)
        result = sq_stmt(s, SQ_REJECTION_INSERT,
                         "INSERT INTO hookd_rejections(source, at, reason, peer, size, sha256)"
                         " VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                         &ins);
    /* Everything older than the keep-th newest row of the source goes: one probe of the index. */
    if (result == 0)
        result = sq_stmt(s, SQ_REJECTION_TRIM,
                         "DELETE FROM hookd_rejections WHERE source = ?1 AND id <= (SELECT id FROM hookd_rejections"
                         " WHERE source = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)",
                         &trim);
    if (result == 0)
        result = sq_stmt(s, SQ_REJECTION_COUNT,
                         "INSERT INTO hookd_rejection_counts(source, reason, count, last_at) VALUES (?1, ?2, 1, ?3)"
                         " ON CONFLICT(source, reason) DO UPDATE SET count = count + 1,"
                         " last_at = max(last_at, excluded.last_at)",
                         &count);
    if (result == 0)
        result = sq_atomic_begin(s);
    if (result)
        return result;
    sq_bind_values(ins, v, STORE_REJECTION_NVALUES);
    result = sq_run(s, ins, NULL);
    if (result == 0) {
        r->id = sqlite3_last_insert_rowid(s->db);
        sq_bind_text(trim, 1, r->source);
        sqlite3_bind_int(trim, 2, keep);
        result = sq_run(s, trim, NULL);
    }
    if (result == 0) {
        sq_bind_text(count, 1, r->source);
        sq_bind_text(count, 2, r->reason);
        sqlite3_bind_int64(count, 3, r->at);
        result = sq_run(s, count, NULL);
    }
    return sq_atomic_end(s, result);
}

static int sqlite_rejection_list(struct store *s, const struct rejection_filter *f, struct rejection_list *out)
{
    sqlite3_stmt *st;
    int limit = store_list_limit(f->limit);
    int result = sq_stmt(s, SQ_REJECTION_LIST,
                         "SELECT " STORE_REJECTION_COLUMNS " FROM hookd_rejections WHERE source = ?1 AND id < ?2"
                         " ORDER BY id DESC LIMIT ?3",
                         &st);

    out->items = NULL;
    out->n = 0;
    if (result)
        return result;
    sq_bind_text(st, 1, f->source);
    sqlite3_bind_int64(st, 2, f->before_id > 0 ? f->before_id : INT64_MAX);
    sqlite3_bind_int(st, 3, limit);
    return sq_rows_read(s, st, (size_t)limit, store_read_rejection, STORE_ROWS(out, store_free_rejection));
}

static int sqlite_rejection_counts(struct store *s, const char *source, struct rejection_count_list *out)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_REJECTION_COUNTS,
                         "SELECT " STORE_REJECTION_COUNT_COLUMNS " FROM hookd_rejection_counts WHERE source = ?1"
                         " ORDER BY reason",
                         &st);

    out->items = NULL;
    out->n = 0;
    if (result)
        return result;
    sq_bind_text(st, 1, source);
    return sq_rows_read(s, st, STORE_LIST_MAX, store_read_rejection_count,
                        STORE_ROWS(out, store_free_rejection_count));
}

const struct store_rejection_ops sqlite_rejection_ops = {
    .insert = sqlite_rejection_insert,
    .list = sqlite_rejection_list,
    .counts = sqlite_rejection_counts,
};
