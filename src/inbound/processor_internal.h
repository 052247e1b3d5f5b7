/*
 * What the inbox workers' loop (processor.c) and its machine handler
 * (machine_handler.c) share: the claimed job, the processor's state, and the
 * few loop routines the handler calls. Not for use outside src/inbound.
 *
 *   processor_job_free       free a job (its reconcile request wiped)
 *   processor_outcome_write  hand j->r to the writer; the job comes back on p->written
 *   processor_op_complete    the writer op that records j->r (fenced), and its done
 *   machine_start            run a claimed item of a machine source (loop thread)
 *   machine_reconcile_start  ask the provider for the entity of a job handed back (loop thread)
 */
#ifndef HOOKD_INBOUND_PROCESSOR_INTERNAL_H
#define HOOKD_INBOUND_PROCESSOR_INTERNAL_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/json_pointer.h"
#include "core/signature_scheme.h"
#include "inbound/machine_cache.h"
#include "inbound/machine_step.h"
#include "inbound/processor.h"
#include "inbound/source_def.h"
#include "ops/api_common.h"
#include "store/store.h"

#define HEADER_LINE_MAX (SIGNATURE_HEADER_MAX + 32)
#define N_FORWARD_HEADERS 9
#define ERROR_TEXT_MAX 320

/* One claimed item on its way: the forward, then its outcome's write. */
struct job {
    struct processor *p;
    struct inbox_item it;
    struct job *next;            /* on the loop's lists */
    char lines[N_FORWARD_HEADERS][HEADER_LINE_MAX];
    const char *headers[N_FORWARD_HEADERS];
    char url[2048];
    /* the outcome */
    struct inbox_result r;
    char error[ERROR_TEXT_MAX];
    bool idle; /* nothing ran (no handler, store down): its completion is no reason to claim again */
    /* handler.machine: what the decision needs, copied from the source (the cache entry is not held) */
    char machine[MACHINE_NAME_MAX];
    int64_t max_defer_ms;
    int64_t schedule_ms[RETRY_MAX_SCHEDULE];
    size_t n_schedule;
    struct machine_outcome mo;
    bool retried; /* the machine op failed once and its item was put back */
    bool emitted; /* its decision committed outbox events */
    struct reconcile_request *rq; /* the source's provider request for this entity; NULL: no reconcile */
    struct machine_snapshot snap; /* what the provider answered (snap.state set: use it) */
    char snap_state[MACHINE_STATE_MAX];
};

/* The GET to the provider's API for one entity, built while the source is held (headers resolved). */
#define RECONCILE_LINE_MAX (64 + SOURCE_RECONCILE_VALUE_MAX + 4)
#define RECONCILE_RESPONSE_MAX (256 * 1024)
struct reconcile_request {
    char url[API_URL_MAX + 1];
    char lines[SOURCE_RECONCILE_HEADERS_MAX + 1][RECONCILE_LINE_MAX];
    const char *headers[SOURCE_RECONCILE_HEADERS_MAX + 1];
    size_t n_headers;
    char state_pointer[JSON_POINTER_MAX + 1], version_pointer[JSON_POINTER_MAX + 1];
    char problem[160]; /* set: the request cannot be made (an env: variable missing, the URL too long) */
};

struct processor {
    struct processor_deps deps;
    struct http_engine *engine;
    struct machine_cache *machines; /* parsed definitions, shared by the decision threads */
    pthread_t thread;
    atomic_bool stopping;
    atomic_bool woken;
    atomic_int outstanding; /* writer ops whose done has not run */
    int in_flight;          /* jobs claimed and not yet written (loop thread) */
    bool want_claim;        /* loop thread */
    int64_t next_due;       /* loop thread: earliest retry we scheduled; INT64_MAX: none */
    pthread_mutex_t mu;     /* guards the hand-over fields below */
    bool claim_running;
    bool claim_finished;
    int64_t claim_done_at;  /* loop thread: monotonic ms when the last claim's items were handed over */
    int64_t claim_held_until; /* loop thread: a claim waits for claim_gather_ms until then (0: none) */
    bool outbox_wake;       /* loop thread: decisions committed outbox events the relay has not been told of */
    atomic_bool accept_emitted; /* decisions at accept committed outbox events (processor_accept_done) */
    int64_t outbox_woken_at; /* loop thread: monotonic ms of the last relay wake-up */
    int claim_result, claim_limit;
    struct inbox_list claimed;
    struct job *written;    /* outcomes committed (or refused), back to the loop */
    struct job *to_reconcile; /* machine ops that asked for the provider, back to the loop */
};


void processor_job_free(struct job *j);
void processor_outcome_write(struct processor *p, struct job *j);
int processor_op_complete(struct store *s, void *arg);
void processor_op_complete_done(void *arg, int result);

void machine_start(struct processor *p, struct job *j, const struct source_def *def);
void machine_reconcile_start(struct processor *p, struct job *j);
#endif
