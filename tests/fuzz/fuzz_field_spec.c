/* Fuzzes the source field-spec parser ("/pointer" or "header:NAME"). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/field_spec.h"
#include "fuzz_common.h"
#include "hookd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_input in;
    struct field_spec f;
    const char *problem = NULL;

    if (fuzz_split(&in, data, size, 1) != 0)
        return 0;
    int rc = field_spec_parse(in.field[0], &f, &problem);
    if (rc == 0) {
        if (problem != NULL)
            abort();
        if (f.kind == FIELD_POINTER && (json_pointer_check(f.text, NULL) != 0 || strcmp(f.text, in.field[0]) != 0))
            abort();
        if (f.kind == FIELD_HEADER && !http_token_is_valid(f.text, strlen(f.text), FIELD_HEADER_NAME_MAX))
            abort();
    } else if (rc != HOOKD_EINVAL || problem == NULL) {
        abort();
    }
    free(in.copy);
    return 0;
}
