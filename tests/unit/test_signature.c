/* Unit tests of Standard Webhooks signatures: the spec's example, failures, rotation, hookd_verify, and the
 * scheme table (found by name, sign → verify, tampering refused). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/base64.h"
#include "core/clock.h"
#include "core/signature.h"
#include "core/signature_scheme.h"
#include <strings.h>
#include "hookd.h"

/* The example published with the Standard Webhooks specification. */
#define SPEC_SECRET "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define SPEC_ID "msg_p5jXN8AQM9LWM0D4loKWxJek"
#define SPEC_TS 1614265330
#define SPEC_TS_TEXT "1614265330"
#define SPEC_BODY "{\"test\": 2432232314}"
#define SPEC_SIG "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

static int verify_spec(const char *secret, const char *header, const char *body, int64_t now_s)
{
    return signature_verify(secret, SPEC_ID, SPEC_TS_TEXT, header, body, strlen(body), now_s, 300);
}

static void test_spec_example(void **state)
{
    char sig[SIGNATURE_V1_LEN];

    assert_int_equal(signature_sign(SPEC_SECRET, SPEC_ID, SPEC_TS, SPEC_BODY, strlen(SPEC_BODY), sig), 0);
    assert_string_equal(sig, SPEC_SIG);
    assert_int_equal(strlen(sig), SIGNATURE_V1_LEN - 1);
    /* The prefix is optional, as in the reference libraries. */
    assert_int_equal(signature_sign(SPEC_SECRET + 6, SPEC_ID, SPEC_TS, SPEC_BODY, strlen(SPEC_BODY), sig), 0);
    assert_string_equal(sig, SPEC_SIG);
    assert_int_equal(verify_spec(SPEC_SECRET, SPEC_SIG, SPEC_BODY, SPEC_TS), 0);
}

static void test_verify_failures(void **state)
{
    char other[SECRET_TEXT_MAX];

    /* Tampered body. */
    assert_int_equal(verify_spec(SPEC_SECRET, SPEC_SIG, "{\"test\": 2432232315}", SPEC_TS), HOOKD_ESIG);
    /* Wrong secret. */
    secret_generate(other);
    assert_int_equal(verify_spec(other, SPEC_SIG, SPEC_BODY, SPEC_TS), HOOKD_ESIG);
    /* Tampered id. */
    assert_int_equal(signature_verify(SPEC_SECRET, "msg_other", SPEC_TS_TEXT, SPEC_SIG, SPEC_BODY, strlen(SPEC_BODY),
                                      SPEC_TS, 300),
                     HOOKD_ESIG);
    /* Old and future timestamps, just outside the tolerance; inside it still verifies. */
    assert_int_equal(verify_spec(SPEC_SECRET, SPEC_SIG, SPEC_BODY, SPEC_TS + 301), HOOKD_ETIME);
    assert_int_equal(verify_spec(SPEC_SECRET, SPEC_SIG, SPEC_BODY, SPEC_TS - 301), HOOKD_ETIME);
    assert_int_equal(verify_spec(SPEC_SECRET, SPEC_SIG, SPEC_BODY, SPEC_TS + 300), 0);
    assert_int_equal(verify_spec(SPEC_SECRET, SPEC_SIG, SPEC_BODY, SPEC_TS - 300), 0);
    /* tolerance 0 disables the check. */
    assert_int_equal(signature_verify(SPEC_SECRET, SPEC_ID, SPEC_TS_TEXT, SPEC_SIG, SPEC_BODY, strlen(SPEC_BODY),
                                      SPEC_TS + 100000, 0),
                     0);
    /* Wrong version tag, truncated, empty, one changed character. */
    assert_int_equal(verify_spec(SPEC_SECRET, "v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", SPEC_BODY, SPEC_TS),
                     HOOKD_ESIG);
    assert_int_equal(verify_spec(SPEC_SECRET, "v1a,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", SPEC_BODY, SPEC_TS),
                     HOOKD_ESIG);
    assert_int_equal(verify_spec(SPEC_SECRET, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE", SPEC_BODY, SPEC_TS),
                     HOOKD_ESIG);
    assert_int_equal(verify_spec(SPEC_SECRET, "", SPEC_BODY, SPEC_TS), HOOKD_ESIG);
    assert_int_equal(verify_spec(SPEC_SECRET, "v1,h0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", SPEC_BODY, SPEC_TS),
                     HOOKD_ESIG);
    /* Malformed inputs. */
    assert_int_equal(signature_verify(SPEC_SECRET, SPEC_ID, "16142x", SPEC_SIG, SPEC_BODY, strlen(SPEC_BODY), SPEC_TS,
                                      300),
                     HOOKD_EINVAL);
    assert_int_equal(signature_verify(SPEC_SECRET, SPEC_ID, "", SPEC_SIG, SPEC_BODY, strlen(SPEC_BODY), SPEC_TS, 300),
                     HOOKD_EINVAL);
    assert_int_equal(verify_spec("whsec_!!!", SPEC_SIG, SPEC_BODY, SPEC_TS), HOOKD_EINVAL);
    assert_int_equal(signature_verify(SPEC_SECRET, NULL, SPEC_TS_TEXT, SPEC_SIG, SPEC_BODY, strlen(SPEC_BODY), SPEC_TS,
                                      300),
                     HOOKD_EINVAL);
}

static void test_multiple_signatures(void **state)
{
    /* Several entries, the matching one second (and last); other versions ignored. */
    assert_int_equal(verify_spec(SPEC_SECRET, "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= " SPEC_SIG, SPEC_BODY,
                                 SPEC_TS),
                     0);
    assert_int_equal(verify_spec(SPEC_SECRET, "v1a,AAAA  " SPEC_SIG "  v1,bogus", SPEC_BODY, SPEC_TS), 0);
    assert_int_equal(verify_spec(SPEC_SECRET, "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v1,bogus", SPEC_BODY,
                                 SPEC_TS),
                     HOOKD_ESIG);
}

static void test_rotation(void **state)
{
    char old_secret[SECRET_TEXT_MAX], new_secret[SECRET_TEXT_MAX], third[SECRET_TEXT_MAX];
    char sig_old[SIGNATURE_V1_LEN], sig_new[SIGNATURE_V1_LEN], header[2 * SIGNATURE_V1_LEN];
    const char *body = "{\"id\":\"evt_1\"}";
    size_t len = strlen(body);

    secret_generate(old_secret);
    secret_generate(new_secret);
    secret_generate(third);
    assert_string_not_equal(old_secret, new_secret);
    /* During the grace period hookd signs with both secrets. */
    assert_int_equal(signature_sign(new_secret, "evt_1", 1700000000, body, len, sig_new), 0);
    assert_int_equal(signature_sign(old_secret, "evt_1", 1700000000, body, len, sig_old), 0);
    assert_string_not_equal(sig_new, sig_old);
    snprintf(header, sizeof header, "%s %s", sig_new, sig_old);
    /* A receiver with either secret accepts; one with neither refuses. */
    assert_int_equal(signature_verify(old_secret, "evt_1", "1700000000", header, body, len, 1700000001, 300), 0);
    assert_int_equal(signature_verify(new_secret, "evt_1", "1700000000", header, body, len, 1700000001, 300), 0);
    assert_int_equal(signature_verify(third, "evt_1", "1700000000", header, body, len, 1700000001, 300), HOOKD_ESIG);
    /* After the grace period only the new signature is sent. */
    assert_int_equal(signature_verify(old_secret, "evt_1", "1700000000", sig_new, body, len, 1700000001, 300),
                     HOOKD_ESIG);
}

static void test_secrets(void **state)
{
    char secret[SECRET_TEXT_MAX], text[SECRET_TEXT_MAX];
    unsigned char key[SECRET_MAX_BYTES], raw[65];

    secret_generate(secret);
    assert_int_equal(strncmp(secret, "whsec_", 6), 0);
    assert_int_equal(strlen(secret), 6 + 44);
    assert_int_equal(secret_decode(secret, key), 32);
    assert_true(secret_is_valid(secret));
    assert_int_equal(secret_decode(SPEC_SECRET, key), 24);
    assert_true(secret_is_valid(SPEC_SECRET));

    memset(raw, 7, sizeof raw);
    memcpy(text, "whsec_", 6);
    base64_encode(raw, 16, text + 6); /* too short for a hookd secret, still decodable */
    assert_int_equal(secret_decode(text, key), 16);
    assert_false(secret_is_valid(text));
    base64_encode(raw, 64, text + 6);
    assert_int_equal(secret_decode(text, key), 64);
    assert_true(secret_is_valid(text));
    base64_encode(raw, 65, text + 6); /* 65 bytes do not fit */
    assert_int_equal(secret_decode(text, key), HOOKD_EINVAL);
    assert_false(secret_is_valid(text));
    assert_int_equal(secret_decode("whsec_", key), HOOKD_EINVAL);
    assert_int_equal(secret_decode("whsec_abc$", key), HOOKD_EINVAL);
    assert_false(secret_is_valid(NULL));
}

static void test_hookd_verify(void **state)
{
    clock_pin_ms((int64_t)SPEC_TS * 1000 + 299000);
    assert_int_equal(hookd_verify(SPEC_SECRET, SPEC_ID, SPEC_TS_TEXT, SPEC_SIG, SPEC_BODY, strlen(SPEC_BODY), 0), 0);
    clock_pin_ms((int64_t)SPEC_TS * 1000 + 301000); /* default tolerance is 300 s */
    assert_int_equal(hookd_verify(SPEC_SECRET, SPEC_ID, SPEC_TS_TEXT, SPEC_SIG, SPEC_BODY, strlen(SPEC_BODY), 0),
                     HOOKD_ETIME);
    assert_int_equal(hookd_verify(SPEC_SECRET, SPEC_ID, SPEC_TS_TEXT, SPEC_SIG, SPEC_BODY, strlen(SPEC_BODY), 600), 0);
    assert_int_equal(hookd_verify(SPEC_SECRET, SPEC_ID, SPEC_TS_TEXT, SPEC_SIG, "{}", 2, 600), HOOKD_ESIG);
    assert_int_equal(hookd_verify(SPEC_SECRET, SPEC_ID, SPEC_TS_TEXT, SPEC_SIG, SPEC_BODY, strlen(SPEC_BODY), -1),
                     HOOKD_EINVAL);
    clock_pin_ms(0);
}

/* ---- the scheme table ---------------------------------------------------------------- */

/* A request's headers as name/value pairs, looked up case-insensitively like an HTTP server's. */
struct fake_headers {
    const char *names[4];
    const char *values[4];
};

static const char *fake_header(void *ctx, const char *name)
{
    const struct fake_headers *h = ctx;

    for (size_t i = 0; i < 4 && h->names[i]; i++) {
        if (strcasecmp(h->names[i], name) == 0)
            return h->values[i];
    }
    return NULL;
}

static void test_scheme_table(void **state)
{
    const struct signature_scheme *sw = signature_scheme_find("standard-webhooks");

    assert_non_null(sw);
    assert_ptr_equal(sw, &signature_schemes[0]); /* the first entry */
    assert_string_equal(sw->header, "webhook-signature");
    assert_non_null(sw->sign);
    assert_non_null(sw->verify);
    assert_ptr_equal(signature_scheme_find(SIGNATURE_SCHEME_DEFAULT), sw);
    assert_non_null(signature_scheme_find("stripe"));
    assert_non_null(signature_scheme_find("github"));
    assert_non_null(signature_scheme_find("hmac"));
    assert_non_null(signature_scheme_find("none"));
    assert_null(signature_scheme_find("HMAC"));
    assert_null(signature_scheme_find("Standard-Webhooks"));
    assert_null(signature_scheme_find(""));
    assert_null(signature_scheme_find(NULL));
    for (size_t i = 0; i < signature_schemes_count; i++)
        assert_ptr_equal(signature_scheme_find(signature_schemes[i].name), &signature_schemes[i]);
}

static void test_scheme_round_trip(void **state)
{
    const struct signature_scheme *sw = signature_scheme_find(SIGNATURE_SCHEME_DEFAULT);
    char a[SECRET_TEXT_MAX], b[SECRET_TEXT_MAX], other[SECRET_TEXT_MAX];
    char body[] = "{\"type\":\"order.paid\",\"data\":{\"n\":1}}";
    char sig[2 * SIGNATURE_V1_LEN];
    const char *secrets[] = {a, b};
    const struct signature_message msg = {.id = "evt_1", .timestamp_s = 1700000000, .body = body,
                                          .body_len = strlen(body)};
    struct fake_headers h = {{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"}, {"evt_1", "1700000000", sig}};
    struct signature_request req = {.header = fake_header, .header_ctx = &h, .body = body,
                                    .body_len = strlen(body), .now_s = 1700000010, .tolerance_s = 300};
    const char *only_b[] = {b}, *only_other[] = {other};

    secret_generate(a);
    secret_generate(b);
    secret_generate(other);
    /* One entry per secret, space-separated; each verifies alone. */
    assert_int_equal(sw->sign(&msg, secrets, 2, sig, sizeof sig), 0);
    assert_int_equal(strlen(sig), 2 * (SIGNATURE_V1_LEN - 1) + 1);
    assert_int_equal(sw->verify(&req, secrets, 2), 0);
    assert_int_equal(sw->verify(&req, only_b, 1), 0);
    assert_int_equal(sw->verify(&req, only_other, 1), HOOKD_ESIG);
    /* Any byte of the body changed: refused. */
    for (size_t i = 0; i < strlen(body); i++) {
        body[i] ^= 0x01;
        assert_int_equal(sw->verify(&req, secrets, 2), HOOKD_ESIG);
        body[i] ^= 0x01;
    }
    assert_int_equal(sw->verify(&req, secrets, 2), 0);
    /* A changed id or timestamp is refused too; one outside the tolerance is HOOKD_ETIME. */
    h.values[0] = "evt_2";
    assert_int_equal(sw->verify(&req, secrets, 2), HOOKD_ESIG);
    h.values[0] = "evt_1";
    h.values[1] = "1700000001";
    assert_int_equal(sw->verify(&req, secrets, 2), HOOKD_ESIG);
    h.values[1] = "1700000000";
    req.now_s = 1700000301;
    assert_int_equal(sw->verify(&req, secrets, 2), HOOKD_ETIME);
    req.now_s = 1700000010;
    /* A missing header, or no secrets, cannot verify. */
    h.names[2] = "x-other";
    assert_int_equal(sw->verify(&req, secrets, 2), HOOKD_EINVAL);
    h.names[2] = "webhook-signature";
    assert_int_equal(sw->verify(&req, secrets, 0), HOOKD_EINVAL);
    assert_int_equal(sw->verify(&req, secrets, 2), 0);
    /* The spec's example through the table. */
    const char *spec[] = {SPEC_SECRET};
    const struct signature_message spec_msg = {.id = SPEC_ID, .timestamp_s = SPEC_TS, .body = SPEC_BODY,
                                               .body_len = strlen(SPEC_BODY)};
    assert_int_equal(sw->sign(&spec_msg, spec, 1, sig, sizeof sig), 0);
    assert_string_equal(sig, SPEC_SIG);
    /* Room for one entry only: refused, nothing half-written. */
    assert_int_equal(sw->sign(&msg, secrets, 2, sig, SIGNATURE_V1_LEN + 2), HOOKD_EINVAL);
    assert_string_equal(sig, "");
    /* A secret that does not decode is skipped; none at all signs nothing. */
    const char *bad_then_a[] = {"whsec_!!!", a};
    assert_int_equal(sw->sign(&msg, bad_then_a, 2, sig, sizeof sig), 0);
    assert_int_equal(strlen(sig), SIGNATURE_V1_LEN - 1);
    assert_int_equal(sw->sign(&msg, secrets, 0, sig, sizeof sig), 0);
    assert_string_equal(sig, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec_example),  cmocka_unit_test(test_verify_failures),
        cmocka_unit_test(test_multiple_signatures), cmocka_unit_test(test_rotation),
        cmocka_unit_test(test_secrets),       cmocka_unit_test(test_hookd_verify),
        cmocka_unit_test(test_scheme_table),  cmocka_unit_test(test_scheme_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
