/*
 * The in-process webhook sink: an HTTP/1.1 server on its own thread that answers every request
 * 200 and records, per webhook-id, the first arrival and the number of arrivals in an event table
 * the publisher fills with each event's commit time.
 *
 *   table_init / table_free            the event table (preallocated, never resized)
 *   table_slot                         an id's slot, added if absent (caller holds mu)
 *   sink_start / sink_stop             the server on a free loopback port
 *   sink_report_arrivals               arrival counts; names events that did not arrive everywhere
 *   sink_only                          the --sink-only mode: serve for a while, then report
 */
#ifndef LOADGEN_SINK_H
#define LOADGEN_SINK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hookd.h"

#define SINK_MAX_FD 8192 /* connections on higher descriptors are refused */

/* One event: when its transaction committed and when its first copy arrived (CLOCK_MONOTONIC ns). */
struct ev_slot {
    char id[HOOKD_ID_MAX];
    int64_t commit_ns; /* 0 until the publishing transaction committed */
    int64_t first_ns;
    uint32_t arrivals;
    bool warmup; /* latency: published during the warm-up, not measured */
};

/* Open addressing, preallocated and never resized, so slot pointers stay valid. Shared by the
 * publisher (main thread) and the sink thread under mu. */
struct ev_table {
    pthread_mutex_t mu;
    struct ev_slot *slots;
    size_t cap, used, limit;
    uint32_t target;      /* arrivals that make an event complete: the endpoint count */
    atomic_long complete; /* events with arrivals == target */
    atomic_long requests; /* every request the sink answered */
    atomic_long foreign;  /* requests without a usable webhook-id, or no room left */
    atomic_llong last_arrival_ns;
};

struct conn;

struct sink {
    int listen_fd, epoll_fd, stop_fd, port;
    pthread_t thread;
    bool running;
    struct ev_table *table;
    struct conn *conns[SINK_MAX_FD];
    atomic_long protocol_errors;
};

/* Room for `events` ids; table_free releases it. */
__attribute__((warn_unused_result)) int table_init(struct ev_table *t, size_t events, uint32_t target);
void table_free(struct ev_table *t);
/* The slot of id, added if absent; NULL when the table is full. Caller holds mu. */
struct ev_slot *table_slot(struct ev_table *t, const char *id, size_t len);

/* Listens on 127.0.0.1 (s->port) and records arrivals in t, which must outlive the sink. */
__attribute__((warn_unused_result)) int sink_start(struct sink *s, struct ev_table *t);
/* Stops the thread and closes every connection. */
void sink_stop(struct sink *s);

/* Prints the arrival counts; every published event must have reached every endpoint.
 * Returns the number of events that did not (up to 5 are named). */
long sink_report_arrivals(struct sink *s);

/* Serves for `seconds` after printing the port, then reports the arrivals; returns 0. */
int sink_only(struct sink *s, long seconds);

#endif
