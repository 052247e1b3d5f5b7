/* Unit tests of the notification hub: topics reach their own subscribers only, in order, and bounds hold. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "hookd.h"
#include "hub.h"

struct counter {
    int calls;
    int order; /* the value of *clock when last called */
    int *clock;
};

static void count(void *arg)
{
    struct counter *c = arg;
    c->calls++;
    c->order = ++*c->clock;
}

static void test_hub_topics_are_separate(void **state)
{
    struct hub *h;
    int clock = 0;
    struct counter outbox1 = {.clock = &clock}, outbox2 = {.clock = &clock}, endpoints = {.clock = &clock};

    assert_int_equal(hub_create(&h), 0);
    assert_int_equal(hub_subscribe(h, HUB_OUTBOX_CHANGED, count, &outbox1), 0);
    assert_int_equal(hub_subscribe(h, HUB_OUTBOX_CHANGED, count, &outbox2), 0);
    assert_int_equal(hub_subscribe(h, HUB_ENDPOINTS_CHANGED, count, &endpoints), 0);
    hub_notify(h, HUB_OUTBOX_CHANGED);
    hub_notify(h, HUB_OUTBOX_CHANGED);
    assert_int_equal(outbox1.calls, 2);
    assert_int_equal(outbox2.calls, 2);
    assert_int_equal(endpoints.calls, 0);
    assert_true(outbox1.order < outbox2.order); /* subscription order */
    hub_notify(h, HUB_ENDPOINTS_CHANGED);
    hub_notify(h, HUB_INBOX_CHANGED); /* nobody listens: nothing happens */
    assert_int_equal(endpoints.calls, 1);
    assert_int_equal(outbox1.calls, 2);
    hub_destroy(h);
}

static void test_hub_bounds(void **state)
{
    struct hub *h;
    int clock = 0;
    struct counter c = {.clock = &clock};

    assert_int_equal(hub_create(&h), 0);
    for (int i = 0; i < HUB_MAX_SUBSCRIBERS; i++)
        assert_int_equal(hub_subscribe(h, HUB_INBOX_CHANGED, count, &c), 0);
    assert_int_equal(hub_subscribe(h, HUB_INBOX_CHANGED, count, &c), HOOKD_EINVAL);
    assert_int_equal(hub_subscribe(h, HUB_TOPICS, count, &c), HOOKD_EINVAL);
    assert_int_equal(hub_subscribe(h, HUB_OUTBOX_CHANGED, NULL, &c), HOOKD_EINVAL);
    hub_notify(h, HUB_INBOX_CHANGED);
    assert_int_equal(c.calls, HUB_MAX_SUBSCRIBERS);
    hub_notify(h, HUB_TOPICS);   /* out of range: ignored */
    hub_notify(NULL, HUB_INBOX_CHANGED); /* no hub: ignored */
    assert_int_equal(c.calls, HUB_MAX_SUBSCRIBERS);
    assert_string_equal(hub_topic_name(HUB_OUTBOX_CHANGED), "outbox_changed");
    assert_string_equal(hub_topic_name(HUB_TOPICS), "?");
    hub_destroy(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hub_topics_are_separate),
        cmocka_unit_test(test_hub_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
