/*
 * libFuzzer target for the HTTP engine's response parser (and its URL
 * reader): the input's first byte says whether the request was HEAD and the
 * size of the pieces it is fed in; the rest is fed whole and then in pieces,
 * and both must reach the same outcome, status, body and end offset, with the
 * body never longer than the input. The input up to its first newline is also
 * read as a URL. Built by `make fuzz-build` (its own rule: it compiles the
 * parser and the URL reader in).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "net/http_response.h"
#include "net/http_url.h"

struct sink {
    size_t len;
    uint32_t sum; /* of the body's bytes, position-weighted: equal bodies, equal sums */
};

static void on_body(void *ud, const char *p, size_t n)
{
    struct sink *s = ud;

    for (size_t i = 0; i < n; i++)
        s->sum = s->sum * 31u + (unsigned char)p[i];
    s->len += n;
}

struct outcome {
    int rc, status;
    size_t used;
    struct sink body;
};

static void run(struct http_response *p, bool head, const char *data, size_t n, size_t step, struct outcome *o)
{
    size_t at = 0;

    memset(o, 0, sizeof *o);
    http_response_init(p, head);
    o->rc = HTTP_RESPONSE_MORE;
    while (at < n) {
        size_t take = n - at < step ? n - at : step, used = 0;
        o->rc = http_response_feed(p, data + at, take, &used, on_body, &o->body);
        if (used > take)
            abort();
        at += used;
        if (o->rc != HTTP_RESPONSE_MORE)
            break;
        if (used != take)
            abort(); /* MORE takes every byte */
    }
    if (o->rc == HTTP_RESPONSE_MORE)
        o->rc = http_response_eof(p) + 10;
    if (o->rc == HTTP_RESPONSE_ERROR && p->error == NULL)
        abort();
    o->status = p->head_done ? p->status : 0;
    o->used = at;
    if (o->body.len > n)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct http_response p;
    struct outcome whole, pieces;
    struct http_url url;
    const char *s = (const char *)data + 1;
    size_t n = size - 1;

    if (size < 1)
        return 0;
    bool head = data[0] & 1;
    size_t step = (data[0] >> 1) + 1;
    run(&p, head, s, n, n > 0 ? n : 1, &whole);
    run(&p, head, s, n, step, &pieces);
    /* An error may be seen at different offsets; an answer must be the same answer. */
    if (whole.rc != pieces.rc || whole.status != pieces.status)
        abort();
    if (whole.rc != HTTP_RESPONSE_ERROR &&
        (whole.used != pieces.used || whole.body.len != pieces.body.len || whole.body.sum != pieces.body.sum))
        abort();

    const char *nl = memchr(s, '\n', n);
    size_t ul = nl != NULL ? (size_t)(nl - s) : n;
    char *u = malloc(ul + 1);
    if (u == NULL)
        return 0;
    memcpy(u, s, ul);
    u[ul] = '\0';
    if (http_url_parse(u, &url) == 0) {
        if (url.host[0] == '\0' || url.port == 0 || strlen(url.host) >= sizeof url.host)
            abort();
        if (url.target != NULL && (url.target < u || url.target + url.target_len > u + ul))
            abort();
    }
    free(u);
    return 0;
}
