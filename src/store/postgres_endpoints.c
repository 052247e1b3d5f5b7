/*
 * PostgreSQL backend, endpoints: hookd_endpoints rows with their JSON text
 * columns (endpoint_json.h), deletion that ends the open deliveries, and the
 * cache validator.
 */
#include "store/postgres_internal.h"

#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "store/endpoint_json.h"

/* Statement slots, in this family's range (postgres_internal.h). */
enum {
    PG_ENDPOINT_INSERT = PG_ENDPOINTS,
    PG_ENDPOINT_UPDATE,
    PG_ENDPOINT_GET,
    PG_ENDPOINT_ALL,
    PG_ENDPOINT_DELETE,
    PG_ENDPOINT_SET_ENABLED,
    PG_ENDPOINT_VERSION,
    PG_ENDPOINT_LIST,
    PG_ENDPOINT_LIST_LAST = PG_ENDPOINT_LIST + EP_F_COMBINATIONS - 1,
    PG_ENDPOINTS_END
};
_Static_assert((int)PG_ENDPOINTS_END <= (int)PG_DELIVERIES, "the endpoints statements overflow their slots");

/* Insert (update = false) or whole-row update by id. A taken id is reported
 * without an SQL error, so the caller's transaction stays usable. */
static int endpoint_write(struct store *s, const struct endpoint *ep, bool update)
{
    static const char insert_sql[] =
        "INSERT INTO hookd_endpoints(" STORE_ENDPOINT_COLUMNS ", disabled_at)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,"
        " CASE WHEN $7 THEN NULL ELSE $15 END) ON CONFLICT (id) DO NOTHING";
    static const char update_sql[] =
        "UPDATE hookd_endpoints SET account = $2, url = $3, description = $4, event_types = $5, secrets = $6,"
        " enabled = $7, disabled_reason = $8, ordering = $9, max_in_flight = $10, rate_limit = $11,"
        " timeout_ms = $12, retry_schedule = $13, updated_at = $15, headers = $16,"
        " disabled_at = CASE WHEN $7 THEN NULL ELSE COALESCE(disabled_at, $15) END"
        " WHERE id = $1"; /* $14 (created_at) is declared but kept */
    struct store_value v[STORE_ENDPOINT_NVALUES];
    struct pg_params p = {.n = 0};
    struct endpoint_json j;
    int64_t rows = 0;
    int result;

    if (ep->id[0] == '\0' || !ep->url)
        return HOOKD_EINVAL;
    result = endpoint_json_encode(ep, &j);
    if (result)
        return result;
    store_endpoint_values(ep, &j, clock_now_ms(), v);
    pg_param_values(&p, v, STORE_ENDPOINT_NVALUES);
    result = pg_run_command(s, update ? PG_ENDPOINT_UPDATE : PG_ENDPOINT_INSERT, update ? update_sql : insert_sql, &p,
                            &rows);
    endpoint_json_free(&j);
    if (result == 0 && rows == 0)
        result = update ? HOOKD_ENOTFOUND : HOOKD_EEXISTS;
    return result;
}

static int postgres_endpoint_insert(struct store *s, const struct endpoint *ep) { return endpoint_write(s, ep, false); }
static int postgres_endpoint_update(struct store *s, const struct endpoint *ep) { return endpoint_write(s, ep, true); }

static int postgres_endpoint_get(struct store *s, const char *id, struct endpoint *out)
{
    struct pg_params p = {.n = 0};

    pg_param_text(&p, 1, id);
    return pg_get(s, PG_ENDPOINT_GET, "SELECT " STORE_ENDPOINT_COLUMNS " FROM hookd_endpoints WHERE id = $1", &p,
                  store_read_endpoint, out);
}

static int postgres_endpoint_list(struct store *s, const struct endpoint_filter *f, struct endpoint_list *out)
{
    char terms[FILTER_SQL_MAX];
    struct store_sql q = {.len = 0};
    struct pg_params p = {.n = 0};
    int mask = endpoint_filter_mask(f);

    store_sql_add(&q, "SELECT " STORE_ENDPOINT_COLUMNS " FROM hookd_endpoints WHERE true");
    endpoint_filter_sql(mask, '$', terms);
    store_sql_add(&q, terms);
    store_sql_add(&q, " ORDER BY id DESC LIMIT $3");
    pg_param_text(&p, 1, f->account);
    pg_param_text(&p, 2, f->before_id);
    pg_param_int(&p, 3, store_list_limit(f->limit));
    return pg_list(s, PG_ENDPOINT_LIST + mask, q.text, &p, store_read_endpoint, STORE_ROWS(out, store_free_endpoint));
}

static int postgres_endpoint_list_all(struct store *s, struct endpoint_list *out)
{
    return pg_list(s, PG_ENDPOINT_ALL, "SELECT " STORE_ENDPOINT_COLUMNS " FROM hookd_endpoints ORDER BY id", NULL,
                   store_read_endpoint, STORE_ROWS(out, store_free_endpoint));
}

/* The endpoint goes; its open deliveries become dead in the same statement. */
static int postgres_endpoint_delete(struct store *s, const char *id)
{
    struct pg_params p = {.n = 0};
    PGresult *res;
    int result;

    pg_param_text(&p, 1, id);
    result = pg_run(s, PG_ENDPOINT_DELETE,
                    "WITH del AS (DELETE FROM hookd_endpoints WHERE id = $1 RETURNING id),"
                    " kill AS (UPDATE hookd_deliveries SET status = 'dead', last_error = 'endpoint deleted',"
                    "  next_attempt_at = NULL, lease_owner = NULL, lease_until = NULL"
                    "  WHERE endpoint_id = $1 AND status IN ('pending', 'retrying') AND EXISTS (SELECT 1 FROM del)),"
                    " gone AS (DELETE FROM hookd_inflight WHERE endpoint_id = $1 AND EXISTS (SELECT 1 FROM del))"
                    " SELECT count(*) FROM del",
                    &p, &res);
    if (result)
        return result;
    result = pg_col_i64(res, 0, 0) > 0 ? 0 : HOOKD_ENOTFOUND;
    PQclear(res);
    return result;
}

static int postgres_endpoint_set_enabled(struct store *s, const char *id, bool enabled, const char *reason, int64_t at)
{
    struct pg_params p = {.n = 0};
    int64_t rows = 0;
    int result;

    pg_param_text(&p, 1, id);
    pg_param_bool(&p, 2, enabled);
    pg_param_text(&p, 3, reason);
    pg_param_i64(&p, 4, at ? at : clock_now_ms());
    result = pg_run_command(s, PG_ENDPOINT_SET_ENABLED,
                            "UPDATE hookd_endpoints SET enabled = $2,"
                            " disabled_reason = CASE WHEN $2 THEN NULL ELSE $3 END, updated_at = $4,"
                            " disabled_at = CASE WHEN $2 THEN NULL ELSE COALESCE(disabled_at, $4) END"
                            " WHERE id = $1",
                            &p, &rows);
    return result == 0 && rows == 0 ? HOOKD_ENOTFOUND : result;
}

/* A counter bumped by a trigger on every row written to hookd_endpoints (see
 * the schema), so plain-SQL edits count too. It moves only at commit, so a
 * cache never pairs a new version with old rows. */
static int postgres_endpoint_version(struct store *s, int64_t *version)
{
    return pg_meta_counter(s, PG_ENDPOINT_VERSION, PG_META_COUNTER_SQL("endpoints_version"), version);
}

const struct store_endpoint_ops postgres_endpoint_ops = {
    .insert = postgres_endpoint_insert,
    .update = postgres_endpoint_update,
    .get = postgres_endpoint_get,
    .list = postgres_endpoint_list,
    .list_all = postgres_endpoint_list_all,
    .delete = postgres_endpoint_delete,
    .set_enabled = postgres_endpoint_set_enabled,
    .version = postgres_endpoint_version,
};
