/*
 * The HTTP engine's connections (net/http_client.h): the keep-alive pool
 * (idle connections by key in hash buckets, and oldest first for expiry and
 * eviction), non-blocking connect through the allowed addresses in turn, the
 * TLS handshake, the request written with as few sends as it takes, and the
 * answer read into net/http_response.h until it ends. Sockets are on the
 * engine's epoll set edge-triggered: each is read or written until it would block.
 */
#include "net/http_client_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <openssl/err.h>

#include "core/buf.h"
#include "core/clock.h"
#include "hookd.h"
#include "net/http_tls.h"
#include "net/ssrf.h"

static void transfer_drive(struct http_engine *e, struct transfer *t);

/* ---- connections and the pool --------------------------------------------- */

uint32_t client_key_hash(const char *s)
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

void client_idle_link(struct http_engine *e, struct conn *c)
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
void client_conn_close(struct http_engine *e, struct conn *c)
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
    e->free_conns[e->n_free_conns++] = c->slot;
    c->t = NULL;
    e->n_open--;
}

/* A free connection slot (the top of the free stack), closing the idle connection unused longest when all are open. */
static struct conn *conn_slot(struct http_engine *e)
{
    if (e->n_free_conns == 0) {
        if (e->lru_head == NULL)
            return NULL; /* cannot be: a transfer in flight holds at most one */
        client_conn_close(e, e->lru_head);
    }
    return &e->conns[e->free_conns[e->n_free_conns - 1]]; /* taken once its socket is open */
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
            client_conn_close(e, c);
        }
        c = next;
    }
    return NULL;
}

/* Idle connections past IDLE_MAX_MS are closed; the oldest lead the list. */
void client_pool_expire(struct http_engine *e, int64_t now)
{
    while (e->lru_head != NULL && now - e->lru_head->idle_since >= IDLE_MAX_MS)
        client_conn_close(e, e->lru_head);
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
void client_connect_next(struct http_engine *e, struct transfer *t)
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
            client_transfer_fail(e, t, TRANSPORT_OTHER, "no connection slot");
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
        e->n_free_conns--; /* c is the slot on top */
        c->fd = fd;
        c->ssl = NULL;
        c->t = t;
        memcpy(c->key, t->key, strlen(t->key) + 1);
        c->hash = t->hash;
        e->n_open++;
        t->c = c;
        t->opened = true;
        t->reused = false;
        t->response_started = false;
        /* Each address left gets an equal share of what is left of the connect timeout. */
        int64_t now = clock_mono_ms(), left = t->connect_deadline - now;
        t->attempt_deadline = left > 0 ? now + left / (t->addrs.n - t->next_addr + 1) : t->connect_deadline;
        client_set_state(e, t, T_CONNECTING);
        return; /* the socket turns writable when connect() has an answer */
    }
    if (t->addrs.n > 0 && t->n_refused == t->addrs.n)
        client_transfer_blocked(e, t);
    else
        client_transfer_fail(e, t, TRANSPORT_CONNECT, "cannot connect to %s port %u: %s", t->url.host, t->url.port,
                             t->last_errno != 0 ? strerror(t->last_errno) : "no address");
}

/* The addresses are known: connect to them in turn. */
static void addresses_ready(struct http_engine *e, struct transfer *t, const struct resolver_answer *a)
{
    if (a->error != 0 || a->n == 0) {
        client_transfer_fail(e, t, TRANSPORT_DNS, "cannot resolve %s: %s", t->url.host, gai_strerror(a->error));
        return;
    }
    t->addrs = *a;
    t->next_addr = 0;
    t->n_refused = 0;
    t->last_errno = 0;
    client_connect_next(e, t);
}

void client_on_resolved(void *ud, uint64_t tag, const struct resolver_answer *a)
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
void client_transfer_start(struct http_engine *e, struct transfer *t)
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
            client_set_state(e, t, T_SENDING);
            transfer_drive(e, t);
            return;
        }
    }
    t->reused = false;
    /* The trust store is read once, with the first https request, before its connection opens. */
    if (t->url.tls && e->tls == NULL &&
        (e->tls = http_tls_context(e->ca_file[0] != '\0' ? e->ca_file : NULL)) == NULL) {
        client_transfer_fail(e, t, TRANSPORT_CONNECT, "TLS with %s: cannot read the trust store", t->url.host);
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
    client_set_state(e, t, T_RESOLVING);
    if (resolver_submit(e->resolver, t->url.host, ((uint64_t)(uint32_t)t->slot << 32) | t->gen) != 0)
        client_transfer_fail(e, t, TRANSPORT_DNS, "cannot resolve %s: no resolver", t->url.host);
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
        client_conn_close(e, t->c);
    t->retried = true;
    buf_reset(&t->response);
    t->received = 0;
    client_transfer_start(e, t);
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
            client_transfer_fail(e, t, TRANSPORT_CONNECT, "TLS with %s: cannot start a session", t->url.host);
            return false;
        }
    }
    ERR_clear_error();
    errno = 0;
    r = SSL_connect(c->ssl);
    if (r == 1) {
        client_set_state(e, t, T_SENDING);
        return true;
    }
    err = SSL_get_error(c->ssl, r);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
        return false;
    http_tls_reason(c->ssl, err, why, sizeof why);
    client_transfer_fail(e, t, TRANSPORT_CONNECT, "TLS handshake with %s failed: %s", t->url.host, why);
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
                client_transfer_fail(e, t, TRANSPORT_OTHER, "sending the request to %s failed: %s", t->url.host,
                                     strerror(err));
            return false;
        }
        t->sent += (size_t)w;
    }
    client_set_state(e, t, T_RECEIVING);
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
    client_transfer_end(e, t, keep && !t->too_large && t->rsp->keep_alive);
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
                client_transfer_fail(e, t, TRANSPORT_OTHER, "receiving from %s failed: %s", t->url.host, strerror(err));
                return;
            }
            if (t->rsp->head_done && t->too_large) {
                response_done(e, t, false);
                return;
            }
            if (http_response_eof(t->rsp) == HTTP_RESPONSE_DONE)
                response_done(e, t, false);
            else
                client_transfer_fail(e, t, TRANSPORT_OTHER, "%s", t->rsp->error);
            return;
        }
        t->response_started = true;
        size_t used = 0;
        enum http_response_rc rc = http_response_feed(t->rsp, data, (size_t)n, &used, on_body, t);
        if (rc == HTTP_RESPONSE_ERROR) {
            client_transfer_fail(e, t, TRANSPORT_OTHER, "%s", t->rsp->error);
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
        client_conn_close(e, t->c);
        client_connect_next(e, t);
        return;
    }
    client_set_state(e, t, t->url.tls ? T_HANDSHAKE : T_SENDING);
    transfer_drive(e, t);
}

void client_conn_event(struct http_engine *e, struct conn *c, uint32_t events)
{
    struct transfer *t = c->t;

    if (c->fd < 0)
        return; /* closed earlier in this turn */
    if (t == NULL) {
        /* Idle: anything it hears (an end, a reset, stray bytes) ends it; room to write is no news. */
        if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP)) != 0 && !conn_alive(c))
            client_conn_close(e, c);
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
