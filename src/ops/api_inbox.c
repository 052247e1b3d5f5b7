/*
 * Admin API /v1/inbox: list (filters source, status, entity_kind, entity_id,
 * since, until; cursor pagination) and get. The item JSON is DESIGN §12's,
 * plus what an investigation needs: signature_verified, payload_sha256,
 * last_dup_at, conflicting_duplicates, next_attempt_at; get adds the payload.
 */
#include <stdlib.h>
#include <string.h>

#include "core/ids.h"
#include "ops/api_common.h"
#include "ops/list_queries.h"

static json_t *inbox_item_json(const struct inbox_item *it, bool with_payload)
{
    json_t *entity = it->entity_kind || it->entity_id
                         ? json_pack("{s:o,s:o}", "kind", api_json_str(it->entity_kind), "id",
                                     api_json_str(it->entity_id))
                         : json_null();
    json_t *j = json_pack(
        "{s:s,s:s,s:s,s:o,s:o*,s:o,s:s,s:o,s:i,s:i,s:o,s:o,s:o,s:b,s:s,s:o,s:i,s:o}", "id", it->id, "source",
        it->source, "event_id", it->event_id, "event_type", api_json_str(it->event_type), "entity", entity,
        "version", it->has_version ? json_integer(it->version) : json_null(), "status", inbox_status_name(it->status),
        "result", api_json_str(it->result), "attempts", it->attempts, "dup_count", it->dup_count, "received_at",
        api_json_time(it->received_at), "processed_at", api_json_time(it->processed_at), "error",
        api_json_str(it->error), "signature_verified", it->signature_verified, "payload_sha256", it->payload_sha256,
        "last_dup_at", api_json_time(it->last_dup_at), "conflicting_duplicates", it->conflict_count,
        "next_attempt_at", api_json_time(it->next_attempt_at));

    if (j && with_payload) {
        json_t *payload = json_loads(it->payload, JSON_DECODE_ANY, NULL);
        if (json_object_set_new(j, "payload", payload ? payload : json_null()) != 0) {
            json_decref(j);
            return NULL;
        }
    }
    return j;
}

void api_inbox_list(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    struct inbox_filter f = {.status = -1};
    struct inbox_list list = {0};
    struct query_scratch scratch;
    char next[CURSOR_TEXT_MAX];
    struct store *s;
    json_t *data;
    int rc;

    if (!api_query_parse(req, res, inbox_list_query, inbox_list_query_count, &f, &scratch))
        return;
    if (!(s = api_reader_get(api, res)))
        return;
    rc = store_inbox_list(s, &f, &list);
    api_reader_put(api, s, rc);
    if (rc != 0) {
        api_reply_store_error(res, rc, "inbox");
        return;
    }
    data = json_array();
    for (size_t i = 0; data && i < list.n; i++)
        json_array_append_new(data, inbox_item_json(&list.items[i], false));
    http_reply_json(res, 200,
                    api_list_json(data, query_cursor_make(LIST_INBOX,
                                                          list.n == (size_t)f.limit && list.n > 0
                                                              ? list.items[list.n - 1].id
                                                              : NULL,
                                                          next)));
    inbox_list_free(&list);
}

void api_inbox_get(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    const char *id = http_param(req, "id");
    struct inbox_item it;
    struct store *s;
    int rc;

    if (!id || !id_is_valid(id)) {
        http_reply_error(res, 404, "not_found", "inbox item not found");
        return;
    }
    if (!(s = api_reader_get(api, res)))
        return;
    rc = store_inbox_get(s, id, &it);
    api_reader_put(api, s, rc);
    if (rc != 0) {
        api_reply_store_error(res, rc, "inbox item");
        return;
    }
    http_reply_json(res, 200, inbox_item_json(&it, true));
    inbox_item_free(&it);
}
