/*
 * Static custom headers of an endpoint (`headers` in its body): the rules a
 * name and a value keep, checked where the API takes them and again where
 * the store reads them, so nothing but a well-formed extra line reaches a
 * request, and never one of the headers hookd sets itself.
 *
 *   custom_header_problem   why NAME: VALUE cannot be a custom header, NULL when it can
 */
#ifndef HOOKD_CORE_CUSTOM_HEADERS_H
#define HOOKD_CORE_CUSTOM_HEADERS_H
#include <stddef.h>

#define CUSTOM_HEADERS_MAX 16      /* per endpoint */
#define CUSTOM_HEADER_NAME_MAX 64  /* bytes */
#define CUSTOM_HEADER_VALUE_MAX 1024
/* "Name: value" and its NUL. */
#define CUSTOM_HEADER_LINE_MAX (CUSTOM_HEADER_NAME_MAX + 2 + CUSTOM_HEADER_VALUE_MAX + 1)

/*
 * The name is an HTTP token (RFC 9110 §5.6.2) of at most 64 bytes, and not one
 * hookd sets or the framing owns (webhook-*, content-*, host, user-agent,
 * connection, transfer-encoding, …; any case); the value is 1 to 1024
 * bytes, without CR, LF, NUL or another control character but tab, and
 * neither starts nor ends with a blank. value_len is the value's length in
 * bytes (a NUL inside counts against it).
 */
const char *custom_header_problem(const char *name, const char *value, size_t value_len);
#endif
