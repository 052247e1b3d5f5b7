/*
 * The publishers: one table of methods per store (SQLite through hookd_publish, PostgreSQL through
 * hookd_publish_pg), and the transactions that commit the benchmark's events.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "hookd.h"
#include "pg_env.h"
#include "publisher.h"

/* The application side of each store: its connection, transactions and hookd's publish call. */
struct store_def {
    const char *begin_sql; /* SQLite: take the write lock at BEGIN, as an application that writes would */
    int (*open)(struct publisher *p, const char *target);
    int (*exec)(struct publisher *p, const char *sql);
    int (*publish)(struct publisher *p, const struct hookd_event *ev, char id_out[HOOKD_ID_MAX]);
    const char *(*errmsg)(struct publisher *p);
    void (*close)(struct publisher *p);
};

/* SQLite: busy_timeout 5 s, the connection's default synchronous, so the application's commits are durable. */
static int sqlite_pub_open(struct publisher *p, const char *path)
{
    if (sqlite3_open_v2(path, &p->db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        fprintf(stderr, "loadgen: open %s: %s\n", path, p->db != NULL ? sqlite3_errmsg(p->db) : "no memory");
        return -1;
    }
    sqlite3_busy_timeout(p->db, 5000);
    return 0;
}

static int sqlite_pub_exec(struct publisher *p, const char *sql)
{
    return sqlite3_exec(p->db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
}

static int sqlite_pub_publish(struct publisher *p, const struct hookd_event *ev, char id_out[HOOKD_ID_MAX])
{
    return hookd_publish(p->db, ev, id_out);
}

static const char *sqlite_pub_errmsg(struct publisher *p)
{
    return sqlite3_errmsg(p->db);
}

static void sqlite_pub_close(struct publisher *p)
{
    sqlite3_close(p->db);
}

/* PostgreSQL: the server's defaults (synchronous_commit on, fsync on), so each COMMIT is durable. */
static int pg_pub_open(struct publisher *p, const char *dsn)
{
    return (p->pg = pg_connect(dsn)) != NULL ? 0 : -1;
}

/* BEGIN, COMMIT, ROLLBACK: the command tag must echo the command (a failed transaction's COMMIT
 * "succeeds" with the tag ROLLBACK). */
static int pg_pub_exec(struct publisher *p, const char *sql)
{
    PGresult *r = PQexec(p->pg, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK && strcmp(PQcmdStatus(r), sql) == 0;

    PQclear(r);
    return ok ? 0 : -1;
}

static int pg_pub_publish(struct publisher *p, const struct hookd_event *ev, char id_out[HOOKD_ID_MAX])
{
    return hookd_publish_pg(p->pg, ev, id_out);
}

static const char *pg_pub_errmsg(struct publisher *p)
{
    static char msg[512];
    const char *m = PQerrorMessage(p->pg);

    snprintf(msg, sizeof msg, "%.*s", (int)strcspn(m, "\n"), m[0] != '\0' ? m : "transaction rolled back");
    return msg;
}

static void pg_pub_close(struct publisher *p)
{
    PQfinish(p->pg);
}

static const struct store_def store_defs[ST_COUNT] = {
    [ST_SQLITE] = {"BEGIN IMMEDIATE", sqlite_pub_open, sqlite_pub_exec, sqlite_pub_publish, sqlite_pub_errmsg,
                   sqlite_pub_close},
    [ST_PG] = {"BEGIN", pg_pub_open, pg_pub_exec, pg_pub_publish, pg_pub_errmsg, pg_pub_close},
};

int publisher_open(struct publisher *p, enum store_kind store, const char *target, struct ev_table *t, long batch,
                   long payload)
{
    p->table = t;
    p->payload_bytes = payload;
    p->store = &store_defs[store];
    if ((p->batch = calloc((size_t)batch, sizeof *p->batch)) == NULL) {
        fprintf(stderr, "loadgen: no memory for the publisher\n");
        return -1;
    }
    return p->store->open(p, target);
}

void publisher_close(struct publisher *p)
{
    if (p->store != NULL)
        p->store->close(p);
    free(p->batch);
}

int publish_batch(struct publisher *p, long n)
{
    static char pad[PAYLOAD_MAX + 1];
    char data[PAYLOAD_MAX + 64], id[HOOKD_ID_MAX];
    struct hookd_event ev = {.type = p->type != NULL ? p->type : "bench.event", .account = "bench", .data_json = data};
    const char *failed = NULL;
    int64_t now;
    int r = 0;

    if (pad[0] == '\0')
        memset(pad, 'x', PAYLOAD_MAX);
    if (p->store->exec(p, p->store->begin_sql) != 0) {
        fprintf(stderr, "loadgen: %s: %s\n", p->store->begin_sql, p->store->errmsg(p));
        return -1;
    }
    for (long i = 0; i < n && failed == NULL; i++) {
        snprintf(data, sizeof data, "{\"seq\": %ld, \"pad\": \"%.*s\"}", p->next_seq++, (int)p->payload_bytes, pad);
        if ((r = p->store->publish(p, &ev, id)) != 0) {
            failed = "hookd_publish";
            break;
        }
        if (p->untracked)
            continue;
        pthread_mutex_lock(&p->table->mu);
        p->batch[i] = table_slot(p->table, id, strnlen(id, HOOKD_ID_MAX - 1));
        pthread_mutex_unlock(&p->table->mu);
        if (p->batch[i] == NULL)
            failed = "event table full";
    }
    if (failed == NULL && p->store->exec(p, "COMMIT") != 0)
        failed = "COMMIT";
    if (failed != NULL) {
        fprintf(stderr, "loadgen: %s: %s\n", failed, r != 0 ? hookd_strerror(r) : p->store->errmsg(p));
        p->store->exec(p, "ROLLBACK");
        return -1;
    }
    now = mono_ns();
    pthread_mutex_lock(&p->table->mu);
    for (long i = 0; i < n && !p->untracked; i++)
        p->batch[i]->commit_ns = now;
    pthread_mutex_unlock(&p->table->mu);
    if (p->first_commit_ns == 0)
        p->first_commit_ns = now;
    p->last_commit_ns = now;
    return 0;
}

int publish_all(struct publisher *p, long events, long batch)
{
    for (long done = 0; done < events; done += batch)
        if (publish_batch(p, events - done < batch ? events - done : batch) != 0)
            return -1;
    return 0;
}

long publisher_undispatched(struct publisher *p)
{
    static const char sql[] = "SELECT count(*) FROM hookd_outbox WHERE dispatched_at IS NULL";
    long n = -1;

    if (p->db != NULL) {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(p->db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
            n = (long)sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    } else if (p->pg != NULL) {
        PGresult *r = PQexec(p->pg, sql);
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
            n = strtol(PQgetvalue(r, 0, 0), NULL, 10);
        PQclear(r);
    }
    return n;
}
