/*
 * A version-validated cache: when to check the version, one reload at a
 * time, and the swap of generations (versioned_cache.h).
 */
#include "store/versioned_cache.h"

#include <string.h>

#include "core/clock.h"
#include "hookd.h"
#include "store/pool.h"

void versioned_cache_init(struct versioned_cache *vc, struct store_pool *readers, const struct versioned_cache_ops *ops,
                          int64_t check_ms)
{
    memset(vc, 0, sizeof *vc);
    vc->readers = readers;
    vc->ops = ops;
    vc->check_ms = check_ms;
    pthread_mutex_init(&vc->mu, NULL);
    pthread_mutex_init(&vc->refresh_mu, NULL);
    vc->lim.first_ms = 10000; /* kept by log_limiter_reset */
    atomic_store(&vc->stale, true);
}

void versioned_cache_fini(struct versioned_cache *vc)
{
    if (vc->gen)
        vc->ops->drop(vc->gen);
    vc->gen = NULL;
    vc->loaded = false;
    pthread_mutex_destroy(&vc->mu);
    pthread_mutex_destroy(&vc->refresh_mu);
}

void versioned_cache_invalidate(struct versioned_cache *vc) { atomic_store(&vc->stale, true); }

/* Checks the version and reloads when it moved (or the generation is stale or missing). Holds refresh_mu. */
static int refresh(struct versioned_cache *vc)
{
    void *fresh = NULL, *old = NULL;
    struct store *s = NULL;
    int64_t version = 0;
    bool stale = atomic_exchange(&vc->stale, false), load = false;
    int rc = store_pool_get(vc->readers, &s);

    if (rc == 0)
        rc = vc->ops->version(s, &version);
    if (rc == 0) {
        pthread_mutex_lock(&vc->mu);
        load = stale || !vc->loaded || version != vc->version;
        pthread_mutex_unlock(&vc->mu);
    }
    if (rc == 0 && load)
        rc = vc->ops->load(s, &fresh);
    if (s)
        store_pool_put(vc->readers, s, rc == HOOKD_EIO || rc == HOOKD_EUNAVAIL);
    pthread_mutex_lock(&vc->mu);
    vc->checked_at = clock_mono_ms();
    if (rc == 0 && load) {
        old = vc->gen;
        vc->gen = fresh;
        vc->version = version;
        vc->loaded = true;
        fresh = NULL;
    }
    pthread_mutex_unlock(&vc->mu);
    if (old)
        vc->ops->drop(old);
    if (fresh)
        vc->ops->drop(fresh);
    if (rc) {
        if (stale)
            atomic_store(&vc->stale, true); /* try again on the next use */
        log_limited(&vc->lim, LOG_WARN, vc->ops->part, "cannot load the %s: %s", vc->ops->what, hookd_strerror(rc));
    } else {
        log_limiter_reset(&vc->lim, vc->ops->part, vc->ops->what);
    }
    return rc;
}

int versioned_cache_lock(struct versioned_cache *vc, void **gen)
{
    bool due, loaded;
    int rc = 0;

    *gen = NULL;
    pthread_mutex_lock(&vc->mu);
    loaded = vc->loaded;
    due = !loaded || atomic_load(&vc->stale) || clock_mono_ms() - vc->checked_at >= vc->check_ms;
    pthread_mutex_unlock(&vc->mu);
    if (due) {
        /* Without a generation every caller waits for the load; with one, a single thread reloads
         * and the others go on with the current one. */
        if (!loaded)
            pthread_mutex_lock(&vc->refresh_mu);
        if (!loaded || pthread_mutex_trylock(&vc->refresh_mu) == 0) {
            rc = refresh(vc);
            pthread_mutex_unlock(&vc->refresh_mu);
        }
    }
    pthread_mutex_lock(&vc->mu);
    if (!vc->loaded) {
        pthread_mutex_unlock(&vc->mu);
        return rc ? rc : HOOKD_EUNAVAIL;
    }
    *gen = vc->gen;
    return 0;
}

bool versioned_cache_hold(struct versioned_cache *vc, void **gen)
{
    pthread_mutex_lock(&vc->mu);
    *gen = vc->loaded ? vc->gen : NULL;
    return vc->loaded;
}

void versioned_cache_unlock(struct versioned_cache *vc) { pthread_mutex_unlock(&vc->mu); }
