/*
 * One webhook POST on a reusable libcurl easy handle: fixed options set once,
 * per-request body and signature headers rewritten in place, response kept
 * within caps, and the SSRF guard applied to each address before connecting.
 */
#include "outbound/request.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "core/envelope.h"
#include "core/signature.h"
#include "core/signature_scheme.h"
#include "hookd.h"
#include "outbound/ssrf.h"

/* Largest envelope we build: the payload cap of the inbound API plus room for the wrapper. */
#define REQUEST_BODY_MAX (8u * 1024 * 1024)

/*
 * The three headers that change per request live in slots of a fixed size
 * inside the curl_slist, created once and rewritten with snprintf, so a request
 * costs no list allocations. Sizes hold the longest possible value.
 */
#define SLOT_ID_LEN (sizeof "webhook-id: " + HOOKD_ID_MAX)
#define SLOT_TIMESTAMP_LEN (sizeof "webhook-timestamp: " + 24)
#define SLOT_SIGNATURE_LEN (sizeof "webhook-signature: " + ENDPOINT_MAX_SECRETS * SIGNATURE_V1_LEN)

static const char *const fixed_headers[] = {
    "content-type: application/json",
    "user-agent: hookd/" HOOKD_VERSION,
    "Expect:", /* no 100-continue round trip for larger bodies */
};

static size_t on_body(char *data, size_t size, size_t n, void *ud)
{
    struct request *r = ud;
    size_t total = size * n;
    size_t room = r->response.max > r->response.len ? r->response.max - r->response.len : 0;

    r->received += total;
    if (r->received > REQUEST_RESPONSE_ABORT) {
        r->too_large = true;
        return 0; /* aborts the transfer */
    }
    if (room > 0 && buf_append(&r->response, data, total < room ? total : room) != 0)
        return 0;
    return total;
}

static size_t on_header(char *line, size_t size, size_t n, void *ud)
{
    static const char name[] = "retry-after:";
    struct request *r = ud;
    size_t total = size * n;
    size_t len = total;

    if (total >= 5 && strncasecmp(line, "HTTP/", 5) == 0) {
        r->retry_after[0] = '\0'; /* a new response (after a 1xx) starts */
        return total;
    }
    if (total < sizeof name - 1 || strncasecmp(line, name, sizeof name - 1) != 0)
        return total;
    line += sizeof name - 1;
    len -= sizeof name - 1;
    while (len > 0 && (*line == ' ' || *line == '\t')) {
        line++;
        len--;
    }
    while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == '\n' || line[len - 1] == ' '))
        len--;
    if (len >= sizeof r->retry_after)
        len = sizeof r->retry_after - 1;
    memcpy(r->retry_after, line, len);
    r->retry_after[len] = '\0';
    return total;
}

/* libcurl asks here for every socket it connects: the resolved address is judged before connect(). */
static curl_socket_t open_socket(void *ud, curlsocktype purpose, struct curl_sockaddr *addr)
{
    struct request *r = ud;

    if (purpose != CURLSOCKTYPE_IPCXN)
        return CURL_SOCKET_BAD;
    if (!r->opt->allow_private_networks && !ssrf_address_allowed(&addr->addr)) {
        r->blocked = true;
        return CURL_SOCKET_BAD;
    }
    return socket(addr->family, addr->socktype | SOCK_CLOEXEC, addr->protocol);
}

/* Appends a header slot of len bytes to the list and returns its text buffer. */
static char *slot_add(struct curl_slist **list, size_t len)
{
    char filler[SLOT_SIGNATURE_LEN + 1];
    struct curl_slist *grown;

    if (len > SLOT_SIGNATURE_LEN)
        return NULL;
    memset(filler, 'x', len - 1);
    filler[len - 1] = '\0';
    grown = curl_slist_append(*list, filler);
    if (grown == NULL)
        return NULL;
    *list = grown;
    while (grown->next != NULL)
        grown = grown->next;
    return grown->data; /* a copy of filler: len bytes we may rewrite */
}

static int headers_build(struct request *r)
{
    for (size_t i = 0; i < sizeof fixed_headers / sizeof fixed_headers[0]; i++) {
        struct curl_slist *grown = curl_slist_append(r->headers, fixed_headers[i]);
        if (grown == NULL)
            return HOOKD_ENOMEM;
        r->headers = grown;
    }
    r->slot_id = slot_add(&r->headers, SLOT_ID_LEN);
    r->slot_timestamp = slot_add(&r->headers, SLOT_TIMESTAMP_LEN);
    r->slot_signature = slot_add(&r->headers, SLOT_SIGNATURE_LEN);
    if (r->slot_id == NULL || r->slot_timestamp == NULL || r->slot_signature == NULL)
        return HOOKD_ENOMEM;
    return 0;
}

int request_new(const struct request_options *opt, struct request **out)
{
    struct request *r = calloc(1, sizeof *r);
    CURLcode cc = CURLE_OK;
    int rc = HOOKD_ENOMEM;

    if (r == NULL)
        return HOOKD_ENOMEM;
    r->opt = opt;
    buf_init(&r->body, REQUEST_BODY_MAX);
    buf_init(&r->response, opt->response_max);
    r->easy = curl_easy_init();
    if (r->easy == NULL || headers_build(r) != 0)
        goto fail;
    /* Redirects are never followed, proxies from the environment never used. */
    cc |= curl_easy_setopt(r->easy, CURLOPT_PROTOCOLS_STR, "http,https");
    cc |= curl_easy_setopt(r->easy, CURLOPT_FOLLOWLOCATION, 0L);
    cc |= curl_easy_setopt(r->easy, CURLOPT_PROXY, "");
    cc |= curl_easy_setopt(r->easy, CURLOPT_NOPROXY, "*");
    cc |= curl_easy_setopt(r->easy, CURLOPT_NOSIGNAL, 1L);
    cc |= curl_easy_setopt(r->easy, CURLOPT_TCP_KEEPALIVE, 1L);
    cc |= curl_easy_setopt(r->easy, CURLOPT_TCP_NODELAY, 1L);
    cc |= curl_easy_setopt(r->easy, CURLOPT_CONNECTTIMEOUT_MS, (long)opt->connect_timeout_ms);
    cc |= curl_easy_setopt(r->easy, CURLOPT_POST, 1L);
    cc |= curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->headers);
    cc |= curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, on_body);
    cc |= curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r);
    cc |= curl_easy_setopt(r->easy, CURLOPT_HEADERFUNCTION, on_header);
    cc |= curl_easy_setopt(r->easy, CURLOPT_HEADERDATA, r);
    cc |= curl_easy_setopt(r->easy, CURLOPT_OPENSOCKETFUNCTION, open_socket);
    cc |= curl_easy_setopt(r->easy, CURLOPT_OPENSOCKETDATA, r);
    cc |= curl_easy_setopt(r->easy, CURLOPT_ERRORBUFFER, r->errbuf);
    cc |= curl_easy_setopt(r->easy, CURLOPT_PRIVATE, r);
    if (cc != CURLE_OK) {
        rc = HOOKD_EINVAL;
        goto fail;
    }
    *out = r;
    return 0;
fail:
    request_free(r);
    return rc;
}

void request_free(struct request *r)
{
    if (r == NULL)
        return;
    if (r->easy != NULL)
        curl_easy_cleanup(r->easy);
    curl_slist_free_all(r->headers);
    buf_free(&r->body);
    buf_free(&r->response);
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
    int off;

    for (size_t i = 0; i < ep->n_secrets && i < ENDPOINT_MAX_SECRETS; i++) {
        const struct endpoint_secret *s = &ep->secrets[i];
        if (s->key != NULL && (s->expires_at == 0 || s->expires_at > now_ms))
            secrets[n++] = s->key;
    }
    off = snprintf(r->slot_signature, SLOT_SIGNATURE_LEN, "%s:%s", scheme->header, n > 0 ? " " : "");
    if (off < 0 || (size_t)off >= SLOT_SIGNATURE_LEN)
        return HOOKD_EINVAL;
    if (n == 0)
        return 0;
    /* The slot fits every secret's entry, so a refusal cannot be for room. */
    return scheme->sign(&msg, secrets, n, r->slot_signature + off, SLOT_SIGNATURE_LEN - (size_t)off);
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
    CURLcode cc = CURLE_OK;
    int rc;

    buf_reset(&r->body);
    buf_reset(&r->response);
    r->received = 0;
    r->too_large = false;
    r->blocked = false;
    r->retry_after[0] = '\0';
    r->errbuf[0] = '\0';
    rc = envelope_build(&in, &r->body);
    if (rc != 0)
        return rc;
    snprintf(r->slot_id, SLOT_ID_LEN, "webhook-id: %s", ev->id);
    snprintf(r->slot_timestamp, SLOT_TIMESTAMP_LEN, "webhook-timestamp: %" PRId64, ts_s);
    rc = sign_all(r, ep, ev->id, ts_s, now_ms);
    if (rc != 0)
        return rc;
    cc |= curl_easy_setopt(r->easy, CURLOPT_URL, ep->url);
    cc |= curl_easy_setopt(r->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body.len);
    cc |= curl_easy_setopt(r->easy, CURLOPT_POSTFIELDS, r->body.data);
    cc |= curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    if (cc != CURLE_OK)
        return cc == CURLE_OUT_OF_MEMORY ? HOOKD_ENOMEM : HOOKD_EINVAL;
    return 0;
}

struct curl_error_class {
    CURLcode code;
    enum transport_error err;
};

/* libcurl results with their own class; everything else is TRANSPORT_OTHER (retried). */
static const struct curl_error_class curl_error_classes[] = {
    {CURLE_COULDNT_CONNECT, TRANSPORT_CONNECT},
    {CURLE_SSL_CONNECT_ERROR, TRANSPORT_CONNECT},
    {CURLE_PEER_FAILED_VERIFICATION, TRANSPORT_CONNECT},
    {CURLE_COULDNT_RESOLVE_HOST, TRANSPORT_DNS},
    {CURLE_OPERATION_TIMEDOUT, TRANSPORT_TIMEOUT},
    {CURLE_UNSUPPORTED_PROTOCOL, TRANSPORT_BLOCKED}, /* only http and https may be reached */
};

static enum transport_error classify_curl(CURLcode rc)
{
    for (size_t i = 0; i < sizeof curl_error_classes / sizeof curl_error_classes[0]; i++) {
        if (curl_error_classes[i].code == rc)
            return curl_error_classes[i].err;
    }
    return TRANSPORT_OTHER;
}

void request_outcome(struct request *r, CURLcode rc, int64_t now_mono, struct request_outcome *out)
{
    long code = 0;
    int64_t dur = now_mono - r->started_mono;

    memset(out, 0, sizeof *out);
    out->retry_after_ms = -1;
    out->duration_ms = dur < 0 ? 0 : dur > INT32_MAX ? INT32_MAX : (int)dur;
    if (curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK)
        code = 0;
    /* A response too large to keep still has a status, and the status is the answer. */
    if (rc == CURLE_OK || (r->too_large && code > 0)) {
        out->err = TRANSPORT_OK;
        out->status_code = (int)code;
        if (code < 200 || code > 299)
            snprintf(out->error, sizeof out->error, "HTTP %ld", code);
        if (r->retry_after[0] != '\0' && retry_after_parse(r->retry_after, r->started_at + dur, &out->retry_after_ms) != 0)
            out->retry_after_ms = -1;
        return;
    }
    if (r->blocked) {
        out->err = TRANSPORT_BLOCKED;
        snprintf(out->error, sizeof out->error, "address refused by SSRF guard");
        return;
    }
    /* The class leads the text, so "timeout" or "connect" reads the same whatever libcurl's wording. */
    out->err = classify_curl(rc);
    snprintf(out->error, sizeof out->error, "%s: %s", transport_error_name(out->err),
             r->errbuf[0] != '\0' ? r->errbuf : curl_easy_strerror(rc));
}
