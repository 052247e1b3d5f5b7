/*
 * loadgen's command line: a declarative table of options with per-scenario defaults.
 *
 *   parse_opts                         argv into struct opts (defaults filled in), or usage
 *   scenario_names, store_names        the names the options and the RESULT lines use
 */
#ifndef LOADGEN_OPTIONS_H
#define LOADGEN_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

#define MAX_EXTRA_ENV 32
#define PAYLOAD_MAX 8192 /* --payload-bytes */
#define MAX_NODES 8      /* --nodes */

enum scenario { SC_THROUGHPUT, SC_LATENCY, SC_MEMORY, SC_ISOLATION, SC_SINK_ONLY, SC_INBOUND, SC_INBOUND_LATENCY,
                SC_MACHINE, SC_MACHINE_LATENCY, SC_RETENTION, SC_COUNT };
extern const char *const scenario_names[SC_COUNT];

enum store_kind { ST_SQLITE, ST_PG, ST_COUNT };
extern const char *const store_names[ST_COUNT];

struct opts {
    int scenario; /* -1 until a flag selects one */
    int store;    /* enum store_kind */
    const char *hookd, *dir, *pg_dsn, *pg_script;
    const char *env[MAX_EXTRA_ENV]; /* --env KEY=VALUE, pointing into argv */
    size_t n_env;
    bool keep;
    /* -1 until given, then the scenario's default */
    long events, endpoints, batch, rate, seconds, pending, max_in_flight, payload_bytes, timeout_s, sink_only_s, nodes,
        publishers, warmup, rounds, connections, entities;
};

/* Fills o from argv; returns 0, or 2 after printing the usage. --help prints it and exits 0. */
__attribute__((warn_unused_result)) int parse_opts(int argc, char **argv, struct opts *o);

#endif
