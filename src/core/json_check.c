/*
 * A JSON syntax check (RFC 8259): one pass, no allocation, nesting kept in a
 * fixed stack, so hostile input costs neither memory nor recursion. Strings
 * are checked for their escapes and control characters, not for their
 * encoding (the store's text input checks that).
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

/* At the opening quote; leaves the cursor after the closing one. */
static bool scan_string(struct cursor *c)
{
    c->p++;
    while (c->p < c->end) {
        unsigned char ch = *c->p++;
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
            if (c->end - c->p < 4)
                return false;
            for (int i = 0; i < 4; i++) {
                if (!is_hex(*c->p++))
                    return false;
            }
        } else if (!strchr("\"\\/bfnrt", ch) || ch == '\0') {
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
