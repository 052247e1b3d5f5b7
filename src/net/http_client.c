/*
 * The HTTP engine: a libcurl multi handle, a pool of easy handles that keep
 * their fixed options (and the multi's cache of live connections), per-request
 * options set on each submit, capped response collection, the SSRF guard at
 * socket creation, and libcurl's results named as transport classes.
 *
 * The multi is driven by its socket interface on an epoll set: a turn costs
 * what the sockets that are ready cost, not what all of them do. (With
 * curl_multi_perform and curl_multi_poll, every turn walked every transfer
 * and polled every socket: hundreds of requests held by endpoints that never
 * answer made each healthy completion pay for all of them.)
 */
#include "net/http_client.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/clock.h"
#include "hookd.h"
#include "net/ssrf.h"

/* One easy handle and what a request on it needs until its done has run. */
struct transfer {
    CURL *easy;
    struct http_engine *e;
    /* The request's header lines, linked in place (borrowed strings), then "Expect:". */
    struct curl_slist header_nodes[HTTP_CLIENT_MAX_HEADERS + 1];
    struct buf response; /* the snippet */
    size_t received;     /* response body bytes seen in total */
    size_t abort_at;
    bool too_large;      /* ended past abort_at */
    bool blocked;        /* the SSRF guard refused an address */
    char retry_after[HTTP_CLIENT_RETRY_AFTER_MAX];
    char errbuf[CURL_ERROR_SIZE];
    char error[HTTP_CLIENT_ERROR_MAX];
    int64_t started_at, started_mono;
    http_client_classify_fn classify;
    http_client_done_fn done;
    void *arg;
    bool active;
    bool cancelling; /* in flight when http_engine_cancel_all began */
};

struct http_engine {
    CURLM *multi;
    int epfd;             /* the transfers' sockets, as libcurl asks for them, and wake_fd */
    int wake_fd;          /* eventfd: http_engine_wakeup */
    int64_t timer_at;     /* libcurl's timeout, monotonic ms; -1: none */
    struct http_engine_options opt;
    char user_agent[128];
    struct transfer **all; /* every handle made, up to max_transfers */
    int n_all;
    struct transfer **idle;
    int n_idle;
    int active;
};

/* No 100-continue round trip before a body: every request carries this last. */
static char expect_none[] = "Expect:";

/* ---- libcurl callbacks ------------------------------------------------------ */

static size_t on_body(char *data, size_t size, size_t n, void *ud)
{
    struct transfer *t = ud;
    size_t total = size * n;
    size_t room = t->response.max > t->response.len ? t->response.max - t->response.len : 0;

    t->received += total;
    if (t->received > t->abort_at) {
        t->too_large = true;
        return 0; /* ends the transfer */
    }
    if (room > 0 && buf_append(&t->response, data, total < room ? total : room) != 0)
        return 0;
    return total;
}

static size_t on_header(char *line, size_t size, size_t n, void *ud)
{
    static const char name[] = "retry-after:";
    struct transfer *t = ud;
    size_t total = size * n;
    size_t len = total;

    if (total >= 5 && strncasecmp(line, "HTTP/", 5) == 0) {
        t->retry_after[0] = '\0'; /* a new response (after a 1xx) starts */
        return total;
    }
    if (total < sizeof name - 1 || strncasecmp(line, name, sizeof name - 1) != 0)
        return total;
    line += sizeof name - 1;
    len -= sizeof name - 1;
    while (len > 0 && (*line == ' ' || *line == '\t')) {
        line++;
        len--;
    }
    while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == '\n' || line[len - 1] == ' '))
        len--;
    if (len >= sizeof t->retry_after)
        len = sizeof t->retry_after - 1;
    memcpy(t->retry_after, line, len);
    t->retry_after[len] = '\0';
    return total;
}

/* libcurl asks here for every socket it connects: the resolved address is judged before connect(). */
static curl_socket_t open_socket(void *ud, curlsocktype purpose, struct curl_sockaddr *addr)
{
    struct transfer *t = ud;

    if (purpose != CURLSOCKTYPE_IPCXN)
        return CURL_SOCKET_BAD;
    if (!t->e->opt.allow_private_networks && !ssrf_address_allowed(&addr->addr)) {
        t->blocked = true;
        return CURL_SOCKET_BAD;
    }
    return socket(addr->family, addr->socktype | SOCK_CLOEXEC, addr->protocol);
}

/* ---- handles ---------------------------------------------------------------- */

static void transfer_free(struct transfer *t)
{
    if (t == NULL)
        return;
    if (t->easy != NULL)
        curl_easy_cleanup(t->easy);
    buf_free(&t->response);
    free(t);
}

/* A handle with every option that does not change between requests. */
static struct transfer *transfer_new(struct http_engine *e)
{
    struct transfer *t = calloc(1, sizeof *t);
    CURLcode cc = CURLE_OK;

    if (t == NULL)
        return NULL;
    t->e = e;
    buf_init(&t->response, e->opt.response_max);
    t->easy = curl_easy_init();
    if (t->easy == NULL) {
        transfer_free(t);
        return NULL;
    }
    /* Redirects are never followed, proxies from the environment never used. */
    cc |= curl_easy_setopt(t->easy, CURLOPT_PROTOCOLS_STR, "http,https");
    cc |= curl_easy_setopt(t->easy, CURLOPT_FOLLOWLOCATION, 0L);
    cc |= curl_easy_setopt(t->easy, CURLOPT_PROXY, "");
    cc |= curl_easy_setopt(t->easy, CURLOPT_NOPROXY, "*");
    cc |= curl_easy_setopt(t->easy, CURLOPT_NOSIGNAL, 1L);
    cc |= curl_easy_setopt(t->easy, CURLOPT_TCP_KEEPALIVE, 1L);
    cc |= curl_easy_setopt(t->easy, CURLOPT_TCP_NODELAY, 1L);
    cc |= curl_easy_setopt(t->easy, CURLOPT_USERAGENT, e->user_agent);
    cc |= curl_easy_setopt(t->easy, CURLOPT_WRITEFUNCTION, on_body);
    cc |= curl_easy_setopt(t->easy, CURLOPT_WRITEDATA, t);
    cc |= curl_easy_setopt(t->easy, CURLOPT_HEADERFUNCTION, on_header);
    cc |= curl_easy_setopt(t->easy, CURLOPT_HEADERDATA, t);
    cc |= curl_easy_setopt(t->easy, CURLOPT_OPENSOCKETFUNCTION, open_socket);
    cc |= curl_easy_setopt(t->easy, CURLOPT_OPENSOCKETDATA, t);
    cc |= curl_easy_setopt(t->easy, CURLOPT_ERRORBUFFER, t->errbuf);
    cc |= curl_easy_setopt(t->easy, CURLOPT_PRIVATE, t);
    if (cc != CURLE_OK) {
        transfer_free(t);
        return NULL;
    }
    return t;
}

static struct transfer *transfer_take(struct http_engine *e)
{
    struct transfer *t;

    if (e->n_idle > 0)
        return e->idle[--e->n_idle];
    if (e->n_all >= e->opt.max_transfers)
        return NULL;
    t = transfer_new(e);
    if (t != NULL)
        e->all[e->n_all++] = t;
    return t;
}

static void transfer_put(struct http_engine *e, struct transfer *t)
{
    t->active = false;
    t->done = NULL;
    t->arg = NULL;
    e->idle[e->n_idle++] = t;
}

/* ---- the multi's sockets and timer ----------------------------------------- */

#define EVENTS_PER_WAIT 64

/* CURLMOPT_SOCKETFUNCTION: what libcurl wants to hear about s, mirrored in the epoll set. */
static int on_socket(CURL *easy, curl_socket_t s, int what, void *ud, void *socketp)
{
    struct http_engine *e = ud;
    struct epoll_event ev = {.data.fd = s};

    (void)easy;
    (void)socketp;
    if (what == CURL_POLL_REMOVE) {
        /* Fails only when libcurl closed s first (the kernel dropped it then). */
        (void)epoll_ctl(e->epfd, EPOLL_CTL_DEL, s, NULL);
        return 0;
    }
    ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0u) | (what & CURL_POLL_OUT ? EPOLLOUT : 0u);
    if (epoll_ctl(e->epfd, EPOLL_CTL_MOD, s, &ev) != 0 && errno == ENOENT &&
        epoll_ctl(e->epfd, EPOLL_CTL_ADD, s, &ev) != 0)
        return -1; /* libcurl fails the transfer */
    return 0;
}

/* CURLMOPT_TIMERFUNCTION: when libcurl wants to be driven without socket activity (-1: never). */
static int on_timer(CURLM *multi, long timeout_ms, void *ud)
{
    struct http_engine *e = ud;

    (void)multi;
    e->timer_at = timeout_ms < 0 ? -1 : clock_mono_ms() + timeout_ms;
    return 0;
}

/* Drives libcurl's timeout once it is due. */
static void timer_drive(struct http_engine *e)
{
    int running = 0;

    if (e->timer_at >= 0 && clock_mono_ms() >= e->timer_at) {
        e->timer_at = -1;
        curl_multi_socket_action(e->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    }
}

/* ---- create / destroy ------------------------------------------------------- */

int http_engine_create(const struct http_engine_options *opt, struct http_engine **out)
{
    struct http_engine *e;
    int rc = HOOKD_ENOMEM;

    *out = NULL;
    if (opt == NULL || opt->max_transfers < 1 || opt->connect_timeout_ms < 0 || opt->timeout_ms < 0)
        return HOOKD_EINVAL;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return HOOKD_EIO;
    e = calloc(1, sizeof *e);
    if (e == NULL) {
        curl_global_cleanup();
        return HOOKD_ENOMEM;
    }
    e->opt = *opt;
    e->epfd = e->wake_fd = -1;
    if (e->opt.response_abort == 0)
        e->opt.response_abort = HTTP_CLIENT_RESPONSE_ABORT_DEFAULT;
    snprintf(e->user_agent, sizeof e->user_agent, "%s", opt->user_agent != NULL ? opt->user_agent : "hookd/" HOOKD_VERSION);
    e->opt.user_agent = e->user_agent;
    e->all = calloc((size_t)opt->max_transfers, sizeof *e->all);
    e->idle = calloc((size_t)opt->max_transfers, sizeof *e->idle);
    e->timer_at = -1;
    e->epfd = epoll_create1(EPOLL_CLOEXEC);
    e->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    e->multi = curl_multi_init();
    if (e->all == NULL || e->idle == NULL || e->multi == NULL)
        goto fail;
    if (e->epfd < 0 || e->wake_fd < 0 ||
        epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->wake_fd, &(struct epoll_event){.events = EPOLLIN, .data.fd = e->wake_fd}) != 0) {
        rc = HOOKD_EIO;
        goto fail;
    }
    /* Connections to keep open for reuse: one per transfer that may run at once. */
    if (curl_multi_setopt(e->multi, CURLMOPT_MAXCONNECTS, (long)opt->max_transfers) != CURLM_OK ||
        curl_multi_setopt(e->multi, CURLMOPT_SOCKETFUNCTION, on_socket) != CURLM_OK ||
        curl_multi_setopt(e->multi, CURLMOPT_SOCKETDATA, e) != CURLM_OK ||
        curl_multi_setopt(e->multi, CURLMOPT_TIMERFUNCTION, on_timer) != CURLM_OK ||
        curl_multi_setopt(e->multi, CURLMOPT_TIMERDATA, e) != CURLM_OK) {
        rc = HOOKD_EINVAL;
        goto fail;
    }
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
    for (int i = 0; i < e->n_all; i++) {
        if (e->all[i]->active)
            curl_multi_remove_handle(e->multi, e->all[i]->easy);
        transfer_free(e->all[i]);
    }
    if (e->multi != NULL)
        curl_multi_cleanup(e->multi);
    if (e->epfd >= 0)
        close(e->epfd);
    if (e->wake_fd >= 0)
        close(e->wake_fd);
    free(e->all);
    free(e->idle);
    free(e);
    curl_global_cleanup();
}

/* ---- submit ----------------------------------------------------------------- */

/* The method and body on a reused handle: every option another method may have left is set again. */
static CURLcode method_set(CURL *easy, const struct http_client_request *req)
{
    const char *m = req->method;
    CURLcode cc = CURLE_OK;

    cc |= curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, (char *)NULL);
    cc |= curl_easy_setopt(easy, CURLOPT_NOBODY, 0L);
    if (req->body != NULL) {
        cc |= curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
        cc |= curl_easy_setopt(easy, CURLOPT_POSTFIELDS, req->body); /* makes it a POST */
        if (strcmp(m, "POST") != 0)
            cc |= curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, m);
    } else if (strcmp(m, "GET") == 0) {
        cc |= curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L);
    } else if (strcmp(m, "HEAD") == 0) {
        cc |= curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
    } else {
        /* A bodiless POST, PUT, DELETE, …: an empty body, so no stale one is sent. */
        cc |= curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
        cc |= curl_easy_setopt(easy, CURLOPT_POSTFIELDS, "");
        if (strcmp(m, "POST") != 0)
            cc |= curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, m);
    }
    return cc;
}

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

/* A line libcurl would send as it is: CR or LF inside it would start a header of someone else's choosing. */
static bool headers_valid(const char *const *headers, size_t n)
{
    if (n > HTTP_CLIENT_MAX_HEADERS || (n > 0 && headers == NULL))
        return false;
    for (size_t i = 0; i < n; i++) {
        if (headers[i] == NULL || strpbrk(headers[i], "\r\n") != NULL)
            return false;
    }
    return true;
}

int http_engine_submit(struct http_engine *e, const struct http_client_request *req, http_client_done_fn done,
                       void *arg)
{
    struct transfer *t;
    CURLcode cc = CURLE_OK;
    size_t i;

    if (req == NULL || done == NULL || req->url == NULL || !method_valid(req->method) ||
        !headers_valid(req->headers, req->n_headers))
        return HOOKD_EINVAL;
    t = transfer_take(e);
    if (t == NULL)
        return e->n_all >= e->opt.max_transfers ? HOOKD_EBUSY : HOOKD_ENOMEM;

    buf_reset(&t->response);
    t->response.max = req->response_max > 0 ? req->response_max : e->opt.response_max;
    t->abort_at = e->opt.response_abort;
    t->received = 0;
    t->too_large = false;
    t->blocked = false;
    t->retry_after[0] = '\0';
    t->errbuf[0] = '\0';
    t->error[0] = '\0';
    for (i = 0; i < req->n_headers; i++) {
        t->header_nodes[i].data = (char *)req->headers[i]; /* libcurl only reads the list */
        t->header_nodes[i].next = &t->header_nodes[i + 1];
    }
    t->header_nodes[i].data = expect_none;
    t->header_nodes[i].next = NULL;

    cc |= curl_easy_setopt(t->easy, CURLOPT_URL, req->url);
    cc |= method_set(t->easy, req);
    cc |= curl_easy_setopt(t->easy, CURLOPT_HTTPHEADER, t->header_nodes);
    cc |= curl_easy_setopt(t->easy, CURLOPT_TIMEOUT_MS, (long)(req->timeout_ms > 0 ? req->timeout_ms : e->opt.timeout_ms));
    cc |= curl_easy_setopt(t->easy, CURLOPT_CONNECTTIMEOUT_MS,
                           (long)(req->connect_timeout_ms > 0 ? req->connect_timeout_ms : e->opt.connect_timeout_ms));
    if (cc != CURLE_OK) {
        transfer_put(e, t);
        return cc == CURLE_OUT_OF_MEMORY ? HOOKD_ENOMEM : HOOKD_EINVAL;
    }
    t->classify = req->classify;
    t->done = done;
    t->arg = arg;
    t->started_at = clock_now_ms();
    t->started_mono = clock_mono_ms();
    if (curl_multi_add_handle(e->multi, t->easy) != CURLM_OK) {
        transfer_put(e, t);
        return HOOKD_ENOMEM;
    }
    t->active = true;
    e->active++;
    return 0;
}

/* ---- completions ------------------------------------------------------------ */

struct curl_error_class {
    CURLcode code;
    enum transport_error err;
};

/* libcurl results with their own class; everything else is TRANSPORT_OTHER. */
static const struct curl_error_class curl_error_classes[] = {
    {CURLE_COULDNT_CONNECT, TRANSPORT_CONNECT},
    {CURLE_SSL_CONNECT_ERROR, TRANSPORT_CONNECT},
    {CURLE_PEER_FAILED_VERIFICATION, TRANSPORT_CONNECT},
    {CURLE_COULDNT_RESOLVE_HOST, TRANSPORT_DNS},
    {CURLE_OPERATION_TIMEDOUT, TRANSPORT_TIMEOUT},
    {CURLE_UNSUPPORTED_PROTOCOL, TRANSPORT_BLOCKED}, /* only http and https may be reached */
};

static enum transport_error classify_curl(CURLcode rc)
{
    for (size_t i = 0; i < sizeof curl_error_classes / sizeof curl_error_classes[0]; i++) {
        if (curl_error_classes[i].code == rc)
            return curl_error_classes[i].err;
    }
    return TRANSPORT_OTHER;
}

static void result_fill(struct transfer *t, CURLcode rc, struct http_client_result *res)
{
    long code = 0, connects = 0;
    int64_t dur = clock_mono_ms() - t->started_mono;

    memset(res, 0, sizeof *res);
    res->started_at_ms = t->started_at;
    res->duration_ms = dur < 0 ? 0 : dur > INT32_MAX ? INT32_MAX : (int)dur;
    res->body = t->response.data;
    res->body_len = t->response.len;
    res->body_truncated = t->received > t->response.len;
    res->body_aborted = t->too_large;
    res->retry_after = t->retry_after;
    res->error = t->error;
    if (curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK)
        code = 0;
    if (curl_easy_getinfo(t->easy, CURLINFO_NUM_CONNECTS, &connects) == CURLE_OK)
        res->connection_reused = connects == 0 && code > 0;
    /* A response too large to keep still has a status, and the status is the answer. */
    if (rc == CURLE_OK || (t->too_large && code > 0)) {
        res->transport = TRANSPORT_OK;
        res->status = (int)code;
    } else if (t->blocked) {
        res->transport = TRANSPORT_BLOCKED;
        snprintf(t->error, sizeof t->error, "address refused by SSRF guard");
    } else {
        /* The class leads the text, so "timeout" or "connect" reads the same whatever libcurl's wording. */
        res->transport = classify_curl(rc);
        snprintf(t->error, sizeof t->error, "%s: %s", transport_error_name(res->transport),
                 t->errbuf[0] != '\0' ? t->errbuf : curl_easy_strerror(rc));
    }
    res->outcome = t->classify != NULL ? t->classify(res) : -1;
}

/* Takes t out of the multi, runs its done, and frees its slot once done has returned. */
static void transfer_end(struct http_engine *e, struct transfer *t, const struct http_client_result *res)
{
    http_client_done_fn done = t->done;
    void *arg = t->arg;

    curl_multi_remove_handle(e->multi, t->easy);
    e->active--;
    t->active = false;
    done(arg, res);
    transfer_put(e, t);
}

int http_engine_run(struct http_engine *e)
{
    CURLMsg *msg;
    int left = 0, finished = 0;

    /* The sockets were driven in http_engine_wait; a new transfer asks for the timeout (0) to start. */
    timer_drive(e);
    while ((msg = curl_multi_info_read(e->multi, &left)) != NULL) {
        struct transfer *t = NULL;
        struct http_client_result res;
        char *priv = NULL;

        if (msg->msg != CURLMSG_DONE)
            continue;
        CURLcode rc = msg->data.result;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
        t = (struct transfer *)(void *)priv;
        result_fill(t, rc, &res);
        transfer_end(e, t, &res);
        finished++;
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

/* Sleeps until a socket is ready, a wake-up or libcurl's timeout, and drives what is ready (completions wait for run). */
void http_engine_wait(struct http_engine *e, int timeout_ms)
{
    struct epoll_event evs[EVENTS_PER_WAIT];
    int wait = timeout_ms < 0 ? 0 : timeout_ms, n, running = 0;

    if (e->timer_at >= 0) {
        int64_t left = e->timer_at - clock_mono_ms();
        if (left < wait)
            wait = left < 0 ? 0 : (int)left;
    }
    n = epoll_wait(e->epfd, evs, EVENTS_PER_WAIT, wait);
    for (int i = 0; i < n; i++) {
        uint32_t r = evs[i].events;
        if (evs[i].data.fd == e->wake_fd) {
            wake_drain(e);
            continue;
        }
        curl_multi_socket_action(e->multi, evs[i].data.fd,
                                 (r & EPOLLIN ? CURL_CSELECT_IN : 0) | (r & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                                     (r & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0),
                                 &running);
    }
    timer_drive(e);
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
    for (int i = 0; i < e->n_all; i++)
        e->all[i]->cancelling = e->all[i]->active;
    for (int i = 0; i < e->n_all; i++) {
        struct transfer *t = e->all[i];
        struct http_client_result res;

        if (!t->cancelling)
            continue;
        t->cancelling = false;
        memset(&res, 0, sizeof res);
        snprintf(t->error, sizeof t->error, "cancelled");
        res.transport = TRANSPORT_OTHER;
        res.cancelled = true;
        res.body = "";
        res.retry_after = "";
        res.error = t->error;
        res.outcome = -1;
        res.started_at_ms = t->started_at;
        transfer_end(e, t, &res);
    }
}
