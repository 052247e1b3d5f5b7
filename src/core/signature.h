/*
 * Standard Webhooks signatures (DESIGN §5): secrets "whsec_" + base64 of
 * 24–64 bytes; "v1," + base64(HMAC-SHA256(key, id "." timestamp "." body)).
 */
#ifndef HOOKD_CORE_SIGNATURE_H
#define HOOKD_CORE_SIGNATURE_H
#include <stddef.h>
#include <stdint.h>

#define SECRET_MAX_BYTES 64
#define SECRET_TEXT_MAX 100   /* "whsec_" + base64(64) + NUL fits */
#define SIGNATURE_V1_LEN 48   /* "v1," + 44 base64 chars + NUL */

/* New secret from 32 CSPRNG bytes. */
void secret_generate(char out[SECRET_TEXT_MAX]);
/* Decodes "whsec_…" (the prefix is optional, as in the reference libraries) into key bytes; returns length or HOOKD_EINVAL. */
int secret_decode(const char *secret, unsigned char key[SECRET_MAX_BYTES]);
/* True when secret decodes to 24..64 bytes. */
int secret_is_valid(const char *secret);

/* "v1,<base64>" into out. Returns 0 or HOOKD_EINVAL (bad secret). */
__attribute__((warn_unused_result)) int signature_sign(const char *secret, const char *msg_id, int64_t timestamp_s,
                                                       const void *body, size_t len, char out[SIGNATURE_V1_LEN]);

/* Checks every space-separated "v1,…" entry of header against secret, in constant time per entry.
 * Also checks |now_s - timestamp| <= tolerance_s when tolerance_s > 0. Returns 0, HOOKD_ESIG, HOOKD_ETIME, HOOKD_EINVAL. */
__attribute__((warn_unused_result)) int signature_verify(const char *secret, const char *msg_id, const char *timestamp,
                                                         const char *header, const void *body, size_t len,
                                                         int64_t now_s, int64_t tolerance_s);
#endif
