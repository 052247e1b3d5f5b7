/*
 * The inbox workers: one loop thread that claims due inbox items (a lease and
 * a fencing token, one entity at a time across nodes), runs each source's
 * handler (forward: a signed POST to the application through an HTTP engine
 * of its own) and writes each step's outcome in one fenced transaction.
 *
 *   processor_start   the thread and its engine; items are claimed at once
 *   processor_wake    new or replayed items (hub topic inbox_changed); any thread, cheap
 *   processor_stop    end the loop; transfers in flight are dropped (their leases expire)
 *   processor_accept_insert  decide a machine source's item in its accept, then insert it (one writer: SQLite)
 *   processor_accept_done    after that commit: the outcome's metric and the relay's wake-up
 */
#ifndef HOOKD_INBOUND_PROCESSOR_H
#define HOOKD_INBOUND_PROCESSOR_H
#include <stdbool.h>
#include <stdint.h>

#include "core/retry.h"

struct writer;
struct source_cache;
struct hub;
struct processor;
struct store;
struct inbox_item;

#define PROCESSOR_POLL_MS 1000        /* safety poll: items other nodes or plain SQL made due */
#define PROCESSOR_NO_HANDLER_MS 60000 /* a source without a handler: its items are looked at again after this */
#define PROCESSOR_LEASE_MARGIN_MS 10000 /* an item's lease outlasts its forward's timeouts by at least this */

/* Everything is borrowed and must outlive the processor. */
/*
 * Machine decisions on a shared store run on this many connections of their
 * own, beside the writer: each is a few statements in series that wait on
 * the server (the entity's advisory lock keeps one entity on one at a time).
 */
#define PROCESSOR_DECIDERS_MAX 4
/* A shared store's claims are server transactions: while items are in flight, no more often than this. */
#define PROCESSOR_CLAIM_GATHER_MS 4
#define PROCESSOR_RELAY_WAKE_MS 5 /* decisions' outbox events wake the relay at most this often */

struct processor_deps {
    const char *node;               /* lease owner */
    struct writer *claimer;         /* claims (the claim writer on a shared store, else the writer) */
    struct writer *writer;          /* outcomes */
    struct writer *const *deciders; /* machine decisions, an entity always on the same one; n_deciders 0: on writer */
    int n_deciders;
    struct source_cache *sources;   /* handlers, schedules */
    struct hub *hub;                /* HUB_OUTBOX_CHANGED after a decision that emitted events (NULL: none) */
    int workers;                    /* items in flight at once */
    int64_t claim_gather_ms;        /* while items are in flight, claims at least this far apart (0: none) */
    int64_t lease_ms;
    int64_t timeout_ms;             /* one forward request */
    int64_t connect_timeout_ms;
    bool allow_private_networks;    /* the application is usually on a private address */
    struct retry_policy retry;      /* [inbox] retry_schedule: used when the source gives none */
    int64_t max_defer_ms;           /* [inbox] max_defer: used when the source gives none */
    int64_t reconcile_after_ms;     /* [inbox] reconcile_after: a gap waits this long before the provider is asked */
};

__attribute__((warn_unused_result)) int processor_start(const struct processor_deps *deps, struct processor **out);
void processor_wake(void *processor);
void processor_stop(struct processor *p);

/*
 * Where the accepts and the decisions share one writer (SQLite: no deciders),
 * an item of a machine source is decided by the op that accepts it, before
 * its insert, and inserted with its outcome (machine_accept_insert): no
 * claim, lease, outcome op or status change of its own, and the sender's 200
 * comes after the entity moved. processor_decides_accepts says whether p
 * does (NULL: no). processor_accept_insert runs inside the accept's op on the
 * writer thread: with out->decided false and 0 returned nothing was written
 * and the caller inserts the item as usual; any other return means the
 * decision failed after it may have written: the caller rolls back to
 * before the call, then inserts the item as usual.
 */
struct processor_accepted {
    bool decided;
    bool emitted; /* the decision inserted outbox events */
    int status;   /* enum inbox_status: the item's outcome */
};
bool processor_decides_accepts(const struct processor *p);
__attribute__((warn_unused_result)) int processor_accept_insert(struct processor *p, struct store *s,
                                                                struct inbox_item *it,
                                                                struct processor_accepted *out);
/* After the commit of a decided accept (any thread): the outcome's metric, the relay woken for its events. */
void processor_accept_done(struct processor *p, const struct processor_accepted *a);

/* What one forward's answer means (the classifier of the forward requests; exposed for tests). */
enum forward_outcome { FORWARD_OK, FORWARD_DEFER, FORWARD_REJECT, FORWARD_RETRY };
struct http_client_result;
int forward_classify(const struct http_client_result *res);
#endif
