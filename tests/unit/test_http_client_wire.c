/*
 * The HTTP engine's own client on the wire, against loopback servers in this
 * file that send scripted raw bytes (a thread per connection) and a TLS server
 * with a certificate made at test time: chunked, close-delimited, 1xx, HEAD
 * and 204, malformed and oversize heads, a trickling answer past the whole
 * timeout, keep-alive reuse and the one retry on a connection the peer closed,
 * the pool's bound, the resolver thread, TLS verified and refused, URL and header rules, and
 * many hung transfers beside ones that complete. The response parser alone,
 * fed byte by byte, comes first.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "core/clock.h"
#include "hookd.h"
#include "net/http_client.h"
#include "net/http_response.h"
#include "outbound/request.h"
#include "unit/engine_driver.h"
#include "unit/loopback_server.h"

/* ---- the response parser alone ----------------------------------------------- */

struct body_sink {
    char data[256];
    size_t len;
};

static void sink_body(void *ud, const char *p, size_t n)
{
    struct body_sink *b = ud;

    assert_true(b->len + n < sizeof b->data);
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

/* Feeds s one byte at a time; returns the final rc and how many bytes were the response's. */
static enum http_response_rc feed_bytewise(struct http_response *p, const char *s, struct body_sink *b, size_t *total)
{
    size_t n = strlen(s);

    *total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t used = 0;
        enum http_response_rc rc = http_response_feed(p, s + i, 1, &used, sink_body, b);
        *total += used;
        if (rc != HTTP_RESPONSE_MORE)
            return rc;
    }
    return HTTP_RESPONSE_MORE;
}

static void test_parser_bytewise(void **state)
{
    static struct http_response p;
    struct body_sink b = {0};
    size_t used;
    const char *chunked = "HTTP/1.1 100 Continue\r\n\r\n"
                          "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nRetry-After:  12 \r\n\r\n"
                          "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: yes\r\n\r\nNEXT";

    http_response_init(&p, false);
    assert_int_equal(feed_bytewise(&p, chunked, &b, &used), HTTP_RESPONSE_DONE);
    assert_int_equal(used, strlen(chunked) - 4 - 0); /* "NEXT" is not the response's */
    assert_int_equal(p.status, 200);
    assert_true(p.keep_alive);
    assert_string_equal(b.data, "hello world");
    assert_string_equal(p.retry_after, "12");

    /* HTTP/1.0 without keep-alive: close after; Content-Length framing. */
    memset(&b, 0, sizeof b);
    http_response_init(&p, false);
    assert_int_equal(feed_bytewise(&p, "HTTP/1.0 404 Not Found\r\nContent-Length: 3\r\n\r\nabc", &b, &used),
                     HTTP_RESPONSE_DONE);
    assert_int_equal(p.status, 404);
    assert_false(p.keep_alive);
    assert_string_equal(b.data, "abc");

    /* Bare LF line ends are tolerated; a HEAD answer has no body whatever it says. */
    memset(&b, 0, sizeof b);
    http_response_init(&p, true);
    assert_int_equal(feed_bytewise(&p, "HTTP/1.1 200 OK\nContent-Length: 10\n\n", &b, &used), HTTP_RESPONSE_DONE);
    assert_int_equal(b.len, 0);

    /* Close-delimited: the end of the connection ends it. */
    memset(&b, 0, sizeof b);
    http_response_init(&p, false);
    assert_int_equal(feed_bytewise(&p, "HTTP/1.1 200 OK\r\n\r\nuntil the end", &b, &used), HTTP_RESPONSE_MORE);
    assert_int_equal(http_response_eof(&p), HTTP_RESPONSE_DONE);
    assert_string_equal(b.data, "until the end");
    assert_false(p.keep_alive);

    static const struct {
        const char *in;
        const char *error;
    } bad[] = {
        {"HTTP/1.1 2000 OK\r\n\r\n", "malformed status line"},
        {"HTTP/2 200\r\n\r\n", "malformed status line"},
        {"ICY 200 OK\r\n\r\n", "malformed status line"},
        {"HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n", "malformed response header (folded line)"},
        {"HTTP/1.1 200 OK\r\nBad Name: a\r\n\r\n", "malformed response header line"},
        {"HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", "malformed Content-Length"},
        {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", "conflicting Content-Length headers"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "malformed chunk size"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab", "malformed chunk (no CRLF after its data)"},
        {"HTTP/1.1 101 Switching Protocols\r\n\r\n", "unexpected 101 Switching Protocols"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&b, 0, sizeof b);
        http_response_init(&p, false);
        assert_int_equal(feed_bytewise(&p, bad[i].in, &b, &used), HTTP_RESPONSE_ERROR);
        assert_string_equal(p.error, bad[i].error);
    }
    /* A short body at the end of the connection is an error, not an answer. */
    http_response_init(&p, false);
    assert_int_equal(feed_bytewise(&p, "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nab", &b, &used),
                     HTTP_RESPONSE_MORE);
    assert_int_equal(http_response_eof(&p), HTTP_RESPONSE_ERROR);
}

/* ---- the scripted raw server --------------------------------------------------- */

static bool send_str(int fd, const char *s) { return send_all(fd, s, strlen(s)); }

/* One request's head (bodies are not sent by these tests' requests, or are read as Content-Length says). */
static bool read_request(int fd, char *buf, size_t cap)
{
    size_t n = 0;

    for (;;) {
        char *end = strstr(buf, "\r\n\r\n");
        if (end != NULL) {
            const char *cl = strcasestr(buf, "\r\ncontent-length:");
            size_t want = cl != NULL && cl < end ? strtoul(cl + 17, NULL, 10) : 0;
            size_t have = n - (size_t)(end + 4 - buf);
            while (have < want) {
                char scratch[4096];
                ssize_t r = read(fd, scratch, sizeof scratch);
                if (r <= 0)
                    return false;
                have += (size_t)r;
            }
            return true;
        }
        if (n + 1 >= cap)
            return false;
        ssize_t r = read(fd, buf + n, cap - n - 1);
        if (r <= 0)
            return false;
        n += (size_t)r;
        buf[n] = '\0';
    }
}

/* Answers by path; false ends the connection. nth counts the requests on this connection (1 first). */
static bool answer(int fd, const char *path, int nth)
{
    if (strcmp(path, "/ok") == 0)
        return send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
    if (strcmp(path, "/chunked") == 0)
        return send_str(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                            "5\r\nhello\r\n6;x=y\r\n world\r\n0\r\nX-Sum: 1\r\n\r\n");
    if (strcmp(path, "/close") == 0) {
        send_str(fd, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it until the end");
        return false;
    }
    if (strcmp(path, "/interim") == 0)
        return send_str(fd, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
                            "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok");
    if (strcmp(path, "/head") == 0)
        return send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n");
    if (strcmp(path, "/nocontent") == 0)
        return send_str(fd, "HTTP/1.1 204 No Content\r\n\r\n");
    if (strcmp(path, "/huge-head") == 0) {
        static char line[1100];
        memset(line, 'v', sizeof line - 3);
        memcpy(line + sizeof line - 3, "\r\n", 3);
        if (!send_str(fd, "HTTP/1.1 200 OK\r\n"))
            return false;
        for (int i = 0; i < 70; i++) {
            if (!send_str(fd, "X-Long: ") || !send_str(fd, line))
                return false;
        }
        send_str(fd, "\r\n");
        return false;
    }
    if (strcmp(path, "/bad-status") == 0) {
        send_str(fd, "HTTP/1.1 abc Nope\r\nContent-Length: 0\r\n\r\n");
        return false;
    }
    if (strcmp(path, "/trickle") == 0) {
        if (!send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n"))
            return false;
        for (int i = 0; i < 200; i++) {
            if (!send_str(fd, "x"))
                return false;
            usleep(20 * 1000);
        }
        return false;
    }
    if (strcmp(path, "/drop-second") == 0) {
        /* The second request on a connection is read and the connection closed, unanswered. */
        if (nth >= 2)
            return false;
        return send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst");
    }
    if (strcmp(path, "/partial-second") == 0) {
        if (nth >= 2) {
            send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab");
            return false;
        }
        return send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst");
    }
    if (strcmp(path, "/idle-close") == 0) {
        /* Keep-alive promised, then the connection closed while idle. */
        bool ok = send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        usleep(50 * 1000);
        (void)ok;
        return false;
    }
    if (strcmp(path, "/hang") == 0) {
        char b[512];
        while (read(fd, b, sizeof b) > 0)
            ;
        return false;
    }
    return send_str(fd, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
}

static void *conn_main(void *arg)
{
    struct conn *c = arg;
    struct server *s = c->s;
    char buf[8192];
    int fd, nth = 0;

    pthread_mutex_lock(&s->mu);
    fd = s->fds[c->slot];
    pthread_mutex_unlock(&s->mu);
    for (;;) {
        char method[16] = "", path[256] = "";
        buf[0] = '\0';
        if (!read_request(fd, buf, sizeof buf))
            break;
        nth++;
        atomic_fetch_add(&s->requests, 1);
        pthread_mutex_lock(&s->mu);
        snprintf(s->last, sizeof s->last, "%s", buf);
        pthread_mutex_unlock(&s->mu);
        if (sscanf(buf, "%15s %255s", method, path) != 2)
            break;
        char *q = strchr(path, '?');
        if (q != NULL)
            *q = '\0';
        if (!answer(fd, path, nth))
            break;
    }
    shutdown(fd, SHUT_WR);
    free(c);
    return NULL;
}

static struct server *server_start_on(bool ipv6) { return server_start_with(ipv6, conn_main); }

static struct server *server_start(void) { return server_start_on(false); }

/* ---- driving the engine ------------------------------------------------------- */

static struct http_engine *engine_with(int max, bool allow_private, int64_t timeout_ms, const char *ca_file)
{
    const struct http_engine_options opt = {
        .max_transfers = max,
        .connect_timeout_ms = 2000,
        .timeout_ms = timeout_ms,
        .response_max = 100,
        .allow_private_networks = allow_private,
        .ca_file = ca_file,
    };
    struct http_engine *e = NULL;

    assert_int_equal(http_engine_create(&opt, &e), 0);
    return e;
}

static struct http_engine *engine(int max) { return engine_with(max, true, 5000, NULL); }

/* Submits GET url and runs it to its end. */
static void fetch(struct http_engine *e, const char *method, const char *url, struct seen *out)
{
    struct http_client_request req = {.method = method, .url = url, .classify = request_classify};
    int want = completions + 1;

    memset(out, 0, sizeof *out);
    assert_int_equal(http_engine_submit(e, &req, on_done, out), 0);
    run_until(e, want, 8000);
}

static void fetch_path(struct http_engine *e, struct server *s, const char *method, const char *path, struct seen *out)
{
    char url[256];

    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", s->port, path);
    fetch(e, method, url, out);
}

/* ---- framing ------------------------------------------------------------------ */

static void test_framing(void **state)
{
    struct server *s = server_start();
    struct http_engine *e = engine(4);
    struct seen a;

    completions = 0;
    fetch_path(e, s, "GET", "/chunked", &a);
    assert_int_equal(a.status, 200);
    assert_string_equal(a.body, "hello world");
    assert_false(a.truncated);
    /* A chunked answer leaves the connection reusable. */
    fetch_path(e, s, "GET", "/ok", &a);
    assert_true(a.reused);
    assert_int_equal(atomic_load(&s->accepted), 1);

    fetch_path(e, s, "GET", "/interim", &a);
    assert_int_equal(a.status, 201);
    assert_string_equal(a.body, "ok");

    fetch_path(e, s, "HEAD", "/head", &a);
    assert_int_equal(a.status, 200);
    assert_string_equal(a.body, "");
    fetch_path(e, s, "DELETE", "/nocontent", &a);
    assert_int_equal(a.status, 204);
    assert_string_equal(a.body, "");
    /* Neither waited for a body, and the connection still carries the next request. */
    fetch_path(e, s, "GET", "/ok", &a);
    assert_true(a.reused);
    assert_int_equal(atomic_load(&s->accepted), 1);

    /* Close-delimited: the body is what came before the end; the next request opens a connection. */
    fetch_path(e, s, "GET", "/close", &a);
    assert_int_equal(a.status, 200);
    assert_string_equal(a.body, "all of it until the end");
    assert_true(a.reused); /* it went on the pooled connection, which then ended */
    fetch_path(e, s, "GET", "/ok", &a);
    assert_false(a.reused);
    assert_int_equal(atomic_load(&s->accepted), 2);
    http_engine_destroy(e);
    server_stop(s);
}

static void test_malformed_answers(void **state)
{
    struct server *s = server_start();
    struct http_engine *e = engine(2);
    struct seen a;

    completions = 0;
    fetch_path(e, s, "GET", "/huge-head", &a);
    assert_int_equal(a.transport, TRANSPORT_OTHER);
    assert_int_equal(a.status, 0);
    assert_string_equal(a.error, "other: response header too large");

    fetch_path(e, s, "GET", "/bad-status", &a);
    assert_int_equal(a.transport, TRANSPORT_OTHER);
    assert_string_equal(a.error, "other: malformed status line");
    http_engine_destroy(e);
    server_stop(s);
}

static void test_trickle_hits_the_whole_timeout(void **state)
{
    struct server *s = server_start();
    struct http_engine *e = engine_with(2, true, 300, NULL);
    struct seen a;
    int64_t t0 = clock_mono_ms();

    completions = 0;
    fetch_path(e, s, "GET", "/trickle", &a);
    assert_int_equal(a.transport, TRANSPORT_TIMEOUT);
    assert_int_equal(strncmp(a.error, "timeout: ", 9), 0);
    assert_true(a.duration_ms >= 290);
    assert_true(clock_mono_ms() - t0 < 1500); /* a byte every 20 ms did not extend it */
    http_engine_destroy(e);
    server_stop(s);
}

/* ---- keep-alive and the retry on a closed connection ---------------------------- */

static void test_reuse_and_retry(void **state)
{
    struct server *s = server_start();
    struct http_engine *e = engine(2);
    struct seen a;

    completions = 0;
    /* The second request goes on the kept connection, which the server closes unanswered:
     * it is sent once more on a new connection, and that one is not "reused". */
    fetch_path(e, s, "GET", "/drop-second", &a);
    assert_string_equal(a.body, "first");
    assert_false(a.reused);
    fetch_path(e, s, "GET", "/drop-second", &a);
    assert_int_equal(a.transport, TRANSPORT_OK);
    assert_int_equal(a.status, 200);
    assert_string_equal(a.body, "first");
    assert_false(a.reused);
    assert_int_equal(atomic_load(&s->accepted), 2);
    assert_int_equal(atomic_load(&s->requests), 3);

    /* Once a response byte came, it is never sent again (a new engine: a connection of its own). */
    http_engine_destroy(e);
    e = engine(2);
    fetch_path(e, s, "GET", "/partial-second", &a);
    assert_int_equal(a.status, 200);
    int before = atomic_load(&s->requests);
    fetch_path(e, s, "GET", "/partial-second", &a);
    assert_int_equal(a.transport, TRANSPORT_OTHER);
    assert_string_equal(a.error, "other: connection closed before the response body ended");
    assert_int_equal(atomic_load(&s->requests), before + 1);

    /* A kept connection the peer closes while idle is found dead (its end is heard, or seen on reuse). */
    fetch_path(e, s, "GET", "/idle-close", &a);
    assert_int_equal(a.status, 200);
    int accepted = atomic_load(&s->accepted);
    for (int i = 0; i < 10; i++) {
        http_engine_run(e);
        http_engine_wait(e, 20);
    }
    fetch_path(e, s, "GET", "/ok", &a);
    assert_int_equal(a.status, 200);
    assert_false(a.reused);
    assert_int_equal(atomic_load(&s->accepted), accepted + 1);
    http_engine_destroy(e);
    server_stop(s);
}

/* At most max_transfers connections in all: a new one closes the idle one unused longest. */
static void test_pool_bound(void **state)
{
    struct server *s[3] = {server_start(), server_start(), server_start()};
    struct http_engine *e = engine(2);
    struct seen a;

    completions = 0;
    fetch_path(e, s[0], "GET", "/ok", &a);
    fetch_path(e, s[1], "GET", "/ok", &a);
    fetch_path(e, s[1], "GET", "/ok", &a);
    assert_true(a.reused);
    fetch_path(e, s[2], "GET", "/ok", &a); /* closes s[0]'s, the oldest idle */
    assert_false(a.reused);
    fetch_path(e, s[1], "GET", "/ok", &a);
    assert_true(a.reused);
    fetch_path(e, s[0], "GET", "/ok", &a); /* a new one, closing s[2]'s */
    assert_false(a.reused);
    assert_int_equal(atomic_load(&s[0]->accepted), 2);
    assert_int_equal(atomic_load(&s[1]->accepted), 1);
    fetch_path(e, s[2], "GET", "/ok", &a);
    assert_false(a.reused);
    assert_int_equal(atomic_load(&s[2]->accepted), 2);
    http_engine_destroy(e);
    for (int i = 0; i < 3; i++)
        server_stop(s[i]);
}

/* ---- names, URLs, headers ------------------------------------------------------- */

static void test_resolver_and_urls(void **state)
{
    struct server *s = server_start();
    struct http_engine *e = engine(4);
    struct seen a;
    char url[256], last[8192];

    completions = 0;
    snprintf(url, sizeof url, "http://LocalHost:%d/ok?x=1#frag", s->port);
    fetch(e, "GET", url, &a);
    assert_int_equal(a.transport, TRANSPORT_OK);
    assert_int_equal(a.status, 200);
    server_last(s, last, sizeof last);
    assert_memory_equal(last, "GET /ok?x=1 HTTP/1.1\r\n", 22);
    char host[64];
    snprintf(host, sizeof host, "\r\nHost: localhost:%d\r\n", s->port);
    assert_non_null(strstr(last, host));
    assert_non_null(strstr(last, "\r\nAccept: */*\r\n"));
    /* The second time the name comes from the cache (and the connection from the pool). */
    fetch(e, "GET", url, &a);
    assert_true(a.reused);

    /* Ten at once for a name not in a new engine's cache: one lookup answers them all. */
    struct http_engine *fresh = engine(16);
    static struct seen ten[10];
    for (int i = 0; i < 10; i++) {
        struct http_client_request r10 = {.method = "GET", .url = url};
        assert_int_equal(http_engine_submit(fresh, &r10, on_done, &ten[i]), 0);
    }
    run_until(fresh, completions + 10, 5000);
    for (int i = 0; i < 10; i++)
        assert_int_equal(ten[i].status, 200);
    http_engine_destroy(fresh);

    snprintf(url, sizeof url, "http://name.that.does.not.exist.invalid:%d/ok", s->port);
    fetch(e, "GET", url, &a);
    assert_int_equal(a.transport, TRANSPORT_DNS);
    assert_int_equal(strncmp(a.error, "dns: ", 5), 0);

    /* A query alone gets the root path. */
    snprintf(url, sizeof url, "http://127.0.0.1:%d?q=1", s->port);
    fetch(e, "GET", url, &a);
    server_last(s, last, sizeof last);
    assert_memory_equal(last, "GET /?q=1 HTTP/1.1\r\n", 20);

    /* Refused at submit: userinfo, bytes a request line cannot carry, no scheme, bad ports. */
    static const char *const bad[] = {
        "http://user:pw@127.0.0.1/ok", "http://127.0.0.1/a b", "http://127.0.0.1/\x01", "http://127.0.0.1/\xc3\xa9",
        "127.0.0.1/ok", "http://127.0.0.1:99999/", "http://127.0.0.1:x/", "http:///ok", "http://[::1/",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct http_client_request req = {.method = "GET", .url = bad[i]};
        assert_int_equal(http_engine_submit(e, &req, on_done, &a), HOOKD_EINVAL);
    }
    /* Header lines: "Name:" suppresses the engine's, "Name: v" replaces it, order kept. */
    const char *const lines[] = {"X-First: 1", "Accept:", "User-Agent: custom/1", "X-Second: 2"};
    struct http_client_request req = {.method = "POST", .url = url, .headers = lines, .n_headers = 4};
    snprintf(url, sizeof url, "http://127.0.0.1:%d/ok", s->port);
    int want = completions + 1;
    assert_int_equal(http_engine_submit(e, &req, on_done, &a), 0);
    run_until(e, want, 5000);
    server_last(s, last, sizeof last);
    assert_null(strcasestr(last, "\r\nAccept"));
    assert_null(strstr(last, "hookd/"));
    assert_non_null(strstr(last, "\r\nX-First: 1\r\nUser-Agent: custom/1\r\nX-Second: 2\r\nContent-Length: 0\r\n\r\n"));
    const char *const nul_name[] = {"no colon here"};
    req.headers = nul_name;
    req.n_headers = 1;
    assert_int_equal(http_engine_submit(e, &req, on_done, &a), HOOKD_EINVAL);
    http_engine_destroy(e);
    server_stop(s);

    /* IPv6 literals: brackets in the URL and in Host. */
    struct server *s6 = server_start_on(true);
    if (s6 == NULL)
        return; /* no IPv6 loopback here */
    e = engine(2);
    snprintf(url, sizeof url, "http://[::1]:%d/ok", s6->port);
    fetch(e, "GET", url, &a);
    assert_int_equal(a.status, 200);
    server_last(s6, last, sizeof last);
    snprintf(host, sizeof host, "\r\nHost: [::1]:%d\r\n", s6->port);
    assert_non_null(strstr(last, host));
    http_engine_destroy(e);
    server_stop(s6);
}

static void test_ssrf_by_name(void **state)
{
    struct server *s = server_start();
    struct http_engine *e = engine_with(2, false, 5000, NULL);
    struct seen a;
    char url[256];

    completions = 0;
    snprintf(url, sizeof url, "http://localhost:%d/ok", s->port);
    fetch(e, "GET", url, &a);
    assert_int_equal(a.transport, TRANSPORT_BLOCKED);
    assert_string_equal(a.error, "address refused by SSRF guard");
    snprintf(url, sizeof url, "http://10.1.2.3:%d/ok", s->port);
    fetch(e, "GET", url, &a);
    assert_int_equal(a.transport, TRANSPORT_BLOCKED);
    assert_int_equal(atomic_load(&s->accepted), 0);
    http_engine_destroy(e);
    server_stop(s);
}

/* ---- many hung, others complete ------------------------------------------------ */

static void test_many_hung_beside_healthy(void **state)
{
    enum { HUNG = 150, HEALTHY = 100 };
    struct server *s = server_start();
    struct http_engine *e = engine_with(HUNG + 4, true, 20000, NULL);
    static struct seen hung[HUNG];
    struct seen a;
    char url[128];
    int64_t t0;

    completions = 0;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/hang", s->port);
    for (int i = 0; i < HUNG; i++) {
        struct http_client_request req = {.method = "GET", .url = url};
        memset(&hung[i], 0, sizeof hung[i]);
        assert_int_equal(http_engine_submit(e, &req, on_done, &hung[i]), 0);
    }
    for (int i = 0; i < 20; i++) {
        http_engine_run(e);
        http_engine_wait(e, 10);
    }
    t0 = clock_mono_ms();
    for (int i = 0; i < HEALTHY; i++) {
        fetch_path(e, s, "GET", "/ok", &a);
        assert_int_equal(a.status, 200);
    }
    assert_true(clock_mono_ms() - t0 < 5000);
    assert_int_equal(completions, HEALTHY);
    assert_int_equal(http_engine_room(e), 4);
    http_engine_cancel_all(e);
    for (int i = 0; i < HUNG; i++)
        assert_true(hung[i].cancelled);
    assert_int_equal(http_engine_room(e), HUNG + 4);
    http_engine_destroy(e);
    server_stop(s);
}

/* ---- TLS --------------------------------------------------------------------- */

struct tls_server {
    int lfd, port;
    _Atomic(SSL_CTX *) ctx; /* the certificate served to the next connection */
    pthread_t thread;
    atomic_bool stop;
    atomic_bool drop_after_handshake; /* close at once, the request unread */
    atomic_int handshakes;
};

/* A self-signed certificate for the names in san (and its key) in PEM files. */
static void make_cert(const char *cert_path, const char *key_path, const char *san_text)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    X509V3_CTX v3;
    FILE *f;

    assert_non_null(key);
    assert_non_null(x);
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -60);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600);
    X509_set_pubkey(x, key);
    X509_NAME *name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"hookd test", -1, -1, 0);
    X509_set_issuer_name(x, name);
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
    X509_EXTENSION *san = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, san_text);
    X509_EXTENSION *bc = X509V3_EXT_conf_nid(NULL, &v3, NID_basic_constraints, "critical,CA:TRUE");
    assert_non_null(san);
    assert_non_null(bc);
    X509_add_ext(x, san, -1);
    X509_add_ext(x, bc, -1);
    X509_EXTENSION_free(san);
    X509_EXTENSION_free(bc);
    assert_true(X509_sign(x, key, EVP_sha256()) > 0);
    f = fopen(cert_path, "w");
    assert_non_null(f);
    PEM_write_X509(f, x);
    fclose(f);
    f = fopen(key_path, "w");
    assert_non_null(f);
    PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL);
    fclose(f);
    X509_free(x);
    EVP_PKEY_free(key);
}

static void *tls_main(void *arg)
{
    struct tls_server *ts = arg;
    int fd;

    while ((fd = accept_one(ts->lfd, &ts->stop)) >= 0) {
        struct timeval tv = {3, 0}, idle = {0, 300 * 1000};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        SSL *ssl = SSL_new(atomic_load(&ts->ctx));
        SSL_set_fd(ssl, fd);
        if (SSL_accept(ssl) == 1) {
            char buf[4096];
            size_t n = 0;
            atomic_fetch_add(&ts->handshakes, 1);
            if (atomic_load(&ts->drop_after_handshake)) {
                SSL_free(ssl);
                close(fd);
                continue;
            }
            /* One connection at a time: an idle one is let go soon, so the next is accepted. */
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &idle, sizeof idle);
            for (;;) { /* keep-alive: answer every request until the client goes */
                int r = SSL_read(ssl, buf + n, (int)(sizeof buf - n - 1));
                if (r <= 0)
                    break;
                n += (size_t)r;
                buf[n] = '\0';
                char *end = strstr(buf, "\r\n\r\n");
                if (end == NULL)
                    continue;
                /* The body, read and counted: its length is the answer. */
                const char *cl = strcasestr(buf, "\r\ncontent-length:");
                size_t want = cl != NULL && cl < end ? strtoul(cl + 17, NULL, 10) : 0;
                size_t have = n - (size_t)(end + 4 - buf);
                while (have < want) {
                    char scratch[16384];
                    r = SSL_read(ssl, scratch, sizeof scratch);
                    if (r <= 0)
                        break;
                    have += (size_t)r;
                }
                if (have < want)
                    break;
                char ans[128];
                int an = snprintf(ans, sizeof ans, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s",
                                  want > 0 ? 12 : 6, want > 0 ? "" : "secure");
                if (want > 0)
                    an += snprintf(ans + an, sizeof ans - (size_t)an, "%012zu", have);
                if (SSL_write(ssl, ans, an) <= 0)
                    break;
                n = 0;
                buf[0] = '\0';
            }
        }
        SSL_free(ssl);
        close(fd);
        ERR_clear_error();
    }
    return NULL;
}

static SSL_CTX *server_ctx(const char *cert, const char *key)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

    assert_non_null(ctx);
    assert_int_equal(SSL_CTX_use_certificate_file(ctx, cert, SSL_FILETYPE_PEM), 1);
    assert_int_equal(SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM), 1);
    return ctx;
}

static void test_tls(void **state)
{
    char dir[] = "/tmp/hookd-tls-XXXXXX", cert_name[128], key_name[128], cert_ip[128], key_ip[128], url[128];
    struct tls_server ts = {0};
    struct seen a;

    assert_non_null(mkdtemp(dir));
    snprintf(cert_name, sizeof cert_name, "%s/name.pem", dir);
    snprintf(key_name, sizeof key_name, "%s/name.key", dir);
    snprintf(cert_ip, sizeof cert_ip, "%s/ip.pem", dir);
    snprintf(key_ip, sizeof key_ip, "%s/ip.key", dir);
    make_cert(cert_name, key_name, "DNS:localhost");
    make_cert(cert_ip, key_ip, "IP:127.0.0.1");
    SSL_CTX *by_name = server_ctx(cert_name, key_name), *by_ip = server_ctx(cert_ip, key_ip);
    atomic_store(&ts.ctx, by_name);
    ts.lfd = listen_on(false, &ts.port);
    assert_int_equal(pthread_create(&ts.thread, NULL, tls_main, &ts), 0);
    completions = 0;

    /* Trusted through the option, by name (SNI, host check); the connection is kept. */
    struct http_engine *e = engine_with(2, true, 5000, cert_name);
    snprintf(url, sizeof url, "https://localhost:%d/ok", ts.port);
    fetch(e, "GET", url, &a);
    assert_int_equal(a.transport, TRANSPORT_OK);
    assert_int_equal(a.status, 200);
    assert_string_equal(a.body, "secure");
    fetch(e, "GET", url, &a);
    assert_true(a.reused);
    assert_int_equal(atomic_load(&ts.handshakes), 1);
    /* A body far larger than a socket's buffer goes out in partial TLS writes. */
    static char big[3 * 1024 * 1024];
    memset(big, 'z', sizeof big);
    struct http_client_request post = {.method = "POST", .url = url, .body = big, .body_len = sizeof big};
    int want = completions + 1;
    memset(&a, 0, sizeof a);
    assert_int_equal(http_engine_submit(e, &post, on_done, &a), 0);
    run_until(e, want, 10000);
    assert_int_equal(a.status, 200);
    assert_string_equal(a.body, "000003145728");
    assert_true(a.reused);

    /* The same certificate reached by an address it does not name. */
    snprintf(url, sizeof url, "https://127.0.0.1:%d/ok", ts.port);
    fetch(e, "GET", url, &a);
    assert_int_equal(a.transport, TRANSPORT_CONNECT);
    assert_string_equal(a.error, "connect: TLS handshake with 127.0.0.1 failed: certificate verify failed: "
                                 "IP address mismatch");
    http_engine_destroy(e);

    /* A certificate for the address: verified as an IP, through the option and through SSL_CERT_FILE. */
    atomic_store(&ts.ctx, by_ip);
    e = engine_with(2, true, 5000, cert_ip);
    fetch(e, "GET", url, &a);
    assert_int_equal(a.status, 200);
    http_engine_destroy(e);
    setenv("SSL_CERT_FILE", cert_ip, 1);
    e = engine_with(2, true, 5000, NULL);
    fetch(e, "GET", url, &a);
    assert_int_equal(a.status, 200);
    http_engine_destroy(e);
    unsetenv("SSL_CERT_FILE");

    /* A peer that goes away while a large body is written: no SIGPIPE, even where it is not ignored. */
    atomic_store(&ts.drop_after_handshake, true);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGPIPE, SIG_DFL);
        struct http_engine *ce = engine_with(2, true, 5000, cert_ip);
        static char body[4 * 1024 * 1024];
        struct http_client_request big_post = {.method = "POST", .url = url, .body = body, .body_len = sizeof body};
        struct seen got = {0};
        int64_t end = clock_mono_ms() + 8000;
        if (http_engine_submit(ce, &big_post, on_done, &got) != 0)
            _exit(2);
        while (got.calls == 0 && clock_mono_ms() < end) {
            http_engine_run(ce);
            http_engine_wait(ce, 20);
        }
        _exit(got.calls == 1 && got.transport != TRANSPORT_OK ? 0 : 3);
    }
    int wstatus = 0;
    assert_int_equal(waitpid(pid, &wstatus, 0), pid);
    assert_false(WIFSIGNALED(wstatus));
    assert_true(WIFEXITED(wstatus));
    assert_int_equal(WEXITSTATUS(wstatus), 0);
    atomic_store(&ts.drop_after_handshake, false);

    /* Not trusted: the system store does not know it. */
    e = engine_with(2, true, 5000, NULL);
    fetch(e, "GET", url, &a);
    assert_int_equal(a.transport, TRANSPORT_CONNECT);
    assert_non_null(strstr(a.error, "connect: TLS handshake with 127.0.0.1 failed: certificate verify failed: "));
    http_engine_destroy(e);

    atomic_store(&ts.stop, true);
    pthread_join(ts.thread, NULL);
    close(ts.lfd);
    SSL_CTX_free(by_name);
    SSL_CTX_free(by_ip);
    unlink(cert_name);
    unlink(key_name);
    unlink(cert_ip);
    unlink(key_ip);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parser_bytewise),
        cmocka_unit_test(test_framing),
        cmocka_unit_test(test_malformed_answers),
        cmocka_unit_test(test_trickle_hits_the_whole_timeout),
        cmocka_unit_test(test_reuse_and_retry),
        cmocka_unit_test(test_pool_bound),
        cmocka_unit_test(test_resolver_and_urls),
        cmocka_unit_test(test_ssrf_by_name),
        cmocka_unit_test(test_many_hung_beside_healthy),
        cmocka_unit_test(test_tls),
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
