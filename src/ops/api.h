/*
 * Route tables of the two listeners. Handlers get the struct daemon * as ctx.
 *   admin: /v1/… (bearer token), one file per resource (api_endpoints.c, api_events.c, api_deliveries.c)
 *   public: /healthz (and /in/{source} later)
 */
#ifndef HOOKD_OPS_API_H
#define HOOKD_OPS_API_H
#include <stddef.h>
#include "net/http.h"

extern const struct http_route admin_routes[];
extern const size_t admin_routes_n;
extern const struct http_route public_routes[];
extern const size_t public_routes_n;
#endif
