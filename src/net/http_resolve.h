/*
 * The HTTP engine's resolver: getaddrinfo on threads of its own, so a slow
 * name server never holds the engine's loop, answers handed back through an
 * eventfd the loop polls, and a small cache of recent answers (owned by the
 * loop's thread, no lock).
 *
 *   resolver_create / resolver_destroy  (destroy never waits for a lookup in progress)
 *   resolver_fd        readable when answers are waiting
 *   resolver_cached    a fresh cached answer, without a lookup
 *   resolver_submit    start a lookup (or join the one running for that name); its answer comes
 *                      back through resolver_drain
 *   resolver_drain     hand each waiting answer to a callback (and keep it in the cache)
 */
#ifndef HOOKD_NET_HTTP_RESOLVE_H
#define HOOKD_NET_HTTP_RESOLVE_H
#include <stdint.h>
#include <sys/socket.h>

#define RESOLVER_ADDRS_MAX 8         /* addresses kept per name */
#define RESOLVER_CACHE_ENTRIES 64
#define RESOLVER_CACHE_TTL_MS 60000
#define RESOLVER_THREADS 2

struct resolver;

struct resolver_answer {
    int error;                   /* 0, or getaddrinfo's EAI_* code */
    int n;                       /* addresses (port 0) */
    struct sockaddr_storage addrs[RESOLVER_ADDRS_MAX];
};

typedef void (*resolver_done_fn)(void *ud, uint64_t tag, const struct resolver_answer *a);

/* HOOKD_ENOMEM or HOOKD_EIO (no eventfd). The threads start with the first lookup. */
__attribute__((warn_unused_result)) int resolver_create(struct resolver **out);
void resolver_destroy(struct resolver *r);
int resolver_fd(const struct resolver *r);
/* 1 and *out when host has an answer younger than the TTL (a failure is not kept), else 0. */
int resolver_cached(struct resolver *r, const char *host, int64_t now_ms, struct resolver_answer *out);
/* Queues a lookup of host (copied) under tag. 0, HOOKD_ENOMEM or HOOKD_EIO (no thread could start). */
__attribute__((warn_unused_result)) int resolver_submit(struct resolver *r, const char *host, uint64_t tag);
/* Runs fn for every answer that arrived; stale tags are the callback's business. */
void resolver_drain(struct resolver *r, int64_t now_ms, resolver_done_fn fn, void *ud);
#endif
