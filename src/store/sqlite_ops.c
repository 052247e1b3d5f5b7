/*
 * SQLite backend, operations: hookd_alerts (open once per rule and subject,
 * resolve, read), the alert rules' signals, the metrics' figures, and the
 * retention purge in small batches.
 */
#include "store/sqlite_internal.h"

#include <string.h>

#include "core/ids.h"
#include "store/health_sql.h"

/* Statement slots, in this family's range (sqlite_internal.h). */
enum {
    SQ_ALERT_OPEN = SQ_OPS,
    SQ_ALERT_RESOLVE,
    SQ_ALERT_GET,
    SQ_ALERT_LIST, /* + 4 masks: status present (1), rule present (2) */
    SQ_ALERT_SIGNALS = SQ_ALERT_LIST + 4,
    SQ_FIGURES,
    SQ_PURGE_ATTEMPTS,
    SQ_PURGE_DELIVERIES,
    SQ_PURGE_WINDOW,
    SQ_PURGE_EVENTS,
    SQ_PURGE_INBOX,
    SQ_OPS_END
};
_Static_assert((int)SQ_OPS_END <= (int)SQ_HEALTH, "the operations statements overflow their slots");

static int sqlite_alert_open(struct store *s, struct alert *a, int64_t quiet_since)
{
    sqlite3_stmt *st;
    int changes = 0;
    int result = sq_stmt(s, SQ_ALERT_OPEN,
                         "INSERT INTO hookd_alerts(id, rule, subject, message, details, opened_at)"
                         " SELECT ?1, ?2, ?3, ?4, ?5, ?6 WHERE NOT EXISTS (SELECT 1 FROM hookd_alerts"
                         "  WHERE rule = ?2 AND subject = ?3 AND (resolved_at IS NULL OR resolved_at > ?7))"
                         " ON CONFLICT DO NOTHING",
                         &st);

    if (result)
        return result;
    if (a->id[0] == '\0')
        id_new(a->id, "alr_");
    a->resolved_at = 0;
    sq_bind_text(st, 1, a->id);
    sq_bind_text(st, 2, a->rule);
    sq_bind_text(st, 3, a->subject);
    sq_bind_text(st, 4, a->message);
    sq_bind_text(st, 5, a->details);
    sqlite3_bind_int64(st, 6, a->opened_at);
    sqlite3_bind_int64(st, 7, quiet_since);
    result = sq_run(s, st, &changes);
    return result ? result : changes == 1 ? 0 : HOOKD_EEXISTS;
}

static int sqlite_alert_resolve(struct store *s, const char *id, int64_t at, struct alert *out)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_ALERT_RESOLVE,
                         "UPDATE hookd_alerts SET resolved_at = ?2 WHERE id = ?1 AND resolved_at IS NULL"
                         " RETURNING " STORE_ALERT_COLUMNS,
                         &st);

    if (result)
        return result;
    sq_bind_text(st, 1, id);
    sqlite3_bind_int64(st, 2, at);
    return sq_row_read(s, st, store_read_alert, out);
}

static int sqlite_alert_get(struct store *s, const char *id, struct alert *out)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_ALERT_GET, "SELECT " STORE_ALERT_COLUMNS " FROM hookd_alerts WHERE id = ?1", &st);

    if (result)
        return result;
    sq_bind_text(st, 1, id);
    return sq_row_read(s, st, store_read_alert, out);
}

static int sqlite_alert_list(struct store *s, const struct alert_filter *f, struct alert_list *out)
{
    static const char *const sqls[4] = {
        "SELECT " STORE_ALERT_COLUMNS " FROM hookd_alerts WHERE id < ?1 ORDER BY id DESC LIMIT ?2",
        "SELECT " STORE_ALERT_COLUMNS " FROM hookd_alerts WHERE id < ?1 AND (resolved_at IS NULL) = (?3 = 0)"
        " ORDER BY id DESC LIMIT ?2",
        "SELECT " STORE_ALERT_COLUMNS " FROM hookd_alerts WHERE id < ?1 AND rule = ?4 ORDER BY id DESC LIMIT ?2",
        "SELECT " STORE_ALERT_COLUMNS " FROM hookd_alerts WHERE id < ?1 AND (resolved_at IS NULL) = (?3 = 0)"
        " AND rule = ?4 ORDER BY id DESC LIMIT ?2",
    };
    int mask = (f->status >= 0 ? 1 : 0) | (f->rule ? 2 : 0);
    int limit = store_list_limit(f->limit);
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_ALERT_LIST + mask, sqls[mask], &st);

    out->items = NULL;
    out->n = 0;
    if (result)
        return result;
    sq_bind_text(st, 1, f->before_id ? f->before_id : "\x7f");
    sqlite3_bind_int(st, 2, limit);
    if (mask & 1)
        sqlite3_bind_int(st, 3, f->status);
    if (mask & 2)
        sq_bind_text(st, 4, f->rule);
    return sq_rows_read(s, st, (size_t)limit, store_read_alert, STORE_ROWS(out, store_free_alert));
}

static int sqlite_alert_signals(struct store *s, int64_t since, struct alert_signal_list *out)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_ALERT_SIGNALS, STORE_SIGNALS_SQL("?1", "enabled = 0", "(" STORE_ATTEMPTS_SINCE_SQL("?1") ")",
                                                                  HEALTH_STATUS_OR("d."), "hookd_deliveries"),
                         &st);

    out->items = NULL;
    out->n = 0;
    if (result)
        return result;
    sqlite3_bind_int64(st, 1, since);
    return sq_rows_read(s, st, STORE_SIGNALS_MAX, store_read_signal, STORE_ROWS(out, store_free_signal));
}

static int sqlite_figures(struct store *s, int64_t now, struct store_figures *out)
{
    struct alert_signal_list rows = {0};
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_FIGURES,
                         STORE_FIGURES_SQL("SELECT count(*) FROM hookd_deliveries WHERE lease_owner IS NOT NULL"
                                           " AND lease_until >= ?1", ""),
                         &st);

    if (result)
        return result;
    sqlite3_bind_int64(st, 1, now);
    result = sq_rows_read(s, st, STORE_SIGNALS_MAX, store_read_signal, STORE_ROWS(&rows, store_free_signal));
    if (result == 0)
        store_figures_fold(&rows, out);
    alert_signal_list_free(&rows);
    return result;
}

/* The batch: the oldest final deliveries (hookd_deliveries_final), attempts first. */
#define PURGE_BATCH_SQL                                                                                   \
    "SELECT id FROM hookd_deliveries INDEXED BY hookd_deliveries_final"                             \
    " WHERE status IN ('delivered', 'superseded') AND created_at < ?1"                            \
    " ORDER BY created_at LIMIT ?2"

static int sqlite_purge_deliveries(struct store *s, int64_t before, int limit, int64_t *purged)
{
    sqlite3_stmt *att, *del;
    int changes = 0;
    int result = sq_stmt(s, SQ_PURGE_ATTEMPTS,
                         "DELETE FROM hookd_attempts WHERE delivery_id IN (" PURGE_BATCH_SQL ")", &att);

    *purged = 0;
    if (result == 0)
        result = sq_stmt(s, SQ_PURGE_DELIVERIES,
                         "DELETE FROM hookd_deliveries WHERE id IN (" PURGE_BATCH_SQL ")", &del);
    if (result == 0)
        result = sq_atomic_begin(s);
    if (result)
        return result;
    sqlite3_bind_int64(att, 1, before);
    sqlite3_bind_int(att, 2, limit);
    result = sq_run(s, att, NULL);
    if (result == 0) {
        sqlite3_bind_int64(del, 1, before);
        sqlite3_bind_int(del, 2, limit);
        result = sq_run(s, del, &changes);
    }
    *purged = changes;
    return sq_atomic_end(s, result);
}

static int sqlite_purge_events(struct store *s, int64_t after_seq, int64_t before, int limit, int64_t *next_seq,
                               int64_t *purged)
{
    sqlite3_stmt *win, *del;
    int changes = 0;
    /* The window's last seq (n) and its first row created at or after `before` (m; NULL: none). */
    int result = sq_stmt(s, SQ_PURGE_WINDOW,
                         "SELECT max(seq), min(CASE WHEN created_at >= ?2 THEN seq END), count(*) FROM"
                         " (SELECT seq, created_at FROM hookd_outbox WHERE seq > ?1 ORDER BY seq LIMIT ?3)",
                         &win);
    int64_t last = 0, fresh = 0, rows = 0;

    *purged = 0;
    *next_seq = 0;
    if (result == 0)
        result = sq_stmt(s, SQ_PURGE_EVENTS,
                         "DELETE FROM hookd_outbox WHERE seq > ?1 AND seq <= ?2 AND dispatched_at IS NOT NULL"
                         " AND created_at < ?3 AND NOT EXISTS (SELECT 1 FROM hookd_deliveries d"
                         "  WHERE d.event_id = hookd_outbox.id)",
                         &del);
    if (result)
        return result;
    sqlite3_bind_int64(win, 1, after_seq);
    sqlite3_bind_int64(win, 2, before);
    sqlite3_bind_int(win, 3, limit);
    if (sqlite3_step(win) == SQLITE_ROW) {
        last = sqlite3_column_int64(win, 0);
        fresh = sqlite3_column_int64(win, 1);
        rows = sqlite3_column_int64(win, 2);
    } else {
        result = sq_error(s, sqlite3_errcode(s->db));
    }
    sq_reset(win);
    if (result || rows == 0)
        return result;
    if (fresh > 0)
        last = fresh - 1;
    sqlite3_bind_int64(del, 1, after_seq);
    sqlite3_bind_int64(del, 2, last);
    sqlite3_bind_int64(del, 3, before);
    result = sq_run(s, del, &changes);
    *purged = changes;
    *next_seq = fresh > 0 || rows < limit ? 0 : last;
    return result;
}

static int sqlite_purge_inbox(struct store *s, int64_t before, int limit, int64_t *purged)
{
    sqlite3_stmt *st;
    int changes = 0;
    int result = sq_stmt(s, SQ_PURGE_INBOX,
                         "UPDATE hookd_inbox SET payload = '' WHERE id IN (SELECT id FROM hookd_inbox"
                         " INDEXED BY hookd_inbox_retention"
                         " WHERE status = 'processed' AND payload <> '' AND processed_at < ?1"
                         " ORDER BY processed_at LIMIT ?2)",
                         &st);

    *purged = 0;
    if (result)
        return result;
    sqlite3_bind_int64(st, 1, before);
    sqlite3_bind_int(st, 2, limit);
    result = sq_run(s, st, &changes);
    *purged = changes;
    return result;
}

const struct store_alert_ops sqlite_alert_ops = {
    .open = sqlite_alert_open,
    .resolve = sqlite_alert_resolve,
    .get = sqlite_alert_get,
    .list = sqlite_alert_list,
    .signals = sqlite_alert_signals,
};

const struct store_upkeep_ops sqlite_upkeep_ops = {
    .figures = sqlite_figures,
    .purge_deliveries = sqlite_purge_deliveries,
    .purge_events = sqlite_purge_events,
    .purge_inbox = sqlite_purge_inbox,
};
