/* Log-scale latency buckets and quantiles over them (core/latency.h). */
#include "core/latency.h"

#include <math.h>

double latency_bucket_low(int b) { return b <= 0 ? 0.0 : exp2((double)(b - 1) / 4.0); }
double latency_bucket_high(int b) { return b <= 0 ? 0.0 : exp2((double)b / 4.0); }

int latency_bucket(int64_t ms, int n_buckets)
{
    int b;

    if (ms <= 0 || n_buckets < 2)
        return 0;
    /* floor(4 log2 ms) + 1, corrected for rounding at the exact bounds. */
    b = (int)floor(4.0 * log2((double)ms)) + 1;
    while (b > 1 && latency_bucket_low(b) > (double)ms)
        b--;
    while (latency_bucket_high(b) <= (double)ms)
        b++;
    return b < n_buckets ? b : n_buckets - 1;
}

int64_t latency_quantile(const int64_t *counts, size_t n, double q)
{
    int64_t total = 0, below = 0;
    double rank;

    for (size_t i = 0; i < n; i++)
        total += counts[i] > 0 ? counts[i] : 0;
    if (total == 0)
        return -1;
    if (q <= 0.0)
        q = 0.0;
    if (q > 1.0)
        q = 1.0;
    rank = q * (double)total;
    for (size_t i = 0; i < n; i++) {
        int64_t c = counts[i] > 0 ? counts[i] : 0;
        if (c > 0 && (double)(below + c) >= rank) {
            double lo = latency_bucket_low((int)i), hi = latency_bucket_high((int)i);
            double f = ((double)rank - (double)below) / (double)c;
            return (int64_t)llround(lo + (hi - lo) * f);
        }
        below += c;
    }
    return (int64_t)llround(latency_bucket_high((int)n - 1));
}
