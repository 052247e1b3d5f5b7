/* Field specs of a source: a JSON Pointer into the body, or "header:NAME". */
#include "core/field_spec.h"

#include <string.h>

#include "hookd.h"

/* tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA */
static bool is_tchar(unsigned char c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return true;
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

bool http_token_is_valid(const char *s, size_t n, size_t max)
{
    if (s == NULL || n == 0 || n > max)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!is_tchar((unsigned char)s[i]))
            return false;
    }
    return true;
}

int field_spec_parse(const char *spec, struct field_spec *out, const char **problem)
{
    size_t plen = strlen(FIELD_SPEC_HEADER_PREFIX), n;
    const char *why = NULL;
    int rc = HOOKD_EINVAL;

    if (spec == NULL || out == NULL) {
        why = "missing";
        goto out;
    }
    n = strnlen(spec, JSON_POINTER_MAX + 1);
    if (n > JSON_POINTER_MAX) {
        why = "longer than 256 bytes";
        goto out;
    }
    if (strncmp(spec, FIELD_SPEC_HEADER_PREFIX, plen) == 0) {
        if (!http_token_is_valid(spec + plen, n - plen, FIELD_HEADER_NAME_MAX)) {
            why = "the header name must be an HTTP token of 1 to 64 characters";
            goto out;
        }
        out->kind = FIELD_HEADER;
        memcpy(out->text, spec + plen, n - plen + 1);
        rc = 0;
    } else if (spec[0] == '/') {
        rc = json_pointer_check(spec, &why);
        if (rc != 0)
            goto out;
        out->kind = FIELD_POINTER;
        memcpy(out->text, spec, n + 1);
    } else {
        why = "must be a JSON Pointer (\"/data/id\") or \"header:NAME\"";
    }
out:
    if (problem != NULL)
        *problem = rc == 0 ? NULL : why;
    return rc;
}
