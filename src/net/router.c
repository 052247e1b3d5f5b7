/*
 * Route matching: patterns of literal segments, "{name}" captures and a final
 * "*" that takes the rest of the path. The first matching route wins.
 */
#include "net/router.h"

#include <stdbool.h>
#include <string.h>

struct capture {
    const char *name;
    size_t name_len;
    const char *value; /* into the request path */
    size_t value_len;
};

static size_t segment_len(const char *s)
{
    const char *slash = strchr(s, '/');
    return slash ? (size_t)(slash - s) : strlen(s);
}

/* Matches path against pattern; fills caps (at most ROUTE_MAX_PARAMS). */
static bool pattern_matches(const char *pat, const char *path, struct capture *caps, size_t *n_caps)
{
    *n_caps = 0;
    /* Each turn consumes one "/segment" of both; bounded by the pattern's length. */
    for (;;) {
        if (*pat == '\0' || *path == '\0')
            return *pat == '\0' && *path == '\0';
        if (*pat != '/' || *path != '/')
            return false;
        pat++;
        path++;
        size_t plen = segment_len(pat);
        size_t qlen = segment_len(path);
        if (plen == 1 && pat[0] == '*' && pat[1] == '\0') {
            if (*n_caps == ROUTE_MAX_PARAMS)
                return false;
            caps[(*n_caps)++] = (struct capture){"*", 1, path, strlen(path)};
            return true;
        }
        if (plen >= 2 && pat[0] == '{' && pat[plen - 1] == '}') {
            if (qlen == 0 || *n_caps == ROUTE_MAX_PARAMS)
                return false;
            caps[(*n_caps)++] = (struct capture){pat + 1, plen - 2, path, qlen};
        } else if (plen != qlen || memcmp(pat, path, plen) != 0) {
            return false;
        }
        pat += plen;
        path += qlen;
    }
}

static bool method_matches(const char *route_method, const char *method)
{
    if (strcmp(route_method, "*") == 0 || strcmp(route_method, method) == 0)
        return true;
    return strcmp(method, "HEAD") == 0 && strcmp(route_method, "GET") == 0;
}

static void allow_add(char *allow, size_t allow_len, const char *method)
{
    size_t used = strlen(allow);
    size_t mlen = strlen(method);
    const char *at = allow;

    /* Skip methods already listed. */
    while ((at = strstr(at, method)) != NULL) {
        bool starts = at == allow || at[-1] == ' ';
        bool ends = at[mlen] == '\0' || at[mlen] == ',';
        if (starts && ends)
            return;
        at += mlen;
    }
    if (used + mlen + 3 > allow_len)
        return;
    if (used > 0) {
        memcpy(allow + used, ", ", 2);
        used += 2;
    }
    memcpy(allow + used, method, mlen + 1);
}

enum route_result router_match(const struct http_route *routes, size_t n, const char *method, const char *path,
                               const struct http_route **found, struct route_params *params, char *allow,
                               size_t allow_len)
{
    struct capture caps[ROUTE_MAX_PARAMS];
    size_t n_caps = 0;
    bool path_known = false;

    *found = NULL;
    params->n = 0;
    if (allow && allow_len > 0)
        allow[0] = '\0';
    if (strlen(path) >= ROUTE_PATH_MAX)
        return ROUTE_PATH_TOO_LONG;
    for (size_t i = 0; i < n; i++) {
        if (!pattern_matches(routes[i].pattern, path, caps, &n_caps))
            continue;
        if (!method_matches(routes[i].method, method)) {
            path_known = true;
            if (allow && allow_len > 0)
                allow_add(allow, allow_len, routes[i].method);
            continue;
        }
        *found = &routes[i];
        /* Captures are disjoint pieces of a path shorter than buf, so they fit with their NULs. */
        char *out = params->buf;
        for (size_t c = 0; c < n_caps; c++) {
            memcpy(out, caps[c].value, caps[c].value_len);
            out[caps[c].value_len] = '\0';
            params->p[c].name = caps[c].name;
            params->p[c].name_len = caps[c].name_len;
            params->p[c].value = out;
            out += caps[c].value_len + 1;
        }
        params->n = n_caps;
        return ROUTE_FOUND;
    }
    return path_known ? ROUTE_METHOD_NOT_ALLOWED : ROUTE_NOT_FOUND;
}

const char *route_param(const struct route_params *p, const char *name)
{
    size_t len = strlen(name);
    for (size_t i = 0; i < p->n; i++) {
        if (p->p[i].name_len == len && memcmp(p->p[i].name, name, len) == 0)
            return p->p[i].value;
    }
    return NULL;
}
