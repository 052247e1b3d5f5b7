/*
 * Private to the dispatcher (dispatcher.c, claims.c): its state, and what the
 * two files share. dispatcher.c runs the loop (scheduling, transfers,
 * outcomes); claims.c leases due deliveries from the store and writes again
 * the attempt results the store refused while it was down.
 *
 *   dispatcher_inbox_wake_needed  under mu: whether this message must wake the loop
 *   dispatcher_job_free           drop a job and give its window slot back
 *   dispatcher_job_submit         queue a job's writer op for its phase (record, grouped; or release)
 *   dispatcher_jobs_accept        file claimed or handed-over jobs under their endpoints (fanout: see
 *                                 dispatcher_enqueue_tentative; 0 for claims; handed: the relay's, which a
 *                                 paused endpoint gives back at once)
 *   claims_maybe / claims_finished   start a claim when due and room allows; take its answer
 *   rewrite_later / rewrite_due   keep a refused result; resubmit (or drop at stop) when due
 *   renewal_maybe / renewal_finished   extend the leases of the held jobs every third of the lease; take the answer
 */
#ifndef HOOKD_OUTBOUND_DISPATCHER_INTERNAL_H
#define HOOKD_OUTBOUND_DISPATCHER_INTERNAL_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "log.h"
#include "net/http_client.h"
#include "outbound/dispatcher.h"
#include "outbound/endpoint_cache.h"
#include "outbound/jobs.h"
#include "outbound/request.h"
#include "store/writer.h"

#define SAFETY_POLL_MS 1000 /* claim at least this often, and re-check endpoint settings */
#define NEVER INT64_MAX

struct board_entry {
    char id[HOOKD_ID_MAX]; /* "" : free */
    int held;              /* jobs the dispatcher holds of it */
    int sending;           /* of those, queued or in flight (not the ones whose answer came) */
    int64_t answered_mono; /* its last answer (any outcome) */
    int64_t waiting_since_mono; /* its first send since that answer (0: none) */
    bool direct;           /* neither slow nor paused nor ramping: the relay may hand it deliveries directly */
};

/* A job_list handed over by the relay or returned by a claim, waiting in the inbox. */
struct batch {
    struct job_list jobs;
    uint64_t fanout; /* dispatcher_enqueue_tentative's number for them (0: committed already) */
    struct batch *next;
};

/* The single claim op in flight: written by the writer thread, read by the loop after done. */
struct claim {
    int limit;
    char (*capped)[HOOKD_ID_MAX]; /* single-node: endpoints not direct (slow, paused, ramping) */
    size_t n_capped;
    char (*held)[HOOKD_ID_MAX];   /* out: endpoints whose due rows it left for their limits (lease_limits) */
    size_t n_held;                /* all of them, also beyond CLAIM_HELD_ROOM */
    int64_t now, lease_until;
    int64_t capped_mono;          /* when capped was judged (claim_capped) */
    char (*full)[HOOKD_ID_MAX];   /* shared store: held endpoints full of our own leases (lease_limits.full) */
    size_t n_full;
    struct job_list jobs;
    int64_t next_due; /* NEVER when nothing is scheduled */
    int64_t expire_window_ms; /* > 0: first, paused endpoints' deliveries past this window become dead */
    int64_t expired;          /* how many did */
    int result;
};

/*
 * The single lease renewal in flight: the held jobs' ids and tokens, copied by
 * the loop (jobs may go while it runs), and what the store renewed.
 */
struct renewal {
    size_t n, cap;
    char (*ids)[HOOKD_ID_MAX];
    const char **idp; /* into ids */
    int64_t *tokens;
    bool *renewed;
    int64_t lease_until;
    int result;
};

struct dispatcher {
    struct dispatcher_deps deps; /* the parts and settings it was started with */
    int64_t health_purged_minute; /* writer thread: the minute whose old health buckets were last purged */
    pthread_t thread;
    struct http_engine *engine; /* the loop runs it: transfers, their sockets, the inbox wake-up */
    atomic_int held;
    atomic_int endpoint_window; /* the window's fair share per endpoint, kept by the loop (single-node hand-off) */
    atomic_bool stopping;       /* dispatcher_stop: finish the drain and end the loop */
    atomic_bool draining;       /* dispatcher_drain: no claims or sends, unsent leases given back */
    atomic_bool claim_wanted;
    atomic_bool endpoints_dirty;

    /* inbox, guarded by mu */
    pthread_mutex_t mu;
    struct batch *batches, *batches_tail;
    struct job *finished, *finished_tail; /* writer ops done (recorded or released) */
    bool claim_finished;
    bool renewal_finished;
    bool woken; /* a wake-up is pending: later messages need not send another */
    uint64_t fanouts_decided_posted; /* dispatcher_fanout_decided: every fan-out up to it has ended */

    atomic_uint_least64_t fanouts; /* the last number dispatcher_enqueue_tentative gave out */

    /* The board, for the relay's single-node hand-off (guarded by board_mu): per endpoint what it
     * holds, when it last got an answer, and whether it may be handed deliveries directly. */
    pthread_mutex_t board_mu;
    struct board_entry *board;
    size_t board_cap, board_n;
    atomic_llong last_answer_mono; /* any endpoint's */

    /* loop thread only */
    struct endpoint_cache cache;
    int max_in_flight;         /* deps.max_in_flight, at least 1 */
    struct request **requests; /* every request object made, up to max_in_flight */
    int n_requests;
    struct request **idle;     /* request objects not in a transfer */
    int n_idle;
    int in_flight;
    int in_flight_slow;        /* transfers older than slow_after_ms: outside max_in_flight, at most that many */
    int64_t slow_after_ms, slow_checked_mono;
    int64_t share_mono; /* when endpoint_window was last judged (every SHARE_EVERY_MS at most) */
    int outstanding_ops;       /* writer ops whose done has not been processed yet */
    bool claim_in_flight;
    struct claim claim;
    bool renewal_in_flight;
    struct renewal renewal;
    int64_t renew_at_mono;     /* the next renewal of the held jobs' leases */
    int64_t next_wake_at;      /* wall ms of the next claim */
    int64_t expire_at;         /* wall ms: the next claim also expires paused endpoints' deliveries (claims.c) */
    bool due_held_back;        /* the last claim left due rows behind (per-endpoint caps) */
    bool held_all;             /* it left more endpoints than it could list: take each as held */
    bool held_own;             /* every endpoint it held is full of this node's leases: only their ends free a slot */
    bool freed_since_claim;    /* a held endpoint's result was queued after the last claim: its lease goes with it */
    uint64_t claim_seq;        /* claims started; ep_state.freed_in_claim names one */
    int64_t endpoints_checked_mono;
    struct job_table jobs;
    /* Results of jobs whose fan-out may still roll back: held until it has ended
     * (fanouts_decided), for a write before its commit would miss the delivery row. */
    struct job *parked, *parked_tail;
    uint64_t fanouts_decided;
    /* Attempts whose record failed while the store was down: the result is
     * known, so it is written again later instead of the delivery being sent again. */
    struct job *rewrite, *rewrite_tail;
    int64_t rewrite_at_mono, rewrite_backoff_ms;
    uint64_t rng;
    struct log_limiter lim_writer, lim_store, lim_alloc;
};

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

bool dispatcher_inbox_wake_needed(struct dispatcher *q);
void dispatcher_job_free(struct dispatcher *q, struct job *j);
void dispatcher_job_submit(struct dispatcher *q, struct job *j, enum job_phase phase);
void dispatcher_jobs_accept(struct dispatcher *q, struct job_list *list, uint64_t fanout, bool handed);

bool claims_capped(const struct ep_state *st, int64_t mono);
void claims_maybe(struct dispatcher *q, int64_t now);
void claims_finished(struct dispatcher *q, int64_t now);
bool claims_lease_freed(struct dispatcher *q, struct ep_state *st);
void rewrite_later(struct dispatcher *q, struct job *j);
void rewrite_due(struct dispatcher *q, int64_t mono, bool drop);
void renewal_maybe(struct dispatcher *q, int64_t now, int64_t mono);
void renewal_finished(struct dispatcher *q);
int64_t renewal_interval_ms(const struct dispatcher *q);
void renewal_free(struct dispatcher *q);
#endif
