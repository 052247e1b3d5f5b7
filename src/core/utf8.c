/* UTF-8 validation and cutting on a character boundary (RFC 3629). */
#include "core/utf8.h"

#include <stdint.h>

/* Bytes of the sequence that starts with lead, 0 for a byte that cannot start one. */
static size_t seq_len(uint8_t lead)
{
    if (lead < 0x80)
        return 1;
    if (lead >= 0xC2 && lead <= 0xDF)
        return 2;
    if (lead >= 0xE0 && lead <= 0xEF)
        return 3;
    if (lead >= 0xF0 && lead <= 0xF4)
        return 4;
    return 0;
}

/* Whether b may follow lead as the sequence's second byte (the ranges of RFC 3629 §4). */
static bool second_ok(uint8_t lead, uint8_t b)
{
    if (lead == 0xE0)
        return b >= 0xA0 && b <= 0xBF;
    if (lead == 0xED)
        return b >= 0x80 && b <= 0x9F;
    if (lead == 0xF0)
        return b >= 0x90 && b <= 0xBF;
    if (lead == 0xF4)
        return b >= 0x80 && b <= 0x8F;
    return (b & 0xC0) == 0x80;
}

/* Bytes of a well-formed sequence at s (of avail bytes), 0 when there is none;
 * *partial tells a sequence cut short by the end from a malformed one. */
static size_t seq_at(const uint8_t *s, size_t avail, bool *partial)
{
    size_t len = seq_len(s[0]);

    *partial = false;
    if (len == 0)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if (i >= avail) {
            *partial = true;
            return 0;
        }
        if (i == 1 ? !second_ok(s[0], s[1]) : (s[i] & 0xC0) != 0x80)
            return 0;
    }
    return len;
}

size_t utf8_valid_prefix(const void *p, size_t n)
{
    const uint8_t *s = p;
    size_t i = 0;

    while (i < n) {
        bool partial;
        size_t len = s[i] < 0x80 ? 1 : seq_at(s + i, n - i, &partial);
        if (len == 0)
            break;
        i += len;
    }
    return i;
}

size_t utf8_cut(const void *p, size_t n)
{
    const uint8_t *s = p;
    size_t valid = utf8_valid_prefix(p, n);
    bool partial = false;

    if (valid == n || n - valid > 3)
        return n;
    (void)seq_at(s + valid, n - valid, &partial);
    return partial ? valid : n;
}
