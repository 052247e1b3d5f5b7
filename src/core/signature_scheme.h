/*
 * Signature schemes as one table of {name, header, sign, verify} (DESIGN §5,
 * §6), found by name: standard-webhooks (v1 HMAC and v1a ed25519), stripe,
 * github, hmac (configured by struct signature_params) and none. Every caller
 * — the outbound request builder, `hookd listen`, `hookd send`, the inbound
 * receiver, hookd_verify() — goes through the table, never a scheme's
 * functions. Each scheme's sign is the exact inverse of its verify. Every
 * comparison is constant-time; headers are parsed strictly and bounded.
 *
 *   signature_scheme_find    the scheme of a name, or NULL
 *   signature_params_parse   hmac's settings from their text form
 *   scheme->sign             the signature header of a message
 *   scheme->verify           a request against a list of secrets
 *
 * Ed25519 keys (whsk_/whpk_) are made by core/ed25519.h.
 */
#ifndef HOOKD_CORE_SIGNATURE_SCHEME_H
#define HOOKD_CORE_SIGNATURE_SCHEME_H
#include <stddef.h>
#include <stdint.h>

#define SIGNATURE_SCHEME_DEFAULT "standard-webhooks"

#define SIGNATURE_HEADER_MAX 4096      /* longest signature header value read or written */
#define SIGNATURE_V1A_ENTRY_LEN 93     /* "v1a," + base64 of 64 bytes + a separator or NUL: room per whsk_ key */
#define SIGNATURE_ENTRIES_MAX 16       /* signatures read from one header (standard-webhooks, stripe v1) */
#define SIGNATURE_SECRET_MAX 512       /* longest secret text a scheme takes */
#define SIGNATURE_HEADER_NAME_MAX 64   /* hmac: header and timestamp header names */
#define SIGNATURE_PREFIX_MAX 32        /* hmac: prefix before the encoded MAC */
#define SIGNATURE_TEMPLATE_MAX 256     /* hmac: signed-content template text */
#define SIGNATURE_TEMPLATE_PARTS 16    /* hmac: pieces of a parsed template */

enum signature_encoding { SIGNATURE_HEX, SIGNATURE_BASE64 };
enum signature_algorithm { SIGNATURE_SHA256, SIGNATURE_SHA512 };

/* One piece of a parsed hmac template: literal text or a header name (both in params->text), the body, the timestamp. */
enum template_part_kind { TEMPLATE_LITERAL, TEMPLATE_BODY, TEMPLATE_TIMESTAMP, TEMPLATE_HEADER };
struct template_part {
    enum template_part_kind kind;
    uint16_t off, len; /* LITERAL, HEADER: params->text[off..off+len) */
};

/*
 * Settings of the configurable hmac scheme, from a source's "verify" object
 * (DESIGN §6, §12), made only by signature_params_parse (fixed size, nothing to
 * free). Fixed schemes (standard-webhooks, stripe, github, none) take NULL.
 *
 * The signed content is a template: literal text with {body}, {timestamp} and
 * {header:NAME} substituted by the raw body, the timestamp header's value as
 * received, and the named request header's value; "{{" and "}}" are literal
 * braces. {body} appears exactly once; {timestamp} only with a timestamp
 * header, and then it must appear (else the timestamp would go unsigned).
 * Default: "{timestamp}.{body}" with a timestamp header, "{body}" without.
 */
struct signature_params {
    char header[SIGNATURE_HEADER_NAME_MAX + 1];           /* e.g. "X-Signature" */
    enum signature_algorithm algorithm;                   /* default sha256 */
    enum signature_encoding encoding;                     /* default hex */
    char prefix[SIGNATURE_PREFIX_MAX + 1];                /* e.g. "sha256=", "" for none */
    char timestamp_header[SIGNATURE_HEADER_NAME_MAX + 1]; /* "" for none; value is decimal unix seconds */
    char template_text[SIGNATURE_TEMPLATE_MAX + 1];       /* as given ("" when defaulted) */
    char text[SIGNATURE_TEMPLATE_MAX + 1];                /* literal bytes and header names the parts point into */
    struct template_part parts[SIGNATURE_TEMPLATE_PARTS];
    size_t n_parts;
};

/* The text form of the settings, as a source gives them; NULL or "" means the default. */
struct signature_params_text {
    const char *header;           /* required */
    const char *algorithm;        /* "sha256" | "sha512" */
    const char *encoding;         /* "hex" | "base64" */
    const char *prefix;
    const char *timestamp_header;
    const char *template_text;
};

/*
 * Checks and parses in into *out. Returns 0, or HOOKD_EINVAL with *field (may
 * be NULL) set to the name of the first bad field ("header", "algorithm",
 * "encoding", "prefix", "timestamp_header", "template") and *problem (may be
 * NULL) to a static sentence saying why. Header names must be HTTP tokens.
 */
__attribute__((warn_unused_result)) int signature_params_parse(struct signature_params *out,
                                                               const struct signature_params_text *in,
                                                               const char **field, const char **problem);

/* What a sender signs. Schemes without a message id (stripe, github, hmac) ignore id. */
struct signature_message {
    const char *id;       /* standard-webhooks: webhook-id */
    int64_t timestamp_s;  /* unix seconds of this attempt (hmac: the timestamp header's value, in decimal) */
    const void *body;
    size_t body_len;
    const struct signature_params *params; /* hmac only */
    /* hmac with {header:NAME} in its template: the value the request will carry (NULL: no such header). */
    const char *(*header)(void *ctx, const char *name);
    void *header_ctx;
};

/*
 * A received request as a scheme sees it: each scheme reads the headers it
 * needs (standard-webhooks: webhook-id, webhook-timestamp, webhook-signature;
 * stripe: Stripe-Signature with t= and v1=; github: X-Hub-Signature-256;
 * hmac: the headers its params name).
 */
struct signature_request {
    /* The value of a header, names compared case-insensitively; NULL when absent. */
    const char *(*header)(void *ctx, const char *name);
    void *header_ctx;
    const void *body;
    size_t body_len;
    int64_t now_s;        /* the clock to judge the timestamp by */
    int64_t tolerance_s;  /* |now - timestamp| allowed in both directions; 0: not checked */
    const struct signature_params *params;
};

struct signature_scheme {
    const char *name;     /* "standard-webhooks", as in a source's verify.scheme */
    const char *header;   /* the header sign writes (NULL: named by params, or none) */
    int needs_params;     /* 1: verify and sign need a struct signature_params (hmac) */
    int needs_secrets;    /* 1: verify refuses an empty secret list (all but none) */
    /*
     * Writes the value of the signature header for msg into out[0..out_len):
     * standard-webhooks: one entry per secret that decodes, space-separated
     * ("v1,<base64>" for whsec_, "v1a,<base64>" for whsk_); stripe:
     * "t=<ts>,v1=<hex>" with one v1 per secret; github, hmac: the first
     * secret's signature; "" when no secret signs (and always for none).
     * Returns 0, or HOOKD_EINVAL when msg is unusable or out is too small.
     */
    int (*sign)(const struct signature_message *msg, const char *const *secrets, size_t n_secrets, char *out,
                size_t out_len);
    /*
     * Checks req against every secret (any match is enough; all are tried, so
     * timing does not tell which matched). Returns 0, HOOKD_ESIG (no secret
     * matches), HOOKD_ETIME (timestamp outside tolerance) or HOOKD_EINVAL
     * (headers missing or malformed, no secrets).
     */
    int (*verify)(const struct signature_request *req, const char *const *secrets, size_t n_secrets);
};

/*
 * The table; signature_schemes[0] is Standard Webhooks, then stripe, github,
 * hmac and none. Secrets per scheme: standard-webhooks whsec_ (v1), whpk_
 * (v1a; whsk_ verifies too, through its public key); stripe, github, hmac the
 * secret text's bytes as given (Stripe's whsec_ included, as its libraries
 * do); none takes no secrets and accepts every request.
 */
extern const struct signature_scheme signature_schemes[];
extern const size_t signature_schemes_count;

/* The scheme of that name, or NULL. */
const struct signature_scheme *signature_scheme_find(const char *name);
#endif
