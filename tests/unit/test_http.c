/*
 * HTTP server wrapper and router: route matching, a real server on
 * 127.0.0.1 port 0 driven over raw sockets (body cap → 413, chunked too, 404/405,
 * headers/query/params, keep-alive, pipelining, HEAD, 100-continue, the JSON error shape).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "hookd.h"
#include "net/http.h"
#include "net/router.h"
#include "unit/raw_http.h"

/* ---- router -------------------------------------------------------------- */

static void h_dummy(struct http_request *req, struct http_response *res, void *ctx) {}

static const struct http_route table[] = {
    {"GET", "/v1/endpoints", h_dummy, HTTP_AUTH_NONE, 0, NULL, 0},
    {"POST", "/v1/endpoints", h_dummy, HTTP_AUTH_NONE, 0, NULL, 0},
    {"GET", "/v1/endpoints/{id}", h_dummy, HTTP_AUTH_NONE, 0, NULL, 0},
    {"PATCH", "/v1/endpoints/{id}", h_dummy, HTTP_AUTH_NONE, 0, NULL, 0},
    {"POST", "/v1/endpoints/{id}/secret/rotate", h_dummy, HTTP_AUTH_NONE, 0, NULL, 0},
    {"*", "/in/{source}", h_dummy, HTTP_AUTH_NONE, 0, NULL, 0},
    {"GET", "/ui/*", h_dummy, HTTP_AUTH_NONE, 0, NULL, 0},
    {"GET", "/", h_dummy, HTTP_AUTH_NONE, 0, NULL, 0},
};
#define N_TABLE (sizeof table / sizeof table[0])

static enum route_result match(const char *method, const char *path, size_t *index, struct route_params *p,
                               char *allow, size_t allow_len)
{
    const struct http_route *found = NULL;
    enum route_result r = router_match(table, N_TABLE, method, path, &found, p, allow, allow_len);
    *index = found ? (size_t)(found - table) : SIZE_MAX;
    return r;
}

static void test_router_literal_and_captures(void **state)
{
    struct route_params p;
    size_t i;

    assert_int_equal(match("GET", "/v1/endpoints", &i, &p, NULL, 0), ROUTE_FOUND);
    assert_int_equal(i, 0);
    assert_int_equal(match("POST", "/v1/endpoints", &i, &p, NULL, 0), ROUTE_FOUND);
    assert_int_equal(i, 1);
    assert_int_equal(match("PATCH", "/v1/endpoints/ep_123", &i, &p, NULL, 0), ROUTE_FOUND);
    assert_int_equal(i, 3);
    assert_string_equal(route_param(&p, "id"), "ep_123");
    assert_null(route_param(&p, "i"));
    assert_null(route_param(&p, "idx"));
    assert_int_equal(match("POST", "/v1/endpoints/ep_9/secret/rotate", &i, &p, NULL, 0), ROUTE_FOUND);
    assert_int_equal(i, 4);
    assert_string_equal(route_param(&p, "id"), "ep_9");
    assert_int_equal(match("DELETE", "/in/stripe", &i, &p, NULL, 0), ROUTE_FOUND);
    assert_string_equal(route_param(&p, "source"), "stripe");
    assert_int_equal(match("GET", "/", &i, &p, NULL, 0), ROUTE_FOUND);
    assert_int_equal(i, 7);
}

static void test_router_rest_and_head(void **state)
{
    struct route_params p;
    size_t i;

    assert_int_equal(match("GET", "/ui/assets/app.js", &i, &p, NULL, 0), ROUTE_FOUND);
    assert_int_equal(i, 6);
    assert_string_equal(route_param(&p, "*"), "assets/app.js");
    assert_int_equal(match("GET", "/ui/", &i, &p, NULL, 0), ROUTE_FOUND);
    assert_string_equal(route_param(&p, "*"), "");
    /* HEAD is answered by GET routes. */
    assert_int_equal(match("HEAD", "/v1/endpoints", &i, &p, NULL, 0), ROUTE_FOUND);
    assert_int_equal(i, 0);
}

static void test_router_not_found_and_method(void **state)
{
    struct route_params p;
    char allow[64];
    size_t i;

    assert_int_equal(match("GET", "/v1/nothing", &i, &p, NULL, 0), ROUTE_NOT_FOUND);
    assert_int_equal(match("GET", "/v1/endpoints/", &i, &p, NULL, 0), ROUTE_NOT_FOUND); /* empty capture */
    assert_int_equal(match("GET", "/v1/endpoints/a/b", &i, &p, NULL, 0), ROUTE_NOT_FOUND);
    assert_int_equal(match("GET", "/v1", &i, &p, NULL, 0), ROUTE_NOT_FOUND);
    assert_int_equal(match("GET", "/in", &i, &p, NULL, 0), ROUTE_NOT_FOUND);
    assert_int_equal(match("DELETE", "/v1/endpoints", &i, &p, allow, sizeof allow), ROUTE_METHOD_NOT_ALLOWED);
    assert_string_equal(allow, "GET, POST");
    assert_int_equal(i, SIZE_MAX);
    assert_int_equal(match("GET", "/v1/endpoints/x/secret/rotate", &i, &p, allow, sizeof allow),
                     ROUTE_METHOD_NOT_ALLOWED);
    assert_string_equal(allow, "POST");

    char long_path[ROUTE_PATH_MAX + 10];
    memset(long_path, 'a', sizeof long_path - 1);
    long_path[0] = '/';
    long_path[sizeof long_path - 1] = '\0';
    assert_int_equal(match("GET", long_path, &i, &p, NULL, 0), ROUTE_PATH_TOO_LONG);
}

/* ---- a live server ------------------------------------------------------------ */

static void h_echo(struct http_request *req, struct http_response *res, void *ctx)
{
    size_t len;
    const char *body = http_body(req, &len);
    const char *q = http_query(req, "q");
    const char *h = http_header(req, "x-test");
    json_t *j = json_pack("{s:s,s:s,s:s?,s:s?,s:s?,s:I,s:s,s:s}", "method", http_method(req), "path",
                          http_path(req), "id", http_param(req, "id"), "q", q, "header", h, "body_len",
                          (json_int_t)len, "body", body, "peer", http_peer(req));
    http_reply_json(res, 200, j);
    http_add_header(res, "X-Reply", "yes");
    (*(int *)ctx)++;
}

static void h_empty(struct http_request *req, struct http_response *res, void *ctx) { http_reply(res, 204, NULL, 0); }

static void h_fail(struct http_request *req, struct http_response *res, void *ctx)
{
    http_reply_error(res, 422, "invalid_field", "url: %s", "must be http or https");
}

/* Long enough that a request made to wait for it cannot pass for a slow machine (the bound is 2 s). */
static void h_slow(struct http_request *req, struct http_response *res, void *ctx)
{
    struct timespec ts = {3, 0};
    nanosleep(&ts, NULL);
    http_reply(res, 200, strdup("{}"), 2);
}

static void h_text(struct http_request *req, struct http_response *res, void *ctx)
{
    http_reply(res, 200, strdup("hello"), 5);
    res->content_type = "text/plain";
}

/* Answers late, from another thread, the way a write answers after its commit. */
static void *late_answer(void *p)
{
    struct http_request *req = p;
    struct http_response res = {.status = 200};
    struct timespec ts = {0, 150 * 1000 * 1000};

    nanosleep(&ts, NULL);
    http_reply_json(&res, 200, json_pack("{s:s}", "id", http_param(req, "id")));
    http_resume(req, &res);
    return NULL;
}

static void h_late(struct http_request *req, struct http_response *res, void *ctx)
{
    pthread_t t;

    http_suspend(req);
    if (pthread_create(&t, NULL, late_answer, req) != 0) {
        http_reply_error(res, 500, "internal", "no thread");
        http_resume(req, res);
        return;
    }
    pthread_detach(t);
}

/* The body's length and FNV-1a hash, and the x-pad header's length: answers that fit a raw reply for any body. */
static void h_sum(struct http_request *req, struct http_response *res, void *ctx)
{
    size_t len;
    const unsigned char *body = (const unsigned char *)http_body(req, &len);
    const char *pad = http_header(req, "x-pad");
    uint32_t h = 2166136261u;

    for (size_t i = 0; i < len; i++)
        h = (h ^ body[i]) * 16777619u;
    http_reply_json(res, 200, json_pack("{s:I,s:I,s:I}", "len", (json_int_t)len, "hash", (json_int_t)h, "pad",
                                        (json_int_t)(pad ? strlen(pad) : 0)));
}

static const struct http_route live_routes[] = {
    {"*", "/echo/{id}", h_echo, HTTP_AUTH_NONE, 0, NULL, 0},
    {"POST", "/sum", h_sum, HTTP_AUTH_NONE, 0, NULL, 0},
    {"GET", "/late/{id}", h_late, HTTP_AUTH_NONE, 0, NULL, 0},
    {"DELETE", "/empty", h_empty, HTTP_AUTH_NONE, 0, NULL, 0},
    {"GET", "/fail", h_fail, HTTP_AUTH_NONE, 0, NULL, 0},
    {"GET", "/slow", h_slow, HTTP_AUTH_NONE, 0, NULL, 0},
    {"GET", "/text", h_text, HTTP_AUTH_NONE, 0, NULL, 0},
};

struct live {
    struct http_server *srv;
    int port;
    int calls;
};

static int live_setup(void **state)
{
    struct live *l = calloc(1, sizeof *l);
    struct http_server_options o = {
        .listen = "127.0.0.1:0",
        .routes = live_routes,
        .n_routes = sizeof live_routes / sizeof live_routes[0],
        .ctx = &l->calls,
        .max_body = 4096,
    };
    if (!l || http_server_start(&o, &l->srv) != 0)
        return -1;
    l->port = http_server_port(l->srv);
    *state = l;
    return 0;
}

static int live_teardown(void **state)
{
    struct live *l = *state;
    http_server_stop(l->srv);
    free(l);
    return 0;
}

#define reply raw_reply
#define send_all raw_send_all
#define read_reply raw_read_reply

static int connect_to(int family, int port) { return raw_connect(family, NULL, port, 5); }

static void request(int port, const char *raw, struct reply *r) { raw_request(port, raw, strlen(raw), r); }

static json_t *reply_json(const struct reply *r)
{
    json_t *j = json_loadb(r->body, r->body_len, 0, NULL);
    assert_non_null(j);
    return j;
}

static void assert_error_shape(const struct reply *r, const char *code)
{
    json_t *j = reply_json(r);
    json_t *e = json_object_get(j, "error");
    assert_true(json_is_object(e));
    assert_string_equal(json_string_value(json_object_get(e, "code")), code);
    assert_true(json_is_string(json_object_get(e, "message")));
    assert_true(strlen(json_string_value(json_object_get(e, "message"))) > 0);
    assert_int_equal(json_object_size(j), 1);
    json_decref(j);
}

static void test_server_port_zero(void **state)
{
    struct live *l = *state;
    assert_true(l->port > 0 && l->port < 65536);
}

static void test_server_echo_params_query_headers(void **state)
{
    struct live *l = *state;
    struct reply r;

    request(l->port,
            "GET /echo/ep_42?q=a%20b&other=1 HTTP/1.1\r\nHost: x\r\nX-TEST: hello\r\nConnection: close\r\n\r\n", &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strcasestr(r.head, "\r\nContent-Type: application/json"));
    assert_non_null(strcasestr(r.head, "\r\nX-Reply: yes"));
    /* The status line and an IMF-fixdate of now (RFC 9110 5.6.7). */
    assert_memory_equal(r.head, "HTTP/1.1 200 OK\r\nDate: ", strlen("HTTP/1.1 200 OK\r\nDate: "));
    struct tm tm = {0};
    const char *end = strptime(r.head + strlen("HTTP/1.1 200 OK\r\nDate: "), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    assert_non_null(end);
    assert_memory_equal(end, "\r\n", 2);
    time_t at = timegm(&tm), now = time(NULL);
    assert_true(at <= now && at >= now - 5);
    json_t *j = reply_json(&r);
    assert_string_equal(json_string_value(json_object_get(j, "method")), "GET");
    assert_string_equal(json_string_value(json_object_get(j, "path")), "/echo/ep_42");
    assert_string_equal(json_string_value(json_object_get(j, "id")), "ep_42");
    assert_string_equal(json_string_value(json_object_get(j, "q")), "a b");
    assert_string_equal(json_string_value(json_object_get(j, "header")), "hello");
    assert_int_equal(json_integer_value(json_object_get(j, "body_len")), 0);
    assert_non_null(strstr(json_string_value(json_object_get(j, "peer")), "127.0.0.1:"));
    json_decref(j);
}

static void test_server_post_body(void **state)
{
    struct live *l = *state;
    struct reply r;

    request(l->port,
            "POST /echo/b HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 11\r\n"
            "Connection: close\r\n\r\n{\"a\":\"bc\"}\n",
            &r);
    assert_int_equal(r.status, 200);
    json_t *j = reply_json(&r);
    assert_int_equal(json_integer_value(json_object_get(j, "body_len")), 11);
    assert_string_equal(json_string_value(json_object_get(j, "body")), "{\"a\":\"bc\"}\n");
    assert_true(json_is_null(json_object_get(j, "q")));
    assert_true(json_is_null(json_object_get(j, "header")));
    json_decref(j);

    /* Chunked, within the cap. */
    request(l->port,
            "POST /echo/c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
            &r);
    assert_int_equal(r.status, 200);
    j = reply_json(&r);
    assert_string_equal(json_string_value(json_object_get(j, "body")), "abcde");
    json_decref(j);
}

static void test_server_body_cap_content_length(void **state)
{
    struct live *l = *state;
    struct reply r;
    int fd = connect_to(AF_INET, l->port);

    /* Only the headers are sent: the 413 must come without the body ever being read. */
    const char *head = "POST /echo/big HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n";
    assert_true(fd >= 0);
    assert_int_equal(send_all(fd, head, strlen(head)), 0);
    read_reply(fd, &r);
    assert_int_equal(r.status, 413);
    assert_error_shape(&r, "payload_too_large");
    /* The connection is closed after the early answer: the unread body is never taken for a request. */
    char tail[64];
    assert_int_equal(recv(fd, tail, sizeof tail, 0), 0);
    close(fd);
    assert_int_equal(l->calls, 0);

    /* Exactly at the cap is fine. */
    size_t n = 4096;
    char *raw = malloc(n + 200);
    int off = snprintf(raw, 200, "POST /echo/max HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", n);
    memset(raw + off, 'x', n);
    raw[off + (int)n] = '\0';
    request(l->port, raw, &r);
    assert_int_equal(r.status, 200);
    free(raw);
}

static void test_server_body_cap_chunked(void **state)
{
    struct live *l = *state;
    struct reply r;
    int fd = connect_to(AF_INET, l->port);
    char chunk[1100];

    assert_true(fd >= 0);
    const char *head = "POST /echo/chunky HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_int_equal(send_all(fd, head, strlen(head)), 0);
    /* 8 chunks of 1 KiB: twice the 4 KiB cap. The server stops reading past the cap. */
    int off = snprintf(chunk, sizeof chunk, "400\r\n");
    memset(chunk + off, 'y', 1024);
    memcpy(chunk + off + 1024, "\r\n", 2);
    for (int i = 0; i < 8; i++) {
        if (send_all(fd, chunk, (size_t)off + 1026) != 0)
            break; /* the server may already have closed */
    }
    send_all(fd, "0\r\n\r\n", 5);
    read_reply(fd, &r);
    close(fd);
    assert_int_equal(r.status, 413);
    assert_error_shape(&r, "payload_too_large");
    assert_int_equal(l->calls, 0);

    /* The server is still fine. */
    request(l->port, "GET /echo/after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &r);
    assert_int_equal(r.status, 200);
}

static void test_server_404_405(void **state)
{
    struct live *l = *state;
    struct reply r;

    request(l->port, "GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &r);
    assert_int_equal(r.status, 404);
    assert_error_shape(&r, "not_found");
    request(l->port, "POST /empty HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", &r);
    assert_int_equal(r.status, 405);
    assert_error_shape(&r, "method_not_allowed");
    assert_non_null(strcasestr(r.head, "\r\nAllow: DELETE"));
    assert_int_equal(l->calls, 0);
}

static void test_server_handler_error_and_204(void **state)
{
    struct live *l = *state;
    struct reply r;

    request(l->port, "GET /fail HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &r);
    assert_int_equal(r.status, 422);
    assert_error_shape(&r, "invalid_field");
    json_t *j = reply_json(&r);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "message")),
                        "url: must be http or https");
    json_decref(j);

    request(l->port, "DELETE /empty HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &r);
    assert_int_equal(r.status, 204);
    assert_int_equal(r.body_len, 0);

    request(l->port, "GET /text HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strcasestr(r.head, "\r\nContent-Type: text/plain"));
    assert_memory_equal(r.body, "hello", 5);
}

static void test_server_keep_alive(void **state)
{
    struct live *l = *state;
    struct reply r;
    int fd = connect_to(AF_INET, l->port);
    char raw[128];

    assert_true(fd >= 0);
    for (int i = 0; i < 20; i++) {
        snprintf(raw, sizeof raw, "GET /echo/k%d HTTP/1.1\r\nHost: x\r\n\r\n", i);
        assert_int_equal(send_all(fd, raw, strlen(raw)), 0);
        read_reply(fd, &r);
        assert_false(r.closed);
        assert_int_equal(r.status, 200);
    }
    /* A 404 and a body on the same connection do not break it. */
    assert_int_equal(send_all(fd, "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n", 31), 0);
    read_reply(fd, &r);
    assert_int_equal(r.status, 404);
    const char *post = "POST /echo/p HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi";
    assert_int_equal(send_all(fd, post, strlen(post)), 0);
    read_reply(fd, &r);
    assert_int_equal(r.status, 200);
    close(fd);
    assert_int_equal(l->calls, 21);
}

/* Reads whatever comes within a short while, until the peer closes or len bytes. */
static size_t read_some(int fd, char *buf, size_t len, int wait_ms)
{
    struct timeval tv = {0, wait_ms * 1000};
    size_t have = 0;

    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    while (have < len - 1) {
        ssize_t n = recv(fd, buf + have, len - 1 - have, 0);
        if (n <= 0)
            break;
        have += (size_t)n;
    }
    buf[have] = '\0';
    return have;
}

static void test_server_expect_continue(void **state)
{
    struct live *l = *state;
    struct reply r;
    int fd = connect_to(AF_INET, l->port);
    const char *head = "POST /echo/e HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n";

    /* The go-ahead comes once the route and the length are accepted, then the answer. */
    assert_true(fd >= 0);
    assert_int_equal(send_all(fd, head, strlen(head)), 0);
    read_reply(fd, &r);
    assert_int_equal(r.status, 100);
    assert_int_equal(send_all(fd, "hello", 5), 0);
    read_reply(fd, &r);
    assert_int_equal(r.status, 200);
    json_t *j = reply_json(&r);
    assert_string_equal(json_string_value(json_object_get(j, "body")), "hello");
    json_decref(j);
    close(fd);

    /* Over the cap: the final answer at once, never a 100. */
    fd = connect_to(AF_INET, l->port);
    head = "POST /echo/e HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n";
    assert_int_equal(send_all(fd, head, strlen(head)), 0);
    read_reply(fd, &r);
    assert_int_equal(r.status, 413);
    assert_error_shape(&r, "payload_too_large");
    close(fd);
    assert_int_equal(l->calls, 1);
}

static void test_server_pipelined_and_head(void **state)
{
    struct live *l = *state;
    struct reply r;
    int fd = connect_to(AF_INET, l->port);
    const char *three = "GET /echo/one HTTP/1.1\r\nHost: x\r\n\r\n"
                        "POST /echo/two HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
                        "GET /echo/three?q=3 HTTP/1.1\r\nHost: x\r\n\r\n";
    const char *ids[] = {"one", "two", "three"};

    /* Three requests in one write are answered in order on the same connection. */
    assert_true(fd >= 0);
    assert_int_equal(send_all(fd, three, strlen(three)), 0);
    /* Every answer is in the socket before the first is read: reading must not lose any. */
    struct timespec settle = {0, 200 * 1000 * 1000};
    nanosleep(&settle, NULL);
    for (int i = 0; i < 3; i++) {
        read_reply(fd, &r);
        assert_int_equal(r.status, 200);
        json_t *j = reply_json(&r);
        assert_string_equal(json_string_value(json_object_get(j, "id")), ids[i]);
        json_decref(j);
    }
    close(fd);

    /* HEAD: the length of the GET answer, no body; the connection goes on. */
    char buf[2048];
    fd = connect_to(AF_INET, l->port);
    const char *head = "HEAD /text HTTP/1.1\r\nHost: x\r\n\r\n";
    const char *get = "GET /text HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    const char *old = "GET /text HTTP/1.0\r\n\r\n";
    assert_int_equal(send_all(fd, head, strlen(head)), 0);
    size_t n = read_some(fd, buf, sizeof buf, 300);
    assert_true(n > 0);
    assert_non_null(strcasestr(buf, "\r\nContent-Length: 5\r\n"));
    assert_null(strstr(buf, "hello"));
    assert_int_equal(send_all(fd, get, strlen(get)), 0);
    read_reply(fd, &r);
    assert_int_equal(r.status, 200);
    assert_memory_equal(r.body, "hello", 5);
    close(fd);

    /* HTTP/1.0 without keep-alive: answered, then closed. */
    fd = connect_to(AF_INET, l->port);
    assert_int_equal(send_all(fd, old, strlen(old)), 0);
    n = read_some(fd, buf, sizeof buf, 2000);
    assert_non_null(strstr(buf, "\r\n\r\nhello"));
    assert_non_null(strcasestr(buf, "\r\nConnection: close\r\n"));
    close(fd);
}

/* Pipelined requests whose first answer comes late (suspended, resumed from another thread) are
 * still answered in request order, on the pool (threads = 0) and on an epoll loop (threads = 1). */
static void test_server_pipelined_late_first_answer(void **state)
{
    const char *reqs = "GET /late/one HTTP/1.1\r\nHost: x\r\n\r\n"
                       "POST /echo/two HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
                       "GET /late/three HTTP/1.1\r\nHost: x\r\n\r\n"
                       "GET /echo/four HTTP/1.1\r\nHost: x\r\n\r\n";
    const char *ids[] = {"one", "two", "three", "four"};

    for (unsigned threads = 0; threads <= 1; threads++) {
        struct http_server *s = NULL;
        int calls = 0;
        struct http_server_options o = {.listen = "127.0.0.1:0",
                                        .routes = live_routes,
                                        .n_routes = sizeof live_routes / sizeof live_routes[0],
                                        .ctx = &calls,
                                        .max_body = 4096,
                                        .threads = threads};
        struct reply r;

        assert_int_equal(http_server_start(&o, &s), 0);
        int fd = connect_to(AF_INET, http_server_port(s));
        assert_true(fd >= 0);
        assert_int_equal(send_all(fd, reqs, strlen(reqs)), 0);
        for (int i = 0; i < 4; i++) {
            read_reply(fd, &r);
            assert_false(r.closed);
            assert_int_equal(r.status, 200);
            json_t *j = reply_json(&r);
            assert_string_equal(json_string_value(json_object_get(j, "id")), ids[i]);
            json_decref(j);
        }
        close(fd);
        http_server_stop(s);
        assert_int_equal(calls, 2);
    }
}

/* A request of head_pad bytes of x-pad and a body of body_len bytes (chunked in 1000-byte chunks, or not), appended
 * to out at *off; its body's expected hash in *hash. */
static void big_request(char *out, size_t *off, size_t head_pad, size_t body_len, bool chunked, uint32_t *hash)
{
    uint32_t h = 2166136261u;

    *off += (size_t)sprintf(out + *off, "POST /sum HTTP/1.1\r\nHost: x\r\nX-Pad: ");
    memset(out + *off, 'h', head_pad);
    *off += head_pad;
    if (chunked)
        *off += (size_t)sprintf(out + *off, "\r\nTransfer-Encoding: chunked\r\n\r\n");
    else
        *off += (size_t)sprintf(out + *off, "\r\nContent-Length: %zu\r\n\r\n", body_len);
    for (size_t i = 0; i < body_len; i++) {
        if (chunked && i % 1000 == 0) {
            /* Each size line with an extension of 900 bytes: a framing line far longer than a head near the cap
             * leaves room for in the first buffer. */
            *off += (size_t)sprintf(out + *off, "%s%zx;x=", i ? "\r\n" : "", body_len - i < 1000 ? body_len - i : 1000);
            memset(out + *off, 'e', 900);
            *off += 900;
            *off += (size_t)sprintf(out + *off, "\r\n");
        }
        unsigned char b = (unsigned char)('a' + (i * 7 + i / 13) % 26);
        out[(*off)++] = (char)b;
        h = (h ^ b) * 16777619u;
    }
    if (chunked)
        *off += (size_t)sprintf(out + *off, "%s0\r\n\r\n", body_len ? "\r\n" : "");
    *hash = h;
}

/*
 * A connection reads into a small buffer first and takes the whole one for a request that does not fit it: heads
 * near the 16 KiB cap, bodies larger than the first buffer (by length and chunked), a large head arriving behind a
 * small pipelined request, all on one connection, sent at once and in pieces.
 */
static void test_server_buffer_grows(void **state)
{
    /* The head of the first is 16,384 bytes, the cap (HTTP_PARSE_HEAD_MAX) and the first buffer's size. */
    static const struct {
        size_t pad, body;
        bool chunked;
    } reqs[] = {{16384 - 36 - 27, 30000, false}, {10, 3, false}, {15500, 100000, false}, {16000, 0, false},
                {16200, 20000, true}, {100, 16000, false}, {200, 40000, true}};
    size_t n = sizeof reqs / sizeof reqs[0];
    char *raw = malloc(400000);
    uint32_t hash[sizeof reqs / sizeof reqs[0]];

    assert_non_null(raw);
    for (unsigned threads = 0; threads <= 1; threads++) {
        for (size_t piece = 0; piece <= 1; piece++) {
            struct http_server *s = NULL;
            int calls = 0;
            struct http_server_options o = {.listen = "127.0.0.1:0",
                                            .routes = live_routes,
                                            .n_routes = sizeof live_routes / sizeof live_routes[0],
                                            .ctx = &calls,
                                            .max_body = 200000,
                                            .threads = threads};
            size_t off = 0;
            struct reply r;

            for (size_t i = 0; i < n; i++)
                big_request(raw, &off, reqs[i].pad, reqs[i].body, reqs[i].chunked, &hash[i]);
            assert_int_equal(http_server_start(&o, &s), 0);
            int fd = connect_to(AF_INET, http_server_port(s));
            assert_true(fd >= 0);
            /* At once, or in pieces of 7,001 bytes that cut heads and bodies anywhere. */
            for (size_t sent = 0; sent < off;) {
                size_t k = piece ? (off - sent < 7001 ? off - sent : 7001) : off;
                assert_int_equal(send_all(fd, raw + sent, k), 0);
                sent += k;
                if (piece) {
                    struct timespec ts = {0, 2 * 1000 * 1000};
                    nanosleep(&ts, NULL);
                }
            }
            for (size_t i = 0; i < n; i++) {
                read_reply(fd, &r);
                assert_false(r.closed);
                assert_int_equal(r.status, 200);
                json_t *j = reply_json(&r);
                assert_int_equal(json_integer_value(json_object_get(j, "len")), (json_int_t)reqs[i].body);
                assert_int_equal(json_integer_value(json_object_get(j, "hash")), (json_int_t)hash[i]);
                assert_int_equal(json_integer_value(json_object_get(j, "pad")), (json_int_t)reqs[i].pad);
                json_decref(j);
            }
            close(fd);
            http_server_stop(s);
        }
    }
    free(raw);
}

struct slow_arg {
    int port;
    int status;
};

static void *slow_client(void *p)
{
    struct slow_arg *a = p;
    struct reply r;
    request(a->port, "GET /slow HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &r);
    a->status = r.status;
    return NULL;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void test_server_sleeping_handler_does_not_block_others(void **state)
{
    struct live *l = *state;
    struct slow_arg a = {l->port, 0};
    pthread_t t;
    struct reply r;

    assert_int_equal(pthread_create(&t, NULL, slow_client, &a), 0);
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    int64_t start = mono_ms();
    request(l->port, "GET /echo/fast HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &r);
    int64_t took = mono_ms() - start;
    assert_int_equal(r.status, 200);
    assert_true(took < 2000); /* waiting behind /slow would take about 2.9 s */
    pthread_join(t, NULL);
    assert_int_equal(a.status, 200);
}

static void test_server_ipv6_and_bad_listen(void **state)
{
    struct http_server *s = NULL;
    int calls = 0;
    struct http_server_options o = {.listen = "[::1]:0", .routes = live_routes, .n_routes = 1, .ctx = &calls};

    if (http_server_start(&o, &s) == 0) {
        int fd = connect_to(AF_INET6, http_server_port(s));
        struct reply r;
        assert_true(fd >= 0);
        const char *six = "GET /echo/six HTTP/1.1\r\nHost: x\r\n\r\n";
        assert_int_equal(send_all(fd, six, strlen(six)), 0);
        read_reply(fd, &r);
        close(fd);
        assert_int_equal(r.status, 200);
        json_t *j = reply_json(&r);
        assert_non_null(strstr(json_string_value(json_object_get(j, "peer")), "[::1]:"));
        json_decref(j);
        http_server_stop(s);
    }
    const char *bad[] = {"nonsense", "127.0.0.1:99999", "::1:80", "127.0.0.1:", "[::1]80", "127.0.0.1:8x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o.listen = bad[i];
        s = NULL;
        assert_int_equal(http_server_start(&o, &s), HOOKD_EINVAL);
        assert_null(s);
    }
    /* ":port" binds 127.0.0.1; the same port twice fails with EIO. */
    struct http_server *a = NULL, *b = NULL;
    o.listen = ":0";
    assert_int_equal(http_server_start(&o, &a), 0);
    char again[32];
    snprintf(again, sizeof again, "127.0.0.1:%d", http_server_port(a));
    o.listen = again;
    assert_int_equal(http_server_start(&o, &b), HOOKD_EIO);
    http_server_stop(a);
}

static void test_server_thread_pool(void **state)
{
    struct http_server *s = NULL;
    int calls = 0;
    struct http_server_options o = {
        .listen = "127.0.0.1:0", .routes = live_routes, .n_routes = 1, .ctx = &calls, .threads = 2};
    struct reply r;

    assert_int_equal(http_server_start(&o, &s), 0);
    for (int i = 0; i < 4; i++) {
        request(http_server_port(s), "GET /echo/pool HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &r);
        assert_int_equal(r.status, 200);
    }
    assert_int_equal(calls, 4);
    http_server_stop(s);
}

static void test_reply_helpers(void **state)
{
    struct http_response res = {.status = 200};

    http_reply_error(&res, 400, "missing_field", "%s is required", "type");
    assert_int_equal(res.status, 400);
    json_t *j = json_loadb(res.body, res.body_len, 0, NULL);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "error"), "message")),
                        "type is required");
    json_decref(j);
    /* A second reply replaces the first body (no leak under ASan). */
    http_reply_json(&res, 201, json_pack("{s:i}", "a", 1));
    assert_int_equal(res.status, 201);
    assert_string_equal(res.body, "{\"a\":1}");
    for (int i = 0; i < 10; i++)
        http_add_header(&res, "X-N", "v");
    assert_int_equal(res.n_headers, 8);
    for (int i = 0; i < res.n_headers; i++) {
        free(res.headers[i][0]);
        free(res.headers[i][1]);
    }
    free(res.body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_router_literal_and_captures),
        cmocka_unit_test(test_router_rest_and_head),
        cmocka_unit_test(test_router_not_found_and_method),
        cmocka_unit_test(test_reply_helpers),
        cmocka_unit_test_setup_teardown(test_server_port_zero, live_setup, live_teardown),
        cmocka_unit_test_setup_teardown(test_server_echo_params_query_headers, live_setup, live_teardown),
        cmocka_unit_test_setup_teardown(test_server_post_body, live_setup, live_teardown),
        cmocka_unit_test_setup_teardown(test_server_body_cap_content_length, live_setup, live_teardown),
        cmocka_unit_test_setup_teardown(test_server_body_cap_chunked, live_setup, live_teardown),
        cmocka_unit_test_setup_teardown(test_server_404_405, live_setup, live_teardown),
        cmocka_unit_test_setup_teardown(test_server_handler_error_and_204, live_setup, live_teardown),
        cmocka_unit_test_setup_teardown(test_server_keep_alive, live_setup, live_teardown),
        cmocka_unit_test_setup_teardown(test_server_expect_continue, live_setup, live_teardown),
        cmocka_unit_test_setup_teardown(test_server_pipelined_and_head, live_setup, live_teardown),
        cmocka_unit_test(test_server_pipelined_late_first_answer),
        cmocka_unit_test(test_server_buffer_grows),
        cmocka_unit_test_setup_teardown(test_server_sleeping_handler_does_not_block_others, live_setup,
                                        live_teardown),
        cmocka_unit_test(test_server_ipv6_and_bad_listen),
        cmocka_unit_test(test_server_thread_pool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
