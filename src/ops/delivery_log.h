/*
 * The delivery log (DESIGN §12): attempts with their error class and retry
 * decision, and a delivery's state in plain words.
 *   delivery_log_class     an attempt's error class: timeout, connect, dns, tls, blocked,
 *                          http_3xx, http_4xx, http_429, http_5xx, too_large, request (NULL: 2xx)
 *   delivery_log_attempts  the "attempts" array of one delivery
 *   delivery_log_summary   "timeout after 10 s, retry in 47 s (attempt 3)"
 */
#ifndef HOOKD_OPS_DELIVERY_LOG_H
#define HOOKD_OPS_DELIVERY_LOG_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

const char *delivery_log_class(const struct attempt *a);
/* A new array (NULL on allocation failure). */
json_t *delivery_log_attempts(const struct delivery *d, const struct attempt_list *al, int64_t now);
void delivery_log_summary(const struct delivery *d, const struct attempt_list *al, int64_t now, char *out,
                          size_t len);
#endif
