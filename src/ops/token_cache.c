/*
 * The live account tokens in memory: a set sorted by the SHA-256 of each
 * secret, replaced whole when the store's token version moves, and changed
 * in place by this process's own creates and revocations.
 */
#include "ops/token_cache.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base64.h"
#include "core/clock.h"
#include "core/ids.h"
#include "core/mac.h"
#include "log.h"
#include "store/pool.h"

struct token_entry {
    unsigned char hash[SHA256_DIGEST_LENGTH];
    char id[HOOKD_ID_MAX];
    char account[HTTP_CALLER_ACCOUNT_MAX];
    unsigned scopes;
    int64_t expires_at;
};

struct token_cache {
    struct store_pool *readers;
    pthread_mutex_t mu;         /* guards entries, n, cap, version, checked_at, loaded */
    pthread_mutex_t refresh_mu; /* one reload at a time */
    struct token_entry *entries; /* sorted by hash */
    size_t n, cap;
    bool loaded;
    int64_t version;
    int64_t checked_at; /* monotonic ms of the last version check */
    atomic_bool stale;
    struct log_limiter lim;
};

int token_cache_create(struct store_pool *readers, struct token_cache **out)
{
    struct token_cache *c = calloc(1, sizeof *c);

    *out = NULL;
    if (!c)
        return HOOKD_ENOMEM;
    c->readers = readers;
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->refresh_mu, NULL);
    c->lim.interval_ms = 10000;
    atomic_store(&c->stale, true);
    *out = c;
    return 0;
}

void token_cache_destroy(struct token_cache *c)
{
    if (!c)
        return;
    if (c->entries)
        explicit_bzero(c->entries, c->cap * sizeof *c->entries);
    free(c->entries);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->refresh_mu);
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

/* Checks the version and reloads when it moved (or the set is stale or missing). Holds refresh_mu. */
static int refresh(struct token_cache *c)
{
    struct token_list rows = {0};
    struct token_entry *fresh = NULL, *old = NULL;
    struct store *s = NULL;
    int64_t version = 0;
    size_t n = 0, old_cap = 0, rows_n;
    bool stale = atomic_exchange(&c->stale, false), loaded, load;
    int rc = store_pool_get(c->readers, &s);

    if (rc == 0)
        rc = store_token_version(s, &version);
    pthread_mutex_lock(&c->mu);
    loaded = c->loaded;
    load = stale || !loaded || version != c->version;
    pthread_mutex_unlock(&c->mu);
    if (rc == 0 && load)
        rc = store_token_list_active(s, clock_now_ms(), &rows);
    if (s)
        store_pool_put(c->readers, s, rc == HOOKD_EIO || rc == HOOKD_EUNAVAIL);
    if (rc == 0 && load && rows.n > 0 && !(fresh = calloc(rows.n, sizeof *fresh)))
        rc = HOOKD_ENOMEM;
    for (size_t i = 0; rc == 0 && load && i < rows.n; i++)
        n += entry_from(&fresh[n], &rows.items[i]);
    rows_n = rows.n;
    token_list_free(&rows);
    if (fresh)
        qsort(fresh, n, sizeof *fresh, by_hash);
    pthread_mutex_lock(&c->mu);
    c->checked_at = clock_mono_ms();
    if (rc == 0 && load) {
        old = c->entries;
        old_cap = c->cap;
        c->entries = fresh;
        c->n = n;
        c->cap = fresh ? rows_n : 0;
        c->version = version;
        c->loaded = true;
        fresh = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    if (old)
        explicit_bzero(old, old_cap * sizeof *old);
    free(old);
    free(fresh);
    if (rc) {
        if (stale)
            atomic_store(&c->stale, true);
        log_limited(&c->lim, LOG_WARN, "api", "cannot load the account tokens: %s", hookd_strerror(rc));
    } else {
        log_limiter_reset(&c->lim, "api", "account tokens loaded");
    }
    return rc;
}

int token_cache_check(struct token_cache *c, const char *token, size_t len, struct http_caller *out)
{
    struct token_entry key;
    const struct token_entry *hit;
    bool due, loaded, found = false;
    int rc = 0;

    memset(out, 0, sizeof *out);
    /* Only what looks like one of ours is looked up: anything else costs no store work. */
    if (len <= sizeof TOKEN_PREFIX - 1 || len >= TOKEN_SECRET_MAX ||
        memcmp(token, TOKEN_PREFIX, sizeof TOKEN_PREFIX - 1) != 0)
        return HOOKD_ENOTFOUND;
    pthread_mutex_lock(&c->mu);
    loaded = c->loaded;
    due = !loaded || atomic_load(&c->stale) || clock_mono_ms() - c->checked_at >= TOKEN_CACHE_CHECK_MS;
    pthread_mutex_unlock(&c->mu);
    if (due) {
        /* Without a set every request waits for the load; with one, a single thread reloads. */
        if (!loaded)
            pthread_mutex_lock(&c->refresh_mu);
        if (!loaded || pthread_mutex_trylock(&c->refresh_mu) == 0) {
            rc = refresh(c);
            pthread_mutex_unlock(&c->refresh_mu);
        }
    }
    SHA256((const unsigned char *)token, len, key.hash);
    pthread_mutex_lock(&c->mu);
    if (!c->loaded) {
        pthread_mutex_unlock(&c->mu);
        return rc ? rc : HOOKD_EUNAVAIL;
    }
    /* The search orders by the hash, which tells nothing of the secret; the match is constant-time. */
    hit = c->n ? bsearch(&key, c->entries, c->n, sizeof *c->entries, by_hash) : NULL;
    if (hit && CRYPTO_memcmp(hit->hash, key.hash, sizeof key.hash) == 0) {
        found = true;
        if (hit->expires_at <= clock_now_ms()) {
            rc = HOOKD_ETIME;
        } else {
            snprintf(out->id, sizeof out->id, "%s", hit->id);
            snprintf(out->account, sizeof out->account, "%s", hit->account);
            out->scopes = hit->scopes;
            rc = 0;
        }
    }
    pthread_mutex_unlock(&c->mu);
    explicit_bzero(&key, sizeof key);
    return found ? rc : HOOKD_ENOTFOUND;
}

void token_cache_put(struct token_cache *c, const struct api_token *t)
{
    struct token_entry e;

    if (!c || !entry_from(&e, t))
        return;
    pthread_mutex_lock(&c->mu);
    if (c->loaded) {
        if (c->n == c->cap) {
            size_t cap = c->cap ? c->cap * 2 : 16;
            struct token_entry *grown = calloc(cap, sizeof *grown);
            if (grown) {
                if (c->n)
                    memcpy(grown, c->entries, c->n * sizeof *grown);
                if (c->entries)
                    explicit_bzero(c->entries, c->cap * sizeof *c->entries);
                free(c->entries);
                c->entries = grown;
                c->cap = cap;
            }
        }
        if (c->n < c->cap) {
            c->entries[c->n++] = e;
            qsort(c->entries, c->n, sizeof *c->entries, by_hash);
        }
    }
    pthread_mutex_unlock(&c->mu);
    /* And the next check reloads, in case a load that began before the commit missed it. */
    atomic_store(&c->stale, true);
    explicit_bzero(&e, sizeof e);
}

void token_cache_drop(struct token_cache *c, const char *id)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->n; i++) {
        if (strcmp(c->entries[i].id, id) == 0) {
            memmove(&c->entries[i], &c->entries[i + 1], (c->n - i - 1) * sizeof *c->entries);
            c->n--;
            break;
        }
    }
    pthread_mutex_unlock(&c->mu);
    atomic_store(&c->stale, true);
}
