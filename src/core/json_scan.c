/*
 * The plain-JSON scanner: one pass of recursive descent over the text,
 * checking it as jansson's parser would and noting the values at the
 * targets' pointers, or giving up (json_scan.h).
 */
#include "core/json_scan.h"

#include <stdint.h>
#include <string.h>

#include "core/event_check.h" /* utf8_seq: well-formed UTF-8 as jansson checks it (RFC 3629) */
#include "core/json_pointer.h"

#define SCAN_DEPTH_MAX 32       /* deeper nesting is left to jansson (its own cap is 2048) */
#define SCAN_INT_DIGITS_MAX 18  /* always within int64: jansson refuses what is not */
#define SCAN_REAL_DIGITS_MAX 300 /* no exponent and this few digits: never past DBL_MAX */

typedef uint64_t live_t; /* targets whose pointer matches the path so far, one bit each */
_Static_assert(JSON_SCAN_TARGETS_MAX <= 64, "one bit a target");

struct scan {
    const unsigned char *p, *end;
    struct json_scan_target *t;
    size_t n;
    /* Target i's reference token d is pointer[seg[i][d] + 1 .. seg[i][d + 1]) (after its '/'). */
    uint16_t seg[JSON_SCAN_TARGETS_MAX][JSON_POINTER_DEPTH_MAX + 1];
    size_t nseg[JSON_SCAN_TARGETS_MAX];
};

static int hex_digit(unsigned c)
{
    if (c >= '0' && c <= '9')
        return (int)(c - '0');
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? (int)(c - 'a' + 10) : -1;
}

static void skip_ws(struct scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

/*
 * A string at s->p (its opening quote): its bytes in [*start, *start + *len), s->p past the closing quote.
 * *escaped: it holds an escape (its bytes are not its value). false when jansson might refuse it, or would
 * decode an escape this does not vouch for (\u0000, any surrogate).
 */
static bool scan_string(struct scan *s, const unsigned char **start, size_t *len, bool *escaped)
{
    const unsigned char *p = s->p + 1, *end = s->end;

    *escaped = false;
    *start = p;
    while (p < end && *p != '"') {
        unsigned c = *p;
        if (c < 0x20)
            return false;
        if (c == '\\') {
            *escaped = true;
            if (end - p < 2)
                return false;
            c = p[1];
            if (c == 'u') {
                unsigned v = 0;
                if (end - p < 6)
                    return false;
                for (int i = 2; i < 6; i++) {
                    int d = hex_digit(p[i]);
                    if (d < 0)
                        return false;
                    v = v << 4 | (unsigned)d;
                }
                if (v == 0 || (v >= 0xD800 && v <= 0xDFFF))
                    return false;
                p += 6;
            } else if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' ||
                       c == 't') {
                p += 2;
            } else {
                return false;
            }
        } else if (c < 0x80) {
            p++;
        } else {
            size_t k = utf8_seq(p, (size_t)(end - p));
            if (k == 0)
                return false;
            p += k;
        }
    }
    if (p >= end)
        return false;
    *len = (size_t)(p - *start);
    s->p = p + 1;
    return true;
}

static bool digits(struct scan *s, size_t *count)
{
    const unsigned char *from = s->p;

    while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
        s->p++;
    *count = (size_t)(s->p - from);
    return *count > 0;
}

/* A number at s->p: an integer (*integer) or a real without exponent; false for anything else. */
static bool scan_number(struct scan *s, bool *integer)
{
    size_t n_int, n_frac = 0;

    if (*s->p == '-')
        s->p++;
    if (s->p < s->end && *s->p == '0') {
        s->p++;
        n_int = 1;
    } else if (!digits(s, &n_int)) {
        return false;
    }
    *integer = true;
    if (s->p < s->end && *s->p == '.') {
        s->p++;
        if (!digits(s, &n_frac))
            return false;
        *integer = false;
    }
    if (s->p < s->end && (*s->p == 'e' || *s->p == 'E'))
        return false;
    return *integer ? n_int <= SCAN_INT_DIGITS_MAX : n_int + n_frac <= SCAN_REAL_DIGITS_MAX;
}

static bool literal(struct scan *s, const char *word)
{
    size_t n = strlen(word);

    if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0)
        return false;
    s->p += n;
    return true;
}

/* Sets what the targets of live that end at this depth see: the value just scanned. */
static void note(struct scan *s, live_t live, size_t depth, enum json_scan_kind kind, const unsigned char *text,
                 size_t len)
{
    for (size_t i = 0; live && i < s->n; i++, live >>= 1) {
        if ((live & 1) && s->nseg[i] == depth) {
            s->t[i].kind = kind;
            s->t[i].text = (const char *)text;
            s->t[i].len = len;
        }
    }
}

/* Whether any target of live goes deeper than depth. */
static bool goes_deeper(const struct scan *s, live_t live, size_t depth)
{
    for (size_t i = 0; live && i < s->n; i++, live >>= 1)
        if ((live & 1) && s->nseg[i] > depth)
            return true;
    return false;
}

static bool scan_value(struct scan *s, live_t live, size_t depth);

/*
 * An object's members. A member whose name is a target's next token resets
 * that target before its value: with a name given twice, jansson keeps the
 * last value, and a target below the first one is then absent unless the
 * last one has it.
 */
static bool scan_object(struct scan *s, live_t live, size_t depth)
{
    bool deeper = goes_deeper(s, live, depth);

    s->p++;
    skip_ws(s);
    if (s->p < s->end && *s->p == '}') {
        s->p++;
        return true;
    }
    for (;;) {
        const unsigned char *key;
        size_t key_len;
        bool escaped;
        live_t next = 0;

        skip_ws(s);
        if (s->p >= s->end || *s->p != '"' || !scan_string(s, &key, &key_len, &escaped))
            return false;
        if (deeper) {
            if (escaped)
                return false; /* a name that might be a target's: its value would need decoding */
            for (size_t i = 0; i < s->n; i++) {
                if (!(live >> i & 1) || s->nseg[i] <= depth)
                    continue;
                const char *tok = s->t[i].pointer + s->seg[i][depth] + 1;
                size_t tok_len = (size_t)(s->seg[i][depth + 1] - s->seg[i][depth] - 1);
                if (tok_len == key_len && memcmp(tok, key, key_len) == 0) {
                    next |= (live_t)1 << i;
                    s->t[i].kind = JSON_SCAN_ABSENT;
                }
            }
        }
        skip_ws(s);
        if (s->p >= s->end || *s->p != ':')
            return false;
        s->p++;
        if (!scan_value(s, next, depth + 1))
            return false;
        skip_ws(s);
        if (s->p < s->end && *s->p == ',') {
            s->p++;
            continue;
        }
        if (s->p < s->end && *s->p == '}') {
            s->p++;
            return true;
        }
        return false;
    }
}

static bool scan_array(struct scan *s, live_t live, size_t depth)
{
    if (goes_deeper(s, live, depth))
        return false; /* a step into an array (an index, or "-"): json_pointer_get's rules */
    s->p++;
    skip_ws(s);
    if (s->p < s->end && *s->p == ']') {
        s->p++;
        return true;
    }
    for (;;) {
        if (!scan_value(s, 0, depth + 1))
            return false;
        skip_ws(s);
        if (s->p < s->end && *s->p == ',') {
            s->p++;
            continue;
        }
        if (s->p < s->end && *s->p == ']') {
            s->p++;
            return true;
        }
        return false;
    }
}

static bool scan_value(struct scan *s, live_t live, size_t depth)
{
    const unsigned char *start = NULL;
    size_t len = 0;
    bool escaped, integer;

    skip_ws(s);
    if (s->p >= s->end)
        return false;
    switch (*s->p) {
    case '{':
    case '[':
        if (depth >= SCAN_DEPTH_MAX || !(*s->p == '{' ? scan_object(s, live, depth) : scan_array(s, live, depth)))
            return false;
        note(s, live, depth, JSON_SCAN_OTHER, NULL, 0);
        return true;
    case '"':
        if (!scan_string(s, &start, &len, &escaped))
            return false;
        if (escaped && live) {
            for (size_t i = 0; i < s->n; i++)
                if ((live >> i & 1) && s->nseg[i] == depth)
                    return false; /* a target's value with an escape: jansson decodes it */
        }
        note(s, live, depth, JSON_SCAN_STRING, start, len);
        return true;
    case 't':
    case 'f':
        if (!literal(s, *s->p == 't' ? "true" : "false"))
            return false;
        note(s, live, depth, JSON_SCAN_OTHER, NULL, 0);
        return true;
    case 'n':
        if (!literal(s, "null"))
            return false;
        note(s, live, depth, JSON_SCAN_NULL, NULL, 0);
        return true;
    default:
        start = s->p;
        if ((*s->p != '-' && (*s->p < '0' || *s->p > '9')) || !scan_number(s, &integer))
            return false;
        len = (size_t)(s->p - start);
        if (integer && len == 2 && start[0] == '-' && start[1] == '0' && live) {
            for (size_t i = 0; i < s->n; i++)
                if ((live >> i & 1) && s->nseg[i] == depth)
                    return false; /* jansson's integer is 0, written "0" */
        }
        note(s, live, depth, integer ? JSON_SCAN_INTEGER : JSON_SCAN_OTHER, start, len);
        return true;
    }
}

/* Splits target i's pointer into its tokens; false for one this leaves to json_pointer_get (escapes, bad). */
static bool pointer_split(struct scan *s, size_t i)
{
    const char *ptr = s->t[i].pointer;
    size_t n = 0, len;

    if (!ptr || json_pointer_check(ptr, NULL) != 0 || strchr(ptr, '~'))
        return false;
    len = strlen(ptr);
    for (size_t k = 0; k < len; k++) {
        if (ptr[k] == '/')
            s->seg[i][n++] = (uint16_t)k; /* check: at most JSON_POINTER_DEPTH_MAX tokens, 256 bytes */
    }
    s->seg[i][n] = (uint16_t)len;
    s->nseg[i] = n;
    return true;
}

bool json_scan(const char *text, size_t len, struct json_scan_target *targets, size_t n)
{
    struct scan s;

    if (n > JSON_SCAN_TARGETS_MAX || (!text && len > 0))
        return false;
    s.p = (const unsigned char *)text;
    s.end = s.p + len;
    s.t = targets;
    s.n = n;
    for (size_t i = 0; i < n; i++) {
        targets[i].kind = JSON_SCAN_ABSENT;
        targets[i].text = NULL;
        targets[i].len = 0;
        if (!pointer_split(&s, i))
            return false;
    }
    if (!scan_value(&s, n == 64 ? ~(live_t)0 : ((live_t)1 << n) - 1, 0))
        return false;
    skip_ws(&s);
    return s.p == s.end;
}
