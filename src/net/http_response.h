/*
 * The HTTP engine's response parser: an HTTP/1.x response read incrementally,
 * pure (no I/O, no allocation): status line, header block (capped), 1xx
 * interim responses skipped, body framing by Content-Length, chunked (with
 * trailers) or the end of the connection, none for HEAD, 204 and 304.
 *
 *   http_response_init   start reading the answer to one request
 *   http_response_feed   give it bytes; body bytes go to a callback; says when the response ended
 *   http_response_eof    the connection ended: the close-delimited body is complete, or an error
 *
 * Errors are static strings ("malformed status line", …) with no byte of the
 * response in them, so they may go into a log line as they are.
 */
#ifndef HOOKD_NET_HTTP_RESPONSE_H
#define HOOKD_NET_HTTP_RESPONSE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_RESPONSE_HEAD_MAX (64 * 1024)   /* status line and header block of one response */
#define HTTP_RESPONSE_RETRY_AFTER_MAX 64

enum http_response_rc {
    HTTP_RESPONSE_MORE,  /* every byte was taken; more are needed */
    HTTP_RESPONSE_DONE,  /* the response ended; *used says how many bytes were its own */
    HTTP_RESPONSE_ERROR, /* malformed: p->error says why; the connection cannot be used again */
};

/* Receives the body's bytes (decoded from chunks), in order. */
typedef void (*http_response_body_fn)(void *ud, const char *data, size_t n);

struct http_response {
    /* What was read (valid once head_done; the final response's, not a 1xx's). */
    int status;
    int minor;             /* HTTP/1.minor */
    bool head_done;        /* the final response's header block ended */
    bool keep_alive;       /* the connection may carry another request after this one */
    char retry_after[HTTP_RESPONSE_RETRY_AFTER_MAX]; /* trimmed, non-printable bytes as '?'; "" absent */
    const char *error;     /* static text for HTTP_RESPONSE_ERROR */
    size_t bytes_seen;     /* every byte fed so far */

    /* Parser state. */
    bool no_body;          /* a response to HEAD */
    int state;
    size_t head_len;       /* bytes of the current head gathered in head[] */
    size_t scan;           /* where the search for the head's end resumes */
    uint64_t left;         /* body bytes (or chunk bytes) still to come */
    bool chunked, close_delimited;
    size_t line_len;       /* chunk-size line: length so far */
    int chunk_phase;       /* in a chunk-size line: 0 no digit yet, 1 digits, 2 past them */
    bool trailer_line_empty;
    char head[HTTP_RESPONSE_HEAD_MAX];
};

/* head_request: the request was HEAD (no body follows, whatever the headers say). */
void http_response_init(struct http_response *p, bool head_request);

/*
 * Reads up to n bytes of data. Body bytes go to on_body(ud, …). Returns
 * HTTP_RESPONSE_MORE (all n taken), HTTP_RESPONSE_DONE (*used bytes were this
 * response's; the rest are not) or HTTP_RESPONSE_ERROR.
 */
__attribute__((warn_unused_result)) enum http_response_rc
http_response_feed(struct http_response *p, const char *data, size_t n, size_t *used, http_response_body_fn on_body,
                   void *ud);

/* The peer ended the connection: DONE when that ends a close-delimited body, else ERROR. */
__attribute__((warn_unused_result)) enum http_response_rc http_response_eof(struct http_response *p);
#endif
