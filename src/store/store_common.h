/*
 * What the store backends share, written once above them (callers never
 * include this): the column lists and record readers of every table, the
 * lists row readers fill, list filters in SQL, and an insert's conflict check.
 */
#ifndef HOOKD_STORE_COMMON_H
#define HOOKD_STORE_COMMON_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/* ---- columns: the select lists the record readers read, in their order --- */

#define STORE_EVENT_COLUMNS                                                                                \
    "o.seq, o.id, o.event_type, o.account, o.resource_type, o.resource_id, o.resource_version, o.payload, " \
    "o.idempotency_key, o.created_at, o.dispatched_at, o.error"
#define STORE_EVENT_NCOLS 12
#define STORE_ENDPOINT_COLUMNS                                                                                 \
    "id, account, url, description, event_types, secrets, enabled, disabled_reason, ordering, max_in_flight, " \
    "rate_limit, timeout_ms, retry_schedule, created_at, updated_at, headers"
#define STORE_DELIVERY_COLUMNS                                                                                 \
    "d.id, d.event_id, d.endpoint_id, d.account, d.status, d.attempt_count, d.next_attempt_at, "              \
    "d.last_status_code, d.last_error, d.first_attempt_at, d.last_attempt_at, d.delivered_at, d.created_at, " \
    "d.lease_owner, d.lease_until, d.lease_token"
#define STORE_DELIVERY_NCOLS 16
/* A job's row: STORE_DELIVERY_COLUMNS, then STORE_EVENT_COLUMNS. */
#define STORE_JOB_COLUMNS STORE_DELIVERY_COLUMNS ", " STORE_EVENT_COLUMNS
/*
 * The snippet is read as hex text of its bytes (a BLOB/bytea column; rows
 * written before it have their text in the old column): each backend gives
 * the expression, store_read_attempt decodes it.
 */
#define STORE_ATTEMPT_COLUMNS_WITH(response_hex) \
    "id, delivery_id, n, started_at, duration_ms, status_code, error_class, error, " response_hex \
    ", node, response_truncated"
#define STORE_ATTEMPT_SQLITE_RESPONSE "nullif(hex(COALESCE(response_body, response)), '')"
#define STORE_ATTEMPT_POSTGRES_RESPONSE "encode(COALESCE(response_body, convert_to(response, 'UTF8')), 'hex')"
/* The hex text of n bytes (2n + 1 bytes with the NUL) into out. */
void store_hex_encode(const void *p, size_t n, char *out);

/* The inbound families (sources, inbox, rejections). */
#define STORE_SOURCE_COLUMNS "name, definition, secrets, created_at, updated_at"
#define STORE_INBOX_COLUMNS                                                                                      \
    "id, source, event_id, event_type, entity_kind, entity_id, version, payload, payload_sha256, "               \
    "signature_verified, status, attempts, next_attempt_at, lease_owner, lease_until, lease_token, result, "      \
    "error, received_at, processed_at, dup_count, last_dup_at, conflict_count, deferred_at"
/*
 * The columns of the other open items of an entity that a decision reads
 * (entity_hold reads every one for every decision, about twenty a decision
 * in the machine bench): their ids, event, entity, version, status,
 * attempts, lease and times of receipt and deferral (machine_step.c,
 * machine_accept.c), read by store_read_inbox_open. The body (up to the
 * source's size limit), hash, next look, result, error and counts are not
 * read: the item holds "" as its payload and zeros for the rest.
 */
#define STORE_INBOX_OPEN_COLUMNS                                                                                 \
    "id, source, event_id, event_type, entity_kind, entity_id, version, status, attempts, lease_owner, "         \
    "lease_until, received_at, deferred_at"
#define STORE_REJECTION_COLUMNS "id, source, at, reason, peer, size, sha256"
#define STORE_REJECTION_COUNT_COLUMNS "reason, count, last_at"

/* Replays (aliased r) with their progress, counted from the deliveries they replayed as they are now. */
#define STORE_REPLAY_PROGRESS(statuses)                                                                  \
    "(SELECT count(*) FROM hookd_replay_items i JOIN hookd_deliveries d ON d.id = i.delivery_id"         \
    " WHERE i.replay_id = r.id AND d.status IN (" statuses "))"
#define STORE_REPLAY_COLUMNS                                                                             \
    "r.id, r.actor, r.account, r.kind, r.filter, r.created_at, r.finished_at, r.matched, r.replayed, "   \
    "r.skipped, " STORE_REPLAY_PROGRESS("'pending', 'retrying'") ", " STORE_REPLAY_PROGRESS("'delivered'") \
    ", " STORE_REPLAY_PROGRESS("'dead', 'skipped'") ", " STORE_REPLAY_PROGRESS("'superseded'")
#define STORE_TOKEN_COLUMNS \
    "id, account, scope, token_hash, description, created_by, created_at, expires_at, revoked_at"

/*
 * Ordering, the same SQL on both backends. STORE_ORDER_FIRST(d): the delivery
 * aliased d is unordered, or its resource's oldest open delivery to its
 * endpoint (claims take no other: key and latest modes send one at a time per
 * resource, in outbox order). STORE_ORDER_NEWER(n, d): n is a newer version of
 * d's resource (latest mode): a higher resource_version, an event without one
 * counting as older than any with one, and outbox order between equals.
 */
#define STORE_ORDER_FIRST(d)                                                                                     \
    "(" d ".order_key IS NULL OR NOT EXISTS (SELECT 1 FROM hookd_deliveries p WHERE p.endpoint_id = " d            \
    ".endpoint_id AND p.order_key = " d ".order_key AND p.order_seq < " d ".order_seq"                             \
    " AND p.status IN ('pending', 'retrying')))"
/*
 * Blocked rows (key and latest modes): a due delivery whose resource has an
 * older open one waits for it. A claim walks at most STORE_ORDER_WALK_MAX
 * such rows of an endpoint beyond what it leases, and moves each it met
 * behind its resource's head: next_attempt_at becomes the head's
 * STORE_ORDER_HEAD_READY + 1 (its next attempt, or the end of its lease while
 * it is in flight), so a blocked row is read once per attempt of its head,
 * not by every claim, and no claim reads more than the bound whatever the
 * number of blocked resources. When a head ends (delivered, dead, superseded)
 * the next row of its resource is woken: due at once (only a pending row
 * never attempted, which only waited for its turn). A head that ends any
 * other way (SQL, an endpoint deleted) leaves its next row due at the head's
 * lease end or retry time at the latest: later, never lost.
 * Behind a head in flight a row waits at most STORE_ORDER_INFLIGHT_RECHECK_MS,
 * not the whole lease: on a shared store the head's completion (another
 * connection) can commit after the claim's snapshot and before its move, so
 * its wake-up finds nothing to wake; the recheck bounds that to a second
 * (rereading at most a cap's worth of rows per endpoint each second).
 * STORE_ORDER_HEAD_READY(d, greatest, least, now): the SQL value for the
 * delivery aliased d (greatest, least: the backend's two-argument maximum
 * and minimum; now: the claim's time), NULL when it has no older open
 * delivery (it is first, STORE_ORDER_FIRST).
 */
#define STORE_ORDER_WALK_MAX 256
#define STORE_ORDER_WALK_MAX_SQL "256"
#define STORE_ORDER_INFLIGHT_RECHECK_MS 1000
#define STORE_ORDER_INFLIGHT_RECHECK_SQL "1000"
#define STORE_ORDER_HEAD_READY(d, greatest, least, now)                                                          \
    "CASE WHEN " d ".order_key IS NULL THEN NULL ELSE (SELECT " greatest "(COALESCE(p.next_attempt_at, 0),"       \
    " CASE WHEN p.lease_owner IS NOT NULL THEN " least "(COALESCE(p.lease_until, 0), " now " + "                \
    STORE_ORDER_INFLIGHT_RECHECK_SQL ") ELSE 0 END) FROM hookd_deliveries p"                                     \
    " WHERE p.endpoint_id = " d ".endpoint_id AND p.order_key = " d ".order_key AND p.order_seq < " d ".order_seq"  \
    " AND p.status IN ('pending', 'retrying') ORDER BY p.order_seq LIMIT 1) END"
/*
 * What a woken row must be: pending, never attempted, moved behind its head
 * (due later than now). STORE_ORDER_WAKEABLE_AS takes the status as an SQL
 * expression (a parameter holding 'pending': postgres_deliveries.c says why).
 */
#define STORE_ORDER_WAKEABLE_AS(d, now, pending) \
    " " d ".status = " pending " AND " d ".attempt_count = 0 AND " d ".next_attempt_at > " now
#define STORE_ORDER_WAKEABLE(d, now) STORE_ORDER_WAKEABLE_AS(d, now, "'pending'")
#define STORE_ORDER_RANK(d) "(COALESCE(" d ".order_version, -9223372036854775807 - 1), " d ".order_seq)"
#define STORE_ORDER_NEWER(n, d) STORE_ORDER_RANK(n) " > " STORE_ORDER_RANK(d)
/* The latest-mode superseding of one (endpoint, key), its three placeholders given as text ("$1"…/"?1"…). */
/*
 * Paused endpoints' deliveries past their retry window (expire_paused): the
 * SET and the WHERE over hookd_deliveries d, given the SQL expressions now and
 * window. The endpoints come from hookd_endpoint_state (few rows). A row's
 * first attempt is never before its creation, so a row past its window was
 * also created before now - window: that redundant term lets PostgreSQL range
 * over hookd_deliveries_endpoint_status (endpoint, status, created_at) and read
 * only the rows that expire, where the window's test alone read a paused
 * endpoint's whole backlog at every sweep (80,000 rows beside 8 hung
 * endpoints: 244 ms, against 0.5 ms with the range). term is that index's
 * predicate over d (health_sql.h), word for word for SQLite, which also names
 * the index: without statistics it took the status index, every open row of
 * every endpoint, in the writer's transaction. in_paused is the test of the
 * endpoint against STORE_PAUSED_ENDPOINTS: PostgreSQL's generic plan of an
 * IN (subquery) joined the status index's open rows to it by hash (12.7 ms
 * for 80,000 rows and none to expire), where = ANY (ARRAY(…)) makes the
 * endpoints a condition of the index scan (0.2 ms).
 */
#define STORE_EXPIRE_PAUSED_SET                                                                                 \
    " SET status = 'dead', next_attempt_at = NULL, lease_owner = NULL, lease_until = NULL,"                      \
    " last_error = 'retry window exceeded while the endpoint was paused (breaker open)'"
#define STORE_PAUSED_ENDPOINTS "SELECT p.endpoint_id FROM hookd_endpoint_state p WHERE p.breaker <> 'closed'"
#define STORE_EXPIRE_PAUSED_WHERE(d, now, window, term, in_paused)                                               \
    " " d ".endpoint_id " in_paused                                                                              \
    " AND " d ".status IN ('pending', 'retrying') AND (" d ".lease_owner IS NULL OR " d ".lease_until < " now ")" \
    " AND COALESCE(" d ".first_attempt_at, " d ".created_at) < " now " - " window                                \
    " AND " term " AND " d ".created_at < " now " - " window

/* A rate limit's bucket stamped further ahead of the claiming clock than this is taken as full (claims). */
#define STORE_TOKENS_AHEAD_MAX_MS 60000
#define STORE_TOKENS_AHEAD_MAX_SQL "60000"

#define STORE_SUPERSEDE_SET                                                                                     \
    " SET status = 'superseded', next_attempt_at = NULL, lease_owner = NULL, lease_until = NULL,"                \
    " last_error = 'superseded by a newer version of the resource'"
#define STORE_SUPERSEDE_WHERE(d, endpoint, key, now)                                                            \
    " " d ".endpoint_id = " endpoint " AND " d ".order_key = " key " AND substr(" d ".order_key, 1, 1) = 'L'"    \
    " AND " d ".status IN ('pending', 'retrying') AND (" d ".lease_owner IS NULL OR " d ".lease_until < " now ")" \
    " AND EXISTS (SELECT 1 FROM hookd_deliveries n WHERE n.endpoint_id = " d ".endpoint_id"                     \
    " AND n.order_key = " d ".order_key AND n.id <> " d ".id AND n.status IN ('pending', 'retrying', 'delivered')" \
    " AND " STORE_ORDER_NEWER("n", d) ")"

/* ---- rows: one result row, whichever backend it comes from ---------------- */

struct store_row;
struct store_row_ops {
    bool (*null)(const struct store_row *r, int col);
    /* Borrowed text, valid until the row moves on; NULL for SQL NULL. */
    const char *(*text)(const struct store_row *r, int col);
    /* The column's length in bytes (a text may hold a NUL before its end); 0 for SQL NULL. */
    size_t (*len)(const struct store_row *r, int col);
    /* A heap copy, NULL for SQL NULL; *ok turns false on OOM. */
    char *(*str)(const struct store_row *r, int col, bool *ok);
    int64_t (*i64)(const struct store_row *r, int col); /* NULL reads as 0 */
    bool (*flag)(const struct store_row *r, int col);   /* a boolean column */
};
struct store_row {
    const struct store_row_ops *ops;
    const void *src; /* the backend's statement or result */
    int row;         /* the row number in src, where the backend has one */
};
/* An id column into a fixed buffer ("" for SQL NULL). */
void store_row_id(const struct store_row *r, int col, char out[HOOKD_ID_MAX]);

/*
 * Fills *item (zeroed by the caller) from the row's columns in the order of
 * the matching STORE_*_COLUMNS. On failure (HOOKD_ENOMEM; HOOKD_EIO for an
 * endpoint's malformed JSON) the item is freed again.
 */
typedef int (*store_read_fn)(const struct store_row *r, void *item);
int store_read_event(const struct store_row *r, void *item);       /* struct event */
int store_read_endpoint(const struct store_row *r, void *item);    /* struct endpoint */
int store_read_delivery(const struct store_row *r, void *item);    /* struct delivery */
int store_read_job(const struct store_row *r, void *item);         /* struct delivery_job */
int store_read_attempt(const struct store_row *r, void *item);     /* struct attempt */
int store_read_source(const struct store_row *r, void *item);      /* struct source */
int store_read_inbox(const struct store_row *r, void *item);       /* struct inbox_item */
int store_read_inbox_open(const struct store_row *r, void *item);  /* struct inbox_item, STORE_INBOX_OPEN_COLUMNS */
int store_read_rejection(const struct store_row *r, void *item);   /* struct rejection */
int store_read_rejection_count(const struct store_row *r, void *item); /* struct rejection_count */
int store_read_replay(const struct store_row *r, void *item);      /* struct replay (store_ops_rows.c) */
int store_read_token(const struct store_row *r, void *item);       /* struct api_token (store_ops_rows.c) */

/* ---- lists the row readers fill ----------------------------------------- */

/* An event_list, endpoint_list, … seen without its type. */
struct store_rows {
    void **items;
    size_t *n;
    size_t item_size;
    void (*item_free)(void *item); /* NULL: the items own nothing */
    size_t cap;
};
#define STORE_ROWS(list, free_fn)                                                                       \
    ((struct store_rows){.items = (void **)&(list)->items, .n = &(list)->n, .item_size = sizeof *(list)->items, \
                         .item_free = (free_fn)})
/* The item_free of each list type. */
void store_free_event(void *item);
void store_free_endpoint(void *item);
void store_free_delivery(void *item);
void store_free_job(void *item);
void store_free_attempt(void *item);
void store_free_source(void *item);
void store_free_inbox(void *item);
/* ---- operations (store_ops_common.c): alerts, signals, figures, retention ---- */

#define STORE_ALERT_COLUMNS "id, rule, subject, message, details, opened_at, resolved_at"
int store_read_alert(const struct store_row *r, void *item);  /* struct alert */
void store_free_alert(void *item);
/* A signal or figure row: kind (integer), subject, account, n, m. */
int store_read_signal(const struct store_row *r, void *item); /* struct alert_signal */
void store_free_signal(void *item);
/* Rows kept per signal or figure statement; more are cut (a bound, not a figure anyone reaches). */
#define STORE_SIGNALS_MAX 20000

/*
 * The alert rules' signals in one statement (kinds: enum alert_signal_kind), the same SQL on both
 * backends but for the parameter marker p (the "since" time, ms), the test of a disabled endpoint,
 * and what the backend gives: attempts, the (endpoint_id, account, status_code) of every attempt
 * started since p (STORE_ATTEMPTS_SINCE_SQL; PostgreSQL adds the first attempts kept in their
 * delivery rows); term, the predicate of hookd_deliveries_endpoint_status over d (health_sql.h's
 * HEALTH_STATUS_IN or _OR, word for word so that SQLite uses the partial index); and open, the
 * relation the oldest open delivery is found in (PostgreSQL's hookd_deliveries_all adds those in
 * flight before their first result, which have no row yet).
 *
 * The retrying, dead and oldest-open figures are probes of that index per endpoint, not scans of
 * the deliveries: the evaluator runs every interval on every node, and a scan read every open row
 * (a backlog of millions in an outage) and every dead one kept (until retention), whether its
 * endpoint still existed or not. A probe reads only the rows it counts, and none of endpoints
 * deleted since (whose deliveries no rule reports). The attempts since p are read row by row:
 * their count is the rate times the window.
 */
#define STORE_SIGNAL_PROBE(term, what, rel, status) \
    "(SELECT " what " FROM " rel " d WHERE d.endpoint_id = e.id AND " term " AND d.status = '" status "'"
#define STORE_SIGNALS_SQL(p, disabled, attempts, term, open)                                                    \
    "SELECT 0, id, NULL, n, 0 FROM (SELECT e.id, " STORE_SIGNAL_PROBE(term, "count(*)", "hookd_deliveries",    \
                                                                      "retrying") ") AS n"                  \
    "  FROM hookd_endpoints e) r0 WHERE n > 0"                                                                   \
    " UNION ALL SELECT 1, endpoint_id, account, count(*),"                                                      \
    "  sum(CASE WHEN status_code BETWEEN 200 AND 299 THEN 1 ELSE 0 END) FROM " attempts " a"                   \
    "  GROUP BY endpoint_id, account"                                                                            \
    " UNION ALL SELECT 2, id, NULL, n, 0 FROM (SELECT e.id, " STORE_SIGNAL_PROBE(term, "count(*)",             \
                                                                               "hookd_deliveries", "dead")      \
    "  AND COALESCE(d.last_attempt_at, d.created_at) >= " p ") AS n FROM hookd_endpoints e) r2 WHERE n > 0"     \
    " UNION ALL SELECT 3, id, NULL, CASE WHEN r IS NULL OR q <= r THEN q ELSE r END, 0 FROM (SELECT e.id, "    \
    STORE_SIGNAL_PROBE(term, "d.created_at", open, "pending") " ORDER BY d.created_at LIMIT 1) AS q, "          \
    STORE_SIGNAL_PROBE(term, "d.created_at", open, "retrying") " ORDER BY d.created_at LIMIT 1) AS r"           \
    "  FROM hookd_endpoints e) r3 WHERE q IS NOT NULL OR r IS NOT NULL"                                          \
    " UNION ALL SELECT 4, source, NULL, count(*), 0 FROM hookd_inbox WHERE status = 'quarantined' GROUP BY source" \
    " UNION ALL SELECT 5, source, NULL, count(*), 0 FROM hookd_rejections WHERE at >= " p                          \
    "  AND reason IN ('bad_signature', 'missing_signature') GROUP BY source"                                    \
    " UNION ALL SELECT 6, id, disabled_reason, 0, 0 FROM hookd_endpoints WHERE " disabled
/* The attempts' rows started since p, with their delivery's endpoint and account (hookd_attempts_started). */
#define STORE_ATTEMPTS_SINCE_SQL(p)                                                                               \
    "SELECT d.endpoint_id, d.account, a.status_code FROM hookd_attempts a JOIN hookd_deliveries d"              \
    " ON d.id = a.delivery_id WHERE a.started_at >= " p

/*
 * The figures of the metrics in one statement, as signal rows (kind, key, -, n, m): 0 deliveries per
 * status (open and kept ones), 1 live leases (the backend's expression: lease_sql), 2 undispatched
 * outbox rows (n) and the oldest one's created_at (m), 3 the oldest open delivery's created_at,
 * 4 endpoints per breaker state, 5 endpoints (n) and disabled ones (m), 6 inbox items per open status.
 * more: further rows of kinds 0 and 3 (" UNION ALL …", or ""), which the fold adds up (kind 0) or
 * takes the oldest of (kind 3): PostgreSQL's deliveries in flight before their first result.
 */
#define STORE_FIGURES_SQL(lease_sql, more)                                                                        \
    "SELECT 0, status, NULL, count(*), 0 FROM hookd_deliveries"                                                   \
    "  WHERE status IN ('pending', 'retrying', 'dead', 'skipped') GROUP BY status"                             \
    " UNION ALL SELECT 1, NULL, NULL, (" lease_sql "), 0"                                                         \
    " UNION ALL SELECT 2, NULL, NULL, count(*), COALESCE(min(created_at), 0) FROM hookd_outbox"                 \
    "  WHERE dispatched_at IS NULL"                                                                              \
    " UNION ALL SELECT 3, NULL, NULL, COALESCE(min(created_at), 0), 0 FROM hookd_deliveries"                    \
    "  WHERE status IN ('pending', 'retrying')"                                                                  \
    " UNION ALL SELECT 4, st.breaker, NULL, count(*), 0 FROM hookd_endpoint_state st"                           \
    "  JOIN hookd_endpoints e ON e.id = st.endpoint_id WHERE st.breaker <> 'closed' GROUP BY st.breaker"         \
    " UNION ALL SELECT 5, NULL, NULL, count(*), COALESCE(sum(CASE WHEN enabled THEN 0 ELSE 1 END), 0)"          \
    "  FROM hookd_endpoints"                                                                                      \
    " UNION ALL SELECT 6, status, NULL, count(*), 0 FROM hookd_inbox"                                             \
    "  WHERE status IN ('pending', 'deferred', 'quarantined') GROUP BY status" more
/* Folds the rows of STORE_FIGURES_SQL into *out. */
void store_figures_fold(const struct alert_signal_list *rows, struct store_figures *out);

void store_free_rejection(void *item);
void store_free_rejection_count(void *item);
void store_free_replay(void *item);
void store_free_token(void *item);

/* Empties the list without freeing anything (its start state). */
void store_rows_start(struct store_rows *rows);
/* A zeroed item after the last, or NULL when out of memory; it counts once
 * store_rows_keep() is called. */
void *store_rows_slot(struct store_rows *rows);
void store_rows_keep(struct store_rows *rows);
/* Frees every item and the array; the list is empty afterwards. */
void store_rows_free(struct store_rows *rows);

/* A list limit clamped to 1..STORE_LIST_MAX (0 or less: 100). */
int store_list_limit(int limit);

/* ---- list queries ------------------------------------------------------- */

/* Bounded SQL text for the list queries assembled from filters. */
struct store_sql {
    char text[2048];
    size_t len;
};
void store_sql_add(struct store_sql *q, const char *part);

/*
 * Which filters a list query has (one bit each, so one statement per
 * combination) and their SQL, the same for both backends but for the
 * placeholder mark ('$' or '?'). Filter i compares its column with parameter
 * i + 1, used by the statement or not.
 */
enum { EV_F_TYPE = 1, EV_F_ACCOUNT = 2, EV_F_SINCE = 4, EV_F_UNTIL = 8, EV_F_COMBINATIONS = 16 };
enum {
    DL_F_EVENT = 1,
    DL_F_ENDPOINT = 2,
    DL_F_ACCOUNT = 4,
    DL_F_STATUS = 8,
    DL_F_SINCE = 16,
    DL_F_UNTIL = 32,
    DL_F_OWN = 64, /* own_endpoints: the endpoint's account is the filter's account (parameter 7) */
    DL_F_BEFORE = 128,
    DL_F_COMBINATIONS = 256,
};
enum { EP_F_ACCOUNT = 1, EP_F_BEFORE = 2, EP_F_COMBINATIONS = 4 };
enum {
    IB_F_SOURCE = 1,
    IB_F_STATUS = 2,
    IB_F_KIND = 4,
    IB_F_ENTITY = 8,
    IB_F_SINCE = 16,
    IB_F_UNTIL = 32,
    IB_F_BEFORE = 64,
    IB_F_COMBINATIONS = 128,
};
int event_filter_mask(const struct event_filter *f);
int delivery_filter_mask(const struct delivery_filter *f);
int endpoint_filter_mask(const struct endpoint_filter *f);
int inbox_filter_mask(const struct inbox_filter *f);
/* " AND o.event_type = $1 AND …" for the bits of mask, in a buffer of FILTER_SQL_MAX bytes. */
#define FILTER_SQL_MAX 256
void event_filter_sql(int mask, char mark, char out[FILTER_SQL_MAX]);
void delivery_filter_sql(int mask, char mark, char out[FILTER_SQL_MAX]);
void endpoint_filter_sql(int mask, char mark, char out[FILTER_SQL_MAX]);
void inbox_filter_sql(int mask, char mark, char out[FILTER_SQL_MAX]);

/* ---- values: a row to write, bound by each backend its way ---------------- */

enum store_value_type { STORE_V_TEXT, STORE_V_INT, STORE_V_I64, STORE_V_BOOL };
struct store_value {
    enum store_value_type type;
    bool null;        /* SQL NULL of that type */
    const char *text; /* STORE_V_TEXT: borrowed from the record */
    int64_t num;      /* the others */
};

struct endpoint_json;
/* The columns an insert writes; its parameter i + 1 is values[i]. */
#define STORE_EVENT_INSERT_COLUMNS \
    "id, account, event_type, resource_type, resource_id, resource_version, payload, idempotency_key, created_at"
#define STORE_EVENT_NVALUES 9
#define STORE_ENDPOINT_NVALUES 16 /* STORE_ENDPOINT_COLUMNS: enabled is 7, updated_at 15, headers 16 */
#define STORE_DELIVERY_INSERT_COLUMNS                                                                          \
    "id, event_id, endpoint_id, account, status, attempt_count, next_attempt_at, last_status_code, last_error, " \
    "first_attempt_at, last_attempt_at, delivered_at, created_at, lease_owner, lease_until, lease_token, "     \
    "order_key, order_seq, order_version"
#define STORE_DELIVERY_NVALUES 19
/* Gives ev an id when it has none, created_at now and no dispatched_at, and fills v. */
void store_event_values(struct event *ev, struct store_value v[STORE_EVENT_NVALUES]);
/* ep's row as written at now (created_at and updated_at default to it); j holds its JSON columns. */
void store_endpoint_values(const struct endpoint *ep, const struct endpoint_json *j, int64_t now,
                           struct store_value v[STORE_ENDPOINT_NVALUES]);
/* d's row as inserted at now: created_at defaults to now, an open delivery without a time is due at
 * created_at, a final one has none, and lease_until counts only with a lease_owner. */
void store_delivery_values(const struct delivery *d, int64_t now, struct store_value v[STORE_DELIVERY_NVALUES]);

/* ---- endpoint state ------------------------------------------------------ */

#define STORE_ENDPOINT_STATE_COLUMNS                                                                          \
    "endpoint_id, breaker, consecutive_failures, opened_at, next_probe_at, probe_interval_ms, probe_until, " \
    "closed_at, failing_since, tokens_milli, tokens_at"
int store_read_endpoint_state(const struct store_row *r, void *item); /* struct endpoint_state */
/* The default state of an endpoint without a row: closed, never failed, a full bucket (tokens_at 0). */
void endpoint_state_default(struct endpoint_state *st, const char *endpoint_id);
/*
 * The breaker after one endpoint's outcome (o->succeeded, o->failures): the
 * backends read the row, this decides, they write it back. rnd01 (uniform in
 * [0, 1)) jitters the probe interval; o->opened is set when it opens.
 */
void endpoint_state_apply(struct endpoint_state *st, struct endpoint_outcome *o, const struct breaker_policy *p,
                          int64_t now, double rnd01);
/* Whether st has failed continuously for p->disable_after_ms at now; the reason to record into reason. */
#define ENDPOINT_DISABLE_REASON_MAX 160
bool endpoint_state_disable_due(const struct endpoint_state *st, const struct breaker_policy *p, int64_t now,
                                char reason[ENDPOINT_DISABLE_REASON_MAX]);
/* An inbox insert's row: the columns and its parameter i + 1 = values[i]. */
#define STORE_INBOX_INSERT_COLUMNS                                                                        \
    "id, source, event_id, event_type, entity_kind, entity_id, version, payload, payload_sha256, "        \
    "signature_verified, status, next_attempt_at, received_at"
#define STORE_INBOX_NVALUES 13 /* received_at is 13 */
/* Gives it an id when it has none and received_at now when 0 (pending, due at received_at), and fills v.
 * HOOKD_EINVAL when it lacks its source, event id, payload or hash. */
__attribute__((warn_unused_result)) int store_inbox_values(struct inbox_item *it,
                                                           struct store_value v[STORE_INBOX_NVALUES]);
#define STORE_REJECTION_NVALUES 6 /* source, at, reason, peer, size, sha256 */
/* Fills r->at when 0, and v. HOOKD_EINVAL when it lacks its source or reason. */
__attribute__((warn_unused_result)) int store_rejection_values(struct rejection *r,
                                                               struct store_value v[STORE_REJECTION_NVALUES]);

/* ---- events ------------------------------------------------------------- */

/* A backend's lookup of one event by its id, or (by_key) by its idempotency key; ENOTFOUND when absent. */
typedef int (*store_event_lookup_fn)(struct store *s, bool by_key, const char *key, struct event *out);
/*
 * After an insert of ev changed nothing (ON CONFLICT DO NOTHING): the row it
 * ran into, the idempotency key's else the id's, into *existing (when not
 * NULL). Returns HOOKD_EEXISTS, or the lookup's error.
 */
__attribute__((warn_unused_result)) int store_event_conflict(struct store *s, const struct event *ev,
                                                             struct event *existing, store_event_lookup_fn lookup);

/* The machines family (store_machines_common.c). */
#define STORE_MACHINE_COLUMNS "name, definition, created_at, updated_at"
#define STORE_ENTITY_COLUMNS "kind, id, state, version, last_event_id, updated_at"
#define STORE_TRANSITION_COLUMNS \
    "seq, inbox_id, source, kind, entity_id, event_id, from_state, to_state, version, result, reason, worker, at"
int store_read_machine(const struct store_row *r, void *item);    /* struct machine_record */
int store_read_entity(const struct store_row *r, void *item);     /* struct entity_record */
int store_read_transition(const struct store_row *r, void *item); /* struct transition_record */
void store_free_machine(void *item);
void store_free_transition(void *item);
/* ---- health: the rows one health_record writes (store/health_rows.c) ----- */

struct health_minute_row {
    const char *endpoint_id, *node;
    int64_t minute, attempts, successes, retries_started, retries_ended;
};
struct health_latency_row {
    const char *endpoint_id, *node;
    int64_t minute;
    int bucket;
    int64_t count;
};
struct health_failure_row {
    const char *endpoint_id, *node, *account; /* account NULL: none */
    int64_t minute;
    int status_code;
    const char *error_class; /* "" for a received status: the key has no NULLs */
    int64_t count;
};
struct health_last_row {
    const char *endpoint_id, *node;
    int64_t last_attempt_at, last_success_at, last_error_at; /* 0: none in this batch */
    int last_error_status_code;
    const char *last_error_class;    /* NULL: a received status */
    char last_error[HEALTH_ERROR_MAX]; /* "" with last_error_at 0 or an error without text */
    bool has_error_text;
};
/* The attempts summed per key, each array sorted by its key (so concurrent writers lock rows in one order). */
struct health_rows {
    struct health_minute_row *minutes;
    struct health_latency_row *latencies;
    struct health_failure_row *failures;
    struct health_last_row *lasts;
    size_t n_minutes, n_latencies, n_failures, n_lasts;
};
/* Strings stay borrowed from a. HOOKD_ENOMEM on failure (rows then empty). */
__attribute__((warn_unused_result)) int health_rows_build(const struct health_attempt *a, size_t n,
                                                          struct health_rows *out);
void health_rows_free(struct health_rows *r);
/* The minute an instant falls in (ms, floored). */
int64_t health_minute(int64_t ms);

/* Readers: endpoint_id, attempts, successes, retries_started, retries_ended (struct health_window);
 * endpoint_id, account_null, account, status_code, error_class, count (struct health_failure);
 * STORE_RESOURCE_SYNC_COLUMNS (struct resource_sync). */
int store_read_health_window(const struct store_row *r, void *item);
int store_read_health_failure(const struct store_row *r, void *item);
#define STORE_RESOURCE_SYNC_COLUMNS                                                                     \
    "d.endpoint_id, o.id, o.event_type, o.resource_version, o.created_at, d.status, d.attempt_count, " \
    "d.last_attempt_at, d.next_attempt_at, d.delivered_at, d.last_status_code, d.last_error"
int store_read_resource_sync(const struct store_row *r, void *item);
void store_free_health_failure(void *item);
void store_free_resource_sync(void *item);
#endif
