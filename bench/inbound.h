/*
 * The inbound scenarios: a sender on C keep-alive connections (epoll, one
 * request at a time per connection) posting unique events with valid
 * Standard Webhooks signatures to POST /in/{source}, as fast as it can
 * (inbound) or paced at a fixed rate (inbound-latency, latency measured from
 * each request's scheduled time, so a stall counts against it); afterwards
 * every acknowledged event is looked up through the admin API.
 *
 *   inbound_source_create  the bench source (standard-webhooks, no handler) through the admin API
 *   inbound_send           the load; figures into struct inbound_figures
 *   inbound_check_stored   count the source's items through GET /v1/inbox
 */
#ifndef LOADGEN_INBOUND_H
#define LOADGEN_INBOUND_H
#include <stddef.h>
#include <stdint.h>

#define INBOUND_SOURCE "bench"

struct inbound_load {
    int public_port;
    long events;       /* requests in all */
    long rate;         /* per second; 0: as fast as the connections go */
    long connections;
    long payload_bytes;
    long warmup_events; /* the first ones are sent, not measured */
    int64_t timeout_ns;
    /* The body of request i (NULL: the bench event with a pad); returns its length, or -1. */
    int (*body_of)(long i, char *out, size_t cap, void *arg);
    void *body_arg;
};

struct inbound_figures {
    long acked, refused, failed;
    double seconds, accepts_per_s;
    double p50_ms, p90_ms, p99_ms, max_ms;
};

__attribute__((warn_unused_result)) int inbound_source_create(int admin_port, const char *token);
__attribute__((warn_unused_result)) int inbound_send(const struct inbound_load *l, struct inbound_figures *out);
/* The number of items of the bench source, or -1. */
long inbound_check_stored(int admin_port, const char *token);
#endif
