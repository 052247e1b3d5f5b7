/*
 * Admin API, what support and customers read about delivery (DESIGN §8,
 * §12): one endpoint's health (GET /v1/endpoints/{id}/health), the summary of
 * failures and backlogs over a window (GET /v1/summary), and the customer's
 * sync status per endpoint, of an account (GET /v1/accounts/{account}/sync)
 * or of one resource (GET /v1/resources/{type}/{id}/sync). Figures come from
 * the store's health family: counters the attempt results write, and index
 * probes of the deliveries, so each answer costs the same on a store of a
 * million deliveries as on an empty one. The account of a sync view comes
 * from the path, so a token scoped to an account can be held to it there.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "core/clock.h"
#include "core/duration.h"
#include "core/ids.h"
#include "core/latency.h"
#include "core/utf8.h"
#include "ops/api_common.h"
#include "ops/list_queries.h"

#define SUMMARY_LIST_MAX 100 /* endpoints, accounts, backlogs listed per summary section */
#define CLUSTERS_MAX 20      /* status-code clusters shown per endpoint or account */

/* ---- shared pieces ---------------------------------------------------------------------- */

static json_t *error_json(const struct health_activity *a)
{
    if (a->last_error_at == 0)
        return json_null();
    return json_pack("{s:o,s:o,s:o,s:o}", "at", api_json_time(a->last_error_at), "status_code",
                     a->last_error_status_code > 0 ? json_integer(a->last_error_status_code) : json_null(),
                     "error_class", api_json_text(a->last_error_class), "error", api_json_text(a->last_error));
}

/* When the endpoint's next attempt happens: its earliest due delivery, but not before an open breaker's probe. */
static int64_t next_attempt(const struct endpoint *ep, const struct endpoint_state *st, const struct health_queue *q)
{
    if (!ep->enabled || q->next_attempt_at == 0)
        return 0;
    if (st->breaker == BREAKER_OPEN && st->next_probe_at > q->next_attempt_at)
        return st->next_probe_at;
    return q->next_attempt_at;
}

static json_t *window_json(const struct health_window *w)
{
    int64_t p50 = latency_quantile(w->latency, HEALTH_LATENCY_BUCKETS, 0.5);
    int64_t p99 = latency_quantile(w->latency, HEALTH_LATENCY_BUCKETS, 0.99);
    json_t *rate = w->attempts > 0 ? json_real(round(10000.0 * (double)w->successes / (double)w->attempts) / 10000.0)
                                   : json_null();

    return json_pack("{s:I,s:I,s:I,s:o,s:o,s:o}", "attempts", (json_int_t)w->attempts, "successes",
                     (json_int_t)w->successes, "failures", (json_int_t)(w->attempts - w->successes), "success_rate",
                     rate, "latency_p50_ms", p50 >= 0 ? json_integer(p50) : json_null(), "latency_p99_ms",
                     p99 >= 0 ? json_integer(p99) : json_null());
}

static int state_get(struct store *s, const char *id, struct endpoint_state *st)
{
    int rc = store_endpoint_state_get(s, id, st);

    if (rc == HOOKD_ENOTFOUND) { /* no row: closed, never failed */
        memset(st, 0, sizeof *st);
        snprintf(st->endpoint_id, sizeof st->endpoint_id, "%s", id);
        rc = 0;
    }
    return rc;
}

/* A label from the path or the query: what an outbox label may be (core/event_check.h), and UTF-8. */
static bool label_ok(const char *s) { return s && field_text_ok(s, API_ACCOUNT_MAX) && utf8_valid(s, strlen(s)); }

/* A route without query parameters still refuses any given (400 unknown_field). */
static bool no_query(struct http_request *req, struct http_response *res)
{
    struct query_scratch scratch;
    char none;

    return api_query_parse(req, res, NULL, 0, &none, &scratch);
}

/* ---- GET /v1/endpoints/{id}/health ----------------------------------------------------------- */

struct health_read {
    struct endpoint ep;
    struct endpoint_state st;
    struct health_queue q;
    struct health_activity act;
    struct health_window hour, day;
};

static int health_read(struct store *s, const char *id, int64_t now, struct health_read *h)
{
    int rc = store_endpoint_get(s, id, &h->ep);

    if (rc == 0)
        rc = state_get(s, id, &h->st);
    if (rc == 0)
        rc = store_health_queue(s, id, now, &h->q);
    if (rc == 0)
        rc = store_health_activity(s, id, &h->act);
    if (rc == 0)
        rc = store_health_window(s, id, now - 3600 * 1000LL, &h->hour);
    if (rc == 0)
        rc = store_health_window(s, id, now - 24 * 3600 * 1000LL, &h->day);
    return rc;
}

static json_t *oldest_json(const char *event_id, const char *endpoint_id, const char *delivery_id, int64_t at,
                           int64_t now)
{
    json_t *j;

    if (at == 0)
        return json_null();
    j = json_pack("{s:o,s:o,s:I}", "event_id", api_json_text(event_id), "created_at", api_json_time(at), "age_ms",
                  (json_int_t)(now > at ? now - at : 0));
    if (j && endpoint_id)
        json_object_set_new(j, "endpoint_id", api_json_text(endpoint_id));
    if (j && delivery_id)
        json_object_set_new(j, "delivery_id", api_json_text(delivery_id));
    return j;
}

void api_endpoints_health(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *d = api_begin(req, res, ctx);
    const char *id = http_param(req, "id");
    struct health_read h = {0};
    char what[HOOKD_ID_MAX + 16];
    int64_t now = clock_now_ms();
    struct store *s;
    json_t *j;
    int rc;

    if (!d || !no_query(req, res))
        return;
    snprintf(what, sizeof what, "endpoint %.63s", id ? id : "");
    if (!id || !id_is_valid(id)) {
        api_reply_store_error(res, HOOKD_ENOTFOUND, what);
        return;
    }
    if (!(s = api_reader_get(d, res)))
        return;
    rc = health_read(s, id, now, &h);
    api_reader_put(d, s, rc);
    if (rc != 0) {
        api_reply_store_error(res, rc, what);
        goto out;
    }
    j = json_pack("{s:o,s:o,s:o,s:b,s:o,s:o,s:o,s:o,s:o,s:{s:I,s:I,s:I,s:I,s:I},s:o,s:{s:o,s:o}}", "endpoint_id",
                  api_json_text(h.ep.id), "url", api_json_text(h.ep.url), "account", api_json_text(h.ep.account), "enabled",
                  h.ep.enabled, "disabled_reason", api_json_text(h.ep.disabled_reason), "last_attempt_at",
                  api_json_time(h.act.last_attempt_at), "last_success_at", api_json_time(h.act.last_success_at),
                  "last_error", error_json(&h.act), "next_attempt_at",
                  api_json_time(next_attempt(&h.ep, &h.st, &h.q)), "deliveries", "pending",
                  (json_int_t)h.q.pending, "retrying", (json_int_t)h.q.retrying, "in_flight",
                  (json_int_t)h.q.in_flight, "dead", (json_int_t)h.q.dead, "skipped", (json_int_t)h.q.skipped,
                  "oldest_undelivered", oldest_json(h.q.oldest_event_id, NULL, NULL, h.q.oldest_open_at, now),
                  "windows", "1h", window_json(&h.hour), "24h", window_json(&h.day));
    j = api_endpoint_with_breaker(j, &h.st);
    if (j)
        http_reply_json(res, 200, j);
    else
        http_reply_error(res, 500, "internal", "out of memory");
out:
    endpoint_free(&h.ep);
    health_activity_free(&h.act);
}

/* ---- GET /v1/summary ------------------------------------------------------------------------ */

/* One endpoint's or account's failures with their clusters, while the summary is built. */
struct failure_group {
    const char *key;  /* endpoint id or account (borrowed from the failure list); NULL: no account */
    bool by_account;
    int64_t failures;
    json_t *clusters; /* [{"status_code", "error_class", "count"}], most first once sorted */
};

static struct failure_group *group_find(struct failure_group *g, size_t *n, const char *key, bool by_account)
{
    for (size_t i = 0; i < *n; i++) {
        if (g[i].by_account == by_account &&
            ((g[i].key == NULL && key == NULL) || (g[i].key && key && strcmp(g[i].key, key) == 0)))
            return &g[i];
    }
    g[*n] = (struct failure_group){.key = key, .by_account = by_account, .clusters = json_array()};
    return &g[(*n)++];
}

/* Adds count to the cluster (status_code, error_class) of the group. */
static void cluster_add(struct failure_group *g, const struct health_failure *f)
{
    size_t i;
    json_t *c;

    g->failures += f->count;
    json_array_foreach(g->clusters, i, c)
    {
        json_t *code = json_object_get(c, "status_code"), *cls = json_object_get(c, "error_class");
        if ((int)json_integer_value(code) == f->status_code &&
            ((json_is_null(cls) && f->error_class == NULL) ||
             (json_is_string(cls) && f->error_class && strcmp(json_string_value(cls), f->error_class) == 0))) {
            json_object_set_new(c, "count", json_integer(json_integer_value(json_object_get(c, "count")) + f->count));
            return;
        }
    }
    json_array_append_new(g->clusters,
                          json_pack("{s:o,s:o,s:I}", "status_code",
                                    f->status_code > 0 ? json_integer(f->status_code) : json_null(), "error_class",
                                    api_json_text(f->error_class), "count", (json_int_t)f->count));
}

static int cluster_cmp(const void *x, const void *y)
{
    json_int_t a = json_integer_value(json_object_get(*(json_t *const *)x, "count"));
    json_int_t b = json_integer_value(json_object_get(*(json_t *const *)y, "count"));

    return (a < b) - (a > b);
}

/* The group's clusters, most first, at most CLUSTERS_MAX (a new reference). */
static json_t *clusters_sorted(const struct failure_group *g)
{
    size_t n = json_array_size(g->clusters);
    json_t **items = malloc((n > 0 ? n : 1) * sizeof *items), *out = json_array();

    for (size_t i = 0; items && i < n; i++)
        items[i] = json_array_get(g->clusters, i);
    if (items)
        qsort(items, n, sizeof *items, cluster_cmp);
    for (size_t i = 0; items && out && i < n && i < CLUSTERS_MAX; i++)
        json_array_append(out, items[i]);
    free(items);
    return out;
}

static int group_cmp(const void *x, const void *y)
{
    const struct failure_group *a = x, *b = y;

    return (a->failures < b->failures) - (a->failures > b->failures);
}

static const struct health_window *window_of(const struct health_window_list *w, const char *endpoint_id)
{
    for (size_t i = 0; i < w->n; i++) {
        if (strcmp(w->items[i].endpoint_id, endpoint_id) == 0)
            return &w->items[i];
    }
    return NULL;
}

/* The endpoint's url, or null when it is gone (figures of a deleted endpoint age out). */
static json_t *endpoint_url(struct store *s, const char *id)
{
    struct endpoint ep = {0};
    json_t *url = store_endpoint_get(s, id, &ep) == 0 ? api_json_text(ep.url) : json_null();

    endpoint_free(&ep);
    return url;
}

struct summary_build {
    struct store *s;
    int64_t now, since;
    struct health_window_list windows;
    struct health_failure_list failures;
    struct health_oldest oldest;
    struct failure_group *groups;
    size_t n_groups;
};

static json_t *failures_json(struct summary_build *b, bool by_account)
{
    json_t *arr = json_array();
    size_t shown = 0;

    for (size_t i = 0; arr && i < b->n_groups && shown < SUMMARY_LIST_MAX; i++) {
        const struct failure_group *g = &b->groups[i];
        json_t *item;
        if (g->by_account != by_account)
            continue;
        shown++;
        if (by_account) {
            item = json_pack("{s:o,s:I,s:o}", "account", api_json_text(g->key), "failures", (json_int_t)g->failures,
                             "clusters", clusters_sorted(g));
        } else {
            const struct health_window *w = window_of(&b->windows, g->key);
            item = json_pack("{s:o,s:o,s:I,s:I,s:I,s:o}", "endpoint_id", api_json_text(g->key), "url", endpoint_url(b->s, g->key),
                             "attempts", (json_int_t)(w ? w->attempts : g->failures), "successes",
                             (json_int_t)(w ? w->successes : 0), "failures", (json_int_t)g->failures, "clusters",
                             clusters_sorted(g));
        }
        json_array_append_new(arr, item);
    }
    return arr;
}

/*
 * Endpoints whose retry backlog grew over the window: retrying now, against
 * now minus the deliveries that became retrying in the window plus those that
 * stopped being it. Only endpoints with such movement can have grown.
 */
static int growing_json(struct summary_build *b, json_t *arr)
{
    size_t shown = 0;

    for (size_t i = 0; i < b->windows.n && shown < SUMMARY_LIST_MAX; i++) {
        const struct health_window *w = &b->windows.items[i];
        struct health_queue q;
        int64_t before;
        int rc;
        if (w->retries_started <= w->retries_ended)
            continue;
        rc = store_health_queue(b->s, w->endpoint_id, b->now, &q);
        if (rc == HOOKD_ENOTFOUND)
            continue;
        if (rc != 0)
            return rc;
        before = q.retrying - (w->retries_started - w->retries_ended);
        if (before < 0)
            before = 0;
        if (q.retrying <= before)
            continue;
        shown++;
        json_array_append_new(arr, json_pack("{s:o,s:o,s:I,s:I,s:I,s:I,s:I}", "endpoint_id", api_json_text(w->endpoint_id), "url",
                                             endpoint_url(b->s, w->endpoint_id), "retrying", (json_int_t)q.retrying,
                                             "retrying_window_ago", (json_int_t)before, "growth",
                                             (json_int_t)(q.retrying - before), "retries_started",
                                             (json_int_t)w->retries_started, "retries_ended",
                                             (json_int_t)w->retries_ended));
    }
    return 0;
}

/* Endpoints that had attempts in the window and not one success. */
static int no_success_json(struct summary_build *b, json_t *arr)
{
    size_t shown = 0;

    for (size_t i = 0; i < b->windows.n && shown < SUMMARY_LIST_MAX; i++) {
        const struct health_window *w = &b->windows.items[i];
        struct health_activity a;
        int rc;
        if (w->attempts == 0 || w->successes > 0)
            continue;
        rc = store_health_activity(b->s, w->endpoint_id, &a);
        if (rc != 0)
            return rc;
        shown++;
        json_array_append_new(arr, json_pack("{s:o,s:o,s:I,s:o,s:o}", "endpoint_id", api_json_text(w->endpoint_id), "url",
                                             endpoint_url(b->s, w->endpoint_id), "attempts", (json_int_t)w->attempts,
                                             "last_success_at", api_json_time(a.last_success_at), "last_error",
                                             error_json(&a)));
        health_activity_free(&a);
    }
    return 0;
}

static void summary_free(struct summary_build *b)
{
    for (size_t i = 0; i < b->n_groups; i++)
        json_decref(b->groups[i].clusters);
    free(b->groups);
    health_window_list_free(&b->windows);
    health_failure_list_free(&b->failures);
}

void api_summary(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *d = api_begin(req, res, ctx);
    struct summary_query query = {0};
    struct summary_build b = {0};
    struct query_scratch scratch;
    json_t *j = NULL, *growing = NULL, *silent = NULL;
    int64_t window, attempts = 0, failures = 0;
    char window_text[24];
    int rc;

    if (!d || !api_query_parse(req, res, summary_query, summary_query_count, &query, &scratch))
        return;
    window = query.window ? summary_window_ms(query.window) : 3600 * 1000LL;
    b.now = clock_now_ms();
    b.since = b.now - window;
    if (!(b.s = api_reader_get(d, res)))
        return;
    rc = store_health_summary(b.s, b.since, &b.windows, &b.failures);
    if (rc == 0)
        rc = store_health_oldest(b.s, &b.oldest);
    if (rc == 0 && !(b.groups = calloc(2 * b.failures.n + 1, sizeof *b.groups)))
        rc = HOOKD_ENOMEM;
    for (size_t i = 0; rc == 0 && i < b.failures.n; i++) {
        const struct health_failure *f = &b.failures.items[i];
        cluster_add(group_find(b.groups, &b.n_groups, f->endpoint_id, false), f);
        cluster_add(group_find(b.groups, &b.n_groups, f->account, true), f);
    }
    if (rc == 0)
        qsort(b.groups, b.n_groups, sizeof *b.groups, group_cmp);
    for (size_t i = 0; i < b.windows.n; i++) {
        attempts += b.windows.items[i].attempts;
        failures += b.windows.items[i].attempts - b.windows.items[i].successes;
    }
    growing = json_array();
    silent = json_array();
    if (rc == 0)
        rc = growing_json(&b, growing);
    if (rc == 0)
        rc = no_success_json(&b, silent);
    if (rc == 0) {
        duration_format(window, window_text);
        j = json_pack("{s:s,s:o,s:o,s:I,s:I,s:o,s:o,s:O,s:O,s:o}", "window", window_text, "since",
                      api_json_time(b.since), "until", api_json_time(b.now), "attempts", (json_int_t)attempts,
                      "failures", (json_int_t)failures, "failures_by_endpoint", failures_json(&b, false),
                      "failures_by_account", failures_json(&b, true), "growing_backlogs", growing, "no_success",
                      silent, "oldest_undelivered",
                      oldest_json(b.oldest.event_id, b.oldest.endpoint_id, b.oldest.delivery_id, b.oldest.created_at,
                                  b.now));
    }
    api_reader_put(d, b.s, rc);
    if (rc != 0)
        api_reply_store_error(res, rc, "summary");
    else if (j)
        http_reply_json(res, 200, j);
    else
        http_reply_error(res, 500, "internal", "out of memory");
    json_decref(growing);
    json_decref(silent);
    summary_free(&b);
}

/* ---- sync status ---------------------------------------------------------------------------- */

/* The customer's words for a delivery's state (DESIGN §5: Queued / Sent / Failed, and retrying). */
static const char *sync_word(enum delivery_status st)
{
    switch (st) {
    case DELIVERY_DELIVERED:
    case DELIVERY_SUPERSEDED:
        return "synced";
    case DELIVERY_PENDING:
        return "pending";
    case DELIVERY_RETRYING:
        return "retrying";
    default:
        return "failed";
    }
}

/* Worse of two words: failed > retrying > pending > synced. */
static const char *sync_worse(const char *a, const char *b)
{
    static const char *const order[] = {"synced", "pending", "retrying", "failed"};
    int ra = 0, rb = 0;

    for (int i = 0; i < 4; i++) {
        ra = strcmp(a, order[i]) == 0 ? i : ra;
        rb = strcmp(b, order[i]) == 0 ? i : rb;
    }
    return ra >= rb ? a : b;
}

/* One endpoint's sync line: the words, the times, no internals (no leases, nodes or tokens). */
static json_t *sync_endpoint_json(const struct endpoint *ep, json_t *fields)
{
    json_t *j = json_pack("{s:o,s:o,s:o}", "endpoint_id", api_json_text(ep->id), "url", api_json_text(ep->url), "description",
                          api_json_text(ep->description));

    if (j && fields && json_object_update(j, fields) != 0) {
        json_decref(j);
        j = NULL;
    }
    json_decref(fields);
    return j;
}

static json_t *sync_reply(const char *status, bool delayed, int64_t warn_ms, json_t *endpoints)
{
    char warn[24];

    duration_format(warn_ms, warn);
    return json_pack("{s:s,s:b,s:s,s:o}", "status", status, "delayed", delayed, "sync_warn_after", warn,
                     "endpoints", endpoints);
}

void api_accounts_sync(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *d = api_begin(req, res, ctx);
    const char *account = http_param(req, "account");
    struct endpoint_filter f = {.account = account, .limit = STORE_LIST_MAX};
    struct endpoint_list eps = {0};
    const char *overall = "synced";
    bool any_delayed = false;
    int64_t now = clock_now_ms(), warn = d ? d->cfg->sync_warn_after_ms : 0;
    json_t *arr = NULL, *j;
    struct store *s;
    int rc;

    if (!d || !no_query(req, res))
        return;
    if (!label_ok(account) || account[0] == '\0') {
        http_reply_error(res, 400, "invalid_field", "account: 1 to %d bytes of UTF-8 text without control characters",
                         API_ACCOUNT_MAX);
        return;
    }
    if (!api_scope_account(req, res, &account)) /* an account token: its own account only (403) */
        return;
    if (!(s = api_reader_get(d, res)))
        return;
    rc = store_endpoint_list(s, &f, &eps);
    arr = json_array();
    for (size_t i = 0; rc == 0 && i < eps.n; i++) {
        const struct endpoint *ep = &eps.items[i];
        struct health_queue q;
        struct health_activity a;
        struct endpoint_state st;
        const char *word;
        bool delayed;
        rc = store_health_queue(s, ep->id, now, &q);
        if (rc == 0)
            rc = state_get(s, ep->id, &st);
        if (rc == 0)
            rc = store_health_activity(s, ep->id, &a);
        if (rc != 0)
            break;
        word = q.dead + q.skipped > 0 ? "failed" : q.retrying > 0 ? "retrying" : q.pending > 0 ? "pending" : "synced";
        delayed = q.oldest_open_at > 0 && now - q.oldest_open_at > warn;
        overall = sync_worse(overall, word);
        any_delayed |= delayed;
        json_array_append_new(
            arr, sync_endpoint_json(
                     ep, json_pack("{s:s,s:b,s:b,s:I,s:I,s:I,s:o,s:o,s:o,s:o}", "status", word, "delayed", delayed,
                                   "enabled", ep->enabled, "pending", (json_int_t)q.pending, "retrying",
                                   (json_int_t)q.retrying, "failed", (json_int_t)(q.dead + q.skipped),
                                   "oldest_undelivered_at", api_json_time(q.oldest_open_at), "last_attempt_at",
                                   api_json_time(a.last_attempt_at), "next_attempt_at",
                                   api_json_time(next_attempt(ep, &st, &q)), "last_error", error_json(&a))));
        health_activity_free(&a);
    }
    api_reader_put(d, s, rc);
    if (rc != 0) {
        api_reply_store_error(res, rc, "account");
        json_decref(arr);
    } else if ((j = sync_reply(overall, any_delayed, warn, arr)) &&
               json_object_set_new(j, "account", api_json_text(account)) == 0) {
        http_reply_json(res, 200, j);
    } else {
        json_decref(j);
        http_reply_error(res, 500, "internal", "out of memory");
    }
    endpoint_list_free(&eps);
}

void api_resources_sync(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *d = api_begin(req, res, ctx);
    const char *type = http_param(req, "type"), *id = http_param(req, "id");
    struct sync_query query = {0};
    struct resource_sync_list list = {0};
    struct query_scratch scratch;
    const char *overall = "synced";
    bool any_delayed = false;
    int64_t now = clock_now_ms(), warn = d ? d->cfg->sync_warn_after_ms : 0;
    json_t *arr = NULL, *j;
    struct store *s;
    int rc;

    if (!d || !api_query_parse(req, res, sync_query, sync_query_count, &query, &scratch))
        return;
    if (!label_ok(type) || !label_ok(id)) {
        http_reply_error(res, 400, "invalid_field",
                         "resource: type and id are at most %d bytes of UTF-8 text without control characters",
                         API_ACCOUNT_MAX);
        return;
    }
    if (query.account && !label_ok(query.account)) {
        http_reply_error(res, 400, "invalid_field", "account: at most %d bytes of UTF-8 text without control characters",
                         API_ACCOUNT_MAX);
        return;
    }
    if (!api_scope_account(req, res, &query.account)) /* an account token: its own account's events only */
        return;
    if (!(s = api_reader_get(d, res)))
        return;
    rc = store_health_resource(s, type, id, query.account, &list);
    arr = json_array();
    for (size_t i = 0; rc == 0 && i < list.n; i++) {
        const struct resource_sync *r = &list.items[i];
        struct endpoint ep = {0};
        struct endpoint_state st;
        const char *word = sync_word(r->status);
        bool open = delivery_status_open(r->status);
        bool delayed = open && now - r->event_created_at > warn;
        int64_t next = 0;
        rc = store_endpoint_get(s, r->endpoint_id, &ep);
        if (rc == HOOKD_ENOTFOUND) { /* a deleted endpoint: nothing left to sync to */
            rc = 0;
            continue;
        }
        if (rc == 0 && !api_caller(req)->admin && !(ep.account && api_caller_sees(req, ep.account))) {
            endpoint_free(&ep); /* an account token: its account's own endpoints, never the operator's */
            continue;
        }
        if (rc == 0)
            rc = state_get(s, r->endpoint_id, &st);
        if (rc != 0) {
            endpoint_free(&ep);
            break;
        }
        if (open && ep.enabled)
            next = st.breaker == BREAKER_OPEN && st.next_probe_at > r->next_attempt_at ? st.next_probe_at
                                                                                        : r->next_attempt_at;
        overall = sync_worse(overall, word);
        any_delayed |= delayed;
        json_array_append_new(
            arr, sync_endpoint_json(
                     &ep, json_pack("{s:s,s:b,s:{s:o,s:o,s:o,s:o},s:i,s:o,s:o,s:o,s:o,s:o}", "status", word,
                                    "delayed", delayed, "event", "id", api_json_text(r->event_id), "type", api_json_text(r->event_type),
                                    "version", r->has_version ? json_integer(r->version) : json_null(), "created_at",
                                    api_json_time(r->event_created_at), "attempts", r->attempt_count,
                                    "last_attempt_at", api_json_time(r->last_attempt_at), "next_attempt_at",
                                    api_json_time(next), "delivered_at", api_json_time(r->delivered_at),
                                    "last_status_code",
                                    r->last_status_code > 0 ? json_integer(r->last_status_code) : json_null(),
                                    "last_error", api_json_text(r->last_error))));
        endpoint_free(&ep);
    }
    api_reader_put(d, s, rc);
    if (rc != 0) {
        api_reply_store_error(res, rc, "resource");
        json_decref(arr);
    } else if ((j = sync_reply(overall, any_delayed, warn, arr)) &&
               json_object_set_new(j, "resource", json_pack("{s:o,s:o}", "type", api_json_text(type), "id", api_json_text(id))) == 0 &&
               json_object_set_new(j, "account", api_json_text(query.account)) == 0) {
        http_reply_json(res, 200, j);
    } else {
        json_decref(j);
        http_reply_error(res, 500, "internal", "out of memory");
    }
    resource_sync_list_free(&list);
}
