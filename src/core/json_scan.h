/*
 * A quick look at a JSON text for the values at a few JSON Pointers, without
 * building a document: the receiver's fast path (a request body parsed by
 * jansson cost ~40,000 instructions, a sixth of an accept). It decides only
 * texts of a plain kind, for which jansson's json_loadb (JSON_DECODE_ANY)
 * would succeed and json_pointer_get would name the same values; anything
 * else (a \u escape of a surrogate or NUL, an exponent, a long number, an
 * escape inside a value or a key that matters, a step into an array, deep
 * nesting, bad bytes of any kind) is left undecided, for jansson to parse or
 * refuse with its own message.
 *
 *   json_scan  decided (the values found) or not
 */
#ifndef HOOKD_CORE_JSON_SCAN_H
#define HOOKD_CORE_JSON_SCAN_H
#include <stdbool.h>
#include <stddef.h>

#define JSON_SCAN_TARGETS_MAX 40 /* a source's locators: event id, type, entity id, version and 32 required */

enum json_scan_kind {
    JSON_SCAN_ABSENT,  /* no value there (json_pointer_get: HOOKD_ENOTFOUND) */
    JSON_SCAN_NULL,
    JSON_SCAN_INTEGER, /* text: its digits as jansson would print them */
    JSON_SCAN_STRING,  /* text: its bytes (no escapes, no NUL) */
    JSON_SCAN_OTHER,   /* true, false, a real, an object or an array */
};

struct json_scan_target {
    const char *pointer;      /* in: a JSON Pointer ("" is the whole text) */
    enum json_scan_kind kind; /* out */
    const char *text;         /* out, INTEGER and STRING: a span of the scanned text, not NUL-terminated */
    size_t len;
};

/*
 * true when text[0..len) is decided JSON and every target's kind (and span)
 * is set; false when it is left to jansson (nothing to trust in the targets).
 * At most JSON_SCAN_TARGETS_MAX targets.
 */
bool json_scan(const char *text, size_t len, struct json_scan_target *targets, size_t n);
#endif
