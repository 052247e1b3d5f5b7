/*
 * The delivery log (error classes, the retry decision after each attempt,
 * the plain-words summary) and account token secrets (format, randomness,
 * the hash the store keeps, the cache's check by hash and expiry).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/clock.h"
#include "ops/delivery_log.h"
#include "ops/token_cache.h"

#define T0 1700000000000LL

static void test_error_classes(void **state)
{
    static const struct {
        const char *cls;
        int code;
        const char *text;
        const char *want;
    } cases[] = {
        {NULL, 200, NULL, NULL},
        {NULL, 404, "HTTP error", "http_4xx"},
        {NULL, 429, NULL, "http_429"},
        {NULL, 503, NULL, "http_5xx"},
        {NULL, 301, NULL, "http_3xx"},
        {"timeout", 0, "timeout: Operation timed out after 10000 ms", "timeout"},
        {"connect", 0, "connect: Connection refused", "connect"},
        {"connect", 0, "connect: SSL certificate problem: self-signed certificate", "tls"},
        {"other", 0, "other: TLS handshake failed", "tls"},
        {"dns", 0, "dns: could not resolve", "dns"},
        {"blocked", 0, "blocked: 10.0.0.1 is private", "blocked"},
        {NULL, 0, "request too large: the envelope is past the 8 MiB request cap", "too_large"},
        {NULL, 0, "the URL cannot be sent", "request"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct attempt a = {.error_class = (char *)cases[i].cls, .status_code = cases[i].code,
                            .error = (char *)cases[i].text};
        const char *got = delivery_log_class(&a);
        if (cases[i].want)
            assert_string_equal(got, cases[i].want);
        else
            assert_null(got);
    }
}

static void test_retry_decisions_and_summary(void **state)
{
    struct attempt at[3] = {
        {.n = 1, .started_at = T0, .duration_ms = 10000, .error_class = "timeout", .error = "timeout: slow"},
        {.n = 2, .started_at = T0 + 20000, .duration_ms = 30, .status_code = 503},
        {.n = 1, .started_at = T0 + 90000, .duration_ms = 10000, .error_class = "timeout", .error = "timeout: slow"},
    };
    struct attempt_list al = {.items = at, .n = 3};
    struct delivery d = {.id = "dlv_1", .endpoint_id = "ep_1", .status = DELIVERY_RETRYING, .attempt_count = 1,
                         .next_attempt_at = T0 + 147000};
    char line[256];
    json_t *arr = delivery_log_attempts(&d, &al, T0 + 100000);

    assert_non_null(arr);
    assert_int_equal(json_array_size(arr), 3);
    json_t *r0 = json_object_get(json_array_get(arr, 0), "retry");
    assert_true(json_is_true(json_object_get(r0, "will_retry")));
    assert_string_equal(json_string_value(json_object_get(r0, "at")), "2023-11-14T22:13:40.000Z");
    assert_int_equal(json_integer_value(json_object_get(r0, "in_ms")), 0);
    /* The second attempt's run ended (the third starts again at 1: a replay). */
    json_t *r1 = json_object_get(json_array_get(arr, 1), "retry");
    assert_true(json_is_false(json_object_get(r1, "will_retry")));
    assert_true(json_is_null(json_object_get(r1, "at")));
    json_t *last = json_array_get(arr, 2);
    assert_string_equal(json_string_value(json_object_get(last, "error_class")), "timeout");
    assert_string_equal(json_string_value(json_object_get(last, "endpoint_id")), "ep_1");
    assert_string_equal(json_string_value(json_object_get(last, "error_text")), "timeout: slow");
    json_t *r2 = json_object_get(last, "retry");
    assert_true(json_is_true(json_object_get(r2, "will_retry")));
    assert_int_equal(json_integer_value(json_object_get(r2, "in_ms")), 47000);
    assert_string_equal(json_string_value(json_object_get(json_array_get(arr, 1), "error_class")), "http_5xx");
    json_decref(arr);

    delivery_log_summary(&d, &al, T0 + 100000, line, sizeof line);
    assert_string_equal(line, "timeout after 10 s, retry in 47 s (attempt 2)");
    d.status = DELIVERY_DEAD;
    al.n = 2;
    d.attempt_count = 2;
    delivery_log_summary(&d, &al, T0 + 100000, line, sizeof line);
    assert_string_equal(line, "failed: HTTP 503 after 1 s; not retried after 2 attempts");
    d.status = DELIVERY_DELIVERED;
    at[1].status_code = 200;
    delivery_log_summary(&d, &al, T0, line, sizeof line);
    assert_string_equal(line, "delivered (HTTP 200 in 30 ms)");
    d.status = DELIVERY_PENDING;
    d.attempt_count = 0;
    al.n = 0;
    d.next_attempt_at = T0 + 200000;
    delivery_log_summary(&d, &al, T0, line, sizeof line);
    assert_string_equal(line, "queued, next attempt in 3 m 20 s");
    d.status = DELIVERY_SKIPPED;
    delivery_log_summary(&d, &al, T0, line, sizeof line);
    assert_non_null(strstr(line, "replay"));
}

static void test_token_secrets(void **state)
{
    char a[TOKEN_SECRET_MAX], b[TOKEN_SECRET_MAX], ha[SHA256_HEX_LEN], hb[SHA256_HEX_LEN], h[SHA256_HEX_LEN];

    token_secret_new(a, ha);
    token_secret_new(b, hb);
    assert_int_equal(strlen(a), 5 + 43);
    assert_memory_equal(a, "hkat_", 5);
    for (const char *p = a + 5; *p; p++)
        assert_non_null(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", *p));
    assert_string_not_equal(a, b);
    assert_string_not_equal(ha, hb);
    token_hash_hex("abc", 3, h);
    assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    token_hash_hex(a, strlen(a), h);
    assert_string_equal(h, ha);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_classes),
        cmocka_unit_test(test_retry_decisions_and_summary),
        cmocka_unit_test(test_token_secrets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
