/* HMAC over parts through one fetched EVP_MAC, and hex. */
#include "core/mac.h"

#include <pthread.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "hookd.h"

/*
 * Fetched once and kept for the process: fetching per call costs a lock and a
 * lookup, and so does naming the digest in each EVP_MAC_init. So one context
 * per algorithm holds its digest, keyless, and each call starts from a copy.
 */
static EVP_MAC_CTX *hmac_template[2]; /* by enum mac_algorithm */
static pthread_once_t hmac_once = PTHREAD_ONCE_INIT;

static void hmac_fetch(void)
{
    EVP_MAC *impl = EVP_MAC_fetch(NULL, "HMAC", NULL);

    for (int alg = MAC_SHA256; impl != NULL && alg <= MAC_SHA512; alg++) {
        char digest[8];
        OSSL_PARAM params[2];
        EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(impl);

        memcpy(digest, alg == MAC_SHA512 ? "SHA512" : "SHA256", 7);
        params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0);
        params[1] = OSSL_PARAM_construct_end();
        if (ctx != NULL && EVP_MAC_CTX_set_params(ctx, params) != 1) {
            EVP_MAC_CTX_free(ctx);
            ctx = NULL;
        }
        hmac_template[alg] = ctx;
    }
    EVP_MAC_free(impl); /* each context holds its own reference */
}

size_t mac_len(enum mac_algorithm alg) { return alg == MAC_SHA512 ? 64 : 32; }

int mac_hmac(enum mac_algorithm alg, const void *key, size_t key_len, const struct mac_part *parts, size_t n_parts,
             unsigned char *out)
{
    EVP_MAC_CTX *ctx = NULL;
    size_t out_len = 0, want = mac_len(alg);
    int rc = HOOKD_EIO;

    if (pthread_once(&hmac_once, hmac_fetch) != 0 || hmac_template[alg == MAC_SHA512] == NULL)
        goto out;
    ctx = EVP_MAC_CTX_dup(hmac_template[alg == MAC_SHA512]);
    /* An empty key is legal HMAC; OpenSSL wants a non-NULL pointer for it. */
    if (ctx == NULL || EVP_MAC_init(ctx, key_len > 0 ? key : (const void *)"", key_len, NULL) != 1)
        goto out;
    for (size_t i = 0; i < n_parts; i++) {
        if (parts[i].n > 0 && EVP_MAC_update(ctx, parts[i].p, parts[i].n) != 1)
            goto out;
    }
    if (EVP_MAC_final(ctx, out, &out_len, want) != 1 || out_len != want)
        goto out;
    rc = 0;
out:
    EVP_MAC_CTX_free(ctx); /* frees the key copy OpenSSL holds, cleansed */
    return rc;
}

void hex_encode(const void *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *p = in;

    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * n] = '\0';
}

static int hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

long hex_decode(const char *in, size_t n, void *out, size_t out_cap)
{
    unsigned char *o = out;

    if (n % 2 != 0 || n / 2 > out_cap)
        return -1;
    for (size_t i = 0; i < n; i += 2) {
        int hi = hex_value((unsigned char)in[i]), lo = hex_value((unsigned char)in[i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        o[i / 2] = (unsigned char)(hi << 4 | lo);
    }
    return (long)(n / 2);
}
