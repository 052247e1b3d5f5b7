/*
 * A writer: a state change is an op queued here, and one thread drains the
 * queue into a batch, runs each op inside one transaction (each op in its own
 * savepoint, so one failing op does not spoil the others), commits once (one
 * fsync for the whole batch: group commit), and only then tells each caller
 * its result. The daemon runs one for its state changes and, on a shared
 * store, a second one for claims; the relay's fan-out is not an op here but
 * a transaction on the relay's own connection.
 *
 *   writer_start   open the write connection and start the thread
 *   writer_stop    finish queued ops, commit, join, close
 *   writer_submit  queue an op; done(arg, result) runs on the writer thread after the commit
 *   writer_submit_deferred  the same for an op nobody waits on soon (attempt
 *                  results): it may wait up to max_defer_us for other ops, so
 *                  it rarely costs a commit of its own
 *   writer_submit_grouped  a deferred op that runs in one call with the ops of
 *                  the same group queued right next to it (attempt results:
 *                  one multi-row statement instead of one per delivery)
 *   writer_submit_bounded  an op somebody waits on (an admin API request): when it
 *                  cannot commit within write_timeout_ms it is given up, never
 *                  run, and its done gets HOOKD_EBUSY (so EBUSY means "not applied")
 *   writer_submit_bounded_grouped  a bounded op that runs in one call with the ops of
 *                  the same group queued right next to it (the receiver's accepts:
 *                  one multi-row insert per group commit); it waits for no company
 *   writer_degraded  whether writes are stuck now (a busy episode: /healthz)
 *   writer_flush   let the deferred ops queued so far go now, without waiting for company
 *   writer_exec    queue an op and wait for its committed result (writer_exec_bounded: a bounded one)
 *   writer_stats   batches and ops committed so far (metrics, tests)
 */
#ifndef HOOKD_STORE_WRITER_H
#define HOOKD_STORE_WRITER_H
#include <stdbool.h>
#include <stdint.h>
#include "store/store.h"

struct writer;

/* Runs inside the batch transaction on the writer thread. A negative return
 * rolls back this op's savepoint only; the value is passed on to the caller. */
typedef int (*write_fn)(struct store *s, void *arg);
/* Runs on the writer thread after the batch commit (or its failure: result is
 * then the commit's error). Must not block; it may submit further ops. */
typedef void (*write_done_fn)(void *arg, int result);

/*
 * Runs n ops of one group, queued one after another, as one call (args in
 * queue order) and sets results[i] for each; an op given a negative result
 * must have changed nothing. A negative return means the call could not be
 * done as a whole: what it did is rolled back and each op runs alone (fn).
 */
typedef int (*write_group_fn)(struct store *s, void *const *args, size_t n, int *results);

struct writer_options {
    int max_batch;         /* ops per transaction; default 512 */
    int64_t max_wait_us;   /* extra time to gather a batch once one op is queued; default 0 */
    int64_t max_defer_us;  /* longest wait of a deferred op for a batch; default 5000 */
    bool lazy_commit;      /* commit without waiting for the disk (store_commit_lazy): only for a
                            * writer whose ops acknowledge nothing, such as claims */
    /*
     * The bound of a write (0: none, the old way: BEGIN tried a few times).
     * With a bound, a batch whose BEGIN finds the store busy (another
     * process holds the write lock) is tried again until it goes through,
     * bounded ops waiting longer than this are answered HOOKD_EBUSY meanwhile,
     * and the busy episode is logged once and shown by writer_degraded.
     */
    int64_t write_timeout_ms;
    int64_t lock_wait_ms;  /* longest one statement waits for a lock (store_lock_wait); 0: the backend's */
    bool quiet_outbox;     /* its outbox inserts notify no one (store_quiet_outbox): its callers wake the relay */
    /*
     * On a store with one write lock per file (SQLite): the share of the time
     * (0 to 0.5) the writer, with batches back to back, leaves that lock free
     * for the application's own transactions; 0: never. Ignored elsewhere.
     */
    double application_share;
};

__attribute__((warn_unused_result)) int writer_start(const char *dsn, const struct writer_options *opt,
                                                     struct writer **out);
void writer_stop(struct writer *w);
/* Returns HOOKD_EUNAVAIL after writer_stop began; done is then never called. */
__attribute__((warn_unused_result)) int writer_submit(struct writer *w, write_fn fn, write_done_fn done, void *arg);
__attribute__((warn_unused_result)) int writer_submit_deferred(struct writer *w, write_fn fn, write_done_fn done,
                                                               void *arg);
__attribute__((warn_unused_result)) int writer_submit_grouped(struct writer *w, write_fn fn, write_group_fn group,
                                                              write_done_fn done, void *arg);
__attribute__((warn_unused_result)) int writer_submit_bounded(struct writer *w, write_fn fn, write_done_fn done,
                                                              void *arg);
__attribute__((warn_unused_result)) int writer_submit_bounded_grouped(struct writer *w, write_fn fn,
                                                                      write_group_fn group, write_done_fn done,
                                                                      void *arg);
bool writer_degraded(struct writer *w);
void writer_flush(struct writer *w);
/* fn's result once committed, or the commit error. */
__attribute__((warn_unused_result)) int writer_exec(struct writer *w, write_fn fn, void *arg);
/* The same for a bounded op: HOOKD_EBUSY (not applied) when it cannot commit within write_timeout_ms. */
__attribute__((warn_unused_result)) int writer_exec_bounded(struct writer *w, write_fn fn, void *arg);

struct writer_stats {
    uint64_t batches;
    uint64_t ops;
    uint64_t failed_commits;
    uint64_t busy_answers;  /* bounded ops answered HOOKD_EBUSY: not applied */
    /* Room left for other processes (application_share, single-node stores): */
    uint64_t room_gaps;     /* gaps of the share, while another connection commits */
    uint64_t room_probes;   /* long gaps while the others only hold the file open */
    uint64_t room_us;       /* the lock left free by both, in all */
    uint64_t room_free_runs; /* runs that needed no gap: the lock was free between their batches for the share */
};
void writer_stats(struct writer *w, struct writer_stats *out);
#endif
