/*
 * Admin API /v1/deliveries: list with filters (status, endpoint, event,
 * account, time) and one delivery with its attempts (the replay of one is
 * in api_replays.c, with the other replays).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/ids.h"
#include "hub.h"
#include "ops/api_common.h"
#include "ops/delivery_log.h"
#include "ops/list_queries.h"

void api_deliveries_list(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *d = api_begin(req, res, ctx);
    struct delivery_filter f = {.status = -1};
    struct delivery_list list = {0};
    struct query_scratch scratch;
    struct store *s;
    json_t *data;

    if (!d || !api_query_parse(req, res, delivery_list_query, delivery_list_query_count, &f, &scratch) ||
        !api_scope_deliveries(req, res, &f))
        return;
    if (!(s = api_reader_get(d, res)) || !api_reader_done(d, s, store_delivery_list(s, &f, &list), res, "deliveries"))
        return;
    data = json_array();
    for (size_t i = 0; data && i < list.n; i++)
        json_array_append_new(data, api_delivery_json(&list.items[i]));
    api_reply_page(res, LIST_DELIVERIES, data, list.n, f.limit, list.n > 0 ? list.items[list.n - 1].id : NULL);
    delivery_list_free(&list);
}

void api_deliveries_get(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *d = api_begin(req, res, ctx);
    const char *id = http_param(req, "id");
    struct delivery dl = {0};
    struct attempt_list al = {0};
    char what[HOOKD_ID_MAX + 16], summary[256];
    struct store *s;
    json_t *j, *arr;
    int64_t now;
    int rc;

    if (!d)
        return;
    snprintf(what, sizeof what, "delivery %.63s", id ? id : "");
    if (!id || !id_is_valid(id)) {
        api_reply_store_error(res, HOOKD_ENOTFOUND, what);
        return;
    }
    if (!(s = api_reader_get(d, res)))
        return;
    rc = store_delivery_get(s, id, &dl);
    if (rc == 0)
        rc = api_delivery_visible(req, s, &dl); /* another account's (or the operator's) does not exist for it */
    if (rc == 0)
        rc = store_attempt_list(s, id, &al);
    api_reader_put(d, s, rc);
    if (rc != 0) {
        api_reply_store_error(res, rc, what);
        goto out;
    }
    now = clock_now_ms();
    delivery_log_summary(&dl, &al, now, summary, sizeof summary);
    j = api_delivery_json(&dl);
    if (j && json_object_set_new(j, "summary", json_string(summary)) != 0) {
        json_decref(j);
        j = NULL;
    }
    arr = delivery_log_attempts(&dl, &al, now);
    api_reply_with_children(res, j, "attempts", arr);
out:
    attempt_list_free(&al);
    delivery_free(&dl);
}
