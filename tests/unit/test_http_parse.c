/*
 * The HTTP/1.1 request parser: a table of raw requests and their outcome
 * (a parsed request with its body, or the status and code of the refusal),
 * each fed in one piece and split at every byte boundary, with the same result.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/http_parse.h"

struct outcome {
    int status; /* 0: parsed; -1: incomplete */
    const char *code;
    char method[16];
    char target[64];
    char header[64]; /* the value of X-T, when present */
    char body[64];
    size_t body_len;
    size_t consumed; /* bytes of the input the request took */
    bool keep_alive;
};

/* Feeds raw[0..n) step bytes at a time, as a connection would; see http_parse_head and http_parse_body. */
static void run(const char *raw, size_t n, size_t step, struct outcome *o)
{
    char *buf = malloc(n + 1);
    struct http_parser p;
    size_t have = 0, pos = 0;
    int rc;

    assert_non_null(buf);
    memset(o, 0, sizeof *o);
    http_parse_init(&p);
    for (;;) {
        size_t add = n - have < step ? n - have : step;
        memcpy(buf + have, raw + have, add);
        have += add;
        rc = http_parse_head(&p, buf, have);
        if (rc != HTTP_PARSE_MORE)
            break;
        if (have == n) {
            o->status = -1;
            goto out;
        }
    }
    if (rc == HTTP_PARSE_ERROR)
        goto refused;
    assert_int_equal(rc, HTTP_PARSE_DONE);
    snprintf(o->method, sizeof o->method, "%s", buf + p.method);
    snprintf(o->target, sizeof o->target, "%s", buf + p.target);
    const char *xt = http_parse_header(&p, buf, "x-t");
    snprintf(o->header, sizeof o->header, "%s", xt ? xt : "");
    o->keep_alive = p.keep_alive;
    pos = p.head_len;
    for (;;) {
        size_t used;
        const char *data;
        size_t len;
        rc = http_parse_body(&p, buf + pos, have - pos, &used, &data, &len);
        assert_true(used <= have - pos);
        pos += used;
        if (rc == HTTP_PARSE_DATA) {
            assert_true(o->body_len + len < sizeof o->body);
            memcpy(o->body + o->body_len, data, len);
            o->body_len += len;
            continue;
        }
        if (rc == HTTP_PARSE_ERROR)
            goto refused;
        if (rc == HTTP_PARSE_DONE)
            break;
        if (used > 0)
            continue;
        if (have == n) {
            o->status = -1;
            goto out;
        }
        size_t add = n - have < step ? n - have : step;
        memcpy(buf + have, raw + have, add);
        have += add;
    }
    o->consumed = pos;
    goto out;
refused:
    o->status = p.status;
    o->code = p.code;
    assert_non_null(p.message);
out:
    free(buf);
}

struct parse_case {
    const char *raw;
    size_t len;       /* 0: strlen(raw) */
    int status;       /* 0: parsed */
    const char *code; /* of the refusal, or the method when parsed */
    const char *target;
    const char *body;
    bool keep_alive;
};

#define OK(raw, method, target, body, ka) {raw, 0, 0, method, target, body, ka}
#define NO(raw, status, code) {raw, 0, status, code, NULL, NULL, false}
#define NO_N(raw, status, code) {raw, sizeof raw - 1, status, code, NULL, NULL, false}

static const struct parse_case cases[] = {
    OK("GET / HTTP/1.1\r\nHost: x\r\n\r\n", "GET", "/", "", true),
    OK("GET /a?b=c%20d HTTP/1.0\r\n\r\n", "GET", "/a?b=c%20d", "", false),
    OK("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", "GET", "/", "", true),
    OK("GET / HTTP/1.1\r\nConnection: foo, close\r\n\r\n", "GET", "/", "", false),
    OK("\r\n\r\nGET /x HTTP/1.1\r\n\r\n", "GET", "/x", "", true),
    OK("POST /p HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", "POST", "/p", "hello", true),
    OK("POST /p HTTP/1.1\r\nContent-Length: 0\r\n\r\n", "POST", "/p", "", true),
    OK("POST /p HTTP/1.1\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\nhello", "POST", "/p", "hello", true),
    OK("POST /p HTTP/1.1\r\nContent-Length: 00005\r\n\r\nhello", "POST", "/p", "hello", true),
    OK("POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;name=val\r\nabc\r\n2\r\nde\r\n0\r\nX-Y: 1\r\n\r\n",
       "POST", "/c", "abcde", true),
    OK("POST /c HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n", "POST", "/c",
       "0123456789", true),
    OK("POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "POST", "/c", "", true),
    OK("PATCH /x HTTP/1.1\r\nX-T: \t a b \t\r\n\r\n", "PATCH", "/x", "", true),
    OK("GET /x HTTP/1.1\r\nX-T: caf\xc3\xa9\r\n\r\n", "GET", "/x", "", true),

    NO("GET / HTTP/2.0\r\n\r\n", 505, "http_version_not_supported"),
    NO("GET / HTTP/0.9\r\n\r\n", 505, "http_version_not_supported"),
    NO("GET / HTTP/1.2\r\n\r\n", 505, "http_version_not_supported"),
    NO("GET / HTTX/1.1\r\n\r\n", 400, "invalid_request"),
    NO("GET / HTTP/1.1 \r\n\r\n", 400, "invalid_request"),
    NO("GET / HTTP/11\r\n\r\n", 400, "invalid_request"),
    NO("GET /  HTTP/1.1\r\n\r\n", 400, "invalid_request"),
    NO("GET HTTP/1.1\r\n\r\n", 400, "invalid_request"),
    NO("GE@T / HTTP/1.1\r\n\r\n", 400, "invalid_request"),
    NO(" GET / HTTP/1.1\r\n\r\n", 400, "invalid_request"),
    NO("GET foo HTTP/1.1\r\n\r\n", 400, "invalid_request"),
    NO("GET http://x/ HTTP/1.1\r\n\r\n", 400, "invalid_request"),
    NO("GET /\x7f HTTP/1.1\r\n\r\n", 400, "invalid_request"),
    NO("GET / HTTP/1.1\n\n", 400, "invalid_request"),
    NO("GET / HTTP/1.1\r\nHost: x\n\r\n", 400, "invalid_request"),
    NO("GET / HTTP/1.1\r\nX-A: a\r\n b\r\n\r\n", 400, "invalid_header"),
    NO("GET / HTTP/1.1\r\nHost x\r\n\r\n", 400, "invalid_header"),
    NO("GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400, "invalid_header"),
    NO("GET / HTTP/1.1\r\n: x\r\n\r\n", 400, "invalid_header"),
    NO("GET / HTTP/1.1\r\nX\x01Y: x\r\n\r\n", 400, "invalid_header"),
    NO("GET / HTTP/1.1\r\nX-A: a\x01z\r\n\r\n", 400, "invalid_header"),
    NO("GET / HTTP/1.1\r\nX-A: a\x7fz\r\n\r\n", 400, "invalid_header"),
    NO("GET / HTTP/1.1\r\nX-A: a\rz\r\n\r\n", 400, "invalid_header"),
    NO_N("GET / HTTP/1.1\r\nAuthorization: Bearer t\0junk\r\n\r\n", 400, "invalid_header"),
    NO("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400, "invalid_header"),
    NO("POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\nhello", 400, "invalid_header"),
    NO("POST / HTTP/1.1\r\nContent-Length: 5a\r\n\r\nhello", 400, "invalid_header"),
    NO("POST / HTTP/1.1\r\nContent-Length: 0x5\r\n\r\nhello", 400, "invalid_header"),
    NO("POST / HTTP/1.1\r\nContent-Length:\r\n\r\n", 400, "invalid_header"),
    NO("POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\nhello", 400, "invalid_header"),
    NO("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", 400, "invalid_header"),
    NO("POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 5\r\n\r\nhello", 400, "invalid_header"),
    NO("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 400,
       "invalid_header"),
    NO("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400, "invalid_header"),
    NO("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "invalid_header"),
    NO("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "not_implemented"),
    NO("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501, "not_implemented"),
    NO("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 501,
       "not_implemented"),
    NO("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nx\r\n", 400, "invalid_body"),
    NO("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n", 400, "invalid_body"),
    NO("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3 junk\r\nabc\r\n0\r\n\r\n", 400, "invalid_body"),
    NO("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\r\n", 400, "invalid_body"),
    NO("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n", 400, "invalid_body"),
    NO("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n0\r\n\r\n", 400, "invalid_body"),
    NO("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\rX0\r\n\r\n", 400, "invalid_body"),
    NO("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1FFFFFFFFFFFFFFFF\r\n", 400, "invalid_body"),
    NO("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;a=\x01\r\nabc\r\n0\r\n\r\n", 400, "invalid_body"),
    NO("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nno colon\r\n\r\n", 400, "invalid_body"),
    NO("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: a\x01\r\n\r\n", 400, "invalid_body"),
    NO("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n folded\r\n\r\n", 400, "invalid_body"),
};

static void check(const struct parse_case *c, const struct outcome *o, size_t step)
{
    if (c->status == 0) {
        if (o->status != 0)
            fail_msg("step %zu: %s: refused %d %s", step, c->raw, o->status, o->code ? o->code : "(incomplete)");
        assert_string_equal(o->method, c->code);
        assert_string_equal(o->target, c->target);
        assert_int_equal(o->body_len, strlen(c->body));
        assert_memory_equal(o->body, c->body, o->body_len);
        assert_int_equal(o->keep_alive, c->keep_alive);
        assert_int_equal(o->consumed, c->len ? c->len : strlen(c->raw));
    } else {
        if (o->status != c->status || !o->code || strcmp(o->code, c->code) != 0)
            fail_msg("step %zu: case '%s': got %d %s, want %d %s", step, c->raw, o->status,
                     o->code ? o->code : "(none)", c->status, c->code);
    }
}

static void test_table_whole_and_every_split(void **state)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct parse_case *c = &cases[i];
        size_t n = c->len ? c->len : strlen(c->raw);
        struct outcome whole, piece;
        run(c->raw, n, n, &whole);
        check(c, &whole, n);
        run(c->raw, n, 1, &piece);
        check(c, &piece, 1);
        /* Pieces of every size: every byte boundary is a split. */
        for (size_t at = 1; at < n; at++) {
            run(c->raw, n, at, &piece);
            check(c, &piece, at);
        }
    }
}

static void test_header_value_trimmed(void **state)
{
    struct outcome o;
    const char *raw = "PATCH /x HTTP/1.1\r\nX-T: \t a b \t\r\n\r\n";
    run(raw, strlen(raw), 1, &o);
    assert_int_equal(o.status, 0);
    assert_string_equal(o.header, "a b");
}

static void test_pipelined_requests_end_where_they_should(void **state)
{
    const char *raw = "POST /a HTTP/1.1\r\nContent-Length: 2\r\n\r\nhiGET /b HTTP/1.1\r\n\r\n";
    struct outcome o;
    run(raw, strlen(raw), 1, &o);
    assert_int_equal(o.status, 0);
    assert_string_equal(o.body, "hi");
    assert_int_equal(o.consumed, strlen("POST /a HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi"));
    const char *chunked = "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\nGET /b HTTP/1.1\r\n\r\n";
    run(chunked, strlen(chunked), 3, &o);
    assert_int_equal(o.status, 0);
    assert_int_equal(o.consumed, strlen(chunked) - strlen("GET /b HTTP/1.1\r\n\r\n"));
}

/* A request of head bytes: "GET /<path> HTTP/1.1", filler headers up to head bytes. */
static char *big_request(size_t path_len, size_t header_bytes, int n_headers, size_t *len)
{
    size_t cap = path_len + header_bytes + (size_t)n_headers * 16 + 128;
    char *raw = malloc(cap);
    size_t off = 0;

    assert_non_null(raw);
    off += (size_t)snprintf(raw + off, cap - off, "GET /");
    memset(raw + off, 'a', path_len);
    off += path_len;
    off += (size_t)snprintf(raw + off, cap - off, " HTTP/1.1\r\n");
    if (header_bytes > 0) {
        off += (size_t)snprintf(raw + off, cap - off, "X-Big: ");
        memset(raw + off, 'b', header_bytes);
        off += header_bytes;
        off += (size_t)snprintf(raw + off, cap - off, "\r\n");
    }
    for (int i = 0; i < n_headers; i++)
        off += (size_t)snprintf(raw + off, cap - off, "X-%d: v\r\n", i);
    off += (size_t)snprintf(raw + off, cap - off, "\r\n");
    *len = off;
    return raw;
}

static void expect(char *raw, size_t len, int status, const char *code)
{
    struct outcome o;
    run(raw, len, len, &o);
    assert_int_equal(o.status, status);
    if (code)
        assert_string_equal(o.code, code);
    run(raw, len, 1, &o);
    assert_int_equal(o.status, status);
    if (code)
        assert_string_equal(o.code, code);
    run(raw, len, 4000, &o);
    assert_int_equal(o.status, status);
    free(raw);
}

static void expect_big(size_t path_len, size_t header_bytes, int n_headers, int status, const char *code)
{
    size_t len;
    char *raw = big_request(path_len, header_bytes, n_headers, &len);
    expect(raw, len, status, code);
}

static void test_caps(void **state)
{
    /* A header block just under the cap parses; over it is 431, wherever the bytes are. */
    expect_big(10, HTTP_PARSE_HEAD_MAX - 60, 0, 0, NULL);
    expect_big(10, HTTP_PARSE_HEAD_MAX, 0, 431, "header_too_large");
    expect_big(10, 100 * 1024, 0, 431, "header_too_large");
    expect_big(100 * 1024, 0, 0, 431, "header_too_large");
    /* A target over its cap, inside the header cap: 414. */
    expect_big(HTTP_PARSE_TARGET_MAX + 1, 0, 0, 414, "uri_too_long");
    expect_big(HTTP_PARSE_TARGET_MAX - 1, 0, 0, 0, NULL);
    expect_big(1, 0, HTTP_PARSE_HEADERS_MAX, 0, NULL);
    expect_big(1, 0, HTTP_PARSE_HEADERS_MAX + 1, 431, "header_too_large");

    /* A chunk-size line without an end, and an endless trailer. */
    char raw[HTTP_PARSE_HEAD_MAX + 4096];
    int off = snprintf(raw, sizeof raw, "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;");
    memset(raw + off, 'e', HTTP_PARSE_CHUNK_LINE_MAX);
    expect(strdup(raw), (size_t)off + HTTP_PARSE_CHUNK_LINE_MAX, 400, "invalid_body");
    off = snprintf(raw, sizeof raw, "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: ");
    memset(raw + off, 't', HTTP_PARSE_HEAD_MAX);
    char *copy = malloc((size_t)off + HTTP_PARSE_HEAD_MAX);
    memcpy(copy, raw, (size_t)off + HTTP_PARSE_HEAD_MAX);
    expect(copy, (size_t)off + HTTP_PARSE_HEAD_MAX, 431, "header_too_large");
}

static void test_incomplete_is_more(void **state)
{
    const char *partial[] = {"GET / HTTP/1.1\r\nHost: x\r\n", "GET / HTT", "POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhel",
                             "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n"};
    for (size_t i = 0; i < sizeof partial / sizeof partial[0]; i++) {
        struct outcome o;
        run(partial[i], strlen(partial[i]), 1, &o);
        assert_int_equal(o.status, -1);
    }
}

static void test_percent_decode(void **state)
{
    char a[] = "a%20b+c%2Fd%zz%4";
    assert_int_equal(http_percent_decode(a, strlen(a), true), strlen("a b c/d%zz%4"));
    assert_string_equal(a, "a b c/d%zz%4");
    char b[] = "a+b%2b";
    assert_int_equal(http_percent_decode(b, strlen(b), false), 4);
    assert_string_equal(b, "a+b+");
    char c[] = "x%00y";
    assert_int_equal(http_percent_decode(c, strlen(c), false), -1);
    char d[] = "%C3%A9";
    assert_int_equal(http_percent_decode(d, strlen(d), false), 2);
    assert_string_equal(d, "\xc3\xa9");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_whole_and_every_split),
        cmocka_unit_test(test_header_value_trimmed),
        cmocka_unit_test(test_pipelined_requests_end_where_they_should),
        cmocka_unit_test(test_caps),
        cmocka_unit_test(test_incomplete_is_more),
        cmocka_unit_test(test_percent_decode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
