/*
 * The store interface: one versioned table of methods per backend (the model is
 * sqlite3_vfs), found by name, always called through the store_*() wrappers
 * below, which are also where argument asserts and fault injection for tests
 * live. The table holds the connection and transaction methods and one
 * sub-table per table family (meta, events, endpoints, deliveries, sources,
 * inbox, rejections, alerts, upkeep); each
 * backend fills a family in its file for it (sqlite_events.c,
 * postgres_deliveries.c, …). What the backends share is written once in
 * store_common.c (record readers, column lists, rows to write, list filters).
 *
 * A `struct store` is one connection, used by one thread at a time. Most
 * state changes of the daemon go through a writer (writer.h), which owns one
 * write connection and runs ops inside its batch transaction; the relay's
 * fan-out runs its own transactions on the relay's connection, claims on a
 * shared store go through a writer of their own, and other threads open
 * their own connections for reads.
 *
 * Interface routines (one line each), by family:
 *   connection and transactions (struct store_ops)
 *     open/close            connect to "sqlite:PATH" / "postgres://…"; disconnect
 *     migrate               create or upgrade the hookd_ tables (safe to run concurrently)
 *     begin/commit/rollback a batch transaction
 *     commit_lazy           commit without waiting for durability (for what acknowledges nothing)
 *     savepoint/release/rollback_to   per-op isolation inside a batch (rollback_to also ends the savepoint)
 *     changed               cheap "did anyone commit outbox rows since last call" check
 *     changed_fd            a descriptor that turns readable when changed may have news (-1: none, poll)
 *     watch                 which channel changed watches (outbox rows, the default; or inbox items)
 *     maintain              what a connection of its own does about once a second (vacuum a churning table)
 *     lock_wait             bound how long one statement waits for a lock another connection holds
 *     quiet_outbox          this connection's outbox inserts notify no one (its caller wakes its relay)
 *     checkpoint_aside      this connection's commits leave the WAL checkpoints to a thread of the store's
 *     checkpoint_due        the checkpoint those commits left to their connection, run after their answers
 *     others_open           whether another process has the store open (SQLite: its file)
 *   meta (hookd_meta)
 *     meta_get/meta_set     small key/value settings
 *   events (hookd_outbox)
 *     event_insert          outbox insert with optional idempotency key
 *     event_get/event_list  read events
 *     outbox_fetch          undispatched outbox rows after a seq, oldest first (claims them on postgres)
 *     outbox_mark_dispatched  set dispatched_at for fanned-out rows
 *     outbox_pending        is there any undispatched row (cheap)
 *     outbox_take           fetch, lock and mark undispatched rows in one step, with the endpoints version
 *     outbox_reject         mark a row that breaks the rules (struct event bad_field) with its error
 *   endpoints (hookd_endpoints)
 *     endpoint_insert/update/get/list/list_all/delete   CRUD
 *     endpoint_set_enabled  enable, or disable with a reason
 *     endpoint_version      a cache validator that changes with every endpoint write
 *   deliveries (hookd_deliveries, hookd_attempts)
 *     delivery_insert       one delivery per (event, endpoint); EEXISTS if present
 *     delivery_insert_many  many at once (one statement on postgres); present ones are skipped
 *     delivery_claim_due    lease due deliveries to a node within per-endpoint in-flight caps (and, in key
 *                           and latest mode, only a resource's oldest open one), bump fencing token
 *     delivery_slots        how many new deliveries of each endpoint a fan-out may insert already leased
 *     delivery_next_due     earliest next_attempt_at of unleased due-able rows
 *     delivery_supersede    latest mode: older open versions of a resource become superseded
 *     delivery_complete     fenced: record an attempt and the delivery's new state
 *     delivery_complete_many  the same for many results at once, a result code for each
 *     delivery_release      fenced: drop one lease without an attempt (endpoint disabled meanwhile)
 *     delivery_release_node drop every lease a node holds (start-up of that node)
 *     delivery_renew        fenced: extend the leases a node still holds (one batch, one statement)
 *     delivery_replay       fenced by status: a final delivery pending again (single-delivery replay)
 *     delivery_get/list, attempt_list   read deliveries and attempts
 *     delivery_count        how many deliveries a filter matches (its cursor ignored)
 *     delivery_replay_many  replay for a batch, each only while its status is one of those given
 *   endpoint state (hookd_endpoint_state)
 *     endpoint_state_record the breaker and auto-disable after a batch of attempts
 *     endpoint_state_get    one endpoint's breaker, failures and bucket (for the API)
 *     endpoint_state_get_many  the states of a batch of endpoints (a dispatcher's view of other nodes' breakers)
 *     endpoint_state_reset  closed and never failed again (an endpoint enabled again)
 *   sources (hookd_sources)
 *     source_insert/update/get/list/list_all/delete   CRUD by name (delete also drops its rejections)
 *     source_version        a cache validator that changes with every source write
 *   inbox (hookd_inbox)
 *     inbox_insert          insert an inbound event, or count it as a duplicate: one atomic statement
 *     inbox_get/list        read inbox items
 *     inbox_claim_due       lease due open items to a node, at most one per entity across nodes, bump fencing token
 *     inbox_complete        fenced: one processing step's outcome (status, attempts, error, times), lease dropped
 *     inbox_replay          a quarantined or deferred item back to pending (ECONFLICT for another status)
 *     inbox_replay_range    the same for a bounded range by source, status and received time (or only count it)
 *     inbox_release_node    drop every inbox lease a node holds (start-up of that node)
 *   machines (hookd_machines, hookd_entities, hookd_transitions)
 *     machine_insert/update/get/list/delete   machine definitions
 *     entity_lock           hold one entity until the transaction ends (decisions on it are serialized)
 *     entity_get/put        an entity's state, version and last event
 *     entity_hold           entity_lock, then its machine, row and open items in one go (a decision's reads)
 *     entity_hold_window    the same, leaving out the deferred items a contiguous step cannot reach (SQLite)
 *     transition_insert/list  the append-only log of decisions (trace)
 *     inbox_settle          an open item re-evaluated after its entity moved (no lease of the caller's)
 *     decision_write        a decision's transitions, emitted events, entity and settled items at once
 *     decision_gather       the accepts' group: keep the decisions' log rows and events for multi-row statements
 *     audit                 the five counts of GET /v1/audit
 *   rejections (hookd_rejections, hookd_rejection_counts)
 *     rejection_insert      log one refused request (bounded per source) and bump its reason's counter
 *     rejection_list/counts read the log and the counters of a source
 *   replays (hookd_replays, hookd_replay_items)
 *     replay_insert         record a replay (who, when, filter, how many matched)
 *     replay_record         add one batch's replayed deliveries and skipped count; mark it done
 *     replay_get/list       read replays with their progress, computed from their deliveries now
 *   tokens (hookd_tokens)
 *     token_insert          an account-scoped API token (its secret only as a SHA-256 hash)
 *     token_get/list        read tokens (no secret is ever stored)
 *     token_list_active     every token neither revoked nor expired, for the auth cache
 *     token_revoke          revoke one (ENOTFOUND; ECONFLICT when revoked already)
 *     token_version         a cache validator that changes with every token write
 *   alerts (hookd_alerts; sqlite_ops.c, postgres_ops.c)
 *     alert_open            insert unless the rule and subject have an open alert or a recent resolution
 *     alert_resolve         an open alert resolved, once
 *     alert_get/list        read alerts (list: status, rule, cursor)
 *     alert_signals         what the alert rules read, one row per kind and subject
 *   upkeep (sqlite_ops.c, postgres_ops.c)
 *     figures               the cluster-wide gauges of the metrics
 *     purge_deliveries/events/inbox   one retention batch each
 *   health (hookd_endpoint_minutes, hookd_latency_minutes, hookd_failure_minutes, hookd_endpoint_last)
 *     health_record         add attempts to their endpoint's per-minute buckets and latest attempt (with the results)
 *     health_queue          one endpoint's deliveries now: by status, in flight, oldest open, next due
 *     health_activity       one endpoint's last attempt, success and error
 *     health_window         one endpoint's attempts, successes, retry flow and latencies over a window
 *     health_summary        every endpoint's attempts and grouped failures over a window
 *     health_oldest         the oldest undelivered delivery
 *     health_resource       per endpoint, the latest event of a resource and its delivery
 *   stats (hookd_outbox, hookd_inbox, hookd_endpoint_minutes, hookd_rejection_counts; sqlite_stats.c, postgres_stats.c)
 *     stats_minutes         events, inbound items, attempts and successes per minute, cluster-wide
 *     stats_rejected        inbound refusals of every source by reason
 *
 * Adding a method: its pointer in the family's struct below, its wrapper here
 * and in store.c, and its function, table entry and statement slots in the
 * family's file of each backend: four files. A new family: a struct and a
 * pointer in struct store_ops, its wrappers, one file per backend that
 * defines the table, and a slot range in each backend's internal header.
 *
 * Every method returns 0 or a negative hookd_error. Output structs are filled
 * with heap strings the caller frees with the matching *_free().
 */
#ifndef HOOKD_STORE_H
#define HOOKD_STORE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "hookd.h"
#include "core/custom_headers.h"
#include "core/retry.h"

#define STORE_OPS_VERSION 2 /* 2: the methods of each table family in a sub-table */
#define ENDPOINT_MAX_SECRETS 4
#define ENDPOINT_MAX_TYPES 64

/* ---- records ---------------------------------------------------------- */

struct event {
    int64_t seq;                 /* outbox position; 0 before insert */
    char id[HOOKD_ID_MAX];
    char *type;
    char *account;               /* NULL: none */
    char *resource_type;         /* NULL: none */
    char *resource_id;           /* NULL: none */
    bool has_resource_version;
    int64_t resource_version;
    char *payload;               /* JSON text of "data" */
    char *idempotency_key;       /* NULL: none */
    int64_t created_at;          /* ms */
    int64_t dispatched_at;       /* ms; 0: not fanned out yet */
    char *error;                 /* why the relay rejected the row (it then has no deliveries); NULL: none */
    /* Set by the store's reader when the row as stored breaks the rules of
     * core/event_check.h (static strings; NULL: it keeps them): the field
     * ("event id", "event type", "account", …) and why. The strings above
     * are then not to be trusted: an id may have been cut to fit. */
    const char *bad_field, *bad_reason;
};
void event_free(struct event *e); /* frees the strings, not e */

enum ordering_mode { ORDERING_NONE, ORDERING_KEY, ORDERING_LATEST };
const char *ordering_name(enum ordering_mode m);
int ordering_parse(const char *s, enum ordering_mode *out);

struct endpoint_secret {
    char *key;          /* "whsec_…" */
    int64_t expires_at; /* ms; 0: active until rotated */
    int64_t created_at;
};

struct endpoint {
    char id[HOOKD_ID_MAX];
    char *account; /* NULL: receives events of every account */
    char *url;
    char *description;
    char *event_types[ENDPOINT_MAX_TYPES]; /* empty: every type */
    size_t n_event_types;
    struct endpoint_secret secrets[ENDPOINT_MAX_SECRETS]; /* newest first */
    size_t n_secrets;
    bool enabled;
    char *disabled_reason; /* NULL when enabled */
    enum ordering_mode ordering;
    int max_in_flight;    /* 0: global default */
    int rate_limit;       /* per second; 0: none */
    int64_t timeout_ms;   /* 0: global default */
    int64_t retry_schedule_ms[RETRY_MAX_SCHEDULE]; /* n_retry_schedule 0: global */
    size_t n_retry_schedule;
    /* Static custom headers, each a whole "Name: value" line (core/custom_headers.h), sent after the
     * signature headers in every request; the names are never ones hookd sets. */
    char *headers[CUSTOM_HEADERS_MAX];
    size_t n_headers;
    int64_t created_at, updated_at;
};
void endpoint_free(struct endpoint *ep);
/* Deep copy; returns HOOKD_ENOMEM on failure. */
__attribute__((warn_unused_result)) int endpoint_copy(struct endpoint *dst, const struct endpoint *src);

enum delivery_status {
    DELIVERY_PENDING,
    DELIVERY_RETRYING,
    DELIVERY_DELIVERED,
    DELIVERY_DEAD,
    DELIVERY_SUPERSEDED,
    DELIVERY_SKIPPED,
};
const char *delivery_status_name(enum delivery_status s);
int delivery_status_parse(const char *s, enum delivery_status *out);
bool delivery_status_valid(int st);
bool delivery_status_open(enum delivery_status st); /* pending or retrying */

struct delivery {
    char id[HOOKD_ID_MAX];
    char event_id[HOOKD_ID_MAX];
    char endpoint_id[HOOKD_ID_MAX];
    char *account;
    enum delivery_status status;
    int attempt_count;
    int64_t next_attempt_at;  /* ms; 0 when final */
    int last_status_code;     /* 0: none */
    char *last_error;
    int64_t first_attempt_at, last_attempt_at, delivered_at, created_at; /* ms; 0: never */
    char *lease_owner;        /* NULL: unleased */
    int64_t lease_until;      /* ms */
    int64_t lease_token;      /* fencing token, bumped by every claim */
    /* Ordering (written at insert, not read back): delivery_order_key() of an endpoint in key or latest
     * mode and an event with a resource, else NULL (unordered); the event's outbox seq and version. */
    char *order_key;
    int64_t order_seq;
    bool has_order_version;
    int64_t order_version;
    /*
     * Leased at fan-out without its row (a shared store's fast path, DESIGN §3
     * "Unrecorded deliveries"; given to delivery_insert_many with a lease):
     * the store keeps only the lease until the first result, which writes the
     * row (delivery_result.unrecorded). A backend may write the row at once.
     */
    bool unrecorded;
};
void delivery_free(struct delivery *d);
/*
 * The ordering key of a delivery of ev to an endpoint in mode m, into *out (heap; NULL when unordered:
 * mode none, or an event without resource type and id): the mode ('K' key, 'L' latest) and the
 * resource type and id, unambiguously joined. HOOKD_ENOMEM on failure.
 */
__attribute__((warn_unused_result)) int delivery_order_key(enum ordering_mode m, const struct event *ev, char **out);
/* What delivery_insert requires of a row: its three ids and a valid status. */
bool delivery_insertable(const struct delivery *d);

/* A claimed delivery with what the dispatcher needs of its event. */
struct delivery_job {
    struct delivery d;
    struct event ev;
};
void delivery_job_free(struct delivery_job *j);

struct attempt {
    int64_t id;
    char delivery_id[HOOKD_ID_MAX];
    int n;                 /* 1-based attempt number */
    int64_t started_at;    /* ms */
    int duration_ms;
    int status_code;       /* 0: no response */
    char *error_class;     /* NULL on a received status; transport_error_name() otherwise */
    char *error;           /* human text, NULL when none */
    char *response;        /* snippet, capped: bytes (may hold NULs, need not be UTF-8), NUL-terminated */
    size_t response_len;   /* its bytes; 0 with a response given to a store write: strlen(response) */
    bool response_truncated; /* the response was longer than the snippet */
    char *node;
};
void attempt_free(struct attempt *a);

/* Result of one attempt, applied by delivery_complete() only if the lease is still ours. */
struct delivery_result {
    const char *delivery_id;
    const char *lease_owner;
    int64_t lease_token;
    enum delivery_status status; /* DELIVERED, RETRYING or DEAD */
    int64_t next_attempt_at;     /* for RETRYING */
    struct attempt attempt;      /* n = attempt_count after this attempt */
    const char *disable_endpoint_reason; /* non-NULL: also disable the endpoint (410) */
    /* Non-NULL: the first result of an unrecorded delivery (this one, as leased): its row is written now, in
     * the result's state, fenced by the lease the fan-out recorded. */
    const struct delivery *unrecorded;
};
/* What delivery_complete requires: the delivery, the lease and a valid status. */
bool delivery_result_valid(const struct delivery_result *r);

/*
 * What bounds the deliveries of one endpoint a claim or a fan-out may lease.
 * Its in-flight cap is its max_in_flight when > 0, else default_cap (<= 0: no
 * cap). On a shared store the leases are the cap, counted over every node. On
 * a single-node store (one dispatcher holds every lease, and keeps the
 * in-flight caps itself) an endpoint may hold up to max(cap, lease_max)
 * leases: what it holds beyond its cap waits in that dispatcher's memory,
 * ready for the next free slot.
 */
struct lease_limits {
    int default_cap;
    int lease_max; /* 0: the cap */
    /*
     * delivery_slots, optional: the caller's node, whose leases are left out
     * of the count (NULL: every node's count). The caller subtracts what of its
     * own is in flight, which it knows better than its leases: a delivery whose
     * answer came and whose record is on its way still holds its lease, but no
     * longer a slot of the endpoint.
     */
    const char *own;
    /*
     * Out, optional (delivery_slots, shared stores): per endpoint, whether its
     * slots turn over: a lease of it was made within the last 100 ms, on any
     * node (by the store's clock; a renewal is no new lease), or it has fewer
     * leases than its cap (the claims take those slots at once); it is capped,
     * not held by its state (a rate, the breaker, a ramp), and its leases are
     * not all the caller's own (lease_limits.own). A node holding
     * none of an endpoint's slots learns from it that another node's sends to
     * it end within moments, so its fan-out may wait for them as for its own
     * (a hung endpoint's leases are old). A backend may leave it alone
     * (false): a single-node store's dispatcher knows every send itself.
     */
    bool *turning;
    /* Single-node: endpoints held to their cap whatever lease_max says (slow ones: what they get, they hold). */
    const char (*capped)[HOOKD_ID_MAX];
    size_t n_capped;
    int64_t ramp_ms; /* after its breaker closed, an endpoint's cap grows from 1 to full over this (0: at once) */
    /*
     * Out, optional (claims): set true when an endpoint took as many rows as
     * its limits let it, so more of its rows may be due now (the earliest due
     * time is now, or near enough that the next claim finds out). A backend
     * may leave it alone: then the caller asks next_due.
     */
    bool *more_due;
    /*
     * Out, optional (claims): the endpoints whose due rows this claim left
     * behind for their own limits (no free slot, a window share, the rate, the
     * breaker, a ramp, another node's claim holding them), so the caller knows
     * whose ending leases may let more go: a result of any other endpoint frees
     * nothing anyone waits for. Up to held_room ids into held; *n_held counts
     * every such endpoint, those beyond the room too (the caller then takes
     * every endpoint as held). Endpoints the claim never came to (its limit
     * was reached first) are not listed: a full claim is followed by another.
     */
    char (*held)[HOOKD_ID_MAX];
    size_t held_room;
    size_t *n_held;
    /*
     * In, optional (claims on a shared store): endpoints the caller's last
     * claim held whose own leases now fill all their cap allows. Nothing but
     * the end of one of those leases lets another of their rows go (no other
     * node may lease past the cap), so the claim need not walk past their
     * leased rows to learn that: it may leave them out and list them as held,
     * with rows due now. A backend may ignore it and look for itself.
     */
    const char (*full)[HOOKD_ID_MAX];
    size_t n_full;
};

/* Lists endpoint_id in lim's held endpoints (lease_limits), if it asks for them. */
void lease_limits_held(const struct lease_limits *lim, const char *endpoint_id);

/* ---- per-endpoint delivery state (hookd_endpoint_state) ---------------- */

enum breaker_state { BREAKER_CLOSED, BREAKER_OPEN, BREAKER_HALF_OPEN };
const char *breaker_name(enum breaker_state b);
int breaker_parse(const char *s, enum breaker_state *out);

/*
 * What the store keeps per endpoint beside hookd_endpoints, for every node:
 * the circuit breaker, the start of the current run of failures (for
 * auto-disable) and the rate limit's token bucket. An endpoint without a row
 * is closed, has not failed, and has a full bucket.
 */
struct endpoint_state {
    char endpoint_id[HOOKD_ID_MAX];
    enum breaker_state breaker;
    int consecutive_failures;
    int64_t opened_at;         /* ms; 0 when closed */
    int64_t next_probe_at;     /* open: when one delivery may go as a probe */
    int64_t probe_interval_ms; /* the current interval (doubles per failed probe) */
    int64_t probe_until;       /* half_open: the probe's lease; after it another probe may go */
    int64_t closed_at;         /* the last recovery: the ramp counts from it (0: never opened) */
    int64_t failing_since;     /* first failed attempt since the last success (0: none) */
    int64_t tokens_milli;      /* rate limit: tokens × 1000 at tokens_at; refills rate_limit per second */
    int64_t tokens_at;
};

/* The breaker's and auto-disable's settings. */
struct breaker_policy {
    int failures;             /* consecutive failed attempts that open it; <= 0: never */
    int64_t probe_ms;         /* the first probe interval, doubled per failed probe up to */
    int64_t probe_max_ms;
    double jitter;            /* each interval ± this fraction */
    int64_t disable_after_ms; /* failing continuously this long disables the endpoint; 0: never */
};

/* One endpoint's attempts in one recorded batch, in their order, and what recording them did. */
struct endpoint_outcome {
    const char *endpoint_id;
    bool succeeded;           /* one of them succeeded: the failures count from after the last such */
    int failures;             /* failed attempts after the last success */
    int64_t first_failure_at; /* the first of those (started at) */
    bool opened;              /* out: the breaker opened (or reopened after a failed probe) */
    bool disabled;            /* out: the endpoint was disabled for failing continuously */
};

/* ---- health records (hookd_endpoint_minutes, _latency_minutes, _failure_minutes, _endpoint_last) ---- */

/*
 * Attempt figures are kept per endpoint, per minute and per node (each node
 * writes rows of its own, so nodes never wait for each other's counters),
 * written with the attempt results in the same transaction. Latencies go into
 * log-scale buckets: bucket 0 holds 0 ms, bucket b >= 1 durations in
 * [2^((b-1)/4), 2^(b/4)) ms (each about 19 % wide), the last one everything above.
 */
#define HEALTH_LATENCY_BUCKETS 72 /* 2^(71/4) ms is about 3.4 days */
#define HEALTH_MINUTE_MS 60000
#define HEALTH_KEEP_MS (25 * 3600 * 1000LL) /* buckets older than this are purged (the longest window is 24 h) */
#define HEALTH_ERROR_MAX 256                /* bytes of the last error's text kept per endpoint and node */

/* One attempt as the health figures see it (the dispatcher fills it from a result; strings borrowed). */
struct health_attempt {
    const char *endpoint_id;
    const char *account;     /* the delivery's; NULL: none */
    const char *node;
    int64_t started_at;      /* ms */
    int duration_ms;
    int status_code;         /* 0: none */
    const char *error_class; /* NULL on a received status */
    const char *error;       /* NULL: none */
    bool succeeded;          /* 2xx */
    int retry_delta;         /* +1: its delivery became retrying; -1: it was retrying and is no longer; 0 */
};

/* What an endpoint's deliveries look like now. */
struct health_queue {
    int64_t pending, retrying, dead, skipped; /* deliveries by status */
    int64_t in_flight;        /* leased now (being attempted, or held by a node): some of pending + retrying */
    int64_t oldest_open_at;   /* created_at of the oldest pending or retrying delivery; 0: none */
    char oldest_event_id[HOOKD_ID_MAX]; /* its event ("" when none) */
    int64_t next_attempt_at;  /* the earliest next_attempt_at of the open, unleased ones; 0: none */
};

/* An endpoint's latest attempts, over every node. */
struct health_activity {
    int64_t last_attempt_at, last_success_at, last_error_at; /* ms; 0: never */
    int last_error_status_code;                              /* 0: none */
    char *last_error_class;                                  /* NULL: a received status, or none */
    char *last_error;                                        /* NULL: none */
};
void health_activity_free(struct health_activity *a);

/* An endpoint's attempts in a window (whole minutes), over every node. */
struct health_window {
    char endpoint_id[HOOKD_ID_MAX];
    int64_t attempts, successes;
    int64_t retries_started, retries_ended; /* deliveries that became retrying, and that stopped being it */
    int64_t latency[HEALTH_LATENCY_BUCKETS]; /* attempts per duration bucket (health_window only) */
};

/* Failed attempts in a window with one (endpoint, account, status code or error class). */
struct health_failure {
    char endpoint_id[HOOKD_ID_MAX];
    char *account;         /* the delivery's; NULL: none */
    int status_code;       /* 0: none (then error_class says what happened) */
    char *error_class;     /* NULL: a received status */
    int64_t count;
};
struct health_failure_list { struct health_failure *items; size_t n; };
struct health_window_list { struct health_window *items; size_t n; };
void health_failure_list_free(struct health_failure_list *l);
void health_window_list_free(struct health_window_list *l);

/* The oldest undelivered (pending or retrying) delivery of the whole store. */
struct health_oldest {
    char delivery_id[HOOKD_ID_MAX];
    char event_id[HOOKD_ID_MAX];
    char endpoint_id[HOOKD_ID_MAX];
    int64_t created_at; /* ms; 0: nothing is undelivered */
};

/* The latest event of a resource that has a delivery to one endpoint, and that delivery. */
struct resource_sync {
    char endpoint_id[HOOKD_ID_MAX];
    char event_id[HOOKD_ID_MAX];
    char *event_type;
    bool has_version;
    int64_t version;
    int64_t event_created_at;
    enum delivery_status status;
    int attempt_count;
    int64_t last_attempt_at, next_attempt_at, delivered_at;
    int last_status_code;
    char *last_error;
};
struct resource_sync_list { struct resource_sync *items; size_t n; };
void resource_sync_list_free(struct resource_sync_list *l);
#define RESOURCE_SYNC_EVENTS 1000 /* the newest events of a resource a sync view looks through */

/* ---- inbound records (hookd_sources, hookd_inbox, hookd_rejections) ---- */

#define SOURCE_NAME_MAX HOOKD_ID_MAX /* a name is id-shaped (id_is_valid) */
#define INBOX_TEXT_MAX 256           /* event id, type, entity kind and id: at most 255 bytes */
#define SHA256_HEX_LEN 65            /* 64 hex digits + NUL */

/* A source row. The definition and the secrets are JSON text the inbound
 * layer reads (inbound/source_def.h); the store keeps them opaque. */
struct source {
    char name[SOURCE_NAME_MAX];
    char *definition; /* the source as the API shows it, without secrets */
    char *secrets;    /* key material: source_free wipes it */
    int64_t created_at, updated_at;
};
void source_free(struct source *src);

enum inbox_status { INBOX_PENDING, INBOX_PROCESSED, INBOX_DEFERRED, INBOX_QUARANTINED };
const char *inbox_status_name(enum inbox_status st);
int inbox_status_parse(const char *s, enum inbox_status *out);

struct inbox_item {
    char id[HOOKD_ID_MAX];           /* "inb_…"; insert fills it when empty */
    char source[SOURCE_NAME_MAX];
    char *event_id;                  /* the sender's id: UNIQUE with source */
    char *event_type, *entity_kind, *entity_id; /* NULL: none */
    bool has_version;
    int64_t version;
    char *payload;                   /* the body as received */
    char payload_sha256[SHA256_HEX_LEN];
    bool signature_verified;
    enum inbox_status status;
    int attempts;
    int64_t next_attempt_at;         /* ms; 0: none */
    char *lease_owner;               /* NULL: unleased */
    int64_t lease_until, lease_token;
    char *result, *error;
    int64_t received_at, processed_at; /* ms; 0: never */
    int dup_count;                   /* copies received after the first */
    int64_t last_dup_at;
    int conflict_count;              /* of those, copies whose body hash differed */
    int64_t deferred_at;             /* ms: first deferral of the current run; 0: not deferred */
};
void inbox_item_free(struct inbox_item *it);

/* One processing step's outcome, applied by inbox_complete only while the lease is still the caller's. */
struct inbox_result {
    const char *id;
    const char *lease_owner;
    int64_t lease_token;
    enum inbox_status status; /* PENDING (retry later), PROCESSED, DEFERRED or QUARANTINED */
    int attempts;             /* after this step */
    int64_t next_attempt_at;  /* PENDING, DEFERRED; 0 otherwise */
    const char *result;       /* PROCESSED: "forwarded", …; NULL otherwise */
    const char *error;        /* NULL: none */
};

/* What inbox_insert did: a new row, or a duplicate counted on the row that was there. */
struct inbox_outcome {
    bool duplicate;
    bool conflicting;  /* a duplicate whose body hash differs from the stored one */
    char id[HOOKD_ID_MAX]; /* the row's id (the stored one for a duplicate) */
    int dup_count;     /* after this insert */
};

struct rejection {
    int64_t id;
    char source[SOURCE_NAME_MAX];
    int64_t at;         /* ms */
    char *reason;       /* "bad_signature", "stale_timestamp", … */
    char *peer;         /* client address; NULL: unknown */
    int64_t size;       /* body bytes received (or announced) */
    char sha256[SHA256_HEX_LEN]; /* of the body; "" when not read */
};
void rejection_free(struct rejection *r);

struct rejection_count {
    char *reason;
    int64_t count;
    int64_t last_at;
};


/* ---- state machines (hookd_machines, hookd_entities, hookd_transitions) ---- */

#define MACHINE_NAME_MAX SOURCE_NAME_MAX /* a machine's name is id-shaped, as a source's */
#define TRANSITION_LIST_MAX 10000        /* rows one trace reads */

/* A machine row: the definition is JSON text the inbound layer reads (inbound/machine.h). */
struct machine_record {
    char name[MACHINE_NAME_MAX];
    char *definition;
    int64_t created_at, updated_at;
};
void machine_record_free(struct machine_record *m);

/* An entity a machine keeps: state NULL is "not known yet". */
struct entity_record {
    char *kind, *id;
    char *state;
    bool has_version;
    int64_t version;           /* the last applied (or reconciled) version */
    char *last_event_id;
    int64_t updated_at;
};
void entity_record_free(struct entity_record *e);

/* One decision on an inbox item, appended to hookd_transitions. */
enum transition_result {
    TRANSITION_APPLIED, TRANSITION_STALE, TRANSITION_DEFERRED, TRANSITION_QUARANTINED, TRANSITION_RECONCILED
};
const char *transition_result_name(enum transition_result r);
struct transition_record {
    int64_t seq;                 /* filled by the store */
    char inbox_id[HOOKD_ID_MAX];
    char *source, *kind, *entity_id, *event_id; /* event_id NULL: a reconciliation's own row */
    char *from_state, *to_state; /* NULL: not known / unchanged */
    bool has_version;
    int64_t version;
    char *result;                /* transition_result_name() */
    char *reason;                /* why deferred or quarantined; NULL: none */
    char *worker;                /* the node that decided */
    int64_t at;
};
void transition_record_free(struct transition_record *t);

/* What GET /v1/audit counts over a source's items received in a time range (0: open). */
struct audit_report {
    int64_t received_twice;     /* event ids received more than once */
    int64_t extra_copies;       /* the copies after the first, summed */
    int64_t lower_after_higher; /* items whose version arrived after a higher one of the same entity */
    int64_t applied_twice;      /* (entity, version) applied more than once: must be 0 */
    int64_t unprocessed_changes; /* applied or reconciled rows whose item is not processed: must be 0 */
    int64_t conflicting;        /* duplicates whose body differed */
};

/* An open item settled by a re-evaluation (not leased by the caller: no fence but its status and lease). */
struct inbox_settle {
    const char *id;
    enum inbox_status status;    /* PROCESSED, DEFERRED or QUARANTINED */
    const char *result;
    const char *error;
    int64_t next_attempt_at;     /* DEFERRED */
};

struct machine_filter {
    const char *before_name; /* cursor: name < before_name; NULL: start */
    int limit;
};
struct machine_list { struct machine_record *items; size_t n; };
struct transition_list { struct transition_record *items; size_t n; };
void machine_list_free(struct machine_list *l);
void transition_list_free(struct transition_list *l);

/* ---- lists and filters ------------------------------------------------ */

/* A replay (DESIGN §12 "Replays"): one delivery, one event's deliveries, or a bounded range. */
enum replay_kind { REPLAY_DELIVERY, REPLAY_EVENT, REPLAY_RANGE };
const char *replay_kind_name(enum replay_kind k);
int replay_kind_parse(const char *s, enum replay_kind *out);

#define REPLAY_LIMIT_DEFAULT 1000 /* deliveries one range replay takes unless told */
#define REPLAY_LIMIT_MAX 10000    /* and at most */

struct replay {
    char id[HOOKD_ID_MAX]; /* "rpl_…" */
    char *actor;           /* "admin", or the id of the account token that asked */
    char *account;         /* the account its deliveries belong to; NULL: any (a range without one) */
    enum replay_kind kind;
    char *filter;          /* JSON text of what was asked */
    int64_t created_at, finished_at; /* ms; finished_at 0 while batches remain */
    int matched;           /* deliveries the filter matched */
    int replayed;          /* made pending again */
    int skipped;           /* pending or in flight already (or changed meanwhile): left as they were */
    /* Progress, read from the replayed deliveries now: pending (pending, retrying), delivered,
     * failed (dead, skipped) and superseded. */
    int pending, delivered, failed, superseded;
};
void replay_free(struct replay *r);

enum token_scope { TOKEN_SCOPE_READ, TOKEN_SCOPE_READ_REPLAY };
const char *token_scope_name(enum token_scope sc);
int token_scope_parse(const char *s, enum token_scope *out);

/* An account-scoped API token. The secret itself is never stored: only its SHA-256. */
struct api_token {
    char id[HOOKD_ID_MAX];        /* "tok_…" */
    char *account;
    enum token_scope scope;
    char hash[SHA256_HEX_LEN];    /* hex SHA-256 of the secret */
    char *description;            /* NULL: none */
    char *created_by;             /* "admin" */
    int64_t created_at, expires_at, revoked_at; /* ms; revoked_at 0: live */
};
void api_token_free(struct api_token *t);

#define STORE_LIST_MAX 1000
#define STORE_TOKENS_MAX 100000 /* tokens the auth cache holds at most */
#define INBOX_REPLAY_MAX 10000 /* items one range replay may take */
#define STORE_SLOTS_UNCAPPED INT32_MAX /* delivery_slots of an endpoint without an in-flight cap */

struct event_filter {
    const char *type;    /* exact; NULL: any */
    const char *account;
    int64_t since, until; /* created_at range, ms; 0: open */
    int64_t before_seq;   /* cursor: seq < before_seq; 0: start */
    int limit;            /* 1..STORE_LIST_MAX */
};

struct delivery_filter {
    const char *event_id;
    const char *endpoint_id;
    const char *account;  /* the event's account */
    bool own_endpoints;   /* with account: only deliveries to endpoints of that account (an account token's view) */
    int status;           /* enum delivery_status, or -1 for any */
    int64_t since, until; /* created_at range, ms; 0: open */
    const char *before_id; /* cursor: id < before_id; NULL: start */
    int limit;
};

struct endpoint_filter {
    const char *account;
    const char *before_id;
    int limit;
};

struct source_filter {
    const char *before_name; /* cursor: name < before_name; NULL: start */
    int limit;
};

struct inbox_filter {
    const char *source;
    int status;            /* enum inbox_status, or -1 for any */
    const char *entity_kind;
    const char *entity_id;
    int64_t since, until;  /* received_at range, ms; 0: open */
    const char *before_id; /* cursor: id < before_id; NULL: start */
    int limit;
};

struct replay_filter {
    const char *account;   /* NULL: any */
    const char *before_id; /* cursor: id < before_id; NULL: start */
    int limit;
};

struct token_filter {
    const char *account;   /* NULL: any */
    const char *before_id;
    int limit;
};

struct rejection_filter {
    const char *source;    /* required */
    int64_t before_id;     /* cursor: id < before_id; 0: start */
    int limit;
};

/* Growable arrays; free with *_list_free(). */
struct event_list { struct event *items; size_t n; };
struct endpoint_list { struct endpoint *items; size_t n; };
struct delivery_list { struct delivery *items; size_t n; };
struct job_list { struct delivery_job *items; size_t n; };
struct attempt_list { struct attempt *items; size_t n; };
void event_list_free(struct event_list *l);
void endpoint_list_free(struct endpoint_list *l);
void delivery_list_free(struct delivery_list *l);
void job_list_free(struct job_list *l);
void attempt_list_free(struct attempt_list *l);
struct source_list { struct source *items; size_t n; };
struct inbox_list { struct inbox_item *items; size_t n; };
struct rejection_list { struct rejection *items; size_t n; };
struct rejection_count_list { struct rejection_count *items; size_t n; };
void source_list_free(struct source_list *l);
void inbox_list_free(struct inbox_list *l);

/* What a decision reads once it holds its entity (store_entity_hold). */
#define ENTITY_OPEN_MAX 2000 /* open items of one entity read for a decision */
struct entity_hold {
    struct machine_record machine; /* machine_found: the definition the decision runs */
    bool machine_found;
    struct entity_record entity;   /* known: the row; else zero (the entity is new) */
    bool known;
    struct inbox_list open;        /* its pending and deferred items, at most ENTITY_OPEN_MAX, in no particular
                                    * order (the step sorts them by version); without their bodies (payload "") */
    size_t open_total;             /* the open items the hold saw (at most ENTITY_OPEN_MAX): open.n, or more
                                    * when a window left some out (store_entity_hold_window) */
};

/*
 * A decision's item not stored yet (the accept's, SQLite) and its machine's
 * versioning contiguous: the hold may leave out the deferred items that no
 * decision of this step can pass. Under contiguous versioning the entity's
 * applied version a moves only to a + 1, so from a known entity with a
 * version the step can reach at most x, the top of the run of consecutive
 * versions a + 1, a + 2, … among the open items and this one; a deferred
 * item above x + 1 is a gap at every look of the step (DESIGN §7 rule 2) and
 * is only counted (open_total). A new entity takes any version, but only an
 * event whose type has a transition from a new entity (may_start) can make
 * it: x is then the highest top of the runs that start at such an item (the
 * items at or below it turn stale), and every item is read when such an
 * item has no version (the entity would keep none). Pending items, due
 * ones (a leased item is one) and those without a version are always read.
 */
struct hold_window {
    bool has_version; /* the decision's own item */
    int64_t version;
    const char *event_type;
    bool (*may_start)(const char *event_type, void *arg); /* a transition from a new entity on this type */
    void *arg;
    int64_t now;      /* an item due by then is read whatever its version (it may be leased) */
    const struct machine_record *machine; /* the machine's row as the caller read it in this transaction, or
                                           * NULL: the hold copies it instead of reading it again */
};
void entity_hold_free(struct entity_hold *h);

/*
 * What one decision writes, handed over once when it ends (decision_write):
 * its transitions rows in decision order, the outbox events it emits (a
 * taken id or idempotency key is no error: that event is there already),
 * the entity's row (NULL: unchanged) and the open items it settled (each
 * fenced as inbox_settle). The caller owns every pointer.
 */
struct decision_writes {
    struct transition_record *transitions;
    size_t n_transitions;
    struct event *events;        /* ids filled when empty */
    size_t n_events;
    const struct entity_record *entity;
    const struct inbox_settle *settles;
    size_t n_settles;
    /*
     * The decided item's own fenced outcome (inbox_complete), written after
     * the rest, in the same round trip on PostgreSQL (NULL: none). A lease
     * lost meanwhile is HOOKD_ESTALE with complete_lost set; the caller
     * undoes the decision with it.
     */
    const struct inbox_result *complete;
    int emitted;                 /* out: events inserted (not there already) */
    bool complete_lost;          /* out: complete found no lease (the result is then HOOKD_ESTALE) */
};

void rejection_list_free(struct rejection_list *l);
void rejection_count_list_free(struct rejection_count_list *l);
struct replay_list { struct replay *items; size_t n; };
struct token_list { struct api_token *items; size_t n; };
void replay_list_free(struct replay_list *l);
void token_list_free(struct token_list *l);

/* ---- operations records (hookd_alerts; figures; retention) -------------- */

/*
 * Cluster-wide figures for the metrics, from the store (every node reads the
 * same). Counts that grow without bound (delivered, superseded deliveries;
 * processed inbox items) are not counted: -1; the counters cover them.
 */
struct store_figures {
    int64_t deliveries[6];      /* by enum delivery_status */
    int64_t leased;             /* deliveries with a live lease (in flight or queued on some node) */
    int64_t outbox_undispatched;
    int64_t oldest_open_at;     /* ms: the oldest undispatched outbox row or open delivery; 0: none */
    int64_t breakers[3];        /* endpoints per enum breaker_state (no state row: closed) */
    int64_t endpoints_disabled;
    int64_t inbox[4];           /* by enum inbox_status */
};

#define ALERT_RULE_MAX 32
#define ALERT_TEXT_MAX 512

struct alert {
    char id[HOOKD_ID_MAX];      /* "alr_…"; open fills it when empty */
    char rule[ALERT_RULE_MAX];  /* "error_rate", "dead_letters", … (ops/alerts.c) */
    char *subject;              /* an endpoint id, a source name, or "*" for the whole store */
    char *message;              /* one plain sentence */
    char *details;              /* JSON object text: the figures that opened it */
    int64_t opened_at, resolved_at; /* ms; resolved_at 0: open */
};
void alert_free(struct alert *a);

struct alert_filter {
    int status;                 /* -1 any, 0 open, 1 resolved */
    const char *rule;           /* NULL: any */
    const char *before_id;      /* cursor: id < before_id; NULL: start */
    int limit;
};

/* What the alert rules read: one row per (kind, subject), see each kind. */
enum alert_signal_kind {
    SIGNAL_RETRYING,       /* subject endpoint: n deliveries retrying */
    SIGNAL_ATTEMPTS,       /* subject endpoint, account: n attempts since, m of them 2xx */
    SIGNAL_DEAD,           /* subject endpoint: n deliveries dead whose last attempt (or creation) is since */
    SIGNAL_OLDEST_OPEN,    /* subject endpoint: n = created_at (ms) of its oldest open delivery */
    SIGNAL_QUARANTINED,    /* subject source: n inbox items quarantined */
    SIGNAL_SIG_REJECTIONS, /* subject source: n requests refused for their signature since */
    SIGNAL_DISABLED,       /* subject endpoint: disabled; account holds its reason */
};
struct alert_signal {
    enum alert_signal_kind kind;
    char *subject;
    char *account;          /* NULL: none */
    int64_t n, m;
};

struct alert_list { struct alert *items; size_t n; };
struct alert_signal_list { struct alert_signal *items; size_t n; };
void alert_list_free(struct alert_list *l);
void alert_signal_list_free(struct alert_signal_list *l);

/* ---- the method tables ------------------------------------------------- */

/*
 * A backend is one `struct store_ops`: the connection and transaction
 * methods, and one sub-table per table family, each defined in the backend's
 * file for that family (sqlite_events.c, postgres_deliveries.c, …). A new
 * family is a sub-table here, one file per backend and its wrappers; a
 * backend without it leaves the pointer NULL and its wrappers answer
 * HOOKD_EUNAVAIL, as they do for a NULL method.
 */

/* One backend connection. Each backend defines it with `const struct store_ops *ops`
 * as its first member, set by open: store_backend() reads it. */
struct store;

/* hookd_meta: small key/value settings. */
struct store_meta_ops {
    int (*get)(struct store *s, const char *key, char **value_out); /* ENOTFOUND when absent */
    int (*set)(struct store *s, const char *key, const char *value);
};

/* hookd_outbox: the events, and the relay's view of them. */
struct store_event_ops {
    /* Fills ev->id (when empty), seq and created_at. With ev->idempotency_key
     * or a caller-chosen id already present: EEXISTS and *existing filled. */
    int (*insert)(struct store *s, struct event *ev, struct event *existing);
    int (*get)(struct store *s, const char *id, struct event *out);
    int (*list)(struct store *s, const struct event_filter *f, struct event_list *out);
    /* Undispatched rows after after_seq, oldest first (claims them on postgres). */
    int (*fetch)(struct store *s, int64_t after_seq, int limit, struct event_list *out);
    int (*mark_dispatched)(struct store *s, const int64_t *seqs, size_t n, int64_t at);
    int (*pending)(struct store *s, bool *any);
    /* Up to limit undispatched rows, oldest first, marked dispatched at `at`,
     * with *endpoints_version (endpoint_version) as of the same moment (left
     * alone when no row came). Inside a transaction the rows stay locked
     * until it ends, and rows another transaction holds are skipped; outside
     * one, the call is atomic by itself. One round trip on PostgreSQL. */
    int (*take)(struct store *s, int limit, int64_t at, struct event_list *out, int64_t *endpoints_version);
    /* Marks the row of seq rejected: error set, dispatched at `at` unless it was already. */
    int (*reject)(struct store *s, int64_t seq, const char *error, int64_t at);
};

/* hookd_endpoints. */
struct store_endpoint_ops {
    int (*insert)(struct store *s, const struct endpoint *ep);
    int (*update)(struct store *s, const struct endpoint *ep); /* whole row by id */
    int (*get)(struct store *s, const char *id, struct endpoint *out);
    int (*list)(struct store *s, const struct endpoint_filter *f, struct endpoint_list *out);
    int (*list_all)(struct store *s, struct endpoint_list *out); /* every endpoint, for fan-out and caches */
    int (*delete)(struct store *s, const char *id);
    int (*set_enabled)(struct store *s, const char *id, bool enabled, const char *reason, int64_t at);
    /* A cheap cache validator: changes on every insert, update and delete of an endpoint. */
    int (*version)(struct store *s, int64_t *version);
};

/* hookd_deliveries and hookd_attempts. */
struct store_delivery_ops {
    int (*insert)(struct store *s, const struct delivery *d);
    /* All of ds, or none (EINVAL when one is invalid); a (event, endpoint) pair or id already present is
     * skipped, not an error. Runs in the caller's transaction, or in one of its own. */
    int (*insert_many)(struct store *s, const struct delivery *ds, size_t n);
    /*
     * Leases up to limit (1..STORE_LIST_MAX) due deliveries (pending or retrying, next_attempt_at <= now,
     * unleased or lease expired, endpoint enabled, event present) to node until lease_until, earliest
     * first, bumping each one's lease_token. Per endpoint it takes at most its lease limit (struct
     * lease_limits) - (its deliveries leased by
     * anyone with lease_until >= now). The cap holds across nodes: concurrent claims on one database
     * are serialized per endpoint. Runs in the caller's transaction, or in one of its own.
     */
    int (*claim_due)(struct store *s, const char *node, int64_t now, int64_t lease_until, int limit,
                     const struct lease_limits *lim, struct job_list *out);
    /*
     * The in-flight slots a fan-out may fill at once with new deliveries of each of the n distinct
     * endpoint_ids, into slots[i]: the endpoint's lease limit (as in claim_due) minus the deliveries
     * leased by anyone with lease_until >= now, at least 0; STORE_SLOTS_UNCAPPED when it has no cap
     * (due rows then never wait for slots); 0 when the endpoint is unknown or disabled, when due
     * deliveries of a capped endpoint wait unleased (claims serve them first, in order), or when another
     * node is deciding for it at this moment. A capped endpoint
     * with slots stays locked to the caller's transaction, like a claim's, so no other node can count
     * the same slots before this one's leases commit: call it inside the transaction that inserts them.
     * With lim->turning, also whether each endpoint's slots turn over (struct lease_limits).
     */
    int (*slots)(struct store *s, int64_t now, const struct lease_limits *lim, const char *const *endpoint_ids,
                 size_t n, int *slots);
    int (*next_due)(struct store *s, int64_t *at); /* ENOTFOUND when nothing is scheduled */
    /*
     * Latest mode: of each (endpoint_ids[i], order_keys[i]) with a latest-mode key, every open delivery
     * that is not leased (or whose lease ran out) and has a newer sibling (a higher order_version when
     * both have one, else a later order_seq) that is open or delivered becomes superseded, never to be
     * sent. Keys of key mode are left alone. Runs in the caller's transaction, or in one of its own.
     */
    int (*supersede)(struct store *s, const char *const *endpoint_ids, const char *const *order_keys, size_t n,
                     int64_t now);
    int (*complete)(struct store *s, const struct delivery_result *r, int64_t now); /* ESTALE if fenced out */
    /*
     * complete for n results: results[i] is 0, ESTALE (fenced out) or EINVAL, and a result other
     * than 0 changed nothing. Returns 0 once every results[i] is set; on an error return the results are
     * undefined and the caller rolls back what the call did (the writer's savepoint).
     */
    int (*complete_many)(struct store *s, const struct delivery_result *rs, size_t n, int64_t now, int *results);
    int (*release)(struct store *s, const char *id, const char *owner, int64_t token); /* ESTALE if fenced out */
    int (*release_node)(struct store *s, const char *node);
    /*
     * Extends to lease_until each lease that node still holds of ids[i] with tokens[i] on an open
     * delivery, fenced like complete: a lease another claim has taken since (a newer token), or a
     * delivery recorded or released meanwhile, is left alone. A lease past its lease_until that no
     * claim has taken yet is still the caller's and is extended. A row another transaction holds
     * locked right now (a completion being written, another node's claim) may be skipped: never
     * waited for. renewed[i] tells which were. A half-open breaker's probe (the delivery whose lease
     * is the breaker's probe_until) takes probe_until along, so the probe stays the only one while
     * it is renewed; one whose breaker row is locked right now is skipped with it. One statement on
     * PostgreSQL. Runs in the caller's transaction, or in one of its own.
     */
    int (*renew)(struct store *s, const char *node, const char *const *ids, const int64_t *tokens, size_t n,
                 int64_t lease_until, bool *renewed);
    int (*get)(struct store *s, const char *id, struct delivery *out);
    /*
     * Sends a final delivery (dead, skipped or delivered) again: pending, due at now, unleased, with a
     * fresh attempt count and retry window (its attempts are kept; their numbers start again at 1), in
     * one UPDATE whose status predicate makes it atomic. *out gets the row as replayed; for a delivery
     * that is pending, retrying (queued or in flight) or superseded, *out gets it as it is and the
     * result is ECONFLICT; ENOTFOUND when absent.
     */
    int (*replay)(struct store *s, const char *id, int64_t now, struct delivery *out);
    int (*list)(struct store *s, const struct delivery_filter *f, struct delivery_list *out);
    /* A delivery's attempts in the order they were made, wherever the backend keeps them (PostgreSQL keeps
     * the first attempt of an unrecorded delivery in its row: DESIGN §3). */
    int (*attempt_list)(struct store *s, const char *delivery_id, struct attempt_list *out);
    /* How many deliveries f matches (f->before_id and f->limit are ignored). */
    int (*count)(struct store *s, const struct delivery_filter *f, int64_t *n);
    /*
     * replay for many (at most STORE_LIST_MAX) at once, of those whose status is now one of statuses
     * (bits 1 << enum delivery_status, final ones only): replayed[i] tells whether ids[i] was. One
     * statement on PostgreSQL. Runs in the caller's transaction, or in one of its own.
     */
    int (*replay_many)(struct store *s, const char *const *ids, size_t n, unsigned statuses, int64_t now,
                       bool *replayed);
};

/* hookd_endpoint_state: the breaker, auto-disable and the rate limit's bucket, per endpoint. */
struct store_endpoint_state_ops {
    /*
     * Applies the attempts' outcomes: a success closes the breaker and clears the failures; failures
     * count up, open it at policy->failures (a failed probe reopens it with twice the interval) and,
     * failing continuously for disable_after_ms, disable the endpoint with a reason. Sets each
     * outcome's opened and disabled. Runs in the caller's transaction, or in one of its own.
     */
    int (*record)(struct store *s, struct endpoint_outcome *o, size_t n, const struct breaker_policy *p,
                  int64_t now);
    int (*get)(struct store *s, const char *endpoint_id, struct endpoint_state *out); /* ENOTFOUND: default */
    /*
     * The state of each of the n endpoint_ids into out[i]: the stored row, or the default (closed,
     * never failed) for an endpoint without one. One statement on PostgreSQL.
     */
    int (*get_many)(struct store *s, const char *const *endpoint_ids, size_t n, struct endpoint_state *out);
    int (*reset)(struct store *s, const char *endpoint_id); /* back to closed and never failed (enabled again) */
    /*
     * Deliveries of endpoints whose breaker is not closed wait without attempts; one that is open
     * (pending or retrying, not leased or its lease ended) and whose first attempt (else its creation)
     * lies more than window_ms before now becomes dead ("retry window exceeded while the endpoint was
     * paused"). *n gets how many (may be NULL). Runs in the caller's transaction, or in one of its own.
     */
    int (*expire_paused)(struct store *s, int64_t now, int64_t window_ms, int64_t *n);
};

/* hookd_sources: inbound sources by name. */
struct store_source_ops {
    int (*insert)(struct store *s, const struct source *src); /* EEXISTS when the name is taken */
    int (*update)(struct store *s, const struct source *src); /* definition, secrets, updated_at by name */
    int (*get)(struct store *s, const char *name, struct source *out);
    int (*list)(struct store *s, const struct source_filter *f, struct source_list *out); /* by name, descending */
    int (*list_all)(struct store *s, struct source_list *out); /* every source, for the receiver's cache */
    int (*delete)(struct store *s, const char *name);          /* and its rejections; ENOTFOUND */
    /* A cheap cache validator: changes on every insert, update and delete of a source. */
    int (*version)(struct store *s, int64_t *version);
};

/* hookd_inbox: inbound events, once each per (source, event_id). */
struct store_inbox_ops {
    /*
     * One statement: inserts it (status pending, its id filled when empty,
     * received_at now when 0), or, when (source, event_id) is present, bumps
     * that row's dup_count and last_dup_at and counts a differing
     * payload_sha256 in conflict_count. *out says which, with the row's id.
     * Concurrent inserts of one event leave one row, whatever the backend.
     */
    int (*insert)(struct store *s, struct inbox_item *it, struct inbox_outcome *out);
    /*
     * The n inserts of a group commit as one call (the receiver's accepts),
     * each with its own outcome in outs[i], the same as n calls of insert in
     * that order would give (a second copy of one event in the call is its
     * duplicate). An error means the call as a whole failed; the caller rolls
     * back what it did (the writer's savepoint) and runs the inserts alone.
     */
    int (*insert_many)(struct store *s, struct inbox_item *const *items, size_t n, struct inbox_outcome *outs);
    int (*get)(struct store *s, const char *id, struct inbox_item *out);
    int (*list)(struct store *s, const struct inbox_filter *f, struct inbox_list *out); /* by id, descending */
    /*
     * Leases up to limit due open items (pending or deferred, next_attempt_at <= now, no live lease), oldest
     * first, bumping each one's lease_token. An item with an entity (source, entity_kind, entity_id) is taken
     * only when no open item of that entity holds a live lease and no older due item of it is left, so
     * one entity is never with two workers at once; claims on one database are serialized across nodes
     * (postgres: a transaction-scoped advisory lock), so the rule holds across nodes too.
     */
    int (*claim_due)(struct store *s, const char *node, int64_t now, int64_t lease_until, int limit,
                     struct inbox_list *out);
    int (*complete)(struct store *s, const struct inbox_result *r, int64_t now); /* ESTALE if fenced out */
    /* ENOTFOUND, or ECONFLICT when the item is pending, leased or processed; out (may be NULL) the new row. */
    int (*replay)(struct store *s, const char *id, int64_t now, struct inbox_item *out);
    /* f: source, status (deferred or quarantined), since, until, limit (1..INBOX_REPLAY_MAX). */
    int (*replay_range)(struct store *s, const struct inbox_filter *f, bool dry_run, int64_t now, int64_t *count);
    int (*release_node)(struct store *s, const char *node);
};

/* hookd_rejections and hookd_rejection_counts: refused inbound requests, without their bodies. */
struct store_rejection_ops {
    /* Logs r (r->id and at filled when 0), keeps the newest `keep` rows of its source, and bumps the
     * (source, reason) counter, as one unit. */
    int (*insert)(struct store *s, struct rejection *r, int keep);
    int (*list)(struct store *s, const struct rejection_filter *f, struct rejection_list *out); /* newest first */
    int (*counts)(struct store *s, const char *source, struct rejection_count_list *out); /* by reason */
};


/* hookd_machines, hookd_entities, hookd_transitions: state machines and what they decided. */
struct store_machine_ops {
    int (*insert)(struct store *s, const struct machine_record *m); /* EEXISTS when the name is taken */
    /* ENOTFOUND; created_at kept; the deferred items of the sources naming it become due now (they wait for a change) */
    int (*update)(struct store *s, const struct machine_record *m);
    int (*get)(struct store *s, const char *name, struct machine_record *out);
    int (*list)(struct store *s, const struct machine_filter *f, struct machine_list *out); /* by name, descending */
    int (*delete)(struct store *s, const char *name);
    /*
     * Inside the caller's transaction: holds the entity (kind, id) until it
     * ends, so no other connection decides on it meanwhile, even before its
     * row exists (postgres: a transaction-scoped advisory lock on the pair;
     * sqlite: the single writer holds it already).
     */
    int (*entity_lock)(struct store *s, const char *kind, const char *id);
    int (*entity_get)(struct store *s, const char *kind, const char *id, struct entity_record *out); /* ENOTFOUND */
    /*
     * A decision's reads: entity_lock, then the machine `machine`, the
     * entity's row and its open items (any source), read after the lock
     * (postgres: the four statements in one round trip). A missing machine
     * or row is not an error (machine_found, known). *out is filled on
     * success only (entity_hold_free it).
     */
    int (*entity_hold)(struct store *s, const char *machine, const char *kind, const char *id,
                       const struct hold_window *w, struct entity_hold *out); /* w NULL: every open item */
    int (*entity_put)(struct store *s, const struct entity_record *e); /* insert or replace */
    int (*transition_insert)(struct store *s, struct transition_record *t); /* t->seq filled */
    /* An entity's rows, oldest first (at most TRANSITION_LIST_MAX). */
    int (*transition_list)(struct store *s, const char *kind, const char *id, struct transition_list *out);
    /* An open (pending or deferred) item without a live lease to its new status; ESTALE when it is not (any more). */
    int (*settle)(struct store *s, const struct inbox_settle *r, int64_t now);
    /*
     * A decision's writes, in the caller's transaction (postgres: one round
     * trip, one statement per kind of row). ESTALE when a settled item is
     * not open and unleased any more; on any error the caller rolls back.
     */
    int (*decision_write)(struct store *s, struct decision_writes *w, int64_t now);
    /*
     * An item decided by its machine in the transaction that accepts it
     * (SQLite only: the accept and the decisions on one writer). taken: whether
     * (source, event_id) names an item already, asked before the decision
     * writes anything; insert_decided: the new item with its outcome r
     * (attempts after the step; processed_at or deferred_at now), it->id and
     * received_at set by the caller. NULL where the store has no such path.
     */
    int (*inbox_taken)(struct store *s, const char *source, const char *event_id, bool *taken);
    int (*inbox_insert_decided)(struct store *s, struct inbox_item *it, const struct inbox_settle *r, int attempts,
                                int64_t now);
    /*
     * The accepts' group (SQLite only, as insert_decided): runs fn(s, arg),
     * during which the decision_writes it makes keep back their transitions
     * rows and emitted events (rows nothing in the transaction reads: the
     * entity, settled items and outcomes are written at once), then writes
     * them, each kind through multi-row statements in the order they were
     * handed over. fn's error, or the write's: the caller rolls back (what
     * was kept is forgotten). While gathering, decision_write's emitted
     * counts the events handed over.
     */
    int (*decision_gather)(struct store *s, int (*fn)(struct store *s, void *arg), void *arg);
    /* source NULL: every source. */
    int (*audit)(struct store *s, const char *source, int64_t since, int64_t until, struct audit_report *out);
};

struct store_replay_ops {
    int (*insert)(struct store *s, const struct replay *r); /* r->id set; EEXISTS when taken */
    /* Adds the n deliveries of one batch (replayed by the same transaction) to replay id, and skipped to
     * its skipped count; done marks it finished at `at`. ENOTFOUND when id is unknown. */
    int (*record)(struct store *s, const char *id, const char *const *delivery_ids, size_t n, int skipped, bool done,
                  int64_t at);
    int (*get)(struct store *s, const char *id, struct replay *out);
    int (*list)(struct store *s, const struct replay_filter *f, struct replay_list *out); /* newest first */
};

struct store_token_ops {
    int (*insert)(struct store *s, const struct api_token *t); /* EEXISTS when the id or hash is taken */
    int (*get)(struct store *s, const char *id, struct api_token *out);
    int (*list)(struct store *s, const struct token_filter *f, struct token_list *out); /* newest first */
    /* Every token not revoked and not expired at now (at most STORE_TOKENS_MAX). */
    int (*list_active)(struct store *s, int64_t now, struct token_list *out);
    int (*revoke)(struct store *s, const char *id, int64_t at); /* ENOTFOUND; ECONFLICT: revoked already */
    int (*version)(struct store *s, int64_t *version);
};

/* hookd_alerts, and the signals the alert rules read. */
struct store_alert_ops {
    /*
     * Opens a (filled id when empty, opened_at): one statement that inserts only when (rule, subject) has no
     * open alert and none resolved after quiet_since (so a flapping subject opens at most once per quiet
     * period); EEXISTS otherwise. Concurrent opens on one database leave one open alert (a unique index).
     */
    int (*open)(struct store *s, struct alert *a, int64_t quiet_since);
    /* Resolves an open alert at `at`; *out the row. ENOTFOUND when absent or resolved already. */
    int (*resolve)(struct store *s, const char *id, int64_t at, struct alert *out);
    int (*get)(struct store *s, const char *id, struct alert *out);
    int (*list)(struct store *s, const struct alert_filter *f, struct alert_list *out); /* by id, descending */
    /* Every signal of every kind; attempts, dead letters and rejections counted from since (ms). */
    int (*signals)(struct store *s, int64_t since, struct alert_signal_list *out);
};

/* Figures for the metrics, and the retention purge (each call one small batch). */
struct store_upkeep_ops {
    int (*figures)(struct store *s, int64_t now, struct store_figures *out);
    /* Up to limit delivered or superseded deliveries created before `before`, with their attempts. */
    int (*purge_deliveries)(struct store *s, int64_t before, int limit, int64_t *purged);
    /*
     * Of the next limit outbox rows after after_seq (by seq): those fanned out, created before `before`
     * and without any delivery left. *next_seq: where the next call goes on; 0 when this one reached
     * the end of the table or a row created at or after `before` (start again from 0 later).
     */
    int (*purge_events)(struct store *s, int64_t after_seq, int64_t before, int limit, int64_t *next_seq,
                        int64_t *purged);
    /* Up to limit processed inbox items processed before `before` lose their payload (it becomes empty);
     * the row stays, and with it the idempotency key (source, event_id). */
    int (*purge_inbox)(struct store *s, int64_t before, int limit, int64_t *purged);
};

/* The health figures: attempt buckets written with the results, and reads over them and the deliveries. */
struct store_health_ops {
    /*
     * Adds the attempts to their endpoint's minute, latency and failure buckets and its latest
     * attempt, success and error (per node); with purge_before > 0 also drops buckets older than it.
     * Runs in the caller's transaction, or in one of its own.
     */
    int (*record)(struct store *s, const struct health_attempt *a, size_t n, int64_t purge_before);
    /* One endpoint's deliveries now: counts by status, leases live at now, the oldest open, the next due. */
    int (*queue)(struct store *s, const char *endpoint_id, int64_t now, struct health_queue *out);
    int (*activity)(struct store *s, const char *endpoint_id, struct health_activity *out);
    /* One endpoint's attempts in the minutes from since (floored to its minute) on, with latencies. */
    int (*window)(struct store *s, const char *endpoint_id, int64_t since, struct health_window *out);
    /* Every endpoint's attempts from since on (no latencies), and the failures grouped as struct
     * health_failure, both by endpoint id. */
    int (*summary)(struct store *s, int64_t since, struct health_window_list *windows,
                   struct health_failure_list *failures);
    int (*oldest)(struct store *s, struct health_oldest *out); /* created_at 0 when nothing is undelivered */
    /*
     * Per endpoint (by id), the newest of the resource's newest RESOURCE_SYNC_EVENTS events (account:
     * only that account's; NULL: any) that has a delivery to it other than a superseded one.
     */
    int (*resource)(struct store *s, const char *resource_type, const char *resource_id, const char *account,
                    struct resource_sync_list *out);
};

/* The dashboard's series: cluster-wide counts per minute, and the inbound refusals by reason. */
#define STATS_MINUTES_MAX 1440 /* 24 h */
struct stats_minute {
    int64_t events;    /* outbox rows created in the minute */
    int64_t inbound;   /* inbox items received in the minute (duplicates are not items) */
    int64_t attempts;  /* delivery attempts started in the minute (hookd_endpoint_minutes) */
    int64_t successes; /* of them, answered 2xx */
};
struct store_stats_ops {
    /* Counts for the n minutes from since (a whole minute): out[i] is minute since + i * 60 s. With an
     * endpoint_id only that endpoint's attempts and successes (events and inbound stay 0). */
    int (*minutes)(struct store *s, int64_t since, const char *endpoint_id, struct stats_minute *out, size_t n);
    /* Every source's refusals summed by reason (count, and the latest in last_at), by reason. */
    int (*rejected)(struct store *s, struct rejection_count_list *out);
};

struct store_ops {
    int version; /* STORE_OPS_VERSION */
    const char *name;
    /* True when at most one hookd process can use the store (SQLite's single
     * writer): the relay may then hand events to the dispatcher before their
     * fan-out commits, because no other node can fan out the same rows. */
    bool single_node;
    bool (*handles)(const char *dsn);

    int (*open)(const char *dsn, struct store **out);
    void (*close)(struct store *s);
    int (*migrate)(struct store *s);

    int (*begin)(struct store *s);
    int (*commit)(struct store *s);
    /* Commits without waiting for the commit to be durable, for a transaction
     * that acknowledges nothing: a crash of the store server may undo it,
     * until a later durable commit on any connection makes it durable too
     * (PostgreSQL: synchronous_commit off for this transaction; SQLite:
     * commit). */
    int (*commit_lazy)(struct store *s);
    int (*rollback)(struct store *s);
    int (*savepoint)(struct store *s);
    int (*release)(struct store *s);
    int (*rollback_to)(struct store *s);
    /* Sets *changed when another connection committed since the last call. */
    int (*changed)(struct store *s, bool *changed);
    /* What changed() watches, before its first call: PostgreSQL LISTENs on
     * this notification channel (STORE_CHANNEL_OUTBOX by default); SQLite sees
     * any commit whatever the channel. Optional (NULL: the default only). */
    int (*watch)(struct store *s, const char *channel);
    /* A descriptor to poll for reading: readable when changed() may report a
     * change (a notification arrived, or the connection broke). -1 when the
     * backend has none (SQLite: call changed() every millisecond or so) or
     * while the connection is down. Valid until the next call on s. */
    int (*changed_fd)(struct store *s);
    /* Periodic maintenance, called about once a second on a connection of its own
     * that is otherwise idle, outside a transaction (PostgreSQL: vacuums the
     * lease table hookd_inflight, whose rows churn faster than autovacuum
     * visits a database; SQLite: none). Optional (NULL: nothing to do). */
    int (*maintain)(struct store *s);
    /* The longest one statement of this connection waits for a lock another
     * connection holds, in ms (SQLite: the busy handler, default 5 s;
     * PostgreSQL: lock_timeout, default 5 s), before it fails with
     * HOOKD_EBUSY. Outside a transaction. */
    int (*lock_wait)(struct store *s, int64_t ms);
    /* From now on the outbox rows this connection inserts send no change
     * notification (PostgreSQL: no NOTIFY hookd_outbox, whose lock makes
     * every notifying commit on the server wait for the one before it,
     * fsync included); the caller wakes its own relay after the commit and
     * other nodes find the rows at their safety poll. Kept across a
     * reconnect. Optional (NULL: nothing to quiet, as on SQLite). Outside a
     * transaction. */
    int (*quiet_outbox)(struct store *s);
    /* This connection's commits no longer copy the log into the database
     * themselves (SQLite: the WAL checkpoint, on a thread and a connection
     * of the store's own, until store_close); durability is unchanged.
     * Optional (NULL: nothing to move, as on PostgreSQL). */
    int (*checkpoint_aside)(struct store *s);
    /* After checkpoint_aside, the part its commits still leave to this
     * connection (SQLite: the short last step that lets the WAL start over,
     * once it has grown long), run when the caller chooses: the writer, after
     * it has answered the batch whose commit asked for it; its failures are
     * logged (the next commit asks again). Outside a transaction. Optional
     * (NULL: nothing, as on PostgreSQL). */
    void (*checkpoint_due)(struct store *s);
    /* Whether a process other than this one has the store open now
     * (SQLite: holds a lock on the file's shared memory, as every open
     * connection in WAL mode does, asked with F_GETLK); a writer leaves
     * room for such a process's transactions (writer_options
     * application_share). Optional (NULL: false, as on PostgreSQL, where
     * sessions wait for each other's locks in a queue). */
    bool (*others_open)(struct store *s);

    /* The table families. */
    const struct store_meta_ops *meta;
    const struct store_event_ops *events;
    const struct store_endpoint_ops *endpoints;
    const struct store_delivery_ops *deliveries;
    const struct store_endpoint_state_ops *endpoint_state;
    const struct store_source_ops *sources;
    const struct store_inbox_ops *inbox;
    const struct store_rejection_ops *rejections;
    const struct store_machine_ops *machines;
    const struct store_replay_ops *replays;
    const struct store_token_ops *tokens;
    const struct store_alert_ops *alerts;
    const struct store_upkeep_ops *upkeep;
    const struct store_health_ops *health;
    const struct store_stats_ops *stats;
};

extern const struct store_ops store_sqlite_ops;
extern const struct store_ops store_postgres_ops;
/*
 * For a process that owns its store libraries (the hookd binary, never an application linking
 * libhookd, whose SQLite settings are its own): process-wide settings, before the first open.
 * SQLite: no memory statistics (hookd reads none), so an allocation takes no global mutex.
 */
void store_sqlite_process_owned(void);
void store_process_owned(void);

/* ---- wrappers (the only way callers reach a backend) ------------------- */

/* Finds the backend for dsn ("sqlite:PATH", a bare path, "postgres://…"); NULL if none. */
const struct store_ops *store_find(const char *dsn);
/* Opens a connection with the backend that handles dsn. */
__attribute__((warn_unused_result)) int store_open(const char *dsn, struct store **out);
void store_close(struct store *s);
const struct store_ops *store_backend(struct store *s);

/*
 * Fault injection for tests: the n-th call (1-based) from now of the wrapper
 * named `method` (e.g. "delivery_complete"; NULL: any but changed and
 * changed_fd) returns err instead of
 * reaching the backend. n = 0 clears it. A method ending in '*' names every
 * wrapper it is a prefix of ("delivery_complete*": the one and the many). err
 * STORE_FAULT_KILL kills the process at that call instead (SIGKILL): a crash
 * at an exact point, for tests that start hookd with HOOKD_TEST_STORE_FAULT
 * (read only by a build with HOOKD_TEST_HOOKS: the tests' ASan build).
 */
#define STORE_FAULT_KILL (-100000)
void store_fault_inject(const char *method, int n, int err);
/*
 * Arms a fault from a test's environment: "METHOD:N" (that call fails with
 * HOOKD_EIO) or "METHOD:N:kill". Returns 0 (also when spec is NULL or empty)
 * or HOOKD_EINVAL for anything else.
 */
__attribute__((warn_unused_result)) int store_fault_from_env(const char *spec);
/* Torture tests (each store call failed in turn): whether the armed fault has
 * not fired yet; how many calls the wrappers have counted (the polling ones,
 * changed and changed_fd, are neither counted nor hit by a NULL method); and a
 * thread whose calls are neither counted nor failed (the test's own checks). */
bool store_fault_pending(void);
uint64_t store_fault_calls(void);
void store_fault_exempt_thread(bool exempt);

#define STORE_WRAPPER __attribute__((warn_unused_result)) int
STORE_WRAPPER store_migrate(struct store *s);
STORE_WRAPPER store_begin(struct store *s);
STORE_WRAPPER store_commit(struct store *s);
STORE_WRAPPER store_commit_lazy(struct store *s);
STORE_WRAPPER store_rollback(struct store *s);
STORE_WRAPPER store_savepoint(struct store *s);
STORE_WRAPPER store_release(struct store *s);
STORE_WRAPPER store_rollback_to(struct store *s);
STORE_WRAPPER store_changed(struct store *s, bool *changed);
int store_changed_fd(struct store *s); /* the descriptor, or -1 (also for a fault injected) */
/* A setting, not a store call: neither counted nor failed by fault injection. */
STORE_WRAPPER store_lock_wait(struct store *s, int64_t ms);
STORE_WRAPPER store_quiet_outbox(struct store *s); /* a setting too */
STORE_WRAPPER store_checkpoint_aside(struct store *s); /* a setting too: 0 when the backend has nothing to move */
void store_checkpoint_due(struct store *s); /* not counted nor failed by fault injection either */
bool store_others_open(struct store *s);     /* nor this */
STORE_WRAPPER store_meta_get(struct store *s, const char *key, char **value_out);
STORE_WRAPPER store_meta_set(struct store *s, const char *key, const char *value);
STORE_WRAPPER store_event_insert(struct store *s, struct event *ev, struct event *existing);
STORE_WRAPPER store_event_get(struct store *s, const char *id, struct event *out);
STORE_WRAPPER store_event_list(struct store *s, const struct event_filter *f, struct event_list *out);
STORE_WRAPPER store_outbox_fetch(struct store *s, int64_t after_seq, int limit, struct event_list *out);
STORE_WRAPPER store_outbox_take(struct store *s, int limit, int64_t at, struct event_list *out,
                                int64_t *endpoints_version);
STORE_WRAPPER store_outbox_mark_dispatched(struct store *s, const int64_t *seqs, size_t n, int64_t at);
STORE_WRAPPER store_outbox_pending(struct store *s, bool *any);
STORE_WRAPPER store_outbox_reject(struct store *s, int64_t seq, const char *error, int64_t at);
STORE_WRAPPER store_endpoint_insert(struct store *s, const struct endpoint *ep);
STORE_WRAPPER store_endpoint_update(struct store *s, const struct endpoint *ep);
STORE_WRAPPER store_endpoint_get(struct store *s, const char *id, struct endpoint *out);
STORE_WRAPPER store_endpoint_list(struct store *s, const struct endpoint_filter *f, struct endpoint_list *out);
STORE_WRAPPER store_endpoint_list_all(struct store *s, struct endpoint_list *out);
STORE_WRAPPER store_endpoint_delete(struct store *s, const char *id);
STORE_WRAPPER store_endpoint_set_enabled(struct store *s, const char *id, bool enabled, const char *reason, int64_t at);
STORE_WRAPPER store_endpoint_version(struct store *s, int64_t *version);
STORE_WRAPPER store_delivery_insert(struct store *s, const struct delivery *d);
STORE_WRAPPER store_delivery_insert_many(struct store *s, const struct delivery *ds, size_t n);
STORE_WRAPPER store_delivery_claim_due(struct store *s, const char *node, int64_t now, int64_t lease_until, int limit,
                                       const struct lease_limits *lim, struct job_list *out);
STORE_WRAPPER store_delivery_slots(struct store *s, int64_t now, const struct lease_limits *lim,
                                   const char *const *endpoint_ids, size_t n, int *slots);
STORE_WRAPPER store_delivery_next_due(struct store *s, int64_t *at);
STORE_WRAPPER store_delivery_supersede(struct store *s, const char *const *endpoint_ids, const char *const *order_keys,
                                       size_t n, int64_t now);
STORE_WRAPPER store_delivery_complete(struct store *s, const struct delivery_result *r, int64_t now);
STORE_WRAPPER store_delivery_complete_many(struct store *s, const struct delivery_result *rs, size_t n, int64_t now,
                                           int *results);
STORE_WRAPPER store_delivery_release(struct store *s, const char *id, const char *owner, int64_t token);
STORE_WRAPPER store_delivery_release_node(struct store *s, const char *node);
STORE_WRAPPER store_delivery_renew(struct store *s, const char *node, const char *const *ids, const int64_t *tokens,
                                   size_t n, int64_t lease_until, bool *renewed);
STORE_WRAPPER store_delivery_get(struct store *s, const char *id, struct delivery *out);
STORE_WRAPPER store_delivery_replay(struct store *s, const char *id, int64_t now, struct delivery *out);
STORE_WRAPPER store_delivery_list(struct store *s, const struct delivery_filter *f, struct delivery_list *out);
STORE_WRAPPER store_attempt_list(struct store *s, const char *delivery_id, struct attempt_list *out);
STORE_WRAPPER store_endpoint_state_record(struct store *s, struct endpoint_outcome *o, size_t n,
                                          const struct breaker_policy *p, int64_t now);
STORE_WRAPPER store_endpoint_state_get(struct store *s, const char *endpoint_id, struct endpoint_state *out);
STORE_WRAPPER store_endpoint_state_get_many(struct store *s, const char *const *endpoint_ids, size_t n,
                                            struct endpoint_state *out);
STORE_WRAPPER store_endpoint_state_reset(struct store *s, const char *endpoint_id);
STORE_WRAPPER store_endpoint_state_expire_paused(struct store *s, int64_t now, int64_t window_ms, int64_t *n);
STORE_WRAPPER store_source_insert(struct store *s, const struct source *src);
STORE_WRAPPER store_source_update(struct store *s, const struct source *src);
STORE_WRAPPER store_source_get(struct store *s, const char *name, struct source *out);
STORE_WRAPPER store_source_list(struct store *s, const struct source_filter *f, struct source_list *out);
STORE_WRAPPER store_source_list_all(struct store *s, struct source_list *out);
STORE_WRAPPER store_source_delete(struct store *s, const char *name);
STORE_WRAPPER store_source_version(struct store *s, int64_t *version);
/* The notification channels (PostgreSQL NOTIFY, from the schema's triggers). */
#define STORE_CHANNEL_OUTBOX "hookd_outbox"
#define STORE_CHANNEL_INBOX "hookd_inbox" /* inbox items inserted, or put back to pending */
STORE_WRAPPER store_watch(struct store *s, const char *channel);
STORE_WRAPPER store_maintain(struct store *s);
STORE_WRAPPER store_inbox_insert(struct store *s, struct inbox_item *it, struct inbox_outcome *out);
STORE_WRAPPER store_inbox_insert_many(struct store *s, struct inbox_item *const *items, size_t n,
                                      struct inbox_outcome *outs);
STORE_WRAPPER store_inbox_get(struct store *s, const char *id, struct inbox_item *out);
STORE_WRAPPER store_inbox_list(struct store *s, const struct inbox_filter *f, struct inbox_list *out);
STORE_WRAPPER store_inbox_claim_due(struct store *s, const char *node, int64_t now, int64_t lease_until, int limit,
                                    struct inbox_list *out);
STORE_WRAPPER store_inbox_complete(struct store *s, const struct inbox_result *r, int64_t now);
STORE_WRAPPER store_inbox_replay(struct store *s, const char *id, int64_t now, struct inbox_item *out);
STORE_WRAPPER store_inbox_replay_range(struct store *s, const struct inbox_filter *f, bool dry_run, int64_t now,
                                       int64_t *count);
STORE_WRAPPER store_inbox_release_node(struct store *s, const char *node);
STORE_WRAPPER store_rejection_insert(struct store *s, struct rejection *r, int keep);
STORE_WRAPPER store_rejection_list(struct store *s, const struct rejection_filter *f, struct rejection_list *out);
STORE_WRAPPER store_rejection_counts(struct store *s, const char *source, struct rejection_count_list *out);
STORE_WRAPPER store_machine_insert(struct store *s, const struct machine_record *m);
STORE_WRAPPER store_machine_update(struct store *s, const struct machine_record *m);
STORE_WRAPPER store_machine_get(struct store *s, const char *name, struct machine_record *out);
STORE_WRAPPER store_machine_list(struct store *s, const struct machine_filter *f, struct machine_list *out);
STORE_WRAPPER store_machine_delete(struct store *s, const char *name);
STORE_WRAPPER store_entity_lock(struct store *s, const char *kind, const char *id);
STORE_WRAPPER store_entity_get(struct store *s, const char *kind, const char *id, struct entity_record *out);
STORE_WRAPPER store_entity_hold(struct store *s, const char *machine, const char *kind, const char *id,
                                struct entity_hold *out);
STORE_WRAPPER store_entity_hold_window(struct store *s, const char *machine, const char *kind, const char *id,
                                       const struct hold_window *w, struct entity_hold *out); /* w NULL: all */
STORE_WRAPPER store_entity_put(struct store *s, const struct entity_record *e);
STORE_WRAPPER store_transition_insert(struct store *s, struct transition_record *t);
STORE_WRAPPER store_transition_list(struct store *s, const char *kind, const char *id, struct transition_list *out);
STORE_WRAPPER store_inbox_settle(struct store *s, const struct inbox_settle *r, int64_t now);
STORE_WRAPPER store_inbox_taken(struct store *s, const char *source, const char *event_id, bool *taken);
STORE_WRAPPER store_decision_gather(struct store *s, int (*fn)(struct store *s, void *arg), void *arg);
STORE_WRAPPER store_inbox_insert_decided(struct store *s, struct inbox_item *it, const struct inbox_settle *r,
                                         int attempts, int64_t now);
STORE_WRAPPER store_decision_write(struct store *s, struct decision_writes *w, int64_t now);
STORE_WRAPPER store_audit(struct store *s, const char *source, int64_t since, int64_t until, struct audit_report *out);
STORE_WRAPPER store_delivery_count(struct store *s, const struct delivery_filter *f, int64_t *n);
STORE_WRAPPER store_delivery_replay_many(struct store *s, const char *const *ids, size_t n, unsigned statuses,
                                         int64_t now, bool *replayed);
STORE_WRAPPER store_replay_insert(struct store *s, const struct replay *r);
STORE_WRAPPER store_replay_record(struct store *s, const char *id, const char *const *delivery_ids, size_t n,
                                  int skipped, bool done, int64_t at);
STORE_WRAPPER store_replay_get(struct store *s, const char *id, struct replay *out);
STORE_WRAPPER store_replay_list(struct store *s, const struct replay_filter *f, struct replay_list *out);
STORE_WRAPPER store_token_insert(struct store *s, const struct api_token *t);
STORE_WRAPPER store_token_get(struct store *s, const char *id, struct api_token *out);
STORE_WRAPPER store_token_list(struct store *s, const struct token_filter *f, struct token_list *out);
STORE_WRAPPER store_token_list_active(struct store *s, int64_t now, struct token_list *out);
STORE_WRAPPER store_token_revoke(struct store *s, const char *id, int64_t at);
STORE_WRAPPER store_token_version(struct store *s, int64_t *version);
STORE_WRAPPER store_alert_open(struct store *s, struct alert *a, int64_t quiet_since);
STORE_WRAPPER store_alert_resolve(struct store *s, const char *id, int64_t at, struct alert *out);
STORE_WRAPPER store_alert_get(struct store *s, const char *id, struct alert *out);
STORE_WRAPPER store_alert_list(struct store *s, const struct alert_filter *f, struct alert_list *out);
STORE_WRAPPER store_alert_signals(struct store *s, int64_t since, struct alert_signal_list *out);
STORE_WRAPPER store_figures(struct store *s, int64_t now, struct store_figures *out);
STORE_WRAPPER store_purge_deliveries(struct store *s, int64_t before, int limit, int64_t *purged);
STORE_WRAPPER store_purge_events(struct store *s, int64_t after_seq, int64_t before, int limit, int64_t *next_seq,
                                 int64_t *purged);
STORE_WRAPPER store_purge_inbox(struct store *s, int64_t before, int limit, int64_t *purged);
STORE_WRAPPER store_health_record(struct store *s, const struct health_attempt *a, size_t n, int64_t purge_before);
STORE_WRAPPER store_health_queue(struct store *s, const char *endpoint_id, int64_t now, struct health_queue *out);
STORE_WRAPPER store_health_activity(struct store *s, const char *endpoint_id, struct health_activity *out);
STORE_WRAPPER store_health_window(struct store *s, const char *endpoint_id, int64_t since, struct health_window *out);
STORE_WRAPPER store_health_summary(struct store *s, int64_t since, struct health_window_list *windows,
                                   struct health_failure_list *failures);
STORE_WRAPPER store_health_oldest(struct store *s, struct health_oldest *out);
STORE_WRAPPER store_stats_minutes(struct store *s, int64_t since, const char *endpoint_id, struct stats_minute *out,
                                  size_t n);
STORE_WRAPPER store_stats_rejected(struct store *s, struct rejection_count_list *out);
STORE_WRAPPER store_health_resource(struct store *s, const char *resource_type, const char *resource_id,
                                    const char *account, struct resource_sync_list *out);
#endif
