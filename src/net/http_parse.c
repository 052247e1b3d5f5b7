/*
 * The HTTP/1.1 request parser: a line at a time once the line is complete,
 * so a request split at any byte boundary parses the same as in one piece.
 * Everything RFC 9112 lets a server refuse for ambiguity is refused.
 */
#include "net/http_parse.h"

#include <string.h>
#include <strings.h>

static bool is_tchar(unsigned char c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return true;
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* A byte a field value may hold: HTAB, SP, VCHAR, obs-text. */
static bool is_value_byte(unsigned char c) { return c == '\t' || (c >= 0x20 && c != 0x7f); }

static int hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int refuse(struct http_parser *p, int status, const char *code, const char *message)
{
    p->status = status;
    p->code = code;
    p->message = message;
    return HTTP_PARSE_ERROR;
}

void http_parse_init(struct http_parser *p)
{
    memset(p, 0, sizeof *p);
    p->phase = HTTP_PHASE_HEAD;
}

/*
 * The next complete line from p->line_start: its end (the CR) in *end and
 * the offset past its LF in *next. MORE while no LF has come; lines end in
 * CRLF, a bare LF is refused.
 */
static int next_line(struct http_parser *p, const char *buf, size_t len, size_t *end, size_t *next)
{
    size_t from = p->line_start + p->scan;
    const char *lf = from < len ? memchr(buf + from, '\n', len - from) : NULL;

    if (!lf) {
        p->scan = len - p->line_start;
        return HTTP_PARSE_MORE;
    }
    size_t at = (size_t)(lf - buf);
    if (at == p->line_start || buf[at - 1] != '\r')
        return refuse(p, 400, "invalid_request", "a line does not end in CRLF");
    *end = at - 1;
    *next = at + 1;
    p->scan = 0;
    return HTTP_PARSE_DONE;
}

/* "METHOD SP target SP HTTP/1.x" in buf[start..end). */
static int parse_request_line(struct http_parser *p, char *buf, size_t start, size_t end)
{
    size_t i = start;

    while (i < end && is_tchar((unsigned char)buf[i]))
        i++;
    if (i == start || i >= end || buf[i] != ' ')
        return refuse(p, 400, "invalid_request", "malformed request line");
    if (i - start > HTTP_PARSE_METHOD_MAX)
        return refuse(p, 501, "not_implemented", "unknown method");
    p->method = (uint16_t)start;
    buf[i++] = '\0';

    size_t target = i;
    while (i < end && buf[i] != ' ') {
        unsigned char c = (unsigned char)buf[i];
        if (c <= 0x20 || c == 0x7f)
            return refuse(p, 400, "invalid_request", "a control byte in the request target");
        i++;
    }
    if (i == target || i >= end)
        return refuse(p, 400, "invalid_request", "malformed request line");
    if (buf[target] != '/')
        return refuse(p, 400, "invalid_request", "the request target must be an absolute path");
    if (i - target > HTTP_PARSE_TARGET_MAX)
        return refuse(p, 414, "uri_too_long", "request target too long");
    p->target = (uint16_t)target;
    buf[i++] = '\0';

    /* "HTTP/" DIGIT "." DIGIT, and nothing after it. */
    const char *v = buf + i;
    if (end - i != 8 || memcmp(v, "HTTP/", 5) != 0 || v[6] != '.' || v[5] < '0' || v[5] > '9' || v[7] < '0' ||
        v[7] > '9')
        return refuse(p, 400, "invalid_request", "malformed HTTP version");
    if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
        return refuse(p, 505, "http_version_not_supported", "only HTTP/1.0 and HTTP/1.1 are supported");
    p->version_minor = v[7] - '0';
    return HTTP_PARSE_DONE;
}

/*
 * "name: value" in buf[start..end); the value is trimmed of OWS. name_end
 * and the value bounds come back for the caller to record.
 */
static int parse_field_line(struct http_parser *p, char *buf, size_t start, size_t end, size_t *value_start)
{
    size_t i = start;

    if (buf[start] == ' ' || buf[start] == '\t')
        return refuse(p, 400, "invalid_header", "obsolete line folding in a header");
    while (i < end && buf[i] != ':') {
        if (!is_tchar((unsigned char)buf[i]))
            return refuse(p, 400, "invalid_header", "a header name contains a space or control byte");
        i++;
    }
    if (i >= end)
        return refuse(p, 400, "invalid_header", "a header line without a colon");
    if (i == start)
        return refuse(p, 400, "invalid_header", "a header with an empty name");
    buf[i++] = '\0';
    for (size_t j = i; j < end; j++)
        if (!is_value_byte((unsigned char)buf[j]))
            return refuse(p, 400, "invalid_header", "a header value contains a NUL or control byte");
    while (i < end && (buf[i] == ' ' || buf[i] == '\t'))
        i++;
    while (end > i && (buf[end - 1] == ' ' || buf[end - 1] == '\t'))
        end--;
    buf[end] = '\0';
    *value_start = i;
    return HTTP_PARSE_DONE;
}

/* Does the comma-separated list in s hold token (case-insensitive)? */
static bool list_has(const char *s, const char *token)
{
    size_t n = strlen(token);

    while (*s) {
        while (*s == ' ' || *s == '\t' || *s == ',')
            s++;
        const char *e = s;
        while (*e && *e != ',')
            e++;
        const char *t = e;
        while (t > s && (t[-1] == ' ' || t[-1] == '\t'))
            t--;
        if ((size_t)(t - s) == n && strncasecmp(s, token, n) == 0)
            return true;
        s = e;
    }
    return false;
}

/* The framing rules, once the head is complete. */
static int head_done(struct http_parser *p, const char *buf)
{
    int n_te = 0;
    const char *te = NULL;

    p->keep_alive = p->version_minor == 1;
    for (size_t i = 0; i < p->n_fields; i++) {
        const char *name = buf + p->fields[i].name;
        const char *value = buf + p->fields[i].value;
        if (strcasecmp(name, "Content-Length") == 0) {
            uint64_t v = 0;
            if (*value == '\0')
                return refuse(p, 400, "invalid_header", "an empty Content-Length");
            for (const char *c = value; *c; c++) {
                if (*c < '0' || *c > '9')
                    return refuse(p, 400, "invalid_header", "a malformed Content-Length");
                if (v > (UINT64_MAX - 9) / 10)
                    return refuse(p, 400, "invalid_header", "Content-Length too large");
                v = v * 10 + (uint64_t)(*c - '0');
            }
            if (p->has_length && v != p->content_length)
                return refuse(p, 400, "invalid_header", "conflicting Content-Length headers");
            p->has_length = true;
            p->content_length = v;
        } else if (strcasecmp(name, "Transfer-Encoding") == 0) {
            n_te++;
            te = value;
        } else if (strcasecmp(name, "Connection") == 0) {
            if (list_has(value, "close"))
                p->keep_alive = false;
            else if (list_has(value, "keep-alive"))
                p->keep_alive = true;
        } else if (strcasecmp(name, "Expect") == 0) {
            if (strcasecmp(value, "100-continue") == 0)
                p->expect_continue = true;
        }
    }
    if (n_te > 0) {
        if (p->has_length)
            return refuse(p, 400, "invalid_header", "both Content-Length and Transfer-Encoding");
        if (p->version_minor == 0)
            return refuse(p, 400, "invalid_header", "Transfer-Encoding in an HTTP/1.0 request");
        if (n_te > 1 || strcasecmp(te, "chunked") != 0)
            return refuse(p, 501, "not_implemented", "only the chunked transfer coding is supported");
        p->chunked = true;
        p->phase = HTTP_PHASE_CHUNK_SIZE;
    } else if (p->has_length && p->content_length > 0) {
        p->remaining = p->content_length;
        p->phase = HTTP_PHASE_LENGTH;
    } else {
        p->phase = HTTP_PHASE_DONE;
    }
    return HTTP_PARSE_DONE;
}

int http_parse_head(struct http_parser *p, char *buf, size_t len)
{
    size_t end, next;

    if (p->phase != HTTP_PHASE_HEAD)
        return p->status ? HTTP_PARSE_ERROR : HTTP_PARSE_DONE;
    for (;;) {
        int rc = next_line(p, buf, len > HTTP_PARSE_HEAD_MAX ? HTTP_PARSE_HEAD_MAX : len, &end, &next);
        if (rc == HTTP_PARSE_MORE) {
            if (len >= HTTP_PARSE_HEAD_MAX)
                return refuse(p, 431, "header_too_large", "request header too large");
            return rc;
        }
        if (rc != HTTP_PARSE_DONE)
            return rc;
        size_t start = p->line_start;
        p->line_start = next;
        if (p->target == 0) {
            if (end == start)
                continue; /* empty lines before a request line are ignored (RFC 9112 2.2) */
            rc = parse_request_line(p, buf, start, end);
        } else if (end == start) {
            p->head_len = next;
            return head_done(p, buf);
        } else if (p->n_fields == HTTP_PARSE_HEADERS_MAX) {
            return refuse(p, 431, "header_too_large", "too many header fields");
        } else {
            size_t value;
            rc = parse_field_line(p, buf, start, end, &value);
            if (rc == HTTP_PARSE_DONE) {
                p->fields[p->n_fields].name = (uint16_t)start;
                p->fields[p->n_fields].value = (uint16_t)value;
                p->n_fields++;
            }
        }
        if (rc != HTTP_PARSE_DONE)
            return rc;
    }
}

/* "1*HEXDIG [ext] CRLF" in buf[0..end). Extensions are checked for bytes and dropped. */
static int parse_chunk_size(struct http_parser *p, const char *buf, size_t end)
{
    uint64_t v = 0;
    size_t i = 0;

    for (; i < end && hex_value((unsigned char)buf[i]) >= 0; i++) {
        if (v > (UINT64_MAX >> 8))
            return refuse(p, 400, "invalid_body", "chunk size too large");
        v = v * 16 + (uint64_t)hex_value((unsigned char)buf[i]);
    }
    if (i == 0)
        return refuse(p, 400, "invalid_body", "a malformed chunk size");
    while (i < end && (buf[i] == ' ' || buf[i] == '\t'))
        i++;
    if (i < end) {
        if (buf[i] != ';')
            return refuse(p, 400, "invalid_body", "a malformed chunk size");
        for (; i < end; i++)
            if (!is_value_byte((unsigned char)buf[i]))
                return refuse(p, 400, "invalid_body", "a control byte in a chunk extension");
    }
    p->remaining = v;
    p->phase = v > 0 ? HTTP_PHASE_CHUNK_DATA : HTTP_PHASE_TRAILER;
    return HTTP_PARSE_DONE;
}

/* A line of the body's framing (chunk size, trailer) from buf; MORE until it is complete. */
static int body_line(struct http_parser *p, const char *buf, size_t len, size_t cap, size_t *end, size_t *next)
{
    p->line_start = 0; /* the caller drops consumed bytes: a line starts at buf */
    int rc = next_line(p, buf, len > cap ? cap : len, end, next);
    if (rc == HTTP_PARSE_ERROR)
        return refuse(p, 400, "invalid_body", "a body line does not end in CRLF");
    if (rc == HTTP_PARSE_MORE && len >= cap)
        return cap == HTTP_PARSE_CHUNK_LINE_MAX ? refuse(p, 400, "invalid_body", "chunk size line too long")
                                                : refuse(p, 431, "header_too_large", "trailer too large");
    return rc;
}

int http_parse_body(struct http_parser *p, const char *buf, size_t len, size_t *used, const char **data,
                    size_t *data_len)
{
    size_t end, next;
    int rc;

    *used = 0;
    *data = NULL;
    *data_len = 0;
    switch (p->phase) {
    case HTTP_PHASE_LENGTH:
    case HTTP_PHASE_CHUNK_DATA:
        if (len == 0)
            return HTTP_PARSE_MORE;
        *data = buf;
        *data_len = (uint64_t)len < p->remaining ? len : (size_t)p->remaining;
        *used = *data_len;
        p->remaining -= *data_len;
        if (p->remaining == 0)
            p->phase = p->phase == HTTP_PHASE_LENGTH ? HTTP_PHASE_DONE : HTTP_PHASE_CHUNK_END;
        return HTTP_PARSE_DATA;
    case HTTP_PHASE_CHUNK_END:
        if (len < 2)
            return len == 1 && buf[0] != '\r' ? refuse(p, 400, "invalid_body", "chunk data not followed by CRLF")
                                               : HTTP_PARSE_MORE;
        if (buf[0] != '\r' || buf[1] != '\n')
            return refuse(p, 400, "invalid_body", "chunk data not followed by CRLF");
        *used = 2;
        p->phase = HTTP_PHASE_CHUNK_SIZE;
        return HTTP_PARSE_MORE;
    case HTTP_PHASE_CHUNK_SIZE:
        rc = body_line(p, buf, len, HTTP_PARSE_CHUNK_LINE_MAX, &end, &next);
        if (rc != HTTP_PARSE_DONE)
            return rc;
        rc = parse_chunk_size(p, buf, end);
        if (rc != HTTP_PARSE_DONE)
            return rc;
        *used = next;
        return HTTP_PARSE_MORE;
    case HTTP_PHASE_TRAILER: {
        size_t room = HTTP_PARSE_HEAD_MAX - p->trailer_len;
        rc = body_line(p, buf, len, room, &end, &next);
        if (rc != HTTP_PARSE_DONE)
            return rc;
        p->trailer_len += next;
        *used = next;
        if (end == 0) {
            p->phase = HTTP_PHASE_DONE;
            return HTTP_PARSE_DONE;
        }
        /* A trailer field is checked like a header field and dropped. */
        size_t i = 0;
        if (buf[0] == ' ' || buf[0] == '\t')
            return refuse(p, 400, "invalid_body", "obsolete line folding in a trailer");
        while (i < end && is_tchar((unsigned char)buf[i]))
            i++;
        if (i == 0 || i >= end || buf[i] != ':')
            return refuse(p, 400, "invalid_body", "a malformed trailer field");
        for (; i < end; i++)
            if (!is_value_byte((unsigned char)buf[i]))
                return refuse(p, 400, "invalid_body", "a trailer contains a NUL or control byte");
        return HTTP_PARSE_MORE;
    }
    case HTTP_PHASE_DONE:
        return HTTP_PARSE_DONE;
    case HTTP_PHASE_HEAD:
    default:
        return refuse(p, 500, "internal", "body parsed before the head");
    }
}

const char *http_parse_header(const struct http_parser *p, const char *buf, const char *name)
{
    for (size_t i = 0; i < p->n_fields; i++)
        if (strcasecmp(buf + p->fields[i].name, name) == 0)
            return buf + p->fields[i].value;
    return NULL;
}

long http_percent_decode(char *s, size_t n, bool plus_is_space)
{
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        int hi, lo;
        char c = s[i];
        if (c == '%' && i + 2 < n && (hi = hex_value((unsigned char)s[i + 1])) >= 0 && (lo = hex_value((unsigned char)s[i + 2])) >= 0) {
            c = (char)(hi * 16 + lo);
            if (c == '\0')
                return -1;
            i += 2;
        } else if (c == '+' && plus_is_space) {
            c = ' ';
        }
        s[o++] = c;
    }
    s[o] = '\0';
    return (long)o;
}
