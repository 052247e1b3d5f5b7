/*
 * List cursors: opaque, URL-safe text naming a position in one list. A cursor
 * carries its list's name in a check value, so one the server did not make
 * (typed, truncated, edited, or from another list) is refused, never taken
 * as the start or the end of the list. Not a secret: it only positions a
 * listing the bearer token already allows.
 */
#ifndef HOOKD_CORE_CURSOR_H
#define HOOKD_CORE_CURSOR_H
#include <stddef.h>

#define CURSOR_KEY_MAX 64   /* longest key, NUL included (an id, or a decimal sequence number) */
#define CURSOR_TEXT_MAX 112 /* longest cursor text, NUL included */

/* The cursor of position key in list ("events", "deliveries", …). Returns 0, or HOOKD_EINVAL for a key
 * that is empty, too long or not printable ASCII. */
__attribute__((warn_unused_result)) int cursor_encode(const char *list, const char *key, char out[CURSOR_TEXT_MAX]);
/* The key of a cursor that cursor_encode made for list. Returns 0, or HOOKD_EINVAL for anything else. */
__attribute__((warn_unused_result)) int cursor_decode(const char *list, const char *text, char key[CURSOR_KEY_MAX]);
#endif
