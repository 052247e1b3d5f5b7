/*
 * HTTP server wrapper over libmicrohttpd, with a route table of
 * {method, pattern, handler}. Patterns are literal segments and "{name}"
 * captures ("/v1/endpoints/{id}/secret/rotate"); "*" as the last segment
 * matches any rest. Handlers run synchronously on the connection's thread.
 * Bodies are read fully (up to max_body; larger → 413 before the rest is read)
 * before the handler runs.
 *
 *   http_server_start / http_server_stop
 *   http_header, http_query, http_query_each, http_param   request accessors
 *   http_reply, http_reply_json, http_reply_error   fill the response
 */
#ifndef HOOKD_NET_HTTP_H
#define HOOKD_NET_HTTP_H
#include <stddef.h>
#include <stdint.h>

struct http_server;
struct http_request; /* opaque; valid during the handler call only */

struct http_response {
    int status;               /* default 200 */
    char *body;               /* heap; the server frees it */
    size_t body_len;
    const char *content_type; /* static; default "application/json" */
    char *headers[8][2];      /* extra headers (heap name/value pairs, freed by the server) */
    int n_headers;
};

typedef void (*http_handler)(struct http_request *req, struct http_response *res, void *ctx);

struct http_route {
    const char *method; /* "GET", "POST", …; "*" any */
    const char *pattern;
    http_handler handler;
};

struct http_server_options {
    const char *listen;     /* "127.0.0.1:8081", "[::1]:0", ":8080"; port 0 picks a free one */
    const struct http_route *routes;
    size_t n_routes;
    void *ctx;              /* passed to handlers */
    size_t max_body;        /* default 1 MiB */
    unsigned threads;       /* 0: one thread per connection */
};

__attribute__((warn_unused_result)) int http_server_start(const struct http_server_options *opt,
                                                          struct http_server **out);
/* The bound port (useful with port 0). */
int http_server_port(const struct http_server *s);
void http_server_stop(struct http_server *s);

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
