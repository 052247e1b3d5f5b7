/*
 * Admin API, the dashboard's figures (GET /v1/stats, DESIGN §12 "Stats"):
 * per-minute counts of events, inbound items and delivery attempts over a
 * window, with the queue by state, the oldest open work, the inbox by status
 * and the inbound refusals by reason. Every figure is cluster-wide, from the
 * store: index ranges of the window and the gauges the metrics read.
 */
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/duration.h"
#include "ops/api_common.h"
#include "ops/list_queries.h"

struct stats_read {
    struct stats_minute *minutes;
    size_t n;
    int64_t since, now;
    const char *endpoint_id; /* NULL: every endpoint, with the events and inbound counts */
    struct store_figures figures;
    struct rejection_count_list rejected;
};

/* One minute's counts, or the window's (o gets them); events and inbound null for one endpoint's. */
static json_t *counts_json(json_t *o, const struct stats_minute *m, bool all)
{
    if (!o)
        return NULL;
    json_object_set_new(o, "events", all ? json_integer(m->events) : json_null());
    json_object_set_new(o, "inbound", all ? json_integer(m->inbound) : json_null());
    json_object_set_new(o, "attempts", json_integer(m->attempts));
    json_object_set_new(o, "successes", json_integer(m->successes));
    json_object_set_new(o, "failures", json_integer(m->attempts - m->successes));
    return o;
}

static json_t *minutes_json(const struct stats_read *r, json_t **totals)
{
    json_t *list = json_array();
    struct stats_minute sum = {0};

    for (size_t i = 0; list && i < r->n; i++) {
        const struct stats_minute *m = &r->minutes[i];
        json_array_append_new(list, counts_json(json_pack("{s:o}", "at", api_json_time(r->since + (int64_t)i *
                                                                                                       HEALTH_MINUTE_MS)),
                                                m, r->endpoint_id == NULL));
        sum.events += m->events;
        sum.inbound += m->inbound;
        sum.attempts += m->attempts;
        sum.successes += m->successes;
    }
    *totals = counts_json(json_object(), &sum, r->endpoint_id == NULL);
    return list;
}

static json_t *queue_json(const struct store_figures *f)
{
    return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I}", "pending", (json_int_t)f->deliveries[DELIVERY_PENDING], "retrying",
                     (json_int_t)f->deliveries[DELIVERY_RETRYING], "in_flight", (json_int_t)f->leased, "dead",
                     (json_int_t)f->deliveries[DELIVERY_DEAD], "skipped", (json_int_t)f->deliveries[DELIVERY_SKIPPED],
                     "undispatched", (json_int_t)f->outbox_undispatched);
}

static json_t *rejected_json(const struct rejection_count_list *l)
{
    json_t *by = json_object();
    int64_t total = 0;

    for (size_t i = 0; by && i < l->n; i++) {
        json_object_set_new(by, l->items[i].reason, json_integer(l->items[i].count));
        total += l->items[i].count;
    }
    return json_pack("{s:I,s:o}", "total", (json_int_t)total, "by_reason", by);
}

static json_t *stats_json(struct stats_read *r, int64_t window)
{
    const struct store_figures *f = &r->figures;
    json_t *totals = NULL, *minutes = minutes_json(r, &totals), *j;
    char window_text[24];

    duration_format(window, window_text);
    j = json_pack("{s:s,s:o,s:o,s:o,s:I,s:o,s:o,s:o,s:o,s:{s:I,s:I,s:I},s:o}", "window", window_text, "endpoint_id",
                  api_json_str(r->endpoint_id), "since", api_json_time(r->since), "until", api_json_time(r->now), "step_ms", (json_int_t)HEALTH_MINUTE_MS,
                  "minutes", minutes, "totals", totals, "deliveries", queue_json(f), "oldest_open",
                  f->oldest_open_at ? json_pack("{s:o,s:I}", "created_at", api_json_time(f->oldest_open_at), "age_ms",
                                                (json_int_t)(r->now > f->oldest_open_at ? r->now - f->oldest_open_at : 0))
                                    : json_null(),
                  "inbox", "pending", (json_int_t)f->inbox[INBOX_PENDING], "deferred",
                  (json_int_t)f->inbox[INBOX_DEFERRED], "quarantined", (json_int_t)f->inbox[INBOX_QUARANTINED],
                  "rejected", rejected_json(&r->rejected));
    return j;
}

void api_stats(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *d = api_begin(req, res, ctx);
    struct stats_query query = {0};
    struct query_scratch scratch;
    struct stats_read r = {0};
    struct endpoint ep = {0};
    struct store *s;
    json_t *j = NULL;
    int64_t window;
    int rc;

    if (!d || !api_query_parse(req, res, stats_query, stats_query_count, &query, &scratch))
        return;
    window = query.window ? summary_window_ms(query.window) : 3600 * 1000LL;
    r.n = (size_t)(window / HEALTH_MINUTE_MS);
    r.now = clock_now_ms();
    r.since = r.now - r.now % HEALTH_MINUTE_MS - (int64_t)(r.n - 1) * HEALTH_MINUTE_MS;
    if (!(r.minutes = calloc(r.n, sizeof *r.minutes))) {
        http_reply_error(res, 503, "out_of_memory", "cannot read the figures now");
        return;
    }
    if (!(s = api_reader_get(d, res))) {
        free(r.minutes);
        return;
    }
    r.endpoint_id = query.endpoint_id;
    rc = query.endpoint_id ? store_endpoint_get(s, query.endpoint_id, &ep) : 0;
    if (rc == 0)
        rc = store_stats_minutes(s, r.since, r.endpoint_id, r.minutes, r.n);
    if (rc == 0)
        rc = store_figures(s, r.now, &r.figures);
    if (rc == 0)
        rc = store_stats_rejected(s, &r.rejected);
    api_reader_put(d, s, rc);
    if (rc == 0)
        j = stats_json(&r, window);
    if (rc == HOOKD_ENOTFOUND)
        http_reply_error(res, 404, "not_found", "no such endpoint");
    else if (rc != 0)
        api_reply_store_error(res, rc, "stats");
    else if (j)
        http_reply_json(res, 200, j);
    else
        http_reply_error(res, 500, "internal", "out of memory");
    rejection_count_list_free(&r.rejected);
    endpoint_free(&ep);
    free(r.minutes);
}
