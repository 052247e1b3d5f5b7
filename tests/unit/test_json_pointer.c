/*
 * JSON Pointer (core/json_pointer.c): RFC 6901 §5's examples, escapes, array
 * indices (leading zeros and "-" refused), absent members, bounds on length
 * and depth; and source field specs (core/field_spec.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include <jansson.h>

#include "core/field_spec.h"
#include "core/json_pointer.h"
#include "hookd.h"

/* RFC 6901 §5. */
static const char rfc_doc[] = "{\"foo\": [\"bar\", \"baz\"], \"\": 0, \"a/b\": 1, \"c%d\": 2, \"e^f\": 3, \"g|h\": 4,"
                              " \"i\\\\j\": 5, \"k\\\"l\": 6, \" \": 7, \"m~n\": 8, \"~1\": 9,"
                              " \"deep\": {\"01\": \"zero-one\", \"arr\": [[1, [2, 3]]]}}";

static json_t *load(void)
{
    json_error_t e;
    json_t *doc = json_loads(rfc_doc, 0, &e);
    assert_non_null(doc);
    return doc;
}

static json_int_t int_at(const json_t *doc, const char *ptr)
{
    json_t *v = NULL;
    const char *problem = "unset";

    assert_int_equal(json_pointer_get(doc, ptr, &v, &problem), 0);
    assert_null(problem);
    assert_true(json_is_integer(v));
    return json_integer_value(v);
}

static void test_rfc_examples(void **state)
{
    json_t *doc = load(), *v = NULL;

    assert_int_equal(json_pointer_get(doc, "", &v, NULL), 0);
    assert_ptr_equal(v, doc);
    assert_int_equal(json_pointer_get(doc, "/foo", &v, NULL), 0);
    assert_true(json_is_array(v));
    assert_int_equal(json_pointer_get(doc, "/foo/0", &v, NULL), 0);
    assert_string_equal(json_string_value(v), "bar");
    assert_int_equal(json_pointer_get(doc, "/foo/1", &v, NULL), 0);
    assert_string_equal(json_string_value(v), "baz");
    assert_int_equal(int_at(doc, "/"), 0);
    assert_int_equal(int_at(doc, "/a~1b"), 1);
    assert_int_equal(int_at(doc, "/c%d"), 2);
    assert_int_equal(int_at(doc, "/e^f"), 3);
    assert_int_equal(int_at(doc, "/g|h"), 4);
    assert_int_equal(int_at(doc, "/i\\j"), 5);
    assert_int_equal(int_at(doc, "/k\"l"), 6);
    assert_int_equal(int_at(doc, "/ "), 7);
    assert_int_equal(int_at(doc, "/m~0n"), 8);
    /* "~01" is "~" then "1", not "/": escapes are undone once, left to right. */
    assert_int_equal(int_at(doc, "/~01"), 9);
    /* "01" is a fine member name; only array steps refuse leading zeros. */
    assert_int_equal(json_pointer_get(doc, "/deep/01", &v, NULL), 0);
    assert_string_equal(json_string_value(v), "zero-one");
    assert_int_equal(int_at(doc, "/deep/arr/0/1/1"), 3);
    json_decref(doc);
}

static void test_errors(void **state)
{
    json_t *doc = load(), *v = NULL;
    const char *problem;
    struct {
        const char *ptr;
        int rc;
    } cases[] = {
        {"foo", HOOKD_EINVAL},          /* no leading '/' */
        {"/foo/-", HOOKD_EINVAL},       /* past the end */
        {"/foo/01", HOOKD_EINVAL},      /* leading zero */
        {"/foo/00", HOOKD_EINVAL},
        {"/foo/+1", HOOKD_EINVAL},
        {"/foo/1e0", HOOKD_EINVAL},
        {"/foo/", HOOKD_EINVAL},        /* an empty token is not an index */
        {"/foo/9999999999", HOOKD_EINVAL},
        {"/~2", HOOKD_EINVAL},          /* bad escape */
        {"/~", HOOKD_EINVAL},
        {"/a~1b~", HOOKD_EINVAL},
        {"/foo/2", HOOKD_ENOTFOUND},    /* out of range */
        {"/foo/999999999", HOOKD_ENOTFOUND},
        {"/nope", HOOKD_ENOTFOUND},
        {"/a/b", HOOKD_ENOTFOUND},      /* unescaped: "a" then "b" */
        {"/foo/0/x", HOOKD_ENOTFOUND},  /* into a string */
        {"/c%d/x", HOOKD_ENOTFOUND},    /* into a number */
        {"//", HOOKD_ENOTFOUND},        /* "" then "" into 0 */
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        v = NULL;
        problem = NULL;
        assert_int_equal(json_pointer_get(doc, cases[i].ptr, &v, &problem), cases[i].rc);
        assert_null(v);
        assert_non_null(problem);
        if (cases[i].rc == HOOKD_EINVAL && strstr(cases[i].ptr, "/foo") != cases[i].ptr)
            assert_int_equal(json_pointer_check(cases[i].ptr, NULL), HOOKD_EINVAL);
    }
    assert_int_equal(json_pointer_get(NULL, "/a", &v, &problem), HOOKD_EINVAL);
    assert_int_equal(json_pointer_get(doc, NULL, &v, &problem), HOOKD_EINVAL);
    json_decref(doc);
}

static void test_bounds(void **state)
{
    char ptr[JSON_POINTER_MAX + 2];
    json_t *doc = json_object(), *cur = doc, *v = NULL;
    const char *problem;

    /* 32 levels found, 33 refused. */
    for (int i = 0; i < 33; i++) {
        json_t *next = json_object();
        json_object_set_new(cur, "a", next);
        cur = next;
    }
    ptr[0] = '\0';
    for (int i = 0; i < 32; i++)
        strncat(ptr, "/a", sizeof ptr - strlen(ptr) - 1);
    assert_int_equal(json_pointer_get(doc, ptr, &v, NULL), 0);
    assert_true(json_is_object(v));
    strncat(ptr, "/a", sizeof ptr - strlen(ptr) - 1);
    assert_int_equal(json_pointer_get(doc, ptr, &v, &problem), HOOKD_EINVAL);
    assert_string_equal(problem, "more than 32 levels");
    /* 256 bytes accepted, 257 refused. */
    memset(ptr, 'x', sizeof ptr);
    ptr[0] = '/';
    ptr[JSON_POINTER_MAX] = '\0';
    assert_int_equal(json_pointer_check(ptr, NULL), 0);
    assert_int_equal(json_pointer_get(doc, ptr, &v, NULL), HOOKD_ENOTFOUND);
    ptr[JSON_POINTER_MAX] = 'x';
    ptr[JSON_POINTER_MAX + 1] = '\0';
    assert_int_equal(json_pointer_check(ptr, &problem), HOOKD_EINVAL);
    assert_string_equal(problem, "longer than 256 bytes");
    json_decref(doc);
}

static void test_field_specs(void **state)
{
    struct field_spec f;
    const char *problem;
    char long_name[80];

    assert_int_equal(field_spec_parse("/data/id", &f, &problem), 0);
    assert_int_equal(f.kind, FIELD_POINTER);
    assert_string_equal(f.text, "/data/id");
    assert_null(problem);
    assert_int_equal(field_spec_parse("header:webhook-id", &f, &problem), 0);
    assert_int_equal(f.kind, FIELD_HEADER);
    assert_string_equal(f.text, "webhook-id");
    assert_int_equal(field_spec_parse("header:X-GitHub-Delivery", &f, NULL), 0);
    assert_string_equal(f.text, "X-GitHub-Delivery");
    assert_int_equal(field_spec_parse("/a~1b/0", &f, NULL), 0);

    const char *bad[] = {"", "data/id", "header:", "header:bad name", "header:x:y", "header:é", "Header:x",
                         "/a~2", "header: x", NULL};
    for (size_t i = 0; bad[i] != NULL; i++) {
        problem = NULL;
        assert_int_equal(field_spec_parse(bad[i], &f, &problem), HOOKD_EINVAL);
        assert_non_null(problem);
    }
    assert_int_equal(field_spec_parse(NULL, &f, &problem), HOOKD_EINVAL);
    /* Header names: 64 characters accepted, 65 refused. */
    memcpy(long_name, "header:", 7);
    memset(long_name + 7, 'h', 65);
    long_name[7 + 64] = '\0';
    assert_int_equal(field_spec_parse(long_name, &f, NULL), 0);
    long_name[7 + 64] = 'h';
    long_name[7 + 65] = '\0';
    assert_int_equal(field_spec_parse(long_name, &f, NULL), HOOKD_EINVAL);
    assert_true(http_token_is_valid("X-Hub-Signature-256", 19, 64));
    assert_false(http_token_is_valid("X-Hub(1)", 8, 64));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc_examples),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_field_specs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
