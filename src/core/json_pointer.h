/*
 * JSON Pointer (RFC 6901) over jansson values: "" is the whole document,
 * "/a/b" descends by member name or array index; "~1" is "/" and "~0" is "~"
 * in a name. Array indices are decimal without leading zeros; "-" (past the
 * end) is refused. Pointers are bounded in length and depth.
 *
 *   json_pointer_check  syntax only (for a source definition)
 *   json_pointer_get    the value a pointer names in a document
 */
#ifndef HOOKD_CORE_JSON_POINTER_H
#define HOOKD_CORE_JSON_POINTER_H
#include <jansson.h>

#define JSON_POINTER_MAX 256      /* bytes of pointer text */
#define JSON_POINTER_DEPTH_MAX 32 /* reference tokens */

/* Returns 0, or HOOKD_EINVAL with *problem (may be NULL) set to a static sentence. */
__attribute__((warn_unused_result)) int json_pointer_check(const char *pointer, const char **problem);

/*
 * Sets *out to the value pointer names in doc, borrowed from doc (valid while
 * doc is). Returns 0; HOOKD_ENOTFOUND when a member or index is absent or a
 * step meets a scalar; HOOKD_EINVAL when the pointer is malformed or an array
 * step is not an index ("-", leading zeros, not digits). *problem (may be
 * NULL) gets a static sentence on failure.
 */
__attribute__((warn_unused_result)) int json_pointer_get(const json_t *doc, const char *pointer, json_t **out,
                                                         const char **problem);
#endif
