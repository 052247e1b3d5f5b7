/*
 * The PostgreSQL store backend (libpq): connection set-up and recovery after
 * the server went away, error mapping, lazily prepared statements, the
 * migrations runner, transactions and savepoints, change detection through
 * LISTEN/NOTIFY, hookd_meta, and the helpers the table families share. The
 * tables themselves are in postgres_events.c, postgres_endpoints.c and
 * postgres_deliveries.c. Several hookd processes may share one database.
 */
#include "store/postgres_internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "store/schema/postgres.h"

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
 */
#define PLANNER_OPTIONS \
    "-c enable_seqscan=off -c enable_bitmapscan=off -c plan_cache_mode=force_generic_plan -c jit=off"
#define MIGRATE_LOCK_KEY "7236281835447235940" /* pg_advisory_xact_lock key of migrations ("dkoohpgm") */
#define NOTIFY_DRAIN_MAX 1000000     /* bound of one changed() drain */

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
static int pg_fail(struct store *s, const PGresult *res)
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
static int pg_check(struct store *s, const PGresult *res)
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

static bool postgres_handles(const char *dsn)
{
    return strncmp(dsn, "postgres://", 11) == 0 || strncmp(dsn, "postgresql://", 13) == 0;
}

/* Open failures repeat at every retry of a caller while the server is down. */

/*
 * Before any statement: a connection that broke outside a transaction is
 * reset, at most once a second. Inside a transaction it is not: the rest of
 * the transaction would silently run in autocommit on the new connection, so
 * it stays unavailable until the caller has rolled back.
 */
static int pg_ready(struct store *s)
{
    int64_t now;

    if (PQstatus(s->conn) == CONNECTION_OK)
        return 0;
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
    /* A new session: no prepared statements, no LISTEN, no savepoint. */
    memset(s->prepared, 0, sizeof s->prepared);
    s->listening = false;
    s->sp = PG_SP_NONE;
    s->sp_release_pending = false;
    conn_log_reset();
    log_info(LOG_PART, "postgres: reconnected");
    return 0;
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
    /* Keywords before dbname are defaults: the DSN's own settings override them. */
    static const char *const keys[] = {"connect_timeout", "application_name", "client_encoding", "options", "dbname",
                                       NULL};
    const char *values[] = {CONNECT_TIMEOUT_S, "hookd", "UTF8", PLANNER_OPTIONS, dsn, NULL};
    struct store *s;
    int result;

    *out = NULL;
    s = calloc(1, sizeof *s);
    if (!s)
        return HOOKD_ENOMEM;
    s->ops = &store_postgres_ops;
    s->conn = PQconnectdbParams(keys, values, 1);
    if (!s->conn) {
        result = HOOKD_ENOMEM;
        goto fail;
    }
    if (PQstatus(s->conn) != CONNECTION_OK) {
        const char *msg = PQerrorMessage(s->conn);
        conn_log_warn("cannot connect: ", msg);
        result = HOOKD_EUNAVAIL;
        goto fail;
    }
    PQsetNoticeProcessor(s->conn, notice_log, NULL);
    *out = s;
    return 0;
fail:
    postgres_close(s);
    return result;
}

/* ---- statements ----------------------------------------------------------- */

int pg_exec(struct store *s, const char *sql)
{
    PGresult *res;
    char *joined = NULL;
    int result = pg_ready(s);

    if (result)
        return result;
    if (s->begin_pending) {
        /* The simple protocol takes several statements at once. */
        size_t n = strlen(sql) + sizeof "BEGIN; ";
        joined = malloc(n);
        if (!joined)
            return HOOKD_ENOMEM;
        snprintf(joined, n, "BEGIN; %s", sql);
        s->begin_pending = false;
    }
    res = PQexec(s->conn, joined ? joined : sql);
    result = pg_check(s, res);
    PQclear(res);
    free(joined);
    return result;
}

/*
 * What statements may have to carry along: a BEGIN that store_begin() only
 * noted, the writer's savepoint for the op (postgres_savepoint() notes it,
 * with the release of the previous op's one), and each statement's PREPARE
 * the first time. They go in one pipeline with the statements: one round
 * trip instead of one each, which is most of what a short transaction costs.
 */
enum part_kind { PART_BEGIN, PART_RELEASE, PART_SAVEPOINT, PART_PREPARE, PART_EXEC };
#define PIPE_PARTS_MAX (3 + 2 * PG_PIPELINE_MAX)

struct part {
    enum part_kind kind;
    int stmt; /* PREPARE, EXEC: index into the statements */
    bool ok;
};

static bool part_send(struct store *s, const struct part *pt, const struct pg_stmt *st, const char *name)
{
    static const char *const fixed[] = {[PART_BEGIN] = "BEGIN", [PART_RELEASE] = "RELEASE SAVEPOINT hookd_op",
                                        [PART_SAVEPOINT] = "SAVEPOINT hookd_op"};

    if (pt->kind == PART_PREPARE)
        return PQsendPrepare(s->conn, name, st->sql, st->p->n, st->p->types) == 1;
    if (pt->kind == PART_EXEC)
        return PQsendQueryPrepared(s->conn, name, st->p->n, st->p->values, NULL, NULL, 0) == 1;
    return PQsendQueryParams(s->conn, fixed[pt->kind], 0, NULL, NULL, NULL, NULL, 0) == 1;
}

/* Sends the parts in one pipeline and reads their results: each EXEC's into
 * res[its statement], and 0 or the error of the first part that failed. */
static int run_pipelined(struct store *s, struct part *parts, int n, const struct pg_stmt *st, char (*names)[24],
                         PGresult **res)
{
    PGresult *failed = NULL, *r;
    bool sent = PQenterPipelineMode(s->conn) == 1, all_ok = true;
    int result = 0;

    for (int i = 0; i < n && sent; i++)
        sent = part_send(s, &parts[i], &st[parts[i].stmt], names[parts[i].stmt]);
    sent = sent && PQpipelineSync(s->conn) == 1;
    for (int i = 0; i < n && sent; i++) {
        r = PQgetResult(s->conn);
        if (!r) {
            sent = false;
            break;
        }
        parts[i].ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
        all_ok = all_ok && parts[i].ok;
        if (parts[i].ok && parts[i].kind == PART_EXEC)
            res[parts[i].stmt] = r;
        else if (!parts[i].ok && !failed && PQresultStatus(r) != PGRES_PIPELINE_ABORTED)
            failed = r;
        else
            PQclear(r);
        while ((r = PQgetResult(s->conn)) != NULL) /* the end of this part's results */
            PQclear(r);
    }
    /* Up to the sync, which ends the pipeline. */
    while (sent && (r = PQgetResult(s->conn)) != NULL) {
        bool sync = PQresultStatus(r) == PGRES_PIPELINE_SYNC;
        PQclear(r);
        if (sync)
            break;
    }
    PQexitPipelineMode(s->conn);
    if (failed)
        result = pg_fail(s, failed);
    else if (!sent || !all_ok)
        result = pg_fail(s, NULL);
    PQclear(failed);
    return result;
}

int pg_run_many(struct store *s, const struct pg_stmt *st, int n, PGresult **res)
{
    static const struct pg_params none = {.n = 0};
    struct pg_stmt stmts[PG_PIPELINE_MAX];
    struct part parts[PIPE_PARTS_MAX];
    char names[PG_PIPELINE_MAX][24];
    int np = 0, savepoint = -1, result;

    for (int i = 0; i < n && i < PG_PIPELINE_MAX; i++)
        res[i] = NULL;
    if (n < 1 || n > PG_PIPELINE_MAX)
        return HOOKD_EINVAL;
    for (int i = 0; i < n; i++) {
        if (st[i].slot < 0 || st[i].slot >= PG_SLOTS)
            return HOOKD_EINVAL;
        stmts[i] = st[i];
        stmts[i].p = st[i].p ? st[i].p : &none;
        snprintf(names[i], sizeof names[i], "hookd_%d", st[i].slot);
    }
    result = pg_ready(s);
    if (result)
        return result;
    if (s->begin_pending)
        parts[np++] = (struct part){.kind = PART_BEGIN};
    if (s->sp == PG_SP_WANTED && s->sp_release_pending)
        parts[np++] = (struct part){.kind = PART_RELEASE};
    if (s->sp == PG_SP_WANTED) {
        savepoint = np;
        parts[np++] = (struct part){.kind = PART_SAVEPOINT};
    }
    for (int i = 0; i < n; i++) {
        if (!s->prepared[st[i].slot])
            parts[np++] = (struct part){.kind = PART_PREPARE, .stmt = i};
        parts[np++] = (struct part){.kind = PART_EXEC, .stmt = i};
    }
    if (np == 1) { /* the statement alone: no pipeline needed */
        PGresult *r = PQexecPrepared(s->conn, names[0], stmts[0].p->n, stmts[0].p->values, NULL, NULL, 0);
        result = pg_check(s, r);
        if (result)
            PQclear(r);
        else
            res[0] = r;
        return result;
    }
    result = run_pipelined(s, parts, np, stmts, names, res);
    s->begin_pending = false;
    if (savepoint >= 0) {
        s->sp_release_pending = false;
        s->sp = parts[savepoint].ok ? PG_SP_ACTIVE : PG_SP_NONE;
    }
    for (int i = 0; i < np; i++) {
        if (parts[i].kind == PART_PREPARE && parts[i].ok)
            s->prepared[stmts[parts[i].stmt].slot] = true;
    }
    if (result) {
        for (int i = 0; i < n; i++) {
            PQclear(res[i]);
            res[i] = NULL;
        }
    }
    return result;
}

int pg_run(struct store *s, int slot, const char *sql, const struct pg_params *p, PGresult **res)
{
    struct pg_stmt st = {.slot = slot, .sql = sql, .p = p};

    return pg_run_many(s, &st, 1, res);
}

int pg_run_command(struct store *s, int slot, const char *sql, const struct pg_params *p, int64_t *rows)
{
    PGresult *res;
    int result = pg_run(s, slot, sql, p, &res);

    if (rows)
        *rows = result == 0 ? strtoll(PQcmdTuples(res), NULL, 10) : 0;
    PQclear(res);
    return result;
}

/* COMMIT through the simple protocol. A transaction that failed earlier
 * "commits" as a ROLLBACK without an error: that is an error here. */
static int commit_checked(struct store *s, const char *sql)
{
    PGresult *res;
    int result = pg_ready(s);

    if (result)
        return result;
    res = PQexec(s->conn, sql);
    result = pg_check(s, res);
    if (result == 0 && strcmp(PQcmdStatus(res), "COMMIT") != 0) {
        log_limited(&s->lim, LOG_WARN, LOG_PART, "postgres: the transaction had failed and was rolled back");
        result = HOOKD_EIO;
    }
    PQclear(res);
    return result;
}

/* The BEGIN goes with the method's first statement. */
int pg_atomic_begin(struct store *s)
{
    int result;

    s->atomic_own = false;
    if (s->tx_open)
        return 0;
    result = pg_ready(s);
    s->atomic_own = result == 0;
    s->begin_pending = result == 0;
    return result;
}

int pg_atomic_end(struct store *s, int result)
{
    int rc;

    if (!s->atomic_own)
        return result;
    if (s->begin_pending) { /* nothing was sent */
        s->begin_pending = false;
        s->atomic_own = false;
        return result;
    }
    if (PQstatus(s->conn) != CONNECTION_OK) {
        s->atomic_own = false;
        return result ? result : HOOKD_EUNAVAIL;
    }
    if (result == 0) {
        rc = commit_checked(s, "COMMIT");
        s->atomic_own = false;
        if (rc == 0)
            return 0;
        result = rc;
    }
    s->atomic_own = false;
    if (PQstatus(s->conn) == CONNECTION_OK && pg_exec(s, "ROLLBACK") != 0)
        log_warn(LOG_PART, "postgres: cannot roll back a failed method");
    return result;
}

/* ---- parameters and columns ------------------------------------------------- */

static void param_set(struct pg_params *p, int i, const char *v, Oid type)
{
    if (i < 1 || i > PG_MAX_PARAMS)
        return;
    p->values[i - 1] = v;
    p->types[i - 1] = type;
    if (i > p->n)
        p->n = i;
}

void pg_param_text(struct pg_params *p, int i, const char *v) { param_set(p, i, v, PG_OID_TEXT); }
void pg_param_null(struct pg_params *p, int i, Oid type) { param_set(p, i, NULL, type); }
void pg_param_text_array(struct pg_params *p, int i, const char *literal) { param_set(p, i, literal, PG_OID_TEXT_ARRAY); }
void pg_param_i64_array(struct pg_params *p, int i, const char *literal) { param_set(p, i, literal, PG_OID_INT8_ARRAY); }
void pg_param_bool(struct pg_params *p, int i, bool v) { param_set(p, i, v ? "t" : "f", PG_OID_BOOL); }

void pg_param_i64(struct pg_params *p, int i, int64_t v)
{
    if (i < 1 || i > PG_MAX_PARAMS)
        return;
    snprintf(p->num[i - 1], sizeof p->num[i - 1], "%" PRId64, v);
    param_set(p, i, p->num[i - 1], PG_OID_INT8);
}

void pg_param_int(struct pg_params *p, int i, int v)
{
    if (i < 1 || i > PG_MAX_PARAMS)
        return;
    snprintf(p->num[i - 1], sizeof p->num[i - 1], "%d", v);
    param_set(p, i, p->num[i - 1], PG_OID_INT4);
}

void pg_param_time(struct pg_params *p, int i, int64_t ms)
{
    if (ms)
        pg_param_i64(p, i, ms);
    else
        pg_param_null(p, i, PG_OID_INT8);
}

void pg_param_values(struct pg_params *p, const struct store_value *v, int n)
{
    static const Oid types[] = {[STORE_V_TEXT] = PG_OID_TEXT, [STORE_V_INT] = PG_OID_INT4,
                                [STORE_V_I64] = PG_OID_INT8, [STORE_V_BOOL] = PG_OID_BOOL};

    for (int i = 0; i < n; i++) {
        if (v[i].null)
            pg_param_null(p, i + 1, types[v[i].type]);
        else if (v[i].type == STORE_V_TEXT)
            pg_param_text(p, i + 1, v[i].text);
        else if (v[i].type == STORE_V_INT)
            pg_param_int(p, i + 1, (int)v[i].num);
        else if (v[i].type == STORE_V_I64)
            pg_param_i64(p, i + 1, v[i].num);
        else
            pg_param_bool(p, i + 1, v[i].num != 0);
    }
}

/* ---- array literals ---------------------------------------------------------- */

static bool array_reserve(struct pg_array *a, size_t more)
{
    size_t cap;
    char *grown;

    if (a->failed)
        return false;
    if (a->len + more + 2 <= a->cap) /* room for the closing "}" and NUL too */
        return true;
    cap = a->cap ? a->cap : 256;
    while (cap < a->len + more + 2)
        cap *= 2;
    grown = realloc(a->buf, cap);
    if (!grown) {
        a->failed = true;
        return false;
    }
    a->buf = grown;
    a->cap = cap;
    return true;
}

/* Opens the literal on the first element, else adds the separator. */
static bool array_next(struct pg_array *a, size_t more)
{
    if (!array_reserve(a, more + 1))
        return false;
    a->buf[a->len] = a->len == 0 ? '{' : ',';
    a->len++;
    return true;
}

void pg_array_text(struct pg_array *a, const char *v)
{
    if (!v) {
        if (array_next(a, 4)) {
            memcpy(a->buf + a->len, "NULL", 4);
            a->len += 4;
        }
        return;
    }
    if (!array_next(a, 2 * strlen(v) + 2))
        return;
    a->buf[a->len++] = '"';
    for (const char *c = v; *c; c++) {
        if (*c == '"' || *c == '\\')
            a->buf[a->len++] = '\\';
        a->buf[a->len++] = *c;
    }
    a->buf[a->len++] = '"';
}

void pg_array_i64(struct pg_array *a, int64_t v)
{
    char num[24];
    int n = snprintf(num, sizeof num, "%" PRId64, v);

    if (array_next(a, (size_t)n)) {
        memcpy(a->buf + a->len, num, (size_t)n);
        a->len += (size_t)n;
    }
}

void pg_array_time(struct pg_array *a, int64_t ms)
{
    if (ms)
        pg_array_i64(a, ms);
    else
        pg_array_text(a, NULL);
}

void pg_array_value(struct pg_array *a, const struct store_value *v)
{
    if (v->null || v->type == STORE_V_TEXT)
        pg_array_text(a, v->null ? NULL : v->text);
    else
        pg_array_i64(a, v->num);
}

const char *pg_array_end(struct pg_array *a)
{
    if (!array_reserve(a, 2))
        return NULL;
    if (a->len == 0)
        memcpy(a->buf, "{}", 3);
    else
        memcpy(a->buf + a->len, "}", 2);
    return a->buf;
}

void pg_array_free(struct pg_array *a)
{
    free(a->buf);
    memset(a, 0, sizeof *a);
}

/* ---- columns -------------------------------------------------------------------- */

bool pg_col_null(const PGresult *r, int row, int col) { return PQgetisnull(r, row, col) != 0; }

char *pg_col_str(const PGresult *r, int row, int col, bool *ok)
{
    size_t n;
    char *copy;

    if (PQgetisnull(r, row, col))
        return NULL;
    n = (size_t)PQgetlength(r, row, col);
    copy = malloc(n + 1);
    if (!copy) {
        *ok = false;
        return NULL;
    }
    memcpy(copy, PQgetvalue(r, row, col), n);
    copy[n] = '\0';
    return copy;
}

void pg_col_id(const PGresult *r, int row, int col, char out[HOOKD_ID_MAX])
{
    snprintf(out, HOOKD_ID_MAX, "%s", PQgetvalue(r, row, col));
}

int64_t pg_col_i64(const PGresult *r, int row, int col)
{
    return PQgetisnull(r, row, col) ? 0 : strtoll(PQgetvalue(r, row, col), NULL, 10);
}

/* ---- row readers ---------------------------------------------------------------- */

static const PGresult *row_res(const struct store_row *r) { return r->src; }
static bool row_null(const struct store_row *r, int col) { return PQgetisnull(row_res(r), r->row, col) != 0; }
static const char *row_text(const struct store_row *r, int col)
{
    return row_null(r, col) ? NULL : PQgetvalue(row_res(r), r->row, col);
}
static char *row_str(const struct store_row *r, int col, bool *ok) { return pg_col_str(row_res(r), r->row, col, ok); }
static int64_t row_i64(const struct store_row *r, int col) { return pg_col_i64(row_res(r), r->row, col); }
static bool row_flag(const struct store_row *r, int col) { return strcmp(PQgetvalue(row_res(r), r->row, col), "t") == 0; }

static const struct store_row_ops row_ops = {
    .null = row_null,
    .text = row_text,
    .str = row_str,
    .i64 = row_i64,
    .flag = row_flag,
};

int pg_rows_read(const PGresult *res, store_read_fn read, struct store_rows rows)
{
    struct store_row row = {.ops = &row_ops, .src = res};
    int n = PQntuples(res), result = 0;

    store_rows_start(&rows);
    for (row.row = 0; row.row < n && result == 0; row.row++) {
        void *item = store_rows_slot(&rows);
        result = item ? read(&row, item) : HOOKD_ENOMEM;
        if (result == 0)
            store_rows_keep(&rows);
    }
    if (result)
        store_rows_free(&rows);
    return result;
}

int pg_get(struct store *s, int slot, const char *sql, const struct pg_params *p, store_read_fn read, void *item)
{
    PGresult *res;
    int result = pg_run(s, slot, sql, p, &res);
    const struct store_row row = {.ops = &row_ops, .src = res, .row = 0};

    if (result)
        return result;
    result = PQntuples(res) > 0 ? read(&row, item) : HOOKD_ENOTFOUND;
    PQclear(res);
    return result;
}

int pg_list(struct store *s, int slot, const char *sql, const struct pg_params *p, store_read_fn read,
            struct store_rows rows)
{
    PGresult *res;
    int result = pg_run(s, slot, sql, p, &res);

    if (result) {
        store_rows_start(&rows);
        return result;
    }
    result = pg_rows_read(res, read, rows);
    PQclear(res);
    return result;
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
    result = pg_exec(s, "SELECT pg_advisory_xact_lock(" MIGRATE_LOCK_KEY ")");
    if (result == 0)
        result = migrate_steps(s);
    return pg_atomic_end(s, result);
}

/* ---- transactions ----------------------------------------------------------- */

static void tx_state_clear(struct store *s)
{
    s->tx_open = false;
    s->begin_pending = false;
    s->sp = PG_SP_NONE;
    s->sp_release_pending = false;
}

/* READ COMMITTED: every statement sees what committed before it started.
 * The BEGIN itself goes with the transaction's first statement (pg_run). */
static int postgres_begin(struct store *s)
{
    int result;

    if (s->tx_open)
        return HOOKD_EINVAL;
    result = pg_ready(s);
    if (result == 0) {
        tx_state_clear(s);
        s->tx_open = true;
        s->begin_pending = true;
    }
    return result;
}

static int commit_tx(struct store *s, const char *sql)
{
    int result;

    if (!s->tx_open)
        return HOOKD_EINVAL;
    if (s->begin_pending) { /* no statement: nothing to commit */
        tx_state_clear(s);
        return 0;
    }
    result = commit_checked(s, sql);
    if (result == 0)
        tx_state_clear(s);
    return result;
}

static int postgres_commit(struct store *s) { return commit_tx(s, "COMMIT"); }

/* One round trip: the setting and the COMMIT go as one simple query; the
 * setting only lasts until the transaction ends. */
static int postgres_commit_lazy(struct store *s)
{
    return commit_tx(s, "SET LOCAL synchronous_commit TO off; COMMIT");
}

static int postgres_rollback(struct store *s)
{
    bool sent = !s->begin_pending;

    tx_state_clear(s);
    if (!sent)
        return 0;
    /* The server dropped the transaction with the connection: nothing to undo. */
    if (PQstatus(s->conn) != CONNECTION_OK)
        return 0;
    return pg_exec(s, "ROLLBACK");
}

/* Only noted here; sent with the op's first statement (pg_run). */
static int postgres_savepoint(struct store *s)
{
    if (!s->tx_open || s->sp != PG_SP_NONE)
        return HOOKD_EINVAL;
    if (PQstatus(s->conn) != CONNECTION_OK)
        return HOOKD_EUNAVAIL;
    s->sp = PG_SP_WANTED;
    return 0;
}

/* The RELEASE itself waits for the next op's savepoint (or the commit). An op
 * that reported success over a failed statement cannot be kept: the whole
 * transaction is then lost. */
static int postgres_release(struct store *s)
{
    enum pg_savepoint sp = s->sp;

    s->sp = PG_SP_NONE;
    if (sp == PG_SP_NONE)
        return HOOKD_EINVAL;
    if (PQstatus(s->conn) != CONNECTION_OK)
        return HOOKD_EUNAVAIL;
    if (PQtransactionStatus(s->conn) == PQTRANS_INERROR) {
        log_warn(LOG_PART, "postgres: an op succeeded over a failed statement; the batch is rolled back");
        return HOOKD_EIO;
    }
    if (sp == PG_SP_ACTIVE)
        s->sp_release_pending = true;
    return 0;
}

/* Undoes the op and also ends its savepoint, like release does. */
static int postgres_rollback_to(struct store *s)
{
    enum pg_savepoint sp = s->sp;

    s->sp = PG_SP_NONE;
    if (sp == PG_SP_WANTED)
        return 0; /* the op sent nothing */
    if (sp == PG_SP_NONE)
        return HOOKD_EIO;
    return pg_exec(s, "ROLLBACK TO SAVEPOINT hookd_op; RELEASE SAVEPOINT hookd_op");
}

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
        result = pg_exec(s, "LISTEN hookd_outbox");
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

/* Notifications arrive on the socket once LISTEN is on (changed() turns it on). */
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
    .changed_fd = postgres_changed_fd,
    .meta = &postgres_meta_ops,
    .events = &postgres_event_ops,
    .endpoints = &postgres_endpoint_ops,
    .deliveries = &postgres_delivery_ops,
};
