/* SQLite schema migrations: numbered SQL scripts applied in order by the sqlite backend's migrate. */
#ifndef HOOKD_STORE_SCHEMA_SQLITE_H
#define HOOKD_STORE_SCHEMA_SQLITE_H
#include <stddef.h>

#include "store/schema/migration.h"

extern const struct schema_migration sqlite_migrations[];
extern const size_t sqlite_migrations_count;
#endif
