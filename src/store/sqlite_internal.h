/*
 * Private to the SQLite backend (sqlite*.c): the connection struct, its cache
 * of persistent prepared statements, and helpers shared by the table families.
 */
#ifndef HOOKD_STORE_SQLITE_INTERNAL_H
#define HOOKD_STORE_SQLITE_INTERNAL_H
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/store_common.h"

/*
 * Slots of the statement cache: the connection's own statements (sqlite.c)
 * here, then a range per table family that the family's file numbers. A list
 * query has one slot per combination of filters present (a bit mask), so
 * each combination gets a plan that uses its index.
 */
enum sq_slot {
    SQ_BEGIN,
    SQ_COMMIT,
    SQ_ROLLBACK,
    SQ_SAVEPOINT,
    SQ_RELEASE,
    SQ_ROLLBACK_TO,
    SQ_ROLLBACK_TO_RELEASE,
    SQ_ATOMIC_BEGIN,
    SQ_ATOMIC_RELEASE,
    SQ_ATOMIC_ROLLBACK,
    SQ_ATOMIC_ROLLBACK_RELEASE,
    SQ_DATA_VERSION,
    SQ_META_GET,
    SQ_META_SET,
    SQ_CONN_END
};
enum {
    SQ_EVENTS = 32,                    /* sqlite_events.c */
    SQ_ENDPOINTS = SQ_EVENTS + 64,     /* sqlite_endpoints.c */
    SQ_DELIVERIES = SQ_ENDPOINTS + 32, /* sqlite_deliveries.c */
    SQ_ENDPOINT_STATE = SQ_DELIVERIES + 448, /* sqlite_endpoint_state.c */
    SQ_SOURCES = SQ_ENDPOINT_STATE + 16, /* sqlite_sources.c */
    SQ_INBOX = SQ_SOURCES + 16,        /* sqlite_inbox.c */
    SQ_REJECTIONS = SQ_INBOX + 144,    /* sqlite_rejections.c */
    SQ_MACHINES = SQ_REJECTIONS + 16,  /* sqlite_machines.c */
    SQ_HOLD = SQ_MACHINES + 24,        /* sqlite_hold.c */
    SQ_REPLAYS = SQ_MACHINES + 32,     /* sqlite_replays.c */
    SQ_TOKENS = SQ_REPLAYS + 16,       /* sqlite_tokens.c */
    SQ_OPS = SQ_TOKENS + 16,           /* sqlite_ops.c */
    SQ_HEALTH = SQ_OPS + 16,           /* sqlite_health.c */
    SQ_STATS = SQ_HEALTH + 32,         /* sqlite_stats.c */
    SQ_SLOTS = SQ_STATS + 8,
};
_Static_assert((int)SQ_CONN_END <= (int)SQ_EVENTS, "the connection's statements overflow their slots");

struct store {
    const struct store_ops *ops; /* first member: store_backend() reads it */
    sqlite3 *db;
    sqlite3_stmt *stmts[SQ_SLOTS];
    int64_t data_version; /* last PRAGMA data_version seen */
    bool data_version_known;
    bool atomic_own;      /* sq_atomic_begin opened the method savepoint */
    int atomic_depth;     /* sq_atomic_begin calls not yet ended (methods calling methods) */
    int64_t busy_since_ms; /* start of the current wait for a lock (sqlite_busy_wait) */
    int64_t busy_timeout_ms; /* sqlite_lock_wait; 0: BUSY_TIMEOUT_MS */
    struct sq_checkpointer *ckpt; /* sqlite_checkpoint_aside; NULL: SQLite's own checkpoints */
    int shm_fd;           /* SQLite's descriptor of the -shm file, found by sqlite_others_open; -1: not yet */
    struct sq_gather *gather; /* decision_gather's rows while it gathers (sqlite_machines.c); NULL otherwise */
};

/* store_checkpoint_aside (sqlite_checkpoint.c); the stop is sqlite_close's, before the connection goes. */
int sqlite_checkpoint_aside(struct store *s);
void sqlite_checkpoint_due(struct store *s);
void sqlite_checkpoint_stop(struct store *s);

/* Frees what decision_gather kept (sqlite_machines.c): the connection closes. */
void sqlite_gather_free(struct store *s);

/*
 * A decision's reads (sqlite_hold.c), the machines family's methods
 * entity_get and entity_hold; the hold reads the machine through
 * sqlite_machine_get (sqlite_machines.c), the family's get.
 */
int sqlite_entity_get(struct store *s, const char *kind, const char *id, struct entity_record *out);
int sqlite_entity_hold(struct store *s, const char *machine, const char *kind, const char *id,
                       const struct hold_window *w, struct entity_hold *out);
int sqlite_machine_get(struct store *s, const char *name, struct machine_record *out);

/* The inbox family's fenced outcome (sqlite_inbox.c), also written by a decision's writes (sqlite_machines.c). */
int sqlite_inbox_complete(struct store *s, const struct inbox_result *r, int64_t now);

/* Unix milliseconds in SQL. */
#define SQ_NOW_MS "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"

/* Maps an SQLite result code to a hookd_error, logging unexpected ones. */
int sq_error(struct store *s, int rc);
/* The cached statement of slot, prepared from sql on first use. The caller
 * must sq_reset() it when done so no read snapshot stays open. */
__attribute__((warn_unused_result)) int sq_stmt(struct store *s, int slot, const char *sql, sqlite3_stmt **out);
void sq_reset(sqlite3_stmt *st);
/* Runs a statement without result rows (binds none) and resets it. */
__attribute__((warn_unused_result)) int sq_exec(struct store *s, int slot, const char *sql);
/* Steps a bound statement that returns no rows, resets it; *changes gets the row count (may be NULL). */
__attribute__((warn_unused_result)) int sq_run(struct store *s, sqlite3_stmt *st, int *changes);

/* Several statements as one unit. In autocommit mode: a savepoint of its
 * own, released on success, rolled back on failure. Inside a transaction:
 * nothing, as the caller's savepoint (the writer's per-op one) undoes a
 * failed method when the op returns its error, which ops must do (on
 * PostgreSQL an error aborts the transaction anyway). sq_atomic_end returns
 * result, or the savepoint's own error. A method that calls others nests
 * pairs: only the outermost takes the savepoint. */
__attribute__((warn_unused_result)) int sq_atomic_begin(struct store *s);
__attribute__((warn_unused_result)) int sq_atomic_end(struct store *s, int result);

/* Binding: NULL text and 0 times become SQL NULL. */
int sq_bind_text(sqlite3_stmt *st, int i, const char *v);
int sq_bind_time(sqlite3_stmt *st, int i, int64_t ms);
/* Binds v[i] as parameter i + 1, for i < n. */
void sq_bind_values(sqlite3_stmt *st, const struct store_value *v, int n);

/* Column reading. Text: a heap copy or NULL for SQL NULL; *ok turns false on OOM. */
char *sq_col_str(sqlite3_stmt *st, int i, bool *ok);
void sq_col_id(sqlite3_stmt *st, int i, char out[HOOKD_ID_MAX]);
int64_t sq_col_i64(sqlite3_stmt *st, int i); /* NULL reads as 0 */

/*
 * The row readers: a bound statement stepped, its rows read by a
 * store_read_fn (store_common.h), and the statement reset. sq_row_read reads
 * the first row into *item (HOOKD_ENOTFOUND for none); sq_rows_read appends
 * up to max_rows rows to the list, which is left empty on failure.
 */
__attribute__((warn_unused_result)) int sq_row_read(struct store *s, sqlite3_stmt *st, store_read_fn read,
                                                    void *item);
__attribute__((warn_unused_result)) int sq_rows_read(struct store *s, sqlite3_stmt *st, size_t max_rows,
                                                     store_read_fn read, struct store_rows rows);
/*
 * A family of records read by id and listed newest id first, optionally one
 * account's (tokens, replays), as pg_get_by_id and pg_list_newest
 * (postgres_internal.h) with SQ_BY_ID_SQL, SQ_NEWEST_SQL and SQ_NEWEST_OF_SQL.
 */
/* A version counter in hookd_meta, as pg_meta_counter (postgres_internal.h). */
#define SQ_META_COUNTER_SQL(key) "SELECT CAST(value AS INTEGER) FROM hookd_meta WHERE key = '" key "'"
__attribute__((warn_unused_result)) int sq_meta_counter(struct store *s, int slot, const char *sql, int64_t *version);

#define SQ_BY_ID_SQL(sel, id) sel " WHERE " id " = ?1"
#define SQ_NEWEST_SQL(sel, id) sel " WHERE (?1 IS NULL OR " id " < ?1) ORDER BY " id " DESC LIMIT ?2"
#define SQ_NEWEST_OF_SQL(sel, id, account)                                                                  \
    sel " WHERE " account " = ?3 AND (?1 IS NULL OR " id " < ?1) ORDER BY " id " DESC LIMIT ?2"
__attribute__((warn_unused_result)) int sq_get_by_id(struct store *s, int slot, const char *sql, const char *id,
                                                     store_read_fn read, void *item, size_t item_size);
__attribute__((warn_unused_result)) int sq_list_newest(struct store *s, int slot, const char *sql, int slot_of,
                                                       const char *sql_of, const char *before_id,
                                                       const char *account, int limit, store_read_fn read,
                                                       struct store_rows rows);
/* Steps a bound statement for one row and resets it: *v gets column 0 as an
 * integer; HOOKD_ENOTFOUND for no row. */
__attribute__((warn_unused_result)) int sq_get_i64(struct store *s, sqlite3_stmt *st, int64_t *v);

/* The table families (sqlite_events.c, sqlite_endpoints.c, sqlite_deliveries.c). */
extern const struct store_event_ops sqlite_event_ops;
extern const struct store_endpoint_ops sqlite_endpoint_ops;
extern const struct store_delivery_ops sqlite_delivery_ops;
extern const struct store_endpoint_state_ops sqlite_endpoint_state_ops;
extern const struct store_source_ops sqlite_source_ops;       /* sqlite_sources.c */
extern const struct store_inbox_ops sqlite_inbox_ops;         /* sqlite_inbox.c */
extern const struct store_rejection_ops sqlite_rejection_ops; /* sqlite_rejections.c */
extern const struct store_machine_ops sqlite_machine_ops;     /* sqlite_machines.c */
extern const struct store_replay_ops sqlite_replay_ops;       /* sqlite_replays.c */
extern const struct store_token_ops sqlite_token_ops;         /* sqlite_tokens.c */
extern const struct store_alert_ops sqlite_alert_ops;         /* sqlite_ops.c */
extern const struct store_upkeep_ops sqlite_upkeep_ops;       /* sqlite_ops.c */
extern const struct store_health_ops sqlite_health_ops;       /* sqlite_health.c */
extern const struct store_stats_ops sqlite_stats_ops;         /* sqlite_stats.c */
#endif
