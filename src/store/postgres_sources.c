/*
 * PostgreSQL backend, sources: hookd_sources rows (the definition and
 * secrets as opaque JSON text), deletion together with the source's
 * rejection log, and the cache validator the receiver checks.
 */
#include "store/postgres_internal.h"

#include <string.h>

#include "core/clock.h"

/* Statement slots, in this family's range (postgres_internal.h). */
enum {
    PG_SOURCE_INSERT = PG_SOURCES,
    PG_SOURCE_UPDATE,
    PG_SOURCE_GET,
    PG_SOURCE_LIST,
    PG_SOURCE_ALL,
    PG_SOURCE_DELETE,
    PG_SOURCE_VERSION,
    PG_SOURCES_END
};
_Static_assert((int)PG_SOURCES_END <= (int)PG_INBOX, "the sources statements overflow their slots");

/* A taken name is reported without an SQL error, so the caller's transaction stays usable. */
static int source_write(struct store *s, const struct source *src, bool update)
{
    static const char insert_sql[] = "INSERT INTO hookd_sources(" STORE_SOURCE_COLUMNS ") VALUES ($1, $2, $3, $4, $5)"
                                     " ON CONFLICT (name) DO NOTHING";
    static const char update_sql[] =
        "UPDATE hookd_sources SET definition = $2, secrets = $3, updated_at = $5 WHERE name = $1"; /* $4 kept */
    struct pg_params p = {.n = 0};
    int64_t now = clock_now_ms(), rows = 0;
    int result;

    if (src->name[0] == '\0' || !src->definition)
        return HOOKD_EINVAL;
    pg_param_text(&p, 1, src->name);
    pg_param_text(&p, 2, src->definition);
    pg_param_text(&p, 3, src->secrets ? src->secrets : "{}");
    pg_param_i64(&p, 4, src->created_at ? src->created_at : now);
    pg_param_i64(&p, 5, src->updated_at ? src->updated_at : now);
    result = pg_run_command(s, update ? PG_SOURCE_UPDATE : PG_SOURCE_INSERT, update ? update_sql : insert_sql, &p,
                            &rows);
    if (result == 0 && rows == 0)
        result = update ? HOOKD_ENOTFOUND : HOOKD_EEXISTS;
    return result;
}

static int postgres_source_insert(struct store *s, const struct source *src) { return source_write(s, src, false); }
static int postgres_source_update(struct store *s, const struct source *src) { return source_write(s, src, true); }

static int postgres_source_get(struct store *s, const char *name, struct source *out)
{
    struct pg_params p = {.n = 0};

    pg_param_text(&p, 1, name);
    return pg_get(s, PG_SOURCE_GET, "SELECT " STORE_SOURCE_COLUMNS " FROM hookd_sources WHERE name = $1", &p,
                  store_read_source, out);
}

static int postgres_source_list(struct store *s, const struct source_filter *f, struct source_list *out)
{
    struct pg_params p = {.n = 0};

    pg_param_text(&p, 1, f->before_name);
    pg_param_int(&p, 2, store_list_limit(f->limit));
    return pg_list(s, PG_SOURCE_LIST,
                   "SELECT " STORE_SOURCE_COLUMNS " FROM hookd_sources WHERE ($1::text IS NULL OR name < $1)"
                   " ORDER BY name DESC LIMIT $2",
                   &p, store_read_source, STORE_ROWS(out, store_free_source));
}

static int postgres_source_list_all(struct store *s, struct source_list *out)
{
    return pg_list(s, PG_SOURCE_ALL, "SELECT " STORE_SOURCE_COLUMNS " FROM hookd_sources ORDER BY name", NULL,
                   store_read_source, STORE_ROWS(out, store_free_source));
}

/* The source goes with its rejection log and counters, in one statement; its inbox items stay. */
static int postgres_source_delete(struct store *s, const char *name)
{
    struct pg_params p = {.n = 0};
    PGresult *res;
    int result;

    pg_param_text(&p, 1, name);
    result = pg_run(s, PG_SOURCE_DELETE,
                    "WITH del AS (DELETE FROM hookd_sources WHERE name = $1 RETURNING name),"
                    " rej AS (DELETE FROM hookd_rejections WHERE source = $1 AND EXISTS (SELECT 1 FROM del)),"
                    " cnt AS (DELETE FROM hookd_rejection_counts WHERE source = $1 AND EXISTS (SELECT 1 FROM del))"
                    " SELECT count(*) FROM del",
                    &p, &res);
    if (result)
        return result;
    result = pg_col_i64(res, 0, 0) > 0 ? 0 : HOOKD_ENOTFOUND;
    PQclear(res);
    return result;
}

/* Bumped by a trigger on every row written to hookd_sources; it moves only at commit. */
static int postgres_source_version(struct store *s, int64_t *version)
{
    return pg_meta_counter(s, PG_SOURCE_VERSION, PG_META_COUNTER_SQL("sources_version"), version);
}

const struct store_source_ops postgres_source_ops = {
    .insert = postgres_source_insert,
    .update = postgres_source_update,
    .get = postgres_source_get,
    .list = postgres_source_list,
    .list_all = postgres_source_list_all,
    .delete = postgres_source_delete,
    .version = postgres_source_version,
};
