/*
 * The CLI output layer's text rules: what a value from the API may put on a
 * terminal (escaped control bytes, cut at a display width), relative times,
 * durations in words, and when to colour.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/output.h"

/* ---- characters ------------------------------------------------------------------------------ */

/* Decodes one well-formed UTF-8 character (RFC 3629) at s[0..n); returns its length, or 0 when s does not start one. */
static size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    size_t len;
    uint32_t c;

    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        len = 2;
        c = s[0] & 0x1f;
    } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
        len = 3;
        c = s[0] & 0x0f;
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        len = 4;
        c = s[0] & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        c = (c << 6) | (s[i] & 0x3f);
    }
    if ((len == 3 && c < 0x800) || (len == 4 && (c < 0x10000 || c > 0x10ffff)) || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    *cp = c;
    return len;
}

struct range {
    uint32_t first, last;
};

/* Characters a terminal draws two columns wide (East Asian Wide/Fullwidth and the emoji blocks). */
static const struct range wide[] = {
    {0x1100, 0x115f},   {0x231a, 0x231b},   {0x2329, 0x232a},   {0x23e9, 0x23ec},   {0x25fd, 0x25fe},
    {0x2614, 0x2615},   {0x2648, 0x2653},   {0x26aa, 0x26ab},   {0x26bd, 0x26be},   {0x26c4, 0x26c5},
    {0x2705, 0x2705},   {0x270a, 0x270b},   {0x2728, 0x2728},   {0x274c, 0x274c},   {0x2753, 0x2755},
    {0x2795, 0x2797},   {0x2b1b, 0x2b1c},   {0x2e80, 0x303e},   {0x3041, 0x33ff},   {0x3400, 0x4dbf},
    {0x4e00, 0x9fff},   {0xa000, 0xa4cf},   {0xa960, 0xa97f},   {0xac00, 0xd7a3},   {0xf900, 0xfaff},
    {0xfe10, 0xfe19},   {0xfe30, 0xfe6f},   {0xff00, 0xff60},   {0xffe0, 0xffe6},   {0x16fe0, 0x16fe4},
    {0x17000, 0x18cff}, {0x1b000, 0x1b2ff}, {0x1f004, 0x1f004}, {0x1f0cf, 0x1f0cf}, {0x1f18e, 0x1f18e},
    {0x1f191, 0x1f19a}, {0x1f200, 0x1f251}, {0x1f300, 0x1f64f}, {0x1f680, 0x1f6ff}, {0x1f7e0, 0x1f7eb},
    {0x1f90c, 0x1f9ff}, {0x1fa70, 0x1faff}, {0x20000, 0x2fffd}, {0x30000, 0x3fffd},
};

/* Characters drawn on the previous one (combining marks, joiners, variation selectors). */
static const struct range zero_width[] = {
    {0x0300, 0x036f}, {0x0483, 0x0489}, {0x0591, 0x05bd}, {0x05bf, 0x05c7}, {0x0610, 0x061a},
    {0x064b, 0x065f}, {0x0670, 0x0670}, {0x06d6, 0x06dc}, {0x06df, 0x06e4}, {0x0e31, 0x0e31},
    {0x0e34, 0x0e3a}, {0x0e47, 0x0e4e}, {0x1ab0, 0x1aff}, {0x1dc0, 0x1dff}, {0x200b, 0x200d},
    {0x20d0, 0x20ff}, {0xfe00, 0xfe0f}, {0xfe20, 0xfe2f}, {0xfeff, 0xfeff}, {0x1f3fb, 0x1f3ff},
    {0xe0100, 0xe01ef},
};

/* Characters that would move or reorder what the terminal shows: escaped like control bytes. */
static const struct range hostile[] = {
    {0x0080, 0x009f}, /* C1 controls: 0x9b is a one-byte CSI on some terminals */
    {0x061c, 0x061c}, {0x200e, 0x200f}, {0x2028, 0x202e}, {0x2066, 0x2069},
};

static bool in(const struct range *r, size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < r[mid].first)
            hi = mid;
        else if (cp > r[mid].last)
            lo = mid + 1;
        else
            return true;
    }
    return false;
}
#define IN(table, cp) in(table, sizeof table / sizeof table[0], cp)

/*
 * The next piece of text at s[0..n): either the character itself (copied) or
 * its escape. Writes the piece's bytes to piece (at most 12) and its display
 * width to *width; returns the input bytes it covers.
 */
static size_t next_piece(const unsigned char *s, size_t n, char piece[12], size_t *plen, size_t *width)
{
    uint32_t cp;
    size_t len = utf8_decode(s, n, &cp);

    if (len == 0) {
        *plen = (size_t)snprintf(piece, 12, "\\x%02x", s[0]);
        *width = *plen;
        return 1;
    }
    if (cp < 0x20 || cp == 0x7f) {
        static const char named[32] = {['\t'] = 't', ['\n'] = 'n', ['\r'] = 'r', [0x1b] = 'e'};
        if (cp < 0x20 && named[cp])
            *plen = (size_t)snprintf(piece, 12, "\\%c", named[cp]);
        else
            *plen = (size_t)snprintf(piece, 12, "\\x%02x", (unsigned)cp);
        *width = *plen;
        return 1;
    }
    if (cp >= 0x80 && IN(hostile, cp)) {
        *plen = (size_t)snprintf(piece, 12, "\\u%04X", (unsigned)cp);
        *width = *plen;
        return len;
    }
    memcpy(piece, s, len);
    *plen = len;
    *width = cp < 0x300 ? 1 : IN(zero_width, cp) ? 0 : IN(wide, cp) ? 2 : 1;
    return len;
}

size_t out_cell_text(const char *text, size_t n, size_t max, char *out, size_t cap)
{
    const unsigned char *s = (const unsigned char *)text;
    static const char ellipsis[] = "\xe2\x80\xa6"; /* U+2026, one column */
    char piece[12];
    size_t total = 0, used = 0, width = 0, plen, w;

    if (cap == 0)
        return 0;
    /* Does the whole text fit? Then nothing is cut. */
    for (size_t i = 0; i < n; total += w)
        i += next_piece(s + i, n - i, piece, &plen, &w);
    bool cut = total > max;
    size_t room = cut ? (max > 0 ? max - 1 : 0) : max;

    for (size_t i = 0; i < n;) {
        size_t step = next_piece(s + i, n - i, piece, &plen, &w);
        if (width + w > room || used + plen + sizeof ellipsis > cap) {
            cut = true;
            break;
        }
        memcpy(out + used, piece, plen);
        used += plen;
        width += w;
        i += step;
    }
    if (cut && max > 0 && used + sizeof ellipsis <= cap) {
        memcpy(out + used, ellipsis, sizeof ellipsis - 1);
        used += sizeof ellipsis - 1;
        width++;
    }
    out[used] = '\0';
    return width;
}

void out_write_text(FILE *f, const char *text, size_t n, bool lines)
{
    const unsigned char *s = (const unsigned char *)text;
    char piece[12];
    size_t plen, w;

    for (size_t i = 0; i < n;) {
        if (lines && (s[i] == '\n' || s[i] == '\t')) {
            fputc(s[i++], f);
            continue;
        }
        if (lines && s[i] == '\r' && i + 1 < n && s[i + 1] == '\n') {
            fputc('\n', f); /* a CRLF line end is a line end */
            i += 2;
            continue;
        }
        i += next_piece(s + i, n - i, piece, &plen, &w);
        fwrite(piece, 1, plen, f);
    }
}

size_t out_text_width(const char *text)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t n = strlen(text), width = 0, plen, w;
    char piece[12];

    for (size_t i = 0; i < n; width += w)
        i += next_piece(s + i, n - i, piece, &plen, &w);
    return width;
}

/* ---- times ----------------------------------------------------------------------------------- */

void out_relative_time(int64_t then_ms, int64_t now_ms, char *out, size_t cap)
{
    static const struct {
        int64_t seconds;
        const char *unit;
    } units[] = {{86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}};
    int64_t d = then_ms - now_ms;
    int64_t s = (d < 0 ? -d : d) / 1000;
    size_t u = 0;

    if (s == 0) {
        snprintf(out, cap, "just now");
        return;
    }
    while (s < units[u].seconds)
        u++;
    if (d < 0)
        snprintf(out, cap, "%lld %s ago", (long long)(s / units[u].seconds), units[u].unit);
    else
        snprintf(out, cap, "in %lld %s", (long long)(s / units[u].seconds), units[u].unit);
}

void out_duration_words(int64_t ms, char *out, size_t cap)
{
    if (ms < 0)
        ms = 0;
    if (ms < 1000)
        snprintf(out, cap, "%lld ms", (long long)ms);
    else if (ms < 10000)
        snprintf(out, cap, "%lld.%lld s", (long long)(ms / 1000), (long long)(ms % 1000 / 100));
    else if (ms < 60000)
        snprintf(out, cap, "%lld s", (long long)(ms / 1000));
    else if (ms < 3600000)
        snprintf(out, cap, "%lld m %lld s", (long long)(ms / 60000), (long long)(ms % 60000 / 1000));
    else
        snprintf(out, cap, "%lld h %lld m", (long long)(ms / 3600000), (long long)(ms % 3600000 / 60000));
}

/* ---- colour ---------------------------------------------------------------------------------- */

bool out_colour_wanted(int fd, const char *no_color)
{
    return isatty(fd) && !(no_color && no_color[0]);
}

const char *out_status_colour(const char *word)
{
    static const struct {
        const char *word;
        const char *colour;
    } words[] = {
        {"delivered", "32"}, {"processed", "32"}, {"closed", "32"},    {"synced", "32"},     {"resolved", "32"},
        {"created", "32"},   {"pending", "33"},   {"retrying", "33"},  {"deferred", "33"},   {"half_open", "33"},
        {"delayed", "33"},   {"in_flight", "33"}, {"updated", "33"},   {"dead", "31"},       {"failed", "31"},
        {"quarantined", "31"}, {"open", "31"},    {"skipped", "31"},   {"rejected", "31"},   {"disabled", "31"},
    };

    for (size_t i = 0; word && i < sizeof words / sizeof words[0]; i++) {
        if (strcmp(words[i].word, word) == 0)
            return words[i].colour;
    }
    return NULL;
}
