/*
 * PostgreSQL backend, operations: hookd_alerts (open once per rule and
 * subject across nodes: the partial unique index makes a concurrent second
 * insert wait for the first and then do nothing), the alert rules' signals,
 * the metrics' figures, and the retention purge in small batches (rows other
 * nodes' purges hold are skipped, never waited for).
 */
#include "store/postgres_internal.h"

#include <string.h>

#include "core/ids.h"
#include "store/health_sql.h"

/* Statement slots, in this family's range (postgres_internal.h). */
enum {
    PG_ALERT_OPEN = PG_OPS,
    PG_ALERT_RESOLVE,
    PG_ALERT_GET,
    PG_ALERT_LIST,
    PG_ALERT_SIGNALS,
    PG_FIGURES,
    PG_PURGE_DELIVERIES,
    PG_PURGE_WINDOW,
    PG_PURGE_EVENTS,
    PG_PURGE_INBOX,
    PG_OPS_END
};
_Static_assert((int)PG_OPS_END <= (int)PG_HEALTH, "the operations statements overflow their slots");

static int postgres_alert_open(struct store *s, struct alert *a, int64_t quiet_since)
{
    struct pg_params p = {.n = 0};
    int64_t rows = 0;
    int result;

    if (a->id[0] == '\0')
        id_new(a->id, "alr_");
    a->resolved_at = 0;
    pg_param_text(&p, 1, a->id);
    pg_param_text(&p, 2, a->rule);
    pg_param_text(&p, 3, a->subject);
    pg_param_text(&p, 4, a->message);
    pg_param_text(&p, 5, a->details);
    pg_param_i64(&p, 6, a->opened_at);
    pg_param_i64(&p, 7, quiet_since);
    result = pg_run_command(s, PG_ALERT_OPEN,
                            "INSERT INTO hookd_alerts(id, rule, subject, message, details, opened_at)"
                            " SELECT $1, $2, $3, $4, $5, $6 WHERE NOT EXISTS (SELECT 1 FROM hookd_alerts"
                            "  WHERE rule = $2 AND subject = $3 AND (resolved_at IS NULL OR resolved_at > $7))"
                            " ON CONFLICT DO NOTHING",
                            &p, &rows);
    return result ? result : rows == 1 ? 0 : HOOKD_EEXISTS;
}

static int postgres_alert_resolve(struct store *s, const char *id, int64_t at, struct alert *out)
{
    struct pg_params p = {.n = 0};

    pg_param_text(&p, 1, id);
    pg_param_i64(&p, 2, at);
    return pg_get(s, PG_ALERT_RESOLVE,
                  "UPDATE hookd_alerts SET resolved_at = $2 WHERE id = $1 AND resolved_at IS NULL"
                  " RETURNING " STORE_ALERT_COLUMNS,
                  &p, store_read_alert, out);
}

static int postgres_alert_get(struct store *s, const char *id, struct alert *out)
{
    struct pg_params p = {.n = 0};

    pg_param_text(&p, 1, id);
    return pg_get(s, PG_ALERT_GET, "SELECT " STORE_ALERT_COLUMNS " FROM hookd_alerts WHERE id = $1", &p,
                  store_read_alert, out);
}

/* One plan for every filter combination: the filters are few and the table small. */
static int postgres_alert_list(struct store *s, const struct alert_filter *f, struct alert_list *out)
{
    struct pg_params p = {.n = 0};

    pg_param_text(&p, 1, f->before_id ? f->before_id : "\x7f");
    pg_param_int(&p, 2, store_list_limit(f->limit));
    pg_param_int(&p, 3, f->status);
    pg_param_text(&p, 4, f->rule);
    return pg_list(s, PG_ALERT_LIST,
                   "SELECT " STORE_ALERT_COLUMNS " FROM hookd_alerts WHERE id < $1"
                   " AND ($3 < 0 OR (resolved_at IS NULL) = ($3 = 0)) AND ($4::text IS NULL OR rule = $4)"
                   " ORDER BY id DESC LIMIT $2",
                   &p, store_read_alert, STORE_ROWS(out, store_free_alert));
}

/*
 * The deliveries sent before their first result (DESIGN §3, "Unrecorded
 * deliveries") have no row in hookd_deliveries: the signals and figures count
 * them from their leases, pending, and the first attempt of each delivery
 * that had one is kept in its row (attempt1_*, schema 33), found by the
 * partial index on its start. hookd_inflight is one row per lease, so its
 * scans stay small.
 */
#define UNRECORDED_FROM " FROM hookd_inflight WHERE event_id IS NOT NULL"
#define INLINE_ATTEMPTS_SINCE                                                                       \
    " UNION ALL SELECT endpoint_id, account, attempt1_status_code FROM hookd_deliveries"            \
    " WHERE attempt1_started_at >= $1"

static int postgres_alert_signals(struct store *s, int64_t since, struct alert_signal_list *out)
{
    struct pg_params p = {.n = 0};

    pg_param_i64(&p, 1, since);
    return pg_list_planned(s, PG_ALERT_SIGNALS,
                           STORE_SIGNALS_SQL("$1", "NOT enabled",
                                             "(" STORE_ATTEMPTS_SINCE_SQL("$1") INLINE_ATTEMPTS_SINCE ")",
                                             HEALTH_STATUS_IN("d."), "hookd_deliveries_all") " LIMIT 20000",
                           &p, store_read_signal, STORE_ROWS(out, store_free_signal));
}

static int postgres_figures(struct store *s, int64_t now, struct store_figures *out)
{
    struct alert_signal_list rows = {0};
    struct pg_params p = {.n = 0};
    int result;

    pg_param_i64(&p, 1, now);
    result = pg_list_planned(s, PG_FIGURES,
                             STORE_FIGURES_SQL("SELECT count(*) FROM hookd_inflight WHERE lease_until >= $1",
                                               " UNION ALL SELECT 0, 'pending', NULL, count(*), 0" UNRECORDED_FROM
                                               " UNION ALL SELECT 3, NULL, NULL, COALESCE(min(created_at), 0), 0"
                                               UNRECORDED_FROM),
                             &p, store_read_signal, STORE_ROWS(&rows, store_free_signal));
    if (result == 0)
        store_figures_fold(&rows, out);
    alert_signal_list_free(&rows);
    return result;
}

/* One statement: the batch locked (rows another purge holds are skipped), its attempts, then the rows.
 * The status test is repeated on the DELETE itself, which READ COMMITTED re-checks on a row a replay
 * changed meanwhile: a delivery sent again is never purged. */
static int postgres_purge_deliveries(struct store *s, int64_t before, int limit, int64_t *purged)
{
    struct pg_params p = {.n = 0};
    PGresult *res;
    int result;

    *purged = 0;
    pg_param_i64(&p, 1, before);
    pg_param_int(&p, 2, limit);
    result = pg_run(s, PG_PURGE_DELIVERIES,
                    "WITH batch AS (SELECT id FROM hookd_deliveries WHERE status IN ('delivered', 'superseded')"
                    "  AND created_at < $1 ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED),"
                    " att AS (DELETE FROM hookd_attempts WHERE delivery_id IN (SELECT id FROM batch))"
                    " DELETE FROM hookd_deliveries WHERE id IN (SELECT id FROM batch)"
                    "  AND status IN ('delivered', 'superseded') RETURNING 1",
                    &p, &res);
    if (result)
        return result;
    *purged = PQntuples(res);
    PQclear(res);
    return 0;
}

static int postgres_purge_events(struct store *s, int64_t after_seq, int64_t before, int limit, int64_t *next_seq,
                                 int64_t *purged)
{
    struct pg_params p = {.n = 0};
    PGresult *res;
    int64_t last, fresh, rows, deleted = 0;
    int result;

    *purged = 0;
    *next_seq = 0;
    pg_param_i64(&p, 1, after_seq);
    pg_param_i64(&p, 2, before);
    pg_param_int(&p, 3, limit);
    result = pg_run(s, PG_PURGE_WINDOW,
                    "SELECT COALESCE(max(seq), 0), COALESCE(min(CASE WHEN created_at >= $2 THEN seq END), 0),"
                    " count(*) FROM (SELECT seq, created_at FROM hookd_outbox WHERE seq > $1 ORDER BY seq LIMIT $3) w",
                    &p, &res);
    if (result)
        return result;
    last = pg_col_i64(res, 0, 0);
    fresh = pg_col_i64(res, 0, 1);
    rows = pg_col_i64(res, 0, 2);
    PQclear(res);
    if (rows == 0)
        return 0;
    if (fresh > 0)
        last = fresh - 1;
    struct pg_params q = {.n = 0};
    pg_param_i64(&q, 1, after_seq);
    pg_param_i64(&q, 2, last);
    pg_param_i64(&q, 3, before);
    /* A delivery inserted meanwhile by a fan-out holds its event: the fan-out locked the row first. */
    result = pg_run_command(s, PG_PURGE_EVENTS,
                            "WITH batch AS (SELECT seq FROM hookd_outbox WHERE seq > $1 AND seq <= $2"
                            "  AND dispatched_at IS NOT NULL AND created_at < $3 FOR UPDATE SKIP LOCKED)"
                            " DELETE FROM hookd_outbox o USING batch WHERE o.seq = batch.seq"
                            "  AND NOT EXISTS (SELECT 1 FROM hookd_deliveries d WHERE d.event_id = o.id)"
                            /* nor one sent before its row was written (unrecorded), whose row needs the event */
                            "  AND NOT EXISTS (SELECT 1 FROM hookd_inflight x WHERE x.event_id = o.id)",
                            &q, &deleted);
    if (result)
        return result;
    *purged = deleted;
    *next_seq = fresh > 0 || rows < limit ? 0 : last;
    return 0;
}

static int postgres_purge_inbox(struct store *s, int64_t before, int limit, int64_t *purged)
{
    struct pg_params p = {.n = 0};

    *purged = 0;
    pg_param_i64(&p, 1, before);
    pg_param_int(&p, 2, limit);
    return pg_run_command(s, PG_PURGE_INBOX,
                          "WITH batch AS (SELECT id FROM hookd_inbox WHERE status = 'processed' AND payload <> ''"
                          "  AND processed_at < $1 ORDER BY processed_at LIMIT $2 FOR UPDATE SKIP LOCKED)"
                          " UPDATE hookd_inbox i SET payload = '' FROM batch WHERE i.id = batch.id"
                          "  AND i.status = 'processed'",
                          &p, purged);
}

const struct store_alert_ops postgres_alert_ops = {
    .open = postgres_alert_open,
    .resolve = postgres_alert_resolve,
    .get = postgres_alert_get,
    .list = postgres_alert_list,
    .signals = postgres_alert_signals,
};

const struct store_upkeep_ops postgres_upkeep_ops = {
    .figures = postgres_figures,
    .purge_deliveries = postgres_purge_deliveries,
    .purge_events = postgres_purge_events,
    .purge_inbox = postgres_purge_inbox,
};
