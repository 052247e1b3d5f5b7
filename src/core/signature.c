/*
 * Standard Webhooks v1 signatures: secret generation and decoding, signing,
 * and constant-time verification of a webhook-signature header.
 */
#include "core/signature.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "core/base64.h"
#include "core/ids.h"
#include "hookd.h"

#define SECRET_PREFIX "whsec_"
#define SECRET_GENERATED_BYTES 32
#define SECRET_MIN_BYTES 24
#define HMAC_SHA256_LEN 32
#define SIG_B64_LEN 44       /* base64 of 32 bytes */
#define TIMESTAMP_MAX_DIGITS 15

/* Fetched once and kept for the process: fetching per call costs a lock and a lookup. */
static EVP_MAC *hmac_impl;
static pthread_once_t hmac_once = PTHREAD_ONCE_INIT;

static void hmac_fetch(void) { hmac_impl = EVP_MAC_fetch(NULL, "HMAC", NULL); }

struct span {
    const void *p;
    size_t n;
};

/* HMAC-SHA256 of the concatenated parts. */
static int hmac_sha256(const unsigned char *key, size_t key_len, const struct span *parts, size_t n_parts,
                       unsigned char out[HMAC_SHA256_LEN])
{
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                           OSSL_PARAM_construct_end()};
    EVP_MAC_CTX *ctx = NULL;
    size_t out_len = 0;
    int rc = HOOKD_EIO;

    if (pthread_once(&hmac_once, hmac_fetch) != 0 || hmac_impl == NULL)
        goto out;
    ctx = EVP_MAC_CTX_new(hmac_impl);
    if (ctx == NULL || EVP_MAC_init(ctx, key, key_len, params) != 1)
        goto out;
    for (size_t i = 0; i < n_parts; i++) {
        if (parts[i].n > 0 && EVP_MAC_update(ctx, parts[i].p, parts[i].n) != 1)
            goto out;
    }
    if (EVP_MAC_final(ctx, out, &out_len, HMAC_SHA256_LEN) != 1 || out_len != HMAC_SHA256_LEN)
        goto out;
    rc = 0;
out:
    EVP_MAC_CTX_free(ctx); /* frees the key copy OpenSSL holds, cleansed */
    return rc;
}

void secret_generate(char out[SECRET_TEXT_MAX])
{
    unsigned char key[SECRET_GENERATED_BYTES];
    size_t plen = strlen(SECRET_PREFIX);

    random_bytes(key, sizeof key);
    memcpy(out, SECRET_PREFIX, plen);
    base64_encode(key, sizeof key, out + plen);
    explicit_bzero(key, sizeof key);
}

int secret_decode(const char *secret, unsigned char key[SECRET_MAX_BYTES])
{
    size_t plen = strlen(SECRET_PREFIX);
    long n;

    if (secret == NULL)
        return HOOKD_EINVAL;
    if (strncmp(secret, SECRET_PREFIX, plen) == 0)
        secret += plen;
    n = base64_decode(secret, strlen(secret), key, SECRET_MAX_BYTES);
    if (n <= 0) {
        explicit_bzero(key, SECRET_MAX_BYTES);
        return HOOKD_EINVAL;
    }
    return (int)n;
}

int secret_is_valid(const char *secret)
{
    unsigned char key[SECRET_MAX_BYTES];
    int n = secret_decode(secret, key);

    explicit_bzero(key, sizeof key);
    return n >= SECRET_MIN_BYTES && n <= SECRET_MAX_BYTES;
}

int signature_sign(const char *secret, const char *msg_id, int64_t timestamp_s, const void *body, size_t len,
                   char out[SIGNATURE_V1_LEN])
{
    unsigned char key[SECRET_MAX_BYTES];
    unsigned char mac[HMAC_SHA256_LEN];
    char ts[24];
    int key_len, rc;

    if (msg_id == NULL || (body == NULL && len > 0))
        return HOOKD_EINVAL;
    key_len = secret_decode(secret, key);
    if (key_len < 0)
        return HOOKD_EINVAL;
    snprintf(ts, sizeof ts, "%" PRId64, timestamp_s);
    const struct span parts[] = {
        {msg_id, strlen(msg_id)}, {".", 1}, {ts, strlen(ts)}, {".", 1}, {body, len},
    };
    rc = hmac_sha256(key, (size_t)key_len, parts, sizeof parts / sizeof parts[0], mac);
    explicit_bzero(key, sizeof key);
    if (rc == 0) {
        memcpy(out, "v1,", 3);
        base64_encode(mac, sizeof mac, out + 3);
    }
    explicit_bzero(mac, sizeof mac);
    return rc;
}

/* webhook-timestamp: decimal unix seconds. */
static int parse_timestamp(const char *s, int64_t *out)
{
    int64_t v = 0;
    size_t i = 0;

    for (; s[i] >= '0' && s[i] <= '9'; i++) {
        if (i >= TIMESTAMP_MAX_DIGITS)
            return HOOKD_EINVAL;
        v = v * 10 + (s[i] - '0');
    }
    if (i == 0 || s[i] != '\0')
        return HOOKD_EINVAL;
    *out = v;
    return 0;
}

/* True when one entry of the header, s[0..n), is "v1,<expected base64>". */
static bool entry_matches(const char *s, size_t n, const char *expected_b64)
{
    if (n != 3 + SIG_B64_LEN || memcmp(s, "v1,", 3) != 0)
        return false;
    return CRYPTO_memcmp(s + 3, expected_b64, SIG_B64_LEN) == 0;
}

int signature_verify(const char *secret, const char *msg_id, const char *timestamp, const char *header,
                     const void *body, size_t len, int64_t now_s, int64_t tolerance_s)
{
    char expected[SIGNATURE_V1_LEN];
    int64_t ts;
    bool matched = false;
    int rc;

    if (secret == NULL || msg_id == NULL || timestamp == NULL || header == NULL)
        return HOOKD_EINVAL;
    rc = parse_timestamp(timestamp, &ts);
    if (rc != 0)
        return rc;
    if (tolerance_s > 0 && (now_s - ts > tolerance_s || ts - now_s > tolerance_s))
        return HOOKD_ETIME;
    rc = signature_sign(secret, msg_id, ts, body, len, expected);
    if (rc != 0)
        return rc;
    /* Every entry is compared, so timing does not reveal which one matched. */
    for (const char *p = header; *p != '\0';) {
        size_t n = strcspn(p, " ");
        if (n > 0 && entry_matches(p, n, expected + 3))
            matched = true;
        p += n;
        while (*p == ' ')
            p++;
    }
    explicit_bzero(expected, sizeof expected);
    return matched ? 0 : HOOKD_ESIG;
}
