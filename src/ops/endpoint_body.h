/*
 * The rules of an endpoint's JSON body (DESIGN §12, POST/PATCH /v1/endpoints)
 * as a field table, and secret rotation.
 *
 *   api_endpoint_apply    validate a POST/PATCH body into an endpoint
 *   api_endpoint_rotate   put a new secret first, give older ones a grace period
 *   api_endpoint_signing  PATCH "signing": a new key of the other kind, rotated in like a secret
 *   endpoint_key_*        the two kinds of endpoint key: whsec_ (HMAC, v1) and whsk_ (ed25519, v1a)
 */
#ifndef HOOKD_OPS_ENDPOINT_BODY_H
#define HOOKD_OPS_ENDPOINT_BODY_H
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "core/signature.h"
#include "ops/fields.h"
#include "store/store.h"

struct api_error;

/* The endpoint body's fields, for tests and documentation. */
extern const struct field endpoint_fields[];
extern const size_t endpoint_fields_count;

/*
 * Applies the fields of a POST (create) or PATCH body to ep. Create requires
 * url and sets a generated secret when none is given; PATCH refuses "secret".
 * Returns 0, HOOKD_EINVAL with err filled (400 naming the field), or
 * HOOKD_ENOMEM. On failure ep may be partly changed; it stays freeable.
 */
__attribute__((warn_unused_result)) int api_endpoint_apply(struct endpoint *ep, const json_t *body,
                                                           enum api_body_mode mode, struct api_error *err);

/*
 * Rotation: new_secret becomes secrets[0] (expires_at 0, created_at now); every
 * older secret expires at min(its expiry if set, now + grace_ms); those already
 * expired are dropped; at most ENDPOINT_MAX_SECRETS are kept.
 */
/* Endpoint keys: "whsec_…" signs v1 (HMAC), "whsk_…" v1a (ed25519); the newest key's kind is the
 * endpoint's "signing". */
#define ENDPOINT_KEY_TEXT_MAX SECRET_TEXT_MAX /* >= ED25519_KEY_TEXT_MAX */
bool endpoint_key_is_ed25519(const char *key);
bool endpoint_key_is_valid(const char *key);
/* A new key of the kind into out. Returns 0 or HOOKD_EIO. */
__attribute__((warn_unused_result)) int endpoint_key_generate(bool ed25519, char out[ENDPOINT_KEY_TEXT_MAX]);
/* When body's "signing" differs from the kind of ep's newest key: a new key of that kind first, the
 * older ones kept for grace_ms (api_endpoint_rotate). 0 when there is nothing to do. */
__attribute__((warn_unused_result)) int api_endpoint_signing(struct endpoint *ep, const json_t *body, int64_t now,
                                                             int64_t grace_ms);
__attribute__((warn_unused_result)) int api_endpoint_rotate(struct endpoint *ep, const char *new_secret, int64_t now,
                                                            int64_t grace_ms);
#endif
