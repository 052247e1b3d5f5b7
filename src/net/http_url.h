/*
 * The HTTP engine's URL reader: http and https URLs split into what a request
 * needs (scheme, host, port, request target), with everything a request line
 * or a Host header cannot carry refused.
 */
#ifndef HOOKD_NET_HTTP_URL_H
#define HOOKD_NET_HTTP_URL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_URL_HOST_MAX 256 /* a DNS name is at most 253 bytes */

/* http_url_parse's answers beside 0. */
#define HTTP_URL_UNSUPPORTED 1 /* a scheme other than http or https */

struct http_url {
    bool tls;                     /* https */
    char host[HTTP_URL_HOST_MAX]; /* lower case; an IPv6 literal without its brackets */
    bool host_is_ip;              /* an IPv4 or IPv6 literal */
    bool host_is_ipv6;
    uint16_t port;
    bool default_port;            /* none given, or the scheme's own: the Host header leaves it out */
    const char *target;           /* into the parsed string: path and query (NULL: "/") */
    size_t target_len;
};

/*
 * Splits url (borrowed: out->target points into it). Returns 0,
 * HTTP_URL_UNSUPPORTED (another scheme) or HOOKD_EINVAL (no scheme, userinfo,
 * no host, a bad port, or a byte a request line cannot carry: space, CTL,
 * non-ASCII). A fragment is dropped.
 */
__attribute__((warn_unused_result)) int http_url_parse(const char *url, struct http_url *out);
#endif
