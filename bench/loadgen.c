/*
 * Delivery benchmark: runs `hookd serve` (one node, or several on PostgreSQL) on a fresh SQLite or
 * PostgreSQL store, publishes into its outbox through the public C API (hookd_publish or
 * hookd_publish_pg), and times every event from its commit to its arrival at an in-process sink.
 * Scenarios: throughput, latency (paced), memory (backlog pending at start).
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hookd.h"
#include "loadgen_pg.h"

#define NS_PER_MS INT64_C(1000000)
#define NS_PER_S INT64_C(1000000000)
#define MAX_EXTRA_ENV 32
#define N_OWN_ENV 6            /* variables loadgen itself sets for hookd serve */
#define PAYLOAD_MAX 8192       /* --payload-bytes */
#define SINK_MAX_FD 8192       /* connections on higher descriptors are refused */
#define SINK_IN_CAP 32768      /* one request (headers + body) at most */
#define SINK_OUT_CAP 8192      /* queued response bytes per connection */
#define HEALTH_WAIT_MS 20000
#define STOP_WAIT_MS 10000
#define RSS_SAMPLE_MS 50
#define DIR_MAX 2000           /* --dir length, so the scratch paths fit PATH_MAX */
#define MAX_NODES 8            /* --nodes */
#define STORE_URL_MAX (PG_DSN_MAX + 64)

extern char **environ;

enum scenario { SC_THROUGHPUT, SC_LATENCY, SC_MEMORY, SC_SINK_ONLY, SC_COUNT };
static const char *const scenario_names[SC_COUNT] = {"throughput", "latency", "memory", "sink-only"};

enum store_kind { ST_SQLITE, ST_PG, ST_COUNT };
static const char *const store_names[ST_COUNT] = {"sqlite", "pg"};

/* ---------------------------------------------------------------- options */

struct opts {
    int scenario; /* -1 until a flag selects one */
    int store;    /* enum store_kind */
    const char *hookd, *dir, *pg_dsn, *pg_script;
    const char *env[MAX_EXTRA_ENV];
    size_t n_env;
    bool keep;
    /* -1 until given, then the scenario's default */
    long events, endpoints, batch, rate, seconds, pending, max_in_flight, payload_bytes, timeout_s, sink_only_s, nodes;
};

enum opt_kind { OPT_LONG, OPT_STR, OPT_FLAG, OPT_ENV, OPT_SCENARIO, OPT_STORE };

struct opt_def {
    const char *name;
    enum opt_kind kind;
    size_t off;
    long min, max;
    int implies;            /* scenario selected by giving this flag, or -1 */
    long defaults[SC_COUNT]; /* per scenario; -1: unused there */
};

#define NUM(name, field, lo, hi, implies, ...) \
    {name, OPT_LONG, offsetof(struct opts, field), lo, hi, implies, {__VA_ARGS__}}
static const struct opt_def opt_defs[] = {
    /*                                                                throughput latency memory sink */
    NUM("events", events, 1, 10000000, SC_THROUGHPUT,                 20000, -1, -1, -1),
    NUM("endpoints", endpoints, 1, 64, -1,                            4, 1, 1, 1),
    NUM("batch", batch, 1, 100000, -1,                                500, 1, 1000, -1),
    NUM("rate", rate, 1, 100000, SC_LATENCY,                          -1, 1000, -1, -1),
    NUM("seconds", seconds, 1, 3600, SC_LATENCY,                      -1, 10, -1, -1),
    NUM("pending", pending, 1, 10000000, SC_MEMORY,                   -1, -1, 100000, -1),
    NUM("max-in-flight", max_in_flight, 1, 100000, -1,                64, 64, 64, -1),
    NUM("payload-bytes", payload_bytes, 0, PAYLOAD_MAX, -1,           100, 100, 100, -1),
    NUM("timeout", timeout_s, 1, 86400, -1,                           120, 60, 300, -1),
    NUM("sink-only", sink_only_s, 1, 86400, SC_SINK_ONLY,             -1, -1, -1, -1),
    NUM("nodes", nodes, 1, MAX_NODES, -1,                             1, 1, 1, -1),
    {"store", OPT_STORE, offsetof(struct opts, store), 0, 0, -1, {0}},
    {"pg-dsn", OPT_STR, offsetof(struct opts, pg_dsn), 0, 0, -1, {0}},
    {"pg-script", OPT_STR, offsetof(struct opts, pg_script), 0, 0, -1, {0}},
    {"hookd", OPT_STR, offsetof(struct opts, hookd), 0, 0, -1, {0}},
    {"dir", OPT_STR, offsetof(struct opts, dir), 0, 0, -1, {0}},
    {"keep", OPT_FLAG, offsetof(struct opts, keep), 0, 0, -1, {0}},
    {"env", OPT_ENV, 0, 0, 0, -1, {0}},
    {"scenario", OPT_SCENARIO, 0, 0, 0, -1, {0}},
};
#define N_OPT_DEFS (sizeof opt_defs / sizeof opt_defs[0])

static const char usage_text[] =
    "usage: loadgen [--scenario throughput|latency|memory] [options]\n"
    "       loadgen --sink-only SECONDS\n"
    "  throughput: --events N (20000) --endpoints K (4) --batch B (500)\n"
    "  latency:    --rate R (1000) --seconds S (10); one event per transaction, K=1\n"
    "  memory:     --pending N (100000) --batch B (1000); committed while hookd is stopped\n"
    "  common:     --hookd PATH (build/hookd) --dir PARENT ($TMPDIR or /tmp) --keep\n"
    "              --max-in-flight M (64) --payload-bytes P (100) --timeout SECONDS\n"
    "              --env KEY=VALUE (repeatable; passed to hookd serve)\n"
    "  store:      --store sqlite|pg (sqlite); pg starts a throwaway cluster with --pg-script PATH\n"
    "              (scripts/pg.sh) in the scratch dir, or uses --pg-dsn DSN (implies pg); either way\n"
    "              in a fresh database. --nodes N (1): hookd processes on that database (pg only)\n";

static int parse_long(const char *s, long min, long max, long *out)
{
    char *end = NULL;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* One option and its value; returns 0 or -1 after saying what is wrong. */
static int apply_opt(struct opts *o, const struct opt_def *d, const char *val)
{
    void *field = (char *)o + d->off;

    switch (d->kind) {
    case OPT_LONG:
        if (parse_long(val, d->min, d->max, field) == 0)
            return 0;
        fprintf(stderr, "loadgen: --%s: expected an integer in [%ld, %ld]\n", d->name, d->min, d->max);
        return -1;
    case OPT_STR:
        *(const char **)field = val;
        return 0;
    case OPT_FLAG:
        *(bool *)field = true;
        return 0;
    case OPT_ENV:
        if (strchr(val, '=') == NULL || o->n_env == MAX_EXTRA_ENV) {
            fprintf(stderr, "loadgen: --env expects KEY=VALUE (at most %d)\n", MAX_EXTRA_ENV);
            return -1;
        }
        o->env[o->n_env++] = val;
        return 0;
    case OPT_SCENARIO:
        for (int s = SC_THROUGHPUT; s < SC_SINK_ONLY; s++)
            if (strcmp(val, scenario_names[s]) == 0) {
                o->scenario = s;
                return 0;
            }
        fprintf(stderr, "loadgen: unknown scenario '%s'\n", val);
        return -1;
    case OPT_STORE:
        for (int s = 0; s < ST_COUNT; s++)
            if (strcmp(val, store_names[s]) == 0 || (s == ST_PG && strcmp(val, "postgres") == 0)) {
                *(int *)field = s;
                return 0;
            }
        fprintf(stderr, "loadgen: --store expects sqlite or pg\n");
        return -1;
    }
    return -1;
}

/* Returns 0, or 2 after printing the usage. */
static int parse_opts(int argc, char **argv, struct opts *o)
{
    memset(o, 0, sizeof *o);
    o->scenario = -1;
    o->hookd = "build/hookd";
    o->pg_script = "scripts/pg.sh";
    o->dir = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
    for (size_t j = 0; j < N_OPT_DEFS; j++)
        if (opt_defs[j].kind == OPT_LONG)
            *(long *)((char *)o + opt_defs[j].off) = -1;
    for (int i = 1; i < argc; i++) {
        const struct opt_def *d = NULL;
        if (strcmp(argv[i], "--help") == 0) {
            printf("%s", usage_text);
            exit(0);
        }
        for (size_t j = 0; j < N_OPT_DEFS && strncmp(argv[i], "--", 2) == 0; j++)
            if (strcmp(argv[i] + 2, opt_defs[j].name) == 0)
                d = &opt_defs[j];
        if (d == NULL || (d->kind != OPT_FLAG && i + 1 == argc)) {
            fprintf(stderr, "loadgen: bad option '%s'\n%s", argv[i], usage_text);
            return 2;
        }
        if (apply_opt(o, d, d->kind == OPT_FLAG ? NULL : argv[++i]) != 0)
            return 2;
        if (d->implies >= 0 && (o->scenario < 0 || d->implies == SC_SINK_ONLY))
            o->scenario = d->implies;
    }
    if (o->scenario < 0)
        o->scenario = SC_THROUGHPUT;
    for (size_t j = 0; j < N_OPT_DEFS; j++) {
        long *v = (long *)((char *)o + opt_defs[j].off);
        if (opt_defs[j].kind == OPT_LONG && *v < 0)
            *v = opt_defs[j].defaults[o->scenario];
    }
    if (o->scenario == SC_LATENCY)
        o->batch = 1; /* one event per transaction, by definition */
    if (o->pg_dsn != NULL)
        o->store = ST_PG;
    if (o->store == ST_SQLITE && o->nodes > 1) {
        fprintf(stderr, "loadgen: --nodes > 1 needs --store pg (SQLite is single-node)\n");
        return 2;
    }
    return 0;
}

/* ---------------------------------------------------------------- clock */

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * NS_PER_MS};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ---------------------------------------------------------------- event table */

/* One event: when its transaction committed and when its first copy arrived (CLOCK_MONOTONIC ns). */
struct ev_slot {
    char id[HOOKD_ID_MAX];
    int64_t commit_ns; /* 0 until the publishing transaction committed */
    int64_t first_ns;
    uint32_t arrivals;
};

/* Open addressing, preallocated and never resized, so slot pointers stay valid. Shared by the
 * publisher (main thread) and the sink thread under mu. */
struct ev_table {
    pthread_mutex_t mu;
    struct ev_slot *slots;
    size_t cap, used, limit;
    uint32_t target;      /* arrivals that make an event complete: the endpoint count */
    atomic_long complete; /* events with arrivals == target */
    atomic_long requests; /* every request the sink answered */
    atomic_long foreign;  /* requests without a usable webhook-id, or no room left */
    atomic_llong last_arrival_ns;
};

static int table_init(struct ev_table *t, size_t events, uint32_t target)
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

static void table_free(struct ev_table *t)
{
    free(t->slots);
    pthread_mutex_destroy(&t->mu);
}

/* The slot of id, added if absent; NULL when the table is full. Caller holds mu. */
static struct ev_slot *table_slot(struct ev_table *t, const char *id, size_t len)
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

struct sink {
    int listen_fd, epoll_fd, stop_fd, port;
    pthread_t thread;
    bool running;
    struct ev_table *table;
    struct conn *conns[SINK_MAX_FD];
    atomic_long protocol_errors;
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

static int sink_start(struct sink *s, struct ev_table *t)
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

static void sink_stop(struct sink *s)
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

/* ---------------------------------------------------------------- HTTP client (admin API, health) */

struct resp_buf {
    char *p;
    size_t len, cap;
};

static size_t resp_write(char *data, size_t size, size_t nmemb, void *arg)
{
    struct resp_buf *b = arg;
    size_t n = size * nmemb, room = b->cap > b->len + 1 ? b->cap - b->len - 1 : 0, take = n < room ? n : room;

    if (b->p != NULL && take > 0) {
        memcpy(b->p + b->len, data, take);
        b->len += take;
        b->p[b->len] = '\0';
    }
    return n;
}

/* The HTTP status of one request (0 when it failed); the body, capped, in resp when given. */
static long http_status(const char *method, const char *url, const char *token, const char *body, char *resp,
                        size_t resp_cap)
{
    struct resp_buf rb = {resp, 0, resp_cap};
    struct curl_slist *hdrs = NULL;
    char auth[128];
    long code = 0;
    CURL *e = curl_easy_init();

    if (e == NULL)
        return 0;
    if (resp != NULL && resp_cap > 0)
        resp[0] = '\0';
    if (token != NULL) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
        hdrs = curl_slist_append(hdrs, auth);
        explicit_bzero(auth, sizeof auth);
    }
    if (body != NULL) {
        hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    }
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(e, CURLOPT_PROXY, ""); /* never a proxy from the environment */
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, resp_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &rb);
    if (curl_easy_perform(e) == CURLE_OK)
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(e);
    return code;
}

/* ---------------------------------------------------------------- hookd process */

/* One `hookd serve` node. */
struct hookd_proc {
    pid_t pid;
    int public_port, admin_port;
    char log[PATH_MAX];
    int64_t rss_peak_kib; /* highest VmRSS sampled since the start */
};

/* Two distinct free loopback ports (bound together, then released for hookd to take). */
static int free_ports(int *a, int *b)
{
    int fds[2] = {-1, -1}, *outs[2] = {a, b}, result = 0;

    for (int i = 0; i < 2 && result == 0; i++) {
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof sa;
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fds[i] < 0 || bind(fds[i], (struct sockaddr *)&sa, sizeof sa) != 0 ||
            getsockname(fds[i], (struct sockaddr *)&sa, &len) != 0)
            result = -1;
        *outs[i] = ntohs(sa.sin_port);
    }
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    return result;
}

/* "VmRSS" or "VmHWM" of pid in KiB, or -1. */
static int64_t proc_status_kib(pid_t pid, const char *key)
{
    char path[64], line[256];
    int64_t kib = -1;
    size_t n = strlen(key);
    FILE *f;

    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if (pid <= 0 || (f = fopen(path, "r")) == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, key, n) == 0 && line[n] == ':')
            kib = strtoll(line + n + 1, NULL, 10);
    fclose(f);
    return kib;
}

/* From /proc/<pid>/stat: the parent's pid and utime, stime, cutime, cstime (clock ticks). */
static int proc_stat_read(pid_t pid, long *ppid, long long ticks[4])
{
    char path[64], buf[1024], *close_paren;
    FILE *f;
    size_t n;

    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (pid <= 0 || (f = fopen(path, "r")) == NULL)
        return -1;
    n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    /* The command name may hold spaces: fields are counted after its closing parenthesis. */
    if ((close_paren = strrchr(buf, ')')) == NULL ||
        sscanf(close_paren + 1, " %*c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %lld %lld %lld %lld", ppid, &ticks[0],
               &ticks[1], &ticks[2], &ticks[3]) != 5)
        return -1;
    return 0;
}

/* User + system CPU seconds used so far by pid (hookd), or -1. */
static double proc_cpu_s(pid_t pid)
{
    long long t[4];
    long ppid;

    if (proc_stat_read(pid, &ppid, t) != 0)
        return -1;
    return (double)(t[0] + t[1]) / (double)sysconf(_SC_CLK_TCK);
}

/* CPU seconds of root (the postmaster), its live children and the children it reaped, or -1. */
static double tree_cpu_s(pid_t root)
{
    long long t[4], total;
    long ppid;
    DIR *d;
    struct dirent *de;

    if (root <= 0 || proc_stat_read(root, &ppid, t) != 0 || (d = opendir("/proc")) == NULL)
        return -1;
    total = t[0] + t[1] + t[2] + t[3];
    while ((de = readdir(d)) != NULL) {
        long pid = strtol(de->d_name, NULL, 10);
        if (pid > 0 && proc_stat_read((pid_t)pid, &ppid, t) == 0 && ppid == (long)root)
            total += t[0] + t[1];
    }
    closedir(d);
    return (double)total / (double)sysconf(_SC_CLK_TCK);
}

/* CPU seconds this process (publisher + sink) used so far. */
static double self_cpu_s(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static void print_log_tail(const struct hookd_proc *h)
{
    char buf[4096];
    FILE *f = fopen(h->log, "r");
    size_t n;

    if (f == NULL)
        return;
    if (fseek(f, -(long)(sizeof buf - 1), SEEK_END) != 0)
        rewind(f);
    n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    fprintf(stderr, "--- end of %s ---\n%s\n---\n", h->log, buf);
}

static void print_exit(const char *what, int status)
{
    fprintf(stderr, "loadgen: hookd %s (%s %d)\n", what, WIFEXITED(status) ? "exit status" : "signal",
            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

/* 0 while running; else says how it ended and returns -1. */
static int hookd_alive(struct hookd_proc *h)
{
    int status;

    if (h->pid <= 0)
        return -1;
    if (waitpid(h->pid, &status, WNOHANG) != h->pid)
        return 0;
    h->pid = 0;
    print_exit("exited", status);
    print_log_tail(h);
    return -1;
}

/* Starts `hookd serve` on store (a HOOKD_SERVER_STORE value), configured by the environment alone
 * (inherited HOOKD_* variables are dropped, so runs are reproducible), and waits for GET /healthz = 200. */
static int hookd_start(struct hookd_proc *h, const struct opts *o, const char *store, const char *token)
{
    size_t n_env = 0, cap = 0;
    char **envp = NULL, own[N_OWN_ENV][STORE_URL_MAX + 32], url[96];
    char *argv[] = {(char *)o->hookd, (char *)"serve", NULL};
    int64_t deadline;
    int result = -1;

    if (free_ports(&h->public_port, &h->admin_port) != 0) {
        perror("loadgen: free port");
        return -1;
    }
    h->rss_peak_kib = 0;
    snprintf(own[0], sizeof own[0], "HOOKD_SERVER_STORE=%s", store);
    snprintf(own[1], sizeof own[1], "HOOKD_SERVER_ADMIN_TOKEN=%s", token);
    snprintf(own[2], sizeof own[2], "HOOKD_SERVER_ADMIN_LISTEN=127.0.0.1:%d", h->admin_port);
    snprintf(own[3], sizeof own[3], "HOOKD_SERVER_PUBLIC_LISTEN=127.0.0.1:%d", h->public_port);
    snprintf(own[4], sizeof own[4], "HOOKD_DELIVERY_ALLOW_PRIVATE_NETWORKS=true");
    snprintf(own[5], sizeof own[5], "HOOKD_SERVER_LOG_LEVEL=warn");
    for (char **e = environ; *e != NULL; e++)
        cap++;
    if ((envp = calloc(cap + N_OWN_ENV + o->n_env + 1, sizeof *envp)) == NULL)
        return -1;
    for (char **e = environ; *e != NULL; e++)
        if (strncmp(*e, "HOOKD_", 6) != 0)
            envp[n_env++] = *e;
    for (size_t j = 0; j < N_OWN_ENV; j++) { /* an --env KEY=VALUE replaces our own KEY */
        size_t klen = (size_t)(strchr(own[j], '=') - own[j]) + 1;
        bool replaced = false;
        for (size_t i = 0; i < o->n_env; i++)
            replaced |= strncmp(o->env[i], own[j], klen) == 0;
        if (!replaced)
            envp[n_env++] = own[j];
    }
    for (size_t i = 0; i < o->n_env; i++)
        envp[n_env++] = (char *)o->env[i];

    fflush(NULL);
    if ((h->pid = fork()) == 0) { /* only async-signal-safe calls until exec */
        int fd = open(h->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
        signal(SIGPIPE, SIG_DFL);            /* an ignored signal would stay ignored across exec */
        prctl(PR_SET_PDEATHSIG, SIGTERM);    /* no orphan daemon if loadgen dies */
        if (fd >= 0 && nul >= 0 && dup2(nul, 0) >= 0 && dup2(fd, 1) >= 0 && dup2(fd, 2) >= 0)
            execve(o->hookd, argv, envp);
        _exit(127);
    }
    if (h->pid < 0) {
        perror("loadgen: fork");
        goto out;
    }
    snprintf(url, sizeof url, "http://127.0.0.1:%d/healthz", h->public_port);
    for (deadline = mono_ns() + HEALTH_WAIT_MS * NS_PER_MS; mono_ns() < deadline; sleep_ms(50)) {
        if (hookd_alive(h) != 0)
            goto out;
        if (http_status("GET", url, NULL, NULL, NULL, 0) == 200) {
            result = 0;
            goto out;
        }
    }
    fprintf(stderr, "loadgen: hookd did not answer %s within %d s\n", url, HEALTH_WAIT_MS / 1000);
    print_log_tail(h);
out:
    free(envp);
    return result;
}

/* SIGTERM, then SIGKILL after 10 s. Returns -1 when hookd had to be killed or exited with an error. */
static int hookd_stop(struct hookd_proc *h)
{
    int status = 0, result = 0;
    int64_t deadline = mono_ns() + STOP_WAIT_MS * NS_PER_MS;

    if (h->pid <= 0)
        return 0;
    kill(h->pid, SIGTERM);
    while (waitpid(h->pid, &status, WNOHANG) == 0) {
        if (mono_ns() > deadline) {
            fprintf(stderr, "loadgen: hookd ignored SIGTERM for %d s; killing it\n", STOP_WAIT_MS / 1000);
            kill(h->pid, SIGKILL);
            waitpid(h->pid, &status, 0);
            break;
        }
        sleep_ms(20);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        print_exit("stopped uncleanly", status);
        result = -1;
    }
    h->pid = 0;
    return result;
}

static int create_endpoints(const struct hookd_proc *h, const char *token, int sink_port, long k, long max_in_flight)
{
    char url[96], body[256], resp[2048];

    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/endpoints", h->admin_port);
    snprintf(body, sizeof body, "{\"url\": \"http://127.0.0.1:%d/\", \"max_in_flight\": %ld}", sink_port, max_in_flight);
    for (long i = 0; i < k; i++) {
        long code = http_status("POST", url, token, body, resp, sizeof resp);
        if (code != 201) { /* an error body holds no secret */
            fprintf(stderr, "loadgen: POST /v1/endpoints answered %ld: %s\n", code, resp);
            return -1;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- publisher */

struct publisher;

/* The application side of each store: its connection, transactions and hookd's publish call. */
struct store_def {
    const char *begin_sql; /* SQLite: take the write lock at BEGIN, as an application that writes would */
    int (*open)(struct publisher *p, const char *target);
    int (*exec)(struct publisher *p, const char *sql);
    int (*publish)(struct publisher *p, const struct hookd_event *ev, char id_out[HOOKD_ID_MAX]);
    const char *(*errmsg)(struct publisher *p);
    void (*close)(struct publisher *p);
};

struct publisher {
    const struct store_def *store;
    sqlite3 *db;
    PGconn *pg;
    struct ev_table *table;
    struct ev_slot **batch; /* slots of the open transaction's events */
    long payload_bytes, next_seq;
    int64_t first_commit_ns, last_commit_ns;
};

/* SQLite: busy_timeout 5 s, the connection's default synchronous, so the application's commits are durable. */
static int sqlite_pub_open(struct publisher *p, const char *path)
{
    if (sqlite3_open_v2(path, &p->db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        fprintf(stderr, "loadgen: open %s: %s\n", path, p->db != NULL ? sqlite3_errmsg(p->db) : "no memory");
        return -1;
    }
    sqlite3_busy_timeout(p->db, 5000);
    return 0;
}

static int sqlite_pub_exec(struct publisher *p, const char *sql)
{
    return sqlite3_exec(p->db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
}

static int sqlite_pub_publish(struct publisher *p, const struct hookd_event *ev, char id_out[HOOKD_ID_MAX])
{
    return hookd_publish(p->db, ev, id_out);
}

static const char *sqlite_pub_errmsg(struct publisher *p)
{
    return sqlite3_errmsg(p->db);
}

static void sqlite_pub_close(struct publisher *p)
{
    sqlite3_close(p->db);
}

/* PostgreSQL: the server's defaults (synchronous_commit on, fsync on), so each COMMIT is durable. */
static int pg_pub_open(struct publisher *p, const char *dsn)
{
    return (p->pg = pg_connect(dsn)) != NULL ? 0 : -1;
}

/* BEGIN, COMMIT, ROLLBACK: the command tag must echo the command (a failed transaction's COMMIT
 * "succeeds" with the tag ROLLBACK). */
static int pg_pub_exec(struct publisher *p, const char *sql)
{
    PGresult *r = PQexec(p->pg, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK && strcmp(PQcmdStatus(r), sql) == 0;

    PQclear(r);
    return ok ? 0 : -1;
}

static int pg_pub_publish(struct publisher *p, const struct hookd_event *ev, char id_out[HOOKD_ID_MAX])
{
    return hookd_publish_pg(p->pg, ev, id_out);
}

static const char *pg_pub_errmsg(struct publisher *p)
{
    static char msg[512];
    const char *m = PQerrorMessage(p->pg);

    snprintf(msg, sizeof msg, "%.*s", (int)strcspn(m, "\n"), m[0] != '\0' ? m : "transaction rolled back");
    return msg;
}

static void pg_pub_close(struct publisher *p)
{
    PQfinish(p->pg);
}

static const struct store_def store_defs[ST_COUNT] = {
    [ST_SQLITE] = {"BEGIN IMMEDIATE", sqlite_pub_open, sqlite_pub_exec, sqlite_pub_publish, sqlite_pub_errmsg,
                   sqlite_pub_close},
    [ST_PG] = {"BEGIN", pg_pub_open, pg_pub_exec, pg_pub_publish, pg_pub_errmsg, pg_pub_close},
};

/* p must be zeroed first; publisher_close is safe after any failure. target: the SQLite file or the DSN. */
static int publisher_open(struct publisher *p, const struct store_def *store, const char *target, struct ev_table *t,
                          long batch, long payload)
{
    p->table = t;
    p->payload_bytes = payload;
    p->store = store;
    if ((p->batch = calloc((size_t)batch, sizeof *p->batch)) == NULL) {
        fprintf(stderr, "loadgen: no memory for the publisher\n");
        return -1;
    }
    return store->open(p, target);
}

static void publisher_close(struct publisher *p)
{
    if (p->store != NULL)
        p->store->close(p);
    free(p->batch);
}

/* BEGIN; hookd_publish(_pg) × n; COMMIT; then stamps each event with the commit time. */
static int publish_batch(struct publisher *p, long n)
{
    static char pad[PAYLOAD_MAX + 1];
    char data[PAYLOAD_MAX + 64], id[HOOKD_ID_MAX];
    struct hookd_event ev = {.type = "bench.event", .account = "bench", .data_json = data};
    const char *failed = NULL;
    int64_t now;
    int r = 0;

    if (pad[0] == '\0')
        memset(pad, 'x', PAYLOAD_MAX);
    if (p->store->exec(p, p->store->begin_sql) != 0) {
        fprintf(stderr, "loadgen: %s: %s\n", p->store->begin_sql, p->store->errmsg(p));
        return -1;
    }
    for (long i = 0; i < n && failed == NULL; i++) {
        snprintf(data, sizeof data, "{\"seq\": %ld, \"pad\": \"%.*s\"}", p->next_seq++, (int)p->payload_bytes, pad);
        if ((r = p->store->publish(p, &ev, id)) != 0) {
            failed = "hookd_publish";
            break;
        }
        pthread_mutex_lock(&p->table->mu);
        p->batch[i] = table_slot(p->table, id, strnlen(id, HOOKD_ID_MAX - 1));
        pthread_mutex_unlock(&p->table->mu);
        if (p->batch[i] == NULL)
            failed = "event table full";
    }
    if (failed == NULL && p->store->exec(p, "COMMIT") != 0)
        failed = "COMMIT";
    if (failed != NULL) {
        fprintf(stderr, "loadgen: %s: %s\n", failed, r != 0 ? hookd_strerror(r) : p->store->errmsg(p));
        p->store->exec(p, "ROLLBACK");
        return -1;
    }
    now = mono_ns();
    pthread_mutex_lock(&p->table->mu);
    for (long i = 0; i < n; i++)
        p->batch[i]->commit_ns = now;
    pthread_mutex_unlock(&p->table->mu);
    if (p->first_commit_ns == 0)
        p->first_commit_ns = now;
    p->last_commit_ns = now;
    return 0;
}

static int publish_all(struct publisher *p, long events, long batch)
{
    for (long done = 0; done < events; done += batch)
        if (publish_batch(p, events - done < batch ? events - done : batch) != 0)
            return -1;
    return 0;
}

/* ---------------------------------------------------------------- the run and its nodes */

struct bench {
    struct opts o;
    const struct store_def *store;
    char dir[PATH_MAX];
    char db_path[PATH_MAX];        /* the SQLite file */
    char store_url[STORE_URL_MAX]; /* HOOKD_SERVER_STORE of every node */
    const char *target;            /* what the publisher opens: db_path or pg.dsn */
    char token[65];                /* the admin token, shared by the nodes */
    struct pg_env pg;
    double pg_cpu0; /* CPU seconds of our PostgreSQL cluster when the measurement started; -1: none */
    struct ev_table table;
    struct sink sink;
    struct hookd_proc nodes[MAX_NODES];
};

/* Starts every node, one after the other (the first migrates the database). */
static int nodes_start(struct bench *b)
{
    for (long i = 0; i < b->o.nodes; i++)
        if (hookd_start(&b->nodes[i], &b->o, b->store_url, b->token) != 0)
            return -1;
    return 0;
}

/* Stops every node; -1 when one had to be killed or exited with an error (its log tail is printed). */
static int nodes_stop(struct bench *b)
{
    int result = 0;

    for (long i = 0; i < b->o.nodes; i++)
        if (b->nodes[i].pid > 0 && hookd_stop(&b->nodes[i]) != 0) {
            print_log_tail(&b->nodes[i]);
            result = -1;
        }
    return result;
}

static int nodes_alive(struct bench *b)
{
    for (long i = 0; i < b->o.nodes; i++)
        if (hookd_alive(&b->nodes[i]) != 0)
            return -1;
    return 0;
}

static void nodes_sample_rss(struct bench *b)
{
    for (long i = 0; i < b->o.nodes; i++) {
        int64_t rss = proc_status_kib(b->nodes[i].pid, "VmRSS");
        if (rss > b->nodes[i].rss_peak_kib)
            b->nodes[i].rss_peak_kib = rss;
    }
}

/* The highest peak of any node: max(VmHWM now, highest sample) with hwm, else the highest sample. */
static double nodes_peak_mib(const struct bench *b, bool hwm)
{
    int64_t peak = 0;

    for (long i = 0; i < b->o.nodes; i++) {
        int64_t h = hwm ? proc_status_kib(b->nodes[i].pid, "VmHWM") : 0;
        peak = h > peak ? h : peak;
        peak = b->nodes[i].rss_peak_kib > peak ? b->nodes[i].rss_peak_kib : peak;
    }
    return (double)peak / 1024.0;
}

/* CPU seconds of all nodes; per node into list (", "-separated) when there are several. */
static double nodes_cpu_s(const struct bench *b, char *list, size_t cap)
{
    double total = 0;
    size_t len = 0;

    list[0] = '\0';
    for (long i = 0; i < b->o.nodes; i++) {
        double c = proc_cpu_s(b->nodes[i].pid);
        total += c;
        if (b->o.nodes > 1 && len < cap) {
            int w = snprintf(list + len, cap - len, "%s%.2f", i ? ", " : "", c);
            len += w > 0 ? (size_t)w : 0;
        }
    }
    return total;
}

/* CPU seconds our PostgreSQL cluster used since start_with_endpoints, or -1 (SQLite, or a given server). */
static double pg_cpu_since_start(const struct bench *b)
{
    double now = tree_cpu_s(pg_postmaster_pid(&b->pg));
    return now >= 0 && b->pg_cpu0 >= 0 ? now - b->pg_cpu0 : -1;
}

/* ---------------------------------------------------------------- checks and figures */

static long report_arrivals(struct bench *b);

/* Waits until `events` events arrived at every endpoint, sampling the nodes' RSS every 50 ms. */
static int wait_complete(struct bench *b, long events)
{
    int64_t deadline = mono_ns() + b->o.timeout_s * NS_PER_S, next_sample = 0;

    for (;; sleep_ms(5)) {
        int64_t now = mono_ns();
        if (now >= next_sample) {
            nodes_sample_rss(b);
            next_sample = now + RSS_SAMPLE_MS * NS_PER_MS;
        }
        if (atomic_load(&b->table.complete) >= events)
            return 0;
        if (now > deadline) {
            fprintf(stderr, "loadgen: timed out after %ld s: %ld of %ld events reached every endpoint (%ld requests)\n",
                    b->o.timeout_s, atomic_load(&b->table.complete), events, atomic_load(&b->table.requests));
            report_arrivals(b);
            return -1;
        }
        if (nodes_alive(b) != 0)
            return -1;
    }
}

/* Prints the arrival counts; every published event must have reached every endpoint.
 * Returns the number of events that did not (up to 5 are named). */
static long report_arrivals(struct bench *b)
{
    long missing = 0, distinct = 0, dups = 0, unknown = 0;

    pthread_mutex_lock(&b->table.mu);
    for (size_t i = 0; i < b->table.cap; i++) {
        const struct ev_slot *s = &b->table.slots[i];
        if (s->id[0] == '\0')
            continue;
        distinct += s->arrivals > 0;
        if (s->commit_ns == 0) {
            unknown += s->arrivals > 0;
        } else if (s->arrivals > b->table.target) {
            dups += s->arrivals - b->table.target;
        } else if (s->arrivals < b->table.target && missing++ < 5) {
            fprintf(stderr, "  missing: %s arrived %u of %u times\n", s->id, s->arrivals, b->table.target);
        }
    }
    pthread_mutex_unlock(&b->table.mu);
    printf("  arrivals: %ld requests, %ld distinct ids, %ld missing, %ld duplicate deliveries, %ld unknown ids, "
           "%ld without id, %ld protocol errors\n",
           atomic_load(&b->table.requests), distinct, missing, dups, unknown, atomic_load(&b->table.foreign),
           atomic_load(&b->sink.protocol_errors));
    if (missing > 0)
        fprintf(stderr, "loadgen: FAIL: %ld events did not reach every endpoint\n", missing);
    return missing;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of n > 0 sorted samples, in ms. */
static double pct_ms(const int64_t *v, size_t n, double p)
{
    size_t rank = (size_t)(p * (double)n + 0.999999);
    return (double)v[(rank == 0 ? 1 : rank > n ? n : rank) - 1] / 1e6;
}

/* ---------------------------------------------------------------- scenarios */

/* Starts the nodes, creates the endpoints through the first one, and notes the cluster's CPU time. */
static int start_with_endpoints(struct bench *b)
{
    if (nodes_start(b) != 0 ||
        create_endpoints(&b->nodes[0], b->token, b->sink.port, b->o.endpoints, b->o.max_in_flight) != 0)
        return -1;
    b->pg_cpu0 = tree_cpu_s(pg_postmaster_pid(&b->pg));
    return 0;
}

/* Commits every event as fast as possible; deliveries/s = N*K / (last arrival - first commit). */
static int run_throughput(struct bench *b)
{
    struct publisher p = {0};
    long n = b->o.events, k = b->o.endpoints;
    double cpu0 = self_cpu_s();
    char per_node[128];
    int result = -1;

    if (start_with_endpoints(b) != 0 ||
        publisher_open(&p, b->store, b->target, &b->table, b->o.batch, b->o.payload_bytes) != 0 ||
        publish_all(&p, n, b->o.batch) != 0 || wait_complete(b, n) != 0)
        goto out;
    double secs = (double)(atomic_load(&b->table.last_arrival_ns) - p.first_commit_ns) / 1e9;
    printf("throughput: %ld events x %ld endpoints = %ld deliveries in %.3f s: %.0f deliveries/s (%ld node%s)\n", n, k,
           n * k, secs, (double)(n * k) / secs, b->o.nodes, b->o.nodes > 1 ? "s" : "");
    printf("  publish: all %ld events committed %.3f s after the first commit (batch %ld)\n", n,
           (double)(p.last_commit_ns - p.first_commit_ns) / 1e9, b->o.batch);
    double hookd_cpu = nodes_cpu_s(b, per_node, sizeof per_node), own_cpu = self_cpu_s() - cpu0;
    double pg_cpu = pg_cpu_since_start(b);
    printf("  CPU: hookd %.2f s%s%s%s (%.0f deliveries per CPU-second), loadgen %.2f s; hookd peak RSS %.1f MiB\n",
           hookd_cpu, per_node[0] ? " (nodes: " : "", per_node, per_node[0] ? ")" : "", (double)(n * k) / hookd_cpu,
           own_cpu, nodes_peak_mib(b, false));
    if (pg_cpu >= 0)
        printf("  CPU: postgres %.2f s during the run; hookd + postgres %.0f deliveries per CPU-second\n", pg_cpu,
               (double)(n * k) / (hookd_cpu + pg_cpu));
    if (report_arrivals(b) != 0)
        goto out;
    printf("RESULT scenario=throughput deliveries_per_s=%.0f events=%ld endpoints=%ld seconds=%.3f hookd_cpu_s=%.2f "
           "store=%s nodes=%ld pg_cpu_s=%.2f\n",
           (double)(n * k) / secs, n, k, secs, hookd_cpu, store_names[b->o.store], b->o.nodes, pg_cpu);
    result = 0;
out:
    publisher_close(&p);
    return result;
}

/* One event per transaction on an absolute schedule; commit->arrival latency of each. */
static int run_latency(struct bench *b)
{
    struct publisher p = {0};
    int64_t period = NS_PER_S / b->o.rate, start, *lat = NULL;
    long n = b->o.rate * b->o.seconds, late = 0;
    size_t m = 0;
    int result = -1;

    if (start_with_endpoints(b) != 0 || publisher_open(&p, b->store, b->target, &b->table, 1, b->o.payload_bytes) != 0)
        goto out;
    start = mono_ns() + 10 * NS_PER_MS;
    for (long i = 0; i < n; i++) {
        int64_t due = start + i * period;
        struct timespec ts = {due / NS_PER_S, due % NS_PER_S};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
        late += mono_ns() - due > NS_PER_MS;
        if (publish_batch(&p, 1) != 0)
            goto out;
    }
    double span = (double)(p.last_commit_ns - p.first_commit_ns) / 1e9;
    double achieved = n > 1 && span > 0 ? (double)(n - 1) / span : (double)b->o.rate;
    if (wait_complete(b, n) != 0 || (lat = calloc((size_t)n, sizeof *lat)) == NULL)
        goto out;
    pthread_mutex_lock(&b->table.mu);
    for (size_t i = 0; i < b->table.cap && m < (size_t)n; i++) {
        const struct ev_slot *s = &b->table.slots[i];
        if (s->commit_ns > 0 && s->arrivals > 0) /* arrival may beat our clock read after COMMIT: 0 */
            lat[m++] = s->first_ns > s->commit_ns ? s->first_ns - s->commit_ns : 0;
    }
    pthread_mutex_unlock(&b->table.mu);
    qsort(lat, m, sizeof *lat, cmp_i64);
    printf("latency: %ld events, one per transaction, at %ld/s (achieved %.1f/s; %ld commits started >1 ms late)\n", n,
           b->o.rate, achieved, late);
    if (achieved < 0.95 * (double)b->o.rate)
        printf("  WARNING: the publisher fell behind its schedule (its transactions took longer than the period; on "
               "SQLite BEGIN IMMEDIATE waits for hookd's write lock); the figures below are at %.0f/s, not %ld/s\n",
               achieved, b->o.rate);
    printf("  commit->arrival: p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, max %.3f ms\n", pct_ms(lat, m, 0.50),
           pct_ms(lat, m, 0.90), pct_ms(lat, m, 0.99), pct_ms(lat, m, 1.0));
    if (report_arrivals(b) != 0)
        goto out;
    printf("RESULT scenario=latency p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f max_ms=%.3f rate=%ld achieved_rate=%.1f "
           "events=%ld store=%s nodes=%ld\n",
           pct_ms(lat, m, 0.50), pct_ms(lat, m, 0.90), pct_ms(lat, m, 0.99), pct_ms(lat, m, 1.0), b->o.rate, achieved, n,
           store_names[b->o.store], b->o.nodes);
    result = 0;
out:
    free(lat);
    publisher_close(&p);
    return result;
}

/* The backlog is committed while hookd is down: a first run creates the schema and the
 * endpoints, the second starts with every event pending. Peak RSS = max(VmHWM, samples). */
static int run_memory(struct bench *b)
{
    struct publisher p = {0};
    long n = b->o.pending, k = b->o.endpoints;
    char per_node[128];
    int64_t started;
    int result = -1;

    if (start_with_endpoints(b) != 0)
        goto out;
    nodes_stop(b); /* says so itself when a stop was unclean; the store stays usable */
    if (publisher_open(&p, b->store, b->target, &b->table, b->o.batch, b->o.payload_bytes) != 0 ||
        publish_all(&p, n, b->o.batch) != 0)
        goto out;
    printf("memory: %ld events committed while hookd was stopped (%.3f s)\n", n,
           (double)(p.last_commit_ns - p.first_commit_ns) / 1e9);
    started = mono_ns();
    if (nodes_start(b) != 0 || wait_complete(b, n) != 0)
        goto out;
    double secs = (double)(atomic_load(&b->table.last_arrival_ns) - started) / 1e9;
    double peak = nodes_peak_mib(b, true), sampled = nodes_peak_mib(b, false);
    printf("  drained %ld deliveries in %.3f s from start (%.0f deliveries/s, hookd CPU %.2f s)\n", n * k, secs,
           (double)(n * k) / secs, nodes_cpu_s(b, per_node, sizeof per_node));
    printf("  hookd RSS: peak %.1f MiB (highest 50 ms sample %.1f MiB%s)\n", peak, sampled,
           b->o.nodes > 1 ? "; the highest node" : "");
    if (report_arrivals(b) != 0)
        goto out;
    printf("RESULT scenario=memory peak_rss_mib=%.1f pending=%ld endpoints=%ld drain_seconds=%.3f store=%s nodes=%ld\n",
           peak, n, k, secs, store_names[b->o.store], b->o.nodes);
    result = 0;
out:
    publisher_close(&p);
    return result;
}

static int run_sink_only(struct bench *b)
{
    printf("sink listening on http://127.0.0.1:%d/ for %ld s\n", b->sink.port, b->o.sink_only_s);
    sleep_ms(b->o.sink_only_s * 1000);
    report_arrivals(b);
    return 0;
}

typedef int (*scenario_fn)(struct bench *b);
static const scenario_fn scenario_fns[SC_COUNT] = {
    [SC_THROUGHPUT] = run_throughput,
    [SC_LATENCY] = run_latency,
    [SC_MEMORY] = run_memory,
    [SC_SINK_ONLY] = run_sink_only, /* needs no hookd and no scratch directory */
};

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

/* The scratch directory, the store (a SQLite path, or a fresh PostgreSQL database), the nodes'
 * log paths and a random admin token. */
static int prepare_scratch(struct bench *b)
{
    unsigned char raw[24];

    if (access(b->o.hookd, X_OK) != 0) {
        fprintf(stderr, "loadgen: %s: not executable (build it: make build)\n", b->o.hookd);
        return -1;
    }
    if (strlen(b->o.dir) > DIR_MAX) {
        fprintf(stderr, "loadgen: --dir is longer than %d bytes\n", DIR_MAX);
        return -1;
    }
    snprintf(b->dir, sizeof b->dir, "%.2000s/hookd-bench.XXXXXX", b->o.dir);
    if (mkdtemp(b->dir) == NULL) {
        perror("loadgen: scratch dir");
        b->dir[0] = '\0';
        return -1;
    }
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
        perror("loadgen: getrandom");
        return -1;
    }
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(b->token + 2 * i, 3, "%02x", raw[i]);
    explicit_bzero(raw, sizeof raw);
    for (long i = 0; i < b->o.nodes; i++)
        snprintf(b->nodes[i].log, sizeof b->nodes[i].log, i == 0 ? "%.2100s/hookd.log" : "%.2100s/hookd-%ld.log",
                 b->dir, i + 1);
    if (b->o.store == ST_PG) {
        if (pg_env_setup(&b->pg, b->o.pg_dsn, b->dir) != 0)
            return -1;
        snprintf(b->store_url, sizeof b->store_url, "%s", b->pg.dsn);
        b->target = b->pg.dsn;
        /* the DSN is not printed: a given one may hold a password */
        printf("scenario %s: hookd %s x %ld node%s, store: PostgreSQL database %s (%s)\n", scenario_names[b->o.scenario],
               b->o.hookd, b->o.nodes, b->o.nodes > 1 ? "s" : "", b->pg.dbname,
               b->pg.cluster[0] ? "throwaway cluster" : "given server");
    } else {
        snprintf(b->db_path, sizeof b->db_path, "%.2100s/hookd.db", b->dir);
        snprintf(b->store_url, sizeof b->store_url, "sqlite:%.2100s", b->db_path);
        b->target = b->db_path;
        printf("scenario %s: hookd %s, store %s\n", scenario_names[b->o.scenario], b->o.hookd, b->db_path);
    }
    return 0;
}

/* SIGINT, SIGTERM, SIGHUP: stop the nodes and the cluster, then die of the signal. */
static struct bench *signal_bench;

static void on_signal(int sig)
{
    for (int i = 0; signal_bench != NULL && i < MAX_NODES; i++)
        if (signal_bench->nodes[i].pid > 0)
            kill(signal_bench->nodes[i].pid, SIGTERM);
    pg_emergency_stop();
    signal(sig, SIG_DFL);
    raise(sig);
}

int main(int argc, char **argv)
{
    static struct bench b; /* large (the sink's connection table): static, zeroed */
    static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa = {.sa_handler = on_signal};
    int result = 1, r = parse_opts(argc, argv, &b.o);
    long events[SC_COUNT] = {b.o.events, b.o.rate * b.o.seconds, b.o.pending, 65536};

    if (r != 0)
        return r;
    signal(SIGPIPE, SIG_IGN);
    signal_bench = &b;
    for (size_t i = 0; i < sizeof stop_signals / sizeof stop_signals[0]; i++)
        sigaction(stop_signals[i], &sa, NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);
    b.store = &store_defs[b.o.store];
    b.pg.script = b.o.pg_script;
    b.pg_cpu0 = -1;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0 ||
        table_init(&b.table, (size_t)events[b.o.scenario] + 1024, (uint32_t)b.o.endpoints) != 0)
        return 1;
    if (sink_start(&b.sink, &b.table) != 0)
        goto out_table;
    if (b.o.scenario == SC_SINK_ONLY) {
        result = scenario_fns[SC_SINK_ONLY](&b);
    } else {
        if (prepare_scratch(&b) == 0)
            result = scenario_fns[b.o.scenario](&b) == 0 ? 0 : 1;
        nodes_stop(&b);
        pg_env_teardown(&b.pg, b.o.keep || result != 0); /* kept: the cluster is stopped, its data stays */
        if (b.dir[0] != '\0' && (b.o.keep || result != 0))
            printf("kept %s (hookd*.log, %s)\n", b.dir, b.o.store == ST_PG ? "pg/ with the stopped cluster" : "hookd.db");
        else if (b.dir[0] != '\0')
            nftw(b.dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    }
    explicit_bzero(b.token, sizeof b.token);
    sink_stop(&b.sink);
out_table:
    table_free(&b.table);
    curl_global_cleanup();
    return result;
}
