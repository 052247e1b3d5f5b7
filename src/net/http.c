/*
 * HTTP server wrapper over libmicrohttpd: binds the listen address, decides
 * each request on its header (route, auth, framing, body cap) before reading
 * the body, reads the body up to the route's cap, runs the handler and sends
 * its response, now or after http_resume. Beside libmicrohttpd's own limits
 * it keeps a deadline for the whole request header: a sweeper thread watches
 * every connection's received-byte count and shuts down one whose header is
 * not complete in time. Errors are {"error":{code,message}}.
 */
#include "net/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "hookd.h"
#include "log.h"
#include "net/router.h"

#define HTTP_DEFAULT_MAX_BODY (1024 * 1024)
#define HTTP_DEFAULT_IDLE_TIMEOUT_S 60
#define HTTP_DEFAULT_HEADER_TIMEOUT_MS 10000
#define HTTP_DEFAULT_MAX_CONNECTIONS 10240
#define HTTP_DEFAULT_PER_IP 1024
#define HTTP_DEFAULT_CONNECTION_MEMORY (128 * 1024)
#define HTTP_HEADER_MAX (16 * 1024) /* request line and headers; larger → 431 */
#define HTTP_FD_RESERVE 64          /* descriptors kept for the rest of the process */
#define HTTP_LISTEN_BACKLOG 4096
#define HTTP_BODY_KEEP 65536 /* initial allocation cap when Content-Length is unknown or large */
#define HTTP_TOKEN_MAX 256
#define HTTP_STOP_SEND_MS 2000 /* at stop, how long resumed answers may take to go out */
#define HTTP_DISCARD_MAX(cap) (4 * (cap) + 65536) /* body dropped past the cap before a 413 */

/* A connection as the header-deadline sweeper sees it. */
struct http_conn {
    struct http_conn *prev, *next;
    int fd;
    bool in_request;       /* the header is complete; the deadline does not apply until the request ends */
    bool shut;             /* shut down by the sweeper */
    int64_t header_start;  /* ms, monotonic; 0: no byte of the next request seen yet */
    uint64_t bytes_mark;   /* TCP bytes received when the previous request ended */
};

struct http_server {
    struct MHD_Daemon *mhd;
    const struct http_route *routes;
    size_t n_routes;
    void *ctx;
    size_t max_body;
    char admin_token[HTTP_TOKEN_MAX];
    int port;
    bool epoll;   /* an event loop per thread (suspend/resume); else a thread per connection */
    bool running; /* after start: MHD's per-connection complaints drop to debug */
    int64_t header_timeout_ms;

    pthread_mutex_t mu;
    pthread_cond_t cond; /* sweeper wake-up, resumed requests, stop */
    struct http_conn *conns;
    size_t n_suspended;
    size_t n_unsent; /* suspended requests whose answer is not yet sent */
    bool stopping;
    bool sweeper_started;
    pthread_t sweeper;

    atomic_uint_fast64_t st_connections, st_closed, st_bytes_read, st_body_bytes, st_header_timeouts;
};

enum request_state {
    REQ_BODY,      /* reading the body */
    REQ_SUSPENDED, /* the handler called http_suspend */
    REQ_READY,     /* http_resume gave the response; it is sent on the next call */
    REQ_DONE,      /* a response was queued */
    REQ_DISCARD,   /* a chunked body passed the cap: the rest is dropped, then 413 */
};

struct http_request {
    struct http_server *server;
    struct MHD_Connection *conn;
    struct http_conn *tracked; /* NULL if the connection was not seen starting */
    const char *method;
    const char *path;
    const struct http_route *route;
    size_t max_body;
    bool has_body; /* a Content-Length over 0, or a Transfer-Encoding */
    char *body; /* NUL-terminated; NULL until the first byte */
    size_t body_len, body_cap;
    size_t discarded; /* REQ_DISCARD: body bytes seen */
    bool was_suspended; /* counted in the server's n_unsent until completed */
    _Atomic int state;
    struct http_response deferred; /* REQ_READY */
    struct route_params params;
    char peer[INET6_ADDRSTRLEN + 16];
};

static const char default_content_type[] = "application/json";

static int64_t mono_ms(void)
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

static void response_clear(struct http_response *res)
{
    free(res->body);
    for (int i = 0; i < res->n_headers; i++) {
        free(res->headers[i][0]);
        free(res->headers[i][1]);
    }
    memset(res, 0, sizeof *res);
}

/* Hands res to MHD; res is cleared either way. */
static enum MHD_Result response_send(struct MHD_Connection *conn, struct http_response *res)
{
    struct MHD_Response *mr;
    enum MHD_Result ok = MHD_NO;

    if (res->body && res->body_len > 0) {
        mr = MHD_create_response_from_buffer(res->body_len, res->body, MHD_RESPMEM_MUST_FREE);
        if (mr)
            res->body = NULL; /* MHD owns it now */
    } else {
        mr = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    }
    if (!mr)
        goto out;
    if (res->body_len > 0 || res->status != 204)
        MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE,
                                res->content_type ? res->content_type : default_content_type);
    for (int i = 0; i < res->n_headers; i++)
        MHD_add_response_header(mr, res->headers[i][0], res->headers[i][1]);
    ok = MHD_queue_response(conn, (unsigned)(res->status > 0 ? res->status : 200), mr);
    MHD_destroy_response(mr);
out:
    response_clear(res);
    return ok;
}

/*
 * Sends a refusal decided on the header. With a body to come it goes now:
 * MHD then drops the body unread and closes. Without one it waits for the
 * next call (the request complete), which keeps the connection alive.
 */
static enum MHD_Result refuse(struct http_request *r, struct http_response *res)
{
    if (r->state == REQ_BODY && !r->has_body) {
        r->deferred = *res;
        memset(res, 0, sizeof *res);
        r->state = REQ_READY;
        return MHD_YES;
    }
    r->state = REQ_DONE;
    return response_send(r->conn, res);
}

static enum MHD_Result send_error(struct http_request *r, int status, const char *code, const char *message,
                                  const char *header, const char *value)
{
    struct http_response res = {.status = 200};

    http_reply_error(&res, status, code, "%s", message);
    if (header && value && *value)
        http_add_header(&res, header, value);
    return refuse(r, &res);
}

/* ---- request accessors ----------------------------------------------------- */

const char *http_method(const struct http_request *r) { return r->method; }
const char *http_path(const struct http_request *r) { return r->path; }

const char *http_header(const struct http_request *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *http_query(const struct http_request *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

struct query_walk {
    int (*fn)(void *arg, const char *name, const char *value);
    void *arg;
    int calls;
};

static enum MHD_Result query_visit(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    struct query_walk *w = cls;

    w->calls++;
    return w->fn(w->arg, key, value) == 0 ? MHD_YES : MHD_NO;
}

int http_query_each(const struct http_request *r, int (*fn)(void *arg, const char *name, const char *value),
                    void *arg)
{
    struct query_walk w = {fn, arg, 0};

    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, query_visit, &w);
    return w.calls;
}

const char *http_param(const struct http_request *r, const char *name) { return route_param(&r->params, name); }

const char *http_body(const struct http_request *r, size_t *len)
{
    if (len)
        *len = r->body_len;
    return r->body ? r->body : "";
}

void http_set_max_body(struct http_request *r, size_t max_body) { r->max_body = max_body; }

const char *http_peer(const struct http_request *r)
{
    struct http_request *w = (struct http_request *)r; /* the text is filled on first use */
    if (w->peer[0])
        return w->peer;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    char host[INET6_ADDRSTRLEN] = "?";
    char serv[8] = "0";
    if (ci && ci->client_addr) {
        socklen_t len = ci->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                                : sizeof(struct sockaddr_in);
        if (getnameinfo(ci->client_addr, len, host, sizeof host, serv, sizeof serv,
                        NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
            snprintf(host, sizeof host, "?");
            snprintf(serv, sizeof serv, "0");
        }
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
    r->was_suspended = true;
    r->state = REQ_SUSPENDED;
    if (s->epoll)
        MHD_suspend_connection(r->conn);
}

void http_resume(struct http_request *r, struct http_response *res)
{
    struct http_server *s = r->server;
    struct MHD_Connection *conn = r->conn;

    /* The response is queued by the connection's own thread when MHD calls
     * back after the resume; queueing it here could race that thread. */
    pthread_mutex_lock(&s->mu);
    r->deferred = *res;
    memset(res, 0, sizeof *res);
    if (r->deferred.status == 0)
        r->deferred.status = 200;
    r->state = REQ_READY;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
    /* Outside the lock (MHD takes its own); r may be gone once this returns. */
    if (s->epoll)
        MHD_resume_connection(conn);
    pthread_mutex_lock(&s->mu);
    s->n_suspended--;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
}

/* ---- the request cycle ------------------------------------------------------ */

/* Appends upload data; false when it would pass the cap (nothing is kept then). */
static int body_append(struct http_request *r, const char *data, size_t n, bool *too_large)
{
    *too_large = false;
    if (n > r->max_body - r->body_len) {
        *too_large = true;
        return 0;
    }
    size_t need = r->body_len + n + 1;
    if (need > r->body_cap) {
        size_t cap = r->body_cap ? r->body_cap : 1024;
        while (cap < need)
            cap *= 2;
        if (cap > r->max_body + 1)
            cap = r->max_body + 1;
        char *nb = realloc(r->body, cap);
        if (!nb)
            return HOOKD_ENOMEM;
        r->body = nb;
        r->body_cap = cap;
    }
    memcpy(r->body + r->body_len, data, n);
    r->body_len += n;
    r->body[r->body_len] = '\0';
    return 0;
}

/* What the framing check found in the header. */
struct header_scan {
    bool bad;            /* a NUL or a control byte in a name or value */
    char bad_name[40];   /* the header's name, when it is printable */
    int n_content_length;
    bool conflicting_length;
    const char *content_length;
    size_t content_length_len;
    bool transfer_encoding;
    int n_authorization;
};

static bool byte_is_control(unsigned char c) { return (c < 0x20 && c != '\t') || c == 0x7f; }

static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                   const char *value, size_t value_size)
{
    struct header_scan *h = cls;
    bool bad = !key || strlen(key) != key_size || (value && strlen(value) != value_size);

    /*
     * libmicrohttpd 0.9.75 cuts a value at a NUL and reports the shorter
     * length. The value lies in its read buffer, where it ended the line by
     * overwriting CR and LF with NULs: a line that really ended there is
     * followed by two NULs, one cut short by a NUL is followed by the rest
     * of the line. (A bare-LF line end looks like the latter and is refused
     * too, which is no loss: RFC 9112 lines end in CRLF.)
     */
    if (!bad && value && value_size > 0 && value[value_size] == '\0' && value[value_size + 1] != '\0')
        bad = true;

    for (size_t i = 0; !bad && i < key_size; i++)
        bad = byte_is_control((unsigned char)key[i]) || key[i] == ' ';
    for (size_t i = 0; !bad && value && i < value_size; i++)
        bad = byte_is_control((unsigned char)value[i]);
    if (bad) {
        if (!h->bad) {
            size_t n = 0;
            /* Only a plain name goes into the message: it is the client's text. */
            for (; key && n < key_size && n < sizeof h->bad_name - 1; n++) {
                char c = key[n];
                if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
                    break;
            }
            if (key && n == key_size)
                memcpy(h->bad_name, key, n);
            h->bad_name[key && n == key_size ? n : 0] = '\0';
        }
        h->bad = true;
        return MHD_YES;
    }
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        if (h->n_content_length++ > 0 &&
            (value_size != h->content_length_len || memcmp(value, h->content_length, value_size) != 0))
            h->conflicting_length = true;
        h->content_length = value;
        h->content_length_len = value_size;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        h->transfer_encoding = true;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_AUTHORIZATION) == 0) {
        h->n_authorization++;
    }
    return MHD_YES;
}

static bool admin_auth_ok(const struct http_server *s, struct MHD_Connection *conn)
{
    const char *v = NULL;
    size_t n = 0;

    if (MHD_lookup_connection_value_n(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION,
                                      strlen(MHD_HTTP_HEADER_AUTHORIZATION), &v, &n) != MHD_YES ||
        !v || n < 7 || strncasecmp(v, "Bearer ", 7) != 0)
        return false;
    v += 7;
    n -= 7;
    while (n > 0 && *v == ' ') {
        v++;
        n--;
    }
    /* The whole rest of the value is the token: anything after it fails. */
    return http_token_equal(s->admin_token, v, n);
}

static struct http_conn *conn_tracked(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/*
 * First call, the header complete: framing, size, route, auth and body cap
 * are decided here, so every refusal goes out before any of the body is read
 * (answering now makes MHD drop the rest of the body and close).
 */
static enum MHD_Result request_begin(struct http_server *s, struct MHD_Connection *conn, const char *url,
                                     const char *method, void **con_cls)
{
    struct http_request *r = calloc(1, sizeof *r);
    struct header_scan h = {0};
    char allow[64];
    char message[96];

    if (!r)
        return MHD_NO;
    r->server = s;
    r->conn = conn;
    r->method = method;
    r->path = url;
    r->max_body = s->max_body;
    r->state = REQ_BODY;
    r->has_body = true; /* until the framing is known good: its refusals go at once, and close */
    *con_cls = r;
    r->tracked = conn_tracked(conn);
    if (r->tracked) {
        pthread_mutex_lock(&s->mu);
        r->tracked->in_request = true;
        pthread_mutex_unlock(&s->mu);
    }

    MHD_get_connection_values_n(conn, MHD_HEADER_KIND, scan_header, &h);
    if (h.bad) {
        snprintf(message, sizeof message, "header %s%scontains a NUL or control byte", h.bad_name,
                 h.bad_name[0] ? " " : "");
        return send_error(r, 400, "invalid_header", h.bad_name[0] ? message : "a header contains a NUL or control byte",
                          NULL, NULL);
    }
    if (h.conflicting_length)
        return send_error(r, 400, "invalid_header", "conflicting Content-Length headers", NULL, NULL);
    if (h.n_content_length > 0 && h.transfer_encoding)
        return send_error(r, 400, "invalid_header", "both Content-Length and Transfer-Encoding", NULL, NULL);
    if (h.n_authorization > 1)
        return send_error(r, 400, "invalid_header", "more than one Authorization header", NULL, NULL);
    r->has_body = h.transfer_encoding ||
                  (h.content_length && strtoull(h.content_length, NULL, 10) > 0); /* MHD has checked its syntax */
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    if (ci && ci->header_size > HTTP_HEADER_MAX)
        return send_error(r, 431, "header_too_large", "request header too large", NULL, NULL);

    switch (router_match(s->routes, s->n_routes, method, url, &r->route, &r->params, allow, sizeof allow)) {
    case ROUTE_FOUND:
        break;
    case ROUTE_METHOD_NOT_ALLOWED:
        return send_error(r, 405, "method_not_allowed", "method not allowed on this path", "Allow", allow);
    case ROUTE_PATH_TOO_LONG:
        return send_error(r, 414, "uri_too_long", "request path too long", NULL, NULL);
    case ROUTE_NOT_FOUND:
    default:
        return send_error(r, 404, "not_found", "no such path", NULL, NULL);
    }
    if (r->route->auth == HTTP_AUTH_ADMIN && !admin_auth_ok(s, conn))
        return send_error(r, 401, "unauthorized",
                          "a valid \"Authorization: Bearer <admin token>\" header is required", "WWW-Authenticate",
                          "Bearer");
    if (r->route->max_body > 0)
        r->max_body = r->route->max_body;
    if (r->route->prepare) {
        struct http_response res = {.status = 200};
        if (!r->route->prepare(r, &res, s->ctx))
            return refuse(r, &res);
        response_clear(&res);
    }
    if (h.content_length) {
        unsigned long long len = strtoull(h.content_length, NULL, 10); /* MHD has checked its syntax */
        if (len > r->max_body)
            return send_error(r, 413, "payload_too_large", "request body exceeds the limit", NULL, NULL);
        if (len > 0) {
            size_t cap = (size_t)len + 1;
            if (cap > HTTP_BODY_KEEP)
                cap = HTTP_BODY_KEEP;
            r->body = malloc(cap);
            if (!r->body)
                return MHD_NO;
            r->body_cap = cap;
        }
    }
    return MHD_YES;
}

static enum MHD_Result request_finish(struct http_server *s, struct http_request *r)
{
    struct http_response res = {.status = 200};

    r->route->handler(r, &res, s->ctx);
    if (r->state == REQ_BODY) {
        if (res.status == 0)
            res.status = 200;
        r->state = REQ_DONE;
        return response_send(r->conn, &res);
    }
    response_clear(&res); /* suspended: the answer comes through http_resume */
    if (!s->epoll) {
        /* A thread per connection: this one waits, no other does. */
        pthread_mutex_lock(&s->mu);
        while (r->state != REQ_READY)
            pthread_cond_wait(&s->cond, &s->mu);
        pthread_mutex_unlock(&s->mu);
        r->state = REQ_DONE;
        return response_send(r->conn, &r->deferred);
    }
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    struct http_server *s = cls;
    struct http_request *r = *con_cls;

    if (!r)
        return request_begin(s, conn, url, method, con_cls);
    switch (r->state) {
    case REQ_DONE:
        *upload_data_size = 0; /* a refused body is dropped */
        return MHD_YES;
    case REQ_SUSPENDED:
        return MHD_YES;
    case REQ_DISCARD:
        if (*upload_data_size > 0) {
            r->discarded += *upload_data_size;
            atomic_fetch_add(&s->st_body_bytes, *upload_data_size);
            *upload_data_size = 0;
            /* A body that never ends is not read forever: close without an answer. */
            return r->discarded - r->max_body > HTTP_DISCARD_MAX(r->max_body) ? MHD_NO : MHD_YES;
        }
        return send_error(r, 413, "payload_too_large", "request body exceeds the limit", "Connection", "close");
    case REQ_READY:
        *upload_data_size = 0;
        r->state = REQ_DONE;
        return response_send(conn, &r->deferred);
    default:
        break;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        bool too_large;
        *upload_data_size = 0;
        atomic_fetch_add(&s->st_body_bytes, n);
        if (body_append(r, upload_data, n, &too_large) < 0)
            return MHD_NO;
        /* A chunked body past the cap: answer now; MHD drops the rest and closes. */
        if (too_large) {
            /* libmicrohttpd takes no response mid-upload: drop the rest and answer at its end. */
            explicit_bzero(r->body, r->body_len);
            r->discarded = r->body_len + n;
            r->body_len = 0;
            r->state = REQ_DISCARD;
        }
        return MHD_YES;
    }
    return request_finish(s, r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    struct http_server *s = cls;
    struct http_request *r = *con_cls;

    if (!r)
        return;
    if (r->was_suspended) {
        pthread_mutex_lock(&s->mu);
        s->n_unsent--;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->mu);
    }
    if (r->tracked) {
        struct tcp_info ti;
        socklen_t len = sizeof ti;
        pthread_mutex_lock(&s->mu);
        /* The next request's header deadline starts at its first byte. */
        r->tracked->in_request = false;
        r->tracked->header_start = 0;
        if (getsockopt(r->tracked->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0)
            r->tracked->bytes_mark = ti.tcpi_bytes_received;
        pthread_mutex_unlock(&s->mu);
    }
    if (r->body) {
        /* Bodies can carry secrets (endpoint creation, rotation): wipe before freeing. */
        explicit_bzero(r->body, r->body_len);
        free(r->body);
    }
    response_clear(&r->deferred);
    free(r);
    *con_cls = NULL;
}

/* ---- connections and the header deadline --------------------------------------- */

/* Bytes the server has taken from the socket: received by TCP, minus those still queued. */
static uint64_t socket_bytes_consumed(int fd)
{
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    int queued = 0;

    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
        return 0;
    if (ioctl(fd, SIOCINQ, &queued) != 0 || queued < 0)
        queued = 0;
    return ti.tcpi_bytes_received > (uint64_t)queued ? ti.tcpi_bytes_received - (uint64_t)queued : 0;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct http_server *s = cls;
    struct http_conn *c = *socket_context;

    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        atomic_fetch_add(&s->st_connections, 1);
        c = ci ? calloc(1, sizeof *c) : NULL;
        if (!c)
            return; /* untracked: only libmicrohttpd's idle timeout applies */
        c->fd = ci->connect_fd;
        c->header_start = mono_ms(); /* a new connection owes its first header from the start */
        pthread_mutex_lock(&s->mu);
        c->next = s->conns;
        if (s->conns)
            s->conns->prev = c;
        s->conns = c;
        pthread_mutex_unlock(&s->mu);
        *socket_context = c;
        return;
    }
    atomic_fetch_add(&s->st_closed, 1);
    if (!c)
        return;
    /* Still open here: libmicrohttpd closes the socket after this call. */
    atomic_fetch_add(&s->st_bytes_read, socket_bytes_consumed(c->fd));
    pthread_mutex_lock(&s->mu);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&s->mu);
    free(c);
    *socket_context = NULL;
}

/*
 * The header deadline: a connection whose request header has not been
 * completed header_timeout after its first byte (or after the connection
 * opened) is shut down, however steadily it trickles. libmicrohttpd's idle
 * timeout covers a connection that sends nothing at all.
 */
static void *sweeper_main(void *arg)
{
    struct http_server *s = arg;
    int64_t interval = s->header_timeout_ms / 20;

    if (interval < 10)
        interval = 10;
    if (interval > 500)
        interval = 500;
    pthread_mutex_lock(&s->mu);
    while (!s->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += (long)(interval % 1000) * 1000000L;
        until.tv_sec += interval / 1000 + until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&s->cond, &s->mu, &until);
        if (s->stopping)
            break;
        int64_t now = mono_ms();
        for (struct http_conn *c = s->conns; c; c = c->next) {
            if (c->in_request || c->shut)
                continue;
            if (c->header_start == 0) {
                struct tcp_info ti;
                socklen_t len = sizeof ti;
                if (getsockopt(c->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 && ti.tcpi_bytes_received > c->bytes_mark)
                    c->header_start = now;
                continue;
            }
            if (now - c->header_start > s->header_timeout_ms) {
                /* MHD sees the socket end and closes it; the descriptor stays valid until its close notice. */
                shutdown(c->fd, SHUT_RDWR);
                c->shut = true;
                atomic_fetch_add(&s->st_header_timeouts, 1);
            }
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* libmicrohttpd's messages can quote the client: control bytes are escaped. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    char out[sizeof msg * 4];
    size_t o = 0;

    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    for (size_t i = 0; i < n && o + 5 < sizeof out; i++) {
        unsigned char c = (unsigned char)msg[i];
        if (c < 0x20 || c >= 0x7f)
            o += (size_t)snprintf(out + o, sizeof out - o, "\\x%02x", c);
        else
            out[o++] = (char)c;
    }
    out[o] = '\0';
    struct http_server *s = cls;
    log_write(s->running ? LOG_DEBUG : LOG_WARN, "http", "%s", out);
}

/* ---- start and stop ----------------------------------------------------------- */

/* "host:port", "[v6]:port", ":port" (host 127.0.0.1) into a socket address. */
static int parse_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *ss_len)
{
    char host[256];
    const char *port;
    const char *colon;

    if (!listen)
        return HOOKD_EINVAL;
    if (listen[0] == '[') {
        const char *close = strchr(listen, ']');
        if (!close || close[1] != ':' || (size_t)(close - listen - 1) >= sizeof host)
            return HOOKD_EINVAL;
        memcpy(host, listen + 1, (size_t)(close - listen - 1));
        host[close - listen - 1] = '\0';
        port = close + 2;
    } else {
        colon = strrchr(listen, ':');
        if (!colon || (size_t)(colon - listen) >= sizeof host)
            return HOOKD_EINVAL;
        memcpy(host, listen, (size_t)(colon - listen));
        host[colon - listen] = '\0';
        if (strchr(host, ':'))
            return HOOKD_EINVAL; /* a bare IPv6 address needs brackets */
        port = colon + 1;
    }
    char *end;
    unsigned long p = strtoul(port, &end, 10);
    if (*port == '\0' || *end != '\0' || p > 65535)
        return HOOKD_EINVAL;
    if (host[0] == '\0')
        snprintf(host, sizeof host, "127.0.0.1");

    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(host, port, &hints, &ai) != 0 || !ai)
        return HOOKD_EINVAL;
    if (ai->ai_addrlen > sizeof *ss) {
        freeaddrinfo(ai);
        return HOOKD_EINVAL;
    }
    memcpy(ss, ai->ai_addr, ai->ai_addrlen);
    *ss_len = ai->ai_addrlen;
    freeaddrinfo(ai);
    return 0;
}

/* The connection cap that the descriptor limit allows (each connection is one descriptor). */
static unsigned connections_allowed(unsigned wanted)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return wanted;
    if (rl.rlim_cur <= 2 * HTTP_FD_RESERVE)
        return wanted < 16 ? wanted : 16;
    rlim_t room = rl.rlim_cur - HTTP_FD_RESERVE;
    if ((rlim_t)wanted > room) {
        log_warn("http", "max_connections %u lowered to %llu: the open-file limit is %llu", wanted,
                 (unsigned long long)room, (unsigned long long)rl.rlim_cur);
        return (unsigned)room;
    }
    return wanted;
}

int http_server_start(const struct http_server_options *opt, struct http_server **out)
{
    struct sockaddr_storage ss;
    socklen_t ss_len;
    int rc = HOOKD_EINVAL;
    struct http_server *s = NULL;

    *out = NULL;
    if (!opt || !opt->routes || parse_listen(opt->listen, &ss, &ss_len) != 0) {
        log_error("http", "bad listen address '%s'", opt && opt->listen ? opt->listen : "");
        goto fail;
    }
    if (opt->admin_token && strlen(opt->admin_token) >= HTTP_TOKEN_MAX) {
        log_error("http", "admin token too long");
        goto fail;
    }
    s = calloc(1, sizeof *s);
    if (!s) {
        rc = HOOKD_ENOMEM;
        goto fail;
    }
    s->routes = opt->routes;
    s->n_routes = opt->n_routes;
    s->ctx = opt->ctx;
    s->max_body = opt->max_body ? opt->max_body : HTTP_DEFAULT_MAX_BODY;
    s->epoll = opt->threads > 0;
    s->header_timeout_ms = opt->header_timeout_ms > 0 ? opt->header_timeout_ms : HTTP_DEFAULT_HEADER_TIMEOUT_MS;
    if (opt->admin_token)
        snprintf(s->admin_token, sizeof s->admin_token, "%s", opt->admin_token);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cond, NULL);

    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (s->epoll)
        flags |= MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME;
    else
        flags |= MHD_USE_THREAD_PER_CONNECTION | MHD_USE_AUTO;
    if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)&ss;
        flags |= IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr) ? MHD_USE_DUAL_STACK : MHD_USE_IPv6;
    }
    uint16_t port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                   : ((struct sockaddr_in *)&ss)->sin_port);
    unsigned max_conn = connections_allowed(opt->max_connections ? opt->max_connections
                                                                 : HTTP_DEFAULT_MAX_CONNECTIONS);
    unsigned per_ip = opt->max_connections_per_ip ? opt->max_connections_per_ip : HTTP_DEFAULT_PER_IP;
    size_t memory = opt->connection_memory ? opt->connection_memory : HTTP_DEFAULT_CONNECTION_MEMORY;
    unsigned idle = opt->idle_timeout_s ? opt->idle_timeout_s : HTTP_DEFAULT_IDLE_TIMEOUT_S;
    struct MHD_OptionItem pool_opts[2] = {{MHD_OPTION_END, 0, NULL}, {MHD_OPTION_END, 0, NULL}};
    if (opt->threads > 1)
        pool_opts[0] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)opt->threads, NULL};
    /* The logger goes first so MHD routes every message through it. */
    s->mhd = MHD_start_daemon(flags, port, NULL, NULL, on_request, s,
                              MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s,
                              MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                              MHD_OPTION_CONNECTION_TIMEOUT, idle,
                              MHD_OPTION_CONNECTION_LIMIT, max_conn,
                              MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip,
                              MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory,
                              MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned int)HTTP_LISTEN_BACKLOG,
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                              MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                              MHD_OPTION_ARRAY, pool_opts,
                              MHD_OPTION_END);
    if (!s->mhd) {
        log_error("http", "cannot listen on %s", opt->listen);
        rc = HOOKD_EIO;
        goto fail;
    }
    if (pthread_create(&s->sweeper, NULL, sweeper_main, s) != 0) {
        MHD_stop_daemon(s->mhd);
        rc = HOOKD_ENOMEM;
        goto fail;
    }
    s->sweeper_started = true;
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : port;
    s->running = true;
    *out = s;
    return 0;
fail:
    if (s) {
        pthread_cond_destroy(&s->cond);
        pthread_mutex_destroy(&s->mu);
        explicit_bzero(s->admin_token, sizeof s->admin_token);
    }
    free(s);
    return rc;
}

int http_server_port(const struct http_server *s) { return s ? s->port : 0; }

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

void http_server_stop(struct http_server *s)
{
    if (!s)
        return;
    /*
     * libmicrohttpd must not be stopped with suspended connections. Each one
     * is owed a completion (the writer calls back for every op it took), so
     * wait for them while the server still runs.
     */
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_cond_broadcast(&s->cond);
    int64_t since = mono_ms();
    while (s->n_suspended > 0) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        pthread_cond_timedwait(&s->cond, &s->mu, &until);
        if (s->n_suspended > 0 && mono_ms() - since >= 5000) {
            log_warn("http", "stopping: still waiting for %zu suspended requests", s->n_suspended);
            since = mono_ms();
        }
    }
    /* Then a moment for their answers to go out (a client that reads nothing does not hold the stop). */
    int64_t until = mono_ms() + HTTP_STOP_SEND_MS;
    while (s->n_unsent > 0 && mono_ms() < until) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 10 * 1000000L;
        t.tv_sec += t.tv_nsec / 1000000000L;
        t.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&s->cond, &s->mu, &t);
    }
    pthread_mutex_unlock(&s->mu);
    if (s->sweeper_started)
        pthread_join(s->sweeper, NULL);
    MHD_stop_daemon(s->mhd);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->mu);
    explicit_bzero(s->admin_token, sizeof s->admin_token);
    free(s);
}
