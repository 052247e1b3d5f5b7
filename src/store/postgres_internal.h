/*
 * Private to the PostgreSQL backend (postgres*.c): the connection struct, its
 * lazily prepared statements, and what its files offer each other: the
 * connection (postgres_conn.c), statements and transactions (postgres_txn.c),
 * parameters, arrays and result reading (postgres_params.c).
 */
#ifndef HOOKD_STORE_POSTGRES_INTERNAL_H
#define HOOKD_STORE_POSTGRES_INTERNAL_H
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "log.h"
#include "store/health_sql.h"
#include "store/store_common.h"

/*
 * Slots of the prepared statements (named "hookd_<slot>" on the connection):
 * the connection's own statements (postgres.c) here, then a range per table
 * family that the family's file numbers, and a few spare ones (tests). A list
 * query has one slot per combination of filters present (a bit mask).
 */
enum pg_slot {
    PG_META_GET,
    PG_META_SET,
    PG_CONN_END
};
enum {
    PG_EVENTS = 32,                    /* postgres_events.c */
    PG_ENDPOINTS = PG_EVENTS + 64,     /* postgres_endpoints.c */
    PG_DELIVERIES = PG_ENDPOINTS + 32, /* postgres_deliveries.c */
    PG_ENDPOINT_STATE = PG_DELIVERIES + 800, /* postgres_endpoint_state.c */
    PG_SOURCES = PG_ENDPOINT_STATE + 16, /* postgres_sources.c */
    PG_INBOX = PG_SOURCES + 16,        /* postgres_inbox.c */
    PG_REJECTIONS = PG_INBOX + 144,    /* postgres_rejections.c */
    PG_MACHINES = PG_REJECTIONS + 16,  /* postgres_machines.c */
    PG_REPLAYS = PG_MACHINES + 32,     /* postgres_replays.c */
    PG_TOKENS = PG_REPLAYS + 16,       /* postgres_tokens.c */
    PG_OPS = PG_TOKENS + 16,           /* postgres_ops.c */
    PG_HEALTH = PG_OPS + 16,           /* postgres_health.c */
    PG_STATS = PG_HEALTH + 32,         /* postgres_stats.c */
    PG_SPARE = PG_STATS + 8,         /* no statement of the backend uses these (tests) */
    PG_SLOTS = PG_SPARE + 4,
};
_Static_assert((int)PG_CONN_END <= (int)PG_EVENTS, "the connection's statements overflow their slots");

/* The writer's per-op savepoint is sent lazily (see postgres.c). */
enum pg_savepoint { PG_SP_NONE, PG_SP_WANTED, PG_SP_ACTIVE };

/*
 * The relay's floor (DESIGN §3, "The outbox take's floor"): every outbox row
 * with seq <= floor is dispatched, so a take scans above it and never walks
 * the dispatched rows' dead entries in hookd_outbox_undispatched. cand is a
 * seq the floor may move to once every transaction in progress when it was
 * seen (those with ids below cand_xmax) has ended. All 0: scan from the start.
 */
struct pg_outbox_floor {
    int64_t floor, cand, cand_xmax;
    int64_t stepped_at, swept_at; /* monotonic ms of the last floor step and of the last scan from the start */
    bool took_in_tx;              /* a take marked rows in the open transaction: no step until it ends */
};
#define PG_OUTBOX_FLOOR_EVERY_MS 100 /* the floor is moved at most this often */
#define PG_OUTBOX_SWEEP_EVERY_MS 1000 /* and a take scans from the start this often */

struct store {
    const struct store_ops *ops; /* first member: store_backend() reads it */
    PGconn *conn;
    bool prepared[PG_SLOTS];     /* on this connection; cleared by a reconnect */
    bool tx_open;                /* inside begin .. commit/rollback */
    bool atomic_own;             /* pg_atomic_begin opened a transaction of its own */
    bool begin_pending;          /* BEGIN not sent yet: it goes with the first statement */
    enum pg_savepoint sp;
    bool sp_release_pending;     /* a released savepoint still exists on the server */
    bool listening;              /* LISTEN <channel> issued on this connection */
    char channel[32];            /* what changed() listens on: "" is STORE_CHANNEL_OUTBOX */
    int64_t reset_at_ms;         /* monotonic time of the last reconnect attempt */
    int64_t lock_wait_ms;        /* store_lock_wait's bound (0: the connection options'), set again after a reconnect */
    bool quiet_outbox;           /* store_quiet_outbox was called: set again after a reconnect */
    bool session_stale;          /* those settings could not be made again on the new session yet */
    int64_t unrecorded_checked_at; /* the claims' last look for unrecorded leases run out (ms) */
    struct pg_outbox_floor floor; /* where this session's outbox takes start (postgres_events.c) */
    int64_t maintained_at;        /* monotonic ms of the last maintenance (postgres_maintain) */
    struct log_limiter lim;
};

/* ---- the connection (postgres_conn.c) ---- */

/* What store_quiet_outbox sets on a session (read by hookd_outbox_notify()). */
#define PG_QUIET_OUTBOX_SQL "SET hookd.outbox_notify = off"

/* Connects s->conn to dsn with hookd's session options; on failure s->conn may
 * still need PQfinish. HOOKD_EUNAVAIL when the server cannot be reached. */
__attribute__((warn_unused_result)) int pg_connect(struct store *s, const char *dsn);
/* Before any statement: reconnects a broken connection where it safely can;
 * HOOKD_EUNAVAIL while it is down. */
__attribute__((warn_unused_result)) int pg_ready(struct store *s);
/* Maps a failed result (NULL: out of memory or the connection broke) to a
 * hookd error, logging unexpected ones; pg_check is 0 for a successful one. */
int pg_fail(struct store *s, const PGresult *res);
int pg_check(struct store *s, const PGresult *res);

/* ---- parameters, arrays and columns (postgres_params.c) ---- */

/* Parameters of one statement, in text format: $1 is index 1. Every
 * parameter of a statement is set on every call, with the same type. */
#define PG_MAX_PARAMS 24
struct pg_params {
    int n; /* highest index set */
    const char *values[PG_MAX_PARAMS];
    Oid types[PG_MAX_PARAMS];
    char num[PG_MAX_PARAMS][24];
};
void pg_param_text(struct pg_params *p, int i, const char *v); /* NULL: SQL NULL */
void pg_param_i64(struct pg_params *p, int i, int64_t v);
void pg_param_int(struct pg_params *p, int i, int v);
void pg_param_bool(struct pg_params *p, int i, bool v);
void pg_param_time(struct pg_params *p, int i, int64_t ms); /* 0: SQL NULL */
void pg_param_null(struct pg_params *p, int i, Oid type);
/* Sets v[i] as parameter i + 1, for i < n. */
void pg_param_values(struct pg_params *p, const struct store_value *v, int n);
/* Arrays, passed as text literals the caller built. */
void pg_param_text_array(struct pg_params *p, int i, const char *literal);
void pg_param_i64_array(struct pg_params *p, int i, const char *literal);

/*
 * An array literal ("{…}") built element by element, for the statements that
 * take one array per column and unnest them into rows: one round trip and one
 * plan for a whole batch. Elements are quoted and escaped; NULL is SQL NULL.
 * An allocation failure is remembered and reported by pg_array_end.
 */
struct pg_array {
    char *buf; /* heap; free with pg_array_free */
    size_t len, cap;
    bool failed;
};
void pg_array_text(struct pg_array *a, const char *v);
void pg_array_i64(struct pg_array *a, int64_t v);
void pg_array_time(struct pg_array *a, int64_t ms); /* 0: NULL */
void pg_array_value(struct pg_array *a, const struct store_value *v); /* text, or a number (bool: 0/1) */
/* Closes the literal (no element may follow); returns it (owned by a) or NULL on allocation failure. */
const char *pg_array_end(struct pg_array *a);
/* The closed literal of the n texts v (owned by a: free it either way), or NULL on allocation failure. */
const char *pg_array_texts(struct pg_array *a, const char *const *v, size_t n);
void pg_array_free(struct pg_array *a);

/* Type oids (pg_type.h is a server header). */
#define PG_OID_BOOL 16
#define PG_OID_INT8 20
#define PG_OID_INT4 23
#define PG_OID_TEXT 25
#define PG_OID_TEXT_ARRAY 1009
#define PG_OID_INT8_ARRAY 1016

/* ---- statements and transactions (postgres_txn.c) ---- */

/*
 * Runs the statement of slot, preparing sql on this connection on first use.
 * On success *res is the result (the caller PQclear()s it); on failure it is
 * NULL and the error is mapped (connection loss: HOOKD_EUNAVAIL).
 */
__attribute__((warn_unused_result)) int pg_run(struct store *s, int slot, const char *sql, const struct pg_params *p,
                                               PGresult **res);
/*
 * pg_run for a report that runs seldom (every alert interval, every metrics
 * scrape) over tables whose size swings by orders of magnitude: the unnamed
 * statement, planned at each run with its parameters and the statistics of
 * then, where a prepared statement keeps the generic plan of its first run
 * (made at startup, from an empty database's statistics: measured beside 8
 * hung endpoints, the alert signals' plan counted the retrying rows through
 * the due index, every open row, and joined the window's attempts to the
 * whole delivery table, 1,078 ms; planned at each run, 43 ms). Planning costs
 * a millisecond or two, nothing at these rates. Inside a transaction whose
 * BEGIN is still to be sent it is pg_run.
 */
__attribute__((warn_unused_result)) int pg_run_planned(struct store *s, int slot, const char *sql,
                                                       const struct pg_params *p, PGresult **res);
/* One statement of pg_run_many. */
struct pg_stmt {
    int slot;
    const char *sql;
    const struct pg_params *p; /* NULL: none */
};
#define PG_PIPELINE_MAX 5
/*
 * Runs up to PG_PIPELINE_MAX statements in one round trip (a libpq pipeline),
 * one after the other on the server, each in a snapshot of its own as
 * always in READ COMMITTED. res[i] gets statement i's result; on failure
 * (the first failed statement's error) every res[i] is NULL, and the
 * statements after the failed one did not run.
 */
__attribute__((warn_unused_result)) int pg_run_many(struct store *s, const struct pg_stmt *st, int n,
                                                    PGresult **res);
/* pg_run for a statement without result rows; *rows gets the affected row count (may be NULL). */
__attribute__((warn_unused_result)) int pg_run_command(struct store *s, int slot, const char *sql,
                                                       const struct pg_params *p, int64_t *rows);
/* Runs plain SQL text (transaction control, migrations) through the simple protocol. */
__attribute__((warn_unused_result)) int pg_exec(struct store *s, const char *sql);

/* Several statements as one unit: outside a transaction a BEGIN .. COMMIT of
 * its own; inside one nothing (the caller's savepoint undoes a failed method).
 * pg_atomic_end returns result, or the commit's error. Not nestable: a method
 * inside a pair calls no other method that takes one. */
__attribute__((warn_unused_result)) int pg_atomic_begin(struct store *s);
__attribute__((warn_unused_result)) int pg_atomic_end(struct store *s, int result);

/* The transaction methods of store_postgres_ops. */
int postgres_begin(struct store *s);
int postgres_commit(struct store *s);
int postgres_commit_lazy(struct store *s);
int postgres_rollback(struct store *s);
int postgres_savepoint(struct store *s);
int postgres_release(struct store *s);
int postgres_rollback_to(struct store *s);

/* ---- columns and rows (postgres_params.c) ---- */

/* Column reading. Text: a heap copy or NULL for SQL NULL; *ok turns false on OOM. */
char *pg_col_str(const PGresult *r, int row, int col, bool *ok);
void pg_col_id(const PGresult *r, int row, int col, char out[HOOKD_ID_MAX]);
int64_t pg_col_i64(const PGresult *r, int row, int col); /* NULL reads as 0 */
bool pg_col_null(const PGresult *r, int row, int col);

/*
 * The row readers (store_common.h): pg_rows_read appends every row of res to
 * the list, which is left empty on failure. pg_get runs a statement (as
 * pg_run) and reads its first row into *item (HOOKD_ENOTFOUND for none);
 * pg_list runs one and reads every row. Both clear the result.
 */
__attribute__((warn_unused_result)) int pg_rows_read(const PGresult *res, store_read_fn read, struct store_rows rows);
/* Row `row` of res into *item (the caller knows it exists); res is not cleared. */
__attribute__((warn_unused_result)) int pg_row_read(const PGresult *res, int row, store_read_fn read, void *item);
__attribute__((warn_unused_result)) int pg_get(struct store *s, int slot, const char *sql, const struct pg_params *p,
                                               store_read_fn read, void *item);
__attribute__((warn_unused_result)) int pg_list(struct store *s, int slot, const char *sql, const struct pg_params *p,
                                                store_read_fn read, struct store_rows rows);
/* pg_list through pg_run_planned. */
__attribute__((warn_unused_result)) int pg_list_planned(struct store *s, int slot, const char *sql,
                                                        const struct pg_params *p, store_read_fn read,
                                                        struct store_rows rows);

/*
 * A family of records read by id and listed newest id first, optionally one
 * account's (tokens, replays): sel is its "SELECT <columns> FROM <table>",
 * id and account its columns as sel names them. pg_get_by_id reads the
 * record id into *item (item_size bytes, cleared first; PG_BY_ID_SQL);
 * pg_list_newest reads a page of at most limit below before_id (NULL: from
 * the newest), with slot/sql for every account and slot_of/sql_of for
 * account's only (PG_NEWEST_SQL, PG_NEWEST_OF_SQL).
 */
/* A version counter in hookd_meta (bumped by triggers, so plain SQL counts; it moves only at commit):
 * *version gets its value, 0 while the row is missing. */
#define PG_META_COUNTER_SQL(key) "SELECT value::bigint FROM hookd_meta WHERE key = '" key "'"
__attribute__((warn_unused_result)) int pg_meta_counter(struct store *s, int slot, const char *sql, int64_t *version);

#define PG_BY_ID_SQL(sel, id) sel " WHERE " id " = $1"
#define PG_NEWEST_SQL(sel, id) sel " WHERE ($1::text IS NULL OR " id " < $1) ORDER BY " id " DESC LIMIT $2"
#define PG_NEWEST_OF_SQL(sel, id, account)                                                                  \
    sel " WHERE " account " = $3 AND ($1::text IS NULL OR " id " < $1) ORDER BY " id " DESC LIMIT $2"
__attribute__((warn_unused_result)) int pg_get_by_id(struct store *s, int slot, const char *sql, const char *id,
                                                     store_read_fn read, void *item, size_t item_size);
__attribute__((warn_unused_result)) int pg_list_newest(struct store *s, int slot, const char *sql, int slot_of,
                                                       const char *sql_of, const char *before_id,
                                                       const char *account, int limit, store_read_fn read,
                                                       struct store_rows rows);

/* The table families (postgres_events.c, postgres_endpoints.c, postgres_deliveries.c). */
extern const struct store_event_ops postgres_event_ops;
extern const struct store_endpoint_ops postgres_endpoint_ops;
extern const struct store_delivery_ops postgres_delivery_ops;
extern const struct store_endpoint_state_ops postgres_endpoint_state_ops;
extern const struct store_source_ops postgres_source_ops;       /* postgres_sources.c */
extern const struct store_inbox_ops postgres_inbox_ops;         /* postgres_inbox.c */
extern const struct store_rejection_ops postgres_rejection_ops; /* postgres_rejections.c */
extern const struct store_machine_ops postgres_machine_ops;     /* postgres_machines.c */
/* The inbox's fenced outcome as a statement over p (postgres_inbox.c), also sent with a decision's writes. */
struct pg_stmt pg_inbox_complete_stmt(const struct inbox_result *r, int64_t now, struct pg_params *p);
extern const struct store_replay_ops postgres_replay_ops;       /* postgres_replays.c */
extern const struct store_token_ops postgres_token_ops;         /* postgres_tokens.c */
extern const struct store_alert_ops postgres_alert_ops;         /* postgres_ops.c */
extern const struct store_upkeep_ops postgres_upkeep_ops;       /* postgres_ops.c */
extern const struct store_health_ops postgres_health_ops;       /* postgres_health.c */
extern const struct store_stats_ops postgres_stats_ops;         /* postgres_stats.c */

/* expire_paused's WHERE over hookd_deliveries d ($1 now, $2 the window; STORE_EXPIRE_PAUSED_WHERE says why). */
#define PG_EXPIRE_PAUSED_WHERE                                                                   \
    STORE_EXPIRE_PAUSED_WHERE("d", "$1::bigint", "$2::bigint", HEALTH_STATUS_IN("d."),           \
                              "= ANY (ARRAY(" STORE_PAUSED_ENDPOINTS "))")

#endif
