/*
 * Admin API /v1/events: publish into the outbox (with Idempotency-Key), list,
 * and one event with its deliveries. A publish is one writer op, answered
 * from the writer thread after its commit (the connection waits suspended);
 * the hub is told that the outbox changed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/event_check.h"
#include "core/filter.h"
#include "core/ids.h"
#include "hub.h"
#include "ops/api_common.h"
#include "ops/list_queries.h"

/* A publish; heap (it outlives the handler call), freed by its reply. */
struct event_op {
    const struct api_ctx *api;
    struct event ev;
    struct event existing; /* filled on EEXISTS */
};

static void event_op_free(struct event_op *o)
{
    event_free(&o->ev);
    event_free(&o->existing);
    free(o);
}

static int op_publish(struct store *s, void *arg)
{
    struct event_op *o = arg;
    return store_event_insert(s, &o->ev, &o->existing);
}

static int dup_field(char **slot, const char *value)
{
    return value && !(*slot = strdup(value)) ? HOOKD_ENOMEM : 0;
}

static int event_resource(struct event *ev, const json_t *v, struct api_error *err)
{
    const char *key;
    json_t *item;

    if (!v || json_is_null(v))
        return 0;
    if (!json_is_object(v)) {
        api_error_set(err, 400, "invalid_field", "resource: must be an object {\"type\", \"id\", \"version\"}");
        return HOOKD_EINVAL;
    }
    json_object_foreach((json_t *)v, key, item) {
        if (strcmp(key, "version") == 0) {
            if (json_is_null(item))
                continue;
            if (!json_is_integer(item) || json_integer_value(item) < 0) {
                api_error_set(err, 400, "invalid_field", "resource.version: must be a non-negative integer");
                return HOOKD_EINVAL;
            }
            ev->has_resource_version = true;
            ev->resource_version = json_integer_value(item);
            continue;
        }
        char **slot = strcmp(key, "type") == 0 ? &ev->resource_type : strcmp(key, "id") == 0 ? &ev->resource_id : NULL;
        if (!slot) {
            api_error_set(err, 400, "unknown_field", "resource.%.64s: unknown field", key);
            return HOOKD_EINVAL;
        }
        if (json_is_null(item))
            continue;
        const char *s = json_string_value(item);
        if (!s || s[0] == '\0' || strlen(s) != json_string_length(item) || event_label_problem(s, strlen(s))) {
            api_error_set(err, 400, "invalid_field",
                          "resource.%s: must be a non-empty string of at most %d bytes without control characters",
                          key, EVENT_LABEL_LEN_MAX);
            return HOOKD_EINVAL;
        }
        if (dup_field(slot, s) != 0)
            return HOOKD_ENOMEM;
    }
    return 0;
}

/* Fills ev from a publish body; 400 errors name the field. */
static int event_from_json(const json_t *body, struct event *ev, struct api_error *err)
{
    static const char *const known[] = {"id", "type", "account", "resource", "data"};
    const json_t *type = json_object_get(body, "type");
    const json_t *data = json_object_get(body, "data");
    const json_t *id = json_object_get(body, "id");
    const json_t *account = json_object_get(body, "account");
    const char *key;
    json_t *v;

    json_object_foreach((json_t *)body, key, v) {
        size_t i = 0;
        while (i < sizeof known / sizeof known[0] && strcmp(known[i], key) != 0)
            i++;
        if (i == sizeof known / sizeof known[0]) {
            api_error_set(err, 400, "unknown_field", "%.64s: unknown field", key);
            return HOOKD_EINVAL;
        }
    }
    if (!type) {
        api_error_set(err, 400, "missing_field", "type is required");
        return HOOKD_EINVAL;
    }
    if (!json_is_string(type) || !event_type_is_valid(json_string_value(type), false)) {
        api_error_set(err, 400, "invalid_field", "type: must be 1 to 128 characters of A-Z a-z 0-9 _ . -");
        return HOOKD_EINVAL;
    }
    if (!data) {
        api_error_set(err, 400, "missing_field", "data is required");
        return HOOKD_EINVAL;
    }
    if (id && !json_is_null(id)) {
        if (!json_is_string(id) || !id_is_valid(json_string_value(id))) {
            api_error_set(err, 400, "invalid_field", "id: must be 1 to 63 characters of A-Z a-z 0-9 _ . : -");
            return HOOKD_EINVAL;
        }
        snprintf(ev->id, sizeof ev->id, "%s", json_string_value(id));
    }
    if (account && !json_is_null(account)) {
        const char *a = json_string_value(account);
        if (!a || strlen(a) != json_string_length(account) || event_label_problem(a, strlen(a))) {
            api_error_set(err, 400, "invalid_field",
                          "account: must be a string of at most %d bytes without control characters",
                          EVENT_LABEL_LEN_MAX);
            return HOOKD_EINVAL;
        }
        if (a[0] && dup_field(&ev->account, a) != 0)
            return HOOKD_ENOMEM;
    }
    int rc = event_resource(ev, json_object_get(body, "resource"), err);
    if (rc != 0)
        return rc;
    if (dup_field(&ev->type, json_string_value(type)) != 0)
        return HOOKD_ENOMEM;
    ev->payload = json_dumps(data, JSON_COMPACT | JSON_ENCODE_ANY);
    return ev->payload ? 0 : HOOKD_ENOMEM;
}

static bool str_equal(const char *a, const char *b) { return (!a && !b) || (a && b && strcmp(a, b) == 0); }

/* A repeated key (or id) is a replay when type, account and data match. */
static bool same_event(const struct event *a, const struct event *b)
{
    json_t *da, *db;
    bool same;

    if (!b->id[0] || !str_equal(a->type, b->type) || !str_equal(a->account, b->account))
        return false;
    da = a->payload ? json_loads(a->payload, JSON_DECODE_ANY, NULL) : NULL;
    db = b->payload ? json_loads(b->payload, JSON_DECODE_ANY, NULL) : NULL;
    same = da && db && json_equal(da, db);
    json_decref(da);
    json_decref(db);
    return same;
}

/* After the commit: 201 with the event, or the replay / conflict / store error. */
static void publish_reply(void *arg, int rc, struct http_response *res)
{
    struct event_op *o = arg;

    if (rc == 0) {
        hub_notify(o->api->hub, HUB_OUTBOX_CHANGED);
        http_reply_json(res, 201, api_event_json(&o->ev));
    } else if (rc == HOOKD_EEXISTS && same_event(&o->ev, &o->existing)) {
        http_reply_json(res, 200, api_event_json(&o->existing));
        http_add_header(res, "Idempotent-Replayed", "true");
    } else if (rc == HOOKD_EEXISTS || rc == HOOKD_ECONFLICT) {
        http_reply_error(res, 409, "idempotency_conflict",
                         "an event with this %s already exists with a different type, account or data",
                         o->ev.idempotency_key ? "Idempotency-Key" : "id");
    } else {
        api_reply_store_error(res, rc, "event");
    }
    event_op_free(o);
}

void api_events_publish(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    struct event_op *o = NULL;
    struct api_error err = {0};
    const char *key;
    json_t *body;
    int rc;

    if (!(body = api_body_object(req, res, false)))
        return;
    if (!(o = calloc(1, sizeof *o))) {
        api_reply_store_error(res, HOOKD_ENOMEM, "event");
        goto out;
    }
    o->api = api;
    key = http_header(req, "Idempotency-Key");
    if (key && key[0]) {
        if (strlen(key) > API_IDEMPOTENCY_KEY_MAX) {
            http_reply_error(res, 400, "invalid_field", "Idempotency-Key: at most %d characters",
                             API_IDEMPOTENCY_KEY_MAX);
            goto out;
        }
        if (dup_field(&o->ev.idempotency_key, key) != 0) {
            api_reply_store_error(res, HOOKD_ENOMEM, "event");
            goto out;
        }
    }
    rc = event_from_json(body, &o->ev, &err);
    if (rc == HOOKD_EINVAL) {
        api_reply_api_error(res, &err);
        goto out;
    }
    if (rc != 0) {
        api_reply_store_error(res, rc, "event");
        goto out;
    }
    api_write_async(api, req, op_publish, publish_reply, o);
    o = NULL; /* the reply frees it */
out:
    if (o)
        event_op_free(o);
    json_decref(body);
}

void api_events_list(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *d = api_begin(req, res, ctx);
    struct event_filter f = {0};
    struct event_list list = {0};
    struct query_scratch scratch;
    char seq[24];
    struct store *s;
    json_t *data;

    if (!d || !api_query_parse(req, res, event_list_query, event_list_query_count, &f, &scratch) ||
        !api_scope_account(req, res, &f.account))
        return;
    if (!(s = api_reader_get(d, res)) || !api_reader_done(d, s, store_event_list(s, &f, &list), res, "events"))
        return;
    data = json_array();
    for (size_t i = 0; data && i < list.n; i++)
        json_array_append_new(data, api_event_json(&list.items[i]));
    if (list.n > 0)
        snprintf(seq, sizeof seq, "%" PRId64, list.items[list.n - 1].seq);
    api_reply_page(res, LIST_EVENTS, data, list.n, f.limit, list.n > 0 ? seq : NULL);
    event_list_free(&list);
}

void api_events_get(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *d = api_begin(req, res, ctx);
    const char *id = http_param(req, "id");
    struct event ev = {0};
    struct delivery_list dl = {0};
    struct delivery_filter f = {.status = -1, .limit = STORE_LIST_MAX};
    char what[HOOKD_ID_MAX + 8];
    struct store *s;
    json_t *j, *arr;
    int rc;

    if (!d)
        return;
    snprintf(what, sizeof what, "event %.63s", id ? id : "");
    if (!id || !id_is_valid(id)) {
        api_reply_store_error(res, HOOKD_ENOTFOUND, what);
        return;
    }
    if (!(s = api_reader_get(d, res)))
        return;
    f.event_id = id;
    if (!api_caller(req)->admin) { /* its deliveries to the account's own endpoints only */
        f.account = api_caller(req)->account;
        f.own_endpoints = true;
    }
    rc = store_event_get(s, id, &ev);
    if (rc == 0 && !api_caller_sees(req, ev.account))
        rc = HOOKD_ENOTFOUND; /* another account's event does not exist for an account token */
    if (rc == 0)
        rc = store_delivery_list(s, &f, &dl);
    api_reader_put(d, s, rc);
    if (rc != 0) {
        api_reply_store_error(res, rc, what);
        goto out;
    }
    j = api_event_json(&ev);
    arr = json_array();
    for (size_t i = 0; arr && i < dl.n; i++)
        json_array_append_new(arr, api_delivery_json(&dl.items[i]));
    api_reply_with_children(res, j, "deliveries", arr);
out:
    delivery_list_free(&dl);
    event_free(&ev);
}
