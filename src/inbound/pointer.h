/*
 * A minimal JSON Pointer (RFC 6901) lookup for the receiver, private to
 * src/inbound until core/json_pointer.c (another branch) is merged: then
 * inbound_pointer_get(d, p, o) becomes json_pointer_get(d, p, o, NULL).
 */
#ifndef HOOKD_INBOUND_POINTER_H
#define HOOKD_INBOUND_POINTER_H
#include <jansson.h>

/* *out borrowed from doc. Returns 0, HOOKD_ENOTFOUND (absent, or a step meets a scalar) or HOOKD_EINVAL. */
__attribute__((warn_unused_result)) int inbound_pointer_get(const json_t *doc, const char *pointer, json_t **out);
#endif
