/*
 * The dispatcher's jobs (private to its thread): one node per delivery held
 * in the window, a pool of spare nodes so steady traffic allocates none, an
 * index by delivery id, so a delivery claimed again while we still hold it
 * (its lease ran out in a long queue) renews our copy instead of doubling it,
 * and what an attempt's outcome makes of the delivery.
 *
 *   job_table_init/destroy   the index and the pool
 *   job_table_new            a zeroed node (from the pool when possible)
 *   job_table_recycle        back to the pool; the caller freed what it owns
 *   job_table_add/remove     index by j->dj.d.id
 *   job_table_find           the held job of a delivery id, or NULL
 *   job_table_each           visit every indexed job
 *   job_set_result           classify an attempt, decide retry/dead/delivered, fill j->result
 *   job_log_result           the log line for a committed result
 */
#ifndef HOOKD_OUTBOUND_JOBS_H
#define HOOKD_OUTBOUND_JOBS_H
#include <stddef.h>
#include <stdint.h>

#include "core/retry.h"
#include "outbound/request.h"
#include "store/store.h"

struct dispatcher;
struct ep_state;

enum job_phase { JOB_QUEUED, JOB_SENDING, JOB_RECORDING, JOB_RELEASING };

/* One delivery the dispatcher holds, from hand-over to its last commit. */
struct job {
    struct delivery_job dj;
    struct dispatcher *q;
    struct ep_state *ep;
    struct job *next;       /* endpoint FIFO while queued, inbox list once its writer op is done */
    struct job *index_next; /* job_table chain */
    enum job_phase phase;
    uint64_t fanout;        /* the relay's fan-out that handed it over before its commit (0: none) */
    int op_result;          /* writer result, set by the done callback */
    /* The attempt, filled when the transfer ends and recorded by delivery_complete. */
    struct delivery_result result;
    int64_t recorded_now;
    char *supersede_key;    /* latest mode, a retry: its resource's key, whose newer versions then supersede it */
    int64_t sent_mono;      /* when its transfer started (monotonic ms) */
    int64_t claimed_until;  /* the lease_until its claim gave it, moved by its renewals: a probe's is the breaker's probe_until (the store renews both) */
    bool slow;              /* its transfer outlived SLOW_AFTER: counted in the slow pool */
    bool failure_unrecorded; /* a failed attempt counted in its endpoint's failures_unrecorded until the record ends */
    bool breaker_opened;    /* set by the record: its endpoint's breaker opened with this batch */
    bool endpoint_disabled; /* set by the record: its endpoint was disabled for failing continuously */
    char error_class[16];
    char error[REQUEST_ERROR_MAX + 64];
};

struct job_table {
    struct job **buckets;
    size_t n_buckets; /* a power of two */
    struct job *spare;
    size_t n_spare, max_spare;
};

/* expected: about how many jobs are held at once (the window). */
__attribute__((warn_unused_result)) int job_table_init(struct job_table *t, size_t expected);
void job_table_destroy(struct job_table *t); /* frees the pool; indexed jobs must be gone */
struct job *job_table_new(struct job_table *t);
void job_table_recycle(struct job_table *t, struct job *j);
void job_table_add(struct job_table *t, struct job *j);
void job_table_remove(struct job_table *t, struct job *j);
struct job *job_table_find(struct job_table *t, const char *delivery_id);
void job_table_each(struct job_table *t, void (*fn)(struct job *j, void *arg), void *arg);

/*
 * Fills j->result from one attempt (o, the response snippet, its start) with
 * policy, the current time and a uniform rnd01 for jitter. j->result points
 * into j and at node, which must outlive the write; the snippet is copied.
 */
void job_set_result(struct job *j, const struct retry_policy *policy, const struct request_outcome *o,
                    const char *response, int64_t started_at, int64_t now, double rnd01, const char *node);
/* Logs a result once its commit is durable: delivered at info, retrying at info, dead at warn. */
void job_log_result(const struct job *j);
#endif
