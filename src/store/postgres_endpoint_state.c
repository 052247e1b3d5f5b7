/*
 * PostgreSQL backend, per-endpoint delivery state (hookd_endpoint_state),
 * shared by every node: the breaker and auto-disable after attempts (the row
 * locked, the decision store_common.c's, the row written back), one
 * endpoint's state for the API, and its reset. The claims read and update the
 * same rows under the endpoint's claim lock (postgres_deliveries.c).
 */
#include "store/postgres_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ids.h"

enum {
    PG_STATE_GET = PG_ENDPOINT_STATE,
    PG_STATE_INSERT_MISSING,
    PG_STATE_GET_LOCKED,
    PG_STATE_SUCCEEDED,
    PG_STATE_WRITE,
    PG_STATE_DISABLE,
    PG_STATE_RESET,
    PG_STATE_EXPIRE_PAUSED,
    PG_STATE_GET_MANY,
    PG_ENDPOINT_STATE_END
};
_Static_assert((int)PG_ENDPOINT_STATE_END <= (int)PG_SOURCES, "the endpoint state statements overflow their slots");

static double rnd01(void)
{
    uint64_t r;

    random_bytes(&r, sizeof r);
    return (double)(r >> 11) * 0x1.0p-53;
}

static int postgres_state_get(struct store *s, const char *endpoint_id, struct endpoint_state *out)
{
    struct pg_params p = {.n = 0};

    pg_param_text(&p, 1, endpoint_id);
    return pg_get(s, PG_STATE_GET,
                  "SELECT " STORE_ENDPOINT_STATE_COLUMNS " FROM hookd_endpoint_state WHERE endpoint_id = $1", &p,
                  store_read_endpoint_state, out);
}

struct state_list {
    struct endpoint_state *items;
    size_t n;
};

static int state_cmp(const void *a, const void *b)
{
    return strcmp(((const struct endpoint_state *)a)->endpoint_id, ((const struct endpoint_state *)b)->endpoint_id);
}

static int postgres_state_get_many(struct store *s, const char *const *endpoint_ids, size_t n,
                                   struct endpoint_state *out)
{
    struct state_list rows = {0};
    struct pg_array ids = {0};
    struct pg_params p = {.n = 0};
    const char *literal;
    int result;

    for (size_t i = 0; i < n; i++)
        endpoint_state_default(&out[i], endpoint_ids[i]);
    if (n == 0)
        return 0;
    literal = pg_array_texts(&ids, endpoint_ids, n);
    if (!literal) {
        pg_array_free(&ids);
        return HOOKD_ENOMEM;
    }
    pg_param_text_array(&p, 1, literal);
    result = pg_list(s, PG_STATE_GET_MANY,
                    "SELECT " STORE_ENDPOINT_STATE_COLUMNS " FROM hookd_endpoint_state WHERE endpoint_id = ANY ($1)",
                    &p, store_read_endpoint_state, STORE_ROWS(&rows, NULL));
    pg_array_free(&ids);
    if (result == 0 && rows.n > 0) {
        qsort(rows.items, rows.n, sizeof *rows.items, state_cmp);
        for (size_t i = 0; i < n; i++) {
            struct endpoint_state key;
            const struct endpoint_state *hit;
            snprintf(key.endpoint_id, sizeof key.endpoint_id, "%s", endpoint_ids[i]);
            hit = bsearch(&key, rows.items, rows.n, sizeof *rows.items, state_cmp);
            if (hit != NULL)
                out[i] = *hit;
        }
    }
    free(rows.items);
    return result == HOOKD_ENOTFOUND ? 0 : result;
}

/* Successes alone on an endpoint that is closed and has not failed match no row: nothing is written or locked. */
static int state_succeeded(struct store *s, const char *endpoint_id, int64_t now)
{
    struct pg_params p = {.n = 0};

    pg_param_text(&p, 1, endpoint_id);
    pg_param_i64(&p, 2, now);
    return pg_run_command(s, PG_STATE_SUCCEEDED,
                          "UPDATE hookd_endpoint_state SET closed_at = CASE WHEN breaker <> 'closed' THEN $2"
                          " ELSE closed_at END, breaker = 'closed', consecutive_failures = 0, failing_since = NULL,"
                          " opened_at = NULL, next_probe_at = NULL, probe_until = NULL, probe_interval_ms = 0"
                          " WHERE endpoint_id = $1 AND (breaker <> 'closed' OR consecutive_failures > 0"
                          " OR failing_since IS NOT NULL)",
                          &p, NULL);
}

/* The row, locked to the transaction (another node's results for the endpoint wait); its default if none. */
static int state_get_locked(struct store *s, const char *endpoint_id, struct endpoint_state *out)
{
    struct pg_params p = {.n = 0};
    int result;

    pg_param_text(&p, 1, endpoint_id);
    /* Made first if missing, so that two nodes' first failures lock one row instead of racing to insert it. */
    result = pg_run_command(s, PG_STATE_INSERT_MISSING,
                            "INSERT INTO hookd_endpoint_state(endpoint_id) VALUES ($1) ON CONFLICT DO NOTHING", &p, NULL);
    if (result == 0)
        result = pg_get(s, PG_STATE_GET_LOCKED,
                        "SELECT " STORE_ENDPOINT_STATE_COLUMNS " FROM hookd_endpoint_state WHERE endpoint_id = $1"
                        " FOR UPDATE",
                        &p, store_read_endpoint_state, out);
    return result;
}

static int state_write(struct store *s, const struct endpoint_state *e)
{
    struct pg_params p = {.n = 0};

    pg_param_text(&p, 1, e->endpoint_id);
    pg_param_text(&p, 2, breaker_name(e->breaker));
    pg_param_int(&p, 3, e->consecutive_failures);
    pg_param_time(&p, 4, e->opened_at);
    pg_param_time(&p, 5, e->next_probe_at);
    pg_param_i64(&p, 6, e->probe_interval_ms);
    pg_param_time(&p, 7, e->probe_until);
    pg_param_time(&p, 8, e->closed_at);
    pg_param_time(&p, 9, e->failing_since);
    return pg_run_command(s, PG_STATE_WRITE,
                          "UPDATE hookd_endpoint_state SET breaker = $2, consecutive_failures = $3, opened_at = $4,"
                          " next_probe_at = $5, probe_interval_ms = $6, probe_until = $7, closed_at = $8,"
                          " failing_since = $9 WHERE endpoint_id = $1",
                          &p, NULL);
}

/* Disables an enabled endpoint; *done tells whether it was enabled. */
static int endpoint_disable(struct store *s, const char *endpoint_id, const char *reason, int64_t now, bool *done)
{
    struct pg_params p = {.n = 0};
    int64_t rows = 0;
    int result;

    pg_param_text(&p, 1, endpoint_id);
    pg_param_text(&p, 2, reason);
    pg_param_i64(&p, 3, now);
    result = pg_run_command(s, PG_STATE_DISABLE,
                            "UPDATE hookd_endpoints SET enabled = false, disabled_reason = $2, updated_at = $3,"
                            " disabled_at = COALESCE(disabled_at, $3) WHERE id = $1 AND enabled",
                            &p, &rows);
    *done = result == 0 && rows > 0;
    return result;
}

static int record_one(struct store *s, struct endpoint_outcome *o, const struct breaker_policy *p, int64_t now)
{
    struct endpoint_state st;
    char reason[ENDPOINT_DISABLE_REASON_MAX];
    int result;

    o->opened = o->disabled = false;
    if (o->failures <= 0)
        return o->succeeded ? state_succeeded(s, o->endpoint_id, now) : 0;
    result = state_get_locked(s, o->endpoint_id, &st);
    if (result)
        return result;
    endpoint_state_apply(&st, o, p, now, rnd01());
    result = state_write(s, &st);
    if (result == 0 && endpoint_state_disable_due(&st, p, now, reason))
        result = endpoint_disable(s, o->endpoint_id, reason, now, &o->disabled);
    return result;
}

static int postgres_state_record(struct store *s, struct endpoint_outcome *o, size_t n, const struct breaker_policy *p,
                                 int64_t now)
{
    int result = pg_atomic_begin(s);

    if (result)
        return result;
    for (size_t i = 0; i < n && result == 0; i++)
        result = record_one(s, &o[i], p, now);
    return pg_atomic_end(s, result);
}

static int postgres_state_reset(struct store *s, const char *endpoint_id)
{
    struct pg_params p = {.n = 0};

    pg_param_text(&p, 1, endpoint_id);
    return pg_run_command(s, PG_STATE_RESET, "DELETE FROM hookd_endpoint_state WHERE endpoint_id = $1", &p, NULL);
}

/* The rows and their hookd_inflight leases (ended ones) in one statement. */
static int postgres_state_expire_paused(struct store *s, int64_t now, int64_t window_ms, int64_t *n)
{
    struct pg_params p = {.n = 0};
    PGresult *res = NULL;
    int result;

    if (n != NULL)
        *n = 0;
    pg_param_i64(&p, 1, now);
    pg_param_i64(&p, 2, window_ms);
    result = pg_run(s, PG_STATE_EXPIRE_PAUSED,
                    "WITH u AS (UPDATE hookd_deliveries d" STORE_EXPIRE_PAUSED_SET " WHERE" PG_EXPIRE_PAUSED_WHERE
                    " RETURNING d.id),"
                    " f AS (DELETE FROM hookd_inflight WHERE delivery_id = ANY (ARRAY(SELECT id FROM u)))"
                    " SELECT count(*) FROM u",
                    &p, &res);
    if (result == 0 && n != NULL && PQntuples(res) == 1)
        *n = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return result;
}

const struct store_endpoint_state_ops postgres_endpoint_state_ops = {
    .record = postgres_state_record,
    .get = postgres_state_get,
    .get_many = postgres_state_get_many,
    .reset = postgres_state_reset,
    .expire_paused = postgres_state_expire_paused,
};
