/* Time text: RFC 3339 UTC with milliseconds for JSON, HTTP dates for Retry-After. */
#ifndef HOOKD_CORE_TIMEFMT_H
#define HOOKD_CORE_TIMEFMT_H
#include <stdint.h>

#define RFC3339_LEN 32
/* "2026-11-29T23:55:06.123Z"; out needs RFC3339_LEN bytes. */
void rfc3339_format(int64_t ms, char out[RFC3339_LEN]);
/* Accepts "…Z" and "…±hh:mm", fraction optional. */
__attribute__((warn_unused_result)) int rfc3339_parse(const char *s, int64_t *ms_out);
/* IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT" (and the two obsolete forms). */
__attribute__((warn_unused_result)) int http_date_parse(const char *s, int64_t *ms_out);
#endif
