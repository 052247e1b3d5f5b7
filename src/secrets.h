/*
 * Secrets at rest around the store (docs/design.md §12): which key seals
 * them, that it is the store's key, and sealing what is not sealed yet.
 *
 *   secrets_prepare      at start: settle the key (generate it on first start), refuse a wrong one,
 *                        seal plain values of an older database in one transaction
 *   secrets_rotate       `hookd rotate-key`: every secret re-sealed under a new key in one transaction,
 *                        then the key file replaced atomically
 *   secrets_token_get/_set  the admin token kept in hookd_meta, sealed
 */
#ifndef HOOKD_SECRETS_H
#define HOOKD_SECRETS_H
#include "config.h"
#include "store/store.h"

/* Returns 0, or an error after logging why (the daemon then refuses to start). */
__attribute__((warn_unused_result)) int secrets_prepare(struct store *s, const struct config *cfg);
/* new_key_file: the new key (generated into it when absent); NULL: a generated one. Returns 0 or an error
 * after logging why; the store and the key file are then as they were. */
__attribute__((warn_unused_result)) int secrets_rotate(struct store *s, const struct config *cfg,
                                                       const char *new_key_file);
/* The stored admin token (heap; the caller wipes and frees it with secret_text_free), HOOKD_ENOTFOUND. */
__attribute__((warn_unused_result)) int secrets_token_get(struct store *s, char **token);
__attribute__((warn_unused_result)) int secrets_token_set(struct store *s, const char *token);
/* "sqlite:PATH" or a bare path → PATH; NULL for other backends. */
const char *secrets_sqlite_path(const char *dsn);
#endif
