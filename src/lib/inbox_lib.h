/*
 * libhookd's inbox handler (hookd_inbox_work, include/hookd.h) inside:
 * the loop shared by both databases, and the table of statements each
 * database fills (inbox_sqlite.c, inbox_pg.c). Linked into
 * build/libhookd.a; it reaches the database only through the caller's
 * connection, never through the daemon's store.
 *
 *   lib_inbox_work      claim, then per item: begin, callback, outcome, commit
 *   lib_sqlite_error / lib_pg_error   a database error as a hookd_error (publish*.c too)
 */
#ifndef HOOKD_LIB_INBOX_LIB_H
#define HOOKD_LIB_INBOX_LIB_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>
#include <sqlite3.h>

#include "hookd.h"

#define LIB_BATCH_MAX 64        /* items one claim takes */
#define LIB_MAX_ITEMS_DEFAULT 100
#define LIB_BATCH_DEFAULT 16
#define LIB_LEASE_DEFAULT_MS 30000
#define LIB_OWNER_MAX 64        /* with the NUL */
#define LIB_NOTE_MAX 256        /* the callback's note, with the NUL */

/* One claimed row; every string is the row's, on the heap (lib_batch_free). */
struct lib_item {
    char *id, *source, *event_id, *event_type, *entity_kind, *entity_id, *payload;
    size_t payload_len;
    int64_t version, lease_token, received_at, deferred_at; /* deferred_at 0: not deferred */
    bool has_version;
    int attempts;
};

struct lib_batch {
    struct lib_item items[LIB_BATCH_MAX];
    size_t n;
};
void lib_batch_free(struct lib_batch *b);

/* The outcome written for an item, fenced by its lease. */
struct lib_step {
    const char *status;      /* "processed", "pending", "deferred" or "quarantined" */
    int attempts;
    int64_t next_attempt_at; /* for pending and deferred */
    const char *result;      /* may be NULL */
    const char *error;       /* may be NULL */
};

/* What each database does; conn is the caller's connection. */
struct lib_backend {
    /* The source's stored definition (malloc'd), or HOOKD_ENOTFOUND. */
    int (*source_definition)(void *conn, const char *name, char **out);
    /* 0 when no transaction is open on conn, else HOOKD_EINVAL. */
    int (*idle)(void *conn);
    /* Leases up to limit due items of source to owner, in a transaction of its own. */
    int (*claim)(void *conn, const char *source, const char *owner, int64_t now, int64_t lease_until, int limit,
                 struct lib_batch *out);
    /* Opens the item's transaction and checks, holding the row, that the lease is still owner's (HOOKD_ESTALE
     * when it is not: the transaction is closed again). */
    int (*begin)(void *conn, const struct lib_item *it, const char *owner);
    /* After the callback: 0 while hookd's transaction is open and usable, HOOKD_EINVAL when it was ended,
     * HOOKD_EIO when a statement in it failed (PostgreSQL aborts the transaction). */
    int (*usable)(void *conn);
    /* The fenced outcome, inside the open transaction. */
    int (*write)(void *conn, const struct lib_item *it, const char *owner, const struct lib_step *st, int64_t now);
    int (*commit)(void *conn);
    void (*rollback)(void *conn);
    /* Drops the lease of a claimed item this call will not reach (best effort). */
    void (*release)(void *conn, const struct lib_item *it, const char *owner);
};

extern const struct lib_backend lib_sqlite_backend;
extern const struct lib_backend lib_pg_backend;

__attribute__((warn_unused_result)) int lib_inbox_work(const struct lib_backend *be, void *conn, const char *source,
                                                       hookd_inbox_fn fn, void *arg,
                                                       const struct hookd_inbox_options *opts,
                                                       struct hookd_inbox_counts *counts);

int lib_sqlite_error(sqlite3 *db, int rc);
int lib_pg_error(PGconn *conn, const PGresult *res);
#endif
