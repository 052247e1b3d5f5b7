/*
 * PostgreSQL backend, replays: the audit record of each replay, the
 * deliveries each batch of it replayed (one statement per batch), and its
 * progress counted from those deliveries.
 */
#include "store/postgres_internal.h"

#include <stdlib.h>
#include <string.h>

/* Statement slots, in this family's range (postgres_internal.h). */
enum {
    PG_REPLAY_INSERT = PG_REPLAYS,
    PG_REPLAY_RECORD,
    PG_REPLAY_GET,
    PG_REPLAY_LIST,
    PG_REPLAY_LIST_ACCOUNT,
    PG_REPLAYS_END
};
_Static_assert((int)PG_REPLAYS_END <= (int)PG_TOKENS, "the replays statements overflow their slots");

static int postgres_replay_insert(struct store *s, const struct replay *r)
{
    struct pg_params p = {.n = 0};

    pg_param_text(&p, 1, r->id);
    pg_param_text(&p, 2, r->actor ? r->actor : "admin");
    pg_param_text(&p, 3, r->account);
    pg_param_text(&p, 4, replay_kind_name(r->kind));
    pg_param_text(&p, 5, r->filter ? r->filter : "{}");
    pg_param_i64(&p, 6, r->created_at);
    pg_param_time(&p, 7, r->finished_at);
    pg_param_int(&p, 8, r->matched);
    pg_param_int(&p, 9, r->replayed);
    pg_param_int(&p, 10, r->skipped);
    return pg_run_command(s, PG_REPLAY_INSERT,
                          "INSERT INTO hookd_replays(id, actor, account, kind, filter, created_at, finished_at, matched,"
                          " replayed, skipped) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                          &p, NULL);
}

/* The counts and the items in one statement: a batch costs one round trip. */
static int postgres_replay_record(struct store *s, const char *id, const char *const *delivery_ids, size_t n,
                                  int skipped, bool done, int64_t at)
{
    struct pg_params p = {.n = 0};
    struct pg_array ids = {0};
    const char *lit;
    PGresult *res;
    int result;

    for (size_t i = 0; i < n; i++)
        pg_array_text(&ids, delivery_ids[i]);
    if (!(lit = pg_array_end(&ids))) {
        pg_array_free(&ids);
        return HOOKD_ENOMEM;
    }
    pg_param_text(&p, 1, id);
    pg_param_text_array(&p, 2, lit);
    pg_param_int(&p, 3, skipped);
    pg_param_bool(&p, 4, done);
    pg_param_i64(&p, 5, at);
    result = pg_run(s, PG_REPLAY_RECORD,
                    "WITH r AS (UPDATE hookd_replays SET replayed = replayed + cardinality($2::text[]),"
                    "  skipped = skipped + $3, finished_at = CASE WHEN $4 THEN $5 ELSE finished_at END"
                    "  WHERE id = $1 RETURNING id),"
                    " i AS (INSERT INTO hookd_replay_items(replay_id, delivery_id)"
                    "  SELECT r.id, u FROM r, unnest($2::text[]) u ON CONFLICT DO NOTHING)"
                    " SELECT count(*) FROM r",
                    &p, &res);
    pg_array_free(&ids);
    if (result)
        return result;
    if (PQntuples(res) < 1 || pg_col_i64(res, 0, 0) == 0)
        result = HOOKD_ENOTFOUND;
    PQclear(res);
    return result;
}

#define REPLAY_SELECT "SELECT " STORE_REPLAY_COLUMNS " FROM hookd_replays r"

static int postgres_replay_get(struct store *s, const char *id, struct replay *out)
{
    return pg_get_by_id(s, PG_REPLAY_GET, PG_BY_ID_SQL(REPLAY_SELECT, "r.id"), id, store_read_replay, out,
                        sizeof *out);
}

static int postgres_replay_list(struct store *s, const struct replay_filter *f, struct replay_list *out)
{
    return pg_list_newest(s, PG_REPLAY_LIST, PG_NEWEST_SQL(REPLAY_SELECT, "r.id"), PG_REPLAY_LIST_ACCOUNT,
                          PG_NEWEST_OF_SQL(REPLAY_SELECT, "r.id", "r.account"), f->before_id, f->account, f->limit,
                          store_read_replay, STORE_ROWS(out, store_free_replay));
}

const struct store_replay_ops postgres_replay_ops = {
    .insert = postgres_replay_insert,
    .record = postgres_replay_record,
    .get = postgres_replay_get,
    .list = postgres_replay_list,
};
