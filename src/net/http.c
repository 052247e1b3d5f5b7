/*
 * HTTP server wrapper over libmicrohttpd: binds the listen address, reads each
 * request body up to a cap (413 before reading more), routes it through the
 * table and sends the handler's response. Errors are {"error":{code,message}}.
 */
#include "net/http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <jansson.h>

#include "hookd.h"
#include "log.h"
#include "net/router.h"

#define HTTP_DEFAULT_MAX_BODY (1024 * 1024)
#define HTTP_CONNECTION_TIMEOUT_S 60
#define HTTP_CONNECTION_LIMIT 1024
#define HTTP_BODY_KEEP 65536 /* initial allocation cap when Content-Length is unknown or large */

struct http_server {
    struct MHD_Daemon *mhd;
    const struct http_route *routes;
    size_t n_routes;
    void *ctx;
    size_t max_body;
    int port;
    bool running; /* after start: MHD's per-connection complaints drop to debug */
};

struct http_request {
    struct MHD_Connection *conn;
    const char *method;
    const char *path;
    char *body; /* NUL-terminated; NULL until the first byte */
    size_t body_len, body_cap;
    bool too_large;
    bool answered; /* a response was queued on the first call */
    struct route_params params;
    char peer[INET6_ADDRSTRLEN + 16];
};

static const char default_content_type[] = "application/json";

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

static enum MHD_Result send_error(struct MHD_Connection *conn, int status, const char *code, const char *message,
                                  const char *allow)
{
    struct http_response res = {.status = 200};

    http_reply_error(&res, status, code, "%s", message);
    if (allow && *allow)
        http_add_header(&res, "Allow", allow);
    return response_send(conn, &res);
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

/* ---- the request cycle ------------------------------------------------------ */

/* Appends upload data; beyond max_body the request is marked too large and the rest dropped. */
static int body_append(struct http_request *r, const char *data, size_t n, size_t max_body)
{
    if (r->too_large)
        return 0;
    if (n > max_body - r->body_len) {
        r->too_large = true;
        return 0;
    }
    size_t need = r->body_len + n + 1;
    if (need > r->body_cap) {
        size_t cap = r->body_cap ? r->body_cap : 1024;
        while (cap < need)
            cap *= 2;
        if (cap > max_body + 1)
            cap = max_body + 1;
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

/* First call: size the body buffer from Content-Length, or refuse it at once. */
static enum MHD_Result request_begin(struct http_server *s, struct MHD_Connection *conn, const char *url,
                                     const char *method, void **con_cls)
{
    struct http_request *r = malloc(sizeof *r);
    if (!r)
        return MHD_NO;
    r->conn = conn;
    r->method = method;
    r->path = url;
    r->body = NULL;
    r->body_len = r->body_cap = 0;
    r->too_large = false;
    r->answered = false;
    r->params.n = 0;
    r->peer[0] = '\0';
    *con_cls = r;

    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
        char *end;
        unsigned long long len = strtoull(cl, &end, 10);
        if (len > s->max_body) {
            /* Answering before reading the body makes MHD drop the rest and close. */
            r->answered = true;
            return send_error(conn, 413, "payload_too_large", "request body exceeds the limit", NULL);
        }
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
    const struct http_route *route;
    char allow[64];
    struct http_response res = {.status = 200};

    if (r->too_large)
        return send_error(r->conn, 413, "payload_too_large", "request body exceeds the limit", NULL);
    switch (router_match(s->routes, s->n_routes, r->method, r->path, &route, &r->params, allow, sizeof allow)) {
    case ROUTE_FOUND:
        break;
    case ROUTE_METHOD_NOT_ALLOWED:
        return send_error(r->conn, 405, "method_not_allowed", "method not allowed on this path", allow);
    case ROUTE_PATH_TOO_LONG:
        return send_error(r->conn, 414, "uri_too_long", "request path too long", NULL);
    case ROUTE_NOT_FOUND:
    default:
        return send_error(r->conn, 404, "not_found", "no such path", NULL);
    }
    route->handler(r, &res, s->ctx);
    if (res.status == 0)
        res.status = 200;
    return response_send(r->conn, &res);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    struct http_server *s = cls;
    struct http_request *r = *con_cls;

    if (!r)
        return request_begin(s, conn, url, method, con_cls);
    if (r->answered)
        return MHD_YES;
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (body_append(r, upload_data, n, s->max_body) < 0)
            return MHD_NO;
        /* A chunked body past the cap: stop reading and close; it cannot be answered mid-upload. */
        return r->too_large ? MHD_NO : MHD_YES;
    }
    r->answered = true;
    return request_finish(s, r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    struct http_request *r = *con_cls;
    if (!r)
        return;
    if (r->body) {
        /* Bodies can carry secrets (endpoint creation, rotation): wipe before freeing. */
        explicit_bzero(r->body, r->body_len);
        free(r->body);
    }
    free(r);
    *con_cls = NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    struct http_server *s = cls;
    log_write(s->running ? LOG_DEBUG : LOG_WARN, "http", "%s", msg);
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
    s = calloc(1, sizeof *s);
    if (!s) {
        rc = HOOKD_ENOMEM;
        goto fail;
    }
    s->routes = opt->routes;
    s->n_routes = opt->n_routes;
    s->ctx = opt->ctx;
    s->max_body = opt->max_body ? opt->max_body : HTTP_DEFAULT_MAX_BODY;

    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG | MHD_USE_AUTO;
    if (opt->threads == 0)
        flags |= MHD_USE_THREAD_PER_CONNECTION;
    if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)&ss;
        flags |= IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr) ? MHD_USE_DUAL_STACK : MHD_USE_IPv6;
    }
    uint16_t port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                   : ((struct sockaddr_in *)&ss)->sin_port);
    struct MHD_OptionItem pool_opts[2] = {{MHD_OPTION_END, 0, NULL}, {MHD_OPTION_END, 0, NULL}};
    if (opt->threads > 0)
        pool_opts[0] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)opt->threads, NULL};
    /* The logger goes first so MHD routes every message through it. */
    s->mhd = MHD_start_daemon(flags, port, NULL, NULL, on_request, s,
                              MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s,
                              MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                              MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)HTTP_CONNECTION_TIMEOUT_S,
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned int)HTTP_CONNECTION_LIMIT,
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                              MHD_OPTION_ARRAY, pool_opts,
                              MHD_OPTION_END);
    if (!s->mhd) {
        log_error("http", "cannot listen on %s", opt->listen);
        rc = HOOKD_EIO;
        goto fail;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : port;
    s->running = true;
    *out = s;
    return 0;
fail:
    free(s);
    return rc;
}

int http_server_port(const struct http_server *s) { return s ? s->port : 0; }

void http_server_stop(struct http_server *s)
{
    if (!s)
        return;
    MHD_stop_daemon(s->mhd);
    free(s);
}
