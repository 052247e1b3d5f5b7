/*
 * Signature schemes as one table of {name, sign, verify} (DESIGN §5, §6),
 * found by name. Standard Webhooks is the first entry; the inbound receiver
 * adds its schemes (stripe, github, hmac) as further entries of the same
 * shape, and every caller — the outbound request builder, `hookd listen`,
 * hookd_verify() — goes through the table, never a scheme's functions.
 *
 *   signature_scheme_find    the scheme of a name, or NULL
 *   scheme->sign             the signature header of a message, one entry per secret
 *   scheme->verify           a request against a list of secrets
 */
#ifndef HOOKD_CORE_SIGNATURE_SCHEME_H
#define HOOKD_CORE_SIGNATURE_SCHEME_H
#include <stddef.h>
#include <stdint.h>

#define SIGNATURE_SCHEME_DEFAULT "standard-webhooks"

/*
 * Settings of a configurable scheme, from the source's "verify" object
 * (DESIGN §12): hmac will define it as {header, algorithm, encoding, prefix,
 * timestamp_header}. Fixed schemes (standard-webhooks, stripe, github) take
 * NULL. Declared only, so the table's shape need not change when hmac comes.
 */
struct signature_params;

/* What a sender signs. Schemes without a message id (stripe, github) ignore id. */
struct signature_message {
    const char *id;       /* standard-webhooks: webhook-id */
    int64_t timestamp_s;  /* unix seconds of this attempt */
    const void *body;
    size_t body_len;
    const struct signature_params *params;
};

/*
 * A received request as a scheme sees it: each scheme reads the headers it
 * needs (standard-webhooks: webhook-id, webhook-timestamp, webhook-signature;
 * stripe: Stripe-Signature with t= and v1=; github: X-Hub-Signature-256).
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
    const char *header;   /* the header sign writes (NULL: named by params) */
    /*
     * Writes the value of the signature header for msg into out[0..out_len):
     * one entry per secret that decodes (standard-webhooks: "v1,<base64>"
     * space-separated), "" when none does. Returns 0, or HOOKD_EINVAL when
     * msg is unusable or out is too small.
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

/* The table; signature_schemes[0] is Standard Webhooks. */
extern const struct signature_scheme signature_schemes[];
extern const size_t signature_schemes_count;

/* The scheme of that name, or NULL. */
const struct signature_scheme *signature_scheme_find(const char *name);
#endif
