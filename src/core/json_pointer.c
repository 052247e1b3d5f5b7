/* RFC 6901 JSON Pointer evaluation over jansson, strict and bounded. */
#include "core/json_pointer.h"

#include <stdbool.h>
#include <string.h>

#include "hookd.h"

#define INDEX_MAX_DIGITS 9 /* below INT32_MAX: no overflow, and no array is that long */

/*
 * The next reference token of *p (which points at its leading '/'),
 * unescaped into tok; *p moves past it. Returns 0 or HOOKD_EINVAL.
 */
static int next_token(const char **p, char tok[JSON_POINTER_MAX + 1], size_t *tok_len, const char **problem)
{
    const char *s = *p + 1;
    size_t n = 0;

    for (; *s != '\0' && *s != '/'; s++) {
        char c = *s;
        if (c == '~') {
            if (s[1] == '0')
                c = '~';
            else if (s[1] == '1')
                c = '/';
            else {
                *problem = "'~' must be followed by 0 or 1";
                return HOOKD_EINVAL;
            }
            s++;
        }
        tok[n++] = c; /* the unescaped token is never longer than the text: bounded by the length check */
    }
    tok[n] = '\0';
    *tok_len = n;
    *p = s;
    return 0;
}

int json_pointer_check(const char *pointer, const char **problem)
{
    const char *why = NULL, *p = pointer;
    char tok[JSON_POINTER_MAX + 1];
    size_t len, depth = 0;
    int rc = HOOKD_EINVAL;

    if (pointer == NULL) {
        why = "missing";
        goto out;
    }
    if (strnlen(pointer, JSON_POINTER_MAX + 1) > JSON_POINTER_MAX) {
        why = "longer than 256 bytes";
        goto out;
    }
    if (*p != '\0' && *p != '/') {
        why = "a JSON Pointer is empty or starts with '/'";
        goto out;
    }
    while (*p == '/') {
        if (++depth > JSON_POINTER_DEPTH_MAX) {
            why = "more than 32 levels";
            goto out;
        }
        if (next_token(&p, tok, &len, &why) != 0)
            goto out;
    }
    rc = 0;
out:
    if (problem != NULL)
        *problem = why;
    return rc;
}

/* An array index: "0" or [1-9][0-9]{0,8}. */
static bool parse_index(const char *tok, size_t n, size_t *index)
{
    size_t v = 0;

    if (n == 0 || n > INDEX_MAX_DIGITS || (n > 1 && tok[0] == '0'))
        return false;
    for (size_t i = 0; i < n; i++) {
        if (tok[i] < '0' || tok[i] > '9')
            return false;
        v = v * 10 + (size_t)(tok[i] - '0');
    }
    *index = v;
    return true;
}

int json_pointer_get(const json_t *doc, const char *pointer, json_t **out, const char **problem)
{
    const char *why = NULL, *p = pointer;
    char tok[JSON_POINTER_MAX + 1];
    json_t *cur = (json_t *)doc; /* jansson's getters take non-const; nothing is modified */
    size_t len, index;
    int rc = json_pointer_check(pointer, &why);

    if (rc != 0)
        goto out;
    rc = HOOKD_EINVAL;
    if (doc == NULL || out == NULL) {
        why = "no document";
        goto out;
    }
    while (*p == '/') {
        if (next_token(&p, tok, &len, &why) != 0)
            goto out;
        if (json_is_object(cur)) {
            cur = json_object_getn(cur, tok, len);
            if (cur == NULL) {
                rc = HOOKD_ENOTFOUND;
                why = "no such member";
                goto out;
            }
        } else if (json_is_array(cur)) {
            if (len == 1 && tok[0] == '-') {
                why = "'-' (past the end of an array) names no element";
                goto out;
            }
            if (!parse_index(tok, len, &index)) {
                why = "an array index is decimal digits without leading zeros";
                goto out;
            }
            cur = json_array_get(cur, index);
            if (cur == NULL) {
                rc = HOOKD_ENOTFOUND;
                why = "array index out of range";
                goto out;
            }
        } else {
            rc = HOOKD_ENOTFOUND;
            why = "a step reaches a value that is neither an object nor an array";
            goto out;
        }
    }
    *out = cur;
    rc = 0;
out:
    if (problem != NULL)
        *problem = rc == 0 ? NULL : why;
    return rc;
}
