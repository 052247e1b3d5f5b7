/*
 * The inbox claim's SQL, shared by the daemon's workers (sqlite_inbox.c,
 * postgres_inbox.c) and the application's own handler in libhookd
 * (inbox_lib*.c), so both keep one rule for what is due and for one entity
 * at a time. Text only: each caller binds its own parameters.
 */
#ifndef HOOKD_STORE_INBOX_SQL_H
#define HOOKD_STORE_INBOX_SQL_H

/*
 * The one-entity-at-a-time rule for the candidate row i: another open item of
 * its entity holds a live lease, or was received earlier and is due; now is
 * the parameter holding the current time. The kind is compared with = (or
 * both IS NULL), never a null-safe operator like IS NOT DISTINCT FROM, which
 * no PostgreSQL index serves: the subquery then walked all of the entity
 * index for each item passed (0.3 ms each, a claim of 256 over 10,000 open
 * items 0.86 s); this way it is two short ranges of hookd_inbox_entity
 * (kind, id, each open status, source) on both backends. That index holds
 * the items that have a kind: an item with an entity id and no kind, which
 * hookd never writes (a source's entity id needs its kind) but SQL may, is
 * tested over its source's items instead (hookd_inbox_source).
 */
#define INBOX_ENTITY_BUSY_KIND(kind_test, now)                                                               \
    "EXISTS (SELECT 1 FROM hookd_inbox j WHERE j.source = i.source AND " kind_test                           \
    " AND j.entity_id = i.entity_id AND j.status IN ('pending', 'deferred') AND j.id <> i.id"                 \
    " AND (j.lease_until > " now " OR (j.next_attempt_at <= " now " AND (j.received_at < i.received_at"         \
    " OR (j.received_at = i.received_at AND j.id < i.id)))))"
#define INBOX_ENTITY_BUSY(now)                                                                               \
    "(CASE WHEN i.entity_kind IS NULL THEN " INBOX_ENTITY_BUSY_KIND("j.entity_kind IS NULL", now)            \
    " ELSE " INBOX_ENTITY_BUSY_KIND("j.entity_kind = i.entity_kind", now) " END)"

/* What a claim may take at time now: open, due, unleased, its entity free. */
#define INBOX_CLAIMABLE(now)                                                                                 \
    "i.status IN ('pending', 'deferred') AND i.next_attempt_at <= " now                                      \
    " AND (i.lease_until IS NULL OR i.lease_until <= " now ")"                                                \
    " AND (i.entity_id IS NULL OR NOT " INBOX_ENTITY_BUSY(now) ")"

/*
 * The names of the sources whose handler is {"library": true}: the
 * application processes their items (hookd_inbox_work), the daemon's workers
 * never claim them. A definition that is not JSON (plain SQL can write one)
 * counts as not a library source rather than failing every claim: SQLite's
 * CASE looks at it only when it is valid; PostgreSQL's
 * hookd_source_is_library() (schema/postgres.c) catches a bad cast.
 */
#define INBOX_LIBRARY_SOURCES_SQLITE                                                                         \
    "SELECT name FROM hookd_sources WHERE CASE WHEN json_valid(definition)"                                 \
    " THEN json_extract(definition, '$.handler.library') END IS 1"
#define INBOX_LIBRARY_SOURCES_PG                                                                             \
    "SELECT name FROM hookd_sources WHERE CASE WHEN definition LIKE '%\"library\"%'"                        \
    " THEN hookd_source_is_library(definition) ELSE false END"

/* Key of the advisory lock that serializes inbox claims on one PostgreSQL database (a 64-bit constant of hookd's). */
#define INBOX_CLAIM_LOCK_KEY "7226080340517711105"

#endif
