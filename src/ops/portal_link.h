/*
 * The customer portal's link for an account token: <base>/portal/#token=<token>.
 * The token rides in the fragment, which browsers never send to a server.
 */
#ifndef HOOKD_OPS_PORTAL_LINK_H
#define HOOKD_OPS_PORTAL_LINK_H
#include <stdbool.h>
#include <stddef.h>

#include "config.h"

#define PORTAL_LINK_MAX 1024

/*
 * The link into out (cap bytes); false when it does not fit. The base is
 * [server] portal_url (a trailing "/" dropped), else http:// and the admin
 * listener's address, a wildcard host ("", 0.0.0.0, [::]) becoming this
 * machine's name. Never the request's Host header: the caller controls that.
 */
bool portal_link(const struct config *cfg, const char *token, char *out, size_t cap);
#endif
