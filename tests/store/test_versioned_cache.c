/*
 * The version-validated cache (store/versioned_cache.h) on either backend
 * (HOOKD_TEST_STORE): the first use loads; nothing reloads until the check
 * is due, and then only when the version moved or the cache was marked
 * stale; a failed reload keeps the generation in use; with none loaded the
 * error comes back and the cache is not left locked; replaced generations
 * and the last one are dropped exactly once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "store_fixture.h"
#include "store/pool.h"
#include "store/versioned_cache.h"

/* The family the tests play: a version and a load the test steers. */
static int64_t fake_version;
static int fail_version, fail_load, loads, drops;

static int fake_version_of(struct store *s, int64_t *version)
{
    assert_non_null(s); /* a reader was borrowed for the check */
    *version = fake_version;
    return fail_version;
}

static int fake_load(struct store *s, void **gen)
{
    int *n;

    assert_non_null(s);
    if (fail_load)
        return fail_load;
    if (!(n = malloc(sizeof *n)))
        return HOOKD_ENOMEM;
    *n = ++loads;
    *gen = n;
    return 0;
}

static void fake_drop(void *gen)
{
    drops++;
    free(gen);
}

static const struct versioned_cache_ops fake_ops = {
    .part = "test", .what = "fakes", .version = fake_version_of, .load = fake_load, .drop = fake_drop};

static void reset(void)
{
    fake_version = 1;
    fail_version = fail_load = loads = drops = 0;
}

/* The generation number a lock gives (from 1), or its error (negative). */
static int lock_gen(struct versioned_cache *vc)
{
    void *gen = NULL;
    int rc = versioned_cache_lock(vc, &gen);

    if (rc)
        return rc;
    int n = *(int *)gen;
    versioned_cache_unlock(vc);
    return n;
}

static void test_reload_only_when_due_and_moved(void **state)
{
    struct fixture *fx = *state;
    struct store_pool *pool;
    struct versioned_cache slow, eager;
    void *gen;

    reset();
    assert_int_equal(store_pool_create(fx->dsn, 2, &pool), 0);
    /* Checked at most hourly: a moved version waits for the check, a stale mark does not. */
    versioned_cache_init(&slow, pool, &fake_ops, 3600000);
    assert_false(versioned_cache_hold(&slow, &gen));
    versioned_cache_unlock(&slow);
    assert_int_equal(lock_gen(&slow), 1);
    assert_int_equal(lock_gen(&slow), 1);
    fake_version++;
    assert_int_equal(lock_gen(&slow), 1);
    versioned_cache_invalidate(&slow);
    assert_int_equal(lock_gen(&slow), 2);
    assert_int_equal(drops, 1); /* the first generation, once replaced */
    assert_true(versioned_cache_hold(&slow, &gen));
    assert_int_equal(*(int *)gen, 2);
    versioned_cache_unlock(&slow);
    versioned_cache_fini(&slow);
    assert_int_equal(drops, 2);

    /* Checked on every use: reloaded exactly when the version moves. */
    reset();
    versioned_cache_init(&eager, pool, &fake_ops, 0);
    assert_int_equal(lock_gen(&eager), 1);
    assert_int_equal(lock_gen(&eager), 1);
    assert_int_equal(lock_gen(&eager), 1);
    fake_version = 7;
    assert_int_equal(lock_gen(&eager), 2);
    assert_int_equal(lock_gen(&eager), 2);
    /* A failed reload, or a failed check, keeps the generation in use (the next use tries again). */
    fake_version = 8;
    fail_load = HOOKD_EIO;
    assert_int_equal(lock_gen(&eager), 2);
    fail_load = 0;
    fail_version = HOOKD_EUNAVAIL;
    versioned_cache_invalidate(&eager);
    assert_int_equal(lock_gen(&eager), 2);
    fail_version = 0;
    assert_int_equal(lock_gen(&eager), 3); /* the stale mark survived the failure */
    versioned_cache_fini(&eager);
    assert_int_equal(drops, 3);
    store_pool_destroy(pool);
}

static void test_no_generation_yet(void **state)
{
    struct fixture *fx = *state;
    struct store_pool *pool;
    struct versioned_cache vc;
    void *gen;

    reset();
    assert_int_equal(store_pool_create(fx->dsn, 2, &pool), 0);
    versioned_cache_init(&vc, pool, &fake_ops, 0);
    fail_load = HOOKD_EIO;
    assert_int_equal(lock_gen(&vc), HOOKD_EIO);
    fail_load = 0;
    fail_version = HOOKD_EUNAVAIL;
    assert_int_equal(lock_gen(&vc), HOOKD_EUNAVAIL);
    /* Not left locked by the failures: hold takes the lock at once. */
    assert_false(versioned_cache_hold(&vc, &gen));
    assert_null(gen);
    versioned_cache_unlock(&vc);
    fail_version = 0;
    assert_int_equal(lock_gen(&vc), 1);
    versioned_cache_fini(&vc);
    assert_int_equal(drops, 1);
    store_pool_destroy(pool);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reload_only_when_due_and_moved, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_generation_yet, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
