/*
 * SSRF guard: decides whether an outbound request may connect to an address.
 * The HTTP engine (net/http_client.h) asks at connect time (after DNS), so a
 * name that resolves to a private address is refused however it was spelled.
 */
#ifndef HOOKD_NET_SSRF_H
#define HOOKD_NET_SSRF_H
#include <stdbool.h>
#include <sys/socket.h>

/*
 * True when sa is a public unicast IPv4 or IPv6 address. Refused: loopback,
 * private, link-local, CGNAT, multicast, broadcast, unspecified, reserved and
 * documentation ranges, IPv6 ULA, and the IPv4-mapped, IPv4-compatible, 6to4
 * and NAT64 forms of refused IPv4 addresses. Any other family is refused.
 */
bool ssrf_address_allowed(const struct sockaddr *sa);
#endif
