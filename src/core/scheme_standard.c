/*
 * Standard Webhooks: v1 (HMAC-SHA256, whsec_ secrets) and v1a (ed25519, whsk_
 * to sign, whpk_ to verify) entries in one space-separated webhook-signature
 * header, over "id.timestamp.body". Entries of other versions are ignored, as
 * the spec asks for forward compatibility; a v1 or v1a entry that is not a
 * well-formed signature makes the header malformed.
 */
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "core/base64.h"
#include "core/buf.h"
#include "core/ed25519.h"
#include "core/mac.h"
#include "core/scheme_impl.h"
#include "core/signature.h"
#include "hookd.h"

#define V1_B64_LEN 44    /* base64 of 32 bytes */
#define V1A_B64_LEN 88   /* base64 of 64 bytes */
#define VERSION_MAX 15
#define MSG_ID_MAX 256

enum key_kind { KEY_NONE, KEY_HMAC, KEY_PUBLIC, KEY_SEED };

/* A secret of the list as the scheme uses it; wiped after use. */
struct sw_key {
    enum key_kind kind;
    unsigned char bytes[SECRET_MAX_BYTES];
    size_t len;
};

static void sw_key_load(struct sw_key *k, const char *secret, bool for_signing)
{
    unsigned char seed[ED25519_SEED_LEN];
    int n;

    k->kind = KEY_NONE;
    if (secret == NULL)
        return;
    if (strncmp(secret, ED25519_PUBLIC_PREFIX, strlen(ED25519_PUBLIC_PREFIX)) == 0) {
        if (!for_signing && ed25519_public_decode(secret, k->bytes) == 0) {
            k->kind = KEY_PUBLIC;
            k->len = ED25519_PUBLIC_LEN;
        }
        return;
    }
    if (strncmp(secret, ED25519_SECRET_PREFIX, strlen(ED25519_SECRET_PREFIX)) == 0) {
        if (ed25519_secret_decode(secret, seed) != 0)
            return;
        if (for_signing) {
            memcpy(k->bytes, seed, ED25519_SEED_LEN);
            k->kind = KEY_SEED;
        } else if (ed25519_public_of_seed(seed, k->bytes) == 0) {
            k->kind = KEY_PUBLIC; /* the private key verifies through its public half */
        }
        k->len = ED25519_SEED_LEN;
        explicit_bzero(seed, sizeof seed);
        return;
    }
    n = secret_decode(secret, k->bytes);
    if (n > 0) {
        k->kind = KEY_HMAC;
        k->len = (size_t)n;
    }
}

static void sw_key_wipe(struct sw_key *k) { explicit_bzero(k, sizeof *k); }

int standard_webhooks_sign(const struct signature_message *msg, const char *const *secrets, size_t n_secrets,
                           char *out, size_t out_len)
{
    char ts[I64_DIGITS_MAX], entry[4 + V1A_B64_LEN + 1];
    unsigned char sig[ED25519_SIG_LEN];
    struct sw_key key;
    size_t used = 0;
    int rc = 0;

    if (msg == NULL || msg->id == NULL || out == NULL || out_len == 0 || (msg->body == NULL && msg->body_len > 0))
        return HOOKD_EINVAL;
    out[0] = '\0';
    size_t ts_len = i64_digits(msg->timestamp_s, ts);
    const struct mac_part parts[] = {
        {msg->id, strlen(msg->id)}, {".", 1}, {ts, ts_len}, {".", 1}, {msg->body, msg->body_len},
    };
    for (size_t i = 0; i < n_secrets && rc == 0; i++) {
        /* A secret that does not decode (or a public key) was refused where it was set; skip it. */
        sw_key_load(&key, secrets[i], true);
        enum key_kind kind = key.kind;
        if (key.kind == KEY_HMAC) {
            rc = mac_hmac(MAC_SHA256, key.bytes, key.len, parts, 5, sig);
            if (rc == 0) {
                memcpy(entry, "v1,", 3);
                base64_encode(sig, 32, entry + 3);
            }
        } else if (key.kind == KEY_SEED) {
            rc = ed25519_sign(key.bytes, parts, 5, sig);
            if (rc == 0) {
                memcpy(entry, "v1a,", 4);
                base64_encode(sig, ED25519_SIG_LEN, entry + 4);
            }
        }
        sw_key_wipe(&key);
        if (rc != 0 || (kind != KEY_HMAC && kind != KEY_SEED))
            continue;
        size_t sep = used > 0, n = strlen(entry);
        if (sep + n >= out_len - used) {
            rc = HOOKD_EINVAL;
        } else {
            if (sep)
                out[used] = ' ';
            memcpy(out + used + sep, entry, n + 1);
            used += sep + n;
        }
    }
    explicit_bzero(sig, sizeof sig);
    explicit_bzero(entry, sizeof entry);
    if (rc != 0)
        out[0] = '\0';
    return rc;
}

/* The v1 and v1a entries of a header, pointing into it. */
struct sw_entries {
    const char *v1[SIGNATURE_ENTRIES_MAX];
    unsigned char v1a[SIGNATURE_ENTRIES_MAX][ED25519_SIG_LEN];
    size_t n_v1, n_v1a;
};

static bool is_version_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

/* "ver,value ver,value": single spaces or runs of them between entries, nothing else. */
static int parse_header(const char *header, struct sw_entries *e)
{
    long total = scheme_bounded_len(header, SIGNATURE_HEADER_MAX);
    size_t n_entries = 0;

    if (total < 0)
        return HOOKD_EINVAL;
    e->n_v1 = e->n_v1a = 0;
    for (const char *p = header; *p != '\0';) {
        size_t len = strcspn(p, " "), vlen = 0;

        if (len == 0) {
            p++;
            continue;
        }
        if (++n_entries > SIGNATURE_ENTRIES_MAX)
            return HOOKD_EINVAL;
        while (vlen < len && vlen <= VERSION_MAX && is_version_char(p[vlen]))
            vlen++;
        if (vlen == 0 || vlen > VERSION_MAX || vlen >= len || p[vlen] != ',' || vlen + 1 == len)
            return HOOKD_EINVAL;
        const char *value = p + vlen + 1;
        size_t value_len = len - vlen - 1;
        if (vlen == 2 && memcmp(p, "v1", 2) == 0) {
            unsigned char raw[33];
            if (value_len != V1_B64_LEN || base64_decode(value, value_len, raw, sizeof raw) != 32)
                return HOOKD_EINVAL;
            e->v1[e->n_v1++] = value;
        } else if (vlen == 3 && memcmp(p, "v1a", 3) == 0) {
            if (value_len != V1A_B64_LEN || base64_decode(value, value_len, e->v1a[e->n_v1a], ED25519_SIG_LEN) !=
                                                 ED25519_SIG_LEN)
                return HOOKD_EINVAL;
            e->n_v1a++;
        } else {
            /* Another version: not ours to judge, but it must still look like "ver,value". */
            for (size_t i = 0; i < value_len; i++) {
                if ((unsigned char)value[i] <= 0x20 || (unsigned char)value[i] >= 0x7f)
                    return HOOKD_EINVAL;
            }
        }
        p += len;
    }
    return 0;
}

int standard_webhooks_verify(const struct signature_request *req, const char *const *secrets, size_t n_secrets)
{
    const char *id, *ts_text, *header;
    struct sw_entries entries;
    struct sw_key key;
    char expected[V1_B64_LEN + 1];
    unsigned char mac[32];
    bool matched = false, usable = false;
    int64_t ts;
    long id_len, ts_len;
    int rc;

    if (req == NULL || req->header == NULL || n_secrets == 0 || secrets == NULL ||
        (req->body == NULL && req->body_len > 0))
        return HOOKD_EINVAL;
    id = req->header(req->header_ctx, "webhook-id");
    ts_text = req->header(req->header_ctx, "webhook-timestamp");
    header = req->header(req->header_ctx, "webhook-signature");
    if (id == NULL || ts_text == NULL || header == NULL)
        return HOOKD_EINVAL;
    id_len = scheme_bounded_len(id, MSG_ID_MAX);
    ts_len = scheme_bounded_len(ts_text, SCHEME_TIMESTAMP_MAX_DIGITS);
    if (id_len <= 0 || ts_len < 0 || scheme_parse_timestamp(ts_text, (size_t)ts_len, &ts) != 0)
        return HOOKD_EINVAL;
    rc = parse_header(header, &entries);
    if (rc != 0)
        return rc;
    rc = scheme_check_time(req, ts);
    if (rc != 0)
        return rc;
    const struct mac_part parts[] = {
        {id, (size_t)id_len}, {".", 1}, {ts_text, (size_t)ts_len}, {".", 1}, {req->body, req->body_len},
    };
    /* Ed25519 reads the message in one piece: join it once, not per key and entry. */
    struct mac_part joined = {NULL, 0};
    unsigned char *whole = NULL;
    if (entries.n_v1a > 0) {
        size_t len = (size_t)id_len + (size_t)ts_len + 2 + req->body_len;
        whole = malloc(len + 1);
        if (whole == NULL)
            return HOOKD_ENOMEM;
        memcpy(whole, id, (size_t)id_len);
        whole[id_len] = '.';
        memcpy(whole + id_len + 1, ts_text, (size_t)ts_len);
        whole[id_len + 1 + ts_len] = '.';
        if (req->body_len > 0)
            memcpy(whole + id_len + ts_len + 2, req->body, req->body_len);
        joined = (struct mac_part){whole, len};
    }
    /* Every key against every entry of its kind, so timing does not tell which one matched. */
    for (size_t i = 0; i < n_secrets; i++) {
        sw_key_load(&key, secrets[i], false);
        if (key.kind == KEY_HMAC && mac_hmac(MAC_SHA256, key.bytes, key.len, parts, 5, mac) == 0) {
            usable = true;
            base64_encode(mac, sizeof mac, expected);
            for (size_t j = 0; j < entries.n_v1; j++)
                matched |= CRYPTO_memcmp(entries.v1[j], expected, V1_B64_LEN) == 0;
        } else if (key.kind == KEY_PUBLIC) {
            usable = true;
            for (size_t j = 0; j < entries.n_v1a; j++)
                matched |= ed25519_verify(key.bytes, &joined, 1, entries.v1a[j]) == 0;
        }
        sw_key_wipe(&key);
    }
    free(whole);
    explicit_bzero(mac, sizeof mac);
    explicit_bzero(expected, sizeof expected);
    return matched ? 0 : usable ? HOOKD_ESIG : HOOKD_EINVAL;
}
