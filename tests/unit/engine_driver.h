/*
 * Driving the HTTP engine from a test: a done callback that copies what it
 * was given into a struct seen (the result's pointers die with the callback),
 * a count of completions, and run_until, which runs the engine until that
 * count is reached. A file with a second classifier of its own sets
 * seen_classify to have its reading of each result kept in seen.forward.
 * Include after <cmocka.h>.
 */
#ifndef HOOKD_TESTS_ENGINE_DRIVER_H
#define HOOKD_TESTS_ENGINE_DRIVER_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/clock.h"
#include "net/http_client.h"
#include "outbound/request.h"

/* What a done callback saw. */
struct seen {
    int calls;
    enum transport_error transport;
    int status;
    char body[128]; /* the start of the body; the engines under test cap theirs below this */
    size_t body_len;
    bool truncated, aborted, reused, cancelled;
    char retry_after[64];
    char error[HTTP_CLIENT_ERROR_MAX];
    int outcome;            /* the engine ran the request's classifier */
    int forward;            /* seen_classify on the same result; 0 without one */
    int64_t retry_after_ms; /* request_outcome's reading of it */
    int duration_ms;
    int64_t started_at_ms;
};

/* Done callbacks run since the test last set it to 0. */
static int completions;

/* A second classifier for seen.forward; NULL (the default) leaves it alone. */
static int (*seen_classify)(const struct http_client_result *res);

static void on_done(void *arg, const struct http_client_result *res)
{
    struct seen *s = arg;
    struct request_outcome o;

    s->calls++;
    completions++;
    s->transport = res->transport;
    s->status = res->status;
    snprintf(s->body, sizeof s->body, "%s", res->body);
    s->body_len = res->body_len;
    s->truncated = res->body_truncated;
    s->aborted = res->body_aborted;
    s->reused = res->connection_reused;
    s->cancelled = res->cancelled;
    snprintf(s->retry_after, sizeof s->retry_after, "%s", res->retry_after);
    snprintf(s->error, sizeof s->error, "%s", res->error);
    s->outcome = res->outcome;
    if (seen_classify != NULL)
        s->forward = seen_classify(res);
    s->duration_ms = res->duration_ms;
    s->started_at_ms = res->started_at_ms;
    request_outcome(res, &o);
    s->retry_after_ms = o.retry_after_ms;
}

/* Runs the engine until want completions have been counted, failing the test after max_ms. */
static void run_until(struct http_engine *e, int want, int max_ms)
{
    int64_t deadline = clock_mono_ms() + max_ms;

    while (completions < want && clock_mono_ms() < deadline) {
        http_engine_run(e);
        if (completions < want)
            http_engine_wait(e, 20);
    }
    assert_int_equal(completions, want);
}
#endif
