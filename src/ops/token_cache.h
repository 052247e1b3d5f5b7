/*
 * Account-scoped API tokens: issuing their secrets, and the in-memory set of
 * live ones the admin listener checks a bearer value against before the body
 * is read, so auth costs no store round trip per request.
 *
 *   token_secret_new     a fresh "hkat_…" secret and its SHA-256 hex
 *   token_hash_hex       the SHA-256 hex of a secret (what the store keeps)
 *   token_cache_check    the http_token_check_fn of the admin listener
 *   token_cache_put/drop a change made through this process, in effect at once
 *
 * The set is replaced whole when the store's tokens_version moves, checked
 * at most every TOKEN_CACHE_CHECK_MS when a scoped token is presented: a
 * token revoked through another node (or by SQL) stops working within that
 * bound plus one reload; one revoked through this node at once.
 */
#ifndef HOOKD_OPS_TOKEN_CACHE_H
#define HOOKD_OPS_TOKEN_CACHE_H
#include <stddef.h>
#include <stdint.h>

#include "net/http.h"
#include "store/store.h"

#define TOKEN_PREFIX "hkat_"
#define TOKEN_SECRET_BYTES 32 /* random bytes; the secret is the prefix and 43 base64url characters */
#define TOKEN_SECRET_MAX 64
#define TOKEN_CACHE_CHECK_MS 1000

struct store_pool;
struct token_cache;

__attribute__((warn_unused_result)) int token_cache_create(struct store_pool *readers, struct token_cache **out);
void token_cache_destroy(struct token_cache *c);

/* A new secret into secret (TOKEN_SECRET_MAX) and its hash; the caller wipes secret after use. */
void token_secret_new(char secret[TOKEN_SECRET_MAX], char hash[SHA256_HEX_LEN]);
void token_hash_hex(const char *secret, size_t len, char hash[SHA256_HEX_LEN]);

/* The check (ctx is the cache). Expired: HOOKD_ETIME; unknown or revoked: HOOKD_ENOTFOUND. */
int token_cache_check(struct token_cache *c, const char *token, size_t len, struct http_caller *out);
/* A token this process created (after its commit): valid here at once. */
void token_cache_put(struct token_cache *c, const struct api_token *t);
/* A token this process revoked (after its commit): refused here at once. */
void token_cache_drop(struct token_cache *c, const char *id);
#endif
