/*
 * UTF-8 checks for bytes that come from outside (response snippets): whether
 * they are valid text, and where a snippet cut at a byte cap should end so
 * that it does not stop inside a character.
 */
#ifndef HOOKD_CORE_UTF8_H
#define HOOKD_CORE_UTF8_H
#include <stdbool.h>
#include <stddef.h>

/* Length of the longest prefix of p[0..n) that is well-formed UTF-8 (RFC 3629:
 * no overlongs, no surrogates, nothing above U+10FFFF). NUL bytes count as text. */
size_t utf8_valid_prefix(const void *p, size_t n);
static inline bool utf8_valid(const void *p, size_t n) { return utf8_valid_prefix(p, n) == n; }
/*
 * For text cut at a byte cap: n, or less when p[0..n) is valid UTF-8 but for a
 * character whose first bytes end it (at most 3 bytes are dropped). Bytes that
 * are not text anyway are left as they are.
 */
size_t utf8_cut(const void *p, size_t n);
#endif
