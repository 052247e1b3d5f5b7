/*
 * One voice for "the store is unavailable" on the outbound path. During an
 * outage the relay and the dispatcher run into it from several places at once
 * (fan-out, claims, endpoint reloads, attempt records); they share one rate
 * limit (log_limited) instead of each logging it, and the first success
 * afterwards logs the recovery once.
 *
 *   outage_error   whether err means the store is unavailable (the connection is gone)
 *   outage_log     log one such failure, rate-limited across threads
 *   outage_over    the store answered again: log the recovery if an outage was logged
 */
#ifndef HOOKD_OUTBOUND_OUTAGE_H
#define HOOKD_OUTBOUND_OUTAGE_H
#include <stdbool.h>

bool outage_error(int err);
void outage_log(const char *part, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void outage_over(const char *part);
#endif
