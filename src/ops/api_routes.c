/*
 * The route tables of the two listeners: admin (/v1/…, bearer token checked
 * by the server before the body is read) and public (/healthz, /in/{source}). Each route
 * declares its auth and body cap, and what an account token may do there
 * (its last column: ACCOUNT_READ, ACCOUNT_REPLAY, or 0 for the admin token
 * only): adding a route to what a customer's token reaches is that column.
 * Handlers live one file per resource, and filter by the caller's account.
 */
#include "ops/api.h"

#include <stdlib.h>

#include "inbound/receiver.h"
#include "ops/api_common.h"
#include "store/pool.h"
#include "ui/ui.h"

#define ACCOUNT_READ HTTP_SCOPE_READ
#define ACCOUNT_REPLAY HTTP_SCOPE_REPLAY

const struct http_route admin_routes[] = {
    {"POST", "/v1/machines", api_machines_create, HTTP_AUTH_ADMIN, API_BODY_MAX, NULL, 0},
    {"GET", "/v1/machines", api_machines_list, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, 0},
    {"GET", "/v1/machines/{name}", api_machines_get, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, 0},
    {"PATCH", "/v1/machines/{name}", api_machines_update, HTTP_AUTH_ADMIN, API_BODY_MAX, NULL, 0},
    {"DELETE", "/v1/machines/{name}", api_machines_delete, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, 0},
    {"GET", "/v1/entities/{kind}/{id}", api_entities_get, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, 0},
    {"GET", "/v1/entities/{kind}/{id}/trace", api_entities_trace, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, 0},
    {"GET", "/v1/audit", api_audit, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, 0},
    {"POST", "/v1/endpoints", api_endpoints_create, HTTP_AUTH_ADMIN, API_BODY_MAX, NULL, 0},
    {"GET", "/v1/endpoints", api_endpoints_list, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, ACCOUNT_READ},
    {"GET", "/v1/endpoints/{id}", api_endpoints_get, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, ACCOUNT_READ},
    {"PATCH", "/v1/endpoints/{id}", api_endpoints_update, HTTP_AUTH_ADMIN, API_BODY_MAX, NULL, 0},
    {"DELETE", "/v1/endpoints/{id}", api_endpoints_delete, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, 0},
    {"POST", "/v1/endpoints/{id}/disable", api_endpoints_disable, HTTP_AUTH_ADMIN, API_BODY_MAX, NULL, 0},
    {"POST", "/v1/endpoints/{id}/enable", api_endpoints_enable, HTTP_AUTH_ADMIN, API_BODY_MAX, NULL, 0},
    {"POST", "/v1/endpoints/{id}/secret/rotate", api_endpoints_rotate, HTTP_AUTH_ADMIN, API_BODY_MAX, NULL, 0},
    {"POST", "/v1/endpoints/{id}/test", api_endpoints_test, HTTP_AUTH_ADMIN, API_BODY_MAX, NULL, 0},
    {"POST", "/v1/events", api_events_publish, HTTP_AUTH_ADMIN, API_BODY_MAX, NULL, 0},
    {"GET", "/v1/events", api_events_list, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, ACCOUNT_READ},
    {"GET", "/v1/events/{id}", api_events_get, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, ACCOUNT_READ},
    {"GET", "/v1/deliveries", api_deliveries_list, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, ACCOUNT_READ},
    {"GET", "/v1/deliveries/{id}", api_deliveries_get, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, ACCOUNT_READ},
    {"POST", "/v1/sources", api_sources_create, HTTP_AUTH_ADMIN, API_BODY_MAX, NULL, 0},
    {"GET", "/v1/sources", api_sources_list, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, 0},
    {"GET", "/v1/sources/{name}", api_sources_get, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, 0},
    {"PATCH", "/v1/sources/{name}", api_sources_update, HTTP_AUTH_ADMIN, API_BODY_MAX, NULL, 0},
    {"DELETE", "/v1/sources/{name}", api_sources_delete, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, 0},
    {"GET", "/v1/sources/{name}/rejections", api_sources_rejections, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, 0},
    {"GET", "/v1/inbox", api_inbox_list, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, 0},
    {"GET", "/v1/inbox/{id}", api_inbox_get, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, 0},
    {"POST", "/v1/deliveries/{id}/replay", api_deliveries_replay, HTTP_AUTH_ADMIN, API_BODY_MAX, NULL, ACCOUNT_REPLAY},
    {"POST", "/v1/inbox/replay", api_inbox_replay_range, HTTP_AUTH_ADMIN, API_BODY_MAX, NULL, 0},
    {"POST", "/v1/inbox/{id}/replay", api_inbox_replay, HTTP_AUTH_ADMIN, API_BODY_MAX, NULL, 0},
    {"POST", "/v1/events/{id}/replay", api_events_replay, HTTP_AUTH_ADMIN, API_BODY_MAX, NULL, ACCOUNT_REPLAY},
    {"POST", "/v1/replays", api_replays_create, HTTP_AUTH_ADMIN, API_BODY_MAX, NULL, ACCOUNT_REPLAY},
    {"GET", "/v1/replays", api_replays_list, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, ACCOUNT_READ},
    {"GET", "/v1/replays/{id}", api_replays_get, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, ACCOUNT_READ},
    {"POST", "/v1/tokens", api_tokens_create, HTTP_AUTH_ADMIN, API_BODY_MAX, NULL, 0},
    {"GET", "/v1/tokens", api_tokens_list, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, 0},
    /* The caller's own record: an account token reads itself (the admin token has none: 404). */
    {"GET", "/v1/tokens/self", api_tokens_self, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, ACCOUNT_READ},
    {"DELETE", "/v1/tokens/{id}", api_tokens_revoke, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, 0},
    {"GET", "/v1/endpoints/{id}/health", api_endpoints_health, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, 0},
    {"GET", "/v1/summary", api_summary, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, 0},
    {"GET", "/v1/stats", api_stats, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, 0},
    /* The account is the path's (or the query's): a token scoped to an account is held to it in the handler. */
    {"GET", "/v1/accounts/{account}/sync", api_accounts_sync, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, ACCOUNT_READ},
    {"GET", "/v1/resources/{type}/{id}/sync", api_resources_sync, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, ACCOUNT_READ},
    {"GET", "/v1/alerts", api_alerts_list, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, 0},
    {"GET", "/v1/alerts/{id}", api_alerts_get, HTTP_AUTH_ADMIN, API_BODY_NONE, NULL, 0},
    /* The token is checked by the handler: [server] metrics_auth = none lets scrapers in without it. */
    {"GET", "/metrics", api_metrics, HTTP_AUTH_NONE, API_BODY_NONE, NULL, 0},
    {"GET", "/healthz", api_healthz, HTTP_AUTH_NONE, API_BODY_NONE, NULL, 0},
    /* The dashboard and portal pages are static; what they show comes from /v1 with the caller's token. */
    {"GET", "/ui", ui_serve, HTTP_AUTH_NONE, API_BODY_NONE, NULL, 0},
    {"GET", "/ui/*", ui_serve, HTTP_AUTH_NONE, API_BODY_NONE, NULL, 0},
    {"GET", "/portal", ui_serve, HTTP_AUTH_NONE, API_BODY_NONE, NULL, 0},
    {"GET", "/portal/*", ui_serve, HTTP_AUTH_NONE, API_BODY_NONE, NULL, 0},
    {"GET", "/lib/*", ui_serve, HTTP_AUTH_NONE, API_BODY_NONE, NULL, 0},
};
const size_t admin_routes_n = sizeof admin_routes / sizeof admin_routes[0];

/* /in/{source}: the body cap is the source's (its prepare sets it from the definition). */
const struct http_route public_routes[] = {
    {"GET", "/healthz", api_healthz, HTTP_AUTH_NONE, API_BODY_NONE, NULL, 0},
    {"POST", "/in/{source}", receiver_handle, HTTP_AUTH_SOURCE, 0, receiver_prepare, 0},
};
const size_t public_routes_n = sizeof public_routes / sizeof public_routes[0];

/* Up when a read connection can run a trivial query (a missing key still proves it) and
 * writes commit within write_timeout; degraded (503) while they are stuck. */
void api_healthz(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = ctx;
    struct store *s = NULL;
    char *value = NULL;
    int rc = api->readers ? store_pool_get(api->readers, &s) : HOOKD_EUNAVAIL;

    if (rc == 0) {
        rc = store_meta_get(s, "schema_version", &value);
        free(value);
        store_pool_put(api->readers, s, rc == HOOKD_EIO || rc == HOOKD_EUNAVAIL);
    }
    if ((rc == 0 || rc == HOOKD_ENOTFOUND) && writer_degraded(api->writer))
        http_reply_json(res, 503, json_pack("{s:s,s:s}", "status", "degraded", "store", "degraded"));
    else if (rc == 0 || rc == HOOKD_ENOTFOUND)
        http_reply_json(res, 200, json_pack("{s:s,s:s}", "status", "ok", "store", "up"));
    else
        http_reply_json(res, 503, json_pack("{s:s,s:s}", "status", "degraded", "store", "down"));
}
