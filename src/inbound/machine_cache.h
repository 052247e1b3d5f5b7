/*
 * Parsed machine definitions shared by the decision threads: a decision
 * reads its machine's row in its own transaction (store_entity_hold) and
 * parses it only when the stored text differs from the one cached, so a
 * PATCH, on any node, or an update by plain SQL, decides the next event.
 *
 *   machine_cache_create / _destroy
 *   machine_cache_get   the parsed machine of a row read now (cached, or parsed and cached)
 *   machine_cache_put   done with it (an entry replaced meanwhile is freed by its last user)
 */
#ifndef HOOKD_INBOUND_MACHINE_CACHE_H
#define HOOKD_INBOUND_MACHINE_CACHE_H
#include "inbound/machine.h"
#include "store/store.h"

#define MACHINE_CACHE_MAX 64 /* machines kept parsed; beyond, an unused one is dropped */

struct machine_cache;

__attribute__((warn_unused_result)) int machine_cache_create(struct machine_cache **out);
void machine_cache_destroy(struct machine_cache *c); /* after the last put */
/*
 * *out: the machine of rec (same name, text and updated_at), valid until
 * machine_cache_put. HOOKD_EIO when the stored text does not parse (nothing
 * is cached for it), HOOKD_ENOMEM.
 */
__attribute__((warn_unused_result)) int machine_cache_get(struct machine_cache *c, const struct machine_record *rec,
                                                          const struct machine **out);
void machine_cache_put(struct machine_cache *c, const struct machine *m);
#endif
