/*
 * The statements of the dashboard's series, shared by both backends: events
 * and inbound items counted per minute by their ids, attempts per minute, and
 * the refusal counters summed. The includer defines SP(n), its parameter
 * marker, and picks its dialect's parts below (STATS_SQLITE_* or STATS_PG_*)
 * as STATS_MINUTES, a WITH clause naming the minutes' starts minutes(at) over
 * [SP(1), SP(2)); STATS_HEX12(x), x as 12 lower-case hex digits; STATS_ODD;
 * and STATS_INDEXED(index), how a subquery names the index it walks.
 */
#ifndef HOOKD_STORE_STATS_SQL_H
#define HOOKD_STORE_STATS_SQL_H

/*
 * Rows per minute of [$1, $2) by their time column, without an index on it
 * (one B-tree less to write per event and per inbound item). A row written by
 * hookd or by a bare INSERT has an id that starts with its prefix and the 12
 * hex digits of that time (core/ids.h; the SQL default takes the same
 * millisecond as the time column's default), so its minute is a range of the
 * id index: prefix + hex12(at) <= id < prefix + hex12(at + 60000). A row whose
 * id does not encode its time (an id chosen by a client, a time written by
 * SQL) is in two partial indexes, on the id and on the time, that stay empty
 * otherwise: the count is exact for every row,
 *   rows whose id is in the range - odd rows whose id is in the range
 *   + odd rows whose time is in the minute.
 * 100,000 rows in the hour, GET /v1/stats median: bench/RESULTS.md, session 7.
 */
/*
 * A row whose id does not encode its time column, in each backend's SQL: the
 * partial indexes of the migrations stats_by_id hold these rows only, and a
 * query walks them only when its condition is this very text. Never edit it:
 * a change is a new migration with new indexes. PostgreSQL's lpad cuts a long
 * value short, hence the range of 12 hex digits; SQLite's printf never does.
 */
#define STATS_ODD_SQLITE(prefix, column) "substr(id, 1, 16) <> '" prefix "' || printf('%012x', " column ")"
#define STATS_ODD_PG(prefix, column)                                                                    \
    "NOT (" column " >= 0 AND " column " < 281474976710656 AND substr(id, 1, 16) = '" prefix "'"          \
    " || lpad(to_hex(" column "), 12, '0'))"

#define STATS_SQLITE_MINUTES                                                                            \
    "WITH RECURSIVE minutes(at) AS (SELECT ?1 UNION ALL SELECT at + 60000 FROM minutes WHERE at + 60000 < ?2) "
#define STATS_SQLITE_HEX12(x) "printf('%012x', " x ")"
/* SQLite has no statistics here: the odd rows' subqueries name their (mostly empty) index. */
#define STATS_SQLITE_INDEXED(index) " INDEXED BY " index
#define STATS_PG_MINUTES "WITH minutes(at) AS (SELECT generate_series($1::bigint, $2::bigint - 1, 60000)) "
#define STATS_PG_HEX12(x) "lpad(to_hex(" x "), 12, '0')"
#define STATS_PG_INDEXED(index) ""

#define STATS_ID_RANGE(prefix)                                                                          \
    "id >= '" prefix "' || " STATS_HEX12("at") " AND id < '" prefix "' || " STATS_HEX12("at + 60000")
#define STATS_SQL_BY_ID(table, prefix, column, odd_id, odd_time)                                        \
    STATS_MINUTES "SELECT at, (SELECT count(*) FROM " table " WHERE " STATS_ID_RANGE(prefix) ")"          \
                  " - (SELECT count(*) FROM " table STATS_INDEXED(odd_id) " WHERE " STATS_ODD(prefix, column) \
                  " AND " STATS_ID_RANGE(prefix) ")"                                                     \
                  " + (SELECT count(*) FROM " table STATS_INDEXED(odd_time) " WHERE "                      \
                  STATS_ODD(prefix, column) " AND " column " >= at AND " column " < at + 60000) FROM minutes"
#define STATS_SQL_EVENTS                                                                                \
    STATS_SQL_BY_ID("hookd_outbox", "evt_", "created_at", "hookd_outbox_odd_id", "hookd_outbox_odd_time")
#define STATS_SQL_INBOUND                                                                               \
    STATS_SQL_BY_ID("hookd_inbox", "inb_", "received_at", "hookd_inbox_odd_id", "hookd_inbox_odd_time")
#define STATS_SQL_ATTEMPTS                                                                              \
    "SELECT minute, sum(attempts), sum(successes) FROM hookd_endpoint_minutes WHERE minute >= " SP(1)     \
    " AND minute < " SP(2) " GROUP BY minute"
#define STATS_SQL_ENDPOINT_ATTEMPTS                                                                     \
    "SELECT minute, sum(attempts), sum(successes) FROM hookd_endpoint_minutes WHERE endpoint_id = " SP(3)  \
    " AND minute >= " SP(1) " AND minute < " SP(2) " GROUP BY minute"
#define STATS_SQL_REJECTED                                                                              \
    "SELECT reason, sum(count), max(last_at) FROM hookd_rejection_counts GROUP BY reason ORDER BY reason"

#endif
