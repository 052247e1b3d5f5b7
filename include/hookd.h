/*
 * hookd public C API: publish an event into the outbox inside the caller's own
 * database transaction (SQLite or PostgreSQL), process a library source's
 * inbox items inside the caller's own transaction, and verify Standard
 * Webhooks signatures. Link with build/libhookd.a and
 * -lsqlite3 -lpq -ljansson -lcrypto.
 */
#ifndef HOOKD_H
#define HOOKD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HOOKD_VERSION "0.1.0"

/* Every fallible hookd function returns 0 or one of these (negative). */
enum hookd_error {
    HOOKD_OK = 0,
    HOOKD_ENOMEM = -1,    /* allocation failed */
    HOOKD_EINVAL = -2,    /* bad argument or input */
    HOOKD_ENOTFOUND = -3, /* no such row */
    HOOKD_EEXISTS = -4,   /* unique key already present */
    HOOKD_ESTALE = -5,    /* fencing token no longer current */
    HOOKD_EIO = -6,       /* store or system I/O error */
    HOOKD_EBUSY = -7,     /* locked; try again */
    HOOKD_ECONFLICT = -8, /* key reused with different content */
    HOOKD_EUNAVAIL = -9,  /* store unavailable */
    HOOKD_ESIG = -10,     /* signature did not verify */
    HOOKD_ETIME = -11,    /* timestamp outside tolerance */
};

/* A static English description of a hookd_error. */
const char *hookd_strerror(int err);

/* Longest id hookd generates or accepts, including the terminating NUL. */
#define HOOKD_ID_MAX 64

/* An event to publish. Only type and data_json are required; data_json must be
 * one JSON value as UTF-8 text (RFC 8259; strings as I-JSON has them: no
 * unpaired surrogate escapes, no \u0000), else HOOKD_EINVAL. Strings are
 * borrowed for the call. */
struct hookd_event {
    const char *id;            /* NULL: generated ("evt_…") */
    const char *type;          /* e.g. "order.paid" */
    const char *account;       /* NULL: no account */
    const char *resource_type; /* optional */
    const char *resource_id;   /* optional */
    int64_t resource_version;  /* used when has_resource_version */
    int has_resource_version;
    const char *data_json;     /* the "data" member of the webhook body */
};

struct sqlite3;

/*
 * Inserts the event into hookd_outbox through the caller's connection. Call it
 * between the caller's BEGIN and COMMIT: the event is delivered if and only if
 * that transaction commits. Does not begin or commit anything itself.
 * id_out (may be NULL) receives the event id.
 */
__attribute__((warn_unused_result)) int hookd_publish(struct sqlite3 *db, const struct hookd_event *ev,
                                                      char id_out[HOOKD_ID_MAX]);

/* libpq's connection: PGconn is `typedef struct pg_conn PGconn`, so pass your PGconn *. */
struct pg_conn;

/*
 * The same for PostgreSQL, through the caller's libpq connection to a database
 * hookd has migrated. Call it inside the caller's transaction (BEGIN .. COMMIT):
 * the event is delivered if and only if that transaction commits; outside one
 * the insert commits at once. Does not begin or commit anything itself, and a
 * refused event (HOOKD_EINVAL for bad input or data_json that is not JSON,
 * HOOKD_EEXISTS for a taken id) leaves the transaction usable. Other errors
 * come from the server (HOOKD_EIO, HOOKD_EUNAVAIL when the connection is lost).
 */
__attribute__((warn_unused_result)) int hookd_publish_pg(struct pg_conn *conn, const struct hookd_event *ev,
                                                         char id_out[HOOKD_ID_MAX]);

/* ---- the application's own handler: inbox items in the caller's transaction -------------------- */

/*
 * One inbox item as hookd_inbox_work() hands it to the callback. Everything is
 * borrowed for the duration of the callback only. Fields are only ever added
 * at the end: a field exists when it ends within struct_size, e.g.
 * item->struct_size >= offsetof(struct hookd_inbox_item, entity_state) + sizeof(char *).
 */
struct hookd_inbox_item {
    size_t struct_size;       /* sizeof(struct hookd_inbox_item) of the hookd that filled it */
    const char *id;           /* the inbox item ("inb_…"): stable across retries and replays */
    const char *source;       /* the source's name */
    const char *event_id;     /* the provider's event id, unique within the source */
    const char *event_type;   /* NULL: the source gives none */
    const char *entity_kind;  /* NULL: none */
    const char *entity_id;    /* NULL: none */
    int64_t version;          /* the entity's version, when has_version */
    int has_version;
    int attempt;              /* this run: 1 the first time (a replay starts again at 1) */
    const char *payload;      /* the request body as received, payload_len bytes, then a NUL */
    size_t payload_len;
    int64_t received_at_ms;   /* when hookd stored it, unix milliseconds */
    /* Reserved for state machines (handler.machine): the entity's current state
     * when the source also declares a machine. Always NULL in this version. */
    const char *entity_state;
};

/* What the callback returns: one of these, or a negative number (an error). */
enum hookd_inbox_outcome {
    HOOKD_INBOX_PROCESSED = 0,   /* done: the business writes and the "processed" mark commit together */
    HOOKD_INBOX_DEFERRED = 1,    /* not yet (e.g. it depends on an event still to come): the writes commit,
                                    the item is looked at again on the source's retry_schedule, and is
                                    quarantined once it has been deferred for max_defer */
    HOOKD_INBOX_QUARANTINED = 2, /* never: the writes commit, the item waits for a person (hookd inbox replay) */
};

/*
 * The application's handler. It runs inside a transaction hookd opened on the
 * caller's connection: its writes through that connection commit if and only
 * if the item's outcome does. It must not COMMIT or ROLLBACK (SAVEPOINTs are
 * fine). A negative return is a failure: hookd rolls back everything the
 * callback wrote together with the outcome, then records the failed attempt
 * (retried on the source's retry_schedule, quarantined when it is exhausted).
 * A value that is neither an outcome nor negative counts as a failure too.
 * note (note_size bytes, starts empty) may receive a short reason: stored as
 * the item's result when processed, its error otherwise (bytes that are not
 * printable UTF-8 are replaced).
 */
typedef int (*hookd_inbox_fn)(void *arg, const struct hookd_inbox_item *item, char *note, size_t note_size);

/* Limits of one hookd_inbox_work() call. NULL, or zero fields, take the defaults. */
struct hookd_inbox_options {
    size_t struct_size; /* sizeof(struct hookd_inbox_options) as the caller compiled it; later fields default */
    int max_items;      /* most items this call takes through (0: 100) */
    int batch;          /* items claimed at once (0: 16; never above max_items) */
    int64_t lease_ms;   /* how long claimed items are held for this caller until their transaction starts
                           (0: 30 s); an item whose lease ran out and was claimed by another caller is
                           skipped ("lost"), never processed twice */
    const char *owner;  /* the lease owner shown on the items (NULL: "app:HOST:PID"; at most 63 bytes) */
};

/* What one hookd_inbox_work() call did; each step counted once its transaction committed. */
struct hookd_inbox_counts {
    int processed, deferred, quarantined;
    int failed; /* the callback failed: its writes rolled back, the attempt recorded */
    int lost;   /* claimed, but another caller took the item over before its transaction began */
    int reserved[3];
};

/*
 * Processes due items of a library source (handler {"library": true}) on the
 * caller's SQLite connection to hookd's database: claims up to opts->batch
 * pending or deferred items with a lease (one item per entity at a time, the
 * daemon's rule), then for each one BEGIN IMMEDIATE, the callback, the item's
 * outcome, COMMIT, until max_items or nothing is due. Call it outside any
 * transaction, with a busy timeout set on db (sqlite3_busy_timeout), from one
 * thread per connection. Returns the number of items taken through (>= 0) or
 * HOOKD_EINVAL (bad arguments, a transaction already open, a source whose
 * handler is not library, or a callback that ended hookd's transaction),
 * HOOKD_ENOTFOUND (no such source), HOOKD_EBUSY, HOOKD_EIO. Steps committed
 * before an error stay committed; counts (may be NULL) tells what happened.
 * Claimed items not reached are released at once (their leases dropped).
 */
__attribute__((warn_unused_result)) int hookd_inbox_work(struct sqlite3 *db, const char *source, hookd_inbox_fn fn,
                                                         void *arg, const struct hookd_inbox_options *opts,
                                                         struct hookd_inbox_counts *counts);

/*
 * The same on the caller's libpq connection (a database hookd has migrated),
 * from any number of processes at once: claims are serialized with the
 * daemon's, and each item's row stays locked for its transaction, so two
 * callers never process one item at once. The connection must be idle (no
 * transaction open). Errors as above, and HOOKD_EUNAVAIL when the connection
 * is lost (then the outcome of the step in flight is unknown to the caller,
 * but its writes and its mark are still one transaction). `LISTEN hookd_inbox`
 * on another connection wakes an application when items arrive.
 */
__attribute__((warn_unused_result)) int hookd_inbox_work_pg(struct pg_conn *conn, const char *source,
                                                            hookd_inbox_fn fn, void *arg,
                                                            const struct hookd_inbox_options *opts,
                                                            struct hookd_inbox_counts *counts);

/*
 * Verifies a Standard Webhooks request: the webhook-id, webhook-timestamp and
 * webhook-signature header values, the raw body, and the endpoint secret
 * ("whsec_…"). tolerance_s bounds the timestamp age in both directions
 * (0: 300 s). Returns 0, HOOKD_ESIG, HOOKD_ETIME or HOOKD_EINVAL.
 */
__attribute__((warn_unused_result)) int hookd_verify(const char *secret, const char *msg_id, const char *timestamp,
                                                     const char *signature_header, const void *body, size_t body_len,
                                                     int64_t tolerance_s);

/* A request header as given to hookd_verify_scheme. */
struct hookd_header {
    const char *name; /* compared case-insensitively */
    const char *value;
};

/* The settings of the "hmac" scheme (NULL or "" fields take their defaults; header is required). */
struct hookd_hmac_params {
    const char *header;           /* e.g. "X-Signature" */
    const char *algorithm;        /* "sha256" (default) | "sha512" */
    const char *encoding;         /* "hex" (default) | "base64" */
    const char *prefix;           /* e.g. "sha256=" */
    const char *timestamp_header; /* its value: decimal unix seconds */
    const char *template_text;    /* e.g. "{timestamp}.{body}"; also {header:NAME}, "{{", "}}" */
};

/*
 * Verifies a received request with a named scheme: "standard-webhooks" (v1
 * whsec_ secrets, v1a whpk_ public keys), "stripe", "github", "hmac" (then
 * hmac gives its settings; NULL otherwise) or "none". The headers are the
 * request's, the body its raw bytes; any of the secrets may match.
 * tolerance_s bounds the timestamp age in both directions (0: 300 s), on the
 * wall clock. Returns 0, HOOKD_ESIG, HOOKD_ETIME or HOOKD_EINVAL (unknown
 * scheme, bad settings, missing or malformed headers, no usable secret).
 */
__attribute__((warn_unused_result)) int hookd_verify_scheme(const char *scheme, const struct hookd_hmac_params *hmac,
                                                            const struct hookd_header *headers, size_t n_headers,
                                                            const void *body, size_t body_len,
                                                            const char *const *secrets, size_t n_secrets,
                                                            int64_t tolerance_s);

#ifdef __cplusplus
}
#endif
#endif
