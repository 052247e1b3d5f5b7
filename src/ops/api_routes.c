/*
 * The route tables of the two listeners: admin (/v1/…, bearer token checked
 * by each handler) and public (/healthz). Handlers live one file per resource.
 */
#include "ops/api.h"

#include <stdlib.h>

#include "daemon.h"
#include "ops/api_common.h"
#include "store/pool.h"

const struct http_route admin_routes[] = {
    {"POST", "/v1/endpoints", api_endpoints_create},
    {"GET", "/v1/endpoints", api_endpoints_list},
    {"GET", "/v1/endpoints/{id}", api_endpoints_get},
    {"PATCH", "/v1/endpoints/{id}", api_endpoints_update},
    {"DELETE", "/v1/endpoints/{id}", api_endpoints_delete},
    {"POST", "/v1/endpoints/{id}/disable", api_endpoints_disable},
    {"POST", "/v1/endpoints/{id}/enable", api_endpoints_enable},
    {"POST", "/v1/endpoints/{id}/secret/rotate", api_endpoints_rotate},
    {"POST", "/v1/events", api_events_publish},
    {"GET", "/v1/events", api_events_list},
    {"GET", "/v1/events/{id}", api_events_get},
    {"GET", "/v1/deliveries", api_deliveries_list},
    {"GET", "/v1/deliveries/{id}", api_deliveries_get},
    {"GET", "/healthz", api_healthz},
};
const size_t admin_routes_n = sizeof admin_routes / sizeof admin_routes[0];

const struct http_route public_routes[] = {
    {"GET", "/healthz", api_healthz},
};
const size_t public_routes_n = sizeof public_routes / sizeof public_routes[0];

/* Up when a read connection can run a trivial query (a missing key still proves it). */
void api_healthz(struct http_request *req, struct http_response *res, void *ctx)
{
    struct daemon *d = ctx;
    struct store *s = NULL;
    char *value = NULL;
    int rc = d->readers ? store_pool_get(d->readers, &s) : HOOKD_EUNAVAIL;

    if (rc == 0) {
        rc = store_meta_get(s, "schema_version", &value);
        free(value);
        store_pool_put(d->readers, s, rc == HOOKD_EIO || rc == HOOKD_EUNAVAIL);
    }
    if (rc == 0 || rc == HOOKD_ENOTFOUND)
        http_reply_json(res, 200, json_pack("{s:s,s:s}", "status", "ok", "store", "up"));
    else
        http_reply_json(res, 503, json_pack("{s:s,s:s}", "status", "degraded", "store", "down"));
}
