/*
 * One outbound webhook POST (private to the dispatcher): the signed delivery
 * request handed to the HTTP engine (net/http_client.h), and what its result
 * means for the delivery. A request object is reused; its body buffer and
 * header lines stay valid until the engine's done has run.
 *
 *   request_new / request_free   a request object with its buffers
 *   request_prepare              envelope body, Standard Webhooks headers, URL, timeout
 *   request_classify             the engine classifier for deliveries (core/retry.h)
 *   request_outcome              what happened: transport error or status, Retry-After, error text
 */
#ifndef HOOKD_OUTBOUND_REQUEST_H
#define HOOKD_OUTBOUND_REQUEST_H
#include <stdbool.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/retry.h"
#include "net/http_client.h"
#include "store/store.h"

#define REQUEST_ERROR_MAX HTTP_CLIENT_ERROR_MAX

#define REQUEST_HEADERS 4 /* content-type and the three that change per request */
#define REQUEST_HEADERS_MAX (REQUEST_HEADERS + CUSTOM_HEADERS_MAX) /* and the endpoint's custom ones */
_Static_assert(REQUEST_HEADERS_MAX <= HTTP_CLIENT_MAX_HEADERS, "the engine takes every header of a delivery");

struct request {
    struct buf body; /* the envelope; the engine reads it in place */
    char *slot_id, *slot_timestamp, *slot_signature; /* header lines of a fixed size, rewritten per request */
    const char *headers[REQUEST_HEADERS_MAX]; /* custom ones point into the endpoint, as the URL does */
    struct http_client_request http; /* points into this object */
    void *owner;                     /* the dispatcher's job while in a transfer */
};

struct request_outcome {
    enum transport_error err;
    enum outcome outcome;           /* request_classify's class */
    int status_code;                /* 0 without a usable response */
    int64_t retry_after_ms;         /* -1: none */
    int duration_ms;
    size_t response_len;            /* bytes of the snippet given with the outcome */
    bool response_truncated;        /* the response was longer than the snippet */
    char error[REQUEST_ERROR_MAX];  /* empty on success */
};

__attribute__((warn_unused_result)) int request_new(struct request **out);
void request_free(struct request *r);

/*
 * Prepares r->http, a POST of ev to ep: body = envelope, webhook-id = event id,
 * webhook-timestamp = now, webhook-signature = one "v1,…" per secret still
 * active at now. Returns 0, HOOKD_ENOMEM or HOOKD_EINVAL (the event cannot be
 * enveloped, or its row breaks the rules of core/event_check.h); on error nothing may be sent with r until the next prepare succeeds.
 */
__attribute__((warn_unused_result)) int request_prepare(struct request *r, const struct endpoint *ep,
                                                        const struct event *ev, int64_t timeout_ms, int64_t now_ms);

/* The outbound delivery classifier (an enum outcome), for http_client_request.classify. */
int request_classify(const struct http_client_result *res);

/* What the engine's result means for the delivery (Retry-After parsed against the attempt's start). */
void request_outcome(const struct http_client_result *res, struct request_outcome *out);
#endif
