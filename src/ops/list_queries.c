/*
 * What each list route takes in its query string: GET /v1/endpoints,
 * /v1/events, /v1/deliveries, /v1/sources, /v1/sources/{name}/rejections,
 * /v1/inbox, /v1/machines, /v1/entities/{kind}/{id}/trace, /v1/audit,
 * /v1/replays and /v1/tokens (DESIGN §8, §12). A parameter not in its
 * route's table is refused with 400, never ignored.
 */
#include "ops/list_queries.h"

#include <stdbool.h>

#include "core/duration.h"
#include "core/filter.h"
#include "core/ids.h"
#include "ops/alerts.h"
#include "ops/api_common.h"
#include "store/store.h"

static bool event_type_exact(const char *s) { return event_type_is_valid(s, false); }

const struct query_param endpoint_list_query[] = {
    {.name = "account", .type = QUERY_TEXT, .max_len = API_ACCOUNT_MAX,
     .offset = offsetof(struct endpoint_filter, account)},
    {.name = "cursor", .type = QUERY_CURSOR_ID, .list = LIST_ENDPOINTS,
     .offset = offsetof(struct endpoint_filter, before_id)},
    {.name = "limit", .type = QUERY_LIMIT, .offset = offsetof(struct endpoint_filter, limit)},
};
const size_t endpoint_list_query_count = sizeof endpoint_list_query / sizeof endpoint_list_query[0];

const struct query_param event_list_query[] = {
    {.name = "type", .type = QUERY_TEXT, .max_len = 128, .check = event_type_exact,
     .hint = "not a valid event type", .offset = offsetof(struct event_filter, type)},
    {.name = "account", .type = QUERY_TEXT, .max_len = API_ACCOUNT_MAX, .offset = offsetof(struct event_filter, account)},
    {.name = "since", .type = QUERY_TIME, .offset = offsetof(struct event_filter, since)},
    {.name = "until", .type = QUERY_TIME, .offset = offsetof(struct event_filter, until)},
    {.name = "cursor", .type = QUERY_CURSOR_SEQ, .list = LIST_EVENTS, .offset = offsetof(struct event_filter, before_seq)},
    {.name = "limit", .type = QUERY_LIMIT, .offset = offsetof(struct event_filter, limit)},
};
const size_t event_list_query_count = sizeof event_list_query / sizeof event_list_query[0];

const char *const delivery_status_words[] = {"pending", "retrying", "delivered", "dead", "superseded", "skipped", NULL};

const struct query_param delivery_list_query[] = {
    {.name = "status", .type = QUERY_ENUM, .values = delivery_status_words,
     .offset = offsetof(struct delivery_filter, status)},
    {.name = "endpoint_id", .type = QUERY_ID, .offset = offsetof(struct delivery_filter, endpoint_id)},
    {.name = "event_id", .type = QUERY_ID, .offset = offsetof(struct delivery_filter, event_id)},
    {.name = "account", .type = QUERY_TEXT, .max_len = API_ACCOUNT_MAX,
     .offset = offsetof(struct delivery_filter, account)},
    {.name = "since", .type = QUERY_TIME, .offset = offsetof(struct delivery_filter, since)},
    {.name = "until", .type = QUERY_TIME, .offset = offsetof(struct delivery_filter, until)},
    {.name = "cursor", .type = QUERY_CURSOR_ID, .list = LIST_DELIVERIES,
     .offset = offsetof(struct delivery_filter, before_id)},
    {.name = "limit", .type = QUERY_LIMIT, .offset = offsetof(struct delivery_filter, limit)},
};
const size_t delivery_list_query_count = sizeof delivery_list_query / sizeof delivery_list_query[0];

const struct query_param source_list_query[] = {
    {.name = "cursor", .type = QUERY_CURSOR_ID, .list = LIST_SOURCES,
     .offset = offsetof(struct source_filter, before_name)},
    {.name = "limit", .type = QUERY_LIMIT, .offset = offsetof(struct source_filter, limit)},
};
const size_t source_list_query_count = sizeof source_list_query / sizeof source_list_query[0];

const struct query_param rejection_list_query[] = {
    {.name = "cursor", .type = QUERY_CURSOR_SEQ, .list = LIST_REJECTIONS,
     .offset = offsetof(struct rejection_filter, before_id)},
    {.name = "limit", .type = QUERY_LIMIT, .offset = offsetof(struct rejection_filter, limit)},
};
const size_t rejection_list_query_count = sizeof rejection_list_query / sizeof rejection_list_query[0];

const char *const inbox_status_words[] = {"pending", "processed", "deferred", "quarantined", NULL};

static bool source_name(const char *s) { return id_is_valid(s); }

const struct query_param inbox_list_query[] = {
    {.name = "source", .type = QUERY_TEXT, .max_len = SOURCE_NAME_MAX - 1, .check = source_name,
     .hint = "not a source name", .offset = offsetof(struct inbox_filter, source)},
    {.name = "status", .type = QUERY_ENUM, .values = inbox_status_words, .offset = offsetof(struct inbox_filter, status)},
    {.name = "entity_kind", .type = QUERY_TEXT, .max_len = INBOX_TEXT_MAX - 1,
     .offset = offsetof(struct inbox_filter, entity_kind)},
    {.name = "entity_id", .type = QUERY_TEXT, .max_len = INBOX_TEXT_MAX - 1,
     .offset = offsetof(struct inbox_filter, entity_id)},
    {.name = "since", .type = QUERY_TIME, .offset = offsetof(struct inbox_filter, since)},
    {.name = "until", .type = QUERY_TIME, .offset = offsetof(struct inbox_filter, until)},
    {.name = "cursor", .type = QUERY_CURSOR_ID, .list = LIST_INBOX, .offset = offsetof(struct inbox_filter, before_id)},
    {.name = "limit", .type = QUERY_LIMIT, .offset = offsetof(struct inbox_filter, limit)},
};
const size_t inbox_list_query_count = sizeof inbox_list_query / sizeof inbox_list_query[0];

const struct query_param machine_list_query[] = {
    {.name = "cursor", .type = QUERY_CURSOR_ID, .list = LIST_MACHINES,
     .offset = offsetof(struct machine_filter, before_name)},
    {.name = "limit", .type = QUERY_LIMIT, .offset = offsetof(struct machine_filter, limit)},
};
const size_t machine_list_query_count = sizeof machine_list_query / sizeof machine_list_query[0];

static const char *const trace_orders[] = {"received", "version", NULL};

const struct query_param trace_query_params[] = {
    {.name = "order", .type = QUERY_ENUM, .values = trace_orders, .offset = offsetof(struct trace_query, order)},
};
const size_t trace_query_params_count = sizeof trace_query_params / sizeof trace_query_params[0];

const struct query_param audit_query_params[] = {
    {.name = "source", .type = QUERY_TEXT, .max_len = SOURCE_NAME_MAX - 1, .check = source_name,
     .hint = "not a source name", .offset = offsetof(struct audit_query, source)},
    {.name = "since", .type = QUERY_TIME, .offset = offsetof(struct audit_query, since)},
    {.name = "until", .type = QUERY_TIME, .offset = offsetof(struct audit_query, until)},
};
const size_t audit_query_params_count = sizeof audit_query_params / sizeof audit_query_params[0];

const struct query_param replay_list_query[] = {
    {.name = "account", .type = QUERY_TEXT, .max_len = API_ACCOUNT_MAX, .offset = offsetof(struct replay_filter, account)},
    {.name = "cursor", .type = QUERY_CURSOR_ID, .list = LIST_REPLAYS, .offset = offsetof(struct replay_filter, before_id)},
    {.name = "limit", .type = QUERY_LIMIT, .offset = offsetof(struct replay_filter, limit)},
};
const size_t replay_list_query_count = sizeof replay_list_query / sizeof replay_list_query[0];

const struct query_param token_list_query[] = {
    {.name = "account", .type = QUERY_TEXT, .max_len = API_ACCOUNT_MAX, .offset = offsetof(struct token_filter, account)},
    {.name = "cursor", .type = QUERY_CURSOR_ID, .list = LIST_TOKENS, .offset = offsetof(struct token_filter, before_id)},
    {.name = "limit", .type = QUERY_LIMIT, .offset = offsetof(struct token_filter, limit)},
};
const size_t token_list_query_count = sizeof token_list_query / sizeof token_list_query[0];

static const char *const alert_status_words[] = {"open", "resolved", NULL};

const struct query_param alert_list_query[] = {
    {.name = "status", .type = QUERY_ENUM, .values = alert_status_words, .offset = offsetof(struct alert_filter, status)},
    {.name = "rule", .type = QUERY_TEXT, .max_len = ALERT_RULE_MAX - 1, .check = alert_rule_known,
     .hint = "not an alert rule", .offset = offsetof(struct alert_filter, rule)},
    {.name = "cursor", .type = QUERY_CURSOR_ID, .list = LIST_ALERTS, .offset = offsetof(struct alert_filter, before_id)},
    {.name = "limit", .type = QUERY_LIMIT, .offset = offsetof(struct alert_filter, limit)},
};
const size_t alert_list_query_count = sizeof alert_list_query / sizeof alert_list_query[0];
int64_t summary_window_ms(const char *s)
{
    int64_t ms;

    if (s == NULL || duration_parse(s, &ms) != 0 || ms < SUMMARY_WINDOW_MIN_MS || ms > SUMMARY_WINDOW_MAX_MS ||
        ms % SUMMARY_WINDOW_MIN_MS != 0)
        return -1;
    return ms;
}

static bool summary_window_ok(const char *s) { return summary_window_ms(s) > 0; }

const struct query_param summary_query[] = {
    {.name = "window", .type = QUERY_TEXT, .max_len = 16, .check = summary_window_ok,
     .hint = "must be a duration in whole minutes from 1m to 24h, such as 15m or 1h",
     .offset = offsetof(struct summary_query, window)},
};
const size_t summary_query_count = sizeof summary_query / sizeof summary_query[0];

const struct query_param stats_query[] = {
    {.name = "window", .type = QUERY_TEXT, .max_len = 16, .check = summary_window_ok,
     .hint = "must be a duration in whole minutes from 1m to 24h, such as 15m or 1h",
     .offset = offsetof(struct stats_query, window)},
    {.name = "endpoint_id", .type = QUERY_ID, .offset = offsetof(struct stats_query, endpoint_id)},
};
const size_t stats_query_count = sizeof stats_query / sizeof stats_query[0];

const struct query_param sync_query[] = {
    {.name = "account", .type = QUERY_TEXT, .max_len = API_ACCOUNT_MAX, .offset = offsetof(struct sync_query, account)},
};
const size_t sync_query_count = sizeof sync_query / sizeof sync_query[0];
