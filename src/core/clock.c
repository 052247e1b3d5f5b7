/*
 * Wall and monotonic clocks in milliseconds. Tests pin the wall clock so that
 * ids, timestamps and retry decisions are reproducible.
 */
#include "core/clock.h"

#include <stdatomic.h>
#include <time.h>

/* 0 means "not pinned"; read by every thread, written by tests. */
static _Atomic int64_t pinned_ms;

static int64_t timespec_ms(clockid_t id)
{
    struct timespec ts;

    /* clock_gettime cannot fail for these clock ids on Linux. */
    (void)clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t clock_now_ms(void)
{
    int64_t pin = atomic_load_explicit(&pinned_ms, memory_order_relaxed);

    return pin != 0 ? pin : timespec_ms(CLOCK_REALTIME);
}

int64_t clock_mono_ms(void) { return timespec_ms(CLOCK_MONOTONIC); }

void clock_pin_ms(int64_t ms) { atomic_store_explicit(&pinned_ms, ms, memory_order_relaxed); }
