/*
 * What the scheme files (scheme_*.c) share and export to the table in
 * signature_scheme.c: each scheme's sign and verify, and small strict parsing
 * helpers. Not for callers outside src/core: they use the table.
 */
#ifndef HOOKD_CORE_SCHEME_IMPL_H
#define HOOKD_CORE_SCHEME_IMPL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/signature_scheme.h"

#define SCHEME_TIMESTAMP_MAX_DIGITS 15

int standard_webhooks_sign(const struct signature_message *msg, const char *const *secrets, size_t n_secrets,
                           char *out, size_t out_len);
int standard_webhooks_verify(const struct signature_request *req, const char *const *secrets, size_t n_secrets);
int stripe_sign(const struct signature_message *msg, const char *const *secrets, size_t n_secrets, char *out,
                size_t out_len);
int stripe_verify(const struct signature_request *req, const char *const *secrets, size_t n_secrets);
int github_sign(const struct signature_message *msg, const char *const *secrets, size_t n_secrets, char *out,
                size_t out_len);
int github_verify(const struct signature_request *req, const char *const *secrets, size_t n_secrets);
int hmac_sign(const struct signature_message *msg, const char *const *secrets, size_t n_secrets, char *out,
              size_t out_len);
int hmac_verify(const struct signature_request *req, const char *const *secrets, size_t n_secrets);
int none_sign(const struct signature_message *msg, const char *const *secrets, size_t n_secrets, char *out,
              size_t out_len);
int none_verify(const struct signature_request *req, const char *const *secrets, size_t n_secrets);

/* Decimal unix seconds, s[0..n): 1..15 digits, nothing else. Returns 0 or HOOKD_EINVAL. */
int scheme_parse_timestamp(const char *s, size_t n, int64_t *out);
/* 0 when |req->now_s - ts| <= req->tolerance_s (or tolerance is 0), else HOOKD_ETIME. */
int scheme_check_time(const struct signature_request *req, int64_t ts);
/* Length of a header value, or -1 when it is longer than max. */
long scheme_bounded_len(const char *value, size_t max);
/* The bytes of a raw-text secret (stripe, github, hmac): false when NULL, empty or too long. */
bool scheme_raw_secret(const char *secret, size_t *len);
#endif
