/*
 * Endpoint bodies: the field table of POST and PATCH /v1/endpoints (read by
 * ops/fields.c), the setters of its list and secret fields, and secret
 * rotation.
 */
#include "ops/endpoint_body.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/clock.h"
#include "core/custom_headers.h"
#include "core/ed25519.h"
#include "core/filter.h"
#include "core/signature.h"
#include "ops/api_common.h"

#define API_TIMEOUT_MAX_MS (10 * 60 * 1000)

_Static_assert(sizeof(enum ordering_mode) == sizeof(int), "FIELD_ENUM stores an int");

static void secret_wipe(struct endpoint_secret *s)
{
    if (s->key) {
        explicit_bzero(s->key, strlen(s->key));
        free(s->key);
    }
    s->key = NULL;
}

static bool event_type_or_pattern(const char *s) { return event_type_is_valid(s, true); }
bool endpoint_key_is_ed25519(const char *key)
{
    return key != NULL && strncmp(key, ED25519_SECRET_PREFIX, strlen(ED25519_SECRET_PREFIX)) == 0;
}

bool endpoint_key_is_valid(const char *key)
{
    unsigned char seed[ED25519_SEED_LEN];
    bool ok;

    if (!endpoint_key_is_ed25519(key))
        return secret_is_valid(key) != 0;
    ok = ed25519_secret_decode(key, seed) == 0;
    explicit_bzero(seed, sizeof seed);
    return ok;
}

int endpoint_key_generate(bool ed25519, char out[ENDPOINT_KEY_TEXT_MAX])
{
    char pub[ED25519_KEY_TEXT_MAX];

    if (!ed25519) {
        secret_generate(out);
        return 0;
    }
    return ed25519_generate(out, pub);
}

static bool secret_ok(const char *s) { return endpoint_key_is_valid(s); }

static bool signing_ok(const char *s) { return strcmp(s, "hmac") == 0 || strcmp(s, "ed25519") == 0; }
/* Read by api_endpoint_apply and api_endpoint_signing from the body: the kind of the newest key is the mode. */
static int set_signing(void *target, const struct field_value *v)
{
    (void)target;
    (void)v;
    return 0;
}

static int set_event_types(void *target, const struct field_value *v)
{
    struct endpoint *ep = target;
    char *types[ENDPOINT_MAX_TYPES];

    for (size_t i = 0; i < v->n; i++) {
        if (!(types[i] = strdup(v->items[i]))) {
            for (size_t k = 0; k < i; k++)
                free(types[k]);
            return HOOKD_ENOMEM;
        }
    }
    for (size_t k = 0; k < ep->n_event_types; k++)
        free(ep->event_types[k]);
    memcpy(ep->event_types, types, v->n * sizeof types[0]);
    ep->n_event_types = v->n;
    return 0;
}

static int set_retry_schedule(void *target, const struct field_value *v)
{
    struct endpoint *ep = target;

    memcpy(ep->retry_schedule_ms, v->durations, v->n * sizeof v->durations[0]);
    ep->n_retry_schedule = v->n;
    return 0;
}

/* A given secret replaces every key; null leaves the create to generate one. */
static int set_secret(void *target, const struct field_value *v)
{
    struct endpoint *ep = target;
    char *key;

    if (v->null)
        return 0;
    if (!(key = strdup(v->str)))
        return HOOKD_ENOMEM;
    for (size_t i = 0; i < ep->n_secrets && i < ENDPOINT_MAX_SECRETS; i++)
        secret_wipe(&ep->secrets[i]);
    ep->secrets[0] = (struct endpoint_secret){.key = key, .expires_at = 0, .created_at = clock_now_ms()};
    ep->n_secrets = 1;
    return 0;
}

/* {"Name": "value", …}: at most CUSTOM_HEADERS_MAX, each by the rules of core/custom_headers.h, no name twice. */
static bool headers_check(const json_t *v, char *why, size_t why_len)
{
    const char *name, *problem;
    json_t *value;
    size_t n = 0;

    if (json_object_size(v) > CUSTOM_HEADERS_MAX) {
        snprintf(why, why_len, "at most %d headers", CUSTOM_HEADERS_MAX);
        return false;
    }
    json_object_foreach((json_t *)v, name, value) {
        const char *other;
        json_t *ignored;
        size_t k = 0;
        if (!json_is_string(value)) {
            snprintf(why, why_len, "%.64s: value must be a string", name);
            return false;
        }
        problem = custom_header_problem(name, json_string_value(value), json_string_length(value));
        if (problem) {
            snprintf(why, why_len, "%.64s %s", name, problem);
            return false;
        }
        /* Names are case-insensitive: "X-A" and "x-a" would be one header sent twice. */
        json_object_foreach((json_t *)v, other, ignored) {
            if (k++ < n && strcasecmp(other, name) == 0) {
                snprintf(why, why_len, "%.64s is given twice", name);
                return false;
            }
        }
        n++;
    }
    return true;
}

/* The whole set is replaced (null or {} clears it); the lines are "Name: value". */
static int set_headers(void *target, const struct field_value *v)
{
    struct endpoint *ep = target;
    char *lines[CUSTOM_HEADERS_MAX];
    const char *name;
    json_t *value;
    size_t n = 0;

    if (!v->null) {
        json_object_foreach((json_t *)v->json, name, value) {
            size_t cap = strlen(name) + json_string_length(value) + 3;
            if (n == CUSTOM_HEADERS_MAX || !(lines[n] = malloc(cap))) {
                for (size_t k = 0; k < n; k++)
                    free(lines[k]);
                return HOOKD_ENOMEM;
            }
            snprintf(lines[n++], cap, "%s: %s", name, json_string_value(value));
        }
    }
    for (size_t k = 0; k < ep->n_headers; k++)
        free(ep->headers[k]);
    memcpy(ep->headers, lines, n * sizeof lines[0]);
    ep->n_headers = n;
    return 0;
}

static const char *const ordering_words[] = {"none", "key", "latest", NULL}; /* enum ordering_mode order */

const struct field endpoint_fields[] = {
    {.name = "url", .type = FIELD_URL, .flags = FIELD_REQUIRED, .offset = offsetof(struct endpoint, url)},
    {.name = "account", .type = FIELD_STRING, .flags = FIELD_NULLABLE | FIELD_BLANK_NULL,
     .max_len = API_ACCOUNT_MAX, .offset = offsetof(struct endpoint, account)},
    {.name = "description", .type = FIELD_STRING, .flags = FIELD_NULLABLE | FIELD_BLANK_NULL,
     .max_len = API_DESCRIPTION_MAX, .offset = offsetof(struct endpoint, description)},
    {.name = "event_types", .type = FIELD_STRING_ARRAY, .flags = FIELD_NULLABLE, .max = ENDPOINT_MAX_TYPES,
     .max_len = 128, .check = event_type_or_pattern,
     .hint = "must be an array of event types such as [\"order.*\"]", .set = set_event_types},
    {.name = "secret", .type = FIELD_STRING, .flags = FIELD_NULLABLE | FIELD_FIXED, .max_len = SECRET_TEXT_MAX,
     .check = secret_ok,
     .hint = "must be \"whsec_\" followed by base64 of 24 to 64 bytes, or an ed25519 \"whsk_\" key",
     .fixed_hint = "change it with POST /v1/endpoints/{id}/secret/rotate", .set = set_secret},
    {.name = "signing", .type = FIELD_STRING, .flags = FIELD_NULLABLE, .max_len = 16, .check = signing_ok,
     .hint = "must be \"hmac\" or \"ed25519\"", .set = set_signing},
    {.name = "ordering", .type = FIELD_ENUM, .flags = FIELD_NULLABLE, .values = ordering_words,
     .offset = offsetof(struct endpoint, ordering)},
    {.name = "max_in_flight", .type = FIELD_INT, .flags = FIELD_NULLABLE, .min = 0, .max = API_MAX_IN_FLIGHT_MAX,
     .offset = offsetof(struct endpoint, max_in_flight)},
    {.name = "rate_limit", .type = FIELD_INT, .flags = FIELD_NULLABLE, .min = 0, .max = API_RATE_LIMIT_MAX,
     .offset = offsetof(struct endpoint, rate_limit)},
    {.name = "timeout", .type = FIELD_DURATION, .flags = FIELD_NULLABLE | FIELD_BLANK_NULL, .min = 1,
     .max = API_TIMEOUT_MAX_MS, .offset = offsetof(struct endpoint, timeout_ms)},
    {.name = "retry_schedule", .type = FIELD_DURATION_LIST, .flags = FIELD_NULLABLE | FIELD_BLANK_NULL,
     .max = RETRY_MAX_SCHEDULE, .set = set_retry_schedule},
    {.name = "headers", .type = FIELD_OBJECT, .flags = FIELD_NULLABLE,
     .hint = "must be an object of header names and values such as {\"X-Tenant\": \"acme\"}",
     .check_object = headers_check, .set = set_headers},
};

const size_t endpoint_fields_count = sizeof endpoint_fields / sizeof endpoint_fields[0];

/* The "signing" of a body: 1 ed25519, 0 hmac, -1 not given. */
static int body_signing(const json_t *body)
{
    const char *v = json_string_value(json_object_get(body, "signing"));

    return v == NULL ? -1 : strcmp(v, "ed25519") == 0;
}

int api_endpoint_apply(struct endpoint *ep, const json_t *body, enum api_body_mode mode, struct api_error *err)
{
    int rc = fields_apply(endpoint_fields, endpoint_fields_count, ep, body, mode, err);
    int want = body_signing(body);

    if (rc == 0 && mode == API_BODY_CREATE && ep->n_secrets == 0) {
        char secret[ENDPOINT_KEY_TEXT_MAX];
        rc = endpoint_key_generate(want == 1, secret);
        ep->secrets[0] = (struct endpoint_secret){.key = rc == 0 ? strdup(secret) : NULL, .created_at = clock_now_ms()};
        explicit_bzero(secret, sizeof secret);
        if (rc != 0)
            return rc;
        if (!ep->secrets[0].key)
            return HOOKD_ENOMEM;
        ep->n_secrets = 1;
    } else if (rc == 0 && mode == API_BODY_CREATE && want >= 0 && endpoint_key_is_ed25519(ep->secrets[0].key) != want) {
        api_error_set(err, 400, "invalid_field", "secret: signing \"%s\" takes a \"%s\" key", want ? "ed25519" : "hmac",
                      want ? "whsk_" : "whsec_");
        return HOOKD_EINVAL;
    }
    return rc;
}

int api_endpoint_signing(struct endpoint *ep, const json_t *body, int64_t now, int64_t grace_ms)
{
    char key[ENDPOINT_KEY_TEXT_MAX];
    int want = body_signing(body), rc;

    if (want < 0 || (ep->n_secrets > 0 && endpoint_key_is_ed25519(ep->secrets[0].key) == want))
        return 0;
    rc = endpoint_key_generate(want == 1, key);
    if (rc == 0)
        rc = api_endpoint_rotate(ep, key, now, grace_ms);
    explicit_bzero(key, sizeof key);
    return rc;
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
