/*
 * Test tool: an application that processes a library source's inbox items
 * with hookd_inbox_work() / hookd_inbox_work_pg(), writing one business row
 * per item (app_effects) inside hookd's transaction, until nothing has been
 * due for --idle-exit milliseconds (or until it is killed).
 * usage: inbox_tool STORE_URL SOURCE [--lease MS] [--batch N] [--idle-exit MS]
 *                   [--sleep-us N] [--exclusive]
 * STORE_URL is sqlite:PATH or a postgres:// URL. --exclusive (PostgreSQL)
 * takes a per-item advisory lock inside the transaction and reports
 * "overlap ITEM" on stderr when another process holds it. Prints
 * "processed N failed N lost N" at a clean exit.
 */
#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hookd.h"

struct app {
    sqlite3 *db;
    PGconn *conn;
    long sleep_us;
    int exclusive;
    long overlaps;
    char pid[24];
};

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void nap_us(long us)
{
    struct timespec t = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
    nanosleep(&t, NULL);
}

static int pg_ok(PGconn *conn, PGresult *res, ExecStatusType want, const char *what)
{
    int ok = PQresultStatus(res) == want;

    if (!ok)
        fprintf(stderr, "inbox_tool: %s: %s", what, PQerrorMessage(conn));
    PQclear(res);
    return ok;
}

/* The business write, then (optionally) a pause that widens the window a kill can land in. */
static int handle(void *arg, const struct hookd_inbox_item *it, char *note, size_t note_size)
{
    struct app *a = arg;
    const char *values[3] = {it->id, it->event_id, a->pid};

    if (a->conn) {
        if (a->exclusive) {
            PGresult *r = PQexecParams(a->conn, "SELECT pg_try_advisory_xact_lock(hashtext($1))", 1, NULL, values,
                                       NULL, NULL, 0);
            int held = PQresultStatus(r) == PGRES_TUPLES_OK && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
            PQclear(r);
            if (!held) {
                fprintf(stderr, "overlap %s\n", it->id);
                a->overlaps++;
                snprintf(note, note_size, "overlap");
                return -1;
            }
        }
        if (!pg_ok(a->conn,
                   PQexecParams(a->conn, "INSERT INTO app_effects(item_id, event_id, pid) VALUES ($1, $2, $3)", 3,
                                NULL, values, NULL, NULL, 0),
                   PGRES_COMMAND_OK, "insert"))
            return -1;
    } else {
        sqlite3_stmt *st;
        int rc = sqlite3_prepare_v2(a->db, "INSERT INTO app_effects(item_id, event_id, pid) VALUES (?1, ?2, ?3)", -1,
                                    &st, NULL);
        if (rc != SQLITE_OK)
            return -1;
        for (int i = 0; i < 3; i++)
            sqlite3_bind_text(st, i + 1, values[i], -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE) {
            snprintf(note, note_size, "insert: %s", sqlite3_errmsg(a->db));
            return -1;
        }
    }
    if (a->sleep_us)
        nap_us(a->sleep_us);
    return HOOKD_INBOX_PROCESSED;
}

static const char create_sql[] =
    "CREATE TABLE IF NOT EXISTS app_effects (item_id TEXT NOT NULL, event_id TEXT NOT NULL, pid TEXT NOT NULL)";

int main(int argc, char **argv)
{
    struct app a = {0};
    struct hookd_inbox_options o = {.struct_size = sizeof o};
    long processed = 0, failed = 0, lost = 0;
    long idle_exit_ms = 1000;
    int64_t last_work;
    int status = 1;

    if (argc < 3) {
        fprintf(stderr, "usage: inbox_tool STORE_URL SOURCE [--lease MS] [--batch N] [--idle-exit MS] "
                        "[--sleep-us N] [--exclusive]\n");
        return 2;
    }
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--exclusive") == 0)
            a.exclusive = 1;
        else if (i + 1 < argc && strcmp(argv[i], "--lease") == 0)
            o.lease_ms = strtol(argv[++i], NULL, 10);
        else if (i + 1 < argc && strcmp(argv[i], "--batch") == 0)
            o.batch = (int)strtol(argv[++i], NULL, 10);
        else if (i + 1 < argc && strcmp(argv[i], "--idle-exit") == 0)
            idle_exit_ms = strtol(argv[++i], NULL, 10);
        else if (i + 1 < argc && strcmp(argv[i], "--sleep-us") == 0)
            a.sleep_us = strtol(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "inbox_tool: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    snprintf(a.pid, sizeof a.pid, "%ld", (long)getpid());
    if (strncmp(argv[1], "sqlite:", 7) == 0) {
        if (sqlite3_open(argv[1] + 7, &a.db) != SQLITE_OK) {
            fprintf(stderr, "inbox_tool: cannot open %s\n", argv[1] + 7);
            goto out;
        }
        sqlite3_busy_timeout(a.db, 10000);
        if (sqlite3_exec(a.db, create_sql, NULL, NULL, NULL) != SQLITE_OK) {
            fprintf(stderr, "inbox_tool: %s\n", sqlite3_errmsg(a.db));
            goto out;
        }
    } else {
        a.conn = PQconnectdb(argv[1]);
        if (PQstatus(a.conn) != CONNECTION_OK) {
            fprintf(stderr, "inbox_tool: %s", PQerrorMessage(a.conn));
            goto out;
        }
        if (!pg_ok(a.conn, PQexec(a.conn, "SET client_min_messages = warning"), PGRES_COMMAND_OK, "set") ||
            !pg_ok(a.conn, PQexec(a.conn, create_sql), PGRES_COMMAND_OK, "create"))
            goto out;
    }
    last_work = now_ms();
    for (;;) {
        struct hookd_inbox_counts c;
        int n = a.conn ? hookd_inbox_work_pg(a.conn, argv[2], handle, &a, &o, &c)
                       : hookd_inbox_work(a.db, argv[2], handle, &a, &o, &c);
        processed += c.processed;
        failed += c.failed;
        lost += c.lost;
        if (n == HOOKD_EBUSY) {
            nap_us(2000);
            continue;
        }
        if (n < 0) {
            fprintf(stderr, "inbox_tool: %s\n", hookd_strerror(n));
            goto out;
        }
        if (n > 0 || c.lost > 0) {
            last_work = now_ms();
            continue;
        }
        if (now_ms() - last_work >= idle_exit_ms)
            break;
        nap_us(10000);
    }
    printf("processed %ld failed %ld lost %ld\n", processed, failed, lost);
    status = a.overlaps ? 3 : 0;
out:
    if (a.conn)
        PQfinish(a.conn);
    if (a.db)
        sqlite3_close(a.db);
    return status;
}
