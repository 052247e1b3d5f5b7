/*
 * The inbound receiver, POST /in/{source} on the public listener (DESIGN §6):
 *
 *   receiver_prepare   on the header alone: unknown source 404, the source's body cap (413 before the body;
 *                      a chunked body past it is cut off by the server, 413, and logged too_large as well)
 *   receiver_handle    signature on the raw bytes (401), JSON (400), event id, type, entity and version by
 *                      JSON Pointer or header, required fields (400); then the insert-or-duplicate as a
 *                      writer op, answered 200 {"id", "status": "accepted"|"duplicate"} after its commit
 *
 * A refused request never reaches the inbox: it is counted and logged without
 * its body (hookd_rejections) by a deferred writer op that the answer never
 * waits for, and that is dropped rather than queued without bound.
 */
#ifndef HOOKD_INBOUND_RECEIVER_H
#define HOOKD_INBOUND_RECEIVER_H
#include <stdbool.h>

#include "net/http.h"

#define RECEIVER_REJECTIONS_KEPT 1000    /* rejection log rows kept per source */
#define RECEIVER_REJECTIONS_QUEUED 256   /* rejection writes waiting at most; more are counted only in memory */
#define RECEIVER_RETRY_AFTER "1"         /* seconds, on 503 */

/* Route hooks (ctx is the struct api_ctx of the listener). */
bool receiver_prepare(struct http_request *req, struct http_response *res, void *ctx);
void receiver_handle(struct http_request *req, struct http_response *res, void *ctx);
#endif
