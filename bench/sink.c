/*
 * The in-process webhook sink: an epoll HTTP/1.1 server (keep-alive, pipelining, Expect:
 * 100-continue; chunked bodies refused) answering 200 to every request, and the event table where
 * it records each webhook-id's arrivals.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "sink.h"

#define SINK_IN_CAP 32768 /* one request (headers + body) at most */
#define SINK_OUT_CAP 8192 /* queued response bytes per connection */

/* ---------------------------------------------------------------- event table */

int table_init(struct ev_table *t, size_t events, uint32_t target)
{
    size_t cap = 1024;

    while (cap < events * 2)
        cap *= 2;
    memset(t, 0, sizeof *t);
    if ((t->slots = calloc(cap, sizeof *t->slots)) == NULL)
        return -1;
    pthread_mutex_init(&t->mu, NULL);
    t->cap = cap;
    t->limit = cap - cap / 8; /* an empty slot always remains, so every probe ends */
    t->target = target;
    return 0;
}

void table_free(struct ev_table *t)
{
    free(t->slots);
    pthread_mutex_destroy(&t->mu);
}

struct ev_slot *table_slot(struct ev_table *t, const char *id, size_t len)
{
    uint64_t h = UINT64_C(14695981039346656037); /* FNV-1a */

    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)id[i]) * UINT64_C(1099511628211);
    for (size_t i = h & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        struct ev_slot *s = &t->slots[i];
        if (s->id[0] == '\0') {
            if (t->used >= t->limit)
                return NULL;
            memcpy(s->id, id, len);
            t->used++;
            return s;
        }
        if (strncmp(s->id, id, len) == 0 && s->id[len] == '\0')
            return s;
    }
}

static void table_arrival(struct ev_table *t, const char *id, size_t len, int64_t now)
{
    struct ev_slot *s = NULL;

    atomic_fetch_add(&t->requests, 1);
    atomic_store(&t->last_arrival_ns, now);
    if (len > 0 && len < HOOKD_ID_MAX) {
        pthread_mutex_lock(&t->mu);
        if ((s = table_slot(t, id, len)) != NULL) {
            if (s->arrivals == 0)
                s->first_ns = now;
            if (++s->arrivals == t->target)
                atomic_fetch_add(&t->complete, 1);
        }
        pthread_mutex_unlock(&t->mu);
    }
    if (s == NULL)
        atomic_fetch_add(&t->foreign, 1);
}

/* ---------------------------------------------------------------- sink */

/* One keep-alive connection. While responses wait for the socket, it is not read (backpressure). */
struct conn {
    int fd;
    bool continued; /* "100 Continue" already sent for the request being read */
    bool want_out;  /* registered for EPOLLOUT instead of EPOLLIN */
    size_t in_len, out_len, out_off;
    char in[SINK_IN_CAP];
    char out[SINK_OUT_CAP];
};

static const char resp_ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
static const char resp_continue[] = "HTTP/1.1 100 Continue\r\n\r\n";
static char listen_tag, stop_tag; /* epoll tags of the descriptors that are not connections */

static void conn_close(struct sink *s, struct conn *c)
{
    epoll_ctl(s->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    s->conns[c->fd] = NULL;
    free(c);
}

static void conn_queue(struct conn *c, const char *bytes, size_t n)
{
    memcpy(c->out + c->out_len, bytes, n);
    c->out_len += n;
}

/* Sends what is queued; returns -1 on a dead connection. */
static int conn_flush(struct sink *s, struct conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (w <= 0)
            return -1;
        c->out_off += (size_t)w;
    }
    if (c->out_off == c->out_len)
        c->out_off = c->out_len = 0;
    bool want = c->out_len > 0;
    if (want != c->want_out) {
        struct epoll_event ev = {.events = want ? EPOLLOUT : EPOLLIN, .data.ptr = c};
        epoll_ctl(s->epoll_fd, EPOLL_CTL_MOD, c->fd, &ev);
        c->want_out = want;
    }
    return 0;
}

/* The trimmed value of the header line [line, end) when its name is `name`, else NULL. */
static const char *header_value(const char *line, const char *end, const char *name, size_t *vlen)
{
    size_t n = strlen(name);

    if ((size_t)(end - line) <= n || strncasecmp(line, name, n) != 0 || line[n] != ':')
        return NULL;
    for (line += n + 1; line < end && (*line == ' ' || *line == '\t'); line++)
        ;
    while (end > line && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    *vlen = (size_t)(end - line);
    return line;
}

/* Answers the complete requests in c->in while the output has room. -1: close the connection.
 * Headers end at CRLFCRLF; a Content-Length body follows; chunked bodies are refused. */
static int conn_parse(struct sink *s, struct conn *c)
{
    size_t off = 0;
    int result = 0;

    while (c->out_len + sizeof resp_ok + sizeof resp_continue < SINK_OUT_CAP) {
        char *p = c->in + off, *hend = memmem(p, c->in_len - off, "\r\n\r\n", 4);
        const char *id = NULL, *v;
        size_t id_len = 0, vlen, total;
        long long clen = 0;
        bool expect = false;

        if (hend == NULL)
            break;
        for (char *line = memchr(p, '\n', (size_t)(hend - p)); line != NULL && line < hend;) {
            char *eol = memchr(line + 1, '\r', (size_t)(hend + 1 - line));
            if (eol == NULL)
                break;
            line++;
            if ((v = header_value(line, eol, "content-length", &vlen)) != NULL) {
                char num[24] = "";
                memcpy(num, v, vlen < sizeof num - 1 ? vlen : sizeof num - 1);
                clen = vlen > 0 && vlen < sizeof num - 1 ? strtoll(num, NULL, 10) : -1;
            } else if ((v = header_value(line, eol, "webhook-id", &vlen)) != NULL) {
                id = v;
                id_len = vlen;
            } else if ((v = header_value(line, eol, "expect", &vlen)) != NULL) {
                expect = vlen == 12 && strncasecmp(v, "100-continue", 12) == 0;
            } else if (header_value(line, eol, "transfer-encoding", &vlen) != NULL) {
                clen = -1;
            }
            line = eol + 1;
        }
        total = (size_t)(hend + 4 - p) + (size_t)clen;
        if (clen < 0 || total > SINK_IN_CAP) {
            result = -1;
            break;
        }
        if (c->in_len - off < total) {
            if (expect && !c->continued)
                conn_queue(c, resp_continue, sizeof resp_continue - 1);
            c->continued = expect;
            break;
        }
        table_arrival(s->table, id, id_len, mono_ns());
        conn_queue(c, resp_ok, sizeof resp_ok - 1);
        c->continued = false;
        off += total;
    }
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
    return result;
}

/* Parses and answers until the input is used up or the output blocks. */
static int conn_pump(struct sink *s, struct conn *c)
{
    for (;;) {
        size_t before = c->in_len;
        if (conn_parse(s, c) != 0) {
            atomic_fetch_add(&s->protocol_errors, 1);
            return -1;
        }
        if (conn_flush(s, c) != 0)
            return -1;
        if (c->want_out || c->in_len == before) /* consumed nothing more: wait for bytes */
            return 0;
    }
}

static int conn_readable(struct sink *s, struct conn *c)
{
    for (int rounds = 0; rounds < 64 && !c->want_out; rounds++) {
        ssize_t r;
        if (c->in_len == SINK_IN_CAP) { /* one request larger than the buffer */
            atomic_fetch_add(&s->protocol_errors, 1);
            return -1;
        }
        r = recv(c->fd, c->in + c->in_len, SINK_IN_CAP - c->in_len, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (r <= 0)
            return -1;
        c->in_len += (size_t)r;
        if (conn_pump(s, c) != 0)
            return -1;
    }
    return 0;
}

static int conn_event(struct sink *s, struct conn *c, uint32_t events)
{
    if (c->want_out)
        return conn_flush(s, c) != 0 ? -1 : c->want_out ? 0 : conn_pump(s, c);
    return (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) ? conn_readable(s, c) : 0;
}

static void sink_accept(struct sink *s)
{
    for (int n = 0; n < 256; n++) {
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), one = 1;
        struct conn *c;
        if (fd < 0)
            return;
        if (fd >= SINK_MAX_FD || (c = calloc(1, sizeof *c)) == NULL) {
            close(fd);
            continue;
        }
        c->fd = fd;
        s->conns[fd] = c;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0)
            conn_close(s, c);
    }
}

static void *sink_main(void *arg)
{
    struct sink *s = arg;
    struct epoll_event evs[64];

    for (;;) {
        int n = epoll_wait(s->epoll_fd, evs, 64, 1000);
        for (int i = 0; i < n; i++) {
            void *tag = evs[i].data.ptr;
            if (tag == &stop_tag)
                return NULL;
            if (tag == &listen_tag)
                sink_accept(s);
            else if (conn_event(s, tag, evs[i].events) != 0)
                conn_close(s, tag);
        }
    }
}

int sink_start(struct sink *s, struct ev_table *t)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof a;
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = &listen_tag};
    struct epoll_event sev = {.events = EPOLLIN, .data.ptr = &stop_tag};

    memset(s, 0, sizeof *s);
    s->table = t;
    s->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    s->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    s->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->listen_fd < 0 || s->epoll_fd < 0 || s->stop_fd < 0 || bind(s->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(s->listen_fd, 1024) != 0 || getsockname(s->listen_fd, (struct sockaddr *)&a, &alen) != 0 ||
        epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, s->listen_fd, &lev) != 0 ||
        epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, s->stop_fd, &sev) != 0 ||
        pthread_create(&s->thread, NULL, sink_main, s) != 0) {
        perror("loadgen: sink");
        return -1;
    }
    s->port = ntohs(a.sin_port);
    s->running = true;
    return 0;
}

void sink_stop(struct sink *s)
{
    uint64_t one = 1;

    if (s->running && write(s->stop_fd, &one, sizeof one) == sizeof one)
        pthread_join(s->thread, NULL);
    s->running = false;
    for (int fd = 0; fd < SINK_MAX_FD; fd++)
        if (s->conns[fd] != NULL)
            conn_close(s, s->conns[fd]);
    close(s->listen_fd);
    close(s->epoll_fd);
    close(s->stop_fd);
}

/* ---------------------------------------------------------------- what arrived */

long sink_report_arrivals(struct sink *s)
{
    struct ev_table *t = s->table;
    long missing = 0, distinct = 0, dups = 0, unknown = 0;

    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < t->cap; i++) {
        const struct ev_slot *e = &t->slots[i];
        if (e->id[0] == '\0')
            continue;
        distinct += e->arrivals > 0;
        if (e->commit_ns == 0) {
            unknown += e->arrivals > 0;
        } else if (e->arrivals > t->target) {
            dups += e->arrivals - t->target;
        } else if (e->arrivals < t->target && missing++ < 5) {
            fprintf(stderr, "  missing: %s arrived %u of %u times\n", e->id, e->arrivals, t->target);
        }
    }
    pthread_mutex_unlock(&t->mu);
    printf("  arrivals: %ld requests, %ld distinct ids, %ld missing, %ld duplicate deliveries, %ld unknown ids, "
           "%ld without id, %ld protocol errors\n",
           atomic_load(&t->requests), distinct, missing, dups, unknown, atomic_load(&t->foreign),
           atomic_load(&s->protocol_errors));
    if (missing > 0)
        fprintf(stderr, "loadgen: FAIL: %ld events did not reach every endpoint\n", missing);
    return missing;
}

int sink_only(struct sink *s, long seconds)
{
    printf("sink listening on http://127.0.0.1:%d/ for %ld s\n", s->port, seconds);
    sleep_ms(seconds * 1000);
    sink_report_arrivals(s);
    return 0;
}
