/*
 * SQLite backend, the dashboard's series (store/stats_sql.h): per-minute counts
 * of events, inbound items and attempts, and the inbound refusals by reason.
 */
#include "store/sqlite_internal.h"

#include <string.h>

#define SP(n) "?" #n
#define STATS_MINUTES STATS_SQLITE_MINUTES
#define STATS_HEX12 STATS_SQLITE_HEX12
#define STATS_ODD STATS_ODD_SQLITE
#define STATS_INDEXED STATS_SQLITE_INDEXED
#include "store/stats_sql.h"

enum { SQ_S_EVENTS = SQ_STATS, SQ_S_INBOUND, SQ_S_ATTEMPTS, SQ_S_ENDPOINT_ATTEMPTS, SQ_S_REJECTED, SQ_STATS_END };
_Static_assert((int)SQ_STATS_END <= (int)SQ_SLOTS, "the stats statements overflow their slots");

/* Runs one per-minute statement; column 0 is the minute, columns 1.. go to the fields at offsets. */
static int read_minutes(struct store *s, int slot, const char *sql, int64_t since, const char *endpoint_id,
                        struct stats_minute *out, size_t n, const size_t *offsets, int n_offsets)
{
    sqlite3_stmt *st;
    int rc, result = sq_stmt(s, slot, sql, &st);

    if (result)
        return result;
    sqlite3_bind_int64(st, 1, since);
    sqlite3_bind_int64(st, 2, since + (int64_t)n * HEALTH_MINUTE_MS);
    if (endpoint_id)
        sq_bind_text(st, 3, endpoint_id);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t i = (sqlite3_column_int64(st, 0) - since) / HEALTH_MINUTE_MS;
        if (i < 0 || (size_t)i >= n)
            continue;
        for (int c = 0; c < n_offsets; c++)
            *(int64_t *)((char *)&out[i] + offsets[c]) = sqlite3_column_int64(st, c + 1);
    }
    sq_reset(st);
    return rc == SQLITE_DONE ? 0 : sq_error(s, rc);
}

static int sqlite_stats_minutes(struct store *s, int64_t since, const char *endpoint_id, struct stats_minute *out,
                                size_t n)
{
    static const size_t events[] = {offsetof(struct stats_minute, events)};
    static const size_t inbound[] = {offsetof(struct stats_minute, inbound)};
    static const size_t attempts[] = {offsetof(struct stats_minute, attempts),
                                      offsetof(struct stats_minute, successes)};
    int result;

    memset(out, 0, n * sizeof *out);
    if (endpoint_id)
        return read_minutes(s, SQ_S_ENDPOINT_ATTEMPTS, STATS_SQL_ENDPOINT_ATTEMPTS, since, endpoint_id, out, n,
                            attempts, 2);
    result = read_minutes(s, SQ_S_EVENTS, STATS_SQL_EVENTS, since, NULL, out, n, events, 1);
    if (result == 0)
        result = read_minutes(s, SQ_S_INBOUND, STATS_SQL_INBOUND, since, NULL, out, n, inbound, 1);
    if (result == 0)
        result = read_minutes(s, SQ_S_ATTEMPTS, STATS_SQL_ATTEMPTS, since, NULL, out, n, attempts, 2);
    return result;
}

static int sqlite_stats_rejected(struct store *s, struct rejection_count_list *out)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_S_REJECTED, STATS_SQL_REJECTED, &st);

    out->items = NULL;
    out->n = 0;
    if (result)
        return result;
    return sq_rows_read(s, st, STORE_LIST_MAX, store_read_rejection_count,
                        STORE_ROWS(out, store_free_rejection_count));
}

const struct store_stats_ops sqlite_stats_ops = {
    .minutes = sqlite_stats_minutes,
    .rejected = sqlite_stats_rejected,
};
