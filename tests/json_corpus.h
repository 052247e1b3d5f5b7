/*
 * The JSON corpus: texts hookd must accept or refuse, shared by every test of
 * a path that checks JSON (core/json_check.c directly, hookd_publish(),
 * hookd_publish_pg(), and jansson as a second opinion), so the paths cannot
 * drift apart. A case with jansson_differs is one jansson judges otherwise for
 * its own limits (numbers too large for it), not for the grammar.
 */
#ifndef HOOKD_TESTS_JSON_CORPUS_H
#define HOOKD_TESTS_JSON_CORPUS_H
#include <stdbool.h>
#include <stddef.h>

struct json_case {
    const char *text;
    bool valid;
    bool jansson_differs;
};

#define VALID(t) {(t), true, false}
#define INVALID(t) {(t), false, false}
#define JANSSON_DIFFERS(t) {(t), true, true} /* valid JSON */

static const struct json_case json_corpus[] = {
    /* Values and whitespace. */
    VALID("{}"),
    VALID("[]"),
    VALID("0"),
    VALID("-0"),
    VALID("1.5e-3"),
    VALID("12E+10"),
    VALID("-1.0"),
    VALID("\"\""),
    VALID("true"),
    VALID("false"),
    VALID("null"),
    VALID(" \t\r\n{ \"a\" : [1, 2, {\"b\": null}] } \n"),
    VALID("[[[[[]]]]]"),
    VALID("{\"a\":1,\"b\":{\"c\":[true,false,null]}}"),
    JANSSON_DIFFERS("1e400"),                  /* JSON; too large for a double */
    JANSSON_DIFFERS("123456789012345678901234567890"),
    /* Escapes. */
    VALID("{\"esc\":\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9\"}"),
    VALID("\"\\uD83D\\uDE00\""),           /* a surrogate pair: U+1F600 */
    VALID("\"\\ud83d\\ude00\""),
    VALID("\"\\uFFFF\""),                  /* a noncharacter is still a scalar value */
    VALID("\"\\u0001\""),
    INVALID("\"\\uD83D\""),                 /* a high surrogate alone */
    INVALID("\"\\uD83Dx\""),
    INVALID("\"\\uD83D\\u0041\""),          /* followed by something else */
    INVALID("\"\\uDE00\""),                 /* a low surrogate alone */
    INVALID("\"\\uDE00\\uD83D\""),          /* a pair the wrong way round */
    INVALID("\"\\u0000\""),                 /* U+0000: C strings and jsonb cannot hold it */
    INVALID("\"\\u12G4\""),
    INVALID("\"\\u12\""),
    INVALID("\"a\\x\""),
    /* UTF-8. */
    VALID("\"caf\xc3\xa9\""),
    VALID("\"\xe2\x82\xac \xf0\x9f\x98\x80 \xef\xbf\xbd\""), /* 3- and 4-byte forms */
    VALID("\"\xf4\x8f\xbf\xbf\""),         /* U+10FFFF, the last scalar value */
    INVALID("\"\xc3\""),                    /* truncated */
    INVALID("\"\xc3(\""),
    INVALID("\"\x80\""),                    /* a continuation byte alone */
    INVALID("\"\xc0\xaf\""),                /* overlong "/" */
    INVALID("\"\xe0\x80\xaf\""),            /* overlong, 3 bytes */
    INVALID("\"\xf0\x80\x80\xaf\""),        /* overlong, 4 bytes */
    INVALID("\"\xed\xa0\x80\""),            /* an encoded surrogate (CESU-8) */
    INVALID("\"\xf4\x90\x80\x80\""),        /* beyond U+10FFFF */
    INVALID("\"\xf5\x80\x80\x80\""),
    INVALID("\"\xff\""),
    INVALID("\"caf\xe9\""),                 /* Latin-1 */
    INVALID("\xef\xbb\xbf{}"),              /* a byte order mark */
    /* Grammar. */
    INVALID(""),
    INVALID(" "),
    INVALID("{"),
    INVALID("}"),
    INVALID("["),
    INVALID("]"),
    INVALID("[1,]"),
    INVALID("[,1]"),
    INVALID("{\"a\":1,}"),
    INVALID("{\"a\"}"),
    INVALID("{\"a\" 1}"),
    INVALID("{1:2}"),
    INVALID("{'a':1}"),
    INVALID("01"),
    INVALID("1."),
    INVALID(".5"),
    INVALID("-"),
    INVALID("1e"),
    INVALID("1e+"),
    INVALID("+1"),
    INVALID("0x10"),
    INVALID("NaN"),
    INVALID("Infinity"),
    INVALID("tru"),
    INVALID("nul"),
    INVALID("True"),
    INVALID("\"abc"),
    INVALID("\"tab\there\""),
    INVALID("[1 2]"),
    INVALID("{} {}"),
    INVALID("1 2"),
    INVALID("[1]]"),
    INVALID("[[1]"),
    INVALID("{\"a\":1}}"),
    INVALID("\"a\"\"b\""),
    INVALID("[\"a\\\"]"),
    INVALID("// comment\n{}"),
    INVALID("[1,2,3,]"),
};

#undef VALID
#undef INVALID
#undef JANSSON_DIFFERS

#define JSON_CORPUS_N (sizeof json_corpus / sizeof json_corpus[0])
#endif
