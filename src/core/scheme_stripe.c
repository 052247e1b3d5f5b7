/*
 * Stripe: "Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>…][,v0=…]" where each
 * v1 is the hex HMAC-SHA256 of "<t>.<body>" keyed with the endpoint secret's
 * text as given ("whsec_…" and all, as Stripe's libraries use it). Any v1
 * may match; v0 and other schemes are ignored, as Stripe's libraries do.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>

#include "core/mac.h"
#include "core/scheme_impl.h"
#include "hookd.h"

#define STRIPE_HEADER "Stripe-Signature"
#define V1_HEX_LEN 64
#define KEY_MAX 15

int stripe_sign(const struct signature_message *msg, const char *const *secrets, size_t n_secrets, char *out,
                size_t out_len)
{
    char ts[24], hex[V1_HEX_LEN + 1];
    unsigned char mac[32];
    size_t used = 0, key_len;
    bool any = false;
    int rc = 0, n;

    if (msg == NULL || out == NULL || out_len == 0 || msg->timestamp_s < 0 || (msg->body == NULL && msg->body_len > 0))
        return HOOKD_EINVAL;
    out[0] = '\0';
    snprintf(ts, sizeof ts, "%" PRId64, msg->timestamp_s);
    const struct mac_part parts[] = {{ts, strlen(ts)}, {".", 1}, {msg->body, msg->body_len}};
    n = snprintf(out, out_len, "t=%s", ts);
    if (n < 0 || (size_t)n >= out_len)
        rc = HOOKD_EINVAL;
    else
        used = (size_t)n;
    for (size_t i = 0; i < n_secrets && rc == 0; i++) {
        if (!scheme_raw_secret(secrets[i], &key_len))
            continue;
        rc = mac_hmac(MAC_SHA256, secrets[i], key_len, parts, 3, mac);
        if (rc != 0)
            break;
        hex_encode(mac, sizeof mac, hex);
        n = snprintf(out + used, out_len - used, ",v1=%s", hex);
        if (n < 0 || (size_t)n >= out_len - used)
            rc = HOOKD_EINVAL;
        else
            used += (size_t)n;
        any = true;
    }
    explicit_bzero(mac, sizeof mac);
    explicit_bzero(hex, sizeof hex);
    if (rc != 0 || !any)
        out[0] = '\0';
    return rc;
}

struct stripe_header {
    const char *t;
    size_t t_len;
    unsigned char v1[SIGNATURE_ENTRIES_MAX][32];
    size_t n_v1;
};

/* "k=v,k=v": keys [a-z0-9], no spaces, no empty items, exactly one t, at least one v1. */
static int parse_header(const char *header, struct stripe_header *h)
{
    long total = scheme_bounded_len(header, SIGNATURE_HEADER_MAX);
    size_t n_items = 0;

    if (total <= 0)
        return HOOKD_EINVAL;
    h->t = NULL;
    h->n_v1 = 0;
    for (const char *p = header;; p++) {
        size_t len = strcspn(p, ","), klen = 0;

        while (klen < len && klen <= KEY_MAX && ((p[klen] >= 'a' && p[klen] <= 'z') || (p[klen] >= '0' && p[klen] <= '9')))
            klen++;
        if (++n_items > 2 * SIGNATURE_ENTRIES_MAX || klen == 0 || klen > KEY_MAX || klen + 1 >= len || p[klen] != '=')
            return HOOKD_EINVAL;
        const char *value = p + klen + 1;
        size_t value_len = len - klen - 1;
        for (size_t i = 0; i < value_len; i++) {
            if ((unsigned char)value[i] <= 0x20 || (unsigned char)value[i] >= 0x7f)
                return HOOKD_EINVAL;
        }
        if (klen == 1 && p[0] == 't') {
            if (h->t != NULL)
                return HOOKD_EINVAL;
            h->t = value;
            h->t_len = value_len;
        } else if (klen == 2 && memcmp(p, "v1", 2) == 0) {
            if (h->n_v1 == SIGNATURE_ENTRIES_MAX || value_len != V1_HEX_LEN ||
                hex_decode(value, value_len, h->v1[h->n_v1], 32) != 32)
                return HOOKD_EINVAL;
            h->n_v1++;
        }
        p += len;
        if (*p == '\0')
            break;
    }
    return h->t != NULL && h->n_v1 > 0 ? 0 : HOOKD_EINVAL;
}

int stripe_verify(const struct signature_request *req, const char *const *secrets, size_t n_secrets)
{
    struct stripe_header h;
    unsigned char mac[32];
    const char *header;
    bool matched = false, usable = false;
    size_t key_len;
    int64_t ts;
    int rc;

    if (req == NULL || req->header == NULL || n_secrets == 0 || secrets == NULL ||
        (req->body == NULL && req->body_len > 0))
        return HOOKD_EINVAL;
    header = req->header(req->header_ctx, STRIPE_HEADER);
    if (header == NULL)
        return HOOKD_EINVAL;
    rc = parse_header(header, &h);
    if (rc == 0)
        rc = scheme_parse_timestamp(h.t, h.t_len, &ts);
    if (rc == 0)
        rc = scheme_check_time(req, ts);
    if (rc != 0)
        return rc;
    const struct mac_part parts[] = {{h.t, h.t_len}, {".", 1}, {req->body, req->body_len}};
    /* Every secret against every v1, so timing does not tell which one matched. */
    for (size_t i = 0; i < n_secrets; i++) {
        if (!scheme_raw_secret(secrets[i], &key_len) || mac_hmac(MAC_SHA256, secrets[i], key_len, parts, 3, mac) != 0)
            continue;
        usable = true;
        for (size_t j = 0; j < h.n_v1; j++)
            matched |= CRYPTO_memcmp(mac, h.v1[j], sizeof mac) == 0;
    }
    explicit_bzero(mac, sizeof mac);
    return matched ? 0 : usable ? HOOKD_ESIG : HOOKD_EINVAL;
}
