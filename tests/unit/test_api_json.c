/*
 * Admin API helpers: endpoint body validation (errors name the field), URL
 * checks, secret rotation, token comparison, and records as JSON.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/signature.h"
#include "ops/api_common.h"

#define T0 1700000000000LL /* 2023-11-14T22:13:20.000Z */

static json_t *parse(const char *text)
{
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    return j;
}

/* Applies body to a fresh endpoint; returns the result, keeps ep and err for inspection. */
static int apply(const char *body, enum api_body_mode mode, struct endpoint *ep, struct api_error *err)
{
    json_t *j = parse(body);
    memset(ep, 0, sizeof *ep);
    memset(err, 0, sizeof *err);
    int rc = api_endpoint_apply(ep, j, mode, err);
    json_decref(j);
    return rc;
}

/* ---- endpoint bodies ------------------------------------------------------------ */

static void test_apply_full_body(void **state)
{
    struct endpoint ep;
    struct api_error err;
    const char *secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    char body[1024];

    snprintf(body, sizeof body,
             "{\"url\": \"https://hooks.example.com:8443/in?x=1\", \"account\": \"acme\", "
             "\"event_types\": [\"order.*\", \"invoice.paid\"], \"secret\": \"%s\", \"ordering\": \"key\", "
             "\"max_in_flight\": 4, \"rate_limit\": 50, \"timeout\": \"2500ms\", \"retry_schedule\": \"1s, 30s,2m\", "
             "\"description\": \"orders\"}",
             secret);
    assert_int_equal(apply(body, API_BODY_CREATE, &ep, &err), 0);
    assert_string_equal(ep.url, "https://hooks.example.com:8443/in?x=1");
    assert_string_equal(ep.account, "acme");
    assert_string_equal(ep.description, "orders");
    assert_int_equal(ep.n_event_types, 2);
    assert_string_equal(ep.event_types[0], "order.*");
    assert_string_equal(ep.event_types[1], "invoice.paid");
    assert_int_equal(ep.n_secrets, 1);
    assert_string_equal(ep.secrets[0].key, secret);
    assert_int_equal(ep.secrets[0].expires_at, 0);
    assert_int_equal(ep.ordering, ORDERING_KEY);
    assert_int_equal(ep.max_in_flight, 4);
    assert_int_equal(ep.rate_limit, 50);
    assert_int_equal(ep.timeout_ms, 2500);
    assert_int_equal(ep.n_retry_schedule, 3);
    assert_int_equal(ep.retry_schedule_ms[0], 1000);
    assert_int_equal(ep.retry_schedule_ms[1], 30000);
    assert_int_equal(ep.retry_schedule_ms[2], 120000);
    endpoint_free(&ep);

    /* The schedule as an array; only url given: a secret is generated. */
    assert_int_equal(apply("{\"url\": \"http://127.0.0.1:9000/h\", \"retry_schedule\": [\"10s\", \"1h\"]}",
                           API_BODY_CREATE, &ep, &err),
                     0);
    assert_int_equal(ep.n_retry_schedule, 2);
    assert_int_equal(ep.retry_schedule_ms[1], 3600000);
    assert_int_equal(ep.n_secrets, 1);
    assert_true(secret_is_valid(ep.secrets[0].key));
    assert_int_equal(strncmp(ep.secrets[0].key, "whsec_", 6), 0);
    assert_null(ep.account);
    assert_int_equal(ep.n_event_types, 0);
    endpoint_free(&ep);
}

/* The body is refused with this code, and the message starts with (or contains) the field. */
static void assert_refused(const char *body, enum api_body_mode mode, const char *code, const char *field)
{
    struct endpoint ep;
    struct api_error err;

    assert_int_equal(apply(body, mode, &ep, &err), HOOKD_EINVAL);
    assert_int_equal(err.status, 400);
    assert_string_equal(err.code, code);
    if (strstr(err.message, field) == NULL)
        fail_msg("message '%s' does not name '%s' (body %s)", err.message, field, body);
    endpoint_free(&ep);
}

static void test_apply_missing_url(void **state)
{
    assert_refused("{}", API_BODY_CREATE, "missing_field", "url");
    assert_refused("{\"account\": \"a\"}", API_BODY_CREATE, "missing_field", "url is required");
    assert_refused("{\"url\": null}", API_BODY_CREATE, "invalid_field", "url:");
}

static void test_apply_bad_urls(void **state)
{
    static const char *const bad[] = {
        "ftp://example.com/x", "not a url", "http://", "file:///etc/passwd", "http:///path",
        "https://user:pw@example.com/", "http://exa mple.com/", "http://example.com:0/", "http://example.com:99999/",
        "http://example.com:/", "http://[zz::1]/", "http://.example.com/", "javascript:alert(1)", "",
        "http://ex\\ample.com/", "http://example.com/caf\xc3\xa9",
    };
    char body[256];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *j = json_pack("{s:s}", "url", bad[i]);
        char *text = json_dumps(j, 0);
        snprintf(body, sizeof body, "%s", text);
        free(text);
        json_decref(j);
        assert_refused(body, API_BODY_CREATE, "invalid_field", "url: ");
    }
    assert_refused("{\"url\": 42}", API_BODY_CREATE, "invalid_field", "url: must be a string");
}

static void test_url_check_accepts(void **state)
{
    static const char *const good[] = {
        "http://example.com", "https://example.com/", "HTTPS://Example.COM:443/a/b?c=d#e", "http://127.0.0.1:8080/hook",
        "http://[::1]:9000/x", "http://localhost", "http://my_host.internal:1/",
    };
    char why[128];
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        if (api_url_check(good[i], why, sizeof why) != 0)
            fail_msg("%s refused: %s", good[i], why);
    }
    assert_int_equal(api_url_check("ftp://x", why, sizeof why), HOOKD_EINVAL);
    assert_non_null(strstr(why, "http"));
}

static void test_apply_bad_fields(void **state)
{
    assert_refused("{\"url\": \"http://a.b\", \"event_types\": [\"order.*\", \"bad type\"]}", API_BODY_CREATE,
                   "invalid_field", "event_types:");
    assert_refused("{\"url\": \"http://a.b\", \"event_types\": \"order.*\"}", API_BODY_CREATE, "invalid_field",
                   "event_types:");
    assert_refused("{\"url\": \"http://a.b\", \"event_types\": [\"*.order\"]}", API_BODY_CREATE, "invalid_field",
                   "event_types:");
    assert_refused("{\"url\": \"http://a.b\", \"secret\": \"whsec_c2hvcnQ=\"}", API_BODY_CREATE, "invalid_field",
                   "secret:");
    assert_refused("{\"url\": \"http://a.b\", \"ordering\": \"fifo\"}", API_BODY_CREATE, "invalid_field",
                   "ordering:");
    assert_refused("{\"url\": \"http://a.b\", \"max_in_flight\": -1}", API_BODY_CREATE, "invalid_field",
                   "max_in_flight:");
    assert_refused("{\"url\": \"http://a.b\", \"max_in_flight\": \"4\"}", API_BODY_CREATE, "invalid_field",
                   "max_in_flight:");
    assert_refused("{\"url\": \"http://a.b\", \"rate_limit\": 1.5}", API_BODY_CREATE, "invalid_field",
                   "rate_limit:");
    assert_refused("{\"url\": \"http://a.b\", \"timeout\": \"soon\"}", API_BODY_CREATE, "invalid_field",
                   "timeout:");
    assert_refused("{\"url\": \"http://a.b\", \"timeout\": \"0s\"}", API_BODY_CREATE, "invalid_field", "timeout:");
    assert_refused("{\"url\": \"http://a.b\", \"retry_schedule\": \"1s,x\"}", API_BODY_CREATE, "invalid_field",
                   "retry_schedule:");
    assert_refused("{\"url\": \"http://a.b\", \"retry_schedule\": [\"1s\", 2]}", API_BODY_CREATE, "invalid_field",
                   "retry_schedule:");
    assert_refused("{\"url\": \"http://a.b\", \"account\": \"a\\nb\"}", API_BODY_CREATE, "invalid_field",
                   "account:");
    assert_refused("{\"url\": \"http://a.b\", \"description\": 7}", API_BODY_CREATE, "invalid_field",
                   "description:");
}

static void test_apply_unknown_field(void **state)
{
    assert_refused("{\"url\": \"http://a.b\", \"colour\": \"red\"}", API_BODY_CREATE, "unknown_field", "colour");
    assert_refused("{\"enabled\": false}", API_BODY_PATCH, "unknown_field", "enabled");
}

static void test_apply_patch(void **state)
{
    struct endpoint ep;
    struct api_error err;

    /* PATCH needs no url, and clears optional fields with null. */
    assert_int_equal(apply("{\"description\": \"x\", \"timeout\": null, \"event_types\": []}", API_BODY_PATCH, &ep,
                           &err),
                     0);
    assert_null(ep.url);
    assert_string_equal(ep.description, "x");
    assert_int_equal(ep.n_secrets, 0);
    endpoint_free(&ep);
    assert_refused("{\"secret\": \"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"}", API_BODY_PATCH, "invalid_field",
                   "secret:");

    /* A second apply replaces earlier values without leaking (ASan). */
    json_t *a = parse("{\"url\": \"http://a.b\", \"event_types\": [\"a.*\"], \"account\": \"x\"}");
    json_t *b = parse("{\"url\": \"http://c.d\", \"event_types\": [\"b.one\", \"b.two\"], \"account\": \"\"}");
    memset(&ep, 0, sizeof ep);
    assert_int_equal(api_endpoint_apply(&ep, a, API_BODY_CREATE, &err), 0);
    assert_int_equal(api_endpoint_apply(&ep, b, API_BODY_PATCH, &err), 0);
    assert_string_equal(ep.url, "http://c.d");
    assert_int_equal(ep.n_event_types, 2);
    assert_string_equal(ep.event_types[1], "b.two");
    assert_null(ep.account);
    json_decref(a);
    json_decref(b);
    endpoint_free(&ep);
}

/* ---- rotation ------------------------------------------------------------------- */

static void add_secret(struct endpoint *ep, const char *key, int64_t expires_at, int64_t created_at)
{
    ep->secrets[ep->n_secrets++] = (struct endpoint_secret){strdup(key), expires_at, created_at};
}

static void test_rotate(void **state)
{
    struct endpoint ep = {0};
    const int64_t grace = 3600000;

    add_secret(&ep, "whsec_current", 0, T0 - 1000);
    add_secret(&ep, "whsec_soon", T0 + 60000, T0 - 2000);    /* expires before now+grace: kept as is */
    add_secret(&ep, "whsec_expired", T0 - 1, T0 - 3000);     /* already expired: dropped */
    add_secret(&ep, "whsec_late", T0 + 2 * grace, T0 - 4000); /* capped at now+grace */
    assert_int_equal(api_endpoint_rotate(&ep, "whsec_new", T0, grace), 0);
    assert_int_equal(ep.n_secrets, 4);
    assert_string_equal(ep.secrets[0].key, "whsec_new");
    assert_int_equal(ep.secrets[0].expires_at, 0);
    assert_int_equal(ep.secrets[0].created_at, T0);
    assert_string_equal(ep.secrets[1].key, "whsec_current");
    assert_int_equal(ep.secrets[1].expires_at, T0 + grace);
    assert_string_equal(ep.secrets[2].key, "whsec_soon");
    assert_int_equal(ep.secrets[2].expires_at, T0 + 60000);
    assert_string_equal(ep.secrets[3].key, "whsec_late");
    assert_int_equal(ep.secrets[3].expires_at, T0 + grace);

    /* Full: the oldest falls off. A zero grace drops every older secret. */
    assert_int_equal(api_endpoint_rotate(&ep, "whsec_newer", T0 + 1, grace), 0);
    assert_int_equal(ep.n_secrets, ENDPOINT_MAX_SECRETS);
    assert_string_equal(ep.secrets[0].key, "whsec_newer");
    assert_string_equal(ep.secrets[1].key, "whsec_new");
    assert_string_equal(ep.secrets[3].key, "whsec_soon");
    assert_int_equal(api_endpoint_rotate(&ep, "whsec_final", T0 + 2, 0), 0);
    assert_int_equal(ep.n_secrets, 1);
    assert_string_equal(ep.secrets[0].key, "whsec_final");
    endpoint_free(&ep);
}

static void test_token_equal(void **state)
{
    assert_true(api_token_equal("tok-123", "tok-123"));
    assert_false(api_token_equal("tok-123", "tok-124"));
    assert_false(api_token_equal("tok-123", "tok-1234"));
    assert_false(api_token_equal("tok-123", ""));
    assert_false(api_token_equal("", ""));
    assert_false(api_token_equal("tok", NULL));
}

/* ---- records as JSON ------------------------------------------------------------- */

static const char *str(const json_t *o, const char *key) { return json_string_value(json_object_get(o, key)); }

static void test_endpoint_json(void **state)
{
    struct endpoint ep = {.id = "ep_1", .enabled = true, .created_at = T0, .updated_at = T0 + 1};

    ep.url = strdup("http://a.b/h");
    ep.event_types[ep.n_event_types++] = strdup("order.*");
    ep.retry_schedule_ms[0] = 1000;
    ep.retry_schedule_ms[1] = 120000;
    ep.n_retry_schedule = 2;
    add_secret(&ep, "whsec_newest", 0, T0);
    add_secret(&ep, "whsec_older", T0 + 5000, T0 - 10);
    add_secret(&ep, "whsec_gone", T0 - 5000, T0 - 20);

    json_t *j = api_endpoint_json(&ep, false, T0);
    assert_string_equal(str(j, "id"), "ep_1");
    assert_string_equal(str(j, "url"), "http://a.b/h");
    assert_true(json_is_null(json_object_get(j, "account")));
    assert_true(json_is_true(json_object_get(j, "enabled")));
    assert_string_equal(str(j, "ordering"), "none");
    assert_true(json_is_null(json_object_get(j, "timeout")));
    assert_true(json_is_null(json_object_get(j, "max_in_flight")));
    assert_string_equal(str(j, "retry_schedule"), "1s,2m");
    assert_string_equal(json_string_value(json_array_get(json_object_get(j, "event_types"), 0)), "order.*");
    assert_string_equal(str(j, "created_at"), "2023-11-14T22:13:20.000Z");
    assert_string_equal(str(j, "updated_at"), "2023-11-14T22:13:20.001Z");
    assert_null(json_object_get(j, "secret"));
    assert_null(json_object_get(j, "secrets"));
    json_decref(j);

    j = api_endpoint_json(&ep, true, T0);
    assert_string_equal(str(j, "secret"), "whsec_newest");
    json_t *secrets = json_object_get(j, "secrets");
    assert_int_equal(json_array_size(secrets), 2); /* the expired one is not listed */
    assert_true(json_is_null(json_object_get(json_array_get(secrets, 0), "expires_at")));
    assert_string_equal(str(json_array_get(secrets, 1), "expires_at"), "2023-11-14T22:13:25.000Z");
    char *text = json_dumps(j, 0);
    assert_null(strstr(text, "whsec_older")); /* older keys are never shown */
    free(text);
    json_decref(j);
    endpoint_free(&ep);
}

static void test_event_json(void **state)
{
    struct event ev = {.id = "evt_1", .created_at = T0};
    ev.type = strdup("order.paid");
    ev.payload = strdup("{\"n\":1,\"s\":\"x\"}");

    json_t *j = api_event_json(&ev);
    assert_string_equal(str(j, "id"), "evt_1");
    assert_string_equal(str(j, "type"), "order.paid");
    assert_true(json_is_null(json_object_get(j, "account")));
    assert_true(json_is_null(json_object_get(j, "resource")));
    assert_true(json_is_null(json_object_get(j, "dispatched_at")));
    assert_true(json_is_null(json_object_get(j, "idempotency_key")));
    json_t *want = parse("{\"s\":\"x\",\"n\":1}");
    assert_true(json_equal(json_object_get(j, "data"), want));
    json_decref(want);
    json_decref(j);

    ev.resource_type = strdup("order");
    ev.has_resource_version = true;
    ev.resource_version = 7;
    free(ev.payload);
    ev.payload = strdup("42");
    j = api_event_json(&ev);
    json_t *r = json_object_get(j, "resource");
    assert_string_equal(str(r, "type"), "order");
    assert_true(json_is_null(json_object_get(r, "id")));
    assert_int_equal(json_integer_value(json_object_get(r, "version")), 7);
    assert_int_equal(json_integer_value(json_object_get(j, "data")), 42);
    json_decref(j);
    event_free(&ev);
}

static void test_delivery_and_attempt_json(void **state)
{
    struct delivery d = {.id = "dlv_1", .event_id = "evt_1", .endpoint_id = "ep_1", .status = DELIVERY_RETRYING,
                         .attempt_count = 2, .next_attempt_at = T0, .created_at = T0 - 1000};
    d.last_error = strdup("HTTP 503");

    json_t *j = api_delivery_json(&d);
    assert_string_equal(str(j, "status"), "retrying");
    assert_int_equal(json_integer_value(json_object_get(j, "attempt_count")), 2);
    assert_string_equal(str(j, "next_attempt_at"), "2023-11-14T22:13:20.000Z");
    assert_true(json_is_null(json_object_get(j, "last_status_code")));
    assert_true(json_is_null(json_object_get(j, "delivered_at")));
    assert_true(json_is_null(json_object_get(j, "account")));
    assert_string_equal(str(j, "last_error"), "HTTP 503");
    assert_null(json_object_get(j, "lease_owner"));
    json_decref(j);
    delivery_free(&d);

    struct attempt a = {.n = 1, .started_at = T0, .duration_ms = 2000};
    a.error_class = strdup("timeout");
    a.error = strdup("Operation timed out after 2000 milliseconds");
    j = api_attempt_json(&a);
    assert_int_equal(json_integer_value(json_object_get(j, "n")), 1);
    assert_true(json_is_null(json_object_get(j, "status_code")));
    assert_string_equal(str(j, "error"), "timeout: Operation timed out after 2000 milliseconds");
    assert_true(json_is_null(json_object_get(j, "response")));
    json_decref(j);
    attempt_free(&a);

    struct attempt b = {.n = 2, .started_at = T0, .status_code = 200};
    b.response = strdup("ok");
    j = api_attempt_json(&b);
    assert_int_equal(json_integer_value(json_object_get(j, "status_code")), 200);
    assert_true(json_is_null(json_object_get(j, "error")));
    assert_string_equal(str(j, "response"), "ok");
    assert_string_equal(str(j, "response_encoding"), "utf-8");
    assert_false(json_is_true(json_object_get(j, "response_truncated")));
    assert_null(json_object_get(j, "response_base64"));
    json_decref(j);
    attempt_free(&b);

    /* Text with NULs stays text; bytes that are not UTF-8 are base64 with a flag. */
    struct attempt c = {.n = 3, .started_at = T0, .status_code = 500, .response = "a\0b", .response_len = 3};
    j = api_attempt_json(&c);
    assert_int_equal(json_string_length(json_object_get(j, "response")), 3);
    assert_memory_equal(json_string_value(json_object_get(j, "response")), "a\0b", 3);
    json_decref(j);
    struct attempt e = {.n = 4, .started_at = T0, .status_code = 500, .response = "caf\xe9", .response_len = 4,
                        .response_truncated = true};
    j = api_attempt_json(&e);
    assert_true(json_is_null(json_object_get(j, "response")));
    assert_string_equal(str(j, "response_encoding"), "base64");
    assert_string_equal(str(j, "response_base64"), "Y2Fm6Q==");
    assert_true(json_is_true(json_object_get(j, "response_truncated")));
    json_decref(j);
}

static void test_list_json(void **state)
{
    json_t *j = api_list_json(json_array(), NULL);
    assert_true(json_is_array(json_object_get(j, "data")));
    assert_true(json_is_null(json_object_get(j, "next_cursor")));
    json_decref(j);
    j = api_list_json(json_array(), "ep_9");
    assert_string_equal(str(j, "next_cursor"), "ep_9");
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_apply_full_body),
        cmocka_unit_test(test_apply_missing_url),
        cmocka_unit_test(test_apply_bad_urls),
        cmocka_unit_test(test_url_check_accepts),
        cmocka_unit_test(test_apply_bad_fields),
        cmocka_unit_test(test_apply_unknown_field),
        cmocka_unit_test(test_apply_patch),
        cmocka_unit_test(test_rotate),
        cmocka_unit_test(test_token_equal),
        cmocka_unit_test(test_endpoint_json),
        cmocka_unit_test(test_event_json),
        cmocka_unit_test(test_delivery_and_attempt_json),
        cmocka_unit_test(test_list_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
