/*
 * PostgreSQL backend, the dashboard's series (store/stats_sql.h): per-minute
 * counts of events, inbound items and attempts (three statements, one round
 * trip), and the inbound refusals by reason.
 */
#include "store/postgres_internal.h"

#include <string.h>

#define SP(n) "$" #n
#define STATS_MINUTES STATS_PG_MINUTES
#define STATS_HEX12 STATS_PG_HEX12
#define STATS_ODD STATS_ODD_PG
#define STATS_INDEXED STATS_PG_INDEXED
#include "store/stats_sql.h"

enum { PG_S_EVENTS = PG_STATS, PG_S_INBOUND, PG_S_ATTEMPTS, PG_S_ENDPOINT_ATTEMPTS, PG_S_REJECTED, PG_STATS_END };
_Static_assert((int)PG_STATS_END <= (int)PG_SPARE, "the stats statements overflow their slots");

/* Column 0 of res is the minute; columns 1.. go to the fields at offsets. */
static void read_minutes(const PGresult *res, int64_t since, struct stats_minute *out, size_t n,
                         const size_t *offsets, int n_offsets)
{
    for (int row = 0; row < PQntuples(res); row++) {
        int64_t i = (pg_col_i64(res, row, 0) - since) / HEALTH_MINUTE_MS;
        if (i < 0 || (size_t)i >= n)
            continue;
        for (int c = 0; c < n_offsets; c++)
            *(int64_t *)((char *)&out[i] + offsets[c]) = pg_col_i64(res, row, c + 1);
    }
}

static int postgres_stats_minutes(struct store *s, int64_t since, const char *endpoint_id, struct stats_minute *out,
                                  size_t n)
{
    static const size_t events[] = {offsetof(struct stats_minute, events)};
    static const size_t inbound[] = {offsetof(struct stats_minute, inbound)};
    static const size_t attempts[] = {offsetof(struct stats_minute, attempts),
                                      offsetof(struct stats_minute, successes)};
    struct pg_params p = {.n = 0};
    PGresult *res[3] = {NULL};
    struct pg_stmt st[3] = {
        {PG_S_EVENTS, STATS_SQL_EVENTS, &p},
        {PG_S_INBOUND, STATS_SQL_INBOUND, &p},
        {PG_S_ATTEMPTS, STATS_SQL_ATTEMPTS, &p},
    };
    int result;

    memset(out, 0, n * sizeof *out);
    pg_param_i64(&p, 1, since);
    pg_param_i64(&p, 2, since + (int64_t)n * HEALTH_MINUTE_MS);
    if (endpoint_id) {
        pg_param_text(&p, 3, endpoint_id);
        st[0] = (struct pg_stmt){PG_S_ENDPOINT_ATTEMPTS, STATS_SQL_ENDPOINT_ATTEMPTS, &p};
        result = pg_run_many(s, st, 1, res);
        if (result == 0)
            read_minutes(res[0], since, out, n, attempts, 2);
        PQclear(res[0]);
        return result;
    }
    result = pg_run_many(s, st, 3, res);
    if (result == 0) {
        read_minutes(res[0], since, out, n, events, 1);
        read_minutes(res[1], since, out, n, inbound, 1);
        read_minutes(res[2], since, out, n, attempts, 2);
    }
    for (int i = 0; i < 3; i++)
        PQclear(res[i]);
    return result;
}

static int postgres_stats_rejected(struct store *s, struct rejection_count_list *out)
{
    struct pg_params p = {.n = 0};

    out->items = NULL;
    out->n = 0;
    return pg_list(s, PG_S_REJECTED, STATS_SQL_REJECTED, &p, store_read_rejection_count,
                   STORE_ROWS(out, store_free_rejection_count));
}

const struct store_stats_ops postgres_stats_ops = {
    .minutes = postgres_stats_minutes,
    .rejected = postgres_stats_rejected,
};
