/*
 * Standard base64 (RFC 4648 §4). The encoder always pads; the decoder also
 * accepts unpadded input, as the Standard Webhooks libraries do for secrets.
 */
#include "core/base64.h"

#include <stdint.h>

static const char b64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t base64_encoded_len(size_t n) { return (n + 2) / 3 * 4; }

void base64_encode(const void *in, size_t n, char *out)
{
    const unsigned char *p = in;
    size_t o = 0;

    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        size_t left = n - i;

        if (left > 1)
            v |= (uint32_t)p[i + 1] << 8;
        if (left > 2)
            v |= p[i + 2];
        out[o++] = b64_alphabet[(v >> 18) & 63];
        out[o++] = b64_alphabet[(v >> 12) & 63];
        out[o++] = left > 1 ? b64_alphabet[(v >> 6) & 63] : '=';
        out[o++] = left > 2 ? b64_alphabet[v & 63] : '=';
    }
    out[o] = '\0';
}

/* Value of a base64 digit, or -1. */
static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

long base64_decode(const char *in, size_t n, void *out, size_t out_cap)
{
    unsigned char *o = out;
    size_t pad = 0, digits, written = 0;
    uint32_t acc = 0;
    int nbits = 0;

    /* Up to two '=' at the end, and only where padding belongs. */
    while (pad < 2 && n - pad > 0 && in[n - pad - 1] == '=')
        pad++;
    digits = n - pad;
    if (pad > 0 && n % 4 != 0)
        return -1;
    if (digits % 4 == 1)
        return -1;
    for (size_t i = 0; i < digits; i++) {
        int v = b64_value((unsigned char)in[i]);
        if (v < 0)
            return -1;
        acc = (acc << 6) | (uint32_t)v;
        nbits += 6;
        if (nbits >= 8) {
            nbits -= 8;
            if (written >= out_cap)
                return -1;
            o[written++] = (unsigned char)(acc >> nbits);
            acc &= (1u << nbits) - 1;
        }
    }
    return (long)written;
}
