/* Standard base64 (RFC 4648 §4, padded). */
#ifndef HOOKD_CORE_BASE64_H
#define HOOKD_CORE_BASE64_H
#include <stddef.h>

/* Length of the encoding of n bytes, without NUL. */
size_t base64_encoded_len(size_t n);
/* Writes the encoding and a NUL to out (base64_encoded_len(n)+1 bytes). */
void base64_encode(const void *in, size_t n, char *out);
/* Decodes; returns bytes written, or -1 on bad input or if out_cap is too small. */
long base64_decode(const char *in, size_t n, void *out, size_t out_cap);
#endif
