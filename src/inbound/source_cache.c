/*
 * Source definitions in memory for the receiver: generations of parsed
 * definitions, reference counted, reloaded when invalidated or when the
 * store's source version moves.
 */
#include "inbound/source_cache.h"

#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "log.h"
#include "store/pool.h"

struct source_set {
    atomic_int refs;
    size_t n;
    struct source_def *defs; /* sorted by name */
};

struct source_cache {
    struct store_pool *readers;
    pthread_mutex_t mu;         /* guards set, version, checked_at */
    pthread_mutex_t refresh_mu; /* one reload at a time */
    struct source_set *set;     /* NULL until the first load */
    int64_t version;
    int64_t checked_at;         /* monotonic ms of the last version check */
    atomic_bool stale;
    struct log_limiter lim;
};

static void set_unref(struct source_set *set)
{
    if (!set || atomic_fetch_sub(&set->refs, 1) != 1)
        return;
    for (size_t i = 0; i < set->n; i++)
        source_def_free(&set->defs[i]);
    free(set->defs);
    free(set);
}

int source_cache_create(struct store_pool *readers, struct source_cache **out)
{
    struct source_cache *c = calloc(1, sizeof *c);

    *out = NULL;
    if (!c)
        return HOOKD_ENOMEM;
    c->readers = readers;
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->refresh_mu, NULL);
    c->lim.interval_ms = 10000;
    atomic_store(&c->stale, true);
    *out = c;
    return 0;
}

void source_cache_destroy(struct source_cache *c)
{
    if (!c)
        return;
    set_unref(c->set);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->refresh_mu);
    free(c);
}

void source_cache_invalidate(struct source_cache *c)
{
    if (c)
        atomic_store(&c->stale, true);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct source_def *)a)->name, ((const struct source_def *)b)->name);
}

/* A new generation from the store; a row that does not parse is left out (and logged). */
static int set_load(struct store *s, struct source_set **out)
{
    struct source_list rows = {0};
    struct source_set *set;
    int rc = store_source_list_all(s, &rows);

    *out = NULL;
    if (rc)
        return rc;
    set = calloc(1, sizeof *set);
    if (set)
        set->defs = rows.n ? calloc(rows.n, sizeof *set->defs) : NULL;
    if (!set || (rows.n && !set->defs)) {
        free(set);
        source_list_free(&rows);
        return HOOKD_ENOMEM;
    }
    atomic_init(&set->refs, 1);
    for (size_t i = 0; i < rows.n; i++) {
        int one = source_def_from_record(&rows.items[i], &set->defs[set->n]);
        if (one == 0) {
            set->n++;
        } else {
            source_def_free(&set->defs[set->n]);
            log_warn("inbound", "source %s: stored definition does not parse (%s)", rows.items[i].name,
                     hookd_strerror(one));
        }
    }
    source_list_free(&rows);
    qsort(set->defs, set->n, sizeof *set->defs, by_name);
    *out = set;
    return 0;
}

/* Checks the version and reloads when it moved (or the set is stale or missing). Holds refresh_mu. */
static int refresh(struct source_cache *c)
{
    struct source_set *fresh = NULL, *old = NULL;
    struct store *s = NULL;
    int64_t version = 0;
    bool stale = atomic_exchange(&c->stale, false), have;
    int rc = store_pool_get(c->readers, &s);

    if (rc == 0)
        rc = store_source_version(s, &version);
    pthread_mutex_lock(&c->mu);
    have = c->set != NULL;
    pthread_mutex_unlock(&c->mu);
    if (rc == 0 && (stale || !have || version != c->version))
        rc = set_load(s, &fresh);
    if (s)
        store_pool_put(c->readers, s, rc == HOOKD_EIO || rc == HOOKD_EUNAVAIL);
    pthread_mutex_lock(&c->mu);
    c->checked_at = clock_mono_ms();
    if (rc == 0 && fresh) {
        old = c->set;
        c->set = fresh;
        c->version = version;
    }
    pthread_mutex_unlock(&c->mu);
    set_unref(old);
    if (rc) {
        if (stale)
            atomic_store(&c->stale, true); /* try again on the next request */
        log_limited(&c->lim, LOG_WARN, "inbound", "cannot load the sources: %s", hookd_strerror(rc));
    } else {
        log_limiter_reset(&c->lim, "inbound", "sources loaded");
    }
    return rc;
}

int source_cache_get(struct source_cache *c, const char *name, struct source_ref *ref)
{
    struct source_set *set;
    struct source_def key;
    const struct source_def *hit;
    bool due, have;
    int rc = 0;

    memset(ref, 0, sizeof *ref);
    pthread_mutex_lock(&c->mu);
    have = c->set != NULL;
    due = !have || atomic_load(&c->stale) || clock_mono_ms() - c->checked_at >= SOURCE_CACHE_CHECK_MS;
    pthread_mutex_unlock(&c->mu);
    if (due) {
        /* Without a set every request waits for the load; with one, only a single thread reloads
         * and the others go on with the current set. */
        if (!have)
            pthread_mutex_lock(&c->refresh_mu);
        if (!have || pthread_mutex_trylock(&c->refresh_mu) == 0) {
            rc = refresh(c);
            pthread_mutex_unlock(&c->refresh_mu);
        }
    }
    pthread_mutex_lock(&c->mu);
    set = c->set;
    if (set)
        atomic_fetch_add(&set->refs, 1);
    pthread_mutex_unlock(&c->mu);
    if (!set)
        return rc ? rc : HOOKD_EUNAVAIL;
    snprintf(key.name, sizeof key.name, "%s", name);
    hit = bsearch(&key, set->defs, set->n, sizeof *set->defs, by_name);
    if (!hit) {
        set_unref(set);
        return HOOKD_ENOTFOUND;
    }
    ref->set = set;
    ref->def = hit;
    return 0;
}

void source_cache_put(struct source_cache *c, struct source_ref *ref)
{
    (void)c;
    if (ref && ref->set)
        set_unref(ref->set);
    if (ref)
        memset(ref, 0, sizeof *ref);
}
