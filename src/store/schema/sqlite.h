/* SQLite schema migrations: numbered SQL scripts applied in order by the sqlite backend's migrate. */
#ifndef HOOKD_STORE_SCHEMA_SQLITE_H
#define HOOKD_STORE_SCHEMA_SQLITE_H
#include <stddef.h>

struct schema_migration {
    int version;     /* strictly increasing, from 1 */
    const char *sql; /* one or more statements, run inside the migrating transaction */
};

extern const struct schema_migration sqlite_migrations[];
extern const size_t sqlite_migrations_count;
#endif
