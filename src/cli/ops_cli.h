/*
 * What the replay and token commands share: an API call whose answer is
 * parsed, a field as text, and a simple aligned table or key/value block
 * (to be switched to the shared table printer when it lands).
 */
#ifndef HOOKD_CLI_OPS_CLI_H
#define HOOKD_CLI_OPS_CLI_H
#include <jansson.h>
#include <stddef.h>

#include "cli/client.h"

/* Calls the API; on a 2xx *out is the parsed answer (caller decrefs), else the error is printed. */
int ops_call_json(const struct client *c, const char *method, const char *path, const json_t *body, json_t **out);
/* A member as text: a string, a number, true/false, or "-" (buf holds numbers). */
const char *ops_text(const json_t *o, const char *key, char buf[32]);
/* An aligned table of the rows' keys, headed by columns (n of each). */
void ops_table(const json_t *rows, const char *const *columns, const char *const *keys, size_t n);
/* "key   value" lines for the given keys (NULL-terminated). */
void ops_record(const json_t *o, const char *const *keys);
#endif
