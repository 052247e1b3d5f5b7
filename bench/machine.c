/*
 * The machine scenarios (see machine.h): the bench machine and source, the
 * event order, the wait for the last decision and the figures read back from
 * GET /v1/inbox.
 */
#include "machine.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "clock.h"
#include "inbound.h"
#include "nodes.h"

#define SECRET "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define PAGE_MAX (8 << 20)

/* Event i of the run: entity and version. */
struct plan {
    long *entity;
    long *version;
};

static int body_of(long i, char *out, size_t cap, void *arg)
{
    const struct plan *p = arg;
    long v = p->version[i];
    const char *type = v == 1 ? "bench.created" : v == 2 ? "bench.paid" : "bench.updated";

    return snprintf(out, cap, "{\"type\":\"%s\",\"data\":{\"e\":\"e%ld\",\"v\":%ld}}", type, p->entity[i], v);
}

static long rand_below(long n)
{
    uint64_t r = 0;

    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
        r = (uint64_t)rand();
    return (long)(r % (uint64_t)n);
}

/* Shuffled: any order. Paced: version by version, the entities in a shuffled order each round. */
static int plan_make(struct plan *p, long events, long entities, bool paced)
{
    long per = (events + entities - 1) / entities, k = 0;
    long *order = malloc((size_t)entities * sizeof *order);

    p->entity = malloc((size_t)events * sizeof *p->entity);
    p->version = malloc((size_t)events * sizeof *p->version);
    if (!order || !p->entity || !p->version) {
        free(order);
        return -1;
    }
    for (long e = 0; e < entities; e++)
        order[e] = e;
    for (long e = entities - 1; e > 0; e--) {
        long j = rand_below(e + 1), t = order[e];
        order[e] = order[j];
        order[j] = t;
    }
    for (long v = 1; v <= per && k < events; v++)
        for (long e = 0; e < entities && k < events; e++, k++) {
            p->entity[k] = order[e];
            p->version[k] = v;
        }
    for (long i = events - 1; !paced && i > 0; i--) {
        long j = rand_below(i + 1), te = p->entity[i], tv = p->version[i];
        p->entity[i] = p->entity[j];
        p->version[i] = p->version[j];
        p->entity[j] = te;
        p->version[j] = tv;
    }
    free(order);
    return 0;
}

static int setup(int port, const char *token)
{
    static const char machine[] =
        "{\"name\": \"bench\", \"versioning\": \"contiguous\", \"emit\": \"bench.changed\", \"transitions\": ["
        "{\"on\": \"bench.created\", \"from\": [null], \"to\": \"created\"},"
        "{\"on\": \"bench.paid\", \"from\": [\"created\"], \"to\": \"paid\"},"
        "{\"on\": \"bench.updated\", \"from\": [\"paid\"], \"to\": \"paid\"}]}";
    static const char source[] =
        "{\"name\": \"" INBOUND_SOURCE "\", \"verify\": {\"scheme\": \"standard-webhooks\", \"secrets\": [\"" SECRET
        "\"]}, \"event_type\": \"/type\", \"entity\": {\"kind\": \"bench\", \"id\": \"/data/e\", \"version\": "
        "\"/data/v\"}, \"handler\": {\"machine\": \"bench\"}, \"retry_schedule\": \"1s\"}";
    char url[128], resp[2048];
    long code;

    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/machines", port);
    if ((code = http_status("POST", url, token, machine, resp, sizeof resp)) != 201) {
        fprintf(stderr, "loadgen: POST /v1/machines answered %ld: %s\n", code, resp);
        return -1;
    }
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/sources", port);
    if ((code = http_status("POST", url, token, source, resp, sizeof resp)) != 201) {
        fprintf(stderr, "loadgen: POST /v1/sources answered %ld: %s\n", code, resp);
        return -1;
    }
    return 0;
}

/* Whether the source has open items left (pending or deferred); -1 when the API cannot say. */
static int open_left(int port, const char *token)
{
    static const char *const statuses[] = {"pending", "deferred"};
    char url[160], resp[8192];

    for (size_t i = 0; i < 2; i++) {
        snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/inbox?source=" INBOUND_SOURCE "&status=%s&limit=1", port,
                 statuses[i]);
        if (http_status("GET", url, token, NULL, resp, sizeof resp) != 200)
            return -1;
        if (!strstr(resp, "\"data\":[]") && !strstr(resp, "\"data\": []"))
            return 1;
    }
    return 0;
}

static int64_t time_ms(const json_t *v)
{
    struct tm tm = {0};
    int ms = 0;
    const char *s = json_string_value(v);

    if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                     &tm.tm_sec, &ms) != 7)
        return 0;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (int64_t)timegm(&tm) * 1000 + ms;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

struct figures {
    long items, applied;
    int64_t first_received, last_processed;
    int64_t *lat; /* processed - received per measured item, ms */
    long n_lat;
};

/* Reads every item of the source; latencies of those received after skip_before. */
static int figures_read(int port, const char *token, long events, int64_t skip_ms, struct figures *f)
{
    char *resp = malloc(PAGE_MAX), url[512], cursor[256] = "";
    int result = -1;

    memset(f, 0, sizeof *f);
    f->lat = malloc((size_t)events * sizeof *f->lat);
    if (!resp || !f->lat)
        goto out;
    f->first_received = INT64_MAX;
    for (;;) {
        snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/inbox?source=" INBOUND_SOURCE "&limit=1000%s%s", port,
                 cursor[0] ? "&cursor=" : "", cursor);
        if (http_status("GET", url, token, NULL, resp, PAGE_MAX) != 200)
            goto out;
        json_t *doc = json_loads(resp, 0, NULL), *item;
        size_t i;
        if (!doc)
            goto out;
        json_array_foreach(json_object_get(doc, "data"), i, item) {
            int64_t r = time_ms(json_object_get(item, "received_at"));
            int64_t p = time_ms(json_object_get(item, "processed_at"));
            const char *res = json_string_value(json_object_get(item, "result"));
            f->items++;
            if (res && strcmp(res, "applied") == 0)
                f->applied++;
            if (r && r < f->first_received)
                f->first_received = r;
            if (p > f->last_processed)
                f->last_processed = p;
            if (r && p && r >= skip_ms && f->n_lat < events)
                f->lat[f->n_lat++] = p - r;
        }
        const char *next = json_string_value(json_object_get(doc, "next_cursor"));
        if (!next || strlen(next) >= sizeof cursor) {
            json_decref(doc);
            break;
        }
        snprintf(cursor, sizeof cursor, "%s", next);
        json_decref(doc);
    }
    result = 0;
out:
    free(resp);
    return result;
}

static double pct_ms(const int64_t *v, long n, double p)
{
    long rank = (long)(p * (double)n + 0.999999);
    return n ? (double)v[(rank < 1 ? 1 : rank > n ? n : rank) - 1] : 0;
}

int machine_bench_run(const struct opts *o, struct nodes *n, const char *store, const char *token, bool paced)
{
    long events = paced ? o->rate * (o->seconds + o->warmup) : o->events;
    struct plan plan = {0};
    struct figures f = {0};
    struct inbound_figures sent;
    int result = -1, port;

    if (nodes_start(n, o, store, token) != 0)
        return -1;
    port = n->proc[0].admin_port;
    if (plan_make(&plan, events, o->entities, paced) != 0 || setup(port, token) != 0)
        goto out;
    const struct inbound_load l = {
        .public_port = n->proc[0].public_port,
        .events = events,
        .rate = paced ? o->rate : 0,
        .connections = o->connections,
        .warmup_events = paced ? o->rate * o->warmup : 0,
        .timeout_ns = o->timeout_s * NS_PER_S,
        .body_of = body_of,
        .body_arg = &plan,
    };
    char cpus[256];
    double cpu0 = nodes_cpu_s(n, cpus, sizeof cpus);
    int64_t t0 = mono_ns();
    if (inbound_send(&l, &sent) != 0)
        goto out;
    for (int left = 1; left != 0;) {
        if ((left = open_left(port, token)) < 0 || mono_ns() - t0 > o->timeout_s * NS_PER_S) {
            fprintf(stderr, "loadgen: items still open after %ld s\n", o->timeout_s);
            goto out;
        }
        if (left)
            usleep(20000);
    }
    double cpu = nodes_cpu_s(n, cpus, sizeof cpus) - cpu0;
    if (figures_read(port, token, events, 0, &f) != 0)
        goto out;
    int64_t skip = paced ? f.first_received + o->warmup * 1000 : 0;
    f.n_lat = 0;
    free(f.lat);
    if (figures_read(port, token, events, skip, &f) != 0)
        goto out;
    qsort(f.lat, (size_t)f.n_lat, sizeof f.lat[0], cmp_i64);
    double span_s = (double)(f.last_processed - f.first_received) / 1000.0;
    printf("RESULT scenario=%s processed_per_s=%.0f events=%ld entities=%ld acked=%ld applied=%ld span_s=%.3f "
           "accept_to_applied_p50_ms=%.0f p99_ms=%.0f max_ms=%.0f measured=%ld rate=%ld accepts_per_s=%.0f "
           "hookd_cpu_s=%.2f store=%s\n",
           paced ? "machine-latency" : "machine", span_s > 0 ? (double)f.items / span_s : 0, events, o->entities,
           sent.acked, f.applied, span_s, pct_ms(f.lat, f.n_lat, 0.50), pct_ms(f.lat, f.n_lat, 0.99),
           pct_ms(f.lat, f.n_lat, 1.0), f.n_lat, paced ? o->rate : 0, sent.accepts_per_s, cpu, store_names[o->store]);
    if (f.items != events || f.applied != events || sent.acked != events) {
        fprintf(stderr, "loadgen: %ld sent, %ld acknowledged, %ld stored, %ld applied\n", events, sent.acked, f.items,
                f.applied);
        goto out;
    }
    result = 0;
out:
    free(f.lat);
    free(plan.entity);
    free(plan.version);
    return result;
}
