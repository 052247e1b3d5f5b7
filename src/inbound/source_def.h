/*
 * An inbound source's definition (DESIGN §6, §12 POST /v1/sources): the
 * field tables of its JSON body (read by ops/fields.c), the parsed form the
 * receiver uses, and its two store columns (the definition without secrets,
 * and the secrets: the one place that turns key material into stored text).
 *
 *   source_def_apply      validate a POST/PATCH body onto a definition
 *   source_def_check      the rules across fields (scheme known, secrets present, …)
 *   source_def_from_record / source_def_to_record   the store row, both ways
 *   source_def_json       the API's view (secrets shown as their created_at only)
 *   source_locator_*      where an event's id, type, entity and version are
 */
#ifndef HOOKD_INBOUND_SOURCE_DEF_H
#define HOOKD_INBOUND_SOURCE_DEF_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "core/retry.h"
#include "core/signature_scheme.h"
#include "ops/fields.h"
#include "store/store.h"

struct api_error;

#define SOURCE_MAX_SECRETS 8     /* verify secrets active at once (rotation) */
#define SOURCE_MAX_REQUIRED 32   /* required fields */
#define SOURCE_SECRET_TEXT_MAX 512
#define SOURCE_LOCATOR_MAX 256   /* "/a/b" or "header:Name" */
#define SOURCE_MAX_BODY_MAX (64LL * 1024 * 1024)
#define SOURCE_TOLERANCE_DEFAULT_MS (300 * 1000)
#define SOURCE_RECONCILE_HEADERS_MAX 16
#define SOURCE_RECONCILE_VALUE_MAX 1024 /* bytes of one header value */
#define SOURCE_ENTITY_PLACEHOLDER "{entity_id}"

/* Where a value is: a JSON Pointer into the body, or a request header. */
enum source_locator_kind { LOCATOR_NONE, LOCATOR_POINTER, LOCATOR_HEADER };
struct source_locator {
    enum source_locator_kind kind;
    char *text; /* as given ("/data/id", "header:X-Id"); NULL for none */
};

struct source_secret {
    char *key;          /* wiped before it is freed */
    int64_t created_at; /* ms */
};

/* A reconciliation request header: the value is "env:NAME" (read at request time) or literal text,
 * which is kept with the secrets (sealed at rest, never shown). */
struct source_reconcile_header {
    char *name;
    char *value; /* wiped before it is freed */
};

struct source_def {
    char name[SOURCE_NAME_MAX];
    /* verify */
    bool has_verify;
    char *scheme; /* "standard-webhooks", "stripe", "github", "hmac" or "none" */
    struct source_secret secrets[SOURCE_MAX_SECRETS];
    size_t n_secrets;
    int64_t tolerance_ms; /* 0: the default, 300 s */
    char *header, *algorithm, *encoding, *prefix, *timestamp_header, *template_text; /* hmac's settings, as given */
    /* hmac: the settings parsed (source_def_check and source_def_from_record fill it); has_params false otherwise */
    bool has_params;
    struct signature_params params;
    /* where things are (NONE: the scheme's default, source_def_event_id / _event_type) */
    struct source_locator event_id, event_type;
    char *entity_kind; /* a literal */
    struct source_locator entity_id, version;
    struct source_locator required[SOURCE_MAX_REQUIRED];
    size_t n_required;
    int64_t max_body; /* bytes; 0: [inbox] max_body */
    /* handler: forward (forward_url set), machine (its name), library (the application's
     * hookd_inbox_work), or none */
    bool library;
    char *forward_url;
    char *machine;
    struct source_secret forward_secret;
    int64_t retry_schedule_ms[RETRY_MAX_SCHEDULE];
    size_t n_retry_schedule; /* 0: [inbox] retry_schedule */
    int64_t max_defer_ms;    /* 0: [inbox] max_defer */
    /* reconcile: the provider's API (GET url with {entity_id}), where its state and version are; NULL url: none */
    char *reconcile_url;
    struct source_reconcile_header reconcile_headers[SOURCE_RECONCILE_HEADERS_MAX];
    size_t n_reconcile_headers;
    char *reconcile_state, *reconcile_version; /* JSON Pointers into the provider's answer (version optional) */
    int64_t created_at, updated_at;
    /* while a body is applied */
    struct api_error *err;
    bool patching;
};

void source_def_free(struct source_def *d);

/* The body tables, for tests and documentation. */
extern const struct field source_fields[];
extern const size_t source_fields_count;

/*
 * Applies a POST (create: name and verify required) or PATCH body to d. In a
 * PATCH each top-level field given replaces the current one, and a `verify`
 * without `secrets` keeps the current secrets. Refused with 400 naming the
 * field (nested ones as "verify.scheme"); a scheme not in this build is 400
 * not_supported. Then
 * source_def_check runs. Returns 0, HOOKD_EINVAL with err filled, or
 * HOOKD_ENOMEM; d stays freeable.
 */
__attribute__((warn_unused_result)) int source_def_apply(struct source_def *d, const json_t *body,
                                                         enum api_body_mode mode, int64_t now,
                                                         struct api_error *err);
__attribute__((warn_unused_result)) int source_def_check(struct source_def *d, struct api_error *err);

/* The row as stored, both ways. from_record: HOOKD_EIO for columns that do not parse. */
__attribute__((warn_unused_result)) int source_def_from_record(const struct source *rec, struct source_def *d);
/* Fills rec (name, heap definition and secrets, times); free with source_free. */
__attribute__((warn_unused_result)) int source_def_to_record(const struct source_def *d, struct source *rec);
/* Whether two definitions store the same row (times aside). */
bool source_def_same(const struct source_def *a, const struct source_def *b);

/* The API's JSON of a source: every field, secrets as [{"created_at"}]. NULL on allocation failure. */
json_t *source_def_json(const struct source_def *d);

/* The locators in effect: the given one, else the scheme's default (github: its headers; standard-webhooks:
 * webhook-id; others: "/id" and "/type"). */
struct source_locator source_def_event_id(const struct source_def *d);
struct source_locator source_def_event_type(const struct source_def *d);

/*
 * The reconciliation URL for an entity: the template with {entity_id}
 * replaced by the id, percent-encoded (unreserved characters kept). Returns
 * false when it does not fit in cap bytes.
 */
bool source_reconcile_url(const struct source_def *d, const char *entity_id, char *out, size_t cap);

/* Parses "/a/b" or "header:Name" into kind and the part after "header:"; false when malformed. */
bool source_locator_parse(const char *text, enum source_locator_kind *kind, const char **rest);
#endif
