/*
 * hookd's HTTP/1.1 server (http_loop.c, http_conn.c, http_parse.c), with a route table of
 * {method, pattern, handler, auth, body cap}. Patterns are literal segments
 * and "{name}" captures ("/v1/endpoints/{id}/secret/rotate"); "*" as the last
 * segment matches any rest.
 *
 * The route is decided on the request header alone: 400 (ambiguous framing,
 * control bytes in a header), 401 and 403 (auth), 404, 405, 413 (a Content-Length
 * over the route's cap), 414 and 431 are answered before any of the body is
 * read. A chunked body that outgrows the cap is dropped, answered 413 at its
 * end and the connection closed. Then the body is read and the handler runs; a
 * handler that waits for something (a commit) suspends the request and
 * finishes it later from any thread (http_suspend / http_resume), so no
 * thread waits with it.
 *
 * With threads > 0 the server is one epoll loop per thread, each holding
 * thousands of connections, and handlers run on the loop; with threads = 0
 * there is one loop and handlers run on a pool of threads (they may sleep).
 * The request header has a deadline of its own (a client trickling bytes
 * does not extend it), and connections are capped in total and per client
 * address. Every error, the protocol's own included, is the JSON shape.
 *
 *   http_server_start / http_server_stop / http_server_port / http_server_stats
 *   http_header, http_query, http_query_each, http_param, http_body   request accessors
 *   http_reply, http_reply_json, http_reply_error    fill the response
 *   http_suspend / http_resume                       finish a request later
 */
#ifndef HOOKD_NET_HTTP_H
#define HOOKD_NET_HTTP_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct http_server;
struct http_request; /* opaque; valid during the handler call, or until http_resume */

struct http_response {
    int status;               /* default 200 */
    char *body;               /* heap; the server frees it */
    size_t body_len;
    const char *content_type; /* static; default "application/json" */
    char *headers[8][2];      /* extra headers (heap name/value pairs, freed by the server) */
    int n_headers;
};

typedef void (*http_handler)(struct http_request *req, struct http_response *res, void *ctx);
/* Runs once the header is complete, before any of the body is read. Returns
 * true to go on (it may change the body cap with http_set_max_body), false
 * after filling res: that answer is sent and the body never read. */
typedef bool (*http_prepare_fn)(struct http_request *req, struct http_response *res, void *ctx);
/* Told, on the loop thread, that the server answers this request 413 because
 * its body (chunked, so no Content-Length to refuse early) outgrew the cap;
 * received counts the body bytes that came. For records only: it must not
 * block, and the answer is the server's. */
typedef void (*http_too_large_fn)(struct http_request *req, size_t received, void *ctx);

enum http_auth {
    HTTP_AUTH_NONE = 0,
    HTTP_AUTH_ADMIN,  /* "Authorization: Bearer <admin token>", checked by the server before the body */
    HTTP_AUTH_SOURCE, /* a signature over the raw body: the route's handler checks it (prepare may refuse early) */
};

/*
 * What an HTTP_AUTH_ADMIN route lets a scoped (account) token do beside the
 * admin token: the scopes a token must hold, all of them. 0: the admin token
 * only (a valid scoped token gets 403 forbidden).
 */
enum http_scope {
    HTTP_SCOPE_READ = 1,   /* the account's own records, read */
    HTTP_SCOPE_REPLAY = 2, /* replay of the account's own dead and skipped deliveries */
};

struct http_route {
    const char *method; /* "GET", "POST", …; "*" any */
    const char *pattern;
    http_handler handler;
    enum http_auth auth;
    size_t max_body;         /* 0: the server's max_body */
    http_prepare_fn prepare; /* optional */
    unsigned scopes;         /* enum http_scope bits a scoped token needs here; 0: admin only */
};

#define HTTP_CALLER_ID_MAX 64
#define HTTP_CALLER_ACCOUNT_MAX 256

/* Who sent a request of an HTTP_AUTH_ADMIN route, as the server's auth decided. */
struct http_caller {
    bool admin;                            /* the admin token: everything */
    char id[HTTP_CALLER_ID_MAX];           /* "admin", or the scoped token's id */
    char account[HTTP_CALLER_ACCOUNT_MAX]; /* a scoped token's account */
    unsigned scopes;                       /* a scoped token's enum http_scope bits */
};

/*
 * Checks a bearer value that is not the admin token, on the request's thread
 * before the body is read: 0 and *out filled for a valid scoped token;
 * HOOKD_ENOTFOUND (unknown or revoked) or HOOKD_ETIME (expired): 401; another
 * error (the store is down and nothing is cached): 503.
 */
typedef int (*http_token_check_fn)(void *ctx, const char *token, size_t len, struct http_caller *out);

struct http_server_options {
    const char *listen;     /* "127.0.0.1:8081", "[::1]:0", ":8080"; port 0 picks a free one */
    const struct http_route *routes;
    size_t n_routes;
    void *ctx;              /* passed to handlers */
    const char *admin_token;  /* for HTTP_AUTH_ADMIN routes (copied); NULL or empty: they answer 401 */
    http_token_check_fn token_check; /* scoped tokens (called with ctx); NULL: the admin token only */
    size_t max_body;        /* default 1 MiB */
    unsigned threads;       /* 0: one thread per connection (handlers may sleep); else epoll loops */
    unsigned max_connections;        /* default 10240 (at most what RLIMIT_NOFILE allows) */
    unsigned max_connections_per_ip; /* default 1024; 0 keeps the default */
    int64_t header_timeout_ms;       /* whole request header, from its first byte; default 10 s */
    unsigned idle_timeout_s;         /* no traffic at all, e.g. between keep-alive requests; default 60 */
    size_t connection_memory;        /* per-connection buffer memory; default 128 KiB */
};

__attribute__((warn_unused_result)) int http_server_start(const struct http_server_options *opt,
                                                          struct http_server **out);
/* The bound port (useful with port 0). */
int http_server_port(const struct http_server *s);
/* Waits for suspended requests to be resumed, then closes every connection. */
void http_server_stop(struct http_server *s);

struct http_server_stats {
    uint64_t connections;     /* accepted so far */
    uint64_t open;            /* open now */
    uint64_t closed;          /* closed so far */
    uint64_t bytes_read;      /* bytes the server read from the sockets of closed connections */
    uint64_t body_bytes;      /* request body bytes decoded (kept or dropped past a cap) */
    uint64_t header_timeouts; /* connections closed for a late request header */
    uint64_t suspended;       /* requests waiting in http_suspend now */
};
void http_server_stats(struct http_server *s, struct http_server_stats *out);

const char *http_method(const struct http_request *r);
const char *http_path(const struct http_request *r);
const char *http_header(const struct http_request *r, const char *name); /* case-insensitive; NULL if absent */
const char *http_query(const struct http_request *r, const char *name);  /* decoded; NULL if absent */
const char *http_param(const struct http_request *r, const char *name);  /* a {name} capture */
/* Calls fn for each query parameter in order, duplicates included (value NULL when given
 * without '='), until fn returns non-zero. Returns the number of calls. */
int http_query_each(const struct http_request *r, int (*fn)(void *arg, const char *name, const char *value),
                    void *arg);
const char *http_body(const struct http_request *r, size_t *len);        /* NUL-terminated */
const char *http_peer(const struct http_request *r);                     /* "127.0.0.1:port" */
/* Who sent it (an HTTP_AUTH_ADMIN route; zeroed elsewhere). */
const struct http_caller *http_request_caller(const struct http_request *r);
/* From a prepare hook: the body cap of this request (a larger Content-Length is then 413). */
void http_set_max_body(struct http_request *r, size_t max_body);
/* From a prepare hook: fn hears of it if this request's body outgrows the cap (see http_too_large_fn). */
void http_set_too_large(struct http_request *r, http_too_large_fn fn);

/*
 * From a handler: the request is answered later. The handler returns without
 * a response (res is ignored) and the connection waits without a thread until
 * http_resume. req, its params, headers and body stay valid until then.
 */
void http_suspend(struct http_request *req);
/* From any thread, exactly once per http_suspend: sends res (its contents are
 * taken over and res is cleared). req must not be used afterwards. */
void http_resume(struct http_request *req, struct http_response *res);

/* Constant-time comparison of a token with given_len bytes (an empty expected token never matches). */
bool http_token_equal(const char *expected, const char *given, size_t given_len);

/* Takes ownership of body (may be NULL). */
void http_reply(struct http_response *res, int status, char *body, size_t len);
/* Serialises and decrefs json (a jansson json_t *). */
void http_reply_json(struct http_response *res, int status, void *json);
/* {"error":{"code":code,"message":message}} */
void http_reply_error(struct http_response *res, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Adds a response header (copied). */
void http_add_header(struct http_response *res, const char *name, const char *value);
#endif
