/* PostgreSQL schema migrations: numbered SQL scripts applied in order by the postgres backend's migrate. */
#ifndef HOOKD_STORE_SCHEMA_POSTGRES_H
#define HOOKD_STORE_SCHEMA_POSTGRES_H
#include <stddef.h>

#include "store/schema/migration.h"

extern const struct schema_migration postgres_migrations[];
extern const size_t postgres_migrations_count;
#endif
