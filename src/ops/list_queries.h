/*
 * The query parameters of every admin API list route, one table per route
 * (read by ops/fields.c), and the names their cursors are made for.
 */
#ifndef HOOKD_OPS_LIST_QUERIES_H
#define HOOKD_OPS_LIST_QUERIES_H
#include <stddef.h>
#include <stdint.h>

#include "ops/fields.h"

#define LIST_ENDPOINTS "endpoints"
#define LIST_EVENTS "events"
#define LIST_DELIVERIES "deliveries"
#define LIST_SOURCES "sources"
#define LIST_REJECTIONS "rejections"
#define LIST_INBOX "inbox"
#define LIST_MACHINES "machines"
#define LIST_REPLAYS "replays"
#define LIST_TOKENS "tokens"
#define LIST_ALERTS "alerts"

/* GET /v1/endpoints into a struct endpoint_filter. */
extern const struct query_param endpoint_list_query[];
extern const size_t endpoint_list_query_count;
/* GET /v1/events into a struct event_filter. */
extern const struct query_param event_list_query[];
extern const size_t event_list_query_count;
/* GET /v1/deliveries into a struct delivery_filter (set status to -1 first: absent means any). */
extern const struct query_param delivery_list_query[];
extern const size_t delivery_list_query_count;
/* GET /v1/sources into a struct source_filter. */
extern const struct query_param source_list_query[];
extern const size_t source_list_query_count;
/* GET /v1/sources/{name}/rejections into a struct rejection_filter. */
extern const struct query_param rejection_list_query[];
extern const size_t rejection_list_query_count;
/* GET /v1/inbox into a struct inbox_filter (set status to -1 first: absent means any). */
extern const struct query_param inbox_list_query[];
extern const size_t inbox_list_query_count;
extern const char *const inbox_status_words[]; /* enum inbox_status order */
/* GET /v1/machines into a struct machine_filter. */
extern const struct query_param machine_list_query[];
extern const size_t machine_list_query_count;
/* GET /v1/entities/{kind}/{id}/trace into a struct trace_query. */
struct trace_query { int order; /* 0: received, 1: version */ };
extern const struct query_param trace_query_params[];
extern const size_t trace_query_params_count;
/* GET /v1/audit into a struct audit_query. */
struct audit_query { const char *source; int64_t since, until; };
extern const struct query_param audit_query_params[];
extern const size_t audit_query_params_count;
/* GET /v1/replays into a struct replay_filter; GET /v1/tokens into a struct token_filter. */
extern const struct query_param replay_list_query[];
extern const size_t replay_list_query_count;
extern const struct query_param token_list_query[];
extern const size_t token_list_query_count;
/* GET /v1/summary into a struct summary_query; GET /v1/resources/{type}/{id}/sync into a struct
 * sync_query. GET /v1/endpoints/{id}/health and /v1/accounts/{account}/sync take no parameters. */
struct summary_query {
    const char *window; /* a duration from 1m to 24h (summary_window_ms); NULL: 1h */
};
struct sync_query {
    const char *account; /* only this account's events; NULL: any */
};
extern const struct query_param summary_query[];
extern const size_t summary_query_count;
/* GET /v1/stats into a struct stats_query. */
struct stats_query {
    const char *window;      /* as the summary's; NULL: 1h */
    const char *endpoint_id; /* the attempts of this endpoint only (no events or inbound counts); NULL: all */
};
extern const struct query_param stats_query[];
extern const size_t stats_query_count;
extern const struct query_param sync_query[];
extern const size_t sync_query_count;
#define SUMMARY_WINDOW_MIN_MS 60000
#define SUMMARY_WINDOW_MAX_MS (24 * 3600 * 1000LL)
/* The window's ms, or -1 when it is not a duration from SUMMARY_WINDOW_MIN_MS to _MAX_MS in whole minutes. */
int64_t summary_window_ms(const char *s);

/* The words of the status filter, in enum delivery_status order. */
extern const char *const delivery_status_words[];
/* GET /v1/alerts into a struct alert_filter (set status to -1 first: absent means any). */
extern const struct query_param alert_list_query[];
extern const size_t alert_list_query_count;
#endif
