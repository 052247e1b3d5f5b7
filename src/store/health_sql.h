/*
 * The health family's reads, the same SQL for both backends: a backend
 * defines HP(n) as its placeholder ("?" #n or "$" #n) before including this.
 * Every query of hookd_deliveries repeats the partial index's predicate word
 * for word, so SQLite (which proves only identical terms) uses the index too.
 * They read the view hookd_deliveries_all: on PostgreSQL it adds the
 * deliveries in flight before their first result (pending), which have no row
 * yet; on SQLite it is the table.
 */
#ifndef HOOKD_STORE_HEALTH_SQL_H
#define HOOKD_STORE_HEALTH_SQL_H

/*
 * The statuses hookd_deliveries_endpoint_status holds (open and failed), in
 * the form of the backend's index predicate; q qualifies the column ("" or
 * "d."). A backend defines HEALTH_STATUS_TERM(q) as one of these before it
 * includes this file. SQLite's are comparisons: it evaluates an IN list of
 * more than two values through an ephemeral table built for each statement,
 * and a partial index's predicate runs at every insert of a delivery and at
 * every change of its status (twice: the old row and the new).
 */
#define HEALTH_STATUS_IN(q) q "status IN ('pending', 'retrying', 'dead', 'skipped')"
#define HEALTH_STATUS_OR(q) \
    "(" q "status = 'pending' OR " q "status = 'retrying' OR " q "status = 'dead' OR " q "status = 'skipped')"

/* One endpoint's deliveries by status: an index-only scan of hookd_deliveries_endpoint_status. */
#define HEALTH_SQL_COUNTS                                                                                \
    "SELECT status, count(*) FROM hookd_deliveries_all WHERE endpoint_id = " HP(1) " AND " HEALTH_STATUS_TERM("") \
    " GROUP BY status"

/* The oldest open delivery of endpoint $1 with status s: one probe of the same index. */
#define HEALTH_SQL_OLDEST_OF(s)                                                                          \
    "SELECT id, event_id, created_at FROM hookd_deliveries_all WHERE endpoint_id = " HP(1) " AND "           \
    HEALTH_STATUS_TERM("") " AND status = '" s "' ORDER BY created_at LIMIT 1"
#define HEALTH_SQL_OLDEST_OPEN                                                                           \
    "SELECT * FROM (" HEALTH_SQL_OLDEST_OF("pending") ") p UNION ALL SELECT * FROM ("                     \
    HEALTH_SQL_OLDEST_OF("retrying") ") r ORDER BY 3 LIMIT 1"

/* Of every endpoint, the creation time of its oldest pending and oldest retrying delivery (probes). */
#define HEALTH_SQL_OLDEST_PROBE(s)                                                                       \
    "(SELECT d.created_at FROM hookd_deliveries_all d WHERE d.endpoint_id = e.id AND " HEALTH_STATUS_TERM("d.") \
    " AND d.status = '" s "' ORDER BY d.created_at LIMIT 1)"
#define HEALTH_SQL_OLDEST_ALL                                                                            \
    "SELECT e.id, " HEALTH_SQL_OLDEST_PROBE("pending") ", " HEALTH_SQL_OLDEST_PROBE("retrying")          \
    " FROM hookd_endpoints e"

#define HEALTH_SQL_ACTIVITY_LAST                                                                         \
    "SELECT max(last_attempt_at), max(last_success_at) FROM hookd_endpoint_last WHERE endpoint_id = " HP(1)
#define HEALTH_SQL_ACTIVITY_ERROR                                                                        \
    "SELECT last_error_at, last_error_status_code, last_error_class, last_error FROM hookd_endpoint_last" \
    " WHERE endpoint_id = " HP(1) " AND last_error_at IS NOT NULL ORDER BY last_error_at DESC LIMIT 1"

#define HEALTH_SQL_WINDOW                                                                                \
    "SELECT endpoint_id, sum(attempts), sum(successes), sum(retries_started), sum(retries_ended)"         \
    " FROM hookd_endpoint_minutes WHERE endpoint_id = " HP(1) " AND minute >= " HP(2) " GROUP BY endpoint_id"
#define HEALTH_SQL_WINDOW_LATENCY                                                                        \
    "SELECT bucket, sum(count) FROM hookd_latency_minutes WHERE endpoint_id = " HP(1) " AND minute >= "  \
    HP(2) " GROUP BY bucket"

#define HEALTH_SQL_SUMMARY_WINDOWS                                                                       \
    "SELECT endpoint_id, sum(attempts), sum(successes), sum(retries_started), sum(retries_ended)"         \
    " FROM hookd_endpoint_minutes WHERE minute >= " HP(1) " GROUP BY endpoint_id ORDER BY endpoint_id"
#define HEALTH_SQL_SUMMARY_FAILURES                                                                      \
    "SELECT endpoint_id, account_null, account, status_code, error_class, sum(count)"                   \
    " FROM hookd_failure_minutes WHERE minute >= " HP(1)                                                 \
    " GROUP BY endpoint_id, account_null, account, status_code, error_class ORDER BY endpoint_id"

/* The newest events of a resource (and account), each endpoint's newest delivery of them. */
#define HEALTH_SQL_RESOURCE(account_term)                                                                \
    "SELECT * FROM (SELECT " STORE_RESOURCE_SYNC_COLUMNS ", row_number() OVER"                           \
    " (PARTITION BY d.endpoint_id ORDER BY o.seq DESC) AS rn FROM (SELECT seq, id, event_type,"          \
    " resource_version, created_at FROM hookd_outbox WHERE resource_id IS NOT NULL AND resource_type = "  \
    HP(1) " AND resource_id = " HP(2) account_term " ORDER BY seq DESC LIMIT " HP(3) ") o"               \
    " JOIN hookd_deliveries_all d ON d.event_id = o.id WHERE d.status <> 'superseded') x WHERE rn = 1"       \
    " ORDER BY endpoint_id"
#define HEALTH_SQL_RESOURCE_ANY HEALTH_SQL_RESOURCE("")
#define HEALTH_SQL_RESOURCE_ACCOUNT HEALTH_SQL_RESOURCE(" AND account = " HP(4))

#define HEALTH_SQL_PURGE(table) "DELETE FROM " table " WHERE minute < " HP(1)
#endif
