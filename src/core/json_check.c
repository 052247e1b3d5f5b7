/*
 * hookd's one JSON check (RFC 8259 with the string rules of I-JSON, RFC 7493
 * §2.1): one pass, no allocation, nesting kept in a fixed stack, so hostile
 * input costs neither memory nor recursion. Every path that takes JSON text
 * from outside uses it: hookd_publish(), hookd_publish_pg() and the relay
 * (rows that applications insert with plain SQL).
 *
 * Beyond the grammar, text must be UTF-8 (no overlong forms, no encoded
 * surrogates, nothing above U+10FFFF) and escapes must name Unicode scalar
 * values other than U+0000 (a \uD800-\uDBFF escape must be followed by a
 * \uDC00-\uDFFF one). Those are the strings jansson reads back, so whatever
 * passes here the admin API can show and `hookd listen` can print.
 */
#include "core/json_check.h"

#include <string.h>

struct cursor {
    const unsigned char *p, *end;
};

static void skip_ws(struct cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static bool is_digit(unsigned char ch) { return ch >= '0' && ch <= '9'; }

static bool is_hex(unsigned char ch)
{
    return is_digit(ch) || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}

static int hex_value(unsigned char ch)
{
    if (is_digit(ch))
        return ch - '0';
    return (ch | 0x20) - 'a' + 10;
}

/* After "\u": four hex digits as a UTF-16 code unit, or -1. */
static long scan_code_unit(struct cursor *c)
{
    long unit = 0;

    if (c->end - c->p < 4)
        return -1;
    for (int i = 0; i < 4; i++) {
        if (!is_hex(*c->p))
            return -1;
        unit = unit * 16 + hex_value(*c->p++);
    }
    return unit;
}

/* After the backslash of "\u": a scalar value other than U+0000, a surrogate pair counting as one. */
static bool scan_unicode_escape(struct cursor *c)
{
    long unit = scan_code_unit(c);

    if (unit <= 0 || (unit >= 0xDC00 && unit <= 0xDFFF))
        return false; /* malformed, U+0000, or a low surrogate alone */
    if (unit < 0xD800 || unit > 0xDBFF)
        return true;
    if (c->end - c->p < 2 || c->p[0] != '\\' || c->p[1] != 'u')
        return false; /* a high surrogate alone */
    c->p += 2;
    unit = scan_code_unit(c);
    return unit >= 0xDC00 && unit <= 0xDFFF;
}

/* At the lead byte (>= 0x80) of a UTF-8 sequence: one well-formed scalar value (RFC 3629 §4). */
static bool scan_utf8(struct cursor *c)
{
    unsigned char lead = *c->p++;
    unsigned char lo = 0x80, hi = 0xBF; /* the range of the second byte */
    int more;

    if (lead >= 0xC2 && lead <= 0xDF) {
        more = 1;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        more = 2;
        lo = lead == 0xE0 ? 0xA0 : 0x80; /* E0 80..9F would be overlong */
        hi = lead == 0xED ? 0x9F : 0xBF; /* ED A0..BF would be a surrogate */
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        more = 3;
        lo = lead == 0xF0 ? 0x90 : 0x80; /* F0 80..8F would be overlong */
        hi = lead == 0xF4 ? 0x8F : 0xBF; /* F4 90.. would be beyond U+10FFFF */
    } else {
        return false; /* a continuation byte, an overlong lead (C0, C1) or beyond U+10FFFF */
    }
    if (c->end - c->p < more || c->p[0] < lo || c->p[0] > hi)
        return false;
    c->p++;
    for (int i = 1; i < more; i++, c->p++) {
        if (*c->p < 0x80 || *c->p > 0xBF)
            return false;
    }
    return true;
}

/* At the opening quote; leaves the cursor after the closing one. */
static bool scan_string(struct cursor *c)
{
    c->p++;
    while (c->p < c->end) {
        unsigned char ch = *c->p;
        if (ch >= 0x80) {
            if (!scan_utf8(c))
                return false;
            continue;
        }
        c->p++;
        if (ch == '"')
            return true;
        if (ch < 0x20)
            return false; /* control characters (NUL included) must be escaped */
        if (ch != '\\')
            continue;
        if (c->p >= c->end)
            return false;
        ch = *c->p++;
        if (ch == 'u') {
            if (!scan_unicode_escape(c))
                return false;
        } else if (ch == '\0' || !strchr("\"\\/bfnrt", ch)) {
            return false;
        }
    }
    return false;
}

/* Skips one or more digits; false when there is none. */
static bool scan_digits(struct cursor *c)
{
    const unsigned char *start = c->p;

    while (c->p < c->end && is_digit(*c->p))
        c->p++;
    return c->p > start;
}

/* -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)? */
static bool scan_number(struct cursor *c)
{
    if (*c->p == '-')
        c->p++;
    if (c->p >= c->end)
        return false;
    if (*c->p == '0')
        c->p++;
    else if (!scan_digits(c))
        return false;
    if (c->p < c->end && *c->p == '.') {
        c->p++;
        if (!scan_digits(c))
            return false;
    }
    if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
        c->p++;
        if (c->p < c->end && (*c->p == '+' || *c->p == '-'))
            c->p++;
        if (!scan_digits(c))
            return false;
    }
    return true;
}

static bool scan_word(struct cursor *c, const char *word)
{
    size_t n = strlen(word);

    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0)
        return false;
    c->p += n;
    return true;
}

/* A member name and its colon, with the whitespace around them. */
static bool scan_key(struct cursor *c)
{
    skip_ws(c);
    if (c->p >= c->end || *c->p != '"' || !scan_string(c))
        return false;
    skip_ws(c);
    if (c->p >= c->end || *c->p != ':')
        return false;
    c->p++;
    return true;
}

/* One scalar, or the opening of a container (pushed on stack). */
static bool scan_value_start(struct cursor *c, char *stack, int *depth, bool *opened)
{
    *opened = false;
    skip_ws(c);
    if (c->p >= c->end)
        return false;
    switch (*c->p) {
    case '{':
    case '[':
        if (*depth >= JSON_CHECK_MAX_DEPTH)
            return false;
        stack[(*depth)++] = (char)*c->p++;
        *opened = true;
        return true;
    case '"':
        return scan_string(c);
    case 't':
        return scan_word(c, "true");
    case 'f':
        return scan_word(c, "false");
    case 'n':
        return scan_word(c, "null");
    default:
        return (*c->p == '-' || is_digit(*c->p)) && scan_number(c);
    }
}

bool json_text_valid(const char *text, size_t len)
{
    struct cursor c = {(const unsigned char *)text, (const unsigned char *)text + len};
    char stack[JSON_CHECK_MAX_DEPTH];
    int depth = 0;
    bool opened;

    if (!text)
        return false;
    for (;;) {
        if (!scan_value_start(&c, stack, &depth, &opened))
            return false;
        if (opened) {
            /* An empty container closes at once; else its first member follows. */
            char close = stack[depth - 1] == '{' ? '}' : ']';
            skip_ws(&c);
            if (c.p < c.end && *c.p == close) {
                c.p++;
                depth--;
            } else {
                if (close == '}' && !scan_key(&c))
                    return false;
                continue;
            }
        }
        /* After a complete value: a separator, closings, or the end. */
        for (;;) {
            skip_ws(&c);
            if (depth == 0)
                return c.p == c.end;
            if (c.p >= c.end)
                return false;
            if (*c.p == ',') {
                c.p++;
                if (stack[depth - 1] == '{' && !scan_key(&c))
                    return false;
                break; /* the next value */
            }
            if (*c.p != (stack[depth - 1] == '{' ? '}' : ']'))
                return false;
            c.p++;
            depth--;
        }
    }
}
