/*
 * SSRF guard: the address ranges an outbound request may never reach, as two
 * tables (IPv4, IPv6), checked by the HTTP engine against the address it
 * is about to connect to.
 */
#include "net/ssrf.h"

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct v4_range {
    uint32_t net; /* host byte order */
    int bits;
};

/* IPv4 ranges that are not public unicast (RFC 6890 and friends). */
static const struct v4_range v4_refused[] = {
    {0x00000000, 8},  /* 0.0.0.0/8 "this network", unspecified */
    {0x0a000000, 8},  /* 10.0.0.0/8 private */
    {0x64400000, 10}, /* 100.64.0.0/10 CGNAT */
    {0x7f000000, 8},  /* 127.0.0.0/8 loopback */
    {0xa9fe0000, 16}, /* 169.254.0.0/16 link-local (cloud metadata lives here) */
    {0xac100000, 12}, /* 172.16.0.0/12 private */
    {0xc0000000, 24}, /* 192.0.0.0/24 IETF protocol assignments */
    {0xc0000200, 24}, /* 192.0.2.0/24 documentation */
    {0xc0586300, 24}, /* 192.88.99.0/24 6to4 relay anycast */
    {0xc0a80000, 16}, /* 192.168.0.0/16 private */
    {0xc6120000, 15}, /* 198.18.0.0/15 benchmarking */
    {0xc6336400, 24}, /* 198.51.100.0/24 documentation */
    {0xcb007100, 24}, /* 203.0.113.0/24 documentation */
    {0xe0000000, 4},  /* 224.0.0.0/4 multicast */
    {0xf0000000, 4},  /* 240.0.0.0/4 reserved, and 255.255.255.255 broadcast */
};

static bool v4_allowed(uint32_t addr)
{
    for (size_t i = 0; i < sizeof v4_refused / sizeof v4_refused[0]; i++) {
        uint32_t mask = v4_refused[i].bits == 0 ? 0 : ~UINT32_C(0) << (32 - v4_refused[i].bits);
        if ((addr & mask) == v4_refused[i].net)
            return false;
    }
    return true;
}

static uint32_t v4_at(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

enum v6_action {
    V6_REFUSE,
    V6_ALLOW,
    V6_EMBEDDED_V4_AT_12, /* the last 4 bytes are an IPv4 address: judge that */
    V6_EMBEDDED_V4_AT_2,  /* 6to4: bytes 2..5 are the IPv4 address */
};

struct v6_range {
    uint8_t prefix[16];
    int bits;
    enum v6_action action;
};

/*
 * First match wins, so narrower ranges come first. Anything outside the
 * global unicast block 2000::/3 falls through to the default refusal: that
 * covers ::, ::1, IPv4-compatible ::/96, 100::/64, the local-use NAT64
 * 64:ff9b:1::/48, ULA fc00::/7, link-local fe80::/10, site-local fec0::/10
 * and multicast ff00::/8.
 */
static const struct v6_range v6_ranges[] = {
    {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, 96, V6_EMBEDDED_V4_AT_12}, /* ::ffff:0:0/96 IPv4-mapped */
    {{0x00, 0x64, 0xff, 0x9b}, 96, V6_EMBEDDED_V4_AT_12},                     /* 64:ff9b::/96 NAT64 */
    {{0x20, 0x02}, 16, V6_EMBEDDED_V4_AT_2},                                  /* 2002::/16 6to4 */
    {{0x20, 0x01, 0x0d, 0xb8}, 32, V6_REFUSE},                                /* 2001:db8::/32 documentation */
    {{0x20, 0x01}, 23, V6_REFUSE},                                            /* 2001::/23 IETF protocol assignments, Teredo */
    {{0x3f, 0xff}, 20, V6_REFUSE},                                            /* 3fff::/20 documentation */
    {{0x20}, 3, V6_ALLOW},                                                    /* 2000::/3 global unicast */
};

static bool v6_prefix_matches(const uint8_t *addr, const struct v6_range *r)
{
    int full = r->bits / 8, rest = r->bits % 8;

    if (memcmp(addr, r->prefix, (size_t)full) != 0)
        return false;
    if (rest == 0)
        return true;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (addr[full] & mask) == (r->prefix[full] & mask);
}

static bool v6_allowed(const uint8_t *addr)
{
    for (size_t i = 0; i < sizeof v6_ranges / sizeof v6_ranges[0]; i++) {
        if (!v6_prefix_matches(addr, &v6_ranges[i]))
            continue;
        switch (v6_ranges[i].action) {
        case V6_REFUSE:
            return false;
        case V6_ALLOW:
            return true;
        case V6_EMBEDDED_V4_AT_12:
            return v4_allowed(v4_at(addr + 12));
        case V6_EMBEDDED_V4_AT_2:
            return v4_allowed(v4_at(addr + 2));
        }
    }
    return false;
}

bool ssrf_address_allowed(const struct sockaddr *sa)
{
    if (sa == NULL)
        return false;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in4 = (const struct sockaddr_in *)(const void *)sa;
        return v4_allowed(ntohl(in4->sin_addr.s_addr));
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        return v6_allowed(in6->sin6_addr.s6_addr);
    }
    return false;
}
