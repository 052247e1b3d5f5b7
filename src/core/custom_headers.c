/*
 * The rules of an endpoint's static custom headers: tokens for names, no
 * line breaks or control characters in values, and none of the headers that
 * sign or frame the request.
 */
#include "core/custom_headers.h"

#include <stdbool.h>
#include <string.h>
#include <strings.h>

/* RFC 9110 tchar. */
static bool token_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Set by hookd, by the HTTP engine, or owned by the framing: a custom one would sign a lie or split a request. */
static bool reserved(const char *name)
{
    static const char *const exact[] = {"host", "user-agent", "connection", "keep-alive", "transfer-encoding",
                                        "te", "trailer", "upgrade", "expect", "accept-encoding"};
    static const char *const prefixes[] = {"webhook-", "content-", "proxy-"};

    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++) {
        if (strcasecmp(name, exact[i]) == 0)
            return true;
    }
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        if (strncasecmp(name, prefixes[i], strlen(prefixes[i])) == 0)
            return true;
    }
    return false;
}

const char *custom_header_problem(const char *name, const char *value, size_t value_len)
{
    size_t n = name != NULL ? strlen(name) : 0;

    if (n == 0 || n > CUSTOM_HEADER_NAME_MAX)
        return "a header name must be 1 to 64 characters";
    for (size_t i = 0; i < n; i++) {
        if (!token_char((unsigned char)name[i]))
            return "is not a valid header name (letters, digits and !#$%&'*+-.^_`|~ only)";
    }
    if (reserved(name))
        return "is set by hookd or the HTTP framing and cannot be set here";
    /* Empty is refused too: the HTTP engine (libcurl) reads "Name:" as "do not send Name". */
    if (value == NULL || value_len == 0 || value_len > CUSTOM_HEADER_VALUE_MAX)
        return "value must be a string of 1 to 1024 bytes";
    for (size_t i = 0; i < value_len; i++) {
        unsigned char c = (unsigned char)value[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return "value must not contain CR, LF, NUL or other control characters";
    }
    if (value_len > 0 && (value[0] == ' ' || value[0] == '\t' || value[value_len - 1] == ' ' ||
                          value[value_len - 1] == '\t'))
        return "value must not start or end with a blank";
    return NULL;
}
