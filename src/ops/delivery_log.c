/*
 * The delivery log of GET /v1/deliveries/{id} (DESIGN §12): each attempt
 * with its error class and the retry decision that followed it, and one
 * line in plain words for the delivery ("timeout after 10 s, retry in 47 s").
 */
#include "ops/delivery_log.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "ops/api_common.h"

const char *delivery_log_class(const struct attempt *a)
{
    const char *text = a->error ? a->error : "";

    if (a->error_class) {
        /* The engine's text says which connect or other failure was the TLS handshake's. */
        if ((strcmp(a->error_class, "connect") == 0 || strcmp(a->error_class, "other") == 0) &&
            (strcasestr(text, "ssl") || strcasestr(text, "tls") || strcasestr(text, "certificate")))
            return "tls";
        return a->error_class;
    }
    if (a->status_code >= 200 && a->status_code <= 299)
        return NULL;
    if (a->status_code == 429)
        return "http_429";
    if (a->status_code >= 500)
        return "http_5xx";
    if (a->status_code >= 400)
        return "http_4xx";
    if (a->status_code >= 300)
        return "http_3xx";
    if (a->status_code > 0)
        return "http_other";
    if (strcasestr(text, "too large") || strcasestr(text, "request cap"))
        return "too_large";
    return a->error ? "request" : NULL;
}

/* What followed attempt i: the next one of the same run, the delivery's next_attempt_at, or nothing. */
static json_t *retry_json(const struct delivery *d, const struct attempt_list *al, size_t i, int64_t now)
{
    int64_t at = 0;
    bool will = false;

    if (i + 1 < al->n) {
        /* Numbers start again at 1 after a replay: that run ended here. */
        will = al->items[i + 1].n == al->items[i].n + 1;
        at = will ? al->items[i + 1].started_at : 0;
    } else if (d->status == DELIVERY_RETRYING || (d->status == DELIVERY_PENDING && d->attempt_count > 0)) {
        will = true;
        at = d->next_attempt_at;
    }
    if (!will)
        return json_pack("{s:b,s:n,s:n}", "will_retry", 0, "at", "in_ms");
    return json_pack("{s:b,s:o,s:I}", "will_retry", 1, "at", api_json_time(at), "in_ms",
                     (json_int_t)(at > now ? at - now : 0));
}

json_t *delivery_log_attempts(const struct delivery *d, const struct attempt_list *al, int64_t now)
{
    json_t *arr = json_array();

    for (size_t i = 0; arr && i < al->n; i++) {
        const struct attempt *a = &al->items[i];
        const char *cls = delivery_log_class(a);
        json_t *j = api_attempt_json(a);
        if (!j || json_object_set_new(j, "endpoint_id", json_string(d->endpoint_id)) != 0 ||
            json_object_set_new(j, "error_class", api_json_str(cls)) != 0 ||
            json_object_set_new(j, "error_text", api_json_str(a->error)) != 0 ||
            json_object_set_new(j, "retry", retry_json(d, al, i, now)) != 0 || json_array_append_new(arr, j) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

/* "47 s", "3 m 5 s", "2 h 10 m": a wait in plain words. */
static void words_duration(int64_t ms, char *out, size_t len)
{
    int64_t s = (ms + 999) / 1000;

    if (s < 60)
        snprintf(out, len, "%lld s", (long long)s);
    else if (s < 3600)
        snprintf(out, len, "%lld m %lld s", (long long)(s / 60), (long long)(s % 60));
    else
        snprintf(out, len, "%lld h %lld m", (long long)(s / 3600), (long long)(s % 3600 / 60));
}

/* The last attempt's failure in words: "timeout after 10 s", "HTTP 503", "connect error". */
static void words_failure(const struct attempt *a, char *out, size_t len)
{
    const char *cls = delivery_log_class(a);
    char took[32];

    words_duration(a->duration_ms, took, sizeof took);
    if (a->status_code > 0)
        snprintf(out, len, "HTTP %d after %s", a->status_code, took);
    else if (cls && strcmp(cls, "timeout") == 0)
        snprintf(out, len, "timeout after %s", took);
    else if (cls && strcmp(cls, "blocked") == 0)
        snprintf(out, len, "address refused by the network policy");
    else if (cls)
        snprintf(out, len, "%s error", cls);
    else
        snprintf(out, len, "failed");
}

void delivery_log_summary(const struct delivery *d, const struct attempt_list *al, int64_t now, char *out,
                          size_t len)
{
    const struct attempt *last = al->n ? &al->items[al->n - 1] : NULL;
    char fail[96], wait[32];

    words_duration(d->next_attempt_at > now ? d->next_attempt_at - now : 0, wait, sizeof wait);
    if (last)
        words_failure(last, fail, sizeof fail);
    switch (d->status) {
    case DELIVERY_DELIVERED:
        if (last && last->status_code > 0)
            snprintf(out, len, "delivered (HTTP %d in %d ms)", last->status_code, last->duration_ms);
        else
            snprintf(out, len, "delivered");
        break;
    case DELIVERY_RETRYING:
        snprintf(out, len, "%s, retry in %s (attempt %d)", last ? fail : "failed", wait, d->attempt_count + 1);
        break;
    case DELIVERY_PENDING:
        if (d->next_attempt_at > now)
            snprintf(out, len, "queued, next attempt in %s", wait);
        else
            snprintf(out, len, "queued, next attempt now");
        break;
    case DELIVERY_DEAD:
        snprintf(out, len, "failed: %s; not retried after %d attempt%s", last ? fail : "no attempt",
                 d->attempt_count, d->attempt_count == 1 ? "" : "s");
        break;
    case DELIVERY_SKIPPED:
        snprintf(out, len, "skipped: the endpoint was disabled; replay to send it");
        break;
    case DELIVERY_SUPERSEDED:
        snprintf(out, len, "superseded by a newer version of the resource; not sent");
        break;
    default:
        snprintf(out, len, "%s", delivery_status_name(d->status));
    }
}
