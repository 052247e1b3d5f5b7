/*
 * Time-sortable identifiers (PREFIX + 12 hex digits of unix ms + 20 random hex
 * digits) and the CSPRNG every other module draws from.
 */
#include "core/ids.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "core/clock.h"

#define ID_RANDOM_BYTES 10 /* 20 hex digits */

void random_bytes(void *buf, size_t n)
{
    unsigned char *p = buf;

    /* RAND_bytes takes an int; feed large requests in chunks. */
    while (n > 0) {
        int chunk = n > INT_MAX ? INT_MAX : (int)n;
        if (RAND_bytes(p, chunk) != 1) {
            fputs("hookd: CSPRNG failure, aborting\n", stderr);
            abort();
        }
        p += chunk;
        n -= (size_t)chunk;
    }
}

/*
 * The prefix is taken as given ("evt_"); a prefix that lacks the trailing
 * underscore gets one, so "evt" and "evt_" produce the same shape. A prefix
 * too long to fit is truncated so the result always has its 32 digits.
 */
void id_new(char out[HOOKD_ID_MAX], const char *prefix)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char rnd[ID_RANDOM_BYTES];
    uint64_t ms = (uint64_t)clock_now_ms();
    size_t plen = prefix != NULL ? strlen(prefix) : 0;
    size_t max_prefix = HOOKD_ID_MAX - 1 - 32 - 1;
    size_t o = 0;

    if (plen > max_prefix)
        plen = max_prefix;
    memcpy(out, prefix != NULL ? prefix : "", plen);
    o = plen;
    if (plen > 0 && out[plen - 1] != '_')
        out[o++] = '_';
    for (int shift = 44; shift >= 0; shift -= 4)
        out[o++] = hex[(ms >> shift) & 0xf];
    random_bytes(rnd, sizeof rnd);
    for (size_t i = 0; i < sizeof rnd; i++) {
        out[o++] = hex[rnd[i] >> 4];
        out[o++] = hex[rnd[i] & 0xf];
    }
    out[o] = '\0';
}

static bool id_char_ok(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == ':' || c == '-';
}

bool id_is_valid(const char *id)
{
    size_t n = 0;

    if (id == NULL)
        return false;
    for (; id[n] != '\0'; n++) {
        if (n >= HOOKD_ID_MAX - 1 || !id_char_ok((unsigned char)id[n]))
            return false;
    }
    return n > 0;
}
