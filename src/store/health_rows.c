/*
 * The health figures' rows, the same for both backends: a batch of attempts
 * summed into per-minute, per-latency-bucket and per-failure rows and each
 * endpoint's latest attempt, sorted by key; and the readers of what the
 * health queries return.
 */
#include "store/store_common.h"

#include <stdlib.h>
#include <string.h>

#include "core/latency.h"
#include "core/utf8.h"

int64_t health_minute(int64_t ms)
{
    if (ms < 0)
        ms = 0;
    return ms - ms % HEALTH_MINUTE_MS;
}

static int str_cmp(const char *a, const char *b)
{
    if (a == NULL || b == NULL)
        return (a != NULL) - (b != NULL);
    return strcmp(a, b);
}

static int i64_cmp(int64_t a, int64_t b) { return (a > b) - (a < b); }

static int minute_cmp(const void *x, const void *y)
{
    const struct health_minute_row *a = x, *b = y;
    int c = strcmp(a->endpoint_id, b->endpoint_id);

    if (c == 0)
        c = i64_cmp(a->minute, b->minute);
    return c != 0 ? c : strcmp(a->node, b->node);
}

static int latency_cmp(const void *x, const void *y)
{
    const struct health_latency_row *a = x, *b = y;
    int c = strcmp(a->endpoint_id, b->endpoint_id);

    if (c == 0)
        c = i64_cmp(a->minute, b->minute);
    if (c == 0)
        c = strcmp(a->node, b->node);
    return c != 0 ? c : (a->bucket > b->bucket) - (a->bucket < b->bucket);
}

/* The failure table's key order: minute, endpoint, account (none first), status, class, node. */
static int failure_cmp(const void *x, const void *y)
{
    const struct health_failure_row *a = x, *b = y;
    int c = i64_cmp(a->minute, b->minute);

    if (c == 0)
        c = strcmp(a->endpoint_id, b->endpoint_id);
    if (c == 0)
        c = str_cmp(a->account, b->account);
    if (c == 0)
        c = (a->status_code > b->status_code) - (a->status_code < b->status_code);
    if (c == 0)
        c = strcmp(a->error_class, b->error_class);
    return c != 0 ? c : strcmp(a->node, b->node);
}

static int last_cmp(const void *x, const void *y)
{
    const struct health_last_row *a = x, *b = y;
    int c = strcmp(a->endpoint_id, b->endpoint_id);

    return c != 0 ? c : strcmp(a->node, b->node);
}

/* Sorts n rows of size sz and sums neighbours with equal keys into the first (merge adds b into a). */
static size_t sort_merge(void *rows, size_t n, size_t sz, int (*cmp)(const void *, const void *),
                         void (*merge)(void *a, const void *b))
{
    char *base = rows;
    size_t k = 0;

    if (n == 0)
        return 0;
    qsort(rows, n, sz, cmp);
    for (size_t i = 1; i < n; i++) {
        if (cmp(base + k * sz, base + i * sz) == 0) {
            merge(base + k * sz, base + i * sz);
        } else if (++k != i) {
            memcpy(base + k * sz, base + i * sz, sz);
        }
    }
    return k + 1;
}

static void minute_merge(void *x, const void *y)
{
    struct health_minute_row *a = x;
    const struct health_minute_row *b = y;

    a->attempts += b->attempts;
    a->successes += b->successes;
    a->retries_started += b->retries_started;
    a->retries_ended += b->retries_ended;
}

static void latency_merge(void *x, const void *y) { ((struct health_latency_row *)x)->count += ((const struct health_latency_row *)y)->count; }
static void failure_merge(void *x, const void *y) { ((struct health_failure_row *)x)->count += ((const struct health_failure_row *)y)->count; }

/* The later attempt's figures win; a success or an error is kept when the other has none. */
static void last_merge(void *x, const void *y)
{
    struct health_last_row *a = x;
    const struct health_last_row *b = y;

    if (b->last_attempt_at > a->last_attempt_at)
        a->last_attempt_at = b->last_attempt_at;
    if (b->last_success_at > a->last_success_at)
        a->last_success_at = b->last_success_at;
    if (b->last_error_at > a->last_error_at) {
        a->last_error_at = b->last_error_at;
        a->last_error_status_code = b->last_error_status_code;
        a->last_error_class = b->last_error_class;
        memcpy(a->last_error, b->last_error, sizeof a->last_error);
        a->has_error_text = b->has_error_text;
    }
}

static void error_text_set(struct health_last_row *l, const char *error)
{
    size_t n;

    l->has_error_text = error != NULL;
    if (error == NULL) {
        l->last_error[0] = '\0';
        return;
    }
    n = strlen(error);
    if (n >= sizeof l->last_error)
        n = utf8_cut(error, sizeof l->last_error - 1);
    n = utf8_valid_prefix(error, n); /* text columns take UTF-8 only (PostgreSQL refuses anything else) */
    memcpy(l->last_error, error, n);
    l->last_error[n] = '\0';
}

void health_rows_free(struct health_rows *r)
{
    if (!r)
        return;
    free(r->minutes);
    free(r->latencies);
    free(r->failures);
    free(r->lasts);
    memset(r, 0, sizeof *r);
}

int health_rows_build(const struct health_attempt *a, size_t n, struct health_rows *out)
{
    size_t nf = 0;

    memset(out, 0, sizeof *out);
    if (n == 0)
        return 0;
    out->minutes = calloc(n, sizeof *out->minutes);
    out->latencies = calloc(n, sizeof *out->latencies);
    out->failures = calloc(n, sizeof *out->failures);
    out->lasts = calloc(n, sizeof *out->lasts);
    if (!out->minutes || !out->latencies || !out->failures || !out->lasts) {
        health_rows_free(out);
        return HOOKD_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        const struct health_attempt *x = &a[i];
        int64_t minute = health_minute(x->started_at), at = x->started_at > 0 ? x->started_at : 1;
        const char *node = x->node ? x->node : "";
        struct health_last_row *l = &out->lasts[i];

        out->minutes[i] = (struct health_minute_row){
            .endpoint_id = x->endpoint_id, .node = node, .minute = minute, .attempts = 1,
            .successes = x->succeeded, .retries_started = x->retry_delta > 0, .retries_ended = x->retry_delta < 0};
        out->latencies[i] = (struct health_latency_row){
            .endpoint_id = x->endpoint_id, .node = node, .minute = minute,
            .bucket = latency_bucket(x->duration_ms, HEALTH_LATENCY_BUCKETS), .count = 1};
        l->endpoint_id = x->endpoint_id;
        l->node = node;
        l->last_attempt_at = at;
        if (x->succeeded) {
            l->last_success_at = at;
        } else {
            l->last_error_at = at;
            l->last_error_status_code = x->status_code;
            l->last_error_class = x->error_class;
            error_text_set(l, x->error);
            out->failures[nf++] = (struct health_failure_row){
                .endpoint_id = x->endpoint_id, .node = node, .account = x->account, .minute = minute,
                .status_code = x->status_code, .error_class = x->error_class ? x->error_class : "", .count = 1};
        }
    }
    out->n_minutes = sort_merge(out->minutes, n, sizeof *out->minutes, minute_cmp, minute_merge);
    out->n_latencies = sort_merge(out->latencies, n, sizeof *out->latencies, latency_cmp, latency_merge);
    out->n_failures = sort_merge(out->failures, nf, sizeof *out->failures, failure_cmp, failure_merge);
    out->n_lasts = sort_merge(out->lasts, n, sizeof *out->lasts, last_cmp, last_merge);
    return 0;
}

/* ---- readers ---- */

int store_read_health_window(const struct store_row *r, void *item)
{
    struct health_window *w = item;

    memset(w, 0, sizeof *w);
    store_row_id(r, 0, w->endpoint_id);
    w->attempts = r->ops->i64(r, 1);
    w->successes = r->ops->i64(r, 2);
    w->retries_started = r->ops->i64(r, 3);
    w->retries_ended = r->ops->i64(r, 4);
    return 0;
}

int store_read_health_failure(const struct store_row *r, void *item)
{
    struct health_failure *f = item;
    bool ok = true;
    const char *cls;

    memset(f, 0, sizeof *f);
    store_row_id(r, 0, f->endpoint_id);
    if (!r->ops->flag(r, 1))
        f->account = r->ops->str(r, 2, &ok);
    f->status_code = (int)r->ops->i64(r, 3);
    cls = r->ops->text(r, 4);
    if (cls != NULL && cls[0] != '\0')
        f->error_class = r->ops->str(r, 4, &ok);
    f->count = r->ops->i64(r, 5);
    if (!ok) {
        store_free_health_failure(f);
        return HOOKD_ENOMEM;
    }
    return 0;
}

int store_read_resource_sync(const struct store_row *r, void *item)
{
    struct resource_sync *x = item;
    bool ok = true;

    memset(x, 0, sizeof *x);
    store_row_id(r, 0, x->endpoint_id);
    store_row_id(r, 1, x->event_id);
    x->event_type = r->ops->str(r, 2, &ok);
    x->has_version = !r->ops->null(r, 3);
    x->version = r->ops->i64(r, 3);
    x->event_created_at = r->ops->i64(r, 4);
    if (delivery_status_parse(r->ops->text(r, 5), &x->status))
        x->status = DELIVERY_DEAD;
    x->attempt_count = (int)r->ops->i64(r, 6);
    x->last_attempt_at = r->ops->i64(r, 7);
    x->next_attempt_at = r->ops->i64(r, 8);
    x->delivered_at = r->ops->i64(r, 9);
    x->last_status_code = (int)r->ops->i64(r, 10);
    x->last_error = r->ops->str(r, 11, &ok);
    if (!ok) {
        store_free_resource_sync(x);
        return HOOKD_ENOMEM;
    }
    return 0;
}

void store_free_health_failure(void *item)
{
    struct health_failure *f = item;

    free(f->account);
    free(f->error_class);
    memset(f, 0, sizeof *f);
}

void store_free_resource_sync(void *item)
{
    struct resource_sync *x = item;

    free(x->event_type);
    free(x->last_error);
    memset(x, 0, sizeof *x);
}
