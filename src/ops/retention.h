/*
 * Retention: a thread that purges, every [retention] interval, in small
 * batches (one short writer op each, with a pause between them, so the purge
 * never holds the writer long enough to slow deliveries down):
 *   delivered and superseded deliveries older than [retention] deliveries, with their attempts;
 *   outbox events as old whose deliveries are all gone (never one with a delivery left: open,
 *   dead and skipped ones are kept until someone resolves them);
 *   the payloads of processed inbox items older than [retention] inbox (the row stays, and with
 *   it the idempotency key: a copy the provider sends again is still a duplicate, DESIGN §6).
 *
 *   retention_start / retention_stop   the thread
 *   retention_run                      one full pass now (tests)
 */
#ifndef HOOKD_OPS_RETENTION_H
#define HOOKD_OPS_RETENTION_H
#include <stdint.h>

struct writer;

struct retention_deps {
    struct writer *writer;
    int64_t deliveries_ms; /* 0: keep forever */
    int64_t inbox_ms;      /* 0: keep forever */
    int64_t interval_ms;
    int batch;
    int64_t pause_ms;      /* at least this between two batches */
    double share;          /* and so long that the purge holds the writer at most this fraction of the time */
};

/* What one pass purged. */
struct retention_totals {
    int64_t deliveries, events, inbox;
};

struct retention;
__attribute__((warn_unused_result)) int retention_start(const struct retention_deps *deps, struct retention **out);
void retention_stop(struct retention *r);
/* One pass at `now` through the writer, batch after batch until nothing old is left. */
__attribute__((warn_unused_result)) int retention_run(struct retention *r, int64_t now, struct retention_totals *out);
#endif
