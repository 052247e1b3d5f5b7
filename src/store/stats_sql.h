/*
 * The statements of the dashboard's series, shared by both backends: counts per
 * minute over the index on each time column, and the refusal counters summed.
 * The includer defines SP(n), its parameter marker, and STATS_SQL_PER_MINUTE, one of
 * the two shapes below.
 */
#ifndef HOOKD_STORE_STATS_SQL_H
#define HOOKD_STORE_STATS_SQL_H

/*
 * Rows per minute of [$1, $2), counted over the index on the time column, in
 * one of two shapes, whichever the backend runs faster (100,000 rows in the
 * hour, GET /v1/stats median): one count per minute, each a range of the index
 * (SQLite: 22 ms, against 194 ms grouped); one GROUP BY over the range
 * (PostgreSQL: 28 ms, against 39 ms probed). STATS_SQL_PROBED needs the
 * includer's STATS_MINUTES, a WITH clause naming the minutes' starts minutes(at).
 */
#define STATS_SQL_PROBED(table, column)                                                                 \
    STATS_MINUTES "SELECT at, (SELECT count(*) FROM " table " WHERE " column " >= at AND " column        \
                  " < at + 60000) FROM minutes"
#define STATS_SQL_GROUPED(table, column)                                                                \
    "SELECT " column " - " column " % 60000, count(*) FROM " table " WHERE " column " >= " SP(1)          \
    " AND " column " < " SP(2) " GROUP BY 1"
#define STATS_SQL_EVENTS STATS_SQL_PER_MINUTE("hookd_outbox", "created_at")
#define STATS_SQL_INBOUND STATS_SQL_PER_MINUTE("hookd_inbox", "received_at")
#define STATS_SQL_ATTEMPTS                                                                              \
    "SELECT minute, sum(attempts), sum(successes) FROM hookd_endpoint_minutes WHERE minute >= " SP(1)     \
    " AND minute < " SP(2) " GROUP BY minute"
#define STATS_SQL_ENDPOINT_ATTEMPTS                                                                     \
    "SELECT minute, sum(attempts), sum(successes) FROM hookd_endpoint_minutes WHERE endpoint_id = " SP(3)  \
    " AND minute >= " SP(1) " AND minute < " SP(2) " GROUP BY minute"
#define STATS_SQL_REJECTED                                                                              \
    "SELECT reason, sum(count), max(last_at) FROM hookd_rejection_counts GROUP BY reason ORDER BY reason"

#endif
