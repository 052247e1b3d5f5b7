/*
 * Unit tests of the inbound pieces without a daemon: the JSON Pointer lookup
 * the receiver uses (core/json_pointer.h) (RFC 6901 escapes, arrays, refusals), locators, and source
 * definitions (field rules, PATCH keeping secrets, the store row round trip,
 * "unchanged" detection).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/json_pointer.h"
#include "inbound/processor.h"
#include "inbound/source_def.h"
#include "net/http_client.h"
#include "ops/api_common.h"

#define SECRET "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define SECRET2 "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"

static void test_pointer(void **state)
{
    json_t *doc = json_loads("{\"a/b\":{\"m~n\":[10,{\"x\":\"y\"}]},\"\":1,\"n\":null}", 0, NULL);
    json_t *v;

    assert_non_null(doc);
    assert_int_equal(json_pointer_get(doc, "/a~1b/m~0n/1/x", &v, NULL), 0);
    assert_string_equal(json_string_value(v), "y");
    assert_int_equal(json_pointer_get(doc, "/a~1b/m~0n/0", &v, NULL), 0);
    assert_int_equal(json_integer_value(v), 10);
    assert_int_equal(json_pointer_get(doc, "/", &v, NULL), 0); /* the member named "" */
    assert_int_equal(json_integer_value(v), 1);
    assert_int_equal(json_pointer_get(doc, "", &v, NULL), 0);
    assert_ptr_equal(v, doc);
    assert_int_equal(json_pointer_get(doc, "/n", &v, NULL), 0);
    assert_true(json_is_null(v));
    assert_int_equal(json_pointer_get(doc, "/missing", &v, NULL), HOOKD_ENOTFOUND);
    assert_int_equal(json_pointer_get(doc, "/a~1b/m~0n/2", &v, NULL), HOOKD_ENOTFOUND);
    assert_int_equal(json_pointer_get(doc, "/a~1b/m~0n/01", &v, NULL), HOOKD_EINVAL);
    assert_int_equal(json_pointer_get(doc, "/a~1b/m~0n/-", &v, NULL), HOOKD_EINVAL);
    assert_int_equal(json_pointer_get(doc, "/a~2b", &v, NULL), HOOKD_EINVAL);
    assert_int_equal(json_pointer_get(doc, "a", &v, NULL), HOOKD_EINVAL);
    assert_int_equal(json_pointer_get(doc, "/n/x", &v, NULL), HOOKD_ENOTFOUND);
    json_decref(doc);
}

static void test_locators(void **state)
{
    enum source_locator_kind k;
    const char *rest;

    assert_true(source_locator_parse("/data/id", &k, &rest));
    assert_int_equal(k, LOCATOR_POINTER);
    assert_true(source_locator_parse("header:X-GitHub-Delivery", &k, &rest));
    assert_int_equal(k, LOCATOR_HEADER);
    assert_string_equal(rest, "X-GitHub-Delivery");
    assert_false(source_locator_parse("header:", &k, &rest));
    assert_false(source_locator_parse("header:a b", &k, &rest));
    assert_false(source_locator_parse("data.id", &k, &rest));
    assert_false(source_locator_parse("/a~x", &k, &rest));
}

static int apply_text(struct source_def *d, const char *text, enum api_body_mode mode, struct api_error *err);

/* The forward classifier: what each answer of the application means. */
static void test_forward_classify(void **state)
{
    static const struct {
        enum transport_error transport;
        int status, outcome;
    } cases[] = {
        {TRANSPORT_OK, 200, FORWARD_OK},      {TRANSPORT_OK, 204, FORWARD_OK},
        {TRANSPORT_OK, 299, FORWARD_OK},      {TRANSPORT_OK, 409, FORWARD_DEFER},
        {TRANSPORT_OK, 425, FORWARD_DEFER},   {TRANSPORT_OK, 400, FORWARD_REJECT},
        {TRANSPORT_OK, 422, FORWARD_REJECT},  {TRANSPORT_OK, 404, FORWARD_REJECT},
        {TRANSPORT_OK, 301, FORWARD_REJECT},  {TRANSPORT_OK, 429, FORWARD_RETRY},
        {TRANSPORT_OK, 500, FORWARD_RETRY},   {TRANSPORT_OK, 503, FORWARD_RETRY},
        {TRANSPORT_TIMEOUT, 0, FORWARD_RETRY}, {TRANSPORT_CONNECT, 0, FORWARD_RETRY},
        {TRANSPORT_BLOCKED, 0, FORWARD_REJECT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct http_client_result r = {.transport = cases[i].transport, .status = cases[i].status};
        assert_int_equal(forward_classify(&r), cases[i].outcome);
    }
}

/* hmac's settings are parsed with the definition; a bad one is refused naming its field. */
static void test_hmac_settings(void **state)
{
    struct source_def d = {0};
    struct api_error err = {0};

    assert_int_equal(apply_text(&d,
                                "{\"name\":\"h\",\"verify\":{\"scheme\":\"hmac\",\"secrets\":[\"k\"],"
                                "\"header\":\"X-Sig\",\"algorithm\":\"sha512\",\"encoding\":\"base64\","
                                "\"prefix\":\"sha512=\",\"timestamp_header\":\"X-Ts\"}}",
                                API_BODY_CREATE, &err),
                     0);
    assert_true(d.has_params);
    assert_int_equal(d.params.algorithm, SIGNATURE_SHA512);
    assert_int_equal(d.params.encoding, SIGNATURE_BASE64);
    assert_string_equal(d.params.prefix, "sha512=");
    assert_string_equal(d.params.timestamp_header, "X-Ts");
    source_def_free(&d);

    memset(&err, 0, sizeof err);
    assert_int_equal(apply_text(&d,
                                "{\"name\":\"h\",\"verify\":{\"scheme\":\"hmac\",\"secrets\":[\"k\"],"
                                "\"header\":\"X-Sig\",\"template\":\"{body}{body}\"}}",
                                API_BODY_CREATE, &err),
                     HOOKD_EINVAL);
    assert_int_equal(err.status, 400);
    assert_non_null(strstr(err.message, "verify.template"));
    source_def_free(&d);

    memset(&err, 0, sizeof err);
    assert_int_equal(apply_text(&d, "{\"name\":\"h\",\"verify\":{\"scheme\":\"hmac\",\"secrets\":[\"k\"]}}",
                                API_BODY_CREATE, &err),
                     HOOKD_EINVAL);
    assert_non_null(strstr(err.message, "verify.header"));
    source_def_free(&d);

    memset(&err, 0, sizeof err);
    assert_int_equal(apply_text(&d,
                                "{\"name\":\"h\",\"verify\":{\"scheme\":\"stripe\",\"secrets\":[\"k\"],"
                                "\"template\":\"{body}\"}}",
                                API_BODY_CREATE, &err),
                     HOOKD_EINVAL);
    source_def_free(&d);
}

static int apply_text(struct source_def *d, const char *text, enum api_body_mode mode, struct api_error *err)
{
    json_t *body = json_loads(text, 0, NULL);
    int rc;

    assert_non_null(body);
    rc = source_def_apply(d, body, mode, 1000, err);
    json_decref(body);
    return rc;
}

static void test_definition_round_trip(void **state)
{
    struct source_def d = {0}, back = {0}, patched = {0};
    struct api_error err = {0};
    struct source rec;

    assert_int_equal(apply_text(&d,
                                "{\"name\":\"gh\",\"verify\":{\"scheme\":\"standard-webhooks\",\"secrets\":[\"" SECRET
                                "\"],\"tolerance\":\"2m\"},\"entity\":{\"kind\":\"order\",\"id\":\"/data/id\"},"
                                "\"required\":[\"/type\"],\"max_body\":4096,\"retry_schedule\":\"1m,5m\"}",
                                API_BODY_CREATE, &err),
                     0);
    assert_int_equal(source_def_to_record(&d, &rec), 0);
    assert_null(strstr(rec.definition, SECRET)); /* the definition holds no key */
    assert_non_null(strstr(rec.secrets, SECRET));
    assert_int_equal(source_def_from_record(&rec, &back), 0);
    assert_true(source_def_same(&d, &back));
    assert_int_equal(back.tolerance_ms, 120000);
    assert_int_equal(back.max_body, 4096);
    assert_int_equal(back.n_retry_schedule, 2);
    assert_string_equal(source_def_event_id(&back).text, "header:webhook-id");

    /* A PATCH of verify without secrets keeps them: the same row, so "unchanged". */
    assert_int_equal(source_def_from_record(&rec, &patched), 0);
    assert_int_equal(apply_text(&patched,
                                "{\"verify\":{\"scheme\":\"standard-webhooks\",\"tolerance\":\"2m\"},"
                                "\"entity\":{\"kind\":\"order\",\"id\":\"/data/id\"}}",
                                API_BODY_PATCH, &err),
                     0);
    assert_true(source_def_same(&back, &patched));
    /* Another key is a change; the old one, kept in the list, keeps its created_at. */
    assert_int_equal(apply_text(&patched,
                                "{\"verify\":{\"scheme\":\"standard-webhooks\",\"secrets\":[\"" SECRET2 "\",\"" SECRET
                                "\"]}}",
                                API_BODY_PATCH, &err),
                     0);
    assert_false(source_def_same(&back, &patched));
    assert_int_equal(patched.n_secrets, 2);
    assert_int_equal(patched.secrets[1].created_at, back.secrets[0].created_at);
    source_free(&rec);
    source_def_free(&d);
    source_def_free(&back);
    source_def_free(&patched);
}

static void test_definition_refusals(void **state)
{
    static const struct {
        const char *body, *code, *field;
    } cases[] = {
        {"{\"name\":\"a\",\"verify\":{\"scheme\":\"none\"},\"nope\":1}", "unknown_field", "nope"},
        {"{\"name\":\"a\",\"verify\":{\"scheme\":\"nah\"}}", "invalid_field", "verify.scheme"},
        {"{\"name\":\"a\",\"verify\":{\"scheme\":\"none\",\"secrets\":[\"s\"]}}", "invalid_field", "verify.secrets"},
        {"{\"name\":\"a\",\"verify\":{\"scheme\":\"none\"},\"entity\":{\"id\":\"/x\"}}", "missing_field", "entity.kind"},
        {"{\"name\":\"a\",\"verify\":{\"scheme\":\"none\"},\"handler\":{\"forward\":{\"url\":\"ftp://x\"}}}",
         "invalid_field", "handler.forward.url"},
        {"{\"name\":\"a\",\"verify\":{\"scheme\":\"none\"},\"handler\":{}}", "invalid_field", "handler"},
        {"{\"name\":\"a\",\"verify\":{\"scheme\":\"none\"},\"reconcile\":{}}", "missing_field", "reconcile.url"},
        {"{\"name\":\"a\",\"verify\":{\"scheme\":\"none\"},\"max_body\":0}", "invalid_field", "max_body"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct source_def d = {0};
        struct api_error err = {0};
        assert_int_equal(apply_text(&d, cases[i].body, API_BODY_CREATE, &err), HOOKD_EINVAL);
        assert_string_equal(err.code, cases[i].code);
        assert_memory_equal(err.message, cases[i].field, strlen(cases[i].field));
        source_def_free(&d);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pointer),
        cmocka_unit_test(test_hmac_settings),
        cmocka_unit_test(test_forward_classify),
        cmocka_unit_test(test_locators),
        cmocka_unit_test(test_definition_round_trip),
        cmocka_unit_test(test_definition_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
