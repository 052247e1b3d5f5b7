/*
 * Shared admin API plumbing: store access (readers, suspended writes) and
 * error replies, the request body as JSON, and records as JSON, kept here so
 * the handlers stay short and tests reach them. Field and query rules:
 * ops/fields.c; endpoint bodies: ops/endpoint_body.c.
 */
#include "ops/api_common.h"
#include "ops/endpoint_body.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>


#include "core/base64.h"
#include "core/clock.h"
#include "core/buf.h"
#include "core/duration.h"
#include "core/ed25519.h"
#include "core/event_check.h"
#include "core/timefmt.h"
#include "core/utf8.h"
#include "ops/token_cache.h"
#include "store/pool.h"

/* ---- errors ------------------------------------------------------------------ */

void api_error_set(struct api_error *e, int status, const char *code, const char *fmt, ...)
{
    va_list ap;

    e->status = status;
    snprintf(e->code, sizeof e->code, "%s", code);
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
}

void api_reply_api_error(struct http_response *res, const struct api_error *e)
{
    http_reply_error(res, e->status, e->code, "%s", e->message);
}

bool api_store_down(int err) { return err == HOOKD_EUNAVAIL || err == HOOKD_EIO || err == HOOKD_EBUSY; }

void api_reply_store_error(struct http_response *res, int err, const char *what)
{
    if (err == HOOKD_ENOTFOUND) {
        http_reply_error(res, 404, "not_found", "%s not found", what);
    } else if (err == HOOKD_EBUSY) {
        /* Not applied (see api_write_async): the same request may be sent again. */
        http_reply_error(res, 503, "store_busy",
                         "the store is busy (another connection holds a lock): not applied, try again");
        http_add_header(res, "Retry-After", API_STORE_BUSY_RETRY_AFTER);
    } else if (api_store_down(err)) {
        http_reply_error(res, 503, "store_unavailable", "the store is unavailable: %s", hookd_strerror(err));
    } else {
        http_reply_error(res, 500, "internal", "%s", hookd_strerror(err));
    }
}

/* ---- auth and store access ---------------------------------------------------------- */

bool api_token_equal(const char *expected, const char *given)
{
    return given && http_token_equal(expected, given, strlen(given));
}

struct api_ctx *api_begin(struct http_request *req, struct http_response *res, void *ctx) { return ctx; }

int api_token_check(void *ctx, const char *token, size_t len, struct http_caller *out)
{
    struct api_ctx *api = ctx;

    return api && api->tokens ? token_cache_check(api->tokens, token, len, out) : HOOKD_ENOTFOUND;
}

const struct http_caller *api_caller(const struct http_request *req) { return http_request_caller(req); }

const char *api_actor(const struct http_request *req)
{
    const struct http_caller *c = api_caller(req);

    return c->admin || c->id[0] == '\0' ? "admin" : c->id;
}

bool api_caller_sees(const struct http_request *req, const char *account)
{
    const struct http_caller *c = api_caller(req);

    return c->admin || (account && strcmp(account, c->account) == 0);
}

bool api_scope_account(struct http_request *req, struct http_response *res, const char **account)
{
    const struct http_caller *c = api_caller(req);

    if (c->admin)
        return true;
    if (*account && strcmp(*account, c->account) != 0) {
        http_reply_error(res, 403, "forbidden", "account: this token is limited to its own account");
        return false;
    }
    *account = c->account;
    return true;
}

bool api_scope_deliveries(struct http_request *req, struct http_response *res, struct delivery_filter *f)
{
    if (!api_scope_account(req, res, &f->account))
        return false;
    f->own_endpoints = !api_caller(req)->admin;
    return true;
}

int api_delivery_owner(struct store *s, const struct delivery *d, const char **owner)
{
    struct endpoint ep = {0};
    int rc;

    *owner = NULL;
    if (!d->account)
        return 0;
    rc = store_endpoint_get(s, d->endpoint_id, &ep);
    if (rc == 0 && ep.account && strcmp(ep.account, d->account) == 0)
        *owner = d->account;
    endpoint_free(&ep);
    return rc == HOOKD_ENOTFOUND ? 0 : rc;
}

int api_delivery_visible(const struct http_request *req, struct store *s, const struct delivery *d)
{
    const char *owner;
    int rc;

    if (api_caller(req)->admin)
        return 0;
    rc = api_delivery_owner(s, d, &owner);
    return rc != 0 ? rc : owner && api_caller_sees(req, owner) ? 0 : HOOKD_ENOTFOUND;
}

const char *api_deliveries_owner(struct store *s, const struct delivery_filter *f, int *rc)
{
    struct delivery_filter own = *f;
    int64_t all = 0, held = 0;

    *rc = 0;
    if (!f->account)
        return NULL;
    if (f->own_endpoints)
        return f->account;
    own.own_endpoints = true;
    if ((*rc = store_delivery_count(s, f, &all)) != 0 || (*rc = store_delivery_count(s, &own, &held)) != 0)
        return NULL;
    return all == held ? f->account : NULL;
}

struct store *api_reader_get(const struct api_ctx *api, struct http_response *res)
{
    struct store *s = NULL;
    int rc = api->readers ? store_pool_get(api->readers, &s) : HOOKD_EUNAVAIL;

    if (rc != 0) {
        api_reply_store_error(res, api_store_down(rc) ? rc : HOOKD_EUNAVAIL, "store");
        return NULL;
    }
    return s;
}

void api_reader_put(const struct api_ctx *api, struct store *s, int last_err)
{
    if (s)
        store_pool_put(api->readers, s, last_err == HOOKD_EIO || last_err == HOOKD_EUNAVAIL);
}

bool api_reader_done(const struct api_ctx *api, struct store *s, int rc, struct http_response *res, const char *what)
{
    api_reader_put(api, s, rc);
    if (rc != 0)
        api_reply_store_error(res, rc, what);
    return rc == 0;
}

/* One suspended write: the op and how to answer it. */
struct api_async {
    struct http_request *req;
    write_fn fn;
    api_reply_fn reply;
    void *arg;
};

static int async_run(struct store *s, void *p)
{
    struct api_async *a = p;
    return a->fn(s, a->arg);
}

/* Writer thread, after the commit: answer, then let the connection go on. */
static void async_done(void *p, int result)
{
    struct api_async *a = p;
    struct http_request *req = a->req;
    struct http_response res = {.status = 200};

    a->reply(a->arg, result, &res);
    free(a);
    http_resume(req, &res);
}

void api_write_async(const struct api_ctx *api, struct http_request *req, write_fn fn, api_reply_fn reply,
                     void *arg)
{
    struct api_async *a = malloc(sizeof *a);
    int rc;

    http_suspend(req);
    if (!a) {
        struct http_response res = {.status = 200};
        reply(arg, HOOKD_ENOMEM, &res);
        http_resume(req, &res);
        return;
    }
    *a = (struct api_async){.req = req, .fn = fn, .reply = reply, .arg = arg};
    /* Bounded: one that cannot commit within write_timeout is never run and answered HOOKD_EBUSY. */
    rc = api->writer ? writer_submit_bounded(api->writer, async_run, async_done, a) : HOOKD_EUNAVAIL;
    if (rc != 0)
        async_done(a, rc); /* the writer never calls back for an op it refused */
}

/* ---- request parsing ------------------------------------------------------------------ */

bool api_body_known(struct http_response *res, json_t *body, const char *const *known)
{
    const char *key;
    json_t *v;

    json_object_foreach(body, key, v) {
        size_t k = 0;
        while (known[k] && strcmp(known[k], key) != 0)
            k++;
        if (!known[k]) {
            http_reply_error(res, 400, "unknown_field", "%.64s: unknown field", key);
            return false;
        }
    }
    return true;
}

json_t *api_body_object(struct http_request *req, struct http_response *res, bool allow_empty)
{
    size_t len;
    const char *body = http_body(req, &len);
    json_error_t jerr;
    json_t *j;

    if (len == 0) {
        if (allow_empty)
            return json_object();
        http_reply_error(res, 400, "malformed_json", "the request body must be a JSON object");
        return NULL;
    }
    j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!j) {
        http_reply_error(res, 400, "malformed_json", "malformed JSON at line %d column %d: %s", jerr.line,
                         jerr.column, jerr.text);
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        http_reply_error(res, 400, "malformed_json", "the request body must be a JSON object");
        return NULL;
    }
    return j;
}

/* ---- JSON ------------------------------------------------------------------------------- */

json_t *api_json_time(int64_t ms)
{
    char text[RFC3339_LEN];

    if (ms == 0)
        return json_null();
    rfc3339_format(ms, text);
    return json_string(text);
}

json_t *api_json_str(const char *s) { return s ? json_string(s) : json_null(); }

/* Text read from the outbox may predate its checks: invalid UTF-8 is shown as U+FFFD rather than
 * failing the whole record (jansson refuses it); JSON escapes every control character. */
static json_t *outbox_str(const char *s)
{
    json_t *j;
    struct buf b;
    size_t len;

    if (s == NULL)
        return json_null();
    if ((j = json_string(s)) != NULL)
        return j;
    len = strlen(s);
    buf_init(&b, len * 3 + 1);
    for (size_t i = 0; i < len;) {
        size_t n = utf8_seq((const unsigned char *)s + i, len - i);
        if (n == 0 ? buf_puts(&b, "\xef\xbf\xbd") != 0 : buf_append(&b, s + i, n) != 0)
            break;
        i += n == 0 ? 1 : n;
    }
    j = b.data != NULL ? json_stringn(b.data, b.len) : NULL;
    buf_free(&b);
    return j;
}

json_t *api_json_text(const char *s) { return outbox_str(s); }

json_t *api_json_duration(int64_t ms)
{
    char text[24];

    if (ms == 0)
        return json_null();
    duration_format(ms, text);
    return json_string(text);
}

static json_t *json_int_or_null(long long v) { return v ? json_integer(v) : json_null(); }

/* Sets every key of a NULL-terminated list; a NULL value (allocation failure) fails the whole object. */
static json_t *object_of(const char *key, ...)
{
    json_t *o = json_object();
    bool ok = o != NULL;
    va_list ap;

    va_start(ap, key);
    for (const char *k = key; k; k = va_arg(ap, const char *)) {
        json_t *v = va_arg(ap, json_t *);
        if (!v || json_object_set_new(o, k, v) != 0)
            ok = false;
    }
    va_end(ap);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *api_list_json(json_t *data, const char *next_cursor)
{
    return object_of("data", data, "next_cursor", api_json_str(next_cursor), NULL);
}

void api_reply_page(struct http_response *res, const char *list, json_t *data, size_t n, int limit,
                    const char *last_key)
{
    char next[CURSOR_TEXT_MAX];
    bool full = n > 0 && limit > 0 && n == (size_t)limit;

    http_reply_json(res, 200, api_list_json(data, query_cursor_make(list, full ? last_key : NULL, next)));
}

json_t *api_event_json(const struct event *ev)
{
    json_t *data = ev->payload ? json_loads(ev->payload, JSON_DECODE_ANY, NULL) : NULL;
    json_t *resource;

    if (!data)
        data = json_null();
    if (ev->resource_type || ev->resource_id || ev->has_resource_version)
        resource = object_of("type", outbox_str(ev->resource_type), "id", outbox_str(ev->resource_id),
                             "version", ev->has_resource_version ? json_integer(ev->resource_version) : json_null(),
                             NULL);
    else
        resource = json_null();
    return object_of("id", outbox_str(ev->id), "type", outbox_str(ev->type), "account", outbox_str(ev->account),
                     "resource", resource, "data", data, "created_at", api_json_time(ev->created_at),
                     "dispatched_at", api_json_time(ev->dispatched_at), "idempotency_key",
                     api_json_str(ev->idempotency_key), "error", api_json_str(ev->error), NULL);
}

json_t *api_delivery_json(const struct delivery *d)
{
    return object_of("id", json_string(d->id), "event_id", json_string(d->event_id), "endpoint_id",
                     json_string(d->endpoint_id), "account", outbox_str(d->account), "status",
                     json_string(delivery_status_name(d->status)), "attempt_count", json_integer(d->attempt_count),
                     "next_attempt_at", api_json_time(d->next_attempt_at), "last_status_code",
                     json_int_or_null(d->last_status_code), "last_error", api_json_str(d->last_error),
                     "delivered_at", api_json_time(d->delivered_at), "created_at", api_json_time(d->created_at),
                     "first_attempt_at", api_json_time(d->first_attempt_at), "last_attempt_at",
                     api_json_time(d->last_attempt_at), NULL);
}

/*
 * The snippet as DESIGN §12 shows it: valid UTF-8 as text in "response"
 * ("response_encoding": "utf-8"); any other bytes (Latin-1, gzip, …) as
 * base64 in "response_base64" with "response" null and "response_encoding":
 * "base64"; "response_truncated" when the response was longer than the cap.
 */
static bool attempt_response_set(json_t *j, const struct attempt *a)
{
    size_t len = a->response ? (a->response_len ? a->response_len : strlen(a->response)) : 0;
    json_t *text = json_null(), *encoding = json_null(), *b64 = NULL;

    if (len > 0 && utf8_valid(a->response, len)) {
        text = json_stringn(a->response, len);
        encoding = json_string("utf-8");
    } else if (len > 0) {
        char *out = malloc(base64_encoded_len(len) + 1);
        if (out) {
            base64_encode(a->response, len, out);
            b64 = json_string(out);
            free(out);
        }
        encoding = json_string("base64");
        if (!b64) {
            json_decref(encoding);
            return false;
        }
    }
    if (json_object_set_new(j, "response", text) != 0 || json_object_set_new(j, "response_encoding", encoding) != 0 ||
        json_object_set_new(j, "response_truncated", json_boolean(a->response_truncated)) != 0) {
        json_decref(b64);
        return false;
    }
    return !b64 || json_object_set_new(j, "response_base64", b64) == 0;
}

json_t *api_attempt_json(const struct attempt *a)
{
    json_t *error;

    /* "timeout: Operation timed out …": the class keeps the text searchable whatever the reason's wording. */
    if (a->error_class && a->error && strstr(a->error, a->error_class) == NULL)
        error = json_sprintf("%s: %s", a->error_class, a->error);
    else
        error = api_json_str(a->error ? a->error : a->error_class);
    json_t *j = object_of("n", json_integer(a->n), "started_at", api_json_time(a->started_at), "duration_ms",
                          json_integer(a->duration_ms), "status_code", json_int_or_null(a->status_code), "error",
                          error, NULL);

    if (j && !attempt_response_set(j, a)) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static json_t *retry_schedule_json(const struct endpoint *ep)
{
    char text[RETRY_MAX_SCHEDULE * 25];
    size_t used = 0;

    if (ep->n_retry_schedule == 0)
        return json_null();
    for (size_t i = 0; i < ep->n_retry_schedule && i < RETRY_MAX_SCHEDULE; i++) {
        char one[24];
        duration_format(ep->retry_schedule_ms[i], one);
        used += (size_t)snprintf(text + used, sizeof text - used, "%s%s", i ? "," : "", one);
    }
    return json_string(text);
}

/* {"Name": "value", …} from the endpoint's "Name: value" lines. */
static json_t *headers_json(const struct endpoint *ep)
{
    json_t *o = json_object();

    for (size_t i = 0; o && i < ep->n_headers; i++) {
        const char *colon = strchr(ep->headers[i], ':');
        if (colon && colon[1] == ' ')
            json_object_setn_new(o, ep->headers[i], (size_t)(colon - ep->headers[i]), json_string(colon + 2));
    }
    return o;
}

/* The "whpk_…" of a "whsk_…" key; null when it does not decode (refused where it was set). */
static json_t *public_key_json(const char *key)
{
    char pub[ED25519_KEY_TEXT_MAX];

    return ed25519_public_from_secret(key, pub) == 0 ? json_string(pub) : json_null();
}

/* "signing" (the kind of the newest key) and, for ed25519, its "public_key". */
static int endpoint_signing_json(const struct endpoint *ep, json_t *j)
{
    const char *newest = ep->n_secrets > 0 ? ep->secrets[0].key : NULL;
    bool ed = endpoint_key_is_ed25519(newest);

    if (json_object_set_new(j, "signing", json_string(ed ? "ed25519" : "hmac")) != 0)
        return HOOKD_ENOMEM;
    return ed && json_object_set_new(j, "public_key", public_key_json(newest)) != 0 ? HOOKD_ENOMEM : 0;
}

json_t *api_endpoint_json(const struct endpoint *ep, bool with_secret, int64_t now)
{
    json_t *types = json_array();
    json_t *j;

    for (size_t i = 0; types && i < ep->n_event_types; i++)
        json_array_append_new(types, json_string(ep->event_types[i]));
    j = object_of("id", json_string(ep->id), "url", api_json_str(ep->url), "account", api_json_str(ep->account),
                  "description", api_json_str(ep->description), "event_types", types, "enabled",
                  json_boolean(ep->enabled), "disabled_reason", api_json_str(ep->disabled_reason), "ordering",
                  json_string(ordering_name(ep->ordering)), "max_in_flight", json_int_or_null(ep->max_in_flight),
                  "rate_limit", json_int_or_null(ep->rate_limit), "timeout", api_json_duration(ep->timeout_ms),
                  "retry_schedule", retry_schedule_json(ep), "created_at", api_json_time(ep->created_at),
                  "updated_at", api_json_time(ep->updated_at), "headers", headers_json(ep), NULL);
    if (!j || endpoint_signing_json(ep, j) != 0) {
        json_decref(j);
        return NULL;
    }
    if (!with_secret)
        return j;
    /* Only the newest key is ever shown (an ed25519 one never: its public key is); older ones show their
     * lifetime, and for ed25519 their public key. */
    json_t *secrets = json_array();
    for (size_t i = 0; secrets && i < ep->n_secrets; i++) {
        const struct endpoint_secret *s = &ep->secrets[i];
        json_t *item;
        if (s->expires_at != 0 && s->expires_at <= now)
            continue;
        item = object_of("created_at", api_json_time(s->created_at), "expires_at", api_json_time(s->expires_at), NULL);
        if (item && endpoint_key_is_ed25519(s->key))
            json_object_set_new(item, "public_key", public_key_json(s->key));
        json_array_append_new(secrets, item);
    }
    const char *newest = ep->n_secrets > 0 ? ep->secrets[0].key : NULL;
    if (json_object_set_new(j, "secret", endpoint_key_is_ed25519(newest) ? json_null() : api_json_str(newest)) != 0 ||
        !secrets || json_object_set_new(j, "secrets", secrets) != 0) {
        json_decref(j);
        return NULL;
    }
    return j;
}

json_t *api_endpoint_with_breaker(json_t *j, const struct endpoint_state *st)
{
    json_t *b;

    if (!j)
        return NULL;
    b = object_of("state", json_string(breaker_name(st->breaker)), "opened_at", api_json_time(st->opened_at),
                  "next_probe_at", api_json_time(st->breaker == BREAKER_OPEN ? st->next_probe_at : 0),
                  "consecutive_failures", json_integer(st->consecutive_failures), NULL);
    if (!b || json_object_set_new(j, "breaker", b) != 0) {
        json_decref(j);
        return NULL;
    }
    return j;
}

void api_reply_with_children(struct http_response *res, json_t *obj, const char *key, json_t *arr)
{
    if (!obj || !arr || json_object_set_new(obj, key, arr) != 0) {
        if (!obj)
            json_decref(arr);
        json_decref(obj);
        http_reply_error(res, 500, "internal", "out of memory");
        return;
    }
    http_reply_json(res, 200, obj);
}
