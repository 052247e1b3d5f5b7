/* JSON Pointer lookups for the receiver: "/a/b~1c/0", with "~0" and "~1" unescaped per token. */
#include "inbound/pointer.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hookd.h"

#define TOKEN_MAX 256
#define DEPTH_MAX 32

int inbound_pointer_get(const json_t *doc, const char *pointer, json_t **out)
{
    const json_t *cur = doc;
    const char *p = pointer;
    char token[TOKEN_MAX];
    int depth = 0;

    *out = NULL;
    if (!doc || !pointer || (pointer[0] != '\0' && pointer[0] != '/'))
        return HOOKD_EINVAL;
    while (*p == '/') {
        size_t n = 0;
        if (++depth > DEPTH_MAX)
            return HOOKD_EINVAL;
        for (p++; *p && *p != '/'; p++) {
            char c = *p;
            if (c == '~') {
                if (p[1] != '0' && p[1] != '1')
                    return HOOKD_EINVAL;
                c = p[1] == '0' ? '~' : '/';
                p++;
            }
            if (n + 1 >= sizeof token)
                return HOOKD_EINVAL;
            token[n++] = c;
        }
        token[n] = '\0';
        if (json_is_object(cur)) {
            cur = json_object_getn(cur, token, n);
        } else if (json_is_array(cur)) {
            char *end;
            unsigned long long i;
            if (n == 0 || !isdigit((unsigned char)token[0]) || (token[0] == '0' && n > 1))
                return HOOKD_EINVAL;
            errno = 0;
            i = strtoull(token, &end, 10);
            if (errno || *end)
                return HOOKD_EINVAL;
            cur = i < json_array_size(cur) ? json_array_get(cur, (size_t)i) : NULL;
        } else {
            cur = NULL;
        }
        if (!cur)
            return HOOKD_ENOTFOUND;
    }
    *out = (json_t *)cur;
    return 0;
}
