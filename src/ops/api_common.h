/*
 * What every admin API handler shares: bearer auth, store access (a pooled
 * reader for reads, the writer for changes), error replies, record → JSON.
 *
 *   api_begin               the handler's api_ctx (the server has checked the token)
 *   api_reader_get/put      borrow a read connection
 *   api_write_async         run a write op through the writer; the request waits
 *                           suspended and is answered after the commit
 *   api_reply_store_error   404 / 503 store_busy (with Retry-After) / 503 store_unavailable / 500
 *   api_body_object         the request body as a JSON object (400 malformed_json)
 *   api_*_json              records as the JSON of DESIGN §12
 *
 * Query strings and bodies are read through field tables (ops/fields.h);
 * the endpoint body's table is ops/endpoint_body.h.
 */
#ifndef HOOKD_OPS_API_COMMON_H
#define HOOKD_OPS_API_COMMON_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "net/http.h"
#include "ops/api.h"
#include "ops/endpoint_body.h"
#include "ops/fields.h"
#include "store/store.h"
#include "store/writer.h"

#define API_LIMIT_DEFAULT 100
#define API_LIMIT_MAX STORE_LIST_MAX
#define API_URL_MAX 2048
#define API_ACCOUNT_MAX 255 /* EVENT_LABEL_LEN_MAX of core/event_check.h */
#define API_DESCRIPTION_MAX 1024
#define API_IDEMPOTENCY_KEY_MAX 255
#define API_MAX_IN_FLIGHT_MAX 10000
#define API_RATE_LIMIT_MAX 1000000
#define API_STORE_BUSY_RETRY_AFTER "1" /* seconds, with 503 store_busy */

/* A refused request: HTTP status, error code, and a message that names the field. */
struct api_error {
    int status;
    char code[32];
    char message[256];
};
void api_error_set(struct api_error *e, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void api_reply_api_error(struct http_response *res, const struct api_error *e);

/* ---- request plumbing --------------------------------------------------- */

/* The handler's context. Routes declare HTTP_AUTH_ADMIN, so the server has
 * checked the bearer token before the body was read; never NULL. */
struct api_ctx *api_begin(struct http_request *req, struct http_response *res, void *ctx);
/* Who sent the request: the admin token, or an account token (its id, account and scopes). */
const struct http_caller *api_caller(const struct http_request *req);
/* "admin" or the account token's id: the actor recorded with a change. */
const char *api_actor(const struct http_request *req);
/* Whether the caller may see a record of account: the admin every one, an account token its own only
 * (a record without an account is nobody's). */
bool api_caller_sees(const struct http_request *req, const char *account);
/* For a list filter's account: an account token sees only its own, so *account becomes the token's;
 * another one named is 403 forbidden (answered; returns false). */
bool api_scope_account(struct http_request *req, struct http_response *res, const char **account);
/*
 * A delivery filter held to the caller: an account token's deliveries are those of its account's events to
 * its account's own endpoints (never to an account-less endpoint of the operator's); false after the 403 of
 * api_scope_account.
 */
bool api_scope_deliveries(struct http_request *req, struct http_response *res, struct delivery_filter *f);
/*
 * *owner: d's account when d goes to an endpoint of that account, else NULL (an account-less endpoint, or
 * one of another account). The store's error reading d's endpoint (a deleted endpoint: 0, no owner).
 */
int api_delivery_owner(struct store *s, const struct delivery *d, const char **owner);
/*
 * 0 when the caller may see delivery d (by the rule of api_scope_deliveries), HOOKD_ENOTFOUND when not (it
 * does not exist for that caller), or the store's error reading d's endpoint.
 */
int api_delivery_visible(const struct http_request *req, struct store *s, const struct delivery *d);
/*
 * The account whose own endpoints every delivery of f goes to (f's account, when counting with and without
 * own_endpoints agrees), else NULL: the account a replay record of f is listed under, so that an account
 * token never reads a record that covers an account-less endpoint. *rc gets the store's error.
 */
const char *api_deliveries_owner(struct store *s, const struct delivery_filter *f, int *rc);
/* Constant-time comparison of two tokens (an empty expected token never matches). */
bool api_token_equal(const char *expected, const char *given);

/* Borrows a read connection; on failure answers 503 and returns NULL. */
struct store *api_reader_get(const struct api_ctx *api, struct http_response *res);
/* Returns it; last_err is the last store result (I/O errors close the connection). */
void api_reader_put(const struct api_ctx *api, struct store *s, int last_err);
/* Returns the reader after a read that gave rc: true when rc is 0, else answers the store error
 * naming what (api_reply_store_error) and returns false. */
bool api_reader_done(const struct api_ctx *api, struct store *s, int rc, struct http_response *res, const char *what);

/*
 * Fills res from a write op's result. Runs on the writer thread after the
 * commit (or on the handler's thread when the op could not be queued: result
 * is then HOOKD_EUNAVAIL or HOOKD_ENOMEM); must not block. It owns arg and
 * frees it; the request (its params and body) is still valid during the call.
 */
typedef void (*api_reply_fn)(void *arg, int result, struct http_response *res);
/*
 * Runs fn(store, arg) as a writer op without holding a thread: the request
 * is suspended, and reply(arg, result, res) answers it after the commit.
 * reply runs exactly once, on every path. The op is bounded: when it cannot
 * commit within [server] write_timeout it never runs, and reply gets
 * HOOKD_EBUSY (503 store_busy: not applied).
 */
void api_write_async(const struct api_ctx *api, struct http_request *req, write_fn fn, api_reply_fn reply,
                     void *arg);
/* Whether err means the store is down (EUNAVAIL, EIO, EBUSY). */
bool api_store_down(int err);
/* 404 not_found naming what (ENOTFOUND), 503 store_busy with Retry-After (EBUSY), 503
 * store_unavailable (EUNAVAIL, EIO), else 500 internal. */
void api_reply_store_error(struct http_response *res, int err, const char *what);

/* The body as a JSON object (the caller decrefs). An empty body is an empty
 * object when allow_empty. On failure answers 400 malformed_json and returns NULL. */
json_t *api_body_object(struct http_request *req, struct http_response *res, bool allow_empty);
/* Whether body holds only members named in known (NULL-terminated); else answers 400 unknown_field naming one. */
bool api_body_known(struct http_response *res, json_t *body, const char *const *known);

/* ---- JSON ------------------------------------------------------------------ */

json_t *api_json_time(int64_t ms);      /* RFC 3339 text, or null for 0 */
json_t *api_json_str(const char *s);    /* string, or null for NULL */
/* The same for text that may not be UTF-8 (rows written by SQL): invalid bytes shown as U+FFFD. */
json_t *api_json_text(const char *s);
json_t *api_json_duration(int64_t ms);  /* "10s", or null for 0 (the global default) */
/* {"data": data, "next_cursor": cursor|null}; steals data. */
json_t *api_list_json(json_t *data, const char *next_cursor);
/* Replies 200 with a page of list (a LIST_* name): data (stolen) and, when the page is full (n items of
 * limit), the cursor after last_key, the key of its last item; else next_cursor null. */
void api_reply_page(struct http_response *res, const char *list, json_t *data, size_t n, int limit,
                    const char *last_key);

json_t *api_event_json(const struct event *ev);
json_t *api_delivery_json(const struct delivery *d);
/* Replies 200 with obj plus obj[key] = arr (a record with its children); takes
 * ownership of both (either may be NULL after a failed allocation: then 500). */
void api_reply_with_children(struct http_response *res, json_t *obj, const char *key, json_t *arr);
json_t *api_attempt_json(const struct attempt *a);
/* with_secret: also "secret" (the newest key only) and "secrets": [{created_at, expires_at}] of live ones. */
json_t *api_endpoint_json(const struct endpoint *ep, bool with_secret, int64_t now);
/* Adds "breaker" ({state, opened_at, next_probe_at, consecutive_failures}) to an endpoint's JSON; NULL j passes. */
json_t *api_endpoint_with_breaker(json_t *j, const struct endpoint_state *st);

/* ---- handlers (api_routes.c puts them in the tables) ------------------------------- */

void api_endpoints_create(struct http_request *req, struct http_response *res, void *ctx);
void api_endpoints_list(struct http_request *req, struct http_response *res, void *ctx);
void api_endpoints_get(struct http_request *req, struct http_response *res, void *ctx);
void api_endpoints_update(struct http_request *req, struct http_response *res, void *ctx);
void api_endpoints_delete(struct http_request *req, struct http_response *res, void *ctx);
void api_endpoints_disable(struct http_request *req, struct http_response *res, void *ctx);
void api_endpoints_enable(struct http_request *req, struct http_response *res, void *ctx);
void api_endpoints_rotate(struct http_request *req, struct http_response *res, void *ctx);
void api_endpoints_test(struct http_request *req, struct http_response *res, void *ctx);
void api_events_publish(struct http_request *req, struct http_response *res, void *ctx);
void api_events_list(struct http_request *req, struct http_response *res, void *ctx);
void api_events_get(struct http_request *req, struct http_response *res, void *ctx);
void api_deliveries_list(struct http_request *req, struct http_response *res, void *ctx);
void api_deliveries_get(struct http_request *req, struct http_response *res, void *ctx);
void api_sources_create(struct http_request *req, struct http_response *res, void *ctx);
void api_sources_list(struct http_request *req, struct http_response *res, void *ctx);
void api_sources_get(struct http_request *req, struct http_response *res, void *ctx);
void api_sources_update(struct http_request *req, struct http_response *res, void *ctx);
void api_sources_delete(struct http_request *req, struct http_response *res, void *ctx);
void api_sources_rejections(struct http_request *req, struct http_response *res, void *ctx);
void api_inbox_list(struct http_request *req, struct http_response *res, void *ctx);
void api_inbox_get(struct http_request *req, struct http_response *res, void *ctx);
void api_deliveries_replay(struct http_request *req, struct http_response *res, void *ctx);
void api_inbox_replay(struct http_request *req, struct http_response *res, void *ctx);
void api_inbox_replay_range(struct http_request *req, struct http_response *res, void *ctx);
void api_machines_create(struct http_request *req, struct http_response *res, void *ctx);
void api_machines_list(struct http_request *req, struct http_response *res, void *ctx);
void api_machines_get(struct http_request *req, struct http_response *res, void *ctx);
void api_machines_update(struct http_request *req, struct http_response *res, void *ctx);
void api_machines_delete(struct http_request *req, struct http_response *res, void *ctx);
void api_entities_get(struct http_request *req, struct http_response *res, void *ctx);
void api_entities_trace(struct http_request *req, struct http_response *res, void *ctx);
void api_audit(struct http_request *req, struct http_response *res, void *ctx);
void api_endpoints_health(struct http_request *req, struct http_response *res, void *ctx);
void api_summary(struct http_request *req, struct http_response *res, void *ctx);
void api_stats(struct http_request *req, struct http_response *res, void *ctx);
void api_accounts_sync(struct http_request *req, struct http_response *res, void *ctx);
void api_resources_sync(struct http_request *req, struct http_response *res, void *ctx);
void api_healthz(struct http_request *req, struct http_response *res, void *ctx);
void api_events_replay(struct http_request *req, struct http_response *res, void *ctx);
void api_replays_create(struct http_request *req, struct http_response *res, void *ctx);
void api_replays_list(struct http_request *req, struct http_response *res, void *ctx);
void api_replays_get(struct http_request *req, struct http_response *res, void *ctx);
void api_tokens_create(struct http_request *req, struct http_response *res, void *ctx);
void api_tokens_list(struct http_request *req, struct http_response *res, void *ctx);
void api_tokens_revoke(struct http_request *req, struct http_response *res, void *ctx);
void api_tokens_self(struct http_request *req, struct http_response *res, void *ctx);
void api_metrics(struct http_request *req, struct http_response *res, void *ctx);      /* api_ops.c */
void api_alerts_list(struct http_request *req, struct http_response *res, void *ctx);  /* api_ops.c */
void api_alerts_get(struct http_request *req, struct http_response *res, void *ctx);   /* api_ops.c */
#endif
