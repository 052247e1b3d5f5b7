/*
 * One webhook POST as the HTTP engine sends it: the envelope body and the
 * Standard Webhooks headers rewritten in place in a reused object, and the
 * engine's result read as a delivery attempt.
 */
#include "outbound/request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/envelope.h"
#include "core/ids.h"
#include "core/signature.h"
#include "core/signature_scheme.h"
#include "hookd.h"

/* Largest envelope we build: the payload cap of the inbound API plus room for the wrapper. */
#define REQUEST_BODY_MAX (8u * 1024 * 1024)

/*
 * The three headers that change per request live in lines of a fixed size,
 * allocated once and rewritten in place (copies, not snprintf: formatting was
 * a tenth of the dispatcher's own work per request), so a request costs no
 * allocation. Sizes hold the longest possible value.
 */
#define SLOT_ID_LEN (sizeof "webhook-id: " + HOOKD_ID_MAX)
#define SLOT_TIMESTAMP_LEN (sizeof "webhook-timestamp: " + 24)
/* Every live key's entry: a v1a (ed25519) entry is the longer of the two kinds. */
_Static_assert(SIGNATURE_V1A_ENTRY_LEN >= SIGNATURE_V1_LEN, "a v1a entry is the longest");
#define SLOT_SIGNATURE_LEN (sizeof "webhook-signature: " + ENDPOINT_MAX_SECRETS * SIGNATURE_V1A_ENTRY_LEN)

/* Copies n bytes of src after the first at bytes of a slot of size cap, NUL-terminated, cut to fit; the new length. */
static size_t slot_put(char *slot, size_t cap, size_t at, const char *src, size_t n)
{
    if (at >= cap)
        return at;
    if (n > cap - 1 - at)
        n = cap - 1 - at;
    memcpy(slot + at, src, n);
    slot[at + n] = '\0';
    return at + n;
}

int request_new(struct request **out)
{
    struct request *r = calloc(1, sizeof *r);

    *out = NULL;
    if (r == NULL)
        return HOOKD_ENOMEM;
    buf_init(&r->body, REQUEST_BODY_MAX);
    r->slot_id = calloc(1, SLOT_ID_LEN);
    r->slot_timestamp = calloc(1, SLOT_TIMESTAMP_LEN);
    r->slot_signature = calloc(1, SLOT_SIGNATURE_LEN);
    if (r->slot_id == NULL || r->slot_timestamp == NULL || r->slot_signature == NULL) {
        request_free(r);
        return HOOKD_ENOMEM;
    }
    r->headers[0] = "content-type: application/json";
    r->headers[1] = r->slot_id;
    r->headers[2] = r->slot_timestamp;
    r->headers[3] = r->slot_signature;
    r->http.method = "POST";
    r->http.headers = r->headers;
    r->http.n_headers = REQUEST_HEADERS;
    r->http.classify = request_classify;
    *out = r;
    return 0;
}

void request_free(struct request *r)
{
    if (r == NULL)
        return;
    buf_free(&r->body);
    free(r->slot_id);
    free(r->slot_timestamp);
    free(r->slot_signature);
    free(r);
}

/* "webhook-signature: v1,… v1,…" with every secret active at now_ms, through the
 * scheme table; "webhook-signature:" (not sent) when none is. */
static int sign_all(struct request *r, const struct endpoint *ep, const char *msg_id, int64_t ts_s, int64_t now_ms)
{
    const struct signature_scheme *scheme = signature_scheme_find(SIGNATURE_SCHEME_DEFAULT);
    const struct signature_message msg = {.id = msg_id, .timestamp_s = ts_s, .body = r->body.data,
                                          .body_len = r->body.len};
    const char *secrets[ENDPOINT_MAX_SECRETS];
    size_t n = 0;
    size_t off, hlen = strlen(scheme->header);

    for (size_t i = 0; i < ep->n_secrets && i < ENDPOINT_MAX_SECRETS; i++) {
        const struct endpoint_secret *s = &ep->secrets[i];
        if (s->key != NULL && (s->expires_at == 0 || s->expires_at > now_ms))
            secrets[n++] = s->key;
    }
    if (hlen + 2 >= SLOT_SIGNATURE_LEN)
        return HOOKD_EINVAL;
    off = slot_put(r->slot_signature, SLOT_SIGNATURE_LEN, 0, scheme->header, hlen);
    off = slot_put(r->slot_signature, SLOT_SIGNATURE_LEN, off, ": ", n > 0 ? 2 : 1);
    if (n == 0)
        return 0;
    /* The slot fits every secret's entry, so a refusal cannot be for room. */
    return scheme->sign(&msg, secrets, n, r->slot_signature + off, SLOT_SIGNATURE_LEN - off);
}

int request_prepare(struct request *r, const struct endpoint *ep, const struct event *ev, int64_t timeout_ms,
                    int64_t now_ms)
{
    const struct envelope_in in = {
        .id = ev->id,
        .type = ev->type,
        .created_at_ms = ev->created_at,
        .account = ev->account,
        .resource_type = ev->resource_type,
        .resource_id = ev->resource_id,
        .has_resource_version = ev->has_resource_version,
        .resource_version = ev->resource_version,
        .data_json = ev->payload,
    };
    int64_t ts_s = now_ms / 1000;
    int rc;

    /* The relay rejects such rows; this is for deliveries made before it did. The id goes into a
     * header and is signed, whole: it must be one that fits and cannot start a header of its own. */
    if (!id_is_valid(ev->id) || ev->bad_field != NULL)
        return HOOKD_EINVAL;
    buf_reset(&r->body);
    rc = envelope_build(&in, &r->body);
    if (rc != 0)
        return rc;
    char digits[I64_DIGITS_MAX];
    size_t nd = i64_digits(ts_s, digits);
    slot_put(r->slot_id, SLOT_ID_LEN, slot_put(r->slot_id, SLOT_ID_LEN, 0, "webhook-id: ", 12), ev->id, strlen(ev->id));
    slot_put(r->slot_timestamp, SLOT_TIMESTAMP_LEN, slot_put(r->slot_timestamp, SLOT_TIMESTAMP_LEN, 0, "webhook-timestamp: ", 19),
             digits, nd);
    rc = sign_all(r, ep, ev->id, ts_s, now_ms);
    if (rc != 0)
        return rc;
    /* After hookd's own: their names are never one of those (core/custom_headers.h), so nothing is overridden. */
    for (size_t i = 0; i < ep->n_headers && i < CUSTOM_HEADERS_MAX; i++)
        r->headers[REQUEST_HEADERS + i] = ep->headers[i];
    r->http.n_headers = REQUEST_HEADERS + (ep->n_headers < CUSTOM_HEADERS_MAX ? ep->n_headers : CUSTOM_HEADERS_MAX);
    r->http.url = ep->url;
    r->http.body = r->body.data;
    r->http.body_len = r->body.len;
    r->http.timeout_ms = timeout_ms;
    return 0;
}

int request_classify(const struct http_client_result *res) { return (int)retry_classify(res->transport, res->status); }

void request_outcome(const struct http_client_result *res, struct request_outcome *out)
{
    memset(out, 0, sizeof *out);
    out->err = res->transport;
    out->outcome = (enum outcome)(res->outcome >= 0 ? res->outcome : request_classify(res));
    out->retry_after_ms = -1;
    out->duration_ms = res->duration_ms;
    out->response_len = res->body_len;
    out->response_truncated = res->body_truncated || res->body_aborted;
    if (res->transport != TRANSPORT_OK) {
        snprintf(out->error, sizeof out->error, "%s", res->error);
        return;
    }
    out->status_code = res->status;
    if (res->status < 200 || res->status > 299)
        snprintf(out->error, sizeof out->error, "HTTP %d", res->status);
    if (res->retry_after[0] != '\0' &&
        retry_after_parse(res->retry_after, res->started_at_ms + res->duration_ms, &out->retry_after_ms) != 0)
        out->retry_after_ms = -1;
}
