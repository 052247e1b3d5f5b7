/*
 * Store conformance, account tokens on either backend (HOOKD_TEST_STORE):
 * insert (the hash unique), get, lists by account with a cursor, the active
 * set (neither revoked nor expired), revoke (ENOTFOUND, ECONFLICT once
 * revoked) and the version every write moves, plain SQL included.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "store_fixture.h"

static void token_init(struct fixture *fx, struct api_token *t, char c, int64_t expires_at)
{
    memset(t, 0, sizeof *t);
    id_new(t->id, "tok_");
    t->account = fx->account;
    t->scope = TOKEN_SCOPE_READ_REPLAY;
    for (int i = 0; i < 64; i++)
        t->hash[i] = "0123456789abcdef"[(c + i + (int)(t->id[5] & 7)) % 16];
    t->hash[64] = '\0';
    t->description = "portal";
    t->created_by = "admin";
    t->created_at = clock_now_ms();
    t->expires_at = expires_at;
}

static bool active_has(struct fixture *fx, const char *id, int64_t now)
{
    struct token_list l = {0};
    bool found = false;

    assert_int_equal(store_token_list_active(fx->s, now, &l), 0);
    for (size_t i = 0; i < l.n; i++)
        found |= strcmp(l.items[i].id, id) == 0;
    token_list_free(&l);
    return found;
}

static void test_token_lifecycle(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms(), v0 = 0, v1 = 0, v2 = 0;
    struct api_token t, old, got = {0};
    struct token_list l = {0};

    token_init(fx, &t, 1, now + 3600000);
    token_init(fx, &old, 2, now - 1);
    assert_int_equal(store_token_version(fx->s, &v0), 0);
    assert_int_equal(store_token_insert(fx->s, &t), 0);
    assert_int_equal(store_token_version(fx->s, &v1), 0);
    assert_true(v1 != v0);
    struct api_token same_hash = old;
    snprintf(same_hash.hash, sizeof same_hash.hash, "%s", t.hash);
    assert_int_equal(store_token_insert(fx->s, &same_hash), HOOKD_EEXISTS);
    assert_int_equal(store_token_insert(fx->s, &old), 0);

    assert_int_equal(store_token_get(fx->s, t.id, &got), 0);
    assert_string_equal(got.id, t.id);
    assert_string_equal(got.account, fx->account);
    assert_int_equal(got.scope, TOKEN_SCOPE_READ_REPLAY);
    assert_string_equal(got.hash, t.hash);
    assert_string_equal(got.description, "portal");
    assert_string_equal(got.created_by, "admin");
    assert_int_equal(got.expires_at, t.expires_at);
    assert_int_equal(got.revoked_at, 0);
    api_token_free(&got);

    assert_int_equal(store_token_list(fx->s, &(struct token_filter){.account = fx->account, .limit = 10}, &l), 0);
    assert_int_equal(l.n, 2);
    assert_true(strcmp(l.items[0].id, l.items[1].id) > 0);
    token_list_free(&l);
    assert_true(active_has(fx, t.id, now));
    assert_false(active_has(fx, old.id, now)); /* expired */

    assert_int_equal(store_token_revoke(fx->s, t.id, now + 1), 0);
    assert_int_equal(store_token_revoke(fx->s, t.id, now + 2), HOOKD_ECONFLICT);
    assert_int_equal(store_token_revoke(fx->s, "tok_none", now), HOOKD_ENOTFOUND);
    assert_int_equal(store_token_version(fx->s, &v2), 0);
    assert_true(v2 != v1);
    assert_false(active_has(fx, t.id, now));
    assert_int_equal(store_token_get(fx->s, t.id, &got), 0);
    assert_int_equal(got.revoked_at, now + 1);
    api_token_free(&got);
    assert_int_equal(store_token_get(fx->s, "tok_none", &got), HOOKD_ENOTFOUND);
}

/* A row edited by hand with a hash that is not one still reads (it matches nothing), and the rest load. */
static void test_token_bad_row(void **state)
{
    struct fixture *fx = *state;
    int64_t now = clock_now_ms();
    struct api_token t, u;
    struct token_list l = {0};

    token_init(fx, &t, 3, now + 3600000);
    token_init(fx, &u, 4, now + 3600000);
    snprintf(t.hash, sizeof t.hash, "not-a-hash");
    assert_int_equal(store_token_insert(fx->s, &t), 0);
    assert_int_equal(store_token_insert(fx->s, &u), 0);
    assert_int_equal(store_token_list(fx->s, &(struct token_filter){.account = fx->account, .limit = 10}, &l), 0);
    assert_int_equal(l.n, 2);
    for (size_t i = 0; i < l.n; i++)
        if (strcmp(l.items[i].id, t.id) == 0)
            assert_string_equal(l.items[i].hash, "");
    token_list_free(&l);
    assert_true(active_has(fx, u.id, now));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_token_lifecycle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_token_bad_row, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
