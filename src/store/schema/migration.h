/* A numbered schema migration, shared by the backends' schema lists (schema/sqlite.h, schema/postgres.h). */
#ifndef HOOKD_STORE_SCHEMA_MIGRATION_H
#define HOOKD_STORE_SCHEMA_MIGRATION_H

struct schema_migration {
    int version;     /* strictly increasing, from 1 */
    const char *sql; /* one or more statements, run inside the migrating transaction */
};
#endif
