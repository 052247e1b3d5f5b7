/*
 * PostgreSQL backend, events: hookd_outbox inserts with idempotency keys,
 * reads and lists, and the relay's view of it (undispatched rows, oldest
 * first, locked so that two nodes never fan out the same rows).
 */
#include "store/postgres_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"

/* Statement slots, in this family's range (postgres_internal.h). */
enum {
    PG_EVENT_INSERT = PG_EVENTS,
    PG_EVENT_BY_ID,
    PG_EVENT_BY_KEY,
    PG_OUTBOX_FETCH,
    PG_OUTBOX_MARK,
    PG_OUTBOX_PENDING,
    PG_OUTBOX_TAKE,
    PG_OUTBOX_FLOOR,
    PG_OUTBOX_REJECT,
    PG_EVENT_LIST,
    PG_EVENT_LIST_LAST = PG_EVENT_LIST + EV_F_COMBINATIONS - 1,
    PG_EVENTS_END
};
_Static_assert((int)PG_EVENTS_END <= (int)PG_ENDPOINTS, "the events statements overflow their slots");


/* One event by its id, or (by_key) by its idempotency key. */
static int event_lookup(struct store *s, bool by_key, const char *key, struct event *out)
{
    static const char *const sql[] = {
        "SELECT " STORE_EVENT_COLUMNS " FROM hookd_outbox o WHERE o.id = $1",
        "SELECT " STORE_EVENT_COLUMNS " FROM hookd_outbox o WHERE o.idempotency_key = $1",
    };
    struct pg_params p = {.n = 0};

    pg_param_text(&p, 1, key);
    return pg_get(s, by_key ? PG_EVENT_BY_KEY : PG_EVENT_BY_ID, sql[by_key], &p, store_read_event, out);
}

static int postgres_event_get(struct store *s, const char *id, struct event *out)
{
    return event_lookup(s, false, id, out);
}

/* ON CONFLICT DO NOTHING: a taken id or key raises no error, so the caller's
 * transaction stays usable. */
static int postgres_event_insert(struct store *s, struct event *ev, struct event *existing)
{
    struct store_value v[STORE_EVENT_NVALUES];
    struct pg_params p = {.n = 0};
    PGresult *res;
    int result;

    if (!ev->type)
        return HOOKD_EINVAL;
    store_event_values(ev, v);
    pg_param_values(&p, v, STORE_EVENT_NVALUES);
    result = pg_run(s, PG_EVENT_INSERT,
                    "INSERT INTO hookd_outbox(" STORE_EVENT_INSERT_COLUMNS ")"
                    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
                    " ON CONFLICT DO NOTHING RETURNING seq",
                    &p, &res);
    if (result)
        return result;
    if (PQntuples(res) == 1)
        ev->seq = pg_col_i64(res, 0, 0);
    else
        result = store_event_conflict(s, ev, existing, event_lookup);
    PQclear(res);
    return result;
}

/* Newest first; the created_at range is since <= created_at < until. */
static int postgres_event_list(struct store *s, const struct event_filter *f, struct event_list *out)
{
    char terms[FILTER_SQL_MAX];
    struct store_sql q = {.len = 0};
    struct pg_params p = {.n = 0};
    int mask = event_filter_mask(f);

    store_sql_add(&q, "SELECT " STORE_EVENT_COLUMNS " FROM hookd_outbox o WHERE o.seq < $5");
    event_filter_sql(mask, '$', terms);
    store_sql_add(&q, terms);
    store_sql_add(&q, " ORDER BY o.seq DESC LIMIT $6");
    /* Every parameter is declared, used by this combination or not. */
    pg_param_text(&p, 1, f->type);
    pg_param_text(&p, 2, f->account);
    pg_param_i64(&p, 3, f->since);
    pg_param_i64(&p, 4, f->until);
    pg_param_i64(&p, 5, f->before_seq > 0 ? f->before_seq : INT64_MAX);
    pg_param_int(&p, 6, store_list_limit(f->limit));
    return pg_list(s, PG_EVENT_LIST + mask, q.text, &p, store_read_event, STORE_ROWS(out, store_free_event));
}

/* SKIP LOCKED: rows another node's relay holds (until its fan-out commits) are
 * left to it. Outside a transaction the locks end with the statement. */
static int postgres_outbox_fetch(struct store *s, int64_t after_seq, int limit, struct event_list *out)
{
    struct pg_params p = {.n = 0};

    pg_param_int(&p, 1, store_list_limit(limit));
    pg_param_i64(&p, 2, after_seq);
    return pg_list(s, PG_OUTBOX_FETCH,
                   "SELECT " STORE_EVENT_COLUMNS " FROM hookd_outbox o"
                   " WHERE o.dispatched_at IS NULL AND o.seq > $2 ORDER BY o.seq LIMIT $1"
                   " FOR UPDATE SKIP LOCKED",
                   &p, store_read_event, STORE_ROWS(out, store_free_event));
}

/* One statement for the whole batch: the seqs go as one bigint[] literal. */
static int postgres_outbox_mark_dispatched(struct store *s, const int64_t *seqs, size_t n, int64_t at)
{
    struct pg_array literal = {0};
    struct pg_params p = {.n = 0};
    int result = HOOKD_ENOMEM;

    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        pg_array_i64(&literal, seqs[i]);
    if (pg_array_end(&literal)) {
        pg_param_i64(&p, 1, at);
        pg_param_i64_array(&p, 2, literal.buf);
        result = pg_run_command(s, PG_OUTBOX_MARK, "UPDATE hookd_outbox SET dispatched_at = $1 WHERE seq = ANY ($2)",
                                &p, NULL);
    }
    pg_array_free(&literal);
    return result;
}

/*
 * The take's floor (struct pg_outbox_floor). A dispatched row leaves
 * hookd_outbox_undispatched only when VACUUM removes its old version: until
 * then a scan from the start walks every row dispatched since, a leaf page a
 * few hundred rows (112 buffers a take after 47,000, and autovacuum comes at a
 * fifth of the table). A scan from a floor skips them.
 *
 * Transactions commit out of seq order, so the highest seq seen dispatched is
 * no floor: a transaction still open may hold a lower one. The floor moves
 * to cand, the highest seq one step saw, once the snapshot's xmin has passed
 * that step's xmax: every transaction then in progress has ended, and those
 * are the only ones that can hold a seq below cand, since an outbox seq is
 * taken after its transaction has its id (hookd_outbox_next_seq, schema 34)
 * and a sequence hands out its values in order. It moves no further than
 * below the first row that is still undispatched, committed by then or
 * locked by another node's take (that one may roll back). The step runs
 * before its transaction's take and never after one (took_in_tx), so it sees
 * only what has committed, never marks that may yet roll back.
 *
 * A row the floor cannot account for (a seq an application wrote itself, a
 * dispatched_at set back to NULL, a dispatch a restarted server lost, values a
 * sequence altered to CACHE > 1 hands out out of order) is taken by the scan
 * from the start that runs every PG_OUTBOX_SWEEP_EVERY_MS.
 */
static int outbox_floor_step(struct store *s, int64_t now_ms)
{
    struct pg_outbox_floor *f = &s->floor;
    struct pg_params p = {.n = 0};
    PGresult *res;
    int result;

    pg_param_i64(&p, 1, f->floor);
    pg_param_i64(&p, 2, f->cand);
    pg_param_i64(&p, 3, f->cand_xmax);
    result = pg_run(s, PG_OUTBOX_FLOOR,
                    "SELECT pg_snapshot_xmin(c.s)::text::bigint >= $3,"
                    " (SELECT min(o.seq) FROM hookd_outbox o WHERE o.dispatched_at IS NULL AND o.seq > $1"
                    "  AND o.seq <= $2),"
                    " (SELECT max(o.seq) FROM hookd_outbox o), pg_snapshot_xmax(c.s)::text::bigint"
                    " FROM (SELECT pg_current_snapshot() AS s) c",
                    &p, &res);
    if (result == 0) {
        bool ended = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
        if (f->cand > f->floor && ended) {
            /* Below the first undispatched row, or cand itself when there is none. */
            int64_t below = pg_col_null(res, 0, 1) ? f->cand : pg_col_i64(res, 0, 1) - 1;
            if (below > f->floor)
                f->floor = below;
        }
        if (f->cand <= f->floor) { /* reached (or none yet): the next one */
            f->cand = pg_col_i64(res, 0, 2);
            f->cand_xmax = pg_col_i64(res, 0, 3);
        }
        f->stepped_at = now_ms;
        PQclear(res);
    }
    return result;
}

/*
 * Lock, mark and read in one statement: the rows above the floor are picked
 * and locked in seq order (skipping those another transaction holds), marked,
 * and returned with the endpoints version the same snapshot sees, so that a
 * fan-out knows in one round trip what to fan out and whether its endpoint
 * list is current.
 */
static int postgres_outbox_take(struct store *s, int limit, int64_t at, struct event_list *out,
                                int64_t *endpoints_version)
{
    struct pg_outbox_floor *f = &s->floor;
    struct pg_params p = {.n = 0};
    int64_t now_ms = clock_mono_ms();
    bool sweep = now_ms - f->swept_at >= PG_OUTBOX_SWEEP_EVERY_MS;
    PGresult *res;
    int result;

    out->items = NULL;
    out->n = 0;
    result = pg_atomic_begin(s);
    if (result)
        return result;
    if (now_ms - f->stepped_at >= PG_OUTBOX_FLOOR_EVERY_MS && !f->took_in_tx)
        result = outbox_floor_step(s, now_ms);
    pg_param_int(&p, 1, store_list_limit(limit));
    pg_param_i64(&p, 2, at);
    pg_param_i64(&p, 3, sweep ? 0 : f->floor);
    if (result == 0)
        result = pg_run(s, PG_OUTBOX_TAKE,
                        "WITH c AS (SELECT o.seq FROM hookd_outbox o WHERE o.dispatched_at IS NULL AND o.seq > $3"
                        "  ORDER BY o.seq LIMIT $1 FOR UPDATE SKIP LOCKED),"
                        " u AS (UPDATE hookd_outbox o SET dispatched_at = $2"
                        "  WHERE o.seq = ANY (ARRAY(SELECT c.seq FROM c)) RETURNING o.*)"
                        " SELECT " STORE_EVENT_COLUMNS
                        ", (SELECT value::bigint FROM hookd_meta WHERE key = 'endpoints_version')"
                        " FROM u o ORDER BY o.seq",
                        &p, &res);
    if (result == 0) {
        f->took_in_tx = s->tx_open;
        if (sweep)
            f->swept_at = now_ms;
        result = pg_rows_read(res, store_read_event, STORE_ROWS(out, store_free_event));
        if (result == 0 && out->n > 0)
            *endpoints_version = pg_col_i64(res, 0, STORE_EVENT_NCOLS);
        PQclear(res);
    }
    result = pg_atomic_end(s, result);
    if (result)
        event_list_free(out);
    return result;
}

/* Called every few milliseconds: one probe of the partial index. */
static int postgres_outbox_pending(struct store *s, bool *any)
{
    PGresult *res;
    int result = pg_run(s, PG_OUTBOX_PENDING, "SELECT 1 FROM hookd_outbox WHERE dispatched_at IS NULL LIMIT 1", NULL,
                        &res);

    *any = result == 0 && PQntuples(res) > 0;
    PQclear(res);
    return result;
}

static int postgres_outbox_reject(struct store *s, int64_t seq, const char *error, int64_t at)
{
    struct pg_params p = {.n = 0};

    pg_param_text(&p, 1, error);
    pg_param_i64(&p, 2, at);
    pg_param_i64(&p, 3, seq);
    return pg_run_command(s, PG_OUTBOX_REJECT,
                          "UPDATE hookd_outbox SET error = $1, dispatched_at = coalesce(dispatched_at, $2) WHERE seq = $3",
                          &p, NULL);
}

const struct store_event_ops postgres_event_ops = {
    .insert = postgres_event_insert,
    .get = postgres_event_get,
    .list = postgres_event_list,
    .fetch = postgres_outbox_fetch,
    .mark_dispatched = postgres_outbox_mark_dispatched,
    .pending = postgres_outbox_pending,
    .take = postgres_outbox_take,
    .reject = postgres_outbox_reject,
};
