/*
 * The inbound load: pre-signed requests sent on keep-alive connections driven
 * by one epoll loop; answers parsed (status line, Content-Length), each ack
 * timed. See inbound.h.
 */
#include "inbound.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "clock.h"
#include "nodes.h"

#define SECRET "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" /* the Standard Webhooks example secret */
#define REQ_MAX (PAYLOAD_MAX + 1024)
#define RESP_MAX 4096
#define CONN_MAX 1024

struct conn {
    int fd;
    long req;          /* request in flight, -1: idle */
    size_t sent, got;
    char resp[RESP_MAX];
};

struct sender {
    const struct inbound_load *l;
    char **reqs;
    size_t *lens;
    int64_t *sched;    /* scheduled send time per request (paced), or its send time */
    int64_t *lat;      /* ack latency per measured request, ns */
    long n_lat;
    long next;         /* next request to send */
    long done;
    struct inbound_figures *f;
};

int inbound_source_create(int admin_port, const char *token)
{
    char url[96], resp[2048];
    const char *body = "{\"name\": \"" INBOUND_SOURCE "\", \"verify\": {\"scheme\": \"standard-webhooks\", "
                       "\"secrets\": [\"" SECRET "\"]}}";
    long code;

    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/sources", admin_port);
    code = http_status("POST", url, token, body, resp, sizeof resp);
    if (code != 201) {
        fprintf(stderr, "loadgen: POST /v1/sources answered %ld: %s\n", code, resp);
        return -1;
    }
    return 0;
}

long inbound_check_stored(int admin_port, const char *token)
{
    static char resp[4 << 20];
    char url[512], cursor[256] = "";
    long n = 0;

    for (;;) {
        snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/inbox?source=" INBOUND_SOURCE "&limit=1000%s%s", admin_port,
                 cursor[0] ? "&cursor=" : "", cursor);
        if (http_status("GET", url, token, NULL, resp, sizeof resp) != 200)
            return -1;
        for (const char *p = resp; (p = strstr(p, "\"source\":\"" INBOUND_SOURCE "\"")); p++)
            n++;
        const char *c = strstr(resp, "\"next_cursor\":\"");
        if (!c)
            return n;
        c += strlen("\"next_cursor\":\"");
        size_t k = strcspn(c, "\"");
        if (k >= sizeof cursor)
            return -1;
        memcpy(cursor, c, k);
        cursor[k] = '\0';
    }
}

/* Every request, signed ahead of time: signing is the sender's cost, not the receiver's. */
static int presign(struct sender *s)
{
    unsigned char key[64], mac[32];
    char sig[64], id[64], body[PAYLOAD_MAX + 128], pad[PAYLOAD_MAX + 1], signed_text[sizeof body + 128];
    const char *b64 = SECRET + strlen("whsec_");
    int keylen = EVP_DecodeBlock(key, (const unsigned char *)b64, (int)strlen(b64));
    int64_t ts = (int64_t)time(NULL);
    long pid = (long)getpid();
    unsigned int maclen = 0;

    if (keylen <= 0)
        return -1;
    /* EVP_DecodeBlock counts '=' padding as bytes: drop them. */
    for (const char *p = b64 + strlen(b64); p > b64 && p[-1] == '='; p--)
        keylen--;
    memset(pad, 'x', (size_t)s->l->payload_bytes);
    pad[s->l->payload_bytes] = '\0';
    for (long i = 0; i < s->l->events; i++) {
        snprintf(id, sizeof id, "bench-%ld-%ld-%ld", pid, (long)(ts % 100000), i);
        int blen = s->l->body_of ? s->l->body_of(i, body, sizeof body, s->l->body_arg)
                                 : snprintf(body, sizeof body, "{\"type\":\"bench.event\",\"data\":{\"seq\":%ld,\"pad\":\"%s\"}}",
                                            i, pad);
        if (blen < 0 || (size_t)blen >= sizeof body)
            return -1;
        int slen = snprintf(signed_text, sizeof signed_text, "%s.%" PRId64 ".%s", id, ts, body);
        if (!HMAC(EVP_sha256(), key, keylen, (unsigned char *)signed_text, (size_t)slen, mac, &maclen))
            return -1;
        EVP_EncodeBlock((unsigned char *)sig, mac, (int)maclen);
        s->reqs[i] = malloc(REQ_MAX);
        if (!s->reqs[i])
            return -1;
        int n = snprintf(s->reqs[i], REQ_MAX,
                         "POST /in/" INBOUND_SOURCE " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         "Content-Length: %d\r\nwebhook-id: %s\r\nwebhook-timestamp: %" PRId64
                         "\r\nwebhook-signature: v1,%s\r\n\r\n%s",
                         blen, id, ts, sig, body);
        s->lens[i] = (size_t)n;
    }
    explicit_bzero(key, sizeof key);
    return 0;
}

static int conn_open(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0)
        return -1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Writes the rest of c's request (blocking sockets: a request is small). */
static int conn_send(struct sender *s, struct conn *c, long req)
{
    c->req = req;
    c->got = 0;
    if (s->l->rate == 0)
        s->sched[req] = mono_ns();
    while (c->sent < s->lens[req]) {
        ssize_t w = write(c->fd, s->reqs[req] + c->sent, s->lens[req] - c->sent);
        if (w <= 0 && errno != EINTR)
            return -1;
        if (w > 0)
            c->sent += (size_t)w;
    }
    c->sent = 0;
    return 0;
}

/* Reads what arrived; returns 1 when a whole answer is in (its status in *status), 0 for more, -1 on error. */
static int conn_read(struct conn *c, int *status)
{
    ssize_t r = read(c->fd, c->resp + c->got, sizeof c->resp - 1 - c->got);
    char *end, *cl;
    long len = 0;

    if (r <= 0)
        return r < 0 && errno == EINTR ? 0 : -1;
    c->got += (size_t)r;
    c->resp[c->got] = '\0';
    end = strstr(c->resp, "\r\n\r\n");
    if (!end)
        return c->got >= sizeof c->resp - 1 ? -1 : 0;
    cl = strcasestr(c->resp, "\r\ncontent-length:");
    if (cl && cl < end)
        len = strtol(cl + strlen("\r\ncontent-length:"), NULL, 10);
    if ((long)(c->got - (size_t)(end + 4 - c->resp)) < len)
        return 0;
    *status = (int)strtol(c->resp + strlen("HTTP/1.1 "), NULL, 10);
    return 1;
}

static int conn_reopen(int ep, struct conn *c, int port, uint64_t index)
{
    struct epoll_event e = {.events = EPOLLIN, .data.u64 = index};

    close(c->fd);
    c->fd = conn_open(port);
    c->got = 0;
    c->sent = 0;
    return c->fd < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &e) != 0 ? -1 : 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double pct(const int64_t *v, long n, double p)
{
    long rank = (long)(p * (double)n + 0.999999);
    return (double)v[(rank < 1 ? 1 : rank > n ? n : rank) - 1] / 1e6;
}

int inbound_send(const struct inbound_load *l, struct inbound_figures *f)
{
    struct sender s = {.l = l, .f = f};
    struct conn *conns = calloc((size_t)l->connections, sizeof *conns);
    struct epoll_event evs[64];
    int ep = epoll_create1(0), result = -1;
    int64_t t0, t_first = 0, deadline;
    long idle_top = 0, *idle = calloc((size_t)l->connections, sizeof *idle);

    memset(f, 0, sizeof *f);
    s.reqs = calloc((size_t)l->events, sizeof *s.reqs);
    s.lens = calloc((size_t)l->events, sizeof *s.lens);
    s.sched = calloc((size_t)l->events, sizeof *s.sched);
    s.lat = calloc((size_t)l->events, sizeof *s.lat);
    if (!conns || !idle || ep < 0 || !s.reqs || !s.lens || !s.sched || !s.lat || presign(&s) != 0)
        goto out;
    for (long i = 0; i < l->connections; i++) {
        struct epoll_event e = {.events = EPOLLIN, .data.u64 = (uint64_t)i};
        conns[i].fd = conn_open(l->public_port);
        conns[i].req = -1;
        if (conns[i].fd < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &e) != 0) {
            fprintf(stderr, "loadgen: cannot connect to the public listener\n");
            goto out;
        }
        idle[idle_top++] = i;
    }
    t0 = mono_ns();
    for (long i = 0; i < l->events && l->rate > 0; i++)
        s.sched[i] = t0 + (int64_t)((double)i * 1e9 / (double)l->rate);
    deadline = t0 + l->timeout_ns + (l->rate > 0 ? (int64_t)((double)l->events * 1e9 / (double)l->rate) : 0);
    while (s.done < l->events) {
        int64_t now = mono_ns();
        int timeout_ms = 100;

        if (now > deadline) {
            fprintf(stderr, "loadgen: timed out: %ld of %ld answered\n", s.done, l->events);
            goto out;
        }
        /* Start what is due on idle connections. */
        while (idle_top > 0 && s.next < l->events && (l->rate == 0 || s.sched[s.next] <= now)) {
            long ci = idle[--idle_top];
            if (s.next == l->warmup_events)
                t_first = now;
            if (conn_send(&s, &conns[ci], s.next++) != 0) {
                fprintf(stderr, "loadgen: write failed: %s\n", strerror(errno));
                goto out;
            }
        }
        if (l->rate > 0 && s.next < l->events && idle_top > 0) {
            int64_t wait = s.sched[s.next] - now;
            timeout_ms = wait <= 0 ? 0 : (int)(wait / NS_PER_MS);
        }
        int n = epoll_wait(ep, evs, 64, timeout_ms);
        for (int k = 0; k < n; k++) {
            struct conn *c = &conns[evs[k].data.u64];
            if (c->req < 0) {
                /* An idle connection closed by hookd (a first request owed within its header timeout, which
                 * the connections at the bottom of the idle stack never send at a low rate): a keep-alive
                 * client opens another; it is still on the idle stack. */
                if (conn_reopen(ep, c, l->public_port, evs[k].data.u64) != 0) {
                    fprintf(stderr, "loadgen: cannot reconnect to the public listener\n");
                    goto out;
                }
                continue;
            }
            int status = 0, r = conn_read(c, &status);
            if (r < 0) {
                fprintf(stderr, "loadgen: connection closed by hookd\n");
                goto out;
            }
            if (r == 0)
                continue;
            int64_t at = mono_ns();
            if (status == 200)
                f->acked++;
            else
                f->refused++;
            if (c->req >= l->warmup_events)
                s.lat[s.n_lat++] = at - s.sched[c->req];
            s.done++;
            c->req = -1;
            idle[idle_top++] = (long)evs[k].data.u64;
        }
    }
    f->seconds = (double)(mono_ns() - (t_first ? t_first : t0)) / 1e9;
    f->accepts_per_s = (double)(l->events - l->warmup_events) / f->seconds;
    qsort(s.lat, (size_t)s.n_lat, sizeof *s.lat, cmp_i64);
    if (s.n_lat > 0) {
        f->p50_ms = pct(s.lat, s.n_lat, 0.50);
        f->p90_ms = pct(s.lat, s.n_lat, 0.90);
        f->p99_ms = pct(s.lat, s.n_lat, 0.99);
        f->max_ms = (double)s.lat[s.n_lat - 1] / 1e6;
    }
    result = 0;
out:
    for (long i = 0; conns && i < l->connections; i++)
        if (conns[i].fd > 0)
            close(conns[i].fd);
    for (long i = 0; s.reqs && i < l->events; i++)
        free(s.reqs[i]);
    free(s.reqs);
    free(s.lens);
    free(s.sched);
    free(s.lat);
    free(conns);
    free(idle);
    if (ep >= 0)
        close(ep);
    return result;
}
