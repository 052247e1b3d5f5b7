/* Durations in config and API: "250ms", "10s", "2m", "24h", "1d"; a bare number is seconds. */
#ifndef HOOKD_CORE_DURATION_H
#define HOOKD_CORE_DURATION_H
#include <stddef.h>
#include <stdint.h>

__attribute__((warn_unused_result)) int duration_parse(const char *s, int64_t *ms_out);
/* Comma-separated list, e.g. "10s,30s,2m". Up to max items; *n_out receives the count. */
__attribute__((warn_unused_result)) int duration_list_parse(const char *s, int64_t *out, size_t max, size_t *n_out);
/* Shortest exact spelling ("1500ms", "30s", "2m", "1h"); out needs 24 bytes. */
void duration_format(int64_t ms, char out[24]);
#endif
