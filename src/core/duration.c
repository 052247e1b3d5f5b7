/*
 * Duration text of config and API ("250ms", "10s", "2m", "24h", "1d"; a bare
 * number is seconds) to and from int64 milliseconds.
 */
#include "core/duration.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "hookd.h"

struct duration_unit {
    const char *suffix;
    int64_t ms;
};

/* Largest first: duration_format picks the first unit that divides exactly. */
static const struct duration_unit duration_units[] = {
    {"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}, {"ms", 1},
};
#define N_UNITS (sizeof duration_units / sizeof duration_units[0])

static bool is_space(char c) { return c == ' ' || c == '\t'; }

/* Parses s[0..n) with no surrounding blanks. */
static int duration_parse_span(const char *s, size_t n, int64_t *ms_out)
{
    uint64_t value = 0;
    size_t i = 0;
    int64_t mult = 1000; /* a bare number is seconds */

    while (i < n && s[i] >= '0' && s[i] <= '9') {
        uint64_t digit = (uint64_t)(s[i] - '0');
        if (value > ((uint64_t)INT64_MAX - digit) / 10)
            return HOOKD_EINVAL;
        value = value * 10 + digit;
        i++;
    }
    if (i == 0)
        return HOOKD_EINVAL;
    if (i < n) {
        size_t k;
        for (k = 0; k < N_UNITS; k++) {
            size_t ul = strlen(duration_units[k].suffix);
            if (n - i == ul && memcmp(s + i, duration_units[k].suffix, ul) == 0)
                break;
        }
        if (k == N_UNITS)
            return HOOKD_EINVAL;
        mult = duration_units[k].ms;
    }
    if (value > (uint64_t)(INT64_MAX / mult))
        return HOOKD_EINVAL;
    *ms_out = (int64_t)value * mult;
    return 0;
}

/* Narrows [*s, *s+*n) to drop leading and trailing blanks. */
static void trim_span(const char **s, size_t *n)
{
    while (*n > 0 && is_space(**s)) {
        (*s)++;
        (*n)--;
    }
    while (*n > 0 && is_space((*s)[*n - 1]))
        (*n)--;
}

int duration_parse(const char *s, int64_t *ms_out)
{
    size_t n;

    if (s == NULL)
        return HOOKD_EINVAL;
    n = strlen(s);
    trim_span(&s, &n);
    return duration_parse_span(s, n, ms_out);
}

int duration_list_parse(const char *s, int64_t *out, size_t max, size_t *n_out)
{
    size_t count = 0;
    const char *p = s;

    if (s == NULL)
        return HOOKD_EINVAL;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
        const char *item = p;
        int64_t ms;

        trim_span(&item, &len);
        if (count >= max || duration_parse_span(item, len, &ms) != 0)
            return HOOKD_EINVAL;
        out[count++] = ms;
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    *n_out = count;
    return 0;
}

void duration_format(int64_t ms, char out[24])
{
    uint64_t mag = ms < 0 ? (uint64_t)0 - (uint64_t)ms : (uint64_t)ms;
    size_t k = 0;

    if (mag == 0) {
        snprintf(out, 24, "0s");
        return;
    }
    while (k < N_UNITS - 1 && mag % (uint64_t)duration_units[k].ms != 0)
        k++;
    snprintf(out, 24, "%s%" PRIu64 "%s", ms < 0 ? "-" : "", mag / (uint64_t)duration_units[k].ms,
             duration_units[k].suffix);
}
