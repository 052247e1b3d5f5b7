/*
 * Endpoint states of the dispatcher: the id hash, loading from the store, and
 * the round-robin ring of endpoints with a job that can start.
 */
#include "outbound/endpoint_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hookd.h"
#include "store/pool.h"

#define BUCKETS_MIN 64

static uint64_t id_hash(const char *id)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */

    for (; *id != '\0'; id++) {
        h ^= (unsigned char)*id;
        h *= 1099511628211ULL;
    }
    return h;
}

/* The versioned cache's generations: every endpoint, as the store lists them. */
static int generation_version(struct store *s, int64_t *version) { return store_endpoint_version(s, version); }

static int generation_load(struct store *s, void **gen)
{
    struct endpoint_list *list = calloc(1, sizeof *list);
    int rc;

    if (list == NULL)
        return HOOKD_ENOMEM;
    rc = store_endpoint_list_all(s, list);
    if (rc != 0) {
        free(list);
        return rc;
    }
    *gen = list;
    return 0;
}

static void generation_drop(void *gen)
{
    endpoint_list_free(gen);
    free(gen);
}

static const struct versioned_cache_ops generation_ops = {
    .part = "dispatcher",
    .what = "endpoints",
    .version = generation_version,
    .load = generation_load,
    .drop = generation_drop,
};

int endpoint_cache_init(struct endpoint_cache *c, const char *store, const struct retry_policy *policy,
                        int default_cap)
{
    int rc;

    memset(c, 0, sizeof *c);
    c->policy = policy;
    c->default_cap = default_cap;
    c->buckets = calloc(BUCKETS_MIN, sizeof *c->buckets);
    if (c->buckets == NULL)
        return HOOKD_ENOMEM;
    c->n_buckets = BUCKETS_MIN;
    rc = store_pool_create(store, 1, &c->rd);
    if (rc != 0) {
        free(c->buckets);
        c->buckets = NULL;
        return rc;
    }
    /* The dispatcher asks at its own pace (every SAFETY_POLL_MS): each ask checks the version. */
    versioned_cache_init(&c->vc, c->rd, &generation_ops, 0);
    return 0;
}

static void state_free(struct ep_state *st)
{
    endpoint_free(&st->ep);
    free(st);
}

void endpoint_cache_destroy(struct endpoint_cache *c)
{
    for (size_t i = 0; i < c->n_buckets; i++) {
        struct ep_state *st = c->buckets[i];
        while (st != NULL) {
            struct ep_state *next = st->hash_next;
            state_free(st);
            st = next;
        }
    }
    free(c->buckets);
    if (c->rd != NULL) {
        versioned_cache_fini(&c->vc);
        store_pool_destroy(c->rd);
    }
    memset(c, 0, sizeof *c);
}

struct ep_state *endpoint_cache_find(struct endpoint_cache *c, const char *id)
{
    struct ep_state *st = c->buckets[id_hash(id) & (c->n_buckets - 1)];

    while (st != NULL && strcmp(st->id, id) != 0)
        st = st->hash_next;
    return st;
}

/* Doubles the bucket array when the states outnumber it; on allocation failure the chains just grow. */
static void grow(struct endpoint_cache *c)
{
    size_t n = c->n_buckets * 2;
    struct ep_state **b;

    if (c->n_states <= c->n_buckets || (b = calloc(n, sizeof *b)) == NULL)
        return;
    for (size_t i = 0; i < c->n_buckets; i++) {
        struct ep_state *st = c->buckets[i];
        while (st != NULL) {
            struct ep_state *next = st->hash_next;
            size_t k = id_hash(st->id) & (n - 1);
            st->hash_next = b[k];
            b[k] = st;
            st = next;
        }
    }
    free(c->buckets);
    c->buckets = b;
    c->n_buckets = n;
}

static struct ep_state *state_add(struct endpoint_cache *c, const char *id)
{
    struct ep_state *st = calloc(1, sizeof *st);
    size_t k;

    if (st == NULL)
        return NULL;
    snprintf(st->id, sizeof st->id, "%s", id);
    st->cap = 1;
    st->direct = true;
    st->policy = *c->policy;
    k = id_hash(st->id) & (c->n_buckets - 1);
    st->hash_next = c->buckets[k];
    c->buckets[k] = st;
    c->n_states++;
    grow(c);
    return st;
}

struct ep_state *endpoint_cache_placeholder(struct endpoint_cache *c, const char *id)
{
    struct ep_state *st = endpoint_cache_find(c, id);
    return st != NULL ? st : state_add(c, id);
}

/* Takes over src's contents (src is zeroed) and derives the policy and cap. */
static void state_set(struct endpoint_cache *c, struct ep_state *st, struct endpoint *src)
{
    endpoint_free(&st->ep);
    st->ep = *src;
    memset(src, 0, sizeof *src);
    st->present = true;
    st->policy = *c->policy;
    if (st->ep.n_retry_schedule > 0) {
        size_t n = st->ep.n_retry_schedule < RETRY_MAX_SCHEDULE ? st->ep.n_retry_schedule : RETRY_MAX_SCHEDULE;
        memcpy(st->policy.schedule_ms, st->ep.retry_schedule_ms, n * sizeof st->policy.schedule_ms[0]);
        st->policy.n_schedule = n;
    }
    st->cap = st->ep.max_in_flight > 0 ? st->ep.max_in_flight : c->default_cap;
    if (st->cap < 1)
        st->cap = 1;
}

/* Drops states of endpoints gone from the store once no job points at them. */
static void sweep(struct endpoint_cache *c)
{
    for (size_t i = 0; i < c->n_buckets; i++) {
        struct ep_state **pp = &c->buckets[i];
        while (*pp != NULL) {
            struct ep_state *st = *pp;
            if (!st->present && st->refs == 0 && !st->in_ring) {
                *pp = st->hash_next;
                c->n_states--;
                state_free(st);
            } else {
                pp = &st->hash_next;
            }
        }
    }
}

/*
 * Sets the states from a generation (its endpoints copied: the generation is
 * the versioned cache's). On failure the states not reached keep their old
 * settings, and the next call sets them again.
 */
static int merge(struct endpoint_cache *c, const struct endpoint_list *list)
{
    int rc = 0;

    for (size_t i = 0; i < c->n_buckets; i++) {
        for (struct ep_state *st = c->buckets[i]; st != NULL; st = st->hash_next)
            st->seen = false;
    }
    for (size_t i = 0; i < list->n && rc == 0; i++) {
        struct ep_state *st = endpoint_cache_placeholder(c, list->items[i].id);
        struct endpoint copy;
        if (st == NULL || endpoint_copy(&copy, &list->items[i]) != 0) {
            rc = HOOKD_ENOMEM;
            break;
        }
        state_set(c, st, &copy);
        st->seen = true;
    }
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < c->n_buckets; i++) {
        for (struct ep_state *st = c->buckets[i]; st != NULL; st = st->hash_next) {
            if (!st->seen && st->present) {
                st->present = false;
                endpoint_free(&st->ep);
                memset(&st->ep, 0, sizeof st->ep);
            }
            /* A disabled or deleted endpoint with queued jobs must come up to release them. */
            endpoint_cache_mark_ready(c, st);
        }
    }
    sweep(c);
    return 0;
}

/* The versioned cache's current generation (reloaded first when its version moved), set into the states when new. */
static int refresh(struct endpoint_cache *c)
{
    void *gen = NULL;
    int rc = versioned_cache_lock(&c->vc, &gen);

    if (rc != 0)
        return rc; /* nothing loaded yet */
    if (gen != c->merged) {
        rc = merge(c, gen);
        c->merged = rc == 0 ? gen : NULL;
    }
    versioned_cache_unlock(&c->vc);
    return rc;
}

int endpoint_cache_reload(struct endpoint_cache *c)
{
    versioned_cache_invalidate(&c->vc);
    return refresh(c);
}

int endpoint_cache_revalidate(struct endpoint_cache *c) { return refresh(c); }

static bool breaker_watched(const struct ep_state *st) { return st->present && (st->queued > 0 || st->paused); }

int endpoint_cache_breakers(struct endpoint_cache *c,
                            void (*fn)(struct ep_state *st, const struct endpoint_state *es, void *arg), void *arg)
{
    struct ep_state **sts = NULL;
    const char **ids = NULL;
    struct endpoint_state *es = NULL;
    struct store *s = NULL;
    size_t n = 0, k = 0;
    int rc;

    for (size_t i = 0; i < c->n_buckets; i++) {
        for (struct ep_state *st = c->buckets[i]; st != NULL; st = st->hash_next)
            n += breaker_watched(st);
    }
    if (n == 0)
        return 0;
    sts = malloc(n * sizeof *sts);
    ids = malloc(n * sizeof *ids);
    es = malloc(n * sizeof *es);
    if (sts == NULL || ids == NULL || es == NULL) {
        rc = HOOKD_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < c->n_buckets; i++) {
        for (struct ep_state *st = c->buckets[i]; st != NULL && k < n; st = st->hash_next) {
            if (breaker_watched(st)) {
                sts[k] = st;
                ids[k++] = st->id;
            }
        }
    }
    rc = store_pool_get(c->rd, &s);
    if (rc != 0)
        goto out;
    rc = store_endpoint_state_get_many(s, ids, k, es);
    /* An error may mean a broken connection: a new one next time. */
    store_pool_put(c->rd, s, rc != 0);
    if (rc != 0)
        goto out;
    for (size_t i = 0; i < k; i++)
        fn(sts[i], &es[i], arg);
out:
    free(sts);
    free(ids);
    free(es);
    return rc;
}

static bool can_start(const struct ep_state *st)
{
    if (st->queued == 0)
        return false;
    if (!st->present || !st->ep.enabled)
        return true;
    return !st->breaker_due && st->in_flight < st->cap;
}

void endpoint_cache_mark_ready(struct endpoint_cache *c, struct ep_state *st)
{
    if (st->in_ring || !can_start(st))
        return;
    st->in_ring = true;
    st->ring_next = NULL;
    if (c->ring_tail != NULL)
        c->ring_tail->ring_next = st;
    else
        c->ring_head = st;
    c->ring_tail = st;
}

struct ep_state *endpoint_cache_next_ready(struct endpoint_cache *c)
{
    struct ep_state *st;

    /* Entries go stale when their jobs left meanwhile; they are dropped here. */
    while ((st = c->ring_head) != NULL) {
        c->ring_head = st->ring_next;
        if (c->ring_head == NULL)
            c->ring_tail = NULL;
        st->in_ring = false;
        st->ring_next = NULL;
        if (can_start(st))
            return st;
    }
    return NULL;
}

void endpoint_cache_each(struct endpoint_cache *c, void (*fn)(struct ep_state *st, void *arg), void *arg)
{
    for (size_t i = 0; i < c->n_buckets; i++) {
        for (struct ep_state *st = c->buckets[i]; st != NULL; st = st->hash_next)
            fn(st, arg);
    }
}

void endpoint_cache_note_busy(struct endpoint_cache *c, struct ep_state *st)
{
    bool busy = st->queued > 0 || st->in_flight > 0;

    if (busy == st->busy)
        return;
    st->busy = busy;
    c->n_busy += busy ? 1 : -1;
}

void endpoint_cache_ref(struct endpoint_cache *c, struct ep_state *st)
{
    if (st->refs++ == 0)
        c->n_holding++;
}

void endpoint_cache_unref(struct endpoint_cache *c, struct ep_state *st)
{
    if (--st->refs == 0)
        c->n_holding--;
}
