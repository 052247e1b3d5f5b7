/*
 * `hookd send SOURCE`: signs a test event the way a provider does (through the
 * scheme table, so the signature is exactly what the receiver verifies) and
 * POSTs it to the public listener's /in/SOURCE; prints the status and the
 * response body. The secret is never printed.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curl.h>

#include "cli/cli.h"
#include "cli/output.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/field_spec.h"
#include "core/ids.h"
#include "core/signature_scheme.h"
#include "hookd.h"

#define SEND_DEFAULT_BASE "http://127.0.0.1:8080"
#define SEND_BODY_MAX (16u << 20)
#define SEND_RESPONSE_MAX (64u << 10)
#define SEND_MAX_SECRETS 4
#define SEND_MAX_HEADERS 16
#define SEND_SOURCE_MAX 64
#define SEND_URL_MAX 2048
#define SEND_TIMEOUT_MS 30000L

struct send_args {
    const char *source, *scheme, *data, *file, *id, *url, *timestamp;
    const char *header, *algorithm, *encoding, *prefix, *timestamp_header, *template_text;
    const char *secrets[SEND_MAX_SECRETS];
    size_t n_secrets;
    const char *extra[SEND_MAX_HEADERS]; /* "Name: value" as given */
    size_t n_extra;
};

/* Options: a string field of struct send_args, or a repeated one (secret, add-header). */
enum option_kind { OPT_STRING, OPT_SECRET, OPT_EXTRA };
struct send_option {
    const char *name;
    enum option_kind kind;
    size_t offset;
};

static const struct send_option options[] = {
    {"scheme", OPT_STRING, offsetof(struct send_args, scheme)},
    {"secret", OPT_SECRET, 0},
    {"data", OPT_STRING, offsetof(struct send_args, data)},
    {"file", OPT_STRING, offsetof(struct send_args, file)},
    {"id", OPT_STRING, offsetof(struct send_args, id)},
    {"url", OPT_STRING, offsetof(struct send_args, url)},
    {"timestamp", OPT_STRING, offsetof(struct send_args, timestamp)},
    {"add-header", OPT_EXTRA, 0},
    {"header", OPT_STRING, offsetof(struct send_args, header)},
    {"algorithm", OPT_STRING, offsetof(struct send_args, algorithm)},
    {"encoding", OPT_STRING, offsetof(struct send_args, encoding)},
    {"prefix", OPT_STRING, offsetof(struct send_args, prefix)},
    {"timestamp-header", OPT_STRING, offsetof(struct send_args, timestamp_header)},
    {"template", OPT_STRING, offsetof(struct send_args, template_text)},
};

static void usage(FILE *f)
{
    fputs("usage: hookd send SOURCE --scheme standard-webhooks|stripe|github|hmac --secret S\n"
          "                  (--data JSON | --file F) [--id ID] [--url URL] [--timestamp UNIX]\n"
          "                  [--add-header 'Name: value' ...]\n"
          "       hmac:      --header NAME [--algorithm sha256|sha512] [--encoding hex|base64]\n"
          "                  [--prefix P] [--timestamp-header NAME] [--template '{timestamp}.{body}']\n"
          "  Signs the body the way the provider does and POSTs it to URL (default\n"
          "  $HOOKD_PUBLIC_URL/in/SOURCE, else http://127.0.0.1:8080/in/SOURCE); prints the\n"
          "  status and the response body. --secret may be repeated (standard-webhooks and\n"
          "  stripe sign with each; a whsk_ key signs standard-webhooks v1a). --id is the\n"
          "  webhook-id (standard-webhooks) or X-GitHub-Delivery (github); generated if absent.\n"
          "  Exit status: 0 for a 2xx answer, 1 for any other answer or a failed request, 2 for usage.\n",
          f);
}

/* Returns 0, 1 (help shown) or HOOKD_EINVAL with err filled. */
static int parse_args(struct send_args *a, int argc, char **argv, char *err, size_t errlen)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *value, *eq;
        size_t k, nlen;

        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)
            return 1;
        if (strncmp(arg, "--", 2) != 0) {
            if (a->source != NULL) {
                snprintf(err, errlen, "unexpected argument '%.100s'", arg);
                return HOOKD_EINVAL;
            }
            a->source = arg;
            continue;
        }
        arg += 2;
        eq = strchr(arg, '=');
        nlen = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
        for (k = 0; k < sizeof options / sizeof options[0]; k++) {
            if (strlen(options[k].name) == nlen && strncmp(options[k].name, arg, nlen) == 0)
                break;
        }
        if (k == sizeof options / sizeof options[0]) {
            snprintf(err, errlen, "unknown option '%.100s'", argv[i]);
            return HOOKD_EINVAL;
        }
        value = eq != NULL ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (value == NULL) {
            snprintf(err, errlen, "--%s needs a value", options[k].name);
            return HOOKD_EINVAL;
        }
        switch (options[k].kind) {
        case OPT_STRING:
            *(const char **)((char *)a + options[k].offset) = value;
            break;
        case OPT_SECRET:
            if (a->n_secrets == SEND_MAX_SECRETS) {
                snprintf(err, errlen, "at most %d --secret", SEND_MAX_SECRETS);
                return HOOKD_EINVAL;
            }
            a->secrets[a->n_secrets++] = value;
            break;
        case OPT_EXTRA:
            if (a->n_extra == SEND_MAX_HEADERS) {
                snprintf(err, errlen, "at most %d --add-header", SEND_MAX_HEADERS);
                return HOOKD_EINVAL;
            }
            a->extra[a->n_extra++] = value;
            break;
        }
    }
    return 0;
}

/* ---- the request's headers ---------------------------------------------------------------- */

/* Headers the request will carry, for the hmac template's {header:NAME} and for curl. */
struct send_headers {
    char names[SEND_MAX_HEADERS + 4][SIGNATURE_HEADER_NAME_MAX + 1];
    const char *values[SEND_MAX_HEADERS + 4];
    size_t n;
};

static int headers_add(struct send_headers *h, const char *name, size_t name_len, const char *value)
{
    if (h->n == sizeof h->values / sizeof h->values[0] ||
        !http_token_is_valid(name, name_len, SIGNATURE_HEADER_NAME_MAX))
        return HOOKD_EINVAL;
    /* No CR, LF or other controls in a value: they would split the request. */
    for (const char *p = value; *p != '\0'; p++) {
        if ((unsigned char)*p < 0x20 && *p != '\t')
            return HOOKD_EINVAL;
    }
    memcpy(h->names[h->n], name, name_len);
    h->names[h->n][name_len] = '\0';
    h->values[h->n++] = value;
    return 0;
}

static const char *headers_get(void *ctx, const char *name)
{
    const struct send_headers *h = ctx;

    for (size_t i = 0; i < h->n; i++) {
        if (strcasecmp(h->names[i], name) == 0)
            return h->values[i];
    }
    return NULL;
}

/* ---- reading the body, posting it ---------------------------------------------------------- */

static int read_file(const char *path, struct buf *out, char *err, size_t errlen)
{
    char chunk[8192];
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    size_t n;
    int rc = 0;

    if (f == NULL) {
        snprintf(err, errlen, "--file %.200s: cannot open", path);
        return HOOKD_EIO;
    }
    while (rc == 0 && (n = fread(chunk, 1, sizeof chunk, f)) > 0)
        rc = buf_append(out, chunk, n);
    if (rc != 0)
        snprintf(err, errlen, "--file %.200s: larger than 16 MiB", path);
    else if (ferror(f)) {
        snprintf(err, errlen, "--file %.200s: read error", path);
        rc = HOOKD_EIO;
    }
    if (f != stdin)
        fclose(f);
    return rc;
}

static size_t collect(char *data, size_t size, size_t n, void *ctx)
{
    struct buf *b = ctx;
    size_t len = size * n;

    /* Past the cap the rest is dropped, not an error: the status still counts. */
    if (b->len < b->max && buf_append(b, data, len < b->max - b->len ? len : b->max - b->len) != 0)
        return 0;
    return len;
}

static bool source_is_valid(const char *s)
{
    size_t n = strnlen(s, SEND_SOURCE_MAX + 1);

    if (n == 0 || n > SEND_SOURCE_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return false;
    }
    return true;
}

static int post(const char *url, const struct send_headers *h, const struct buf *body, long *status,
                struct buf *response, char *err, size_t errlen)
{
    CURL *easy = curl_easy_init();
    struct curl_slist *list = NULL, *grown;
    char line[SIGNATURE_HEADER_NAME_MAX + SIGNATURE_HEADER_MAX + 4];
    CURLcode cc;
    int rc = HOOKD_EIO;

    if (easy == NULL) {
        snprintf(err, errlen, "cannot start libcurl");
        return HOOKD_ENOMEM;
    }
    for (size_t i = 0; i < h->n; i++) {
        if ((size_t)snprintf(line, sizeof line, "%s: %s", h->names[i], h->values[i]) >= sizeof line ||
            (grown = curl_slist_append(list, line)) == NULL) {
            snprintf(err, errlen, "header %s too long", h->names[i]);
            rc = HOOKD_EINVAL;
            goto out;
        }
        list = grown;
    }
    /* No "Expect: 100-continue" round trip for large bodies. */
    if ((grown = curl_slist_append(list, "Expect:")) == NULL)
        goto out;
    list = grown;
    curl_easy_setopt(easy, CURLOPT_URL, url);
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(easy, CURLOPT_POST, 1L);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body->len > 0 ? body->data : "");
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body->len);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, response);
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, SEND_TIMEOUT_MS);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_USERAGENT, "hookd-send/" HOOKD_VERSION);
    cc = curl_easy_perform(easy);
    if (cc != CURLE_OK) {
        snprintf(err, errlen, "POST %.300s: %s", url, curl_easy_strerror(cc));
        goto out;
    }
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, status);
    rc = 0;
out:
    curl_slist_free_all(list);
    curl_easy_cleanup(easy);
    return rc;
}

/* ---- the command ---------------------------------------------------------------------------- */

/* An error line on stderr: it can carry the URL and libcurl's words about the peer, so it is escaped. */
static void say_error(const char *err)
{
    fputs("hookd send: ", stderr);
    out_write_text(stderr, err, strlen(err), false);
    fputc('\n', stderr);
}

int cmd_send(int argc, char **argv)
{
    struct send_args a = {0};
    struct send_headers *h = calloc(1, sizeof *h);
    struct signature_params params;
    const struct signature_scheme *scheme = NULL;
    struct buf body, response;
    char err[512] = "", url[SEND_URL_MAX], id[HOOKD_ID_MAX], ts[24];
    char *signature = malloc(SIGNATURE_HEADER_MAX);
    const char *field = NULL, *problem = NULL, *sig_header;
    int64_t timestamp = clock_now_ms() / 1000;
    long status = 0;
    int rc, exit_code = 2;

    buf_init(&body, SEND_BODY_MAX);
    buf_init(&response, SEND_RESPONSE_MAX);
    if (h == NULL || signature == NULL) {
        fprintf(stderr, "hookd send: out of memory\n");
        goto out;
    }
    rc = parse_args(&a, argc, argv, err, sizeof err);
    if (rc == 1) {
        usage(stdout);
        exit_code = 0;
        goto out;
    }
    if (rc != 0)
        goto usage_error;
    if (a.source == NULL || !source_is_valid(a.source)) {
        snprintf(err, sizeof err, "SOURCE is required: 1 to 64 letters, digits, '-', '_' or '.'");
        goto usage_error;
    }
    scheme = signature_scheme_find(a.scheme);
    if (a.scheme == NULL || scheme == NULL || strcmp(a.scheme, "none") == 0) {
        snprintf(err, sizeof err, "--scheme must be standard-webhooks, stripe, github or hmac");
        goto usage_error;
    }
    if (a.n_secrets == 0) {
        snprintf(err, sizeof err, "--secret is required");
        goto usage_error;
    }
    if ((a.data == NULL) == (a.file == NULL)) {
        snprintf(err, sizeof err, "give exactly one of --data and --file");
        goto usage_error;
    }
    if (a.timestamp != NULL) {
        char *end;
        long long v = strtoll(a.timestamp, &end, 10);
        if (*a.timestamp == '\0' || *end != '\0' || v < 0 || v > 999999999999999LL) {
            snprintf(err, sizeof err, "--timestamp must be unix seconds");
            goto usage_error;
        }
        timestamp = v;
    }
    if (!scheme->needs_params && (a.header || a.algorithm || a.encoding || a.prefix || a.timestamp_header ||
                                  a.template_text)) {
        snprintf(err, sizeof err, "--header, --algorithm, --encoding, --prefix, --timestamp-header and --template "
                                  "are for --scheme hmac");
        goto usage_error;
    }
    if (scheme->needs_params) {
        const struct signature_params_text text = {a.header, a.algorithm, a.encoding, a.prefix, a.timestamp_header,
                                                   a.template_text};
        if (signature_params_parse(&params, &text, &field, &problem) != 0) {
            snprintf(err, sizeof err, "--%s: %s", strcmp(field, "timestamp_header") == 0 ? "timestamp-header" : field,
                     problem);
            goto usage_error;
        }
    }
    rc = a.data != NULL ? buf_append(&body, a.data, strlen(a.data)) : read_file(a.file, &body, err, sizeof err);
    if (rc != 0) {
        if (err[0] == '\0')
            snprintf(err, sizeof err, "--data: larger than 16 MiB");
        goto usage_error;
    }

    /* The URL: --url, else $HOOKD_PUBLIC_URL or the default listener, then /in/SOURCE. */
    if (a.url != NULL) {
        rc = snprintf(url, sizeof url, "%s", a.url);
    } else {
        const char *base = getenv("HOOKD_PUBLIC_URL");
        size_t blen;
        if (base == NULL || base[0] == '\0')
            base = SEND_DEFAULT_BASE;
        blen = strlen(base);
        while (blen > 0 && base[blen - 1] == '/')
            blen--;
        rc = snprintf(url, sizeof url, "%.*s/in/%s", (int)blen, base, a.source);
    }
    if (rc < 0 || (size_t)rc >= sizeof url) {
        snprintf(err, sizeof err, "the URL is too long");
        goto usage_error;
    }

    /* Headers: the provider's own, then --add-header; the signature last, over all of them. */
    if (a.id == NULL) {
        id_new(id, "msg_");
        a.id = id;
    }
    snprintf(ts, sizeof ts, "%" PRId64, timestamp);
    rc = headers_add(h, "Content-Type", 12, "application/json");
    if (rc == 0 && strcmp(scheme->name, SIGNATURE_SCHEME_DEFAULT) == 0) {
        rc = headers_add(h, "webhook-id", 10, a.id);
        if (rc == 0)
            rc = headers_add(h, "webhook-timestamp", 17, ts);
    } else if (rc == 0 && strcmp(scheme->name, "github") == 0) {
        rc = headers_add(h, "X-GitHub-Delivery", 17, a.id);
    } else if (rc == 0 && scheme->needs_params && params.timestamp_header[0] != '\0') {
        rc = headers_add(h, params.timestamp_header, strlen(params.timestamp_header), ts);
    }
    if (rc != 0) {
        snprintf(err, sizeof err, "--id must not contain control characters");
        goto usage_error;
    }
    for (size_t i = 0; i < a.n_extra; i++) {
        const char *colon = strchr(a.extra[i], ':'), *value = colon != NULL ? colon + 1 : NULL;
        while (value != NULL && (*value == ' ' || *value == '\t'))
            value++;
        if (colon == NULL || headers_add(h, a.extra[i], (size_t)(colon - a.extra[i]), value) != 0) {
            snprintf(err, sizeof err, "--add-header '%.100s': expected 'Name: value' with a token name", a.extra[i]);
            goto usage_error;
        }
    }
    const struct signature_message msg = {
        .id = a.id,
        .timestamp_s = timestamp,
        .body = body.data,
        .body_len = body.len,
        .params = scheme->needs_params ? &params : NULL,
        .header = headers_get,
        .header_ctx = h,
    };
    sig_header = scheme->needs_params ? params.header : scheme->header;
    rc = scheme->sign(&msg, a.secrets, a.n_secrets, signature, SIGNATURE_HEADER_MAX);
    if (rc != 0 || signature[0] == '\0') {
        /* Say which input is wrong, never the secret itself. */
        snprintf(err, sizeof err, rc != 0 ? "cannot sign (a header the template names is missing?)"
                                          : "no --secret is usable with --scheme %s", scheme->name);
        goto usage_error;
    }
    if (headers_add(h, sig_header, strlen(sig_header), signature) != 0) {
        snprintf(err, sizeof err, "too many headers");
        goto usage_error;
    }

    exit_code = 1;
    if (post(url, h, &body, &status, &response, err, sizeof err) != 0) {
        say_error(err);
        goto out;
    }
    printf("%ld\n", status);
    if (response.len > 0) {
        /* The endpoint's bytes: escaped on a terminal (design §12), as sent into a pipe or a file. */
        if (isatty(STDOUT_FILENO))
            out_write_text(stdout, response.data, response.len, true);
        else
            fwrite(response.data, 1, response.len, stdout);
        if (response.data[response.len - 1] != '\n')
            putchar('\n');
    }
    exit_code = status >= 200 && status < 300 ? 0 : 1;
    goto out;

usage_error:
    say_error(err);
    if (a.source == NULL || scheme == NULL)
        usage(stderr);
out:
    if (signature != NULL)
        explicit_bzero(signature, SIGNATURE_HEADER_MAX);
    free(signature);
    free(h);
    buf_free(&body);
    buf_free(&response);
    return exit_code;
}
