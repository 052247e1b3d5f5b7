/*
 * hookd public C API: publish an event into the outbox inside the caller's own
 * database transaction (SQLite or PostgreSQL), and verify Standard Webhooks
 * signatures. Link with build/libhookd.a and -lsqlite3 -lpq -lcrypto.
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
