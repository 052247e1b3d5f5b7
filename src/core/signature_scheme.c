/*
 * The signature scheme table, the helpers its schemes share, and `none`. A new
 * scheme is a pair of functions in its own scheme_*.c and one line in
 * signature_schemes[].
 */
#include "core/signature_scheme.h"

#include <string.h>

#include "core/scheme_impl.h"
#include "hookd.h"

/* ---- shared helpers ---------------------------------------------------------------- */

int scheme_parse_timestamp(const char *s, size_t n, int64_t *out)
{
    int64_t v = 0;

    if (n == 0 || n > SCHEME_TIMESTAMP_MAX_DIGITS)
        return HOOKD_EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return HOOKD_EINVAL;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

int scheme_check_time(const struct signature_request *req, int64_t ts)
{
    /* Both are far from overflow: ts has at most 15 digits, now_s is a clock reading. */
    if (req->tolerance_s > 0 && (req->now_s - ts > req->tolerance_s || ts - req->now_s > req->tolerance_s))
        return HOOKD_ETIME;
    return 0;
}

long scheme_bounded_len(const char *value, size_t max)
{
    size_t n = strnlen(value, max + 1);
    return n > max ? -1 : (long)n;
}

bool scheme_raw_secret(const char *secret, size_t *len)
{
    if (secret == NULL)
        return false;
    *len = strnlen(secret, SIGNATURE_SECRET_MAX + 1);
    return *len > 0 && *len <= SIGNATURE_SECRET_MAX;
}

/* ---- none ------------------------------------------------------------------------------ */

/* `none` exists so that a source without verification says so; it signs nothing and accepts all. */
int none_sign(const struct signature_message *msg, const char *const *secrets, size_t n_secrets, char *out,
              size_t out_len)
{
    if (out == NULL || out_len == 0)
        return HOOKD_EINVAL;
    out[0] = '\0';
    return 0;
}

int none_verify(const struct signature_request *req, const char *const *secrets, size_t n_secrets)
{
    return req == NULL ? HOOKD_EINVAL : 0;
}

/* ---- the table --------------------------------------------------------------------- */

const struct signature_scheme signature_schemes[] = {
    {.name = SIGNATURE_SCHEME_DEFAULT, .header = "webhook-signature", .needs_secrets = 1,
     .sign = standard_webhooks_sign, .verify = standard_webhooks_verify},
    {.name = "stripe", .header = "Stripe-Signature", .needs_secrets = 1, .sign = stripe_sign,
     .verify = stripe_verify},
    {.name = "github", .header = "X-Hub-Signature-256", .needs_secrets = 1, .sign = github_sign,
     .verify = github_verify},
    {.name = "hmac", .header = NULL, .needs_params = 1, .needs_secrets = 1, .sign = hmac_sign,
     .verify = hmac_verify},
    {.name = "none", .header = NULL, .sign = none_sign, .verify = none_verify},
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
