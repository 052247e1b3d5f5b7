/*
 * Delivery benchmark, its scenarios and main: throughput, latency (paced), memory (backlog
 * pending at start) and isolation (a healthy endpoint beside hung ones), each timing events from their commit (publisher.c) through `hookd serve`
 * (nodes.c, on SQLite or pg_env.c's PostgreSQL) to their arrival at the in-process sink (sink.c).
 */
#include <curl/curl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "blackhole.h"
#include "clock.h"
#include "inbound.h"
#include "machine.h"
#include "nodes.h"
#include "options.h"
#include "pg_env.h"
#include "publisher.h"
#include "sink.h"

#define RSS_SAMPLE_MS 50
#define DIR_MAX 2000 /* --dir length, so the scratch paths fit PATH_MAX */

/* ---------------------------------------------------------------- the run */

struct bench {
    struct opts o;
    char dir[PATH_MAX];
    char db_path[PATH_MAX];        /* the SQLite file */
    char store_url[STORE_URL_MAX]; /* HOOKD_SERVER_STORE of every node */
    const char *target;            /* what the publisher opens: db_path or pg.dsn */
    char token[65];                /* the admin token, shared by the nodes */
    struct pg_env pg;
    double pg_cpu0; /* CPU seconds of our PostgreSQL cluster when the measurement started; -1: none */
    struct ev_table table;
    struct sink sink;
    struct nodes nodes;
};

/* CPU seconds our PostgreSQL cluster used since start_with_endpoints, or -1 (SQLite, or a given server). */
static double pg_cpu_since_start(const struct bench *b)
{
    double now = tree_cpu_s(pg_postmaster_pid(&b->pg));
    return now >= 0 && b->pg_cpu0 >= 0 ? now - b->pg_cpu0 : -1;
}

/* ---------------------------------------------------------------- checks and figures */

/* Waits until `events` events arrived at every endpoint, sampling the nodes' RSS every 50 ms. */
static int wait_complete(struct bench *b, long events)
{
    int64_t deadline = mono_ns() + b->o.timeout_s * NS_PER_S, next_sample = 0;

    for (;; sleep_ms(5)) {
        int64_t now = mono_ns();
        if (now >= next_sample) {
            nodes_sample_rss(&b->nodes);
            next_sample = now + RSS_SAMPLE_MS * NS_PER_MS;
        }
        if (atomic_load(&b->table.complete) >= events)
            return 0;
        if (now > deadline) {
            fprintf(stderr, "loadgen: timed out after %ld s: %ld of %ld events reached every endpoint (%ld requests)\n",
                    b->o.timeout_s, atomic_load(&b->table.complete), events, atomic_load(&b->table.requests));
            sink_report_arrivals(&b->sink);
            return -1;
        }
        if (nodes_alive(&b->nodes) != 0)
            return -1;
    }
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of n > 0 sorted samples, in ms. */
static double pct_ms(const int64_t *v, size_t n, double p)
{
    size_t rank = (size_t)(p * (double)n + 0.999999);
    return (double)v[(rank == 0 ? 1 : rank > n ? n : rank) - 1] / 1e6;
}

/* ---------------------------------------------------------------- scenarios */

/* Starts the nodes, creates the endpoints through the first one, and notes the cluster's CPU time. */
static int start_with_endpoints(struct bench *b)
{
    if (nodes_start(&b->nodes, &b->o, b->store_url, b->token) != 0 ||
        create_endpoints(&b->nodes.proc[0], b->token, b->sink.port, b->o.endpoints, b->o.max_in_flight,
                         b->o.scenario == SC_ISOLATION ? "bench.event" : NULL) != 0)
        return -1;
    b->pg_cpu0 = tree_cpu_s(pg_postmaster_pid(&b->pg));
    return 0;
}

/* Commits every event as fast as possible; deliveries/s = N*K / (last arrival - first commit). */
static int run_throughput(struct bench *b)
{
    struct publisher p = {0};
    long n = b->o.events, k = b->o.endpoints;
    double cpu0 = self_cpu_s();
    char per_node[128];
    int result = -1;

    if (start_with_endpoints(b) != 0 ||
        publisher_open(&p, b->o.store, b->target, &b->table, b->o.batch, b->o.payload_bytes) != 0 ||
        publish_all(&p, n, b->o.batch) != 0 || wait_complete(b, n) != 0)
        goto out;
    double secs = (double)(atomic_load(&b->table.last_arrival_ns) - p.first_commit_ns) / 1e9;
    printf("throughput: %ld events x %ld endpoints = %ld deliveries in %.3f s: %.0f deliveries/s (%ld node%s)\n", n, k,
           n * k, secs, (double)(n * k) / secs, b->o.nodes, b->o.nodes > 1 ? "s" : "");
    printf("  publish: all %ld events committed %.3f s after the first commit (batch %ld)\n", n,
           (double)(p.last_commit_ns - p.first_commit_ns) / 1e9, b->o.batch);
    double hookd_cpu = nodes_cpu_s(&b->nodes, per_node, sizeof per_node), own_cpu = self_cpu_s() - cpu0;
    double pg_cpu = pg_cpu_since_start(b);
    printf("  CPU: hookd %.2f s%s%s%s (%.0f deliveries per CPU-second), loadgen %.2f s; hookd peak RSS %.1f MiB\n",
           hookd_cpu, per_node[0] ? " (nodes: " : "", per_node, per_node[0] ? ")" : "", (double)(n * k) / hookd_cpu,
           own_cpu, nodes_peak_mib(&b->nodes, false));
    if (pg_cpu >= 0)
        printf("  CPU: postgres %.2f s during the run; hookd + postgres %.0f deliveries per CPU-second\n", pg_cpu,
               (double)(n * k) / (hookd_cpu + pg_cpu));
    if (sink_report_arrivals(&b->sink) != 0)
        goto out;
    printf("RESULT scenario=throughput deliveries_per_s=%.0f events=%ld endpoints=%ld seconds=%.3f hookd_cpu_s=%.2f "
           "store=%s nodes=%ld pg_cpu_s=%.2f\n",
           (double)(n * k) / secs, n, k, secs, hookd_cpu, store_names[b->o.store], b->o.nodes, pg_cpu);
    result = 0;
out:
    publisher_close(&p);
    return result;
}

/* One latency publisher: events i = first, first + step, ... of the run's absolute schedule. */
struct paced {
    struct publisher p;
    pthread_t thread;
    int64_t start, period;
    long first, step, n, n_warm, late;
    int failed;
};

static void *paced_main(void *arg)
{
    struct paced *t = arg;

    for (long i = t->first; i < t->n; i += t->step) {
        int64_t due = t->start + i * t->period;
        struct timespec ts = {due / NS_PER_S, due % NS_PER_S};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
        t->late += mono_ns() - due > NS_PER_MS;
        if (publish_batch(&t->p, 1) != 0) {
            t->failed = 1;
            break;
        }
        if (i < t->n_warm) {
            pthread_mutex_lock(&t->p.table->mu);
            t->p.batch[0]->warmup = true;
            pthread_mutex_unlock(&t->p.table->mu);
        }
    }
    return NULL;
}

/*
 * One event per transaction on an absolute schedule; commit->arrival latency of each. The events
 * are taken in turn by --publishers application connections, as an application's many requests
 * would commit them: one connection alone cannot hold the rate once a commit takes longer than the
 * period (a durable commit on a busy machine can). The first --warmup seconds run at the same rate
 * and are delivered like the rest, but not measured: they include what any first use costs
 * (connections, prepared statements, the tables' first pages).
 */
static int run_latency(struct bench *b)
{
    struct paced *pubs = NULL;
    int64_t period = NS_PER_S / b->o.rate, start, *lat = NULL, first_ns = 0, last_ns = 0;
    long n_warm = b->o.rate * b->o.warmup, n = n_warm + b->o.rate * b->o.seconds, late = 0, np = b->o.publishers;
    long started = 0;
    size_t m = 0;
    int result = -1, failed = 0;

    if (start_with_endpoints(b) != 0 || (pubs = calloc((size_t)np, sizeof *pubs)) == NULL)
        goto out;
    for (long t = 0; t < np; t++) {
        if (publisher_open(&pubs[t].p, b->o.store, b->target, &b->table, 1, b->o.payload_bytes) != 0)
            goto out;
        pubs[t].p.next_seq = t * n;
    }
    start = mono_ns() + 10 * NS_PER_MS;
    for (long t = 0; t < np; t++) {
        pubs[t].start = start;
        pubs[t].period = period;
        pubs[t].first = t;
        pubs[t].step = np;
        pubs[t].n = n;
        pubs[t].n_warm = n_warm;
        if (pthread_create(&pubs[t].thread, NULL, paced_main, &pubs[t]) != 0) {
            fprintf(stderr, "loadgen: cannot start a publisher thread\n");
            failed = 1;
            break;
        }
        started++;
    }
    for (long t = 0; t < started; t++) {
        pthread_join(pubs[t].thread, NULL);
        failed |= pubs[t].failed;
        late += pubs[t].late;
        if (pubs[t].p.first_commit_ns != 0 && (first_ns == 0 || pubs[t].p.first_commit_ns < first_ns))
            first_ns = pubs[t].p.first_commit_ns;
        if (pubs[t].p.last_commit_ns > last_ns)
            last_ns = pubs[t].p.last_commit_ns;
    }
    if (failed)
        goto out;
    double span = (double)(last_ns - first_ns) / 1e9;
    double achieved = n > 1 && span > 0 ? (double)(n - 1) / span : (double)b->o.rate;
    if (wait_complete(b, n) != 0 || (lat = calloc((size_t)n, sizeof *lat)) == NULL)
        goto out;
    pthread_mutex_lock(&b->table.mu);
    for (size_t i = 0; i < b->table.cap && m < (size_t)n; i++) {
        const struct ev_slot *s = &b->table.slots[i];
        if (s->commit_ns > 0 && s->arrivals > 0 && !s->warmup) /* arrival may beat our clock read after COMMIT: 0 */
            lat[m++] = s->first_ns > s->commit_ns ? s->first_ns - s->commit_ns : 0;
    }
    pthread_mutex_unlock(&b->table.mu);
    qsort(lat, m, sizeof *lat, cmp_i64);
    printf("latency: %zu events measured after %ld of warm-up, one per transaction, at %ld/s from %ld connections "
           "(achieved %.1f/s; %ld commits started >1 ms late)\n",
           m, n_warm, b->o.rate, np, achieved, late);
    if (achieved < 0.95 * (double)b->o.rate)
        printf("  WARNING: the publisher fell behind its schedule (its transactions took longer than the period; on "
               "SQLite BEGIN IMMEDIATE waits for hookd's write lock); the figures below are at %.0f/s, not %ld/s\n",
               achieved, b->o.rate);
    printf("  commit->arrival: p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, max %.3f ms\n", pct_ms(lat, m, 0.50),
           pct_ms(lat, m, 0.90), pct_ms(lat, m, 0.99), pct_ms(lat, m, 1.0));
    if (sink_report_arrivals(&b->sink) != 0)
        goto out;
    printf("RESULT scenario=latency p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f max_ms=%.3f rate=%ld achieved_rate=%.1f "
           "events=%zu warmup=%ld store=%s nodes=%ld publishers=%ld\n",
           pct_ms(lat, m, 0.50), pct_ms(lat, m, 0.90), pct_ms(lat, m, 0.99), pct_ms(lat, m, 1.0), b->o.rate, achieved, m,
           n_warm, store_names[b->o.store], b->o.nodes, np);
    result = 0;
out:
    free(lat);
    for (long t = 0; pubs != NULL && t < np; t++)
        publisher_close(&pubs[t].p);
    free(pubs);
    return result;
}

/* The backlog is committed while hookd is down: a first run creates the schema and the
 * endpoints, the second starts with every event pending. Peak RSS = max(VmHWM, samples). */
static int run_memory(struct bench *b)
{
    struct publisher p = {0};
    long n = b->o.pending, k = b->o.endpoints;
    char per_node[128];
    int64_t started;
    int result = -1;

    if (start_with_endpoints(b) != 0)
        goto out;
    nodes_stop(&b->nodes); /* says so itself when a stop was unclean; the store stays usable */
    if (publisher_open(&p, b->o.store, b->target, &b->table, b->o.batch, b->o.payload_bytes) != 0 ||
        publish_all(&p, n, b->o.batch) != 0)
        goto out;
    printf("memory: %ld events committed while hookd was stopped (%.3f s)\n", n,
           (double)(p.last_commit_ns - p.first_commit_ns) / 1e9);
    started = mono_ns();
    b->pg_cpu0 = tree_cpu_s(pg_postmaster_pid(&b->pg)); /* the drain's share only */
    if (nodes_start(&b->nodes, &b->o, b->store_url, b->token) != 0 || wait_complete(b, n) != 0)
        goto out;
    double secs = (double)(atomic_load(&b->table.last_arrival_ns) - started) / 1e9;
    double peak = nodes_peak_mib(&b->nodes, true), sampled = nodes_peak_mib(&b->nodes, false);
    double hookd_cpu = nodes_cpu_s(&b->nodes, per_node, sizeof per_node), pg_cpu = pg_cpu_since_start(b);
    printf("  drained %ld deliveries in %.3f s from start (%.0f deliveries/s, hookd CPU %.2f s, %.0f us per delivery)\n",
           n * k, secs, (double)(n * k) / secs, hookd_cpu, hookd_cpu * 1e6 / (double)(n * k));
    if (pg_cpu >= 0)
        printf("  CPU: postgres %.2f s during the drain (%.0f us per delivery)\n", pg_cpu, pg_cpu * 1e6 / (double)(n * k));
    printf("  hookd RSS: peak %.1f MiB (highest 50 ms sample %.1f MiB%s)\n", peak, sampled,
           b->o.nodes > 1 ? "; the highest node" : "");
    if (sink_report_arrivals(&b->sink) != 0)
        goto out;
    printf("RESULT scenario=memory peak_rss_mib=%.1f pending=%ld endpoints=%ld drain_seconds=%.3f store=%s nodes=%ld "
           "deliveries_per_s=%.0f hookd_cpu_s=%.2f pg_cpu_s=%.2f\n",
           peak, n, k, secs, store_names[b->o.store], b->o.nodes, (double)(n * k) / secs, hookd_cpu, pg_cpu);
    result = 0;
out:
    publisher_close(&p);
    return result;
}

/* ---------------------------------------------------------------- isolation */

/*
 * Paced one-event transactions at --rate for --warmup + --seconds; the p50/p99 of the measured ones.
 * LOADGEN_LATENCY_OUT=FILE appends each measured event as "LABEL COMMIT_S LATENCY_MS" (CLOCK_MONOTONIC
 * seconds), to match a tail against what hookd did at that moment.
 */
static int isolation_paced(struct bench *b, const char *label, long seq_base, double *p50, double *p99,
                           double *achieved)
{
    struct paced *pubs = NULL;
    int64_t period = NS_PER_S / b->o.rate, start, *lat = NULL, first_ns = 0, last_ns = 0;
    long n_warm = b->o.rate * b->o.warmup, n = n_warm + b->o.rate * b->o.seconds, np = b->o.publishers;
    long started = 0, before = atomic_load(&b->table.complete);
    size_t m = 0;
    int result = -1, failed = 0;

    if ((pubs = calloc((size_t)np, sizeof *pubs)) == NULL || (lat = calloc((size_t)n, sizeof *lat)) == NULL)
        goto out;
    for (long t = 0; t < np; t++) {
        if (publisher_open(&pubs[t].p, b->o.store, b->target, &b->table, 1, b->o.payload_bytes) != 0)
            goto out;
        pubs[t].p.next_seq = seq_base + t * n;
    }
    start = mono_ns() + 10 * NS_PER_MS;
    for (long t = 0; t < np; t++) {
        pubs[t] = (struct paced){.p = pubs[t].p, .start = start, .period = period, .first = t, .step = np, .n = n,
                                 .n_warm = n_warm};
        if (pthread_create(&pubs[t].thread, NULL, paced_main, &pubs[t]) != 0) {
            failed = 1;
            break;
        }
        started++;
    }
    for (long t = 0; t < started; t++) {
        pthread_join(pubs[t].thread, NULL);
        failed |= pubs[t].failed;
        if (pubs[t].p.first_commit_ns != 0 && (first_ns == 0 || pubs[t].p.first_commit_ns < first_ns))
            first_ns = pubs[t].p.first_commit_ns;
        if (pubs[t].p.last_commit_ns > last_ns)
            last_ns = pubs[t].p.last_commit_ns;
    }
    if (failed || wait_complete(b, before + n) != 0)
        goto out;
    *achieved = last_ns > first_ns ? (double)(n - 1) / ((double)(last_ns - first_ns) / 1e9) : (double)b->o.rate;
    const char *dump_path = getenv("LOADGEN_LATENCY_OUT");
    FILE *dump = dump_path != NULL && dump_path[0] != '\0' ? fopen(dump_path, "a") : NULL;
    pthread_mutex_lock(&b->table.mu);
    for (size_t i = 0; i < b->table.cap && m < (size_t)n; i++) {
        const struct ev_slot *s = &b->table.slots[i];
        if (s->commit_ns >= first_ns && s->arrivals > 0 && !s->warmup) {
            lat[m] = s->first_ns > s->commit_ns ? s->first_ns - s->commit_ns : 0;
            if (dump != NULL)
                fprintf(dump, "%s %.6f %.3f\n", label, (double)s->commit_ns / 1e9, (double)lat[m] / 1e6);
            m++;
        }
    }
    pthread_mutex_unlock(&b->table.mu);
    if (dump != NULL)
        fclose(dump);
    qsort(lat, m, sizeof *lat, cmp_i64);
    *p50 = pct_ms(lat, m, 0.50);
    *p99 = pct_ms(lat, m, 0.99);
    result = 0;
out:
    free(lat);
    for (long t = 0; pubs != NULL && t < np; t++)
        publisher_close(&pubs[t].p);
    free(pubs);
    return result;
}

/* The hung endpoints' own traffic: n events of theirs (no one counts them), fanned out before the measurement. */
static int isolation_backlog(struct bench *b, long n)
{
    struct publisher p = {.type = "bench.hung", .untracked = true};
    int rc = publisher_open(&p, b->o.store, b->target, &b->table, b->o.batch, b->o.payload_bytes);

    if (rc == 0)
        rc = publish_all(&p, n, b->o.batch);
    for (int t = 0; rc == 0 && publisher_undispatched(&p) != 0 && t < 1200; t++)
        sleep_ms(50);
    publisher_close(&p);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/*
 * LOADGEN_PHASE_CMD, when set, runs (through sh, and is waited for) at each measured part's edges
 * with the round, the phase's hung endpoints and the edge ("backlog", "burst", "paced", "end")
 * as arguments: a way to reset and read per-phase counters (pg_stat_statements, perf) exactly at
 * the edges. Its time falls between the parts, outside what they measure.
 */
static void isolation_phase_edge(long round, long hung, const char *edge)
{
    const char *cmd = getenv("LOADGEN_PHASE_CMD"), *dump_path = getenv("LOADGEN_LATENCY_OUT");
    char line[1024];
    FILE *dump = dump_path != NULL && dump_path[0] != '\0' ? fopen(dump_path, "a") : NULL;

    if (dump != NULL) {
        fprintf(dump, "edge r%ld_h%ld_%s %.6f\n", round, hung, edge, (double)mono_ns() / 1e9);
        fclose(dump);
    }
    if (cmd == NULL || cmd[0] == '\0')
        return;
    snprintf(line, sizeof line, "%s %ld %ld %s", cmd, round, hung, edge);
    fflush(NULL);
    if (system(line) != 0)
        fprintf(stderr, "loadgen: LOADGEN_PHASE_CMD failed at round %ld, %ld hung, %s\n", round, hung, edge);
}

#define ISOLATION_HUNG_MAX 8
#define ISOLATION_ROUNDS_MAX 100

/*
 * One healthy endpoint (the sink, subscribed to bench.event) and 0, 1 or 8 endpoints that accept
 * and never answer (the black hole, subscribed to bench.hung), in one hookd. Three phases,
 * alternating --rounds times so that the machine's drift and the store's growth fall on each
 * alike. Every phase starts alike: the previous phase's hung endpoints are deleted (their open
 * deliveries die with them, their breakers go) and their last requests gone (hookd's timeout,
 * 10 s), then the phase's own are created, fresh: closed breakers and no backlog. A phase with
 * hung endpoints first publishes --events events of theirs: a backlog of more than the window,
 * whose requests wait for hookd's timeout throughout, until their breakers open. Then the
 * healthy endpoint's deliveries/s (--events in --batch transactions, first commit to last
 * arrival) and its commit->arrival p99 at a paced --rate. The hung endpoints' own fan-out is not
 * measured (it is load of theirs, sent or not): what is measured is whether their slowness,
 * failures and backlog take capacity from the healthy one.
 */
static int run_isolation(struct bench *b)
{
    static const long hung_of_phase[] = {0, 1, 8};
    static double dps[3][ISOLATION_ROUNDS_MAX], p99s[3][ISOLATION_ROUNDS_MAX];
    char ids[ISOLATION_HUNG_MAX][HOOKD_ID_MAX];
    struct blackhole hole;
    long made = 0, seq = 0, rounds = b->o.rounds < ISOLATION_ROUNDS_MAX ? b->o.rounds : ISOLATION_ROUNDS_MAX;
    int result = -1;

    if (blackhole_start(&hole) != 0 || start_with_endpoints(b) != 0)
        goto out;
    for (long r = 0; r < rounds; r++) {
        for (size_t ph = 0; ph < 3; ph++) {
            struct publisher p = {0};
            long n = b->o.events, before = atomic_load(&b->table.complete), hung = hung_of_phase[ph];
            double p50 = 0, achieved = 0;
            for (; made > 0; made--)
                if (endpoint_delete(&b->nodes.proc[0], b->token, ids[made - 1]) != 0)
                    goto out;
            for (int t = 0; atomic_load(&hole.held) > 0 && t < 300; t++)
                sleep_ms(50);
            for (; made < hung; made++)
                if (create_endpoint_id(&b->nodes.proc[0], b->token, hole.port, b->o.max_in_flight, "bench.hung",
                                       ids[made]) != 0)
                    goto out;
            isolation_phase_edge(r + 1, hung, "backlog");
            if (hung > 0 && isolation_backlog(b, n) != 0)
                goto out;
            isolation_phase_edge(r + 1, hung, "burst");
            if (publisher_open(&p, b->o.store, b->target, &b->table, b->o.batch, b->o.payload_bytes) != 0) {
                publisher_close(&p);
                goto out;
            }
            p.next_seq = seq;
            seq += n;
            int rc = publish_all(&p, n, b->o.batch) == 0 && wait_complete(b, before + n) == 0 ? 0 : -1;
            int64_t first = p.first_commit_ns;
            publisher_close(&p);
            if (rc != 0)
                goto out;
            dps[ph][r] = (double)n / ((double)(atomic_load(&b->table.last_arrival_ns) - first) / 1e9);
            long held = atomic_load(&hole.held);
            isolation_phase_edge(r + 1, hung, "paced");
            char label[64];
            snprintf(label, sizeof label, "r%ld_h%ld", r + 1, hung);
            if (isolation_paced(b, label, seq, &p50, &p99s[ph][r], &achieved) != 0)
                goto out;
            isolation_phase_edge(r + 1, hung, "end");
            seq += b->o.rate * (b->o.seconds + b->o.warmup) * b->o.publishers;
            printf("isolation round %ld: %ld hung endpoint%s (%ld requests held): healthy %.0f deliveries/s; "
                   "at %.0f/s p50 %.3f ms, p99 %.3f ms\n",
                   r + 1, hung, hung == 1 ? "" : "s", held, dps[ph][r], achieved, p50, p99s[ph][r]);
        }
    }
    double md[3], mp[3];
    for (size_t ph = 0; ph < 3; ph++) {
        md[ph] = median(dps[ph], (size_t)rounds);
        mp[ph] = median(p99s[ph], (size_t)rounds);
        printf("RESULT scenario=isolation hung=%ld deliveries_per_s=%.0f p99_ms=%.3f rate=%ld rounds=%ld store=%s "
               "nodes=%ld\n",
               hung_of_phase[ph], md[ph], mp[ph], b->o.rate, rounds, store_names[b->o.store], b->o.nodes);
    }
    for (size_t ph = 1; ph < 3; ph++)
        printf("  medians with %ld hung: deliveries/s %+.1f %%, p99 %+.1f %% (target: within 10 %%)\n",
               hung_of_phase[ph], 100.0 * (md[ph] - md[0]) / md[0], 100.0 * (mp[ph] - mp[0]) / mp[0]);
    if (sink_report_arrivals(&b->sink) != 0)
        goto out;
    result = 0;
out:
    blackhole_stop(&hole);
    return result;
}

/* ---------------------------------------------------------------- inbound */

/* Durable accepts: every request answered 200 only after its commit; then every ack looked up. */
static int run_inbound_common(struct bench *b, bool paced)
{
    const struct inbound_load l = {
        .public_port = 0,
        .events = paced ? b->o.rate * (b->o.seconds + b->o.warmup) : b->o.events,
        .rate = paced ? b->o.rate : 0,
        .connections = b->o.connections,
        .payload_bytes = b->o.payload_bytes,
        .warmup_events = paced ? b->o.rate * b->o.warmup : 0,
        .timeout_ns = b->o.timeout_s * NS_PER_S,
    };
    struct inbound_load run = l;
    struct inbound_figures f;
    long stored;

    if (nodes_start(&b->nodes, &b->o, b->store_url, b->token) != 0 ||
        inbound_source_create(b->nodes.proc[0].admin_port, b->token) != 0)
        return -1;
    run.public_port = b->nodes.proc[0].public_port;
    char cpus[256];
    double cpu0 = nodes_cpu_s(&b->nodes, cpus, sizeof cpus);
    if (inbound_send(&run, &f) != 0)
        return -1;
    double cpu = nodes_cpu_s(&b->nodes, cpus, sizeof cpus) - cpu0;
    stored = inbound_check_stored(b->nodes.proc[0].admin_port, b->token);
    if (paced)
        printf("RESULT scenario=inbound-latency p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f max_ms=%.3f rate=%ld "
               "achieved_rate=%.1f acked=%ld refused=%ld stored=%ld connections=%ld hookd_cpu_s=%.2f store=%s\n",
               f.p50_ms, f.p90_ms, f.p99_ms, f.max_ms, l.rate, f.accepts_per_s, f.acked, f.refused, stored,
               l.connections, cpu, store_names[b->o.store]);
    else
        printf("RESULT scenario=inbound accepts_per_s=%.0f events=%ld seconds=%.3f p50_ms=%.3f p99_ms=%.3f "
               "acked=%ld refused=%ld stored=%ld connections=%ld hookd_cpu_s=%.2f store=%s\n",
               f.accepts_per_s, l.events, f.seconds, f.p50_ms, f.p99_ms, f.acked, f.refused, stored, l.connections,
               cpu, store_names[b->o.store]);
    if (stored != f.acked || f.refused != 0) {
        fprintf(stderr, "loadgen: %ld acknowledged, %ld stored, %ld refused\n", f.acked, stored, f.refused);
        return -1;
    }
    return 0;
}


/* ---------------------------------------------------------------- retention */

#define OLD_AGE_MS (30LL * 86400 * 1000)

/* `rows` delivered deliveries 30 days old, each with one attempt and its own fanned-out event, written
 * by SQL while hookd is stopped: what the purge will take. */
static int seed_old_rows(struct bench *b, long rows)
{
    char sql[2048];
    long long at = (long long)(time(NULL) * 1000LL - OLD_AGE_MS);
    int rc = -1;

    if (b->o.store == ST_SQLITE) {
        sqlite3 *db = NULL;
        char *err = NULL;
        snprintf(sql, sizeof sql,
                 "BEGIN;"
                 "CREATE TEMP TABLE n AS WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < %ld)"
                 " SELECT i FROM c;"
                 "INSERT INTO hookd_outbox(id, event_type, payload, created_at, dispatched_at)"
                 " SELECT printf('evt_old%%010d', i), 'old.event', '{}', %lld, %lld FROM n;"
                 "INSERT INTO hookd_deliveries(id, event_id, endpoint_id, status, attempt_count, created_at,"
                 " first_attempt_at, last_attempt_at, delivered_at, last_status_code)"
                 " SELECT printf('dlv_old%%010d', i), printf('evt_old%%010d', i), 'ep_gone', 'delivered', 1, %lld,"
                 " %lld, %lld, %lld, 200 FROM n;"
                 "INSERT INTO hookd_attempts(delivery_id, n, started_at, duration_ms, status_code)"
                 " SELECT printf('dlv_old%%010d', i), 1, %lld, 5, 200 FROM n;"
                 "COMMIT;",
                 rows, at, at, at, at, at, at, at);
        if (sqlite3_open(b->db_path, &db) == SQLITE_OK && sqlite3_exec(db, sql, NULL, NULL, &err) == SQLITE_OK)
            rc = 0;
        else
            fprintf(stderr, "loadgen: seeding: %s\n", err ? err : sqlite3_errmsg(db));
        sqlite3_free(err);
        sqlite3_close(db);
        return rc;
    }
    PGconn *pg = PQconnectdb(b->pg.dsn);
    snprintf(sql, sizeof sql,
             "BEGIN;"
             "INSERT INTO hookd_outbox(id, event_type, payload, created_at, dispatched_at)"
             " SELECT 'evt_old' || lpad(i::text, 10, '0'), 'old.event', '{}', %lld, %lld FROM generate_series(1, %ld) i;"
             "INSERT INTO hookd_deliveries(id, event_id, endpoint_id, status, attempt_count, created_at,"
             " first_attempt_at, last_attempt_at, delivered_at, last_status_code)"
             " SELECT 'dlv_old' || lpad(i::text, 10, '0'), 'evt_old' || lpad(i::text, 10, '0'), 'ep_gone', 'delivered',"
             " 1, %lld, %lld, %lld, %lld, 200 FROM generate_series(1, %ld) i;"
             "INSERT INTO hookd_attempts(delivery_id, n, started_at, duration_ms, status_code)"
             " SELECT 'dlv_old' || lpad(i::text, 10, '0'), 1, %lld, 5, 200 FROM generate_series(1, %ld) i;"
             "COMMIT; ANALYZE hookd_outbox; ANALYZE hookd_deliveries; ANALYZE hookd_attempts;",
             at, at, rows, at, at, at, at, rows, at, rows);
    PGresult *r = PQstatus(pg) == CONNECTION_OK ? PQexec(pg, sql) : NULL;
    if (r != NULL && PQresultStatus(r) == PGRES_COMMAND_OK)
        rc = 0;
    else
        fprintf(stderr, "loadgen: seeding: %s\n", PQerrorMessage(pg));
    PQclear(r);
    PQfinish(pg);
    return rc;
}

/* hookd_retention_purged_total{kind="deliveries"} of node 0, or -1. */
static long purged_so_far(struct bench *b)
{
    static const char key[] = "hookd_retention_purged_total{kind=\"deliveries\"} ";
    char url[128], resp[65536];
    const char *at;

    snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", b->nodes.proc[0].admin_port);
    if (http_status("GET", url, b->token, NULL, resp, sizeof resp) != 200 || (at = strstr(resp, key)) == NULL)
        return -1;
    return strtol(at + strlen(key), NULL, 10);
}

/* One measured phase: n events to every endpoint; deliveries/s from the first commit to the last arrival. */
static int retention_phase(struct bench *b, long n, double *rate)
{
    struct publisher p = {0};
    long before = atomic_load(&b->table.complete);
    int64_t deadline = mono_ns() + b->o.timeout_s * NS_PER_S;
    int result = -1;

    if (publisher_open(&p, b->o.store, b->target, &b->table, b->o.batch, b->o.payload_bytes) != 0 ||
        publish_all(&p, n, b->o.batch) != 0)
        goto out;
    while (atomic_load(&b->table.complete) < before + n) {
        if (mono_ns() > deadline || nodes_alive(&b->nodes) != 0) {
            fprintf(stderr, "loadgen: phase timed out or a node died\n");
            goto out;
        }
        sleep_ms(5);
    }
    *rate = (double)(n * b->o.endpoints) / ((double)(atomic_load(&b->table.last_arrival_ns) - p.first_commit_ns) / 1e9);
    result = 0;
out:
    publisher_close(&p);
    return result;
}

/* Starts the node with the run's --env settings plus extra ones. */
static int nodes_start_with(struct bench *b, const char *const *extra, size_t n_extra)
{
    struct opts o = b->o;

    for (size_t i = 0; i < n_extra && o.n_env < MAX_EXTRA_ENV; i++)
        o.env[o.n_env++] = extra[i];
    return nodes_start(&b->nodes, &o, b->store_url, b->token);
}

static int run_retention(struct bench *b)
{
    static const char *const off[] = {"HOOKD_RETENTION_DELIVERIES=0", "HOOKD_ALERTS_ENABLED=false"};
    static const char *const on[] = {"HOOKD_RETENTION_DELIVERIES=7d", "HOOKD_RETENTION_INTERVAL=100ms",
                                     "HOOKD_ALERTS_ENABLED=false"};
    long n = b->o.events, rows = b->o.pending, rounds = b->o.rounds, purged_before = 0;
    double without[100], with[100];
    int64_t t0;

    if (nodes_start_with(b, off, 2) != 0 ||
        create_endpoints(&b->nodes.proc[0], b->token, b->sink.port, b->o.endpoints, b->o.max_in_flight, NULL) != 0)
        return -1;
    nodes_stop(&b->nodes);
    t0 = mono_ns();
    if (seed_old_rows(b, rows) != 0)
        return -1;
    printf("seeded %ld delivered deliveries (+ %ld attempts, %ld events) 30 days old in %.1f s\n", rows, rows, rows,
           (double)(mono_ns() - t0) / 1e9);
    for (long r = 0; r < rounds; r++) {
        long a, z;
        if (nodes_start_with(b, off, 2) != 0 || retention_phase(b, n, &without[r]) != 0)
            return -1;
        nodes_stop(&b->nodes);
        if (nodes_start_with(b, on, 3) != 0)
            return -1;
        for (int i = 0; i < 2000 && (a = purged_so_far(b)) <= 0; i++)
            sleep_ms(5); /* the purge has begun */
        if (retention_phase(b, n, &with[r]) != 0)
            return -1;
        z = purged_so_far(b);
        purged_before += z;
        printf("round %ld: %.0f deliveries/s without the purge, %.0f during it (%ld rows purged meanwhile, %ld in"
               " all so far%s)\n", r + 1, without[r], with[r], z - a, purged_before,
               purged_before >= rows ? "; the purge ended within the phase: not a fair round" : "");
        if (r + 1 < rounds)
            nodes_stop(&b->nodes);
    }
    /* The last node goes on purging: time the rest. */
    t0 = mono_ns();
    long last = purged_so_far(b), left = rows - purged_before;
    while (last >= 0 && last < left && mono_ns() - t0 < b->o.timeout_s * NS_PER_S)
        sleep_ms(100), last = purged_so_far(b);
    double secs = (double)(mono_ns() - t0) / 1e9;
    qsort(without, (size_t)rounds, sizeof without[0], cmp_double);
    qsort(with, (size_t)rounds, sizeof with[0], cmp_double);
    double w0 = without[rounds / 2], w1 = with[rounds / 2];
    printf("retention: median %.0f deliveries/s without a purge, %.0f during one (%.1f%%); the remaining %ld rows"
           " purged in %.1f s (%.0f rows/s, each with its attempt and event)\n", w0, w1, 100.0 * (w1 - w0) / w0, left,
           secs, secs > 0 ? (double)left / secs : 0);
    printf("RESULT scenario=retention without_per_s=%.0f during_per_s=%.0f ratio=%.3f rows=%ld purge_rows_per_s=%.0f "
           "store=%s events=%ld endpoints=%ld rounds=%ld\n", w0, w1, w1 / w0, rows, secs > 0 ? (double)left / secs : 0,
           store_names[b->o.store], n, b->o.endpoints, rounds);
    return last >= left ? 0 : -1;
}

static int run_inbound(struct bench *b) { return run_inbound_common(b, false); }
static int run_inbound_latency(struct bench *b) { return run_inbound_common(b, true); }

static int run_machine(struct bench *b) { return machine_bench_run(&b->o, &b->nodes, b->store_url, b->token, false); }
static int run_machine_latency(struct bench *b)
{
    return machine_bench_run(&b->o, &b->nodes, b->store_url, b->token, true);
}

static int run_sink_only(struct bench *b)
{
    return sink_only(&b->sink, b->o.sink_only_s);
}

typedef int (*scenario_fn)(struct bench *b);
static const scenario_fn scenario_fns[SC_COUNT] = {
    [SC_THROUGHPUT] = run_throughput,
    [SC_LATENCY] = run_latency,
    [SC_MEMORY] = run_memory,
    [SC_ISOLATION] = run_isolation,
    [SC_SINK_ONLY] = run_sink_only, /* needs no hookd and no scratch directory */
    [SC_INBOUND] = run_inbound,
    [SC_INBOUND_LATENCY] = run_inbound_latency,
    [SC_MACHINE] = run_machine,
    [SC_MACHINE_LATENCY] = run_machine_latency,
    [SC_RETENTION] = run_retention,
};

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

/* The scratch directory, the store (a SQLite path, or a fresh PostgreSQL database), the nodes'
 * log paths and a random admin token. */
static int prepare_scratch(struct bench *b)
{
    unsigned char raw[24];

    if (access(b->o.hookd, X_OK) != 0) {
        fprintf(stderr, "loadgen: %s: not executable (build it: make build)\n", b->o.hookd);
        return -1;
    }
    if (strlen(b->o.dir) > DIR_MAX) {
        fprintf(stderr, "loadgen: --dir is longer than %d bytes\n", DIR_MAX);
        return -1;
    }
    snprintf(b->dir, sizeof b->dir, "%.2000s/hookd-bench.XXXXXX", b->o.dir);
    if (mkdtemp(b->dir) == NULL) {
        perror("loadgen: scratch dir");
        b->dir[0] = '\0';
        return -1;
    }
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
        perror("loadgen: getrandom");
        return -1;
    }
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(b->token + 2 * i, 3, "%02x", raw[i]);
    explicit_bzero(raw, sizeof raw);
    for (long i = 0; i < b->o.nodes; i++)
        snprintf(b->nodes.proc[i].log, sizeof b->nodes.proc[i].log,
                 i == 0 ? "%.2100s/hookd.log" : "%.2100s/hookd-%ld.log", b->dir, i + 1);
    if (b->o.store == ST_PG) {
        if (pg_env_setup(&b->pg, b->o.pg_dsn, b->dir) != 0)
            return -1;
        snprintf(b->store_url, sizeof b->store_url, "%s", b->pg.dsn);
        b->target = b->pg.dsn;
        /* the DSN is not printed: a given one may hold a password */
        printf("scenario %s: hookd %s x %ld node%s, store: PostgreSQL database %s (%s)\n", scenario_names[b->o.scenario],
               b->o.hookd, b->o.nodes, b->o.nodes > 1 ? "s" : "", b->pg.dbname,
               b->pg.cluster[0] ? "throwaway cluster" : "given server");
    } else {
        snprintf(b->db_path, sizeof b->db_path, "%.2100s/hookd.db", b->dir);
        snprintf(b->store_url, sizeof b->store_url, "sqlite:%.2100s", b->db_path);
        b->target = b->db_path;
        printf("scenario %s: hookd %s, store %s\n", scenario_names[b->o.scenario], b->o.hookd, b->db_path);
    }
    return 0;
}

/* SIGINT, SIGTERM, SIGHUP: stop the nodes and the cluster, then die of the signal. */
static struct bench *signal_bench;

static void on_signal(int sig)
{
    for (int i = 0; signal_bench != NULL && i < MAX_NODES; i++)
        if (signal_bench->nodes.proc[i].pid > 0)
            kill(signal_bench->nodes.proc[i].pid, SIGTERM);
    pg_emergency_stop();
    signal(sig, SIG_DFL);
    raise(sig);
}

int main(int argc, char **argv)
{
    static struct bench b; /* large (the sink's connection table): static, zeroed */
    static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa = {.sa_handler = on_signal};
    int result = 1, r = parse_opts(argc, argv, &b.o);
    long events[SC_COUNT] = {b.o.events, b.o.rate * (b.o.seconds + b.o.warmup), b.o.pending,
                             3 * b.o.rounds * (b.o.events + b.o.rate * (b.o.seconds + b.o.warmup)), 65536, 1024, 1024,
                             1024, 1024, 2 * b.o.rounds * b.o.events};

    if (r != 0)
        return r;
    signal(SIGPIPE, SIG_IGN);
    signal_bench = &b;
    for (size_t i = 0; i < sizeof stop_signals / sizeof stop_signals[0]; i++)
        sigaction(stop_signals[i], &sa, NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);
    b.nodes.n = b.o.nodes;
    b.pg.script = b.o.pg_script;
    b.pg_cpu0 = -1;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0 ||
        table_init(&b.table, (size_t)events[b.o.scenario] + 1024, (uint32_t)b.o.endpoints) != 0)
        return 1;
    if (sink_start(&b.sink, &b.table) != 0)
        goto out_table;
    if (b.o.scenario == SC_SINK_ONLY) {
        result = scenario_fns[SC_SINK_ONLY](&b);
    } else {
        if (prepare_scratch(&b) == 0)
            result = scenario_fns[b.o.scenario](&b) == 0 ? 0 : 1;
        nodes_stop(&b.nodes);
        pg_env_teardown(&b.pg, b.o.keep || result != 0); /* kept: the cluster is stopped, its data stays */
        if (b.dir[0] != '\0' && (b.o.keep || result != 0))
            printf("kept %s (hookd*.log, %s)\n", b.dir, b.o.store == ST_PG ? "pg/ with the stopped cluster" : "hookd.db");
        else if (b.dir[0] != '\0')
            nftw(b.dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    }
    explicit_bzero(b.token, sizeof b.token);
    sink_stop(&b.sink);
out_table:
    table_free(&b.table);
    curl_global_cleanup();
    return result;
}
