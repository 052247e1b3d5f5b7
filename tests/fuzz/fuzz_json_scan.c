/*
 * Fuzzes the plain-JSON scanner against jansson: input is "pointer\npointer\ntext".
 * Whatever json_scan decides, jansson parses (JSON_DECODE_ANY), and at each
 * pointer json_pointer_get finds the same kind of value with the same text
 * (an integer as jansson prints it, a string's bytes), or nothing where the
 * scan found nothing.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/json_pointer.h"
#include "core/json_scan.h"
#include "fuzz_common.h"
#include "hookd.h"

static void agree(const json_t *doc, const struct json_scan_target *t)
{
    json_t *v = NULL;
    char number[32];
    int rc = json_pointer_get(doc, t->pointer, &v, NULL);

    if (rc != 0) {
        if (rc != HOOKD_ENOTFOUND || t->kind != JSON_SCAN_ABSENT)
            abort();
        return;
    }
    if (json_is_null(v)) {
        if (t->kind != JSON_SCAN_NULL)
            abort();
    } else if (json_is_integer(v)) {
        int k = snprintf(number, sizeof number, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        if (t->kind != JSON_SCAN_INTEGER || t->len != (size_t)k || memcmp(t->text, number, t->len) != 0)
            abort();
    } else if (json_is_string(v)) {
        if (t->kind != JSON_SCAN_STRING || t->len != json_string_length(v) ||
            memcmp(t->text, json_string_value(v), t->len) != 0)
            abort();
    } else if (t->kind != JSON_SCAN_OTHER) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_input in;
    struct json_scan_target t[2];

    if (fuzz_split(&in, data, size, 3) != 0)
        return 0;
    t[0] = (struct json_scan_target){.pointer = in.field[0]};
    t[1] = (struct json_scan_target){.pointer = in.field[1]};
    if (json_scan(in.field[2], in.len[2], t, 2)) {
        json_t *doc = json_loadb(in.field[2], in.len[2], JSON_DECODE_ANY, NULL);
        if (doc == NULL)
            abort();
        agree(doc, &t[0]);
        agree(doc, &t[1]);
        json_decref(doc);
    }
    free(in.copy);
    return 0;
}
