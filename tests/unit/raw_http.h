/*
 * A raw HTTP/1.1 client for the server's tests: sockets that send exactly the
 * bytes a test writes (bad framing included) and read one response back,
 * bounded by fixed buffers and socket timeouts. Include after <cmocka.h>.
 */
#ifndef HOOKD_TESTS_RAW_HTTP_H
#define HOOKD_TESTS_RAW_HTTP_H
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* A socket connected to the loopback address of family at port, bound first to source
 * (an IPv4 text such as "127.0.0.2") when given; timeouts on both directions. -1 on failure. */
static inline int raw_connect(int family, const char *source, int port, int timeout_s)
{
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval tv = {timeout_s, 0};
    struct sockaddr_storage ss = {0};
    socklen_t len;

    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (source && family == AF_INET) {
        struct sockaddr_in src = {.sin_family = AF_INET};
        if (inet_pton(AF_INET, source, &src.sin_addr) != 1 || bind(fd, (struct sockaddr *)&src, sizeof src) != 0) {
            close(fd);
            return -1;
        }
    }
    if (family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        a->sin6_addr = in6addr_loopback;
        len = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof *a;
    }
    if (connect(fd, (struct sockaddr *)&ss, len) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static inline int raw_send_all(int fd, const char *data, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, data, n, MSG_NOSIGNAL);
        if (w <= 0)
            return -1;
        data += w;
        n -= (size_t)w;
    }
    return 0;
}

struct raw_reply {
    int status;
    char head[4096];
    char body[8192];
    size_t body_len;
    bool closed; /* the server closed the connection (or the reply did not fit) instead of answering */
};

/*
 * Reads one response: headers and a Content-Length body, and not a byte more.
 * Pipelined answers can reach the socket together; whatever follows this
 * response stays in the socket for the next call (the header is read a byte
 * at a time so that nothing past it is taken).
 */
static inline void raw_read_reply(int fd, struct raw_reply *r)
{
    char buf[12288];
    size_t have = 0;

    memset(r, 0, sizeof *r);
    while (have < 4 || memcmp(buf + have - 4, "\r\n\r\n", 4) != 0) {
        ssize_t n = have < sizeof r->head - 1 ? recv(fd, buf + have, 1, 0) : -1;
        if (n <= 0) {
            r->closed = true;
            return;
        }
        have += (size_t)n;
    }
    size_t head_len = have;
    snprintf(r->head, sizeof r->head, "%.*s", (int)head_len, buf);
    sscanf(r->head, "HTTP/1.%*d %d", &r->status);
    const char *cl = strcasestr(r->head, "\r\nContent-Length:");
    size_t content_length = cl ? strtoul(cl + 17, NULL, 10) : 0;
    if (content_length >= sizeof r->body || head_len + content_length > sizeof buf) {
        r->closed = true;
        return;
    }
    while (have - head_len < content_length) {
        ssize_t n = recv(fd, buf + have, content_length - (have - head_len), 0);
        if (n <= 0) {
            r->closed = true;
            return;
        }
        have += (size_t)n;
    }
    memcpy(r->body, buf + head_len, content_length);
    r->body_len = content_length;
}

/* One request on a fresh IPv4 connection, and its response. */
static inline void raw_request(int port, const char *raw, size_t raw_len, struct raw_reply *r)
{
    int fd = raw_connect(AF_INET, NULL, port, 5);
    assert_true(fd >= 0);
    assert_int_equal(raw_send_all(fd, raw, raw_len), 0);
    raw_read_reply(fd, r);
    close(fd);
}
#endif
