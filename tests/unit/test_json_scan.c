/*
 * core/json_scan: what it decides, jansson accepts, with the same values at
 * every pointer as json_pointer_get; what it leaves undecided is checked
 * only for being left (handwritten texts, then mutations of them).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/json_pointer.h"
#include "core/json_scan.h"
#include "hookd.h"

static const char *const pointers[] = {"", "/type", "/data/id", "/data", "/a", "/a/b", "/x", "/", "/arr/0",
                                       "/e~1s", "/data/seq", "/n", "/é"};
#define N_POINTERS (sizeof pointers / sizeof pointers[0])

/* json_scan's verdict on text; when decided, jansson must agree on every pointer. */
static bool check(const char *text, size_t len)
{
    struct json_scan_target t[N_POINTERS];
    bool decided;

    for (size_t i = 0; i < N_POINTERS; i++)
        t[i] = (struct json_scan_target){.pointer = pointers[i]};
    decided = json_scan(text, len, t, N_POINTERS);
    if (!decided) {
        /* The pointers json_scan leaves to json_pointer_get (an escape, an array step) make it give up: try
         * without them, so the rest of the text is still compared. */
        size_t n = 0;
        for (size_t i = 0; i < N_POINTERS; i++)
            if (!strchr(pointers[i], '~') && strncmp(pointers[i], "/arr", 4) != 0)
                t[n++] = (struct json_scan_target){.pointer = pointers[i]};
        decided = json_scan(text, len, t, n);
        if (!decided) {
            /* A step into an array stops every pointer that goes below the top: the top alone. */
            t[0] = (struct json_scan_target){.pointer = ""};
            n = 1;
            decided = json_scan(text, len, t, n);
        }
        if (!decided)
            return false;
        for (size_t i = n; i < N_POINTERS; i++)
            t[i] = (struct json_scan_target){.pointer = NULL};
    }
    json_error_t err;
    json_t *doc = json_loadb(text, len, JSON_DECODE_ANY, &err);
    if (!doc)
        fail_msg("decided, but jansson refuses %.*s: %s", (int)len, text, err.text);
    for (size_t i = 0; i < N_POINTERS && t[i].pointer; i++) {
        json_t *v = NULL;
        int rc = json_pointer_get(doc, t[i].pointer, &v, NULL);
        char number[32];
        if (rc == HOOKD_ENOTFOUND) {
            if (t[i].kind != JSON_SCAN_ABSENT)
                fail_msg("%s in %.*s: present to the scan, absent to jansson", t[i].pointer, (int)len, text);
            continue;
        }
        assert_int_equal(rc, 0);
        if (json_is_null(v)) {
            assert_int_equal(t[i].kind, JSON_SCAN_NULL);
        } else if (json_is_integer(v)) {
            assert_int_equal(t[i].kind, JSON_SCAN_INTEGER);
            int k = snprintf(number, sizeof number, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
            assert_int_equal(t[i].len, (size_t)k);
            assert_memory_equal(t[i].text, number, (size_t)k);
        } else if (json_is_string(v)) {
            assert_int_equal(t[i].kind, JSON_SCAN_STRING);
            assert_int_equal(t[i].len, json_string_length(v));
            assert_memory_equal(t[i].text, json_string_value(v), t[i].len);
        } else {
            if (t[i].kind != JSON_SCAN_OTHER)
                fail_msg("%s in %.*s: kind %d to the scan, another to jansson", t[i].pointer, (int)len, text,
                         (int)t[i].kind);
        }
    }
    json_decref(doc);
    return true;
}

static bool check_str(const char *text) { return check(text, strlen(text)); }

/* Decided, with the values compared to jansson's. */
static void test_plain_texts_are_decided(void **state)
{
    static const char *const texts[] = {
        "{\"type\":\"bench.event\",\"data\":{\"seq\":0,\"pad\":\"xxxxxxxx\"}}",
        " \t\r\n{ \"type\" : \"a\" , \"data\" : { \"id\" : 42 } } \n",
        "{\"data\":{\"id\":\"ord_1\"},\"type\":null,\"a\":{\"b\":[1,2,{\"c\":true}]},\"x\":false}",
        "{\"data\":{\"id\":-17,\"seq\":123456789012345678}}",
        "{\"data\":{\"id\":1.25,\"seq\":-0.5},\"n\":0}",
        "{\"type\":\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\",\"\xc3\xa9\":\"yes\"}",
        "{\"pad\":\"with \\\"escapes\\\" \\\\ \\/ \\b\\f\\n\\r\\t \\u00e9 \\uFFFF\",\"type\":\"t\"}",
        "{\"a\":{\"b\":1},\"a\":2}",
        "{\"a\":{\"b\":1},\"a\":{\"b\":\"two\"}}",
        "{\"a\":1,\"a\":null}",
        "{\"\":\"empty name\",\"x\":[[],{},[[[]]]]}",
        "{}", "[]", "\"a string\"", "12", "-3", "0", "true", "null", "[1,\"2\",{\"3\":4}]",
        "{\"data\":{\"id\":\"\"}}",
        "{\"data\":\"not an object\"}",
        "{\"x\":\"\x7f\"}",
    };

    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        if (!check_str(texts[i]))
            fail_msg("not decided: %s", texts[i]);

    /* The values themselves, for one text. */
    struct json_scan_target t[] = {{.pointer = "/type"}, {.pointer = "/data/seq"}, {.pointer = "/data/pad"},
                                   {.pointer = "/missing"}, {.pointer = "/data"}, {.pointer = "/type/x"}};
    const char *body = "{\"type\":\"bench.event\",\"data\":{\"seq\":7,\"pad\":\"xx\"}}";
    assert_true(json_scan(body, strlen(body), t, 6));
    assert_int_equal(t[0].kind, JSON_SCAN_STRING);
    assert_int_equal(t[0].len, strlen("bench.event"));
    assert_memory_equal(t[0].text, "bench.event", t[0].len);
    assert_int_equal(t[1].kind, JSON_SCAN_INTEGER);
    assert_memory_equal(t[1].text, "7", 1);
    assert_int_equal(t[2].kind, JSON_SCAN_STRING);
    assert_int_equal(t[3].kind, JSON_SCAN_ABSENT);
    assert_int_equal(t[4].kind, JSON_SCAN_OTHER);
    assert_int_equal(t[5].kind, JSON_SCAN_ABSENT); /* a step into a string */
}

/* Left to jansson: what it refuses, and what the scan does not vouch for. */
static void test_the_rest_is_left(void **state)
{
    static const struct {
        const char *text;
        size_t len; /* 0: strlen */
    } texts[] = {
        {"", 0}, {" ", 0}, {"{", 0}, {"{\"a\":}", 0}, {"{\"a\" 1}", 0}, {"{\"a\":1,}", 0}, {"[1,]", 0},
        {"{'a':1}", 0}, {"{a:1}", 0}, {"{\"a\":1}}", 0}, {"{\"a\":1} x", 0}, {"01", 0}, {"-", 0}, {"1.", 0},
        {".5", 0}, {"1e5", 0}, {"1E+2", 0}, {"+1", 0}, {"1234567890123456789", 0}, {"tru", 0}, {"nul", 0},
        {"\"\\u0000\"", 0}, {"\"\\ud800\"", 0}, {"\"\\udc00\"", 0}, {"\"\\ud83d\\ude00\"", 0}, {"\"\\x\"", 0},
        {"\"\\u12\"", 0}, {"\"tab\there\"", 0}, {"\"\xc0\xaf\"", 0}, {"\"\xed\xa0\x80\"", 0},
        {"\"\xf4\x90\x80\x80\"", 0}, {"\"\xe2\x82\"", 0}, {"\"\x80\"", 0}, {"\"\xff\"", 0},
        {"\xef\xbb\xbf{}", 0}, {"{\"a\":\"b\"}\0", 10}, {"{\"a\":\0}", 7}, {"\"unterminated", 0},
        {"{\"type\":\"esc\\naped\"}", 0}, /* a target's value with an escape */
        {"{\"ty\\u0070e\":\"x\"}", 0},    /* a name that might be a target's, escaped */
        {"{\"data\":{\"id\":-0}}", 0},    /* jansson's 0 */
        {"{\"arr\":[1]}", 0},             /* a step into an array */
    };

    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        size_t len = texts[i].len ? texts[i].len : strlen(texts[i].text);
        /* Pointers the scan takes (no escape), so that only the text can leave it undecided. */
        struct json_scan_target t[] = {{.pointer = ""}, {.pointer = "/type"}, {.pointer = "/data/id"},
                                       {.pointer = "/a/b"}, {.pointer = "/arr/0"}};
        if (json_scan(texts[i].text, len, t, sizeof t / sizeof t[0]))
            fail_msg("decided: %.*s", (int)len, texts[i].text);
    }

    /* Nesting deeper than the scan goes. */
    char deep[200];
    memset(deep, '[', 40);
    memset(deep + 40, ']', 40);
    deep[80] = '\0';
    struct json_scan_target none[1] = {{.pointer = "/x"}};
    assert_false(json_scan(deep, 80, none, 0));
    assert_false(json_scan(deep, 60, none, 0));
    assert_true(json_scan(deep, 60, none, 0) == false && json_scan("[[[]]]", 6, none, 0));
    /* Pointers it does not take: malformed, escaped, too many. */
    struct json_scan_target bad[1] = {{.pointer = "x"}};
    assert_false(json_scan("{}", 2, bad, 1));
    bad[0].pointer = "/e~1s";
    assert_false(json_scan("{}", 2, bad, 1));
    bad[0].pointer = "/es";
    assert_true(json_scan("{}", 2, bad, 1));
    struct json_scan_target many[JSON_SCAN_TARGETS_MAX + 1];
    for (size_t i = 0; i <= JSON_SCAN_TARGETS_MAX; i++)
        many[i] = (struct json_scan_target){.pointer = "/a"};
    assert_false(json_scan("{}", 2, many, JSON_SCAN_TARGETS_MAX + 1));
    assert_true(json_scan("{}", 2, many, JSON_SCAN_TARGETS_MAX));
}

/* Mutations of the texts above (a byte changed, removed, doubled, or cut): decided ones agree with jansson. */
static void test_mutations_agree_with_jansson(void **state)
{
    static const char *const seeds[] = {
        "{\"type\":\"bench.event\",\"data\":{\"id\":\"a1\",\"seq\":12,\"pad\":\"xyz\"}}",
        "{\"a\":{\"b\":[1,-2.5,true,null,{\"c\":\"\xc3\xa9\"}]},\"a\":{\"b\":3},\"x\":\"\\u00e9\\n\"}",
        "[{\"data\":{\"id\":0}},\"s\",123,-0.75,false]",
        "{\"\xc3\xa9\":\"\xe2\x82\xac\",\"n\":null,\"data\":{\"seq\":-9,\"id\":\"\"}}",
    };
    static const char specials[] = "{}[]\":,\\-.0123456789eEtfnu \t\r\n\x00\x1f\x7f\x80\xbf\xc3\xe2\xed\xf0\xf4\xff";
    uint32_t rnd = 12345;
    size_t decided = 0, total = 0;
    char buf[256];

    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
        size_t n = strlen(seeds[s]);
        for (int round = 0; round < 4000; round++) {
            memcpy(buf, seeds[s], n);
            size_t len = n;
            for (int m = 0; m < 1 + round % 3; m++) {
                rnd = rnd * 1103515245u + 12345u;
                size_t at = (rnd >> 8) % len;
                char c = specials[(rnd >> 20) % (sizeof specials - 1)];
                switch ((rnd >> 4) % 4) {
                case 0:
                    buf[at] = c;
                    break;
                case 1:
                    memmove(buf + at, buf + at + 1, len - at - 1);
                    len--;
                    break;
                case 2:
                    if (len < sizeof buf - 1) {
                        memmove(buf + at + 1, buf + at, len - at);
                        buf[at] = c;
                        len++;
                    }
                    break;
                default:
                    len = at + 1;
                    break;
                }
                if (len == 0)
                    break;
            }
            decided += check(buf, len);
            total++;
        }
    }
    /* Not a vacuous test: a fair share of the mutants stay plain JSON, and each of those was compared. */
    assert_true(decided > total / 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_texts_are_decided),
        cmocka_unit_test(test_the_rest_is_left),
        cmocka_unit_test(test_mutations_agree_with_jansson),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
