/*
 * A strict, incremental HTTP/1.1 request parser over the caller's buffer:
 * the request line and headers (recorded as offsets, NUL-terminated in
 * place), then a Content-Length or chunked body. Pure: no I/O, no allocation,
 * fixed caps. A refusal carries the status and error code of its JSON answer.
 *
 *   http_parse_init      before each request
 *   http_parse_head      the buffer so far → MORE, DONE (head_len set) or ERROR
 *   http_parse_body      the unconsumed bytes after the head → MORE, DATA, DONE or ERROR
 *   http_parse_header    a header's value by name
 *   http_percent_decode  in place, for the path and the query
 */
#ifndef HOOKD_NET_HTTP_PARSE_H
#define HOOKD_NET_HTTP_PARSE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_PARSE_HEAD_MAX (16 * 1024)  /* request line and headers, final CRLF included; larger → 431 */
#define HTTP_PARSE_TARGET_MAX (8 * 1024) /* the request target; longer → 414 */
#define HTTP_PARSE_HEADERS_MAX 100       /* header fields; more → 431 */
#define HTTP_PARSE_METHOD_MAX 32
#define HTTP_PARSE_CHUNK_LINE_MAX 1024   /* a chunk-size line with its extensions */

enum http_parse_result {
    HTTP_PARSE_ERROR = -1, /* status, code and message say why */
    HTTP_PARSE_MORE = 0,   /* needs more bytes */
    HTTP_PARSE_DONE = 1,   /* the head (or the body) is complete */
    HTTP_PARSE_DATA = 2,   /* http_parse_body: a span of body bytes */
};

struct http_parse_field {
    uint16_t name, value; /* offsets of NUL-terminated strings in the buffer */
};

enum http_parse_phase {
    HTTP_PHASE_HEAD,
    HTTP_PHASE_LENGTH,     /* Content-Length body */
    HTTP_PHASE_CHUNK_SIZE,
    HTTP_PHASE_CHUNK_DATA,
    HTTP_PHASE_CHUNK_END,  /* the CRLF after a chunk's data */
    HTTP_PHASE_TRAILER,
    HTTP_PHASE_DONE,
};

struct http_parser {
    enum http_parse_phase phase;
    size_t line_start;   /* offset of the line being read */
    size_t scan;         /* bytes of it already searched for LF */
    size_t trailer_len;

    /* The head, once DONE: offsets into the buffer. */
    size_t head_len;
    uint16_t method, target;
    int version_minor;   /* HTTP/1.<minor>: 0 or 1 */
    struct http_parse_field fields[HTTP_PARSE_HEADERS_MAX];
    size_t n_fields;

    bool chunked;
    bool has_length;
    uint64_t content_length;
    bool keep_alive;      /* after Connection and the version */
    bool expect_continue; /* "Expect: 100-continue" */
    uint64_t remaining;   /* body bytes left in the Content-Length body or the current chunk */

    /* ERROR: the answer. code and message are static strings. */
    int status;
    const char *code;
    const char *message;
};

void http_parse_init(struct http_parser *p);

/*
 * buf holds len bytes from the start of the request; it grows between calls
 * (same content, more bytes) and may move. Parsed lines are rewritten in
 * place (NULs at the ends of tokens). DONE sets head_len; bytes after it are
 * the body and what follows.
 */
__attribute__((warn_unused_result)) int http_parse_head(struct http_parser *p, char *buf, size_t len);

/*
 * buf holds the len unconsumed bytes after what earlier calls consumed (the
 * caller drops *used bytes after each call). One step per call: DATA sets
 * *data (inside buf) and *data_len; MORE with *used > 0 is progress (call
 * again), with *used == 0 it needs more bytes; DONE: the body ended
 * (trailers consumed, *used counts them).
 */
__attribute__((warn_unused_result)) int http_parse_body(struct http_parser *p, const char *buf, size_t len,
                                                        size_t *used, const char **data, size_t *data_len);

/* The first field named name (case-insensitive), or NULL. buf is the head's buffer. */
const char *http_parse_header(const struct http_parser *p, const char *buf, const char *name);

/*
 * Decodes %XX escapes (and '+' as a space when plus_is_space) in s[0..n) in
 * place and NUL-terminates; a malformed escape stays as it is. Returns the
 * new length, or -1 if the text decodes to a NUL byte.
 */
long http_percent_decode(char *s, size_t n, bool plus_is_space);
#endif
