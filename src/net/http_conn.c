/*
 * One connection of the HTTP server, driven by its loop's thread: reads and
 * parses requests, decides each on its header (framing, route, auth, body
 * cap) before any of the body is read, reads the body, runs the handler or
 * waits for http_resume, and writes the answer. Keeps the header deadline.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "hookd.h"
#include "log.h"
#include "net/http_internal.h"

#define HTTP_BODY_KEEP 65536 /* initial body allocation cap when Content-Length is large */
/*
 * A connection's first read buffer: enough for a whole request of most
 * senders. Every request of a keep-alive connection allocates it again (an
 * idle connection holds none), and a buffer of buf_cap (128 KiB) cost glibc
 * a consolidation of its free lists and a heap trim at each free. A request
 * that does not fit, head and Content-Length body, gets buf_cap once its head
 * is read (or while it is read), as before.
 */
#define HTTP_BUF_FIRST 16384
#define HTTP_DISCARD_MAX(cap) (4 * (cap) + 65536) /* body dropped past the cap before a 413 */

static const struct {
    int status;
    const char *reason;
} reasons[] = {
    {100, "Continue"}, {200, "OK"}, {201, "Created"}, {202, "Accepted"}, {204, "No Content"},
    {301, "Moved Permanently"}, {302, "Found"}, {304, "Not Modified"}, {400, "Bad Request"},
    {401, "Unauthorized"}, {403, "Forbidden"}, {404, "Not Found"}, {405, "Method Not Allowed"},
    {408, "Request Timeout"}, {409, "Conflict"}, {410, "Gone"}, {413, "Content Too Large"},
    {414, "URI Too Long"}, {415, "Unsupported Media Type"}, {422, "Unprocessable Content"},
    {429, "Too Many Requests"}, {431, "Request Header Fields Too Large"}, {500, "Internal Server Error"},
    {501, "Not Implemented"}, {502, "Bad Gateway"}, {503, "Service Unavailable"}, {504, "Gateway Timeout"},
    {505, "HTTP Version Not Supported"},
};

static const char *reason_of(int status)
{
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
        if (reasons[i].status == status)
            return reasons[i].reason;
    return "Status";
}

static void conn_want(struct http_conn *c, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.ptr = c};

    if (c->events == events || c->gone)
        return;
    if (epoll_ctl(c->loop->epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0)
        c->events = events;
}

struct http_conn *http_conn_open(struct http_loop *loop, int fd, const struct sockaddr_storage *peer,
                                 socklen_t peer_len)
{
    struct http_conn *c = calloc(1, sizeof *c);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};

    if (!c || epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        free(c);
        return NULL;
    }
    c->loop = loop;
    c->fd = fd;
    c->events = EPOLLIN;
    c->state = CONN_HEAD;
    c->last_io = http_mono_ms();
    c->header_deadline = c->last_io + loop->server->header_timeout_ms; /* the first header is owed from the start */
    c->peer = *peer;
    c->peer_len = peer_len;
    c->next = loop->conns;
    if (loop->conns)
        loop->conns->prev = c;
    loop->conns = c;
    return c;
}

static void request_free(struct http_conn *c)
{
    struct http_request *r = c->req;
    struct http_server *s = c->loop->server;

    if (!r)
        return;
    if (r->was_suspended) {
        pthread_mutex_lock(&s->mu);
        s->n_unsent--;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->mu);
    }
    if (r->body) {
        /* Bodies can carry secrets (endpoint creation, rotation): wipe before freeing. */
        explicit_bzero(r->body, r->body_len);
        free(r->body);
    }
    free(r->query_buf);
    http_response_clear(&r->res);
    free(r);
    c->req = NULL;
}

void http_conn_close(struct http_conn *c)
{
    struct http_loop *loop = c->loop;
    struct http_server *s = loop->server;

    if (c->closing)
        return;
    c->closing = true;
    request_free(c);
    free(c->buf);
    free(c->out);
    free(c->out_body);
    atomic_fetch_add(&s->st_bytes_read, c->bytes_read);
    atomic_fetch_add(&s->st_closed, 1);
    atomic_fetch_sub(&s->open, 1);
    http_ip_release(s, &c->peer);
    if (c->prev)
        c->prev->next = c->next;
    else
        loop->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    close(c->fd); /* also leaves the epoll set */
    c->buf = c->out = c->out_body = NULL;
    c->next = loop->closed;
    loop->closed = c;
}

void http_conn_free_closed(struct http_loop *loop)
{
    while (loop->closed) {
        struct http_conn *c = loop->closed;
        loop->closed = c->next;
        free(c);
    }
}

/* ---- writing ----------------------------------------------------------------------- */

static void conn_process(struct http_conn *c);

/* The answer is out: close, or make room for the next request and go on with what is buffered. */
static void response_done(struct http_conn *c)
{
    free(c->out);
    free(c->out_body);
    c->out = c->out_body = NULL;
    c->out_len = c->out_body_len = c->out_off = 0;
    if (c->close_after) {
        http_conn_close(c);
        return;
    }
    request_free(c);
    memmove(c->buf, c->buf + c->pos, c->len - c->pos);
    c->len -= c->pos;
    c->pos = 0;
    c->state = CONN_HEAD;
    c->last_io = http_mono_ms();
    /* The next request's deadline starts at its first byte (already here, if pipelined). */
    c->header_deadline = c->len > 0 ? c->last_io + c->loop->server->header_timeout_ms : 0;
    if (c->len == 0) {
        free(c->buf); /* an idle connection holds no buffer */
        c->buf = NULL;
        c->buf_size = 0;
    }
    conn_want(c, EPOLLIN);
    conn_process(c);
}

static void conn_write(struct http_conn *c)
{
    while (c->out_off < c->out_len + c->out_body_len) {
        struct iovec iov[2];
        int n = 0;
        if (c->out_off < c->out_len)
            iov[n++] = (struct iovec){c->out + c->out_off, c->out_len - c->out_off};
        size_t body_off = c->out_off > c->out_len ? c->out_off - c->out_len : 0;
        if (c->out_body_len > body_off)
            iov[n++] = (struct iovec){c->out_body + body_off, c->out_body_len - body_off};
        ssize_t w = writev(c->fd, iov, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            conn_want(c, EPOLLOUT);
            return;
        }
        if (w <= 0) {
            http_conn_close(c);
            return;
        }
        c->out_off += (size_t)w;
        c->last_io = http_mono_ms();
    }
    response_done(c);
}

/* A header from a handler goes out only if it cannot split the response. */
static bool header_safe(const char *name, const char *value)
{
    if (!name || !value || !*name)
        return false;
    for (const char *p = name; *p; p++)
        if (*p <= ' ' || *p == ':' || *p == 0x7f)
            return false;
    for (const char *p = value; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return false;
    return true;
}

/* The Date header's value: formatted again only when the second has changed (strftime cost ~2,000 instructions). */
static const char *loop_date(struct http_loop *loop)
{
    time_t now = time(NULL);

    if (now != loop->date_at) {
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(loop->date, sizeof loop->date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
        loop->date_at = now;
    }
    return loop->date;
}

static size_t put(char *out, size_t o, const char *s, size_t n)
{
    memcpy(out + o, s, n);
    return o + n;
}

static size_t put_str(char *out, size_t o, const char *s) { return put(out, o, s, strlen(s)); }

static size_t put_uint(char *out, size_t o, uint64_t v)
{
    char digits[20];
    size_t n = 0;

    do {
        digits[sizeof digits - ++n] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    return put(out, o, digits + sizeof digits - n, n);
}

/*
 * Serialises res (cleared either way) and starts writing it. close_after
 * ends the connection after it; a client that asked for that, or spoke
 * HTTP/1.0 without keep-alive, gets it too.
 */
static void conn_respond(struct http_conn *c, struct http_response *res, bool close_after)
{
    struct http_request *r = c->req;
    int status = res->status > 0 ? res->status : 200;
    bool no_body = status < 200 || status == 204 || status == 304;
    bool head_only = r && r->method && strcmp(r->method, "HEAD") == 0;
    size_t body_len = res->body && !no_body ? res->body_len : 0;
    const char *type = res->content_type ? res->content_type : "application/json";

    if (!r || !r->parser.keep_alive)
        close_after = true;
    /* The fixed lines take at most 150 bytes besides the type: status line (a reason is under 40), Date,
     * Content-Type, Content-Length, Connection. */
    size_t cap = 256 + strlen(type);
    for (int i = 0; i < res->n_headers; i++)
        cap += strlen(res->headers[i][0]) + strlen(res->headers[i][1]) + 4;
    char *out = malloc(cap);
    if (!out) {
        http_response_clear(res);
        http_conn_close(c);
        return;
    }
    size_t o = put_str(out, 0, "HTTP/1.1 ");
    o = put_uint(out, o, (uint64_t)status);
    o = put_str(out, o, " ");
    o = put_str(out, o, reason_of(status));
    o = put_str(out, o, "\r\nDate: ");
    o = put_str(out, o, loop_date(c->loop));
    o = put_str(out, o, "\r\n");
    if (!no_body) {
        if (body_len > 0 || status != 204) {
            o = put_str(out, o, "Content-Type: ");
            o = put_str(out, o, type);
            o = put_str(out, o, "\r\n");
        }
        o = put_str(out, o, "Content-Length: ");
        o = put_uint(out, o, body_len);
        o = put_str(out, o, "\r\n");
    }
    for (int i = 0; i < res->n_headers; i++)
        if (header_safe(res->headers[i][0], res->headers[i][1]))
            o += (size_t)snprintf(out + o, cap - o, "%s: %s\r\n", res->headers[i][0], res->headers[i][1]);
    if (close_after)
        o += (size_t)snprintf(out + o, cap - o, "Connection: close\r\n");
    else if (r->parser.version_minor == 0)
        o += (size_t)snprintf(out + o, cap - o, "Connection: keep-alive\r\n");
    o += (size_t)snprintf(out + o, cap - o, "\r\n");
    free(c->out);
    free(c->out_body);
    c->out = out;
    c->out_len = o;
    c->out_body = NULL;
    c->out_body_len = 0;
    if (!head_only && body_len > 0) {
        c->out_body = res->body; /* taken over: written from where the handler left it */
        c->out_body_len = body_len;
        res->body = NULL;
    }
    http_response_clear(res);
    c->out_off = 0;
    c->close_after = close_after;
    c->state = CONN_WRITE;
    conn_write(c);
}

static void conn_error(struct http_conn *c, int status, const char *code, const char *message, const char *header,
                       const char *value, bool close_after)
{
    struct http_response res = {.status = 200};

    http_reply_error(&res, status, code, "%s", message);
    if (header && value && *value)
        http_add_header(&res, header, value);
    conn_respond(c, &res, close_after);
}

/* ---- the request ------------------------------------------------------------------- */

/* A refusal decided on the header: the connection goes on only if no body is still to come. */
static void refuse(struct http_conn *c, struct http_response *res)
{
    conn_respond(c, res, c->req->parser.phase != HTTP_PHASE_DONE);
}

static void refuse_error(struct http_conn *c, int status, const char *code, const char *message, const char *header,
                         const char *value)
{
    conn_error(c, status, code, message, header, value, c->req->parser.phase != HTTP_PHASE_DONE);
}

/* Decodes the query into pairs, in order, duplicates kept (value NULL without '='); -1 when out of
 * memory, -2 when a name or value holds an encoded NUL byte. */
static int query_parse(struct http_request *r, const char *q)
{
    size_t n = strlen(q), pairs = 1;

    if (n == 0)
        return 0;
    for (const char *p = q; *p; p++)
        pairs += *p == '&';
    r->query_buf = malloc(pairs * sizeof *r->query + n + 1);
    if (!r->query_buf)
        return -1;
    r->query = (struct query_pair *)(void *)r->query_buf;
    char *text = r->query_buf + pairs * sizeof *r->query;
    memcpy(text, q, n + 1);
    for (char *item = text; item;) {
        char *amp = strchr(item, '&');
        if (amp)
            *amp = '\0';
        if (*item) {
            char *eq = strchr(item, '=');
            if (eq)
                *eq++ = '\0';
            /* A name or value that decodes to a NUL is refused, never dropped: the handler would
             * otherwise answer as if the parameter had not been given. */
            if (http_percent_decode(item, strlen(item), true) < 0 || (eq && http_percent_decode(eq, strlen(eq), true) < 0))
                return -2;
            r->query[r->n_query].name = item;
            r->query[r->n_query].value = eq;
            r->n_query++;
        }
        item = amp ? amp + 1 : NULL;
    }
    return 0;
}

/* The bearer value of the Authorization header (the whole rest of it), or NULL. */
static const char *bearer_value(const struct http_request *r)
{
    const char *v = http_header(r, "Authorization");

    if (!v || strncasecmp(v, "Bearer ", 7) != 0)
        return NULL;
    v += 7;
    while (*v == ' ')
        v++;
    return v;
}

/*
 * Decides who sent a request of an HTTP_AUTH_ADMIN route, before its body:
 * the admin token (compared in constant time over the whole value), else a
 * scoped token the server's token_check knows, which must hold every scope
 * the route asks for. Returns true to go on; false when refused (401, 403,
 * 503 answered).
 */
static bool admin_auth(struct http_conn *c, struct http_request *r)
{
    const struct http_server *s = c->loop->server;
    const char *v = bearer_value(r);
    unsigned need = r->route->scopes;
    int rc;

    memset(&r->caller, 0, sizeof r->caller);
    /* Anything after the token fails: the whole rest of the value is compared. */
    if (v && http_token_equal(s->admin_token, v, strlen(v))) {
        r->caller.admin = true;
        snprintf(r->caller.id, sizeof r->caller.id, "admin");
        return true;
    }
    rc = v && *v && s->token_check ? s->token_check(s->ctx, v, strlen(v), &r->caller) : HOOKD_ENOTFOUND;
    if (rc == HOOKD_ENOTFOUND || rc == HOOKD_ETIME) {
        memset(&r->caller, 0, sizeof r->caller);
        refuse_error(c, 401, "unauthorized",
                     rc == HOOKD_ETIME ? "the token has expired"
                                       : "a valid \"Authorization: Bearer <token>\" header is required",
                     "WWW-Authenticate", "Bearer");
        return false;
    }
    if (rc != 0) {
        memset(&r->caller, 0, sizeof r->caller);
        refuse_error(c, 503, "store_unavailable", "cannot check the token now: the store is unavailable", NULL, NULL);
        return false;
    }
    r->caller.admin = false;
    if (need == 0 || (need & ~r->caller.scopes) != 0) {
        refuse_error(c, 403, "forbidden",
                     (need & HTTP_SCOPE_REPLAY) && !(r->caller.scopes & HTTP_SCOPE_REPLAY)
                         ? "this token may not replay (its scope is read)"
                         : "this token is limited to one account's records and may not use this route",
                     NULL, NULL);
        return false;
    }
    return true;
}

/*
 * The header is complete: framing (the parser's), size, route, auth and body
 * cap are decided here, so every refusal goes out before any of the body is
 * read. Returns true to go on reading the body; false when answered.
 */
static bool request_begin(struct http_conn *c)
{
    struct http_request *r = c->req;
    struct http_parser *p = &r->parser;
    struct http_server *s = c->loop->server;
    char allow[64];
    int n_auth = 0;

    r->method = c->buf + p->method;
    char *target = c->buf + p->target;
    char *q = strchr(target, '?');
    if (q)
        *q++ = '\0';
    int qrc = q ? query_parse(r, q) : 0;
    if (qrc == -2) {
        refuse_error(c, 400, "invalid_request", "the query holds an encoded NUL byte", NULL, NULL);
        return false;
    }
    if (qrc != 0) {
        conn_error(c, 500, "internal", "out of memory", NULL, NULL, true);
        return false;
    }
    if (http_percent_decode(target, strlen(target), false) < 0) {
        refuse_error(c, 400, "invalid_request", "the path holds an encoded NUL byte", NULL, NULL);
        return false;
    }
    r->path = target;
    for (size_t i = 0; i < p->n_fields; i++)
        n_auth += strcasecmp(c->buf + p->fields[i].name, "Authorization") == 0;
    if (n_auth > 1) {
        refuse_error(c, 400, "invalid_header", "more than one Authorization header", NULL, NULL);
        return false;
    }
    switch (router_match(s->routes, s->n_routes, r->method, r->path, &r->route, &r->params, allow, sizeof allow)) {
    case ROUTE_FOUND:
        break;
    case ROUTE_METHOD_NOT_ALLOWED:
        refuse_error(c, 405, "method_not_allowed", "method not allowed on this path", "Allow", allow);
        return false;
    case ROUTE_PATH_TOO_LONG:
        refuse_error(c, 414, "uri_too_long", "request path too long", NULL, NULL);
        return false;
    case ROUTE_NOT_FOUND:
    default:
        refuse_error(c, 404, "not_found", "no such path", NULL, NULL);
        return false;
    }
    if (r->route->auth == HTTP_AUTH_ADMIN && !admin_auth(c, r))
        return false;
    if (r->route->max_body > 0)
        r->max_body = r->route->max_body;
    if (r->route->prepare) {
        struct http_response res = {.status = 200};
        if (!r->route->prepare(r, &res, s->ctx)) {
            refuse(c, &res);
            return false;
        }
        http_response_clear(&res);
    }
    if (p->has_length && p->content_length > r->max_body) {
        refuse_error(c, 413, "payload_too_large", "request body exceeds the limit", NULL, NULL);
        return false;
    }
    if (p->has_length && p->content_length > 0) {
        size_t cap = p->content_length + 1 < HTTP_BODY_KEEP ? (size_t)p->content_length + 1 : HTTP_BODY_KEEP;
        r->body = malloc(cap);
        if (!r->body) {
            conn_error(c, 500, "internal", "out of memory", NULL, NULL, true);
            return false;
        }
        r->body_cap = cap;
    }
    /* The client waits for a go-ahead before the body: only now is it given. The socket's
     * send buffer is empty here (the previous answer is out), so the few bytes fit at once. */
    if (p->expect_continue && p->version_minor == 1 && p->phase != HTTP_PHASE_DONE && c->len == c->pos) {
        static const char go[] = "HTTP/1.1 100 Continue\r\n\r\n";
        if (send(c->fd, go, sizeof go - 1, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)(sizeof go - 1)) {
            http_conn_close(c);
            return false;
        }
    }
    return true;
}

/* A body past the cap: the route hears of it (its records), then the 413 goes out and the connection closes. */
static void body_too_large(struct http_conn *c)
{
    struct http_request *r = c->req;

    if (r->too_large)
        r->too_large(r, r->discarded, r->server->ctx);
    conn_error(c, 413, "payload_too_large", "request body exceeds the limit", NULL, NULL, true);
}

/* Keeps n body bytes; past the cap (a chunked body) the rest is dropped (or, past far too much, answered). */
static void body_take(struct http_conn *c, const char *data, size_t n)
{
    struct http_request *r = c->req;

    atomic_fetch_add(&c->loop->server->st_body_bytes, n);
    if (r->discarding) {
        r->discarded += n;
        if (r->discarded - r->max_body > HTTP_DISCARD_MAX(r->max_body)) {
            /* A body that never ends is not read forever. */
            body_too_large(c);
            return;
        }
        return;
    }
    if (n > r->max_body - r->body_len) {
        if (r->body)
            explicit_bzero(r->body, r->body_len);
        r->discarded = r->body_len + n;
        r->body_len = 0;
        r->discarding = true;
        return;
    }
    size_t need = r->body_len + n + 1;
    if (need > r->body_cap) {
        size_t cap = r->body_cap ? r->body_cap : 1024;
        while (cap < need)
            cap *= 2;
        if (cap > r->max_body + 1)
            cap = r->max_body + 1;
        char *nb = malloc(cap);
        if (!nb) {
            conn_error(c, 500, "internal", "out of memory", NULL, NULL, true);
            return;
        }
        if (r->body) {
            memcpy(nb, r->body, r->body_len);
            explicit_bzero(r->body, r->body_len);
            free(r->body);
        }
        r->body = nb;
        r->body_cap = cap;
    }
    memcpy(r->body + r->body_len, data, n);
    r->body_len += n;
    r->body[r->body_len] = '\0';
    return;
}

void http_request_run(struct http_request *r)
{
    struct http_response res = {.status = 200};

    r->route->handler(r, &res, r->server->ctx);
    if (r->suspended) {
        http_response_clear(&res); /* the answer comes through http_resume */
        return;
    }
    if (res.status == 0)
        res.status = 200;
    r->res = res;
}

/* Answers once the handler has returned and, if it suspended, has been resumed. */
static void request_maybe_finish(struct http_conn *c)
{
    struct http_request *r = c->req;
    struct http_server *s = c->loop->server;

    if (!r->handler_returned || (r->suspended && !r->resumed))
        return;
    if (r->suspended) {
        pthread_mutex_lock(&s->mu);
        s->n_suspended--;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->mu);
    }
    if (c->gone) {
        http_conn_close(c);
        return;
    }
    conn_respond(c, &r->res, false);
}

static void request_handle(struct http_conn *c)
{
    struct http_request *r = c->req;

    /* The interest stays as it is (no epoll_ctl per request): it is dropped only if the peer sends while the
     * handler runs (http_conn_event), and taken up again after the answer. */
    c->state = CONN_HANDLER;
    if (c->loop->server->pool) {
        http_pool_submit(c->loop->server->pool, r);
        return;
    }
    http_request_run(r);
    r->handler_returned = true;
    request_maybe_finish(c);
}

void http_conn_queued(struct http_request *r, int events)
{
    if (events & REQ_EV_RETURNED)
        r->handler_returned = true;
    if (events & REQ_EV_RESUMED)
        r->resumed = true;
    request_maybe_finish(r->conn);
}

/* ---- reading ------------------------------------------------------------------------ */

/* The read buffer at its full size (server->buf_cap); false after closing the connection for want of memory. */
static bool buf_grow(struct http_conn *c)
{
    size_t cap = c->loop->server->buf_cap;
    char *nb;

    if (c->buf_size >= cap)
        return true;
    if (!(nb = realloc(c->buf, cap))) {
        http_conn_close(c);
        return false;
    }
    c->buf = nb;
    c->buf_size = cap;
    return true;
}

/* One step of reading a head: false when nothing more can be done now. */
static bool head_step(struct http_conn *c)
{
    struct http_server *s = c->loop->server;

    if (!c->req) {
        c->req = calloc(1, sizeof *c->req);
        if (!c->req) {
            http_conn_close(c);
            return false;
        }
        c->req->server = s;
        c->req->conn = c;
        c->req->max_body = s->max_body;
        http_parse_init(&c->req->parser);
    }
    struct http_parser *p = &c->req->parser;
    int rc = http_parse_head(p, c->buf, c->len);
    if (rc == HTTP_PARSE_MORE)
        return false;
    if (rc == HTTP_PARSE_ERROR) {
        conn_error(c, p->status, p->code, p->message, NULL, NULL, true);
        return true;
    }
    c->header_deadline = 0;
    c->pos = p->head_len;
    /* The request's pointers go into buf from here on: a body that may not fit gets the whole buffer now. */
    if ((p->chunked || p->head_len + p->content_length > c->buf_size) && !buf_grow(c))
        return false;
    if (request_begin(c))
        c->state = CONN_BODY;
    return true;
}

/* One step of reading a body: false when it needs more bytes. */
static bool body_step(struct http_conn *c)
{
    struct http_parser *p = &c->req->parser;
    size_t used, n;
    const char *data;
    int rc = http_parse_body(p, c->buf + c->pos, c->len - c->pos, &used, &data, &n);

    c->pos += used;
    if (rc == HTTP_PARSE_DATA) {
        body_take(c, data, n);
    } else if (rc == HTTP_PARSE_ERROR) {
        conn_error(c, p->status, p->code, p->message, NULL, NULL, true);
    } else if (rc == HTTP_PARSE_DONE) {
        if (c->req->discarding)
            body_too_large(c);
        else
            request_handle(c);
    } else if (used == 0) {
        /* Needs more: drop what was consumed, keeping the head where it is. */
        memmove(c->buf + p->head_len, c->buf + c->pos, c->len - c->pos);
        c->len = p->head_len + (c->len - c->pos);
        c->pos = p->head_len;
        return false;
    }
    return true;
}

/*
 * Runs the request state machine over what is buffered, pipelined requests
 * included, in a loop rather than by recursion: an answer that completes
 * inside it (response_done) comes back here instead of calling it again.
 */
static void conn_process(struct http_conn *c)
{
    if (c->in_process)
        return;
    c->in_process = true;
    for (bool more = true; more && !c->closing;) {
        if (c->state == CONN_HEAD && c->len > 0)
            more = head_step(c);
        else if (c->state == CONN_BODY)
            more = body_step(c);
        else
            more = false;
    }
    c->in_process = false;
}

static void conn_read(struct http_conn *c)
{
    struct http_server *s = c->loop->server;

    if (!c->buf) {
        c->buf_size = s->buf_cap < HTTP_BUF_FIRST ? s->buf_cap : HTTP_BUF_FIRST;
        if (!(c->buf = malloc(c->buf_size))) {
            http_conn_close(c);
            return;
        }
    }
    /* A head that fills the first buffer: no pointer into it is taken yet, so it may move. */
    if (c->len == c->buf_size && c->state == CONN_HEAD && !buf_grow(c))
        return;
    if (c->len == c->buf_size) {
        /* Cannot happen: the parser's caps keep a request's buffered part below buf_cap. */
        conn_error(c, 431, "header_too_large", "request too large for the connection buffer", NULL, NULL, true);
        return;
    }
    ssize_t n = recv(c->fd, c->buf + c->len, c->buf_size - c->len, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {
        http_conn_close(c);
        return;
    }
    c->len += (size_t)n;
    c->bytes_read += (uint64_t)n;
    c->last_io = http_mono_ms();
    if (c->state == CONN_HEAD && c->header_deadline == 0)
        c->header_deadline = c->last_io + s->header_timeout_ms;
    conn_process(c);
}

void http_conn_event(struct http_conn *c, uint32_t events)
{
    if (c->closing)
        return;
    switch (c->state) {
    case CONN_HEAD:
    case CONN_BODY:
        conn_read(c);
        return;
    case CONN_WRITE:
        conn_write(c);
        return;
    case CONN_HANDLER:
        if (events & (EPOLLHUP | EPOLLERR)) {
            /* Reported whatever the interest: leave the set until the handler is done. */
            epoll_ctl(c->loop->epfd, EPOLL_CTL_DEL, c->fd, NULL);
            c->gone = true;
        } else {
            /* Bytes (a pipelined request, or the peer's end) while the handler runs: read after the answer;
             * until then the level-triggered interest would report them again and again. */
            conn_want(c, 0);
        }
        return;
    }
}

/* A best-effort last word before closing, when the socket can take it at once. */
static void send_final(int fd, int status, const char *code, const char *message)
{
    char out[512];
    char body[256];
    int bn = snprintf(body, sizeof body, "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}", code, message);
    int n = snprintf(out, sizeof out,
                     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                     "Connection: close\r\n\r\n%s",
                     status, reason_of(status), bn, body);
    if (n > 0 && (size_t)n < sizeof out)
        (void)!send(fd, out, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void http_conn_sweep(struct http_conn *c, int64_t now)
{
    struct http_server *s = c->loop->server;

    switch (c->state) {
    case CONN_HEAD:
        if (c->header_deadline != 0) {
            if (now <= c->header_deadline)
                return;
            atomic_fetch_add(&s->st_header_timeouts, 1);
            /* Only a request under way is told; an idle new connection is just closed. */
            if (c->len > 0)
                send_final(c->fd, 408, "header_timeout", "the request header took too long");
            http_conn_close(c);
            return;
        }
        if (now - c->last_io > s->idle_timeout_ms)
            http_conn_close(c);
        return;
    case CONN_BODY:
    case CONN_WRITE:
        if (now - c->last_io > s->idle_timeout_ms)
            http_conn_close(c);
        return;
    case CONN_HANDLER:
        return;
    }
}

void http_conn_refuse_fd(int fd, const char *message) { send_final(fd, 503, "unavailable", message); }
