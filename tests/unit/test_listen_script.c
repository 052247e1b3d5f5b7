/* `hookd listen` scripts: --respond answers, --delay lists and --status rules, good and bad. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/listen.h"
#include "hookd.h"

static void test_plain_statuses(void **state)
{
    (void)state;
    struct listen_script s;
    char err[256];

    assert_int_equal(listen_script_parse("500,500,200", &s, err, sizeof err), 0);
    assert_int_equal(s.n, 3);
    assert_int_equal(s.items[0].status, 500);
    assert_int_equal(s.items[1].status, 500);
    assert_int_equal(s.items[2].status, 200);
    for (size_t i = 0; i < s.n; i++) {
        assert_null(s.items[i].retry_after);
        assert_null(s.items[i].location);
        assert_int_equal(s.items[i].delay_ms, 0);
    }
    listen_script_free(&s);
    assert_int_equal(s.n, 0);
    assert_null(s.items);
}

static void test_options(void **state)
{
    (void)state;
    struct listen_script s;
    char err[256];

    assert_int_equal(listen_script_parse("429;retry-after=1, 302;location=http://127.0.0.1:1/x ,200;delay=250ms;"
                                         "retry-after=Wed, 21 Oct",
                                         &s, err, sizeof err),
                     HOOKD_EINVAL); /* a comma inside a value splits the item: " 21 Oct" is no status */
    assert_non_null(strstr(err, "21 Oct"));

    assert_int_equal(listen_script_parse("429;retry-after=1, 302;location=http://127.0.0.1:1/x ,503;delay=2s;retry-after=7",
                                         &s, err, sizeof err),
                     0);
    assert_int_equal(s.n, 3);
    assert_int_equal(s.items[0].status, 429);
    assert_string_equal(s.items[0].retry_after, "1");
    assert_int_equal(s.items[1].status, 302);
    assert_string_equal(s.items[1].location, "http://127.0.0.1:1/x");
    assert_null(s.items[1].retry_after);
    assert_int_equal(s.items[2].status, 503);
    assert_int_equal(s.items[2].delay_ms, 2000);
    assert_string_equal(s.items[2].retry_after, "7");
    listen_script_free(&s);
}

static void test_bad_scripts(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",                  /* empty */
        "500,,200",          /* empty item */
        "abc",               /* not a status */
        "99",                /* too short */
        "600",               /* out of range */
        "2000",              /* too long */
        "200;",              /* empty option */
        "200;delay",         /* option without value */
        "200;delay=soon",    /* bad duration */
        "200;delay=11m",     /* longer than a scripted delay may be */
        "200;colour=red",    /* unknown option */
        "200;retry-after=",  /* empty value */
        "200;retry-after=1;retry-after=2", /* twice */
        "200;location=a\rb", /* control character in a header */
    };
    char err[256];

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct listen_script s = {0};
        err[0] = '\0';
        if (listen_script_parse(bad[i], &s, err, sizeof err) != HOOKD_EINVAL)
            fail_msg("accepted bad script '%s'", bad[i]);
        assert_true(err[0] != '\0');
        assert_int_equal(s.n, 0);
        assert_null(s.items);
    }
}

static void test_delays(void **state)
{
    (void)state;
    struct listen_delays d;
    char err[256];

    assert_int_equal(listen_delays_parse("10ms, 3s,0,1", &d, err, sizeof err), 0);
    assert_int_equal(d.n, 4);
    assert_int_equal(d.ms[0], 10);
    assert_int_equal(d.ms[1], 3000);
    assert_int_equal(d.ms[2], 0);
    assert_int_equal(d.ms[3], 1000); /* a bare number is seconds */
    listen_delays_free(&d);

    assert_int_equal(listen_delays_parse("10ms,,1s", &d, err, sizeof err), HOOKD_EINVAL);
    assert_int_equal(listen_delays_parse("fast", &d, err, sizeof err), HOOKD_EINVAL);
    assert_int_equal(d.n, 0);
}

static void test_long_delay_list(void **state)
{
    (void)state;
    enum { N = 3000 };
    char *text = malloc(N * 6);
    struct listen_delays d;
    char err[256];
    size_t off = 0;

    assert_non_null(text);
    for (int i = 0; i < N; i++)
        off += (size_t)snprintf(text + off, N * 6 - off, "%s10ms", i > 0 ? "," : "");
    assert_int_equal(listen_delays_parse(text, &d, err, sizeof err), 0);
    assert_int_equal(d.n, N);
    assert_int_equal(d.ms[N - 1], 10);
    listen_delays_free(&d);
    free(text);
}

static void test_status_rules(void **state)
{
    (void)state;
    struct listen_status_rule r;
    char err[256];

    assert_int_equal(listen_status_rule_parse("/gone=410", &r, err, sizeof err), 0);
    assert_string_equal(r.path, "/gone");
    assert_int_equal(r.status, 410);
    listen_status_rule_free(&r);

    assert_int_equal(listen_status_rule_parse("/a=b=503", &r, err, sizeof err), 0); /* the last '=' splits */
    assert_string_equal(r.path, "/a=b");
    assert_int_equal(r.status, 503);
    listen_status_rule_free(&r);

    assert_int_equal(listen_status_rule_parse("gone=410", &r, err, sizeof err), HOOKD_EINVAL);
    assert_int_equal(listen_status_rule_parse("/gone", &r, err, sizeof err), HOOKD_EINVAL);
    assert_int_equal(listen_status_rule_parse("/gone=41", &r, err, sizeof err), HOOKD_EINVAL);
    assert_int_equal(listen_status_rule_parse("/gone=", &r, err, sizeof err), HOOKD_EINVAL);
    assert_null(r.path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_statuses), cmocka_unit_test(test_options),
        cmocka_unit_test(test_bad_scripts),    cmocka_unit_test(test_delays),
        cmocka_unit_test(test_long_delay_list), cmocka_unit_test(test_status_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
