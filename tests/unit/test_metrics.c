/*
 * Metrics and alert rules without a daemon: the exposition's shape (HELP and
 * TYPE before each family's samples, cumulative buckets, escaped label
 * values, counters that count what the hooks saw), and alerts_decide on
 * scripted signals: each rule fires at its threshold and not below, rules
 * at 0 are off, and the retry backlog needs a window of history.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ops/alerts.h"
#include "ops/metrics.h"
#include "store/store.h"

static char *render(void)
{
    struct buf b;

    buf_init(&b, 1 << 20);
    assert_int_equal(metrics_render(&b, NULL, "node \"a\"\nb\\c", 1000), 0);
    return buf_steal(&b);
}

/* The value of the sample line that starts with `prefix ` (a whole name with its labels). */
static double value_of(const char *text, const char *prefix)
{
    size_t n = strlen(prefix);

    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, prefix, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    fail_msg("no sample %s", prefix);
    return -1;
}

static void test_exposition_shape(void **state)
{
    char *text = render();
    char family[128] = "";

    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        assert_non_null(next); /* every line ends with a newline */
        *next++ = '\0';
        if (strncmp(line, "# HELP ", 7) == 0) {
            assert_int_equal(sscanf(line + 7, "%127s", family), 1);
            assert_true(strncmp(family, "hookd_", 6) == 0);
            continue;
        }
        if (strncmp(line, "# TYPE ", 7) == 0) {
            char name[128], type[32];
            assert_int_equal(sscanf(line + 7, "%127s %31s", name, type), 2);
            assert_string_equal(name, family);
            if (strcmp(type, "counter") == 0)
                assert_non_null(strstr(name, "_total"));
            continue;
        }
        /* a sample of the family announced last */
        assert_true(strncmp(line, family, strlen(family)) == 0);
    }
    free(text);
    text = render();
    assert_non_null(strstr(text, "hookd_node_info{node=\"node \\\"a\\\"\\nb\\\\c\",version="));
    free(text);
}

static void test_counters_follow_the_hooks(void **state)
{
    char *before = render(), *after;
    struct delivery_result ok = {.status = DELIVERY_DELIVERED, .attempt = {.status_code = 204, .started_at = 5000,
                                                                            .duration_ms = 100}};
    struct delivery_result busy = {.status = DELIVERY_RETRYING, .attempt = {.status_code = 503}};
    struct delivery_result gone = {.status = DELIVERY_DEAD, .attempt = {.status_code = 0}};
    struct delivery ds[3] = {{.status = DELIVERY_PENDING}, {.status = DELIVERY_SKIPPED}, {.status = DELIVERY_PENDING}};

    metrics_delivery_recorded(&ok, 3900); /* 1.2 s from commit to 2xx */
    metrics_delivery_recorded(&busy, 0);
    metrics_delivery_recorded(&gone, 0);
    metrics_fanout(2, ds, 3);
    metrics_inbound_stored(false);
    metrics_inbound_stored(true);
    metrics_inbound_rejected("bad_signature");
    metrics_inbound_rejected("something\nelse");
    metrics_inbox_outcome(INBOX_QUARANTINED);
    metrics_store_commit(1500, 3);
    after = render();
#define DELTA(name) (value_of(after, name) - value_of(before, name))
    assert_int_equal(DELTA("hookd_attempts_total{class=\"2xx\"}"), 1);
    assert_int_equal(DELTA("hookd_attempts_total{class=\"5xx\"}"), 1);
    assert_int_equal(DELTA("hookd_attempts_total{class=\"error\"}"), 1);
    assert_int_equal(DELTA("hookd_deliveries_total{outcome=\"delivered\"}"), 1);
    assert_int_equal(DELTA("hookd_deliveries_total{outcome=\"retrying\"}"), 1);
    assert_int_equal(DELTA("hookd_deliveries_total{outcome=\"dead\"}"), 1);
    assert_int_equal(DELTA("hookd_deliveries_total{outcome=\"skipped\"}"), 1);
    assert_int_equal(DELTA("hookd_events_published_total"), 2);
    assert_int_equal(DELTA("hookd_deliveries_created_total"), 3);
    assert_int_equal(DELTA("hookd_inbound_accepted_total"), 1);
    assert_int_equal(DELTA("hookd_inbound_duplicates_total"), 1);
    assert_int_equal(DELTA("hookd_inbound_rejected_total{reason=\"bad_signature\"}"), 1);
    assert_int_equal(DELTA("hookd_inbound_rejected_total{reason=\"other\"}"), 1);
    assert_int_equal(DELTA("hookd_inbox_outcomes_total{outcome=\"quarantined\"}"), 1);
    /* 1.2 s: not in the 1 s bucket, in the 2.5 s one and every one after */
    assert_int_equal(DELTA("hookd_delivery_latency_seconds_bucket{le=\"1\"}"), 0);
    assert_int_equal(DELTA("hookd_delivery_latency_seconds_bucket{le=\"2.5\"}"), 1);
    assert_int_equal(DELTA("hookd_delivery_latency_seconds_bucket{le=\"+Inf\"}"), 1);
    assert_true(DELTA("hookd_delivery_latency_seconds_sum") > 1.19 && DELTA("hookd_delivery_latency_seconds_sum") < 1.21);
    assert_int_equal(DELTA("hookd_store_batch_ops_bucket{le=\"2\"}"), 0);
    assert_int_equal(DELTA("hookd_store_batch_ops_bucket{le=\"4\"}"), 1);
    assert_int_equal(DELTA("hookd_store_commit_seconds_bucket{le=\"0.001\"}"), 0);
    assert_int_equal(DELTA("hookd_store_commit_seconds_bucket{le=\"0.0025\"}"), 1);
#undef DELTA
    free(before);
    free(after);
}

/* ---- the rules ---- */

static const struct alert_settings cfg = {
    .window_ms = 10000, .reopen_after_ms = 0, .sync_warn_after_ms = 60000, .backlog_growth = 10, .error_rate = 0.5,
    .error_min_attempts = 4, .no_success_accounts = 2, .dead_letters = 1, .quarantined = 1, .signature_rejections = 5,
};

static struct alert_signal sig(enum alert_signal_kind k, const char *subject, const char *account, int64_t n, int64_t m)
{
    return (struct alert_signal){.kind = k, .subject = (char *)subject, .account = (char *)account, .n = n, .m = m};
}

static bool fires(const struct alert_findings *f, const char *rule, const char *subject)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->items[i].rule, rule) == 0 && strcmp(f->items[i].subject, subject) == 0)
            return true;
    return false;
}

static void decide(const struct alert_settings *c, struct alert_signal *s, size_t n, int64_t now,
                   struct backlog_history **h, struct alert_findings *out)
{
    struct alert_signal_list l = {.items = s, .n = n};
    assert_int_equal(alerts_decide(c, &l, h, now, out), 0);
}

static void test_rules_fire_at_their_thresholds(void **state)
{
    struct backlog_history *h = NULL;
    struct alert_findings f;
    struct alert_signal s[] = {
        sig(SIGNAL_ATTEMPTS, "ep_bad", "a1", 3, 1), sig(SIGNAL_ATTEMPTS, "ep_bad", "a2", 1, 0), /* 4 tries, 3 failed */
        sig(SIGNAL_ATTEMPTS, "ep_few", "a3", 3, 0),                                             /* under the minimum */
        sig(SIGNAL_ATTEMPTS, "ep_ok", "a1", 10, 9),
        sig(SIGNAL_DEAD, "ep_bad", NULL, 1, 0),
        sig(SIGNAL_OLDEST_OPEN, "ep_late", NULL, 100000 - 60001, 0), sig(SIGNAL_OLDEST_OPEN, "ep_soon", NULL, 100000 - 60000, 0),
        sig(SIGNAL_QUARANTINED, "crm", NULL, 1, 0),
        sig(SIGNAL_SIG_REJECTIONS, "pay", NULL, 5, 0), sig(SIGNAL_SIG_REJECTIONS, "shop", NULL, 4, 0),
        sig(SIGNAL_DISABLED, "ep_off", "410 Gone", 0, 0),
    };

    decide(&cfg, s, sizeof s / sizeof s[0], 100000, &h, &f);
    assert_true(fires(&f, "error_rate", "ep_bad"));
    assert_false(fires(&f, "error_rate", "ep_few"));
    assert_false(fires(&f, "error_rate", "ep_ok"));
    assert_true(fires(&f, "dead_letters", "ep_bad"));
    assert_true(fires(&f, "delivery_delayed", "ep_late"));
    assert_false(fires(&f, "delivery_delayed", "ep_soon"));
    assert_true(fires(&f, "quarantined", "crm"));
    assert_true(fires(&f, "signature_rejections", "pay"));
    assert_false(fires(&f, "signature_rejections", "shop"));
    assert_true(fires(&f, "endpoint_disabled", "ep_off"));
    /* a2 and a3 had attempts and no success: two accounts */
    assert_true(fires(&f, "no_success", "*"));
    alert_findings_free(&f);

    struct alert_settings off = cfg;
    off.error_rate = 0;
    off.dead_letters = off.quarantined = off.signature_rejections = off.no_success_accounts = 0;
    decide(&off, s, sizeof s / sizeof s[0], 100000, &h, &f);
    assert_false(fires(&f, "error_rate", "ep_bad"));
    assert_false(fires(&f, "dead_letters", "ep_bad"));
    assert_false(fires(&f, "quarantined", "crm"));
    assert_false(fires(&f, "no_success", "*"));
    assert_true(fires(&f, "endpoint_disabled", "ep_off")); /* not a threshold rule */
    alert_findings_free(&f);
    backlog_history_free(h);
}

static void test_backlog_needs_a_window_of_history(void **state)
{
    struct backlog_history *h = NULL;
    struct alert_findings f;
    struct alert_signal s = sig(SIGNAL_RETRYING, "ep_slow", NULL, 50, 0);

    /* a node that just started sees a backlog of 50: growth unknown, undecided (an open alert stays) */
    decide(&cfg, &s, 1, 1000, &h, &f);
    assert_false(fires(&f, "retry_backlog", "ep_slow"));
    assert_int_equal(f.n_undecided, 1);
    alert_findings_free(&f);
    /* a window later, 55: grew by 5, under 10 */
    s.n = 55;
    decide(&cfg, &s, 1, 11000, &h, &f);
    assert_false(fires(&f, "retry_backlog", "ep_slow"));
    assert_int_equal(f.n_undecided, 0);
    alert_findings_free(&f);
    /* then 66 over the last window (from 55 at 11000): fires */
    s.n = 66;
    decide(&cfg, &s, 1, 21500, &h, &f);
    assert_true(fires(&f, "retry_backlog", "ep_slow"));
    alert_findings_free(&f);
    /* an endpoint first seen now, after a window of passes: it had no backlog at the window's start */
    struct alert_signal two[] = {s, sig(SIGNAL_RETRYING, "ep_new", NULL, 12, 0)};
    decide(&cfg, two, 2, 22000, &h, &f);
    assert_true(fires(&f, "retry_backlog", "ep_new"));
    alert_findings_free(&f);
    /* drained: not growing, decided */
    decide(&cfg, NULL, 0, 40000, &h, &f);
    assert_int_equal(f.n, 0);
    assert_int_equal(f.n_undecided, 0);
    alert_findings_free(&f);
    backlog_history_free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exposition_shape),
        cmocka_unit_test(test_counters_follow_the_hooks),
        cmocka_unit_test(test_rules_fire_at_their_thresholds),
        cmocka_unit_test(test_backlog_needs_a_window_of_history),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
