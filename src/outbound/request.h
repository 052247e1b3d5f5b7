/*
 * One outbound webhook POST on a reusable libcurl easy handle (private to the
 * dispatcher): building and signing the request, collecting the response
 * within caps, refusing private addresses at connect time, and naming the
 * transport outcome.
 *
 *   request_new / request_free   a handle with its fixed options and buffers
 *   request_prepare              envelope body, Standard Webhooks headers, URL, timeout
 *   request_outcome              what happened: transport error or status, Retry-After, error text
 */
#ifndef HOOKD_OUTBOUND_REQUEST_H
#define HOOKD_OUTBOUND_REQUEST_H
#include <curl/curl.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/retry.h"
#include "store/store.h"

/* A response body larger than this aborts the transfer (only a snippet is kept anyway). */
#define REQUEST_RESPONSE_ABORT (1024 * 1024)
#define REQUEST_ERROR_MAX (CURL_ERROR_SIZE + 32) /* "class: " + libcurl's message */

struct request_options {
    int64_t connect_timeout_ms;
    size_t response_max; /* snippet cap in bytes */
    bool allow_private_networks;
};

struct request {
    CURL *easy;
    const struct request_options *opt; /* borrowed; outlives the request */
    struct curl_slist *headers;        /* fixed list; three slots are rewritten per request */
    char *slot_id, *slot_timestamp, *slot_signature;
    struct buf body;     /* the envelope; curl reads it in place */
    struct buf response; /* the first response_max bytes */
    size_t received;     /* response bytes seen in total */
    bool too_large;      /* aborted past REQUEST_RESPONSE_ABORT */
    bool blocked;        /* the SSRF guard refused an address */
    char retry_after[64];
    char errbuf[CURL_ERROR_SIZE];
    int64_t started_at;   /* wall ms */
    int64_t started_mono; /* monotonic ms */
    void *owner;          /* the dispatcher's job while active */
    bool active;
};

struct request_outcome {
    enum transport_error err;
    int status_code;                /* 0 without a usable response */
    int64_t retry_after_ms;         /* -1: none */
    int duration_ms;
    char error[REQUEST_ERROR_MAX];  /* empty on success */
};

/* A handle with every option that does not change between requests. */
__attribute__((warn_unused_result)) int request_new(const struct request_options *opt, struct request **out);
void request_free(struct request *r);

/*
 * Prepares a POST of ev to ep: body = envelope, webhook-id = event id,
 * webhook-timestamp = now, webhook-signature = one "v1,…" per secret still
 * active at now. Returns 0, HOOKD_ENOMEM or HOOKD_EINVAL (the event cannot be
 * enveloped); on error nothing may be sent with r until the next prepare succeeds.
 */
__attribute__((warn_unused_result)) int request_prepare(struct request *r, const struct endpoint *ep,
                                                        const struct event *ev, int64_t timeout_ms, int64_t now_ms);

/* After the transfer ended with rc. The response snippet stays in r->response until the next prepare. */
void request_outcome(struct request *r, CURLcode rc, int64_t now_mono, struct request_outcome *out);
#endif
