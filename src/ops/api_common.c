/*
 * Shared admin API plumbing: store access (readers, suspended writes) and error replies,
 * records as JSON, query parsing, and the endpoint body rules (fields, URL,
 * secret rotation), kept here so the handlers stay short and tests reach them.
 */
#include "ops/api_common.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>


#include "core/clock.h"
#include "core/duration.h"
#include "core/filter.h"
#include "core/ids.h"
#include "core/signature.h"
#include "core/timefmt.h"
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
    if (err == HOOKD_ENOTFOUND)
        http_reply_error(res, 404, "not_found", "%s not found", what);
    else if (api_store_down(err))
        http_reply_error(res, 503, "store_unavailable", "the store is unavailable: %s", hookd_strerror(err));
    else
        http_reply_error(res, 500, "internal", "%s", hookd_strerror(err));
}

/* ---- auth and store access ---------------------------------------------------------- */

bool api_token_equal(const char *expected, const char *given)
{
    return given && http_token_equal(expected, given, strlen(given));
}

struct api_ctx *api_begin(struct http_request *req, struct http_response *res, void *ctx) { return ctx; }

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
    rc = api->writer ? writer_submit(api->writer, async_run, async_done, a) : HOOKD_EUNAVAIL;
    if (rc != 0)
        async_done(a, rc); /* the writer never calls back for an op it refused */
}

/* ---- request parsing ------------------------------------------------------------------ */

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

/* Whole-string decimal integer in [min, max]. */
static bool parse_int_range(const char *s, long long min, long long max, long long *out)
{
    char *end;
    long long v;

    if (!s || !isdigit((unsigned char)s[0]))
        return false;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max)
        return false;
    *out = v;
    return true;
}

bool api_query_limit(struct http_request *req, struct http_response *res, int *limit)
{
    const char *s = http_query(req, "limit");
    long long v = API_LIMIT_DEFAULT;

    if (s && !parse_int_range(s, 1, API_LIMIT_MAX, &v)) {
        http_reply_error(res, 400, "invalid_field", "limit: must be an integer from 1 to %d", API_LIMIT_MAX);
        return false;
    }
    *limit = (int)v;
    return true;
}

bool api_query_time(struct http_request *req, struct http_response *res, const char *name, int64_t *ms)
{
    const char *s = http_query(req, name);

    *ms = 0;
    if (s && rfc3339_parse(s, ms) != 0) {
        http_reply_error(res, 400, "invalid_field", "%s: must be an RFC 3339 time such as 2026-01-31T12:00:00Z",
                         name);
        return false;
    }
    return true;
}

bool api_query_id(struct http_request *req, struct http_response *res, const char *name, const char **out)
{
    const char *s = http_query(req, name);

    *out = NULL;
    if (s && !id_is_valid(s)) {
        http_reply_error(res, 400, "invalid_field", "%s: not a valid id", name);
        return false;
    }
    *out = s;
    return true;
}

/* True for text without control characters, at most max bytes. */
static bool text_ok(const char *s, size_t max)
{
    size_t n = 0;
    for (; s[n] != '\0'; n++) {
        unsigned char c = (unsigned char)s[n];
        if (n >= max || c < 0x20 || c == 0x7f)
            return false;
    }
    return true;
}

bool api_query_text(struct http_request *req, struct http_response *res, const char *name, size_t max,
                    const char **out)
{
    const char *s = http_query(req, name);

    *out = NULL;
    if (s && !text_ok(s, max)) {
        http_reply_error(res, 400, "invalid_field", "%s: at most %zu characters, no control characters", name, max);
        return false;
    }
    *out = s;
    return true;
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

json_t *api_event_json(const struct event *ev)
{
    json_t *data = ev->payload ? json_loads(ev->payload, JSON_DECODE_ANY, NULL) : NULL;
    json_t *resource;

    if (!data)
        data = json_null();
    if (ev->resource_type || ev->resource_id || ev->has_resource_version)
        resource = object_of("type", api_json_str(ev->resource_type), "id", api_json_str(ev->resource_id),
                             "version", ev->has_resource_version ? json_integer(ev->resource_version) : json_null(),
                             NULL);
    else
        resource = json_null();
    return object_of("id", json_string(ev->id), "type", api_json_str(ev->type), "account", api_json_str(ev->account),
                     "resource", resource, "data", data, "created_at", api_json_time(ev->created_at),
                     "dispatched_at", api_json_time(ev->dispatched_at), "idempotency_key",
                     api_json_str(ev->idempotency_key), NULL);
}

json_t *api_delivery_json(const struct delivery *d)
{
    return object_of("id", json_string(d->id), "event_id", json_string(d->event_id), "endpoint_id",
                     json_string(d->endpoint_id), "account", api_json_str(d->account), "status",
                     json_string(delivery_status_name(d->status)), "attempt_count", json_integer(d->attempt_count),
                     "next_attempt_at", api_json_time(d->next_attempt_at), "last_status_code",
                     json_int_or_null(d->last_status_code), "last_error", api_json_str(d->last_error),
                     "delivered_at", api_json_time(d->delivered_at), "created_at", api_json_time(d->created_at),
                     "first_attempt_at", api_json_time(d->first_attempt_at), "last_attempt_at",
                     api_json_time(d->last_attempt_at), NULL);
}

json_t *api_attempt_json(const struct attempt *a)
{
    json_t *error;

    /* "timeout: Operation timed out …": the class keeps the text searchable whatever libcurl says. */
    if (a->error_class && a->error && strstr(a->error, a->error_class) == NULL)
        error = json_sprintf("%s: %s", a->error_class, a->error);
    else
        error = api_json_str(a->error ? a->error : a->error_class);
    return object_of("n", json_integer(a->n), "started_at", api_json_time(a->started_at), "duration_ms",
                     json_integer(a->duration_ms), "status_code", json_int_or_null(a->status_code), "error", error,
                     "response", api_json_str(a->response), NULL);
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
                  "updated_at", api_json_time(ep->updated_at), NULL);
    if (!j || !with_secret)
        return j;
    /* Only the newest key is ever shown; older ones show their lifetime alone. */
    json_t *secrets = json_array();
    for (size_t i = 0; secrets && i < ep->n_secrets; i++) {
        const struct endpoint_secret *s = &ep->secrets[i];
        if (s->expires_at != 0 && s->expires_at <= now)
            continue;
        json_array_append_new(secrets, object_of("created_at", api_json_time(s->created_at), "expires_at",
                                                 api_json_time(s->expires_at), NULL));
    }
    if (json_object_set_new(j, "secret", api_json_str(ep->n_secrets > 0 ? ep->secrets[0].key : NULL)) != 0 ||
        !secrets || json_object_set_new(j, "secrets", secrets) != 0) {
        json_decref(j);
        return NULL;
    }
    return j;
}

/* ---- endpoint bodies ------------------------------------------------------------------------ */

static int invalid(struct api_error *err, const char *field, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int invalid(struct api_error *err, const char *field, const char *fmt, ...)
{
    char why[200];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    api_error_set(err, 400, "invalid_field", "%s: %s", field, why);
    return HOOKD_EINVAL;
}

static bool host_char_ok(unsigned char c) { return isalnum(c) || c == '-' || c == '.' || c == '_'; }

int api_url_check(const char *url, char *why, size_t why_len)
{
    const char *rest, *host_end, *auth_end;
    static const char *const schemes[] = {"http://", "https://"};

    snprintf(why, why_len, "ok");
    if (strlen(url) > API_URL_MAX) {
        snprintf(why, why_len, "longer than %d characters", API_URL_MAX);
        return HOOKD_EINVAL;
    }
    for (const char *p = url; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c <= 0x20 || c >= 0x7f) {
            snprintf(why, why_len, "must not contain spaces, control or non-ASCII characters (percent-encode them)");
            return HOOKD_EINVAL;
        }
    }
    rest = NULL;
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
        if (strncasecmp(url, schemes[i], strlen(schemes[i])) == 0)
            rest = url + strlen(schemes[i]);
    }
    if (!rest) {
        snprintf(why, why_len, "must be an http:// or https:// URL");
        return HOOKD_EINVAL;
    }
    auth_end = rest + strcspn(rest, "/?#");
    if (memchr(rest, '@', (size_t)(auth_end - rest))) {
        snprintf(why, why_len, "must not contain credentials (user@host)");
        return HOOKD_EINVAL;
    }
    if (*rest == '[') {
        char addr[INET6_ADDRSTRLEN + 1];
        struct in6_addr a6;
        const char *close = memchr(rest, ']', (size_t)(auth_end - rest));
        size_t n = close ? (size_t)(close - rest - 1) : 0;
        if (!close || n == 0 || n >= sizeof addr) {
            snprintf(why, why_len, "has a malformed IPv6 host");
            return HOOKD_EINVAL;
        }
        memcpy(addr, rest + 1, n);
        addr[n] = '\0';
        if (inet_pton(AF_INET6, addr, &a6) != 1) {
            snprintf(why, why_len, "has a malformed IPv6 host");
            return HOOKD_EINVAL;
        }
        host_end = close + 1;
    } else {
        host_end = rest;
        while (host_end < auth_end && *host_end != ':') {
            if (!host_char_ok((unsigned char)*host_end)) {
                snprintf(why, why_len, "has an invalid character in the host");
                return HOOKD_EINVAL;
            }
            host_end++;
        }
        if (host_end == rest) {
            snprintf(why, why_len, "must have a host");
            return HOOKD_EINVAL;
        }
        if (*rest == '.' || *rest == '-' || host_end[-1] == '-' || memmem(rest, (size_t)(host_end - rest), "..", 2)) {
            snprintf(why, why_len, "has a malformed host");
            return HOOKD_EINVAL;
        }
    }
    if (host_end < auth_end) {
        char port[8];
        size_t n = (size_t)(auth_end - host_end - 1);
        long long p;
        if (*host_end != ':' || n == 0 || n >= sizeof port) {
            snprintf(why, why_len, "has a malformed port");
            return HOOKD_EINVAL;
        }
        memcpy(port, host_end + 1, n);
        port[n] = '\0';
        if (!parse_int_range(port, 1, 65535, &p)) {
            snprintf(why, why_len, "port must be from 1 to 65535");
            return HOOKD_EINVAL;
        }
    }
    return 0;
}

/* Replaces *slot with a copy of value (NULL clears it). */
static int replace_str(char **slot, const char *value)
{
    char *copy = NULL;

    if (value && !(copy = strdup(value)))
        return HOOKD_ENOMEM;
    free(*slot);
    *slot = copy;
    return 0;
}

static void secret_wipe(struct endpoint_secret *s)
{
    if (s->key) {
        explicit_bzero(s->key, strlen(s->key));
        free(s->key);
    }
    s->key = NULL;
}

typedef int (*field_apply_fn)(struct endpoint *ep, const json_t *v, enum api_body_mode mode, struct api_error *err);

static int field_url(struct endpoint *ep, const json_t *v, enum api_body_mode mode, struct api_error *err)
{
    char why[128];

    if (!json_is_string(v))
        return invalid(err, "url", "must be a string");
    if (api_url_check(json_string_value(v), why, sizeof why) != 0)
        return invalid(err, "url", "%s", why);
    return replace_str(&ep->url, json_string_value(v));
}

/* Optional text: null or "" clears it. */
static int text_field(char **slot, const char *name, size_t max, const json_t *v, struct api_error *err)
{
    const char *s;

    if (json_is_null(v))
        return replace_str(slot, NULL);
    if (!json_is_string(v))
        return invalid(err, name, "must be a string or null");
    s = json_string_value(v);
    if (!text_ok(s, max) || strlen(s) != json_string_length(v))
        return invalid(err, name, "at most %zu characters, no control characters", max);
    return replace_str(slot, s[0] ? s : NULL);
}

static int field_account(struct endpoint *ep, const json_t *v, enum api_body_mode mode, struct api_error *err)
{
    return text_field(&ep->account, "account", API_ACCOUNT_MAX, v, err);
}

static int field_description(struct endpoint *ep, const json_t *v, enum api_body_mode mode, struct api_error *err)
{
    return text_field(&ep->description, "description", API_DESCRIPTION_MAX, v, err);
}

static int field_event_types(struct endpoint *ep, const json_t *v, enum api_body_mode mode, struct api_error *err)
{
    char *types[ENDPOINT_MAX_TYPES];
    size_t n = 0, i;
    const json_t *item;

    if (json_is_null(v))
        n = 0;
    else if (!json_is_array(v))
        return invalid(err, "event_types", "must be an array of event types such as [\"order.*\"]");
    else if (json_array_size(v) > ENDPOINT_MAX_TYPES)
        return invalid(err, "event_types", "at most %d entries", ENDPOINT_MAX_TYPES);
    json_array_foreach(v, i, item) {
        const char *t = json_string_value(item);
        if (!t || !event_type_is_valid(t, true)) {
            for (size_t k = 0; k < n; k++)
                free(types[k]);
            return invalid(err, "event_types", "entry %zu is not a valid event type or pattern", i);
        }
        if (!(types[n] = strdup(t))) {
            for (size_t k = 0; k < n; k++)
                free(types[k]);
            return HOOKD_ENOMEM;
        }
        n++;
    }
    for (size_t k = 0; k < ep->n_event_types; k++)
        free(ep->event_types[k]);
    memcpy(ep->event_types, types, n * sizeof types[0]);
    ep->n_event_types = n;
    return 0;
}

static int field_secret(struct endpoint *ep, const json_t *v, enum api_body_mode mode, struct api_error *err)
{
    char *key;

    if (mode == API_BODY_PATCH)
        return invalid(err, "secret", "change it with POST /v1/endpoints/{id}/secret/rotate");
    if (json_is_null(v))
        return 0; /* generated after the fields */
    if (!json_is_string(v) || !secret_is_valid(json_string_value(v)))
        return invalid(err, "secret", "must be \"whsec_\" followed by base64 of 24 to 64 bytes");
    if (!(key = strdup(json_string_value(v))))
        return HOOKD_ENOMEM;
    for (size_t i = 0; i < ep->n_secrets && i < ENDPOINT_MAX_SECRETS; i++)
        secret_wipe(&ep->secrets[i]);
    ep->secrets[0] = (struct endpoint_secret){.key = key, .expires_at = 0, .created_at = clock_now_ms()};
    ep->n_secrets = 1;
    return 0;
}

static int field_ordering(struct endpoint *ep, const json_t *v, enum api_body_mode mode, struct api_error *err)
{
    if (json_is_null(v)) {
        ep->ordering = ORDERING_NONE;
        return 0;
    }
    if (!json_is_string(v) || ordering_parse(json_string_value(v), &ep->ordering) != 0)
        return invalid(err, "ordering", "must be \"none\", \"key\" or \"latest\"");
    return 0;
}

static int int_field(int *slot, const char *name, int max, const json_t *v, struct api_error *err)
{
    if (json_is_null(v)) {
        *slot = 0;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > max)
        return invalid(err, name, "must be an integer from 0 to %d (0 or null: the default)", max);
    *slot = (int)json_integer_value(v);
    return 0;
}

static int field_max_in_flight(struct endpoint *ep, const json_t *v, enum api_body_mode mode, struct api_error *err)
{
    return int_field(&ep->max_in_flight, "max_in_flight", API_MAX_IN_FLIGHT_MAX, v, err);
}

static int field_rate_limit(struct endpoint *ep, const json_t *v, enum api_body_mode mode, struct api_error *err)
{
    return int_field(&ep->rate_limit, "rate_limit", API_RATE_LIMIT_MAX, v, err);
}

#define API_TIMEOUT_MAX_MS (10 * 60 * 1000)

static int field_timeout(struct endpoint *ep, const json_t *v, enum api_body_mode mode, struct api_error *err)
{
    int64_t ms = 0;
    const char *s = json_string_value(v);

    if (json_is_null(v) || (s && s[0] == '\0')) {
        ep->timeout_ms = 0;
        return 0;
    }
    if (!s || duration_parse(s, &ms) != 0 || ms <= 0 || ms > API_TIMEOUT_MAX_MS)
        return invalid(err, "timeout", "must be a duration from 1ms to 10m such as \"10s\"");
    ep->timeout_ms = ms;
    return 0;
}

static int field_retry_schedule(struct endpoint *ep, const json_t *v, enum api_body_mode mode,
                                struct api_error *err)
{
    int64_t delays[RETRY_MAX_SCHEDULE];
    size_t n = 0, i;
    const json_t *item;
    const char *s = json_string_value(v);

    if (json_is_null(v) || (s && s[0] == '\0')) {
        n = 0;
    } else if (s) {
        if (duration_list_parse(s, delays, RETRY_MAX_SCHEDULE, &n) != 0)
            return invalid(err, "retry_schedule", "must be durations such as \"10s,30s,2m\" (at most %d)",
                           RETRY_MAX_SCHEDULE);
    } else if (json_is_array(v)) {
        if (json_array_size(v) > RETRY_MAX_SCHEDULE)
            return invalid(err, "retry_schedule", "at most %d delays", RETRY_MAX_SCHEDULE);
        json_array_foreach(v, i, item) {
            if (!json_is_string(item) || duration_parse(json_string_value(item), &delays[n]) != 0)
                return invalid(err, "retry_schedule", "entry %zu is not a duration such as \"30s\"", i);
            n++;
        }
    } else {
        return invalid(err, "retry_schedule", "must be a string \"10s,30s\" or an array [\"10s\",\"30s\"]");
    }
    memcpy(ep->retry_schedule_ms, delays, n * sizeof delays[0]);
    ep->n_retry_schedule = n;
    return 0;
}

static const struct {
    const char *name;
    field_apply_fn apply;
} endpoint_fields[] = {
    {"url", field_url},
    {"account", field_account},
    {"description", field_description},
    {"event_types", field_event_types},
    {"secret", field_secret},
    {"ordering", field_ordering},
    {"max_in_flight", field_max_in_flight},
    {"rate_limit", field_rate_limit},
    {"timeout", field_timeout},
    {"retry_schedule", field_retry_schedule},
};

int api_endpoint_apply(struct endpoint *ep, const json_t *body, enum api_body_mode mode, struct api_error *err)
{
    const char *key;
    json_t *v;

    if (!json_is_object(body)) {
        api_error_set(err, 400, "malformed_json", "the request body must be a JSON object");
        return HOOKD_EINVAL;
    }
    json_object_foreach((json_t *)body, key, v) {
        size_t i = 0;
        while (i < sizeof endpoint_fields / sizeof endpoint_fields[0] && strcmp(endpoint_fields[i].name, key) != 0)
            i++;
        if (i == sizeof endpoint_fields / sizeof endpoint_fields[0]) {
            api_error_set(err, 400, "unknown_field", "%.64s: unknown field", key);
            return HOOKD_EINVAL;
        }
        int rc = endpoint_fields[i].apply(ep, v, mode, err);
        if (rc != 0)
            return rc;
    }
    if (mode == API_BODY_CREATE && !ep->url) {
        api_error_set(err, 400, "missing_field", "url is required");
        return HOOKD_EINVAL;
    }
    if (mode == API_BODY_CREATE && ep->n_secrets == 0) {
        char secret[SECRET_TEXT_MAX];
        secret_generate(secret);
        ep->secrets[0] = (struct endpoint_secret){.key = strdup(secret), .created_at = clock_now_ms()};
        explicit_bzero(secret, sizeof secret);
        if (!ep->secrets[0].key)
            return HOOKD_ENOMEM;
        ep->n_secrets = 1;
    }
    return 0;
}

int api_endpoint_rotate(struct endpoint *ep, const char *new_secret, int64_t now, int64_t grace_ms)
{
    struct endpoint_secret kept[ENDPOINT_MAX_SECRETS];
    size_t n = 0;
    int64_t until = grace_ms > INT64_MAX - now ? INT64_MAX : now + grace_ms;
    char *key = strdup(new_secret);

    if (!key)
        return HOOKD_ENOMEM;
    kept[n++] = (struct endpoint_secret){.key = key, .expires_at = 0, .created_at = now};
    for (size_t i = 0; i < ep->n_secrets && i < ENDPOINT_MAX_SECRETS; i++) {
        struct endpoint_secret *s = &ep->secrets[i];
        int64_t exp = s->expires_at == 0 || s->expires_at > until ? until : s->expires_at;
        if (!s->key || exp <= now || n == ENDPOINT_MAX_SECRETS) {
            secret_wipe(s);
            continue;
        }
        kept[n++] = (struct endpoint_secret){.key = s->key, .expires_at = exp, .created_at = s->created_at};
    }
    memset(ep->secrets, 0, sizeof ep->secrets);
    memcpy(ep->secrets, kept, n * sizeof kept[0]);
    ep->n_secrets = n;
    return 0;
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
