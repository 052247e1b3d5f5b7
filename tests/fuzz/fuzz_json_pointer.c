/*
 * Fuzzes the JSON Pointer extractor: input is "pointer\ndocument". A pointer
 * that passes json_pointer_check never fails get as malformed unless an array
 * step is not an index; a found value is inside the document.
 */
#include <stdint.h>
#include <stdlib.h>

#include <jansson.h>

#include "core/json_pointer.h"
#include "fuzz_common.h"
#include "hookd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_input in;
    json_t *doc, *v = NULL;
    const char *problem = NULL;

    if (fuzz_split(&in, data, size, 2) != 0)
        return 0;
    int checked = json_pointer_check(in.field[0], &problem);
    if ((checked == 0) != (problem == NULL))
        abort();
    doc = json_loadb(in.field[1], in.len[1], JSON_DECODE_ANY, NULL);
    if (doc != NULL) {
        int rc = json_pointer_get(doc, in.field[0], &v, &problem);
        if (rc == 0 && (v == NULL || problem != NULL || checked != 0))
            abort();
        if (rc != 0 && (rc != HOOKD_EINVAL && rc != HOOKD_ENOTFOUND))
            abort();
        if (rc == HOOKD_ENOTFOUND && checked != 0)
            abort();
        if (in.field[0][0] == '\0' && (rc != 0 || v != doc))
            abort();
        json_decref(doc);
    }
    free(in.copy);
    return 0;
}
