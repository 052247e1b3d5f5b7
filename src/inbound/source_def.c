/*
 * Source definitions: the field tables of POST/PATCH /v1/sources (top level,
 * verify, entity, handler, handler.forward), the rules across fields, the
 * store row (definition text and secrets text), and the API's JSON.
 */
#include "inbound/source_def.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/duration.h"
#include "core/event_check.h"
#include "core/json_pointer.h"
#include "core/ids.h"
#include "core/signature.h"
#include "core/field_spec.h"
#include "core/signature_scheme.h"
#include "ops/api_common.h"

#define TOLERANCE_MAX_MS (7LL * 24 * 3600 * 1000)
#define MAX_DEFER_MAX_MS (30LL * 24 * 3600 * 1000)
#define HEADER_NAME_MAX 64
#define PREFIX_MAX 32
#define JSON_DUMP_FLAGS (JSON_COMPACT | JSON_SORT_KEYS)

/* ---- small parts ------------------------------------------------------------------ */

static void secret_clear(struct source_secret *s)
{
    if (s->key) {
        explicit_bzero(s->key, strlen(s->key));
        free(s->key);
    }
    s->key = NULL;
    s->created_at = 0;
}

static void locator_clear(struct source_locator *l)
{
    free(l->text);
    l->text = NULL;
    l->kind = LOCATOR_NONE;
}

static void free_str(char **p)
{
    free(*p);
    *p = NULL;
}

static void verify_clear(struct source_def *d)
{
    free_str(&d->scheme);
    for (size_t i = 0; i < d->n_secrets && i < SOURCE_MAX_SECRETS; i++)
        secret_clear(&d->secrets[i]);
    d->n_secrets = 0;
    d->tolerance_ms = 0;
    free_str(&d->header);
    free_str(&d->algorithm);
    free_str(&d->encoding);
    free_str(&d->prefix);
    free_str(&d->timestamp_header);
    free_str(&d->template_text);
    d->has_params = false;
    d->has_verify = false;
}

static void entity_clear(struct source_def *d)
{
    free_str(&d->entity_kind);
    locator_clear(&d->entity_id);
    locator_clear(&d->version);
}

static void required_clear(struct source_def *d)
{
    for (size_t i = 0; i < d->n_required && i < SOURCE_MAX_REQUIRED; i++)
        locator_clear(&d->required[i]);
    d->n_required = 0;
}

static void reconcile_headers_clear(struct source_def *d)
{
    for (size_t i = 0; i < d->n_reconcile_headers && i < SOURCE_RECONCILE_HEADERS_MAX; i++) {
        struct source_reconcile_header *h = &d->reconcile_headers[i];
        free(h->name);
        if (h->value) {
            explicit_bzero(h->value, strlen(h->value));
            free(h->value);
        }
        h->name = h->value = NULL;
    }
    d->n_reconcile_headers = 0;
}

static void reconcile_clear(struct source_def *d)
{
    free(d->reconcile_url);
    free(d->reconcile_state);
    free(d->reconcile_version);
    d->reconcile_url = d->reconcile_state = d->reconcile_version = NULL;
    reconcile_headers_clear(d);
}

void source_def_free(struct source_def *d)
{
    if (!d)
        return;
    verify_clear(d);
    free_str(&d->event_id.text);
    free_str(&d->event_type.text);
    entity_clear(d);
    required_clear(d);
    free_str(&d->forward_url);
    free_str(&d->machine);
    secret_clear(&d->forward_secret);
    reconcile_clear(d);
    memset(d, 0, sizeof *d);
}

static bool header_name_ok(const char *s) { return http_token_is_valid(s, strlen(s), HEADER_NAME_MAX); }

/* One locator syntax for the whole program: core/field_spec.h (JSON Pointer or header:NAME). */
bool source_locator_parse(const char *text, enum source_locator_kind *kind, const char **rest)
{
    struct field_spec spec;

    if (!text || strlen(text) >= SOURCE_LOCATOR_MAX || field_spec_parse(text, &spec, NULL) != 0)
        return false;
    *kind = spec.kind == FIELD_HEADER ? LOCATOR_HEADER : LOCATOR_POINTER;
    *rest = spec.kind == FIELD_HEADER ? text + strlen(FIELD_SPEC_HEADER_PREFIX) : text;
    return true;
}

static bool locator_ok(const char *s)
{
    enum source_locator_kind k;
    const char *rest;
    return source_locator_parse(s, &k, &rest);
}

static int locator_set(struct source_locator *l, const struct field_value *v)
{
    const char *rest;
    char *copy = NULL;
    enum source_locator_kind kind = LOCATOR_NONE;

    if (!v->null) {
        if (!source_locator_parse(v->str, &kind, &rest) || !(copy = strdup(v->str)))
            return HOOKD_ENOMEM; /* parse was checked by the field's check: only OOM is left */
    }
    locator_clear(l);
    l->text = copy;
    l->kind = kind;
    return 0;
}

static int str_set(char **slot, const struct field_value *v)
{
    char *copy = NULL;

    if (!v->null && !(copy = strdup(v->str)))
        return HOOKD_ENOMEM;
    free(*slot);
    *slot = copy;
    return 0;
}

/* Applies a nested object through its table; errors name the field as "outer.inner". */
static int nested_apply(const struct field *table, size_t n, struct source_def *d, const json_t *obj,
                        const char *outer)
{
    int rc = fields_apply(table, n, d, obj, API_BODY_CREATE, d->err);

    if (rc == HOOKD_EINVAL && d->err->status != 0 && strncmp(d->err->message, outer, strlen(outer)) != 0) {
        char msg[sizeof d->err->message];
        snprintf(msg, sizeof msg, "%s", d->err->message);
        snprintf(d->err->message, sizeof d->err->message, "%s.%.200s", outer, msg);
    }
    return rc;
}

/* ---- verify -------------------------------------------------------------------------- */

static const char *const scheme_words[] = {"standard-webhooks", "stripe", "github", "hmac", "none", NULL};
static const char *const algorithm_words[] = {"sha256", "sha512", NULL};
static const char *const encoding_words[] = {"hex", "base64", NULL};

static bool word_in(const char *const *words, const char *s)
{
    for (size_t i = 0; words[i]; i++) {
        if (strcmp(words[i], s) == 0)
            return true;
    }
    return false;
}

static bool scheme_word(const char *s) { return word_in(scheme_words, s); }
static bool algorithm_word(const char *s) { return word_in(algorithm_words, s); }
static bool encoding_word(const char *s) { return word_in(encoding_words, s); }

/* The secrets of the verify object being applied replace the current ones;
 * a key that was there already keeps its created_at. */
struct secrets_swap {
    struct source_secret old[SOURCE_MAX_SECRETS];
    size_t n_old;
    bool given;
};
static _Thread_local struct secrets_swap *swap_now;

static int set_scheme(void *t, const struct field_value *v) { return str_set(&((struct source_def *)t)->scheme, v); }
static int set_header(void *t, const struct field_value *v) { return str_set(&((struct source_def *)t)->header, v); }
static int set_algorithm(void *t, const struct field_value *v)
{
    return str_set(&((struct source_def *)t)->algorithm, v);
}
static int set_encoding(void *t, const struct field_value *v)
{
    return str_set(&((struct source_def *)t)->encoding, v);
}
static int set_prefix(void *t, const struct field_value *v) { return str_set(&((struct source_def *)t)->prefix, v); }
static int set_timestamp_header(void *t, const struct field_value *v)
{
    return str_set(&((struct source_def *)t)->timestamp_header, v);
}
static int set_template(void *t, const struct field_value *v)
{
    return str_set(&((struct source_def *)t)->template_text, v);
}

static int set_secrets(void *target, const struct field_value *v)
{
    struct source_def *d = target;
    struct secrets_swap *sw = swap_now;
    int64_t now = d->updated_at;

    for (size_t i = 0; i < d->n_secrets; i++)
        secret_clear(&d->secrets[i]);
    d->n_secrets = 0;
    if (sw)
        sw->given = true;
    for (size_t i = 0; !v->null && i < v->n; i++) {
        struct source_secret s = {.key = strdup(v->items[i]), .created_at = now};
        if (!s.key)
            return HOOKD_ENOMEM;
        for (size_t k = 0; sw && k < sw->n_old; k++) {
            if (sw->old[k].key && strcmp(sw->old[k].key, s.key) == 0)
                s.created_at = sw->old[k].created_at;
        }
        for (size_t k = 0; k < d->n_secrets; k++) {
            if (strcmp(d->secrets[k].key, s.key) == 0) {
                secret_clear(&s); /* the same key twice counts once */
                break;
            }
        }
        if (s.key)
            d->secrets[d->n_secrets++] = s;
    }
    return 0;
}

static bool secret_text_ok(const char *s) { return s[0] != '\0'; }

static const struct field verify_fields[] = {
    {.name = "scheme", .type = FIELD_STRING, .flags = FIELD_REQUIRED, .max_len = 32, .check = scheme_word,
     .hint = "must be \"standard-webhooks\", \"stripe\", \"github\", \"hmac\" or \"none\"", .set = set_scheme},
    {.name = "secrets", .type = FIELD_STRING_ARRAY, .flags = FIELD_NULLABLE, .max = SOURCE_MAX_SECRETS,
     .max_len = SOURCE_SECRET_TEXT_MAX, .check = secret_text_ok,
     .hint = "must be an array of secret strings (they are write-only: GET shows their created_at)",
     .set = set_secrets},
    {.name = "tolerance", .type = FIELD_DURATION, .flags = FIELD_NULLABLE | FIELD_BLANK_NULL, .min = 1000,
     .max = TOLERANCE_MAX_MS, .offset = offsetof(struct source_def, tolerance_ms)},
    {.name = "header", .type = FIELD_STRING, .flags = FIELD_NULLABLE | FIELD_BLANK_NULL, .max_len = HEADER_NAME_MAX,
     .check = header_name_ok, .hint = "must be a header name such as \"X-Signature\"", .set = set_header},
    {.name = "algorithm", .type = FIELD_STRING, .flags = FIELD_NULLABLE | FIELD_BLANK_NULL, .max_len = 16,
     .check = algorithm_word, .hint = "must be \"sha256\" or \"sha512\"", .set = set_algorithm},
    {.name = "encoding", .type = FIELD_STRING, .flags = FIELD_NULLABLE | FIELD_BLANK_NULL, .max_len = 16,
     .check = encoding_word, .hint = "must be \"hex\" or \"base64\"", .set = set_encoding},
    {.name = "prefix", .type = FIELD_STRING, .flags = FIELD_NULLABLE | FIELD_BLANK_NULL, .max_len = PREFIX_MAX,
     .set = set_prefix},
    {.name = "timestamp_header", .type = FIELD_STRING, .flags = FIELD_NULLABLE | FIELD_BLANK_NULL,
     .max_len = HEADER_NAME_MAX, .check = header_name_ok, .hint = "must be a header name such as \"X-Timestamp\"",
     .set = set_timestamp_header},
    {.name = "template", .type = FIELD_STRING, .flags = FIELD_NULLABLE | FIELD_BLANK_NULL,
     .max_len = SIGNATURE_TEMPLATE_MAX, .set = set_template},
};

static int set_verify(void *target, const struct field_value *v)
{
    struct source_def *d = target;
    struct secrets_swap sw = {.n_old = d->n_secrets};
    int rc;

    memcpy(sw.old, d->secrets, sizeof sw.old);
    memset(d->secrets, 0, sizeof d->secrets);
    d->n_secrets = 0;
    verify_clear(d);
    swap_now = &sw;
    rc = nested_apply(verify_fields, sizeof verify_fields / sizeof verify_fields[0], d, v->json, "verify");
    swap_now = NULL;
    if (!sw.given && d->patching) {
        /* A PATCH of verify without secrets keeps the current ones. */
        memcpy(d->secrets, sw.old, sizeof sw.old);
        d->n_secrets = sw.n_old;
    } else {
        for (size_t i = 0; i < sw.n_old; i++)
            secret_clear(&sw.old[i]);
    }
    d->has_verify = rc == 0;
    return rc;
}

/* ---- entity, handler, the rest --------------------------------------------------------- */

static int set_entity_kind(void *t, const struct field_value *v)
{
    return str_set(&((struct source_def *)t)->entity_kind, v);
}
static int set_entity_id(void *t, const struct field_value *v)
{
    return locator_set(&((struct source_def *)t)->entity_id, v);
}
static int set_version(void *t, const struct field_value *v) { return locator_set(&((struct source_def *)t)->version, v); }

#define LOCATOR_HINT "must be a JSON Pointer such as \"/data/id\" or \"header:Name\""

static const struct field entity_fields[] = {
    {.name = "kind", .type = FIELD_STRING, .flags = FIELD_NULLABLE | FIELD_BLANK_NULL, .max_len = INBOX_TEXT_MAX - 1,
     .set = set_entity_kind},
    {.name = "id", .type = FIELD_STRING, .flags = FIELD_NULLABLE | FIELD_BLANK_NULL, .max_len = SOURCE_LOCATOR_MAX,
     .check = locator_ok, .hint = LOCATOR_HINT, .set = set_entity_id},
    {.name = "version", .type = FIELD_STRING, .flags = FIELD_NULLABLE | FIELD_BLANK_NULL,
     .max_len = SOURCE_LOCATOR_MAX, .check = locator_ok, .hint = LOCATOR_HINT, .set = set_version},
};

static int set_entity(void *target, const struct field_value *v)
{
    struct source_def *d = target;

    entity_clear(d);
    if (v->null)
        return 0;
    return nested_apply(entity_fields, sizeof entity_fields / sizeof entity_fields[0], d, v->json, "entity");
}

static bool forward_secret_ok(const char *s) { return secret_is_valid(s) != 0; }

static int set_forward_secret(void *target, const struct field_value *v)
{
    struct source_def *d = target;
    char *key;

    if (v->null)
        return 0;
    if (d->forward_secret.key && strcmp(d->forward_secret.key, v->str) == 0)
        return 0; /* the same key keeps its created_at */
    if (!(key = strdup(v->str)))
        return HOOKD_ENOMEM;
    secret_clear(&d->forward_secret);
    d->forward_secret = (struct source_secret){.key = key, .created_at = d->updated_at};
    return 0;
}

static const struct field forward_fields[] = {
    {.name = "url", .type = FIELD_URL, .flags = FIELD_REQUIRED, .offset = offsetof(struct source_def, forward_url)},
    {.name = "secret", .type = FIELD_STRING, .flags = FIELD_NULLABLE, .max_len = SECRET_TEXT_MAX,
     .check = forward_secret_ok,
     .hint = "must be \"whsec_\" followed by base64 of 24 to 64 bytes (hookd signs the forwarded request with it)",
     .set = set_forward_secret},
};

static int set_forward(void *target, const struct field_value *v)
{
    struct source_def *d = target;
    struct source_secret old = d->forward_secret;
    int rc;

    free_str(&d->forward_url);
    /* The current key stays unless the object names another (a PATCH need not repeat it). */
    if (!d->patching)
        d->forward_secret = (struct source_secret){0};
    rc = nested_apply(forward_fields, sizeof forward_fields / sizeof forward_fields[0], d, v->json,
                      "handler.forward");
    if (!d->patching)
        secret_clear(&old);
    return rc;
}

static bool machine_name_ok(const char *s) { return id_is_valid(s); }

/* The machine must exist: the API checks that in the write's transaction (api_sources.c). */
static int set_machine(void *target, const struct field_value *v)
{
    return str_set(&((struct source_def *)target)->machine, v);
}

/* The application processes this source's items itself, with hookd_inbox_work() (include/hookd.h). */
static int set_library(void *target, const struct field_value *v)
{
    struct source_def *d = target;

    if (v->null || !v->num) {
        api_error_set(d->err, 400, "invalid_field", "handler.library: must be true (or give handler null)");
        return HOOKD_EINVAL;
    }
    d->library = true;
    return 0;
}

static const struct field handler_fields[] = {
    {.name = "forward", .type = FIELD_OBJECT, .set = set_forward},
    {.name = "machine", .type = FIELD_STRING, .max_len = MACHINE_NAME_MAX - 1, .check = machine_name_ok,
     .hint = "must be the name of a machine (POST /v1/machines)", .set = set_machine},
    {.name = "library", .type = FIELD_BOOL, .set = set_library},
};

static int set_handler(void *target, const struct field_value *v)
{
    struct source_def *d = target;

    free_str(&d->forward_url);
    free_str(&d->machine);
    d->library = false;
    if (v->null) {
        secret_clear(&d->forward_secret);
        return 0;
    }
    if (json_object_size(v->json) != 1) {
        api_error_set(d->err, 400, "invalid_field", "handler: must hold exactly one of forward, machine, library");
        return HOOKD_EINVAL;
    }
    int rc = nested_apply(handler_fields, sizeof handler_fields / sizeof handler_fields[0], d, v->json, "handler");
    if (rc == 0 && (d->machine || d->library))
        secret_clear(&d->forward_secret); /* a forward's key goes with the forward */
    return rc;
}

/* ---- reconcile ------------------------------------------------------------------------------ */

/* "https://api.example/orders/{entity_id}": an http(s) URL once the placeholder, the only brace, is filled. */
static bool reconcile_url_ok(const char *s)
{
    const char *at = strstr(s, SOURCE_ENTITY_PLACEHOLDER);
    char filled[API_URL_MAX + 1], why[128];

    if (!at || strlen(s) > API_URL_MAX)
        return false;
    for (const char *p = s; *p; p++)
        if ((*p == '{' || *p == '}') && !(p >= at && p < at + strlen(SOURCE_ENTITY_PLACEHOLDER)))
            return false;
    snprintf(filled, sizeof filled, "%.*sx%s", (int)(at - s), s, at + strlen(SOURCE_ENTITY_PLACEHOLDER));
    return api_url_check(filled, why, sizeof why) == 0;
}

static bool pointer_ok(const char *s) { return s[0] == '/' && json_pointer_check(s, NULL) == 0; }

/* "env:NAME": a portable environment variable name. */
static bool env_ref_ok(const char *s)
{
    if (strncmp(s, "env:", 4) != 0)
        return true; /* a literal */
    s += 4;
    if (!*s || strlen(s) > 128 || !(isalpha((unsigned char)*s) || *s == '_'))
        return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_')
            return false;
    return true;
}

static int set_reconcile_url(void *t, const struct field_value *v) { return str_set(&((struct source_def *)t)->reconcile_url, v); }
static int set_reconcile_state(void *t, const struct field_value *v)
{
    return str_set(&((struct source_def *)t)->reconcile_state, v);
}
static int set_reconcile_version(void *t, const struct field_value *v)
{
    return str_set(&((struct source_def *)t)->reconcile_version, v);
}

static int reconcile_header_add(struct source_def *d, const char *name, const char *value)
{
    struct source_reconcile_header *h;

    if (d->n_reconcile_headers >= SOURCE_RECONCILE_HEADERS_MAX)
        return HOOKD_EINVAL;
    h = &d->reconcile_headers[d->n_reconcile_headers];
    h->name = strdup(name);
    h->value = strdup(value);
    if (!h->name || !h->value) {
        free(h->name);
        free(h->value);
        h->name = h->value = NULL;
        return HOOKD_ENOMEM;
    }
    d->n_reconcile_headers++;
    return 0;
}

static int set_reconcile_headers(void *target, const struct field_value *v)
{
    struct source_def *d = target;
    const char *name;
    json_t *value;

    reconcile_headers_clear(d);
    if (v->null)
        return 0;
    if (json_object_size(v->json) > SOURCE_RECONCILE_HEADERS_MAX) {
        api_error_set(d->err, 400, "invalid_field", "reconcile.headers: at most %d headers",
                      SOURCE_RECONCILE_HEADERS_MAX);
        return HOOKD_EINVAL;
    }
    json_object_foreach((json_t *)v->json, name, value) {
        const char *text = json_string_value(value);
        size_t n = text ? strlen(text) : 0;
        if (!http_token_is_valid(name, strlen(name), HEADER_NAME_MAX)) {
            api_error_set(d->err, 400, "invalid_field", "reconcile.headers: \"%.64s\" is not a header name", name);
            return HOOKD_EINVAL;
        }
        if (!text || n == 0 || n > SOURCE_RECONCILE_VALUE_MAX || event_label_problem(text, n) || !env_ref_ok(text)) {
            api_error_set(d->err, 400, "invalid_field",
                          "reconcile.headers.%.64s: must be text (at most 1024 bytes, no control characters) or "
                          "\"env:NAME\"",
                          name);
            return HOOKD_EINVAL;
        }
        int rc = reconcile_header_add(d, name, text);
        if (rc)
            return rc;
    }
    return 0;
}

#define POINTER_HINT "must be a JSON Pointer into the provider's answer, such as \"/status\""

static const struct field reconcile_fields[] = {
    {.name = "url", .type = FIELD_STRING, .flags = FIELD_REQUIRED, .max_len = API_URL_MAX, .check = reconcile_url_ok,
     .hint = "must be an http(s) URL holding {entity_id} once (the only braces), such as "
             "\"https://api.example.com/orders/{entity_id}\"",
     .set = set_reconcile_url},
    {.name = "headers", .type = FIELD_OBJECT, .flags = FIELD_NULLABLE, .set = set_reconcile_headers},
    {.name = "state", .type = FIELD_STRING, .flags = FIELD_REQUIRED, .max_len = JSON_POINTER_MAX,
     .check = pointer_ok, .hint = POINTER_HINT, .set = set_reconcile_state},
    {.name = "version", .type = FIELD_STRING, .flags = FIELD_NULLABLE | FIELD_BLANK_NULL, .max_len = JSON_POINTER_MAX,
     .check = pointer_ok, .hint = POINTER_HINT, .set = set_reconcile_version},
};

static int set_reconcile(void *target, const struct field_value *v)
{
    struct source_def *d = target;

    reconcile_clear(d);
    if (v->null)
        return 0;
    return nested_apply(reconcile_fields, sizeof reconcile_fields / sizeof reconcile_fields[0], d, v->json,
                        "reconcile");
}

bool source_reconcile_url(const struct source_def *d, const char *entity_id, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    const char *at = d->reconcile_url ? strstr(d->reconcile_url, SOURCE_ENTITY_PLACEHOLDER) : NULL;
    size_t used;

    if (!at)
        return false;
    used = (size_t)(at - d->reconcile_url);
    if (used >= cap)
        return false;
    memcpy(out, d->reconcile_url, used);
    for (const unsigned char *p = (const unsigned char *)entity_id; *p; p++) {
        if (isalnum(*p) || *p == '-' || *p == '.' || *p == '_' || *p == '~') {
            if (used + 1 >= cap)
                return false;
            out[used++] = (char)*p;
        } else {
            if (used + 3 >= cap)
                return false;
            out[used++] = '%';
            out[used++] = hex[*p >> 4];
            out[used++] = hex[*p & 15];
        }
    }
    return (size_t)snprintf(out + used, cap - used, "%s", at + strlen(SOURCE_ENTITY_PLACEHOLDER)) < cap - used;
}

static int set_name(void *target, const struct field_value *v)
{
    struct source_def *d = target;

    snprintf(d->name, sizeof d->name, "%s", v->null ? "" : v->str);
    return 0;
}

static bool name_ok(const char *s) { return id_is_valid(s); }

static int set_event_id(void *t, const struct field_value *v) { return locator_set(&((struct source_def *)t)->event_id, v); }
static int set_event_type(void *t, const struct field_value *v)
{
    return locator_set(&((struct source_def *)t)->event_type, v);
}

static int set_required(void *target, const struct field_value *v)
{
    struct source_def *d = target;

    required_clear(d);
    for (size_t i = 0; !v->null && i < v->n; i++) {
        struct field_value one = {.str = v->items[i]};
        int rc = locator_set(&d->required[i], &one);
        if (rc)
            return rc;
        d->n_required = i + 1;
    }
    return 0;
}

static int set_max_body(void *target, const struct field_value *v)
{
    ((struct source_def *)target)->max_body = v->null ? 0 : v->num;
    return 0;
}

static int set_retry_schedule(void *target, const struct field_value *v)
{
    struct source_def *d = target;

    d->n_retry_schedule = v->null ? 0 : v->n;
    memcpy(d->retry_schedule_ms, v->durations, d->n_retry_schedule * sizeof v->durations[0]);
    return 0;
}

const struct field source_fields[] = {
    {.name = "name", .type = FIELD_STRING, .flags = FIELD_REQUIRED | FIELD_FIXED, .max_len = SOURCE_NAME_MAX - 1,
     .check = name_ok, .hint = "must be 1 to 63 characters of A-Z a-z 0-9 _ . : -",
     .fixed_hint = "a source keeps its name (it is the path /in/{name})", .set = set_name},
    {.name = "verify", .type = FIELD_OBJECT, .flags = FIELD_REQUIRED,
     .hint = "must be an object such as {\"scheme\": \"standard-webhooks\", \"secrets\": [\"whsec_…\"]}",
     .set = set_verify},
    {.name = "event_id", .type = FIELD_STRING, .flags = FIELD_NULLABLE | FIELD_BLANK_NULL,
     .max_len = SOURCE_LOCATOR_MAX, .check = locator_ok, .hint = LOCATOR_HINT, .set = set_event_id},
    {.name = "event_type", .type = FIELD_STRING, .flags = FIELD_NULLABLE | FIELD_BLANK_NULL,
     .max_len = SOURCE_LOCATOR_MAX, .check = locator_ok, .hint = LOCATOR_HINT, .set = set_event_type},
    {.name = "entity", .type = FIELD_OBJECT, .flags = FIELD_NULLABLE, .set = set_entity},
    {.name = "required", .type = FIELD_STRING_ARRAY, .flags = FIELD_NULLABLE, .max = SOURCE_MAX_REQUIRED,
     .max_len = SOURCE_LOCATOR_MAX, .check = locator_ok, .hint = LOCATOR_HINT, .set = set_required},
    {.name = "max_body", .type = FIELD_INT, .flags = FIELD_NULLABLE, .min = 1, .max = SOURCE_MAX_BODY_MAX,
     .set = set_max_body},
    {.name = "handler", .type = FIELD_OBJECT, .flags = FIELD_NULLABLE,
     .hint = "must be an object such as {\"forward\": {\"url\": …, \"secret\": …}}", .set = set_handler},
    {.name = "retry_schedule", .type = FIELD_DURATION_LIST, .flags = FIELD_NULLABLE | FIELD_BLANK_NULL,
     .max = RETRY_MAX_SCHEDULE, .set = set_retry_schedule},
    {.name = "max_defer", .type = FIELD_DURATION, .flags = FIELD_NULLABLE | FIELD_BLANK_NULL, .min = 1000,
     .max = MAX_DEFER_MAX_MS, .offset = offsetof(struct source_def, max_defer_ms)},
    {.name = "reconcile", .type = FIELD_OBJECT, .flags = FIELD_NULLABLE, .set = set_reconcile},
};
const size_t source_fields_count = sizeof source_fields / sizeof source_fields[0];

/* ---- the rules across fields ----------------------------------------------------------------- */

int source_def_check(struct source_def *d, struct api_error *err)
{
    bool none = d->scheme && strcmp(d->scheme, "none") == 0;

    if (!d->has_verify || !d->scheme) {
        api_error_set(err, 400, "missing_field", "verify.scheme is required");
        return HOOKD_EINVAL;
    }
    /* A scheme the table does not hold in this build is refused, never accepted and ignored. */
    if (!none && !signature_scheme_find(d->scheme)) {
        api_error_set(err, 400, "not_supported", "verify.scheme: \"%s\" is not available in this build", d->scheme);
        return HOOKD_EINVAL;
    }
    d->has_params = false;
    if (strcmp(d->scheme, "hmac") == 0) {
        const struct signature_params_text text = {
            .header = d->header, .algorithm = d->algorithm, .encoding = d->encoding, .prefix = d->prefix,
            .timestamp_header = d->timestamp_header, .template_text = d->template_text,
        };
        const char *field = NULL, *problem = NULL;
        if (!d->header) {
            api_error_set(err, 400, "missing_field", "verify.header is required for \"hmac\"");
            return HOOKD_EINVAL;
        }
        if (signature_params_parse(&d->params, &text, &field, &problem) != 0) {
            api_error_set(err, 400, "invalid_field", "verify.%s: %s", field ? field : "header",
                          problem ? problem : "is not valid");
            return HOOKD_EINVAL;
        }
        d->has_params = true;
    } else if (!none && (d->header || d->algorithm || d->encoding || d->prefix || d->timestamp_header ||
                         d->template_text)) {
        api_error_set(err, 400, "invalid_field",
                      "verify: header, algorithm, encoding, prefix, timestamp_header and template are settings of "
                      "\"hmac\"");
        return HOOKD_EINVAL;
    }
    if (none && d->n_secrets > 0) {
        api_error_set(err, 400, "invalid_field", "verify.secrets: scheme \"none\" takes no secrets");
        return HOOKD_EINVAL;
    }
    if (!none && d->n_secrets == 0) {
        api_error_set(err, 400, "missing_field", "verify.secrets: at least one secret is required for \"%s\"",
                      d->scheme);
        return HOOKD_EINVAL;
    }
    for (size_t i = 0; strcmp(d->scheme, SIGNATURE_SCHEME_DEFAULT) == 0 && i < d->n_secrets; i++) {
        if (!secret_is_valid(d->secrets[i].key)) {
            api_error_set(err, 400, "invalid_field",
                          "verify.secrets: entry %zu must be \"whsec_\" followed by base64 of 24 to 64 bytes", i);
            return HOOKD_EINVAL;
        }
    }
    if (d->forward_url && !d->forward_secret.key) {
        api_error_set(err, 400, "missing_field", "handler.forward.secret is required");
        return HOOKD_EINVAL;
    }
    if (d->reconcile_url && !d->machine) {
        api_error_set(err, 400, "invalid_field", "reconcile: takes a handler.machine (it sets a machine's entities)");
        return HOOKD_EINVAL;
    }
    if (d->machine && (!d->entity_kind || d->entity_id.kind == LOCATOR_NONE)) {
        api_error_set(err, 400, "missing_field", "entity.kind and entity.id are required with handler.machine");
        return HOOKD_EINVAL;
    }
    if ((d->entity_id.kind != LOCATOR_NONE || d->version.kind != LOCATOR_NONE) && !d->entity_kind) {
        api_error_set(err, 400, "missing_field", "entity.kind is required with entity.id or entity.version");
        return HOOKD_EINVAL;
    }
    return 0;
}

int source_def_apply(struct source_def *d, const json_t *body, enum api_body_mode mode, int64_t now,
                     struct api_error *err)
{
    int rc;

    d->err = err;
    d->patching = mode == API_BODY_PATCH;
    d->updated_at = now;
    if (mode == API_BODY_CREATE)
        d->created_at = now;
    rc = fields_apply(source_fields, source_fields_count, d, body, mode, err);
    if (rc == 0)
        rc = source_def_check(d, err);
    d->err = NULL;
    d->patching = false;
    return rc;
}

/* ---- JSON: the stored definition and the API view ---------------------------------------------- */

static json_t *str_json(const char *s) { return s ? json_string(s) : json_null(); }
static json_t *locator_json(const struct source_locator *l) { return str_json(l->text); }

static json_t *duration_json(int64_t ms)
{
    char text[24];

    if (ms == 0)
        return json_null();
    duration_format(ms, text);
    return json_string(text);
}

static json_t *schedule_json(const struct source_def *d)
{
    char text[RETRY_MAX_SCHEDULE * 25];
    size_t used = 0;

    if (d->n_retry_schedule == 0)
        return json_null();
    for (size_t i = 0; i < d->n_retry_schedule && i < RETRY_MAX_SCHEDULE; i++) {
        char one[24];
        duration_format(d->retry_schedule_ms[i], one);
        used += (size_t)snprintf(text + used, sizeof text - used, "%s%s", i ? "," : "", one);
    }
    return json_string(text);
}

static json_t *secret_shown(const struct source_secret *s) { return json_pack("{s:o}", "created_at", api_json_time(s->created_at)); }

/* The definition; with_secrets adds what the API shows of them (never the keys). */
static json_t *definition_json(const struct source_def *d, bool with_secrets)
{
    json_t *verify, *entity, *handler, *required = json_array(), *o;

    verify = json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "scheme", str_json(d->scheme), "tolerance",
                       duration_json(d->tolerance_ms), "header", str_json(d->header), "algorithm",
                       str_json(d->algorithm), "encoding", str_json(d->encoding), "prefix", str_json(d->prefix),
                       "timestamp_header", str_json(d->timestamp_header), "template", str_json(d->template_text));
    if (verify && with_secrets) {
        json_t *arr = json_array();
        for (size_t i = 0; arr && i < d->n_secrets; i++)
            json_array_append_new(arr, secret_shown(&d->secrets[i]));
        json_object_set_new(verify, "secrets", arr ? arr : json_null());
    }
    if (d->entity_kind || d->entity_id.text || d->version.text)
        entity = json_pack("{s:o,s:o,s:o}", "kind", str_json(d->entity_kind), "id", locator_json(&d->entity_id),
                           "version", locator_json(&d->version));
    else
        entity = json_null();
    if (d->forward_url) {
        json_t *fwd = json_pack("{s:s}", "url", d->forward_url);
        if (fwd && with_secrets)
            json_object_set_new(fwd, "secret", d->forward_secret.key ? secret_shown(&d->forward_secret) : json_null());
        handler = fwd ? json_pack("{s:o}", "forward", fwd) : NULL;
    } else if (d->machine) {
        handler = json_pack("{s:s}", "machine", d->machine);
    } else if (d->library) {
        handler = json_pack("{s:b}", "library", 1);
    } else {
        handler = json_null();
    }
    for (size_t i = 0; required && i < d->n_required; i++)
        json_array_append_new(required, json_string(d->required[i].text));
    json_t *reconcile = json_null();
    if (d->reconcile_url) {
        json_t *headers = json_object();
        for (size_t i = 0; headers && i < d->n_reconcile_headers; i++) {
            const struct source_reconcile_header *h = &d->reconcile_headers[i];
            if (strncmp(h->value, "env:", 4) == 0)
                json_object_set_new(headers, h->name, json_string(h->value));
            else if (with_secrets) /* a literal value is a secret: shown as set, never whole */
                json_object_set_new(headers, h->name, json_pack("{s:b}", "set", 1));
        }
        reconcile = json_pack("{s:s,s:o*,s:s,s:o}", "url", d->reconcile_url, "headers", headers, "state",
                              d->reconcile_state ? d->reconcile_state : "", "version",
                              str_json(d->reconcile_version));
    }
    o = json_pack("{s:s,s:o*,s:o,s:o,s:o*,s:o*,s:o,s:o*,s:o,s:o,s:o}", "name", d->name, "verify", verify, "event_id",
                  locator_json(&d->event_id), "event_type", locator_json(&d->event_type), "entity", entity,
                  "required", required, "max_body", d->max_body ? json_integer(d->max_body) : json_null(),
                  "handler", handler, "retry_schedule", schedule_json(d), "max_defer", duration_json(d->max_defer_ms),
                  "reconcile", reconcile);
    return o;
}

json_t *source_def_json(const struct source_def *d)
{
    json_t *o = definition_json(d, true);

    if (o && (json_object_set_new(o, "created_at", api_json_time(d->created_at)) != 0 ||
              json_object_set_new(o, "updated_at", api_json_time(d->updated_at)) != 0)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* ---- the store row ------------------------------------------------------------------------------- */

static void json_keys_wipe(json_t *arr)
{
    size_t i;
    json_t *item;

    json_array_foreach(arr, i, item) {
        json_t *key = json_object_get(item, "key");
        if (json_is_string(key))
            explicit_bzero((char *)json_string_value(key), json_string_length(key));
    }
}

/*
 * The secrets column: {"verify": [{"key", "created_at"}], "forward": {"key", "created_at"}}. This pair
 * (secrets_encode / secrets_decode) is the one place key material becomes stored text and back; sealing
 * it at rest (issue 9) changes these two functions only.
 */
static char *secrets_encode(const struct source_def *d)
{
    json_t *root = json_object(), *arr = json_array(), *fwd = NULL;
    char *text = NULL;

    for (size_t i = 0; arr && i < d->n_secrets; i++)
        json_array_append_new(arr, json_pack("{s:s,s:I}", "key", d->secrets[i].key, "created_at",
                                             (json_int_t)d->secrets[i].created_at));
    if (d->forward_secret.key)
        fwd = json_pack("{s:s,s:I}", "key", d->forward_secret.key, "created_at",
                        (json_int_t)d->forward_secret.created_at);
    /* Literal reconciliation header values are secrets too ("key": the value, wiped like the others). */
    json_t *hdrs = json_array();
    for (size_t i = 0; hdrs && i < d->n_reconcile_headers; i++) {
        if (strncmp(d->reconcile_headers[i].value, "env:", 4) != 0)
            json_array_append_new(hdrs, json_pack("{s:s,s:s}", "name", d->reconcile_headers[i].name, "key",
                                                  d->reconcile_headers[i].value));
    }
    if (root && arr && hdrs && json_object_set(root, "verify", arr) == 0 &&
        (json_array_size(hdrs) == 0 || json_object_set(root, "reconcile_headers", hdrs) == 0) &&
        (!d->forward_secret.key || (fwd && json_object_set(root, "forward", fwd) == 0)))
        text = json_dumps(root, JSON_DUMP_FLAGS);
    if (arr)
        json_keys_wipe(arr);
    if (hdrs)
        json_keys_wipe(hdrs);
    json_decref(hdrs);
    if (fwd) {
        json_t *one = json_array();
        if (one && json_array_append(one, fwd) == 0)
            json_keys_wipe(one);
        json_decref(one);
    }
    json_decref(arr);
    json_decref(fwd);
    json_decref(root);
    return text;
}

static int secret_decode_one(const json_t *o, struct source_secret *out)
{
    const char *key = json_string_value(json_object_get(o, "key"));

    if (!key)
        return HOOKD_EIO;
    out->key = strdup(key);
    out->created_at = json_integer_value(json_object_get(o, "created_at"));
    return out->key ? 0 : HOOKD_ENOMEM;
}

static int secrets_decode(const char *text, struct source_def *d)
{
    json_t *root = json_loads(text ? text : "{}", 0, NULL), *arr, *item;
    int rc = root && json_is_object(root) ? 0 : HOOKD_EIO;
    size_t i;

    arr = root ? json_object_get(root, "verify") : NULL;
    if (rc == 0 && arr && (!json_is_array(arr) || json_array_size(arr) > SOURCE_MAX_SECRETS))
        rc = HOOKD_EIO;
    json_array_foreach(arr, i, item) {
        if (rc == 0)
            rc = secret_decode_one(item, &d->secrets[d->n_secrets]);
        if (rc == 0)
            d->n_secrets++;
    }
    json_t *hdrs = root ? json_object_get(root, "reconcile_headers") : NULL;
    json_array_foreach(hdrs, i, item) {
        const char *name = json_string_value(json_object_get(item, "name"));
        const char *value = json_string_value(json_object_get(item, "key"));
        if (rc == 0)
            rc = name && value ? reconcile_header_add(d, name, value) : HOOKD_EIO;
    }
    if (hdrs)
        json_keys_wipe(hdrs);
    item = root ? json_object_get(root, "forward") : NULL;
    if (rc == 0 && item)
        rc = secret_decode_one(item, &d->forward_secret);
    if (arr)
        json_keys_wipe(arr);
    if (item) {
        json_t *k = json_object_get(item, "key");
        if (json_is_string(k))
            explicit_bzero((char *)json_string_value(k), json_string_length(k));
    }
    json_decref(root);
    return rc;
}

int source_def_from_record(const struct source *rec, struct source_def *d)
{
    struct api_error err = {0};
    json_t *def = json_loads(rec->definition, 0, NULL);
    int rc;

    memset(d, 0, sizeof *d);
    if (!def)
        return HOOKD_EIO;
    d->err = &err;
    rc = fields_apply(source_fields, source_fields_count, d, def, API_BODY_CREATE, &err);
    d->err = NULL;
    json_decref(def);
    if (rc == HOOKD_EINVAL)
        rc = HOOKD_EIO;
    if (rc == 0)
        rc = secrets_decode(rec->secrets, d);
    if (rc == 0 && d->scheme && strcmp(d->scheme, "hmac") == 0 && source_def_check(d, &err) != 0)
        rc = HOOKD_EIO; /* stored settings the scheme refuses */
    snprintf(d->name, sizeof d->name, "%s", rec->name);
    d->created_at = rec->created_at;
    d->updated_at = rec->updated_at;
    return rc;
}

int source_def_to_record(const struct source_def *d, struct source *rec)
{
    json_t *def = definition_json(d, false);

    memset(rec, 0, sizeof *rec);
    snprintf(rec->name, sizeof rec->name, "%s", d->name);
    rec->definition = def ? json_dumps(def, JSON_DUMP_FLAGS) : NULL;
    rec->secrets = secrets_encode(d);
    rec->created_at = d->created_at;
    rec->updated_at = d->updated_at;
    json_decref(def);
    if (!rec->definition || !rec->secrets) {
        source_free(rec);
        return HOOKD_ENOMEM;
    }
    return 0;
}

bool source_def_same(const struct source_def *a, const struct source_def *b)
{
    struct source ra, rb;
    bool same = false;

    if (source_def_to_record(a, &ra) != 0)
        return false;
    if (source_def_to_record(b, &rb) == 0) {
        same = strcmp(ra.definition, rb.definition) == 0 && strcmp(ra.secrets, rb.secrets) == 0;
        source_free(&rb);
    }
    source_free(&ra);
    return same;
}

/* ---- defaults ------------------------------------------------------------------------------------- */

static struct source_locator default_locator(const char *text)
{
    struct source_locator l = {.kind = LOCATOR_NONE, .text = (char *)text};
    const char *rest;

    if (!source_locator_parse(text, &l.kind, &rest))
        l.kind = LOCATOR_NONE;
    return l;
}

struct source_locator source_def_event_id(const struct source_def *d)
{
    if (d->event_id.kind != LOCATOR_NONE)
        return d->event_id;
    if (d->scheme && strcmp(d->scheme, "github") == 0)
        return default_locator("header:X-GitHub-Delivery");
    if (d->scheme && strcmp(d->scheme, SIGNATURE_SCHEME_DEFAULT) == 0)
        return default_locator("header:webhook-id");
    return default_locator("/id");
}

struct source_locator source_def_event_type(const struct source_def *d)
{
    if (d->event_type.kind != LOCATOR_NONE)
        return d->event_type;
    if (d->scheme && strcmp(d->scheme, "github") == 0)
        return default_locator("header:X-GitHub-Event");
    return default_locator("/type");
}
