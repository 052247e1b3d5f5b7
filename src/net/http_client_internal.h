/*
 * The HTTP engine's insides, shared by its two files: http_client.c (the API,
 * submit and completions, the deadline heap) and http_client_conn.c (the
 * connections: pool, connect, TLS, sending the request, reading the answer).
 */
#ifndef HOOKD_NET_HTTP_CLIENT_INTERNAL_H
#define HOOKD_NET_HTTP_CLIENT_INTERNAL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <openssl/ssl.h>

#include "core/buf.h"
#include "net/http_client.h"
#include "net/http_resolve.h"
#include "net/http_response.h"
#include "net/http_url.h"

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
    int64_t attempt_deadline;  /* while connecting: when the next address is tried instead */
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
    int *free_conns, n_free_conns; /* slots of conns without a socket, a stack */
    struct conn *lru_head, *lru_tail;
    struct conn **buckets;
    uint32_t bucket_mask;
    struct transfer **heap;   /* deadlines, soonest first */
    int heap_n;
    struct transfer *ended_head, *ended_tail;
};

/* http_client.c: a transfer's state (its deadline follows) and its end. */
void client_set_state(struct http_engine *e, struct transfer *t, enum transfer_state s);
/* Ends t: its connection goes back to the pool when keep is set; its done waits for http_engine_run. */
void client_transfer_end(struct http_engine *e, struct transfer *t, bool keep);
/* Ends t with a transport error; the reason in fmt holds no byte from the receiver. */
__attribute__((format(printf, 4, 5))) void client_transfer_fail(struct http_engine *e, struct transfer *t,
                                                               enum transport_error err, const char *fmt, ...);
/* Ends t as refused by the SSRF guard. */
void client_transfer_blocked(struct http_engine *e, struct transfer *t);

/* http_client_conn.c: connections. */
uint32_t client_key_hash(const char *s);
/* Puts c (its request answered, reusable) into the pool. */
void client_idle_link(struct http_engine *e, struct conn *c);
/* Closes c, in use or idle; its slot is free again. */
void client_conn_close(struct http_engine *e, struct conn *c);
/* Closes the idle connections unused for IDLE_MAX_MS. */
void client_pool_expire(struct http_engine *e, int64_t now);
/* Connects t to its next allowed address (ends it when none is left). */
void client_connect_next(struct http_engine *e, struct transfer *t);
/* Sends t on a pooled connection, or finds its addresses and connects. */
void client_transfer_start(struct http_engine *e, struct transfer *t);
/* The epoll set said something about c. */
void client_conn_event(struct http_engine *e, struct conn *c, uint32_t events);
/* resolver_drain's callback: ud is the engine. */
void client_on_resolved(void *ud, uint64_t tag, const struct resolver_answer *a);
#endif
