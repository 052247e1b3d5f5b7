/*
 * Source definitions in memory for the receiver: generations of parsed
 * definitions, reference counted, of a version-validated cache
 * (store/versioned_cache.h): reloaded when invalidated or when the store's
 * source version moves.
 */
#include "inbound/source_cache.h"

#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store/versioned_cache.h"

struct source_set {
    atomic_int refs;
    size_t n;
    struct source_def *defs; /* sorted by name */
};

struct source_cache {
    struct versioned_cache vc; /* of struct source_set */
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

static int set_load(struct store *s, struct source_set **out);

static int sources_load(struct store *s, void **gen)
{
    struct source_set *set = NULL;
    int rc = set_load(s, &set);

    *gen = set;
    return rc;
}

static void sources_drop(void *gen) { set_unref(gen); }

static const struct versioned_cache_ops source_cache_ops = {
    .part = "inbound",
    .what = "sources",
    .version = store_source_version,
    .load = sources_load,
    .drop = sources_drop,
};

int source_cache_create(struct store_pool *readers, struct source_cache **out)
{
    struct source_cache *c = calloc(1, sizeof *c);

    *out = NULL;
    if (!c)
        return HOOKD_ENOMEM;
    versioned_cache_init(&c->vc, readers, &source_cache_ops, SOURCE_CACHE_CHECK_MS);
    *out = c;
    return 0;
}

void source_cache_destroy(struct source_cache *c)
{
    if (!c)
        return;
    versioned_cache_fini(&c->vc);
    free(c);
}

void source_cache_invalidate(struct source_cache *c)
{
    if (c)
        versioned_cache_invalidate(&c->vc);
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

int source_cache_get(struct source_cache *c, const char *name, struct source_ref *ref)
{
    struct source_set *set;
    struct source_def key;
    const struct source_def *hit;
    void *gen;
    int rc;

    memset(ref, 0, sizeof *ref);
    if ((rc = versioned_cache_lock(&c->vc, &gen)) != 0)
        return rc;
    set = gen;
    atomic_fetch_add(&set->refs, 1); /* held past the unlock: a reload never frees a definition in use */
    versioned_cache_unlock(&c->vc);
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
