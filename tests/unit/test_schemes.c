/*
 * The signature scheme table beyond Standard Webhooks v1 (core/scheme_*.c):
 * known-answer vectors computed with independent tools (openssl dgst -hmac,
 * Node's crypto for ed25519, GitHub's documented example), every single-byte
 * body change refused, wrong and rotated secrets, missing and malformed
 * headers, timestamps at the tolerance and one past it, several signatures
 * with one valid, v1a keys, and hmac's settings and templates.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <time.h>

#include "core/base64.h"
#include "core/ed25519.h"
#include "core/signature.h"
#include "core/signature_scheme.h"
#include "hookd.h"

#define TS 1700000000
#define TS_TEXT "1700000000"

/* ---- a request's headers ---------------------------------------------------------------- */

#define MAX_HEADERS 8
struct fake_headers {
    const char *names[MAX_HEADERS];
    const char *values[MAX_HEADERS];
};

static const char *fake_header(void *ctx, const char *name)
{
    const struct fake_headers *h = ctx;

    for (size_t i = 0; i < MAX_HEADERS && h->names[i]; i++) {
        if (strcasecmp(h->names[i], name) == 0)
            return h->values[i];
    }
    return NULL;
}

static struct signature_request request(struct fake_headers *h, const char *body, int64_t now_s,
                                        const struct signature_params *params)
{
    return (struct signature_request){.header = fake_header, .header_ctx = h, .body = body,
                                      .body_len = strlen(body), .now_s = now_s, .tolerance_s = 300,
                                      .params = params};
}

/* Every single-byte change of the body (each bit flipped in turn at one position) is refused. */
static void assert_body_bound(const struct signature_scheme *s, struct signature_request *req, char *body,
                              const char *const *secrets, size_t n)
{
    assert_int_equal(s->verify(req, secrets, n), 0);
    for (size_t i = 0; i < strlen(body); i++) {
        body[i] ^= 0x20;
        assert_int_equal(s->verify(req, secrets, n), HOOKD_ESIG);
        body[i] ^= 0x20;
    }
    assert_int_equal(s->verify(req, secrets, n), 0);
}

/* ---- the table ------------------------------------------------------------------------- */

static void test_table(void **state)
{
    const char *names[] = {"standard-webhooks", "stripe", "github", "hmac", "none"};

    assert_int_equal(signature_schemes_count, 5);
    for (size_t i = 0; i < 5; i++) {
        const struct signature_scheme *s = signature_scheme_find(names[i]);
        assert_non_null(s);
        assert_string_equal(s->name, names[i]);
        assert_non_null(s->sign);
        assert_non_null(s->verify);
        assert_int_equal(s->needs_params, strcmp(names[i], "hmac") == 0);
        assert_int_equal(s->needs_secrets, strcmp(names[i], "none") != 0);
    }
    assert_string_equal(signature_scheme_find("stripe")->header, "Stripe-Signature");
    assert_string_equal(signature_scheme_find("github")->header, "X-Hub-Signature-256");
    assert_null(signature_scheme_find("hmac")->header);
    assert_null(signature_scheme_find("Stripe"));
}

/* ---- standard-webhooks v1a ------------------------------------------------------------------ */

/* RFC 8032 §7.1 test 1's key; the signature of "msg_1.1700000000.{"a":1}" computed with Node's crypto.sign. */
#define RFC_WHSK "whsk_nWGxne/9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A="
#define RFC_WHPK "whpk_11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="
#define RFC_V1A "v1a,0pYc3grQLAYTYYtSm9Z+VOqkyvPhiL3xzHrpcxS6/6sXV93wWnX+gE4ZSgyOhnhCp3VTI/jx2HUyQVOO3T5OCg=="

static void test_v1a_known_answer(void **state)
{
    const struct signature_scheme *sw = signature_scheme_find("standard-webhooks");
    char body[] = "{\"a\":1}", sig[SIGNATURE_HEADER_MAX];
    const char *sk[] = {RFC_WHSK}, *pk[] = {RFC_WHPK};
    const struct signature_message msg = {.id = "msg_1", .timestamp_s = TS, .body = body, .body_len = strlen(body)};
    struct fake_headers h = {{"webhook-id", "webhook-timestamp", "webhook-signature"}, {"msg_1", TS_TEXT, sig}};
    struct signature_request req = request(&h, body, TS + 10, NULL);
    char other_sk[ED25519_KEY_TEXT_MAX], other_pk[ED25519_KEY_TEXT_MAX], derived[ED25519_KEY_TEXT_MAX];
    const char *other[] = {other_pk};

    assert_int_equal(sw->sign(&msg, sk, 1, sig, sizeof sig), 0);
    assert_string_equal(sig, RFC_V1A);
    assert_body_bound(sw, &req, body, pk, 1);
    assert_int_equal(sw->verify(&req, sk, 1), 0); /* the private key verifies through its public half */
    /* Another key pair: a fresh one from the generator, refused; its own signature accepted. */
    assert_int_equal(ed25519_generate(other_sk, other_pk), 0);
    assert_int_equal(strncmp(other_sk, "whsk_", 5), 0);
    assert_int_equal(strncmp(other_pk, "whpk_", 5), 0);
    assert_int_equal(strlen(other_pk), 5 + 44);
    assert_int_equal(ed25519_public_from_secret(other_sk, derived), 0);
    assert_string_equal(derived, other_pk);
    assert_int_equal(ed25519_public_from_secret(RFC_WHSK, derived), 0);
    assert_string_equal(derived, RFC_WHPK);
    assert_int_equal(sw->verify(&req, other, 1), HOOKD_ESIG);
    const char *both[] = {other_pk, RFC_WHPK}; /* rotation: either key */
    assert_int_equal(sw->verify(&req, both, 2), 0);
    /* A public key cannot sign; it is skipped like a secret that does not decode. */
    assert_int_equal(sw->sign(&msg, pk, 1, sig, sizeof sig), 0);
    assert_string_equal(sig, "");
    /* A changed id or timestamp is refused. */
    snprintf(sig, sizeof sig, "%s", RFC_V1A);
    h.values[0] = "msg_2";
    assert_int_equal(sw->verify(&req, pk, 1), HOOKD_ESIG);
    h.values[0] = "msg_1";
    assert_int_equal(sw->verify(&req, pk, 1), 0);
    /* One character of the signature changed (still valid base64 of 64 bytes). */
    sig[10] = sig[10] == 'A' ? 'B' : 'A';
    assert_int_equal(sw->verify(&req, pk, 1), HOOKD_ESIG);
}

static void test_v1a_keys(void **state)
{
    unsigned char seed[ED25519_SEED_LEN], pub[ED25519_PUBLIC_LEN], both[64];
    char text[ED25519_KEY_TEXT_MAX];

    assert_int_equal(ed25519_secret_decode(RFC_WHSK, seed), 0);
    assert_int_equal(seed[0], 0x9d);
    assert_int_equal(ed25519_public_decode(RFC_WHPK, pub), 0);
    assert_int_equal(pub[0], 0xd7);
    /* The 64-byte seed‖public form is read, and its public half checked. */
    memcpy(both, seed, 32);
    memcpy(both + 32, pub, 32);
    memcpy(text, "whsk_", 5);
    base64_encode(both, 64, text + 5);
    assert_int_equal(ed25519_secret_decode(text, seed), 0);
    both[40] ^= 1;
    base64_encode(both, 64, text + 5);
    assert_int_equal(ed25519_secret_decode(text, seed), HOOKD_EINVAL);
    /* Wrong prefix, wrong length, not base64. */
    assert_int_equal(ed25519_secret_decode(RFC_WHPK, seed), HOOKD_EINVAL);
    assert_int_equal(ed25519_public_decode(RFC_WHSK, pub), HOOKD_EINVAL);
    assert_int_equal(ed25519_secret_decode("whsk_AAAA", seed), HOOKD_EINVAL);
    assert_int_equal(ed25519_public_decode("whpk_!!!!", pub), HOOKD_EINVAL);
    assert_int_equal(ed25519_secret_decode(NULL, seed), HOOKD_EINVAL);
    assert_int_equal(ed25519_public_from_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", text), HOOKD_EINVAL);
}

/* The spec's v1 example beside a v1a entry: each verifies with its own kind of key. */
#define SPEC_SECRET "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define SPEC_ID "msg_p5jXN8AQM9LWM0D4loKWxJek"
#define SPEC_TS 1614265330
#define SPEC_BODY "{\"test\": 2432232314}"
#define SPEC_SIG "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

static void test_standard_mixed_and_malformed(void **state)
{
    const struct signature_scheme *sw = signature_scheme_find("standard-webhooks");
    char body[] = SPEC_BODY, v1a[SIGNATURE_HEADER_MAX], header[SIGNATURE_HEADER_MAX];
    const char *signers[] = {SPEC_SECRET, RFC_WHSK};
    const struct signature_message msg = {.id = SPEC_ID, .timestamp_s = SPEC_TS, .body = body,
                                          .body_len = strlen(body)};
    struct fake_headers h = {{"webhook-id", "webhook-timestamp", "webhook-signature"},
                             {SPEC_ID, "1614265330", header}};
    struct signature_request req = request(&h, body, SPEC_TS, NULL);
    const char *hmac_only[] = {SPEC_SECRET}, *ed_only[] = {RFC_WHPK}, *both[] = {RFC_WHPK, SPEC_SECRET};

    /* One header with both kinds, in the order of the secrets. */
    assert_int_equal(sw->sign(&msg, signers, 2, header, sizeof header), 0);
    assert_int_equal(strncmp(header, SPEC_SIG " v1a,", strlen(SPEC_SIG) + 5), 0);
    snprintf(v1a, sizeof v1a, "%s", header + strlen(SPEC_SIG) + 1);
    assert_int_equal(sw->verify(&req, hmac_only, 1), 0);
    assert_int_equal(sw->verify(&req, ed_only, 1), 0);
    assert_body_bound(sw, &req, body, both, 2);
    /* Only the v1a entry: a whsec_ secret alone finds nothing to match. */
    snprintf(header, sizeof header, "%s", v1a);
    assert_int_equal(sw->verify(&req, hmac_only, 1), HOOKD_ESIG);
    assert_int_equal(sw->verify(&req, ed_only, 1), 0);
    /* Unknown versions are ignored (forward compatibility), runs of spaces are allowed. */
    snprintf(header, sizeof header, "v2,whatever  %s", SPEC_SIG);
    assert_int_equal(sw->verify(&req, hmac_only, 1), 0);
    snprintf(header, sizeof header, "v2,whatever");
    assert_int_equal(sw->verify(&req, hmac_only, 1), HOOKD_ESIG);
    /* Malformed: no comma, empty value, a v1 or v1a of the wrong length, bad base64, a tab, too many entries. */
    const char *malformed[] = {
        "v1", "v1,", ",abc", "V1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1O!=",
        "v1a,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=\tv1,x",
        "v2,\x01",
    };
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        snprintf(header, sizeof header, "%s", malformed[i]);
        assert_int_equal(sw->verify(&req, hmac_only, 1), HOOKD_EINVAL);
    }
    header[0] = '\0';
    for (int i = 0; i < 17; i++)
        strncat(header, SPEC_SIG " ", sizeof header - strlen(header) - 1);
    assert_int_equal(sw->verify(&req, hmac_only, 1), HOOKD_EINVAL);
    header[(strlen(SPEC_SIG) + 1) * 16] = '\0'; /* 16 entries: the limit */
    assert_int_equal(sw->verify(&req, hmac_only, 1), 0);
    /* Timestamps: at the tolerance in both directions, one past, not a number. */
    snprintf(header, sizeof header, "%s %.200s", SPEC_SIG, v1a);
    req.now_s = SPEC_TS + 300;
    assert_int_equal(sw->verify(&req, both, 2), 0);
    req.now_s = SPEC_TS - 300;
    assert_int_equal(sw->verify(&req, both, 2), 0);
    req.now_s = SPEC_TS + 301;
    assert_int_equal(sw->verify(&req, both, 2), HOOKD_ETIME);
    req.now_s = SPEC_TS - 301;
    assert_int_equal(sw->verify(&req, both, 2), HOOKD_ETIME);
    req.now_s = SPEC_TS;
    h.values[1] = "1614265330 ";
    assert_int_equal(sw->verify(&req, both, 2), HOOKD_EINVAL);
    h.values[1] = "1614265330";
    /* No usable key at all. */
    const char *junk[] = {"whpk_AAAA", "whsec_!!"};
    assert_int_equal(sw->verify(&req, junk, 2), HOOKD_EINVAL);
}

/* ---- stripe ---------------------------------------------------------------------------------- */

/* openssl dgst -sha256 -hmac whsec_test_secret of '1700000000.{"id":"evt_1","object":"event"}'. */
#define STRIPE_SECRET "whsec_test_secret"
#define STRIPE_BODY "{\"id\":\"evt_1\",\"object\":\"event\"}"
#define STRIPE_V1 "0c8670ed117751cc551a20e35839447075c42800ea3cf3e8a2fbda99cd1e6edd"
#define STRIPE_OTHER "1c8670ed117751cc551a20e35839447075c42800ea3cf3e8a2fbda99cd1e6edd"

static void test_stripe(void **state)
{
    const struct signature_scheme *st = signature_scheme_find("stripe");
    char body[] = STRIPE_BODY, header[SIGNATURE_HEADER_MAX];
    const char *secret[] = {STRIPE_SECRET}, *wrong[] = {"whsec_other"}, *rotated[] = {"whsec_other", STRIPE_SECRET};
    const struct signature_message msg = {.timestamp_s = TS, .body = body, .body_len = strlen(body)};
    struct fake_headers h = {{"stripe-signature"}, {header}};
    struct signature_request req = request(&h, body, TS, NULL);

    assert_int_equal(st->sign(&msg, secret, 1, header, sizeof header), 0);
    assert_string_equal(header, "t=" TS_TEXT ",v1=" STRIPE_V1);
    assert_body_bound(st, &req, body, secret, 1);
    assert_int_equal(st->verify(&req, wrong, 1), HOOKD_ESIG);
    assert_int_equal(st->verify(&req, rotated, 2), 0);
    /* Signed with two secrets: two v1 entries, either receiver accepts. */
    assert_int_equal(st->sign(&msg, rotated, 2, header, sizeof header), 0);
    assert_int_equal(strlen(header), strlen("t=" TS_TEXT) + 2 * (4 + 64));
    assert_int_equal(st->verify(&req, secret, 1), 0);
    assert_int_equal(st->verify(&req, wrong, 1), 0);
    /* Several v1 with one valid (anywhere), v0 and unknown schemes ignored, upper-case hex read. */
    const char *accepted[] = {
        "t=" TS_TEXT ",v1=" STRIPE_OTHER ",v1=" STRIPE_V1,
        "v1=" STRIPE_V1 ",t=" TS_TEXT,
        "t=" TS_TEXT ",v1=" STRIPE_V1 ",v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39",
        "t=" TS_TEXT ",v1=0C8670ED117751CC551A20E35839447075C42800EA3CF3E8A2FBDA99CD1E6EDD",
        "t=" TS_TEXT ",v1=" STRIPE_V1 ",v9=x",
    };
    for (size_t i = 0; i < sizeof accepted / sizeof accepted[0]; i++) {
        snprintf(header, sizeof header, "%s", accepted[i]);
        assert_int_equal(st->verify(&req, secret, 1), 0);
    }
    snprintf(header, sizeof header, "t=" TS_TEXT ",v1=" STRIPE_OTHER ",v0=" STRIPE_V1);
    assert_int_equal(st->verify(&req, secret, 1), HOOKD_ESIG); /* v0 is never accepted */
    /* Malformed: no t, two t, no v1, spaces, empty items, bad hex, wrong length, t not digits. */
    const char *malformed[] = {
        "", "v1=" STRIPE_V1, "t=" TS_TEXT, "t=" TS_TEXT ",t=" TS_TEXT ",v1=" STRIPE_V1,
        "t=" TS_TEXT ", v1=" STRIPE_V1, "t=" TS_TEXT ",,v1=" STRIPE_V1, "t=" TS_TEXT ",v1=" STRIPE_V1 ",",
        "t=" TS_TEXT ",v1=" STRIPE_V1 "0", "t=" TS_TEXT ",v1=0g8670ed117751cc551a20e35839447075c42800ea3cf3e8a2fbda99cd1e6edd",
        "t=17e8,v1=" STRIPE_V1, "t=-1700000000,v1=" STRIPE_V1, "t=,v1=" STRIPE_V1, "T=" TS_TEXT ",v1=" STRIPE_V1,
        "t" TS_TEXT ",v1=" STRIPE_V1,
    };
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        snprintf(header, sizeof header, "%s", malformed[i]);
        assert_int_equal(st->verify(&req, secret, 1), HOOKD_EINVAL);
    }
    /* Tolerance both ways. */
    snprintf(header, sizeof header, "t=" TS_TEXT ",v1=" STRIPE_V1);
    req.now_s = TS + 300;
    assert_int_equal(st->verify(&req, secret, 1), 0);
    req.now_s = TS - 300;
    assert_int_equal(st->verify(&req, secret, 1), 0);
    req.now_s = TS + 301;
    assert_int_equal(st->verify(&req, secret, 1), HOOKD_ETIME);
    req.now_s = TS - 301;
    assert_int_equal(st->verify(&req, secret, 1), HOOKD_ETIME);
    req.now_s = TS;
    /* Missing header, no secrets, an empty secret. */
    h.names[0] = "x-other";
    assert_int_equal(st->verify(&req, secret, 1), HOOKD_EINVAL);
    h.names[0] = "Stripe-Signature";
    assert_int_equal(st->verify(&req, secret, 0), HOOKD_EINVAL);
    const char *empty[] = {""};
    assert_int_equal(st->verify(&req, empty, 1), HOOKD_EINVAL);
    assert_int_equal(st->verify(&req, secret, 1), 0);
}

/* ---- github ---------------------------------------------------------------------------------- */

/* GitHub's documented example ("Validating webhook deliveries"), checked with openssl dgst -hmac. */
#define GH_SECRET "It's a Secret to Everybody"
#define GH_SIG "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"

static void test_github(void **state)
{
    const struct signature_scheme *gh = signature_scheme_find("github");
    char body[] = "Hello, World!", header[SIGNATURE_HEADER_MAX];
    const char *secret[] = {GH_SECRET}, *wrong[] = {"It's a secret to everybody"}, *rotated[] = {"x", GH_SECRET};
    const struct signature_message msg = {.body = body, .body_len = strlen(body)};
    struct fake_headers h = {{"X-Hub-Signature-256"}, {header}};
    struct signature_request req = request(&h, body, 0, NULL);

    assert_int_equal(gh->sign(&msg, secret, 1, header, sizeof header), 0);
    assert_string_equal(header, GH_SIG);
    assert_body_bound(gh, &req, body, secret, 1);
    assert_int_equal(gh->verify(&req, wrong, 1), HOOKD_ESIG);
    assert_int_equal(gh->verify(&req, rotated, 2), 0);
    const char *malformed[] = {
        "", "sha256=", "SHA256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
        "sha1=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e1",
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e177",
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e1z",
        " sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
    };
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        snprintf(header, sizeof header, "%s", malformed[i]);
        assert_int_equal(gh->verify(&req, secret, 1), HOOKD_EINVAL);
    }
    h.names[0] = "X-Hub-Signature"; /* the SHA-1 header is not read */
    assert_int_equal(gh->verify(&req, secret, 1), HOOKD_EINVAL);
    /* No room for the signature. */
    assert_int_equal(gh->sign(&msg, secret, 1, header, 71), HOOKD_EINVAL);
    assert_int_equal(gh->sign(&msg, secret, 1, header, 72), 0);
}

/* ---- hmac ------------------------------------------------------------------------------------ */

static void test_hmac_params(void **state)
{
    struct signature_params p;
    const char *field, *problem;

    /* Defaults. */
    assert_int_equal(signature_params_parse(&p, &(struct signature_params_text){.header = "X-Sig"}, &field, &problem),
                     0);
    assert_null(field);
    assert_int_equal(p.algorithm, SIGNATURE_SHA256);
    assert_int_equal(p.encoding, SIGNATURE_HEX);
    assert_string_equal(p.prefix, "");
    assert_int_equal(p.n_parts, 1);
    assert_int_equal(p.parts[0].kind, TEMPLATE_BODY);
    assert_int_equal(signature_params_parse(&p, &(struct signature_params_text){.header = "X-Sig",
                                                                               .timestamp_header = "X-Ts"},
                                            &field, &problem),
                     0);
    assert_int_equal(p.n_parts, 3); /* {timestamp} . {body} */
    assert_int_equal(p.parts[0].kind, TEMPLATE_TIMESTAMP);
    assert_int_equal(p.parts[1].kind, TEMPLATE_LITERAL);
    assert_int_equal(p.parts[2].kind, TEMPLATE_BODY);
    /* Literal braces, headers. */
    assert_int_equal(signature_params_parse(&p, &(struct signature_params_text){.header = "X-Sig",
                                                                               .template_text =
                                                                                   "{{x}}{header:X-Id}:{body}"},
                                            &field, &problem),
                     0);
    assert_int_equal(p.n_parts, 4);
    assert_int_equal(p.parts[0].kind, TEMPLATE_LITERAL);
    assert_int_equal(p.parts[0].len, 3);
    assert_memory_equal(p.text + p.parts[0].off, "{x}", 3);
    assert_int_equal(p.parts[1].kind, TEMPLATE_HEADER);
    assert_string_equal(p.text + p.parts[1].off, "X-Id");

    /* Every refusal names its field. */
    struct {
        struct signature_params_text t;
        const char *field;
    } bad[] = {
        {{.header = NULL}, "header"},
        {{.header = "X Sig"}, "header"},
        {{.header = "X-Sig:"}, "header"},
        {{.header = "X-Sig", .algorithm = "sha1"}, "algorithm"},
        {{.header = "X-Sig", .algorithm = "SHA256"}, "algorithm"},
        {{.header = "X-Sig", .encoding = "base32"}, "encoding"},
        {{.header = "X-Sig", .prefix = "sha 256="}, "prefix"},
        {{.header = "X-Sig", .prefix = "0123456789012345678901234567890123"}, "prefix"},
        {{.header = "X-Sig", .timestamp_header = "x-sig"}, "timestamp_header"},
        {{.header = "X-Sig", .timestamp_header = "X Ts"}, "timestamp_header"},
        {{.header = "X-Sig", .template_text = "{timestamp}.{body}"}, "template"},
        {{.header = "X-Sig", .timestamp_header = "X-Ts", .template_text = "{body}"}, "template"},
        {{.header = "X-Sig", .template_text = "{body}{body}"}, "template"},
        {{.header = "X-Sig", .template_text = "nobody"}, "template"},
        {{.header = "X-Sig", .template_text = "{bod}"}, "template"},
        {{.header = "X-Sig", .template_text = "{body"}, "template"},
        {{.header = "X-Sig", .template_text = "}{body}"}, "template"},
        {{.header = "X-Sig", .template_text = "{body}{}"}, "template"},
        {{.header = "X-Sig", .template_text = "{header:}{body}"}, "template"},
        {{.header = "X-Sig", .template_text = "{header:a b}{body}"}, "template"},
        {{.header = "X-Sig", .template_text = "a\nb{body}"}, "template"},
        {{.header = "X-Sig", .template_text = "{body}a{header:A}b{header:B}c{header:C}d{header:D}e{header:E}f{header:F}"
                                              "g{header:G}h{header:H}"},
         "template"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        field = problem = NULL;
        assert_int_equal(signature_params_parse(&p, &bad[i].t, &field, &problem), HOOKD_EINVAL);
        assert_non_null(field);
        assert_string_equal(field, bad[i].field);
        assert_non_null(problem);
    }
}

static void test_hmac_verify(void **state)
{
    const struct signature_scheme *hm = signature_scheme_find("hmac");
    struct signature_params p;
    char body[] = "{\"a\":1}", header[SIGNATURE_HEADER_MAX];
    const char *secret[] = {"shh"}, *wrong[] = {"shh!"}, *rotated[] = {"other", "shh"};
    struct fake_headers h = {{"X-Sig", "X-Ts", "X-Id"}, {header, TS_TEXT, "id-7"}};
    struct signature_request req = request(&h, body, TS, &p);
    struct signature_message msg = {.timestamp_s = TS, .body = body, .body_len = strlen(body), .params = &p,
                                    .header = fake_header, .header_ctx = &h};

    /* sha256, hex, a prefix, the body alone: openssl dgst -sha256 -hmac shh of '{"a":1}'. */
    assert_int_equal(signature_params_parse(&p, &(struct signature_params_text){.header = "X-Sig", .prefix =
                                                                                   "sha256="},
                                            NULL, NULL),
                     0);
    assert_int_equal(hm->sign(&msg, secret, 1, header, sizeof header), 0);
    assert_string_equal(header, "sha256=dfb8cf3fc9778c70386e30f5e0776d37f9ee9c8756d3cbd7df0902150644358d");
    assert_body_bound(hm, &req, body, secret, 1);
    assert_int_equal(hm->verify(&req, wrong, 1), HOOKD_ESIG);
    assert_int_equal(hm->verify(&req, rotated, 2), 0);
    snprintf(header, sizeof header, "dfb8cf3fc9778c70386e30f5e0776d37f9ee9c8756d3cbd7df0902150644358d");
    assert_int_equal(hm->verify(&req, secret, 1), HOOKD_EINVAL); /* prefix missing */
    snprintf(header, sizeof header, "sha256=DFB8CF3FC9778C70386E30F5E0776D37F9EE9C8756D3CBD7DF0902150644358D");
    assert_int_equal(hm->verify(&req, secret, 1), 0);

    /* sha512, base64, a timestamp in a template: base64(openssl dgst -sha512 -hmac shh of 'v0:1700000000:{"a":1}'). */
    assert_int_equal(signature_params_parse(&p, &(struct signature_params_text){.header = "X-Sig", .algorithm = "sha512",
                                                                               .encoding = "base64", .prefix = "v0=",
                                                                               .timestamp_header = "X-Ts",
                                                                               .template_text =
                                                                                   "v0:{timestamp}:{body}"},
                                            NULL, NULL),
                     0);
    assert_int_equal(hm->sign(&msg, secret, 1, header, sizeof header), 0);
    assert_string_equal(header, "v0=dPPl20vbYnC3MP8gR8xZgC56JU2QBvElS1Q4qu5p7Bx9jPnim2JPJBlyY+1WhXFirHsmn4FMveWT540g47vrVg==");
    assert_body_bound(hm, &req, body, secret, 1);
    req.now_s = TS + 300;
    assert_int_equal(hm->verify(&req, secret, 1), 0);
    req.now_s = TS - 300;
    assert_int_equal(hm->verify(&req, secret, 1), 0);
    req.now_s = TS + 301;
    assert_int_equal(hm->verify(&req, secret, 1), HOOKD_ETIME);
    req.now_s = TS - 301;
    assert_int_equal(hm->verify(&req, secret, 1), HOOKD_ETIME);
    req.now_s = TS;
    h.values[1] = "1700000001"; /* the timestamp is signed */
    assert_int_equal(hm->verify(&req, secret, 1), HOOKD_ESIG);
    h.values[1] = "1700000000.5";
    assert_int_equal(hm->verify(&req, secret, 1), HOOKD_EINVAL);
    h.names[1] = "X-Other";
    assert_int_equal(hm->verify(&req, secret, 1), HOOKD_EINVAL);
    h.names[1] = "X-Ts";
    h.values[1] = TS_TEXT;
    header[strlen(header) - 1] = '\0'; /* base64 without its padding */
    assert_int_equal(hm->verify(&req, secret, 1), HOOKD_EINVAL);

    /* A header in the template: signed, and required. */
    assert_int_equal(signature_params_parse(&p, &(struct signature_params_text){.header = "X-Sig",
                                                                               .template_text = "{header:X-Id}.{body}"},
                                            NULL, NULL),
                     0);
    assert_int_equal(hm->sign(&msg, secret, 1, header, sizeof header), 0);
    assert_body_bound(hm, &req, body, secret, 1);
    h.values[2] = "id-8";
    assert_int_equal(hm->verify(&req, secret, 1), HOOKD_ESIG);
    h.names[2] = "X-Nope";
    assert_int_equal(hm->verify(&req, secret, 1), HOOKD_EINVAL);
    assert_int_equal(hm->sign(&msg, secret, 1, header, sizeof header), HOOKD_EINVAL);
    /* No params, no signature header. */
    req.params = NULL;
    assert_int_equal(hm->verify(&req, secret, 1), HOOKD_EINVAL);
    req.params = &p;
    h.names[0] = "X-Other";
    assert_int_equal(hm->verify(&req, secret, 1), HOOKD_EINVAL);
}

static void test_none_and_public_api(void **state)
{
    const struct signature_scheme *none = signature_scheme_find("none");
    struct fake_headers h = {{NULL}, {NULL}};
    struct signature_request req = request(&h, "anything", 0, NULL);
    char out[8] = "x";
    const struct signature_message msg = {.body = "b", .body_len = 1};

    assert_int_equal(none->verify(&req, NULL, 0), 0);
    assert_int_equal(none->sign(&msg, NULL, 0, out, sizeof out), 0);
    assert_string_equal(out, "");

    /* hookd_verify_scheme: the table through the public API, on the wall clock. */
    char ts[24], header[SIGNATURE_HEADER_MAX];
    const char *secret[] = {"shh"};
    const struct signature_scheme *st = signature_scheme_find("stripe");
    int64_t now = (int64_t)time(NULL);
    const struct signature_message smsg = {.timestamp_s = now, .body = "{}", .body_len = 2};
    snprintf(ts, sizeof ts, "%lld", (long long)now);
    assert_int_equal(st->sign(&smsg, secret, 1, header, sizeof header), 0);
    struct hookd_header hh[] = {{"Stripe-Signature", header}};
    assert_int_equal(hookd_verify_scheme("stripe", NULL, hh, 1, "{}", 2, secret, 1, 0), 0);
    assert_int_equal(hookd_verify_scheme("stripe", NULL, hh, 1, "{ }", 3, secret, 1, 0), HOOKD_ESIG);
    assert_int_equal(hookd_verify_scheme("nope", NULL, hh, 1, "{}", 2, secret, 1, 0), HOOKD_EINVAL);
    assert_int_equal(hookd_verify_scheme("hmac", NULL, hh, 1, "{}", 2, secret, 1, 0), HOOKD_EINVAL);
    const struct hookd_hmac_params hp = {.header = "Stripe-Signature"};
    assert_int_equal(hookd_verify_scheme("hmac", &hp, hh, 1, "{}", 2, secret, 1, 0), HOOKD_EINVAL); /* not hex */
    assert_int_equal(hookd_verify_scheme("none", NULL, NULL, 0, "{}", 2, NULL, 0, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_v1a_known_answer),
        cmocka_unit_test(test_v1a_keys),
        cmocka_unit_test(test_standard_mixed_and_malformed),
        cmocka_unit_test(test_stripe),
        cmocka_unit_test(test_github),
        cmocka_unit_test(test_hmac_params),
        cmocka_unit_test(test_hmac_verify),
        cmocka_unit_test(test_none_and_public_api),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
