/*
 * SQLite backend, replays: the audit record of each replay, the deliveries
 * each batch of it replayed, and its progress counted from those deliveries.
 */
#include "store/sqlite_internal.h"

#include <string.h>

/* Statement slots, in this family's range (sqlite_internal.h). */
enum {
    SQ_REPLAY_INSERT = SQ_REPLAYS,
    SQ_REPLAY_ITEM,
    SQ_REPLAY_COUNTS,
    SQ_REPLAY_GET,
    SQ_REPLAY_LIST,
    SQ_REPLAY_LIST_ACCOUNT,
    SQ_REPLAYS_END
};
_Static_assert((int)SQ_REPLAYS_END <= (int)SQ_TOKENS, "the replays statements overflow their slots");

static int sqlite_replay_insert(struct store *s, const struct replay *r)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_REPLAY_INSERT,
                         "INSERT INTO hookd_replays(id, actor, account, kind, filter, created_at, finished_at, matched,"
                         " replayed, skipped) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                         &st);

    if (result)
        return result;
    sq_bind_text(st, 1, r->id);
    sq_bind_text(st, 2, r->actor ? r->actor : "admin");
    sq_bind_text(st, 3, r->account);
    sq_bind_text(st, 4, replay_kind_name(r->kind));
    sq_bind_text(st, 5, r->filter ? r->filter : "{}");
    sqlite3_bind_int64(st, 6, r->created_at);
    sq_bind_time(st, 7, r->finished_at);
    sqlite3_bind_int(st, 8, r->matched);
    sqlite3_bind_int(st, 9, r->replayed);
    sqlite3_bind_int(st, 10, r->skipped);
    return sq_run(s, st, NULL);
}

static int sqlite_replay_record(struct store *s, const char *id, const char *const *delivery_ids, size_t n,
                                int skipped, bool done, int64_t at)
{
    sqlite3_stmt *item, *counts;
    int changes = 0;
    int result = sq_stmt(s, SQ_REPLAY_ITEM,
                         "INSERT INTO hookd_replay_items(replay_id, delivery_id) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                         &item);

    if (result == 0)
        result = sq_stmt(s, SQ_REPLAY_COUNTS,
                         "UPDATE hookd_replays SET replayed = replayed + ?2, skipped = skipped + ?3,"
                         " finished_at = CASE WHEN ?4 THEN ?5 ELSE finished_at END WHERE id = ?1",
                         &counts);
    if (result == 0)
        result = sq_atomic_begin(s);
    if (result)
        return result;
    sq_bind_text(counts, 1, id);
    sqlite3_bind_int64(counts, 2, (int64_t)n);
    sqlite3_bind_int(counts, 3, skipped);
    sqlite3_bind_int(counts, 4, done);
    sqlite3_bind_int64(counts, 5, at);
    result = sq_run(s, counts, &changes);
    if (result == 0 && changes == 0)
        result = HOOKD_ENOTFOUND;
    for (size_t i = 0; result == 0 && i < n; i++) {
        sq_bind_text(item, 1, id);
        sq_bind_text(item, 2, delivery_ids[i]);
        result = sq_run(s, item, NULL);
    }
    return sq_atomic_end(s, result);
}

#define REPLAY_SELECT "SELECT " STORE_REPLAY_COLUMNS " FROM hookd_replays r"

static int sqlite_replay_get(struct store *s, const char *id, struct replay *out)
{
    return sq_get_by_id(s, SQ_REPLAY_GET, SQ_BY_ID_SQL(REPLAY_SELECT, "r.id"), id, store_read_replay, out,
                        sizeof *out);
}

static int sqlite_replay_list(struct store *s, const struct replay_filter *f, struct replay_list *out)
{
    return sq_list_newest(s, SQ_REPLAY_LIST, SQ_NEWEST_SQL(REPLAY_SELECT, "r.id"), SQ_REPLAY_LIST_ACCOUNT,
                          SQ_NEWEST_OF_SQL(REPLAY_SELECT, "r.id", "r.account"), f->before_id, f->account, f->limit,
                          store_read_replay, STORE_ROWS(out, store_free_replay));
}

const struct store_replay_ops sqlite_replay_ops = {
    .insert = sqlite_replay_insert,
    .record = sqlite_replay_record,
    .get = sqlite_replay_get,
    .list = sqlite_replay_list,
};
