/*
 * The HTTP engine (net/http_client.h): hookd's own HTTP/1.1 client. Transfers
 * in fixed slots, a pool of keep-alive connections keyed by scheme, host and
 * port, an epoll set with every connection on it edge-triggered, a min-heap
 * of deadlines, DNS on the resolver's threads (net/http_resolve.h), TLS by
 * OpenSSL (net/http_tls.h), and the response read by net/http_response.h.
 *
 * A turn costs what its ready sockets and due deadlines cost, never what the
 * transfers in flight do: hundreds held by endpoints that never answer sit in
 * the heap and the epoll set untouched. (libcurl, which this replaced, spent
 * ~90k of a delivery's ~123k dispatcher instructions formatting and parsing.)
 * A request is written with one send when its body is small.
 */
#include "net/http_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "core/buf.h"
#include "core/clock.h"
#include "hookd.h"
#include "net/http_resolve.h"
#include "net/http_response.h"
#include "net/http_tls.h"
#include "net/http_url.h"
#include "net/ssrf.h"

#define EVENTS_PER_WAIT 64
#define IDLE_MAX_MS 60000                /* an idle connection is closed after this */
#define CONNECT_TIMEOUT_DEFAULT_MS 300000 /* libcurl's, for a request and an engine that give none */
#define HEAD_MAX (128 * 1024)            /* a request's line and header block */
#define INLINE_BODY_MAX (16 * 1024)      /* bodies up to this are copied behind the head: one send */
#define READ_CHUNK 16384
#define KEY_MAX (HTTP_URL_HOST_MAX + 16)

/* epoll tags beside connection slots (slot i is tag i + TAG_CONN). */
enum { TAG_WAKE = 0, TAG_RESOLVER = 1, TAG_CONN = 2 };

enum transfer_state {
    T_FREE,
    T_RESOLVING,  /* waiting for the resolver */
    T_CONNECTING, /* connect() in progress on t->c */
    T_HANDSHAKE,  /* TLS */
    T_SENDING,
    T_RECEIVING,
    T_ENDED,      /* in the completion queue */
};

struct transfer;

struct conn {
    int slot;
    int fd;                 /* -1: the slot is free */
    SSL *ssl;
    char key[KEY_MAX];      /* "http://host:port" as the pool knows it */
    uint32_t hash;
    struct transfer *t;     /* using it; NULL when idle */
    int64_t idle_since;
    struct conn *lru_prev, *lru_next;     /* idle connections, oldest first */
    struct conn *bucket_prev, *bucket_next; /* idle connections of one hash bucket */
};

struct transfer {
    struct http_engine *e;
    int slot;
    uint32_t gen;             /* tags resolver lookups: an answer for an older start is dropped */
    enum transfer_state state;
    struct http_url url;
    char key[KEY_MAX];
    uint32_t hash;
    char *head;               /* request line, headers, and a small body; HEAD_MAX + INLINE_BODY_MAX at most */
    size_t head_len, head_cap;
    const char *body;         /* borrowed; the part not in head */
    size_t body_len;
    size_t sent;              /* of head.len + body_len */
    bool head_request;
    struct conn *c;
    bool reused;              /* the current connection came from the pool */
    bool opened;              /* a connection was opened for this request */
    bool retried;             /* sent again on a fresh connection once */
    bool response_started;    /* a response byte arrived on the current connection */
    struct resolver_answer addrs;
    int next_addr, n_refused;
    int last_errno;
    int64_t deadline, connect_deadline; /* monotonic ms */
    int64_t timeout_ms, connect_timeout_ms;
    int heap_pos;             /* -1: not in the heap */
    struct http_response *rsp;
    struct buf response;      /* the snippet */
    size_t received, abort_at;
    bool too_large;
    enum transport_error err; /* TRANSPORT_OK: a status arrived */
    char error[HTTP_CLIENT_ERROR_MAX];
    int64_t started_at, started_mono;
    http_client_classify_fn classify;
    http_client_done_fn done;
    void *arg;
    bool cancelling;
    struct transfer *next_ended; /* completion queue */
};

struct http_engine {
    struct http_engine_options opt;
    char user_agent[128];
    char ca_file[256];
    int epfd, wake_fd;
    struct resolver *resolver;
    SSL_CTX *tls;             /* made with the first https request */
    struct transfer **transfers; /* slots, made when first needed */
    int n_transfers;
    int *free_slots, n_free;  /* transfer slots made and unused */
    int active;
    struct conn *conns;       /* max_transfers slots: every connection open, in use or idle */
    int n_open;
    struct conn *lru_head, *lru_tail;
    struct conn **buckets;
    uint32_t bucket_mask;
    struct transfer **heap;   /* deadlines, soonest first */
    int heap_n;
    struct transfer *ended_head, *ended_tail;
};

static void transfer_drive(struct http_engine *e, struct transfer *t);
static void transfer_start(struct http_engine *e, struct transfer *t);

/* ---- the deadline heap ------------------------------------------------------- */

static int64_t transfer_due(const struct transfer *t)
{
    bool connecting = t->state == T_RESOLVING || t->state == T_CONNECTING || t->state == T_HANDSHAKE;
    return connecting && t->connect_deadline < t->deadline ? t->connect_deadline : t->deadline;
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
static void transfer_set_state(struct http_engine *e, struct transfer *t, enum transfer_state s)
{
    int64_t before = transfer_due(t);

    t->state = s;
    if (t->heap_pos >= 0 && transfer_due(t) != before)
        heap_fix(e, t->heap_pos);
}

/* ---- connections and the pool --------------------------------------------- */

static uint32_t key_hash(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */

    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static void idle_unlink(struct http_engine *e, struct conn *c)
{
    struct conn **bucket = &e->buckets[c->hash & e->bucket_mask];

    if (c->lru_prev != NULL)
        c->lru_prev->lru_next = c->lru_next;
    else
        e->lru_head = c->lru_next;
    if (c->lru_next != NULL)
        c->lru_next->lru_prev = c->lru_prev;
    else
        e->lru_tail = c->lru_prev;
    if (c->bucket_prev != NULL)
        c->bucket_prev->bucket_next = c->bucket_next;
    else
        *bucket = c->bucket_next;
    if (c->bucket_next != NULL)
        c->bucket_next->bucket_prev = c->bucket_prev;
    c->lru_prev = c->lru_next = c->bucket_prev = c->bucket_next = NULL;
}

static void idle_link(struct http_engine *e, struct conn *c)
{
    struct conn **bucket = &e->buckets[c->hash & e->bucket_mask];

    c->t = NULL;
    c->idle_since = clock_mono_ms();
    c->lru_next = NULL;
    c->lru_prev = e->lru_tail;
    if (e->lru_tail != NULL)
        e->lru_tail->lru_next = c;
    else
        e->lru_head = c;
    e->lru_tail = c;
    c->bucket_prev = NULL;
    c->bucket_next = *bucket;
    if (*bucket != NULL)
        (*bucket)->bucket_prev = c;
    *bucket = c;
}

/* Closes c (idle or not: an idle one leaves the pool); its slot is free again. */
static void conn_close(struct http_engine *e, struct conn *c)
{
    if (c->fd < 0)
        return;
    if (c->t == NULL)
        idle_unlink(e, c);
    else
        c->t->c = NULL;
    if (c->ssl != NULL) {
        SSL_free(c->ssl); /* no close_notify: the connection is dropped, not ended politely */
        c->ssl = NULL;
    }
    close(c->fd); /* leaves the epoll set with it */
    c->fd = -1;
    c->t = NULL;
    e->n_open--;
}

/* A free connection slot, closing the idle connection unused longest when all are open. */
static struct conn *conn_slot(struct http_engine *e)
{
    for (int i = 0; i < e->opt.max_transfers; i++) {
        if (e->conns[i].fd < 0)
            return &e->conns[i];
    }
    if (e->lru_head == NULL)
        return NULL; /* cannot be: a transfer in flight holds at most one */
    struct conn *c = e->lru_head;
    conn_close(e, c);
    return c;
}

/*
 * False when an idle connection can no longer carry a request: the peer
 * closed it, reset it, or sent bytes nobody asked for (a TLS record that is
 * only a session ticket is read and the connection kept).
 */
static bool conn_alive(struct conn *c)
{
    char b;
    ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);

    if (n < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK;
    if (n == 0 || c->ssl == NULL)
        return false;
    int r = SSL_read(c->ssl, &b, 1);
    if (r > 0)
        return false;
    r = SSL_get_error(c->ssl, r);
    ERR_clear_error();
    return r == SSL_ERROR_WANT_READ;
}

/* An idle connection for t's key that is still alive, taken out of the pool; NULL when none. */
static struct conn *pool_take(struct http_engine *e, struct transfer *t)
{
    struct conn *c = e->buckets[t->hash & e->bucket_mask];

    while (c != NULL) {
        struct conn *next = c->bucket_next;
        if (c->hash == t->hash && strcmp(c->key, t->key) == 0) {
            if (conn_alive(c)) {
                idle_unlink(e, c);
                return c;
            }
            conn_close(e, c);
        }
        c = next;
    }
    return NULL;
}

/* Idle connections past IDLE_MAX_MS are closed; the oldest lead the list. */
static void pool_expire(struct http_engine *e, int64_t now)
{
    while (e->lru_head != NULL && now - e->lru_head->idle_since >= IDLE_MAX_MS)
        conn_close(e, e->lru_head);
}

/* ---- ending a transfer ------------------------------------------------------ */

/* Ends t: its connection goes back to the pool when keep is set, and its done waits for http_engine_run. */
static void transfer_end(struct http_engine *e, struct transfer *t, bool keep)
{
    if (t->c != NULL) {
        struct conn *c = t->c;
        if (keep) {
            t->c = NULL;
            idle_link(e, c);
        } else {
            conn_close(e, c);
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
__attribute__((format(printf, 4, 5))) static void transfer_fail(struct http_engine *e, struct transfer *t,
                                                              enum transport_error err, const char *fmt, ...)
{
    va_list ap;
    int n;

    t->err = err;
    n = snprintf(t->error, sizeof t->error, "%s: ", transport_error_name(err));
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof t->error)
        vsnprintf(t->error + n, sizeof t->error - (size_t)n, fmt, ap);
    va_end(ap);
    transfer_end(e, t, false);
}

/* Every address was refused by the SSRF guard: the text is the guard's own, as it always was. */
static void transfer_blocked(struct http_engine *e, struct transfer *t)
{
    t->err = TRANSPORT_BLOCKED;
    snprintf(t->error, sizeof t->error, "address refused by SSRF guard");
    transfer_end(e, t, false);
}

/* ---- connecting ------------------------------------------------------------- */

static socklen_t addr_len(const struct sockaddr_storage *a)
{
    return a->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

static void addr_set_port(struct sockaddr_storage *a, uint16_t port)
{
    if (a->ss_family == AF_INET6)
        ((struct sockaddr_in6 *)(void *)a)->sin6_port = htons(port);
    else
        ((struct sockaddr_in *)(void *)a)->sin_port = htons(port);
}

/* Connects to t's next allowed address; ends t when none is left. */
static void connect_next(struct http_engine *e, struct transfer *t)
{
    while (t->next_addr < t->addrs.n) {
        struct sockaddr_storage *a = &t->addrs.addrs[t->next_addr++];
        struct conn *c;
        int one = 1, fd;

        if (!e->opt.allow_private_networks && !ssrf_address_allowed((struct sockaddr *)a)) {
            t->n_refused++;
            continue;
        }
        addr_set_port(a, t->url.port);
        c = conn_slot(e);
        if (c == NULL) {
            transfer_fail(e, t, TRANSPORT_OTHER, "no connection slot");
            return;
        }
        fd = socket(a->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
        if (fd < 0) {
            t->last_errno = errno;
            continue;
        }
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
        if (connect(fd, (struct sockaddr *)a, addr_len(a)) != 0 && errno != EINPROGRESS) {
            t->last_errno = errno;
            close(fd);
            continue;
        }
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                                 .data.u64 = (uint64_t)c->slot + TAG_CONN};
        if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            t->last_errno = errno;
            close(fd);
            continue;
        }
        c->fd = fd;
        c->ssl = NULL;
        c->t = t;
        snprintf(c->key, sizeof c->key, "%s", t->key);
        c->hash = t->hash;
        e->n_open++;
        t->c = c;
        t->opened = true;
        t->reused = false;
        t->response_started = false;
        transfer_set_state(e, t, T_CONNECTING);
        return; /* the socket turns writable when connect() has an answer */
    }
    if (t->addrs.n > 0 && t->n_refused == t->addrs.n)
        transfer_blocked(e, t);
    else
        transfer_fail(e, t, TRANSPORT_CONNECT, "cannot connect to %s port %u: %s", t->url.host, t->url.port,
                      t->last_errno != 0 ? strerror(t->last_errno) : "no address");
}

/* The addresses are known: connect to them in turn. */
static void addresses_ready(struct http_engine *e, struct transfer *t, const struct resolver_answer *a)
{
    if (a->error != 0 || a->n == 0) {
        transfer_fail(e, t, TRANSPORT_DNS, "cannot resolve %s: %s", t->url.host, gai_strerror(a->error));
        return;
    }
    t->addrs = *a;
    t->next_addr = 0;
    t->n_refused = 0;
    t->last_errno = 0;
    connect_next(e, t);
}

static void on_resolved(void *ud, uint64_t tag, const struct resolver_answer *a)
{
    struct http_engine *e = ud;
    uint32_t slot = (uint32_t)(tag >> 32), gen = (uint32_t)tag;
    struct transfer *t;

    if (slot >= (uint32_t)e->n_transfers)
        return;
    t = e->transfers[slot];
    if (t->state != T_RESOLVING || t->gen != gen)
        return; /* ended or started again meanwhile */
    addresses_ready(e, t, a);
}

/* Finds a connection for t: one from the pool, else the addresses to open one. */
static void transfer_start(struct http_engine *e, struct transfer *t)
{
    struct resolver_answer a;

    t->sent = 0;
    t->response_started = false;
    t->gen++;
    http_response_init(t->rsp, t->head_request);
    if (!t->retried) {
        struct conn *c = pool_take(e, t);
        if (c != NULL) {
            c->t = t;
            t->c = c;
            t->reused = true;
            transfer_set_state(e, t, T_SENDING);
            transfer_drive(e, t);
            return;
        }
    }
    t->reused = false;
    /* The trust store is read once, with the first https request, before its connection opens. */
    if (t->url.tls && e->tls == NULL && (e->tls = http_tls_context(e->ca_file[0] != '\0' ? e->ca_file : NULL)) == NULL) {
        transfer_fail(e, t, TRANSPORT_CONNECT, "TLS with %s: cannot read the trust store", t->url.host);
        return;
    }
    if (t->url.host_is_ip) {
        memset(&a, 0, sizeof a);
        a.n = 1;
        if (t->url.host_is_ipv6) {
            struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)(void *)&a.addrs[0];
            s6->sin6_family = AF_INET6;
            a.error = inet_pton(AF_INET6, t->url.host, &s6->sin6_addr) == 1 ? 0 : EAI_NONAME;
        } else {
            struct sockaddr_in *s4 = (struct sockaddr_in *)(void *)&a.addrs[0];
            s4->sin_family = AF_INET;
            a.error = inet_pton(AF_INET, t->url.host, &s4->sin_addr) == 1 ? 0 : EAI_NONAME;
        }
        addresses_ready(e, t, &a);
        return;
    }
    if (resolver_cached(e->resolver, t->url.host, clock_mono_ms(), &a)) {
        addresses_ready(e, t, &a);
        return;
    }
    transfer_set_state(e, t, T_RESOLVING);
    if (resolver_submit(e->resolver, t->url.host, ((uint64_t)(uint32_t)t->slot << 32) | t->gen) != 0)
        transfer_fail(e, t, TRANSPORT_DNS, "cannot resolve %s: no resolver", t->url.host);
}

/*
 * A request on a reused connection that failed before a response byte came
 * is sent once more on a new connection (the peer may have closed it as we
 * sent). True when t was started again.
 */
static bool transfer_retry(struct http_engine *e, struct transfer *t)
{
    if (!t->reused || t->response_started || t->retried)
        return false;
    if (t->c != NULL)
        conn_close(e, t->c);
    t->retried = true;
    buf_reset(&t->response);
    t->received = 0;
    transfer_start(e, t);
    return true;
}

/* ---- TLS, sending, receiving ------------------------------------------------ */

static bool tls_handshake(struct http_engine *e, struct transfer *t)
{
    struct conn *c = t->c;
    int r, err;
    char why[160];

    if (c->ssl == NULL) {
        if (e->tls == NULL || (c->ssl = http_tls_session(e->tls, c->fd, t->url.host, t->url.host_is_ip)) == NULL) {
            transfer_fail(e, t, TRANSPORT_CONNECT, "TLS with %s: cannot start a session", t->url.host);
            return false;
        }
    }
    ERR_clear_error();
    errno = 0;
    r = SSL_connect(c->ssl);
    if (r == 1) {
        transfer_set_state(e, t, T_SENDING);
        return true;
    }
    err = SSL_get_error(c->ssl, r);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
        return false;
    http_tls_reason(c->ssl, err, why, sizeof why);
    transfer_fail(e, t, TRANSPORT_CONNECT, "TLS handshake with %s failed: %s", t->url.host, why);
    return false;
}

/* Writes what is left of the request. True when all of it went; false when it waits or t ended. */
static bool send_request(struct http_engine *e, struct transfer *t)
{
    struct conn *c = t->c;
    size_t total = t->head_len + t->body_len;

    while (t->sent < total) {
        ssize_t w;
        int err = 0;
        if (c->ssl != NULL) {
            const char *p = t->sent < t->head_len ? t->head + t->sent : t->body + (t->sent - t->head_len);
            size_t n = t->sent < t->head_len ? t->head_len - t->sent : total - t->sent;
            int r;
            ERR_clear_error();
            r = SSL_write(c->ssl, p, n > INT32_MAX ? INT32_MAX : (int)n);
            if (r > 0) {
                w = r;
            } else {
                int se = SSL_get_error(c->ssl, r);
                if (se == SSL_ERROR_WANT_WRITE || se == SSL_ERROR_WANT_READ)
                    return false;
                w = -1;
                err = se == SSL_ERROR_SYSCALL && errno != 0 ? errno : EPIPE;
                ERR_clear_error();
            }
        } else {
            struct iovec iov[2];
            int n = 0;
            if (t->sent < t->head_len)
                iov[n++] = (struct iovec){.iov_base = t->head + t->sent, .iov_len = t->head_len - t->sent};
            if (t->body_len > 0) {
                size_t off = t->sent > t->head_len ? t->sent - t->head_len : 0;
                iov[n++] = (struct iovec){.iov_base = (void *)(t->body + off), .iov_len = t->body_len - off};
            }
            struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
            w = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
            if (w < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                    return false;
                if (errno == EINTR)
                    continue;
                err = errno;
            }
        }
        if (w < 0) {
            if (!transfer_retry(e, t))
                transfer_fail(e, t, TRANSPORT_OTHER, "sending the request to %s failed: %s", t->url.host,
                              strerror(err));
            return false;
        }
        t->sent += (size_t)w;
    }
    transfer_set_state(e, t, T_RECEIVING);
    return true;
}

static void on_body(void *ud, const char *data, size_t n)
{
    struct transfer *t = ud;
    size_t room = t->response.max > t->response.len ? t->response.max - t->response.len : 0;

    if (t->too_large)
        return;
    t->received += n;
    if (t->received > t->abort_at) {
        t->too_large = true;
        return;
    }
    if (room > 0 && buf_append(&t->response, data, n < room ? n : room) != 0)
        t->too_large = true; /* cannot be: the snippet's max is its room */
}

/* The response ended (or grew past the hard cap): the status is the answer. */
static void response_done(struct http_engine *e, struct transfer *t, bool keep)
{
    t->err = TRANSPORT_OK;
    t->error[0] = '\0';
    transfer_end(e, t, keep && !t->too_large && t->rsp->keep_alive);
}

/* Reads what has arrived; ends t when the response is complete. */
static void receive_response(struct http_engine *e, struct transfer *t)
{
    struct conn *c = t->c;
    char data[READ_CHUNK];

    for (;;) {
        ssize_t n;
        int err = 0;
        if (c->ssl != NULL) {
            int r;
            ERR_clear_error();
            r = SSL_read(c->ssl, data, sizeof data);
            if (r > 0) {
                n = r;
            } else {
                int se = SSL_get_error(c->ssl, r);
                if (se == SSL_ERROR_WANT_READ || se == SSL_ERROR_WANT_WRITE)
                    return;
                n = se == SSL_ERROR_ZERO_RETURN || (se == SSL_ERROR_SYSCALL && errno == 0) ? 0 : -1;
                err = se == SSL_ERROR_SYSCALL && errno != 0 ? errno : EPROTO;
                ERR_clear_error();
            }
        } else {
            n = recv(c->fd, data, sizeof data, 0);
            if (n < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                    return;
                if (errno == EINTR)
                    continue;
                err = errno;
            }
        }
        if (n <= 0) {
            /* The end of the connection, or a reset: before any answer a reused one is tried afresh. */
            if (!t->response_started && (n == 0 || err == ECONNRESET) && transfer_retry(e, t))
                return;
            if (n < 0 && !t->rsp->head_done) {
                transfer_fail(e, t, TRANSPORT_OTHER, "receiving from %s failed: %s", t->url.host, strerror(err));
                return;
            }
            if (t->rsp->head_done && t->too_large) {
                response_done(e, t, false);
                return;
            }
            if (http_response_eof(t->rsp) == HTTP_RESPONSE_DONE)
                response_done(e, t, false);
            else
                transfer_fail(e, t, TRANSPORT_OTHER, "%s", t->rsp->error);
            return;
        }
        t->response_started = true;
        size_t used = 0;
        enum http_response_rc rc = http_response_feed(t->rsp, data, (size_t)n, &used, on_body, t);
        if (rc == HTTP_RESPONSE_ERROR) {
            transfer_fail(e, t, TRANSPORT_OTHER, "%s", t->rsp->error);
            return;
        }
        if (t->too_large) {
            response_done(e, t, false);
            return;
        }
        if (rc == HTTP_RESPONSE_DONE) {
            /* Bytes past the response, or buffered in TLS, were never asked for: the connection goes. */
            bool clean = used == (size_t)n && (c->ssl == NULL || SSL_pending(c->ssl) == 0);
            response_done(e, t, clean);
            return;
        }
    }
}

/* Moves t as far as it goes without blocking. */
static void transfer_drive(struct http_engine *e, struct transfer *t)
{
    for (;;) {
        switch (t->state) {
        case T_HANDSHAKE:
            if (!tls_handshake(e, t))
                return;
            break;
        case T_SENDING:
            if (!send_request(e, t))
                return;
            break;
        case T_RECEIVING:
            receive_response(e, t);
            return;
        default:
            return;
        }
    }
}

/* connect() answered on t's socket. */
static void connect_done(struct http_engine *e, struct transfer *t)
{
    int err = 0;
    socklen_t len = sizeof err;

    if (getsockopt(t->c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        err = errno;
    if (err == EINPROGRESS || err == EALREADY)
        return;
    if (err == 0) {
        /* An event meant for the slot's previous socket (closed earlier in this turn) proves nothing. */
        struct sockaddr_storage peer;
        socklen_t plen = sizeof peer;
        if (getpeername(t->c->fd, (struct sockaddr *)&peer, &plen) != 0 && errno == ENOTCONN)
            return;
    }
    if (err != 0) {
        t->last_errno = err;
        conn_close(e, t->c);
        connect_next(e, t);
        return;
    }
    transfer_set_state(e, t, t->url.tls ? T_HANDSHAKE : T_SENDING);
    transfer_drive(e, t);
}

static void conn_event(struct http_engine *e, struct conn *c, uint32_t events)
{
    struct transfer *t = c->t;

    if (c->fd < 0)
        return; /* closed earlier in this turn */
    if (t == NULL) {
        /* Idle: anything it hears (an end, a reset, stray bytes) ends it; room to write is no news. */
        if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP)) != 0 && !conn_alive(c))
            conn_close(e, c);
        return;
    }
    if (t->state == T_CONNECTING) {
        if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
            connect_done(e, t);
        return;
    }
    if (t->state == T_RECEIVING && c->ssl == NULL && (events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP)) == 0)
        return; /* room to write: nothing to read yet */
    transfer_drive(e, t);
}

/* ---- deadlines --------------------------------------------------------------- */

static void deadlines_run(struct http_engine *e, int64_t now)
{
    while (e->heap_n > 0 && transfer_due(e->heap[0]) <= now) {
        struct transfer *t = e->heap[0];
        bool connecting = t->state == T_RESOLVING || t->state == T_CONNECTING || t->state == T_HANDSHAKE;
        bool connect_hit = connecting && t->connect_deadline <= t->deadline;

        if (connect_hit && t->state == T_RESOLVING)
            transfer_fail(e, t, TRANSPORT_TIMEOUT, "resolving %s timed out after %lld ms", t->url.host,
                          (long long)t->connect_timeout_ms);
        else if (connect_hit)
            transfer_fail(e, t, TRANSPORT_TIMEOUT, "connecting to %s port %u timed out after %lld ms", t->url.host,
                          t->url.port, (long long)t->connect_timeout_ms);
        else
            transfer_fail(e, t, TRANSPORT_TIMEOUT, "no complete answer within %lld ms (%zu body bytes received)",
                          (long long)t->timeout_ms, t->received);
    }
    pool_expire(e, now);
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
    snprintf(e->user_agent, sizeof e->user_agent, "%s", opt->user_agent != NULL ? opt->user_agent : "hookd/" HOOKD_VERSION);
    e->opt.user_agent = e->user_agent;
    snprintf(e->ca_file, sizeof e->ca_file, "%s", opt->ca_file != NULL ? opt->ca_file : "");
    e->opt.ca_file = NULL;
    while (buckets < (uint32_t)max * 2 && buckets < (1u << 20))
        buckets <<= 1;
    e->bucket_mask = buckets - 1;
    e->transfers = calloc((size_t)max, sizeof *e->transfers);
    e->free_slots = calloc((size_t)max, sizeof *e->free_slots);
    e->conns = calloc((size_t)max, sizeof *e->conns);
    e->buckets = calloc(buckets, sizeof *e->buckets);
    e->heap = calloc((size_t)max, sizeof *e->heap);
    if (e->transfers == NULL || e->free_slots == NULL || e->conns == NULL || e->buckets == NULL || e->heap == NULL)
        goto fail;
    for (int i = 0; i < max; i++) {
        e->conns[i].slot = i;
        e->conns[i].fd = -1;
    }
    rc = resolver_create(&e->resolver);
    if (rc != 0)
        goto fail;
    rc = HOOKD_EIO;
    e->epfd = epoll_create1(EPOLL_CLOEXEC);
    e->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (e->epfd < 0 || e->wake_fd < 0 ||
        epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->wake_fd, &(struct epoll_event){.events = EPOLLIN, .data.u64 = TAG_WAKE}) != 0 ||
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
            conn_close(e, &e->conns[i]);
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
        for (len = name + 1; line[len] != '\0'; len++) {
            char c = line[len];
            if (c == '\r' || c == '\n')
                return false;
            if (c != ' ' && c != '\t')
                blank = false;
        }
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
    t->hash = key_hash(t->key);
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
        transfer_fail(e, t, TRANSPORT_BLOCKED, "only http and https URLs may be reached");
    else
        transfer_start(e, t);
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
            resolver_drain(e->resolver, clock_mono_ms(), on_resolved, e);
        else
            conn_event(e, &e->conns[tag - TAG_CONN], evs[i].events);
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
            conn_close(e, t->c);
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
