/*
 * A writer: a queue of ops drained by one thread into batch transactions
 * (one savepoint per op, one commit per batch), with each caller told its
 * result only after the commit (durable unless the writer commits lazily).
 */
#include "store/writer.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "log.h"

#define DEFAULT_MAX_BATCH 512
#define DEFAULT_MAX_DEFER_US 5000
#define BUSY_RETRIES 5          /* BEGIN / COMMIT attempts beyond busy_timeout */
#define BUSY_BACKOFF_MS 20      /* doubled after each attempt */
#define LOG_PART "writer"

struct write_op {
    write_fn fn;
    write_group_fn group; /* NULL: runs alone */
    write_done_fn done;
    void *arg;
    int result;
    bool deferred;        /* may wait for company until deadline */
    struct timespec deadline;
    struct write_op *next;
};

struct writer {
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* the writer thread waits here for ops */
    struct write_op *head, *tail;
    size_t queued;
    size_t urgent;              /* queued ops that are not deferred */
    bool flush;                 /* writer_flush: take what is queued now */
    bool stopping;
    struct writer_stats stats;  /* under mu */
    struct writer_options opt;
    struct store *s;            /* used by the writer thread only */
    pthread_t thread;
    struct log_limiter fail_log;
};

/* ---- batches -------------------------------------------------------------- */

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

/* Runs step (store_begin or store_commit) again while the store reports
 * BUSY: another process may hold the write lock past busy_timeout. */
static int with_busy_retry(struct store *s, int (*step)(struct store *))
{
    int64_t backoff = BUSY_BACKOFF_MS;
    int result = step(s);

    for (int i = 0; i < BUSY_RETRIES && result == HOOKD_EBUSY; i++) {
        sleep_ms(backoff);
        backoff *= 2;
        result = step(s);
    }
    return result;
}

static int begin_step(struct store *s) { return store_begin(s); }
static int commit_step(struct store *s) { return store_commit(s); }
static int commit_lazy_step(struct store *s) { return store_commit_lazy(s); }

/* Runs one op in its own savepoint; returns 0, or the error that makes the
 * whole transaction unusable. */
static int op_run_alone(struct store *s, struct write_op *op)
{
    int result = store_savepoint(s);

    if (result)
        return result;
    op->result = op->fn(s, op->arg);
    return op->result < 0 ? store_rollback_to(s) : store_release(s);
}

/*
 * Runs the n ops from first (one group, consecutive) in one call inside one
 * savepoint. When the call fails as a whole, its savepoint is rolled back and
 * the ops run alone, so one bad op still spoils only itself.
 */
static int group_run(struct store *s, struct write_op *first, size_t n)
{
    void **args = malloc(n * sizeof *args);
    int *results = malloc(n * sizeof *results);
    struct write_op *op = first;
    int rc, result = 0;

    if (!args || !results)
        goto alone; /* no room for the group: one by one still works */
    for (size_t i = 0; i < n; i++, op = op->next)
        args[i] = op->arg;
    result = store_savepoint(s);
    if (result)
        goto out;
    rc = first->group(s, args, n, results);
    if (rc < 0) {
        result = store_rollback_to(s);
        if (result)
            goto out;
        goto alone;
    }
    result = store_release(s);
    if (result)
        goto out;
    op = first;
    for (size_t i = 0; i < n; i++, op = op->next)
        op->result = results[i];
    goto out;
alone:
    op = first;
    for (size_t i = 0; i < n && result == 0; i++, op = op->next)
        result = op_run_alone(s, op);
out:
    free(args);
    free(results);
    return result;
}

/* Runs every op of the batch in its own savepoint, or with the consecutive
 * ops of its group in one; returns 0, or the error that makes the whole
 * transaction unusable. */
static int batch_run_ops(struct store *s, struct write_op *batch)
{
    struct write_op *op = batch;
    int result = 0;

    while (op && result == 0) {
        struct write_op *last = op;
        size_t n = 1;

        while (op->group && last->next && last->next->group == op->group) {
            last = last->next;
            n++;
        }
        result = n > 1 ? group_run(s, op, n) : op_run_alone(s, op);
        op = last->next;
    }
    return result;
}

/*
 * A store that is unavailable fails every writer's batches at once (the
 * daemon may run two: ops and claims): those failures share one limiter, so
 * an outage costs a few lines, not a few per writer.
 */
static pthread_mutex_t outage_mu = PTHREAD_MUTEX_INITIALIZER;
static struct log_limiter outage_lim; /* under outage_mu */
static atomic_bool outage_logged;

static void batch_failed_log(struct writer *w, size_t n, int result)
{
    if (result != HOOKD_EUNAVAIL) {
        log_limited(&w->fail_log, LOG_ERROR, LOG_PART, "batch of %zu ops failed: %s", n, hookd_strerror(result));
        return;
    }
    pthread_mutex_lock(&outage_mu);
    log_limited(&outage_lim, LOG_ERROR, LOG_PART, "batch of %zu ops failed: %s", n, hookd_strerror(result));
    pthread_mutex_unlock(&outage_mu);
    atomic_store(&outage_logged, true);
}

static void outage_log_reset(void)
{
    pthread_mutex_lock(&outage_mu);
    log_limiter_reset(&outage_lim, LOG_PART, "commits");
    pthread_mutex_unlock(&outage_mu);
}

/* One transaction for the whole batch; on failure every op gets the error. */
static void batch_commit(struct writer *w, struct write_op *batch, size_t n)
{
    int result = with_busy_retry(w->s, begin_step);

    if (result == 0) {
        result = batch_run_ops(w->s, batch);
        if (result == 0)
            result = with_busy_retry(w->s, w->opt.lazy_commit ? commit_lazy_step : commit_step);
        if (result && store_rollback(w->s) != 0)
            log_warn(LOG_PART, "rollback after a failed batch failed too");
    }
    if (result) {
        for (struct write_op *op = batch; op; op = op->next)
            op->result = result;
        batch_failed_log(w, n, result);
    } else {
        log_limiter_reset(&w->fail_log, LOG_PART, "commits");
        if (atomic_exchange(&outage_logged, false))
            outage_log_reset();
    }
    pthread_mutex_lock(&w->mu);
    w->stats.batches += result == 0;
    w->stats.ops += result == 0 ? n : 0;
    w->stats.failed_commits += result != 0;
    pthread_mutex_unlock(&w->mu);
}

static bool deadline_passed(const struct timespec *t)
{
    struct timespec now;

    clock_gettime(CLOCK_REALTIME, &now);
    return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

/* Waits (under mu) until an urgent op is queued, the oldest deferred op is due,
 * or stop begins; then, when max_wait_us is set, a little longer so more ops
 * join the batch. Ops are FIFO, so the head is the oldest deferred one. */
static void batch_wait(struct writer *w)
{
    struct timespec deadline;

    for (;;) {
        if (w->stopping || (w->head && (w->urgent > 0 || w->flush || w->queued >= (size_t)w->opt.max_batch)))
            break;
        if (!w->head) {
            pthread_cond_wait(&w->cv, &w->mu);
            continue;
        }
        if (deadline_passed(&w->head->deadline))
            break;
        pthread_cond_timedwait(&w->cv, &w->mu, &w->head->deadline);
    }
    if (!w->head || w->opt.max_wait_us <= 0 || w->stopping)
        return;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_nsec += (long)(w->opt.max_wait_us % 1000000) * 1000;
    deadline.tv_sec += (time_t)(w->opt.max_wait_us / 1000000) + deadline.tv_nsec / 1000000000;
    deadline.tv_nsec %= 1000000000;
    while (w->queued < (size_t)w->opt.max_batch && !w->stopping) {
        if (pthread_cond_timedwait(&w->cv, &w->mu, &deadline) == ETIMEDOUT)
            break;
    }
}

static void *writer_main(void *arg)
{
    struct writer *w = arg;

    for (;;) {
        struct write_op *batch, *last, *op, *next;
        size_t n = 1;

        pthread_mutex_lock(&w->mu);
        batch_wait(w);
        if (!w->head) {
            /* Stopping and drained. */
            pthread_mutex_unlock(&w->mu);
            break;
        }
        batch = last = w->head;
        w->urgent -= !last->deferred;
        while (last->next && n < (size_t)w->opt.max_batch) {
            last = last->next;
            w->urgent -= !last->deferred;
            n++;
        }
        w->head = last->next;
        if (!w->head) {
            w->tail = NULL;
            w->flush = false;
        }
        w->queued -= n;
        last->next = NULL;
        pthread_mutex_unlock(&w->mu);

        batch_commit(w, batch, n);
        /* Only now, after the commit, do callers learn their results. */
        for (op = batch; op; op = next) {
            next = op->next;
            if (op->done)
                op->done(op->arg, op->result);
            free(op);
        }
    }
    return NULL;
}

/* ---- public ----------------------------------------------------------------- */

int writer_start(const char *dsn, const struct writer_options *opt, struct writer **out)
{
    struct writer *w = calloc(1, sizeof *w);
    int result;

    *out = NULL;
    if (!w)
        return HOOKD_ENOMEM;
    if (opt)
        w->opt = *opt;
    if (w->opt.max_batch <= 0)
        w->opt.max_batch = DEFAULT_MAX_BATCH;
    if (w->opt.max_wait_us < 0)
        w->opt.max_wait_us = 0;
    if (w->opt.max_defer_us <= 0)
        w->opt.max_defer_us = DEFAULT_MAX_DEFER_US;
    result = store_open(dsn, &w->s);
    if (result)
        goto fail;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (pthread_create(&w->thread, NULL, writer_main, w) != 0) {
        result = HOOKD_ENOMEM;
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        goto fail;
    }
    *out = w;
    return 0;
fail:
    store_close(w->s);
    free(w);
    return result;
}

void writer_stop(struct writer *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stopping = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    store_close(w->s);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

static int submit(struct writer *w, write_fn fn, write_group_fn group, write_done_fn done, void *arg, bool deferred)
{
    struct write_op *op;
    int result = 0;

    if (!fn)
        return HOOKD_EINVAL;
    op = calloc(1, sizeof *op);
    if (!op)
        return HOOKD_ENOMEM;
    op->fn = fn;
    op->group = group;
    op->done = done;
    op->arg = arg;
    op->deferred = deferred;
    if (deferred) {
        clock_gettime(CLOCK_REALTIME, &op->deadline);
        op->deadline.tv_nsec += (long)(w->opt.max_defer_us % 1000000) * 1000;
        op->deadline.tv_sec += (time_t)(w->opt.max_defer_us / 1000000) + op->deadline.tv_nsec / 1000000000;
        op->deadline.tv_nsec %= 1000000000;
    }
    pthread_mutex_lock(&w->mu);
    if (w->stopping) {
        result = HOOKD_EUNAVAIL;
    } else {
        if (w->tail)
            w->tail->next = op;
        else
            w->head = op;
        w->tail = op;
        w->queued++;
        w->urgent += !deferred;
        pthread_cond_signal(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
    if (result)
        free(op);
    return result;
}

int writer_submit(struct writer *w, write_fn fn, write_done_fn done, void *arg)
{
    return submit(w, fn, NULL, done, arg, false);
}

int writer_submit_deferred(struct writer *w, write_fn fn, write_done_fn done, void *arg)
{
    return submit(w, fn, NULL, done, arg, true);
}

int writer_submit_grouped(struct writer *w, write_fn fn, write_group_fn group, write_done_fn done, void *arg)
{
    return submit(w, fn, group, done, arg, true);
}

void writer_flush(struct writer *w)
{
    pthread_mutex_lock(&w->mu);
    if (w->head) {
        w->flush = true;
        pthread_cond_signal(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
}

/* A writer_exec call: the op, and the caller waiting on its own condvar. */
struct exec_call {
    write_fn fn;
    void *arg;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    int result;
};

static int exec_run(struct store *s, void *arg)
{
    struct exec_call *c = arg;

    return c->fn(s, c->arg);
}

static void exec_done(void *arg, int result)
{
    struct exec_call *c = arg;

    pthread_mutex_lock(&c->mu);
    c->result = result;
    c->done = true;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

int writer_exec(struct writer *w, write_fn fn, void *arg)
{
    struct exec_call c = {.fn = fn, .arg = arg};
    int result;

    /* On the writer thread this would wait for itself. */
    if (!fn || pthread_equal(pthread_self(), w->thread))
        return HOOKD_EINVAL;
    pthread_mutex_init(&c.mu, NULL);
    pthread_cond_init(&c.cv, NULL);
    result = writer_submit(w, exec_run, exec_done, &c);
    if (result == 0) {
        pthread_mutex_lock(&c.mu);
        while (!c.done)
            pthread_cond_wait(&c.cv, &c.mu);
        result = c.result;
        pthread_mutex_unlock(&c.mu);
    }
    pthread_cond_destroy(&c.cv);
    pthread_mutex_destroy(&c.mu);
    return result;
}

void writer_stats(struct writer *w, struct writer_stats *out)
{
    pthread_mutex_lock(&w->mu);
    *out = w->stats;
    pthread_mutex_unlock(&w->mu);
}
