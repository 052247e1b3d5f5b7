/*
 * The customer portal's link, from the configuration alone (ops/portal_link.h).
 */
#include "ops/portal_link.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* "http://HOST:PORT" of the admin listener; a wildcard host is this machine's name. */
static bool listener_base(const char *listen, char *out, size_t cap)
{
    const char *colon = strrchr(listen, ':');
    size_t host_len = colon ? (size_t)(colon - listen) : 0;
    char name[256] = "localhost";
    int n;

    if (!colon)
        return false;
    if (host_len == 0 || (host_len == 7 && memcmp(listen, "0.0.0.0", 7) == 0) ||
        (host_len == 4 && memcmp(listen, "[::]", 4) == 0)) {
        if (gethostname(name, sizeof name - 1) != 0 || name[0] == '\0')
            snprintf(name, sizeof name, "localhost");
        name[sizeof name - 1] = '\0';
        n = snprintf(out, cap, "http://%s%s", name, colon);
    } else {
        n = snprintf(out, cap, "http://%s", listen);
    }
    return n > 0 && (size_t)n < cap;
}

bool portal_link(const struct config *cfg, const char *token, char *out, size_t cap)
{
    char base[PORTAL_LINK_MAX];
    size_t len;
    int n;

    if (cfg->portal_url[0] != '\0') {
        n = snprintf(base, sizeof base, "%s", cfg->portal_url);
        if (n < 0 || (size_t)n >= sizeof base)
            return false;
    } else if (!listener_base(cfg->admin_listen, base, sizeof base)) {
        return false;
    }
    len = strlen(base);
    while (len > 0 && base[len - 1] == '/')
        base[--len] = '\0';
    n = snprintf(out, cap, "%s/portal/#token=%s", base, token);
    return n > 0 && (size_t)n < cap;
}
