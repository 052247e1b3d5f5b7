/* Unit tests of the pure core: ids, base64, buf, durations, time text, filters, envelope, errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "core/base64.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/duration.h"
#include "core/custom_headers.h"
#include "core/envelope.h"
#include "core/event_check.h"
#include "core/filter.h"
#include "core/ids.h"
#include "core/json_check.h"
#include "json_corpus.h"
#include "core/timefmt.h"
#include "log.h"
#include "core/utf8.h"
#include "hookd.h"

/* ---- ids ---- */

static void test_id_shape(void **state)
{
    char id[HOOKD_ID_MAX];

    clock_pin_ms(INT64_C(0x01a229bde2c7));
    id_new(id, "evt_");
    assert_int_equal(strlen(id), 4 + 12 + 20);
    assert_memory_equal(id, "evt_01a229bde2c7", 16);
    for (size_t i = 4; i < strlen(id); i++)
        assert_non_null(strchr("0123456789abcdef", id[i]));
    assert_true(id_is_valid(id));
    id_new(id, "ep"); /* the underscore is added when missing */
    assert_memory_equal(id, "ep_01a229bde2c7", 15);
    assert_int_equal(strlen(id), 3 + 32);
    clock_pin_ms(0);
}

static int cmp_str(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

/* The outbox rules, as the relay and the API apply them: the reason names the first problem, control characters first. */
static void test_event_check(void **state)
{
    char long_id[65];

    (void)state;
    memset(long_id, 'a', 64);
    long_id[64] = '\0';
    assert_null(event_id_problem("evt_0123-4:5.6_x", 16));
    assert_null(event_id_problem(long_id, 63));
    assert_string_equal(event_id_problem(long_id, 64), "is longer than 63 characters");
    assert_string_equal(event_id_problem("", 0), "is empty");
    assert_string_equal(event_id_problem("evt\r\nX-Injected: yes", 21), "contains control characters");
    assert_string_equal(event_id_problem("evt_\0x", 6), "contains a NUL byte");
    assert_string_equal(event_id_problem("evt_\xc3\xa9", 6), "contains non-ASCII characters");
    assert_string_equal(event_id_problem("evt a", 5), "contains characters other than A-Z a-z 0-9 _ . : -");
    /* A control character anywhere wins over an earlier lesser problem. */
    assert_string_equal(event_id_problem("\xc3\xa9\n", 3), "contains control characters");
    assert_null(event_type_problem("order.paid", 10));
    assert_string_equal(event_type_problem("order:paid", 10), "contains characters other than A-Z a-z 0-9 _ . -");
    assert_null(event_label_problem(NULL, 0));
    assert_null(event_label_problem("", 0));
    assert_null(event_label_problem("M\xc3\xbcller GmbH", 12));
    assert_string_equal(event_label_problem("a\x7f", 2), "contains control characters");
    assert_string_equal(event_label_problem("a\xffme", 4), "is not valid UTF-8");
    assert_string_equal(event_label_problem("\xed\xa0\x80", 3), "is not valid UTF-8"); /* a surrogate */
    assert_string_equal(event_label_problem("\xc0\xaf", 2), "is not valid UTF-8");     /* overlong */
    assert_null(event_label_problem(long_id, 64));
}

static void test_custom_headers(void **state)
{
    (void)state;
    assert_null(custom_header_problem("X-Tenant", "acme", 4));
    assert_null(custom_header_problem("Authorization", "Bearer a\tb", 10));
    assert_null(custom_header_problem("x!#$%&'*+-.^_`|~9", "v", 1));
    assert_non_null(custom_header_problem("webhook-id", "x", 1));
    assert_non_null(custom_header_problem("WEBHOOK-SIGNATURE", "x", 1));
    assert_non_null(custom_header_problem("Content-Length", "1", 1));
    assert_non_null(custom_header_problem("host", "x", 1));
    assert_non_null(custom_header_problem("Transfer-Encoding", "x", 1));
    assert_non_null(custom_header_problem("X Bad", "x", 1));
    assert_non_null(custom_header_problem("X-Bad:", "x", 1));
    assert_non_null(custom_header_problem("", "x", 1));
    assert_non_null(custom_header_problem("X-A", "a\r\nX-Evil: 1", 13));
    assert_non_null(custom_header_problem("X-A", "a\0b", 3));
    assert_non_null(custom_header_problem("X-A", "", 0));
    assert_non_null(custom_header_problem("X-A", " a", 2));
}

static void test_id_unique(void **state)
{
    enum { N = 10000 };
    char(*ids)[HOOKD_ID_MAX] = calloc(N, HOOKD_ID_MAX);

    assert_non_null(ids);
    clock_pin_ms(1700000000000); /* same millisecond: only the random part differs */
    for (int i = 0; i < N; i++)
        id_new(ids[i], "dlv_");
    clock_pin_ms(0);
    qsort(ids, N, HOOKD_ID_MAX, cmp_str);
    for (int i = 1; i < N; i++)
        assert_string_not_equal(ids[i - 1], ids[i]);
    free(ids);
}

/* Ids made one after another sort in that order, in one millisecond and after the clock steps back. */
static void test_id_monotonic(void **state)
{
    char prev[HOOKD_ID_MAX], cur[HOOKD_ID_MAX];

    (void)state;
    clock_pin_ms(1900000000000);
    id_new(prev, "inb_");
    for (int i = 0; i < 2000; i++) {
        clock_pin_ms(i == 1000 ? 1899999990000 : 1900000000000); /* one step back in the middle */
        id_new(cur, "inb_");
        if (strcmp(prev, cur) >= 0)
            fail_msg("%d: %s then %s", i, prev, cur);
        memcpy(prev, cur, sizeof prev);
    }
    clock_pin_ms(0);
}

/* Within a millisecond an id follows the last one; a new millisecond draws a fresh random part. */
static void test_id_fresh_per_millisecond(void **state)
{
    char a[HOOKD_ID_MAX], b[HOOKD_ID_MAX], c[HOOKD_ID_MAX];
    size_t start = strlen("inb_") + 12; /* after the prefix and the 12 digits of the time */

    (void)state;
    clock_pin_ms(1950000000000);
    id_new(a, "inb_");
    id_new(b, "inb_");
    clock_pin_ms(1950000000001);
    id_new(c, "inb_");
    clock_pin_ms(0);
    /* b is a plus one (the low 64 bits of the random part; a carry out of them has odds of 2^-64). */
    assert_true(strtoull(b + strlen(b) - 16, NULL, 16) == strtoull(a + strlen(a) - 16, NULL, 16) + 1);
    assert_true(strcmp(b, c) < 0);
    assert_string_not_equal(a + start, c + start); /* drawn again, not carried over */
    assert_memory_not_equal(a + start, c + start, 12);
}

/*
 * Fresh random parts come from a pool drawn several ids at a time: across
 * more milliseconds than one pool holds, no two repeat, and a forked child
 * draws its own instead of handing out the bytes its parent will.
 */
static void test_id_pool(void **state)
{
    enum { N = 200 };
    char(*ids)[HOOKD_ID_MAX] = calloc(N, HOOKD_ID_MAX);
    char parent[HOOKD_ID_MAX], child[HOOKD_ID_MAX] = "";
    size_t start = strlen("inb_") + 12;
    int fds[2];
    pid_t pid;

    (void)state;
    assert_non_null(ids);
    for (int i = 0; i < N; i++) {
        clock_pin_ms(1960000000000 + 2 * i);
        id_new(ids[i], "inb_");
        memmove(ids[i], ids[i] + start, strlen(ids[i] + start) + 1); /* the random part alone */
    }
    qsort(ids, N, HOOKD_ID_MAX, cmp_str);
    for (int i = 1; i < N; i++)
        assert_string_not_equal(ids[i - 1], ids[i]);
    free(ids);

    clock_pin_ms(1970000000000);
    id_new(parent, "inb_"); /* the pool holds the next ones now */
    clock_pin_ms(1970000000002);
    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        id_new(child, "inb_");
        _exit(write(fds[1], child, strlen(child) + 1) == (ssize_t)(strlen(child) + 1) ? 0 : 1);
    }
    close(fds[1]);
    id_new(parent, "inb_");
    assert_true(read(fds[0], child, sizeof child) > 0);
    close(fds[0]);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    clock_pin_ms(0);
    assert_string_not_equal(parent + start, child + start);
}

static void test_id_sortable(void **state)
{
    char prev[HOOKD_ID_MAX], cur[HOOKD_ID_MAX];
    int64_t t = 1600000000000;

    clock_pin_ms(t);
    id_new(prev, "evt_");
    for (int i = 0; i < 500; i++) {
        t += 1 + i * 7919; /* irregular steps, including hex digit carries */
        clock_pin_ms(t);
        id_new(cur, "evt_");
        assert_true(strcmp(prev, cur) < 0);
        memcpy(prev, cur, sizeof prev);
    }
    clock_pin_ms(0);
    /* Unpinned, the clock is real and recent. */
    assert_true(clock_now_ms() > 1700000000000);
}

static void test_id_is_valid(void **state)
{
    char long_id[80];

    assert_true(id_is_valid("a"));
    assert_true(id_is_valid("order-42:v1.2_x"));
    assert_false(id_is_valid(""));
    assert_false(id_is_valid(NULL));
    assert_false(id_is_valid("has space"));
    assert_false(id_is_valid("slash/no"));
    assert_false(id_is_valid("caf\xc3\xa9"));
    memset(long_id, 'a', 63);
    long_id[63] = '\0';
    assert_true(id_is_valid(long_id));
    long_id[63] = 'a';
    long_id[64] = '\0';
    assert_false(id_is_valid(long_id));
}

/* ---- base64 ---- */

static void test_base64_vectors(void **state)
{
    static const char *const vec[][2] = {{"", ""},         {"f", "Zg=="},         {"fo", "Zm8="},
                                         {"foo", "Zm9v"},  {"foob", "Zm9vYg=="},  {"fooba", "Zm9vYmE="},
                                         {"foobar", "Zm9vYmFy"}};
    char enc[32];
    unsigned char dec[32];

    for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++) {
        size_t n = strlen(vec[i][0]);
        assert_int_equal(base64_encoded_len(n), strlen(vec[i][1]));
        base64_encode(vec[i][0], n, enc);
        assert_string_equal(enc, vec[i][1]);
        assert_int_equal(base64_decode(vec[i][1], strlen(vec[i][1]), dec, sizeof dec), (long)n);
        assert_memory_equal(dec, vec[i][0], n);
    }
    /* Unpadded input is accepted. */
    assert_int_equal(base64_decode("Zm9vYg", 6, dec, sizeof dec), 4);
    assert_memory_equal(dec, "foob", 4);
}

static void test_base64_roundtrip_and_errors(void **state)
{
    unsigned char in[100], out[100];
    char enc[200];

    for (size_t n = 0; n <= sizeof in; n++) {
        random_bytes(in, n);
        base64_encode(in, n, enc);
        assert_int_equal(strlen(enc), base64_encoded_len(n));
        assert_int_equal(base64_decode(enc, strlen(enc), out, sizeof out), (long)n);
        assert_memory_equal(in, out, n);
    }
    assert_int_equal(base64_decode("Zm9v!", 5, out, sizeof out), -1);
    assert_int_equal(base64_decode("Z", 1, out, sizeof out), -1);
    assert_int_equal(base64_decode("Zg=", 3, out, sizeof out), -1);
    assert_int_equal(base64_decode("Z===", 4, out, sizeof out), -1);
    assert_int_equal(base64_decode("Zg==Zg==", 8, out, sizeof out), -1);
    assert_int_equal(base64_decode("Zm9v YmFy", 9, out, sizeof out), -1);
    assert_int_equal(base64_decode("Zm9vYmFy", 8, out, 5), -1); /* out_cap too small */
    assert_int_equal(base64_decode("Zm9vYmFy", 8, out, 6), 6);
}

/* ---- buf ---- */

static void test_buf_max(void **state)
{
    struct buf b;
    char *s;

    buf_init(&b, 10);
    assert_non_null(b.data);
    assert_string_equal(b.data, "");
    assert_int_equal(buf_puts(&b, "0123456789"), 0);
    assert_int_equal(b.len, 10);
    assert_int_equal(buf_append(&b, "x", 1), HOOKD_EINVAL);
    assert_int_equal(buf_printf(&b, "%d", 1), HOOKD_EINVAL);
    assert_int_equal(b.len, 10);
    assert_string_equal(b.data, "0123456789");
    buf_reset(&b);
    assert_int_equal(b.len, 0);
    assert_string_equal(b.data, "");
    assert_int_equal(buf_printf(&b, "%s-%03d", "ab", 7), 0);
    assert_string_equal(b.data, "ab-007");
    assert_int_equal(buf_printf(&b, "%s", "12345"), HOOKD_EINVAL); /* 11 > 10 */
    s = buf_steal(&b);
    assert_string_equal(s, "ab-007");
    assert_int_equal(b.len, 0);
    free(s);
    s = buf_steal(&b); /* never NULL, even with nothing appended */
    assert_non_null(s);
    assert_string_equal(s, "");
    free(s);
    buf_free(&b);

    /* Growth past the initial capacity keeps the content. */
    buf_init(&b, 1 << 20);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(buf_printf(&b, "%04d", i), 0);
    assert_int_equal(b.len, 4000);
    assert_memory_equal(b.data + 3996, "0999", 4);
    assert_int_equal(b.data[4000], '\0');
    buf_free(&b);
}

static void test_buf_json_string(void **state)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"plain", "\"plain\""},
        {"q\"b\\s/", "\"q\\\"b\\\\s/\""},
        {"nl\n cr\r tab\t", "\"nl\\n cr\\r tab\\t\""},
        {"\x01\x1f\x7f", "\"\\u0001\\u001f\x7f\""},
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""},
        {"bad\xff end", "\"bad\\ufffd end\""},
        {"cut\xe2\x82", "\"cut\\ufffd\\ufffd\""},
        {"surrogate\xed\xa0\x80", "\"surrogate\\ufffd\\ufffd\\ufffd\""},
        {"overlong\xc0\xaf", "\"overlong\\ufffd\\ufffd\""},
        {"", "\"\""},
    };
    struct buf b;

    buf_init(&b, 1024);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_error_t jerr;
        json_t *v;
        buf_reset(&b);
        assert_int_equal(buf_json_string(&b, cases[i].in), 0);
        assert_string_equal(b.data, cases[i].out);
        /* Whatever the input, the output is valid JSON. */
        v = json_loads(b.data, JSON_DECODE_ANY, &jerr);
        assert_non_null(v);
        assert_true(json_is_string(v));
        json_decref(v);
    }
    buf_reset(&b);
    assert_int_equal(buf_json_string(&b, NULL), 0);
    assert_string_equal(b.data, "null");
    buf_free(&b);

    /* The max applies to the escaped form. */
    buf_init(&b, 6);
    assert_int_equal(buf_json_string(&b, "\"\""), 0); /* exactly 6 bytes escaped */
    buf_reset(&b);
    assert_int_equal(buf_json_string(&b, "\"\"x"), HOOKD_EINVAL);
    buf_free(&b);
}

/* ---- durations ---- */

static void test_duration_parse(void **state)
{
    static const struct {
        const char *in;
        int64_t ms;
    } good[] = {
        {"250ms", 250},     {"10s", 10000},      {"2m", 120000},       {"24h", 86400000},
        {"1d", 86400000},   {"30", 30000},       {"0", 0},             {"0ms", 0},
        {" 5s ", 5000},     {"9223372036854775807ms", INT64_MAX},
    };
    static const char *const bad[] = {"",     " ",   "-1s",  "abc", "10x", "1.5s", "s",   "10 s",
                                      "10sm", "+5s", "1e3",  "5S",  "9223372036854775808ms", "9223372036854776s",
                                      "99999999999999999999"};
    int64_t ms;

    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        ms = -1;
        assert_int_equal(duration_parse(good[i].in, &ms), 0);
        assert_true(ms == good[i].ms);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(duration_parse(bad[i], &ms), HOOKD_EINVAL);
    assert_int_equal(duration_parse(NULL, &ms), HOOKD_EINVAL);
}

static void test_duration_list(void **state)
{
    int64_t v[4];
    size_t n = 0;

    assert_int_equal(duration_list_parse("10s,30s,2m", v, 4, &n), 0);
    assert_int_equal(n, 3);
    assert_true(v[0] == 10000 && v[1] == 30000 && v[2] == 120000);
    assert_int_equal(duration_list_parse(" 100ms , 200ms", v, 4, &n), 0);
    assert_int_equal(n, 2);
    assert_true(v[0] == 100 && v[1] == 200);
    assert_int_equal(duration_list_parse("1s", v, 4, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(duration_list_parse("1s,2s,3s,4s,5s", v, 4, &n), HOOKD_EINVAL);
    assert_int_equal(duration_list_parse("1s,,2s", v, 4, &n), HOOKD_EINVAL);
    assert_int_equal(duration_list_parse("1s,", v, 4, &n), HOOKD_EINVAL);
    assert_int_equal(duration_list_parse("", v, 4, &n), HOOKD_EINVAL);
    assert_int_equal(duration_list_parse("1s,x", v, 4, &n), HOOKD_EINVAL);
}

static void test_duration_format(void **state)
{
    static const struct {
        int64_t ms;
        const char *out;
    } cases[] = {
        {0, "0s"},           {1500, "1500ms"}, {30000, "30s"},   {120000, "2m"}, {3600000, "1h"},
        {86400000, "1d"},    {90000, "90s"},   {5400000, "90m"}, {1, "1ms"},     {172800000, "2d"},
        {-2000, "-2s"},
    };
    char out[24];
    int64_t back;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        duration_format(cases[i].ms, out);
        assert_string_equal(out, cases[i].out);
        if (cases[i].ms >= 0) {
            assert_int_equal(duration_parse(out, &back), 0);
            assert_true(back == cases[i].ms);
        }
    }
}

/* ---- time text ---- */

static void test_rfc3339(void **state)
{
    static const struct {
        const char *in;
        int64_t ms;
    } parse[] = {
        {"1970-01-01T00:00:00Z", 0},
        {"1970-01-01T00:00:00.000Z", 0},
        {"1994-11-06T08:49:37Z", 784111777000},
        {"1994-11-06T08:49:37.5Z", 784111777500},
        {"1994-11-06T08:49:37.123456789Z", 784111777123},
        {"1994-11-06t08:49:37z", 784111777000},
        {"1994-11-06T09:49:37+01:00", 784111777000},
        {"1994-11-06T03:19:37-05:30", 784111777000},
        {"2024-02-29T12:00:00Z", 1709208000000},
        {"1969-12-31T23:59:59.999Z", -1},
    };
    static const char *const bad[] = {"",
                                      "1994-11-06",
                                      "1994-11-06T08:49:37",
                                      "1994-13-06T08:49:37Z",
                                      "1994-02-29T08:49:37Z",
                                      "1994-11-06T24:00:00Z",
                                      "1994-11-06T08:60:00Z",
                                      "1994-11-06T08:49:37.Z",
                                      "1994-11-06T08:49:37+0100",
                                      "1994-11-06T08:49:37Zjunk",
                                      "94-11-06T08:49:37Z"};
    char out[RFC3339_LEN];
    int64_t ms;

    for (size_t i = 0; i < sizeof parse / sizeof parse[0]; i++) {
        ms = 42;
        assert_int_equal(rfc3339_parse(parse[i].in, &ms), 0);
        assert_true(ms == parse[i].ms);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(rfc3339_parse(bad[i], &ms), HOOKD_EINVAL);

    rfc3339_format(784111777123, out);
    assert_string_equal(out, "1994-11-06T08:49:37.123Z");
    rfc3339_format(0, out);
    assert_string_equal(out, "1970-01-01T00:00:00.000Z");
    rfc3339_format(-1, out);
    assert_string_equal(out, "1969-12-31T23:59:59.999Z");
    rfc3339_format(951782400000, out); /* 2000 is a leap year */
    assert_string_equal(out, "2000-02-29T00:00:00.000Z");
    rfc3339_format(253402300799999, out); /* the last instant written digit by digit */
    assert_string_equal(out, "9999-12-31T23:59:59.999Z");
    rfc3339_format(253402300800000, out); /* five-digit years take the general path */
    assert_string_equal(out, "10000-01-01T00:00:00.000Z");
    rfc3339_format(-62167219200001, out);
    assert_string_equal(out, "-001-12-31T23:59:59.999Z");

    /* Roundtrip over random instants between 1900 and 2400. */
    for (int i = 0; i < 2000; i++) {
        uint64_t r;
        int64_t t;
        random_bytes(&r, sizeof r);
        t = -2208988800000 + (int64_t)(r % UINT64_C(15778800000000));
        rfc3339_format(t, out);
        assert_int_equal(strlen(out), 24);
        assert_int_equal(rfc3339_parse(out, &ms), 0);
        assert_true(ms == t);
    }
}

static void test_http_date(void **state)
{
    static const char *const same[] = {
        "Sun, 06 Nov 1994 08:49:37 GMT",
        "Sunday, 06-Nov-94 08:49:37 GMT",
        "Sun Nov  6 08:49:37 1994",
        "  Sun, 06 Nov 1994 08:49:37 GMT  ",
    };
    static const char *const bad[] = {"",
                                      "Sun, 06 Nov 1994 08:49:37",
                                      "Sun, 06 Foo 1994 08:49:37 GMT",
                                      "Sun, 31 Nov 1994 08:49:37 GMT",
                                      "Sun, 06 Nov 1994 25:49:37 GMT",
                                      "Sun, 6 Nov 1994 08:49:37 GMT",
                                      "1994-11-06T08:49:37Z",
                                      "Sun, 06 Nov 1994 08:49:37 GMT x",
                                      "120"};
    int64_t ms;

    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        ms = 0;
        assert_int_equal(http_date_parse(same[i], &ms), 0);
        assert_true(ms == 784111777000);
    }
    assert_int_equal(http_date_parse("Thursday, 01-Jan-15 00:00:00 GMT", &ms), 0);
    assert_true(ms == 1420070400000); /* two-digit year below 70 is 20xx */
    assert_int_equal(http_date_parse("Wed, 21 Oct 2015 07:28:00 GMT", &ms), 0);
    assert_true(ms == 1445412480000);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(http_date_parse(bad[i], &ms), HOOKD_EINVAL);
}

/* ---- filters ---- */

static void test_filter(void **state)
{
    static const struct {
        const char *pattern, *type;
        bool match;
    } cases[] = {
        {"order.*", "order.paid", true},      {"order.*", "order.item.added", true},
        {"order.*", "order", false},          {"order.*", "orders.x", false},
        {"order.*", "order.", false},         {"*", "anything.at.all", true},
        {"*", "x", true},                     {"order.paid", "order.paid", true},
        {"order.paid", "order.paid.x", false}, {"order.paid", "order.pai", false},
        {"order.item.*", "order.item.added", true}, {"order.item.*", "order.paid", false},
    };
    const char *const list[] = {"invoice.*", "order.paid"};

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_int_equal(event_type_matches(cases[i].pattern, cases[i].type), cases[i].match);
    assert_true(event_type_matches_any(list, 2, "order.paid"));
    assert_true(event_type_matches_any(list, 2, "invoice.sent"));
    assert_false(event_type_matches_any(list, 2, "order.created"));
    assert_true(event_type_matches_any(NULL, 0, "order.created")); /* no filter: everything */
}

static void test_event_type_valid(void **state)
{
    char long_type[140];

    assert_true(event_type_is_valid("order.paid", false));
    assert_true(event_type_is_valid("A-z_0.9", false));
    assert_false(event_type_is_valid("", false));
    assert_false(event_type_is_valid("order paid", false));
    assert_false(event_type_is_valid("order/paid", false));
    assert_false(event_type_is_valid("order.*", false));
    assert_false(event_type_is_valid("*", false));
    assert_true(event_type_is_valid("order.*", true));
    assert_true(event_type_is_valid("*", true));
    assert_false(event_type_is_valid(".*", true));
    assert_false(event_type_is_valid("order*", true));
    assert_false(event_type_is_valid("or*der", true));
    assert_false(event_type_is_valid("order.*.x", true));
    memset(long_type, 'a', 128);
    long_type[128] = '\0';
    assert_true(event_type_is_valid(long_type, false));
    long_type[128] = 'a';
    long_type[129] = '\0';
    assert_false(event_type_is_valid(long_type, false));
}

/* ---- envelope ---- */

static json_t *build_and_parse(const struct envelope_in *in)
{
    struct buf b;
    json_error_t jerr;
    json_t *v;

    buf_init(&b, 1 << 16);
    assert_int_equal(envelope_build(in, &b), 0);
    v = json_loads(b.data, 0, &jerr);
    buf_free(&b);
    assert_non_null(v);
    return v;
}

static void test_envelope_full(void **state)
{
    struct envelope_in in = {
        .id = "evt_01",
        .type = "order.paid",
        .created_at_ms = 784111777123,
        .account = "acct \"1\"",
        .resource_type = "order",
        .resource_id = "o-42",
        .has_resource_version = true,
        .resource_version = 7,
        .data_json = "{\"amount\": 1250, \"items\": [1, 2]}",
    };
    json_t *v = build_and_parse(&in);
    json_t *res = json_object_get(v, "resource");

    assert_string_equal(json_string_value(json_object_get(v, "id")), "evt_01");
    assert_string_equal(json_string_value(json_object_get(v, "type")), "order.paid");
    assert_string_equal(json_string_value(json_object_get(v, "timestamp")), "1994-11-06T08:49:37.123Z");
    assert_string_equal(json_string_value(json_object_get(v, "account")), "acct \"1\"");
    assert_non_null(res);
    assert_string_equal(json_string_value(json_object_get(res, "type")), "order");
    assert_string_equal(json_string_value(json_object_get(res, "id")), "o-42");
    assert_int_equal(json_integer_value(json_object_get(res, "version")), 7);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(v, "data"), "amount")), 1250);
    assert_int_equal(json_array_size(json_object_get(json_object_get(v, "data"), "items")), 2);
    json_decref(v);
}

static void test_envelope_minimal(void **state)
{
    struct envelope_in in = {
        .id = "evt_02", .type = "ping", .created_at_ms = 0, .data_json = "[true]",
    };
    struct buf b;
    json_t *v = build_and_parse(&in);

    assert_true(json_is_null(json_object_get(v, "account")));
    assert_null(json_object_get(v, "resource")); /* omitted, not null */
    assert_true(json_is_array(json_object_get(v, "data")));
    json_decref(v);

    in.resource_id = "r1"; /* one of the two present: resource with type null, version null */
    v = build_and_parse(&in);
    assert_true(json_is_null(json_object_get(json_object_get(v, "resource"), "type")));
    assert_true(json_is_null(json_object_get(json_object_get(v, "resource"), "version")));
    json_decref(v);

    /* The exact bytes, since receivers sign and compare them. */
    in.resource_id = NULL;
    buf_init(&b, 4096);
    assert_int_equal(envelope_build(&in, &b), 0);
    assert_string_equal(b.data, "{\"id\":\"evt_02\",\"type\":\"ping\",\"timestamp\":\"1970-01-01T00:00:00.000Z\","
                                "\"account\":null,\"data\":[true]}");
    buf_free(&b);

    /* A body over the buffer's max fails instead of truncating. */
    buf_init(&b, 40);
    assert_int_equal(envelope_build(&in, &b), HOOKD_EINVAL);
    buf_free(&b);
}

/* ---- errors ---- */

/* Every case of the shared corpus (tests/json_corpus.h), judged by json_text_valid and by jansson. */
static void test_json_check_corpus(void **state)
{
    (void)state;
    for (size_t i = 0; i < JSON_CORPUS_N; i++) {
        const struct json_case *c = &json_corpus[i];
        json_t *v = json_loadb(c->text, strlen(c->text), JSON_DECODE_ANY, NULL);
        bool theirs = v != NULL;

        json_decref(v);
        if (json_text_valid(c->text, strlen(c->text)) != c->valid)
            fail_msg("json_text_valid should %s case %zu: %s", c->valid ? "accept" : "refuse", i, c->text);
        if ((theirs == c->valid) == c->jansson_differs)
            fail_msg("jansson %s case %zu, unlike the corpus says: %s", theirs ? "accepts" : "refuses", i, c->text);
    }
}

static void test_json_check_bounds(void **state)
{
    char deep[JSON_CHECK_MAX_DEPTH * 2 + 3];
    json_t *v;

    (void)state;
    assert_false(json_text_valid("[1]\0", 4)); /* a NUL after the value */
    assert_false(json_text_valid("\"a\0b\"", 5)); /* a NUL inside a string */
    assert_true(json_text_valid("[1] trailing", 3)); /* only len bytes count */
    assert_false(json_text_valid(NULL, 0));
    /* Nesting up to the limit is fine; one more level is refused (no recursion, no overflow). */
    memset(deep, '[', JSON_CHECK_MAX_DEPTH);
    memset(deep + JSON_CHECK_MAX_DEPTH, ']', JSON_CHECK_MAX_DEPTH);
    assert_true(json_text_valid(deep, 2 * JSON_CHECK_MAX_DEPTH));
    memset(deep, '[', JSON_CHECK_MAX_DEPTH + 1);
    memset(deep + JSON_CHECK_MAX_DEPTH + 1, ']', JSON_CHECK_MAX_DEPTH + 1);
    assert_false(json_text_valid(deep, 2 * JSON_CHECK_MAX_DEPTH + 2));
    /* Whatever jansson parses (the admin API's bodies) passes here: its deepest input included. */
    memset(deep, '[', JSON_PARSER_MAX_DEPTH);
    memset(deep + JSON_PARSER_MAX_DEPTH, ']', JSON_PARSER_MAX_DEPTH);
    v = json_loadb(deep, 2 * JSON_PARSER_MAX_DEPTH, 0, NULL);
    assert_non_null(v);
    json_decref(v);
    assert_true(json_text_valid(deep, 2 * JSON_PARSER_MAX_DEPTH));
}

/* Differential: random edits of valid documents, judged by jansson too (ASCII only, no \u escapes,
 * shallow: where the two may rightly differ, in encoding checks and depth limits, nothing is generated;
 * numbers too large for a double are JSON, which jansson refuses). */
static void test_json_check_matches_jansson(void **state)
{
    static const char *const seeds[] = {
        "{\"a\":[1,2.5,-3e2,true,false,null,\"x\\ny\"],\"b\":{}}", "[0,{\"k\":[[]]},\"s\"]", "-12.25E-2",
        "{\"nested\":{\"deeper\":{\"list\":[1,[2,[3]]]}}}",
    };
    static const char alphabet[] = "{}[],:\"\\ 0123456789-+.eEtruefalsn";
    uint64_t rng = 0x9e3779b97f4a7c15u;
    json_error_t err;
    char doc[128];

    (void)state;
    for (int i = 0; i < 20000; i++) {
        const char *seed = seeds[i % (sizeof seeds / sizeof seeds[0])];
        size_t len = strlen(seed);
        int edits;
        json_t *v;
        bool ours, theirs;

        memcpy(doc, seed, len + 1);
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        edits = 1 + (int)(rng % 3);
        for (int e = 0; e < edits; e++) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            size_t at = (size_t)(rng % len);
            char ch = alphabet[(rng >> 20) % (sizeof alphabet - 1)];
            switch ((rng >> 40) % 3) {
            case 0: /* replace */
                doc[at] = ch;
                break;
            case 1: /* delete */
                memmove(doc + at, doc + at + 1, len - at);
                len--;
                break;
            default: /* insert */
                if (len + 2 < sizeof doc) {
                    memmove(doc + at + 1, doc + at, len - at + 1);
                    doc[at] = ch;
                    len++;
                }
            }
            if (len == 0)
                break;
        }
        ours = json_text_valid(doc, len);
        v = json_loadb(doc, len, JSON_DECODE_ANY, &err);
        theirs = v != NULL;
        json_decref(v);
        if (!theirs && json_error_code(&err) == json_error_numeric_overflow)
            continue; /* syntax is fine; jansson cannot hold the number as a double */
        if (ours != theirs)
            fail_msg("json_text_valid says %d, jansson %d: %.*s", ours, theirs, (int)len, doc);
    }
}

static void test_strerror(void **state)
{
    assert_string_equal(hookd_strerror(HOOKD_OK), "success");
    assert_string_equal(hookd_strerror(HOOKD_ESIG), "signature did not verify");
    assert_string_equal(hookd_strerror(HOOKD_ETIME), "timestamp outside tolerance");
    for (int e = HOOKD_ETIME; e <= 0; e++)
        assert_string_not_equal(hookd_strerror(e), "unknown error");
    assert_string_equal(hookd_strerror(-12), "unknown error");
    assert_string_equal(hookd_strerror(5), "unknown error");
    assert_string_equal(hookd_strerror(-2147483647 - 1), "unknown error");
}

/* Well-formed UTF-8 only (no overlongs, surrogates or > U+10FFFF); a cut character is dropped, other bytes kept. */
static void test_utf8(void **state)
{
    (void)state;
    assert_true(utf8_valid("", 0));
    assert_true(utf8_valid("a\0b", 3));
    assert_true(utf8_valid("h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 12));
    assert_false(utf8_valid("caf\xe9", 4));             /* Latin-1 */
    assert_false(utf8_valid("\x1f\x8b\x08", 3));        /* gzip magic */
    assert_false(utf8_valid("\xc0\xaf", 2));             /* overlong */
    assert_false(utf8_valid("\xed\xa0\x80", 3));         /* surrogate */
    assert_false(utf8_valid("\xf4\x90\x80\x80", 4));     /* above U+10FFFF */
    assert_int_equal(utf8_valid_prefix("ab\xff", 3), 2);
    /* Cut inside a character: back to its start. */
    assert_int_equal(utf8_cut("ab\xe2\x82", 4), 2);
    assert_int_equal(utf8_cut("ab\xf0\x9f\x98", 5), 2);
    assert_int_equal(utf8_cut("ab\xc3", 3), 2);
    /* Whole characters, or bytes that are not text: left alone. */
    assert_int_equal(utf8_cut("ab\xc3\xa9", 4), 4);
    assert_int_equal(utf8_cut("caf\xe9 x", 6), 6);
    assert_int_equal(utf8_cut("\xff\xc3", 2), 2);
}

/* A limiter's first interval is a setting: a reset (the condition cleared) keeps it, the backoff starts again. */
static void test_log_limiter_first_interval(void **state)
{
    struct log_limiter lim = {.first_ms = 10000}, plain = {0};
    int64_t now;

    (void)state;
    now = clock_mono_ms();
    log_limited(&lim, LOG_DEBUG, "test", "first");
    assert_int_equal(lim.interval_ms, 10000);
    assert_true(lim.next_at_ms >= now + 10000 && lim.next_at_ms <= clock_mono_ms() + 10000);
    log_limited(&lim, LOG_DEBUG, "test", "suppressed");
    assert_int_equal(lim.suppressed, 1);
    log_limiter_reset(&lim, "test", "thing");
    assert_int_equal(lim.first_ms, 10000);
    assert_int_equal(lim.next_at_ms, 0);
    assert_int_equal(lim.suppressed, 0);
    log_limited(&lim, LOG_DEBUG, "test", "again");
    assert_int_equal(lim.interval_ms, 10000); /* not the default 1 s */
    log_limited(&plain, LOG_DEBUG, "test", "default");
    assert_int_equal(plain.interval_ms, 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_limiter_first_interval),
        cmocka_unit_test(test_json_check_corpus),
        cmocka_unit_test(test_json_check_bounds),
        cmocka_unit_test(test_json_check_matches_jansson),
        cmocka_unit_test(test_id_shape),
        cmocka_unit_test(test_id_unique),
        cmocka_unit_test(test_event_check),
        cmocka_unit_test(test_custom_headers),
        cmocka_unit_test(test_id_sortable),
        cmocka_unit_test(test_id_monotonic),
        cmocka_unit_test(test_id_fresh_per_millisecond),
        cmocka_unit_test(test_id_pool),
        cmocka_unit_test(test_id_is_valid),
        cmocka_unit_test(test_base64_vectors),
        cmocka_unit_test(test_base64_roundtrip_and_errors),
        cmocka_unit_test(test_buf_max),
        cmocka_unit_test(test_buf_json_string),
        cmocka_unit_test(test_duration_parse),
        cmocka_unit_test(test_duration_list),
        cmocka_unit_test(test_duration_format),
        cmocka_unit_test(test_rfc3339),
        cmocka_unit_test(test_http_date),
        cmocka_unit_test(test_filter),
        cmocka_unit_test(test_event_type_valid),
        cmocka_unit_test(test_envelope_full),
        cmocka_unit_test(test_envelope_minimal),
        cmocka_unit_test(test_strerror),
        cmocka_unit_test(test_utf8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
