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

#include "core/clock.h"
#include "core/ids.h"
#include "log.h"
#include "ops/metrics.h"

#define DEFAULT_MAX_BATCH 512
#define DEFAULT_MAX_DEFER_US 5000
#define BUSY_RETRIES 5          /* BEGIN / COMMIT attempts beyond busy_timeout */
#define BUSY_BACKOFF_MS 20      /* doubled after each attempt */
#define BUSY_BACKOFF_MAX_MS 100 /* with a write bound: BEGIN is tried again at least this often */
#define PROBE_MS 200            /* a busy writer with nothing queued checks this often whether it still is */
/*
 * Room for the application on a store whose write lock is one per file
 * (SQLite). SQLite's lock has no queue: an application's busy handler polls
 * it (after 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, then every 100 ms), and
 * a writer that BEGINs again the moment it commits wins nearly every poll, so
 * under load an application's outbox insert could wait out its whole busy
 * timeout and fail. So while another process has the file open
 * (store_others_open, looked at every second), a writer running batches back
 * to back leaves the lock free now and then, in one of two ways:
 *
 * - Sharing: while another connection has committed in the last
 *   APP_RECENT_US (SQLite's data_version on the writer's connection moved;
 *   the daemon's only writing connection on SQLite is this one), after each
 *   run of RUN_MIN_US to RUN_MIN_US + RUN_JITTER_US of batches back to back,
 *   a gap of application_share of the time. With the lock free a share s of
 *   the time each poll wins with about that chance (the run's length varies,
 *   so a poll's phase cannot lock onto the writer's): at the default 0.2, an
 *   application with a 5 s busy timeout (about 60 polls) fails once in about
 *   500,000 commits. The batch after a gap is larger, which costs less per op.
 * - Probing: otherwise (the other processes only hold the file open, or
 *   their last commit is older), one gap of PROBE_GAP_US after each
 *   PROBE_EVERY_US of batches back to back: longer than the busy handler's
 *   longest sleep (and its wake-up, up to 100 ms late), so an application
 *   that began to wait before it gets the lock in it. Within the common 5 s
 *   busy timeout (its polls every 100 ms after the first 228 ms) come two
 *   such gaps: a wait of about 2.2 s, 4.4 s if a wake-up that came later
 *   still missed the first. Its commit then turns sharing on. That costs a
 *   saturated writer about 9 % instead of the share (with 150 ms gaps an
 *   ASan test's application, beside four busy threads on a loaded box,
 *   once missed the first and waited 3.3 s).
 *
 * A run ends by itself when the writer finds nothing queued for as long as
 * the gap it would leave. With hookd alone on the file no gaps are left:
 * they would cost a busy writer its share for nothing.
 */
#define RUN_MIN_US 8000
#define RUN_JITTER_US 4000
#define GAP_MAX_US 50000      /* after a batch that held the lock far longer than a run */
#define OTHERS_CHECK_US 1000000 /* how often the writer looks whether another process has the store open */
#define APP_RECENT_US 2000000   /* sharing lasts this long after another connection's last commit was seen */
#define PROBE_EVERY_US 2000000  /* probing: a run of batches back to back this long, then */
#define PROBE_GAP_US 200000     /* this gap (the busy handler sleeps 100 ms at most, plus its wake-up) */
#define LOG_PART "writer"

struct write_op {
    write_fn fn;
    write_group_fn group; /* NULL: runs alone */
    write_done_fn done;
    void *arg;
    int result;
    bool deferred;        /* may wait for company until deadline */
    bool bounded;         /* writer_submit_bounded: given up (EBUSY, never run) at deadline_mono */
    bool answered;        /* done already ran (given up while the batch waited) */
    int64_t deadline_mono;
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
    /* Busy episodes: writes that cannot commit within write_timeout_ms. */
    _Atomic int64_t stuck_since; /* mono ms since the store first answered busy; 0: not stuck */
    atomic_bool episode;         /* logged as busy; ends with the next clean commit */
    int64_t episode_started;     /* writer thread only */
    uint64_t episode_answers;    /* writer thread only */
    /* Room for others (single-node stores), writer thread only: */
    int64_t gap_us;              /* the lock left free after each run (0: never) */
    int64_t run_since_us;        /* when the current run of batches back to back began (0: none) */
    int64_t run_max_us;          /* how long this run may last */
    int64_t last_end_us;         /* when the last batch ended */
    int64_t room_gap_us;         /* the gap the current way of leaving room leaves (sharing or probing) */
    int64_t run_free_us;         /* the lock free between this run's batches, shorter each than a gap */
    int64_t app_commit_us;       /* when another connection's commit was last seen (0: not yet) */
    bool version_known;          /* store_changed has been asked once: its next answers are news */
    bool others;                 /* another process has the store open (looked at every OTHERS_CHECK_US) */
    int64_t others_checked_us;
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

static int commit_step(struct store *s) { return store_commit(s); }
static int commit_lazy_step(struct store *s) { return store_commit_lazy(s); }

/* ---- busy episodes ------------------------------------------------------------ */

static bool writer_stopping(struct writer *w)
{
    bool stopping;

    pthread_mutex_lock(&w->mu);
    stopping = w->stopping;
    pthread_mutex_unlock(&w->mu);
    return stopping;
}

static void stuck_mark(struct writer *w)
{
    int64_t zero = 0;

    atomic_compare_exchange_strong(&w->stuck_since, &zero, clock_mono_ms());
}

/* Once per episode, not once per request. */
static void episode_open(struct writer *w)
{
    if (atomic_exchange(&w->episode, true))
        return;
    w->episode_started = clock_mono_ms();
    w->episode_answers = 0;
    log_error(LOG_PART,
              "store busy: writes cannot commit within %lld ms (another connection holds a lock); "
              "writes waiting longer are answered 503 store_busy until it is released",
              (long long)w->opt.write_timeout_ms);
}

static void episode_close(struct writer *w)
{
    atomic_store(&w->stuck_since, 0);
    if (!atomic_exchange(&w->episode, false))
        return;
    log_warn(LOG_PART, "store writes commit again after %.1f s busy (%llu writes answered store_busy)",
             (double)(clock_mono_ms() - w->episode_started) / 1000.0, (unsigned long long)w->episode_answers);
}

/* Whether the store has been busy for longer than the bound: an episode, logged once. */
static void stuck_check(struct writer *w)
{
    int64_t since = atomic_load(&w->stuck_since);

    if (w->opt.write_timeout_ms > 0 && since != 0 && clock_mono_ms() - since >= w->opt.write_timeout_ms)
        episode_open(w);
}

/* A bounded op past its deadline is answered at once and never runs: 503 means "not applied". */
static void op_answer_busy(struct writer *w, struct write_op *op)
{
    op->result = HOOKD_EBUSY;
    op->answered = true;
    episode_open(w);
    w->episode_answers++;
    pthread_mutex_lock(&w->mu);
    w->stats.busy_answers++;
    pthread_mutex_unlock(&w->mu);
    if (op->done)
        op->done(op->arg, HOOKD_EBUSY);
}

static bool op_expired(const struct write_op *op, int64_t mono) { return op->bounded && mono >= op->deadline_mono; }

/* Answers the expired bounded ops of the batch; returns whether any op is left to run. */
static bool batch_expire(struct writer *w, struct write_op *batch)
{
    int64_t mono = clock_mono_ms();
    bool live = false;

    for (struct write_op *op = batch; op; op = op->next) {
        if (!op->answered && op_expired(op, mono))
            op_answer_busy(w, op);
        live = live || !op->answered;
    }
    return live;
}

/* Answers (and drops) the expired bounded ops still in the queue while a batch is stuck. */
static void queue_expire(struct writer *w)
{
    struct write_op *gone = NULL, **pp, *op;
    int64_t mono = clock_mono_ms();

    pthread_mutex_lock(&w->mu);
    w->tail = NULL;
    for (pp = &w->head; (op = *pp) != NULL;) {
        if (op_expired(op, mono)) {
            *pp = op->next;
            w->queued--;
            w->urgent -= !op->deferred;
            op->next = gone;
            gone = op;
        } else {
            w->tail = op;
            pp = &op->next;
        }
    }
    pthread_mutex_unlock(&w->mu);
    while ((op = gone) != NULL) {
        gone = op->next;
        op_answer_busy(w, op);
        free(op);
    }
}

/*
 * Runs one op in its own savepoint; returns 0, or the error that makes the
 * whole transaction unusable. A bounded op past its deadline does not run; one
 * whose statement waited out the lock wait (HOOKD_EBUSY: PostgreSQL's
 * lock_timeout) is rolled back and tried again until its deadline.
 */
static int op_run_alone(struct writer *w, struct write_op *op)
{
    struct store *s = w->s;

    for (;;) {
        int result;

        if (op->answered)
            return 0;
        if (op_expired(op, clock_mono_ms())) {
            op_answer_busy(w, op);
            return 0;
        }
        result = store_savepoint(s);
        if (result)
            return result;
        op->result = op->fn(s, op->arg);
        if (op->result >= 0)
            return store_release(s);
        result = store_rollback_to(s);
        if (result || op->result != HOOKD_EBUSY)
            return result;
        stuck_mark(w);
        stuck_check(w);
        if (!op->bounded || w->opt.write_timeout_ms <= 0)
            return 0;
        queue_expire(w);
    }
}

/*
 * Runs the n ops from first (one group, consecutive) in one call inside one
 * savepoint. When the call fails as a whole, its savepoint is rolled back and
 * the ops run alone, so one bad op still spoils only itself.
 */
static int group_run(struct writer *w, struct write_op *first, size_t n)
{
    struct store *s = w->s;
    void **args = malloc(n * sizeof *args);
    int *results = malloc(n * sizeof *results);
    struct write_op *op = first;
    int rc, result = 0;

    if (!args || !results)
        goto alone; /* no room for the group: one by one still works */
    for (size_t i = 0; i < n; i++, op = op->next) {
        /* An op answered already, or past its bound: alone, each is skipped or answered as it should be. */
        if (op->answered || op_expired(op, clock_mono_ms()))
            goto alone;
        args[i] = op->arg;
    }
    result = store_savepoint(s);
    if (result)
        goto out;
    rc = first->group(s, args, n, results);
    if (rc < 0) {
        result = store_rollback_to(s);
        if (result)
            goto out;
        if (rc == HOOKD_EBUSY && !first->bounded) {
            /* A lock wait ran out: one by one would wait again each. Their owners try again.
             * (Bounded ops are tried alone instead, each again until its own bound.) */
            stuck_mark(w);
            stuck_check(w);
            op = first;
            for (size_t i = 0; i < n; i++, op = op->next)
                op->result = HOOKD_EBUSY;
            goto out;
        }
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
        result = op_run_alone(w, op);
out:
    free(args);
    free(results);
    return result;
}

/* Runs every op of the batch in its own savepoint, or with the consecutive
 * ops of its group in one; returns 0, or the error that makes the whole
 * transaction unusable. */
static int batch_run_ops(struct writer *w, struct write_op *batch)
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
        result = n > 1 ? group_run(w, op, n) : op_run_alone(w, op);
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

/*
 * BEGIN, tried again while the store is busy (another process holds the
 * write lock). Without a bound, a few times (BUSY_RETRIES). With one, until
 * it goes through (nothing accepted is given up: attempt results, fan-out
 * records and claims wait for the lock), answering meanwhile the bounded
 * ops, in the batch and in the queue, that have waited longer than the
 * bound; at stop, for one bound more at most. Returns HOOKD_EBUSY as well
 * when every op of the batch has been answered.
 */
static int batch_begin(struct writer *w, struct write_op *batch)
{
    int64_t start = clock_mono_ms(), backoff = BUSY_BACKOFF_MS;
    int result = store_begin(w->s);

    for (int i = 0; result == HOOKD_EBUSY; i++) {
        if (w->opt.write_timeout_ms <= 0) {
            if (i >= BUSY_RETRIES)
                break;
        } else {
            stuck_mark(w);
            stuck_check(w);
            queue_expire(w);
            if (!batch_expire(w, batch))
                break;
            if (writer_stopping(w) && clock_mono_ms() - start >= w->opt.write_timeout_ms)
                break;
        }
        sleep_ms(backoff);
        backoff = backoff * 2 > BUSY_BACKOFF_MAX_MS && w->opt.write_timeout_ms > 0 ? BUSY_BACKOFF_MAX_MS : backoff * 2;
        result = store_begin(w->s);
    }
    return result;
}

/* One transaction for the whole batch; on failure every op gets the error. */
static void batch_commit(struct writer *w, struct write_op *batch, size_t n)
{
    int64_t started_us = metrics_now_us();
    int result = batch_begin(w, batch);

    if (result == 0) {
        result = batch_run_ops(w, batch);
        if (result == 0)
            result = with_busy_retry(w->s, w->opt.lazy_commit ? commit_lazy_step : commit_step);
        if (result && store_rollback(w->s) != 0)
            log_warn(LOG_PART, "rollback after a failed batch failed too");
    }
    if (result) {
        for (struct write_op *op = batch; op; op = op->next)
            op->result = op->answered ? op->result : result;
        if (result != HOOKD_EBUSY || w->opt.write_timeout_ms <= 0)
            batch_failed_log(w, n, result);
    } else {
        bool busy = false;
        for (struct write_op *op = batch; op && !busy; op = op->next)
            busy = op->result == HOOKD_EBUSY; /* given up (answered) or its lock wait ran out */
        metrics_store_commit(metrics_now_us() - started_us, n);
        if (!busy)
            episode_close(w);
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
        if (!w->head && atomic_load(&w->episode)) {
            /* Busy, and nothing queued to find out when it ends: probe now and then. */
            struct timespec probe_at;
            clock_gettime(CLOCK_REALTIME, &probe_at);
            probe_at.tv_nsec += PROBE_MS * 1000000L;
            probe_at.tv_sec += probe_at.tv_nsec / 1000000000;
            probe_at.tv_nsec %= 1000000000;
            if (pthread_cond_timedwait(&w->cv, &w->mu, &probe_at) == ETIMEDOUT && !w->head)
                return;
            continue;
        }
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

/* What a publish needs, read only: SQLite's write lock (the batch's BEGIN
 * IMMEDIATE), PostgreSQL's lock on the outbox (a read waits behind an
 * application's LOCK TABLE as an insert does). */
static int probe_run(struct store *s, void *arg)
{
    bool any;

    (void)arg;
    return store_outbox_pending(s, &any);
}

static void run_start(struct writer *w, int64_t now)
{
    uint16_t r = 0;

    random_bytes(&r, sizeof r);
    w->run_since_us = now;
    w->run_max_us = RUN_MIN_US + (int64_t)r % RUN_JITTER_US;
    w->run_free_us = 0;
}

static void gap_sleep(int64_t us)
{
    struct timespec gap = {.tv_sec = (time_t)(us / 1000000), .tv_nsec = (long)(us % 1000000) * 1000L};

    while (nanosleep(&gap, &gap) == -1 && errno == EINTR) {
    }
}

/* Before a batch: on a single-node store, a gap once the run of batches back to back is long enough. */
static void leave_room(struct writer *w)
{
    int64_t now = metrics_now_us();
    bool changed = false;

    if (w->gap_us <= 0)
        return;
    if (w->others_checked_us == 0 || now - w->others_checked_us >= OTHERS_CHECK_US) {
        w->others = store_others_open(w->s);
        w->others_checked_us = now;
    }
    if (!w->others) {
        w->room_gap_us = 0;
        return; /* no application has the file open: nobody to leave room for */
    }
    /* Another connection committed since the last look (the first look only learns where things stand). */
    if (store_changed(w->s, &changed) == 0) {
        if (changed && w->version_known)
            w->app_commit_us = now;
        w->version_known = true;
    }
    bool sharing = w->app_commit_us != 0 && now - w->app_commit_us < APP_RECENT_US;
    w->room_gap_us = sharing ? w->gap_us : PROBE_GAP_US;
    if (w->run_since_us == 0) {
        run_start(w, now);
        return;
    }
    if (now - w->run_since_us < (sharing ? w->run_max_us : PROBE_EVERY_US))
        return;
    /*
     * The lock was already free between the run's batches for run_free_us:
     * each poll of the application wins with that share too, whatever the
     * pieces' length. A writer that left the share free by itself leaves no
     * gap (the probe's long stall would only delay hookd's own commits).
     */
    int64_t run_us = now - w->run_since_us, gap_us = PROBE_GAP_US;
    int64_t share_us = run_us * w->gap_us / (RUN_MIN_US + RUN_JITTER_US / 2); /* the gap this run asks for */
    if (sharing) {
        /* The gap follows the run it ends, so the share holds whatever the batches' length. */
        gap_us = share_us - w->run_free_us;
        gap_us = gap_us > GAP_MAX_US ? GAP_MAX_US : gap_us;
    } else if (w->run_free_us >= share_us) {
        gap_us = 0;
    }
    if (gap_us <= 0) {
        pthread_mutex_lock(&w->mu);
        w->stats.room_free_runs++;
        pthread_mutex_unlock(&w->mu);
        run_start(w, now);
        return;
    }
    gap_sleep(gap_us);
    pthread_mutex_lock(&w->mu);
    w->stats.room_gaps += sharing;
    w->stats.room_probes += !sharing;
    w->stats.room_us += (uint64_t)gap_us;
    pthread_mutex_unlock(&w->mu);
    run_start(w, metrics_now_us());
}

/* As a batch begins: the lock was free since the last one ended; long enough, and the run is over. */
static void batch_begins(struct writer *w)
{
    if (w->room_gap_us <= 0 || w->run_since_us == 0)
        return;
    int64_t free_us = metrics_now_us() - w->last_end_us;
    if (free_us >= w->room_gap_us)
        w->run_since_us = 0;
    else if (w->last_end_us >= w->run_since_us)
        w->run_free_us += free_us; /* free, though too briefly to end the run: it counts toward the share */
}

static void *writer_main(void *arg)
{
    struct writer *w = arg;

    for (;;) {
        struct write_op *batch, *last, *op, *next;
        size_t n = 1;

        leave_room(w); /* before the batch is taken: what comes meanwhile joins it */
        pthread_mutex_lock(&w->mu);
        batch_wait(w);
        if (!w->head && !w->stopping) {
            /* A busy episode with nothing queued: a probe batch tells when writes commit again. */
            struct write_op probe = {.fn = probe_run};
            pthread_mutex_unlock(&w->mu);
            batch_commit(w, &probe, 1);
            continue;
        }
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

        batch_begins(w);
        batch_commit(w, batch, n);
        w->last_end_us = metrics_now_us();
        /* Only now, after the commit, do callers learn their results. */
        for (op = batch; op; op = next) {
            next = op->next;
            if (op->done && !op->answered)
                op->done(op->arg, op->result);
            free(op);
        }
        /* What the commit left to this connection (SQLite: the WAL's last checkpoint step), now that the
         * batch has its answers. */
        store_checkpoint_due(w->s);
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
    if (store_backend(w->s)->single_node && w->opt.application_share > 0) {
        double share = w->opt.application_share > 0.5 ? 0.5 : w->opt.application_share;
        w->gap_us = (int64_t)((RUN_MIN_US + RUN_JITTER_US / 2) * share / (1 - share));
    }
    /* Its commits are what every caller waits for: no checkpoint on this thread (SQLite). */
    if (store_checkpoint_aside(w->s) != 0)
        log_warn(LOG_PART, "cannot move the checkpoints off the writer's connection; its commits run them");
    if (w->opt.lock_wait_ms > 0 && store_lock_wait(w->s, w->opt.lock_wait_ms) != 0)
        log_warn(LOG_PART, "cannot bound the lock wait of the writer's connection");
    if (w->opt.quiet_outbox && (result = store_quiet_outbox(w->s)) != 0) {
        log_error(LOG_PART, "cannot turn off the outbox notifications of the writer's connection: %s",
                  hookd_strerror(result));
        goto fail;
    }
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

static int submit(struct writer *w, write_fn fn, write_group_fn group, write_done_fn done, void *arg, bool deferred,
                  bool bounded)
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
    op->bounded = bounded && w->opt.write_timeout_ms > 0;
    op->deadline_mono = clock_mono_ms() + w->opt.write_timeout_ms;
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
    return submit(w, fn, NULL, done, arg, false, false);
}

int writer_submit_bounded(struct writer *w, write_fn fn, write_done_fn done, void *arg)
{
    return submit(w, fn, NULL, done, arg, false, true);
}

bool writer_degraded(struct writer *w)
{
    int64_t since;

    if (w == NULL)
        return false;
    since = atomic_load(&w->stuck_since);
    return atomic_load(&w->episode) ||
           (w->opt.write_timeout_ms > 0 && since != 0 && clock_mono_ms() - since >= w->opt.write_timeout_ms);
}

int writer_submit_deferred(struct writer *w, write_fn fn, write_done_fn done, void *arg)
{
    return submit(w, fn, NULL, done, arg, true, false);
}

int writer_submit_grouped(struct writer *w, write_fn fn, write_group_fn group, write_done_fn done, void *arg)
{
    return submit(w, fn, group, done, arg, true, false);
}

int writer_submit_bounded_grouped(struct writer *w, write_fn fn, write_group_fn group, write_done_fn done, void *arg)
{
    return submit(w, fn, group, done, arg, false, true);
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

static int exec_op(struct writer *w, write_fn fn, void *arg, bool bounded)
{
    struct exec_call c = {.fn = fn, .arg = arg};
    int result;

    /* On the writer thread this would wait for itself. */
    if (!fn || pthread_equal(pthread_self(), w->thread))
        return HOOKD_EINVAL;
    pthread_mutex_init(&c.mu, NULL);
    pthread_cond_init(&c.cv, NULL);
    result = submit(w, exec_run, NULL, exec_done, &c, false, bounded);
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

int writer_exec(struct writer *w, write_fn fn, void *arg) { return exec_op(w, fn, arg, false); }
int writer_exec_bounded(struct writer *w, write_fn fn, void *arg) { return exec_op(w, fn, arg, true); }

void writer_stats(struct writer *w, struct writer_stats *out)
{
    pthread_mutex_lock(&w->mu);
    *out = w->stats;
    pthread_mutex_unlock(&w->mu);
}
