/*
 * PostgreSQL backend, rejections: the bounded log of refused inbound
 * requests (newest `keep` rows per source) and the per-source, per-reason
 * counters, written by one statement.
 */
#include "store/postgres_internal.h"

#include <string.h>

/* Statement slots, in this family's range (postgres_internal.h). */
enum {
    PG_REJECTION_INSERT = PG_REJECTIONS,
    PG_REJECTION_LIST,
    PG_REJECTION_COUNTS,
    PG_REJECTIONS_END
};
_Static_assert((int)PG_REJECTIONS_END <= (int)PG_HEALTH, "the rejections statements overflow their slots");

/*
 * Insert, counter and trim in one statement. Its parts share one snapshot:
 * the trim does not see the new row, so it keeps keep - 1 older ones.
 */
static int postgres_rejection_insert(struct store *s, struct rejection *r, int keep)
{
    struct store_value v[STORE_REJECTION_NVALUES];
    struct pg_params p = {.n = 0};
    PGresult *res;
    int result = store_rejection_values(r, v);

    if (result)
        return result;
    pg_param_values(&p, v, STORE_REJECTION_NVALUES);
    pg_param_int(&p, 7, keep > 0 ? keep - 1 : 0);
    result = pg_run(s, PG_REJECTION_INSERT,
                    "WITH ins AS (INSERT INTO hookd_rejections(source, at, reason, peer, size, sha256)"
                    "  VALUES ($1, $2, $3, $4, $5, $6) RETURNING id),"
                    " cnt AS (INSERT INTO hookd_rejection_counts AS c(source, reason, count, last_at)"
                    "  VALUES ($1, $3, 1, $2) ON CONFLICT (source, reason) DO UPDATE SET count = c.count + 1,"
                    "  last_at = greatest(c.last_at, excluded.last_at)),"
                    " trim AS (DELETE FROM hookd_rejections WHERE source = $1 AND id <= (SELECT id FROM hookd_rejections"
                    "  WHERE source = $1 ORDER BY id DESC LIMIT 1 OFFSET $7))"
                    " SELECT id FROM ins",
                    &p, &res);
    if (result)
        return result;
    if (PQntuples(res) == 1)
        r->id = pg_col_i64(res, 0, 0);
    PQclear(res);
    return 0;
}

static int postgres_rejection_list(struct store *s, const struct rejection_filter *f, struct rejection_list *out)
{
    struct pg_params p = {.n = 0};

    pg_param_text(&p, 1, f->source);
    pg_param_i64(&p, 2, f->before_id > 0 ? f->before_id : INT64_MAX);
    pg_param_int(&p, 3, store_list_limit(f->limit));
    return pg_list(s, PG_REJECTION_LIST,
                   "SELECT " STORE_REJECTION_COLUMNS " FROM hookd_rejections WHERE source = $1 AND id < $2"
                   " ORDER BY id DESC LIMIT $3",
                   &p, store_read_rejection, STORE_ROWS(out, store_free_rejection));
}

static int postgres_rejection_counts(struct store *s, const char *source, struct rejection_count_list *out)
{
    struct pg_params p = {.n = 0};

    pg_param_text(&p, 1, source);
    return pg_list(s, PG_REJECTION_COUNTS,
                   "SELECT " STORE_REJECTION_COUNT_COLUMNS " FROM hookd_rejection_counts WHERE source = $1"
                   " ORDER BY reason",
                   &p, store_read_rejection_count, STORE_ROWS(out, store_free_rejection_count));
}

const struct store_rejection_ops postgres_rejection_ops = {
    .insert = postgres_rejection_insert,
    .list = postgres_rejection_list,
    .counts = postgres_rejection_counts,
};
