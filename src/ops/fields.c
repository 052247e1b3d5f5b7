/*
 * The one reader of field tables: JSON bodies and query strings checked row
 * by row against name, type, bounds and flags, each refusal a 400 that names
 * the field. Also the shapes that several tables share (URLs, text, integers).
 */
#include "ops/fields.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/duration.h"
#include "core/ids.h"
#include "core/timefmt.h"
#include "core/utf8.h"
#include "ops/api_common.h"

/* ---- shared shapes -------------------------------------------------------------------- */

bool field_int_parse(const char *s, long long min, long long max, long long *out)
{
    char *end;
    long long v;

    if (!s || !isdigit((unsigned char)s[0]))
        return false;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max)
        return false;
    *out = v;
    return true;
}

bool field_text_ok(const char *s, size_t max)
{
    size_t n = 0;

    for (; s[n] != '\0'; n++) {
        unsigned char c = (unsigned char)s[n];
        if (n >= max || c < 0x20 || c == 0x7f)
            return false;
    }
    return true;
}

static bool host_char_ok(unsigned char c) { return isalnum(c) || c == '-' || c == '.' || c == '_'; }

int api_url_check(const char *url, char *why, size_t why_len)
{
    const char *rest, *host_end, *auth_end;
    static const char *const schemes[] = {"http://", "https://"};

    snprintf(why, why_len, "ok");
    if (strlen(url) > API_URL_MAX) {
        snprintf(why, why_len, "longer than %d characters", API_URL_MAX);
        return HOOKD_EINVAL;
    }
    for (const char *p = url; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c <= 0x20 || c >= 0x7f) {
            snprintf(why, why_len, "must not contain spaces, control or non-ASCII characters (percent-encode them)");
            return HOOKD_EINVAL;
        }
    }
    rest = NULL;
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
        if (strncasecmp(url, schemes[i], strlen(schemes[i])) == 0)
            rest = url + strlen(schemes[i]);
    }
    if (!rest) {
        snprintf(why, why_len, "must be an http:// or https:// URL");
        return HOOKD_EINVAL;
    }
    auth_end = rest + strcspn(rest, "/?#");
    if (memchr(rest, '@', (size_t)(auth_end - rest))) {
        snprintf(why, why_len, "must not contain credentials (user@host)");
        return HOOKD_EINVAL;
    }
    if (*rest == '[') {
        char addr[INET6_ADDRSTRLEN + 1];
        struct in6_addr a6;
        const char *close = memchr(rest, ']', (size_t)(auth_end - rest));
        size_t n = close ? (size_t)(close - rest - 1) : 0;
        if (!close || n == 0 || n >= sizeof addr) {
            snprintf(why, why_len, "has a malformed IPv6 host");
            return HOOKD_EINVAL;
        }
        memcpy(addr, rest + 1, n);
        addr[n] = '\0';
        if (inet_pton(AF_INET6, addr, &a6) != 1) {
            snprintf(why, why_len, "has a malformed IPv6 host");
            return HOOKD_EINVAL;
        }
        host_end = close + 1;
    } else {
        host_end = rest;
        while (host_end < auth_end && *host_end != ':') {
            if (!host_char_ok((unsigned char)*host_end)) {
                snprintf(why, why_len, "has an invalid character in the host");
                return HOOKD_EINVAL;
            }
            host_end++;
        }
        if (host_end == rest) {
            snprintf(why, why_len, "must have a host");
            return HOOKD_EINVAL;
        }
        if (*rest == '.' || *rest == '-' || host_end[-1] == '-' || memmem(rest, (size_t)(host_end - rest), "..", 2)) {
            snprintf(why, why_len, "has a malformed host");
            return HOOKD_EINVAL;
        }
    }
    if (host_end < auth_end) {
        char port[8];
        size_t n = (size_t)(auth_end - host_end - 1);
        long long p;
        if (*host_end != ':' || n == 0 || n >= sizeof port) {
            snprintf(why, why_len, "has a malformed port");
            return HOOKD_EINVAL;
        }
        memcpy(port, host_end + 1, n);
        port[n] = '\0';
        if (!field_int_parse(port, 1, 65535, &p)) {
            snprintf(why, why_len, "port must be from 1 to 65535");
            return HOOKD_EINVAL;
        }
    }
    return 0;
}

/* "must be \"a\", \"b\" or \"c\"" for an enum's words. */
static void enum_words(const char *const *values, char *out, size_t len)
{
    size_t used = (size_t)snprintf(out, len, "must be");

    for (size_t i = 0; values[i] && used < len; i++) {
        const char *sep = i == 0 ? " " : values[i + 1] ? ", " : " or ";
        used += (size_t)snprintf(out + used, len - used, "%s\"%s\"", sep, values[i]);
    }
}

static bool enum_index(const char *const *values, const char *s, long long *out)
{
    for (size_t i = 0; s && values[i]; i++) {
        if (strcmp(values[i], s) == 0) {
            *out = (long long)i;
            return true;
        }
    }
    return false;
}

/* ---- body fields ----------------------------------------------------------------------- */

static int refuse(struct api_error *err, const char *field, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int refuse(struct api_error *err, const char *field, const char *fmt, ...)
{
    char why[200];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    api_error_set(err, 400, "invalid_field", "%s: %s", field, why);
    return HOOKD_EINVAL;
}

/* A JSON string without NULs inside, or NULL. */
static const char *plain_string(const json_t *v)
{
    const char *s = json_string_value(v);

    return s && strlen(s) == json_string_length(v) ? s : NULL;
}

static int check_string(const struct field *f, const json_t *v, struct field_value *out, struct api_error *err)
{
    const char *s = json_string_value(v);

    if (!s)
        return refuse(err, f->name, "%s", f->hint ? f->hint : f->flags & FIELD_NULLABLE ? "must be a string or null"
                                                                                       : "must be a string");
    if (!plain_string(v) || !field_text_ok(s, f->max_len))
        return refuse(err, f->name, "at most %zu characters, no control characters", f->max_len);
    if (f->check && !f->check(s))
        return refuse(err, f->name, "%s", f->hint ? f->hint : "is not valid");
    out->str = s;
    return 0;
}

static int check_duration(const struct field *f, const json_t *v, struct field_value *out, struct api_error *err)
{
    const char *s = json_string_value(v);
    int64_t ms = 0;

    if (!s || duration_parse(s, &ms) != 0 || ms < f->min || ms > f->max) {
        char lo[24], hi[24];
        duration_format(f->min, lo);
        duration_format(f->max, hi);
        return refuse(err, f->name, "must be a duration from %s to %s such as \"10s\"", lo, hi);
    }
    out->ms = ms;
    return 0;
}

static int check_duration_list(const struct field *f, const json_t *v, struct field_value *out,
                               struct api_error *err)
{
    size_t max = f->max > 0 && f->max < FIELD_ITEMS_MAX ? (size_t)f->max : FIELD_ITEMS_MAX;
    const char *s = json_string_value(v);
    const json_t *item;
    size_t i;

    if (s) {
        if (duration_list_parse(s, out->durations, max, &out->n) != 0)
            return refuse(err, f->name, "must be durations such as \"10s,30s,2m\" (at most %zu)", max);
        return 0;
    }
    if (!json_is_array(v))
        return refuse(err, f->name, "must be a string \"10s,30s\" or an array [\"10s\",\"30s\"]");
    if (json_array_size(v) > max)
        return refuse(err, f->name, "at most %zu delays", max);
    json_array_foreach(v, i, item) {
        if (!json_is_string(item) || duration_parse(json_string_value(item), &out->durations[i]) != 0)
            return refuse(err, f->name, "entry %zu is not a duration such as \"30s\"", i);
    }
    out->n = json_array_size(v);
    return 0;
}

static int check_string_array(const struct field *f, const json_t *v, struct field_value *out,
                              struct api_error *err)
{
    size_t max = f->max > 0 && f->max < FIELD_ITEMS_MAX ? (size_t)f->max : FIELD_ITEMS_MAX;
    const json_t *item;
    size_t i;

    if (!json_is_array(v))
        return refuse(err, f->name, "%s", f->hint ? f->hint : "must be an array of strings");
    if (json_array_size(v) > max)
        return refuse(err, f->name, "at most %zu entries", max);
    json_array_foreach(v, i, item) {
        const char *s = plain_string(item);
        if (!s || !field_text_ok(s, f->max_len) || (f->check && !f->check(s)))
            return refuse(err, f->name, "entry %zu is not valid: %s", i,
                          f->hint ? f->hint : "must be a string without control characters");
        out->items[i] = s;
    }
    out->n = json_array_size(v);
    return 0;
}

/* Judges v by f's type and bounds; on success fills out. */
static int field_check(const struct field *f, const json_t *v, struct field_value *out, struct api_error *err)
{
    char why[128];

    memset(out, 0, sizeof *out);
    out->json = v;
    if (json_is_null(v) || ((f->flags & FIELD_BLANK_NULL) && json_is_string(v) && json_string_length(v) == 0)) {
        if (f->flags & FIELD_NULLABLE) {
            out->null = true;
            return 0;
        }
        if (json_is_null(v) && f->type != FIELD_STRING && f->type != FIELD_URL)
            return refuse(err, f->name, "must not be null");
    }
    switch (f->type) {
    case FIELD_STRING:
        return check_string(f, v, out, err);
    case FIELD_URL:
        if (!json_is_string(v))
            return refuse(err, f->name, "must be a string");
        if (!plain_string(v) || api_url_check(json_string_value(v), why, sizeof why) != 0)
            return refuse(err, f->name, "%s", plain_string(v) ? why : "must not contain NUL");
        out->str = json_string_value(v);
        return 0;
    case FIELD_INT:
        if (!json_is_integer(v) || json_integer_value(v) < f->min || json_integer_value(v) > f->max)
            return refuse(err, f->name, "must be an integer from %lld to %lld%s", f->min, f->max,
                          f->flags & FIELD_NULLABLE ? " (0 or null: the default)" : "");
        out->num = json_integer_value(v);
        return 0;
    case FIELD_BOOL:
        if (!json_is_boolean(v))
            return refuse(err, f->name, "must be true or false");
        out->num = json_is_true(v);
        return 0;
    case FIELD_DURATION:
        return check_duration(f, v, out, err);
    case FIELD_DURATION_LIST:
        return check_duration_list(f, v, out, err);
    case FIELD_ENUM:
        if (!json_is_string(v) || !enum_index(f->values, plain_string(v), &out->num)) {
            enum_words(f->values, why, sizeof why);
            return refuse(err, f->name, "%s", f->hint ? f->hint : why);
        }
        out->str = json_string_value(v);
        return 0;
    case FIELD_STRING_ARRAY:
        return check_string_array(f, v, out, err);
    case FIELD_OBJECT:
        if (!json_is_object(v))
            return refuse(err, f->name, "%s", f->hint ? f->hint : "must be an object");
        if (f->check_object && !f->check_object(v, why, sizeof why))
            return refuse(err, f->name, "%s", why);
        return 0;
    }
    return refuse(err, f->name, "has no rule"); /* a table row of an unknown type */
}

/* Stores v at f->offset (fields without set). */
static int field_store(const struct field *f, void *target, const struct field_value *v)
{
    char *at = (char *)target + f->offset;

    switch (f->type) {
    case FIELD_STRING:
    case FIELD_URL: {
        char **slot = (char **)(void *)at, *copy = NULL;
        if (!v->null && !(copy = strdup(v->str)))
            return HOOKD_ENOMEM;
        free(*slot);
        *slot = copy;
        return 0;
    }
    case FIELD_INT:
    case FIELD_ENUM:
        *(int *)(void *)at = v->null ? 0 : (int)v->num;
        return 0;
    case FIELD_BOOL:
        *(bool *)(void *)at = !v->null && v->num != 0;
        return 0;
    case FIELD_DURATION:
        *(int64_t *)(void *)at = v->null ? 0 : v->ms;
        return 0;
    default:
        return HOOKD_EINVAL; /* lists and objects need a set function */
    }
}

static const struct field *field_find(const struct field *table, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(table[i].name, name) == 0)
            return &table[i];
    }
    return NULL;
}

int fields_apply(const struct field *table, size_t n, void *target, const json_t *body, enum api_body_mode mode,
                 struct api_error *err)
{
    const char *key;
    json_t *v;

    if (!json_is_object(body)) {
        api_error_set(err, 400, "malformed_json", "the request body must be a JSON object");
        return HOOKD_EINVAL;
    }
    json_object_foreach((json_t *)body, key, v) {
        const struct field *f = field_find(table, n, key);
        struct field_value value;
        int rc;

        if (!f) {
            api_error_set(err, 400, "unknown_field", "%.64s: unknown field", key);
            return HOOKD_EINVAL;
        }
        if (mode == API_BODY_PATCH && (f->flags & FIELD_FIXED))
            return refuse(err, f->name, "%s", f->fixed_hint ? f->fixed_hint : "cannot be changed");
        rc = field_check(f, v, &value, err);
        if (rc == 0)
            rc = f->set ? f->set(target, &value) : field_store(f, target, &value);
        if (rc != 0)
            return rc;
    }
    for (size_t i = 0; mode == API_BODY_CREATE && i < n; i++) {
        if ((table[i].flags & FIELD_REQUIRED) && !json_object_get(body, table[i].name)) {
            api_error_set(err, 400, "missing_field", "%s is required", table[i].name);
            return HOOKD_EINVAL;
        }
    }
    return 0;
}

/* ---- query parameters -------------------------------------------------------------------- */

/* "limit, cursor, account" for the message about an unknown parameter. */
static void param_names(const struct query_param *table, size_t n, char *out, size_t len)
{
    size_t used = 0;

    snprintf(out, len, "%s", n == 0 ? "no parameters" : "");
    for (size_t i = 0; i < n && used < len; i++)
        used += (size_t)snprintf(out + used, len - used, "%s%s", i ? ", " : "", table[i].name);
}

static int param_refuse(struct api_error *err, const struct query_param *p, const char *generated)
{
    api_error_set(err, 400, "invalid_field", "%s: %s", p->name, p->hint ? p->hint : generated);
    return HOOKD_EINVAL;
}

static int param_apply(const struct query_param *p, const char *s, void *target, struct query_scratch *scratch,
                       struct api_error *err)
{
    char *at = (char *)target + p->offset;
    char why[160], key[CURSOR_KEY_MAX];
    long long v;
    int64_t ms;

    switch (p->type) {
    case QUERY_LIMIT:
        if (!field_int_parse(s, 1, API_LIMIT_MAX, &v)) {
            snprintf(why, sizeof why, "must be an integer from 1 to %d", API_LIMIT_MAX);
            return param_refuse(err, p, why);
        }
        *(int *)(void *)at = (int)v;
        return 0;
    case QUERY_CURSOR_ID:
        if (cursor_decode(p->list, s, scratch->cursor_key) != 0 || !id_is_valid(scratch->cursor_key))
            return param_refuse(err, p, "not a cursor this list returned");
        *(const char **)(void *)at = scratch->cursor_key;
        return 0;
    case QUERY_CURSOR_SEQ:
        if (cursor_decode(p->list, s, key) != 0 || !field_int_parse(key, 1, INT64_MAX, &v))
            return param_refuse(err, p, "not a cursor this list returned");
        *(int64_t *)(void *)at = v;
        return 0;
    case QUERY_TIME:
        if (rfc3339_parse(s, &ms) != 0)
            return param_refuse(err, p, "must be an RFC 3339 time such as 2026-01-31T12:00:00Z");
        *(int64_t *)(void *)at = ms;
        return 0;
    case QUERY_ID:
        if (!id_is_valid(s))
            return param_refuse(err, p, "not a valid id");
        *(const char **)(void *)at = s;
        return 0;
    case QUERY_TEXT:
        /* UTF-8 only: no stored label is anything else (PostgreSQL refuses it as a parameter). */
        if (!field_text_ok(s, p->max_len) || !utf8_valid(s, strlen(s)) || (p->check && !p->check(s))) {
            snprintf(why, sizeof why, "at most %zu bytes of UTF-8 text, no control characters", p->max_len);
            return param_refuse(err, p, why);
        }
        *(const char **)(void *)at = s;
        return 0;
    case QUERY_ENUM:
        if (!enum_index(p->values, s, &v)) {
            enum_words(p->values, why, sizeof why);
            return param_refuse(err, p, why);
        }
        *(int *)(void *)at = (int)v;
        return 0;
    }
    return param_refuse(err, p, "has no rule");
}

int query_parse(const struct query_param *table, size_t n, const struct query_pair *pairs, size_t n_pairs,
                void *target, struct query_scratch *scratch, struct api_error *err)
{
    bool seen[QUERY_PAIRS_MAX] = {false};

    if (n > QUERY_PAIRS_MAX || n_pairs > QUERY_PAIRS_MAX) {
        api_error_set(err, 400, "invalid_field", "query: at most %d parameters", QUERY_PAIRS_MAX);
        return HOOKD_EINVAL;
    }
    for (size_t k = 0; k < n_pairs; k++) {
        const char *name = pairs[k].name ? pairs[k].name : "";
        size_t i = 0;
        int rc;

        while (i < n && strcmp(table[i].name, name) != 0)
            i++;
        if (i == n) {
            char known[256];
            param_names(table, n, known, sizeof known);
            api_error_set(err, 400, "unknown_field", "%.64s: unknown query parameter (this list takes %s)", name,
                          known);
            return HOOKD_EINVAL;
        }
        if (seen[i]) {
            api_error_set(err, 400, "invalid_field", "%s: given more than once", table[i].name);
            return HOOKD_EINVAL;
        }
        seen[i] = true;
        rc = param_apply(&table[i], pairs[k].value ? pairs[k].value : "", target, scratch, err);
        if (rc != 0)
            return rc;
    }
    for (size_t i = 0; i < n; i++) {
        if (!seen[i] && table[i].type == QUERY_LIMIT)
            *(int *)(void *)((char *)target + table[i].offset) = API_LIMIT_DEFAULT;
    }
    return 0;
}

struct pair_collector {
    struct query_pair pairs[QUERY_PAIRS_MAX];
    size_t n;
    bool overflow;
};

static int collect_pair(void *arg, const char *name, const char *value)
{
    struct pair_collector *c = arg;

    if (c->n == QUERY_PAIRS_MAX) {
        c->overflow = true;
        return 1; /* stop */
    }
    c->pairs[c->n++] = (struct query_pair){name, value ? value : ""};
    return 0;
}

bool api_query_parse(struct http_request *req, struct http_response *res, const struct query_param *table, size_t n,
                     void *target, struct query_scratch *scratch)
{
    struct pair_collector c = {.n = 0};
    struct api_error err = {0};

    http_query_each(req, collect_pair, &c);
    if (c.overflow) {
        http_reply_error(res, 400, "invalid_field", "query: at most %d parameters", QUERY_PAIRS_MAX);
        return false;
    }
    if (query_parse(table, n, c.pairs, c.n, target, scratch, &err) != 0) {
        api_reply_api_error(res, &err);
        return false;
    }
    return true;
}

const char *query_cursor_make(const char *list, const char *key, char out[CURSOR_TEXT_MAX])
{
    return key && cursor_encode(list, key, out) == 0 ? out : NULL;
}
