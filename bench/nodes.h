/*
 * The hookd side of a run: `hookd serve` processes (one, or several on one PostgreSQL database)
 * started as children with the environment alone, health-checked, given endpoints through the
 * admin API, stopped; and the CPU and memory figures read from /proc.
 *
 *   nodes_start / nodes_stop / nodes_alive     every node of the run
 *   create_endpoints                           POST /v1/endpoints, k times, through one node
 *   create_endpoint_id, endpoint_delete        one endpoint and its id; delete it (its open deliveries die)
 *   nodes_sample_rss / nodes_peak_mib          peak RSS (sampled VmRSS, VmHWM)
 *   nodes_cpu_s, tree_cpu_s, self_cpu_s        CPU seconds of hookd, a process tree, loadgen
 */
#ifndef LOADGEN_NODES_H
#define LOADGEN_NODES_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hookd.h"
#include "options.h"
#include "pg_env.h"

#define STORE_URL_MAX (PG_DSN_MAX + 64) /* a HOOKD_SERVER_STORE value */

/* One `hookd serve` node. */
struct hookd_proc {
    pid_t pid;            /* 0 when not running */
    int public_port, admin_port;
    char log[PATH_MAX];   /* its stdout and stderr; set by the caller before the first start */
    int64_t rss_peak_kib; /* highest VmRSS sampled since the start */
};

/* The nodes of one run, on one store and with one admin token. */
struct nodes {
    long n; /* --nodes */
    struct hookd_proc proc[MAX_NODES];
};

/* Starts every node, one after the other (the first migrates the database), each on its own free
 * ports, configured by the environment alone (inherited HOOKD_* variables are dropped; o's --env
 * settings added), and waits for each one's GET /healthz = 200. store: HOOKD_SERVER_STORE. */
__attribute__((warn_unused_result)) int nodes_start(struct nodes *ns, const struct opts *o, const char *store,
                                                    const char *token);
/* SIGTERM, SIGKILL after 10 s; -1 when one had to be killed or exited with an error (its log tail
 * is printed). */
int nodes_stop(struct nodes *ns);
/* 0 while every node runs; else says how one ended (and its log tail) and returns -1. */
__attribute__((warn_unused_result)) int nodes_alive(struct nodes *ns);

/* k endpoints with the URL of the receiver on sink_port, created through node h, subscribed to
 * event_type alone (NULL: every type); 0 or -1 after printing the answer. */
__attribute__((warn_unused_result)) int create_endpoints(const struct hookd_proc *h, const char *token, int sink_port,
                                                         long k, long max_in_flight, const char *event_type);
/* One such endpoint (subscribed to event_type), its id into id. */
__attribute__((warn_unused_result)) int create_endpoint_id(const struct hookd_proc *h, const char *token, int sink_port,
                                                           long max_in_flight, const char *event_type,
                                                           char id[HOOKD_ID_MAX]);
/* DELETE /v1/endpoints/{id}. */
__attribute__((warn_unused_result)) int endpoint_delete(const struct hookd_proc *h, const char *token, const char *id);

void nodes_sample_rss(struct nodes *ns);
/* The HTTP status of one request to hookd (0 when it failed); the body, capped, in resp when given. */
long http_status(const char *method, const char *url, const char *token, const char *body, char *resp,
                 size_t resp_cap);
/* The highest peak of any node: max(VmHWM now, highest sample) with hwm, else the highest sample. */
double nodes_peak_mib(const struct nodes *ns, bool hwm);
/* CPU seconds of all nodes; per node into list (", "-separated) when there are several. */
double nodes_cpu_s(const struct nodes *ns, char *list, size_t cap);

/* CPU seconds of root (the postmaster), its live children and the children it reaped, or -1. */
double tree_cpu_s(pid_t root);
/* CPU seconds this process (publisher + sink) used so far. */
double self_cpu_s(void);

#endif
