/*
 * HMAC (core/mac.c) with its per-thread keyed contexts: RFC 4231 known
 * answers, each computed again and interleaved with other keys (a kept
 * context must start from its key every time), keys of every length around
 * the kept maximum, more keys than the table has slots (replacement), a key
 * that differs from a kept one in its last byte only, messages in parts, and
 * other threads (their own tables, freed when they exit: ASan's leak check).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "core/mac.h"

struct vector {
    const char *key_hex, *data_hex, *sha256_hex, *sha512_hex;
};

/* RFC 4231 test cases 1, 2, 4, 6 and 7 (case 6 and 7: a 131-byte key, longer than a block). */
static const struct vector rfc4231[] = {
    {"0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "4869205468657265",
     "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
     "87aa7cdea5ef619d4ff0b4241a1d6cb02379f4e2ce4ec2787ad0b30545e17cde"
     "daa833b7d6b8a702038b274eaea3f4e4be9d914eeb61f1702e696c203a126854"},
    {"4a656665", "7768617420646f2079612077616e7420666f72206e6f7468696e673f",
     "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
     "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea250554"
     "9758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737"},
    {"0102030405060708090a0b0c0d0e0f10111213141516171819",
     "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd",
     "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b",
     "b0ba465637458c6990e5a8c5f61d4af7e576d97ff94b872de76f8050361ee3db"
     "a91ca5c11aa25eb4d679275cc5788063a5f19741120c4f2de2adebeb10a298dd"},
    {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
     "54657374205573696e67204c6172676572205468616e20426c6f636b2d53697a65204b6579202d2048617368204b6579204669727374",
     "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
     "80b24263c7c1a3ebb71493c1dd7be8b49b46d1f41b4aeec1121b013783f8f352"
     "6b56d037e05f2598bd0fd2215d6a1e5295e64f73f63f0aec8b915a985d786598"},
    {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
     "5468697320697320612074657374207573696e672061206c6172676572207468616e20626c6f636b2d73697a65206b657920616e642061"
     "206c6172676572207468616e20626c6f636b2d73697a6520646174612e20546865206b6579206e6565647320746f20626520686173686564"
     "206265666f7265206265696e6720757365642062792074686520484d414320616c676f726974686d2e",
     "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2",
     "e37b6a775dc87dbaa4dfa9f96e5e3ffddebd71f8867289865df5a32d20cdc944"
     "b6022cac3c4982b10d5eeb55c3e4de15134676fb6de0446065c97440fa8c6a58"},
};

#define N_VECTORS (sizeof rfc4231 / sizeof rfc4231[0])

static size_t unhex(const char *hex, unsigned char *out, size_t cap)
{
    long n = hex_decode(hex, strlen(hex), out, cap);
    assert_true(n >= 0);
    return (size_t)n;
}

/* Checks vector v on alg, the data given in two parts split at its middle. */
static void check_vector(const struct vector *v, enum mac_algorithm alg)
{
    unsigned char key[256], data[256], mac[MAC_MAX_LEN];
    char hex[2 * MAC_MAX_LEN + 1];
    size_t kl = unhex(v->key_hex, key, sizeof key), dl = unhex(v->data_hex, data, sizeof data);
    const struct mac_part parts[] = {{data, dl / 2}, {data + dl / 2, dl - dl / 2}};

    assert_int_equal(mac_hmac(alg, key, kl, parts, 2, mac), 0);
    hex_encode(mac, mac_len(alg), hex);
    assert_string_equal(hex, alg == MAC_SHA512 ? v->sha512_hex : v->sha256_hex);
}

static void test_known_answers_again_and_interleaved(void **state)
{
    (void)state;
    for (int round = 0; round < 4; round++) {
        for (size_t i = 0; i < N_VECTORS; i++) {
            check_vector(&rfc4231[i], MAC_SHA256);
            check_vector(&rfc4231[i], MAC_SHA512);
        }
        for (size_t i = N_VECTORS; i-- > 0;)
            check_vector(&rfc4231[i], round % 2 ? MAC_SHA512 : MAC_SHA256);
    }
}

/* mac_hmac against OpenSSL's one-shot HMAC for key k of length n (bytes i*7+n), message m. */
static void check_against_oneshot(size_t n, unsigned seed, const char *m)
{
    unsigned char key[200], want[EVP_MAX_MD_SIZE], got[MAC_MAX_LEN];
    unsigned int want_len = 0;
    const struct mac_part part = {m, strlen(m)};

    for (size_t i = 0; i < n; i++)
        key[i] = (unsigned char)(i * 7 + n + seed);
    assert_non_null(HMAC(EVP_sha256(), n > 0 ? key : (const unsigned char *)"", (int)n, (const unsigned char *)m,
                         strlen(m), want, &want_len));
    assert_int_equal(mac_hmac(MAC_SHA256, key, n, &part, 1, got), 0);
    assert_int_equal(want_len, 32);
    assert_memory_equal(got, want, 32);
}

static void test_key_lengths_and_many_keys(void **state)
{
    (void)state;
    /* Every length around the kept maximum (64) and the empty key, twice each. */
    for (int round = 0; round < 2; round++) {
        for (size_t n = 0; n <= 130; n++)
            check_against_oneshot(n, 0, "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W.1700000000.{\"a\":1}");
    }
    /* More keys than slots, in turn, three times: every slot is taken over and taken back. */
    for (int round = 0; round < 3; round++) {
        for (unsigned seed = 0; seed < 300; seed++)
            check_against_oneshot(32, seed, round == 1 ? "second message" : "first message");
    }
}

static void test_key_differing_in_last_byte(void **state)
{
    unsigned char a[32], b[32], ma[MAC_MAX_LEN], mb[MAC_MAX_LEN], ma2[MAC_MAX_LEN];
    const struct mac_part part = {"body", 4};

    (void)state;
    memset(a, 0x5a, sizeof a);
    memcpy(b, a, sizeof b);
    b[31] ^= 1;
    assert_int_equal(mac_hmac(MAC_SHA256, a, 32, &part, 1, ma), 0);
    assert_int_equal(mac_hmac(MAC_SHA256, b, 32, &part, 1, mb), 0);
    assert_int_equal(mac_hmac(MAC_SHA256, a, 32, &part, 1, ma2), 0);
    assert_memory_not_equal(ma, mb, 32);
    assert_memory_equal(ma, ma2, 32);
    /* The same key bytes with the other algorithm is another context. */
    assert_int_equal(mac_hmac(MAC_SHA512, a, 32, &part, 1, mb), 0);
    assert_memory_not_equal(ma, mb, 32);
}

/* Another thread's check (no cmocka assertion off the main thread): the number of wrong answers. */
static void *thread_vectors(void *arg)
{
    uintptr_t wrong = 0;

    (void)arg;
    for (int round = 0; round < 50; round++) {
        for (size_t i = 0; i < N_VECTORS; i++) {
            const struct vector *v = &rfc4231[i];
            enum mac_algorithm alg = round % 2 ? MAC_SHA512 : MAC_SHA256;
            unsigned char key[256], data[256], mac[MAC_MAX_LEN];
            char hex[2 * MAC_MAX_LEN + 1];
            long kl = hex_decode(v->key_hex, strlen(v->key_hex), key, sizeof key);
            long dl = hex_decode(v->data_hex, strlen(v->data_hex), data, sizeof data);
            const struct mac_part part = {data, dl > 0 ? (size_t)dl : 0};
            if (kl < 0 || dl < 0 || mac_hmac(alg, key, (size_t)kl, &part, 1, mac) != 0) {
                wrong++;
                continue;
            }
            hex_encode(mac, mac_len(alg), hex);
            wrong += strcmp(hex, alg == MAC_SHA512 ? v->sha512_hex : v->sha256_hex) != 0;
        }
    }
    return (void *)wrong;
}

static void test_threads(void **state)
{
    pthread_t t[4];

    (void)state;
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, thread_vectors, NULL), 0);
    assert_null(thread_vectors(NULL));
    for (size_t i = 0; i < 4; i++) {
        void *wrong = (void *)1;
        assert_int_equal(pthread_join(t[i], &wrong), 0);
        assert_null(wrong);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_answers_again_and_interleaved),
        cmocka_unit_test(test_key_lengths_and_many_keys),
        cmocka_unit_test(test_key_differing_in_last_byte),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
