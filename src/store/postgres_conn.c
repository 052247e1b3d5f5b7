/*
 * PostgreSQL backend, the connection: session options, opening, recovery
 * after the server went away, and mapping failed results to hookd errors
 * (with the process-wide limiter for connection trouble).
 */
#include "store/postgres_internal.h"

#include <pthread.h>
#include <string.h>

#include "core/clock.h"

#define LOG_PART "store"
#define RESET_INTERVAL_MS 1000       /* at most one reconnect attempt per second per connection */
#define CONNECT_TIMEOUT_S "10"       /* unless the DSN says otherwise */
/*
 * Every query hookd runs is meant to walk an index in order and stop at its
 * limit. On tables that churn and grow fast (a new database fills from empty
 * in seconds, faster than autovacuum's first ANALYZE), the planner's
 * estimates lag behind, and with them it sometimes prefers a sequential scan,
 * or a bitmap scan plus a sort, that reads the whole backlog (measured: 67 ms
 * where the index walk takes 0.3 ms). Both are therefore priced out on
 * hookd's own connections; a query with no other way still gets one. With
 * them gone, a statement's generic plan is as good as a plan made for its
 * parameters, so hookd's prepared statements keep their generic plans
 * instead of being planned again at every run (the server does that for
 * statements with array parameters: 0.3 ms each, two of them per fan-out).
 * The price added to the priced-out paths would make a plan that needs one
 * look expensive enough to be compiled by the JIT (200 ms per run,
 * measured): JIT is off too, as it is best for short queries anyway. A DSN
 * that sets options itself replaces these.
 * No statement of hookd's waits longer than 5 s for a lock an application's
 * transaction holds (lock_timeout; a writer sets its own, shorter one): it
 * fails with HOOKD_EBUSY instead of stalling its thread silently.
 */
#define PLANNER_OPTIONS \
    "-c enable_seqscan=off -c enable_bitmapscan=off -c plan_cache_mode=force_generic_plan -c jit=off" \
    " -c lock_timeout=5000"

/* ---- errors --------------------------------------------------------------- */

/* SQLSTATEs (exact codes first, then classes) and what callers see. */
static const struct {
    const char *state;
    int err;
    bool quiet; /* expected in normal operation: not logged */
} error_map[] = {
    {"23505", HOOKD_EEXISTS, true},   /* unique_violation */
    {"40001", HOOKD_EBUSY, true},     /* serialization_failure */
    {"40P01", HOOKD_EBUSY, false},    /* deadlock_detected */
    {"55P03", HOOKD_EBUSY, true},     /* lock_not_available */
    {"57P01", HOOKD_EUNAVAIL, false}, /* admin_shutdown */
    {"57P02", HOOKD_EUNAVAIL, false}, /* crash_shutdown */
    {"57P03", HOOKD_EUNAVAIL, false}, /* cannot_connect_now */
    {"53300", HOOKD_EUNAVAIL, false}, /* too_many_connections */
    {"08", HOOKD_EUNAVAIL, false},    /* connection exceptions */
    {"23", HOOKD_EINVAL, false},      /* other integrity constraints */
    {"22", HOOKD_EINVAL, false},      /* data exceptions */
};

/*
 * Connection trouble goes through one limiter for the whole process: an
 * outage breaks every connection (writer, claims, relay, readers) at once, and
 * each reporting it on its own would multiply the lines by their number.
 */
static pthread_mutex_t conn_log_mu = PTHREAD_MUTEX_INITIALIZER;
static struct log_limiter conn_log; /* under conn_log_mu */

static void conn_log_warn(const char *what, const char *msg)
{
    pthread_mutex_lock(&conn_log_mu);
    log_limited(&conn_log, LOG_WARN, LOG_PART, "postgres: %s%.*s", what, (int)strcspn(msg, "\n"), msg);
    pthread_mutex_unlock(&conn_log_mu);
}

static void conn_log_reset(void)
{
    pthread_mutex_lock(&conn_log_mu);
    log_limiter_reset(&conn_log, LOG_PART, "postgres connections");
    pthread_mutex_unlock(&conn_log_mu);
}

/* Maps a failed result (or none: out of memory, or the connection broke) to
 * a hookd_error, logging unexpected ones at most at the limiter's pace. Only
 * the primary message is logged: details may quote row values. */
int pg_fail(struct store *s, const PGresult *res)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    bool quiet = false;
    int err = HOOKD_EIO;

    for (size_t i = 0; state && i < sizeof error_map / sizeof error_map[0]; i++) {
        if (strncmp(state, error_map[i].state, strlen(error_map[i].state)) == 0) {
            err = error_map[i].err;
            quiet = error_map[i].quiet;
            break;
        }
    }
    if (PQstatus(s->conn) == CONNECTION_BAD)
        err = HOOKD_EUNAVAIL;
    else if (!res)
        err = HOOKD_ENOMEM;
    if (!msg)
        msg = PQerrorMessage(s->conn);
    if (quiet)
        return err;
    if (err == HOOKD_EUNAVAIL)
        conn_log_warn("", msg);
    else
        log_limited(&s->lim, LOG_WARN, LOG_PART, "postgres: %.*s (%s)", (int)strcspn(msg, "\n"), msg,
                    state ? state : "no SQLSTATE");
    return err;
}

/* 0 for a successful result, else its mapped error. */
int pg_check(struct store *s, const PGresult *res)
{
    ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;

    return res && (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) ? 0 : pg_fail(s, res);
}

/* Server notices ("there is no transaction in progress", "already exists,
 * skipping") would go to stderr by default. */
static void notice_log(void *arg, const char *message)
{
    (void)arg;
    log_debug(LOG_PART, "postgres: %.*s", (int)strcspn(message, "\n"), message);
}
/* ---- connection ----------------------------------------------------------- */

/* Open failures repeat at every retry of a caller while the server is down. */
int pg_connect(struct store *s, const char *dsn)
{
    /* Keywords before dbname are defaults: the DSN's own settings override them. */
    static const char *const keys[] = {"connect_timeout", "application_name", "client_encoding", "options", "dbname",
                                       NULL};
    const char *values[] = {CONNECT_TIMEOUT_S, "hookd", "UTF8", PLANNER_OPTIONS, dsn, NULL};

    s->conn = PQconnectdbParams(keys, values, 1);
    if (!s->conn)
        return HOOKD_ENOMEM;
    if (PQstatus(s->conn) != CONNECTION_OK) {
        const char *msg = PQerrorMessage(s->conn);
        conn_log_warn("cannot connect: ", msg);
        return HOOKD_EUNAVAIL;
    }
    PQsetNoticeProcessor(s->conn, notice_log, NULL);
    return 0;
}

/* One setting statement on a fresh session (pg_exec would come back here). */
static int session_set(struct store *s, const char *sql)
{
    PGresult *res = PQexec(s->conn, sql);
    int result = pg_check(s, res);

    PQclear(res);
    return result;
}

/* What store_lock_wait and store_quiet_outbox set on the session before it broke. */
static int session_restore(struct store *s)
{
    char sql[64];
    int result = 0;

    if (s->lock_wait_ms > 0) {
        snprintf(sql, sizeof sql, "SET lock_timeout = %lld", (long long)s->lock_wait_ms);
        result = session_set(s, sql);
    }
    if (result == 0 && s->quiet_outbox)
        result = session_set(s, PG_QUIET_OUTBOX_SQL);
    s->session_stale = result != 0; /* tried again before the next statement */
    return result;
}

/*
 * Before any statement: a connection that broke outside a transaction is
 * reset, at most once a second. Inside a transaction it is not: the rest of
 * the transaction would silently run in autocommit on the new connection, so
 * it stays unavailable until the caller has rolled back.
 */
int pg_ready(struct store *s)
{
    int64_t now;

    if (PQstatus(s->conn) == CONNECTION_OK)
        return s->session_stale && !s->tx_open ? session_restore(s) : 0;
    if (s->tx_open || s->atomic_own)
        return HOOKD_EUNAVAIL;
    now = clock_mono_ms();
    if (s->reset_at_ms != 0 && now - s->reset_at_ms < RESET_INTERVAL_MS)
        return HOOKD_EUNAVAIL;
    s->reset_at_ms = now;
    PQreset(s->conn);
    if (PQstatus(s->conn) != CONNECTION_OK) {
        const char *msg = PQerrorMessage(s->conn);
        conn_log_warn("reconnect failed: ", msg);
        return HOOKD_EUNAVAIL;
    }
    /* A new session: no prepared statements, no LISTEN, no savepoint; the settings made on the old one again. */
    memset(s->prepared, 0, sizeof s->prepared);
    /* A restarted server may have lost the last lazily committed dispatches: the takes start from the start. */
    s->floor = (struct pg_outbox_floor){0};
    s->listening = false;
    s->sp = PG_SP_NONE;
    s->sp_release_pending = false;
    conn_log_reset();
    log_info(LOG_PART, "postgres: reconnected");
    return session_restore(s);
}
