/*
 * loadgen's command line: the option table (name, kind, bounds, the scenario a flag selects, the
 * default per scenario) and the parser that applies it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"

const char *const scenario_names[SC_COUNT] = {"throughput", "latency", "memory", "isolation", "sink-only",
                                              "inbound", "inbound-latency", "machine", "machine-latency", "retention"};
const char *const store_names[ST_COUNT] = {"sqlite", "pg"};

enum opt_kind { OPT_LONG, OPT_STR, OPT_FLAG, OPT_ENV, OPT_SCENARIO, OPT_STORE };

struct opt_def {
    const char *name;
    enum opt_kind kind;
    size_t off;
    long min, max;
    int implies;            /* scenario selected by giving this flag, or -1 */
    long defaults[SC_COUNT]; /* per scenario; -1: unused there */
};

#define NUM(name, field, lo, hi, implies, ...) \
    {name, OPT_LONG, offsetof(struct opts, field), lo, hi, implies, {__VA_ARGS__}}
static const struct opt_def opt_defs[] = {
    /*                                throughput latency memory isolation sink inbound inbound-latency machine machine-latency retention */
    NUM("events", events, 1, 10000000, SC_THROUGHPUT,                 20000, -1, -1, 10000, -1, 100000, -1, 50000, -1, 20000),
    NUM("endpoints", endpoints, 1, 64, -1,                            4, 1, 1, 1, 1, 1, 1, 1, 1, 4),
    NUM("batch", batch, 1, 100000, -1,                                500, 1, 1000, 500, -1, -1, -1, -1, -1, 500),
    NUM("rate", rate, 1, 100000, SC_LATENCY,                          -1, 1000, -1, 500, -1, -1, 5000, -1, 1000, -1),
    NUM("seconds", seconds, 1, 3600, SC_LATENCY,                      -1, 10, -1, 5, -1, -1, 10, -1, 10, -1),
    NUM("publishers", publishers, 1, 64, -1,                          -1, 3, -1, 3, -1, -1, -1, -1, -1, -1),
    NUM("warmup", warmup, 0, 600, -1,                                 -1, 1, -1, 1, -1, -1, 1, -1, 1, -1),
    NUM("pending", pending, 1, 10000000, SC_MEMORY,                   -1, -1, 100000, -1, -1, -1, -1, -1, -1, 1000000),
    NUM("max-in-flight", max_in_flight, 1, 100000, -1,                64, 64, 64, 64, -1, -1, -1, -1, -1, 64),
    NUM("payload-bytes", payload_bytes, 0, PAYLOAD_MAX, -1,           100, 100, 100, 100, -1, 200, 200, 0, 0, 100),
    NUM("timeout", timeout_s, 1, 86400, -1,                           120, 60, 300, 120, -1, 120, 60, 300, 60, 600),
    NUM("sink-only", sink_only_s, 1, 86400, SC_SINK_ONLY,             -1, -1, -1, -1, -1, -1, -1, -1, -1, -1),
    NUM("nodes", nodes, 1, MAX_NODES, -1,                             1, 1, 1, 1, -1, 1, 1, 1, 1, 1),
    NUM("rounds", rounds, 1, 100, -1,                                 -1, -1, -1, 3, -1, -1, -1, -1, -1, 3),
    NUM("entities", entities, 1, 1000000, -1,                         -1, -1, -1, -1, -1, -1, -1, 1000, 1000, -1),
    NUM("connections", connections, 1, 1024, -1,                      -1, -1, -1, -1, -1, 64, 64, 64, 16, -1),
    {"store", OPT_STORE, offsetof(struct opts, store), 0, 0, -1, {0}},
    {"pg-dsn", OPT_STR, offsetof(struct opts, pg_dsn), 0, 0, -1, {0}},
    {"pg-script", OPT_STR, offsetof(struct opts, pg_script), 0, 0, -1, {0}},
    {"hookd", OPT_STR, offsetof(struct opts, hookd), 0, 0, -1, {0}},
    {"dir", OPT_STR, offsetof(struct opts, dir), 0, 0, -1, {0}},
    {"keep", OPT_FLAG, offsetof(struct opts, keep), 0, 0, -1, {0}},
    {"env", OPT_ENV, 0, 0, 0, -1, {0}},
    {"scenario", OPT_SCENARIO, 0, 0, 0, -1, {0}},
};
#define N_OPT_DEFS (sizeof opt_defs / sizeof opt_defs[0])

static const char usage_text[] =
    "usage: loadgen [--scenario throughput|latency|memory|isolation|inbound|inbound-latency|machine|machine-latency|retention]\n"
    "               [options]\n"
    "  machine:    --events N (50000) --entities E (1000): versioned events (created, paid, updated…)\n"
    "              shuffled over E entities through a contiguous machine; processed events/s from\n"
    "              the first accept to the last decision\n"
    "  machine-latency: --rate R (1000) --seconds S (10) --entities E: each entity's versions in\n"
    "              order, entities interleaved; accept→applied p50/p99 from the items' times\n"
    "  retention:  --pending ROWS (1000000) delivered deliveries (with an attempt and an event each)\n"
    "              30 days old, then --rounds (3) times: --events N (20000) x --endpoints K (4) with\n"
    "              [retention] off, and again while the purge of those rows runs (deliveries/s of each);\n"
    "              then the purge is timed to its end\n"
    "  inbound:    --events N (100000) --connections C (64) --payload-bytes (200): signed Standard\n"
    "              Webhooks requests to POST /in/bench as fast as C keep-alive connections go\n"
    "  inbound-latency: --rate R (5000) --seconds S (10) --warmup W (1) --connections C (64)\n"
    "       loadgen --sink-only SECONDS\n"
    "  throughput: --events N (20000) --endpoints K (4) --batch B (500)\n"
    "  latency:    --rate R (1000) --seconds S (10) --warmup W (1) --publishers P (3); one event\n"
    "              per transaction, K=1, the schedule's events taken in turn by P application\n"
    "              connections; the first W seconds at the same rate are delivered, not measured\n"
    "  memory:     --pending N (100000) --batch B (1000); committed while hookd is stopped\n"
    "  isolation:  one healthy endpoint, then 1, then 8 more that accept and never answer, all\n"
    "              subscribed to every event: per phase --events N (10000) in transactions of\n"
    "              --batch B (500) for deliveries/s, then --rate R (500) for --seconds S (5) after\n"
    "              --warmup W (1) from --publishers P (3) for the healthy endpoint's p99; the\n"
    "              three phases alternate --rounds times (3), medians reported\n"
    "  common:     --hookd PATH (build/hookd) --dir PARENT ($TMPDIR or /tmp) --keep\n"
    "              --max-in-flight M (64) --payload-bytes P (100) --timeout SECONDS\n"
    "              --env KEY=VALUE (repeatable; passed to hookd serve)\n"
    "  store:      --store sqlite|pg (sqlite); pg starts a throwaway cluster with --pg-script PATH\n"
    "              (scripts/pg.sh) in the scratch dir, or uses --pg-dsn DSN (implies pg); either way\n"
    "              in a fresh database. --nodes N (1): hookd processes on that database (pg only)\n";

static int parse_long(const char *s, long min, long max, long *out)
{
    char *end = NULL;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* One option and its value; returns 0 or -1 after saying what is wrong. */
static int apply_opt(struct opts *o, const struct opt_def *d, const char *val)
{
    void *field = (char *)o + d->off;

    switch (d->kind) {
    case OPT_LONG:
        if (parse_long(val, d->min, d->max, field) == 0)
            return 0;
        fprintf(stderr, "loadgen: --%s: expected an integer in [%ld, %ld]\n", d->name, d->min, d->max);
        return -1;
    case OPT_STR:
        *(const char **)field = val;
        return 0;
    case OPT_FLAG:
        *(bool *)field = true;
        return 0;
    case OPT_ENV:
        if (strchr(val, '=') == NULL || o->n_env == MAX_EXTRA_ENV) {
            fprintf(stderr, "loadgen: --env expects KEY=VALUE (at most %d)\n", MAX_EXTRA_ENV);
            return -1;
        }
        o->env[o->n_env++] = val;
        return 0;
    case OPT_SCENARIO:
        for (int s = SC_THROUGHPUT; s < SC_COUNT; s++)
            if (s != SC_SINK_ONLY && strcmp(val, scenario_names[s]) == 0) {
                o->scenario = s;
                return 0;
            }
        fprintf(stderr, "loadgen: unknown scenario '%s'\n", val);
        return -1;
    case OPT_STORE:
        for (int s = 0; s < ST_COUNT; s++)
            if (strcmp(val, store_names[s]) == 0 || (s == ST_PG && strcmp(val, "postgres") == 0)) {
                *(int *)field = s;
                return 0;
            }
        fprintf(stderr, "loadgen: --store expects sqlite or pg\n");
        return -1;
    }
    return -1;
}

int parse_opts(int argc, char **argv, struct opts *o)
{
    memset(o, 0, sizeof *o);
    o->scenario = -1;
    o->hookd = "build/hookd";
    o->pg_script = "scripts/pg.sh";
    o->dir = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : "/tmp";
    for (size_t j = 0; j < N_OPT_DEFS; j++)
        if (opt_defs[j].kind == OPT_LONG)
            *(long *)((char *)o + opt_defs[j].off) = -1;
    for (int i = 1; i < argc; i++) {
        const struct opt_def *d = NULL;
        if (strcmp(argv[i], "--help") == 0) {
            printf("%s", usage_text);
            exit(0);
        }
        for (size_t j = 0; j < N_OPT_DEFS && strncmp(argv[i], "--", 2) == 0; j++)
            if (strcmp(argv[i] + 2, opt_defs[j].name) == 0)
                d = &opt_defs[j];
        if (d == NULL || (d->kind != OPT_FLAG && i + 1 == argc)) {
            fprintf(stderr, "loadgen: bad option '%s'\n%s", argv[i], usage_text);
            return 2;
        }
        if (apply_opt(o, d, d->kind == OPT_FLAG ? NULL : argv[++i]) != 0)
            return 2;
        if (d->implies >= 0 && (o->scenario < 0 || d->implies == SC_SINK_ONLY))
            o->scenario = d->implies;
    }
    if (o->scenario < 0)
        o->scenario = SC_THROUGHPUT;
    for (size_t j = 0; j < N_OPT_DEFS; j++) {
        long *v = (long *)((char *)o + opt_defs[j].off);
        if (opt_defs[j].kind == OPT_LONG && *v < 0)
            *v = opt_defs[j].defaults[o->scenario];
    }
    if (o->scenario == SC_ISOLATION)
        o->endpoints = 1; /* the healthy one: the sink counts its arrivals alone */
    if (o->scenario == SC_LATENCY)
        o->batch = 1; /* one event per transaction, by definition */
    if (o->pg_dsn != NULL)
        o->store = ST_PG;
    if (o->store == ST_SQLITE && o->nodes > 1) {
        fprintf(stderr, "loadgen: --nodes > 1 needs --store pg (SQLite is single-node)\n");
        return 2;
    }
    return 0;
}
