/*
 * The live account tokens in memory: a set sorted by the SHA-256 of each
 * secret, a generation of a version-validated cache (store/versioned_cache.h)
 * replaced whole when the store's token version moves, and changed in place
 * by this process's own creates and revocations.
 */
#include "ops/token_cache.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base64.h"
#include "core/clock.h"
#include "core/ids.h"
#include "core/mac.h"
#include "store/versioned_cache.h"

struct token_entry {
    unsigned char hash[SHA256_DIGEST_LENGTH];
    char id[HOOKD_ID_MAX];
    char account[HTTP_CALLER_ACCOUNT_MAX];
    unsigned scopes;
    int64_t expires_at;
};

/* One generation: the live tokens, sorted by hash; this process's own changes edit it in place. */
struct token_set {
    struct token_entry *entries;
    size_t n, cap;
};

struct token_cache {
    struct versioned_cache vc; /* of struct token_set */
};

static void token_set_drop(void *gen)
{
    struct token_set *set = gen;

    if (set->entries)
        explicit_bzero(set->entries, set->cap * sizeof *set->entries);
    free(set->entries);
    free(set);
}

static int token_set_load(struct store *s, void **gen);

static const struct versioned_cache_ops token_cache_ops = {
    .part = "api",
    .what = "account tokens",
    .version = store_token_version,
    .load = token_set_load,
    .drop = token_set_drop,
};

int token_cache_create(struct store_pool *readers, struct token_cache **out)
{
    struct token_cache *c = calloc(1, sizeof *c);

    *out = NULL;
    if (!c)
        return HOOKD_ENOMEM;
    versioned_cache_init(&c->vc, readers, &token_cache_ops, TOKEN_CACHE_CHECK_MS);
    *out = c;
    return 0;
}

void token_cache_destroy(struct token_cache *c)
{
    if (!c)
        return;
    versioned_cache_fini(&c->vc);
    free(c);
}

void token_secret_new(char secret[TOKEN_SECRET_MAX], char hash[SHA256_HEX_LEN])
{
    unsigned char raw[TOKEN_SECRET_BYTES];
    char b64[TOKEN_SECRET_MAX];
    size_t n = 0;

    random_bytes(raw, sizeof raw);
    base64_encode(raw, sizeof raw, b64);
    explicit_bzero(raw, sizeof raw);
    /* base64url without padding: the secret is one URL- and header-safe word. */
    n = (size_t)snprintf(secret, TOKEN_SECRET_MAX, "%s", TOKEN_PREFIX);
    for (const char *p = b64; *p && *p != '=' && n + 1 < TOKEN_SECRET_MAX; p++)
        secret[n++] = *p == '+' ? '-' : *p == '/' ? '_' : *p;
    secret[n] = '\0';
    explicit_bzero(b64, sizeof b64);
    token_hash_hex(secret, n, hash);
}

void token_hash_hex(const char *secret, size_t len, char hash[SHA256_HEX_LEN])
{
    unsigned char d[SHA256_DIGEST_LENGTH];

    SHA256((const unsigned char *)secret, len, d);
    hex_encode(d, sizeof d, hash);
}

static unsigned scopes_of(enum token_scope sc)
{
    return sc == TOKEN_SCOPE_READ_REPLAY ? HTTP_SCOPE_READ | HTTP_SCOPE_REPLAY : HTTP_SCOPE_READ;
}

static int by_hash(const void *a, const void *b)
{
    return memcmp(((const struct token_entry *)a)->hash, ((const struct token_entry *)b)->hash, SHA256_DIGEST_LENGTH);
}

/* A record as an entry; false for one that cannot be (a malformed hash, an account too long). */
static bool entry_from(struct token_entry *e, const struct api_token *t)
{
    memset(e, 0, sizeof *e);
    if (hex_decode(t->hash, strlen(t->hash), e->hash, sizeof e->hash) != SHA256_DIGEST_LENGTH ||
        strlen(t->account) >= sizeof e->account)
        return false;
    snprintf(e->id, sizeof e->id, "%s", t->id);
    snprintf(e->account, sizeof e->account, "%s", t->account);
    e->scopes = scopes_of(t->scope);
    e->expires_at = t->expires_at;
    return true;
}

/* A generation from the store: the tokens neither revoked nor expired now. */
static int token_set_load(struct store *s, void **gen)
{
    struct token_list rows = {0};
    struct token_set *set = calloc(1, sizeof *set);
    int rc = set ? store_token_list_active(s, clock_now_ms(), &rows) : HOOKD_ENOMEM;

    *gen = NULL;
    if (rc == 0 && rows.n > 0) {
        if ((set->entries = calloc(rows.n, sizeof *set->entries)) != NULL)
            set->cap = rows.n;
        else
            rc = HOOKD_ENOMEM;
    }
    for (size_t i = 0; rc == 0 && i < rows.n; i++)
        set->n += entry_from(&set->entries[set->n], &rows.items[i]);
    token_list_free(&rows);
    if (rc) {
        if (set)
            token_set_drop(set);
        return rc;
    }
    if (set->n)
        qsort(set->entries, set->n, sizeof *set->entries, by_hash);
    *gen = set;
    return 0;
}

int token_cache_check(struct token_cache *c, const char *token, size_t len, struct http_caller *out)
{
    struct token_entry key;
    const struct token_entry *hit;
    struct token_set *set;
    void *gen;
    bool found = false;
    int rc;

    memset(out, 0, sizeof *out);
    /* Only what looks like one of ours is looked up: anything else costs no store work. */
    if (len <= sizeof TOKEN_PREFIX - 1 || len >= TOKEN_SECRET_MAX ||
        memcmp(token, TOKEN_PREFIX, sizeof TOKEN_PREFIX - 1) != 0)
        return HOOKD_ENOTFOUND;
    SHA256((const unsigned char *)token, len, key.hash);
    if ((rc = versioned_cache_lock(&c->vc, &gen)) != 0) {
        explicit_bzero(&key, sizeof key);
        return rc;
    }
    set = gen;
    /* The search orders by the hash, which tells nothing of the secret; the match is constant-time. */
    hit = set->n ? bsearch(&key, set->entries, set->n, sizeof *set->entries, by_hash) : NULL;
    if (hit && CRYPTO_memcmp(hit->hash, key.hash, sizeof key.hash) == 0) {
        found = true;
        if (hit->expires_at <= clock_now_ms()) {
            rc = HOOKD_ETIME;
        } else {
            snprintf(out->id, sizeof out->id, "%s", hit->id);
            snprintf(out->account, sizeof out->account, "%s", hit->account);
            out->scopes = hit->scopes;
        }
    }
    versioned_cache_unlock(&c->vc);
    explicit_bzero(&key, sizeof key);
    return found ? rc : HOOKD_ENOTFOUND;
}

void token_cache_put(struct token_cache *c, const struct api_token *t)
{
    struct token_entry e;
    void *gen;

    if (!c || !entry_from(&e, t))
        return;
    if (versioned_cache_hold(&c->vc, &gen)) {
        struct token_set *set = gen;
        if (set->n == set->cap) {
            size_t cap = set->cap ? set->cap * 2 : 16;
            struct token_entry *grown = calloc(cap, sizeof *grown);
            if (grown) {
                if (set->n)
                    memcpy(grown, set->entries, set->n * sizeof *grown);
                if (set->entries)
                    explicit_bzero(set->entries, set->cap * sizeof *set->entries);
                free(set->entries);
                set->entries = grown;
                set->cap = cap;
            }
        }
        if (set->n < set->cap) {
            set->entries[set->n++] = e;
            qsort(set->entries, set->n, sizeof *set->entries, by_hash);
        }
    }
    versioned_cache_unlock(&c->vc);
    /* And the next check reloads, in case a load that began before the commit missed it. */
    versioned_cache_invalidate(&c->vc);
    explicit_bzero(&e, sizeof e);
}

void token_cache_drop(struct token_cache *c, const char *id)
{
    void *gen;

    if (!c)
        return;
    if (versioned_cache_hold(&c->vc, &gen)) {
        struct token_set *set = gen;
        for (size_t i = 0; i < set->n; i++) {
            if (strcmp(set->entries[i].id, id) == 0) {
                memmove(&set->entries[i], &set->entries[i + 1], (set->n - i - 1) * sizeof *set->entries);
                set->n--;
                break;
            }
        }
    }
    versioned_cache_unlock(&c->vc);
    versioned_cache_invalidate(&c->vc);
}
