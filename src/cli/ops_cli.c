/*
 * Shared output of `hookd replay` and `hookd tokens`: parsed API answers,
 * aligned tables and key/value blocks.
 */
#include "cli/ops_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

#define CELL_MAX 48 /* longer values are cut (--json has them whole) */

int ops_call_json(const struct client *c, const char *method, const char *path, const json_t *body, json_t **out)
{
    char err[512], *text = NULL, *response = NULL;
    long status = 0;
    int rc;

    *out = NULL;
    if (body && !(text = json_dumps(body, JSON_COMPACT))) {
        fprintf(stderr, "hookd: out of memory\n");
        return CLI_EXIT_USAGE;
    }
    rc = client_request(c, method, path, text, NULL, &status, &response, err, sizeof err);
    free(text);
    if (rc != 0) {
        fprintf(stderr, "hookd: %s\n", err);
        return CLI_EXIT_UNREACHABLE;
    }
    if (status < 200 || status >= 300) {
        json_t *e = json_loads(response, 0, NULL);
        json_t *er = json_object_get(e, "error");
        fprintf(stderr, "hookd: %ld %s: %s\n", status, json_string_value(json_object_get(er, "code")) ?: "error",
                json_string_value(json_object_get(er, "message")) ?: response);
        json_decref(e);
        free(response);
        return CLI_EXIT_API;
    }
    *out = json_loads(response, 0, NULL);
    free(response);
    if (!*out) {
        fprintf(stderr, "hookd: the answer is not JSON\n");
        return CLI_EXIT_API;
    }
    return CLI_EXIT_OK;
}

const char *ops_text(const json_t *o, const char *key, char buf[32])
{
    const json_t *v = json_object_get(o, key);

    if (json_is_string(v))
        return json_string_value(v);
    if (json_is_integer(v)) {
        snprintf(buf, 32, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return buf;
    }
    if (json_is_boolean(v))
        return json_is_true(v) ? "true" : "false";
    return "-";
}

static void cell(char out[CELL_MAX + 4], const char *text)
{
    if (strlen(text) <= CELL_MAX)
        snprintf(out, CELL_MAX + 4, "%s", text);
    else
        snprintf(out, CELL_MAX + 4, "%.*s...", CELL_MAX - 3, text);
}

void ops_table(const json_t *rows, const char *const *columns, const char *const *keys, size_t n)
{
    size_t width[16], i;
    char buf[CELL_MAX + 4], num[32];
    json_t *row;

    if (n > 16)
        n = 16;
    for (size_t k = 0; k < n; k++)
        width[k] = strlen(columns[k]);
    json_array_foreach(rows, i, row) {
        for (size_t k = 0; k < n; k++) {
            cell(buf, ops_text(row, keys[k], num));
            if (strlen(buf) > width[k])
                width[k] = strlen(buf);
        }
    }
    for (size_t k = 0; k < n; k++)
        printf("%-*s%s", k + 1 < n ? (int)width[k] : 0, columns[k], k + 1 < n ? "  " : "\n");
    json_array_foreach(rows, i, row) {
        for (size_t k = 0; k < n; k++) {
            cell(buf, ops_text(row, keys[k], num));
            printf("%-*s%s", k + 1 < n ? (int)width[k] : 0, buf, k + 1 < n ? "  " : "\n");
        }
    }
}

void ops_record(const json_t *o, const char *const *keys)
{
    char num[32];

    for (size_t i = 0; keys[i]; i++)
        printf("%-14s %s\n", keys[i], ops_text(o, keys[i], num));
}
