/*
 * hookd's one JSON check: RFC 8259 text, UTF-8, strings as I-JSON has them
 * (RFC 7493 §2.1: escapes name scalar values; U+0000 refused), without
 * building a value. Used wherever JSON text comes from outside.
 */
#ifndef HOOKD_CORE_JSON_CHECK_H
#define HOOKD_CORE_JSON_CHECK_H
#include <stdbool.h>
#include <stddef.h>

/* Nesting of arrays and objects; deeper input is refused. As deep as jansson
 * parses (JSON_PARSER_MAX_DEPTH), so whatever the admin API accepted passes here. */
#define JSON_CHECK_MAX_DEPTH 2048

/* True when text[0..len) is one JSON value with optional whitespace around it. NUL bytes are refused. */
bool json_text_valid(const char *text, size_t len);
#endif
