/* Event-type filters of endpoints: exact names, "order.*" (any type below "order."), and "*". */
#ifndef HOOKD_CORE_FILTER_H
#define HOOKD_CORE_FILTER_H
#include <stdbool.h>
#include <stddef.h>

bool event_type_matches(const char *pattern, const char *type);
/* An empty list matches every type but hookd's own (hookd.*), which only patterns starting "hookd." match. */
bool event_type_matches_any(const char *const *patterns, size_t n, const char *type);
/* Valid event type or pattern: 1..128 chars of [A-Za-z0-9_.-], a pattern may end in ".*" or be "*". */
bool event_type_is_valid(const char *type, bool allow_pattern);
#endif
