/* Unit tests of state machine definitions and the decision rules (DESIGN §7): validation names the field,
 * and machine_decide is stale / gap / apply / not allowed exactly as the rules say (machine_may_pass, its verdict
 * alone, with it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "inbound/machine.h"
#include "inbound/machine_cache.h"
#include "ops/api_common.h"

static const char ORDER[] =
    "{\"name\": \"order\", \"versioning\": \"contiguous\", \"transitions\": ["
    "{\"on\": \"order.created\", \"from\": [null], \"to\": \"created\"},"
    "{\"on\": \"order.paid\", \"from\": [\"created\"], \"to\": \"paid\"},"
    "{\"on\": \"order.fulfilled\", \"from\": [\"paid\"], \"to\": \"fulfilled\"},"
    "{\"on\": \"order.refunded\", \"from\": [\"paid\", \"fulfilled\"], \"to\": \"refunded\"},"
    "{\"on\": \"order.cancelled\", \"from\": [\"created\"], \"to\": \"cancelled\"}],"
    " \"emit\": \"order.status_changed\"}";

static int parse_text(const char *text, struct machine *m, struct api_error *err)
{
    json_t *j = json_loads(text, 0, NULL);
    int rc;

    assert_non_null(j);
    memset(err, 0, sizeof *err);
    rc = machine_parse(j, m, err);
    json_decref(j);
    return rc;
}

static void test_order_machine_parses(void **state)
{
    struct machine m;
    struct api_error err;

    (void)state;
    assert_int_equal(parse_text(ORDER, &m, &err), 0);
    assert_string_equal(m.name, "order");
    assert_int_equal(m.versioning, VERSIONING_CONTIGUOUS);
    assert_int_equal(m.n_transitions, 5);
    assert_int_equal(m.n_states, 5);
    assert_null(m.transitions[0].from[0]);
    assert_string_equal(m.emit, "order.status_changed");
    json_t *j = machine_definition_json(&m);
    char *text = json_dumps(j, JSON_COMPACT);
    assert_non_null(strstr(text, "\"from\":[null]"));
    free(text);
    json_decref(j);
    machine_free(&m);
}

static void test_refusals_name_the_field(void **state)
{
    static const struct {
        const char *body, *code, *field;
    } cases[] = {
        {"{\"versioning\": \"none\", \"transitions\": [{\"on\": \"a\", \"from\": [null], \"to\": \"x\"}]}",
         "missing_field", "name"},
        {"{\"name\": \"m\", \"transitions\": [{\"on\": \"a\", \"from\": [null], \"to\": \"x\"}]}", "missing_field",
         "versioning"},
        {"{\"name\": \"m\", \"versioning\": \"often\", \"transitions\": [{\"on\": \"a\", \"from\": [null], \"to\": \"x\"}]}",
         "invalid_field", "versioning"},
        {"{\"name\": \"m\", \"versioning\": \"none\"}", "missing_field", "transitions"},
        {"{\"name\": \"m\", \"versioning\": \"none\", \"transitions\": []}", "invalid_field", "transitions"},
        {"{\"name\": \"m\", \"versioning\": \"none\", \"transitions\": [{\"on\": \"a\", \"from\": [\"ghost\"], \"to\": \"x\"}]}",
         "invalid_field", "transitions[0].from: unknown state \"ghost\""},
        {"{\"name\": \"m\", \"versioning\": \"none\", \"transitions\": [{\"on\": \"a\", \"from\": [null], \"to\": \"x\"},"
         "{\"on\": \"a\", \"from\": [\"x\", null], \"to\": \"y\"}]}",
         "invalid_field", "transitions[1].from"},
        {"{\"name\": \"m\", \"versioning\": \"none\", \"transitions\": [{\"on\": \"a\", \"from\": [null], \"to\": \"x\"},"
         "{\"on\": \"b\", \"from\": [\"y\"], \"to\": \"z\"}, {\"on\": \"c\", \"from\": [\"z\"], \"to\": \"y\"}]}",
         "invalid_field", "unreachable"},
        {"{\"name\": \"m\", \"versioning\": \"none\", \"states\": [\"x\", \"w\"], \"transitions\": [{\"on\": \"a\", \"from\": [null], \"to\": \"x\"}]}",
         "invalid_field", "states: state \"w\" is unreachable"},
        {"{\"name\": \"m\", \"versioning\": \"none\", \"states\": [\"x\"], \"transitions\": [{\"on\": \"a\", \"from\": [null], \"to\": \"q\"}]}",
         "invalid_field", "transitions[0].to"},
        {"{\"name\": \"m\", \"versioning\": \"none\", \"transitions\": [{\"on\": \"a\", \"from\": [null, null], \"to\": \"x\"}]}",
         "invalid_field", "transitions[0].from"},
        {"{\"name\": \"m\", \"versioning\": \"none\", \"transitions\": [{\"on\": \"a\\u0001\", \"from\": [null], \"to\": \"x\"}]}",
         "invalid_field", "transitions[0].on"},
        {"{\"name\": \"m\", \"versioning\": \"none\", \"transitions\": [{\"on\": \"a\", \"from\": [null], \"to\": \"x\\n\"}]}",
         "invalid_field", "transitions[0].to"},
        {"{\"name\": \"m\", \"versioning\": \"none\", \"transitions\": [{\"on\": \"a\", \"from\": [null], \"to\": \"x\", \"if\": 1}]}",
         "unknown_field", "transitions[0].if"},
        {"{\"name\": \"m\", \"versioning\": \"none\", \"colour\": 1, \"transitions\": [{\"on\": \"a\", \"from\": [null], \"to\": \"x\"}]}",
         "unknown_field", "colour"},
        {"{\"name\": \"m\", \"versioning\": \"none\", \"emit\": 5, \"transitions\": [{\"on\": \"a\", \"from\": [null], \"to\": \"x\"}]}",
         "invalid_field", "emit"},
        {"{\"name\": \"a b\", \"versioning\": \"none\", \"transitions\": [{\"on\": \"a\", \"from\": [null], \"to\": \"x\"}]}",
         "invalid_field", "name"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct machine m;
        struct api_error err;
        int rc = parse_text(cases[i].body, &m, &err);
        if (rc != HOOKD_EINVAL || strcmp(err.code, cases[i].code) != 0 || !strstr(err.message, cases[i].field))
            fail_msg("case %zu: rc %d, %s: %s (want %s naming %s)", i, rc, err.code, err.message, cases[i].code,
                     cases[i].field);
        assert_int_equal(err.status, 400);
        machine_free(&m);
    }
}

static void test_decide_rules(void **state)
{
    struct machine m;
    struct api_error err;
    struct machine_decision d;

    (void)state;
    assert_int_equal(parse_text(ORDER, &m, &err), 0);
    /* A new entity: any version is a candidate, the transition decides. */
    machine_decide(&m, NULL, false, 0, "order.created", true, 1, &d);
    assert_int_equal(d.verdict, VERDICT_APPLY);
    assert_string_equal(d.to, "created");
    assert_true(d.sets_version);
    machine_decide(&m, NULL, false, 0, "order.paid", true, 2, &d);
    assert_int_equal(d.verdict, VERDICT_NOT_ALLOWED);
    /* Stale: at or below the applied version. */
    machine_decide(&m, "paid", true, 2, "order.paid", true, 2, &d);
    assert_int_equal(d.verdict, VERDICT_STALE);
    machine_decide(&m, "paid", true, 2, "order.created", true, 1, &d);
    assert_int_equal(d.verdict, VERDICT_STALE);
    /* Contiguous: a gap waits. */
    machine_decide(&m, "created", true, 1, "order.fulfilled", true, 3, &d);
    assert_int_equal(d.verdict, VERDICT_GAP);
    assert_non_null(strstr(d.reason, "waiting for version 2"));
    machine_decide(&m, "created", true, 1, "order.paid", true, 2, &d);
    assert_int_equal(d.verdict, VERDICT_APPLY);
    assert_string_equal(d.to, "paid");
    /* Refunded from paid or fulfilled; not from created. */
    machine_decide(&m, "fulfilled", true, 3, "order.refunded", true, 4, &d);
    assert_int_equal(d.verdict, VERDICT_APPLY);
    machine_decide(&m, "created", true, 1, "order.refunded", true, 2, &d);
    assert_int_equal(d.verdict, VERDICT_NOT_ALLOWED);
    /* No version: transition rules alone, the version stays. */
    machine_decide(&m, "created", true, 1, "order.paid", false, 0, &d);
    assert_int_equal(d.verdict, VERDICT_APPLY);
    assert_false(d.sets_version);
    /* An unknown type is never allowed. */
    machine_decide(&m, "created", true, 1, "order.teleported", true, 2, &d);
    assert_int_equal(d.verdict, VERDICT_NOT_ALLOWED);
    /* Monotonic: any newer version is a candidate. */
    m.versioning = VERSIONING_MONOTONIC;
    machine_decide(&m, "created", true, 1, "order.paid", true, 9, &d);
    assert_int_equal(d.verdict, VERDICT_APPLY);
    machine_decide(&m, "paid", true, 9, "order.paid", true, 8, &d);
    assert_int_equal(d.verdict, VERDICT_STALE);
    /* None: versions are ignored. */
    m.versioning = VERSIONING_NONE;
    machine_decide(&m, "created", true, 9, "order.paid", true, 1, &d);
    assert_int_equal(d.verdict, VERDICT_APPLY);
    assert_false(d.sets_version);
    machine_free(&m);
}

/* machine_may_pass (the re-evaluation's verdict alone) agrees with machine_decide everywhere: every
 * versioning, state, type and version around the applied one, with and without versions. */
static void test_may_pass_agrees_with_decide(void **state)
{
    static const char *const states[] = {NULL, "created", "paid", "fulfilled", "refunded", "cancelled"};
    static const char *const types[] = {"order.created", "order.paid", "order.fulfilled", "order.refunded",
                                        "order.cancelled", "order.teleported", NULL};
    static const enum machine_versioning modes[] = {VERSIONING_CONTIGUOUS, VERSIONING_MONOTONIC, VERSIONING_NONE};
    struct machine m;
    struct api_error err;
    int checked = 0;

    (void)state;
    assert_int_equal(parse_text(ORDER, &m, &err), 0);
    for (size_t mode = 0; mode < sizeof modes / sizeof modes[0]; mode++) {
        m.versioning = modes[mode];
        for (size_t si = 0; si < sizeof states / sizeof states[0]; si++)
            for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
                for (int applied = 0; applied < 2; applied++)
                    for (int has_version = 0; has_version < 2; has_version++)
                        for (int64_t v = 3; v <= 7; v++) {
                            struct machine_decision d;
                            machine_decide(&m, states[si], applied, 5, types[ti], has_version, v, &d);
                            bool pass = d.verdict == VERDICT_APPLY || d.verdict == VERDICT_STALE;
                            if (machine_may_pass(&m, states[si], applied, 5, types[ti], has_version, v) != pass)
                                fail_msg("mode %zu state %s type %s applied %d version %d/%lld: decide says %d", mode,
                                         states[si] ? states[si] : "(new)", types[ti] ? types[ti] : "(none)",
                                         applied, has_version, (long long)v, d.verdict);
                            checked++;
                        }
    }
    assert_int_equal(checked, 3 * 6 * 7 * 2 * 2 * 5);
    machine_free(&m);
}

static struct machine_record record(const char *name, const char *definition, int64_t updated_at)
{
    struct machine_record r = {.definition = (char *)definition, .created_at = 1, .updated_at = updated_at};

    snprintf(r.name, sizeof r.name, "%s", name);
    return r;
}

/* The cache parses a row once; a row whose text or time changed (a PATCH) is parsed again. */
static void test_cache_follows_the_stored_row(void **state)
{
    static const char SHORT[] = "{\"name\": \"order\", \"versioning\": \"monotonic\", \"transitions\": ["
                                "{\"on\": \"order.created\", \"from\": [null], \"to\": \"created\"}]}";
    struct machine_cache *c;
    const struct machine *a, *b, *again, *other;
    struct machine_record r = record("order", ORDER, 100);
    struct machine_decision d;

    (void)state;
    assert_int_equal(machine_cache_create(&c), 0);
    assert_int_equal(machine_cache_get(c, &r, &a), 0);
    assert_int_equal(a->versioning, VERSIONING_CONTIGUOUS);
    assert_int_equal(machine_cache_get(c, &r, &again), 0);
    assert_ptr_equal(a, again); /* the same text: not parsed again */
    machine_cache_put(c, again);

    /* Updated: the next decision sees the new definition, the one in use stays valid until put. */
    r = record("order", SHORT, 200);
    assert_int_equal(machine_cache_get(c, &r, &b), 0);
    assert_ptr_not_equal(a, b);
    assert_int_equal(b->versioning, VERSIONING_MONOTONIC);
    assert_int_equal(b->n_transitions, 1);
    machine_decide(a, "created", true, 1, "order.paid", true, 2, &d);
    assert_int_equal(d.verdict, VERDICT_APPLY);
    machine_decide(b, "created", true, 1, "order.paid", true, 2, &d);
    assert_int_equal(d.verdict, VERDICT_NOT_ALLOWED);
    machine_cache_put(c, a); /* the replaced entry goes with its last user */

    /* The same text with another time (two updates, plain SQL): parsed again too. */
    r = record("order", SHORT, 300);
    assert_int_equal(machine_cache_get(c, &r, &again), 0);
    assert_ptr_not_equal(again, b);
    machine_cache_put(c, again);
    machine_cache_put(c, b);

    /* Text that does not parse, or names another machine: EIO, nothing cached. */
    r = record("order", "{\"name\": \"order\"", 400);
    assert_int_equal(machine_cache_get(c, &r, &other), HOOKD_EIO);
    assert_null(other);
    r = record("shipment", ORDER, 400);
    assert_int_equal(machine_cache_get(c, &r, &other), HOOKD_EIO);
    r = record("order", ORDER, 100);
    assert_int_equal(machine_cache_get(c, &r, &other), 0);
    assert_int_equal(other->versioning, VERSIONING_CONTIGUOUS);
    machine_cache_put(c, other);
    machine_cache_put(c, NULL);
    machine_cache_destroy(c);
}

/* Past MACHINE_CACHE_MAX machines an unused one is dropped; one in use never is. */
static void test_cache_is_bounded(void **state)
{
    struct machine_cache *c;
    const struct machine *held, *m;
    char names[MACHINE_CACHE_MAX + 8][16], defs[MACHINE_CACHE_MAX + 8][256];
    struct machine_record r;

    (void)state;
    assert_int_equal(machine_cache_create(&c), 0);
    for (int i = 0; i < MACHINE_CACHE_MAX + 8; i++) {
        snprintf(names[i], sizeof names[i], "m%d", i);
        snprintf(defs[i], sizeof defs[i],
                 "{\"name\": \"%s\", \"versioning\": \"none\", \"transitions\": ["
                 "{\"on\": \"x.created\", \"from\": [null], \"to\": \"s%d\"}]}",
                 names[i], i);
    }
    r = record(names[0], defs[0], 1);
    assert_int_equal(machine_cache_get(c, &r, &held), 0);
    for (int i = 1; i < MACHINE_CACHE_MAX + 8; i++) {
        r = record(names[i], defs[i], 1);
        assert_int_equal(machine_cache_get(c, &r, &m), 0);
        assert_string_equal(m->name, names[i]);
        machine_cache_put(c, m);
    }
    assert_string_equal(held->name, "m0");
    assert_string_equal(held->states[0], "s0");
    r = record(names[0], defs[0], 1);
    assert_int_equal(machine_cache_get(c, &r, &m), 0);
    assert_ptr_equal(m, held); /* still listed: it was in use */
    machine_cache_put(c, m);
    machine_cache_put(c, held);
    machine_cache_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_machine_parses),
        cmocka_unit_test(test_refusals_name_the_field),
        cmocka_unit_test(test_decide_rules),
        cmocka_unit_test(test_may_pass_agrees_with_decide),
        cmocka_unit_test(test_cache_follows_the_stored_row),
        cmocka_unit_test(test_cache_is_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
