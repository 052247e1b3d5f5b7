/* Unit tests of secrets at rest (core/secret_box, docs/design.md §12): key text, sealing, opening,
 * the row binding (AAD), damage, a wrong or rotated key, and the key file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/secret_box.h"
#include "hookd.h"

/* 32 bytes 0x00..0x1f as hex and as base64. */
#define KEY_HEX "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
#define KEY_B64 "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

static int reset(void **state)
{
    (void)state;
    secret_box_use(NULL, NULL);
    return 0;
}

static void test_key_parse(void **state)
{
    (void)state;
    struct secret_key a, b;
    assert_int_equal(secret_key_parse(KEY_HEX, &a), 0);
    assert_int_equal(secret_key_parse(KEY_B64 " \n", &b), 0);
    assert_memory_equal(a.bytes, b.bytes, SECRET_KEY_LEN);
    assert_string_equal(a.id, b.id);
    assert_int_equal(strlen(a.id), SECRET_KEY_ID_LEN - 1);
    for (size_t i = 0; i < SECRET_KEY_LEN; i++)
        assert_int_equal(a.bytes[i], i);
    static const char *bad[] = {
        "",
        "short",
        KEY_HEX "00",                                                     /* 33 bytes */
        "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1",  /* 63 digits */
        "zz0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", /* not hex */
        "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8",                      /* no padding, 43 */
        "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHg==",                     /* 31 bytes */
        " " KEY_HEX,                                                        /* leading space */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (secret_key_parse(bad[i], &a) != HOOKD_EINVAL)
            fail_msg("accepted key text '%s'", bad[i]);
}

static void test_seal_open_round_trip(void **state)
{
    (void)state;
    struct secret_key k;
    assert_int_equal(secret_key_parse(KEY_HEX, &k), 0);
    secret_box_use(&k, NULL);
    assert_true(secret_box_active());
    assert_string_equal(secret_box_key_id(), k.id);

    char *sealed = NULL, *again = NULL, *plain = NULL;
    assert_int_equal(secret_box_seal("endpoint:ep_1", "whsec_c2VjcmV0", &sealed), 0);
    assert_true(secret_box_is_sealed(sealed));
    assert_non_null(strstr(sealed, k.id));
    assert_null(strstr(sealed, "whsec_"));
    assert_int_equal(strncmp(sealed, SECRET_BOX_PREFIX, strlen(SECRET_BOX_PREFIX)), 0);
    /* A fresh nonce each time: the same value seals differently. */
    assert_int_equal(secret_box_seal("endpoint:ep_1", "whsec_c2VjcmV0", &again), 0);
    assert_string_not_equal(sealed, again);

    unsigned long stale = secret_box_stale_count();
    assert_int_equal(secret_box_open("endpoint:ep_1", sealed, &plain, NULL), 0);
    assert_string_equal(plain, "whsec_c2VjcmV0");
    assert_int_equal(secret_box_stale_count(), stale);
    secret_text_free(plain);
    secret_text_free(sealed);
    secret_text_free(again);

    /* The empty value and one with every byte value but NUL survive. */
    char all[256];
    for (int i = 1; i < 256; i++)
        all[i - 1] = (char)i;
    all[255] = 0;
    assert_int_equal(secret_box_seal("meta:admin_token", all, &sealed), 0);
    assert_int_equal(secret_box_open("meta:admin_token", sealed, &plain, NULL), 0);
    assert_string_equal(plain, all);
    secret_text_free(plain);
    secret_text_free(sealed);
    assert_int_equal(secret_box_seal("source:s", "", &sealed), 0);
    assert_int_equal(secret_box_open("source:s", sealed, &plain, NULL), 0);
    assert_string_equal(plain, "");
    secret_text_free(plain);
    secret_text_free(sealed);
}

static void test_row_binding_and_damage(void **state)
{
    (void)state;
    struct secret_key k;
    assert_int_equal(secret_key_parse(KEY_HEX, &k), 0);
    secret_box_use(&k, NULL);
    char *sealed = NULL, *plain = NULL;
    assert_int_equal(secret_box_seal("endpoint:ep_1", "whsec_c2VjcmV0", &sealed), 0);

    /* Copied to another row: does not open. */
    assert_int_equal(secret_box_open("endpoint:ep_2", sealed, &plain, NULL), HOOKD_EIO);
    assert_null(plain);
    assert_int_equal(secret_box_open("source:ep_1", sealed, &plain, NULL), HOOKD_EIO);

    /* Each character of the payload changed in turn: never opens, never crashes. */
    size_t len = strlen(sealed), start = strrchr(sealed, ':') + 1 - sealed;
    for (size_t i = start; i < len; i++) {
        char *t = strdup(sealed);
        assert_non_null(t);
        t[i] = t[i] == 'A' ? 'B' : 'A';
        int rc = secret_box_open("endpoint:ep_1", t, &plain, NULL);
        if (rc == 0)
            fail_msg("damaged at %zu opened as '%s'", i, plain);
        free(t);
    }
    /* Cut short, empty payload, not base64. */
    static const char *broken_tail[] = {"", "AAAA", "!!!!", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"};
    for (size_t i = 0; i < sizeof broken_tail / sizeof broken_tail[0]; i++) {
        char t[256];
        snprintf(t, sizeof t, "%s%s:%s", SECRET_BOX_PREFIX, k.id, broken_tail[i]);
        assert_int_not_equal(secret_box_open("endpoint:ep_1", t, &plain, NULL), 0);
    }
    char *t = strdup(sealed);
    t[len / 2 + start / 2] = 0;
    assert_int_not_equal(secret_box_open("endpoint:ep_1", t, &plain, NULL), 0);
    free(t);
    secret_text_free(sealed);
}

static void test_wrong_and_rotated_key(void **state)
{
    (void)state;
    struct secret_key old, new;
    assert_int_equal(secret_key_parse(KEY_HEX, &old), 0);
    assert_int_equal(secret_key_generate(&new), 0);
    assert_string_not_equal(old.id, new.id);

    secret_box_use(&old, NULL);
    char *under_old = NULL, *plain = NULL;
    assert_int_equal(secret_box_seal("endpoint:ep_1", "whsec_b2xk", &under_old), 0);

    /* Another key alone: EINVAL naming the key it was sealed under. */
    secret_box_use(&new, NULL);
    char wrong[SECRET_KEY_ID_LEN] = "";
    assert_int_equal(secret_box_open("endpoint:ep_1", under_old, &plain, wrong), HOOKD_EINVAL);
    assert_string_equal(wrong, old.id);

    /* Rotation: sealing with the new key, the old one still opens (counted stale). */
    secret_box_use(&new, &old);
    unsigned long stale = secret_box_stale_count();
    assert_int_equal(secret_box_open("endpoint:ep_1", under_old, &plain, NULL), 0);
    assert_string_equal(plain, "whsec_b2xk");
    assert_int_equal(secret_box_stale_count(), stale + 1);
    secret_text_free(plain);
    char *under_new = NULL;
    assert_int_equal(secret_box_seal("endpoint:ep_1", "whsec_b2xk", &under_new), 0);
    assert_non_null(strstr(under_new, new.id));

    /* Plain text from before sealing is returned as it is and counted stale. */
    stale = secret_box_stale_count();
    assert_int_equal(secret_box_open("endpoint:ep_1", "whsec_cGxhaW4", &plain, NULL), 0);
    assert_string_equal(plain, "whsec_cGxhaW4");
    assert_int_equal(secret_box_stale_count(), stale + 1);
    secret_text_free(plain);

    /* Without a key: values are plain, a sealed one does not open. */
    secret_box_use(NULL, NULL);
    assert_false(secret_box_active());
    assert_int_equal(secret_box_seal("endpoint:ep_1", "x", &plain), 0);
    assert_string_equal(plain, "x");
    secret_text_free(plain);
    plain = NULL;
    assert_int_not_equal(secret_box_open("endpoint:ep_1", under_new, &plain, NULL), 0);
    secret_text_free(under_old);
    secret_text_free(under_new);
    secret_key_wipe(&old);
    for (size_t i = 0; i < SECRET_KEY_LEN; i++)
        assert_int_equal(old.bytes[i], 0);
}

static void test_key_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/hookd-secret-box.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], missing[256];
    snprintf(path, sizeof path, "%s/key", dir);
    snprintf(missing, sizeof missing, "%s/none", dir);

    struct secret_key written, read;
    mode_t old_mask = umask(0);
    assert_int_equal(secret_key_write_file(path, true, &written), 0);
    umask(old_mask);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(secret_key_load_file(path, &read), 0);
    assert_memory_equal(written.bytes, read.bytes, SECRET_KEY_LEN);
    assert_string_equal(written.id, read.id);

    assert_int_equal(secret_key_load_file(missing, &read), HOOKD_ENOTFOUND);
    FILE *f = fopen(missing, "w");
    assert_non_null(f);
    fputs("not a key\n", f);
    fclose(f);
    assert_int_equal(secret_key_load_file(missing, &read), HOOKD_EINVAL);

    unlink(path);
    unlink(missing);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_key_parse, reset, reset),
        cmocka_unit_test_setup_teardown(test_seal_open_round_trip, reset, reset),
        cmocka_unit_test_setup_teardown(test_row_binding_and_damage, reset, reset),
        cmocka_unit_test_setup_teardown(test_wrong_and_rotated_key, reset, reset),
        cmocka_unit_test_setup_teardown(test_key_file, reset, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
