/* Wall and monotonic clocks in milliseconds; tests may pin the wall clock. */
#ifndef HOOKD_CORE_CLOCK_H
#define HOOKD_CORE_CLOCK_H
#include <stdint.h>

int64_t clock_now_ms(void);  /* unix epoch milliseconds (or the pinned value) */
int64_t clock_mono_ms(void); /* CLOCK_MONOTONIC milliseconds */
void clock_pin_ms(int64_t ms); /* tests only: 0 unpins */
#endif
