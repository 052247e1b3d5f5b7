/*
 * The application side of the benchmark: a connection to the store hookd serves (SQLite file or
 * PostgreSQL database) that publishes events through hookd's public C API, in transactions, and
 * stamps each event's slot in the sink's table with its commit time.
 *
 *   publisher_open / publisher_close   one connection of the given store kind
 *   publish_batch                      BEGIN; hookd_publish(_pg) x n; COMMIT
 *   publish_all                        `events` events in transactions of `batch`
 *   publisher_undispatched             outbox rows not fanned out yet
 */
#ifndef LOADGEN_PUBLISHER_H
#define LOADGEN_PUBLISHER_H

#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "options.h"
#include "sink.h"

struct store_def; /* one per enum store_kind: the store's connection, transactions and publish call */

struct publisher {
    const struct store_def *store;
    sqlite3 *db;
    PGconn *pg;
    struct ev_table *table;
    struct ev_slot **batch; /* slots of the open transaction's events */
    long payload_bytes, next_seq;
    const char *type; /* the events' type; NULL: "bench.event" */
    bool untracked;   /* the events are not in the table: no endpoint the sink counts receives them */
    int64_t first_commit_ns, last_commit_ns; /* CLOCK_MONOTONIC ns; 0 before the first commit */
};

/* p must be zeroed first; publisher_close is safe after any failure. target: the SQLite file or the
 * DSN; batch: the most events one transaction will hold. */
__attribute__((warn_unused_result)) int publisher_open(struct publisher *p, enum store_kind store, const char *target,
                                                       struct ev_table *t, long batch, long payload);
void publisher_close(struct publisher *p);

/* BEGIN; hookd_publish(_pg) x n; COMMIT; then stamps each event with the commit time. 0 or -1 after
 * saying why (the transaction is rolled back). */
__attribute__((warn_unused_result)) int publish_batch(struct publisher *p, long n);
__attribute__((warn_unused_result)) int publish_all(struct publisher *p, long events, long batch);
/* Outbox rows hookd has not fanned out yet (-1 on error). */
long publisher_undispatched(struct publisher *p);

#endif
