/*
 * Route matching for the HTTP server: finds the route of a method and path in
 * a table of {method, pattern, handler} and captures the "{name}" segments.
 * Pure string work, no allocation.
 */
#ifndef HOOKD_NET_ROUTER_H
#define HOOKD_NET_ROUTER_H
#include <stddef.h>
#include "net/http.h"

#define ROUTE_MAX_PARAMS 8
#define ROUTE_PATH_MAX 1024

/* Captured values, NUL-terminated copies in buf; names point into the pattern. */
struct route_params {
    size_t n;
    struct {
        const char *name; /* not NUL-terminated: name_len bytes */
        size_t name_len;
        const char *value;
    } p[ROUTE_MAX_PARAMS];
    char buf[ROUTE_PATH_MAX];
};

enum route_result {
    ROUTE_FOUND,
    ROUTE_NOT_FOUND,
    ROUTE_METHOD_NOT_ALLOWED, /* the path matches, the method does not */
    ROUTE_PATH_TOO_LONG,
};

/*
 * Finds the first route whose method and pattern match. A HEAD request also
 * matches GET routes. On ROUTE_METHOD_NOT_ALLOWED, allow (if not NULL) receives
 * the methods the path accepts, comma-separated.
 */
enum route_result router_match(const struct http_route *routes, size_t n, const char *method, const char *path,
                               const struct http_route **found, struct route_params *params, char *allow,
                               size_t allow_len);
/* The value captured for name ("*" for the rest of a trailing "*"), or NULL. */
const char *route_param(const struct route_params *p, const char *name);
#endif
