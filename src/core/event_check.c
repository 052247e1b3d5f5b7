/*
 * The rules of an outbox row's text fields (ids, types, accounts, resource
 * fields), answered as the reason a value breaks them, for error messages.
 */
#include "core/event_check.h"

#include <stdbool.h>
#include <string.h>

static bool is_control(unsigned char c) { return c < 0x20 || c == 0x7f; }

size_t utf8_seq(const unsigned char *s, size_t len)
{
    size_t n;
    unsigned cp;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        n = 2, cp = s[0] & 0x1f;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        n = 3, cp = s[0] & 0x0f;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        n = 4, cp = s[0] & 0x07;
    else
        return 0;
    if (len < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return n;
}

/* The reason for the first byte of s outside the set allowed (ok), or NULL. */
static const char *chars_problem(const char *s, size_t len, bool (*ok)(unsigned char), const char *set)
{
    const unsigned char *p = (const unsigned char *)s;
    const char *problem = NULL;

    for (size_t i = 0; i < len; i++) {
        /* Control characters first: they are the dangerous ones and name the row best. */
        if (p[i] == 0)
            return "contains a NUL byte";
        if (is_control(p[i]))
            return "contains control characters";
        if (problem == NULL && p[i] >= 0x80)
            problem = "contains non-ASCII characters";
        else if (problem == NULL && !ok(p[i]))
            problem = set;
    }
    return problem;
}

static bool id_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == ':' || c == '-';
}

static bool type_char(unsigned char c) { return id_char(c) && c != ':'; }

const char *event_id_problem(const char *s, size_t len)
{
    const char *p;

    if (s == NULL || len == 0)
        return "is empty";
    p = chars_problem(s, len, id_char, "contains characters other than A-Z a-z 0-9 _ . : -");
    if (p != NULL)
        return p;
    return len > EVENT_ID_LEN_MAX ? "is longer than 63 characters" : NULL;
}

const char *event_type_problem(const char *s, size_t len)
{
    const char *p;

    if (s == NULL || len == 0)
        return "is empty";
    p = chars_problem(s, len, type_char, "contains characters other than A-Z a-z 0-9 _ . -");
    if (p != NULL)
        return p;
    return len > EVENT_TYPE_LEN_MAX ? "is longer than 128 characters" : NULL;
}

const char *event_label_problem(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;

    if (s == NULL)
        return NULL;
    for (size_t i = 0; i < len;) {
        size_t n;
        if (p[i] == 0)
            return "contains a NUL byte";
        if (is_control(p[i]))
            return "contains control characters";
        n = utf8_seq(p + i, len - i);
        if (n == 0)
            return "is not valid UTF-8";
        i += n;
    }
    return len > EVENT_LABEL_LEN_MAX ? "is longer than 255 bytes" : NULL;
}
