/*
 * Delivery retry policy (DESIGN §5), pure: classify an attempt's outcome and
 * decide the delivery's next state.
 *   retry_classify()    outcome class of one HTTP attempt
 *   retry_after_parse() Retry-After header (seconds or HTTP date) → delay
 *   retry_decide()      next status and next_attempt_at after an attempt
 */
#ifndef HOOKD_CORE_RETRY_H
#define HOOKD_CORE_RETRY_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RETRY_MAX_SCHEDULE 32

enum outcome {
    OUTCOME_SUCCESS,    /* 2xx */
    OUTCOME_RETRY,      /* connect/DNS error, timeout, 408, 425, 429, 5xx */
    OUTCOME_GONE,       /* 410: dead, and the endpoint is disabled */
    OUTCOME_FAIL,       /* other 3xx/4xx (and 1xx, or a refused address): dead at once */
};

/* Transport-level result of an attempt, before any HTTP status. */
enum transport_error {
    TRANSPORT_OK = 0,  /* a status code was received */
    TRANSPORT_CONNECT, /* refused, unreachable, TLS handshake failure */
    TRANSPORT_DNS,
    TRANSPORT_TIMEOUT,
    TRANSPORT_BLOCKED, /* address refused by the SSRF guard: not retried */
    TRANSPORT_OTHER,   /* anything else (a reset, a malformed response): retried */
};

/* Short stable names for logs and the attempts table: "connect", "dns", "timeout", "blocked", "other", or NULL for OK. */
const char *transport_error_name(enum transport_error e);

enum outcome retry_classify(enum transport_error err, int status_code);

struct retry_policy {
    int64_t schedule_ms[RETRY_MAX_SCHEDULE]; /* delays before attempt 2, 3, … */
    size_t n_schedule;
    int64_t window_ms;          /* dead when the next attempt would be later than first attempt + window */
    double jitter;              /* 0.2 = ±20 % */
    int64_t retry_after_max_ms; /* cap on Retry-After */
};

/* The defaults of DESIGN §5: 10s,30s,2m,10m,1h,2h,4h,8h,8h; 24 h window; ±20 %; 1 h cap. */
void retry_policy_default(struct retry_policy *p);

/* Parses a Retry-After value relative to now_ms; returns 0 and *delay_ms, or HOOKD_EINVAL. Negative delays become 0. */
__attribute__((warn_unused_result)) int retry_after_parse(const char *value, int64_t now_ms, int64_t *delay_ms);

enum delivery_next { NEXT_DELIVERED, NEXT_RETRY, NEXT_DEAD };

struct retry_decision {
    enum delivery_next next;
    int64_t next_attempt_at_ms; /* for NEXT_RETRY */
    bool disable_endpoint;      /* 410 */
    const char *reason;         /* static text for NEXT_DEAD: "gone", "rejected", "schedule exhausted", "retry window exceeded", "blocked" */
};

/*
 * attempts_made counts the attempt just finished (1 after the first).
 * retry_after_ms < 0 means no Retry-After. rnd01 is a uniform random number in
 * [0,1) (tests pass fixed values); the jittered delay is d * (1 + jitter*(2*rnd01-1)).
 */
void retry_decide(const struct retry_policy *p, enum outcome oc, int attempts_made, int64_t first_attempt_at_ms,
                  int64_t now_ms, int64_t retry_after_ms, double rnd01, struct retry_decision *out);
#endif
