/*
 * The HTTP engine: outbound HTTP/1.1 requests by hookd's own client, driven by
 * its owner's loop thread (it has no thread of its own but the resolver's, so
 * a completion costs no hand-over). It keeps connections alive for reuse (a
 * pool keyed by scheme, host and port, at most max_transfers open, idle ones
 * closed after 60 s), resolves names on a thread of its own (never blocking
 * the loop; answers cached 60 s), refuses private addresses before connect
 * (net/ssrf.h) unless allowed, speaks TLS 1.2+ with the peer verified
 * (OpenSSL; the system's store or ca_file), never follows redirects, never
 * takes a proxy from the environment, keeps a capped snippet of each
 * response and ends a transfer whose response grows past a hard cap. A turn
 * costs what its ready sockets and due deadlines cost, not what the
 * transfers in flight do. What a result means is not the engine's business: a
 * classifier, a pure function given with the request, names the outcome
 * (outbound delivery: core/retry.h; an inbound forward: its own table).
 *
 * On the wire: the request line, Host (with the port when not the scheme's),
 * User-Agent, Accept (any type, as libcurl sent it), the caller's lines in order, then Content-Length
 * when there is a body (0 for a bodiless method other than GET and HEAD). A
 * caller's "Host: …", "User-Agent: …" or "Accept: …" replaces the engine's;
 * "Name:" with no value sends nothing and suppresses the engine's; framing
 * (Content-Length, Transfer-Encoding) is the engine's alone. Error texts are
 * "<class>: <reason>" (class from transport_error_name), but for the SSRF
 * guard's "address refused by SSRF guard"; no byte from a receiver is in them.
 * Every write (TLS too) uses MSG_NOSIGNAL: a peer that went away never raises SIGPIPE.
 *
 *   http_engine_create / http_engine_destroy  the engine (destroy drops what is in flight, no callbacks)
 *   http_engine_submit       start a request; its done runs exactly once, from http_engine_run
 *                            or http_engine_cancel_all (never from submit: a failed submit runs nothing)
 *   http_engine_run          drive the transfers; run the completions of those that ended
 *   http_engine_wait         sleep until a socket is ready, http_engine_wakeup, or a timeout
 *   http_engine_wakeup       end a wait from any thread (the only thread-safe call)
 *   http_engine_room         requests that may be submitted now
 *   http_engine_cancel_all   end every transfer in flight; each done runs with result->cancelled
 *
 * One thread (the owner's loop) makes every call but http_engine_wakeup. The
 * address policy is the engine's: a caller with another trust (a forward to
 * the application's own address) makes an engine of its own.
 */
#ifndef HOOKD_NET_HTTP_CLIENT_H
#define HOOKD_NET_HTTP_CLIENT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/retry.h" /* enum transport_error */

#define HTTP_CLIENT_MAX_HEADERS 24         /* request header lines per request (a delivery: 4 + 16 custom) */
#define HTTP_CLIENT_RESPONSE_ABORT_DEFAULT (1024 * 1024)
#define HTTP_CLIENT_ERROR_MAX 288          /* "class: " + the reason */
#define HTTP_CLIENT_RETRY_AFTER_MAX 64

struct http_engine;

struct http_engine_options {
    int max_transfers;          /* transfers at once, and connections kept open for reuse; at least 1 */
    int64_t connect_timeout_ms; /* default of requests that give 0; covers DNS, connect and the TLS
                                 * handshake (0 here and in the request: 300 s) */
    int64_t timeout_ms;         /* whole request from submit, default of requests that give 0 (0: none) */
    size_t response_max;        /* response snippet kept, default of requests that give 0 */
    size_t response_abort;      /* a response body longer than this ends the transfer (its status
                                 * still counts); 0: HTTP_CLIENT_RESPONSE_ABORT_DEFAULT */
    bool allow_private_networks;
    const char *user_agent;     /* copied; NULL: "hookd/<version>" */
    const char *ca_file;        /* PEM trust anchors for https, copied; NULL: the system's store
                                 * (OpenSSL's default paths, which honour SSL_CERT_FILE) */
};

struct http_client_result;

/* Names what a result means for the caller (its own enum); pure: no I/O, no state. */
typedef int (*http_client_classify_fn)(const struct http_client_result *res);

struct http_client_request {
    const char *method;              /* "GET", "POST", "HEAD", "PUT", … */
    const char *url;                 /* http or https only */
    const char *const *headers;      /* "Name: value" lines; "Name:" suppresses a header */
    size_t n_headers;                /* at most HTTP_CLIENT_MAX_HEADERS */
    const char *body;                /* NULL: none */
    size_t body_len;
    int64_t timeout_ms;              /* 0: the engine's */
    int64_t connect_timeout_ms;      /* 0: the engine's */
    size_t response_max;             /* 0: the engine's */
    http_client_classify_fn classify; /* NULL: result->outcome is -1 */
};

/* What happened to one request. Every pointer is valid only while done runs. */
struct http_client_result {
    enum transport_error transport; /* TRANSPORT_OK: a status arrived */
    int status;                     /* HTTP status; 0 without one */
    const char *body;               /* the response's first bytes, NUL-terminated ("" for none) */
    size_t body_len;
    bool body_truncated;            /* the response was longer than the snippet */
    bool body_aborted;              /* longer than response_abort: the transfer was ended, status kept */
    const char *retry_after;        /* the Retry-After value as received; "" when absent */
    int64_t started_at_ms;          /* wall clock at submit */
    int duration_ms;                /* submit to end, monotonic */
    bool connection_reused;         /* no new connection was opened for it */
    bool cancelled;                 /* http_engine_cancel_all: nothing above is meaningful */
    const char *error;              /* "" on an answer; else "<class>: <reason>" */
    int outcome;                    /* req->classify(this), -1 without a classifier or when cancelled */
};

/* Runs once per submitted request, on the thread that called http_engine_run (or cancel_all). */
typedef void (*http_client_done_fn)(void *arg, const struct http_client_result *res);

/* HOOKD_EINVAL for bad options, HOOKD_EIO (no epoll set or eventfd), HOOKD_ENOMEM. */
__attribute__((warn_unused_result)) int http_engine_create(const struct http_engine_options *opt,
                                                           struct http_engine **out);
/* Transfers still in flight are dropped without their callbacks; e may be NULL. */
void http_engine_destroy(struct http_engine *e);

/*
 * Starts req. The method and URL are copied; the header lines and the body
 * are borrowed until done runs (req itself may go). Returns 0 (done will run),
 * HOOKD_EBUSY (no room: max_transfers in flight), HOOKD_EINVAL (bad method,
 * too many headers, a header line that is not "Name: value" or holds CR or
 * LF, a request head over 128 KiB, a URL without a scheme, with userinfo, a
 * bad host or port, or a byte a request line cannot carry: space, CTL,
 * non-ASCII) or HOOKD_ENOMEM; done never runs then. A scheme other than
 * http and https is accepted and ends TRANSPORT_BLOCKED.
 */
__attribute__((warn_unused_result)) int http_engine_submit(struct http_engine *e,
                                                           const struct http_client_request *req,
                                                           http_client_done_fn done, void *arg);

/*
 * Drives every transfer as far as it goes without blocking, then runs the
 * completions of those that ended, in order. A completion may submit again
 * (its own slot is free once it returns). Returns how many completed.
 */
int http_engine_run(struct http_engine *e);

/* Waits at most timeout_ms for activity on a transfer's socket or a wake-up. */
void http_engine_wait(struct http_engine *e, int timeout_ms);
void http_engine_wakeup(struct http_engine *e);
int http_engine_room(const struct http_engine *e);
/* Ends every transfer in flight; their done callbacks run before it returns. */
void http_engine_cancel_all(struct http_engine *e);
#endif
