/*
 * Growable byte buffer with a hard maximum. Every body, header and snippet
 * hookd holds goes through one of these, so no input can grow memory unbounded.
 */
#include "core/buf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hookd.h"

/* Before the first append, data points here (cap 0: not owned, never freed). */
static char buf_empty[1];

#define BUF_MIN_CAP 64

void buf_init(struct buf *b, size_t max)
{
    b->data = buf_empty;
    b->len = 0;
    b->cap = 0;
    b->max = max;
}

void buf_free(struct buf *b)
{
    if (b->cap > 0)
        free(b->data);
    b->data = buf_empty;
    b->len = 0;
    b->cap = 0;
}

void buf_reset(struct buf *b)
{
    b->len = 0;
    if (b->cap > 0)
        b->data[0] = '\0';
}

/* Makes room for extra more bytes plus the NUL, within max. */
static int buf_reserve(struct buf *b, size_t extra)
{
    size_t want, cap;
    char *p;

    if (extra > b->max || b->len > b->max - extra)
        return HOOKD_EINVAL;
    want = b->len + extra + 1;
    if (want <= b->cap)
        return 0;
    cap = b->cap < BUF_MIN_CAP ? BUF_MIN_CAP : b->cap;
    while (cap < want)
        cap = cap > SIZE_MAX / 2 ? want : cap * 2;
    if (cap > b->max + 1)
        cap = b->max + 1;
    p = realloc(b->cap > 0 ? b->data : NULL, cap);
    if (p == NULL)
        return HOOKD_ENOMEM;
    if (b->cap == 0)
        p[0] = '\0';
    b->data = p;
    b->cap = cap;
    return 0;
}

int buf_append(struct buf *b, const void *data, size_t n)
{
    int rc = buf_reserve(b, n);

    if (rc != 0)
        return rc;
    if (n > 0)
        memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int buf_puts(struct buf *b, const char *s) { return buf_append(b, s, strlen(s)); }

int buf_printf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    int n, rc;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return HOOKD_EINVAL;
    rc = buf_reserve(b, (size_t)n);
    if (rc != 0)
        return rc;
    va_start(ap, fmt);
    (void)vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

/*
 * Length of the well-formed UTF-8 sequence at s (1..4), or 0 when the bytes
 * are not one (overlong forms, surrogates and values past U+10FFFF included).
 */
static size_t utf8_sequence_len(const unsigned char *s)
{
    size_t need;
    unsigned char lo = 0x80, hi = 0xbf;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        need = 2;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        need = 3;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        need = 4;
    else
        return 0;
    if (s[0] == 0xe0)
        lo = 0xa0;
    else if (s[0] == 0xed)
        hi = 0x9f;
    else if (s[0] == 0xf0)
        lo = 0x90;
    else if (s[0] == 0xf4)
        hi = 0x8f;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < need; i++) {
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    }
    return need;
}

/*
 * RFC 8259 string: quote, backslash and control characters are escaped, valid
 * UTF-8 passes through, and a byte that is not valid UTF-8 becomes U+FFFD so
 * the output is always valid JSON. NULL is written as null. On failure (max
 * reached) b may hold part of the literal: callers discard the buffer.
 */
int buf_json_string(struct buf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    const unsigned char *run;
    char esc[8];
    int rc;

    if (s == NULL)
        return buf_puts(b, "null");
    rc = buf_append(b, "\"", 1);
    run = p;
    while (rc == 0 && *p != '\0') {
        size_t seq = utf8_sequence_len(p);
        const char *rep = NULL;
        size_t rep_len = 2;

        if (seq > 1) {
            p += seq;
            continue;
        }
        if (seq == 0) {
            rep = "\\ufffd";
            rep_len = 6;
        } else if (*p == '"') {
            rep = "\\\"";
        } else if (*p == '\\') {
            rep = "\\\\";
        } else if (*p == '\n') {
            rep = "\\n";
        } else if (*p == '\r') {
            rep = "\\r";
        } else if (*p == '\t') {
            rep = "\\t";
        } else if (*p < 0x20) {
            memcpy(esc, "\\u00", 4);
            esc[4] = hex[*p >> 4];
            esc[5] = hex[*p & 0xf];
            rep = esc;
            rep_len = 6;
        } else {
            p++;
            continue;
        }
        rc = buf_append(b, run, (size_t)(p - run));
        if (rc == 0)
            rc = buf_append(b, rep, rep_len);
        p++;
        run = p;
    }
    if (rc == 0)
        rc = buf_append(b, run, (size_t)(p - run));
    if (rc == 0)
        rc = buf_append(b, "\"", 1);
    return rc;
}

size_t i64_digits(int64_t v, char out[I64_DIGITS_MAX])
{
    char tmp[I64_DIGITS_MAX];
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    size_t n = 0, len = 0;

    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0)
        out[len++] = '-';
    while (n > 0)
        out[len++] = tmp[--n];
    out[len] = '\0';
    return len;
}

char *buf_steal(struct buf *b)
{
    char *p = b->data;

    if (b->cap == 0) {
        p = malloc(1);
        if (p == NULL) {
            fputs("hookd: out of memory\n", stderr);
            abort();
        }
        p[0] = '\0';
    }
    b->data = buf_empty;
    b->len = 0;
    b->cap = 0;
    return p;
}
