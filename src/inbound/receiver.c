/*
 * POST /in/{source}: the route decision on the header (source known, body
 * cap), then verify, parse, extract and check on the raw body, then one
 * insert-or-duplicate writer op; the connection waits suspended and is
 * answered after the commit. Rejections are counted and logged without the
 * body, asynchronously. Logs carry source names and reasons only.
 */
#include "inbound/receiver.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "config.h"
#include "core/clock.h"
#include "core/ids.h"
#include "core/json_pointer.h"
#include "core/json_scan.h"
#include "core/mac.h"
#include "core/signature_scheme.h"
#include "hub.h"
#include "inbound/processor.h"
#include "inbound/source_cache.h"
#include "log.h"
#include "ops/metrics.h"
#include "ops/api_common.h"
#include "store/writer.h"

#define LOG_PART "inbound"

/* Rejection writes queued now, and those dropped because too many were (process-wide). */
static atomic_int rejections_queued;
static atomic_uint_least64_t rejections_dropped;
static struct log_limiter drop_log = {.first_ms = 10000}; /* 10 s, then doubling */

/* ---- rejections --------------------------------------------------------------------------- */

struct rejection_op {
    struct rejection r;
    char reason[32];
    char peer[64];
};

static int op_reject(struct store *s, void *arg)
{
    struct rejection_op *o = arg;
    return store_rejection_insert(s, &o->r, RECEIVER_REJECTIONS_KEPT);
}

static void reject_done(void *arg, int result)
{
    struct rejection_op *o = arg;

    if (result != 0)
        log_debug(LOG_PART, "source %s: rejection not logged: %s", o->r.source, hookd_strerror(result));
    atomic_fetch_sub(&rejections_queued, 1);
    free(o);
}

/* Logs a refusal without delaying it: a deferred writer op, or nothing when too many wait. */
static void reject_log(const struct api_ctx *api, struct http_request *req, const char *source, const char *reason,
                       size_t size, const char *sha256)
{
    struct rejection_op *o;

    log_debug(LOG_PART, "source %s: refused (%s)", source, reason);
    if (!api->writer || atomic_fetch_add(&rejections_queued, 1) >= RECEIVER_REJECTIONS_QUEUED ||
        !(o = calloc(1, sizeof *o))) {
        atomic_fetch_sub(&rejections_queued, 1);
        atomic_fetch_add(&rejections_dropped, 1);
        log_limited(&drop_log, LOG_WARN, LOG_PART, "rejection log behind: %" PRIu64 " rejections counted only here",
                    (uint64_t)atomic_load(&rejections_dropped));
        return;
    }
    snprintf(o->r.source, sizeof o->r.source, "%s", source);
    snprintf(o->reason, sizeof o->reason, "%s", reason);
    snprintf(o->peer, sizeof o->peer, "%s", http_peer(req));
    o->r.reason = o->reason;
    o->r.peer = o->peer;
    o->r.size = (int64_t)size;
    o->r.at = clock_now_ms();
    if (sha256)
        snprintf(o->r.sha256, sizeof o->r.sha256, "%s", sha256);
    if (writer_submit_deferred(api->writer, op_reject, reject_done, o) != 0) {
        atomic_fetch_sub(&rejections_queued, 1);
        free(o);
    }
}

/* A refusal: the JSON error, and its rejection record. */
static void refuse(const struct api_ctx *api, struct http_request *req, struct http_response *res,
                   const char *source, int status, const char *reason, size_t size, const char *sha256,
                   const char *fmt, ...) __attribute__((format(printf, 9, 10)));

static void refuse(const struct api_ctx *api, struct http_request *req, struct http_response *res,
                   const char *source, int status, const char *reason, size_t size, const char *sha256,
                   const char *fmt, ...)
{
    char message[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    http_reply_error(res, status, reason, "%s", message);
    metrics_inbound_rejected(reason);
    reject_log(api, req, source, reason, size, sha256);
}

static void reply_unavailable(struct http_response *res, int rc)
{
    bool busy = rc == HOOKD_EBUSY;

    http_reply_error(res, 503, busy ? "store_busy" : "store_unavailable", "the store is %s; retry later",
                     busy ? "busy" : "unavailable");
    http_add_header(res, "Retry-After", RECEIVER_RETRY_AFTER);
}

/* ---- the route decision -------------------------------------------------------------------- */

static size_t body_cap(const struct api_ctx *api, const struct source_def *def)
{
    return (size_t)(def->max_body > 0 ? def->max_body : api->cfg->max_body);
}

/* The source of the path from the cache; false after answering 404 or 503. */
static bool source_lookup(const struct api_ctx *api, struct http_request *req, struct http_response *res,
                          struct source_ref *ref)
{
    const char *name = http_param(req, "source");
    int rc;

    if (!name || !id_is_valid(name)) {
        http_reply_error(res, 404, "unknown_source", "no such source");
        return false;
    }
    rc = api->sources ? source_cache_get(api->sources, name, ref) : HOOKD_EUNAVAIL;
    if (rc == HOOKD_ENOTFOUND) {
        http_reply_error(res, 404, "unknown_source", "no source named %s", name);
        return false;
    }
    if (rc != 0) {
        reply_unavailable(res, rc);
        return false;
    }
    return true;
}

/* A chunked body the server cut off at the cap: into the source's rejection log like the Content-Length case. */
static void receiver_too_large(struct http_request *req, size_t received, void *ctx)
{
    const char *name = http_param(req, "source");

    if (name && id_is_valid(name))
        reject_log(ctx, req, name, "too_large", received, NULL);
}

bool receiver_prepare(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = ctx;
    struct source_ref ref;
    const char *length;
    size_t cap;

    if (!source_lookup(api, req, res, &ref))
        return false;
    cap = body_cap(api, ref.def);
    http_set_max_body(req, cap);
    http_set_too_large(req, receiver_too_large);
    /* The server refuses it too; answering here puts it in the source's rejection log. */
    length = http_header(req, "Content-Length");
    if (length && strtoull(length, NULL, 10) > cap) {
        refuse(api, req, res, ref.def->name, 413, "too_large", (size_t)strtoull(length, NULL, 10), NULL,
               "the body exceeds this source's limit of %zu bytes", cap);
        source_cache_put(api->sources, &ref);
        return false;
    }
    source_cache_put(api->sources, &ref);
    return true;
}

/* ---- the request ------------------------------------------------------------------------------ */

/* Fetched once for the process: EVP_sha256() makes every digest fetch it again (a lock and a lookup). */
static EVP_MD *sha256_impl;
static pthread_once_t sha256_once = PTHREAD_ONCE_INIT;

static void sha256_fetch(void) { sha256_impl = EVP_MD_fetch(NULL, "SHA256", NULL); }

static void sha256_hex(const void *data, size_t len, char out[SHA256_HEX_LEN])
{
    unsigned char md[32];
    unsigned int n = 0;

    out[0] = '\0';
    if (pthread_once(&sha256_once, sha256_fetch) != 0 || !sha256_impl)
        return;
    if (EVP_Digest(data, len, md, &n, sha256_impl, NULL) != 1 || n != sizeof md)
        return;
    hex_encode(md, sizeof md, out);
}

static const char *request_header(void *ctx, const char *name) { return http_header(ctx, name); }

/* 0, or a 401 answered. */
static int verify(const struct api_ctx *api, struct http_request *req, struct http_response *res,
                  const struct source_def *def, const char *body, size_t len, const char *sha)
{
    const struct signature_scheme *scheme;
    const char *secrets[SOURCE_MAX_SECRETS];
    int rc;

    if (strcmp(def->scheme, "none") == 0)
        return 0; /* explicit in the definition: there is nothing to check */
    scheme = signature_scheme_find(def->scheme);
    if (!scheme) {
        refuse(api, req, res, def->name, 401, "bad_signature", len, sha, "scheme %s is not available", def->scheme);
        return HOOKD_EINVAL;
    }
    for (size_t i = 0; i < def->n_secrets; i++)
        secrets[i] = def->secrets[i].key;
    const struct signature_request sr = {
        .header = request_header,
        .header_ctx = req,
        .body = body,
        .body_len = len,
        .now_s = clock_now_ms() / 1000,
        .tolerance_s = (def->tolerance_ms > 0 ? def->tolerance_ms : SOURCE_TOLERANCE_DEFAULT_MS) / 1000,
        .params = def->has_params ? &def->params : NULL, /* hmac's settings, parsed with the definition */
    };
    rc = scheme->verify(&sr, secrets, def->n_secrets);
    if (rc == 0)
        return 0;
    if (rc == HOOKD_ETIME)
        refuse(api, req, res, def->name, 401, "stale_timestamp", len, sha,
               "the signature timestamp is outside the tolerance of %" PRId64 " s", sr.tolerance_s);
    else if (scheme->header && !http_header(req, scheme->header))
        refuse(api, req, res, def->name, 401, "missing_signature", len, sha, "the %s header is missing",
               scheme->header);
    else if (def->has_params && !http_header(req, def->params.header))
        refuse(api, req, res, def->name, 401, "missing_signature", len, sha, "the %s header is missing",
               def->params.header);
    else if (rc == HOOKD_ESIG)
        refuse(api, req, res, def->name, 401, "bad_signature", len, sha, "the signature does not match");
    else
        refuse(api, req, res, def->name, 401, "missing_signature", len, sha,
               "the signature headers are missing or malformed");
    return rc;
}

/*
 * The body's values for the locators: a scan (core/json_scan.h) when it
 * decides the body, or jansson's document. Both give what json_pointer_get
 * over the document gives.
 */
struct body_view {
    json_t *doc; /* NULL: scanned */
    struct json_scan_target t[JSON_SCAN_TARGETS_MAX];
    size_t n;
};

static void view_free(struct body_view *v)
{
    if (v)
        json_decref(v->doc);
    free(v);
}

/* Adds a locator's pointer to the scan's targets (once each); false when there are too many. */
static bool view_want(struct body_view *v, const struct source_locator *l)
{
    enum source_locator_kind kind;
    const char *rest;

    if (l->kind == LOCATOR_NONE || !source_locator_parse(l->text, &kind, &rest) || kind == LOCATOR_HEADER)
        return true;
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(v->t[i].pointer, rest) == 0)
            return true;
    if (v->n == JSON_SCAN_TARGETS_MAX)
        return false;
    v->t[v->n++] = (struct json_scan_target){.pointer = rest};
    return true;
}

/* Scans the body for every pointer def's locators name; false when it is left to jansson. */
static bool view_scan(struct body_view *v, const struct source_def *def, const char *body, size_t len)
{
    const struct source_locator id = source_def_event_id(def), type = source_def_event_type(def);
    bool ok = view_want(v, &id) && view_want(v, &type) && view_want(v, &def->entity_id) && view_want(v, &def->version);

    for (size_t i = 0; ok && i < def->n_required; i++)
        ok = view_want(v, &def->required[i]);
    return ok && json_scan(body, len, v->t, v->n);
}

/*
 * The value at a pointer: 0 with *kind and, for a string or an integer, its text (*len bytes, not
 * NUL-terminated; an integer's written into number); HOOKD_ENOTFOUND or HOOKD_EINVAL as json_pointer_get.
 */
static int view_get(const struct body_view *v, const char *pointer, enum json_scan_kind *kind, const char **text,
                    size_t *len, char number[24])
{
    json_t *j;
    int rc;

    *text = NULL;
    *len = 0;
    if (!v->doc) {
        for (size_t i = 0; i < v->n; i++) {
            if (strcmp(v->t[i].pointer, pointer) == 0) {
                *kind = v->t[i].kind;
                *text = v->t[i].text;
                *len = v->t[i].len;
                return *kind == JSON_SCAN_ABSENT ? HOOKD_ENOTFOUND : 0;
            }
        }
        return HOOKD_EINVAL; /* not scanned for: cannot happen (view_scan wants every locator) */
    }
    rc = json_pointer_get(v->doc, pointer, &j, NULL);
    if (rc)
        return rc;
    if (json_is_null(j)) {
        *kind = JSON_SCAN_NULL;
    } else if (json_is_integer(j)) {
        *kind = JSON_SCAN_INTEGER;
        *len = (size_t)snprintf(number, 24, "%" JSON_INTEGER_FORMAT, json_integer_value(j));
        *text = number;
    } else if (json_is_string(j)) {
        *kind = JSON_SCAN_STRING;
        *text = json_string_value(j);
        *len = json_string_length(j);
    } else {
        *kind = JSON_SCAN_OTHER;
    }
    return 0;
}

/*
 * The value at a locator as text (a string, or an integer written out).
 * Returns 0 with *out set (heap), HOOKD_ENOTFOUND when absent or null, HOOKD_EINVAL when it is another
 * kind of value or too long.
 */
static int locate_text(struct http_request *req, const struct body_view *v, const struct source_locator *l,
                       char **out)
{
    enum source_locator_kind kind;
    enum json_scan_kind vk;
    const char *rest, *text = NULL;
    char number[24];
    size_t len = 0;

    *out = NULL;
    if (l->kind == LOCATOR_NONE || !source_locator_parse(l->text, &kind, &rest))
        return HOOKD_ENOTFOUND;
    if (kind == LOCATOR_HEADER) {
        text = http_header(req, rest);
        len = text ? strlen(text) : 0;
    } else {
        int rc = view_get(v, rest, &vk, &text, &len, number);
        if (rc)
            return rc == HOOKD_ENOTFOUND ? rc : HOOKD_EINVAL;
        if (vk == JSON_SCAN_NULL)
            return HOOKD_ENOTFOUND;
        if (vk != JSON_SCAN_INTEGER && vk != JSON_SCAN_STRING)
            return HOOKD_EINVAL;
        if (memchr(text, '\0', len))
            return HOOKD_EINVAL; /* a string with a NUL in it */
    }
    if (!text || len == 0)
        return HOOKD_ENOTFOUND;
    if (len >= INBOX_TEXT_MAX)
        return HOOKD_EINVAL;
    *out = strndup(text, len);
    if (!*out)
        return HOOKD_ENOMEM;
    if (!field_text_ok(*out, INBOX_TEXT_MAX)) {
        free(*out);
        *out = NULL;
        return HOOKD_EINVAL;
    }
    return 0;
}

/* Whether a required locator names a present, non-null value. */
static bool present(struct http_request *req, const struct body_view *v, const struct source_locator *l)
{
    enum source_locator_kind kind;
    enum json_scan_kind vk;
    const char *rest, *text;
    char number[24];
    size_t len;

    if (!source_locator_parse(l->text, &kind, &rest))
        return false;
    if (kind == LOCATOR_HEADER)
        return http_header(req, rest) != NULL;
    return view_get(v, rest, &vk, &text, &len, number) == 0 && vk != JSON_SCAN_NULL;
}

/* One accepted request on its way through the writer. */
struct receive_op {
    const struct api_ctx *api;
    struct http_request *req; /* suspended until the reply */
    bool has_handler;
    bool has_machine;
    struct inbox_item it;
    struct inbox_outcome out;
    struct processor_accepted decided; /* a machine source's item decided in its accept (processor.h) */
};

static void receive_op_free(struct receive_op *o)
{
    o->it.payload = NULL; /* borrowed from the request */
    inbox_item_free(&o->it);
    free(o);
}

/*
 * The item inserted pending for the workers, or, where the store has one
 * writer, decided by its machine first and inserted with its outcome
 * (processor_accept_insert). A decision that fails is undone: with
 * own_savepoint by this call, which then inserts the item as usual; in a
 * group by the writer, which runs each accept alone again.
 */
static int receive_one(struct store *s, struct receive_op *o, bool own_savepoint)
{
    struct processor *p = o->api->processor;
    int rc;

    o->decided = (struct processor_accepted){0};
    if (o->has_machine && processor_decides_accepts(p)) {
        if (own_savepoint && (rc = store_savepoint(s)) != 0)
            return rc;
        rc = processor_accept_insert(p, s, &o->it, &o->decided);
        if (rc == 0 && o->decided.decided) {
            memset(&o->out, 0, sizeof o->out);
            snprintf(o->out.id, sizeof o->out.id, "%s", o->it.id);
            return own_savepoint ? store_release(s) : 0;
        }
        o->decided = (struct processor_accepted){0};
        if (!own_savepoint && rc)
            return rc;
        if (own_savepoint && (rc = rc ? store_rollback_to(s) : store_release(s)) != 0)
            return rc;
    }
    return store_inbox_insert(s, &o->it, &o->out);
}

static int op_receive(struct store *s, void *arg) { return receive_one(s, arg, true); }

/* A group's accepts on the one writer, in order (store_decision_gather's fn). */
struct accepts_group {
    void *const *args;
    size_t n;
    int *results;
};

static int receive_each(struct store *s, void *arg)
{
    struct accepts_group *g = arg;

    for (size_t i = 0; i < g->n; i++) {
        int rc = receive_one(s, g->args[i], false);
        if (rc != 0)
            return rc;
        g->results[i] = 0;
    }
    return 0;
}

/*
 * The accepts queued one after another in a batch, as one call of the store
 * (PostgreSQL: one multi-row statement instead of a savepoint and a statement
 * each). A failure fails the call as a whole: the writer rolls it back and
 * runs each accept alone, so one bad row costs only its own request.
 */
static int op_receive_group(struct store *s, void *const *args, size_t n, int *results)
{
    struct inbox_item **items;
    struct inbox_outcome *outs;
    bool machines = false;
    int rc = HOOKD_ENOMEM;

    for (size_t i = 0; i < n; i++)
        machines = machines || ((struct receive_op *)args[i])->has_machine;
    if (machines && processor_decides_accepts(((struct receive_op *)args[0])->api->processor)) {
        /* One writer (its inserts are one statement each anyway): some items are decided before theirs, and
         * the decisions' transitions rows and emitted events go in multi-row statements after the group. */
        struct accepts_group g = {.args = args, .n = n, .results = results};
        return store_decision_gather(s, receive_each, &g);
    }
    items = calloc(n, sizeof *items);
    outs = malloc(n * sizeof *outs);
    if (items && outs) {
        for (size_t i = 0; i < n; i++)
            items[i] = &((struct receive_op *)args[i])->it;
        rc = store_inbox_insert_many(s, items, n, outs);
        for (size_t i = 0; i < n && rc == 0; i++) {
            ((struct receive_op *)args[i])->out = outs[i];
            results[i] = 0;
        }
    }
    free(items);
    free(outs);
    return rc;
}

/*
 * The 200's body, {"id": …, "status": "accepted" | "duplicate"}. It is
 * written on the writer thread, for every accept: an id of hookd's shape
 * needs no escape and is printed as it is; another (a duplicate of a row
 * written by SQL) goes through the JSON encoder.
 */
static void reply_stored(struct http_response *res, const struct inbox_outcome *out)
{
    const char *status = out->duplicate ? "duplicate" : "accepted";
    char *body;
    int n;

    if (!id_is_valid(out->id)) {
        http_reply_json(res, 200, json_pack("{s:s,s:s}", "id", out->id, "status", status));
        return;
    }
    body = malloc(sizeof out->id + 48);
    if (!body) {
        reply_unavailable(res, HOOKD_ENOMEM);
        return;
    }
    n = snprintf(body, sizeof out->id + 48, "{\"id\":\"%s\",\"status\":\"%s\"}", out->id, status);
    http_reply(res, 200, body, (size_t)n);
    res->content_type = "application/json";
}

/* Writer thread, after the commit: only now may the sender hear 200. */
static void receive_done(void *arg, int rc)
{
    struct receive_op *o = arg;
    struct http_request *req = o->req;
    struct http_response res = {.status = 200};

    if (rc == 0) {
        metrics_inbound_stored(o->out.duplicate);
        if (!o->out.duplicate && o->has_handler && !o->decided.decided)
            hub_notify(o->api->hub, HUB_INBOX_CHANGED); /* the workers: only items they have work for */
        processor_accept_done(o->api->processor, &o->decided);
        if (o->out.conflicting)
            log_warn(LOG_PART, "source %s: inbox item %s: a duplicate with a different body", o->it.source, o->out.id);
        reply_stored(&res, &o->out);
    } else if (api_store_down(rc) || rc == HOOKD_ENOMEM) {
        reply_unavailable(&res, rc);
    } else {
        log_warn(LOG_PART, "source %s: cannot store an event: %s", o->it.source, hookd_strerror(rc));
        http_reply_error(&res, 500, "internal", "%s", hookd_strerror(rc));
    }
    receive_op_free(o);
    http_resume(req, &res);
}

/* Suspends the request until the commit (api_write_async's rule: bounded, so a store that cannot commit within
 * write_timeout answers 503 and the accept is never run). */
static void receive_submit(const struct api_ctx *api, struct http_request *req, struct receive_op *o)
{
    int rc;

    o->req = req;
    http_suspend(req);
    rc = api->writer ? writer_submit_bounded_grouped(api->writer, op_receive, op_receive_group, receive_done, o)
                     : HOOKD_EUNAVAIL;
    if (rc != 0)
        receive_done(o, rc); /* the writer never calls back for an op it refused */
}

/* Fills the item's event id, type, entity and version; false after a 400 naming the field. */
static bool extract(const struct api_ctx *api, struct http_request *req, struct http_response *res,
                    const struct source_def *def, const struct body_view *doc, size_t len, const char *sha,
                    struct inbox_item *it)
{
    const struct source_locator id = source_def_event_id(def), type = source_def_event_type(def);
    char *version = NULL;
    int rc;

    rc = locate_text(req, doc, &id, &it->event_id);
    if (rc) {
        refuse(api, req, res, def->name, 400, rc == HOOKD_ENOTFOUND ? "missing_field" : "invalid_field", len, sha,
               "event id (%s) is %s", id.text, rc == HOOKD_ENOTFOUND ? "missing" : "not a string or integer");
        return false;
    }
    /* The type, entity id and version are optional unless listed in required. */
    struct {
        const struct source_locator *l;
        char **slot;
        const char *what;
    } parts[] = {
        {&type, &it->event_type, "event type"},
        {&def->entity_id, &it->entity_id, "entity id"},
        {&def->version, &version, "version"},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        rc = locate_text(req, doc, parts[i].l, parts[i].slot);
        if (rc == HOOKD_EINVAL) {
            refuse(api, req, res, def->name, 400, "invalid_field", len, sha, "%s (%s) is not a string or integer",
                   parts[i].what, parts[i].l->text);
            free(version);
            return false;
        }
    }
    if (version) {
        long long v;
        bool ok = field_int_parse(version[0] == '-' ? "x" : version, 0, INT64_MAX, &v);
        free(version);
        if (!ok) {
            refuse(api, req, res, def->name, 400, "invalid_field", len, sha, "version (%s) is not an integer",
                   def->version.text);
            return false;
        }
        it->has_version = true;
        it->version = v;
    }
    if (def->entity_kind && !(it->entity_kind = strdup(def->entity_kind))) {
        http_reply_error(res, 500, "internal", "out of memory");
        return false;
    }
    for (size_t i = 0; i < def->n_required; i++) {
        if (!present(req, doc, &def->required[i])) {
            refuse(api, req, res, def->name, 400, "missing_field", len, sha, "%s is required",
                   def->required[i].text);
            return false;
        }
    }
    return true;
}

void receiver_handle(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = ctx;
    struct source_ref ref;
    struct receive_op *o = NULL;
    const struct source_def *def;
    char sha[SHA256_HEX_LEN];
    json_error_t jerr;
    struct body_view *doc = NULL;
    size_t len;
    const char *body = http_body(req, &len);

    /* Looked up again: the definition may have changed since prepare, and the reference is held only here. */
    if (!source_lookup(api, req, res, &ref))
        return;
    def = ref.def;
    sha256_hex(body, len, sha);
    if (verify(api, req, res, def, body, len, sha) != 0)
        goto out;
    if (!(doc = calloc(1, sizeof *doc))) {
        reply_unavailable(res, HOOKD_ENOMEM);
        goto out;
    }
    /* Most bodies are decided by the scan; the rest, and every malformed one, by jansson. */
    if (!view_scan(doc, def, body, len) && !(doc->doc = json_loadb(body, len, JSON_DECODE_ANY, &jerr))) {
        refuse(api, req, res, def->name, 400, "malformed_json", len, sha, "malformed JSON at line %d column %d",
               jerr.line, jerr.column);
        goto out;
    }
    if (!(o = calloc(1, sizeof *o))) {
        reply_unavailable(res, HOOKD_ENOMEM);
        goto out;
    }
    o->api = api;
    o->has_handler = def->forward_url != NULL || def->machine != NULL;
    o->has_machine = def->machine != NULL;
    snprintf(o->it.source, sizeof o->it.source, "%s", def->name);
    if (!extract(api, req, res, def, doc, len, sha, &o->it))
        goto out;
    o->it.payload = (char *)body; /* valid until the request is resumed, after the reply */
    snprintf(o->it.payload_sha256, sizeof o->it.payload_sha256, "%s", sha);
    o->it.signature_verified = strcmp(def->scheme, "none") != 0;
    view_free(doc);
    source_cache_put(api->sources, &ref);
    receive_submit(api, req, o);
    return;
out:
    if (o)
        receive_op_free(o);
    view_free(doc);
    source_cache_put(api->sources, &ref);
}
