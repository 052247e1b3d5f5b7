/*
 * The HTTP server against hostile clients, in process (so bytes read are
 * counted server-side): auth and body caps decided before the body, framing
 * refusals, every protocol error as JSON, the header deadline, suspended
 * handlers resumed from another thread, 10,000 idle
 * keep-alive connections, and a client trickling 2,000 connections while
 * another one's calls keep answering. Clients with thousands of sockets run
 * in a forked child (a descriptor table of their own); each loop is bounded
 * in count and time.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "hookd.h"
#include "net/http.h"
#include "unit/raw_http.h"

#define TOKEN "s3cret-admin-token"
#define MIB (1024 * 1024)

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- server --------------------------------------------------------------------- */

static atomic_int calls;

static void h_ok(struct http_request *req, struct http_response *res, void *ctx)
{
    size_t len;
    http_body(req, &len);
    atomic_fetch_add(&calls, 1);
    http_reply_json(res, 200, json_pack("{s:I}", "body_len", (json_int_t)len));
}

/* Suspends; a thread of its own resumes it 1 s later with 202 (a request held behind it would wait that long). */
static void *resumer(void *arg)
{
    struct http_request *req = arg;
    struct http_response res = {0};
    sleep_ms(1000);
    http_reply_json(&res, 202, json_pack("{s:s}", "resumed", "yes"));
    http_resume(req, &res);
    return NULL;
}

static void h_later(struct http_request *req, struct http_response *res, void *ctx)
{
    pthread_t t;
    atomic_fetch_add(&calls, 1);
    http_suspend(req);
    if (pthread_create(&t, NULL, resumer, req) != 0) {
        http_reply_error(res, 500, "internal", "no thread");
        http_resume(req, res);
        return;
    }
    pthread_detach(t);
}

/* Who the server decided the caller is. */
static void h_who(struct http_request *req, struct http_response *res, void *ctx)
{
    const struct http_caller *c = http_request_caller(req);
    atomic_fetch_add(&calls, 1);
    http_reply_json(res, 200, json_pack("{s:b,s:s,s:s,s:i}", "admin", c->admin, "id", c->id, "account", c->account,
                                        "scopes", (int)c->scopes));
}

/* Scoped tokens of the tests: two valid ones, an expired one, one the store cannot check now. */
static int fake_token_check(void *ctx, const char *token, size_t len, struct http_caller *out)
{
    (void)ctx;
    memset(out, 0, sizeof *out);
    if (len == 9 && memcmp(token, "hkat_read", 9) == 0) {
        snprintf(out->id, sizeof out->id, "tok_r");
        snprintf(out->account, sizeof out->account, "acme");
        out->scopes = HTTP_SCOPE_READ;
        return 0;
    }
    if (len == 11 && memcmp(token, "hkat_replay", 11) == 0) {
        snprintf(out->id, sizeof out->id, "tok_rr");
        snprintf(out->account, sizeof out->account, "acme");
        out->scopes = HTTP_SCOPE_READ | HTTP_SCOPE_REPLAY;
        return 0;
    }
    if (len == 12 && memcmp(token, "hkat_expired", 12) == 0)
        return HOOKD_ETIME;
    if (len == 9 && memcmp(token, "hkat_down", 9) == 0)
        return HOOKD_EUNAVAIL;
    return HOOKD_ENOTFOUND;
}

static const struct http_route routes[] = {
    {"GET", "/acct", h_who, HTTP_AUTH_ADMIN, 0, NULL, HTTP_SCOPE_READ},
    {"POST", "/acct/replay", h_who, HTTP_AUTH_ADMIN, MIB, NULL, HTTP_SCOPE_REPLAY},
    {"POST", "/admin", h_ok, HTTP_AUTH_ADMIN, MIB, NULL, 0},
    {"GET", "/admin", h_ok, HTTP_AUTH_ADMIN, 0, NULL, 0},
    {"POST", "/open", h_ok, HTTP_AUTH_NONE, 4096, NULL, 0},
    {"GET", "/ping", h_ok, HTTP_AUTH_NONE, 0, NULL, 0},
    {"GET", "/later", h_later, HTTP_AUTH_NONE, 0, NULL, 0},
};

static struct http_server *start(unsigned threads, int64_t header_timeout_ms)
{
    struct http_server *s = NULL;
    struct http_server_options o = {
        .listen = "127.0.0.1:0",
        .routes = routes,
        .n_routes = sizeof routes / sizeof routes[0],
        .admin_token = TOKEN,
        .token_check = fake_token_check,
        .threads = threads,
        .header_timeout_ms = header_timeout_ms,
    };
    atomic_store(&calls, 0);
    assert_int_equal(http_server_start(&o, &s), 0);
    return s;
}

/* ---- clients ------------------------------------------------------------------------ */

#define reply raw_reply
#define send_all raw_send_all
#define read_reply raw_read_reply
#define request raw_request

/* A socket bound to source (e.g. "127.0.0.2"), connected to 127.0.0.1:port. */
static int connect_from(const char *source, int port, int timeout_s)
{
    return raw_connect(AF_INET, source, port, timeout_s);
}

static void assert_error(const struct reply *r, int status, const char *code)
{
    assert_int_equal(r->status, status);
    assert_non_null(strcasestr(r->head, "\r\nContent-Type: application/json"));
    json_t *j = json_loadb(r->body, r->body_len, 0, NULL);
    assert_non_null(j);
    json_t *e = json_object_get(j, "error");
    assert_string_equal(json_string_value(json_object_get(e, "code")), code);
    assert_true(json_is_string(json_object_get(e, "message")));
    json_decref(j);
}

/* Waits (bounded) until every connection the server accepted is closed. The bound is
 * generous: closing 10,000 connections under ASan on a loaded 2-core machine took over 5 s. */
static void wait_all_closed(struct http_server *s, struct http_server_stats *st)
{
    int64_t until = mono_ms() + 30000;
    do {
        http_server_stats(s, st);
        if (st->open == 0)
            return;
        sleep_ms(10);
    } while (mono_ms() < until);
    fail_msg("connections still open: %llu", (unsigned long long)st->open);
}

/*
 * Sends only the header of a big upload, reads the answer, then offers the
 * body: the server must have answered without it and read exactly the header.
 */
static void refused_before_body(const char *head, int status, const char *code)
{
    struct http_server *s = start(2, 0);
    struct http_server_stats st;
    struct reply r;
    int fd = connect_from(NULL, http_server_port(s), 3);

    assert_true(fd >= 0);
    assert_int_equal(send_all(fd, head, strlen(head)), 0);
    read_reply(fd, &r);
    assert_error(&r, status, code);
    /* The body, offered now, is never read: the server closed after its answer. */
    char *body = calloc(1, MIB);
    assert_non_null(body);
    (void)send_all(fd, body, MIB);
    free(body);
    close(fd);
    wait_all_closed(s, &st);
    assert_int_equal(st.connections, 1);
    assert_int_equal(st.bytes_read, strlen(head));
    assert_int_equal(st.body_bytes, 0);
    assert_int_equal(atomic_load(&calls), 0);
    http_server_stop(s);
}

static void test_unauthenticated_upload_refused_before_body(void **state)
{
    refused_before_body("POST /admin HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        "Content-Length: 1048576\r\n\r\n",
                        401, "unauthorized");
    refused_before_body("POST /admin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\n"
                        "Content-Length: 1048576\r\n\r\n",
                        401, "unauthorized");
}

/* A scoped token is checked before the body too: 403 where its scopes do not reach, 401 expired, 503 unknown now. */
static void test_scoped_token_refused_before_body(void **state)
{
    refused_before_body("POST /admin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer hkat_replay\r\n"
                        "Content-Length: 1048576\r\n\r\n",
                        403, "forbidden");
    refused_before_body("POST /acct/replay HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer hkat_read\r\n"
                        "Content-Length: 1048576\r\n\r\n",
                        403, "forbidden");
    refused_before_body("POST /acct/replay HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer hkat_expired\r\n"
                        "Content-Length: 1048576\r\n\r\n",
                        401, "unauthorized");
    refused_before_body("POST /acct/replay HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer hkat_down\r\n"
                        "Content-Length: 1048576\r\n\r\n",
                        503, "store_unavailable");
}

static void test_scoped_token_reaches_its_routes(void **state)
{
    struct http_server *s = start(2, 0);
    int port = http_server_port(s);
    struct reply r;
    json_t *j;
    static const struct {
        const char *req;
        int status;
        const char *code; /* error code, or NULL: the caller as the handler saw it */
        bool admin;
        const char *id;
        int scopes;
    } cases[] = {
        {"GET /acct HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer hkat_read\r\n\r\n", 200, NULL, false, "tok_r", 1},
        {"GET /acct HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " TOKEN "\r\n\r\n", 200, NULL, true, "admin", 0},
        {"POST /acct/replay HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer hkat_replay\r\nContent-Length: 0\r\n\r\n",
         200, NULL, false, "tok_rr", 3},
        {"GET /admin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer hkat_read\r\n\r\n", 403, "forbidden", false, NULL, 0},
        {"GET /acct HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer hkat_other\r\n\r\n", 401, "unauthorized", false, NULL, 0},
        {"GET /acct HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer hkat_read junk\r\n\r\n", 401, "unauthorized", false,
         NULL, 0},
        {"GET /acct HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \r\n\r\n", 401, "unauthorized", false, NULL, 0},
        {"GET /acct HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer hkat_expired\r\n\r\n", 401, "unauthorized", false,
         NULL, 0},
    };
    int handled = 0;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        request(port, cases[i].req, strlen(cases[i].req), &r);
        if (cases[i].code) {
            assert_error(&r, cases[i].status, cases[i].code);
            if (cases[i].status == 401)
                assert_non_null(strcasestr(r.head, "\r\nWWW-Authenticate: Bearer"));
            continue;
        }
        handled++;
        assert_int_equal(r.status, cases[i].status);
        assert_non_null(j = json_loadb(r.body, r.body_len, 0, NULL));
        assert_int_equal(json_is_true(json_object_get(j, "admin")), cases[i].admin);
        assert_string_equal(json_string_value(json_object_get(j, "id")), cases[i].id);
        assert_string_equal(json_string_value(json_object_get(j, "account")), cases[i].admin ? "" : "acme");
        assert_int_equal(json_integer_value(json_object_get(j, "scopes")), cases[i].scopes);
        json_decref(j);
    }
    assert_int_equal(atomic_load(&calls), handled);
    http_server_stop(s);
}

static void test_oversized_upload_refused_before_body(void **state)
{
    refused_before_body("POST /admin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " TOKEN "\r\n"
                        "Content-Length: 2097152\r\n\r\n",
                        413, "payload_too_large");
    refused_before_body("POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n", 404, "not_found");
    refused_before_body("PUT /admin HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n", 405,
                        "method_not_allowed");
}

static void test_bearer_token_is_the_whole_value(void **state)
{
    struct http_server *s = start(2, 0);
    int port = http_server_port(s);
    struct reply r;
    static const char nul[] = "GET /admin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " TOKEN "\0junk\r\n\r\n";

    request(port, "GET /admin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " TOKEN "\r\nConnection: close\r\n\r\n",
            strlen("GET /admin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " TOKEN "\r\nConnection: close\r\n\r\n"),
            &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(atomic_load(&calls), 1);
    const char *bad[] = {
        "GET /admin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " TOKEN "junk\r\n\r\n",
        "GET /admin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " TOKEN " junk\r\n\r\n",
        "GET /admin HTTP/1.1\r\nHost: x\r\nAuthorization: Basic " TOKEN "\r\n\r\n",
        "GET /admin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret\r\n\r\n",
        "GET /admin HTTP/1.1\r\nHost: x\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        request(port, bad[i], strlen(bad[i]), &r);
        assert_error(&r, 401, "unauthorized");
        assert_non_null(strcasestr(r.head, "\r\nWWW-Authenticate: Bearer"));
    }
    /* A NUL in the value is refused as framing, never authenticated. */
    request(port, nul, sizeof nul - 1, &r);
    assert_error(&r, 400, "invalid_header");
    const char *two = "GET /admin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " TOKEN "\r\n"
                      "Authorization: Bearer other\r\n\r\n";
    request(port, two, strlen(two), &r);
    assert_error(&r, 400, "invalid_header");
    assert_int_equal(atomic_load(&calls), 1);
    http_server_stop(s);
}

static void test_ambiguous_framing_refused(void **state)
{
    struct http_server *s = start(2, 0);
    int port = http_server_port(s);
    struct reply r;
    static const char ctl[] = "GET /ping HTTP/1.1\r\nHost: x\r\nX-A: a\x01z\r\n\r\n";
    static const char nul[] = "GET /ping HTTP/1.1\r\nHost: x\r\nX-A: a\0z\r\n\r\n";
    const char *two_lengths = "POST /open HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 5\r\n\r\nhello";
    const char *same_lengths = "POST /open HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n"
                               "Connection: close\r\n\r\nhello";
    const char *length_and_chunked = "POST /open HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                                     "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";

    request(port, two_lengths, strlen(two_lengths), &r);
    assert_error(&r, 400, "invalid_header");
    request(port, length_and_chunked, strlen(length_and_chunked), &r);
    assert_error(&r, 400, "invalid_header");
    request(port, ctl, sizeof ctl - 1, &r);
    assert_error(&r, 400, "invalid_header");
    request(port, nul, sizeof nul - 1, &r);
    assert_error(&r, 400, "invalid_header");
    assert_int_equal(atomic_load(&calls), 0);
    /* Repeating one length is not ambiguous. */
    request(port, same_lengths, strlen(same_lengths), &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(atomic_load(&calls), 1);

    /* A 100 KB path and a 3 KB one: the JSON shape. */
    size_t n = 100 * 1024;
    char *raw = malloc(n + 64);
    assert_non_null(raw);
    memcpy(raw, "GET /", 5);
    memset(raw + 5, 'a', n);
    int off = 5 + (int)n;
    off += snprintf(raw + off, 64, " HTTP/1.1\r\nHost: x\r\n\r\n");
    request(port, raw, (size_t)off, &r);
    assert_error(&r, 431, "header_too_large");
    off = 5 + 3000;
    off += snprintf(raw + off, 64, " HTTP/1.1\r\nHost: x\r\n\r\n");
    request(port, raw, (size_t)off, &r);
    assert_error(&r, 414, "uri_too_long");
    free(raw);

    /* A chunked body past the cap gets its 413 (at the end of what it sent). */
    char chunked[8192];
    off = snprintf(chunked, sizeof chunked, "POST /open HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 5; i++) {
        off += snprintf(chunked + off, sizeof chunked - (size_t)off, "400\r\n");
        memset(chunked + off, 'y', 1024);
        off += 1024;
        off += snprintf(chunked + off, sizeof chunked - (size_t)off, "\r\n");
    }
    off += snprintf(chunked + off, sizeof chunked - (size_t)off, "0\r\n\r\n");
    request(port, chunked, (size_t)off, &r);
    assert_error(&r, 413, "payload_too_large");
    assert_int_equal(atomic_load(&calls), 1);
    http_server_stop(s);
}

/*
 * What libmicrohttpd used to answer with its own HTML page: each is now the
 * JSON error shape with its status, and the connection closes after it.
 */
static void test_every_error_is_json(void **state)
{
    struct http_server *s = start(2, 0);
    int port = http_server_port(s);
    struct reply r;
    static const struct {
        const char *raw;
        int status;
        const char *code;
    } cases[] = {
        {"POST /open HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400, "invalid_header"},
        {"POST /open HTTP/1.1\r\nHost: x\r\nContent-Length: 12x\r\n\r\n", 400, "invalid_header"},
        {"POST /open HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n", 400, "invalid_header"},
        {"GET /ping HTTP/1.1\r\nHost x\r\n\r\n", 400, "invalid_header"},
        {"GET /ping HTTP/1.1\r\nHost: x\r\nX-A: a\r\n folded\r\n\r\n", 400, "invalid_header"},
        {"POST /open HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400, "invalid_body"},
        {"POST /open HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n", 400, "invalid_body"},
        {"POST /open HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "not_implemented"},
        {"GET /ping HTTP/2.0\r\nHost: x\r\n\r\n", 505, "http_version_not_supported"},
        {"GET /ping HTTP/1.1 junk\r\nHost: x\r\n\r\n", 400, "invalid_request"},
        {"GET /ping HTTP/1.1\nHost: x\n\n", 400, "invalid_request"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int fd = connect_from(NULL, port, 5);
        char tail[16];
        assert_true(fd >= 0);
        assert_int_equal(send_all(fd, cases[i].raw, strlen(cases[i].raw)), 0);
        read_reply(fd, &r);
        if (r.status != cases[i].status)
            fail_msg("case %zu: status %d, want %d", i, r.status, cases[i].status);
        assert_error(&r, cases[i].status, cases[i].code);
        assert_non_null(strcasestr(r.head, "\r\nConnection: close"));
        assert_int_equal(recv(fd, tail, sizeof tail, 0), 0);
        close(fd);
    }
    /* A header block over the cap (20 KB of one header): 431, JSON. */
    size_t n = 20 * 1024;
    char *raw = malloc(n + 128);
    assert_non_null(raw);
    int off = snprintf(raw, 128, "GET /ping HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(raw + off, 'b', n);
    off += (int)n;
    off += snprintf(raw + off, 128, "\r\n\r\n");
    request(port, raw, (size_t)off, &r);
    assert_error(&r, 431, "header_too_large");
    free(raw);
    assert_int_equal(atomic_load(&calls), 0);
    http_server_stop(s);
}

/* A header trickled a byte at a time is cut at its deadline, counted from its first byte, with a JSON 408. */
static void test_trickled_header_meets_its_deadline(void **state)
{
    struct http_server *s = start(1, 400);
    struct http_server_stats st;
    struct reply r;
    int fd = connect_from(NULL, http_server_port(s), 5);
    const char *head = "GET /ping HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    int64_t t0 = mono_ms();

    assert_true(fd >= 0);
    for (size_t i = 0; i < strlen(head) && mono_ms() - t0 < 3000; i++) {
        if (send(fd, head + i, 1, MSG_NOSIGNAL) != 1)
            break;
        sleep_ms(20);
        http_server_stats(s, &st);
        if (st.header_timeouts > 0)
            break;
    }
    read_reply(fd, &r);
    int64_t took = mono_ms() - t0;
    close(fd);
    assert_error(&r, 408, "header_timeout");
    assert_true(took >= 400 && took < 1500);
    wait_all_closed(s, &st);
    assert_int_equal(st.header_timeouts, 1);
    assert_int_equal(atomic_load(&calls), 0);
    http_server_stop(s);
}

/* One loop thread: while a request waits suspended, another is answered, then it is resumed from another thread. */
static void test_suspended_handler_resumed_from_another_thread(void **state)
{
    struct http_server *s = start(1, 0);
    int port = http_server_port(s);
    struct reply r;
    int slow = connect_from(NULL, port, 5);
    const char *later = "GET /later HTTP/1.1\r\nHost: x\r\n\r\n";

    assert_true(slow >= 0);
    assert_int_equal(send_all(slow, later, strlen(later)), 0);
    sleep_ms(50);
    int64_t t0 = mono_ms();
    request(port, "GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 51, &r);
    assert_int_equal(r.status, 200);
    assert_true(mono_ms() - t0 < 700); /* the suspended request holds no thread (held, it would take ~950 ms) */
    read_reply(slow, &r);
    assert_int_equal(r.status, 202);
    assert_non_null(strstr(r.body, "\"resumed\":\"yes\""));
    /* The connection goes on after a resumed answer. */
    assert_int_equal(send_all(slow, "GET /ping HTTP/1.1\r\nHost: x\r\n\r\n", 31), 0);
    read_reply(slow, &r);
    assert_int_equal(r.status, 200);

    /* Stopping with a request suspended waits for its answer, then stops (no hang, no leak). */
    assert_int_equal(send_all(slow, later, strlen(later)), 0);
    int64_t until = mono_ms() + 2000;
    struct http_server_stats st;
    do {
        http_server_stats(s, &st);
        sleep_ms(5);
    } while (st.suspended == 0 && mono_ms() < until);
    assert_int_equal(st.suspended, 1);
    t0 = mono_ms();
    http_server_stop(s);
    assert_true(mono_ms() - t0 < 3000);
    read_reply(slow, &r);
    assert_int_equal(r.status, 202);
    close(slow);
}

/* ---- many connections (a forked client with its own descriptor table) ---------------- */

static void nofile_to_hard(rlim_t need)
{
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need)
        fail_msg("RLIMIT_NOFILE hard limit %llu is below the %llu this test needs",
                 (unsigned long long)rl.rlim_max, (unsigned long long)need);
    rl.rlim_cur = rl.rlim_max;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
}

#define MAX_CLIENT_FDS 12000
static int client_fds[MAX_CLIENT_FDS];

/*
 * The child: opens n connections from sources[i % n_sources], one keep-alive
 * request on each when idle_request, else one header byte at first; then
 * either holds them (idle) or trickles a header byte on each every 100 ms.
 * Writes how many it opened to the pipe, runs until stop_ms, writes how many
 * the server closed, exits. No allocation: it forked from a threaded process.
 */
static void client_child(int port, int n, const char *const *sources, int n_sources, bool trickle, int64_t stop_ms,
                         int report)
{
    static const char req[] = "GET /ping HTTP/1.1\r\nHost: x\r\n\r\n";
    static char buf[4096];
    int opened = 0, closed = 0;

    for (int i = 0; i < n && i < MAX_CLIENT_FDS; i++) {
        int fd = connect_from(sources[i % n_sources], port, 2);
        client_fds[i] = fd;
        if (fd < 0)
            continue;
        opened++;
        if (trickle) {
            if (send(fd, "G", 1, MSG_NOSIGNAL) != 1)
                closed++;
            continue;
        }
        /* One request, then idle: a keep-alive connection. */
        if (send_all(fd, req, sizeof req - 1) != 0 || recv(fd, buf, sizeof buf, 0) <= 0) {
            close(fd);
            client_fds[i] = -1;
            closed++;
        }
    }
    (void)!write(report, &opened, sizeof opened);
    static const char trickle_bytes[] = "ET /ping HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    size_t at = 0;
    while (mono_ms() < stop_ms) {
        sleep_ms(100);
        if (!trickle)
            continue;
        /* One more byte of a header that never ends, on every connection still open. */
        for (int i = 0; i < n && i < MAX_CLIENT_FDS; i++) {
            if (client_fds[i] < 0)
                continue;
            if (send(client_fds[i], trickle_bytes + at, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1 && errno != EAGAIN) {
                close(client_fds[i]);
                client_fds[i] = -1;
                closed++;
            }
        }
        at = (at + 1) % (sizeof trickle_bytes - 1);
    }
    (void)!write(report, &closed, sizeof closed);
    _exit(0);
}

static pid_t spawn_clients(int port, int n, const char *const *sources, int n_sources, bool trickle, int run_ms,
                           int *report_fd)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    int64_t stop = mono_ms() + run_ms;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        client_child(port, n, sources, n_sources, trickle, stop, p[1]);
    }
    close(p[1]);
    *report_fd = p[0];
    return pid;
}

/* Reads one int from the child, waiting at most timeout_ms. */
static int child_report(int fd, int timeout_ms)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int v = -1;
    if (poll(&pfd, 1, timeout_ms) != 1 || read(fd, &v, sizeof v) != (ssize_t)sizeof v)
        fail_msg("the client process did not report in %d ms", timeout_ms);
    return v;
}

/* An admin call from source on a fresh connection; its latency in ms (fails on a wrong answer). */
static int64_t admin_call(const char *source, int port)
{
    static const char req[] = "GET /admin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " TOKEN
                              "\r\nConnection: close\r\n\r\n";
    struct reply r;
    int64_t t0 = mono_ms();
    int fd = connect_from(source, port, 5);
    assert_true(fd >= 0);
    assert_int_equal(send_all(fd, req, sizeof req - 1), 0);
    read_reply(fd, &r);
    close(fd);
    assert_int_equal(r.status, 200);
    return mono_ms() - t0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_ten_thousand_idle_keep_alive_connections(void **state)
{
    static const char *const sources[] = {"127.0.1.1", "127.0.1.2", "127.0.1.3", "127.0.1.4", "127.0.1.5",
                                          "127.0.1.6", "127.0.1.7", "127.0.1.8", "127.0.1.9", "127.0.1.10",
                                          "127.0.1.11", "127.0.1.12"};
    const int n = 10000;
    int report;

    nofile_to_hard(n + 200);
    struct http_server *s = start(2, 0);
    int port = http_server_port(s);
    pid_t child = spawn_clients(port, n, sources, sizeof sources / sizeof sources[0], false, 120000, &report);
    int opened = child_report(report, 110000);
    assert_int_equal(opened, n);
    struct http_server_stats st;
    http_server_stats(s, &st);
    assert_true(st.open >= (uint64_t)n);

    int64_t lat[40];
    for (int i = 0; i < 40; i++)
        lat[i] = admin_call("127.0.0.1", port);
    qsort(lat, 40, sizeof lat[0], cmp_i64);
    http_server_stats(s, &st);
    print_message("10,000 idle keep-alive connections open (%llu): admin call median %lld ms, max %lld ms\n",
                  (unsigned long long)st.open, (long long)lat[20], (long long)lat[39]);
    assert_true(st.open >= (uint64_t)n);
    assert_true(lat[39] < 50);

    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    close(report);
    wait_all_closed(s, &st);
    http_server_stop(s);
}

static void test_trickling_client_does_not_lock_others_out(void **state)
{
    static const char *const attacker[] = {"127.0.0.2"};
    const int n = 2000;
    const int run_ms = 5000;
    int report;

    nofile_to_hard(n + 2000);
    /* A short header deadline keeps the test short; the default is 10 s. */
    struct http_server *s = start(2, 1500);
    int port = http_server_port(s);
    pid_t child = spawn_clients(port, n, attacker, 1, true, run_ms, &report);
    int opened = child_report(report, 30000);
    assert_true(opened > 0);

    /* Another address keeps getting answers the whole time. */
    int64_t worst = 0;
    int answered = 0;
    int64_t until = mono_ms() + run_ms - 500;
    for (int i = 0; i < 200 && mono_ms() < until; i++) {
        int64_t ms = admin_call("127.0.0.3", port);
        if (ms > worst)
            worst = ms;
        answered++;
        sleep_ms(20);
    }
    int closed_by_server = child_report(report, run_ms + 10000);
    waitpid(child, NULL, 0);
    close(report);
    struct http_server_stats st;
    http_server_stats(s, &st);
    print_message("trickler: %d connections accepted of %d, %d closed by the server (%llu header timeouts); "
                  "other client: %d calls, worst %lld ms\n",
                  opened, n, closed_by_server, (unsigned long long)st.header_timeouts, answered, (long long)worst);
    assert_true(answered >= 50);
    assert_true(worst < 1200); /* locked out, a call would wait for the 1.5 s header deadline */
    /* The per-address limit turned most of them away, and the deadline closed the rest. */
    assert_true(st.connections - (uint64_t)answered <= 1024 + 16);
    assert_true(st.header_timeouts > 0);
    assert_true(closed_by_server >= opened - 16);
    wait_all_closed(s, &st);
    http_server_stop(s);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unauthenticated_upload_refused_before_body),
        cmocka_unit_test(test_oversized_upload_refused_before_body),
        cmocka_unit_test(test_scoped_token_refused_before_body),
        cmocka_unit_test(test_scoped_token_reaches_its_routes),
        cmocka_unit_test(test_bearer_token_is_the_whole_value),
        cmocka_unit_test(test_ambiguous_framing_refused),
        cmocka_unit_test(test_every_error_is_json),
        cmocka_unit_test(test_trickled_header_meets_its_deadline),
        cmocka_unit_test(test_suspended_handler_resumed_from_another_thread),
        cmocka_unit_test(test_ten_thousand_idle_keep_alive_connections),
        cmocka_unit_test(test_trickling_client_does_not_lock_others_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
