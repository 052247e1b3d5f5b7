/*
 * The PostgreSQL side of a run: starts and stops a throwaway cluster through scripts/pg.sh (or uses
 * a server given by DSN), creates and drops the run's database, and arms the emergency stop.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "pg_env.h"

#define PG_SCRIPT_TIMEOUT_S 120 /* one scripts/pg.sh call (initdb + start, or stop) */
#define PG_OUT_MAX 4096         /* what a scripts/pg.sh call may print */

/* CLOCK_MONOTONIC in milliseconds. */
static int64_t mono_ms(void)
{
    return mono_ns() / NS_PER_MS;
}

/* libpq keywords that loadgen's own connections set before the DSN's (which override them):
 * bounded connects and statements. */
static const char *const pg_conn_keys[] = {"connect_timeout", "options", "application_name", "dbname", NULL};

/* For the signal handler: argv of `bash scripts/pg.sh stop DIR`, set while a cluster runs. */
static char pg_stop_script[PATH_MAX], pg_stop_dir[PATH_MAX];
static char *pg_stop_argv[] = {(char *)"/bin/bash", pg_stop_script, (char *)"stop", pg_stop_dir, NULL};
static volatile sig_atomic_t pg_stop_armed;

void pg_emergency_stop(void)
{
    extern char **environ;
    pid_t pid;
    int status;

    if (!pg_stop_armed)
        return;
    pg_stop_armed = 0;
    if ((pid = fork()) == 0) {
        execve(pg_stop_argv[0], pg_stop_argv, environ);
        _exit(127);
    }
    if (pid > 0)
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
}

/* Runs `timeout S bash SCRIPT CMD DIR [ARG]`; its stdout (trimmed, capped) goes to out. The read
 * is bounded too, in case a grandchild kept the pipe open. Returns the exit status or -1. */
static int pg_script(const struct pg_env *e, const char *cmd, const char *dir, const char *arg, char *out, size_t cap)
{
    char secs[16];
    char *argv[] = {(char *)"timeout", secs, (char *)"bash", (char *)e->script, (char *)cmd, (char *)dir, (char *)arg,
                    NULL};
    int fds[2], status = 0;
    size_t len = 0;
    int64_t deadline = mono_ms() + (PG_SCRIPT_TIMEOUT_S + 10) * 1000;
    pid_t pid;

    snprintf(secs, sizeof secs, "%d", PG_SCRIPT_TIMEOUT_S);
    out[0] = '\0';
    if (pipe2(fds, O_CLOEXEC) != 0)
        return -1;
    fflush(NULL);
    if ((pid = fork()) == 0) {
        signal(SIGPIPE, SIG_DFL);
        if (dup2(fds[1], 1) >= 0)
            execvp(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    while (pid > 0) {
        struct pollfd p = {.fd = fds[0], .events = POLLIN};
        int64_t left = deadline - mono_ms();
        char chunk[512];
        ssize_t r;
        if (left <= 0 || poll(&p, 1, (int)left) == 0) {
            fprintf(stderr, "loadgen: %s %s did not finish in %d s\n", e->script, cmd, PG_SCRIPT_TIMEOUT_S + 10);
            kill(pid, SIGKILL);
            break;
        }
        if ((r = read(fds[0], chunk, sizeof chunk)) < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        size_t take = (size_t)r < cap - 1 - len ? (size_t)r : cap - 1 - len;
        memcpy(out + len, chunk, take);
        len += take;
    }
    close(fds[0]);
    out[len] = '\0';
    while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == ' '))
        out[--len] = '\0';
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

PGconn *pg_connect(const char *dsn)
{
    const char *values[] = {"10", "-c statement_timeout=60000", "hookd-loadgen", dsn, NULL};
    PGconn *c = PQconnectdbParams(pg_conn_keys, values, 1);

    if (c != NULL && PQstatus(c) == CONNECTION_OK)
        return c;
    fprintf(stderr, "loadgen: cannot connect to PostgreSQL: %s", c != NULL ? PQerrorMessage(c) : "no memory\n");
    PQfinish(c);
    return NULL;
}

/* Runs one command; 0 or -1 after printing the server's message. */
static int pg_command(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;

    if (!ok)
        fprintf(stderr, "loadgen: %s: %s", sql, PQerrorMessage(c));
    PQclear(r);
    return ok ? 0 : -1;
}

/*
 * A new cluster has one WAL segment: every further 16 MB segment is created and zero-filled (then
 * synced) by the backend whose commit first needs it, a stall of 30-60 ms on this box that every
 * commit queued behind it waits out, four or five times in the first 80 MB of WAL. A server that has
 * run for a while recycles its old segments instead and pays none of it. So a cluster of the run's own
 * starts the way such a server is: WAL_WARM_SEGMENTS segments created (a row and a segment switch
 * each), then a checkpoint that keeps them for reuse. Durability settings are untouched.
 */
#define WAL_WARM_SEGMENTS 24
static int pg_warm_wal(PGconn *c)
{
    if (pg_command(c, "CREATE TABLE hookd_bench_wal_warm (n int)") != 0)
        return -1;
    for (int i = 0; i < WAL_WARM_SEGMENTS; i++)
        if (pg_command(c, "INSERT INTO hookd_bench_wal_warm VALUES (1)") != 0 ||
            pg_command(c, "SELECT pg_switch_wal()") != 0)
            return -1;
    return pg_command(c, "DROP TABLE hookd_bench_wal_warm") == 0 && pg_command(c, "CHECKPOINT") == 0 ? 0 : -1;
}

/* Appends s to out[*len] percent-encoded (all but RFC 3986 unreserved characters); -1 when full. */
static int pg_uri_add(char *out, size_t cap, size_t *len, const char *s, bool encode)
{
    static const char hex[] = "0123456789ABCDEF";

    for (; *s != '\0'; s++) {
        unsigned char ch = (unsigned char)*s;
        bool plain = !encode || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                     strchr("-._~", ch) != NULL;
        if (*len + 4 > cap)
            return -1;
        if (plain) {
            out[(*len)++] = (char)ch;
        } else {
            out[(*len)++] = '%';
            out[(*len)++] = hex[ch >> 4];
            out[(*len)++] = hex[ch & 15];
        }
    }
    out[*len] = '\0';
    return 0;
}

/* server_dsn (any libpq form) as a postgres:// URI naming database db: hookd's store must be a URI. */
static int pg_uri_for_db(const char *server_dsn, const char *db, char *out, size_t cap)
{
    char *err = NULL;
    PQconninfoOption *opts = PQconninfoParse(server_dsn, &err);
    size_t len = 0;
    int result = -1;
    bool first = true;

    if (opts == NULL) {
        fprintf(stderr, "loadgen: bad PostgreSQL DSN: %s", err != NULL ? err : "no memory\n");
        PQfreemem(err);
        return -1;
    }
    if (pg_uri_add(out, cap, &len, "postgres:///", false) != 0 || pg_uri_add(out, cap, &len, db, true) != 0)
        goto out;
    for (const PQconninfoOption *o = opts; o->keyword != NULL; o++) {
        if (o->val == NULL || o->val[0] == '\0' || strcmp(o->keyword, "dbname") == 0)
            continue;
        if (pg_uri_add(out, cap, &len, first ? "?" : "&", false) != 0 || pg_uri_add(out, cap, &len, o->keyword, true) != 0 ||
            pg_uri_add(out, cap, &len, "=", false) != 0 || pg_uri_add(out, cap, &len, o->val, true) != 0)
            goto out;
        first = false;
    }
    result = 0;
out:
    if (result != 0)
        fprintf(stderr, "loadgen: PostgreSQL DSN longer than %zu bytes\n", cap);
    PQconninfoFree(opts);
    return result;
}

int pg_env_setup(struct pg_env *e, const char *given_dsn, const char *scratch)
{
    unsigned char raw[6];
    char sql[128], out[PG_OUT_MAX];
    PGconn *c;
    int result;

    if (given_dsn != NULL) {
        if (strlen(given_dsn) >= sizeof e->server_dsn) {
            fprintf(stderr, "loadgen: --pg-dsn is longer than %zu bytes\n", sizeof e->server_dsn - 1);
            return -1;
        }
        snprintf(e->server_dsn, sizeof e->server_dsn, "%s", given_dsn);
    } else {
        if (realpath(scratch, e->cluster) == NULL || strlen(e->cluster) + 4 >= sizeof e->cluster - 16) {
            perror("loadgen: scratch dir");
            e->cluster[0] = '\0';
            return -1;
        }
        strncat(e->cluster, "/pg", sizeof e->cluster - strlen(e->cluster) - 1);
        snprintf(pg_stop_script, sizeof pg_stop_script, "%s", e->script);
        snprintf(pg_stop_dir, sizeof pg_stop_dir, "%s", e->cluster);
        pg_stop_armed = 1; /* before the start: a signal during initdb also cleans up */
        int64_t t0 = mono_ms();
        if ((result = pg_script(e, "start", e->cluster, NULL, out, sizeof out)) != 0) {
            fprintf(stderr, "loadgen: %s start %s failed (%d)\n", e->script, e->cluster, result);
            return -1;
        }
        /* the URL is the last line printed */
        const char *last = strrchr(out, '\n') != NULL ? strrchr(out, '\n') + 1 : out;
        if (strlen(last) >= sizeof e->server_dsn || strncmp(last, "postgres", 8) != 0) {
            fprintf(stderr, "loadgen: %s start printed no store URL: '%.200s'\n", e->script, last);
            return -1;
        }
        snprintf(e->server_dsn, sizeof e->server_dsn, "%.2047s", last);
        printf("postgres: cluster %s started in %.1f s\n", e->cluster, (double)(mono_ms() - t0) / 1000.0);
    }
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
        return -1;
    snprintf(e->dbname, sizeof e->dbname, "hookd_bench_%02x%02x%02x%02x%02x%02x", raw[0], raw[1], raw[2], raw[3], raw[4],
             raw[5]);
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", e->dbname);
    if ((c = pg_connect(e->server_dsn)) == NULL) {
        e->dbname[0] = '\0';
        return -1;
    }
    result = pg_command(c, sql);
    if (result == 0 && e->cluster[0] != '\0' && getenv("LOADGEN_PG_COLD") == NULL) {
        int64_t t0 = mono_ms();
        result = pg_warm_wal(c);
        printf("postgres: %d WAL segments made ready in %.1f s\n", WAL_WARM_SEGMENTS, (double)(mono_ms() - t0) / 1000.0);
    }
    PQfinish(c);
    if (result != 0) {
        e->dbname[0] = '\0';
        return -1;
    }
    return pg_uri_for_db(e->server_dsn, e->dbname, e->dsn, sizeof e->dsn);
}

void pg_env_teardown(struct pg_env *e, bool keep)
{
    char sql[128], out[PG_OUT_MAX];
    PGconn *c;

    if (e->cluster[0] != '\0') {
        if (pg_script(e, keep ? "ctl" : "stop", e->cluster, keep ? "stop" : NULL, out, sizeof out) != 0)
            fprintf(stderr, "loadgen: %s %s %s failed\n", e->script, keep ? "ctl" : "stop", e->cluster);
        pg_stop_armed = 0;
        e->cluster[0] = '\0';
    } else if (e->dbname[0] != '\0' && !keep && (c = pg_connect(e->server_dsn)) != NULL) {
        snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", e->dbname);
        (void)pg_command(c, sql);
        PQfinish(c);
    }
    e->dbname[0] = '\0';
}

pid_t pg_postmaster_pid(const struct pg_env *e)
{
    char path[PATH_MAX + 32], line[32] = "";
    FILE *f;

    if (e->cluster[0] == '\0')
        return -1;
    snprintf(path, sizeof path, "%.*s/data/postmaster.pid", PATH_MAX - 32, e->cluster);
    if ((f = fopen(path, "r")) == NULL)
        return -1;
    if (fgets(line, sizeof line, f) == NULL)
        line[0] = '\0';
    fclose(f);
    long pid = strtol(line, NULL, 10);
    return pid > 0 ? (pid_t)pid : -1;
}
