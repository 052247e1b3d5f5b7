/*
 * Logging to stderr: one line per record, "2026-11-29T23:55:06.123Z level [part] message".
 * Secrets must never be passed here; log ids and URLs' hosts, not keys or tokens.
 * Control characters in a message are written as \xNN, so a record is always one line.
 */
#ifndef HOOKD_LOG_H
#define HOOKD_LOG_H
#include <stdint.h>

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

void log_set_level(enum log_level l);
int log_level_parse(const char *s, enum log_level *out);
void log_write(enum log_level l, const char *part, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/*
 * Rate-limited error logging for conditions that can repeat every loop turn
 * (store down, endpoint unreachable): logs the first occurrence, then at most
 * once per interval, starting at first_ms (0: 1 s) and doubling up to 60 s,
 * with a count of suppressed repeats. first_ms is a setting: a reset keeps it.
 */
struct log_limiter {
    int64_t next_at_ms;
    int64_t interval_ms;
    uint64_t suppressed;
    int64_t first_ms;
};
void log_limited(struct log_limiter *lim, enum log_level l, const char *part, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The condition cleared: log recovery if anything was logged, reset. */
void log_limiter_reset(struct log_limiter *lim, const char *part, const char *what);

#define log_debug(part, ...) log_write(LOG_DEBUG, part, __VA_ARGS__)
#define log_info(part, ...) log_write(LOG_INFO, part, __VA_ARGS__)
#define log_warn(part, ...) log_write(LOG_WARN, part, __VA_ARGS__)
#define log_error(part, ...) log_write(LOG_ERROR, part, __VA_ARGS__)
#endif
