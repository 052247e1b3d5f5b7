/*
 * The query parameters of every admin API list route, one table per route
 * (read by ops/fields.c), and the names their cursors are made for.
 */
#ifndef HOOKD_OPS_LIST_QUERIES_H
#define HOOKD_OPS_LIST_QUERIES_H
#include <stddef.h>

#include "ops/fields.h"

#define LIST_ENDPOINTS "endpoints"
#define LIST_EVENTS "events"
#define LIST_DELIVERIES "deliveries"

/* GET /v1/endpoints into a struct endpoint_filter. */
extern const struct query_param endpoint_list_query[];
extern const size_t endpoint_list_query_count;
/* GET /v1/events into a struct event_filter. */
extern const struct query_param event_list_query[];
extern const size_t event_list_query_count;
/* GET /v1/deliveries into a struct delivery_filter (set status to -1 first: absent means any). */
extern const struct query_param delivery_list_query[];
extern const size_t delivery_list_query_count;
/* The words of the status filter, in enum delivery_status order. */
extern const char *const delivery_status_words[];
#endif
