/*
 * What the fuzz targets share: splitting the input into NUL-terminated
 * fields at '\n', and a header lookup over a small fixed table.
 */
#ifndef HOOKD_FUZZ_COMMON_H
#define HOOKD_FUZZ_COMMON_H
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* libFuzzer's entry point, defined by each target. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_FIELDS 6

/* Up to FUZZ_FIELDS-1 '\n'-terminated fields, then the rest (the body, which may hold '\n' and NUL). */
struct fuzz_input {
    char *copy;
    const char *field[FUZZ_FIELDS];
    size_t len[FUZZ_FIELDS];
};

static inline int fuzz_split(struct fuzz_input *in, const unsigned char *data, size_t size, size_t n_fields)
{
    size_t at = 0;

    in->copy = malloc(size + 1);
    if (in->copy == NULL)
        return -1;
    memcpy(in->copy, data, size);
    in->copy[size] = '\0';
    for (size_t i = 0; i < n_fields; i++) {
        char *nl = i + 1 < n_fields ? memchr(in->copy + at, '\n', size - at) : NULL;
        size_t end = nl != NULL ? (size_t)(nl - in->copy) : size;
        in->field[i] = in->copy + at;
        in->len[i] = end - at;
        if (nl != NULL)
            *nl = '\0';
        at = nl != NULL ? end + 1 : size;
    }
    return 0;
}

struct fuzz_headers {
    const char *names[8];
    const char *values[8];
};

static inline const char *fuzz_header(void *ctx, const char *name)
{
    const struct fuzz_headers *h = ctx;

    for (size_t i = 0; i < 8 && h->names[i] != NULL; i++) {
        if (strcasecmp(h->names[i], name) == 0)
            return h->values[i];
    }
    return NULL;
}
#endif
