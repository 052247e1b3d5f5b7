/*
 * The HTTP engine's response parser (net/http_response.h): the head gathered
 * until its blank line and parsed whole, then the body counted, de-chunked or
 * read to the end of the connection.
 */
#include "net/http_response.h"

#include <string.h>
#include <strings.h>

enum {
    S_HEAD,
    S_BODY_LENGTH, /* Content-Length bytes */
    S_BODY_CLOSE,  /* until the connection ends */
    S_CHUNK_SIZE,  /* the chunk-size line */
    S_CHUNK_DATA,
    S_CHUNK_END,   /* the CRLF after a chunk's data */
    S_TRAILERS,    /* trailer lines until a blank one */
    S_DONE,
};

#define CHUNK_LINE_MAX 1024 /* a chunk-size line with its extensions */
#define CHUNK_SIZE_MAX ((uint64_t)1 << 60)

void http_response_init(struct http_response *p, bool head_request)
{
    p->status = 0;
    p->minor = 0;
    p->head_done = false;
    p->keep_alive = false;
    p->retry_after[0] = '\0';
    p->error = NULL;
    p->bytes_seen = 0;
    p->no_body = head_request;
    p->state = S_HEAD;
    p->head_len = 0;
    p->scan = 0;
    p->left = 0;
    p->chunked = p->close_delimited = false;
    p->line_len = 0;
    p->chunk_phase = 0;
    p->trailer_line_empty = true;
}

static enum http_response_rc fail(struct http_response *p, const char *why)
{
    p->error = why;
    p->keep_alive = false;
    return HTTP_RESPONSE_ERROR;
}

/* RFC 9110 tchar. */
static bool is_token_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static bool name_is(const char *name, size_t len, const char *want)
{
    return strlen(want) == len && strncasecmp(name, want, len) == 0;
}

/* True when the comma-separated list v (length n) holds token (case-insensitive). */
static bool list_has(const char *v, size_t n, const char *token)
{
    size_t tl = strlen(token), i = 0;

    while (i < n) {
        size_t start, end;
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        start = i;
        while (i < n && v[i] != ',')
            i++;
        end = i;
        while (end > start && (v[end - 1] == ' ' || v[end - 1] == '\t'))
            end--;
        if (end - start == tl && strncasecmp(v + start, token, tl) == 0)
            return true;
    }
    return false;
}

/* True when the last coding of a Transfer-Encoding list is chunked. */
static bool list_ends_chunked(const char *v, size_t n)
{
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == ','))
        n--;
    size_t start = n;
    while (start > 0 && v[start - 1] != ',' && v[start - 1] != ' ' && v[start - 1] != '\t')
        start--;
    return n - start == 7 && strncasecmp(v + start, "chunked", 7) == 0;
}

/* The Retry-After value as the engine hands it on: cut to fit, anything not printable ASCII as '?'. */
static void retry_after_keep(struct http_response *p, const char *v, size_t n)
{
    if (n >= sizeof p->retry_after)
        n = sizeof p->retry_after - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        p->retry_after[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    p->retry_after[n] = '\0';
}

/* "HTTP/1.x SSS[ reason]": the status and minor version, or false. */
static bool status_line_parse(struct http_response *p, const char *s, size_t n)
{
    if (n < 12 || memcmp(s, "HTTP/1.", 7) != 0 || s[7] < '0' || s[7] > '9' || s[8] != ' ')
        return false;
    for (int i = 9; i < 12; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
    }
    if (s[9] == '0' || (n > 12 && s[12] != ' '))
        return false;
    for (size_t i = 12; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return false;
    }
    p->minor = s[7] - '0';
    p->status = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
    return true;
}

/* Parses the head in p->head[0, len): sets status, framing and keep-alive. */
static enum http_response_rc head_parse(struct http_response *p, size_t len)
{
    const char *h = p->head;
    size_t i = 0, line = 0;
    bool has_length = false, has_te = false, te_chunked = false, conn_close = false, conn_keep = false;
    uint64_t length = 0;

    p->retry_after[0] = '\0'; /* a new response (after a 1xx) starts */
    while (i < len) {
        const char *eol = memchr(h + i, '\n', len - i);
        size_t end = (size_t)(eol - h), n = end - i;
        const char *s = h + i;

        if (n > 0 && s[n - 1] == '\r')
            n--;
        if (memchr(s, '\r', n) != NULL || memchr(s, '\0', n) != NULL)
            return fail(p, "malformed response header (CR or NUL inside a line)");
        i = end + 1;
        if (line++ == 0) {
            if (!status_line_parse(p, s, n))
                return fail(p, "malformed status line");
            continue;
        }
        if (n == 0)
            break; /* the blank line */
        if (s[0] == ' ' || s[0] == '\t')
            return fail(p, "malformed response header (folded line)");
        size_t colon = 0;
        while (colon < n && is_token_char((unsigned char)s[colon]))
            colon++;
        if (colon == 0 || colon == n || s[colon] != ':')
            return fail(p, "malformed response header line");
        const char *v = s + colon + 1;
        size_t vn = n - colon - 1;
        while (vn > 0 && (*v == ' ' || *v == '\t')) {
            v++;
            vn--;
        }
        while (vn > 0 && (v[vn - 1] == ' ' || v[vn - 1] == '\t'))
            vn--;
        if (name_is(s, colon, "content-length")) {
            uint64_t x = 0;
            if (vn == 0 || vn > 18)
                return fail(p, "malformed Content-Length");
            for (size_t k = 0; k < vn; k++) {
                if (v[k] < '0' || v[k] > '9')
                    return fail(p, "malformed Content-Length");
                x = x * 10 + (uint64_t)(v[k] - '0');
            }
            if (has_length && x != length)
                return fail(p, "conflicting Content-Length headers");
            has_length = true;
            length = x;
        } else if (name_is(s, colon, "transfer-encoding")) {
            has_te = true;
            te_chunked = list_ends_chunked(v, vn);
        } else if (name_is(s, colon, "connection")) {
            conn_close |= list_has(v, vn, "close");
            conn_keep |= list_has(v, vn, "keep-alive");
        } else if (name_is(s, colon, "retry-after")) {
            retry_after_keep(p, v, vn);
        }
    }
    if (p->status < 200) {
        if (p->status == 101)
            return fail(p, "unexpected 101 Switching Protocols");
        return HTTP_RESPONSE_MORE; /* interim: the caller starts on the next head */
    }
    p->head_done = true;
    p->keep_alive = p->minor >= 1 ? !conn_close : conn_keep && !conn_close;
    if (p->no_body || p->status == 204 || p->status == 304) {
        p->state = S_DONE;
    } else if (has_te) {
        /* Transfer-Encoding overrides Content-Length (RFC 9112 §6.3); such a connection is not reused. */
        if (has_length)
            p->keep_alive = false;
        if (te_chunked) {
            p->chunked = true;
            p->state = S_CHUNK_SIZE;
            p->line_len = 0;
            p->chunk_phase = 0;
            p->left = 0;
        } else {
            p->close_delimited = true;
            p->keep_alive = false;
            p->state = S_BODY_CLOSE;
        }
    } else if (has_length) {
        p->left = length;
        p->state = length > 0 ? S_BODY_LENGTH : S_DONE;
    } else {
        p->close_delimited = true;
        p->keep_alive = false;
        p->state = S_BODY_CLOSE;
    }
    return HTTP_RESPONSE_MORE;
}

/*
 * Gathers head bytes; on the blank line parses it. Returns bytes of data
 * taken, or (size_t)-1 on error.
 */
static size_t head_feed(struct http_response *p, const char *data, size_t n)
{
    size_t skipped = 0;

    /* Blank lines before a status line are tolerated (RFC 9112 §2.2). */
    if (p->head_len == 0) {
        while (skipped < n && (data[skipped] == '\r' || data[skipped] == '\n'))
            skipped++;
        data += skipped;
        n -= skipped;
    }
    size_t room = sizeof p->head - p->head_len, take = n < room ? n : room;
    size_t before = p->head_len;

    memcpy(p->head + p->head_len, data, take);
    p->head_len += take;
    for (size_t i = p->scan; i < p->head_len; i++) {
        const char *nl = memchr(p->head + i, '\n', p->head_len - i);
        if (nl == NULL)
            break;
        i = (size_t)(nl - p->head);
        /* "\n\n" or "\n\r\n" ends the head. */
        size_t end = 0;
        if (i + 1 < p->head_len && p->head[i + 1] == '\n')
            end = i + 2;
        else if (i + 2 < p->head_len && p->head[i + 1] == '\r' && p->head[i + 2] == '\n')
            end = i + 3;
        else if (i + 1 >= p->head_len || (i + 2 >= p->head_len && p->head[i + 1] == '\r')) {
            p->scan = i; /* the terminator may still be arriving */
            return skipped + take;
        }
        if (end == 0)
            continue;
        if (head_parse(p, end) == HTTP_RESPONSE_ERROR)
            return (size_t)-1;
        /* Done, or an interim response: the next head starts after it. */
        p->head_len = 0;
        p->scan = 0;
        return skipped + end - before;
    }
    p->scan = p->head_len;
    if (p->head_len == sizeof p->head) {
        fail(p, "response header too large");
        return (size_t)-1;
    }
    return skipped + take;
}

static bool hex_digit(char c, unsigned *v)
{
    if (c >= '0' && c <= '9')
        *v = (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f')
        *v = (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
        *v = (unsigned)(c - 'A' + 10);
    else
        return false;
    return true;
}

enum http_response_rc http_response_feed(struct http_response *p, const char *data, size_t n, size_t *used,
                                         http_response_body_fn on_body, void *ud)
{
    size_t i = 0;

    *used = 0;
    while (i < n || p->state == S_DONE) {
        switch (p->state) {
        case S_HEAD: {
            size_t took = head_feed(p, data + i, n - i);
            if (took == (size_t)-1)
                return HTTP_RESPONSE_ERROR;
            i += took;
            break;
        }
        case S_BODY_LENGTH: {
            size_t take = (uint64_t)(n - i) < p->left ? n - i : (size_t)p->left;
            on_body(ud, data + i, take);
            i += take;
            p->left -= take;
            if (p->left == 0)
                p->state = S_DONE;
            break;
        }
        case S_BODY_CLOSE:
            on_body(ud, data + i, n - i);
            i = n;
            break;
        case S_CHUNK_SIZE: {
            char c = data[i++];
            unsigned v;
            if (++p->line_len > CHUNK_LINE_MAX)
                return fail(p, "malformed chunk (size line too long)");
            if (c == '\n') {
                if (p->chunk_phase == 0)
                    return fail(p, "malformed chunk size");
                p->line_len = 0;
                p->chunk_phase = 0;
                p->trailer_line_empty = true;
                p->head_len = 0; /* counts the trailers' bytes */
                p->state = p->left > 0 ? S_CHUNK_DATA : S_TRAILERS;
            } else if (p->chunk_phase < 2 && hex_digit(c, &v)) {
                if (p->left >= CHUNK_SIZE_MAX >> 4)
                    return fail(p, "malformed chunk (size too large)");
                p->left = p->left * 16 + v;
                p->chunk_phase = 1;
            } else if (p->chunk_phase > 0 && (c == ';' || c == ' ' || c == '\t' || c == '\r')) {
                p->chunk_phase = 2; /* extensions (ignored) or the line's end */
            } else if (p->chunk_phase == 2 && (unsigned char)c >= 0x20 && c != 0x7f) {
                /* an extension's bytes */
            } else {
                return fail(p, "malformed chunk size");
            }
            break;
        }
        case S_CHUNK_DATA: {
            size_t take = (uint64_t)(n - i) < p->left ? n - i : (size_t)p->left;
            on_body(ud, data + i, take);
            i += take;
            p->left -= take;
            if (p->left == 0) {
                p->state = S_CHUNK_END;
                p->line_len = 0;
            }
            break;
        }
        case S_CHUNK_END: {
            char c = data[i++];
            if (c == '\r' && p->line_len == 0) {
                p->line_len = 1;
            } else if (c == '\n') {
                p->state = S_CHUNK_SIZE;
                p->line_len = 0;
                p->chunk_phase = 0;
            } else {
                return fail(p, "malformed chunk (no CRLF after its data)");
            }
            break;
        }
        case S_TRAILERS: {
            char c = data[i++];
            if (++p->head_len > HTTP_RESPONSE_HEAD_MAX)
                return fail(p, "response trailers too large");
            if (c == '\n') {
                if (p->trailer_line_empty) {
                    p->state = S_DONE;
                    break;
                }
                p->trailer_line_empty = true;
            } else if (c != '\r') {
                p->trailer_line_empty = false;
            }
            break;
        }
        case S_DONE:
            *used = i;
            p->bytes_seen += i;
            return HTTP_RESPONSE_DONE;
        }
    }
    *used = i;
    p->bytes_seen += i;
    return HTTP_RESPONSE_MORE;
}

enum http_response_rc http_response_eof(struct http_response *p)
{
    if (p->state == S_DONE || p->state == S_BODY_CLOSE) {
        p->state = S_DONE;
        p->keep_alive = false;
        return HTTP_RESPONSE_DONE;
    }
    if (p->state == S_HEAD)
        return fail(p, p->bytes_seen == 0 && p->head_len == 0 ? "connection closed before a response"
                                                              : "connection closed inside the response header");
    return fail(p, "connection closed before the response body ended");
}
