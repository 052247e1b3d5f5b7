/*
 * The PostgreSQL store backend (libpq): open and close, the migrations
 * runner, change detection through LISTEN/NOTIFY, hookd_meta, and the method
 * table. Its other files: postgres_conn.c (the connection), postgres_txn.c
 * (statements, pipelines, transactions), postgres_params.c (parameters,
 * arrays, columns), and one per table family (postgres_events.c,
 * postgres_endpoints.c, postgres_deliveries.c). Several hookd processes may
 * share one database.
 */
#include "store/postgres_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "store/schema/postgres.h"

#define LOG_PART "store"
#define MIGRATE_LOCK_KEY "7236281835447235940" /* pg_advisory_xact_lock key of migrations ("dkoohpgm") */
#define NOTIFY_DRAIN_MAX 1000000     /* bound of one changed() drain */

/* ---- open and close ----------------------------------------------------------- */

static bool postgres_handles(const char *dsn)
{
    return strncmp(dsn, "postgres://", 11) == 0 || strncmp(dsn, "postgresql://", 13) == 0;
}

static void postgres_close(struct store *s)
{
    if (!s)
        return;
    PQfinish(s->conn);
    free(s);
}

static int postgres_open(const char *dsn, struct store **out)
{
    struct store *s;
    int result;

    *out = NULL;
    s = calloc(1, sizeof *s);
    if (!s)
        return HOOKD_ENOMEM;
    s->ops = &store_postgres_ops;
    result = pg_connect(s, dsn);
    if (result) {
        postgres_close(s);
        return result;
    }
    *out = s;
    return 0;
}

/* ---- migrations ----------------------------------------------------------- */

/* A one-off statement with parameters (migrations only: not worth preparing). */
static int exec_params(struct store *s, const char *sql, int n, const char *const *values, PGresult **out)
{
    PGresult *res;
    int result = pg_ready(s);

    *out = NULL;
    if (result)
        return result;
    res = PQexecParams(s->conn, sql, n, NULL, values, NULL, NULL, 0);
    result = pg_check(s, res);
    if (result)
        PQclear(res);
    else
        *out = res;
    return result;
}

/* Applies the migrations newer than the recorded version. */
static int migrate_steps(struct store *s)
{
    size_t latest = postgres_migrations_count;
    char version_text[16], now_text[24];
    const char *values[2] = {version_text, now_text};
    PGresult *res;
    int version, result;

    result = pg_exec(s, "CREATE TABLE IF NOT EXISTS hookd_schema (version INTEGER PRIMARY KEY,"
                        " applied_at BIGINT NOT NULL)");
    if (result == 0)
        result = exec_params(s, "SELECT COALESCE(MAX(version), 0) FROM hookd_schema", 0, NULL, &res);
    if (result)
        return result;
    version = (int)strtol(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    for (size_t i = 0; result == 0 && i < latest; i++) {
        const struct schema_migration *m = &postgres_migrations[i];
        if (m->version <= version)
            continue;
        snprintf(version_text, sizeof version_text, "%d", m->version);
        snprintf(now_text, sizeof now_text, "%" PRId64, clock_now_ms());
        result = pg_exec(s, m->sql);
        if (result == 0)
            result = exec_params(s, "INSERT INTO hookd_schema(version, applied_at) VALUES ($1::int, $2::bigint)", 2,
                                 values, &res);
        if (result == 0) {
            PQclear(res);
            log_info(LOG_PART, "postgres: schema migrated to version %d", m->version);
        }
    }
    if (result == 0 && latest > 0 && version > postgres_migrations[latest - 1].version)
        log_warn(LOG_PART, "postgres: schema version %d is newer than this build knows (%d)", version,
                 postgres_migrations[latest - 1].version);
    return result;
}

/* One transaction holding an advisory lock: several nodes starting at once
 * run their migrations one after the other, and the later ones find the
 * schema current. */
static int postgres_migrate(struct store *s)
{
    int result;

    if (s->tx_open)
        return HOOKD_EINVAL;
    result = pg_atomic_begin(s);
    if (result)
        return result;
    /* A migration waits for whatever holds its tables (another node's
     * migration, an application's transaction), not just for lock_timeout. */
    result = pg_exec(s, "SET LOCAL lock_timeout = 0");
    if (result == 0)
        result = pg_exec(s, "SELECT pg_advisory_xact_lock(" MIGRATE_LOCK_KEY ")");
    if (result == 0)
        result = migrate_steps(s);
    return pg_atomic_end(s, result);
}

/* ---- change detection -------------------------------------------------------- */

/*
 * The first call LISTENs and reports a change, so the caller looks once;
 * later calls read what the socket holds without blocking. After a
 * reconnect the LISTEN is renewed and a change reported, since
 * notifications may have been lost meanwhile.
 */
static int postgres_changed(struct store *s, bool *changed)
{
    PGnotify *n;
    int result = pg_ready(s);

    *changed = false;
    if (result)
        return result;
    if (!s->listening) {
        char sql[64];
        snprintf(sql, sizeof sql, "LISTEN %s", s->channel[0] ? s->channel : STORE_CHANNEL_OUTBOX);
        result = pg_exec(s, sql);
        s->listening = result == 0;
        *changed = result == 0;
        return result;
    }
    if (!PQconsumeInput(s->conn)) {
        const char *msg = PQerrorMessage(s->conn);
        log_limited(&s->lim, LOG_WARN, LOG_PART, "postgres: %.*s", (int)strcspn(msg, "\n"), msg);
        return PQstatus(s->conn) == CONNECTION_BAD ? HOOKD_EUNAVAIL : HOOKD_EIO;
    }
    for (int i = 0; i < NOTIFY_DRAIN_MAX && (n = PQnotifies(s->conn)) != NULL; i++) {
        *changed = true;
        PQfreemem(n);
    }
    return 0;
}

/* One of the schema's channels only: the name goes into a statement. */
static int postgres_watch(struct store *s, const char *channel)
{
    if (s->listening || (strcmp(channel, STORE_CHANNEL_OUTBOX) != 0 && strcmp(channel, STORE_CHANNEL_INBOX) != 0))
        return HOOKD_EINVAL;
    snprintf(s->channel, sizeof s->channel, "%s", channel);
    return 0;
}

/*
 * Every lease is a row of hookd_inflight, deleted at its delivery's result:
 * at 500 deliveries a second that is 30,000 dead index entries a minute,
 * all in the range a slot count scans (a deleted lease's lease_until is
 * still ahead), and autovacuum visits a database once a minute at the most
 * (autovacuum_naptime, a server setting). The slot counts of the fan-out
 * read 100 to 200 buffers each by then, where they read 6 to 20 after a
 * vacuum (bench/RESULTS.md, session 18). So a connection of its own vacuums
 * the table every second: it holds the caps' worth of live rows, and a
 * vacuum of it takes a few milliseconds. INDEX_CLEANUP ON: a vacuum that
 * finds few dead rows would otherwise leave the index entries, which are what
 * the counts walk; SKIP_LOCKED: another node's vacuum of it is enough.
 */
#define PG_MAINTAIN_EVERY_MS 1000
static int postgres_maintain(struct store *s)
{
    int64_t now = clock_mono_ms();

    if (s->tx_open || now - s->maintained_at < PG_MAINTAIN_EVERY_MS)
        return 0;
    s->maintained_at = now;
    return pg_exec(s, "VACUUM (SKIP_LOCKED, INDEX_CLEANUP ON) hookd_inflight");
}

/* The session's lock_timeout (5 s from the connection options otherwise). */
static int postgres_lock_wait(struct store *s, int64_t ms)
{
    char sql[64];
    int result;

    if (s->tx_open)
        return HOOKD_EINVAL;
    snprintf(sql, sizeof sql, "SET lock_timeout = %lld", (long long)ms);
    result = pg_exec(s, sql);
    if (result == 0)
        s->lock_wait_ms = ms;
    return result;
}

/* hookd_outbox_notify() (schema_outbox_notify_quiet) looks at this session setting. */
static int postgres_quiet_outbox(struct store *s)
{
    int result;

    if (s->tx_open)
        return HOOKD_EINVAL;
    result = pg_exec(s, PG_QUIET_OUTBOX_SQL);
    if (result == 0)
        s->quiet_outbox = true;
    return result;
}

static int postgres_changed_fd(struct store *s)
{
    return s->listening && PQstatus(s->conn) == CONNECTION_OK ? PQsocket(s->conn) : -1;
}

/* ---- meta ------------------------------------------------------------------- */

static int postgres_meta_get(struct store *s, const char *key, char **value_out)
{
    struct pg_params p = {.n = 0};
    PGresult *res;
    bool ok = true;
    int result;

    *value_out = NULL;
    pg_param_text(&p, 1, key);
    result = pg_run(s, PG_META_GET, "SELECT value FROM hookd_meta WHERE key = $1", &p, &res);
    if (result)
        return result;
    if (PQntuples(res) == 0) {
        result = HOOKD_ENOTFOUND;
    } else {
        *value_out = pg_col_null(res, 0, 0) ? strdup("") : pg_col_str(res, 0, 0, &ok);
        result = ok && *value_out ? 0 : HOOKD_ENOMEM;
    }
    PQclear(res);
    return result;
}

static int postgres_meta_set(struct store *s, const char *key, const char *value)
{
    struct pg_params p = {.n = 0};

    if (!key || !value)
        return HOOKD_EINVAL;
    pg_param_text(&p, 1, key);
    pg_param_text(&p, 2, value);
    return pg_run_command(s, PG_META_SET,
                          "INSERT INTO hookd_meta(key, value) VALUES ($1, $2)"
                          " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                          &p, NULL);
}

static const struct store_meta_ops postgres_meta_ops = {
    .get = postgres_meta_get,
    .set = postgres_meta_set,
};

/* ---- the method table ------------------------------------------------------- */

const struct store_ops store_postgres_ops = {
    .version = STORE_OPS_VERSION,
    .name = "postgres",
    .single_node = false,
    .handles = postgres_handles,
    .open = postgres_open,
    .close = postgres_close,
    .migrate = postgres_migrate,
    .begin = postgres_begin,
    .commit = postgres_commit,
    .commit_lazy = postgres_commit_lazy,
    .rollback = postgres_rollback,
    .savepoint = postgres_savepoint,
    .release = postgres_release,
    .rollback_to = postgres_rollback_to,
    .changed = postgres_changed,
    .watch = postgres_watch,
    .changed_fd = postgres_changed_fd,
    .maintain = postgres_maintain,
    .lock_wait = postgres_lock_wait,
    .quiet_outbox = postgres_quiet_outbox,
    .meta = &postgres_meta_ops,
    .events = &postgres_event_ops,
    .endpoints = &postgres_endpoint_ops,
    .deliveries = &postgres_delivery_ops,
    .endpoint_state = &postgres_endpoint_state_ops,
    .sources = &postgres_source_ops,
    .inbox = &postgres_inbox_ops,
    .rejections = &postgres_rejection_ops,
    .machines = &postgres_machine_ops,
    .replays = &postgres_replay_ops,
    .tokens = &postgres_token_ops,
    .alerts = &postgres_alert_ops,
    .upkeep = &postgres_upkeep_ops,
    .health = &postgres_health_ops,
    .stats = &postgres_stats_ops,
};
