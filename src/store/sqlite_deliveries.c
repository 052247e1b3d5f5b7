/*
 * SQLite backend, deliveries and attempts: inserts from fan-out, leased
 * claims with fencing tokens, fenced completion (the delivery's new state and
 * its attempt row in one unit), lease release, and the read side.
 */
#include "store/sqlite_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"

/* Statement slots, in this family's range (sqlite_internal.h). */
enum {
    SQ_DELIVERY_INSERT = SQ_DELIVERIES,
    SQ_DELIVERY_CLAIM_ENDPOINTS,
    SQ_DELIVERY_CLAIM_STATE,
    SQ_DELIVERY_DUE_OF_ENDPOINT,
    SQ_DELIVERY_JOB,
    SQ_DELIVERY_LEASE,
    SQ_DELIVERY_NEXT_DUE,
    SQ_DELIVERY_SUPERSEDE,
    SQ_DELIVERY_SLOTS,
    SQ_DELIVERY_COMPLETE,
    SQ_ATTEMPT_INSERT,
    SQ_DELIVERY_DISABLE_ENDPOINT,
    SQ_DELIVERY_RELEASE,
    SQ_DELIVERY_RELEASE_NODE,
    SQ_DELIVERY_RENEW,
    SQ_DELIVERY_RENEW_PROBE,
    SQ_DELIVERY_ORDER_DEFER,
    SQ_DELIVERY_ORDER_WAKE_NEXT,
    SQ_DELIVERY_ORDER_WAKE_KEY,
    SQ_DELIVERY_GET,
    SQ_DELIVERY_REPLAY,
    SQ_ATTEMPT_LIST,
    SQ_DELIVERY_LIST,
    SQ_DELIVERY_LIST_LAST = SQ_DELIVERY_LIST + DL_F_COMBINATIONS - 1,
    SQ_DELIVERY_REPLAY_MANY,
    SQ_DELIVERY_COUNT, /* one per filter combination without the cursor */
    SQ_DELIVERY_COUNT_LAST = SQ_DELIVERY_COUNT + DL_F_BEFORE - 1,
    SQ_DELIVERY_COMPLETE_ORDERED,
    SQ_DELIVERIES_END
};
_Static_assert((int)SQ_DELIVERIES_END <= (int)SQ_ENDPOINT_STATE, "the deliveries statements overflow their slots");

#define ATTEMPT_LIST_MAX 10000 /* bound of one delivery's attempt list */
#define CLAIM_ENDPOINTS_MAX 1000000 /* bound of the claim's endpoint loop */
#define TOKENS_AHEAD_MAX_MS STORE_TOKENS_AHEAD_MAX_MS

static int sqlite_delivery_insert(struct store *s, const struct delivery *d)
{
    struct store_value v[STORE_DELIVERY_NVALUES];
    sqlite3_stmt *st;
    int changes = 0, result;

    if (!delivery_insertable(d))
        return HOOKD_EINVAL;
    result = sq_stmt(s, SQ_DELIVERY_INSERT,
                     "INSERT INTO hookd_deliveries(" STORE_DELIVERY_INSERT_COLUMNS ")"
                     " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)"
                     " ON CONFLICT DO NOTHING",
                     &st);
    if (result)
        return result;
    store_delivery_values(d, clock_now_ms(), v);
    sq_bind_values(st, v, STORE_DELIVERY_NVALUES);
    result = sq_run(s, st, &changes);
    return result == 0 && changes == 0 ? HOOKD_EEXISTS : result;
}

/* One prepared statement per row: SQLite runs in-process, so a row costs no round trip. */
static int sqlite_delivery_insert_many(struct store *s, const struct delivery *ds, size_t n)
{
    int result = 0;

    for (size_t i = 0; i < n; i++) {
        if (!delivery_insertable(&ds[i]))
            return HOOKD_EINVAL;
    }
    result = sq_atomic_begin(s);
    if (result)
        return result;
    for (size_t i = 0; i < n && result == 0; i++) {
        result = sqlite_delivery_insert(s, &ds[i]);
        if (result == HOOKD_EEXISTS)
            result = 0;
    }
    return sq_atomic_end(s, result);
}

/*
 * Leases the selected rows: lease_token + 1 is the new fencing token. The
 * rows were read in this transaction, so their token is known; the update
 * names it rather than returning it (SQLite runs RETURNING as a trigger, with
 * a statement journal of every page the update writes).
 */
static int jobs_lease(struct store *s, const char *node, int64_t lease_until, struct job_list *jobs)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_DELIVERY_LEASE,
                         "UPDATE hookd_deliveries SET lease_owner = ?1, lease_until = ?2,"
                         " lease_token = ?4 + 1 WHERE id = ?3 AND lease_token = ?4",
                         &st);

    for (size_t i = 0; i < jobs->n && result == 0; i++) {
        struct delivery *d = &jobs->items[i].d;
        char *owner = strdup(node);
        int changes = 0;
        if (!owner) {
            result = HOOKD_ENOMEM;
            break;
        }
        free(d->lease_owner);
        d->lease_owner = owner;
        d->lease_until = lease_until;
        sq_bind_text(st, 1, node);
        sqlite3_bind_int64(st, 2, lease_until);
        sq_bind_text(st, 3, d->id);
        sqlite3_bind_int64(st, 4, d->lease_token);
        result = sq_run(s, st, &changes);
        if (result == 0 && changes > 0)
            d->lease_token++;
    }
    return result;
}

/*
 * A claim takes, of every enabled endpoint with due rows, at most its free
 * slots (cap minus its live leases), and of all those the limit earliest.
 * The endpoints are visited in the order of their earliest due row, keeping
 * the best limit rows so far: an endpoint only contributes rows no later than
 * the current worst of them, and once an endpoint's first row is later than
 * that, so are all the following endpoints'. A full endpoint's backlog is
 * never read, and each endpoint costs one index probe.
 */
struct pick {
    int64_t at;
    char id[HOOKD_ID_MAX];
};

struct claim_endpoint {
    char id[HOOKD_ID_MAX];
    int free;         /* deliveries it may still lease; INT_MAX: no limit (claim_endpoint_limit) */
    int64_t first_at; /* its earliest due, unleased delivery */
    bool probe;       /* its breaker is open: what it leases is the probe (half_open) */
    int rate;         /* rate_limit, per second; 0: none */
    int64_t tokens;   /* rate: its bucket now, in milli-tokens */
    /* As read. */
    int64_t cap, leases, closed_at, probe_at, tokens_milli, tokens_at;
    enum breaker_state breaker;
};

/* The best rows so far, sorted, at most limit of them (scratch: merge space). */
struct picks {
    struct pick *items, *scratch;
    size_t n, limit;
};

static bool pick_before(const struct pick *x, const struct pick *y)
{
    return x->at != y->at ? x->at < y->at : strcmp(x->id, y->id) < 0;
}

struct claim_endpoint_list {
    struct claim_endpoint *items;
    size_t n;
};

/* A row of claim_endpoints: id, cap, leases, first_at, rate_limit, then its state. */
static int claim_endpoint_read(const struct store_row *r, void *item)
{
    struct claim_endpoint *ep = item;

    store_row_id(r, 0, ep->id);
    ep->cap = r->ops->i64(r, 1);
    ep->leases = r->ops->i64(r, 2);
    ep->first_at = r->ops->i64(r, 3);
    ep->rate = (int)r->ops->i64(r, 4);
    if (r->ops->null(r, 5) || breaker_parse(r->ops->text(r, 5), &ep->breaker) != 0)
        ep->breaker = BREAKER_CLOSED;
    ep->probe_at = ep->breaker == BREAKER_OPEN ? r->ops->i64(r, 6) : r->ops->i64(r, 7);
    ep->closed_at = r->ops->i64(r, 8);
    ep->tokens_milli = r->ops->i64(r, 9);
    ep->tokens_at = r->ops->i64(r, 10);
    return 0;
}

static int min_int(int a, int64_t b) { return b < a ? (int)(b < 0 ? 0 : b) : a; }

/*
 * What an endpoint may lease now: its lease limit less its leases; while its
 * breaker is open, one probe once next_probe_at has come (or, half open, once
 * the last probe's lease ran out); while it ramps up after closing, a cap that
 * grows from 1 to its own over lim->ramp_ms; with a rate limit, the whole
 * tokens in its bucket (burst: rate_limit).
 */
static void claim_endpoint_limit(struct claim_endpoint *ep, const struct lease_limits *lim, int64_t now)
{
    ep->free = INT_MAX;
    if (ep->cap > 0) {
        int64_t most = lim->lease_max;
        for (size_t i = 0; i < lim->n_capped && most > 0; i++) {
            if (strcmp(lim->capped[i], ep->id) == 0)
                most = 0;
        }
        ep->free = min_int(ep->free, (most > ep->cap ? most : ep->cap) - ep->leases);
    }
    if (ep->breaker != BREAKER_CLOSED) {
        ep->probe = ep->probe_at <= now;
        ep->free = ep->probe ? min_int(ep->free, 1) : 0;
    } else if (ep->cap > 0 && lim->ramp_ms > 0 && ep->closed_at > now - lim->ramp_ms) {
        /* A closed_at ahead of this clock (another node's, or SQL's) ramps from 1, never overflows. */
        int64_t since = ep->closed_at < now ? now - ep->closed_at : 0;
        int64_t ramp = (ep->cap * since + lim->ramp_ms - 1) / lim->ramp_ms;
        ep->free = min_int(ep->free, (ramp < 1 ? 1 : ramp) - ep->leases);
    }
    if (ep->rate > 0) {
        int64_t burst = (int64_t)ep->rate * 1000;
        /*
         * The bucket as stored is held within [0, burst] and the time since its update within
         * [0, 1000 s], so a row written by SQL or by a clock ahead of ours (another node's)
         * neither overflows nor leases beyond the burst; one from more than TOKENS_AHEAD_MAX_MS
         * ahead is not believed (full, as new), or the endpoint would wait for that time.
         */
        int64_t milli = ep->tokens_milli < 0 ? 0 : ep->tokens_milli > burst ? burst : ep->tokens_milli;
        int64_t since = ep->tokens_at >= now ? 0 : ep->tokens_at < now - 1000000 ? 1000000 : now - ep->tokens_at;
        bool believed = ep->tokens_at > 0 && ep->tokens_at <= now + TOKENS_AHEAD_MAX_MS;
        ep->tokens = believed ? milli + since * ep->rate : burst;
        if (ep->tokens > burst)
            ep->tokens = burst;
        ep->free = min_int(ep->free, ep->tokens / 1000);
    }
}

/*
 * An endpoint's earliest due row that holds no lease: the first entry of the
 * claims' index at or before now (leased rows are not in it), and of the rows
 * whose lease ran out (few; through the leases' index, lease_until < now).
 */
#define SQ_FIRST_UNLEASED(endpoint, now)                                                                     \
    "(SELECT d.next_attempt_at FROM hookd_deliveries d INDEXED BY hookd_deliveries_endpoint_due"            \
    " WHERE d.endpoint_id = " endpoint " AND d.status IN ('pending', 'retrying') AND d.lease_owner IS NULL"  \
    " AND d.next_attempt_at <= " now " ORDER BY d.next_attempt_at LIMIT 1)"
#define SQ_FIRST_EXPIRED(endpoint, now)                                                                      \
    "(SELECT min(x.next_attempt_at) FROM hookd_deliveries x INDEXED BY hookd_deliveries_leased"             \
    " WHERE x.endpoint_id = " endpoint " AND x.lease_owner IS NOT NULL AND x.lease_until < " now            \
    " AND x.status IN ('pending', 'retrying') AND x.next_attempt_at <= " now ")"

/* Enabled endpoints with a due, unleased delivery, earliest first, each with what it may lease now. */
static int claim_endpoints(struct store *s, int64_t now, const struct lease_limits *lim,
                           struct claim_endpoint_list *out)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_DELIVERY_CLAIM_ENDPOINTS,
                             "WITH c AS MATERIALIZED (SELECT e.id, e.rate_limit, CASE WHEN e.max_in_flight > 0"
                             "  THEN e.max_in_flight WHEN ?2 > 0 THEN ?2 ELSE 0 END AS cap, " SQ_FIRST_UNLEASED("e.id", "?1")
                             "  AS a, " SQ_FIRST_EXPIRED("e.id", "?1") " AS b FROM hookd_endpoints e WHERE e.enabled)"
                             " SELECT c.id, c.cap, CASE WHEN c.cap > 0 THEN (SELECT count(*)"
                             "  FROM hookd_deliveries x INDEXED BY hookd_deliveries_leased"
                             "  WHERE x.endpoint_id = c.id AND x.lease_owner IS NOT NULL AND x.lease_until >= ?1) END,"
                             " min(COALESCE(c.a, c.b), COALESCE(c.b, c.a)) AS first_at, c.rate_limit, s.breaker,"
                             " s.next_probe_at, s.probe_until, s.closed_at, s.tokens_milli, s.tokens_at"
                             " FROM c LEFT JOIN hookd_endpoint_state s ON s.endpoint_id = c.id"
                             " WHERE c.a IS NOT NULL OR c.b IS NOT NULL ORDER BY first_at",
                             &st);

    out->items = NULL;
    out->n = 0;
    if (result)
        return result;
    sqlite3_bind_int64(st, 1, now);
    sqlite3_bind_int(st, 2, lim->default_cap);
    result = sq_rows_read(s, st, CLAIM_ENDPOINTS_MAX, claim_endpoint_read, STORE_ROWS(out, NULL));
    for (size_t i = 0; i < out->n && result == 0; i++)
        claim_endpoint_limit(&out->items[i], lim, now);
    return result;
}

/* Merges rows (sorted) into the best limit so far. */
static void picks_merge(struct picks *p, const struct pick *rows, size_t n_rows)
{
    size_t i = 0, k = 0, n = 0;

    while (n < p->limit && (i < p->n || k < n_rows)) {
        bool take_row = k < n_rows && (i == p->n || pick_before(&rows[k], &p->items[i]));
        p->scratch[n++] = take_row ? rows[k++] : p->items[i++];
    }
    memcpy(p->items, p->scratch, n * sizeof *p->items);
    p->n = n;
}

/* Moves a blocked row behind its resource's head (store_common.h, STORE_ORDER_HEAD_READY). */
static int order_defer(struct store *s, const char *id, int64_t at)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_DELIVERY_ORDER_DEFER,
                         "UPDATE hookd_deliveries SET next_attempt_at = ?2 WHERE id = ?1 AND next_attempt_at < ?2"
                         " AND status IN ('pending', 'retrying')",
                         &st);

    if (result)
        return result;
    sq_bind_text(st, 1, id);
    sqlite3_bind_int64(st, 2, at);
    return sq_run(s, st, NULL);
}

/*
 * Reads one endpoint's earliest due, unleased rows no later than until (at
 * most max) into rows, walking past at most STORE_ORDER_WALK_MAX rows blocked
 * behind an older open delivery of their resource; those it met are moved
 * behind their heads.
 */
static int endpoint_picks(struct store *s, const char *endpoint_id, int64_t now, int64_t until, int max,
                          struct pick *rows, size_t *n)
{
    struct pick blocked[STORE_ORDER_WALK_MAX];
    size_t n_blocked = 0;
    sqlite3_stmt *st;
    int rc, result = sq_stmt(s, SQ_DELIVERY_DUE_OF_ENDPOINT,
                             "SELECT d.id, d.next_attempt_at, " STORE_ORDER_HEAD_READY("d", "max", "min", "?2")
                             " FROM hookd_deliveries d"
                             " INDEXED BY hookd_deliveries_endpoint_due JOIN hookd_outbox o ON o.id = d.event_id"
                             " WHERE d.endpoint_id = ?1 AND d.status IN ('pending', 'retrying') AND d.lease_owner IS NULL"
                             " AND d.next_attempt_at <= ?3"
                             " UNION ALL SELECT d.id, d.next_attempt_at, " STORE_ORDER_HEAD_READY("d", "max", "min", "?2")
                             " FROM hookd_deliveries d"
                             " INDEXED BY hookd_deliveries_leased JOIN hookd_outbox o ON o.id = d.event_id"
                             " WHERE d.endpoint_id = ?1 AND d.lease_owner IS NOT NULL AND d.lease_until < ?2"
                             " AND d.status IN ('pending', 'retrying') AND d.next_attempt_at <= ?3"
                             " ORDER BY 2, 1 LIMIT ?4",
                             &st);

    *n = 0;
    if (result)
        return result;
    sq_bind_text(st, 1, endpoint_id);
    sqlite3_bind_int64(st, 2, now);
    sqlite3_bind_int64(st, 3, until);
    sqlite3_bind_int(st, 4, max + STORE_ORDER_WALK_MAX);
    while (*n < (size_t)max) {
        rc = sqlite3_step(st);
        if (rc != SQLITE_ROW) {
            result = rc == SQLITE_DONE ? 0 : sq_error(s, rc);
            break;
        }
        if (sqlite3_column_type(st, 2) == SQLITE_NULL) {
            sq_col_id(st, 0, rows[*n].id);
            rows[(*n)++].at = sq_col_i64(st, 1);
        } else if (n_blocked < STORE_ORDER_WALK_MAX) {
            sq_col_id(st, 0, blocked[n_blocked].id);
            blocked[n_blocked++].at = sq_col_i64(st, 2) + 1;
        } else {
            break; /* the walk's bound: the next claim goes on behind the rows moved now */
        }
    }
    sq_reset(st);
    for (size_t i = 0; i < n_blocked && result == 0; i++)
        result = order_defer(s, blocked[i].id, blocked[i].at);
    return result;
}

/* The claim's choice, sorted, into p (limit rows at most). */
static int claim_pick(struct store *s, int64_t now, const struct lease_limits *lim, struct picks *p,
                      struct claim_endpoint_list *out_eps)
{
    struct claim_endpoint_list eps = {NULL, 0};
    struct pick *rows = malloc(p->limit * sizeof *rows);
    size_t n_rows;
    int result = rows ? claim_endpoints(s, now, lim, &eps) : HOOKD_ENOMEM;

    for (size_t i = 0; i < eps.n && result == 0; i++) {
        const struct claim_endpoint *ep = &eps.items[i];
        bool full = p->n == p->limit;
        int64_t until = full ? p->items[p->n - 1].at : now;
        if (full && ep->first_at > until)
            break; /* this endpoint and every later one start after the worst pick */
        if (ep->free <= 0) {
            lease_limits_held(lim, ep->id);
            continue;
        }
        result = endpoint_picks(s, ep->id, now, until, ep->free < (int)p->limit ? ep->free : (int)p->limit, rows,
                                &n_rows);
        if (result == 0 && n_rows >= (size_t)ep->free) {
            lease_limits_held(lim, ep->id); /* it took what it may: more may be due */
            if (lim->more_due)
                *lim->more_due = true; /* the caller need not ask next_due, which walks every endpoint again */
        }
        if (result == 0)
            picks_merge(p, rows, n_rows);
    }
    *out_eps = eps;
    free(rows);
    return result;
}

/*
 * After the leases: endpoints whose breaker was open now have their probe out
 * (half_open until its lease ends), and rate-limited ones spent a token per
 * delivery leased.
 */
static int claim_state_update(struct store *s, const struct claim_endpoint_list *eps, const struct job_list *jobs,
                              int64_t now, int64_t lease_until)
{
    sqlite3_stmt *st;
    int result = 0;

    for (size_t i = 0; i < eps->n && result == 0; i++) {
        const struct claim_endpoint *ep = &eps->items[i];
        int64_t k = 0;
        if (!ep->probe && ep->rate <= 0)
            continue;
        for (size_t j = 0; j < jobs->n; j++)
            k += strcmp(jobs->items[j].d.endpoint_id, ep->id) == 0;
        if (k == 0)
            continue;
        result = sq_stmt(s, SQ_DELIVERY_CLAIM_STATE,
                         "INSERT INTO hookd_endpoint_state(endpoint_id, breaker, probe_until, tokens_milli, tokens_at)"
                         " VALUES (?1, CASE WHEN ?2 THEN 'half_open' ELSE 'closed' END, ?3, ?4, ?5)"
                         " ON CONFLICT (endpoint_id) DO UPDATE SET"
                         " breaker = CASE WHEN ?2 THEN 'half_open' ELSE breaker END,"
                         " probe_until = CASE WHEN ?2 THEN ?3 ELSE probe_until END,"
                         " tokens_milli = COALESCE(?4, tokens_milli), tokens_at = COALESCE(?5, tokens_at)",
                         &st);
        if (result)
            break;
        sq_bind_text(st, 1, ep->id);
        sqlite3_bind_int(st, 2, ep->probe);
        if (ep->probe)
            sqlite3_bind_int64(st, 3, lease_until);
        if (ep->rate > 0) {
            sqlite3_bind_int64(st, 4, ep->tokens - k * 1000);
            sqlite3_bind_int64(st, 5, now);
        }
        result = sq_run(s, st, NULL);
    }
    return result;
}

/* Reads the picked deliveries with their events into out (in pick order). */
static int jobs_read(struct store *s, const struct picks *p, struct job_list *out)
{
    struct store_rows rows = STORE_ROWS(out, store_free_job);
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_DELIVERY_JOB,
                         "SELECT " STORE_JOB_COLUMNS " FROM hookd_deliveries d"
                         " JOIN hookd_outbox o ON o.id = d.event_id WHERE d.id = ?1",
                         &st);

    store_rows_start(&rows);
    for (size_t i = 0; i < p->n && result == 0; i++) {
        void *job = store_rows_slot(&rows);
        if (!job) {
            result = HOOKD_ENOMEM;
            break;
        }
        sq_bind_text(st, 1, p->items[i].id);
        result = sq_row_read(s, st, store_read_job, job);
        if (result == 0)
            store_rows_keep(&rows);
        else if (result == HOOKD_ENOTFOUND)
            result = 0;
    }
    if (result)
        store_rows_free(&rows);
    return result;
}

/* SQLite has one writer at a time, so counting leases and leasing need no
 * further locking: the claim is one atomic unit. */
static int sqlite_delivery_claim_due(struct store *s, const char *node, int64_t now, int64_t lease_until, int limit,
                                     const struct lease_limits *lim, struct job_list *out)
{
    struct picks p = {.limit = limit > STORE_LIST_MAX ? STORE_LIST_MAX : limit > 0 ? (size_t)limit : 0};
    struct claim_endpoint_list eps = {NULL, 0};
    int result;

    out->items = NULL;
    out->n = 0;
    if (!node || limit <= 0)
        return HOOKD_EINVAL;
    p.items = malloc(p.limit * sizeof *p.items);
    p.scratch = malloc(p.limit * sizeof *p.scratch);
    result = p.items && p.scratch ? sq_atomic_begin(s) : HOOKD_ENOMEM;
    if (result == 0) {
        result = claim_pick(s, now, lim, &p, &eps);
        if (result == 0)
            result = jobs_read(s, &p, out);
        if (result == 0)
            result = jobs_lease(s, node, lease_until, out);
        if (result == 0)
            result = claim_state_update(s, &eps, out, now, lease_until);
        result = sq_atomic_end(s, result);
    }
    free(eps.items);
    free(p.items);
    free(p.scratch);
    if (result)
        job_list_free(out);
    return result;
}

/* One endpoint at a time: SQLite runs in-process and has one writer, so there is no one to lock out. */
static int sqlite_delivery_slots(struct store *s, int64_t now, const struct lease_limits *lim,
                                 const char *const *endpoint_ids, size_t n, int *slots)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_DELIVERY_SLOTS,
                         "SELECT CASE WHEN c.rate_limit > 0 OR EXISTS (SELECT 1 FROM hookd_endpoint_state s WHERE s.endpoint_id = c.id"
                         "   AND (s.breaker <> 'closed' OR s.closed_at > ?2 - ?5)) THEN 0"
                         "  WHEN c.cap <= 0 THEN -1"
                         "  WHEN " SQ_FIRST_UNLEASED("c.id", "?2") " IS NOT NULL OR " SQ_FIRST_EXPIRED("c.id", "?2")
                         "   IS NOT NULL THEN 0"
                         "  ELSE max(max(c.cap, ?4) - (SELECT count(*) FROM hookd_deliveries x INDEXED BY hookd_deliveries_leased"
                         "   WHERE x.endpoint_id = c.id AND x.lease_owner IS NOT NULL AND x.lease_owner IS NOT ?6"
                         "   AND x.lease_until >= ?2), 0) END"
                         " FROM (SELECT e.id, e.rate_limit, CASE WHEN e.max_in_flight > 0 THEN e.max_in_flight"
                         "  WHEN ?3 > 0 THEN ?3 ELSE 0 END AS cap FROM hookd_endpoints e WHERE e.id = ?1 AND e.enabled) c",
                         &st);

    for (size_t i = 0; i < n; i++)
        slots[i] = 0;
    for (size_t i = 0; i < n && result == 0; i++) {
        int rc;
        sq_bind_text(st, 1, endpoint_ids[i]);
        sqlite3_bind_int64(st, 2, now);
        sqlite3_bind_int(st, 3, lim->default_cap);
        sqlite3_bind_int(st, 4, lim->lease_max);
        sqlite3_bind_int64(st, 5, lim->ramp_ms);
        sq_bind_text(st, 6, lim->own); /* NULL: IS NOT NULL, every lease */
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            int64_t v = sqlite3_column_int64(st, 0);
            slots[i] = v < 0 ? STORE_SLOTS_UNCAPPED : (int)v;
        } else if (rc != SQLITE_DONE) {
            result = sq_error(s, rc);
        }
        sqlite3_reset(st);
    }
    return result;
}

/* Per endpoint (one index probe each): a paused one's rows are due at its next probe, not before. */
static int sqlite_delivery_next_due(struct store *s, int64_t *at)
{
    sqlite3_stmt *st;
    int rc, result = sq_stmt(s, SQ_DELIVERY_NEXT_DUE,
                             "WITH c AS MATERIALIZED (SELECT e.id, (SELECT d.next_attempt_at FROM hookd_deliveries d"
                             "   INDEXED BY hookd_deliveries_endpoint_due WHERE d.endpoint_id = e.id"
                             "   AND d.status IN ('pending', 'retrying') AND d.lease_owner IS NULL"
                             "   AND d.next_attempt_at IS NOT NULL ORDER BY d.next_attempt_at LIMIT 1) AS a,"
                             "  (SELECT min(x.next_attempt_at) FROM hookd_deliveries x INDEXED BY hookd_deliveries_leased"
                             "   WHERE x.endpoint_id = e.id AND x.lease_owner IS NOT NULL AND x.lease_until < ?1"
                             "   AND x.status IN ('pending', 'retrying')) AS b"
                             "  FROM hookd_endpoints e WHERE e.enabled)"
                             " SELECT min(CASE WHEN s.breaker IS NULL OR s.breaker = 'closed' THEN x.at"
                             "  WHEN s.breaker = 'open' THEN max(x.at, COALESCE(s.next_probe_at, 0))"
                             "  ELSE max(x.at, COALESCE(s.probe_until, 0)) END)"
                             " FROM (SELECT c.id, min(COALESCE(c.a, c.b), COALESCE(c.b, c.a)) AS at FROM c) x"
                             " LEFT JOIN hookd_endpoint_state s ON s.endpoint_id = x.id WHERE x.at IS NOT NULL",
                             &st);

    *at = 0;
    if (result)
        return result;
    sqlite3_bind_int64(st, 1, clock_now_ms());
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
        *at = sqlite3_column_int64(st, 0);
    else
        result = rc == SQLITE_ROW || rc == SQLITE_DONE ? HOOKD_ENOTFOUND : sq_error(s, rc);
    sq_reset(st);
    return result;
}

static int sqlite_delivery_supersede(struct store *s, const char *const *endpoint_ids, const char *const *order_keys,
                                    size_t n, int64_t now)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_DELIVERY_SUPERSEDE,
                         "UPDATE hookd_deliveries AS d" STORE_SUPERSEDE_SET
                         " WHERE" STORE_SUPERSEDE_WHERE("d", "?1", "?2", "?3"),
                         &st);

    if (result)
        return result;
    result = sq_atomic_begin(s);
    if (result)
        return result;
    for (size_t i = 0; i < n && result == 0; i++) {
        sqlite3_stmt *wake;
        sq_bind_text(st, 1, endpoint_ids[i]);
        sq_bind_text(st, 2, order_keys[i]);
        sqlite3_bind_int64(st, 3, now);
        result = sq_run(s, st, NULL);
        /* What is left open of the resource (its newest version) no longer waits behind what went. */
        if (result == 0)
            result = sq_stmt(s, SQ_DELIVERY_ORDER_WAKE_KEY,
                             "UPDATE hookd_deliveries AS d SET next_attempt_at = ?3 WHERE d.endpoint_id = ?1"
                             " AND d.order_key = ?2 AND" STORE_ORDER_WAKEABLE("d", "?3")
                             " AND " STORE_ORDER_FIRST("d"),
                             &wake);
        if (result == 0) {
            sq_bind_text(wake, 1, endpoint_ids[i]);
            sq_bind_text(wake, 2, order_keys[i]);
            sqlite3_bind_int64(wake, 3, now);
            result = sq_run(s, wake, NULL);
        }
    }
    return sq_atomic_end(s, result);
}

static int attempt_insert(struct store *s, const struct delivery_result *r, int64_t started_at)
{
    const struct attempt *a = &r->attempt;
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_ATTEMPT_INSERT,
                         "INSERT INTO hookd_attempts(delivery_id, n, started_at, duration_ms, status_code,"
                         " error_class, error, response_body, node, response_truncated)"
                         " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                         &st);

    if (result)
        return result;
    sq_bind_text(st, 1, r->delivery_id);
    sqlite3_bind_int(st, 2, a->n);
    sqlite3_bind_int64(st, 3, started_at);
    sqlite3_bind_int(st, 4, a->duration_ms);
    if (a->status_code)
        sqlite3_bind_int(st, 5, a->status_code);
    sq_bind_text(st, 6, a->error_class);
    sq_bind_text(st, 7, a->error);
    if (a->response)
        sqlite3_bind_blob64(st, 8, a->response, a->response_len ? a->response_len : strlen(a->response),
                            SQLITE_STATIC);
    sq_bind_text(st, 9, a->node ? a->node : r->lease_owner);
    sqlite3_bind_int(st, 10, a->response_truncated);
    return sq_run(s, st, NULL);
}

static int endpoint_disable_of(struct store *s, const char *delivery_id, const char *reason, int64_t now)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_DELIVERY_DISABLE_ENDPOINT,
                         "UPDATE hookd_endpoints SET enabled = 0, disabled_reason = ?2, updated_at = ?3,"
                         " disabled_at = COALESCE(disabled_at, ?3)"
                         " WHERE id = (SELECT endpoint_id FROM hookd_deliveries WHERE id = ?1)",
                         &st);

    if (result)
        return result;
    sq_bind_text(st, 1, delivery_id);
    sq_bind_text(st, 2, reason);
    sqlite3_bind_int64(st, 3, now);
    return sq_run(s, st, NULL);
}

/* The delivery id ended: the next open one of its resource, if moved behind it, is due now. */
static int order_wake_next(struct store *s, const char *id, int64_t now)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_DELIVERY_ORDER_WAKE_NEXT,
                         "UPDATE hookd_deliveries AS d SET next_attempt_at = ?2 WHERE d.id = (SELECT x.id"
                         " FROM hookd_deliveries c JOIN hookd_deliveries x ON x.endpoint_id = c.endpoint_id"
                         " AND x.order_key = c.order_key AND x.order_seq > c.order_seq WHERE c.id = ?1"
                         " AND c.order_key IS NOT NULL AND x.status IN ('pending', 'retrying')"
                         " ORDER BY x.order_seq LIMIT 1) AND" STORE_ORDER_WAKEABLE("d", "?2"),
                         &st);

    if (result)
        return result;
    sq_bind_text(st, 1, id);
    sqlite3_bind_int64(st, 2, now);
    return sq_run(s, st, NULL);
}

/* The completion's SET and fence; the unordered and the ordered statements add their own last term. */
#define COMPLETE_SQL                                                                                            \
    "UPDATE hookd_deliveries SET status = ?4, attempt_count = ?5, next_attempt_at = ?6,"                        \
    " last_status_code = ?7, last_error = ?8, first_attempt_at = COALESCE(first_attempt_at, ?9),"               \
    " last_attempt_at = ?9, delivered_at = CASE WHEN ?4 = 'delivered' THEN ?10 ELSE delivered_at END,"          \
    " lease_owner = NULL, lease_until = NULL"                                                                   \
    " WHERE id = ?1 AND lease_owner = ?2 AND lease_token = ?3"

/* Runs the completion's update (slot, sql) for r; *changed: whether it changed the row. */
static int complete_update(struct store *s, int slot, const char *sql, const struct delivery_result *r,
                           int64_t started, int64_t now, bool *changed)
{
    sqlite3_stmt *st;
    int changes = 0, result = sq_stmt(s, slot, sql, &st);

    *changed = false;
    if (result)
        return result;
    sq_bind_text(st, 1, r->delivery_id);
    sq_bind_text(st, 2, r->lease_owner);
    sqlite3_bind_int64(st, 3, r->lease_token);
    sq_bind_text(st, 4, delivery_status_name(r->status));
    sqlite3_bind_int(st, 5, r->attempt.n);
    if (delivery_status_open(r->status))
        sqlite3_bind_int64(st, 6, r->next_attempt_at ? r->next_attempt_at : now);
    if (r->attempt.status_code)
        sqlite3_bind_int(st, 7, r->attempt.status_code);
    sq_bind_text(st, 8, r->attempt.error);
    sqlite3_bind_int64(st, 9, started);
    sqlite3_bind_int64(st, 10, now);
    result = sq_run(s, st, &changes);
    *changed = result == 0 && changes > 0;
    return result;
}

/*
 * Fenced: applies only while (lease_owner, lease_token) still match; else
 * ESTALE and nothing changes. No savepoint of its own: the callers' one.
 * Whether the delivery has an ordering key (then a final one wakes the next,
 * order_wake_next) is told by which of two updates matches: the first only an
 * unordered row (the most), the second, tried when the first changed nothing,
 * any. Neither has a RETURNING clause: SQLite runs one as a trigger, and a
 * statement with a trigger keeps a statement journal of every page it writes
 * (with an ephemeral table for the rows), which cost more than the update.
 */
static int complete_one(struct store *s, const struct delivery_result *r, int64_t now)
{
    int64_t started = r->attempt.started_at ? r->attempt.started_at : now;
    bool changed = false, ordered = false;
    int result;

    if (!delivery_result_valid(r))
        return HOOKD_EINVAL;
    result = complete_update(s, SQ_DELIVERY_COMPLETE, COMPLETE_SQL " AND order_key IS NULL", r, started, now,
                             &changed);
    if (result == 0 && !changed) {
        result = complete_update(s, SQ_DELIVERY_COMPLETE_ORDERED, COMPLETE_SQL, r, started, now, &ordered);
        if (result == 0 && !ordered)
            result = HOOKD_ESTALE;
    }
    if (result == 0)
        result = attempt_insert(s, r, started);
    if (result == 0 && r->disable_endpoint_reason)
        result = endpoint_disable_of(s, r->delivery_id, r->disable_endpoint_reason, now);
    if (result == 0 && ordered && !delivery_status_open(r->status))
        result = order_wake_next(s, r->delivery_id, now);
    return result;
}

static int sqlite_delivery_complete(struct store *s, const struct delivery_result *r, int64_t now)
{
    int result = sq_atomic_begin(s);

    if (result)
        return result;
    return sq_atomic_end(s, complete_one(s, r, now));
}

/* Each result alone, all inside one savepoint when outside a transaction. A
 * fenced-out or invalid result changes nothing (delivery_complete checks the
 * lease before it writes), so only another error spoils the call. */
static int sqlite_delivery_complete_many(struct store *s, const struct delivery_result *rs, size_t n, int64_t now,
                                  int *results)
{
    int result = sq_atomic_begin(s);

    if (result)
        return result;
    for (size_t i = 0; i < n && result == 0; i++) {
        results[i] = complete_one(s, &rs[i], now);
        if (results[i] != HOOKD_ESTALE && results[i] != HOOKD_EINVAL)
            result = results[i];
    }
    return sq_atomic_end(s, result);
}

static int sqlite_delivery_release(struct store *s, const char *id, const char *owner, int64_t token)
{
    sqlite3_stmt *st;
    int changes = 0, result = sq_stmt(s, SQ_DELIVERY_RELEASE,
                                      "UPDATE hookd_deliveries SET lease_owner = NULL, lease_until = NULL"
                                      " WHERE id = ?1 AND lease_owner = ?2 AND lease_token = ?3",
                                      &st);

    if (result)
        return result;
    sq_bind_text(st, 1, id);
    sq_bind_text(st, 2, owner);
    sqlite3_bind_int64(st, 3, token);
    result = sq_run(s, st, &changes);
    return result == 0 && changes == 0 ? HOOKD_ESTALE : result;
}

static int sqlite_delivery_release_node(struct store *s, const char *node)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_DELIVERY_RELEASE_NODE,
                         "UPDATE hookd_deliveries SET lease_owner = NULL, lease_until = NULL"
                         " WHERE status IN ('pending', 'retrying') AND lease_owner = ?1",
                         &st);

    if (result)
        return result;
    sq_bind_text(st, 1, node);
    return sq_run(s, st, NULL);
}

/* Each lease alone, all inside one savepoint when outside a transaction. */
static int sqlite_delivery_renew(struct store *s, const char *node, const char *const *ids, const int64_t *tokens,
                                 size_t n, int64_t lease_until, bool *renewed)
{
    sqlite3_stmt *st;
    int result;

    for (size_t i = 0; i < n; i++)
        renewed[i] = false;
    if (n == 0)
        return 0;
    result = sq_atomic_begin(s);
    if (result)
        return result;
    for (size_t i = 0; i < n && result == 0; i++) {
        int changes = 0;
        /* A half-open breaker's probe (its lease is probe_until) takes probe_until along: first, while the
         * delivery's lease still tells. */
        result = sq_stmt(s, SQ_DELIVERY_RENEW_PROBE,
                         "UPDATE hookd_endpoint_state SET probe_until = ?4 WHERE breaker = 'half_open'"
                         " AND endpoint_id = (SELECT d.endpoint_id FROM hookd_deliveries d WHERE d.id = ?1"
                         " AND d.lease_owner = ?2 AND d.lease_token = ?3 AND d.status IN ('pending', 'retrying'))"
                         " AND probe_until = (SELECT d.lease_until FROM hookd_deliveries d WHERE d.id = ?1)"
                         " AND probe_until < ?4",
                         &st);
        if (result)
            break;
        sq_bind_text(st, 1, ids[i]);
        sq_bind_text(st, 2, node);
        sqlite3_bind_int64(st, 3, tokens[i]);
        sqlite3_bind_int64(st, 4, lease_until);
        result = sq_run(s, st, NULL);
        if (result)
            break;
        result = sq_stmt(s, SQ_DELIVERY_RENEW,
                         "UPDATE hookd_deliveries SET lease_until = ?4"
                         " WHERE id = ?1 AND lease_owner = ?2 AND lease_token = ?3"
                         " AND status IN ('pending', 'retrying')",
                         &st);
        if (result)
            break;
        sq_bind_text(st, 1, ids[i]);
        sq_bind_text(st, 2, node);
        sqlite3_bind_int64(st, 3, tokens[i]);
        sqlite3_bind_int64(st, 4, lease_until);
        result = sq_run(s, st, &changes);
        renewed[i] = result == 0 && changes > 0;
    }
    result = sq_atomic_end(s, result);
    if (result) {
        for (size_t i = 0; i < n; i++)
            renewed[i] = false;
    }
    return result;
}

static int sqlite_delivery_get(struct store *s, const char *id, struct delivery *out)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_DELIVERY_GET,
                         "SELECT " STORE_DELIVERY_COLUMNS " FROM hookd_deliveries d WHERE d.id = ?1", &st);

    if (result)
        return result;
    sq_bind_text(st, 1, id);
    return sq_row_read(s, st, store_read_delivery, out);
}

/* One UPDATE with the status predicate: of two replays, or a replay and a claim, only one can win.
 * (SQLite's RETURNING cannot name the table's alias the column list uses: the row is read after.) */
static int sqlite_delivery_replay(struct store *s, const char *id, int64_t now, struct delivery *out)
{
    sqlite3_stmt *st;
    int changes = 0, result = sq_stmt(s, SQ_DELIVERY_REPLAY,
                                      "UPDATE hookd_deliveries SET status = 'pending', attempt_count = 0,"
                                      " next_attempt_at = ?2, first_attempt_at = NULL, delivered_at = NULL,"
                                      " lease_owner = NULL, lease_until = NULL"
                                      " WHERE id = ?1 AND status IN ('dead', 'skipped', 'delivered')",
                                      &st);

    if (result)
        return result;
    result = sq_atomic_begin(s);
    if (result)
        return result;
    sq_bind_text(st, 1, id);
    sqlite3_bind_int64(st, 2, now);
    result = sq_run(s, st, &changes);
    /* Replayed, or not replayable: absent (ENOTFOUND), or open, i.e. queued or in flight already (ECONFLICT). */
    if (result == 0)
        result = sqlite_delivery_get(s, id, out);
    if (result == 0 && changes == 0)
        result = HOOKD_ECONFLICT;
    return sq_atomic_end(s, result);
}

/* Newest first; the created_at range is since <= created_at < until. */
static int sqlite_delivery_list(struct store *s, const struct delivery_filter *f, struct delivery_list *out)
{
    char terms[FILTER_SQL_MAX];
    struct store_sql q = {.len = 0};
    sqlite3_stmt *st;
    int mask = delivery_filter_mask(f), limit = store_list_limit(f->limit), result;

    out->items = NULL;
    out->n = 0;
    if (f->status >= 0 && !delivery_status_valid(f->status))
        return HOOKD_EINVAL;
    store_sql_add(&q, "SELECT " STORE_DELIVERY_COLUMNS " FROM hookd_deliveries d WHERE 1");
    delivery_filter_sql(mask, '?', terms);
    store_sql_add(&q, terms);
    store_sql_add(&q, " ORDER BY d.id DESC LIMIT ?9");
    result = sq_stmt(s, SQ_DELIVERY_LIST + mask, q.text, &st);
    if (result)
        return result;
    sq_bind_text(st, 1, f->event_id);
    sq_bind_text(st, 2, f->endpoint_id);
    sq_bind_text(st, 3, f->account);
    if (mask & DL_F_STATUS)
        sq_bind_text(st, 4, delivery_status_name((enum delivery_status)f->status));
    sqlite3_bind_int64(st, 5, f->since);
    sqlite3_bind_int64(st, 6, f->until);
    if (mask & DL_F_OWN)
        sq_bind_text(st, 7, f->account);
    sq_bind_text(st, 8, f->before_id);
    sqlite3_bind_int(st, 9, limit);
    return sq_rows_read(s, st, (size_t)limit, store_read_delivery, STORE_ROWS(out, store_free_delivery));
}

/* The statuses of a bit set as up to three names (repeated to fill), for "status IN (?3, ?4, ?5)". */
static void status_names(unsigned statuses, const char *out[3])
{
    size_t n = 0;

    for (int st = DELIVERY_PENDING; st <= DELIVERY_SKIPPED && n < 3; st++)
        if (statuses & (1u << st))
            out[n++] = delivery_status_name((enum delivery_status)st);
    for (size_t i = n; i < 3; i++)
        out[i] = n ? out[0] : "none";
}

static int sqlite_delivery_replay_many(struct store *s, const char *const *ids, size_t n, unsigned statuses,
                                       int64_t now, bool *replayed)
{
    const char *names[3];
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_DELIVERY_REPLAY_MANY,
                         "UPDATE hookd_deliveries SET status = 'pending', attempt_count = 0,"
                         " next_attempt_at = ?2, first_attempt_at = NULL, delivered_at = NULL,"
                         " lease_owner = NULL, lease_until = NULL"
                         " WHERE id = ?1 AND status IN (?3, ?4, ?5)",
                         &st);

    if (result)
        return result;
    status_names(statuses, names);
    result = sq_atomic_begin(s);
    for (size_t i = 0; result == 0 && i < n; i++) {
        int changes = 0;
        sq_bind_text(st, 1, ids[i]);
        sqlite3_bind_int64(st, 2, now);
        for (int k = 0; k < 3; k++)
            sq_bind_text(st, 3 + k, names[k]);
        result = sq_run(s, st, &changes);
        replayed[i] = result == 0 && changes > 0;
    }
    return sq_atomic_end(s, result);
}

static int sqlite_delivery_count(struct store *s, const struct delivery_filter *f, int64_t *n)
{
    char terms[FILTER_SQL_MAX];
    struct store_sql q = {.len = 0};
    sqlite3_stmt *st;
    int mask = delivery_filter_mask(f) & ~DL_F_BEFORE, result;

    *n = 0;
    if (f->status >= 0 && !delivery_status_valid(f->status))
        return HOOKD_EINVAL;
    store_sql_add(&q, "SELECT count(*) FROM hookd_deliveries d WHERE 1");
    delivery_filter_sql(mask, '?', terms);
    store_sql_add(&q, terms);
    result = sq_stmt(s, SQ_DELIVERY_COUNT + mask, q.text, &st);
    if (result)
        return result;
    if (mask & DL_F_EVENT)
        sq_bind_text(st, 1, f->event_id);
    if (mask & DL_F_ENDPOINT)
        sq_bind_text(st, 2, f->endpoint_id);
    if (mask & DL_F_ACCOUNT)
        sq_bind_text(st, 3, f->account);
    if (mask & DL_F_STATUS)
        sq_bind_text(st, 4, delivery_status_name((enum delivery_status)f->status));
    if (mask & DL_F_SINCE)
        sqlite3_bind_int64(st, 5, f->since);
    if (mask & DL_F_UNTIL)
        sqlite3_bind_int64(st, 6, f->until);
    if (mask & DL_F_OWN)
        sq_bind_text(st, 7, f->account);
    return sq_get_i64(s, st, n);
}

static int sqlite_attempt_list(struct store *s, const char *delivery_id, struct attempt_list *out)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_ATTEMPT_LIST,
                         "SELECT " STORE_ATTEMPT_COLUMNS_WITH(STORE_ATTEMPT_SQLITE_RESPONSE) " FROM hookd_attempts WHERE delivery_id = ?1 ORDER BY id",
                         &st);

    out->items = NULL;
    out->n = 0;
    if (result)
        return result;
    sq_bind_text(st, 1, delivery_id);
    return sq_rows_read(s, st, ATTEMPT_LIST_MAX, store_read_attempt, STORE_ROWS(out, store_free_attempt));
}

const struct store_delivery_ops sqlite_delivery_ops = {
    .insert = sqlite_delivery_insert,
    .insert_many = sqlite_delivery_insert_many,
    .claim_due = sqlite_delivery_claim_due,
    .slots = sqlite_delivery_slots,
    .next_due = sqlite_delivery_next_due,
    .supersede = sqlite_delivery_supersede,
    .complete = sqlite_delivery_complete,
    .complete_many = sqlite_delivery_complete_many,
    .release = sqlite_delivery_release,
    .release_node = sqlite_delivery_release_node,
    .renew = sqlite_delivery_renew,
    .get = sqlite_delivery_get,
    .replay = sqlite_delivery_replay,
    .count = sqlite_delivery_count,
    .replay_many = sqlite_delivery_replay_many,
    .list = sqlite_delivery_list,
    .attempt_list = sqlite_attempt_list,
};
