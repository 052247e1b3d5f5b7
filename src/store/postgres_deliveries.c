/*
 * PostgreSQL backend, deliveries and attempts: inserts from fan-out, claims
 * under per-endpoint in-flight caps that hold across nodes (FOR UPDATE SKIP
 * LOCKED, advisory locks per endpoint), fenced completion (the delivery's new
 * state, its attempt and a 410's endpoint disable in one statement; the first
 * attempt of an unrecorded delivery is kept in its row, later ones are rows of
 * hookd_attempts), lease release, and the read side.
 */
#include "store/postgres_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"

/* Statement slots, in this family's range (postgres_internal.h). */
enum {
    PG_DELIVERY_INSERT_MANY = PG_DELIVERIES,
    PG_DELIVERY_CLAIM_ENDPOINTS,
    PG_DELIVERY_CLAIM,
    PG_DELIVERY_NEXT_DUE,
    PG_DELIVERY_SUPERSEDE,
    PG_DELIVERY_SLOTS_LOCK,
    PG_DELIVERY_SLOTS,
    PG_DELIVERY_COMPLETE_MANY,
    PG_DELIVERY_RECORD_FIRST,
    PG_DELIVERY_HOLD_MANY,
    PG_DELIVERY_RECOVER,
    PG_DELIVERY_RELEASE,
    PG_DELIVERY_RELEASE_NODE,
    PG_DELIVERY_RENEW,
    PG_DELIVERY_GET,
    PG_DELIVERY_REPLAY,
    PG_ATTEMPT_LIST,
    PG_DELIVERY_SORT_OFF,
    PG_DELIVERY_SORT_RESET,
    PG_DELIVERY_LIST,
    PG_DELIVERY_LIST_LAST = PG_DELIVERY_LIST + DL_F_COMBINATIONS - 1,
    PG_DELIVERY_REPLAY_MANY,
    PG_DELIVERY_COUNT, /* one per filter combination without the cursor */
    PG_DELIVERY_COUNT_LAST = PG_DELIVERY_COUNT + DL_F_BEFORE - 1,
    PG_DELIVERY_LIST_UNDELIVERED, /* the same with a status other than delivered (status_undelivered) */
    PG_DELIVERY_LIST_UNDELIVERED_LAST = PG_DELIVERY_LIST_UNDELIVERED + DL_F_COMBINATIONS - 1,
    PG_DELIVERY_COUNT_UNDELIVERED,
    PG_DELIVERY_COUNT_UNDELIVERED_LAST = PG_DELIVERY_COUNT_UNDELIVERED + DL_F_BEFORE - 1,
    PG_DELIVERIES_END
};
_Static_assert((int)PG_DELIVERIES_END <= (int)PG_ENDPOINT_STATE, "the deliveries statements overflow their slots");

#define OPEN_STATUSES "('pending', 'retrying')"
/*
 * hookd_inflight mirrors every live lease (schema v3: the caps count it, so
 * that no index of hookd_deliveries covers a lease column and leasing is a HOT
 * update). Each statement that sets or clears leases keeps it in step: these
 * are the CTE bodies, over a CTE `src` of changed rows (id, endpoint_id,
 * lease_owner, lease_until). A new lease (INFLIGHT_RECORD) is stamped with
 * the server's time (made_at, schema 35: the slots' "turning"); a renewal
 * (INFLIGHT_RENEW) keeps the stamp, so a hung endpoint's leases stay old.
 */
#define INFLIGHT_UPSERT(src, stamp)                                                                            \
    "INSERT INTO hookd_inflight(delivery_id, endpoint_id, owner, lease_until)"                                 \
    " SELECT id, endpoint_id, lease_owner, COALESCE(lease_until, 0) FROM " src " WHERE lease_owner IS NOT NULL" \
    " ON CONFLICT (delivery_id) DO UPDATE SET endpoint_id = excluded.endpoint_id, owner = excluded.owner,"     \
    " lease_until = excluded.lease_until" stamp
#define INFLIGHT_RECORD(src) INFLIGHT_UPSERT(src, ", made_at = excluded.made_at")
#define INFLIGHT_RENEW(src) INFLIGHT_UPSERT(src, "")
/* By key, not a join: a join may be planned as a scan of the whole (churning) table. */
#define INFLIGHT_DROP(src) "DELETE FROM hookd_inflight WHERE delivery_id = ANY (ARRAY(SELECT id FROM " src "))"
/* Live leases of the endpoint whose id is the SQL expression ep, at time now (a parameter). */
#define INFLIGHT_COUNT(ep, now) \
    "(SELECT count(*)::int FROM hookd_inflight x WHERE x.endpoint_id = " ep " AND x.lease_until >= " now ")"
/*
 * Unrecorded deliveries (hold_unrecorded) whose lease ends without a result:
 * given back unsent, their node starting again, or their lease run out (the
 * node is gone). The CTE bodies ux and uw drop the leases that match cond
 * and write their rows pending, unleased, for the claims, due since their
 * fan-out (so they keep their place among the endpoint's due rows), with the
 * event's account from its outbox row. A row present already is kept.
 */
#define UNRECORDED_WRITE_PENDING(cond)                                                                       \
    " ux AS (DELETE FROM hookd_inflight WHERE event_id IS NOT NULL AND " cond                               \
    "  RETURNING delivery_id, endpoint_id, event_id, created_at, lease_token),"                              \
    " uw AS (INSERT INTO hookd_deliveries(id, event_id, endpoint_id, account, status, attempt_count,"       \
    "  next_attempt_at, created_at, lease_token)"                                                             \
    "  SELECT ux.delivery_id, ux.event_id, ux.endpoint_id, o.account, 'pending', 0, ux.created_at, ux.created_at," \
    "  ux.lease_token FROM ux JOIN hookd_outbox o ON o.id = ux.event_id ON CONFLICT DO NOTHING RETURNING id)"
/*
 * Whether the endpoint whose id is the SQL expression ep has a due, unleased
 * delivery at time now: true or NULL. A scalar subquery that stops at the
 * first such row in hookd_deliveries_endpoint_due; written as EXISTS, a
 * generic plan may hash every open delivery instead (24 ms a time, measured).
 */
#define BACKLOG_OF(ep, now)                                                                          \
    "(SELECT true FROM hookd_deliveries d WHERE d.endpoint_id = " ep " AND d.status IN " OPEN_STATUSES \
    " AND d.next_attempt_at <= " now " AND (d.lease_owner IS NULL OR d.lease_until < " now ") LIMIT 1)"
/*
 * The rows an ended ordered delivery wakes (STORE_ORDER_WAKEABLE), found by
 * key, their status a parameter (the statement's placeholder pending, bound
 * to 'pending'). Written as the literal, the condition matches the status
 * index (and implies the open-status partial indexes' predicate), and a
 * generic plan made while pending rows were rare (after an ANALYZE that saw
 * mostly delivered ones) walks every pending delivery with the keys as a
 * filter: beside 8 hung endpoints' backlogs, 83,000 rows and 5,500 buffers in
 * every completion, whether or not any row was ordered. A parameter implies
 * no index predicate and matches no index column, so the keys' index is the
 * only way in.
 */
#define WAKEABLE_BY_KEY(d, now, pending) STORE_ORDER_WAKEABLE_AS(d, now, pending)
/*
 * What a completion writes of an attempt, shared by the attempt row
 * (hookd_attempts, prefix "") and a first attempt kept in its delivery row
 * (prefix "attempt1_", schema 33): the columns, and their values from the
 * result columns of the relation src (started, duration, code, class, error,
 * response as hex text, truncated as 0/1, node).
 */
#define ATTEMPT_FIELDS(prefix)                                                                            \
    prefix "started_at, " prefix "duration_ms, " prefix "status_code, " prefix "error_class, " prefix      \
    "error, " prefix "response_body, " prefix "response_truncated, " prefix "node"
#define ATTEMPT_VALUES(src)                                                                               \
    src ".started, " src ".duration, " src ".code, " src ".class, " src ".error, decode(" src ".response, 'hex'), " \
    src ".truncated <> 0, " src ".node"
/*
 * A 410's endpoint disable, for the completions' batch: the relation src
 * holds (endpoint_id, disable) of the results that were applied; the first
 * reason of each endpoint (min) is kept, at time now.
 */
#define ENDPOINT_DISABLE(src, now)                                                                        \
    "UPDATE hookd_endpoints e SET enabled = false, disabled_reason = z.disable, updated_at = " now ","         \
    " disabled_at = COALESCE(e.disabled_at, " now ") FROM (SELECT endpoint_id, min(disable) AS disable FROM " \
    src " z0 WHERE disable IS NOT NULL GROUP BY endpoint_id) z WHERE e.id = z.endpoint_id"
/* First key of the claim's per-endpoint pg_advisory_xact_lock(int, int) ("hkdp"). */
#define CLAIM_LOCK_CLASS "1751868528"

/* One statement for every row: the arrays are unnested into rows server-side.
 * *inserted counts the rows that were not present already. */
static int insert_rows(struct store *s, const struct delivery *ds, size_t n, int64_t *inserted)
{
    struct pg_array a[STORE_DELIVERY_NVALUES] = {{0}};
    struct store_value v[STORE_DELIVERY_NVALUES];
    struct pg_params p = {.n = 0};
    PGresult *res = NULL;
    int64_t now = clock_now_ms();
    int result = 0;

    *inserted = 0;
    for (size_t i = 0; i < n; i++) {
        if (!delivery_insertable(&ds[i]))
            return HOOKD_EINVAL;
    }
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        store_delivery_values(&ds[i], now, v);
        for (int c = 0; c < STORE_DELIVERY_NVALUES; c++)
            pg_array_value(&a[c], &v[c]);
    }
    /* v holds the last row: each column's type. */
    for (int c = 0; c < STORE_DELIVERY_NVALUES; c++) {
        const char *literal = pg_array_end(&a[c]);
        if (!literal)
            result = HOOKD_ENOMEM;
        else if (v[c].type == STORE_V_TEXT)
            pg_param_text_array(&p, c + 1, literal);
        else
            pg_param_i64_array(&p, c + 1, literal);
    }
    if (result == 0)
        result = pg_run(s, PG_DELIVERY_INSERT_MANY,
                        "WITH i AS (INSERT INTO hookd_deliveries(" STORE_DELIVERY_INSERT_COLUMNS ")"
                        "  SELECT * FROM unnest($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,"
                        "  $15, $16, $17, $18, $19) ON CONFLICT DO NOTHING RETURNING id, endpoint_id, lease_owner, lease_until),"
                        " f AS (" INFLIGHT_RECORD("i") ")"
                        " SELECT count(*) FROM i",
                        &p, &res);
    if (result == 0)
        *inserted = pg_col_i64(res, 0, 0);
    PQclear(res);
    for (int c = 0; c < STORE_DELIVERY_NVALUES; c++)
        pg_array_free(&a[c]);
    return result;
}

/*
 * The leases of unrecorded deliveries (struct delivery.unrecorded), one
 * statement: each is a hookd_inflight row that also holds what writing the
 * delivery's row takes (its event, its creation time), and counts for the
 * caps as any lease does; the delivery's row is written by its first result
 * (complete_unrecorded), or, when the lease ends without one, pending
 * (UNRECORDED_WRITE_PENDING).
 */
static int hold_unrecorded(struct store *s, const struct delivery *ds, size_t n)
{
    enum { H_ID, H_ENDPOINT, H_OWNER, H_UNTIL, H_TOKEN, H_EVENT, H_CREATED, H_COLUMNS };
    struct pg_array a[H_COLUMNS] = {{0}};
    struct pg_params p = {.n = 0};
    int64_t now = clock_now_ms();
    size_t held = 0;
    int result = 0;

    for (size_t i = 0; i < n; i++) {
        const struct delivery *d = &ds[i];
        if (!d->unrecorded)
            continue;
        held++;
        pg_array_text(&a[H_ID], d->id);
        pg_array_text(&a[H_ENDPOINT], d->endpoint_id);
        pg_array_text(&a[H_OWNER], d->lease_owner);
        pg_array_i64(&a[H_UNTIL], d->lease_until);
        pg_array_i64(&a[H_TOKEN], d->lease_token);
        pg_array_text(&a[H_EVENT], d->event_id);
        pg_array_i64(&a[H_CREATED], d->created_at > 0 ? d->created_at : now);
    }
    for (int c = 0; held > 0 && c < H_COLUMNS; c++) {
        const char *literal = pg_array_end(&a[c]);
        if (!literal)
            result = HOOKD_ENOMEM;
        else if (c == H_UNTIL || c == H_TOKEN || c == H_CREATED)
            pg_param_i64_array(&p, c + 1, literal);
        else
            pg_param_text_array(&p, c + 1, literal);
    }
    if (result == 0 && held > 0)
        result = pg_run_command(s, PG_DELIVERY_HOLD_MANY,
                                "INSERT INTO hookd_inflight(delivery_id, endpoint_id, owner, lease_until, lease_token,"
                                " event_id, created_at) SELECT * FROM unnest($1, $2, $3, $4, $5, $6, $7)",
                                &p, NULL);
    for (int c = 0; c < H_COLUMNS; c++)
        pg_array_free(&a[c]);
    return result;
}

/* Unrecorded deliveries have only their lease written here (hold_unrecorded); the rest their rows. */
static int postgres_delivery_insert_many(struct store *s, const struct delivery *ds, size_t n)
{
    struct delivery *rows = NULL;
    size_t n_rows = 0;
    int64_t inserted;
    int result;

    for (size_t i = 0; i < n; i++) {
        if (ds[i].unrecorded && (!delivery_insertable(&ds[i]) || ds[i].lease_owner == NULL ||
                                 ds[i].status != DELIVERY_PENDING || ds[i].order_key != NULL))
            return HOOKD_EINVAL;
        n_rows += !ds[i].unrecorded;
    }
    if (n_rows == n)
        return insert_rows(s, ds, n, &inserted);
    rows = malloc((n_rows + 1) * sizeof *rows);
    if (!rows)
        return HOOKD_ENOMEM;
    n_rows = 0;
    for (size_t i = 0; i < n; i++) {
        if (!ds[i].unrecorded)
            rows[n_rows++] = ds[i];
    }
    result = insert_rows(s, rows, n_rows, &inserted);
    free(rows);
    return result == 0 ? hold_unrecorded(s, ds, n) : result;
}

/* The one-row case of the same statement: one plan and one text to keep right. */
static int postgres_delivery_insert(struct store *s, const struct delivery *d)
{
    int64_t inserted;
    int result = insert_rows(s, d, 1, &inserted);

    return result == 0 && inserted == 0 ? HOOKD_EEXISTS : result;
}

/* ---- claims ----------------------------------------------------------------- */

/* Appends v as a quoted element to the text[] literal in buf (opened with '{'). */
static void array_literal_add(char *buf, size_t cap, size_t *len, const char *v)
{
    if (*len + 2 * strlen(v) + 4 > cap)
        return;
    if (*len > 1)
        buf[(*len)++] = ',';
    buf[(*len)++] = '"';
    for (const char *c = v; *c; c++) {
        if (*c == '"' || *c == '\\')
            buf[(*len)++] = '\\';
        buf[(*len)++] = *c;
    }
    buf[(*len)++] = '"';
    buf[*len] = '\0';
}

/*
 * One statement with sorts priced out, in a pipeline with the two settings
 * around it (its generic plan is made, and made again after an ANALYZE, at
 * its run between them): a per-endpoint walk for the earliest due row then
 * comes from hookd_deliveries_endpoint_due, the one index in that order,
 * never from another index of the endpoint's rows and a sort. Statistics
 * taken before an endpoint's backlog (its id not among their common values:
 * a new endpoint, or a bench phase's) made that sort look like one row an
 * endpoint, and it read every open row of every endpoint each time: 9,700-
 * 13,000 buffers a claim beside 8 paused endpoints' backlogs; 1,100 and 10
 * ms a next_due in a 3-node drain. The session's own setting comes back
 * after it, by RESET: the value it starts a session with (hookd sets it at
 * no other level), and like the setting itself undone with a transaction
 * that rolls back; it needs no transaction block, as SET LOCAL does (next_due
 * may run outside one). set_config() with pg_settings' reset_val built every
 * setting's row: 0.6 ms a claim, 670 ms of a 3-node drain of 20,000.
 */
static int run_sortless(struct store *s, int slot, const char *sql, const struct pg_params *p, PGresult **res)
{
    PGresult *piped[3] = {NULL, NULL, NULL};
    int result = pg_run_many(s,
                             (const struct pg_stmt[]){
                                 {PG_DELIVERY_SORT_OFF, "SELECT set_config('enable_sort', 'off', true)", NULL},
                                 {slot, sql, p},
                                 {PG_DELIVERY_SORT_RESET, "RESET enable_sort", NULL}},
                             3, piped);

    PQclear(piped[0]);
    PQclear(piped[2]);
    *res = piped[1];
    return result;
}

/* The claim's candidates (claim_candidates); the leases are counted for endpoints with due rows only, full ones listed last. */
#define CLAIM_ENDPOINTS_SQL                                                                                      \
    "WITH due AS MATERIALIZED (SELECT e.id, e.cap, e.rate, f.first_at,"                                          \
    "  e.cap > 0 AND " INFLIGHT_COUNT("e.id", "$1") " >= e.cap AS full"                                          \
    "  FROM (SELECT id, rate_limit AS rate, CASE WHEN max_in_flight > 0"                                         \
    "   THEN max_in_flight WHEN $2 > 0 THEN $2 ELSE 0 END AS cap FROM hookd_endpoints"                          \
    "   WHERE enabled AND id <> ALL ($4::text[])) e"                                                             \
    "  CROSS JOIN LATERAL (SELECT d.next_attempt_at AS first_at FROM hookd_deliveries d"                         \
    "   WHERE d.endpoint_id = e.id AND d.status IN " OPEN_STATUSES " AND d.next_attempt_at <= $1"                \
    "   AND (d.lease_owner IS NULL OR d.lease_until < $1) ORDER BY d.next_attempt_at, d.id LIMIT 1) f)"          \
    " SELECT c.id, (c.cap <= 0 AND c.rate <= 0) OR pg_try_advisory_xact_lock(" CLAIM_LOCK_CLASS ", hashtext(c.id)),"  \
    "  false FROM (SELECT * FROM due WHERE NOT due.full ORDER BY due.first_at, due.id LIMIT $3 OFFSET 0) c"     \
    " UNION ALL SELECT due.id, false, true FROM due WHERE due.full"

/* The candidates a claim locked, to tell which of them its rows drained (lease_limits.held). */
#define CLAIM_LOCKED_MAX STORE_LIST_MAX
struct claim_locked {
    char ids[CLAIM_LOCKED_MAX][HOOKD_ID_MAX];
    size_t n;
};

/*
 * The claim's first statement: the candidates, as a text[] literal (*literal,
 * heap; NULL when none). They are the enabled endpoints with a due, unleased
 * delivery that look not full, the limit with the earliest such delivery (no
 * more can contribute to a claim of limit rows, which also bounds the locks
 * taken). Each capped one is locked until the transaction ends, so a second
 * claim for it, on another node, cannot count its leases before these are
 * committed. The lock is only tried: an endpoint another claim holds right
 * now is left to it (and no two claims ever wait for each other). The full
 * ones and those left to another claim are named in lim's held endpoints;
 * the locked ones go into locked, for claim_held_after.
 */
static int claim_candidates(struct store *s, int64_t now, int limit, int default_cap, const struct lease_limits *lim,
                            char **literal, struct claim_locked *locked)
{
    struct pg_params p = {.n = 0};
    struct pg_array full = {0};
    const char *full_literal;
    PGresult *res;
    size_t cap = 3, len = 1;
    int rows, result;

    *literal = NULL;
    /* The caller's endpoints full of its own leases (lease_limits.full): held, with rows due, and not walked. */
    for (size_t i = 0; i < lim->n_full; i++) {
        pg_array_text(&full, lim->full[i]);
        lease_limits_held(lim, lim->full[i]);
    }
    full_literal = pg_array_end(&full);
    if (!full_literal) {
        pg_array_free(&full);
        return HOOKD_ENOMEM;
    }
    pg_param_i64(&p, 1, now);
    pg_param_int(&p, 2, default_cap);
    pg_param_int(&p, 3, limit);
    pg_param_text_array(&p, 4, full_literal);
    /* Sorts priced out (run_sortless): the candidates' own sort has no other way and stays. */
    result = run_sortless(s, PG_DELIVERY_CLAIM_ENDPOINTS, CLAIM_ENDPOINTS_SQL, &p, &res);
    pg_array_free(&full);
    if (result)
        return result;
    rows = PQntuples(res);
    bool any = false;
    for (int i = 0; i < rows; i++) {
        cap += 2 * (size_t)PQgetlength(res, i, 0) + 3;
        any |= strcmp(PQgetvalue(res, i, 1), "t") == 0;
    }
    if (any) { /* none locked (full, or another claim's): no second statement */
        *literal = malloc(cap);
        if (!*literal)
            result = HOOKD_ENOMEM;
    }
    if (*literal) {
        (*literal)[0] = '{';
        for (int i = 0; i < rows; i++) {
            if (strcmp(PQgetvalue(res, i, 1), "t") == 0)
                array_literal_add(*literal, cap, &len, PQgetvalue(res, i, 0));
        }
        snprintf(*literal + len, cap - len, "}");
    }
    /* Full ones, and those another node's claim holds, are held; the locked ones unless they take all that is due. */
    for (int i = 0; result == 0 && lim->n_held != NULL && i < rows; i++) {
        if (strcmp(PQgetvalue(res, i, 1), "t") != 0)
            lease_limits_held(lim, PQgetvalue(res, i, 0));
        else if (locked->n < CLAIM_LOCKED_MAX)
            snprintf(locked->ids[locked->n++], HOOKD_ID_MAX, "%s", PQgetvalue(res, i, 0));
        else
            lease_limits_held(lim, PQgetvalue(res, i, 0));
    }
    PQclear(res);
    return result;
}

/* The locked candidates a claim's rows did not drain (none of its rows says "took less than it may"): held. */
static void claim_held_after(const struct lease_limits *lim, const struct claim_locked *locked, PGresult *res)
{
    int col = PQfnumber(res, "endpoint_id"), rows = PQntuples(res), last = PQnfields(res) - 1;

    for (size_t i = 0; lim->n_held != NULL && i < locked->n; i++) {
        bool drained = false;
        for (int r = 0; col >= 0 && r < rows && !drained; r++)
            drained = strcmp(PQgetvalue(res, r, last), "f") == 0 && strcmp(PQgetvalue(res, r, col), locked->ids[i]) == 0;
        if (!drained)
            lease_limits_held(lim, locked->ids[i]);
    }
}

/*
 * The claim's second statement, in a new snapshot taken after the locks:
 * each candidate's free slots (cap minus its live leases), its earliest due
 * rows up to that many, the earliest limit of them all locked (SKIP LOCKED:
 * rows another transaction holds are left to it; a row changed since the
 * snapshot is checked again) and leased to node, with their events.
 */
static int claim_lease(struct store *s, const char *node, int64_t now, int64_t lease_until, int limit,
                       int default_cap, const struct lease_limits *lim, const char *candidates,
                       const struct claim_locked *locked, struct job_list *out)
{
    int64_t ramp_ms = lim->ramp_ms;
    bool *more_due = lim->more_due;
    struct pg_params p = {.n = 0};
    PGresult *res;
    int result;

    pg_param_text(&p, 1, node);
    pg_param_i64(&p, 2, now);
    pg_param_i64(&p, 3, lease_until);
    pg_param_int(&p, 4, limit);
    pg_param_int(&p, 5, default_cap);
    pg_param_text_array(&p, 6, candidates);
    pg_param_i64(&p, 7, ramp_ms);
    result = pg_run(s, PG_DELIVERY_CLAIM,
                    "WITH f0 AS (SELECT c.id, c.cap, c.rate, c.ordered, " INFLIGHT_COUNT("c.id", "$2") " AS leases,"
                    "   st.breaker, CASE WHEN st.breaker = 'open' THEN st.next_probe_at ELSE st.probe_until END AS probe_at,"
                    /* In float8 and held within [0, burst]: a row from a clock ahead (another node's) or
                     * written by SQL neither overflows (which failed every claim) nor leases past the
                     * burst; one stamped too far ahead is taken as full (sqlite_deliveries.c says why). */
                    "   st.closed_at, CASE WHEN c.rate <= 0 THEN NULL"
                    "    WHEN st.tokens_at IS NULL OR st.tokens_milli IS NULL"
                    "     OR st.tokens_at > $2 + " STORE_TOKENS_AHEAD_MAX_SQL " THEN c.rate::bigint * 1000"
                    "    ELSE least(c.rate * 1000.0, least(greatest(st.tokens_milli::float8, 0), c.rate * 1000.0)"
                    "     + least(greatest($2::float8 - st.tokens_at::float8, 0), 1e6) * c.rate)::bigint END AS tokens"
                    "  FROM (SELECT e.id, e.rate_limit AS rate, e.ordering <> 'none' AS ordered,"
                    "   CASE WHEN e.max_in_flight > 0 THEN e.max_in_flight WHEN $5 > 0 THEN $5 ELSE 0 END AS cap"
                    "   FROM unnest($6) AS k(id) JOIN hookd_endpoints e ON e.id = k.id WHERE e.enabled) c"
                    "  LEFT JOIN hookd_endpoint_state st ON st.endpoint_id = c.id),"
                    /* What each may lease now (sqlite_deliveries.c, claim_endpoint_limit, says it in C). */
                    " f AS (SELECT f0.id, f0.rate, f0.tokens, f0.ordered, COALESCE(f0.breaker, 'closed') <> 'closed' AS probe,"
                    "  least(CASE WHEN f0.cap > 0 THEN f0.cap - f0.leases ELSE $4 END,"
                    "   CASE WHEN COALESCE(f0.breaker, 'closed') = 'closed' THEN $4"
                    "    WHEN COALESCE(f0.probe_at, 0) <= $2 THEN 1 ELSE 0 END,"
                    "   CASE WHEN COALESCE(f0.breaker, 'closed') = 'closed' AND f0.cap > 0 AND $7 > 0"
                    "    AND f0.closed_at > $2 - $7"
                    "    THEN greatest(1, ceil(f0.cap * greatest($2 - f0.closed_at, 0)::float8 / $7)::int) - f0.leases ELSE $4 END,"
                    "   CASE WHEN f0.rate > 0 THEN (f0.tokens / 1000)::int ELSE $4 END) AS free FROM f0),"
                    /*
                     * Ordered endpoints (store_common.h, STORE_ORDER_WALK_MAX): their due rows, at
                     * most what they may lease plus the walk's bound, each with its resource's
                     * head's readiness (NULL: it is first). Blocked ones (b) are moved behind their
                     * heads (z; those another claim holds are left alone).
                     */
                    " w AS (SELECT f.id AS ep, v.tid, v.ready FROM f CROSS JOIN LATERAL ("
                    "   SELECT d.ctid AS tid, " STORE_ORDER_HEAD_READY("d", "greatest", "least", "$2") " AS ready"
                    "   FROM hookd_deliveries d WHERE d.endpoint_id = f.id AND d.status IN " OPEN_STATUSES
                    "   AND d.next_attempt_at <= $2 AND (d.lease_owner IS NULL OR d.lease_until < $2)"
                    "   ORDER BY d.next_attempt_at, d.id LIMIT least(f.free, $4) + " STORE_ORDER_WALK_MAX_SQL ") v"
                    "  WHERE f.ordered AND f.free > 0),"
                    " b AS (SELECT d.ctid AS tid, w.ready FROM hookd_deliveries d JOIN w ON d.ctid = w.tid"
                    "  WHERE d.ctid = ANY (ARRAY(SELECT w.tid FROM w WHERE w.ready IS NOT NULL))"
                    "  AND d.next_attempt_at <= w.ready FOR UPDATE OF d SKIP LOCKED),"
                    " z AS (UPDATE hookd_deliveries d SET next_attempt_at = b.ready + 1 FROM b WHERE d.ctid = b.tid),"
                    /*
                     * Locked as they are read, in the index's order: rows another claim holds are
                     * skipped. Each with its event's row (ev), read once: the result is made of
                     * it, and a delivery without its event is not taken. An ordered endpoint's
                     * are the first ones w found (a TID scan: its walk is w's).
                     */
                    " l1 AS (SELECT q.* FROM f CROSS JOIN LATERAL ("
                    "   SELECT d.ctid AS tid, d.next_attempt_at, d.id, o AS ev FROM hookd_deliveries d"
                    "   JOIN hookd_outbox o ON o.id = d.event_id"
                    "   WHERE d.endpoint_id = f.id AND d.status IN " OPEN_STATUSES " AND d.next_attempt_at <= $2"
                    "   AND (d.lease_owner IS NULL OR d.lease_until < $2) AND " STORE_ORDER_FIRST("d")
                    "   ORDER BY d.next_attempt_at, d.id LIMIT least(greatest(f.free, 0), $4)"
                    "   FOR UPDATE OF d SKIP LOCKED) q WHERE NOT f.ordered),"
                    " l2 AS (SELECT q.* FROM f CROSS JOIN LATERAL ("
                    "   SELECT d.ctid AS tid, d.next_attempt_at, d.id, o AS ev FROM hookd_deliveries d"
                    "   JOIN hookd_outbox o ON o.id = d.event_id"
                    "   WHERE d.ctid = ANY (ARRAY(SELECT w.tid FROM w WHERE w.ep = f.id AND w.ready IS NULL))"
                    "   AND d.endpoint_id = f.id AND d.status IN " OPEN_STATUSES " AND d.next_attempt_at <= $2"
                    "   AND (d.lease_owner IS NULL OR d.lease_until < $2) AND " STORE_ORDER_FIRST("d")
                    "   ORDER BY d.next_attempt_at, d.id LIMIT least(greatest(f.free, 0), $4)"
                    "   FOR UPDATE OF d SKIP LOCKED) q WHERE f.ordered AND f.free > 0),"
                    " l AS (SELECT x.tid, x.ev FROM (SELECT * FROM l1 UNION ALL SELECT * FROM l2) x"
                    "  ORDER BY x.next_attempt_at, x.id LIMIT $4),"
                    /*
                     * The rows l locked (each checked again at its lock, on its newest version),
                     * found by ctid, each with its event's row; the lease is checked once more,
                     * the status is not: a condition implying a partial index's predicate (status
                     * open) let the generic plan, made while the table was new and empty, walk
                     * that whole index with the ctids as a filter: 17,000 rows read per claim of
                     * 20 during a backlog drain, until an ANALYZE invalidated the plan (issue
                     * 14's slow runs). No index has a lease column in its predicate: this stays a
                     * TID scan.
                     */
                    " u AS (UPDATE hookd_deliveries d SET lease_owner = $1, lease_until = $3,"
                    "  lease_token = d.lease_token + 1 FROM l WHERE d.ctid = l.tid"
                    "  AND (d.lease_owner IS NULL OR d.lease_until < $2) RETURNING d.*, l.ev),"
                    " i AS (" INFLIGHT_RECORD("u") "),"
                    /* A paused endpoint's lease is its probe; a rate-limited one spent a token per lease. */
                    " n AS (SELECT u.endpoint_id, count(*) AS k FROM u GROUP BY u.endpoint_id),"
                    " s AS (INSERT INTO hookd_endpoint_state AS x (endpoint_id, breaker, probe_until, tokens_milli,"
                    "  tokens_at) SELECT f.id, CASE WHEN f.probe THEN 'half_open' ELSE 'closed' END,"
                    "  CASE WHEN f.probe THEN $3 END, CASE WHEN f.rate > 0 THEN f.tokens - n.k * 1000 END,"
                    "  CASE WHEN f.rate > 0 THEN $2 END FROM f JOIN n ON n.endpoint_id = f.id WHERE f.probe OR f.rate > 0"
                    "  ON CONFLICT (endpoint_id) DO UPDATE SET"
                    "  breaker = CASE WHEN excluded.breaker = 'half_open' THEN 'half_open' ELSE x.breaker END,"
                    "  probe_until = CASE WHEN excluded.breaker = 'half_open' THEN excluded.probe_until"
                    "   ELSE x.probe_until END,"
                    "  tokens_milli = COALESCE(excluded.tokens_milli, x.tokens_milli),"
                    "  tokens_at = COALESCE(excluded.tokens_at, x.tokens_at))"
                    /* Last column: whether the row's endpoint used up what it could lease now. */
                    " SELECT " STORE_JOB_COLUMNS ", n.k >= f.free FROM u d CROSS JOIN LATERAL (SELECT (d.ev).*) o"
                    " JOIN n ON n.endpoint_id = d.endpoint_id JOIN f ON f.id = d.endpoint_id"
                    " ORDER BY d.next_attempt_at, d.id",
                    &p, &res);
    if (result)
        return result;
    result = pg_rows_read(res, store_read_job, STORE_ROWS(out, store_free_job));
    for (int r = 0; result == 0 && more_due && r < PQntuples(res); r++)
        *more_due |= strcmp(PQgetvalue(res, r, PQnfields(res) - 1), "t") == 0;
    if (result == 0)
        claim_held_after(lim, locked, res);
    PQclear(res);
    return result;
}

/* ---- slots for a fan-out --------------------------------------------------------- */

/* The capped endpoints without a backlog, locked if free (true), and the rest (true: uncapped, false). */
/* Rate-limited, paused or ramping endpoints take their leases through the claims, which keep those limits. */
#define HELD_BY_STATE(c, now, ramp)                                                                            \
    c ".rate_limit > 0 OR EXISTS (SELECT 1 FROM hookd_endpoint_state s WHERE s.endpoint_id = " c ".id"         \
    " AND (s.breaker <> 'closed' OR s.closed_at > " now " - " ramp "))"
#define SLOTS_LOCK_SQL                                                                                         \
    "SELECT k.i, CASE WHEN " HELD_BY_STATE("c", "$3", "$4") " THEN false"                                      \
    "  WHEN c.cap <= 0 THEN true"                                                                              \
    /* A backlog means no slots anyway: its claims must not find the endpoint locked. */                       \
    "  WHEN " BACKLOG_OF("c.id", "$3") " THEN false"                                                           \
    "  ELSE pg_try_advisory_xact_lock(" CLAIM_LOCK_CLASS ", hashtext(c.id)) END"                              \
    " FROM unnest($1::text[]) WITH ORDINALITY AS k(id, i)"                                                    \
    " JOIN LATERAL (SELECT e.id, e.rate_limit, CASE WHEN e.max_in_flight > 0 THEN e.max_in_flight"            \
    "  WHEN $2 > 0 THEN $2 ELSE 0 END AS cap FROM hookd_endpoints e WHERE e.id = k.id AND e.enabled) c ON true"
/* The server's clock in milliseconds, as hookd_inflight.made_at's default reads it (schema 35). */
#define SERVER_NOW_MS "(extract(epoch FROM statement_timestamp()) * 1000)::bigint"
/*
 * Each endpoint's free slots: -1 uncapped, 0 with a backlog, else its cap
 * minus every node's leases (but lim->own's); then whether its slots turn
 * over (lease_limits.turning), from the same walk of its live leases: one
 * of them made within TURNING_MS by the server's clock, or fewer leases than
 * its cap (a backlog's free slots are the claims' to take at once; claims
 * come in bursts, so a backlog being drained is often without a lease for a
 * moment). A hung endpoint's cap is full of old leases. One the claims hold
 * for its state (a rate, the breaker, a ramp) never turns over for the
 * fan-out, which does not lease it. TURNING_MS is longer than the
 * dispatcher's 100 ms of "answering": a lease follows its predecessor's end
 * only after that result's commit and the next claim or fan-out, which on a
 * loaded machine took up to 160 ms (3 nodes beside a benchmark). And only
 * while another node holds some of its leases (or none holds any): a node
 * whose own leases are all there is knows from its dispatcher whether they
 * answer, and a hung endpoint's leases, made again after each round of
 * timeouts, must not look like answers to it (t2130).
 */
#define TURNING_MS "250"
#define SLOTS_COUNT_SQL                                                                                        \
    "SELECT k.i, CASE WHEN c.held THEN 0"                                                                      \
    "  WHEN c.cap <= 0 THEN -1"                                                                                \
    "  WHEN " BACKLOG_OF("c.id", "$3") " THEN 0"                                                               \
    "  ELSE greatest(c.cap - l.others, 0) END,"                                                                \
    " NOT c.held AND c.cap > 0 AND (l.others > 0 OR l.leases = 0)"                                            \
    " AND (l.leases < c.cap OR l.made >= " SERVER_NOW_MS " - " TURNING_MS ")"                                 \
    " FROM unnest($1::text[]) WITH ORDINALITY AS k(id, i)"                                                    \
    " JOIN LATERAL (SELECT e.id, (" HELD_BY_STATE("e", "$3", "$4") ") AS held,"                                \
    "  CASE WHEN e.max_in_flight > 0 THEN e.max_in_flight"                                                     \
    "  WHEN $2 > 0 THEN $2 ELSE 0 END AS cap FROM hookd_endpoints e WHERE e.id = k.id AND e.enabled) c ON true" \
    " CROSS JOIN LATERAL (SELECT count(*)::int AS leases,"                                                     \
    "  count(*) FILTER (WHERE x.owner IS DISTINCT FROM $5::text)::int AS others,"                               \
    "  max(x.made_at) AS made FROM hookd_inflight x WHERE x.endpoint_id = c.id AND x.lease_until >= $3) l"

/*
 * Two statements in one round trip, as in a claim: first the locks of the capped endpoints
 * without a backlog (tried only: one another node holds gets no slots now),
 * then, in a snapshot taken after them, each endpoint's free slots and
 * whether its leases turn over. Results come by position (WITH ORDINALITY),
 * so unknown and disabled ids keep 0 (and false).
 */
static int postgres_delivery_slots(struct store *s, int64_t now, const struct lease_limits *lim,
                                   const char *const *endpoint_ids, size_t n, int *slots)
{
    int default_cap = lim->default_cap; /* lease_max is for single-node stores: here the leases are the cap */
    struct pg_array ids = {0};
    struct pg_params p = {.n = 0};
    PGresult *res[2] = {NULL, NULL};
    const char *literal;
    int result;

    for (size_t i = 0; i < n; i++) {
        slots[i] = 0;
        if (lim->turning != NULL)
            lim->turning[i] = false;
    }
    if (n == 0)
        return 0;
    literal = pg_array_texts(&ids, endpoint_ids, n);
    if (!literal) {
        pg_array_free(&ids);
        return HOOKD_ENOMEM;
    }
    result = pg_atomic_begin(s);
    if (result) {
        pg_array_free(&ids);
        return result;
    }
    pg_param_text_array(&p, 1, literal);
    pg_param_int(&p, 2, default_cap);
    pg_param_i64(&p, 3, now);
    pg_param_i64(&p, 4, lim->ramp_ms);
    struct pg_params count = p;
    pg_param_text(&count, 5, lim->own);
    /* Both in one round trip; the second's snapshot is taken after the first has run. */
    result = pg_run_many(s, (const struct pg_stmt[]){{PG_DELIVERY_SLOTS_LOCK, SLOTS_LOCK_SQL, &p},
                                                     {PG_DELIVERY_SLOTS, SLOTS_COUNT_SQL, &count}},
                         2, res);
    if (result == 0) {
        /* Locked (or uncapped) ones are ours to count; the rest keep 0. */
        for (int r = 0; r < PQntuples(res[0]); r++) {
            int64_t i = pg_col_i64(res[0], r, 0);
            if (i >= 1 && (size_t)i <= n && strcmp(PQgetvalue(res[0], r, 1), "t") == 0)
                slots[i - 1] = -1;
        }
        for (int r = 0; r < PQntuples(res[1]); r++) {
            int64_t i = pg_col_i64(res[1], r, 0), v = pg_col_i64(res[1], r, 1);
            if (i < 1 || (size_t)i > n)
                continue;
            if (slots[i - 1] == -1)
                slots[i - 1] = v < 0 ? STORE_SLOTS_UNCAPPED : (int)v;
            /* Locked or not: an endpoint another node is deciding for right now turns over all the same. */
            if (lim->turning != NULL)
                lim->turning[i - 1] = strcmp(PQgetvalue(res[1], r, 2), "t") == 0;
        }
        for (size_t i = 0; i < n; i++)
            slots[i] = slots[i] < 0 ? 0 : slots[i]; /* locked, then gone or disabled meanwhile */
    }
    PQclear(res[0]);
    PQclear(res[1]);
    pg_array_free(&ids);
    result = pg_atomic_end(s, result);
    for (size_t i = 0; result != 0 && i < n; i++) {
        slots[i] = 0;
        if (lim->turning != NULL)
            lim->turning[i] = false;
    }
    return result;
}

/* Both statements run in one transaction (the caller's, or one of its own), so
 * the endpoint locks last until the new leases are committed. */
/* How often a node's claims look for unrecorded deliveries whose lease ran out (their node is gone). */
#define UNRECORDED_CHECK_MS 1000

/*
 * Writes those deliveries' rows pending (UNRECORDED_WRITE_PENDING), in the
 * claim's transaction, so that the claim can take them at once. A scan of
 * hookd_inflight, which holds only the leases live now (and the dead rows
 * vacuum has not cleared yet): once a second, not per claim.
 */
static int unrecorded_recover(struct store *s, int64_t now)
{
    struct pg_params p = {.n = 0};
    PGresult *res = NULL;
    int result;

    pg_param_i64(&p, 1, now);
    result = pg_run(s, PG_DELIVERY_RECOVER,
                    "WITH" UNRECORDED_WRITE_PENDING("lease_until < $1") " SELECT count(*) FROM uw", &p, &res);
    if (result == 0 && pg_col_i64(res, 0, 0) > 0)
        log_limited(&s->lim, LOG_INFO, "store",
                    "postgres: %" PRId64 " deliveries sent without their record by a node whose lease ran out are due again",
                    pg_col_i64(res, 0, 0));
    PQclear(res);
    return result;
}

static int postgres_delivery_claim_due(struct store *s, const char *node, int64_t now, int64_t lease_until, int limit,
                                       const struct lease_limits *lim, struct job_list *out)
{
    int default_cap = lim->default_cap; /* lease_max is for single-node stores: here the leases are the cap */
    char *candidates = NULL;
    struct claim_locked *locked = malloc(sizeof *locked);
    int result;

    out->items = NULL;
    out->n = 0;
    if (!node || limit <= 0) {
        free(locked);
        return HOOKD_EINVAL;
    }
    limit = store_list_limit(limit);
    if (locked)
        locked->n = 0;
    result = locked ? pg_atomic_begin(s) : HOOKD_ENOMEM;
    if (result) {
        free(locked);
        return result;
    }
    if (now - s->unrecorded_checked_at >= UNRECORDED_CHECK_MS || now < s->unrecorded_checked_at) {
        result = unrecorded_recover(s, now);
        if (result == 0)
            s->unrecorded_checked_at = now;
    }
    if (result == 0)
        result = claim_candidates(s, now, limit, default_cap, lim, &candidates, locked);
    if (result == 0 && candidates)
        result = claim_lease(s, node, now, lease_until, limit, default_cap, lim, candidates, locked, out);
    free(candidates);
    free(locked);
    result = pg_atomic_end(s, result);
    if (result)
        job_list_free(out);
    return result;
}

static int postgres_delivery_next_due(struct store *s, int64_t *at)
{
    struct pg_params p = {.n = 0};
    PGresult *res;
    int result;

    *at = 0;
    pg_param_i64(&p, 1, clock_now_ms());
    result = run_sortless(s, PG_DELIVERY_NEXT_DUE,
                    "SELECT min(CASE WHEN st.breaker IS NULL OR st.breaker = 'closed' THEN f.at"
                    "  WHEN st.breaker = 'open' THEN greatest(f.at, COALESCE(st.next_probe_at, 0))"
                    "  ELSE greatest(f.at, COALESCE(st.probe_until, 0)) END)"
                    " FROM hookd_endpoints e CROSS JOIN LATERAL ("
                    "  SELECT d.next_attempt_at AS at FROM hookd_deliveries d WHERE d.endpoint_id = e.id"
                    "  AND d.status IN " OPEN_STATUSES " AND d.next_attempt_at IS NOT NULL"
                    "  AND (d.lease_owner IS NULL OR d.lease_until < $1)"
                    "  ORDER BY d.next_attempt_at, d.id LIMIT 1) f"
                    " LEFT JOIN hookd_endpoint_state st ON st.endpoint_id = e.id"
                    " WHERE e.enabled",
                    &p, &res);
    if (result)
        return result;
    if (PQntuples(res) > 0 && !pg_col_null(res, 0, 0))
        *at = pg_col_i64(res, 0, 0);
    else
        result = HOOKD_ENOTFOUND;
    PQclear(res);
    return result;
}

/* One statement for every (endpoint, key): the pairs are unnested server-side. */
static int postgres_delivery_supersede(struct store *s, const char *const *endpoint_ids, const char *const *order_keys,
                                       size_t n, int64_t now)
{
    struct pg_array eps = {0}, keys = {0};
    struct pg_params p = {.n = 0};
    PGresult *res = NULL;
    const char *eps_literal, *keys_literal;
    int result;

    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        pg_array_text(&eps, endpoint_ids[i]);
        pg_array_text(&keys, order_keys[i]);
    }
    eps_literal = pg_array_end(&eps);
    keys_literal = pg_array_end(&keys);
    if (!eps_literal || !keys_literal) {
        result = HOOKD_ENOMEM;
        goto out;
    }
    pg_param_text_array(&p, 1, eps_literal);
    pg_param_text_array(&p, 2, keys_literal);
    pg_param_i64(&p, 3, now);
    result = pg_run(s, PG_DELIVERY_SUPERSEDE,
                            "WITH k AS (SELECT DISTINCT * FROM unnest($1::text[], $2::text[]) AS k(endpoint_id, order_key)),"
                            " u AS (UPDATE hookd_deliveries d" STORE_SUPERSEDE_SET " FROM k"
                            "  WHERE" STORE_SUPERSEDE_WHERE("d", "k.endpoint_id", "k.order_key", "$3")
                            "  RETURNING d.id),"
                            " f AS (" INFLIGHT_DROP("u") "),"
                            /* What is left open of each resource no longer waits behind what went (store_common.h). */
                            " wk AS (UPDATE hookd_deliveries d SET next_attempt_at = $3 FROM k"
                            "  WHERE d.endpoint_id = k.endpoint_id AND d.order_key = k.order_key"
                            "  AND" STORE_ORDER_WAKEABLE("d", "$3") " AND d.id <> ALL (ARRAY(SELECT id FROM u)))"
                            " SELECT count(*) FROM u",
                            &p, &res);
    PQclear(res);
out:
    pg_array_free(&eps);
    pg_array_free(&keys);
    return result;
}

/* ---- completion and release -------------------------------------------------- */

/* The columns of a batch of results, one element per valid result; an unrecorded one's row also needs the last four. */
enum { CM_ID, CM_OWNER, CM_TOKEN, CM_STATUS, CM_N, CM_NEXT, CM_CODE, CM_ERROR, CM_STARTED, CM_DURATION,
       CM_CLASS, CM_RESPONSE, CM_NODE, CM_DISABLE, CM_TRUNCATED, CM_COLUMNS,
       CM_EVENT = CM_COLUMNS, CM_ENDPOINT, CM_ACCOUNT, CM_CREATED, CM_ROW_COLUMNS };

static int id_cmp(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* results[i] of the results in set (the others are another statement's) from the ids the statement
 * returned (the deliveries it changed); the rest were fenced out. */
static int complete_many_results(const PGresult *res, const struct delivery_result *rs, size_t n, bool unrecorded,
                                 int *results)
{
    int rows = PQntuples(res);
    const char **done = malloc(((size_t)rows + 1) * sizeof *done);

    if (!done)
        return HOOKD_ENOMEM;
    for (int i = 0; i < rows; i++)
        done[i] = PQgetvalue(res, i, 0);
    qsort(done, (size_t)rows, sizeof *done, id_cmp);
    for (size_t i = 0; i < n; i++) {
        if (results[i] != 0 || (rs[i].unrecorded != NULL) != unrecorded)
            continue; /* invalid (never sent), or not of this set */
        results[i] = bsearch(&rs[i].delivery_id, done, (size_t)rows, sizeof *done, id_cmp) ? 0 : HOOKD_ESTALE;
    }
    free(done);
    return 0;
}

/* The snippet's bytes as hex text in *buf (grown as needed); false without a snippet or memory. */
static bool response_hex(const struct attempt *at, char **buf, size_t *cap)
{
    size_t n;

    if (!at->response)
        return false;
    n = at->response_len ? at->response_len : strlen(at->response);
    if (2 * n + 1 > *cap) {
        char *grown = realloc(*buf, 2 * n + 1);
        if (!grown) {
            free(*buf);
            *buf = NULL;
            *cap = 0;
            return false;
        }
        *buf = grown;
        *cap = 2 * n + 1;
    }
    store_hex_encode(at->response, n, *buf);
    return true;
}

/* Adds r to the columns (with its row's, when unrecorded); HOOKD_ENOMEM when its snippet could not be. */
static int result_columns(struct pg_array *a, const struct delivery_result *r, int64_t now, char **hex, size_t *hex_cap)
{
    const struct attempt *at = &r->attempt;
    bool has_response = response_hex(at, hex, hex_cap);

    pg_array_text(&a[CM_ID], r->delivery_id);
    pg_array_text(&a[CM_OWNER], r->lease_owner);
    pg_array_i64(&a[CM_TOKEN], r->lease_token);
    pg_array_text(&a[CM_STATUS], delivery_status_name(r->status));
    pg_array_i64(&a[CM_N], at->n);
    pg_array_time(&a[CM_NEXT], delivery_status_open(r->status) ? (r->next_attempt_at ? r->next_attempt_at : now) : 0);
    pg_array_time(&a[CM_CODE], at->status_code);
    pg_array_text(&a[CM_ERROR], at->error);
    pg_array_i64(&a[CM_STARTED], at->started_at ? at->started_at : now);
    pg_array_i64(&a[CM_DURATION], at->duration_ms);
    pg_array_text(&a[CM_CLASS], at->error_class);
    pg_array_text(&a[CM_RESPONSE], has_response ? *hex : NULL);
    pg_array_text(&a[CM_NODE], at->node ? at->node : r->lease_owner);
    pg_array_text(&a[CM_DISABLE], r->disable_endpoint_reason);
    pg_array_i64(&a[CM_TRUNCATED], at->response_truncated);
    if (r->unrecorded != NULL) {
        const struct delivery *d = r->unrecorded;
        pg_array_text(&a[CM_EVENT], d->event_id);
        pg_array_text(&a[CM_ENDPOINT], d->endpoint_id);
        pg_array_text(&a[CM_ACCOUNT], d->account);
        pg_array_i64(&a[CM_CREATED], d->created_at > 0 ? d->created_at : now);
    }
    return at->response && !has_response ? HOOKD_ENOMEM : 0;
}

/* The columns as the statement's parameters $1…$ncol, then now ($ncol + 1). */
static int result_params(struct pg_array *a, int ncol, int64_t now, struct pg_params *p)
{
    static const bool number[CM_ROW_COLUMNS] = {[CM_TOKEN] = true, [CM_N] = true, [CM_NEXT] = true,
                                                [CM_CODE] = true, [CM_STARTED] = true, [CM_DURATION] = true,
                                                [CM_TRUNCATED] = true, [CM_CREATED] = true};
    int result = 0;

    for (int c = 0; c < ncol; c++) {
        const char *literal = pg_array_end(&a[c]);
        if (!literal)
            result = HOOKD_ENOMEM;
        else if (number[c])
            pg_param_i64_array(p, c + 1, literal);
        else
            pg_param_text_array(p, c + 1, literal);
    }
    pg_param_i64(p, ncol + 1, now);
    return result;
}

/*
 * One statement for the batch's recorded deliveries (atomic without a
 * transaction of its own): the arrays become rows, the fenced update keeps
 * those whose lease is still theirs, and only those get their attempt row,
 * their lease dropped from hookd_inflight and (410) the endpoint disabled.
 */
static int complete_recorded(struct store *s, struct pg_array *a, int64_t now, const struct delivery_result *rs,
                             size_t n, int *results)
{
    struct pg_params p = {.n = 0};
    PGresult *res = NULL;
    int result = result_params(a, CM_COLUMNS, now, &p);

    pg_param_text(&p, CM_COLUMNS + 2, "pending"); /* WAKEABLE_BY_KEY */
    if (result == 0)
        result = pg_run(s, PG_DELIVERY_COMPLETE_MANY,
                        "WITH r AS (SELECT * FROM unnest($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,"
                        "  $15) AS r(id, owner, token, status, n, next_at, code, error, started, duration, class,"
                        "  response, node, disable, truncated)),"
                        " u AS (UPDATE hookd_deliveries d SET status = r.status, attempt_count = r.n,"
                        "  next_attempt_at = r.next_at, last_status_code = r.code, last_error = r.error,"
                        "  first_attempt_at = COALESCE(d.first_attempt_at, r.started), last_attempt_at = r.started,"
                        "  delivered_at = CASE WHEN r.status = 'delivered' THEN $16 ELSE d.delivered_at END,"
                        "  lease_owner = NULL, lease_until = NULL"
                        "  FROM r WHERE d.id = r.id AND d.lease_owner = r.owner AND d.lease_token = r.token"
                        "  RETURNING d.id, d.endpoint_id, r.n, r.started, r.duration, r.code, r.class, r.error,"
                        "  r.response, r.node, r.disable, r.truncated, d.order_key, d.order_seq, r.status),"
                        /* An ordered delivery that ended wakes the next of its resource (store_common.h). */
                        " nx AS (SELECT (SELECT x.id FROM hookd_deliveries x WHERE x.endpoint_id = u.endpoint_id"
                        "   AND x.order_key = u.order_key AND x.order_seq > u.order_seq AND x.status IN " OPEN_STATUSES
                        "   ORDER BY x.order_seq LIMIT 1) AS id FROM u"
                        "  WHERE u.order_key IS NOT NULL AND u.status NOT IN " OPEN_STATUSES "),"
                        /* By key, not a join (INFLIGHT_DROP says why). */
                        " wk AS (UPDATE hookd_deliveries n SET next_attempt_at = $16"
                        "  WHERE n.id = ANY (ARRAY(SELECT id FROM nx WHERE id IS NOT NULL))"
                        "  AND" WAKEABLE_BY_KEY("n", "$16", "$17") "),"
                        " f AS (" INFLIGHT_DROP("u") "),"
                        " a AS (INSERT INTO hookd_attempts(delivery_id, n, " ATTEMPT_FIELDS("") ")"
                        "  SELECT u.id, u.n, " ATTEMPT_VALUES("u") " FROM u),"
                        " x AS (" ENDPOINT_DISABLE("u", "$16") ")"
                        " SELECT id FROM u",
                        &p, &res);
    if (result == 0)
        result = complete_many_results(res, rs, n, false, results);
    PQclear(res);
    return result;
}

/*
 * The first results of unrecorded deliveries, one statement: a lease still
 * theirs (its hookd_inflight row, found by key, owner and token match) is
 * dropped, and the delivery row is written in the state this attempt left it
 * in, with the attempt in the row itself (attempt1_*: one row a delivery, no
 * hookd_attempts row; n is 1, the first attempt), and a 410's endpoint
 * disabled. A lease that is gone was taken over (its row written pending by
 * another node, or by this one's restart): the result is fenced out, as a
 * completion's would be.
 * Unordered deliveries only, so no resource waits for them.
 */
static int complete_unrecorded(struct store *s, struct pg_array *a, int64_t now, const struct delivery_result *rs,
                               size_t n, int *results)
{
    struct pg_params p = {.n = 0};
    PGresult *res = NULL;
    int result = result_params(a, CM_ROW_COLUMNS, now, &p);

    if (result == 0)
        result = pg_run(s, PG_DELIVERY_RECORD_FIRST,
                        "WITH r AS (SELECT * FROM unnest($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,"
                        "  $15, $16, $17, $18, $19) AS r(id, owner, token, status, n, next_at, code, error, started,"
                        "  duration, class, response, node, disable, truncated, event_id, endpoint_id, account,"
                        "  created_at)),"
                        " x AS (DELETE FROM hookd_inflight i WHERE i.delivery_id = ANY ($1) AND i.event_id IS NOT NULL"
                        "  AND (i.delivery_id, i.owner, i.lease_token) IN (SELECT r.id, r.owner, r.token FROM r)"
                        "  RETURNING i.delivery_id),"
                        /* The attempt goes in the row (attempt1_*, schema 33): no hookd_attempts row. */
                        " u AS (INSERT INTO hookd_deliveries(id, event_id, endpoint_id, account, status, attempt_count,"
                        "  next_attempt_at, last_status_code, last_error, first_attempt_at, last_attempt_at,"
                        "  delivered_at, created_at, lease_token, " ATTEMPT_FIELDS("attempt1_") ")"
                        "  SELECT r.id, r.event_id, r.endpoint_id, r.account, r.status, r.n, r.next_at, r.code, r.error,"
                        "  r.started, r.started, CASE WHEN r.status = 'delivered' THEN $20 END, r.created_at, r.token, "
                        ATTEMPT_VALUES("r") " FROM r WHERE r.id IN (SELECT delivery_id FROM x) ON CONFLICT DO NOTHING"
                        "  RETURNING id),"
                        " e AS (" ENDPOINT_DISABLE("(SELECT endpoint_id, disable FROM r WHERE r.id IN (SELECT id FROM u))",
                                                "$20") ")"
                        " SELECT id FROM u",
                        &p, &res);
    if (result == 0)
        result = complete_many_results(res, rs, n, true, results);
    PQclear(res);
    return result;
}

static int postgres_delivery_complete_many(struct store *s, const struct delivery_result *rs, size_t n, int64_t now,
                                           int *results)
{
    struct pg_array a[CM_COLUMNS] = {{0}}, u[CM_ROW_COLUMNS] = {{0}};
    size_t recorded = 0, unrecorded = 0, hex_cap = 0;
    char *hex = NULL;
    int result = 0;

    for (size_t i = 0; i < n && result == 0; i++) {
        const struct delivery_result *r = &rs[i];
        results[i] = delivery_result_valid(r) ? 0 : HOOKD_EINVAL;
        if (results[i])
            continue;
        if (r->unrecorded != NULL) {
            unrecorded++;
            result = result_columns(u, r, now, &hex, &hex_cap);
        } else {
            recorded++;
            result = result_columns(a, r, now, &hex, &hex_cap);
        }
    }
    free(hex);
    if (result == 0 && recorded > 0)
        result = complete_recorded(s, a, now, rs, n, results);
    if (result == 0 && unrecorded > 0)
        result = complete_unrecorded(s, u, now, rs, n, results);
    for (int c = 0; c < CM_COLUMNS; c++)
        pg_array_free(&a[c]);
    for (int c = 0; c < CM_ROW_COLUMNS; c++)
        pg_array_free(&u[c]);
    return result;
}

/* Fenced: applies only while (lease_owner, lease_token) still match; else
 * ESTALE and nothing changes. The one-result case of complete_many. */
static int postgres_delivery_complete(struct store *s, const struct delivery_result *r, int64_t now)
{
    int one = 0;
    int result = postgres_delivery_complete_many(s, r, 1, now, &one);

    return result ? result : one;
}

static int postgres_delivery_release(struct store *s, const char *id, const char *owner, int64_t token)
{
    struct pg_params p = {.n = 0};
    PGresult *res;
    int result;

    pg_param_text(&p, 1, id);
    pg_param_text(&p, 2, owner);
    pg_param_i64(&p, 3, token);
    /* An unrecorded delivery given back gets its row, pending, so that a claim can send it. */
    result = pg_run(s, PG_DELIVERY_RELEASE,
                    "WITH u AS (UPDATE hookd_deliveries SET lease_owner = NULL, lease_until = NULL"
                    "  WHERE id = $1 AND lease_owner = $2 AND lease_token = $3 RETURNING id),"
                    " f AS (" INFLIGHT_DROP("u") "),"
                    UNRECORDED_WRITE_PENDING("delivery_id = $1 AND owner = $2 AND lease_token = $3")
                    " SELECT (SELECT count(*) FROM u) + (SELECT count(*) FROM ux)",
                    &p, &res);
    if (result)
        return result;
    result = pg_col_i64(res, 0, 0) > 0 ? 0 : HOOKD_ESTALE;
    PQclear(res);
    return result;
}

/* Found through hookd_inflight, which holds every lease (the deliveries have no index on the owner). */
static int postgres_delivery_release_node(struct store *s, const char *node)
{
    struct pg_params p = {.n = 0};

    pg_param_text(&p, 1, node);
    /* Its unrecorded deliveries may have been sent or not: their rows are written pending, to be sent again. */
    return pg_run_command(s, PG_DELIVERY_RELEASE_NODE,
                          "WITH x AS (DELETE FROM hookd_inflight WHERE owner = $1 AND event_id IS NULL"
                          "  RETURNING delivery_id),"
                          UNRECORDED_WRITE_PENDING("owner = $1")
                          " UPDATE hookd_deliveries d SET lease_owner = NULL, lease_until = NULL FROM x"
                          " WHERE d.id = x.delivery_id AND d.lease_owner = $1 AND d.status IN " OPEN_STATUSES,
                          &p, NULL);
}

/*
 * One statement for the batch: the fenced update of lease_until and the same
 * in hookd_inflight, whose lease_until the caps count. lease_until is in no
 * index of hookd_deliveries, so each renewal is a HOT update. Rows locked by
 * another transaction (this node's own result being recorded, another node's
 * claim) are skipped: a renewal never waits, so it never deadlocks with the
 * writer's completions, and the next renewal tries them again.
 */
static int postgres_delivery_renew(struct store *s, const char *node, const char *const *ids, const int64_t *tokens,
                                   size_t n, int64_t lease_until, bool *renewed)
{
    struct pg_array a_ids = {0}, a_tokens = {0};
    struct pg_params p = {.n = 0};
    const char *l_ids, *l_tokens;
    const char **done = NULL;
    PGresult *res = NULL;
    int rows, result = 0;

    for (size_t i = 0; i < n; i++) {
        renewed[i] = false;
        pg_array_text(&a_ids, ids[i]);
        pg_array_i64(&a_tokens, tokens[i]);
    }
    if (n == 0)
        goto out;
    l_ids = pg_array_end(&a_ids);
    l_tokens = pg_array_end(&a_tokens);
    if (!l_ids || !l_tokens) {
        result = HOOKD_ENOMEM;
        goto out;
    }
    pg_param_text(&p, 1, node);
    pg_param_text_array(&p, 2, l_ids);
    pg_param_i64_array(&p, 3, l_tokens);
    pg_param_i64(&p, 4, lease_until);
    result = pg_run(s, PG_DELIVERY_RENEW,
                    "WITH r AS (SELECT * FROM unnest($2, $3) AS r(id, token)),"
                    /* A row another transaction holds is being recorded or taken over: left alone, never waited for. */
                    " k AS (SELECT d.ctid AS tid, d.endpoint_id, d.lease_until AS held FROM r"
                    "  JOIN hookd_deliveries d ON d.id = r.id"
                    "  WHERE d.lease_owner = $1 AND d.lease_token = r.token AND d.status IN " OPEN_STATUSES
                    "  FOR UPDATE OF d SKIP LOCKED),"
                    /*
                     * Probes: a half-open breaker's probe_until is its probe's lease, and moves with it (pm);
                     * a probe whose breaker row is locked right now (never waited for) is not renewed this
                     * time either, so the two stay in step.
                     */
                    " pb AS (SELECT k.tid, k.endpoint_id, k.held FROM k JOIN hookd_endpoint_state st"
                    "  ON st.endpoint_id = k.endpoint_id AND st.breaker = 'half_open' AND st.probe_until = k.held),"
                    " pl AS (SELECT st.endpoint_id FROM hookd_endpoint_state st JOIN pb ON st.endpoint_id = pb.endpoint_id"
                    "  WHERE st.breaker = 'half_open' AND st.probe_until = pb.held FOR UPDATE OF st SKIP LOCKED),"
                    " pm AS (UPDATE hookd_endpoint_state st SET probe_until = $4 FROM pl"
                    "  WHERE st.endpoint_id = pl.endpoint_id AND st.probe_until < $4),"
                    " u AS (UPDATE hookd_deliveries d SET lease_until = $4"
                    "  WHERE d.ctid = ANY (ARRAY(SELECT k.tid FROM k WHERE NOT EXISTS (SELECT 1 FROM pb"
                    "   WHERE pb.tid = k.tid AND NOT EXISTS (SELECT 1 FROM pl WHERE pl.endpoint_id = pb.endpoint_id))))"
                    "  RETURNING d.id, d.endpoint_id, d.lease_owner, d.lease_until),"
                    " i AS (" INFLIGHT_RENEW("u") "),"
                    /* Unrecorded deliveries: their lease is only the hookd_inflight row. */
                    " uk AS (SELECT x.ctid AS tid FROM r JOIN hookd_inflight x ON x.delivery_id = r.id"
                    "  WHERE x.event_id IS NOT NULL AND x.owner = $1 AND x.lease_token = r.token"
                    "  FOR UPDATE OF x SKIP LOCKED),"
                    " uu AS (UPDATE hookd_inflight x SET lease_until = $4 WHERE x.ctid = ANY (ARRAY(SELECT tid FROM uk))"
                    "  RETURNING x.delivery_id)"
                    " SELECT id FROM u UNION ALL SELECT delivery_id FROM uu",
                    &p, &res);
    if (result)
        goto out;
    rows = PQntuples(res);
    done = malloc(((size_t)rows + 1) * sizeof *done);
    if (!done) {
        result = HOOKD_ENOMEM;
        goto out;
    }
    for (int r = 0; r < rows; r++)
        done[r] = PQgetvalue(res, r, 0);
    qsort(done, (size_t)rows, sizeof *done, id_cmp);
    for (size_t i = 0; i < n; i++)
        renewed[i] = bsearch(&ids[i], done, (size_t)rows, sizeof *done, id_cmp) != NULL;
out:
    free(done);
    PQclear(res);
    pg_array_free(&a_ids);
    pg_array_free(&a_tokens);
    return result;
}

/* ---- reads ---------------------------------------------------------------------- */

static int postgres_delivery_get(struct store *s, const char *id, struct delivery *out)
{
    struct pg_params p = {.n = 0};

    pg_param_text(&p, 1, id);
    /* The view: an unrecorded delivery in flight is found too, pending and leased. */
    return pg_get(s, PG_DELIVERY_GET, "SELECT " STORE_DELIVERY_COLUMNS " FROM hookd_deliveries_all d WHERE d.id = $1",
                  &p, store_read_delivery, out);
}

/* One UPDATE with the status predicate: of two replays, or a replay and a claim, only one can win. A
 * final delivery holds no lease, so hookd_inflight has no row of it to clear. */
static int postgres_delivery_replay(struct store *s, const char *id, int64_t now, struct delivery *out)
{
    struct pg_params p = {.n = 0};
    int result;

    pg_param_text(&p, 1, id);
    pg_param_i64(&p, 2, now);
    result = pg_get(s, PG_DELIVERY_REPLAY,
                    "UPDATE hookd_deliveries d SET status = 'pending', attempt_count = 0, next_attempt_at = $2, first_attempt_at = NULL,"
                    " delivered_at = NULL, lease_owner = NULL, lease_until = NULL"
                    " WHERE d.id = $1 AND d.status IN ('dead', 'skipped', 'delivered')"
                    " RETURNING " STORE_DELIVERY_COLUMNS,
                    &p, store_read_delivery, out);
    if (result != HOOKD_ENOTFOUND)
        return result;
    /* Not replayable: absent (ENOTFOUND), or open, i.e. queued or in flight already (ECONFLICT). */
    result = postgres_delivery_get(s, id, out);
    return result == 0 ? HOOKD_ECONFLICT : result;
}

/*
 * hookd_deliveries_status leaves delivered rows out (migration
 * schema_deliveries_status_undelivered): a filter on another status says so
 * in the text, so that the statement's generic plan, made whatever the
 * parameter, can use the index. True when it was added: the statement then
 * has a slot of the *_UNDELIVERED range.
 */
static bool status_undelivered(const struct delivery_filter *f, int mask, struct store_sql *q)
{
    if (!(mask & DL_F_STATUS) || f->status == DELIVERY_DELIVERED)
        return false;
    store_sql_add(q, " AND d.status <> 'delivered'");
    return true;
}

/* Newest first; the created_at range is since <= created_at < until. */
static int postgres_delivery_list(struct store *s, const struct delivery_filter *f, struct delivery_list *out)
{
    char terms[FILTER_SQL_MAX];
    struct store_sql q = {.len = 0};
    struct pg_params p = {.n = 0};
    int mask = delivery_filter_mask(f), slot;

    out->items = NULL;
    out->n = 0;
    if (f->status >= 0 && !delivery_status_valid(f->status))
        return HOOKD_EINVAL;
    store_sql_add(&q, "SELECT " STORE_DELIVERY_COLUMNS " FROM hookd_deliveries_all d WHERE true");
    delivery_filter_sql(mask, '$', terms);
    store_sql_add(&q, terms);
    slot = (status_undelivered(f, mask, &q) ? PG_DELIVERY_LIST_UNDELIVERED : PG_DELIVERY_LIST) + mask;
    store_sql_add(&q, " ORDER BY d.id DESC LIMIT $9");
    pg_param_text(&p, 1, f->event_id);
    pg_param_text(&p, 2, f->endpoint_id);
    pg_param_text(&p, 3, f->account);
    pg_param_text(&p, 4, mask & DL_F_STATUS ? delivery_status_name((enum delivery_status)f->status) : NULL);
    pg_param_i64(&p, 5, f->since);
    pg_param_i64(&p, 6, f->until);
    pg_param_text(&p, 7, mask & DL_F_OWN ? f->account : NULL);
    pg_param_text(&p, 8, f->before_id);
    pg_param_int(&p, 9, store_list_limit(f->limit));
    return pg_list(s, slot, q.text, &p, store_read_delivery, STORE_ROWS(out, store_free_delivery));
}

/* One statement for the batch: the status predicate decides each row, as in replay. */
static int postgres_delivery_replay_many(struct store *s, const char *const *ids, size_t n, unsigned statuses,
                                         int64_t now, bool *replayed)
{
    struct pg_array a = {0}, st = {0};
    struct pg_params p = {.n = 0};
    const char *ids_lit, *st_lit;
    PGresult *res;
    int result;

    for (size_t i = 0; i < n; i++) {
        pg_array_text(&a, ids[i]);
        replayed[i] = false;
    }
    for (int k = DELIVERY_PENDING; k <= DELIVERY_SKIPPED; k++)
        if (statuses & (1u << k))
            pg_array_text(&st, delivery_status_name((enum delivery_status)k));
    ids_lit = pg_array_end(&a);
    st_lit = pg_array_end(&st);
    if (!ids_lit || !st_lit) {
        pg_array_free(&a);
        pg_array_free(&st);
        return HOOKD_ENOMEM;
    }
    pg_param_text_array(&p, 1, ids_lit);
    pg_param_i64(&p, 2, now);
    pg_param_text_array(&p, 3, st_lit);
    result = pg_run(s, PG_DELIVERY_REPLAY_MANY,
                    "UPDATE hookd_deliveries d SET status = 'pending', attempt_count = 0, next_attempt_at = $2,"
                    " first_attempt_at = NULL, delivered_at = NULL, lease_owner = NULL, lease_until = NULL"
                    " WHERE d.id = ANY($1::text[]) AND d.status = ANY($3::text[]) RETURNING d.id",
                    &p, &res);
    pg_array_free(&a);
    pg_array_free(&st);
    if (result)
        return result;
    /* Back to the caller's order: at most STORE_LIST_MAX ids, so the scan stays small. */
    for (int r = 0; r < PQntuples(res); r++) {
        const char *id = PQgetvalue(res, r, 0);
        for (size_t i = 0; i < n; i++) {
            if (!replayed[i] && strcmp(ids[i], id) == 0) {
                replayed[i] = true;
                break;
            }
        }
    }
    PQclear(res);
    return 0;
}

static int postgres_delivery_count(struct store *s, const struct delivery_filter *f, int64_t *n)
{
    char terms[FILTER_SQL_MAX];
    struct store_sql q = {.len = 0};
    struct pg_params p = {.n = 0};
    PGresult *res;
    int mask = delivery_filter_mask(f) & ~DL_F_BEFORE, result, slot;

    *n = 0;
    if (f->status >= 0 && !delivery_status_valid(f->status))
        return HOOKD_EINVAL;
    store_sql_add(&q, "SELECT count(*) FROM hookd_deliveries_all d WHERE true");
    delivery_filter_sql(mask, '$', terms);
    store_sql_add(&q, terms);
    slot = (status_undelivered(f, mask, &q) ? PG_DELIVERY_COUNT_UNDELIVERED : PG_DELIVERY_COUNT) + mask;
    pg_param_text(&p, 1, f->event_id);
    pg_param_text(&p, 2, f->endpoint_id);
    pg_param_text(&p, 3, f->account);
    pg_param_text(&p, 4, mask & DL_F_STATUS ? delivery_status_name((enum delivery_status)f->status) : NULL);
    pg_param_i64(&p, 5, f->since);
    pg_param_i64(&p, 6, f->until);
    pg_param_text(&p, 7, mask & DL_F_OWN ? f->account : NULL);
    result = pg_run(s, slot, q.text, &p, &res);
    if (result)
        return result;
    if (PQntuples(res) > 0)
        *n = pg_col_i64(res, 0, 0);
    PQclear(res);
    return 0;
}

/* Through the view: a first attempt kept in its delivery row (id 0) comes first, then the rows in order. */
static int postgres_attempt_list(struct store *s, const char *delivery_id, struct attempt_list *out)
{
    struct pg_params p = {.n = 0};

    pg_param_text(&p, 1, delivery_id);
    return pg_list(s, PG_ATTEMPT_LIST,
                   "SELECT " STORE_ATTEMPT_COLUMNS_WITH(STORE_ATTEMPT_POSTGRES_RESPONSE)
                   " FROM hookd_attempts_all WHERE delivery_id = $1 ORDER BY id", &p,
                   store_read_attempt, STORE_ROWS(out, store_free_attempt));
}

const struct store_delivery_ops postgres_delivery_ops = {
    .insert = postgres_delivery_insert,
    .insert_many = postgres_delivery_insert_many,
    .claim_due = postgres_delivery_claim_due,
    .slots = postgres_delivery_slots,
    .next_due = postgres_delivery_next_due,
    .supersede = postgres_delivery_supersede,
    .complete = postgres_delivery_complete,
    .complete_many = postgres_delivery_complete_many,
    .release = postgres_delivery_release,
    .release_node = postgres_delivery_release_node,
    .renew = postgres_delivery_renew,
    .get = postgres_delivery_get,
    .replay = postgres_delivery_replay,
    .count = postgres_delivery_count,
    .replay_many = postgres_delivery_replay_many,
    .list = postgres_delivery_list,
    .attempt_list = postgres_attempt_list,
};
