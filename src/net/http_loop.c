/*
 * The HTTP server's event loops: binds the listen socket, runs one epoll loop
 * per thread over it (EPOLLEXCLUSIVE), admits connections under the total and
 * per-address caps, sweeps their deadlines, and takes requests answered on
 * other threads through an eventfd. With threads = 0 there is one loop and
 * the handlers run on a worker pool that grows on demand, so one that sleeps
 * holds up no other connection.
 */
#include "net/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include "hookd.h"
#include "log.h"
#include "net/http_internal.h"

#define HTTP_DEFAULT_MAX_BODY (1024 * 1024)
#define HTTP_DEFAULT_IDLE_TIMEOUT_S 60
#define HTTP_DEFAULT_HEADER_TIMEOUT_MS 10000
#define HTTP_DEFAULT_MAX_CONNECTIONS 10240
#define HTTP_DEFAULT_PER_IP 1024
#define HTTP_DEFAULT_CONNECTION_MEMORY (128 * 1024)
#define HTTP_FD_RESERVE 64 /* descriptors kept for the rest of the process */
#define HTTP_LISTEN_BACKLOG 4096
#define HTTP_ACCEPT_BATCH 64
#define HTTP_ACCEPT_PAUSE_MS 100 /* out of descriptors: how long the listen socket is left alone */
#define HTTP_STOP_SEND_MS 2000   /* at stop, how long resumed answers may take to go out */
#define HTTP_POOL_MAX 128        /* threads = 0: handler threads at most */
#define HTTP_EVENTS 256

/* ---- the worker pool (threads = 0) ---------------------------------------------------- */

struct http_pool {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    struct http_request *head, *tail; /* jobs, in order */
    size_t pending, waiting;
    pthread_t threads[HTTP_POOL_MAX];
    unsigned n_threads;
    bool stop;
};

static void *pool_main(void *arg)
{
    struct http_pool *pool = arg;

    pthread_mutex_lock(&pool->mu);
    for (;;) {
        while (!pool->head && !pool->stop) {
            pool->waiting++;
            pthread_cond_wait(&pool->cond, &pool->mu);
            pool->waiting--;
        }
        struct http_request *r = pool->head;
        if (!r)
            break; /* stopping, and every job has run */
        pool->head = r->job_next;
        if (!pool->head)
            pool->tail = NULL;
        pool->pending--;
        pthread_mutex_unlock(&pool->mu);
        http_request_run(r);
        http_loop_post(r, REQ_EV_RETURNED);
        pthread_mutex_lock(&pool->mu);
    }
    pthread_mutex_unlock(&pool->mu);
    return NULL;
}

void http_pool_submit(struct http_pool *pool, struct http_request *r)
{
    pthread_mutex_lock(&pool->mu);
    r->job_next = NULL;
    if (pool->tail)
        pool->tail->job_next = r;
    else
        pool->head = r;
    pool->tail = r;
    pool->pending++;
    /* A job nobody is free to take gets a thread of its own, up to the cap. */
    if (pool->pending > pool->waiting && pool->n_threads < HTTP_POOL_MAX &&
        pthread_create(&pool->threads[pool->n_threads], NULL, pool_main, pool) == 0)
        pool->n_threads++;
    if (pool->n_threads == 0)
        log_error("http", "no handler thread could be started; the request waits");
    pthread_cond_signal(&pool->cond);
    pthread_mutex_unlock(&pool->mu);
}

/* Runs the jobs still queued, then joins the threads. */
static void pool_stop(struct http_pool *pool)
{
    pthread_mutex_lock(&pool->mu);
    pool->stop = true;
    pthread_cond_broadcast(&pool->cond);
    pthread_mutex_unlock(&pool->mu);
    for (unsigned i = 0; i < pool->n_threads; i++)
        pthread_join(pool->threads[i], NULL);
    pthread_cond_destroy(&pool->cond);
    pthread_mutex_destroy(&pool->mu);
    free(pool);
}

/* ---- connections per address ------------------------------------------------------------ */

/* The address as 16 bytes (IPv4 as v4-mapped IPv6, so dual-stack peers count once). */
static void ip_key(const struct sockaddr_storage *ss, unsigned char key[16])
{
    memset(key, 0, 16);
    if (ss->ss_family == AF_INET6) {
        memcpy(key, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
    } else if (ss->ss_family == AF_INET) {
        key[10] = key[11] = 0xff;
        memcpy(key + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
    }
}

static size_t ip_bucket(const unsigned char key[16])
{
    uint32_t h = 2166136261u;
    for (int i = 0; i < 16; i++)
        h = (h ^ key[i]) * 16777619u;
    return h % HTTP_IP_BUCKETS;
}

/* Counts a connection from peer; false when that address is at its cap. */
static bool ip_acquire(struct http_server *s, const struct sockaddr_storage *peer)
{
    unsigned char key[16];
    bool ok = true;

    ip_key(peer, key);
    size_t b = ip_bucket(key);
    pthread_mutex_lock(&s->mu);
    struct http_ip_count *e = s->ips[b];
    while (e && memcmp(e->addr, key, 16) != 0)
        e = e->next;
    if (!e && (e = calloc(1, sizeof *e)) != NULL) {
        memcpy(e->addr, key, 16);
        e->next = s->ips[b];
        s->ips[b] = e;
    }
    if (!e || e->count >= s->max_per_ip)
        ok = false;
    else
        e->count++;
    pthread_mutex_unlock(&s->mu);
    return ok;
}

void http_ip_release(struct http_server *s, const struct sockaddr_storage *peer)
{
    unsigned char key[16];

    ip_key(peer, key);
    size_t b = ip_bucket(key);
    pthread_mutex_lock(&s->mu);
    for (struct http_ip_count **pe = &s->ips[b]; *pe; pe = &(*pe)->next) {
        struct http_ip_count *e = *pe;
        if (memcmp(e->addr, key, 16) != 0)
            continue;
        if (--e->count == 0) {
            *pe = e->next;
            free(e);
        }
        break;
    }
    pthread_mutex_unlock(&s->mu);
}

/* ---- the loops ------------------------------------------------------------------------- */

/*
 * Queues r for its loop. Only a post into an empty queue wakes the loop: one
 * into a queue that holds others finds the loop already woken by the first,
 * and take_queue takes the whole queue after reading the eventfd, so nothing
 * queued is left behind (a group commit resumes its requests with one wake-up,
 * not one system call each).
 */
void http_loop_post(struct http_request *r, int events)
{
    struct http_loop *loop = r->conn->loop;
    uint64_t one = 1;
    bool wake;

    pthread_mutex_lock(&loop->mu);
    r->events |= events;
    wake = loop->queue == NULL;
    if (!r->queued) {
        r->queued = true;
        r->queue_next = loop->queue;
        loop->queue = r;
    }
    pthread_mutex_unlock(&loop->mu);
    if (wake)
        (void)!write(loop->wakefd, &one, sizeof one);
}

static void accept_some(struct http_loop *loop)
{
    struct http_server *s = loop->server;

    for (int i = 0; i < HTTP_ACCEPT_BATCH; i++) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        int fd = accept4(s->listen_fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* The backlog waits; polling a listen socket we cannot accept from would spin. */
                log_warn("http", "cannot accept: %s; pausing %d ms", strerror(errno), HTTP_ACCEPT_PAUSE_MS);
                epoll_ctl(loop->epfd, EPOLL_CTL_DEL, s->listen_fd, NULL);
                loop->accept_paused = true;
                loop->accept_resume_at = http_mono_ms() + HTTP_ACCEPT_PAUSE_MS;
            }
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return;
        }
        if (atomic_fetch_add(&s->open, 1) >= s->max_connections) {
            atomic_fetch_sub(&s->open, 1);
            http_conn_refuse_fd(fd, "too many connections");
            close(fd);
            continue;
        }
        if (!ip_acquire(s, &ss)) {
            atomic_fetch_sub(&s->open, 1);
            http_conn_refuse_fd(fd, "too many connections from this address");
            close(fd);
            continue;
        }
        int on = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
        if (!http_conn_open(loop, fd, &ss, len)) {
            http_ip_release(s, &ss);
            atomic_fetch_sub(&s->open, 1);
            close(fd);
            continue;
        }
        atomic_fetch_add(&s->st_connections, 1);
    }
}

/* Takes the requests other threads queued and lets their connections go on. False when stopping. */
static bool take_queue(struct http_loop *loop)
{
    uint64_t n;

    (void)!read(loop->wakefd, &n, sizeof n);
    pthread_mutex_lock(&loop->mu);
    struct http_request *q = loop->queue;
    loop->queue = NULL;
    bool stop = loop->stop;
    for (struct http_request *r = q; r; r = r->queue_next)
        r->queued = false;
    pthread_mutex_unlock(&loop->mu);
    while (q) {
        struct http_request *r = q;
        q = r->queue_next;
        pthread_mutex_lock(&loop->mu);
        int events = r->events;
        r->events = 0;
        pthread_mutex_unlock(&loop->mu);
        http_conn_queued(r, events);
    }
    return !stop;
}

static void *loop_main(void *arg)
{
    struct http_loop *loop = arg;
    struct http_server *s = loop->server;
    struct epoll_event evs[HTTP_EVENTS];
    int64_t tick = s->header_timeout_ms / 10;

    if (tick < 10)
        tick = 10;
    if (tick > 250)
        tick = 250;
    int64_t next_sweep = http_mono_ms() + tick;
    for (bool running = true; running;) {
        int64_t wait = next_sweep - http_mono_ms();
        int n = epoll_wait(loop->epfd, evs, HTTP_EVENTS, wait > 0 ? (int)wait : 0);
        bool queued = false;
        for (int i = 0; i < n; i++) {
            if (evs[i].data.ptr == NULL)
                accept_some(loop);
            else if (evs[i].data.ptr == loop)
                queued = true;
            else
                http_conn_event(evs[i].data.ptr, evs[i].events);
        }
        /* After the batch: answering a queued request may close its connection,
         * which a later event of the same batch could still name. */
        if (queued)
            running = take_queue(loop);
        int64_t now = http_mono_ms();
        if (now >= next_sweep) {
            for (struct http_conn *c = loop->conns, *next; c; c = next) {
                next = c->next;
                http_conn_sweep(c, now);
            }
            if (loop->accept_paused && now >= loop->accept_resume_at) {
                struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = NULL};
                if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, s->listen_fd, &ev) == 0)
                    loop->accept_paused = false;
                else
                    loop->accept_resume_at = now + HTTP_ACCEPT_PAUSE_MS;
            }
            next_sweep = now + tick;
        }
        http_conn_free_closed(loop);
    }
    while (loop->conns)
        http_conn_close(loop->conns);
    http_conn_free_closed(loop);
    return NULL;
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

/* A non-blocking listening socket on ss; IPv6 "::" is dual-stack. */
static int listen_socket(const struct sockaddr_storage *ss, socklen_t len, int *port)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int on = 1;

    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (ss->ss_family == AF_INET6) {
        int v6only = !IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)ss)->sin6_addr);
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof v6only);
    }
    struct sockaddr_storage bound;
    socklen_t blen = sizeof bound;
    if (bind(fd, (const struct sockaddr *)ss, len) != 0 || listen(fd, HTTP_LISTEN_BACKLOG) != 0 ||
        getsockname(fd, (struct sockaddr *)&bound, &blen) != 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                              : ((struct sockaddr_in *)&bound)->sin_port);
    return fd;
}

static int loop_init(struct http_server *s, struct http_loop *loop)
{
    struct epoll_event lev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = NULL};
    struct epoll_event wev = {.events = EPOLLIN, .data.ptr = loop};

    loop->server = s;
    loop->epfd = epoll_create1(EPOLL_CLOEXEC);
    loop->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&loop->mu, NULL);
    if (loop->epfd < 0 || loop->wakefd < 0 || epoll_ctl(loop->epfd, EPOLL_CTL_ADD, s->listen_fd, &lev) != 0 ||
        epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->wakefd, &wev) != 0)
        return HOOKD_EIO;
    if (pthread_create(&loop->thread, NULL, loop_main, loop) != 0)
        return HOOKD_ENOMEM;
    loop->started = true;
    return 0;
}

/* Stops the loops (each closes its connections), then frees everything. */
static void server_free(struct http_server *s)
{
    for (unsigned i = 0; s->loops && i < s->n_loops; i++) {
        struct http_loop *loop = &s->loops[i];
        if (!loop->started)
            continue;
        pthread_mutex_lock(&loop->mu);
        loop->stop = true;
        pthread_mutex_unlock(&loop->mu);
        uint64_t one = 1;
        (void)!write(loop->wakefd, &one, sizeof one);
        pthread_join(loop->thread, NULL);
    }
    for (unsigned i = 0; s->loops && i < s->n_loops; i++) {
        struct http_loop *loop = &s->loops[i];
        if (loop->epfd >= 0)
            close(loop->epfd);
        if (loop->wakefd >= 0)
            close(loop->wakefd);
        pthread_mutex_destroy(&loop->mu);
    }
    free(s->loops);
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    for (size_t b = 0; b < HTTP_IP_BUCKETS; b++)
        while (s->ips[b]) {
            struct http_ip_count *e = s->ips[b];
            s->ips[b] = e->next;
            free(e);
        }
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->mu);
    explicit_bzero(s->admin_token, sizeof s->admin_token);
    free(s);
}

int http_server_start(const struct http_server_options *opt, struct http_server **out)
{
    struct sockaddr_storage ss;
    socklen_t ss_len;
    struct http_server *s = NULL;
    int rc = HOOKD_EINVAL;

    *out = NULL;
    if (!opt || !opt->routes || parse_listen(opt->listen, &ss, &ss_len) != 0) {
        log_error("http", "bad listen address '%s'", opt && opt->listen ? opt->listen : "");
        return HOOKD_EINVAL;
    }
    if (opt->admin_token && strlen(opt->admin_token) >= HTTP_TOKEN_MAX) {
        log_error("http", "admin token too long");
        return HOOKD_EINVAL;
    }
    s = calloc(1, sizeof *s);
    if (!s)
        return HOOKD_ENOMEM;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cond, NULL);
    s->routes = opt->routes;
    s->n_routes = opt->n_routes;
    s->ctx = opt->ctx;
    s->max_body = opt->max_body ? opt->max_body : HTTP_DEFAULT_MAX_BODY;
    s->header_timeout_ms = opt->header_timeout_ms > 0 ? opt->header_timeout_ms : HTTP_DEFAULT_HEADER_TIMEOUT_MS;
    s->idle_timeout_ms = 1000 * (int64_t)(opt->idle_timeout_s ? opt->idle_timeout_s : HTTP_DEFAULT_IDLE_TIMEOUT_S);
    s->max_connections = connections_allowed(opt->max_connections ? opt->max_connections
                                                                  : HTTP_DEFAULT_MAX_CONNECTIONS);
    s->max_per_ip = opt->max_connections_per_ip ? opt->max_connections_per_ip : HTTP_DEFAULT_PER_IP;
    /* The read buffer holds a whole header, a partial framing line and room to read into. */
    size_t memory = opt->connection_memory ? opt->connection_memory : HTTP_DEFAULT_CONNECTION_MEMORY;
    s->buf_cap = memory > 2 * HTTP_PARSE_HEAD_MAX + 4096 ? memory : 2 * HTTP_PARSE_HEAD_MAX + 4096;
    if (opt->admin_token)
        snprintf(s->admin_token, sizeof s->admin_token, "%s", opt->admin_token);
    s->token_check = opt->token_check;
    s->n_loops = opt->threads > 0 ? opt->threads : 1;
    s->listen_fd = listen_socket(&ss, ss_len, &s->port);
    if (s->listen_fd < 0) {
        log_error("http", "cannot listen on %s: %s", opt->listen, strerror(errno));
        rc = HOOKD_EIO;
        goto fail;
    }
    if (opt->threads == 0) {
        s->pool = calloc(1, sizeof *s->pool);
        if (!s->pool) {
            rc = HOOKD_ENOMEM;
            goto fail;
        }
        pthread_mutex_init(&s->pool->mu, NULL);
        pthread_cond_init(&s->pool->cond, NULL);
    }
    s->loops = calloc(s->n_loops, sizeof *s->loops);
    if (!s->loops) {
        rc = HOOKD_ENOMEM;
        goto fail;
    }
    for (unsigned i = 0; i < s->n_loops; i++)
        s->loops[i].epfd = s->loops[i].wakefd = -1;
    for (unsigned i = 0; i < s->n_loops; i++)
        if ((rc = loop_init(s, &s->loops[i])) != 0)
            goto fail;
    *out = s;
    return 0;
fail:
    if (s->pool)
        pool_stop(s->pool);
    server_free(s);
    return rc;
}

int http_server_port(const struct http_server *s) { return s ? s->port : 0; }

void http_server_stop(struct http_server *s)
{
    if (!s)
        return;
    /* Each suspended request is owed a completion (the writer calls back for every op it
     * took): wait for them while the loops still run. */
    pthread_mutex_lock(&s->mu);
    int64_t since = http_mono_ms();
    while (s->n_suspended > 0) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        pthread_cond_timedwait(&s->cond, &s->mu, &until);
        if (s->n_suspended > 0 && http_mono_ms() - since >= 5000) {
            log_warn("http", "stopping: still waiting for %zu suspended requests", s->n_suspended);
            since = http_mono_ms();
        }
    }
    /* Then a moment for their answers to go out (a client that reads nothing does not hold the stop). */
    int64_t until = http_mono_ms() + HTTP_STOP_SEND_MS;
    while (s->n_unsent > 0 && http_mono_ms() < until) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 10 * 1000000L;
        t.tv_sec += t.tv_nsec / 1000000000L;
        t.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&s->cond, &s->mu, &t);
    }
    pthread_mutex_unlock(&s->mu);
    /* Handlers still running finish (their answers go out), then the loops stop. */
    if (s->pool)
        pool_stop(s->pool);
    s->pool = NULL;
    server_free(s);
}
