/*
 * Latency histograms of the health figures: log-scale buckets about 19 %
 * wide (four per doubling), so a day of attempts fits in a few dozen counters
 * per endpoint and minute, and quantiles estimated from them.
 */
#ifndef HOOKD_CORE_LATENCY_H
#define HOOKD_CORE_LATENCY_H
#include <stddef.h>
#include <stdint.h>

/* Bucket 0 holds 0 ms; bucket b >= 1 holds [2^((b-1)/4), 2^(b/4)) ms; the last one everything above. */
int latency_bucket(int64_t ms, int n_buckets);
/* The lower and upper bound of bucket b in ms (0 and 0 for bucket 0). */
double latency_bucket_low(int b);
double latency_bucket_high(int b);
/*
 * The q-quantile (0 < q <= 1) of the durations counted in counts[0..n), in
 * ms, interpolated linearly inside the bucket that holds it; -1 when the
 * counts are all 0.
 */
int64_t latency_quantile(const int64_t *counts, size_t n, double q);
#endif
