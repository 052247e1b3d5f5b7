/*
 * libFuzzer target for the HTTP/1.1 request parser: the input is fed as one
 * request, whole and then in pieces whose sizes come from its first byte; both
 * must reach the same outcome, and every offset the parser reports stays in
 * bounds. Built by `make fuzz-build` (its own rule: it compiles src/net/http_parse.c in).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "net/http_parse.h"

/* Feeds raw[0..n) step bytes at a time; returns the outcome (status, or 1 when parsed, 0 incomplete). */
static int run(const uint8_t *raw, size_t n, size_t step, size_t *consumed, size_t *body_len)
{
    char *buf = malloc(n + 1);
    struct http_parser p;
    size_t have = 0, pos = 0;
    int rc, outcome = 0;

    if (!buf)
        return -1;
    *consumed = *body_len = 0;
    http_parse_init(&p);
    for (;;) {
        size_t add = n - have < step ? n - have : step;
        memcpy(buf + have, raw + have, add);
        have += add;
        rc = http_parse_head(&p, buf, have);
        if (rc != HTTP_PARSE_MORE || have == n)
            break;
    }
    if (rc == HTTP_PARSE_ERROR) {
        outcome = p.status;
        goto out;
    }
    if (rc != HTTP_PARSE_DONE)
        goto out;
    if (p.head_len > have || p.method >= p.head_len || p.target >= p.head_len)
        abort();
    for (size_t i = 0; i < p.n_fields; i++)
        if (p.fields[i].name >= p.head_len || p.fields[i].value >= p.head_len)
            abort();
    pos = p.head_len;
    for (;;) {
        size_t used, len;
        const char *d;
        rc = http_parse_body(&p, buf + pos, have - pos, &used, &d, &len);
        if (used > have - pos || (d && (d < buf + pos || d + len > buf + have)))
            abort();
        pos += used;
        *body_len += len;
        if (rc == HTTP_PARSE_ERROR) {
            outcome = p.status;
            goto out;
        }
        if (rc == HTTP_PARSE_DONE) {
            outcome = 1;
            *consumed = pos;
            goto out;
        }
        if (rc == HTTP_PARSE_MORE && used == 0) {
            if (have == n)
                goto out;
            size_t add = n - have < step ? n - have : step;
            memcpy(buf + have, raw + have, add);
            have += add;
        }
    }
out:
    free(buf);
    return outcome;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t step = (size_t)data[0] % 17 + 1;
    size_t c1, b1, c2, b2;
    int whole = run(data + 1, size - 1, size, &c1, &b1);
    int split = run(data + 1, size - 1, step, &c2, &b2);
    if (whole != split || c1 != c2 || b1 != b2)
        abort();
    return 0;
}
