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

static void log_vwrite(enum log_level l, const char *part, const char *fmt, va_list ap)
{
    char ts[RFC3339_LEN];
    char msg[2048];

    if (l < min_level)
        return;
    rfc3339_format(clock_now_ms(), ts);
    vsnprintf(msg, sizeof msg, fmt, ap);
    /* One fprintf per record keeps lines whole across threads. */
    fprintf(stderr, "%s %-5s [%s] %s\n", ts, level_names[l], part, msg);
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
    lim->interval_ms = lim->interval_ms == 0 ? 1000 : lim->interval_ms * 2;
    if (lim->interval_ms > 60000)
        lim->interval_ms = 60000;
    lim->next_at_ms = now + lim->interval_ms;
}

void log_limiter_reset(struct log_limiter *lim, const char *part, const char *what)
{
    if (lim->next_at_ms != 0)
        log_write(LOG_INFO, part, "%s recovered (%llu similar messages suppressed)", what,
                  (unsigned long long)lim->suppressed);
    memset(lim, 0, sizeof *lim);
}
