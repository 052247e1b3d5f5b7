/*
 * Time text: RFC 3339 UTC with milliseconds (JSON, logs) and the three HTTP
 * date forms (Retry-After). Pure calendar arithmetic: no locale, no TZ.
 */
#include "core/timefmt.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "hookd.h"

#define MS_PER_DAY INT64_C(86400000)

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    int64_t era, yoe, doy, doe;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    int64_t era, doe, yoe, doy, mp;

    z += 719468;
    era = (z >= 0 ? z : z - 146096) / 146097;
    doe = z - era * 146097;
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static int days_in_month(int64_t y, int m)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

    return m == 2 && leap ? 29 : days[m - 1];
}

void rfc3339_format(int64_t ms, char out[RFC3339_LEN])
{
    int64_t days = ms / MS_PER_DAY, rem = ms % MS_PER_DAY, y;
    int m, d;

    if (rem < 0) {
        rem += MS_PER_DAY;
        days--;
    }
    civil_from_days(days, &y, &m, &d);
    if (y < 0 || y > 9999) {
        snprintf(out, RFC3339_LEN, "%04lld-%02d-%02dT%02d:%02d:%02d.%03dZ", (long long)y, m, d,
                 (int)(rem / 3600000), (int)(rem / 60000 % 60), (int)(rem / 1000 % 60), (int)(rem % 1000));
        return;
    }
    /* Digit by digit: every envelope carries one, and snprintf's seven conversions cost more than the rest. */
    const int fields[] = {(int)y, m, d, (int)(rem / 3600000), (int)(rem / 60000 % 60), (int)(rem / 1000 % 60),
                          (int)(rem % 1000)};
    static const int widths[] = {4, 2, 2, 2, 2, 2, 3};
    static const char after[] = "--T::.Z";
    char *p = out;
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
        for (int w = widths[i], v = fields[i]; w > 0; w--, v /= 10)
            p[w - 1] = (char)('0' + v % 10);
        p += widths[i];
        *p++ = after[i];
    }
    *p = '\0';
}

/* A small cursor over the text being parsed; every helper fails without moving on mismatch. */
struct cursor {
    const char *p;
};

static bool take_lit(struct cursor *c, const char *lit)
{
    size_t n = strlen(lit);

    if (strncmp(c->p, lit, n) != 0)
        return false;
    c->p += n;
    return true;
}

static bool take_digits(struct cursor *c, int n, int *out)
{
    int v = 0;

    for (int i = 0; i < n; i++) {
        if (c->p[i] < '0' || c->p[i] > '9')
            return false;
        v = v * 10 + (c->p[i] - '0');
    }
    c->p += n;
    *out = v;
    return true;
}

/* Matches one of names (case-insensitively) and stores its index. */
static bool take_name(struct cursor *c, const char *const *names, int n_names, int *idx)
{
    for (int i = 0; i < n_names; i++) {
        size_t len = strlen(names[i]);
        if (strncasecmp(c->p, names[i], len) == 0) {
            c->p += len;
            *idx = i;
            return true;
        }
    }
    return false;
}

struct civil_time {
    int64_t year;
    int month, day, hour, min, sec, ms;
};

/* Validates ranges and converts to unix ms (leap second 60 rolls into the next minute). */
static int civil_to_ms(const struct civil_time *t, int64_t *ms_out)
{
    if (t->month < 1 || t->month > 12 || t->day < 1 || t->day > days_in_month(t->year, t->month) || t->hour > 23 ||
        t->min > 59 || t->sec > 60)
        return HOOKD_EINVAL;
    *ms_out = days_from_civil(t->year, t->month, t->day) * MS_PER_DAY +
              ((int64_t)t->hour * 3600 + t->min * 60 + t->sec) * 1000 + t->ms;
    return 0;
}

static bool take_hms(struct cursor *c, struct civil_time *t)
{
    return take_digits(c, 2, &t->hour) && take_lit(c, ":") && take_digits(c, 2, &t->min) && take_lit(c, ":") &&
           take_digits(c, 2, &t->sec);
}

int rfc3339_parse(const char *s, int64_t *ms_out)
{
    struct cursor c = {s};
    struct civil_time t = {0};
    int year, off_h = 0, off_m = 0, sign = 0;
    int64_t ms;

    if (s == NULL)
        return HOOKD_EINVAL;
    if (!take_digits(&c, 4, &year) || !take_lit(&c, "-") || !take_digits(&c, 2, &t.month) || !take_lit(&c, "-") ||
        !take_digits(&c, 2, &t.day))
        return HOOKD_EINVAL;
    t.year = year;
    if (*c.p != 'T' && *c.p != 't' && *c.p != ' ')
        return HOOKD_EINVAL;
    c.p++;
    if (!take_hms(&c, &t))
        return HOOKD_EINVAL;
    if (*c.p == '.') {
        int digits = 0;
        c.p++;
        /* Milliseconds from the first three digits; finer digits are truncated. */
        while (*c.p >= '0' && *c.p <= '9') {
            if (digits < 3)
                t.ms = t.ms * 10 + (*c.p - '0');
            digits++;
            c.p++;
        }
        if (digits == 0)
            return HOOKD_EINVAL;
        for (int i = digits; i < 3; i++)
            t.ms *= 10;
    }
    if (*c.p == 'Z' || *c.p == 'z') {
        c.p++;
    } else if (*c.p == '+' || *c.p == '-') {
        sign = *c.p == '+' ? 1 : -1;
        c.p++;
        if (!take_digits(&c, 2, &off_h) || !take_lit(&c, ":") || !take_digits(&c, 2, &off_m) || off_h > 23 ||
            off_m > 59)
            return HOOKD_EINVAL;
    } else {
        return HOOKD_EINVAL;
    }
    if (*c.p != '\0' || civil_to_ms(&t, &ms) != 0)
        return HOOKD_EINVAL;
    /* Local time = UTC + offset, so UTC = local - offset. */
    *ms_out = ms - (int64_t)sign * ((int64_t)off_h * 3600 + off_m * 60) * 1000;
    return 0;
}

static const char *const month_names[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
static const char *const wkday_short[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
static const char *const wkday_long[] = {"Monday", "Tuesday", "Wednesday", "Thursday",
                                         "Friday", "Saturday", "Sunday"};

static bool take_month(struct cursor *c, struct civil_time *t)
{
    int idx;

    if (!take_name(c, month_names, 12, &idx))
        return false;
    t->month = idx + 1;
    return true;
}

/* "Sun, 06 Nov 1994 08:49:37 GMT" */
static bool parse_imf_fixdate(struct cursor *c, struct civil_time *t)
{
    int idx, year;

    if (!take_name(c, wkday_short, 7, &idx) || !take_lit(c, ", ") || !take_digits(c, 2, &t->day) ||
        !take_lit(c, " ") || !take_month(c, t) || !take_lit(c, " ") || !take_digits(c, 4, &year) ||
        !take_lit(c, " ") || !take_hms(c, t) || !take_lit(c, " GMT"))
        return false;
    t->year = year;
    return true;
}

/* "Sunday, 06-Nov-94 08:49:37 GMT"; two-digit years below 70 are 20xx. */
static bool parse_rfc850(struct cursor *c, struct civil_time *t)
{
    int idx, yy;

    if (!take_name(c, wkday_long, 7, &idx) || !take_lit(c, ", ") || !take_digits(c, 2, &t->day) ||
        !take_lit(c, "-") || !take_month(c, t) || !take_lit(c, "-") || !take_digits(c, 2, &yy) ||
        !take_lit(c, " ") || !take_hms(c, t) || !take_lit(c, " GMT"))
        return false;
    t->year = yy < 70 ? 2000 + yy : 1900 + yy;
    return true;
}

/* "Sun Nov  6 08:49:37 1994" */
static bool parse_asctime(struct cursor *c, struct civil_time *t)
{
    int idx, year;

    if (!take_name(c, wkday_short, 7, &idx) || !take_lit(c, " ") || !take_month(c, t) || !take_lit(c, " "))
        return false;
    if (*c->p == ' ') {
        c->p++;
        if (!take_digits(c, 1, &t->day))
            return false;
    } else if (!take_digits(c, 2, &t->day)) {
        return false;
    }
    if (!take_lit(c, " ") || !take_hms(c, t) || !take_lit(c, " ") || !take_digits(c, 4, &year))
        return false;
    t->year = year;
    return true;
}

int http_date_parse(const char *s, int64_t *ms_out)
{
    static bool (*const forms[])(struct cursor *, struct civil_time *) = {parse_imf_fixdate, parse_rfc850,
                                                                           parse_asctime};
    size_t n;

    if (s == NULL)
        return HOOKD_EINVAL;
    while (*s == ' ' || *s == '\t')
        s++;
    n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        struct cursor c = {s};
        struct civil_time t = {0};
        if (forms[i](&c, &t) && (size_t)(c.p - s) == n)
            return civil_to_ms(&t, ms_out);
    }
    return HOOKD_EINVAL;
}
