/* hookd_verify and hookd_verify_scheme: the public signature checks, on the wall clock, through the scheme table. */
#include "hookd.h"

#include <strings.h>

#include "core/clock.h"
#include "core/signature_scheme.h"

#define DEFAULT_TOLERANCE_S 300

struct given_headers {
    const char *id, *timestamp, *signature;
};

static const char *given_header(void *ctx, const char *name)
{
    const struct given_headers *h = ctx;

    if (strcasecmp(name, "webhook-id") == 0)
        return h->id;
    if (strcasecmp(name, "webhook-timestamp") == 0)
        return h->timestamp;
    if (strcasecmp(name, "webhook-signature") == 0)
        return h->signature;
    return NULL;
}

int hookd_verify(const char *secret, const char *msg_id, const char *timestamp, const char *signature_header,
                 const void *body, size_t body_len, int64_t tolerance_s)
{
    const struct signature_scheme *scheme = signature_scheme_find(SIGNATURE_SCHEME_DEFAULT);
    struct given_headers h = {msg_id, timestamp, signature_header};
    const struct signature_request req = {
        .header = given_header,
        .header_ctx = &h,
        .body = body,
        .body_len = body_len,
        .now_s = clock_now_ms() / 1000,
        .tolerance_s = tolerance_s == 0 ? DEFAULT_TOLERANCE_S : tolerance_s,
    };

    if (tolerance_s < 0 || secret == NULL || (body == NULL && body_len > 0))
        return HOOKD_EINVAL;
    return scheme->verify(&req, &secret, 1);
}

struct header_list {
    const struct hookd_header *h;
    size_t n;
};

static const char *listed_header(void *ctx, const char *name)
{
    const struct header_list *l = ctx;

    for (size_t i = 0; i < l->n; i++) {
        if (l->h[i].name != NULL && strcasecmp(l->h[i].name, name) == 0)
            return l->h[i].value;
    }
    return NULL;
}

int hookd_verify_scheme(const char *scheme_name, const struct hookd_hmac_params *hmac,
                        const struct hookd_header *headers, size_t n_headers, const void *body, size_t body_len,
                        const char *const *secrets, size_t n_secrets, int64_t tolerance_s)
{
    const struct signature_scheme *scheme = signature_scheme_find(scheme_name);
    struct header_list list = {headers, n_headers};
    struct signature_params params;
    struct signature_request req = {
        .header = listed_header,
        .header_ctx = &list,
        .body = body,
        .body_len = body_len,
        .now_s = clock_now_ms() / 1000,
        .tolerance_s = tolerance_s == 0 ? DEFAULT_TOLERANCE_S : tolerance_s,
    };

    if (scheme == NULL || tolerance_s < 0 || (headers == NULL && n_headers > 0) || (body == NULL && body_len > 0) ||
        (secrets == NULL && n_secrets > 0) || (scheme->needs_params && hmac == NULL))
        return HOOKD_EINVAL;
    if (scheme->needs_params) {
        const struct signature_params_text text = {hmac->header,           hmac->algorithm, hmac->encoding,
                                                   hmac->prefix,           hmac->timestamp_header,
                                                   hmac->template_text};
        if (signature_params_parse(&params, &text, NULL, NULL) != 0)
            return HOOKD_EINVAL;
        req.params = &params;
    }
    return scheme->verify(&req, secrets, n_secrets);
}
