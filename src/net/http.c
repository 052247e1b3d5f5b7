/*
 * The HTTP server's public helpers: filling responses, the request accessors,
 * the constant-time token check, suspend and resume, and the statistics. The
 * server itself is http_loop.c (loops, accept, limits) and http_conn.c (the
 * connection and request state machine); requests are parsed by http_parse.c.
 */
#include "net/http.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "net/http_internal.h"

static const char default_content_type[] = "application/json";

int64_t http_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- responses ----------------------------------------------------------- */

void http_reply(struct http_response *res, int status, char *body, size_t len)
{
    free(res->body);
    res->status = status;
    res->body = body;
    res->body_len = body ? len : 0;
}

void http_reply_json(struct http_response *res, int status, void *json)
{
    json_t *j = json;
    char *text = j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;

    json_decref(j);
    if (!text) {
        http_reply_error(res, 500, "internal", "could not encode the response");
        return;
    }
    http_reply(res, status, text, strlen(text));
    res->content_type = default_content_type;
}

void http_reply_error(struct http_response *res, int status, const char *code, const char *fmt, ...)
{
    char message[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    json_t *j = json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", message);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    res->content_type = default_content_type;
    if (!text) {
        /* Out of memory: a fixed body still says what happened. */
        static const char oom[] = "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}";
        text = strdup(oom);
    }
    http_reply(res, status, text, text ? strlen(text) : 0);
}

void http_add_header(struct http_response *res, const char *name, const char *value)
{
    if (res->n_headers >= (int)(sizeof res->headers / sizeof res->headers[0]))
        return;
    char *n = strdup(name);
    char *v = strdup(value);
    if (!n || !v) {
        free(n);
        free(v);
        return;
    }
    res->headers[res->n_headers][0] = n;
    res->headers[res->n_headers][1] = v;
    res->n_headers++;
}

void http_response_clear(struct http_response *res)
{
    free(res->body);
    for (int i = 0; i < res->n_headers; i++) {
        free(res->headers[i][0]);
        free(res->headers[i][1]);
    }
    memset(res, 0, sizeof *res);
}

/* ---- request accessors ----------------------------------------------------- */

const char *http_method(const struct http_request *r) { return r->method; }
const char *http_path(const struct http_request *r) { return r->path; }

const char *http_header(const struct http_request *r, const char *name)
{
    return http_parse_header(&r->parser, r->conn->buf, name);
}

const char *http_query(const struct http_request *r, const char *name)
{
    for (size_t i = 0; i < r->n_query; i++)
        if (strcmp(r->query[i].name, name) == 0)
            return r->query[i].value;
    return NULL;
}

int http_query_each(const struct http_request *r, int (*fn)(void *arg, const char *name, const char *value),
                    void *arg)
{
    int calls = 0;

    for (size_t i = 0; i < r->n_query; i++) {
        calls++;
        if (fn(arg, r->query[i].name, r->query[i].value) != 0)
            break;
    }
    return calls;
}

const char *http_param(const struct http_request *r, const char *name) { return route_param(&r->params, name); }
const struct http_caller *http_request_caller(const struct http_request *r) { return &r->caller; }

const char *http_body(const struct http_request *r, size_t *len)
{
    if (len)
        *len = r->body_len;
    return r->body ? r->body : "";
}

void http_set_max_body(struct http_request *r, size_t max_body) { r->max_body = max_body; }

void http_set_too_large(struct http_request *r, http_too_large_fn fn) { r->too_large = fn; }

const char *http_peer(const struct http_request *r)
{
    struct http_request *w = (struct http_request *)r; /* the text is filled on first use */
    char host[INET6_ADDRSTRLEN] = "?";
    char serv[8] = "0";

    if (w->peer[0])
        return w->peer;
    if (getnameinfo((const struct sockaddr *)&r->conn->peer, r->conn->peer_len, host, sizeof host, serv,
                    sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
        snprintf(host, sizeof host, "?");
        snprintf(serv, sizeof serv, "0");
    }
    if (strchr(host, ':'))
        snprintf(w->peer, sizeof w->peer, "[%s]:%s", host, serv);
    else
        snprintf(w->peer, sizeof w->peer, "%s:%s", host, serv);
    return w->peer;
}

bool http_token_equal(const char *expected, const char *given, size_t given_len)
{
    unsigned char a[SHA256_DIGEST_LENGTH], b[SHA256_DIGEST_LENGTH];

    if (!expected || !given || expected[0] == '\0')
        return false;
    /* Hashing first makes the comparison independent of both lengths. */
    SHA256((const unsigned char *)expected, strlen(expected), a);
    SHA256((const unsigned char *)given, given_len, b);
    return CRYPTO_memcmp(a, b, sizeof a) == 0;
}

/* ---- suspended requests -------------------------------------------------------- */

void http_suspend(struct http_request *r)
{
    struct http_server *s = r->server;

    pthread_mutex_lock(&s->mu);
    s->n_suspended++;
    s->n_unsent++;
    pthread_mutex_unlock(&s->mu);
    r->suspended = true;
    r->was_suspended = true;
}

void http_resume(struct http_request *r, struct http_response *res)
{
    /* Only the request's loop touches the connection: the answer is queued to it. */
    r->res = *res;
    memset(res, 0, sizeof *res);
    if (r->res.status == 0)
        r->res.status = 200;
    http_loop_post(r, REQ_EV_RESUMED);
}

/* ---- statistics ------------------------------------------------------------------ */

void http_server_stats(struct http_server *s, struct http_server_stats *out)
{
    memset(out, 0, sizeof *out);
    out->connections = atomic_load(&s->st_connections);
    out->closed = atomic_load(&s->st_closed);
    out->open = out->connections - out->closed;
    out->bytes_read = atomic_load(&s->st_bytes_read);
    out->body_bytes = atomic_load(&s->st_body_bytes);
    out->header_timeouts = atomic_load(&s->st_header_timeouts);
    pthread_mutex_lock(&s->mu);
    out->suspended = s->n_suspended;
    pthread_mutex_unlock(&s->mu);
}
