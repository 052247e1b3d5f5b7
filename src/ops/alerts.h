/*
 * Alerts: a thread that evaluates the rules every [alerts] interval from the
 * store's signals, opens what fires and resolves what cleared. Each change is
 * one writer op that writes the alert and its operational event
 * (hookd.alert.opened / .resolved, hookd.endpoint.disabled / .recovered) to
 * the outbox in one transaction, so it is published exactly once however
 * many nodes evaluate: the store opens one alert per rule and subject
 * (store_alert_open) and resolves it once (store_alert_resolve).
 *
 *   alerts_start / alerts_stop   the evaluator thread
 *   alerts_evaluate              one pass now (tests, and the thread's loop)
 *   alerts_decide                the rules: signals in, findings out (pure, unit-tested)
 *   alert_rule_known             a rule name of the table (the API's filter)
 *   alert_json                   an alert as the API and the events show it
 */
#ifndef HOOKD_OPS_ALERTS_H
#define HOOKD_OPS_ALERTS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

struct writer;
struct hub;

/* The rules' thresholds ([alerts] and [delivery] sync_warn_after); 0 turns a count rule off. */
struct alert_settings {
    int64_t window_ms;
    int64_t reopen_after_ms;
    int64_t sync_warn_after_ms;
    int backlog_growth;
    double error_rate;
    int error_min_attempts;
    int no_success_accounts;
    int dead_letters;
    int quarantined;
    int signature_rejections;
};

struct alerts_deps {
    const char *store;  /* DSN: the evaluator reads on a connection of its own */
    struct writer *writer;
    struct hub *hub;    /* told HUB_OUTBOX_CHANGED after an operational event commits */
    int64_t interval_ms;
    struct alert_settings settings;
};

/* What fires now: one per (rule, subject). Strings are heap; free with alert_findings_free. */
struct alert_finding {
    char rule[ALERT_RULE_MAX];
    char *subject;
    char *message;
    char *details; /* JSON object text */
};
struct alert_findings {
    struct alert_finding *items;
    size_t n;
    /* (rule, subject) pairs the rules cannot judge yet (too little history): an open alert stays open. */
    struct alert_finding *undecided;
    size_t n_undecided;
};
void alert_findings_free(struct alert_findings *f);

/* The retry backlog's history per endpoint, kept by the caller between passes (opaque; NULL-initialised). */
struct backlog_history;
void backlog_history_free(struct backlog_history *h);

/*
 * Applies the rules to the signals at `now`; *history gains this pass's backlog samples. 0, or
 * HOOKD_ENOMEM (out is then empty).
 */
__attribute__((warn_unused_result)) int alerts_decide(const struct alert_settings *cfg,
                                                      const struct alert_signal_list *signals,
                                                      struct backlog_history **history, int64_t now,
                                                      struct alert_findings *out);

bool alert_rule_known(const char *rule);
/* The operational event types of a rule's opening and resolution. */
const char *alert_event_type(const char *rule, bool opened);
/* {"id", "rule", "subject", "status", "message", "details", "opened_at", "resolved_at"}; NULL on OOM. */
void *alert_json(const struct alert *a); /* a json_t * */

struct alerts;
__attribute__((warn_unused_result)) int alerts_start(const struct alerts_deps *deps, struct alerts **out);
void alerts_stop(struct alerts *a);
/* One pass on the evaluator's connection: opens and resolves, each through the writer, waiting for the commits. */
__attribute__((warn_unused_result)) int alerts_evaluate(struct alerts *a, int64_t now);
#endif
