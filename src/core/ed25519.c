/* Ed25519 key text, generation, signing and verification through OpenSSL's EVP interface. */
#include "core/ed25519.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>

#include "core/base64.h"
#include "core/ids.h"
#include "hookd.h"

/* Decodes prefix + base64 into out; returns the byte count or -1. */
static long key_text_decode(const char *text, const char *prefix, unsigned char *out, size_t cap)
{
    size_t plen = strlen(prefix), n;

    if (text == NULL || strncmp(text, prefix, plen) != 0)
        return -1;
    text += plen;
    n = strnlen(text, ED25519_KEY_TEXT_MAX);
    if (n == 0 || n >= ED25519_KEY_TEXT_MAX)
        return -1;
    return base64_decode(text, n, out, cap);
}

static void key_text_encode(const char *prefix, const unsigned char *key, size_t n, char out[ED25519_KEY_TEXT_MAX])
{
    size_t plen = strlen(prefix);

    memcpy(out, prefix, plen);
    base64_encode(key, n, out + plen);
}

int ed25519_public_of_seed(const unsigned char seed[ED25519_SEED_LEN], unsigned char pub[ED25519_PUBLIC_LEN])
{
    EVP_PKEY *pkey = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed, ED25519_SEED_LEN);
    size_t len = ED25519_PUBLIC_LEN;
    int rc = HOOKD_EIO;

    if (pkey != NULL && EVP_PKEY_get_raw_public_key(pkey, pub, &len) == 1 && len == ED25519_PUBLIC_LEN)
        rc = 0;
    EVP_PKEY_free(pkey);
    return rc;
}

int ed25519_secret_decode(const char *secret, unsigned char seed[ED25519_SEED_LEN])
{
    unsigned char raw[2 * ED25519_SEED_LEN], pub[ED25519_PUBLIC_LEN];
    long n = key_text_decode(secret, ED25519_SECRET_PREFIX, raw, sizeof raw);
    int rc = HOOKD_EINVAL;

    if (n != ED25519_SEED_LEN && n != 2 * ED25519_SEED_LEN)
        goto out;
    /* seed‖public: the public half must be the seed's, or the text was damaged. */
    if (n == 2 * ED25519_SEED_LEN &&
        (ed25519_public_of_seed(raw, pub) != 0 || CRYPTO_memcmp(pub, raw + ED25519_SEED_LEN, ED25519_PUBLIC_LEN) != 0))
        goto out;
    memcpy(seed, raw, ED25519_SEED_LEN);
    rc = 0;
out:
    explicit_bzero(raw, sizeof raw);
    if (rc != 0)
        explicit_bzero(seed, ED25519_SEED_LEN);
    return rc;
}

int ed25519_public_decode(const char *key, unsigned char pub[ED25519_PUBLIC_LEN])
{
    unsigned char raw[ED25519_PUBLIC_LEN + 1];
    long n = key_text_decode(key, ED25519_PUBLIC_PREFIX, raw, sizeof raw);

    if (n != ED25519_PUBLIC_LEN)
        return HOOKD_EINVAL;
    memcpy(pub, raw, ED25519_PUBLIC_LEN);
    return 0;
}

int ed25519_generate(char secret_out[ED25519_KEY_TEXT_MAX], char public_out[ED25519_KEY_TEXT_MAX])
{
    unsigned char seed[ED25519_SEED_LEN], pub[ED25519_PUBLIC_LEN];
    int rc;

    random_bytes(seed, sizeof seed);
    rc = ed25519_public_of_seed(seed, pub);
    if (rc == 0) {
        key_text_encode(ED25519_SECRET_PREFIX, seed, sizeof seed, secret_out);
        key_text_encode(ED25519_PUBLIC_PREFIX, pub, sizeof pub, public_out);
    }
    explicit_bzero(seed, sizeof seed);
    return rc;
}

int ed25519_public_from_secret(const char *secret, char public_out[ED25519_KEY_TEXT_MAX])
{
    unsigned char seed[ED25519_SEED_LEN], pub[ED25519_PUBLIC_LEN];
    int rc = ed25519_secret_decode(secret, seed);

    if (rc == 0)
        rc = ed25519_public_of_seed(seed, pub);
    if (rc == 0)
        key_text_encode(ED25519_PUBLIC_PREFIX, pub, sizeof pub, public_out);
    explicit_bzero(seed, sizeof seed);
    return rc;
}

/* Ed25519 signs the message in one pass (no streaming), so the parts are joined. Caller frees *out. */
static int join_parts(const struct mac_part *parts, size_t n_parts, unsigned char **out, size_t *len)
{
    size_t total = 0, off = 0;

    if (n_parts == 1) { /* already one piece: borrowed, not copied (see free_joined) */
        *out = parts[0].n > 0 ? (unsigned char *)parts[0].p : (unsigned char *)"";
        *len = parts[0].n;
        return 0;
    }
    for (size_t i = 0; i < n_parts; i++) {
        if (parts[i].n > SIZE_MAX - total - 1)
            return HOOKD_EINVAL;
        total += parts[i].n;
    }
    *out = malloc(total + 1); /* +1: never malloc(0) */
    if (*out == NULL)
        return HOOKD_ENOMEM;
    for (size_t i = 0; i < n_parts; i++) {
        if (parts[i].n > 0)
            memcpy(*out + off, parts[i].p, parts[i].n);
        off += parts[i].n;
    }
    *len = total;
    return 0;
}

static void free_joined(const struct mac_part *parts, size_t n_parts, unsigned char *msg)
{
    if (n_parts != 1)
        free(msg);
}

int ed25519_sign(const unsigned char seed[ED25519_SEED_LEN], const struct mac_part *parts, size_t n_parts,
                 unsigned char sig[ED25519_SIG_LEN])
{
    EVP_PKEY *pkey = NULL;
    EVP_MD_CTX *ctx = NULL;
    unsigned char *msg = NULL;
    size_t len = 0, sig_len = ED25519_SIG_LEN;
    int rc = join_parts(parts, n_parts, &msg, &len);

    if (rc != 0)
        return rc;
    rc = HOOKD_EIO;
    pkey = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed, ED25519_SEED_LEN);
    ctx = EVP_MD_CTX_new();
    if (pkey == NULL || ctx == NULL || EVP_DigestSignInit(ctx, NULL, NULL, NULL, pkey) != 1 ||
        EVP_DigestSign(ctx, sig, &sig_len, msg, len) != 1 || sig_len != ED25519_SIG_LEN)
        goto out;
    rc = 0;
out:
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(pkey); /* OpenSSL cleanses its copy of the private key */
    free_joined(parts, n_parts, msg);
    return rc;
}

int ed25519_verify(const unsigned char pub[ED25519_PUBLIC_LEN], const struct mac_part *parts, size_t n_parts,
                   const unsigned char sig[ED25519_SIG_LEN])
{
    EVP_PKEY *pkey = NULL;
    EVP_MD_CTX *ctx = NULL;
    unsigned char *msg = NULL;
    size_t len = 0;
    int rc = join_parts(parts, n_parts, &msg, &len), ok;

    if (rc != 0)
        return rc;
    rc = HOOKD_EIO;
    pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub, ED25519_PUBLIC_LEN);
    ctx = EVP_MD_CTX_new();
    if (pkey == NULL) {
        rc = HOOKD_ESIG; /* not a point on the curve: no signature can match it */
        goto out;
    }
    if (ctx == NULL || EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, pkey) != 1)
        goto out;
    ok = EVP_DigestVerify(ctx, sig, ED25519_SIG_LEN, msg, len);
    rc = ok == 1 ? 0 : HOOKD_ESIG;
    if (ok != 1)
        ERR_clear_error(); /* a refused signature is an answer, not an error to leave queued */
out:
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(pkey);
    free_joined(parts, n_parts, msg);
    return rc;
}
