/*
 * PostgreSQL backend, running statements and transactions: statements
 * prepared on first use, several in one pipeline round trip together with a
 * pending BEGIN and the writer's savepoint, method atomicity, and the
 * transaction and savepoint methods of struct store_ops.
 */
#include "store/postgres_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG_PART "store"

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

int pg_run_planned(struct store *s, int slot, const char *sql, const struct pg_params *p, PGresult **res)
{
    static const struct pg_params none = {.n = 0};
    PGresult *r;
    int result;

    if (s->begin_pending || s->sp == PG_SP_WANTED)
        return pg_run(s, slot, sql, p, res);
    *res = NULL;
    result = pg_ready(s);
    if (result)
        return result;
    if (p == NULL)
        p = &none;
    r = PQexecParams(s->conn, sql, p->n, p->types, p->values, NULL, NULL, 0);
    result = pg_check(s, r);
    if (result)
        PQclear(r);
    else
        *res = r;
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

/* ---- transactions ----------------------------------------------------------- */

static void tx_state_clear(struct store *s)
{
    s->tx_open = false;
    s->floor.took_in_tx = false;
    s->begin_pending = false;
    s->sp = PG_SP_NONE;
    s->sp_release_pending = false;
}

/* READ COMMITTED: every statement sees what committed before it started.
 * The BEGIN itself goes with the transaction's first statement (pg_run). */
int postgres_begin(struct store *s)
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
    /*
     * A COMMIT that fails has ended the transaction all the same (rolled
     * back): nothing is left to commit, so a failure the caller would retry
     * (a lock wait at commit, e.g. for the NOTIFY queue, ran out: EBUSY) is
     * reported as one it does not. A second COMMIT would find no transaction
     * and "succeed" with a warning, and the caller would answer for rows
     * that were never stored.
     */
    tx_state_clear(s);
    if (result == HOOKD_EBUSY) {
        log_limited(&s->lim, LOG_WARN, LOG_PART, "postgres: a commit gave up waiting for a lock; it was rolled back");
        result = HOOKD_EIO;
    }
    return result;
}

int postgres_commit(struct store *s) { return commit_tx(s, "COMMIT"); }

/* One round trip: the setting and the COMMIT go as one simple query; the
 * setting only lasts until the transaction ends. */
int postgres_commit_lazy(struct store *s)
{
    return commit_tx(s, "SET LOCAL synchronous_commit TO off; COMMIT");
}

int postgres_rollback(struct store *s)
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
int postgres_savepoint(struct store *s)
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
int postgres_release(struct store *s)
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
int postgres_rollback_to(struct store *s)
{
    enum pg_savepoint sp = s->sp;

    s->sp = PG_SP_NONE;
    if (sp == PG_SP_WANTED)
        return 0; /* the op sent nothing */
    if (sp == PG_SP_NONE)
        return HOOKD_EIO;
    return pg_exec(s, "ROLLBACK TO SAVEPOINT hookd_op; RELEASE SAVEPOINT hookd_op");
}
