/*
 * Admin API, operations: GET /metrics (Prometheus text; the admin token
 * unless [server] metrics_auth = none), GET /v1/alerts (status, rule,
 * cursor, limit; newest first) and GET /v1/alerts/{id}.
 */
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/ids.h"
#include "ops/alerts.h"
#include "ops/api_common.h"
#include "ops/list_queries.h"
#include "ops/metrics.h"
#include "store/pool.h"

#define METRICS_MAX (4 * 1024 * 1024) /* the exposition is a few KiB: the cap is far off */
#define BEARER "Bearer "

static bool metrics_allowed(const struct api_ctx *api, struct http_request *req)
{
    const char *auth;

    if (strcmp(api->cfg->metrics_auth, "none") == 0)
        return true;
    auth = http_header(req, "Authorization");
    if (auth == NULL || strncmp(auth, BEARER, strlen(BEARER)) != 0)
        return false;
    auth += strlen(BEARER);
    return http_token_equal(api->admin_token, auth, strlen(auth));
}

void api_metrics(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = ctx;
    struct store *s = NULL;
    struct buf out;
    int rc;

    if (!metrics_allowed(api, req)) {
        http_reply_error(res, 401, "unauthorized", "a valid \"Authorization: Bearer <admin token>\" header is required");
        http_add_header(res, "WWW-Authenticate", "Bearer");
        return;
    }
    buf_init(&out, METRICS_MAX);
    /* A reader only for the store's gauges; without one (store down) the process's own metrics still answer. */
    if (api->readers != NULL && store_pool_get(api->readers, &s) != 0)
        s = NULL;
    rc = metrics_render(&out, s, api->node, clock_now_ms());
    if (s != NULL)
        store_pool_put(api->readers, s, false);
    if (rc != 0) {
        buf_free(&out);
        http_reply_error(res, 500, "internal", "cannot render the metrics: %s", hookd_strerror(rc));
        return;
    }
    size_t len = out.len;
    http_reply(res, 200, buf_steal(&out), len);
    res->content_type = "text/plain; version=0.0.4; charset=utf-8";
}

void api_alerts_list(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    struct alert_filter f = {.status = -1};
    struct alert_list list = {0};
    struct query_scratch scratch;
    struct store *s;
    json_t *data;

    if (!api_query_parse(req, res, alert_list_query, alert_list_query_count, &f, &scratch))
        return;
    if (!(s = api_reader_get(api, res)) || !api_reader_done(api, s, store_alert_list(s, &f, &list), res, "alerts"))
        return;
    data = json_array();
    for (size_t i = 0; data && i < list.n; i++)
        json_array_append_new(data, alert_json(&list.items[i]));
    api_reply_page(res, LIST_ALERTS, data, list.n, f.limit, list.n > 0 ? list.items[list.n - 1].id : NULL);
    alert_list_free(&list);
}

void api_alerts_get(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    const char *id = http_param(req, "id");
    struct alert a;
    struct store *s;

    if (!id || !id_is_valid(id)) {
        http_reply_error(res, 404, "not_found", "alert not found");
        return;
    }
    if (!(s = api_reader_get(api, res)) || !api_reader_done(api, s, store_alert_get(s, id, &a), res, "alert"))
        return;
    http_reply_json(res, 200, alert_json(&a));
    alert_free(&a);
}
