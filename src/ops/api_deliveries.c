/*
 * Admin API /v1/deliveries: list with filters (status, endpoint, event,
 * account, time), one delivery with its attempts, and the replay of one
 * delivery (a writer op, answered after its commit).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/ids.h"
#include "hub.h"
#include "ops/api_common.h"
#include "ops/list_queries.h"

void api_deliveries_list(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *d = api_begin(req, res, ctx);
    struct delivery_filter f = {.status = -1};
    struct delivery_list list = {0};
    struct query_scratch scratch;
    char next[CURSOR_TEXT_MAX];
    struct store *s;
    json_t *data;
    int rc;

    if (!d || !api_query_parse(req, res, delivery_list_query, delivery_list_query_count, &f, &scratch))
        return;
    if (!(s = api_reader_get(d, res)))
        return;
    rc = store_delivery_list(s, &f, &list);
    api_reader_put(d, s, rc);
    if (rc != 0) {
        api_reply_store_error(res, rc, "deliveries");
        return;
    }
    data = json_array();
    for (size_t i = 0; data && i < list.n; i++)
        json_array_append_new(data, api_delivery_json(&list.items[i]));
    http_reply_json(res, 200,
                    api_list_json(data, query_cursor_make(LIST_DELIVERIES,
                                                          list.n > 0 && list.n == (size_t)f.limit
                                                              ? list.items[list.n - 1].id
                                                              : NULL,
                                                          next)));
    delivery_list_free(&list);
}

void api_deliveries_get(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *d = api_begin(req, res, ctx);
    const char *id = http_param(req, "id");
    struct delivery dl = {0};
    struct attempt_list al = {0};
    char what[HOOKD_ID_MAX + 16];
    struct store *s;
    json_t *j, *arr;
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
        rc = store_attempt_list(s, id, &al);
    api_reader_put(d, s, rc);
    if (rc != 0) {
        api_reply_store_error(res, rc, what);
        goto out;
    }
    j = api_delivery_json(&dl);
    arr = json_array();
    for (size_t i = 0; arr && i < al.n; i++)
        json_array_append_new(arr, api_attempt_json(&al.items[i]));
    api_reply_with_children(res, j, "attempts", arr);
out:
    attempt_list_free(&al);
    delivery_free(&dl);
}

/* One replay; heap (it outlives the handler call), freed by its reply. */
struct replay_op {
    const struct api_ctx *api;
    char id[HOOKD_ID_MAX];
    int64_t now;
    struct delivery d; /* as replayed, or as found when it could not be */
};

static int op_replay(struct store *s, void *arg)
{
    struct replay_op *o = arg;

    return store_delivery_replay(s, o->id, o->now, &o->d);
}

/* After the commit: 202 with the delivery, pending again; the dispatchers claim it as any due row. */
static void replay_reply(void *arg, int rc, struct http_response *res)
{
    struct replay_op *o = arg;
    char what[HOOKD_ID_MAX + 16];

    if (rc == 0) {
        hub_notify(o->api->hub, HUB_DELIVERIES_DUE);
        http_reply_json(res, 202, api_delivery_json(&o->d));
    } else if (rc == HOOKD_ECONFLICT) {
        http_reply_error(res, 409, "not_replayable",
                         "delivery %s is %s: only a dead, skipped or delivered delivery can be replayed", o->id,
                         delivery_status_name(o->d.status));
    } else {
        snprintf(what, sizeof what, "delivery %s", o->id);
        api_reply_store_error(res, rc, what);
    }
    delivery_free(&o->d);
    free(o);
}

/*
 * POST /v1/deliveries/{id}/replay: a dead, skipped or delivered delivery is
 * sent again through the normal path (claims, caps, retries) with the same
 * webhook-id and a fresh timestamp and signature. One that is pending or
 * retrying (queued or in flight) answers 409 and is left as it is: the
 * store's status predicate decides, so two replays never make two sends.
 */
void api_deliveries_replay(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    const char *id = http_param(req, "id");
    struct replay_op *o;
    const char *key;
    json_t *body, *v;

    if (!api)
        return;
    if (!id || !id_is_valid(id)) {
        http_reply_error(res, 404, "not_found", "delivery %.64s not found", id ? id : "");
        return;
    }
    if (!(body = api_body_object(req, res, true)))
        return;
    json_object_foreach(body, key, v) {
        http_reply_error(res, 400, "unknown_field", "%.64s: unknown field", key);
        json_decref(body);
        return;
    }
    json_decref(body);
    if (!(o = calloc(1, sizeof *o))) {
        api_reply_store_error(res, HOOKD_ENOMEM, "delivery");
        return;
    }
    o->api = api;
    o->now = clock_now_ms();
    snprintf(o->id, sizeof o->id, "%s", id);
    api_write_async(api, req, op_replay, replay_reply, o);
}
