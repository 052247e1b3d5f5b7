/*
 * Where a source finds a field of a request (DESIGN §6, §12): "/data/id" is a
 * JSON Pointer into the body (core/json_pointer.h), "header:webhook-id" the
 * value of a request header (the name an HTTP token, RFC 9110 §5.6.2).
 *
 *   field_spec_parse     text → struct field_spec, strictly
 *   http_token_is_valid  an HTTP token (header names), bounded
 */
#ifndef HOOKD_CORE_FIELD_SPEC_H
#define HOOKD_CORE_FIELD_SPEC_H
#include <stdbool.h>
#include <stddef.h>

#include "core/json_pointer.h"

#define FIELD_SPEC_HEADER_PREFIX "header:"
#define FIELD_HEADER_NAME_MAX 64

enum field_spec_kind { FIELD_POINTER, FIELD_HEADER };

struct field_spec {
    enum field_spec_kind kind;
    /* FIELD_POINTER: the pointer as given; FIELD_HEADER: the header name (without "header:"). */
    char text[JSON_POINTER_MAX + 1];
};

/*
 * Parses spec into *out. Returns 0, or HOOKD_EINVAL with *problem (may be
 * NULL) set to a static sentence: neither "/…" nor "header:…", a malformed
 * pointer, or a header name that is not a token or is too long. The empty
 * pointer "" (the whole body) is refused here: no field is the whole body.
 */
__attribute__((warn_unused_result)) int field_spec_parse(const char *spec, struct field_spec *out,
                                                         const char **problem);

/* True when s[0..n) is a non-empty HTTP token of at most max bytes. */
bool http_token_is_valid(const char *s, size_t n, size_t max);
#endif
