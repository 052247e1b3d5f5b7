/*
 * hookd_publish(): the public C API's outbox insert through the caller's own
 * SQLite connection, inside the caller's transaction. Self-contained (core
 * helpers only): it is linked into build/libhookd.a without the daemon.
 */
#include "hookd.h"

#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "core/event_check.h"
#include "core/filter.h"
#include "core/ids.h"
#include "core/json_check.h"
#include "lib/inbox_lib.h"

int lib_sqlite_error(sqlite3 *db, int rc)
{
    int ext = sqlite3_extended_errcode(db);

    switch (rc & 0xff) {
    case SQLITE_CONSTRAINT:
        return ext == SQLITE_CONSTRAINT_UNIQUE || ext == SQLITE_CONSTRAINT_PRIMARYKEY ? HOOKD_EEXISTS : HOOKD_EINVAL;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return HOOKD_EBUSY;
    case SQLITE_NOMEM:
        return HOOKD_ENOMEM;
    default:
        return HOOKD_EIO;
    }
}

/* The outbox's check (core/event_check.h) before the insert, so a refusal leaves the caller's transaction usable. */
static bool labels_valid(const struct hookd_event *ev)
{
    const char *const labels[] = {ev->account, ev->resource_type, ev->resource_id};

    for (size_t i = 0; i < sizeof labels / sizeof labels[0]; i++) {
        if (labels[i] && event_label_problem(labels[i], strlen(labels[i])) != NULL)
            return false;
    }
    return true;
}

int hookd_publish(struct sqlite3 *db, const struct hookd_event *ev, char id_out[HOOKD_ID_MAX])
{
    static const char sql[] = "INSERT INTO hookd_outbox(id, account, event_type, resource_type, resource_id,"
                              " resource_version, payload, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
    char id[HOOKD_ID_MAX];
    int64_t created_at;
    sqlite3_stmt *st = NULL;
    int rc, result;

    if (!db || !ev || !ev->type || !ev->data_json || !event_type_is_valid(ev->type, false) ||
        !json_text_valid(ev->data_json, strlen(ev->data_json)) || !labels_valid(ev))
        return HOOKD_EINVAL;
    if (ev->id) {
        if (!id_is_valid(ev->id))
            return HOOKD_EINVAL;
        snprintf(id, sizeof id, "%s", ev->id);
        created_at = clock_now_ms();
    } else {
        created_at = id_new_time(id, "evt_"); /* one millisecond for both (store/stats_sql.h) */
    }
    rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK) {
        result = lib_sqlite_error(db, rc);
        goto out;
    }
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, ev->account, -1, SQLITE_STATIC); /* NULL binds SQL NULL */
    sqlite3_bind_text(st, 3, ev->type, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, ev->resource_type, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, ev->resource_id, -1, SQLITE_STATIC);
    if (ev->has_resource_version)
        sqlite3_bind_int64(st, 6, ev->resource_version);
    sqlite3_bind_text(st, 7, ev->data_json, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 8, created_at);
    rc = sqlite3_step(st);
    result = rc == SQLITE_DONE ? 0 : lib_sqlite_error(db, rc);
    if (result == 0 && id_out)
        snprintf(id_out, HOOKD_ID_MAX, "%s", id);
out:
    sqlite3_finalize(st);
    return result;
}
