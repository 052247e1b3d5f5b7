/*
 * Identifiers: PREFIX_ + 12 hex digits of unix milliseconds + 20 hex digits of
 * CSPRNG randomness, so ids sort by creation time ("evt_", "ep_", "dlv_").
 * The SQL default of hookd_outbox.id produces the same shape.
 */
#ifndef HOOKD_CORE_IDS_H
#define HOOKD_CORE_IDS_H
#include <stdbool.h>
#include <stddef.h>
#include "hookd.h"

#include <stdint.h>

void id_new(char out[HOOKD_ID_MAX], const char *prefix);
/* id_new, returning the unix milliseconds its 12 digits encode: the row's time
 * column takes that value, so a time window is a range of ids (store/stats_sql.h). */
int64_t id_new_time(char out[HOOKD_ID_MAX], const char *prefix);
/* True for ids a client may choose: 1..63 chars of [A-Za-z0-9_.:-]. */
bool id_is_valid(const char *id);
/* Fills buf with n CSPRNG bytes; aborts if the CSPRNG fails. */
void random_bytes(void *buf, size_t n);
#endif
