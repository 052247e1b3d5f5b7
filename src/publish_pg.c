/*
 * hookd_publish_pg(): the public C API's outbox insert through the caller's
 * own libpq connection, inside the caller's transaction. Self-contained
 * (core helpers only): it is linked into build/libhookd.a without the daemon.
 */
#include "hookd.h"

#include <inttypes.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/event_check.h"
#include "core/filter.h"
#include "core/ids.h"
#include "core/json_check.h"
#include "lib/inbox_lib.h"

/* SQLSTATEs (exact codes, then classes) and what callers see; anything else is HOOKD_EIO. */
static const struct {
    const char *state;
    int err;
} error_map[] = {
    {"23505", HOOKD_EEXISTS}, {"40001", HOOKD_EBUSY},   {"40P01", HOOKD_EBUSY},   {"57P01", HOOKD_EUNAVAIL},
    {"57P02", HOOKD_EUNAVAIL}, {"57P03", HOOKD_EUNAVAIL}, {"08", HOOKD_EUNAVAIL},
};

int lib_pg_error(PGconn *conn, const PGresult *res)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;

    if (PQstatus(conn) == CONNECTION_BAD)
        return HOOKD_EUNAVAIL;
    if (!res)
        return HOOKD_ENOMEM;
    for (size_t i = 0; state && i < sizeof error_map / sizeof error_map[0]; i++) {
        if (strncmp(state, error_map[i].state, strlen(error_map[i].state)) == 0)
            return error_map[i].err;
    }
    return HOOKD_EIO;
}

/*
 * One statement that raises no error for a taken id, so a refused publish
 * leaves the caller's transaction usable: ON CONFLICT DO NOTHING reports it as
 * zero rows. The JSON is checked here, by core/json_check.c as everywhere,
 * before anything is sent (a check in the server would cost a subtransaction
 * per call, more than the insert). The payload is stored as given, byte for byte.
 */
static const char publish_sql[] =
    "INSERT INTO hookd_outbox(id, account, event_type, resource_type, resource_id, resource_version,"
    " payload, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
    " ON CONFLICT DO NOTHING";

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

int hookd_publish_pg(struct pg_conn *conn, const struct hookd_event *ev, char id_out[HOOKD_ID_MAX])
{
    /* text, text, text, text, text, int8, text, int8 */
    static const Oid types[8] = {25, 25, 25, 25, 25, 20, 25, 20};
    char id[HOOKD_ID_MAX], version[24], created[24];
    int64_t created_at;
    const char *values[8];
    PGresult *res;
    int result;

    if (!conn || !ev || !ev->type || !ev->data_json || !event_type_is_valid(ev->type, false) ||
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
    snprintf(version, sizeof version, "%" PRId64, ev->resource_version);
    snprintf(created, sizeof created, "%" PRId64, created_at);
    values[0] = id;
    values[1] = ev->account; /* NULL is SQL NULL */
    values[2] = ev->type;
    values[3] = ev->resource_type;
    values[4] = ev->resource_id;
    values[5] = ev->has_resource_version ? version : NULL;
    values[6] = ev->data_json;
    values[7] = created;
    res = PQexecParams(conn, publish_sql, 8, types, values, NULL, NULL, 0);
    if (!res || PQresultStatus(res) != PGRES_COMMAND_OK)
        result = lib_pg_error(conn, res);
    else if (strcmp(PQcmdTuples(res), "1") != 0)
        result = HOOKD_EEXISTS;
    else
        result = 0;
    PQclear(res);
    if (result == 0 && id_out)
        snprintf(id_out, HOOKD_ID_MAX, "%s", id);
    return result;
}
