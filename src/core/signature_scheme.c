/*
 * The signature scheme table and its Standard Webhooks entry (over the v1
 * primitives of core/signature.c). A new scheme is a pair of functions and
 * one line in signature_schemes[].
 */
#include "core/signature_scheme.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core/signature.h"
#include "hookd.h"

/* ---- standard-webhooks ---------------------------------------------------------- */

static int standard_webhooks_sign(const struct signature_message *msg, const char *const *secrets,
                                  size_t n_secrets, char *out, size_t out_len)
{
    char sig[SIGNATURE_V1_LEN];
    size_t used = 0;

    if (msg == NULL || msg->id == NULL || out == NULL || out_len == 0)
        return HOOKD_EINVAL;
    out[0] = '\0';
    for (size_t i = 0; i < n_secrets; i++) {
        /* A secret that does not decode was refused where it was set; skip it rather than sign nothing. */
        if (signature_sign(secrets[i], msg->id, msg->timestamp_s, msg->body, msg->body_len, sig) != 0)
            continue;
        int n = snprintf(out + used, out_len - used, "%s%s", used > 0 ? " " : "", sig);
        if (n < 0 || (size_t)n >= out_len - used) {
            explicit_bzero(sig, sizeof sig);
            out[0] = '\0';
            return HOOKD_EINVAL;
        }
        used += (size_t)n;
    }
    explicit_bzero(sig, sizeof sig);
    return 0;
}

static int standard_webhooks_verify(const struct signature_request *req, const char *const *secrets,
                                    size_t n_secrets)
{
    const char *id, *ts, *sig;
    bool matched = false, mismatched = false;
    int rc = HOOKD_EINVAL;

    if (req == NULL || req->header == NULL || n_secrets == 0)
        return HOOKD_EINVAL;
    id = req->header(req->header_ctx, "webhook-id");
    ts = req->header(req->header_ctx, "webhook-timestamp");
    sig = req->header(req->header_ctx, "webhook-signature");
    if (id == NULL || ts == NULL || sig == NULL)
        return HOOKD_EINVAL;
    for (size_t i = 0; i < n_secrets; i++) {
        int one = signature_verify(secrets[i], id, ts, sig, req->body, req->body_len, req->now_s, req->tolerance_s);
        if (one == 0)
            matched = true;
        else if (one == HOOKD_ESIG)
            mismatched = true;
        else
            rc = one; /* a bad timestamp (the same for every secret), or a secret that does not decode */
    }
    return matched ? 0 : mismatched ? HOOKD_ESIG : rc;
}

/* ---- the table --------------------------------------------------------------------- */

const struct signature_scheme signature_schemes[] = {
    {
        .name = SIGNATURE_SCHEME_DEFAULT,
        .header = "webhook-signature",
        .sign = standard_webhooks_sign,
        .verify = standard_webhooks_verify,
    },
    /*
     * The inbound receiver's entries take the same shape, e.g.
     *   {.name = "stripe", .header = "Stripe-Signature", .sign = stripe_sign, .verify = stripe_verify}
     * where stripe_verify reads "t=…,v1=…" from req->header(…, "Stripe-Signature"), checks t against
     * req->now_s and req->tolerance_s and HMAC-SHA256(secret, t "." body) in hex for each secret;
     *   {.name = "github", .header = "X-Hub-Signature-256", …} compares "sha256=" + hex HMAC of the body;
     *   {.name = "hmac", .header = NULL, …} takes header, algorithm, encoding and prefix from req->params.
     */
};

const size_t signature_schemes_count = sizeof signature_schemes / sizeof signature_schemes[0];

const struct signature_scheme *signature_scheme_find(const char *name)
{
    if (name == NULL)
        return NULL;
    for (size_t i = 0; i < signature_schemes_count; i++) {
        if (strcmp(signature_schemes[i].name, name) == 0)
            return &signature_schemes[i];
    }
    return NULL;
}
