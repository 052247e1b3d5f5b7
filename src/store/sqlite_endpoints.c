/*
 * SQLite backend, endpoints: hookd_endpoints rows with their JSON columns
 * (event type filters, secrets, retry schedule), and the cache validator.
 */
#include "store/sqlite_internal.h"

#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "store/endpoint_json.h"

/* Statement slots, in this family's range (sqlite_internal.h). */
enum {
    SQ_ENDPOINT_INSERT = SQ_ENDPOINTS,
    SQ_ENDPOINT_UPDATE,
    SQ_ENDPOINT_GET,
    SQ_ENDPOINT_ALL,
    SQ_ENDPOINT_DELETE,
    SQ_ENDPOINT_KILL_DELIVERIES,
    SQ_ENDPOINT_SET_ENABLED,
    SQ_ENDPOINT_VERSION,
    SQ_ENDPOINT_LIST,
    SQ_ENDPOINT_LIST_LAST = SQ_ENDPOINT_LIST + EP_F_COMBINATIONS - 1,
    SQ_ENDPOINTS_END
};
_Static_assert((int)SQ_ENDPOINTS_END <= (int)SQ_DELIVERIES, "the endpoints statements overflow their slots");

#define ENDPOINT_ALL_MAX 1000000 /* bound of the list_all loop */

/* Insert (update = false) or whole-row update by id. */
static int endpoint_write(struct store *s, const struct endpoint *ep, bool update)
{
    static const char insert_sql[] =
        "INSERT INTO hookd_endpoints(" STORE_ENDPOINT_COLUMNS ", disabled_at)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,"
        " CASE WHEN ?7 THEN NULL ELSE ?15 END)";
    static const char update_sql[] =
        "UPDATE hookd_endpoints SET account = ?2, url = ?3, description = ?4, event_types = ?5, secrets = ?6,"
        " enabled = ?7, disabled_reason = ?8, ordering = ?9, max_in_flight = ?10, rate_limit = ?11,"
        " timeout_ms = ?12, retry_schedule = ?13, updated_at = ?15, headers = ?16,"
        " disabled_at = CASE WHEN ?7 THEN NULL ELSE COALESCE(disabled_at, ?15) END"
        " WHERE id = ?1";
    struct store_value v[STORE_ENDPOINT_NVALUES];
    struct endpoint_json j;
    sqlite3_stmt *st;
    int changes = 0, result;

    if (ep->id[0] == '\0' || !ep->url)
        return HOOKD_EINVAL;
    result = sq_stmt(s, update ? SQ_ENDPOINT_UPDATE : SQ_ENDPOINT_INSERT, update ? update_sql : insert_sql, &st);
    if (result)
        return result;
    result = endpoint_json_encode(ep, &j);
    if (result)
        return result;
    store_endpoint_values(ep, &j, clock_now_ms(), v);
    sq_bind_values(st, v, STORE_ENDPOINT_NVALUES);
    result = sq_run(s, st, &changes);
    endpoint_json_free(&j);
    if (result == 0 && changes == 0)
        result = HOOKD_ENOTFOUND;
    return result;
}

static int sqlite_endpoint_insert(struct store *s, const struct endpoint *ep) { return endpoint_write(s, ep, false); }
static int sqlite_endpoint_update(struct store *s, const struct endpoint *ep) { return endpoint_write(s, ep, true); }

static int sqlite_endpoint_get(struct store *s, const char *id, struct endpoint *out)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_ENDPOINT_GET, "SELECT " STORE_ENDPOINT_COLUMNS " FROM hookd_endpoints WHERE id = ?1",
                         &st);

    if (result)
        return result;
    sq_bind_text(st, 1, id);
    return sq_row_read(s, st, store_read_endpoint, out);
}

static int sqlite_endpoint_list(struct store *s, const struct endpoint_filter *f, struct endpoint_list *out)
{
    char terms[FILTER_SQL_MAX];
    struct store_sql q = {.len = 0};
    sqlite3_stmt *st;
    int mask = endpoint_filter_mask(f), limit = store_list_limit(f->limit), result;

    out->items = NULL;
    out->n = 0;
    store_sql_add(&q, "SELECT " STORE_ENDPOINT_COLUMNS " FROM hookd_endpoints WHERE 1");
    endpoint_filter_sql(mask, '?', terms);
    store_sql_add(&q, terms);
    store_sql_add(&q, " ORDER BY id DESC LIMIT ?3");
    result = sq_stmt(s, SQ_ENDPOINT_LIST + mask, q.text, &st);
    if (result)
        return result;
    sq_bind_text(st, 1, f->account);
    sq_bind_text(st, 2, f->before_id);
    sqlite3_bind_int(st, 3, limit);
    return sq_rows_read(s, st, (size_t)limit, store_read_endpoint, STORE_ROWS(out, store_free_endpoint));
}

static int sqlite_endpoint_list_all(struct store *s, struct endpoint_list *out)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_ENDPOINT_ALL, "SELECT " STORE_ENDPOINT_COLUMNS " FROM hookd_endpoints ORDER BY id",
                         &st);

    out->items = NULL;
    out->n = 0;
    if (result)
        return result;
    return sq_rows_read(s, st, ENDPOINT_ALL_MAX, store_read_endpoint, STORE_ROWS(out, store_free_endpoint));
}

/* The endpoint goes; its open deliveries become dead in the same unit. */
static int sqlite_endpoint_delete(struct store *s, const char *id)
{
    sqlite3_stmt *del, *kill;
    int changes = 0, result;

    result = sq_stmt(s, SQ_ENDPOINT_DELETE, "DELETE FROM hookd_endpoints WHERE id = ?1", &del);
    if (result == 0)
        result = sq_stmt(s, SQ_ENDPOINT_KILL_DELIVERIES,
                         "UPDATE hookd_deliveries SET status = 'dead', last_error = 'endpoint deleted',"
                         " next_attempt_at = NULL, lease_owner = NULL, lease_until = NULL"
                         " WHERE endpoint_id = ?1 AND status IN ('pending', 'retrying')",
                         &kill);
    if (result == 0)
        result = sq_atomic_begin(s);
    if (result)
        return result;
    sq_bind_text(del, 1, id);
    result = sq_run(s, del, &changes);
    if (result == 0 && changes == 0)
        result = HOOKD_ENOTFOUND;
    if (result == 0) {
        sq_bind_text(kill, 1, id);
        result = sq_run(s, kill, NULL);
    }
    return sq_atomic_end(s, result);
}

static int sqlite_endpoint_set_enabled(struct store *s, const char *id, bool enabled, const char *reason, int64_t at)
{
    sqlite3_stmt *st;
    int changes = 0, result = sq_stmt(s, SQ_ENDPOINT_SET_ENABLED,
                                      "UPDATE hookd_endpoints SET enabled = ?2,"
                                      " disabled_reason = CASE WHEN ?2 THEN NULL ELSE ?3 END, updated_at = ?4,"
                                      " disabled_at = CASE WHEN ?2 THEN NULL ELSE COALESCE(disabled_at, ?4) END"
                                      " WHERE id = ?1",
                                      &st);

    if (result)
        return result;
    sq_bind_text(st, 1, id);
    sqlite3_bind_int(st, 2, enabled);
    sq_bind_text(st, 3, reason);
    sqlite3_bind_int64(st, 4, at ? at : clock_now_ms());
    result = sq_run(s, st, &changes);
    return result == 0 && changes == 0 ? HOOKD_ENOTFOUND : result;
}

/* A counter bumped by triggers on every insert, update and delete of
 * hookd_endpoints (see the schema), so plain-SQL edits count too. */
static int sqlite_endpoint_version(struct store *s, int64_t *version)
{
    return sq_meta_counter(s, SQ_ENDPOINT_VERSION, SQ_META_COUNTER_SQL("endpoints_version"), version);
}

const struct store_endpoint_ops sqlite_endpoint_ops = {
    .insert = sqlite_endpoint_insert,
    .update = sqlite_endpoint_update,
    .get = sqlite_endpoint_get,
    .list = sqlite_endpoint_list,
    .list_all = sqlite_endpoint_list_all,
    .delete = sqlite_endpoint_delete,
    .set_enabled = sqlite_endpoint_set_enabled,
    .version = sqlite_endpoint_version,
};
