/*
 * The rules of an endpoint's JSON body (DESIGN §12, POST/PATCH /v1/endpoints)
 * as a field table, and secret rotation.
 *
 *   api_endpoint_apply    validate a POST/PATCH body into an endpoint
 *   api_endpoint_rotate   put a new secret first, give older ones a grace period
 */
#ifndef HOOKD_OPS_ENDPOINT_BODY_H
#define HOOKD_OPS_ENDPOINT_BODY_H
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

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
__attribute__((warn_unused_result)) int api_endpoint_rotate(struct endpoint *ep, const char *new_secret, int64_t now,
                                                            int64_t grace_ms);
#endif
