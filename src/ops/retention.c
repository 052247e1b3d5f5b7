/*
 * Retention: the purge thread and its passes, each batch one writer op.
 */
#include "ops/retention.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "log.h"
#include "ops/metrics.h"
#include "store/writer.h"

#define PART "retention"

struct retention {
    struct retention_deps deps;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stopping, started;
    struct log_limiter lim;
};

enum purge_kind { PURGE_DELIVERIES, PURGE_EVENTS, PURGE_INBOX };

struct purge_op {
    enum purge_kind kind;
    int64_t before;
    int limit;
    int64_t after_seq, next_seq;
    int64_t purged;
    int64_t took_us; /* the store call's own time, on the writer thread */
};

static int op_purge(struct store *s, void *arg)
{
    struct purge_op *o = arg;
    int64_t started = metrics_now_us();
    int rc;

    switch (o->kind) {
    case PURGE_DELIVERIES:
        rc = store_purge_deliveries(s, o->before, o->limit, &o->purged);
        break;
    case PURGE_EVENTS:
        rc = store_purge_events(s, o->after_seq, o->before, o->limit, &o->next_seq, &o->purged);
        break;
    case PURGE_INBOX:
    default:
        rc = store_purge_inbox(s, o->before, o->limit, &o->purged);
        break;
    }
    o->took_us = metrics_now_us() - started;
    return rc;
}

/*
 * The wait after a batch: at least pause_ms, and long enough that the purge holds the writer for at
 * most `share` of the time (a batch that took 8 ms with share 0.1 waits 72 ms), so deliveries keep
 * their pace whatever the store's speed.
 */
static int64_t pause_after(const struct retention *r, int64_t took_us)
{
    int64_t ms = r->deps.pause_ms;
    double share = r->deps.share > 0 && r->deps.share < 1 ? r->deps.share : 1;
    int64_t fair = (int64_t)((double)took_us * (1.0 - share) / share / 1000.0);

    return fair > ms ? fair : ms;
}

/* Waits pause_ms (or until stop); true when stopping. */
static bool pause_or_stop(struct retention *r, int64_t ms)
{
    struct timespec until;
    bool stopping;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&r->mu);
    while (!r->stopping && ms > 0 && pthread_cond_timedwait(&r->cv, &r->mu, &until) != ETIMEDOUT) {
    }
    stopping = r->stopping;
    pthread_mutex_unlock(&r->mu);
    return stopping;
}

/* Batches of one kind until a batch comes back short (or, for events, the scan wraps). */
static int purge_all(struct retention *r, enum purge_kind kind, int64_t before, int64_t *total)
{
    struct purge_op o = {.kind = kind, .before = before, .limit = r->deps.batch};
    static const enum metric_counter counter[] = {METRIC_RETENTION_DELIVERIES, METRIC_RETENTION_EVENTS,
                                                  METRIC_RETENTION_INBOX};
    int rc;

    for (;;) {
        o.purged = 0;
        o.next_seq = 0;
        rc = writer_exec(r->deps.writer, op_purge, &o);
        if (rc != 0)
            return rc;
        *total += o.purged;
        metrics_add(counter[kind], (uint64_t)o.purged);
        bool more = kind == PURGE_EVENTS ? o.next_seq > 0 : o.purged >= o.limit;
        if (!more)
            return 0;
        o.after_seq = o.next_seq;
        if (pause_or_stop(r, pause_after(r, o.took_us)))
            return 0;
    }
}

int retention_run(struct retention *r, int64_t now, struct retention_totals *out)
{
    int rc = 0;

    memset(out, 0, sizeof *out);
    if (r->deps.deliveries_ms > 0) {
        rc = purge_all(r, PURGE_DELIVERIES, now - r->deps.deliveries_ms, &out->deliveries);
        if (rc == 0)
            rc = purge_all(r, PURGE_EVENTS, now - r->deps.deliveries_ms, &out->events);
    }
    if (rc == 0 && r->deps.inbox_ms > 0)
        rc = purge_all(r, PURGE_INBOX, now - r->deps.inbox_ms, &out->inbox);
    if (out->deliveries + out->events + out->inbox > 0)
        log_info(PART, "purged %lld deliveries, %lld events and %lld inbox payloads", (long long)out->deliveries,
                 (long long)out->events, (long long)out->inbox);
    return rc;
}

static void *retention_main(void *arg)
{
    struct retention *r = arg;

    while (!pause_or_stop(r, r->deps.interval_ms)) {
        struct retention_totals t;
        int rc = retention_run(r, clock_now_ms(), &t);
        if (rc != 0)
            log_limited(&r->lim, LOG_WARN, PART, "purge failed: %s (tried again next interval)", hookd_strerror(rc));
    }
    return NULL;
}

int retention_start(const struct retention_deps *deps, struct retention **out)
{
    struct retention *r = calloc(1, sizeof *r);

    *out = NULL;
    if (r == NULL)
        return HOOKD_ENOMEM;
    r->deps = *deps;
    if (r->deps.batch <= 0)
        r->deps.batch = 500;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    if (deps->interval_ms > 0 && (deps->deliveries_ms > 0 || deps->inbox_ms > 0)) {
        if (pthread_create(&r->thread, NULL, retention_main, r) != 0) {
            retention_stop(r);
            return HOOKD_ENOMEM;
        }
        r->started = true;
    }
    *out = r;
    return 0;
}

void retention_stop(struct retention *r)
{
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->mu);
    r->stopping = true;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    if (r->started)
        pthread_join(r->thread, NULL);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r);
}
