/* hookd_verify: the public Standard Webhooks check, on the wall clock, through the scheme table. */
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
