/*
 * Route tables of the two listeners, and the context their handlers get.
 *   admin: /v1/… (bearer token, checked by the server before the body), one
 *          file per resource (api_endpoints.c, api_events.c, api_deliveries.c)
 *   public: /healthz and /in/{source} (inbound/receiver.c)
 * The context holds the parts the API uses, given when it is built (daemon.c).
 */
#ifndef HOOKD_OPS_API_H
#define HOOKD_OPS_API_H
#include <stddef.h>
#include <stdint.h>
#include "net/http.h"

struct config;
struct processor;
struct writer;
struct store_pool;
struct hub;
struct source_cache;
struct token_cache;

#define API_BODY_MAX (1024 * 1024) /* admin request bodies */
#define API_BODY_NONE 4096         /* routes that read no body */

/* What admin and public handlers use; passed as the servers' ctx. Outlives both servers. */
struct api_ctx {
    const struct config *cfg;
    struct writer *writer;      /* state changes (writer_submit; the connection waits suspended) */
    struct store_pool *readers; /* reads */
    struct hub *hub;            /* told after a commit: outbox changed, endpoints changed */
    struct source_cache *sources; /* the receiver's definitions (inbound/source_cache.h) */
    struct token_cache *tokens;   /* live account tokens (ops/token_cache.h) */
    const char *node;           /* this process's lease owner name */
    struct processor *processor; /* the inbox workers: decide machine items in their accept (NULL: none) */
    const char *admin_token;    /* the effective token, for routes that check it themselves (/metrics) */
    int64_t started_at;
};

/* The admin listener's http_token_check_fn: ctx is the api_ctx. */
int api_token_check(void *ctx, const char *token, size_t len, struct http_caller *out);

extern const struct http_route admin_routes[];
extern const size_t admin_routes_n;
extern const struct http_route public_routes[];
extern const size_t public_routes_n;
#endif
