/*
 * The HTTP engine (net/http_client.h), hookd's own HTTP/1.1 client: its API,
 * submit (URL, header lines and the request head built once), the deadline
 * min-heap, and completions. The connections (pool, connect, TLS, send,
 * receive) are http_client_conn.c's; DNS is net/http_resolve.h's threads, the
 * answer is read by net/http_response.h.
 *
 * A turn costs what its ready sockets and due deadlines cost, never what the
 * transfers in flight do: hundreds held by endpoints that never answer sit in
 * the heap and the epoll set untouched. (libcurl, which this replaced, spent
 * ~91k of a delivery's ~121k dispatcher instructions formatting, parsing and
 * setting up each transfer; this costs ~5.9k.) A request with a small body is
 * written with one send.
 */
#include "net/http_client_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <openssl/ssl.h>

#include "core/buf.h"
#include "core/clock.h"
#include "hookd.h"

/* ---- the deadline heap ------------------------------------------------------- */

/* The deadline that counts now: the whole request's, the connect's while connecting, an address's while trying it. */
static int64_t transfer_due(const struct transfer *t)
{
    bool connecting = t->state == T_RESOLVING || t->state == T_CONNECTING || t->state == T_HANDSHAKE;
    int64_t due = connecting && t->connect_deadline < t->deadline ? t->connect_deadline : t->deadline;

    return t->state == T_CONNECTING && t->attempt_deadline < due ? t->attempt_deadline : due;
}

static void heap_swap(struct http_engine *e, int a, int b)
{
    struct transfer *x = e->heap[a];

    e->heap[a] = e->heap[b];
    e->heap[b] = x;
    e->heap[a]->heap_pos = a;
    e->heap[b]->heap_pos = b;
}

static void heap_fix(struct http_engine *e, int i)
{
    while (i > 0 && transfer_due(e->heap[i]) < transfer_due(e->heap[(i - 1) / 2])) {
        heap_swap(e, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < e->heap_n && transfer_due(e->heap[l]) < transfer_due(e->heap[m]))
            m = l;
        if (r < e->heap_n && transfer_due(e->heap[r]) < transfer_due(e->heap[m]))
            m = r;
        if (m == i)
            return;
        heap_swap(e, i, m);
        i = m;
    }
}

static void heap_add(struct http_engine *e, struct transfer *t)
{
    t->heap_pos = e->heap_n;
    e->heap[e->heap_n++] = t;
    heap_fix(e, t->heap_pos);
}

static void heap_remove(struct http_engine *e, struct transfer *t)
{
    int i = t->heap_pos;

    if (i < 0)
        return;
    t->heap_pos = -1;
    if (i != --e->heap_n) {
        e->heap[i] = e->heap[e->heap_n];
        e->heap[i]->heap_pos = i;
        heap_fix(e, i);
    }
}

/* The state changed, and with it which deadline counts. */
void client_set_state(struct http_engine *e, struct transfer *t, enum transfer_state s)
{
    int64_t before = transfer_due(t);

    t->state = s;
    if (t->heap_pos >= 0 && (transfer_due(t) != before || s == T_CONNECTING)) /* a new address, a new budget */
        heap_fix(e, t->heap_pos);
}

/* ---- ending a transfer ------------------------------------------------------ */

/* Ends t: its connection goes back to the pool when keep is set, and its done waits for http_engine_run. */
void client_transfer_end(struct http_engine *e, struct transfer *t, bool keep)
{
    if (t->c != NULL) {
        struct conn *c = t->c;
        if (keep) {
            t->c = NULL;
            client_idle_link(e, c);
        } else {
            client_conn_close(e, c);
        }
    }
    heap_remove(e, t);
    t->state = T_ENDED;
    t->next_ended = NULL;
    if (e->ended_tail != NULL)
        e->ended_tail->next_ended = t;
    else
        e->ended_head = t;
    e->ended_tail = t;
}

/* Ends t with a transport error; fmt gives the reason (no receiver byte may be in it). */
void client_transfer_fail(struct http_engine *e, struct transfer *t, enum transport_error err, const char *fmt, ...)
{
    va_list ap;
    int n;

    t->err = err;
    n = snprintf(t->error, sizeof t->error, "%s: ", transport_error_name(err));
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof t->error)
        vsnprintf(t->error + n, sizeof t->error - (size_t)n, fmt, ap);
    va_end(ap);
    client_transfer_end(e, t, false);
}

/* Every address was refused by the SSRF guard: the text is the guard's own, as it always was. */
void client_transfer_blocked(struct http_engine *e, struct transfer *t)
{
    t->err = TRANSPORT_BLOCKED;
    snprintf(t->error, sizeof t->error, "address refused by SSRF guard");
    client_transfer_end(e, t, false);
}

/* ---- deadlines --------------------------------------------------------------- */

static void deadlines_run(struct http_engine *e, int64_t now)
{
    while (e->heap_n > 0 && transfer_due(e->heap[0]) <= now) {
        struct transfer *t = e->heap[0];
        bool connecting = t->state == T_RESOLVING || t->state == T_CONNECTING || t->state == T_HANDSHAKE;
        bool connect_hit = connecting && t->connect_deadline <= t->deadline;

        if (t->state == T_CONNECTING && t->attempt_deadline <= now && t->attempt_deadline < t->connect_deadline &&
            t->attempt_deadline < t->deadline && t->next_addr < t->addrs.n) {
            /* This address had its share of the connect timeout: the next one gets the rest. */
            t->last_errno = ETIMEDOUT;
            client_conn_close(e, t->c);
            client_connect_next(e, t);
            continue;
        }
        if (connect_hit && t->state == T_RESOLVING)
            client_transfer_fail(e, t, TRANSPORT_TIMEOUT, "resolving %s timed out after %lld ms", t->url.host,
                                 (long long)t->connect_timeout_ms);
        else if (connect_hit)
            client_transfer_fail(e, t, TRANSPORT_TIMEOUT, "connecting to %s port %u timed out after %lld ms",
                                 t->url.host, t->url.port, (long long)t->connect_timeout_ms);
        else
            client_transfer_fail(e, t, TRANSPORT_TIMEOUT, "no complete answer within %lld ms (%zu body bytes received)",
                                 (long long)t->timeout_ms, t->received);
    }
    client_pool_expire(e, now);
}

/* ---- create / destroy ------------------------------------------------------- */

static void transfer_free(struct transfer *t)
{
    if (t == NULL)
        return;
    free(t->head);
    buf_free(&t->response);
    free(t->rsp);
    free(t);
}

int http_engine_create(const struct http_engine_options *opt, struct http_engine **out)
{
    struct http_engine *e;
    int rc = HOOKD_ENOMEM, max;
    uint32_t buckets = 1;

    *out = NULL;
    if (opt == NULL || opt->max_transfers < 1 || opt->connect_timeout_ms < 0 || opt->timeout_ms < 0 ||
        (opt->ca_file != NULL && strlen(opt->ca_file) >= sizeof e->ca_file))
        return HOOKD_EINVAL;
    e = calloc(1, sizeof *e);
    if (e == NULL)
        return HOOKD_ENOMEM;
    max = opt->max_transfers;
    e->opt = *opt;
    e->epfd = e->wake_fd = -1;
    if (e->opt.response_abort == 0)
        e->opt.response_abort = HTTP_CLIENT_RESPONSE_ABORT_DEFAULT;
    snprintf(e->user_agent, sizeof e->user_agent, "%s",
             opt->user_agent != NULL ? opt->user_agent : "hookd/" HOOKD_VERSION);
    e->opt.user_agent = e->user_agent;
    snprintf(e->ca_file, sizeof e->ca_file, "%s", opt->ca_file != NULL ? opt->ca_file : "");
    e->opt.ca_file = NULL;
    while (buckets < (uint32_t)max * 2 && buckets < (1u << 20))
        buckets <<= 1;
    e->bucket_mask = buckets - 1;
    e->transfers = calloc((size_t)max, sizeof *e->transfers);
    e->free_slots = calloc((size_t)max, sizeof *e->free_slots);
    e->conns = calloc((size_t)max, sizeof *e->conns);
    e->free_conns = calloc((size_t)max, sizeof *e->free_conns);
    e->buckets = calloc(buckets, sizeof *e->buckets);
    e->heap = calloc((size_t)max, sizeof *e->heap);
    if (e->transfers == NULL || e->free_slots == NULL || e->conns == NULL || e->free_conns == NULL ||
        e->buckets == NULL || e->heap == NULL)
        goto fail;
    for (int i = 0; i < max; i++) {
        e->conns[i].slot = i;
        e->conns[i].fd = -1;
        e->free_conns[e->n_free_conns++] = max - 1 - i;
    }
    rc = resolver_create(&e->resolver);
    if (rc != 0)
        goto fail;
    rc = HOOKD_EIO;
    e->epfd = epoll_create1(EPOLL_CLOEXEC);
    e->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (e->epfd < 0 || e->wake_fd < 0 ||
        epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->wake_fd,
                  &(struct epoll_event){.events = EPOLLIN, .data.u64 = TAG_WAKE}) != 0 ||
        epoll_ctl(e->epfd, EPOLL_CTL_ADD, resolver_fd(e->resolver),
                  &(struct epoll_event){.events = EPOLLIN, .data.u64 = TAG_RESOLVER}) != 0)
        goto fail;
    *out = e;
    return 0;
fail:
    http_engine_destroy(e);
    return rc;
}

void http_engine_destroy(struct http_engine *e)
{
    if (e == NULL)
        return;
    if (e->conns != NULL) {
        for (int i = 0; i < e->opt.max_transfers; i++)
            client_conn_close(e, &e->conns[i]);
    }
    for (int i = 0; i < e->n_transfers; i++)
        transfer_free(e->transfers[i]);
    if (e->resolver != NULL) {
        /* Before the resolver's eventfd goes, it leaves the set (the resolver's threads may outlive us). */
        if (e->epfd >= 0)
            (void)epoll_ctl(e->epfd, EPOLL_CTL_DEL, resolver_fd(e->resolver), NULL);
        resolver_destroy(e->resolver);
    }
    SSL_CTX_free(e->tls);
    if (e->epfd >= 0)
        close(e->epfd);
    if (e->wake_fd >= 0)
        close(e->wake_fd);
    free(e->transfers);
    free(e->free_slots);
    free(e->conns);
    free(e->free_conns);
    free(e->buckets);
    free(e->heap);
    free(e);
}

/* ---- submit ----------------------------------------------------------------- */

static bool method_valid(const char *m)
{
    if (m == NULL || m[0] == '\0' || strlen(m) > 16)
        return false;
    for (; *m != '\0'; m++) {
        if (*m < 'A' || *m > 'Z')
            return false;
    }
    return true;
}

/* RFC 9110 tchar, by byte. */
static const bool token_chars[256] = {
    ['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1, ['*'] = 1, ['+'] = 1, ['-'] = 1, ['.'] = 1,
    ['^'] = 1, ['_'] = 1, ['`'] = 1, ['|'] = 1, ['~'] = 1,
    ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1, ['9'] = 1,
    ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1, ['I'] = 1, ['J'] = 1,
    ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1, ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1,
    ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1, ['Y'] = 1, ['Z'] = 1,
    ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1, ['i'] = 1, ['j'] = 1,
    ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1, ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1,
    ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1, ['y'] = 1, ['z'] = 1,
};

static bool line_names(const char *line, size_t name_len, const char *name, size_t len)
{
    return name_len == len && strncasecmp(line, name, len) == 0;
}
#define NAMES(line, n, lit) line_names((line), (n), (lit), sizeof(lit) - 1)

/* What the caller's header lines hold, read once at submit. */
struct header_scan {
    size_t len[HTTP_CLIENT_MAX_HEADERS]; /* each line's length; 0: not sent */
    size_t total;                        /* bytes of the lines sent, CRLFs included */
    bool host, user_agent, accept;       /* named by a line: the engine's own is not sent */
};

/*
 * Checks the lines (a "Name: value" each, "Name:" to suppress; CR or LF
 * inside one would start a header of someone else's choosing) and notes what
 * they replace. False for a line the request cannot carry.
 */
static bool headers_scan(const char *const *headers, size_t n, struct header_scan *hs)
{
    memset(hs, 0, sizeof *hs);
    if (n > HTTP_CLIENT_MAX_HEADERS || (n > 0 && headers == NULL))
        return false;
    for (size_t i = 0; i < n; i++) {
        const char *line = headers[i];
        size_t name = 0, len;
        bool blank = true;
        if (line == NULL)
            return false;
        while (token_chars[(unsigned char)line[name]])
            name++;
        if (name == 0 || line[name] != ':')
            return false;
        len = name + 1 + strcspn(line + name + 1, "\r\n");
        if (line[len] != '\0')
            return false;
        for (size_t v = name + 1; v < len && blank; v++)
            blank = line[v] == ' ' || line[v] == '\t';
        if (NAMES(line, name, "host"))
            hs->host = true;
        else if (NAMES(line, name, "user-agent"))
            hs->user_agent = true;
        else if (NAMES(line, name, "accept"))
            hs->accept = true;
        else if (NAMES(line, name, "content-length") || NAMES(line, name, "transfer-encoding"))
            blank = true; /* framing is the engine's alone */
        if (blank)
            continue; /* "Name:" only suppresses */
        hs->len[i] = len;
        hs->total += len + 2;
    }
    return true;
}

#define PUT(p, s, n) (memcpy((p), (s), (n)), (p) += (n))
#define PUT_LIT(p, s) PUT((p), (s), sizeof(s) - 1)

/*
 * The request line and headers into t->head, and the body behind them when
 * it is small, sized first and copied once. Host, User-Agent and Accept are
 * the engine's unless a caller's line names them.
 */
static int head_build(struct http_engine *e, struct transfer *t, const struct http_client_request *req,
                      const struct header_scan *hs)
{
    char port[I64_DIGITS_MAX], length[I64_DIGITS_MAX];
    bool has_body = req->body != NULL || (strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0);
    size_t body_len = req->body != NULL ? req->body_len : 0;
    size_t method_len = strlen(req->method), host_len = strlen(t->url.host), ua_len = strlen(e->user_agent);
    size_t port_len = t->url.default_port ? 0 : i64_digits(t->url.port, port);
    size_t length_len = has_body ? i64_digits((int64_t)body_len, length) : 0;
    bool slash = t->url.target == NULL || t->url.target[0] == '?';
    bool inline_body = body_len > 0 && body_len <= INLINE_BODY_MAX;
    size_t need = method_len + 1 + slash + t->url.target_len + sizeof " HTTP/1.1\r\n" - 1 + hs->total + 2;
    char *p;

    if (!hs->host)
        need += sizeof "Host: []:\r\n" - 1 + host_len + port_len;
    if (!hs->user_agent)
        need += sizeof "User-Agent: \r\n" - 1 + ua_len;
    if (!hs->accept)
        need += sizeof "Accept: */*\r\n" - 1;
    if (has_body)
        need += sizeof "Content-Length: \r\n" - 1 + length_len;
    if (need > HEAD_MAX)
        return HOOKD_EINVAL;
    if (inline_body)
        need += body_len;
    if (need > t->head_cap) {
        char *grown = realloc(t->head, need);
        if (grown == NULL)
            return HOOKD_ENOMEM;
        t->head = grown;
        t->head_cap = need;
    }
    p = t->head;
    PUT(p, req->method, method_len);
    PUT_LIT(p, " ");
    if (slash)
        PUT_LIT(p, "/");
    if (t->url.target != NULL)
        PUT(p, t->url.target, t->url.target_len);
    PUT_LIT(p, " HTTP/1.1\r\n");
    if (!hs->host) {
        PUT_LIT(p, "Host: ");
        if (t->url.host_is_ipv6)
            PUT_LIT(p, "[");
        PUT(p, t->url.host, host_len);
        if (t->url.host_is_ipv6)
            PUT_LIT(p, "]");
        if (port_len > 0) {
            PUT_LIT(p, ":");
            PUT(p, port, port_len);
        }
        PUT_LIT(p, "\r\n");
    }
    if (!hs->user_agent) {
        PUT_LIT(p, "User-Agent: ");
        PUT(p, e->user_agent, ua_len);
        PUT_LIT(p, "\r\n");
    }
    if (!hs->accept)
        PUT_LIT(p, "Accept: */*\r\n");
    for (size_t i = 0; i < req->n_headers; i++) {
        if (hs->len[i] == 0)
            continue;
        PUT(p, req->headers[i], hs->len[i]);
        PUT_LIT(p, "\r\n");
    }
    if (has_body) {
        PUT_LIT(p, "Content-Length: ");
        PUT(p, length, length_len);
        PUT_LIT(p, "\r\n");
    }
    PUT_LIT(p, "\r\n");
    t->body = req->body;
    t->body_len = body_len;
    if (inline_body) {
        PUT(p, req->body, body_len);
        t->body_len = 0;
    }
    t->head_len = (size_t)(p - t->head);
    return 0;
}

/* The pool's key, "http://host:port" (copies, not printf: this runs for every request). */
static void key_build(struct transfer *t)
{
    char port[I64_DIGITS_MAX];
    size_t host_len = strlen(t->url.host), port_len = i64_digits(t->url.port, port);
    char *p = t->key;

    if (t->url.tls)
        PUT_LIT(p, "https://");
    else
        PUT_LIT(p, "http://");
    PUT(p, t->url.host, host_len);
    PUT_LIT(p, ":");
    PUT(p, port, port_len);
    *p = '\0';
    t->hash = client_key_hash(t->key);
}

/* A transfer slot: one made and unused, or a new one while fewer than max_transfers exist. */
static struct transfer *transfer_take(struct http_engine *e)
{
    struct transfer *t;

    if (e->n_free > 0)
        return e->transfers[e->free_slots[--e->n_free]];
    if (e->n_transfers >= e->opt.max_transfers)
        return NULL;
    t = calloc(1, sizeof *t);
    if (t != NULL)
        t->rsp = malloc(sizeof *t->rsp);
    if (t == NULL || t->rsp == NULL) {
        free(t);
        return NULL;
    }
    t->e = e;
    t->slot = e->n_transfers;
    t->heap_pos = -1;
    buf_init(&t->response, 0);
    e->transfers[e->n_transfers++] = t;
    return t;
}

static void transfer_put(struct http_engine *e, struct transfer *t)
{
    t->state = T_FREE;
    t->done = NULL;
    t->arg = NULL;
    e->free_slots[e->n_free++] = t->slot;
}

int http_engine_submit(struct http_engine *e, const struct http_client_request *req, http_client_done_fn done,
                       void *arg)
{
    struct transfer *t;
    struct http_url url;
    int urc, rc;
    int64_t now;

    struct header_scan hs;

    if (req == NULL || done == NULL || req->url == NULL || !method_valid(req->method) ||
        !headers_scan(req->headers, req->n_headers, &hs))
        return HOOKD_EINVAL;
    urc = http_url_parse(req->url, &url);
    if (urc < 0)
        return urc;
    t = transfer_take(e);
    if (t == NULL)
        return e->n_transfers >= e->opt.max_transfers ? HOOKD_EBUSY : HOOKD_ENOMEM;
    t->url = url;
    key_build(t);
    rc = head_build(e, t, req, &hs);
    t->url.target = NULL; /* points into the caller's string, which is not ours to keep */
    if (rc != 0) {
        transfer_put(e, t);
        return rc;
    }
    t->head_request = strcmp(req->method, "HEAD") == 0;
    t->c = NULL;
    t->reused = t->opened = t->retried = t->response_started = false;
    t->addrs.n = 0;
    t->n_refused = 0;
    t->last_errno = 0;
    buf_reset(&t->response);
    t->response.max = req->response_max > 0 ? req->response_max : e->opt.response_max;
    t->received = 0;
    t->abort_at = e->opt.response_abort;
    t->too_large = false;
    t->err = TRANSPORT_OTHER;
    t->error[0] = '\0';
    t->classify = req->classify;
    t->done = done;
    t->arg = arg;
    t->cancelling = false;
    t->started_at = clock_now_ms();
    now = t->started_mono = clock_mono_ms();
    t->timeout_ms = req->timeout_ms > 0 ? req->timeout_ms : e->opt.timeout_ms;
    t->connect_timeout_ms = req->connect_timeout_ms > 0 ? req->connect_timeout_ms : e->opt.connect_timeout_ms;
    if (t->connect_timeout_ms <= 0)
        t->connect_timeout_ms = CONNECT_TIMEOUT_DEFAULT_MS;
    t->deadline = t->timeout_ms > 0 ? now + t->timeout_ms : INT64_MAX;
    t->connect_deadline = now + t->connect_timeout_ms;
    t->state = T_RESOLVING; /* before a connection is found, the connect deadline counts */
    e->active++;
    heap_add(e, t);
    if (urc == HTTP_URL_UNSUPPORTED)
        client_transfer_fail(e, t, TRANSPORT_BLOCKED, "only http and https URLs may be reached");
    else
        client_transfer_start(e, t);
    return 0;
}

/* ---- completions ------------------------------------------------------------ */

static void result_fill(struct transfer *t, struct http_client_result *res)
{
    int64_t dur = clock_mono_ms() - t->started_mono;

    memset(res, 0, sizeof *res);
    res->started_at_ms = t->started_at;
    res->duration_ms = dur < 0 ? 0 : dur > INT32_MAX ? INT32_MAX : (int)dur;
    res->body = t->response.len > 0 ? t->response.data : "";
    res->body_len = t->response.len;
    res->body_truncated = t->received > t->response.len || t->too_large;
    res->body_aborted = t->too_large;
    res->retry_after = t->err == TRANSPORT_OK ? t->rsp->retry_after : "";
    res->error = t->error;
    res->connection_reused = t->err == TRANSPORT_OK && t->reused && !t->opened;
    res->transport = t->err;
    res->status = t->err == TRANSPORT_OK ? t->rsp->status : 0;
    res->outcome = t->classify != NULL ? t->classify(res) : -1;
}

/* Runs t's done, then frees its slot. */
static void completion_run(struct http_engine *e, struct transfer *t, const struct http_client_result *res)
{
    http_client_done_fn done = t->done;
    void *arg = t->arg;

    e->active--;
    t->state = T_FREE;
    done(arg, res);
    transfer_put(e, t);
}

int http_engine_run(struct http_engine *e)
{
    int finished = 0;
    struct transfer *t;

    deadlines_run(e, clock_mono_ms());
    /* Only what ended before this call: a done that submits a request that ends at once waits for the next. */
    struct transfer *last = e->ended_tail;
    while (last != NULL && (t = e->ended_head) != NULL) {
        struct http_client_result res;
        e->ended_head = t->next_ended;
        if (e->ended_head == NULL)
            e->ended_tail = NULL;
        result_fill(t, &res);
        completion_run(e, t, &res);
        finished++;
        if (t == last)
            break;
    }
    return finished;
}

/* Empties the wake-up counter (EAGAIN: nothing was left to read, which is as good). */
static void wake_drain(struct http_engine *e)
{
    uint64_t v;

    if (read(e->wake_fd, &v, sizeof v) != (ssize_t)sizeof v)
        return;
}

void http_engine_wait(struct http_engine *e, int timeout_ms)
{
    struct epoll_event evs[EVENTS_PER_WAIT];
    int wait = timeout_ms < 0 ? 0 : timeout_ms, n;
    int64_t now = clock_mono_ms();

    if (e->ended_head != NULL)
        wait = 0; /* completions are waiting for http_engine_run */
    if (e->heap_n > 0) {
        int64_t left = transfer_due(e->heap[0]) - now;
        if (left < wait)
            wait = left < 0 ? 0 : (int)left;
    }
    if (e->lru_head != NULL) {
        int64_t left = e->lru_head->idle_since + IDLE_MAX_MS - now;
        if (left < wait)
            wait = left < 0 ? 0 : (int)left;
    }
    n = epoll_wait(e->epfd, evs, EVENTS_PER_WAIT, wait);
    for (int i = 0; i < n; i++) {
        uint64_t tag = evs[i].data.u64;
        if (tag == TAG_WAKE)
            wake_drain(e);
        else if (tag == TAG_RESOLVER)
            resolver_drain(e->resolver, clock_mono_ms(), client_on_resolved, e);
        else
            client_conn_event(e, &e->conns[tag - TAG_CONN], evs[i].events);
    }
    deadlines_run(e, clock_mono_ms());
}

void http_engine_wakeup(struct http_engine *e)
{
    uint64_t one = 1;

    /* Fails only when the counter is about to overflow: a wake-up is pending then anyway. */
    if (write(e->wake_fd, &one, sizeof one) != (ssize_t)sizeof one)
        return;
}

int http_engine_room(const struct http_engine *e) { return e->opt.max_transfers - e->active; }

void http_engine_cancel_all(struct http_engine *e)
{
    /* Only what is in flight now: a done that submits again starts a transfer this call leaves alone. */
    for (int i = 0; i < e->n_transfers; i++)
        e->transfers[i]->cancelling = e->transfers[i]->state != T_FREE;
    e->ended_head = e->ended_tail = NULL;
    for (int i = 0; i < e->n_transfers; i++) {
        struct transfer *t = e->transfers[i];
        struct http_client_result res;

        if (!t->cancelling)
            continue;
        t->cancelling = false;
        if (t->c != NULL)
            client_conn_close(e, t->c);
        heap_remove(e, t);
        memset(&res, 0, sizeof res);
        snprintf(t->error, sizeof t->error, "cancelled");
        res.transport = TRANSPORT_OTHER;
        res.cancelled = true;
        res.body = "";
        res.retry_after = "";
        res.error = t->error;
        res.outcome = -1;
        res.started_at_ms = t->started_at;
        completion_run(e, t, &res);
    }
}
