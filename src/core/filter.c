/*
 * Event-type filters of endpoints: "*" (everything), "order.*" (any type under
 * "order."), or an exact type name.
 */
#include "core/filter.h"

#include <string.h>

#define EVENT_TYPE_MAX 128

bool event_type_matches(const char *pattern, const char *type)
{
    size_t plen;

    if (pattern == NULL || type == NULL)
        return false;
    if (strcmp(pattern, "*") == 0)
        return true;
    plen = strlen(pattern);
    if (plen >= 2 && pattern[plen - 1] == '*' && pattern[plen - 2] == '.') {
        /* "order.*": type starts with "order." and has something after it. */
        size_t prefix = plen - 1;
        return strncmp(pattern, type, prefix) == 0 && type[prefix] != '\0';
    }
    return strcmp(pattern, type) == 0;
}

/*
 * hookd's own operational events (hookd.alert.opened, …) go only to endpoints
 * that ask for them by a pattern that names them ("hookd.*",
 * "hookd.alert.opened"): an endpoint that takes every type ("*", or no
 * filter) takes every application event, not hookd's.
 */
bool event_type_matches_any(const char *const *patterns, size_t n, const char *type)
{
    bool operational = type != NULL && strncmp(type, "hookd.", 6) == 0;

    if (n == 0)
        return !operational;
    for (size_t i = 0; i < n; i++) {
        if (operational && strncmp(patterns[i], "hookd.", 6) != 0)
            continue;
        if (event_type_matches(patterns[i], type))
            return true;
    }
    return false;
}

static bool type_char_ok(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
}

bool event_type_is_valid(const char *type, bool allow_pattern)
{
    size_t n, body;

    if (type == NULL)
        return false;
    n = strnlen(type, EVENT_TYPE_MAX + 1);
    if (n == 0 || n > EVENT_TYPE_MAX)
        return false;
    if (allow_pattern && n == 1 && type[0] == '*')
        return true;
    body = n;
    if (allow_pattern && n >= 3 && type[n - 1] == '*' && type[n - 2] == '.')
        body = n - 2; /* "x.*" needs at least one character before ".*" */
    for (size_t i = 0; i < body; i++) {
        if (!type_char_ok((unsigned char)type[i]))
            return false;
    }
    return true;
}
