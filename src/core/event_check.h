/*
 * The rules of an outbox row's text fields, one place for every path that
 * writes or reads them: the admin API, the C API, the SQL check on
 * hookd_outbox (schema/, which spells the same limits) and the relay, which
 * rejects a row that breaks them (a row written before the check existed).
 *
 *   event_id_problem / event_type_problem / event_label_problem
 *       why a value of len bytes breaks its rule ("contains control
 *       characters", …), or NULL when it keeps it
 */
#ifndef HOOKD_CORE_EVENT_CHECK_H
#define HOOKD_CORE_EVENT_CHECK_H
#include <stddef.h>

#include "hookd.h"

/* Limits in bytes. The SQL checks of schema/ spell them as literals (a
 * migration is never edited), so each has its own assert where it is used. */
#define EVENT_ID_LEN_MAX 63      /* HOOKD_ID_MAX - 1: what the webhook-id header carries, in full */
#define EVENT_TYPE_LEN_MAX 128   /* core/filter.h */
#define EVENT_LABEL_LEN_MAX 255  /* account, resource type, resource id */
_Static_assert(EVENT_ID_LEN_MAX == HOOKD_ID_MAX - 1, "an id fills an id buffer exactly");

/* Id: 1..63 bytes of A-Z a-z 0-9 _ . : - (core/ids.h id_is_valid). */
const char *event_id_problem(const char *s, size_t len);
/* Type: 1..128 bytes of A-Z a-z 0-9 _ . - (core/filter.h event_type_is_valid). */
const char *event_type_problem(const char *s, size_t len);
/* Account, resource type or id: at most 255 bytes of UTF-8 without control characters (C0, DEL). NULL is valid. */
const char *event_label_problem(const char *s, size_t len);
/* Length of the UTF-8 sequence at s[0..len) (len > 0; shortest form, no surrogate, at most U+10FFFF),
 * 0 when invalid. */
size_t utf8_seq(const unsigned char *s, size_t len);
#endif
