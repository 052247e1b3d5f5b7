/*
 * GitHub: "X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>", keyed
 * with the webhook secret's text. No timestamp: GitHub sends none, so replays
 * are caught only by the inbox's event-id key (X-GitHub-Delivery).
 */
#include <string.h>

#include <openssl/crypto.h>

#include "core/mac.h"
#include "core/scheme_impl.h"
#include "hookd.h"

#define GITHUB_HEADER "X-Hub-Signature-256"
#define GITHUB_PREFIX "sha256="
#define GITHUB_PREFIX_LEN 7
#define HEX_LEN 64

/* GitHub signs with one secret; with several, the first usable one signs. */
int github_sign(const struct signature_message *msg, const char *const *secrets, size_t n_secrets, char *out,
                size_t out_len)
{
    unsigned char mac[32];
    size_t key_len;
    int rc = 0;

    if (msg == NULL || out == NULL || out_len == 0 || (msg->body == NULL && msg->body_len > 0))
        return HOOKD_EINVAL;
    out[0] = '\0';
    for (size_t i = 0; i < n_secrets; i++) {
        if (!scheme_raw_secret(secrets[i], &key_len))
            continue;
        if (out_len < GITHUB_PREFIX_LEN + HEX_LEN + 1)
            return HOOKD_EINVAL;
        const struct mac_part part = {msg->body, msg->body_len};
        rc = mac_hmac(MAC_SHA256, secrets[i], key_len, &part, 1, mac);
        if (rc == 0) {
            memcpy(out, GITHUB_PREFIX, GITHUB_PREFIX_LEN);
            hex_encode(mac, sizeof mac, out + GITHUB_PREFIX_LEN);
        }
        break;
    }
    explicit_bzero(mac, sizeof mac);
    return rc;
}

int github_verify(const struct signature_request *req, const char *const *secrets, size_t n_secrets)
{
    unsigned char given[32], mac[32];
    const char *header;
    bool matched = false, usable = false;
    size_t key_len;

    if (req == NULL || req->header == NULL || n_secrets == 0 || secrets == NULL ||
        (req->body == NULL && req->body_len > 0))
        return HOOKD_EINVAL;
    header = req->header(req->header_ctx, GITHUB_HEADER);
    if (header == NULL || scheme_bounded_len(header, GITHUB_PREFIX_LEN + HEX_LEN) != GITHUB_PREFIX_LEN + HEX_LEN ||
        memcmp(header, GITHUB_PREFIX, GITHUB_PREFIX_LEN) != 0 ||
        hex_decode(header + GITHUB_PREFIX_LEN, HEX_LEN, given, sizeof given) != 32)
        return HOOKD_EINVAL;
    const struct mac_part part = {req->body, req->body_len};
    for (size_t i = 0; i < n_secrets; i++) {
        if (!scheme_raw_secret(secrets[i], &key_len) || mac_hmac(MAC_SHA256, secrets[i], key_len, &part, 1, mac) != 0)
            continue;
        usable = true;
        matched |= CRYPTO_memcmp(mac, given, sizeof mac) == 0;
    }
    explicit_bzero(mac, sizeof mac);
    return matched ? 0 : usable ? HOOKD_ESIG : HOOKD_EINVAL;
}
