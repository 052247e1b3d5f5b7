/* A JSON syntax check (RFC 8259) without building a value: what a publish needs to refuse bad input early. */
#ifndef HOOKD_CORE_JSON_CHECK_H
#define HOOKD_CORE_JSON_CHECK_H
#include <stdbool.h>
#include <stddef.h>

#define JSON_CHECK_MAX_DEPTH 512 /* nesting of arrays and objects; deeper input is refused */

/* True when text[0..len) is one JSON value with optional whitespace around it. NUL bytes are refused. */
bool json_text_valid(const char *text, size_t len);
#endif
