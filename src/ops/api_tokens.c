/*
 * Admin API /v1/tokens: account-scoped tokens for a customer portal. A
 * create answers the secret once (it is stored only as its SHA-256 and
 * never logged); lists and gets never show it; a revoke takes effect on
 * this node at once and on every other within TOKEN_CACHE_CHECK_MS.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/duration.h"
#include "core/ids.h"
#include "core/timefmt.h"
#include "ops/api_common.h"
#include "ops/list_queries.h"
#include "ops/portal_link.h"
#include "ops/token_cache.h"

#define TOKEN_TTL_MAX_MS (366LL * 24 * 3600 * 1000) /* a token lives at most about a year */

static json_t *token_json(const struct api_token *t, int64_t now)
{
    const char *status = t->revoked_at ? "revoked" : t->expires_at <= now ? "expired" : "active";

    return json_pack("{s:s,s:o,s:s,s:o,s:o,s:o,s:o,s:o,s:s}", "id", t->id, "account", api_json_text(t->account),
                     "scope", token_scope_name(t->scope), "description", api_json_text(t->description), "created_by",
                     api_json_text(t->created_by), "created_at", api_json_time(t->created_at), "expires_at",
                     api_json_time(t->expires_at), "revoked_at", api_json_time(t->revoked_at), "status", status);
}

/* One create or revoke; heap, freed by its reply. */
struct token_op {
    const struct api_ctx *api;
    struct api_token t;
    char secret[TOKEN_SECRET_MAX]; /* create: shown once in the answer, then wiped */
    char id[HOOKD_ID_MAX];         /* revoke */
    int64_t now;
};

static void token_op_free(struct token_op *o)
{
    api_token_free(&o->t);
    explicit_bzero(o->secret, sizeof o->secret);
    free(o);
}

static int op_create(struct store *s, void *arg)
{
    struct token_op *o = arg;
    return store_token_insert(s, &o->t);
}

static void create_reply(void *arg, int rc, struct http_response *res)
{
    struct token_op *o = arg;

    if (rc == 0) {
        json_t *j = token_json(&o->t, o->now);
        char link[PORTAL_LINK_MAX];
        token_cache_put(o->api->tokens, &o->t);
        if (j && (json_object_set_new(j, "token", json_string(o->secret)) != 0 ||
                  json_object_set_new(j, "portal_url", portal_link(o->api->cfg, o->secret, link, sizeof link)
                                                           ? json_string(link)
                                                           : json_null()) != 0)) {
            json_decref(j);
            j = NULL;
        }
        explicit_bzero(link, sizeof link);
        if (j)
            http_reply_json(res, 201, j);
        else
            http_reply_error(res, 500, "internal", "out of memory");
    } else {
        api_reply_store_error(res, rc, "token");
    }
    token_op_free(o);
}

/* The expiry from "expires_at" (RFC 3339, in the future) or "ttl" (a duration); false after the 400. */
static bool token_expiry(struct http_response *res, json_t *body, int64_t now, int64_t *out)
{
    json_t *at = json_object_get(body, "expires_at"), *ttl = json_object_get(body, "ttl");
    int64_t ms = 0;

    if (at && json_is_null(at))
        at = NULL;
    if (ttl && json_is_null(ttl))
        ttl = NULL;
    if ((at == NULL) == (ttl == NULL)) {
        http_reply_error(res, 400, at ? "invalid_field" : "missing_field",
                         at ? "expires_at: give expires_at or ttl, not both"
                            : "expires_at is required (or ttl): a token always expires");
        return false;
    }
    if (at) {
        if (!json_is_string(at) || rfc3339_parse(json_string_value(at), &ms) != 0 || ms <= now ||
            ms - now > TOKEN_TTL_MAX_MS) {
            http_reply_error(res, 400, "invalid_field",
                             "expires_at: must be an RFC 3339 time in the future, at most 366 days ahead");
            return false;
        }
        *out = ms;
        return true;
    }
    if (!json_is_string(ttl) || duration_parse(json_string_value(ttl), &ms) != 0 || ms < 1000 ||
        ms > TOKEN_TTL_MAX_MS) {
        http_reply_error(res, 400, "invalid_field", "ttl: must be a duration from 1s to 366 days (e.g. \"30d\")");
        return false;
    }
    *out = now + ms;
    return true;
}

/*
 * POST /v1/tokens {"account", "scope": "read" | "read_replay", "expires_at"
 * or "ttl", "description"}: 201 with the token's record and, this once, its
 * secret in "token" and the portal's link carrying it in "portal_url".
 */
void api_tokens_create(struct http_request *req, struct http_response *res, void *ctx)
{
    static const char *const known[] = {"account", "scope", "expires_at", "ttl", "description", NULL};
    struct api_ctx *api = api_begin(req, res, ctx);
    json_t *body = api_body_object(req, res, false), *v;
    struct token_op *o = NULL;
    const char *text;

    if (!body)
        return;
    if (!api_body_known(res, body, known))
        goto out;
    if (!(o = calloc(1, sizeof *o))) {
        api_reply_store_error(res, HOOKD_ENOMEM, "token");
        goto out;
    }
    o->api = api;
    o->now = clock_now_ms();
    v = json_object_get(body, "account");
    text = json_string_value(v);
    if (!v || json_is_null(v)) {
        http_reply_error(res, 400, "missing_field", "account is required: a token belongs to one account");
        goto out;
    }
    if (!text || text[0] == '\0' || strlen(text) != json_string_length(v) || !field_text_ok(text, API_ACCOUNT_MAX)) {
        http_reply_error(res, 400, "invalid_field",
                         "account: must be a non-empty string of at most %d bytes without control characters",
                         API_ACCOUNT_MAX);
        goto out;
    }
    if (!(o->t.account = strdup(text)))
        goto oom;
    o->t.scope = TOKEN_SCOPE_READ;
    if ((v = json_object_get(body, "scope")) && !json_is_null(v) &&
        token_scope_parse(json_string_value(v), &o->t.scope) != 0) {
        http_reply_error(res, 400, "invalid_field", "scope: must be \"read\" or \"read_replay\"");
        goto out;
    }
    if ((v = json_object_get(body, "description")) && !json_is_null(v)) {
        text = json_string_value(v);
        if (!text || strlen(text) != json_string_length(v) || !field_text_ok(text, API_DESCRIPTION_MAX)) {
            http_reply_error(res, 400, "invalid_field",
                             "description: must be a string of at most %d bytes without control characters",
                             API_DESCRIPTION_MAX);
            goto out;
        }
        if (!(o->t.description = strdup(text)))
            goto oom;
    }
    if (!token_expiry(res, body, o->now, &o->t.expires_at))
        goto out;
    if (!(o->t.created_by = strdup(api_actor(req))))
        goto oom;
    id_new(o->t.id, "tok_");
    o->t.created_at = o->now;
    token_secret_new(o->secret, o->t.hash);
    json_decref(body);
    api_write_async(api, req, op_create, create_reply, o);
    return;
oom:
    api_reply_store_error(res, HOOKD_ENOMEM, "token");
out:
    if (o)
        token_op_free(o);
    json_decref(body);
}

void api_tokens_list(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *d = api_begin(req, res, ctx);
    struct token_filter f = {0};
    struct token_list list = {0};
    struct query_scratch scratch;
    int64_t now = clock_now_ms();
    struct store *s;
    json_t *data;

    if (!api_query_parse(req, res, token_list_query, token_list_query_count, &f, &scratch))
        return;
    if (!(s = api_reader_get(d, res)) || !api_reader_done(d, s, store_token_list(s, &f, &list), res, "tokens"))
        return;
    data = json_array();
    for (size_t i = 0; data && i < list.n; i++)
        json_array_append_new(data, token_json(&list.items[i], now));
    api_reply_page(res, LIST_TOKENS, data, list.n, f.limit, list.n > 0 ? list.items[list.n - 1].id : NULL);
    token_list_free(&list);
}

/* Revoked now, or already: the record either way (a DELETE may be repeated). */
static int op_revoke(struct store *s, void *arg)
{
    struct token_op *o = arg;
    int rc = store_token_revoke(s, o->id, o->now);

    if (rc == 0 || rc == HOOKD_ECONFLICT)
        rc = store_token_get(s, o->id, &o->t);
    return rc;
}

static void revoke_reply(void *arg, int rc, struct http_response *res)
{
    struct token_op *o = arg;
    char what[HOOKD_ID_MAX + 8];

    if (rc == 0) {
        token_cache_drop(o->api->tokens, o->id);
        http_reply_json(res, 200, token_json(&o->t, o->now));
    } else {
        snprintf(what, sizeof what, "token %s", o->id);
        api_reply_store_error(res, rc, what);
    }
    token_op_free(o);
}

/* DELETE /v1/tokens/{id}: revoked; refused (401) from now on. */
void api_tokens_revoke(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    const char *id = http_param(req, "id");
    struct token_op *o;

    if (!id || !id_is_valid(id)) {
        http_reply_error(res, 404, "not_found", "token %.64s not found", id ? id : "");
        return;
    }
    if (!(o = calloc(1, sizeof *o))) {
        api_reply_store_error(res, HOOKD_ENOMEM, "token");
        return;
    }
    o->api = api;
    o->now = clock_now_ms();
    snprintf(o->id, sizeof o->id, "%s", id);
    api_write_async(api, req, op_revoke, revoke_reply, o);
}

/* GET /v1/tokens/self: an account token's own record (the portal shows its account, scope and expiry). */
void api_tokens_self(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    const struct http_caller *c = api_caller(req);
    struct api_token t = {0};
    struct store *s;
    int rc;

    if (c->admin) {
        http_reply_error(res, 404, "not_found", "the admin token is not an account token: it has no record");
        return;
    }
    if (!(s = api_reader_get(api, res)))
        return;
    rc = store_token_get(s, c->id, &t);
    api_reader_put(api, s, rc);
    if (rc == 0)
        http_reply_json(res, 200, token_json(&t, clock_now_ms()));
    else
        api_reply_store_error(res, rc, "token");
    api_token_free(&t);
}
