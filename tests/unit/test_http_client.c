/*
 * The HTTP engine on its own, against a scripted loopback server in this file
 * (a thread per connection, keep-alive, answers chosen by path): 2xx, 5xx with
 * Retry-After, connect refused, a server that accepts and never answers,
 * snippet cap and hard abort, no redirects, connection reuse, method changes
 * on a reused handle, the SSRF guard, room and cancellation, and two
 * classifiers (outbound delivery and an inbound-forward table) on the same results.
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
#include <unistd.h>

#include "core/clock.h"
#include "hookd.h"
#include "net/http_client.h"
#include "outbound/request.h"
#include "unit/engine_driver.h"
#include "unit/loopback_server.h"

/* ---- the scripted server ------------------------------------------------------ */

#define BIG_BODY (200 * 1000)

static bool respond(int fd, const char *status, const char *extra, const char *body)
{
    char head[512];
    int n = snprintf(head, sizeof head, "HTTP/1.1 %s\r\n%sContent-Length: %zu\r\n\r\n", status, extra, strlen(body));
    return send_all(fd, head, (size_t)n) && send_all(fd, body, strlen(body));
}

static bool respond_big(int fd)
{
    char chunk[4096];
    char head[128];
    int n = snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", BIG_BODY);

    memset(chunk, 'a', sizeof chunk);
    if (!send_all(fd, head, (size_t)n))
        return false;
    for (int left = BIG_BODY; left > 0; left -= (int)sizeof chunk) {
        if (!send_all(fd, chunk, left < (int)sizeof chunk ? (size_t)left : sizeof chunk))
            return false;
    }
    return true;
}

/*
 * Reads one request: the head and as much of the body as fits into buf (the
 * rest of the Content-Length bytes are read and counted, not kept); false at
 * EOF or error. *body_len is the body's full length.
 */
static bool read_request(int fd, char *buf, size_t cap, size_t *body_len)
{
    size_t n = 0, head = 0, want = 0, extra = 0;
    char scratch[16384];

    for (;;) {
        ssize_t r;
        char *end;
        if (head == 0 && (end = strstr(buf, "\r\n\r\n")) != NULL) {
            const char *cl = strcasestr(buf, "\r\ncontent-length:");
            head = (size_t)(end + 4 - buf);
            want = cl != NULL && cl < end ? strtoul(cl + 17, NULL, 10) : 0;
        }
        if (head > 0 && n + extra - head >= want)
            break;
        if (n + 1 < cap)
            r = read(fd, buf + n, cap - n - 1);
        else if (head > 0)
            r = read(fd, scratch, sizeof scratch);
        else
            return false; /* a head larger than buf */
        if (r <= 0)
            return false;
        if (n + 1 < cap) {
            n += (size_t)r;
            buf[n] = '\0';
        } else {
            extra += (size_t)r;
        }
    }
    *body_len = want;
    return true;
}

static void *conn_main(void *arg)
{
    struct conn *c = arg;
    struct server *s = c->s;
    int fd;
    char buf[8192];
    size_t body_len;

    pthread_mutex_lock(&s->mu);
    fd = s->fds[c->slot];
    pthread_mutex_unlock(&s->mu);
    for (;;) {
        char method[16] = "", path[128] = "";
        bool ok = true;

        buf[0] = '\0';
        if (!read_request(fd, buf, sizeof buf, &body_len))
            break;
        atomic_fetch_add(&s->requests, 1);
        pthread_mutex_lock(&s->mu);
        snprintf(s->last, sizeof s->last, "%s", buf);
        s->last_body_len = body_len;
        pthread_mutex_unlock(&s->mu);
        if (sscanf(buf, "%15s %127s", method, path) != 2)
            break;
        if (strcmp(path, "/ok") == 0 || strcmp(path, "/echo") == 0)
            ok = respond(fd, "200 OK", "", "hello");
        else if (strcmp(path, "/fail") == 0)
            ok = respond(fd, "503 Service Unavailable", "Retry-After: 7\r\n", "busy");
        else if (strcmp(path, "/conflict") == 0)
            ok = respond(fd, "409 Conflict", "", "later");
        else if (strcmp(path, "/bad") == 0)
            ok = respond(fd, "422 Unprocessable Entity", "", "no");
        else if (strcmp(path, "/redirect") == 0)
            ok = respond(fd, "302 Found", "Location: /ok\r\n", "");
        else if (strcmp(path, "/big") == 0)
            ok = respond_big(fd);
        else if (strcmp(path, "/hang") == 0)
            while (read(fd, buf, sizeof buf) > 0) /* never answers; ends when the client goes */
                ;
        else
            ok = respond(fd, "404 Not Found", "", "");
        if (!ok || strcmp(path, "/hang") == 0)
            break;
    }
    pthread_mutex_lock(&s->mu);
    s->fds[c->slot] = -1;
    pthread_mutex_unlock(&s->mu);
    close(fd);
    free(c);
    return NULL;
}

static struct server *server_start(void) { return server_start_with(false, conn_main); }

/* ---- a second classifier: what an inbound forward makes of an answer ---------- */

enum forward_outcome { FORWARD_PROCESSED, FORWARD_DEFERRED, FORWARD_QUARANTINED, FORWARD_RETRY };

static int forward_classify(const struct http_client_result *res)
{
    if (res->transport != TRANSPORT_OK)
        return res->transport == TRANSPORT_BLOCKED ? FORWARD_QUARANTINED : FORWARD_RETRY;
    if (res->status >= 200 && res->status <= 299)
        return FORWARD_PROCESSED;
    if (res->status == 409 || res->status == 425)
        return FORWARD_DEFERRED;
    if (res->status >= 500)
        return FORWARD_RETRY;
    return FORWARD_QUARANTINED;
}

/* ---- driving the engine ------------------------------------------------------- */

/* Submits its request once more from inside the first completion. */
struct resubmit {
    struct http_engine *e;
    const struct http_client_request *req;
    struct seen first, second;
    int submitted; /* http_engine_submit's answer from inside the callback */
};

static void on_done_resubmit(void *arg, const struct http_client_result *res)
{
    struct resubmit *rs = arg;

    on_done(&rs->first, res);
    rs->submitted = http_engine_submit(rs->e, rs->req, on_done, &rs->second);
}

static struct http_engine *engine(int max, bool allow_private, size_t response_max, size_t abort_at)
{
    const struct http_engine_options opt = {
        .max_transfers = max,
        .connect_timeout_ms = 2000,
        .timeout_ms = 5000,
        .response_max = response_max,
        .response_abort = abort_at,
        .allow_private_networks = allow_private,
    };
    struct http_engine *e = NULL;

    assert_int_equal(http_engine_create(&opt, &e), 0);
    return e;
}

static struct http_client_request get(char *url, size_t n, const struct server *s, const char *path)
{
    snprintf(url, n, "http://127.0.0.1:%d%s", s != NULL ? s->port : 9, path);
    return (struct http_client_request){.method = "GET", .url = url, .classify = request_classify};
}

/* ---- tests -------------------------------------------------------------------- */

static void test_answers_and_two_classifiers(void **state)
{
    struct server *s = server_start();
    struct http_engine *e = engine(8, true, 4096, 0);
    static const struct {
        const char *path;
        int status;
        const char *body;
        enum outcome outbound;
        enum forward_outcome forward;
    } cases[] = {
        {"/ok", 200, "hello", OUTCOME_SUCCESS, FORWARD_PROCESSED},
        {"/fail", 503, "busy", OUTCOME_RETRY, FORWARD_RETRY},
        {"/conflict", 409, "later", OUTCOME_FAIL, FORWARD_DEFERRED},
        {"/bad", 422, "no", OUTCOME_FAIL, FORWARD_QUARANTINED},
        {"/redirect", 302, "", OUTCOME_FAIL, FORWARD_QUARANTINED}, /* never followed */
    };
    enum { N = sizeof cases / sizeof cases[0] };
    struct seen seen[N] = {0};
    char urls[N][128];

    completions = 0;
    for (size_t i = 0; i < N; i++) {
        struct http_client_request req = get(urls[i], sizeof urls[i], s, cases[i].path);
        assert_int_equal(http_engine_submit(e, &req, on_done, &seen[i]), 0);
    }
    assert_int_equal(http_engine_room(e), 8 - N);
    run_until(e, N, 5000);
    for (size_t i = 0; i < N; i++) {
        assert_int_equal(seen[i].calls, 1);
        assert_int_equal(seen[i].transport, TRANSPORT_OK);
        assert_int_equal(seen[i].status, cases[i].status);
        assert_string_equal(seen[i].body, cases[i].body);
        assert_false(seen[i].truncated);
        assert_string_equal(seen[i].error, "");
        assert_int_equal(seen[i].outcome, cases[i].outbound);
        assert_int_equal(seen[i].forward, cases[i].forward);
        assert_true(seen[i].started_at_ms > 0);
    }
    assert_string_equal(seen[1].retry_after, "7");
    assert_int_equal(seen[1].retry_after_ms, 7000);
    assert_string_equal(seen[0].retry_after, "");
    assert_int_equal(seen[0].retry_after_ms, -1);
    /* The redirect was answered, not followed: five requests, not six. */
    assert_int_equal(atomic_load(&s->requests), N);
    assert_int_equal(http_engine_room(e), 8);

    /* Without a classifier the outcome is -1. */
    struct seen plain = {0};
    struct http_client_request req = get(urls[0], sizeof urls[0], s, "/ok");
    req.classify = NULL;
    assert_int_equal(http_engine_submit(e, &req, on_done, &plain), 0);
    run_until(e, N + 1, 5000);
    assert_int_equal(plain.status, 200);
    assert_int_equal(plain.outcome, -1);
    http_engine_destroy(e);
    server_stop(s);
}

static void test_keep_alive_and_methods_on_one_handle(void **state)
{
    struct server *s = server_start();
    struct http_engine *e = engine(1, true, 4096, 0);
    const char *const headers[] = {"content-type: application/json", "x-test: yes"};
    static char body[1536 * 1024]; /* past libcurl's threshold for "Expect: 100-continue" (1 MiB) */
    struct seen a = {0}, b = {0}, c = {0}, d = {0};
    char url[128], last[8192];

    memset(body, 'b', sizeof body);
    memcpy(body, "{\"a\":\"", 6);
    memcpy(body + sizeof body - 3, "\"}", 3);
    completions = 0;
    struct http_client_request post = get(url, sizeof url, s, "/echo");
    post.method = "POST";
    post.headers = headers;
    post.n_headers = 2;
    post.body = body;
    post.body_len = strlen(body);
    assert_int_equal(http_engine_submit(e, &post, on_done, &a), 0);
    run_until(e, 1, 5000);
    assert_int_equal(a.status, 200);
    server_last(s, last, sizeof last);
    assert_memory_equal(last, "POST /echo HTTP/1.1\r\n", 21);
    assert_non_null(strcasestr(last, "\r\nx-test: yes\r\n"));
    assert_non_null(strcasestr(last, "\r\ncontent-length: 1572863\r\n"));
    assert_non_null(strcasestr(last, "\r\nuser-agent: hookd/"));
    assert_null(strcasestr(last, "\r\nexpect:"));
    assert_non_null(strstr(last, "\r\n\r\n{\"a\":\"bbbb"));
    pthread_mutex_lock(&s->mu);
    assert_int_equal(s->last_body_len, sizeof body - 1);
    pthread_mutex_unlock(&s->mu);

    /* The same handle, now a GET: no stale body, no stale headers; the connection is reused. */
    struct http_client_request g = get(url, sizeof url, s, "/echo");
    assert_int_equal(http_engine_submit(e, &g, on_done, &b), 0);
    run_until(e, 2, 5000);
    assert_int_equal(b.status, 200);
    assert_true(b.reused);
    server_last(s, last, sizeof last);
    assert_memory_equal(last, "GET /echo HTTP/1.1\r\n", 20);
    assert_null(strcasestr(last, "content-length"));
    assert_null(strcasestr(last, "x-test"));
    assert_null(strstr(last, "{\"a\""));

    /* A bodiless PUT, then HEAD. */
    g.method = "PUT";
    assert_int_equal(http_engine_submit(e, &g, on_done, &c), 0);
    run_until(e, 3, 5000);
    server_last(s, last, sizeof last);
    assert_memory_equal(last, "PUT /echo HTTP/1.1\r\n", 20);
    assert_non_null(strcasestr(last, "\r\ncontent-length: 0\r\n"));
    g.method = "HEAD";
    g.url = url;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/ok", s->port);
    assert_int_equal(http_engine_submit(e, &g, on_done, &d), 0);
    run_until(e, 4, 5000);
    server_last(s, last, sizeof last);
    assert_memory_equal(last, "HEAD /ok HTTP/1.1\r\n", 19);
    assert_int_equal(d.status, 200);
    assert_string_equal(d.body, "");
    /* Four requests, one connection. */
    assert_int_equal(atomic_load(&s->accepted), 1);
    assert_int_equal(atomic_load(&s->requests), 4);

    /* Bad requests are refused at submit, and their done never runs. */
    struct http_client_request bad = g;
    bad.method = "get";
    assert_int_equal(http_engine_submit(e, &bad, on_done, &d), HOOKD_EINVAL);
    bad.method = "GET";
    bad.n_headers = HTTP_CLIENT_MAX_HEADERS + 1;
    bad.headers = headers;
    assert_int_equal(http_engine_submit(e, &bad, on_done, &d), HOOKD_EINVAL);
    /* A line with CR or LF would let its value start headers of its own. */
    const char *const injected[] = {"webhook-id: msg_1\r\nAuthorization: Bearer forged"};
    const char *const lf[] = {"x-a: 1\nx-b: 2"};
    bad.headers = injected;
    bad.n_headers = 1;
    assert_int_equal(http_engine_submit(e, &bad, on_done, &d), HOOKD_EINVAL);
    bad.headers = lf;
    assert_int_equal(http_engine_submit(e, &bad, on_done, &d), HOOKD_EINVAL);
    assert_int_equal(d.calls, 1);
    assert_int_equal(atomic_load(&s->requests), 4);
    assert_int_equal(http_engine_room(e), 1);
    http_engine_destroy(e);
    server_stop(s);
}

static void test_connect_refused(void **state)
{
    struct http_engine *e = engine(2, true, 4096, 0);
    struct seen a = {0};
    char url[128];
    int port;
    int fd = listen_on(false, &port); /* bound, then closed: nothing answers there */

    close(fd);
    completions = 0;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/ok", port);
    struct http_client_request req = {.method = "POST", .url = url, .body = "{}", .body_len = 2,
                                      .classify = request_classify};
    assert_int_equal(http_engine_submit(e, &req, on_done, &a), 0);
    run_until(e, 1, 5000);
    assert_int_equal(a.transport, TRANSPORT_CONNECT);
    assert_int_equal(a.status, 0);
    assert_int_equal(strncmp(a.error, "connect: ", 9), 0);
    assert_int_equal(a.outcome, OUTCOME_RETRY);
    assert_int_equal(a.forward, FORWARD_RETRY);
    http_engine_destroy(e);
}

static void test_timeout_on_a_silent_server(void **state)
{
    struct server *s = server_start();
    struct http_engine *e = engine(2, true, 4096, 0);
    struct seen a = {0};
    char url[128];
    int64_t t0;

    completions = 0;
    struct http_client_request req = get(url, sizeof url, s, "/hang");
    req.timeout_ms = 300;
    t0 = clock_mono_ms();
    assert_int_equal(http_engine_submit(e, &req, on_done, &a), 0);
    run_until(e, 1, 5000);
    assert_int_equal(a.transport, TRANSPORT_TIMEOUT);
    assert_int_equal(strncmp(a.error, "timeout: ", 9), 0);
    assert_int_equal(a.outcome, OUTCOME_RETRY);
    assert_true(a.duration_ms >= 290);
    assert_true(clock_mono_ms() - t0 < 3000);
    assert_int_equal(atomic_load(&s->accepted), 1); /* it did connect: the answer timed out */
    http_engine_destroy(e);
    server_stop(s);
}

static void test_response_caps(void **state)
{
    struct server *s = server_start();
    struct http_engine *e = engine(2, true, 16, 0);
    struct seen a = {0}, b = {0}, c = {0};
    char url[128];

    completions = 0;
    struct http_client_request req = get(url, sizeof url, s, "/big");
    assert_int_equal(http_engine_submit(e, &req, on_done, &a), 0);
    run_until(e, 1, 5000);
    assert_int_equal(a.status, 200);
    assert_int_equal(a.body_len, 16);
    assert_string_equal(a.body, "aaaaaaaaaaaaaaaa");
    assert_true(a.truncated);
    assert_false(a.aborted);

    req.response_max = 4; /* the request's own cap */
    assert_int_equal(http_engine_submit(e, &req, on_done, &b), 0);
    run_until(e, 2, 5000);
    assert_int_equal(b.body_len, 4);
    assert_true(b.truncated);
    http_engine_destroy(e);

    /* Past the hard cap the transfer is ended; the status that arrived still counts. */
    e = engine(2, true, 16, 64 * 1024);
    req.response_max = 0;
    assert_int_equal(http_engine_submit(e, &req, on_done, &c), 0);
    run_until(e, 3, 5000);
    assert_int_equal(c.transport, TRANSPORT_OK);
    assert_int_equal(c.status, 200);
    assert_true(c.aborted);
    assert_true(c.truncated);
    assert_int_equal(c.body_len, 16);
    assert_int_equal(c.outcome, OUTCOME_SUCCESS);
    http_engine_destroy(e);
    server_stop(s);
}

static void test_ssrf_guard(void **state)
{
    struct server *s = server_start();
    struct http_engine *e = engine(4, false, 4096, 0);
    static const char *const hosts[] = {"127.0.0.1", "localhost", "[::1]", "[::ffff:127.0.0.1]"};
    enum { N = sizeof hosts / sizeof hosts[0] };
    struct seen seen[N] = {0}, ftp = {0};
    char u[N][128], f[128];

    completions = 0;
    for (size_t i = 0; i < N; i++) {
        snprintf(u[i], sizeof u[i], "http://%s:%d/ok", hosts[i], s->port);
        struct http_client_request req = {.method = "GET", .url = u[i], .classify = request_classify};
        assert_int_equal(http_engine_submit(e, &req, on_done, &seen[i]), 0);
    }
    run_until(e, N, 5000);
    for (size_t i = 0; i < N; i++) {
        assert_int_equal(seen[i].transport, TRANSPORT_BLOCKED);
        assert_int_equal(seen[i].status, 0);
        assert_string_equal(seen[i].error, "address refused by SSRF guard");
        assert_int_equal(seen[i].outcome, OUTCOME_FAIL); /* not retried */
    }
    /* Refused before connect(): the server never saw a connection. */
    assert_int_equal(atomic_load(&s->accepted), 0);

    /* Only http and https. */
    snprintf(f, sizeof f, "ftp://127.0.0.1:%d/", s->port);
    struct http_client_request req = {.method = "GET", .url = f, .classify = request_classify};
    assert_int_equal(http_engine_submit(e, &req, on_done, &ftp), 0);
    run_until(e, N + 1, 5000);
    assert_int_equal(ftp.transport, TRANSPORT_BLOCKED);
    http_engine_destroy(e);

    /* The same server with private networks allowed answers. */
    struct seen ok = {0};
    e = engine(4, true, 4096, 0);
    struct http_client_request again = {.method = "GET", .url = u[0], .classify = request_classify};
    assert_int_equal(http_engine_submit(e, &again, on_done, &ok), 0);
    run_until(e, N + 2, 5000);
    assert_int_equal(ok.status, 200);
    assert_int_equal(atomic_load(&s->accepted), 1);
    http_engine_destroy(e);
    server_stop(s);
}

static void test_room_cancel_and_destroy(void **state)
{
    struct server *s = server_start();
    struct http_engine *e = engine(1, true, 4096, 0);
    struct seen a = {0}, b = {0}, c = {0};
    char url[128];

    completions = 0;
    struct http_client_request req = get(url, sizeof url, s, "/hang");
    assert_int_equal(http_engine_submit(e, &req, on_done, &a), 0);
    assert_int_equal(http_engine_room(e), 0);
    assert_int_equal(http_engine_submit(e, &req, on_done, &b), HOOKD_EBUSY);
    for (int i = 0; i < 10; i++) { /* let it connect and send */
        http_engine_run(e);
        http_engine_wait(e, 10);
    }
    assert_int_equal(a.calls, 0);
    http_engine_cancel_all(e);
    assert_int_equal(a.calls, 1);
    assert_true(a.cancelled);
    assert_int_equal(a.outcome, -1);
    assert_int_equal(b.calls, 0);
    assert_int_equal(http_engine_room(e), 1);

    /* A done run by cancel_all may submit again: the new transfer is not cancelled with the old ones. */
    struct http_engine *two = engine(2, true, 4096, 0);
    struct resubmit rs = {.e = two, .req = &req};
    completions = 0;
    assert_int_equal(http_engine_submit(two, &req, on_done_resubmit, &rs), 0);
    http_engine_run(two);
    http_engine_cancel_all(two);
    assert_int_equal(rs.first.calls, 1);
    assert_true(rs.first.cancelled);
    assert_int_equal(rs.submitted, 0);
    assert_int_equal(rs.second.calls, 0);
    assert_int_equal(http_engine_room(two), 1);
    http_engine_cancel_all(two);
    assert_int_equal(rs.second.calls, 1);
    assert_true(rs.second.cancelled);
    assert_int_equal(http_engine_room(two), 2);
    http_engine_destroy(two);

    /* A wake-up from another thread ends a wait early. */
    int64_t t0 = clock_mono_ms();
    http_engine_wakeup(e);
    http_engine_wait(e, 5000);
    assert_true(clock_mono_ms() - t0 < 2500);

    /* Destroy with a transfer in flight: no callback, nothing leaked (ASan). */
    assert_int_equal(http_engine_submit(e, &req, on_done, &c), 0);
    http_engine_run(e);
    http_engine_destroy(e);
    assert_int_equal(c.calls, 0);
    server_stop(s);

    const struct http_engine_options bad = {.max_transfers = 0};
    assert_int_equal(http_engine_create(&bad, &e), HOOKD_EINVAL);
    assert_null(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_answers_and_two_classifiers),
        cmocka_unit_test(test_keep_alive_and_methods_on_one_handle),
        cmocka_unit_test(test_connect_refused),
        cmocka_unit_test(test_timeout_on_a_silent_server),
        cmocka_unit_test(test_response_caps),
        cmocka_unit_test(test_ssrf_guard),
        cmocka_unit_test(test_room_cancel_and_destroy),
    };
    signal(SIGPIPE, SIG_IGN);
    seen_classify = forward_classify;
    return cmocka_run_group_tests(tests, NULL, NULL);
}
