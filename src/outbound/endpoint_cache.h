/*
 * The dispatcher's view of endpoints (private to the dispatcher thread): a
 * hash of id → per-endpoint state (settings copy, retry policy, in-flight
 * count, FIFO of ready jobs), loaded through a version-checked cache
 * (store/versioned_cache.h) on a read connection of its own, plus a
 * round-robin ring of endpoints that can start a job now.
 * Ordering modes, rate limits and the breaker hang off struct ep_state.
 *
 *   endpoint_cache_init/destroy     own the read connection, the versioned cache and the states
 *   endpoint_cache_reload           load every endpoint (states of deleted ones stay while jobs refer to them)
 *   endpoint_cache_revalidate       reload only when store_endpoint_version moved (versioned_cache)
 *   endpoint_cache_breakers         the stored breaker state of the endpoints with queued jobs or paused
 *   endpoint_cache_find             state by endpoint id, or NULL
 *   endpoint_cache_placeholder      a state for an id the store does not have (its jobs get released)
 *   endpoint_cache_mark_ready       put a state in the ring if it can start (or must release) a job
 *   endpoint_cache_next_ready       take the next such state out of the ring
 *   endpoint_cache_each             visit every state
 *   endpoint_cache_note_busy        after a change of queued or in_flight: keep n_busy
 *   endpoint_cache_ref/unref        a job starts or stops pointing at a state: keep refs and n_holding
 */
#ifndef HOOKD_OUTBOUND_ENDPOINT_CACHE_H
#define HOOKD_OUTBOUND_ENDPOINT_CACHE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/retry.h"
#include "store/store.h"
#include "store/versioned_cache.h"

struct job; /* the dispatcher's; the cache only holds the FIFO ends */

struct ep_state {
    char id[HOOKD_ID_MAX];
    struct endpoint ep;         /* meaningful when present */
    bool present;               /* false: deleted, or never seen in the store */
    struct retry_policy policy; /* the endpoint's schedule over the global policy */
    int cap;                    /* in-flight cap */
    int in_flight;
    int in_flight_slow;         /* of those, transfers older than the dispatcher's slow_after */
    struct job *head, *tail;    /* ready jobs, FIFO (linked through the dispatcher's job) */
    size_t queued;
    int refs;                   /* jobs that point here (what it holds of the window) */
    bool busy;                  /* queued or in flight: counted in n_busy */
    bool paused;                /* its breaker opened (we saw it): queued jobs went back to the store */
    uint64_t paused_claims;     /* our record opened its breaker while claims up to this claim_seq were out (0: none) */
    int fail_streak;            /* failed attempts here since its last success */
    int failures_unrecorded;    /* attempts of it that failed and whose record has not committed yet */
    bool breaker_due;           /* the streak reached the breaker's threshold while failures are unrecorded: no new attempt until the store decides */
    int64_t ramp_until_mono;    /* its breaker closed: claims ramp it up until then */
    int64_t answered_mono;      /* its last answer (0: none yet) */
    bool direct;                /* as last put on the dispatcher's board */
    bool held_back;             /* the last claim left due rows of it behind for its limits */
    uint64_t freed_in_claim;    /* a lease of it ended while this claim (dispatcher claim_seq) was out */
    bool in_ring;
    bool seen;                  /* reload bookkeeping */
    struct ep_state *ring_next;
    struct ep_state *held_next; /* the dispatcher's list of states its fair share held back this turn */
    struct ep_state *hash_next;
};

struct endpoint_cache {
    const struct retry_policy *policy;  /* global schedule, borrowed */
    int default_cap;                    /* in-flight cap of endpoints without their own */
    struct store_pool *rd;              /* one read connection, opened lazily, reopened after errors */
    struct versioned_cache vc;          /* generations: struct endpoint_list, every endpoint */
    const void *merged;                 /* the generation the states were last set from (NULL: none) */
    struct ep_state **buckets;
    size_t n_buckets, n_states;
    struct ep_state *ring_head, *ring_tail;
    int n_busy;    /* states with jobs queued or in flight: the in-flight cap's fair share divides by it */
    int n_holding; /* states with refs > 0: the window's fair share divides by it */
};

/* store and policy are borrowed: they must outlive the cache. */
__attribute__((warn_unused_result)) int endpoint_cache_init(struct endpoint_cache *c, const char *store,
                                                            const struct retry_policy *policy, int default_cap);
void endpoint_cache_destroy(struct endpoint_cache *c); /* every FIFO must be empty */
__attribute__((warn_unused_result)) int endpoint_cache_reload(struct endpoint_cache *c);
__attribute__((warn_unused_result)) int endpoint_cache_revalidate(struct endpoint_cache *c);
/*
 * One read of the stored state (the breaker, for every node) of each endpoint
 * that has jobs queued here or is paused here; fn gets each with its state.
 */
__attribute__((warn_unused_result)) int endpoint_cache_breakers(struct endpoint_cache *c,
                                                                void (*fn)(struct ep_state *st,
                                                                           const struct endpoint_state *es, void *arg),
                                                                void *arg);
struct ep_state *endpoint_cache_find(struct endpoint_cache *c, const char *id);
struct ep_state *endpoint_cache_placeholder(struct endpoint_cache *c, const char *id);
void endpoint_cache_mark_ready(struct endpoint_cache *c, struct ep_state *st);
struct ep_state *endpoint_cache_next_ready(struct endpoint_cache *c);
void endpoint_cache_each(struct endpoint_cache *c, void (*fn)(struct ep_state *st, void *arg), void *arg);
void endpoint_cache_note_busy(struct endpoint_cache *c, struct ep_state *st);
void endpoint_cache_ref(struct endpoint_cache *c, struct ep_state *st);
void endpoint_cache_unref(struct endpoint_cache *c, struct ep_state *st);
#endif
