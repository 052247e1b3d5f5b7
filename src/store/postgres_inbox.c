/*
 * PostgreSQL backend, inbox: the receiver's insert-or-duplicate (one
 * INSERT … ON CONFLICT DO UPDATE: concurrent copies of one event, from any
 * node, wait on the row and count as duplicates), reads and filtered lists.
 */
#include "store/postgres_internal.h"

#include <string.h>

/* Statement slots, in this family's range (postgres_internal.h). */
enum {
    PG_INBOX_INSERT = PG_INBOX,
    PG_INBOX_GET,
    PG_INBOX_LIST,
    PG_INBOX_LIST_LAST = PG_INBOX_LIST + IB_F_COMBINATIONS - 1,
    PG_INBOX_END
};
_Static_assert((int)PG_INBOX_END <= (int)PG_REJECTIONS, "the inbox statements overflow their slots");

static int postgres_inbox_insert(struct store *s, struct inbox_item *it, struct inbox_outcome *out)
{
    struct store_value v[STORE_INBOX_NVALUES];
    struct pg_params p = {.n = 0};
    PGresult *res;
    int result;

    memset(out, 0, sizeof *out);
    result = store_inbox_values(it, v);
    if (result)
        return result;
    pg_param_values(&p, v, STORE_INBOX_NVALUES);
    result = pg_run(s, PG_INBOX_INSERT,
                    "INSERT INTO hookd_inbox AS i(" STORE_INBOX_INSERT_COLUMNS ")"
                    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)"
                    " ON CONFLICT (source, event_id) DO UPDATE SET dup_count = i.dup_count + 1,"
                    " last_dup_at = excluded.received_at,"
                    " conflict_count = i.conflict_count"
                    "  + CASE WHEN i.payload_sha256 <> excluded.payload_sha256 THEN 1 ELSE 0 END"
                    " RETURNING i.id, i.dup_count, i.payload_sha256",
                    &p, &res);
    if (result)
        return result;
    if (PQntuples(res) != 1) {
        result = HOOKD_EIO;
    } else {
        pg_col_id(res, 0, 0, out->id);
        out->dup_count = (int)pg_col_i64(res, 0, 1);
        out->duplicate = out->dup_count > 0;
        out->conflicting = out->duplicate && strcmp(PQgetvalue(res, 0, 2), it->payload_sha256) != 0;
    }
    PQclear(res);
    return result;
}

static int postgres_inbox_get(struct store *s, const char *id, struct inbox_item *out)
{
    struct pg_params p = {.n = 0};

    pg_param_text(&p, 1, id);
    return pg_get(s, PG_INBOX_GET, "SELECT " STORE_INBOX_COLUMNS " FROM hookd_inbox WHERE id = $1", &p,
                  store_read_inbox, out);
}

/* Newest first (ids sort by creation time); the received_at range is since <= received_at < until. */
static int postgres_inbox_list(struct store *s, const struct inbox_filter *f, struct inbox_list *out)
{
    char terms[FILTER_SQL_MAX];
    struct store_sql q = {.len = 0};
    struct pg_params p = {.n = 0};
    int mask = inbox_filter_mask(f);

    store_sql_add(&q, "SELECT " STORE_INBOX_COLUMNS " FROM hookd_inbox WHERE true");
    inbox_filter_sql(mask, '$', terms);
    store_sql_add(&q, terms);
    store_sql_add(&q, " ORDER BY id DESC LIMIT $8");
    /* Every parameter is declared, used by this combination or not. */
    pg_param_text(&p, 1, f->source);
    pg_param_text(&p, 2, mask & IB_F_STATUS ? inbox_status_name((enum inbox_status)f->status) : NULL);
    pg_param_text(&p, 3, f->entity_kind);
    pg_param_text(&p, 4, f->entity_id);
    pg_param_i64(&p, 5, f->since);
    pg_param_i64(&p, 6, f->until);
    pg_param_text(&p, 7, f->before_id);
    pg_param_int(&p, 8, store_list_limit(f->limit));
    return pg_list(s, PG_INBOX_LIST + mask, q.text, &p, store_read_inbox, STORE_ROWS(out, store_free_inbox));
}

const struct store_inbox_ops postgres_inbox_ops = {
    .insert = postgres_inbox_insert,
    .get = postgres_inbox_get,
    .list = postgres_inbox_list,
};
