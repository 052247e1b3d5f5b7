/*
 * SQLite backend, sources: hookd_sources rows (the definition and secrets as
 * opaque JSON text), deletion together with the source's rejection log, and
 * the cache validator the receiver checks.
 */
#include "store/sqlite_internal.h"

#include <string.h>

#include "core/clock.h"

/* Statement slots, in this family's range (sqlite_internal.h). */
enum {
    SQ_SOURCE_INSERT = SQ_SOURCES,
    SQ_SOURCE_UPDATE,
    SQ_SOURCE_GET,
    SQ_SOURCE_LIST,
    SQ_SOURCE_LIST_AFTER,
    SQ_SOURCE_ALL,
    SQ_SOURCE_DELETE,
    SQ_SOURCE_DELETE_REJECTIONS,
    SQ_SOURCE_DELETE_COUNTS,
    SQ_SOURCE_VERSION,
    SQ_SOURCES_END
};
_Static_assert((int)SQ_SOURCES_END <= (int)SQ_INBOX, "the sources statements overflow their slots");

#define SOURCE_ALL_MAX 100000 /* bound of the list_all read */

static int source_write(struct store *s, const struct source *src, bool update)
{
    static const char insert_sql[] = "INSERT INTO hookd_sources(" STORE_SOURCE_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5)"
                                     " ON CONFLICT(name) DO NOTHING";
    static const char update_sql[] =
        "UPDATE hookd_sources SET definition = ?2, secrets = ?3, updated_at = ?5 WHERE name = ?1";
    int64_t now = clock_now_ms();
    sqlite3_stmt *st;
    int changes = 0, result;

    if (src->name[0] == '\0' || !src->definition)
        return HOOKD_EINVAL;
    result = sq_stmt(s, update ? SQ_SOURCE_UPDATE : SQ_SOURCE_INSERT, update ? update_sql : insert_sql, &st);
    if (result)
        return result;
    sq_bind_text(st, 1, src->name);
    sq_bind_text(st, 2, src->definition);
    sq_bind_text(st, 3, src->secrets ? src->secrets : "{}");
    sqlite3_bind_int64(st, 4, src->created_at ? src->created_at : now);
    sqlite3_bind_int64(st, 5, src->updated_at ? src->updated_at : now);
    result = sq_run(s, st, &changes);
    if (result == 0 && changes == 0)
        result = update ? HOOKD_ENOTFOUND : HOOKD_EEXISTS;
    return result;
}

static int sqlite_source_insert(struct store *s, const struct source *src) { return source_write(s, src, false); }
static int sqlite_source_update(struct store *s, const struct source *src) { return source_write(s, src, true); }

static int sqlite_source_get(struct store *s, const char *name, struct source *out)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_SOURCE_GET, "SELECT " STORE_SOURCE_COLUMNS " FROM hookd_sources WHERE name = ?1", &st);

    if (result)
        return result;
    sq_bind_text(st, 1, name);
    return sq_row_read(s, st, store_read_source, out);
}

static int sqlite_source_list(struct store *s, const struct source_filter *f, struct source_list *out)
{
    static const char *const sql[] = {
        "SELECT " STORE_SOURCE_COLUMNS " FROM hookd_sources ORDER BY name DESC LIMIT ?2",
        "SELECT " STORE_SOURCE_COLUMNS " FROM hookd_sources WHERE name < ?1 ORDER BY name DESC LIMIT ?2",
    };
    bool after = f->before_name != NULL;
    int limit = store_list_limit(f->limit), result;
    sqlite3_stmt *st;

    out->items = NULL;
    out->n = 0;
    result = sq_stmt(s, after ? SQ_SOURCE_LIST_AFTER : SQ_SOURCE_LIST, sql[after], &st);
    if (result)
        return result;
    if (after)
        sq_bind_text(st, 1, f->before_name);
    sqlite3_bind_int(st, 2, limit);
    return sq_rows_read(s, st, (size_t)limit, store_read_source, STORE_ROWS(out, store_free_source));
}

static int sqlite_source_list_all(struct store *s, struct source_list *out)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_SOURCE_ALL, "SELECT " STORE_SOURCE_COLUMNS " FROM hookd_sources ORDER BY name", &st);

    out->items = NULL;
    out->n = 0;
    if (result)
        return result;
    return sq_rows_read(s, st, SOURCE_ALL_MAX, store_read_source, STORE_ROWS(out, store_free_source));
}

/* The source goes with its rejection log and counters; its inbox items stay (they are the record). */
static int sqlite_source_delete(struct store *s, const char *name)
{
    sqlite3_stmt *del, *rej, *counts;
    int changes = 0, result;

    result = sq_stmt(s, SQ_SOURCE_DELETE, "DELETE FROM hookd_sources WHERE name = ?1", &del);
    if (result == 0)
        result = sq_stmt(s, SQ_SOURCE_DELETE_REJECTIONS, "DELETE FROM hookd_rejections WHERE source = ?1", &rej);
    if (result == 0)
        result = sq_stmt(s, SQ_SOURCE_DELETE_COUNTS, "DELETE FROM hookd_rejection_counts WHERE source = ?1", &counts);
    if (result == 0)
        result = sq_atomic_begin(s);
    if (result)
        return result;
    sq_bind_text(del, 1, name);
    result = sq_run(s, del, &changes);
    if (result == 0 && changes == 0)
        result = HOOKD_ENOTFOUND;
    if (result == 0) {
        sq_bind_text(rej, 1, name);
        result = sq_run(s, rej, NULL);
    }
    if (result == 0) {
        sq_bind_text(counts, 1, name);
        result = sq_run(s, counts, NULL);
    }
    return sq_atomic_end(s, result);
}

/* A counter bumped by triggers on every write to hookd_sources (plain SQL too). */
static int sqlite_source_version(struct store *s, int64_t *version)
{
    return sq_meta_counter(s, SQ_SOURCE_VERSION, SQ_META_COUNTER_SQL("sources_version"), version);
}

const struct store_source_ops sqlite_source_ops = {
    .insert = sqlite_source_insert,
    .update = sqlite_source_update,
    .get = sqlite_source_get,
    .list = sqlite_source_list,
    .list_all = sqlite_source_list_all,
    .delete = sqlite_source_delete,
    .version = sqlite_source_version,
};
