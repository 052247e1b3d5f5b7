/*
 * The receiver's view of sources: every definition parsed once and held in
 * memory, so a request's route decision (prepare) costs a lookup, not a
 * query. The set is replaced whole when sources change: at once after a
 * change made through this process (hub topic HUB_SOURCES_CHANGED), and
 * within SOURCE_CACHE_CHECK_MS for changes made elsewhere (other nodes, plain
 * SQL), found by the cheap store_source_version check. A request holds a
 * reference to the set it read, so a replacement never frees a definition in
 * use.
 *
 *   source_cache_create / destroy
 *   source_cache_invalidate   mark the set stale (a hub subscriber: cheap, any thread)
 *   source_cache_get / put    a definition by name, held until put
 */
#ifndef HOOKD_INBOUND_SOURCE_CACHE_H
#define HOOKD_INBOUND_SOURCE_CACHE_H
#include "inbound/source_def.h"

#define SOURCE_CACHE_CHECK_MS 1000

struct store_pool;
struct source_cache;
struct source_set; /* one immutable generation of definitions */

struct source_ref {
    struct source_set *set;
    const struct source_def *def;
};

/* readers is borrowed: it must outlive the cache. */
__attribute__((warn_unused_result)) int source_cache_create(struct store_pool *readers, struct source_cache **out);
void source_cache_destroy(struct source_cache *c); /* every reference must have been put back */
void source_cache_invalidate(struct source_cache *c);
/* 0 with ref filled; HOOKD_ENOTFOUND; or the store's error when no set could be loaded yet. */
__attribute__((warn_unused_result)) int source_cache_get(struct source_cache *c, const char *name,
                                                         struct source_ref *ref);
void source_cache_put(struct source_cache *c, struct source_ref *ref);
#endif
