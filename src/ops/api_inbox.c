/*
 * Admin API /v1/inbox: list (filters source, status, entity_kind, entity_id,
 * since, until; cursor pagination), get, and replays (one item, or a bounded
 * range by source, status and received time, with a dry run). The item JSON is DESIGN §12's,
 * plus what an investigation needs: signature_verified, payload_sha256,
 * last_dup_at, conflicting_duplicates, next_attempt_at; get adds the payload.
 */
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/ids.h"
#include "core/timefmt.h"
#include "hub.h"
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
    struct store *s;
    json_t *data;

    if (!api_query_parse(req, res, inbox_list_query, inbox_list_query_count, &f, &scratch))
        return;
    if (!(s = api_reader_get(api, res)) || !api_reader_done(api, s, store_inbox_list(s, &f, &list), res, "inbox"))
        return;
    data = json_array();
    for (size_t i = 0; data && i < list.n; i++)
        json_array_append_new(data, inbox_item_json(&list.items[i], false));
    api_reply_page(res, LIST_INBOX, data, list.n, f.limit, list.n > 0 ? list.items[list.n - 1].id : NULL);
    inbox_list_free(&list);
}

void api_inbox_get(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    const char *id = http_param(req, "id");
    struct inbox_item it;
    struct store *s;

    if (!id || !id_is_valid(id)) {
        http_reply_error(res, 404, "not_found", "inbox item not found");
        return;
    }
    if (!(s = api_reader_get(api, res)) || !api_reader_done(api, s, store_inbox_get(s, id, &it), res, "inbox item"))
        return;
    http_reply_json(res, 200, inbox_item_json(&it, true));
    inbox_item_free(&it);
}

/* ---- replays -------------------------------------------------------------------------------- */


struct replay_op {
    const struct api_ctx *api;
    char id[HOOKD_ID_MAX];
    struct inbox_item it;
    /* range */
    struct inbox_filter f;
    char source[SOURCE_NAME_MAX];
    bool dry_run;
    int64_t count;
};

static int op_replay_one(struct store *s, void *arg)
{
    struct replay_op *o = arg;
    return store_inbox_replay(s, o->id, clock_now_ms(), &o->it);
}

static void replay_one_reply(void *arg, int rc, struct http_response *res)
{
    struct replay_op *o = arg;

    if (rc == 0) {
        hub_notify(o->api->hub, HUB_INBOX_CHANGED);
        http_reply_json(res, 202, inbox_item_json(&o->it, false));
        inbox_item_free(&o->it);
    } else if (rc == HOOKD_ECONFLICT) {
        http_reply_error(res, 409, "conflict",
                         "only a quarantined or deferred item that no worker holds can be replayed");
    } else {
        api_reply_store_error(res, rc, "inbox item");
    }
    free(o);
}

/* POST /v1/inbox/{id}/replay: back to pending (a new run: attempts from 0), due now. */
void api_inbox_replay(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    const char *id = http_param(req, "id");
    struct replay_op *o;

    if (!id || !id_is_valid(id)) {
        http_reply_error(res, 404, "not_found", "inbox item not found");
        return;
    }
    if (!(o = calloc(1, sizeof *o))) {
        http_reply_error(res, 503, "store_unavailable", "out of memory");
        return;
    }
    o->api = api;
    snprintf(o->id, sizeof o->id, "%s", id);
    api_write_async(api, req, op_replay_one, replay_one_reply, o);
}

static int op_replay_range(struct store *s, void *arg)
{
    struct replay_op *o = arg;
    return store_inbox_replay_range(s, &o->f, o->dry_run, clock_now_ms(), &o->count);
}

static void replay_range_reply(void *arg, int rc, struct http_response *res)
{
    struct replay_op *o = arg;

    if (rc == 0) {
        if (!o->dry_run && o->count > 0)
            hub_notify(o->api->hub, HUB_INBOX_CHANGED);
        http_reply_json(res, o->dry_run ? 200 : 202,
                        json_pack("{s:I,s:b}", "count", (json_int_t)o->count, "dry_run", o->dry_run));
    } else {
        api_reply_store_error(res, rc, "inbox");
    }
    free(o);
}

/* A time member: RFC 3339 text; false after a 400 naming it. */
static bool body_time(struct http_response *res, const json_t *v, const char *name, int64_t *out)
{
    if (!v || json_is_null(v))
        return true;
    if (!json_is_string(v) || rfc3339_parse(json_string_value(v), out) != 0) {
        http_reply_error(res, 400, "invalid_field", "%s: must be an RFC 3339 time", name);
        return false;
    }
    return true;
}

/*
 * POST /v1/inbox/replay {"source", "status": "quarantined|deferred", "since", "until", "limit", "dry_run"}:
 * at most limit items (default 1,000, at most 10,000), oldest first; status defaults to quarantined.
 */
void api_inbox_replay_range(struct http_request *req, struct http_response *res, void *ctx)
{
    static const char *const known[] = {"source", "status", "since", "until", "limit", "dry_run", NULL};
    struct api_ctx *api = api_begin(req, res, ctx);
    json_t *body = api_body_object(req, res, true), *v;
    struct replay_op *o = NULL;
    enum inbox_status st = INBOX_QUARANTINED;

    if (!body)
        return;
    if (!api_body_known(res, body, known))
        goto out;
    if (!(o = calloc(1, sizeof *o))) {
        http_reply_error(res, 503, "store_unavailable", "out of memory");
        goto out;
    }
    o->api = api;
    o->f.limit = REPLAY_LIMIT_DEFAULT;
    if ((v = json_object_get(body, "source")) && !json_is_null(v)) {
        if (!json_is_string(v) || !id_is_valid(json_string_value(v))) {
            http_reply_error(res, 400, "invalid_field", "source: must be a source name");
            goto out;
        }
        snprintf(o->source, sizeof o->source, "%s", json_string_value(v));
        o->f.source = o->source;
    }
    if ((v = json_object_get(body, "status")) && !json_is_null(v)) {
        if (!json_is_string(v) || inbox_status_parse(json_string_value(v), &st) != 0 ||
            (st != INBOX_QUARANTINED && st != INBOX_DEFERRED)) {
            http_reply_error(res, 400, "invalid_field", "status: must be \"quarantined\" or \"deferred\"");
            goto out;
        }
    }
    o->f.status = (int)st;
    if (!body_time(res, json_object_get(body, "since"), "since", &o->f.since) ||
        !body_time(res, json_object_get(body, "until"), "until", &o->f.until))
        goto out;
    if ((v = json_object_get(body, "limit")) && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > INBOX_REPLAY_MAX) {
            http_reply_error(res, 400, "invalid_field", "limit: must be an integer from 1 to %d", INBOX_REPLAY_MAX);
            goto out;
        }
        o->f.limit = (int)json_integer_value(v);
    }
    if ((v = json_object_get(body, "dry_run")) && !json_is_null(v)) {
        if (!json_is_boolean(v)) {
            http_reply_error(res, 400, "invalid_field", "dry_run: must be true or false");
            goto out;
        }
        o->dry_run = json_is_true(v);
    }
    json_decref(body);
    api_write_async(api, req, op_replay_range, replay_range_reply, o);
    return;
out:
    free(o);
    json_decref(body);
}
