/*
 * A version-validated cache of one table family's rows: a generation loaded
 * whole from the store, reloaded when the family's version counter moves (a
 * change through another node or plain SQL), when marked stale (a change
 * through this process), or when missing, and checked at most every
 * check_ms. Requests never wait for a reload once a generation is loaded:
 * one thread reloads while the others go on with the current one. Used by
 * the account tokens (ops/token_cache.c) and the receiver's sources
 * (inbound/source_cache.c); what a generation holds is theirs.
 *
 *   versioned_cache_init / fini  set up with the family's ops; fini drops the generation
 *   versioned_cache_invalidate   mark stale: the next use reloads (cheap, any thread)
 *   versioned_cache_lock         a fresh-enough generation, with the cache locked
 *   versioned_cache_hold         the generation as it is, with the cache locked
 *   versioned_cache_unlock       after either
 */
#ifndef HOOKD_STORE_VERSIONED_CACHE_H
#define HOOKD_STORE_VERSIONED_CACHE_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "log.h"
#include "store/store.h"

struct store_pool;

struct versioned_cache_ops {
    const char *part; /* the log part ("api") */
    const char *what; /* the family in log lines: "cannot load the <what>", "<what> loaded" */
    /* The family's version counter (it moves at the commit of every change). */
    int (*version)(struct store *s, int64_t *version);
    /* A new generation from s into *gen (never NULL on success); runs without the cache's lock. */
    int (*load)(struct store *s, void **gen);
    /* Frees a generation nobody holds any more (called without the cache's lock). */
    void (*drop)(void *gen);
};

struct versioned_cache {
    struct store_pool *readers; /* borrowed */
    const struct versioned_cache_ops *ops;
    int64_t check_ms;
    pthread_mutex_t mu;         /* guards gen, loaded, version, checked_at */
    pthread_mutex_t refresh_mu; /* one reload at a time */
    void *gen;
    bool loaded;
    int64_t version;
    int64_t checked_at; /* monotonic ms of the last version check */
    atomic_bool stale;
    struct log_limiter lim;
};

void versioned_cache_init(struct versioned_cache *vc, struct store_pool *readers, const struct versioned_cache_ops *ops,
                          int64_t check_ms);
void versioned_cache_fini(struct versioned_cache *vc);
void versioned_cache_invalidate(struct versioned_cache *vc);
/*
 * Reloads first when due (the first load is waited for by every caller; a
 * later one by the thread doing it only). 0: *gen is the current generation
 * and the cache is locked until versioned_cache_unlock. Otherwise, with no
 * generation loaded yet, the load's error (HOOKD_EUNAVAIL when another
 * thread's failed) and the cache is not locked.
 */
__attribute__((warn_unused_result)) int versioned_cache_lock(struct versioned_cache *vc, void **gen);
/* Locks the cache without any reload: true with *gen when a generation is loaded. Unlock either way. */
bool versioned_cache_hold(struct versioned_cache *vc, void **gen);
void versioned_cache_unlock(struct versioned_cache *vc);
#endif
