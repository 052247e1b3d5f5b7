/* The HTTP engine's URL reader (net/http_url.h). */
#include "net/http_url.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <strings.h>

#include "hookd.h"

static bool host_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_';
}

int http_url_parse(const char *url, struct http_url *out)
{
    const char *p, *auth, *auth_end, *host_end, *target_end;
    size_t scheme_len;

    memset(out, 0, sizeof *out);
    if (url == NULL)
        return HOOKD_EINVAL;
    for (p = url; *p != '\0'; p++) {
        unsigned char c = (unsigned char)*p;
        if (c <= 0x20 || c >= 0x7f)
            return HOOKD_EINVAL; /* space, CTL, non-ASCII: nothing a request line may carry */
    }
    p = strstr(url, "://");
    if (p == NULL || p == url)
        return HOOKD_EINVAL;
    scheme_len = (size_t)(p - url);
    if (scheme_len == 4 && strncasecmp(url, "http", 4) == 0)
        out->tls = false;
    else if (scheme_len == 5 && strncasecmp(url, "https", 5) == 0)
        out->tls = true;
    else
        return HTTP_URL_UNSUPPORTED;
    auth = p + 3;
    auth_end = auth + strcspn(auth, "/?#");
    if (memchr(auth, '@', (size_t)(auth_end - auth)) != NULL)
        return HOOKD_EINVAL; /* userinfo: credentials never go into a URL we send */
    if (*auth == '[') {
        const char *close = memchr(auth, ']', (size_t)(auth_end - auth));
        struct in6_addr a6;
        size_t n;
        if (close == NULL)
            return HOOKD_EINVAL;
        n = (size_t)(close - auth - 1);
        if (n == 0 || n >= sizeof out->host)
            return HOOKD_EINVAL;
        memcpy(out->host, auth + 1, n);
        out->host[n] = '\0';
        if (inet_pton(AF_INET6, out->host, &a6) != 1)
            return HOOKD_EINVAL;
        out->host_is_ip = out->host_is_ipv6 = true;
        host_end = close + 1;
        if (host_end != auth_end && *host_end != ':')
            return HOOKD_EINVAL;
    } else {
        struct in_addr a4;
        size_t n;
        host_end = memchr(auth, ':', (size_t)(auth_end - auth));
        if (host_end == NULL)
            host_end = auth_end;
        n = (size_t)(host_end - auth);
        if (n == 0 || n > 253)
            return HOOKD_EINVAL;
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)auth[i];
            if (!host_char(c))
                return HOOKD_EINVAL;
            out->host[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
        }
        out->host[n] = '\0';
        out->host_is_ip = inet_pton(AF_INET, out->host, &a4) == 1;
    }
    out->port = out->tls ? 443 : 80;
    out->default_port = true;
    if (host_end < auth_end) { /* ":port"; an empty one is the default */
        unsigned long port = 0;
        const char *d = host_end + 1;
        if (auth_end - d > 5)
            return HOOKD_EINVAL;
        for (; d < auth_end; d++) {
            if (*d < '0' || *d > '9')
                return HOOKD_EINVAL;
            port = port * 10 + (unsigned long)(*d - '0');
        }
        if (host_end + 1 < auth_end) {
            if (port == 0 || port > 65535)
                return HOOKD_EINVAL;
            out->port = (uint16_t)port;
            out->default_port = port == (out->tls ? 443u : 80u);
        }
    }
    target_end = auth_end + strcspn(auth_end, "#");
    if (target_end > auth_end) {
        out->target = auth_end;
        out->target_len = (size_t)(target_end - auth_end);
    }
    return 0;
}
