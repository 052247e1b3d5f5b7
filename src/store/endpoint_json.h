/*
 * The JSON text columns of hookd_endpoints (event type filters, secrets,
 * retry schedule), encoded and decoded the same way by every backend.
 */
#ifndef HOOKD_STORE_ENDPOINT_JSON_H
#define HOOKD_STORE_ENDPOINT_JSON_H
#include "store/store.h"

/* Heap JSON text of the three columns; retry_schedule is NULL when the
 * endpoint has none. secrets holds key material: endpoint_json_free wipes it. */
struct endpoint_json {
    char *event_types, *secrets, *retry_schedule;
    char *headers; /* {"Name": "value", …}; NULL when the endpoint has none */
};

/* Fills j from ep; HOOKD_EINVAL for counts over the limits, HOOKD_ENOMEM. */
__attribute__((warn_unused_result)) int endpoint_json_encode(const struct endpoint *ep, struct endpoint_json *j);
void endpoint_json_free(struct endpoint_json *j);
/* Fills ep's event types, secrets and retry schedule from the column texts
 * (NULL: the column's default). HOOKD_EIO when a column is malformed; on any
 * error ep's filled parts are left for the caller's endpoint_free(). */
__attribute__((warn_unused_result)) int endpoint_json_decode(struct endpoint *ep, const char *event_types,
                                                             const char *secrets, const char *retry_schedule);
/* Fills ep's custom headers from the column text (a JSON object; NULL: none). A header the rules of
 * core/custom_headers.h refuse (written around the API) is left out with a warning, so it is never sent. */
__attribute__((warn_unused_result)) int endpoint_headers_decode(struct endpoint *ep, const char *headers);
#endif
