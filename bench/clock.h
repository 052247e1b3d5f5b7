/*
 * The monotonic clock every part of loadgen times with (commits, arrivals, deadlines), and a
 * sleep that survives signals.
 */
#ifndef LOADGEN_CLOCK_H
#define LOADGEN_CLOCK_H

#include <errno.h>
#include <stdint.h>
#include <time.h>

#define NS_PER_MS INT64_C(1000000)
#define NS_PER_S INT64_C(1000000000)

/* CLOCK_MONOTONIC in nanoseconds. */
static inline int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

static inline void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * NS_PER_MS};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

#endif
