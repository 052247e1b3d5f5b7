/*
 * Internals shared by the HTTP server's files: the server and its event
 * loops (http_loop.c), connections and requests (http_conn.c), the public
 * accessors and reply helpers (http.c).
 */
#ifndef HOOKD_NET_HTTP_INTERNAL_H
#define HOOKD_NET_HTTP_INTERNAL_H
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include "net/http.h"
#include "net/http_parse.h"
#include "net/router.h"

#define HTTP_TOKEN_MAX 256
#define HTTP_IP_BUCKETS 1024

struct http_server;
struct http_pool;

/* One event-loop thread and the connections it owns. */
struct http_loop {
    struct http_server *server;
    pthread_t thread;
    bool started;
    int epfd;
    int wakefd;                 /* eventfd: requests queued for this loop, or stop */
    struct http_conn *conns;    /* every open connection of the loop */
    struct http_conn *closed;   /* closed this iteration; freed once no event of the batch can name them */
    pthread_mutex_t mu;         /* guards queue and stop */
    struct http_request *queue; /* resumed requests, or whose handler returned on a worker */
    bool stop;
    bool accept_paused;         /* out of descriptors: the listen socket is left alone a moment */
    int64_t accept_resume_at;
    time_t date_at;             /* the second date holds (answers' Date header, formatted once a second) */
    char date[32];
};

/* Open connections per client address, for max_connections_per_ip. */
struct http_ip_count {
    struct http_ip_count *next;
    unsigned char addr[16];
    unsigned count;
};

struct http_server {
    const struct http_route *routes;
    size_t n_routes;
    void *ctx;
    size_t max_body;
    char admin_token[HTTP_TOKEN_MAX];
    http_token_check_fn token_check;
    int port;
    int listen_fd;
    int64_t header_timeout_ms;
    int64_t idle_timeout_ms;
    unsigned max_connections;
    unsigned max_per_ip;
    size_t buf_cap; /* per-connection read buffer */

    struct http_loop *loops;
    unsigned n_loops;
    struct http_pool *pool; /* threads = 0: handlers run on worker threads; else NULL */

    pthread_mutex_t mu;  /* guards the counts below and the address table */
    pthread_cond_t cond; /* the counts changed */
    size_t n_suspended;  /* between http_suspend and the loop taking the resumed answer */
    size_t n_unsent;     /* suspended requests whose answer is not yet written */
    struct http_ip_count *ips[HTTP_IP_BUCKETS];

    atomic_uint_fast64_t st_connections, st_closed, st_bytes_read, st_body_bytes, st_header_timeouts;
    atomic_uint open; /* for max_connections */
};

enum conn_state {
    CONN_HEAD,    /* reading a request header (or idle between requests) */
    CONN_BODY,    /* reading the body */
    CONN_HANDLER, /* the handler runs, or the request waits suspended */
    CONN_WRITE,   /* writing the response */
};

struct http_conn {
    struct http_loop *loop;
    struct http_conn *prev, *next;
    int fd;
    enum conn_state state;
    uint32_t events;  /* the epoll interest registered now */
    bool gone;        /* the peer hung up while the handler ran: close once it is done */
    bool closing;     /* closed: on the loop's closed list until freed */
    bool in_process;  /* conn_process is running: a nested call leaves the work to it */
    char *buf;        /* allocated while a request is buffered: HTTP_BUF_FIRST bytes, or server->buf_cap */
    size_t buf_size;  /* bytes allocated; grows to buf_cap (and moves) only before a head's pointers are taken */
    size_t len;       /* bytes in buf */
    size_t pos;       /* CONN_BODY: bytes of buf consumed (the head stays before them) */
    struct http_request *req;
    int64_t header_deadline; /* CONN_HEAD: the header must be complete by then; 0 before its first byte */
    int64_t last_io;
    uint64_t bytes_read;
    char *out;        /* the response head */
    size_t out_len;
    char *out_body;   /* and its body (none for HEAD) */
    size_t out_body_len;
    size_t out_off;   /* bytes of both written */
    bool close_after;
    struct sockaddr_storage peer;
    socklen_t peer_len;
};

enum {
    REQ_EV_RESUMED = 1,  /* http_resume gave the answer */
    REQ_EV_RETURNED = 2, /* the handler returned on a worker thread */
};

struct http_request {
    struct http_server *server;
    struct http_conn *conn;
    struct http_parser parser;
    const char *method, *path; /* in conn->buf */
    const struct http_route *route;
    size_t max_body;
    char *body; /* NUL-terminated; NULL until the first byte */
    size_t body_len, body_cap;
    bool discarding;  /* a chunked body passed the cap: the rest is dropped, then 413 */
    size_t discarded;
    http_too_large_fn too_large; /* set by the prepare hook: told before the 413 */
    char *query_buf;  /* decoded query strings, and the pairs pointing into them */
    struct query_pair {
        const char *name, *value;
    } *query;
    size_t n_query;
    struct route_params params;
    struct http_caller caller;
    char peer[INET6_ADDRSTRLEN + 16];

    /* The handler and its answer. */
    bool suspended, was_suspended, handler_returned, resumed;
    struct http_response res;
    /* The loop's queue (under loop->mu). */
    struct http_request *queue_next;
    bool queued;
    int events;
    /* The worker pool's queue. */
    struct http_request *job_next;
};

int64_t http_mono_ms(void);
void http_response_clear(struct http_response *res);

/* http_conn.c: the connection state machine, run by its loop's thread. */
struct http_conn *http_conn_open(struct http_loop *loop, int fd, const struct sockaddr_storage *peer,
                                 socklen_t peer_len);
void http_conn_event(struct http_conn *c, uint32_t events);
void http_conn_queued(struct http_request *r, int events);
void http_conn_sweep(struct http_conn *c, int64_t now);
/* Closes the socket and frees the request at once; c itself waits on loop->closed. */
void http_conn_close(struct http_conn *c);
void http_conn_free_closed(struct http_loop *loop);
/* A connection over a limit: a best-effort JSON 503 (the caller closes fd). */
void http_conn_refuse_fd(int fd, const char *message);
/* Runs the route's handler (on a loop or a worker thread) into r->res. */
void http_request_run(struct http_request *r);

/* http_loop.c */
void http_loop_post(struct http_request *r, int events);
void http_pool_submit(struct http_pool *pool, struct http_request *r);
void http_ip_release(struct http_server *s, const struct sockaddr_storage *peer);
#endif
