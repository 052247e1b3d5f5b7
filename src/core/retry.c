/*
 * Delivery retry policy of DESIGN §5: outcome classes, the jittered schedule,
 * Retry-After, and the retry window. Pure: callers pass the clock and randomness.
 */
#include "core/retry.h"

#include <math.h>
#include <string.h>

#include "core/timefmt.h"
#include "hookd.h"

static const char *const transport_names[] = {
    [TRANSPORT_OK] = NULL,          [TRANSPORT_CONNECT] = "connect", [TRANSPORT_DNS] = "dns",
    [TRANSPORT_TIMEOUT] = "timeout", [TRANSPORT_BLOCKED] = "blocked", [TRANSPORT_OTHER] = "other",
};

const char *transport_error_name(enum transport_error e)
{
    if ((unsigned)e >= sizeof transport_names / sizeof transport_names[0])
        return "other";
    return transport_names[e];
}

/* Statuses outside the 2xx/5xx ranges that are still worth retrying. */
static const int retryable_statuses[] = {408, 425, 429};

enum outcome retry_classify(enum transport_error err, int status_code)
{
    if (err == TRANSPORT_BLOCKED)
        return OUTCOME_FAIL;
    if (err != TRANSPORT_OK)
        return OUTCOME_RETRY;
    if (status_code >= 200 && status_code <= 299)
        return OUTCOME_SUCCESS;
    if (status_code >= 500 && status_code <= 599)
        return OUTCOME_RETRY;
    if (status_code == 410)
        return OUTCOME_GONE;
    for (size_t i = 0; i < sizeof retryable_statuses / sizeof retryable_statuses[0]; i++) {
        if (status_code == retryable_statuses[i])
            return OUTCOME_RETRY;
    }
    /* A code outside 100..599 is a broken response, treated like a transport error. */
    if (status_code < 100 || status_code > 599)
        return OUTCOME_RETRY;
    return OUTCOME_FAIL;
}

void retry_policy_default(struct retry_policy *p)
{
    static const int64_t schedule[] = {10000, 30000, 120000, 600000, 3600000, 7200000, 14400000, 28800000, 28800000};

    memset(p, 0, sizeof *p);
    memcpy(p->schedule_ms, schedule, sizeof schedule);
    p->n_schedule = sizeof schedule / sizeof schedule[0];
    p->window_ms = 24 * 3600000LL;
    p->jitter = 0.2;
    p->retry_after_max_ms = 3600000;
}

/* Seconds in a Retry-After value past which it is clamped rather than overflowing. */
#define RETRY_AFTER_MAX_S (INT64_C(1) << 40)

int retry_after_parse(const char *value, int64_t now_ms, int64_t *delay_ms)
{
    const char *p = value;
    int64_t secs = 0, date_ms;
    bool negative = false;
    size_t digits = 0;

    if (value == NULL)
        return HOOKD_EINVAL;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p == '-') {
        negative = true;
        p++;
    }
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        if (secs < RETRY_AFTER_MAX_S)
            secs = secs * 10 + (*p - '0');
    }
    while (*p == ' ' || *p == '\t')
        p++;
    if (digits > 0 && *p == '\0') {
        if (secs > RETRY_AFTER_MAX_S)
            secs = RETRY_AFTER_MAX_S;
        *delay_ms = negative ? 0 : secs * 1000;
        return 0;
    }
    if (negative || digits > 0 || http_date_parse(value, &date_ms) != 0)
        return HOOKD_EINVAL;
    *delay_ms = date_ms > now_ms ? date_ms - now_ms : 0;
    return 0;
}

/* schedule delay d scaled by 1 + jitter*(2*rnd01-1), never negative. */
static int64_t jittered(int64_t d, double jitter, double rnd01)
{
    double f;

    if (!(rnd01 >= 0.0))
        rnd01 = 0.0;
    if (rnd01 > 1.0)
        rnd01 = 1.0;
    if (!(jitter > 0.0))
        return d;
    f = (double)d * (1.0 + jitter * (2.0 * rnd01 - 1.0));
    if (f <= 0.0)
        return 0;
    if (f >= 9.0e18)
        return INT64_MAX / 4;
    return (int64_t)llround(f);
}

void retry_decide(const struct retry_policy *p, enum outcome oc, int attempts_made, int64_t first_attempt_at_ms,
                  int64_t now_ms, int64_t retry_after_ms, double rnd01, struct retry_decision *out)
{
    size_t n_schedule = p->n_schedule > RETRY_MAX_SCHEDULE ? RETRY_MAX_SCHEDULE : p->n_schedule;
    int64_t delay, next, elapsed;

    memset(out, 0, sizeof *out);
    switch (oc) {
    case OUTCOME_SUCCESS:
        out->next = NEXT_DELIVERED;
        return;
    case OUTCOME_GONE:
        out->next = NEXT_DEAD;
        out->disable_endpoint = true;
        out->reason = "gone";
        return;
    case OUTCOME_FAIL:
        out->next = NEXT_DEAD;
        out->reason = "rejected";
        return;
    case OUTCOME_RETRY:
        break;
    }
    if (attempts_made < 1)
        attempts_made = 1;
    if ((size_t)attempts_made > n_schedule) {
        out->next = NEXT_DEAD;
        out->reason = "schedule exhausted";
        return;
    }
    delay = jittered(p->schedule_ms[attempts_made - 1], p->jitter, rnd01);
    if (retry_after_ms >= 0) {
        int64_t ra = retry_after_ms < p->retry_after_max_ms ? retry_after_ms : p->retry_after_max_ms;
        if (ra > delay)
            delay = ra;
    }
    /* Overflow on absurd configured delays counts as beyond the window. */
    if (__builtin_add_overflow(now_ms, delay, &next) || __builtin_sub_overflow(next, first_attempt_at_ms, &elapsed) ||
        elapsed > p->window_ms) {
        out->next = NEXT_DEAD;
        out->reason = "retry window exceeded";
        return;
    }
    out->next = NEXT_RETRY;
    out->next_attempt_at_ms = next;
}
