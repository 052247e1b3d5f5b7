/*
 * The configurable hmac scheme: a MAC (sha256|sha512) of a signed-content
 * template, in hex or base64 behind an optional prefix, in a header the
 * source names, with an optional timestamp header checked against the
 * tolerance. Also the parsing of its settings (signature_params_parse).
 * Secrets are used as the bytes of their text.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "core/base64.h"
#include "core/field_spec.h"
#include "core/mac.h"
#include "core/scheme_impl.h"
#include "hookd.h"

#define DEFAULT_TEMPLATE_TIMESTAMPED "{timestamp}.{body}"
#define DEFAULT_TEMPLATE "{body}"
#define ENCODED_MAX 88 /* base64 of 64 bytes; hex of 64 is 128 */
#define ENCODED_BUF 129

/* ---- settings -------------------------------------------------------------------------- */

static int parse_template(struct signature_params *p, const char *t, const char **problem)
{
    size_t n = strlen(t), used = 0, bodies = 0, stamps = 0;

    p->n_parts = 0;
    for (size_t i = 0; i < n;) {
        struct template_part part = {0};

        if (t[i] == '{' && t[i + 1] != '{') {
            const char *close = memchr(t + i, '}', n - i);
            size_t inner = close != NULL ? (size_t)(close - (t + i + 1)) : 0;
            const char *name = t + i + 1;
            if (close == NULL) {
                *problem = "'{' without a closing '}'";
                return HOOKD_EINVAL;
            }
            if (inner == 4 && memcmp(name, "body", 4) == 0) {
                part.kind = TEMPLATE_BODY;
                bodies++;
            } else if (inner == 9 && memcmp(name, "timestamp", 9) == 0) {
                part.kind = TEMPLATE_TIMESTAMP;
                stamps++;
            } else if (inner > 7 && memcmp(name, "header:", 7) == 0 && inner - 7 == strlen(p->header) &&
                       strncasecmp(name + 7, p->header, inner - 7) == 0) {
                /* The MAC cannot cover the header that carries it: no request could ever verify. */
                *problem = "{header:NAME} cannot name the signature header itself";
                return HOOKD_EINVAL;
            } else if (inner > 7 && memcmp(name, "header:", 7) == 0 &&
                       http_token_is_valid(name + 7, inner - 7, SIGNATURE_HEADER_NAME_MAX)) {
                part.kind = TEMPLATE_HEADER;
                part.off = (uint16_t)used;
                part.len = (uint16_t)(inner - 7);
                memcpy(p->text + used, name + 7, inner - 7);
                used += inner - 7;
                p->text[used++] = '\0'; /* header names are looked up as C strings */
            } else {
                *problem = "unknown placeholder (use {body}, {timestamp} or {header:NAME})";
                return HOOKD_EINVAL;
            }
            i += inner + 2;
        } else {
            /* Literal text up to the next placeholder; "{{" and "}}" are one brace each. */
            part.kind = TEMPLATE_LITERAL;
            part.off = (uint16_t)used;
            while (i < n && !(t[i] == '{' && t[i + 1] != '{')) {
                unsigned char c = (unsigned char)t[i];
                if ((c == '{' || c == '}') && t[i + 1] == c) {
                    i += 2;
                } else if (c == '}') {
                    *problem = "a lone '}' (write '}}' for a literal brace)";
                    return HOOKD_EINVAL;
                } else if (c < 0x20 || c == 0x7f) {
                    *problem = "control characters are not allowed";
                    return HOOKD_EINVAL;
                } else {
                    i++;
                }
                p->text[used++] = (char)c;
            }
            part.len = (uint16_t)(used - part.off);
        }
        if (p->n_parts == SIGNATURE_TEMPLATE_PARTS) {
            *problem = "more than 16 pieces";
            return HOOKD_EINVAL;
        }
        p->parts[p->n_parts++] = part;
    }
    if (bodies != 1) {
        *problem = "must contain {body} exactly once";
        return HOOKD_EINVAL;
    }
    if (stamps > 0 && p->timestamp_header[0] == '\0') {
        *problem = "{timestamp} needs a timestamp_header";
        return HOOKD_EINVAL;
    }
    if (stamps == 0 && p->timestamp_header[0] != '\0') {
        *problem = "must contain {timestamp} when timestamp_header is set, or the timestamp goes unsigned";
        return HOOKD_EINVAL;
    }
    return 0;
}

static bool given(const char *s) { return s != NULL && s[0] != '\0'; }

int signature_params_parse(struct signature_params *out, const struct signature_params_text *in, const char **field,
                           const char **problem)
{
    const char *bad = NULL, *why = NULL, *t;
    size_t n;
    int rc = HOOKD_EINVAL;

    if (out == NULL || in == NULL) {
        bad = "verify", why = "missing";
        goto out;
    }
    memset(out, 0, sizeof *out);
    n = given(in->header) ? strnlen(in->header, SIGNATURE_HEADER_NAME_MAX + 1) : 0;
    if (!http_token_is_valid(in->header, n, SIGNATURE_HEADER_NAME_MAX)) {
        bad = "header", why = "required: an HTTP header name of 1 to 64 characters";
        goto out;
    }
    memcpy(out->header, in->header, n + 1);
    if (!given(in->algorithm) || strcmp(in->algorithm, "sha256") == 0)
        out->algorithm = SIGNATURE_SHA256;
    else if (strcmp(in->algorithm, "sha512") == 0)
        out->algorithm = SIGNATURE_SHA512;
    else {
        bad = "algorithm", why = "must be sha256 or sha512";
        goto out;
    }
    if (!given(in->encoding) || strcmp(in->encoding, "hex") == 0)
        out->encoding = SIGNATURE_HEX;
    else if (strcmp(in->encoding, "base64") == 0)
        out->encoding = SIGNATURE_BASE64;
    else {
        bad = "encoding", why = "must be hex or base64";
        goto out;
    }
    if (given(in->prefix)) {
        n = strnlen(in->prefix, SIGNATURE_PREFIX_MAX + 1);
        bool printable = n <= SIGNATURE_PREFIX_MAX;
        for (size_t i = 0; printable && i < n; i++)
            printable = (unsigned char)in->prefix[i] > 0x20 && (unsigned char)in->prefix[i] < 0x7f;
        if (!printable) {
            bad = "prefix", why = "at most 32 visible ASCII characters, no spaces";
            goto out;
        }
        memcpy(out->prefix, in->prefix, n + 1);
    }
    if (given(in->timestamp_header)) {
        n = strnlen(in->timestamp_header, SIGNATURE_HEADER_NAME_MAX + 1);
        if (!http_token_is_valid(in->timestamp_header, n, SIGNATURE_HEADER_NAME_MAX) ||
            strcasecmp(in->timestamp_header, out->header) == 0) {
            bad = "timestamp_header", why = "an HTTP header name of 1 to 64 characters, not the signature header";
            goto out;
        }
        memcpy(out->timestamp_header, in->timestamp_header, n + 1);
    }
    t = out->timestamp_header[0] != '\0' ? DEFAULT_TEMPLATE_TIMESTAMPED : DEFAULT_TEMPLATE;
    if (given(in->template_text)) {
        n = strnlen(in->template_text, SIGNATURE_TEMPLATE_MAX + 1);
        if (n > SIGNATURE_TEMPLATE_MAX) {
            bad = "template", why = "longer than 256 bytes";
            goto out;
        }
        memcpy(out->template_text, in->template_text, n + 1);
        t = out->template_text;
    }
    if (parse_template(out, t, &why) != 0) {
        bad = "template";
        goto out;
    }
    rc = 0;
out:
    if (field != NULL)
        *field = bad;
    if (problem != NULL)
        *problem = why;
    return rc;
}

/* ---- sign and verify -------------------------------------------------------------------- */

static enum mac_algorithm algorithm_of(const struct signature_params *p)
{
    return p->algorithm == SIGNATURE_SHA512 ? MAC_SHA512 : MAC_SHA256;
}

/* The template's pieces for one message; header values come from lookup. */
static int build_parts(const struct signature_params *p, const char *(*lookup)(void *, const char *), void *ctx,
                       const char *ts, size_t ts_len, const void *body, size_t body_len,
                       struct mac_part parts[SIGNATURE_TEMPLATE_PARTS])
{
    for (size_t i = 0; i < p->n_parts; i++) {
        const struct template_part *t = &p->parts[i];
        const char *v;
        long n;

        switch (t->kind) {
        case TEMPLATE_LITERAL:
            parts[i] = (struct mac_part){p->text + t->off, t->len};
            break;
        case TEMPLATE_BODY:
            parts[i] = (struct mac_part){body, body_len};
            break;
        case TEMPLATE_TIMESTAMP:
            parts[i] = (struct mac_part){ts, ts_len};
            break;
        case TEMPLATE_HEADER:
            v = lookup != NULL ? lookup(ctx, p->text + t->off) : NULL;
            n = v != NULL ? scheme_bounded_len(v, SIGNATURE_HEADER_MAX) : -1;
            if (n < 0)
                return HOOKD_EINVAL;
            parts[i] = (struct mac_part){v, (size_t)n};
            break;
        }
    }
    return 0;
}

static void encode(const struct signature_params *p, const unsigned char *mac, size_t len, char out[ENCODED_BUF])
{
    if (p->encoding == SIGNATURE_BASE64)
        base64_encode(mac, len, out);
    else
        hex_encode(mac, len, out);
}

/* One MAC, so one secret signs: the first usable one. */
int hmac_sign(const struct signature_message *msg, const char *const *secrets, size_t n_secrets, char *out,
              size_t out_len)
{
    const struct signature_params *p = msg != NULL ? msg->params : NULL;
    struct mac_part parts[SIGNATURE_TEMPLATE_PARTS];
    unsigned char mac[MAC_MAX_LEN];
    char ts[24], encoded[ENCODED_BUF];
    size_t key_len;
    int rc = 0;

    if (p == NULL || out == NULL || out_len == 0 || msg->timestamp_s < 0 || (msg->body == NULL && msg->body_len > 0))
        return HOOKD_EINVAL;
    out[0] = '\0';
    snprintf(ts, sizeof ts, "%" PRId64, msg->timestamp_s);
    rc = build_parts(p, msg->header, msg->header_ctx, ts, strlen(ts), msg->body, msg->body_len, parts);
    for (size_t i = 0; rc == 0 && i < n_secrets; i++) {
        if (!scheme_raw_secret(secrets[i], &key_len))
            continue;
        rc = mac_hmac(algorithm_of(p), secrets[i], key_len, parts, p->n_parts, mac);
        if (rc != 0)
            break;
        encode(p, mac, mac_len(algorithm_of(p)), encoded);
        int n = snprintf(out, out_len, "%s%s", p->prefix, encoded);
        if (n < 0 || (size_t)n >= out_len) {
            out[0] = '\0';
            rc = HOOKD_EINVAL;
        }
        break;
    }
    explicit_bzero(mac, sizeof mac);
    explicit_bzero(encoded, sizeof encoded);
    return rc;
}

int hmac_verify(const struct signature_request *req, const char *const *secrets, size_t n_secrets)
{
    const struct signature_params *p = req != NULL ? req->params : NULL;
    struct mac_part parts[SIGNATURE_TEMPLATE_PARTS];
    unsigned char mac[MAC_MAX_LEN], given_raw[MAC_MAX_LEN];
    char encoded[ENCODED_BUF];
    const char *header, *ts = NULL;
    size_t key_len, plen, enc_len, alen;
    bool matched = false, usable = false;
    long hlen, ts_len = 0;
    int64_t ts_value;
    int rc;

    if (p == NULL || req->header == NULL || n_secrets == 0 || secrets == NULL ||
        (req->body == NULL && req->body_len > 0))
        return HOOKD_EINVAL;
    alen = mac_len(algorithm_of(p));
    header = req->header(req->header_ctx, p->header);
    hlen = header != NULL ? scheme_bounded_len(header, SIGNATURE_HEADER_MAX) : -1;
    plen = strlen(p->prefix);
    enc_len = p->encoding == SIGNATURE_BASE64 ? base64_encoded_len(alen) : 2 * alen;
    /* Exactly the prefix and one encoded MAC of the algorithm's length. */
    if (hlen < 0 || (size_t)hlen != plen + enc_len || memcmp(header, p->prefix, plen) != 0)
        return HOOKD_EINVAL;
    if (p->encoding == SIGNATURE_BASE64
            ? base64_decode(header + plen, enc_len, given_raw, sizeof given_raw) != (long)alen
            : hex_decode(header + plen, enc_len, given_raw, sizeof given_raw) != (long)alen)
        return HOOKD_EINVAL;
    if (p->timestamp_header[0] != '\0') {
        ts = req->header(req->header_ctx, p->timestamp_header);
        ts_len = ts != NULL ? scheme_bounded_len(ts, SCHEME_TIMESTAMP_MAX_DIGITS) : -1;
        if (ts_len < 0 || scheme_parse_timestamp(ts, (size_t)ts_len, &ts_value) != 0)
            return HOOKD_EINVAL;
        rc = scheme_check_time(req, ts_value);
        if (rc != 0)
            return rc;
    }
    rc = build_parts(p, req->header, req->header_ctx, ts, (size_t)ts_len, req->body, req->body_len, parts);
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < n_secrets; i++) {
        if (!scheme_raw_secret(secrets[i], &key_len) ||
            mac_hmac(algorithm_of(p), secrets[i], key_len, parts, p->n_parts, mac) != 0)
            continue;
        usable = true;
        /* Compared as text: base64 has one canonical spelling of a MAC, and hex is compared in lower case. */
        encode(p, mac, alen, encoded);
        if (p->encoding == SIGNATURE_HEX) {
            char given_lower[ENCODED_BUF];
            for (size_t j = 0; j < enc_len; j++)
                given_lower[j] = (char)((header[plen + j] >= 'A' && header[plen + j] <= 'F') ? header[plen + j] + 32
                                                                                             : header[plen + j]);
            matched |= CRYPTO_memcmp(given_lower, encoded, enc_len) == 0;
        } else {
            matched |= CRYPTO_memcmp(header + plen, encoded, enc_len) == 0;
        }
    }
    explicit_bzero(mac, sizeof mac);
    explicit_bzero(encoded, sizeof encoded);
    return matched ? 0 : usable ? HOOKD_ESIG : HOOKD_EINVAL;
}
