/* SSRF guard: a table of addresses and whether an outbound webhook may connect to each. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cmocka.h>

#include "net/ssrf.h"

struct ssrf_case {
    const char *addr;
    bool allowed;
};

static const struct ssrf_case cases[] = {
    /* public IPv4 */
    {"93.184.216.34", true},
    {"8.8.8.8", true},
    {"1.1.1.1", true},
    {"100.63.255.255", true},  /* just below CGNAT */
    {"100.128.0.0", true},     /* just above CGNAT */
    {"172.15.255.255", true},  /* just below 172.16/12 */
    {"172.32.0.0", true},      /* just above 172.16/12 */
    {"192.167.255.255", true},
    {"192.169.0.0", true},
    {"198.17.255.255", true},
    {"198.20.0.0", true},
    {"223.255.255.255", true}, /* last unicast before multicast */
    {"11.0.0.1", true},
    {"126.255.255.255", true},
    {"128.0.0.1", true},
    /* refused IPv4 */
    {"0.0.0.0", false},
    {"0.1.2.3", false},
    {"127.0.0.1", false},
    {"127.255.255.254", false},
    {"10.0.0.1", false},
    {"10.255.255.255", false},
    {"172.16.0.1", false},
    {"172.31.255.255", false},
    {"192.168.1.1", false},
    {"169.254.169.254", false}, /* cloud metadata */
    {"100.64.0.1", false},
    {"100.127.255.255", false},
    {"192.0.0.1", false},
    {"192.0.2.1", false},
    {"198.18.0.1", false},
    {"198.19.255.255", false},
    {"198.51.100.7", false},
    {"203.0.113.9", false},
    {"224.0.0.1", false},
    {"239.255.255.250", false},
    {"240.0.0.1", false},
    {"255.255.255.255", false},
    /* public IPv6 */
    {"2606:4700:4700::1111", true},
    {"2001:4860:4860::8888", true},
    {"2a00:1450:4001:81b::200e", true},
    {"2001:200::1", true},            /* first block past 2001::/23 */
    {"64:ff9b::5db8:d822", true},     /* NAT64 of 93.184.216.34 */
    {"::ffff:93.184.216.34", true},   /* mapped public */
    {"2002:5db8:d822::1", true},      /* 6to4 of a public address */
    /* refused IPv6 */
    {"::", false},
    {"::1", false},
    {"::127.0.0.1", false},           /* IPv4-compatible (deprecated) */
    {"::8.8.8.8", false},
    {"fc00::1", false},
    {"fd12:3456:789a::1", false},
    {"fe80::1", false},
    {"febf:ffff::1", false},
    {"fec0::1", false},
    {"ff02::1", false},
    {"ff0e::1", false},
    {"100::1", false},
    {"2001:db8::1", false},
    {"2001::1", false},               /* Teredo */
    {"2001:1ff:ffff::1", false},
    {"3fff::1", false},
    {"::ffff:127.0.0.1", false},
    {"::ffff:10.1.2.3", false},
    {"::ffff:169.254.169.254", false},
    {"::ffff:0.0.0.0", false},
    {"64:ff9b::7f00:1", false},       /* NAT64 of 127.0.0.1 */
    {"64:ff9b::a00:1", false},        /* NAT64 of 10.0.0.1 */
    {"64:ff9b::c0a8:101", false},     /* NAT64 of 192.168.1.1 */
    {"64:ff9b:1::5db8:d822", false},  /* local-use NAT64 */
    {"2002:7f00:1::1", false},        /* 6to4 of 127.0.0.1 */
    {"2002:c0a8:101::1", false},      /* 6to4 of 192.168.1.1 */
    {"4000::1", false},               /* outside 2000::/3 */
};

static bool check(const char *text)
{
    struct sockaddr_in in4;
    struct sockaddr_in6 in6;

    memset(&in4, 0, sizeof in4);
    memset(&in6, 0, sizeof in6);
    if (inet_pton(AF_INET, text, &in4.sin_addr) == 1) {
        in4.sin_family = AF_INET;
        return ssrf_address_allowed((const struct sockaddr *)&in4);
    }
    assert_int_equal(inet_pton(AF_INET6, text, &in6.sin6_addr), 1);
    in6.sin6_family = AF_INET6;
    return ssrf_address_allowed((const struct sockaddr *)&in6);
}

static void test_address_table(void **state)
{
    (void)state;
    int wrong = 0;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool got = check(cases[i].addr);
        if (got != cases[i].allowed) {
            print_error("%s: expected %s, got %s\n", cases[i].addr, cases[i].allowed ? "allowed" : "refused",
                        got ? "allowed" : "refused");
            wrong++;
        }
    }
    assert_int_equal(wrong, 0);
}

static void test_other_families_refused(void **state)
{
    (void)state;
    struct sockaddr_un un;

    memset(&un, 0, sizeof un);
    un.sun_family = AF_UNIX;
    assert_false(ssrf_address_allowed((const struct sockaddr *)&un));
    assert_false(ssrf_address_allowed(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_address_table),
        cmocka_unit_test(test_other_families_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
