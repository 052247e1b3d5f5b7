/*
 * The PostgreSQL side of a run: a throwaway cluster from scripts/pg.sh (or a server given by DSN),
 * a fresh database per run, and the URI that hookd and the publisher use.
 *
 *   pg_env_setup / pg_env_teardown     the cluster (or given server) and the fresh database
 *   pg_connect                         a bounded libpq connection for loadgen itself
 *   pg_postmaster_pid                  our cluster's postmaster, for its CPU time
 *   pg_emergency_stop                  async-signal-safe: stops our cluster from a signal handler
 */
#ifndef LOADGEN_PG_ENV_H
#define LOADGEN_PG_ENV_H

#include <libpq-fe.h>
#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#define PG_DSN_MAX 2048

struct pg_env {
    const char *script;          /* scripts/pg.sh */
    char cluster[PATH_MAX];      /* the cluster loadgen started, "" when a DSN was given */
    char server_dsn[PG_DSN_MAX]; /* where CREATE DATABASE runs */
    char dbname[64];             /* the fresh database, "" until created */
    char dsn[PG_DSN_MAX];        /* server_dsn with dbname: hookd's store and the publisher's connection */
};

/* Starts a cluster in scratch/pg unless given_dsn names a server, then creates a fresh database
 * hookd_bench_<random> there and sets e->dsn. pg_env_teardown undoes it (also after a failure). */
__attribute__((warn_unused_result)) int pg_env_setup(struct pg_env *e, const char *given_dsn, const char *scratch);
/* Drops the database (a given server) or stops the cluster; keep: the cluster's data stays (stopped). */
void pg_env_teardown(struct pg_env *e, bool keep);

/* A connection for loadgen itself (10 s connect timeout, 60 s statement timeout), or NULL after
 * saying why. The caller PQfinish-es it. */
PGconn *pg_connect(const char *dsn);

/* The postmaster's pid from DIR/data/postmaster.pid, or -1 (no cluster of ours). */
pid_t pg_postmaster_pid(const struct pg_env *e);

/* Async-signal-safe: stops and removes the running cluster, if any (pg_ctl -w bounds the wait). */
void pg_emergency_stop(void);

#endif
