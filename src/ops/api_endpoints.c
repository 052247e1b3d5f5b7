/*
 * Admin API /v1/endpoints: create, list, get, update, delete, disable, enable,
 * secret rotation, and a test event (hookd.ping) to one endpoint. Reads use a pooled reader; every change is one writer
 * op, answered from the writer thread after its commit (the connection waits
 * suspended), after which the hub is told that endpoints changed.
 */
#include <stdlib.h>
#include <string.h>

#include "config.h"

#include "core/clock.h"
#include "core/duration.h"
#include "core/ids.h"
#include "core/signature.h"
#include "hub.h"
#include "ops/api_common.h"
#include "ops/list_queries.h"

#define ROTATE_GRACE_MAX_MS (30LL * 24 * 3600 * 1000)
#define DISABLE_REASON_DEFAULT "disabled through the admin API"

/* One endpoint write: inputs, and the row as it stands after the op. Heap
 * for a write (it outlives the handler call); the reply frees it. */
struct endpoint_op {
    const struct api_ctx *api;
    const char *id;           /* the request's {id}: valid until the reply */
    json_t *body;             /* owned; PATCH applies it, reason points into it */
    bool enabled;             /* disable/enable */
    const char *reason;
    const char *new_secret;   /* rotate: into secret_buf or body */
    char secret_buf[SECRET_TEXT_MAX];
    int64_t grace_ms;
    int64_t now;
    int status;               /* the answer on success */
    bool with_secret;
    struct endpoint ep;
    struct endpoint_state state; /* its breaker, for the answer (zero: closed, never failed) */
    struct api_error err;
};

/* The endpoint's breaker for the answer; an endpoint without a state row is closed and never failed. */
static int state_read(struct store *s, const char *id, struct endpoint_state *st)
{
    int rc = store_endpoint_state_get(s, id, st);

    if (rc == HOOKD_ENOTFOUND) {
        memset(st, 0, sizeof *st);
        rc = 0;
    }
    return rc;
}

static struct endpoint_op *endpoint_op_new(const struct api_ctx *api, struct http_response *res)
{
    struct endpoint_op *o = calloc(1, sizeof *o);

    if (!o) {
        api_reply_store_error(res, HOOKD_ENOMEM, "endpoint");
        return NULL;
    }
    o->api = api;
    o->now = clock_now_ms();
    return o;
}

static void endpoint_op_free(struct endpoint_op *o)
{
    if (!o)
        return;
    endpoint_free(&o->ep);
    json_decref(o->body);
    explicit_bzero(o->secret_buf, sizeof o->secret_buf);
    free(o);
}

static int op_insert(struct store *s, void *arg)
{
    struct endpoint_op *o = arg;
    return store_endpoint_insert(s, &o->ep);
}

static int op_update(struct store *s, void *arg)
{
    struct endpoint_op *o = arg;
    int rc = store_endpoint_get(s, o->id, &o->ep);

    if (rc == 0)
        rc = api_endpoint_apply(&o->ep, o->body, API_BODY_PATCH, &o->err);
    if (rc == 0)
        rc = api_endpoint_signing(&o->ep, o->body, o->now, o->grace_ms);
    if (rc == 0) {
        o->ep.updated_at = o->now;
        rc = store_endpoint_update(s, &o->ep);
    }
    return rc == 0 ? state_read(s, o->id, &o->state) : rc;
}

static int op_delete(struct store *s, void *arg)
{
    struct endpoint_op *o = arg;
    return store_endpoint_delete(s, o->id);
}

static int op_set_enabled(struct store *s, void *arg)
{
    struct endpoint_op *o = arg;
    int rc = store_endpoint_set_enabled(s, o->id, o->enabled, o->enabled ? NULL : o->reason, o->now);

    /* Enabled again: its failures are history, or the next one would disable it at once. */
    if (rc == 0 && o->enabled)
        rc = store_endpoint_state_reset(s, o->id);
    if (rc == 0)
        rc = store_endpoint_get(s, o->id, &o->ep);
    return rc == 0 ? state_read(s, o->id, &o->state) : rc;
}

static int op_rotate(struct store *s, void *arg)
{
    struct endpoint_op *o = arg;
    int rc = store_endpoint_get(s, o->id, &o->ep);

    if (rc != 0)
        return rc;
    if (!o->new_secret) { /* a new key of the kind the endpoint signs with */
        rc = endpoint_key_generate(o->ep.n_secrets > 0 && endpoint_key_is_ed25519(o->ep.secrets[0].key), o->secret_buf);
        if (rc != 0)
            return rc;
        o->new_secret = o->secret_buf;
    }
    if (o->ep.n_secrets > 0 && o->ep.secrets[0].key && strcmp(o->ep.secrets[0].key, o->new_secret) == 0) {
        api_error_set(&o->err, 400, "invalid_field", "secret: is already the current secret");
        return HOOKD_EINVAL;
    }
    rc = api_endpoint_rotate(&o->ep, o->new_secret, o->now, o->grace_ms);
    if (rc == 0) {
        o->ep.updated_at = o->now;
        rc = store_endpoint_update(s, &o->ep);
    }
    return rc == 0 ? state_read(s, o->id, &o->state) : rc;
}

/* The reply for a failed op: the validation error it recorded, or the store error. */
static void reply_op_error(struct http_response *res, int rc, const struct endpoint_op *o)
{
    char what[HOOKD_ID_MAX + 16];

    if (rc == HOOKD_EINVAL && o->err.status != 0) {
        api_reply_api_error(res, &o->err);
        return;
    }
    snprintf(what, sizeof what, "endpoint %s", o->id ? o->id : "");
    api_reply_store_error(res, rc, what);
}

/* The {id} of the path; an id that cannot exist answers 404 at once. */
static const char *path_id(struct http_request *req, struct http_response *res)
{
    const char *id = http_param(req, "id");

    if (!id || !id_is_valid(id)) {
        http_reply_error(res, 404, "not_found", "endpoint %.64s not found", id ? id : "");
        return NULL;
    }
    return id;
}

/* The endpoint as answered; an ed25519 private key only in the create answer (and never again). */
static json_t *endpoint_reply_json(const struct endpoint_op *o)
{
    json_t *j = api_endpoint_json(&o->ep, o->with_secret, clock_now_ms());
    const char *newest = o->ep.n_secrets > 0 ? o->ep.secrets[0].key : NULL;

    if (j && o->status == 201 && endpoint_key_is_ed25519(newest) && json_object_set_new(j, "secret", json_string(newest))) {
        json_decref(j);
        return NULL;
    }
    return j;
}

/* The reply of a write, after its commit: tell the hub, answer with the endpoint. */
static void write_reply(void *arg, int rc, struct http_response *res)
{
    struct endpoint_op *o = arg;

    if (rc != 0) {
        reply_op_error(res, rc, o);
    } else {
        hub_notify(o->api->hub, HUB_ENDPOINTS_CHANGED);
        if (o->status == 204)
            http_reply(res, 204, NULL, 0);
        else
            http_reply_json(res, o->status, api_endpoint_with_breaker(endpoint_reply_json(o), &o->state));
    }
    endpoint_op_free(o);
}

/* Runs fn as a writer op and answers status after its commit; takes o. */
static void write_and_reply(struct http_request *req, write_fn fn, struct endpoint_op *o, int status,
                            bool with_secret)
{
    o->status = status;
    o->with_secret = with_secret;
    api_write_async(o->api, req, fn, write_reply, o);
}

void api_endpoints_create(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    struct endpoint_op *o;
    json_t *body;
    int rc;

    if (!(body = api_body_object(req, res, false)))
        return;
    if (!(o = endpoint_op_new(api, res))) {
        json_decref(body);
        return;
    }
    o->body = body;
    rc = api_endpoint_apply(&o->ep, body, API_BODY_CREATE, &o->err);
    if (rc != 0) {
        reply_op_error(res, rc, o);
        endpoint_op_free(o);
        return;
    }
    id_new(o->ep.id, "ep_");
    o->id = o->ep.id;
    o->ep.enabled = true;
    o->ep.created_at = o->ep.updated_at = o->now;
    for (size_t i = 0; i < o->ep.n_secrets; i++)
        o->ep.secrets[i].created_at = o->now;
    write_and_reply(req, op_insert, o, 201, true);
}

void api_endpoints_list(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *d = api_begin(req, res, ctx);
    struct endpoint_filter f = {0};
    struct endpoint_list list = {0};
    struct endpoint_state *states = NULL;
    struct query_scratch scratch;
    struct store *s;
    json_t *data;
    int rc;

    if (!d || !api_query_parse(req, res, endpoint_list_query, endpoint_list_query_count, &f, &scratch) ||
        !api_scope_account(req, res, &f.account))
        return;
    if (!(s = api_reader_get(d, res)))
        return;
    rc = store_endpoint_list(s, &f, &list);
    states = rc == 0 && list.n > 0 ? calloc(list.n, sizeof *states) : NULL;
    if (rc == 0 && list.n > 0 && !states)
        rc = HOOKD_ENOMEM;
    for (size_t i = 0; i < list.n && rc == 0; i++)
        rc = state_read(s, list.items[i].id, &states[i]);
    api_reader_put(d, s, rc);
    if (rc != 0) {
        free(states);
        endpoint_list_free(&list);
        api_reply_store_error(res, rc, "endpoints");
        return;
    }
    data = json_array();
    for (size_t i = 0; data && i < list.n; i++)
        json_array_append_new(data, api_endpoint_with_breaker(api_endpoint_json(&list.items[i], false, 0), &states[i]));
    free(states);
    api_reply_page(res, LIST_ENDPOINTS, data, list.n, f.limit, list.n > 0 ? list.items[list.n - 1].id : NULL);
    endpoint_list_free(&list);
}

void api_endpoints_get(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *d = api_begin(req, res, ctx);
    struct endpoint_op o = {0};
    struct store *s;
    int rc;

    if (!d || !(o.id = path_id(req, res)) || !(s = api_reader_get(d, res)))
        return;
    rc = store_endpoint_get(s, o.id, &o.ep);
    /* Another account's endpoint does not exist for an account token; nor does its secret. */
    if (rc == 0 && !api_caller_sees(req, o.ep.account))
        rc = HOOKD_ENOTFOUND;
    if (rc == 0)
        rc = state_read(s, o.id, &o.state);
    api_reader_put(d, s, rc);
    if (rc != 0)
        reply_op_error(res, rc, &o);
    else
        http_reply_json(res, 200,
                        api_endpoint_with_breaker(api_endpoint_json(&o.ep, api_caller(req)->admin, clock_now_ms()),
                                                  &o.state));
    endpoint_free(&o.ep);
}

void api_endpoints_update(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    struct endpoint scratch = {0};
    struct endpoint_op *o;
    const char *id;
    json_t *body;

    if (!(id = path_id(req, res)) || !(body = api_body_object(req, res, false)))
        return;
    if (!(o = endpoint_op_new(api, res))) {
        json_decref(body);
        return;
    }
    o->id = id;
    o->body = body;
    o->grace_ms = api->cfg->rotate_grace_ms; /* a change of "signing" keeps the older keys this long */
    /* Validate before queueing, so a bad body never reaches the writer. */
    int rc = api_endpoint_apply(&scratch, body, API_BODY_PATCH, &o->err);
    endpoint_free(&scratch);
    if (rc != 0) {
        reply_op_error(res, rc, o);
        endpoint_op_free(o);
        return;
    }
    write_and_reply(req, op_update, o, 200, true);
}

void api_endpoints_delete(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    struct endpoint_op *o;
    const char *id;

    if (!(id = path_id(req, res)) || !(o = endpoint_op_new(api, res)))
        return;
    o->id = id;
    write_and_reply(req, op_delete, o, 204, false);
}

static void set_enabled(struct http_request *req, struct http_response *res, void *ctx, bool enabled)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    struct endpoint_op *o;
    const char *key, *id;
    json_t *body, *v;

    if (!(id = path_id(req, res)) || !(body = api_body_object(req, res, true)))
        return;
    if (!(o = endpoint_op_new(api, res))) {
        json_decref(body);
        return;
    }
    o->id = id;
    o->body = body;
    o->enabled = enabled;
    o->reason = DISABLE_REASON_DEFAULT;
    json_object_foreach(body, key, v) {
        if (enabled || strcmp(key, "reason") != 0) {
            http_reply_error(res, 400, "unknown_field", "%.64s: unknown field", key);
            goto fail;
        }
        if (json_is_null(v))
            continue;
        const char *r = json_string_value(v);
        if (!r || strlen(r) > API_DESCRIPTION_MAX || strlen(r) != json_string_length(v)) {
            http_reply_error(res, 400, "invalid_field", "reason: must be a string of at most %d characters",
                             API_DESCRIPTION_MAX);
            goto fail;
        }
        if (r[0])
            o->reason = r;
    }
    write_and_reply(req, op_set_enabled, o, 200, true);
    return;
fail:
    endpoint_op_free(o);
}

void api_endpoints_disable(struct http_request *req, struct http_response *res, void *ctx)
{
    set_enabled(req, res, ctx, false);
}

void api_endpoints_enable(struct http_request *req, struct http_response *res, void *ctx)
{
    set_enabled(req, res, ctx, true);
}

/* Reads {"secret", "grace"} of a rotation; false after answering 400. */
static bool rotate_body(const json_t *body, struct endpoint_op *o, struct http_response *res)
{
    const char *key;
    json_t *v;

    json_object_foreach((json_t *)body, key, v) {
        if (strcmp(key, "secret") == 0) {
            if (json_is_null(v))
                continue;
            if (!json_is_string(v) || !endpoint_key_is_valid(json_string_value(v))) {
                http_reply_error(res, 400, "invalid_field",
                                 "secret: must be \"whsec_\" followed by base64 of 24 to 64 bytes, or an ed25519 "
                                 "\"whsk_\" key");
                return false;
            }
            o->new_secret = json_string_value(v);
        } else if (strcmp(key, "grace") == 0) {
            if (json_is_null(v))
                continue;
            if (!json_is_string(v) || duration_parse(json_string_value(v), &o->grace_ms) != 0 ||
                o->grace_ms > ROTATE_GRACE_MAX_MS) {
                http_reply_error(res, 400, "invalid_field", "grace: must be a duration up to 30d such as \"24h\"");
                return false;
            }
        } else {
            http_reply_error(res, 400, "unknown_field", "%.64s: unknown field", key);
            return false;
        }
    }
    return true;
}

void api_endpoints_rotate(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    struct endpoint_op *o;
    const char *id;
    json_t *body;

    if (!(id = path_id(req, res)) || !(body = api_body_object(req, res, true)))
        return;
    if (!(o = endpoint_op_new(api, res))) {
        json_decref(body);
        return;
    }
    o->id = id;
    o->body = body;
    o->grace_ms = api->cfg->rotate_grace_ms;
    if (!rotate_body(body, o, res)) {
        endpoint_op_free(o);
        return;
    }
    write_and_reply(req, op_rotate, o, 200, true);
}

/* ---- POST /v1/endpoints/{id}/test ------------------------------------------------------ */

/* A test event; heap (it outlives the handler call), freed by its reply. */
struct ping_op {
    const struct api_ctx *api;
    char endpoint_id[HOOKD_ID_MAX];
    struct event ev;
    struct delivery d;
};

static void ping_op_free(struct ping_op *o)
{
    event_free(&o->ev);
    free(o->d.account);
    free(o);
}

/*
 * One transaction: the hookd.ping event goes into the outbox already marked
 * dispatched (no relay fans it out, so no other endpoint, not even one
 * subscribed to hookd.*, gets it) with one pending delivery, due now, to this
 * endpoint; from there it takes the normal path (claims, caps, retries, the
 * signed request). A disabled endpoint is refused (ECONFLICT): its
 * deliveries wait, and a test is asked for now.
 */
static int op_ping(struct store *s, void *arg)
{
    struct ping_op *o = arg;
    struct endpoint ep = {0};
    int64_t now = clock_now_ms();
    int rc = store_endpoint_get(s, o->endpoint_id, &ep);

    if (rc != 0)
        return rc;
    if (!ep.enabled) {
        endpoint_free(&ep);
        return HOOKD_ECONFLICT;
    }
    json_t *data = json_pack("{s:s, s:s}", "endpoint_id", ep.id, "message", "test event from hookd");
    bool ok = data != NULL;

    o->ev.type = strdup("hookd.ping");
    o->ev.account = ep.account ? strdup(ep.account) : NULL;
    ok = ok && o->ev.type && (!ep.account || o->ev.account);
    o->ev.payload = data ? json_dumps(data, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(data);
    endpoint_free(&ep);
    if (!ok || !o->ev.payload)
        return HOOKD_ENOMEM;
    rc = store_event_insert(s, &o->ev, NULL);
    if (rc == 0)
        rc = store_outbox_mark_dispatched(s, &o->ev.seq, 1, now);
    if (rc != 0)
        return rc;
    o->ev.dispatched_at = now;
    id_new(o->d.id, "dlv_");
    snprintf(o->d.event_id, sizeof o->d.event_id, "%s", o->ev.id);
    snprintf(o->d.endpoint_id, sizeof o->d.endpoint_id, "%s", o->endpoint_id);
    o->d.account = o->ev.account ? strdup(o->ev.account) : NULL;
    o->d.status = DELIVERY_PENDING;
    o->d.next_attempt_at = now;
    o->d.created_at = now;
    if (o->ev.account && !o->d.account)
        return HOOKD_ENOMEM;
    return store_delivery_insert(s, &o->d);
}

static void ping_reply(void *arg, int rc, struct http_response *res)
{
    struct ping_op *o = arg;
    json_t *j, *arr;

    if (rc == 0) {
        hub_notify(o->api->hub, HUB_DELIVERIES_DUE);
        j = api_event_json(&o->ev);
        arr = json_array();
        if (j && arr && json_array_append_new(arr, api_delivery_json(&o->d)) == 0 &&
            json_object_set_new(j, "deliveries", arr) == 0) {
            http_reply_json(res, 202, j);
        } else {
            json_decref(j);
            http_reply_error(res, 500, "internal", "out of memory");
        }
    } else if (rc == HOOKD_ECONFLICT) {
        http_reply_error(res, 409, "endpoint_disabled", "endpoint %s is disabled: enable it to test it",
                         o->endpoint_id);
    } else {
        char what[HOOKD_ID_MAX + 16];
        snprintf(what, sizeof what, "endpoint %s", o->endpoint_id);
        api_reply_store_error(res, rc, what);
    }
    ping_op_free(o);
}

void api_endpoints_test(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    struct ping_op *o;
    const char *id, *key;
    json_t *body, *v;

    if (!api || !(id = path_id(req, res)) || !(body = api_body_object(req, res, true)))
        return;
    json_object_foreach(body, key, v) {
        http_reply_error(res, 400, "unknown_field", "%.64s: unknown field", key);
        json_decref(body);
        return;
    }
    json_decref(body);
    if (!(o = calloc(1, sizeof *o))) {
        api_reply_store_error(res, HOOKD_ENOMEM, "endpoint");
        return;
    }
    o->api = api;
    snprintf(o->endpoint_id, sizeof o->endpoint_id, "%s", id);
    api_write_async(api, req, op_ping, ping_reply, o);
}
