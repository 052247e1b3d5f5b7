/* HMAC over parts through one fetched EVP_MAC, and hex. */
#include "core/mac.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
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

size_t mac_len(enum mac_algorithm alg) { return alg == MAC_SHA512 ? 64 : 32; }

/*
 * Keyed contexts, per thread: keying an HMAC hashes the key's two pads (two
 * blocks) and sets up a context, which for a short webhook message cost as
 * much as the message itself. A thread that signs with the same few keys (the
 * dispatcher: each endpoint's secret) keeps one context per key and re-inits
 * it with the key it holds. Direct-mapped by a hash of the key; a slot taken
 * by another key is replaced. Each thread's table is on a global list so it
 * stays reachable, and is freed (keys wiped) when its thread exits.
 */
#define KEYED_SLOTS 64
#define KEYED_KEY_MAX 64

struct keyed_slot {
    EVP_MAC_CTX *ctx; /* NULL: free */
    int alg;
    size_t key_len;
    unsigned char key[KEYED_KEY_MAX];
};

struct keyed_table {
    struct keyed_table *next, *prev; /* keyed_all */
    struct keyed_slot slot[KEYED_SLOTS];
};

static pthread_mutex_t keyed_mu = PTHREAD_MUTEX_INITIALIZER;
static struct keyed_table *keyed_all;
static pthread_key_t keyed_key;
static __thread struct keyed_table *keyed_mine;

static void keyed_table_free(void *arg)
{
    struct keyed_table *t = arg;

    pthread_mutex_lock(&keyed_mu);
    if (t->prev != NULL)
        t->prev->next = t->next;
    else
        keyed_all = t->next;
    if (t->next != NULL)
        t->next->prev = t->prev;
    pthread_mutex_unlock(&keyed_mu);
    for (size_t i = 0; i < KEYED_SLOTS; i++)
        EVP_MAC_CTX_free(t->slot[i].ctx); /* cleanses the key copy OpenSSL holds */
    explicit_bzero(t, sizeof *t);
    free(t);
}

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
    if (pthread_key_create(&keyed_key, keyed_table_free) != 0)
        keyed_key = (pthread_key_t)-1;
}

/* This thread's table, made on first use; NULL when it cannot be (then nothing is kept). */
static struct keyed_table *keyed_table(void)
{
    struct keyed_table *t = keyed_mine;

    if (t != NULL || keyed_key == (pthread_key_t)-1)
        return t;
    t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    if (pthread_setspecific(keyed_key, t) != 0) {
        free(t);
        return NULL;
    }
    pthread_mutex_lock(&keyed_mu);
    t->next = keyed_all;
    if (keyed_all != NULL)
        keyed_all->prev = t;
    keyed_all = t;
    pthread_mutex_unlock(&keyed_mu);
    keyed_mine = t;
    return t;
}

static size_t keyed_index(int alg, const unsigned char *key, size_t key_len)
{
    uint32_t h = 2166136261u ^ (uint32_t)alg; /* FNV-1a */

    for (size_t i = 0; i < key_len; i++)
        h = (h ^ key[i]) * 16777619u;
    return h % KEYED_SLOTS;
}

/* A new context of alg keyed with key; NULL when OpenSSL fails. */
static EVP_MAC_CTX *keyed_new(int alg, const void *key, size_t key_len)
{
    EVP_MAC_CTX *ctx = EVP_MAC_CTX_dup(hmac_template[alg]);

    /* An empty key is legal HMAC; OpenSSL wants a non-NULL pointer for it. */
    if (ctx != NULL && EVP_MAC_init(ctx, key_len > 0 ? key : (const void *)"", key_len, NULL) != 1) {
        EVP_MAC_CTX_free(ctx);
        ctx = NULL;
    }
    return ctx;
}

/*
 * A context keyed with key, ready for updates, and whether the caller frees
 * it (*owned: a context not kept in the table). NULL when OpenSSL fails.
 */
static EVP_MAC_CTX *keyed_ctx(int alg, const void *key, size_t key_len, bool *owned)
{
    struct keyed_table *t = key_len <= KEYED_KEY_MAX ? keyed_table() : NULL;
    EVP_MAC_CTX *ctx;

    *owned = false;
    if (t != NULL) {
        struct keyed_slot *s = &t->slot[keyed_index(alg, key, key_len)];
        if (s->ctx != NULL && s->alg == alg && s->key_len == key_len && CRYPTO_memcmp(s->key, key, key_len) == 0)
            return EVP_MAC_init(s->ctx, NULL, 0, NULL) == 1 ? s->ctx : NULL; /* back to the keyed start */
        ctx = keyed_new(alg, key, key_len);
        if (ctx == NULL)
            return NULL;
        EVP_MAC_CTX_free(s->ctx);
        s->ctx = ctx;
        s->alg = alg;
        s->key_len = key_len;
        explicit_bzero(s->key, sizeof s->key);
        memcpy(s->key, key, key_len);
        return ctx;
    }
    ctx = keyed_new(alg, key, key_len);
    *owned = ctx != NULL;
    return ctx;
}

int mac_hmac(enum mac_algorithm alg, const void *key, size_t key_len, const struct mac_part *parts, size_t n_parts,
             unsigned char *out)
{
    EVP_MAC_CTX *ctx = NULL;
    size_t out_len = 0, want = mac_len(alg);
    int a = alg == MAC_SHA512, rc = HOOKD_EIO;
    bool owned = false;

    if (pthread_once(&hmac_once, hmac_fetch) != 0 || hmac_template[a] == NULL)
        goto out;
    ctx = keyed_ctx(a, key, key_len, &owned);
    if (ctx == NULL)
        goto out;
    for (size_t i = 0; i < n_parts; i++) {
        if (parts[i].n > 0 && EVP_MAC_update(ctx, parts[i].p, parts[i].n) != 1)
            goto out;
    }
    if (EVP_MAC_final(ctx, out, &out_len, want) != 1 || out_len != want)
        goto out;
    rc = 0;
out:
    if (owned)
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
