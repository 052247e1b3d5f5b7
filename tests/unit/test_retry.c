/* Unit tests of the delivery retry policy (DESIGN §5): classes, jitter, exhaustion, window, Retry-After. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/ids.h"
#include "core/retry.h"
#include "hookd.h"

#define T0 INT64_C(1700000000000)
#define NO_RETRY_AFTER (-1)

static void test_classify_statuses(void **state)
{
    static const struct {
        int status;
        enum outcome oc;
    } cases[] = {
        {200, OUTCOME_SUCCESS}, {201, OUTCOME_SUCCESS}, {204, OUTCOME_SUCCESS}, {299, OUTCOME_SUCCESS},
        {408, OUTCOME_RETRY},   {425, OUTCOME_RETRY},   {429, OUTCOME_RETRY},   {500, OUTCOME_RETRY},
        {502, OUTCOME_RETRY},   {503, OUTCOME_RETRY},   {504, OUTCOME_RETRY},   {599, OUTCOME_RETRY},
        {410, OUTCOME_GONE},    {400, OUTCOME_FAIL},    {401, OUTCOME_FAIL},    {403, OUTCOME_FAIL},
        {404, OUTCOME_FAIL},    {409, OUTCOME_FAIL},    {413, OUTCOME_FAIL},    {422, OUTCOME_FAIL},
        {301, OUTCOME_FAIL},    {302, OUTCOME_FAIL},    {304, OUTCOME_FAIL},    {307, OUTCOME_FAIL},
        {100, OUTCOME_FAIL},    {101, OUTCOME_FAIL},    {199, OUTCOME_FAIL},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (retry_classify(TRANSPORT_OK, cases[i].status) != cases[i].oc)
            fail_msg("status %d: got %d, want %d", cases[i].status, retry_classify(TRANSPORT_OK, cases[i].status),
                     cases[i].oc);
    }
}

static void test_classify_transport(void **state)
{
    static const struct {
        enum transport_error err;
        enum outcome oc;
        const char *name;
    } cases[] = {
        {TRANSPORT_CONNECT, OUTCOME_RETRY, "connect"}, {TRANSPORT_DNS, OUTCOME_RETRY, "dns"},
        {TRANSPORT_TIMEOUT, OUTCOME_RETRY, "timeout"}, {TRANSPORT_OTHER, OUTCOME_RETRY, "other"},
        {TRANSPORT_BLOCKED, OUTCOME_FAIL, "blocked"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* The status is irrelevant once the transport failed. */
        assert_int_equal(retry_classify(cases[i].err, 0), cases[i].oc);
        assert_int_equal(retry_classify(cases[i].err, 200), cases[i].oc);
        assert_string_equal(transport_error_name(cases[i].err), cases[i].name);
    }
    assert_null(transport_error_name(TRANSPORT_OK));
}

static void test_policy_default(void **state)
{
    static const int64_t want[] = {10000, 30000, 120000, 600000, 3600000, 7200000, 14400000, 28800000, 28800000};
    struct retry_policy p;

    retry_policy_default(&p);
    assert_int_equal(p.n_schedule, 9);
    assert_memory_equal(p.schedule_ms, want, sizeof want);
    assert_true(p.window_ms == 86400000);
    assert_true(p.jitter == 0.2);
    assert_true(p.retry_after_max_ms == 3600000);
}

static void test_terminal_outcomes(void **state)
{
    struct retry_policy p;
    struct retry_decision d;

    retry_policy_default(&p);
    retry_decide(&p, OUTCOME_SUCCESS, 3, T0, T0 + 5000, NO_RETRY_AFTER, 0.5, &d);
    assert_int_equal(d.next, NEXT_DELIVERED);
    assert_false(d.disable_endpoint);
    retry_decide(&p, OUTCOME_GONE, 1, T0, T0, NO_RETRY_AFTER, 0.5, &d);
    assert_int_equal(d.next, NEXT_DEAD);
    assert_true(d.disable_endpoint);
    assert_string_equal(d.reason, "gone");
    retry_decide(&p, OUTCOME_FAIL, 1, T0, T0, NO_RETRY_AFTER, 0.5, &d);
    assert_int_equal(d.next, NEXT_DEAD);
    assert_false(d.disable_endpoint);
    assert_string_equal(d.reason, "rejected");
}

static void test_jitter_bounds(void **state)
{
    struct retry_policy p;
    struct retry_decision d;

    retry_policy_default(&p);
    for (int attempt = 1; attempt <= (int)p.n_schedule; attempt++) {
        int64_t base = p.schedule_ms[attempt - 1];
        int64_t lo = base * 8 / 10, hi = base * 12 / 10;

        retry_decide(&p, OUTCOME_RETRY, attempt, T0, T0, NO_RETRY_AFTER, 0.0, &d);
        assert_int_equal(d.next, NEXT_RETRY);
        assert_true(d.next_attempt_at_ms - T0 == lo);
        retry_decide(&p, OUTCOME_RETRY, attempt, T0, T0, NO_RETRY_AFTER, 0.5, &d);
        assert_true(d.next_attempt_at_ms - T0 == base);
        retry_decide(&p, OUTCOME_RETRY, attempt, T0, T0, NO_RETRY_AFTER, 0.999999, &d);
        assert_true(d.next_attempt_at_ms - T0 <= hi);
        assert_true(d.next_attempt_at_ms - T0 > base * 119 / 100);
        for (int i = 0; i < 200; i++) {
            uint32_t r;
            random_bytes(&r, sizeof r);
            retry_decide(&p, OUTCOME_RETRY, attempt, T0, T0, NO_RETRY_AFTER, r / 4294967296.0, &d);
            assert_int_equal(d.next, NEXT_RETRY);
            assert_true(d.next_attempt_at_ms - T0 >= lo);
            assert_true(d.next_attempt_at_ms - T0 <= hi);
        }
    }
    /* Jitter 0: the schedule exactly. */
    p.jitter = 0;
    retry_decide(&p, OUTCOME_RETRY, 2, T0, T0, NO_RETRY_AFTER, 0.0, &d);
    assert_true(d.next_attempt_at_ms - T0 == 30000);
}

/* Runs an always-failing delivery to its end; returns the number of attempts. */
static int attempts_until_dead(const struct retry_policy *p, double rnd01, struct retry_decision *d)
{
    int64_t now = T0;
    int attempts = 0;

    for (int guard = 0; guard < 100; guard++) {
        attempts++;
        retry_decide(p, OUTCOME_RETRY, attempts, T0, now, NO_RETRY_AFTER, rnd01, d);
        if (d->next != NEXT_RETRY)
            return attempts;
        assert_true(d->next_attempt_at_ms > now);
        now = d->next_attempt_at_ms;
    }
    fail_msg("never dead");
    return -1;
}

static void test_schedule_exhausted(void **state)
{
    struct retry_policy p;
    struct retry_decision d;

    retry_policy_default(&p);
    /* Without jitter the default schedule spans about 23 h, inside the 24 h window. */
    assert_int_equal(attempts_until_dead(&p, 0.5, &d), 10);
    assert_int_equal(d.next, NEXT_DEAD);
    assert_string_equal(d.reason, "schedule exhausted");
    assert_false(d.disable_endpoint);

    p.n_schedule = 2;
    p.schedule_ms[0] = 100;
    p.schedule_ms[1] = 200;
    assert_int_equal(attempts_until_dead(&p, 0.0, &d), 3);
    assert_string_equal(d.reason, "schedule exhausted");
    p.n_schedule = 0; /* no retries at all */
    assert_int_equal(attempts_until_dead(&p, 0.0, &d), 1);
}

static void test_retry_window(void **state)
{
    struct retry_policy p;
    struct retry_decision d;

    retry_policy_default(&p);
    /* With the largest jitter the schedule passes 24 h before it runs out. */
    assert_true(attempts_until_dead(&p, 0.999, &d) < 10);
    assert_string_equal(d.reason, "retry window exceeded");

    /* Exactly at the window edge is allowed, one millisecond past is not. */
    p.jitter = 0;
    retry_decide(&p, OUTCOME_RETRY, 9, T0, T0 + p.window_ms - 28800000, NO_RETRY_AFTER, 0.5, &d);
    assert_int_equal(d.next, NEXT_RETRY);
    assert_true(d.next_attempt_at_ms == T0 + p.window_ms);
    retry_decide(&p, OUTCOME_RETRY, 9, T0, T0 + p.window_ms - 28800000 + 1, NO_RETRY_AFTER, 0.5, &d);
    assert_int_equal(d.next, NEXT_DEAD);
    assert_string_equal(d.reason, "retry window exceeded");
}

static void test_retry_after_raises_and_caps(void **state)
{
    struct retry_policy p;
    struct retry_decision d;
    int64_t delay;

    retry_policy_default(&p);
    /* 120 s > the 10 s step: the delay rises to it. */
    assert_int_equal(retry_after_parse("120", T0, &delay), 0);
    retry_decide(&p, OUTCOME_RETRY, 1, T0, T0, delay, 0.5, &d);
    assert_true(d.next_attempt_at_ms == T0 + 120000);
    /* Shorter than the schedule: the schedule wins. */
    retry_decide(&p, OUTCOME_RETRY, 1, T0, T0, 1000, 0.5, &d);
    assert_true(d.next_attempt_at_ms == T0 + 10000);
    /* An HTTP date 30 minutes ahead. */
    assert_int_equal(retry_after_parse("Tue, 14 Nov 2023 22:43:20 GMT", T0, &delay), 0);
    assert_true(delay == 1800000);
    retry_decide(&p, OUTCOME_RETRY, 2, T0, T0, delay, 0.5, &d);
    assert_true(d.next_attempt_at_ms == T0 + 1800000);
    /* Capped at retry_after_max (1 h). */
    assert_int_equal(retry_after_parse("86400", T0, &delay), 0);
    retry_decide(&p, OUTCOME_RETRY, 1, T0, T0, delay, 0.5, &d);
    assert_true(d.next_attempt_at_ms == T0 + 3600000);
    p.retry_after_max_ms = 60000;
    retry_decide(&p, OUTCOME_RETRY, 1, T0, T0, delay, 0.5, &d);
    assert_true(d.next_attempt_at_ms == T0 + 60000);
    /* The cap never lowers the schedule itself. */
    retry_decide(&p, OUTCOME_RETRY, 5, T0, T0, delay, 0.5, &d);
    assert_true(d.next_attempt_at_ms == T0 + 3600000);
}

static void test_retry_after_parse(void **state)
{
    static const struct {
        const char *in;
        int64_t delay;
    } good[] = {
        {"0", 0},
        {"5", 5000},
        {" 7 ", 7000},
        {"-3", 0},
        {"Tue, 14 Nov 2023 22:13:30 GMT", 10000},
        {"Tuesday, 14-Nov-23 22:13:30 GMT", 10000},
        {"Tue Nov 14 22:13:30 2023", 10000},
        {"Mon, 13 Nov 2023 00:00:00 GMT", 0}, /* in the past */
        {"99999999999999999999999", (INT64_C(1) << 40) * 1000},
    };
    static const char *const bad[] = {"", "soon", "5s", "1.5", "-", "12 34", "Tue, 99 Nov 2023 22:13:30 GMT"};
    int64_t delay;

    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        delay = -1;
        assert_int_equal(retry_after_parse(good[i].in, T0, &delay), 0);
        if (delay != good[i].delay)
            fail_msg("'%s': got %lld", good[i].in, (long long)delay);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(retry_after_parse(bad[i], T0, &delay), HOOKD_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classify_statuses),   cmocka_unit_test(test_classify_transport),
        cmocka_unit_test(test_policy_default),      cmocka_unit_test(test_terminal_outcomes),
        cmocka_unit_test(test_jitter_bounds),       cmocka_unit_test(test_schedule_exhausted),
        cmocka_unit_test(test_retry_window),        cmocka_unit_test(test_retry_after_raises_and_caps),
        cmocka_unit_test(test_retry_after_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
