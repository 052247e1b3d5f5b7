/* Logging to stderr with levels and rate-limited repeats. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/clock.h"
#include "core/timefmt.h"

static enum log_level min_level = LOG_INFO;
static const char *const level_names[] = {"debug", "info", "warn", "error"};

void log_set_level(enum log_level l) { min_level = l; }

int log_level_parse(const char *s, enum log_level *out)
{
    for (int i = 0; i <= LOG_ERROR; i++) {
        if (strcasecmp(s, level_names[i]) == 0) {
            *out = (enum log_level)i;
            return 0;
        }
    }
    return -2;
}

/*
 * Control characters (C0 and DEL) become \xNN: whatever a message quotes (an
 * id from the outbox, a peer's error text) cannot end its line, start a
 * forged one or drive a terminal. The output is cut to fit out.
 */
static void log_escape(const char *in, char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;

    for (const unsigned char *p = (const unsigned char *)in; *p != '\0' && o + 1 < cap; p++) {
        if (*p >= 0x20 && *p != 0x7f) {
            out[o++] = (char)*p;
        } else if (o + 4 < cap) {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 0xf];
        } else {
            break;
        }
    }
    out[o] = '\0';
}

static void log_vwrite(enum log_level l, const char *part, const char *fmt, va_list ap)
{
    char ts[RFC3339_LEN];
    char msg[2048], line[2048];

    if (l < min_level)
        return;
    rfc3339_format(clock_now_ms(), ts);
    vsnprintf(msg, sizeof msg, fmt, ap);
    log_escape(msg, line, sizeof line);
    /* One fprintf per record keeps lines whole across threads. */
    fprintf(stderr, "%s %-5s [%s] %s\n", ts, level_names[l], part, line);
}

void log_write(enum log_level l, const char *part, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vwrite(l, part, fmt, ap);
    va_end(ap);
}

void log_limited(struct log_limiter *lim, enum log_level l, const char *part, const char *fmt, ...)
{
    int64_t now = clock_mono_ms();
    va_list ap;

    if (lim->next_at_ms != 0 && now < lim->next_at_ms) {
        lim->suppressed++;
        return;
    }
    if (lim->suppressed > 0)
        log_write(l, part, "(%llu similar messages suppressed)", (unsigned long long)lim->suppressed);
    va_start(ap, fmt);
    log_vwrite(l, part, fmt, ap);
    va_end(ap);
    lim->suppressed = 0;
    lim->interval_ms = lim->interval_ms == 0 ? (lim->first_ms > 0 ? lim->first_ms : 1000) : lim->interval_ms * 2;
    if (lim->interval_ms > 60000)
        lim->interval_ms = 60000;
    lim->next_at_ms = now + lim->interval_ms;
}

void log_limiter_reset(struct log_limiter *lim, const char *part, const char *what)
{
    if (lim->next_at_ms != 0)
        log_write(LOG_INFO, part, "%s recovered (%llu similar messages suppressed)", what,
                  (unsigned long long)lim->suppressed);
    *lim = (struct log_limiter){.first_ms = lim->first_ms};
}
