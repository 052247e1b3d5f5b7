/* Unit tests of the CLI output layer (src/cli/output*.c, design §12 "CLI output"). */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli/cli.h"
#include "cli/output.h"

#define NOW INT64_C(1764594000000) /* 2025-12-01T13:00:00Z */

static void expect_relative(int64_t delta_ms, const char *want)
{
    char got[64];

    out_relative_time(NOW + delta_ms, NOW, got, sizeof got);
    if (strcmp(got, want) != 0)
        fail_msg("delta %lld ms: got \"%s\", want \"%s\"", (long long)delta_ms, got, want);
}

static void test_relative_time_boundaries(void **state)
{
    (void)state;
    expect_relative(0, "just now");
    expect_relative(-999, "just now");
    expect_relative(999, "just now");
    expect_relative(-1000, "1 s ago");
    expect_relative(1000, "in 1 s");
    expect_relative(47000, "in 47 s");
    expect_relative(47999, "in 47 s");
    expect_relative(-59999, "59 s ago");
    expect_relative(-60000, "1 m ago");
    expect_relative(-120000, "2 m ago");
    expect_relative(-3599999, "59 m ago");
    expect_relative(-3600000, "1 h ago");
    expect_relative(3 * 3600000, "in 3 h");
    expect_relative(-86399999, "23 h ago");
    expect_relative(-86400000, "1 d ago");
    expect_relative(-40LL * 86400000, "40 d ago");
}

static void test_duration_words(void **state)
{
    static const struct {
        int64_t ms;
        const char *want;
    } cases[] = {{0, "0 ms"},         {340, "340 ms"},       {999, "999 ms"},         {1000, "1.0 s"},
                 {1500, "1.5 s"},     {9999, "9.9 s"},       {10001, "10 s"},         {59999, "59 s"},
                 {60000, "1 m 0 s"},  {125000, "2 m 5 s"},   {3600000, "1 h 0 m"},    {-5, "0 ms"}};
    char got[48];

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        out_duration_words(cases[i].ms, got, sizeof got);
        assert_string_equal(got, cases[i].want);
    }
}

/* The cell of text cut at max columns, and its width. */
static size_t cell(const char *text, size_t max, char out[OUT_CELL_BYTES])
{
    return out_cell_text(text, strlen(text), max, out, OUT_CELL_BYTES);
}

static void test_cut_is_utf8_aware(void **state)
{
    char out[OUT_CELL_BYTES];

    (void)state;
    assert_int_equal(cell("short", 10, out), 5);
    assert_string_equal(out, "short");
    assert_int_equal(cell("exactly10!", 10, out), 10);
    assert_string_equal(out, "exactly10!");
    assert_int_equal(cell("eleven char", 10, out), 10);
    assert_string_equal(out, "eleven ch\xe2\x80\xa6");
    /* Two-byte characters are never split: 9 of them fit before the ellipsis. */
    assert_int_equal(cell("ééééééééééé", 10, out), 10);
    assert_string_equal(out, "ééééééééé…");
    /* Wide characters count two columns; a cut never leaves half of one. */
    assert_int_equal(out_text_width("日本語"), 6);
    assert_int_equal(cell("日本語テキスト", 6, out), 5);
    assert_string_equal(out, "日本…");
    assert_int_equal(cell("日本語", 6, out), 6);
    assert_string_equal(out, "日本語");
    /* Combining marks take no column. */
    assert_int_equal(out_text_width("e\xcc\x81t\xc3\xa9"), 3);
    /* Emoji are wide. */
    assert_int_equal(out_text_width("\xf0\x9f\x98\x80!"), 3);
    /* max 1: only the ellipsis. */
    assert_int_equal(cell("abc", 1, out), 1);
    assert_string_equal(out, "…");
}

static void test_control_bytes_are_escaped(void **state)
{
    char out[OUT_CELL_BYTES];

    (void)state;
    cell("order.\x1b[31mred\x1b[0m", 100, out);
    assert_string_equal(out, "order.\\e[31mred\\e[0m");
    cell("a\rb\nc\td\x01\x7f", 100, out);
    assert_string_equal(out, "a\\rb\\nc\\td\\x01\\x7f");
    /* C1 controls (0x9b is CSI on some terminals) and bidi overrides. */
    cell("x\xc2\x9b" "31my\xe2\x80\xaez", 100, out);
    assert_string_equal(out, "x\\u009B31my\\u202Ez");
    /* Bytes that are not UTF-8: a lone continuation, a truncated sequence, an overlong, a surrogate. */
    cell("\x80|\xe2\x82|\xc0\xaf|\xed\xa0\x80", 100, out);
    assert_string_equal(out, "\\x80|\\xe2\\x82|\\xc0\\xaf|\\xed\\xa0\\x80");
    /* NUL inside the value's length is shown, not a terminator. */
    assert_int_equal(out_cell_text("a\0b", 3, 10, out, sizeof out), 6);
    assert_string_equal(out, "a\\x00b");
    /* An escape is never cut in half: "\e" is two columns and goes whole or not at all. */
    assert_int_equal(cell("abc\x1b[2J", 5, out), 4);
    assert_string_equal(out, "abc…");
    assert_int_equal(cell("ab\x1b[2J", 5, out), 5);
    assert_string_equal(out, "ab\\e…");
    for (const char *p = out; *p; p++)
        assert_true((unsigned char)*p >= 0x20 && *p != 0x7f);
}

/* Text of any length (a response body) is escaped like a cell and never cut; lines mode keeps its lines. */
static void write_text(const char *in, size_t n, bool lines, char **text)
{
    size_t len;
    FILE *f = open_memstream(text, &len);

    assert_non_null(f);
    out_write_text(f, in, n, lines);
    fclose(f);
}

static void test_write_text(void **state)
{
    static const char in[] = "a\x1b[31mb\rc\r\nd\te\n\x7f\xc2\x9b\xe2\x80\xae\xff\xc3";
    char *text, big[3000];

    write_text(in, sizeof in - 1, true, &text);
    assert_string_equal(text, "a\\e[31mb\\rc\nd\te\n\\x7f\\u009B\\u202E\\xff\\xc3");
    free(text);
    write_text(in, sizeof in - 1, false, &text);
    assert_string_equal(text, "a\\e[31mb\\rc\\r\\nd\\te\\n\\x7f\\u009B\\u202E\\xff\\xc3");
    free(text);
    /* A NUL inside is shown, not an end; a long text is not cut. */
    write_text("x\0y", 3, true, &text);
    assert_string_equal(text, "x\\x00y");
    free(text);
    memset(big, 'z', sizeof big);
    write_text(big, sizeof big, true, &text);
    assert_int_equal(strlen(text), sizeof big);
    free(text);
}

static void test_colour_rules(void **state)
{
    int fds[2];

    (void)state;
    assert_int_equal(pipe(fds), 0);
    assert_false(out_colour_wanted(fds[1], NULL)); /* not a terminal */
    assert_false(out_colour_wanted(fds[1], ""));
    close(fds[0]);
    close(fds[1]);
    /* A terminal: colours unless NO_COLOR is set to something (no-color.org: an empty value does not count). */
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master >= 0 && grantpt(master) == 0 && unlockpt(master) == 0) {
        int tty = open(ptsname(master), O_RDWR | O_NOCTTY);
        assert_true(tty >= 0);
        assert_true(out_colour_wanted(tty, NULL));
        assert_true(out_colour_wanted(tty, ""));
        assert_false(out_colour_wanted(tty, "1"));
        close(tty);
    }
    if (master >= 0)
        close(master);
    assert_string_equal(out_status_colour("delivered"), "32");
    assert_string_equal(out_status_colour("retrying"), "33");
    assert_string_equal(out_status_colour("pending"), "33");
    assert_string_equal(out_status_colour("dead"), "31");
    assert_string_equal(out_status_colour("failed"), "31");
    assert_null(out_status_colour("superseded"));
    assert_null(out_status_colour(NULL));
}

/* Renders through f into a string (caller frees). */
static char *render(void (*draw)(FILE *f, const void *arg), const void *arg)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    assert_non_null(f);
    draw(f, arg);
    fclose(f);
    return text;
}

static const struct out_column table_columns[] = {
    {"ID", "id", NULL},
    {"STATUS", "status", out_fmt_status},
    {"NAME", "name", NULL},
    {"AT", "at", out_fmt_time},
    {"KIND", "entity.kind", NULL},
    OUT_COLUMNS_END,
};

static void draw_table(FILE *f, const void *arg)
{
    const struct out *o = arg;
    json_t *rows = json_loads("[{\"id\":\"a\",\"status\":\"delivered\",\"name\":\"日本\",\"at\":\"2025-12-01T12:58:00Z\","
                              "\"entity\":{\"kind\":\"order\"}},"
                              "{\"id\":\"bbbb\",\"status\":\"dead\",\"name\":\"x\\u001b[2Jy\",\"at\":null}]",
                              0, NULL);
    assert_non_null(rows);
    out_table(o, f, table_columns, rows, 0);
    json_decref(rows);
}

static void test_table_alignment(void **state)
{
    struct out o = {.now_ms = NOW};
    char *text;

    (void)state;
    text = render(draw_table, &o);
    /* 日本 is four columns wide: padded like "NAME", not by its six bytes. */
    assert_string_equal(text, "ID    STATUS     NAME     AT       KIND\n"
                              "a     delivered  日本     2 m ago  order\n"
                              "bbbb  dead       x\\e[2Jy  -        -\n");
    free(text);
    o.utc = true;
    text = render(draw_table, &o);
    assert_non_null(strstr(text, "2025-12-01 12:58:00Z"));
    free(text);
    /* Colours only when asked (the terminal decision is out_colour_wanted's): status words and the header. */
    o.utc = false;
    o.colour = true;
    text = render(draw_table, &o);
    assert_non_null(strstr(text, "\033[32mdelivered\033[0m"));
    assert_non_null(strstr(text, "\033[31mdead\033[0m"));
    free(text);
}

static void draw_record(FILE *f, const void *arg)
{
    static const struct out_column attempt_columns[] = {{"N", "n", NULL}, {"CODE", "code", NULL},
                                                        OUT_COLUMNS_END};
    static const struct out_subtable subs[] = {{"attempts", attempt_columns}, {NULL, NULL}};
    static const char *const skip[] = {"hidden", NULL};
    static const char *const compact[] = {"data", NULL};
    static const struct out_record_spec spec = {skip, compact, subs};
    json_t *obj = json_loads("{\"id\":\"d1\",\"status\":\"retrying\",\"breaker\":{\"state\":\"open\",\"n\":2},"
                             "\"types\":[\"a\",\"b\"],\"data\":{\"k\":1},\"hidden\":1,\"next_attempt_at\":"
                             "\"2025-12-01T13:00:47Z\",\"attempts\":[{\"n\":1,\"code\":500},{\"n\":2,\"code\":503}],"
                             "\"others\":[{\"x\":1}],\"error\":\"bad\\r\\u001b]0;title\\u0007\"}",
                             0, NULL);
    assert_non_null(obj);
    out_record(arg, f, obj, &spec);
    json_decref(obj);
}

static void test_record_block(void **state)
{
    struct out o = {.now_ms = NOW};
    char *text = render(draw_record, &o);

    (void)state;
    assert_string_equal(text, "id               d1\n"
                              "status           retrying\n"
                              "breaker.state    open\n"
                              "breaker.n        2\n"
                              "types            a,b\n"
                              "data             {\"k\":1}\n"
                              "next_attempt_at  2025-12-01 13:00:47Z (in 47 s)\n"
                              "others           1 items (--json shows them)\n"
                              "error            bad\\r\\e]0;title\\x07\n"
                              "\n"
                              "attempts (2):\n"
                              "  N  CODE\n"
                              "  1  500\n"
                              "  2  503\n");
    free(text);
}

static void draw_time_keys(FILE *f, const void *arg)
{
    json_t *obj = json_loads("{\"since\":\"2025-12-01T12:00:00Z\",\"last_error\":{\"at\":\"2025-12-01T12:59:00Z\"},"
                             "\"atlas\":\"2025-12-01T12:59:00Z\",\"created_at\":\"not a time\"}",
                             0, NULL);
    assert_non_null(obj);
    out_record(arg, f, obj, NULL);
    json_decref(obj);
}

/* Times in a record: members ending with _at, and at, since, until (also flattened); other names stay text. */
static void test_record_time_keys(void **state)
{
    struct out o = {.now_ms = NOW};
    char *text = render(draw_time_keys, &o);

    (void)state;
    assert_string_equal(text, "since          2025-12-01 12:00:00Z (1 h ago)\n"
                              "last_error.at  2025-12-01 12:59:00Z (1 m ago)\n"
                              "atlas          2025-12-01T12:59:00Z\n"
                              "created_at     not a time\n");
    free(text);
}

/* out_word: a member for a sentence, escaped and cut; missing or null "-". */
static void test_word(void **state)
{
    json_t *obj = json_loads("{\"id\":\"x\\u001b[2Jy\",\"n\":3,\"none\":null}", 0, NULL);
    struct out_cell cell;

    (void)state;
    assert_non_null(obj);
    assert_string_equal(out_word(obj, "id", &cell), "x\\e[2Jy");
    assert_string_equal(out_word(obj, "n", &cell), "3");
    assert_string_equal(out_word(obj, "none", &cell), "-");
    assert_string_equal(out_word(obj, "missing", &cell), "-");
    assert_string_equal(out_word(NULL, "id", &cell), "-");
    json_decref(obj);
}

static void test_delivery_words(void **state)
{
    static const struct {
        const char *delivery;
        const char *want;
    } cases[] = {
        {"{\"status\":\"retrying\",\"next_attempt_at\":\"2025-12-01T13:00:47Z\",\"attempts\":[{\"n\":1,"
         "\"duration_ms\":10001,\"status_code\":null,\"error\":\"timeout: Operation timed out\"}]}",
         "timeout after 10 s, retry in 47 s"},
        {"{\"status\":\"retrying\",\"next_attempt_at\":\"2025-12-01T12:59:00Z\",\"attempts\":[{\"n\":1,"
         "\"duration_ms\":20,\"status_code\":503,\"error\":\"HTTP 503\"}]}",
         "HTTP 503, retry due now"},
        {"{\"status\":\"dead\",\"attempts\":[{\"n\":3,\"duration_ms\":1,\"status_code\":null,"
         "\"error\":\"connect: Failed to connect\"}]}",
         "could not connect, no more retries (dead)"},
        {"{\"status\":\"delivered\",\"delivered_at\":\"2025-12-01T12:58:00Z\",\"attempts\":[{\"n\":1,"
         "\"duration_ms\":5,\"status_code\":200,\"error\":null}]}",
         "delivered 2 m ago (HTTP 200)"},
        {"{\"status\":\"pending\",\"next_attempt_at\":\"2025-12-01T13:00:03Z\",\"attempts\":[]}",
         "first attempt in 3 s"},
        {"{\"status\":\"skipped\",\"last_error\":\"endpoint disabled\"}", "skipped: endpoint disabled"},
    };
    char got[512];

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *d = json_loads(cases[i].delivery, 0, NULL);
        assert_non_null(d);
        cli_delivery_words(d, NOW, got, sizeof got);
        assert_string_equal(got, cases[i].want);
        json_decref(d);
    }
}

static int fetch_counter;

static int fake_fetch(void *ctx, char **raw, json_t **answer)
{
    (void)ctx;
    fetch_counter++;
    *raw = strdup("{\"data\":[{\"id\":\"a\"}],\"next_cursor\":null}");
    *answer = json_loads(*raw, 0, NULL);
    return 0;
}

static void test_watch_snapshots(void **state)
{
    static const struct out_column columns[] = {{"ID", "id", NULL}, OUT_COLUMNS_END};
    struct out o = {.watch_ms = 100, .count = 3};
    char *text = NULL;
    size_t len = 0, n = 0;
    FILE *f = open_memstream(&text, &len);

    (void)state;
    fetch_counter = 0;
    assert_int_equal(out_show(&o, f, fake_fetch, NULL, out_view_list, columns), 0);
    fclose(f);
    assert_int_equal(fetch_counter, 3);
    for (const char *p = text; (p = strstr(p, "--- snapshot ")); p++)
        n++;
    assert_int_equal(n, 3);
    assert_non_null(strstr(text, "--- snapshot 3 at "));
    free(text);
    /* --json: the body as sent, one line per snapshot, no separators. */
    o.json = true;
    o.count = 2;
    text = NULL;
    f = open_memstream(&text, &len);
    assert_int_equal(out_show(&o, f, fake_fetch, NULL, out_view_list, columns), 0);
    fclose(f);
    assert_string_equal(text, "{\"data\":[{\"id\":\"a\"}],\"next_cursor\":null}\n"
                              "{\"data\":[{\"id\":\"a\"}],\"next_cursor\":null}\n");
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relative_time_boundaries), cmocka_unit_test(test_duration_words),
        cmocka_unit_test(test_cut_is_utf8_aware),        cmocka_unit_test(test_control_bytes_are_escaped),
        cmocka_unit_test(test_colour_rules),             cmocka_unit_test(test_table_alignment),
        cmocka_unit_test(test_record_block),             cmocka_unit_test(test_delivery_words),
        cmocka_unit_test(test_watch_snapshots),          cmocka_unit_test(test_record_time_keys),
        cmocka_unit_test(test_word),                     cmocka_unit_test(test_write_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
