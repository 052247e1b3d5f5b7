/*
 * Job nodes of the dispatcher: a pool of spares, an index by delivery id, and
 * the delivery's next state after an attempt.
 */
#include "outbound/jobs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/duration.h"
#include "core/utf8.h"
#include "hookd.h"
#include "log.h"

#define PART "dispatcher"

#define JOB_BUCKETS_MIN 256
#define JOB_BUCKETS_MAX (1u << 20)
#define JOB_SPARE_MAX 1024

static size_t bucket_of(const struct job_table *t, const char *id)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */

    for (; *id != '\0'; id++) {
        h ^= (unsigned char)*id;
        h *= 1099511628211ULL;
    }
    return (size_t)(h & (t->n_buckets - 1));
}

int job_table_init(struct job_table *t, size_t expected)
{
    size_t n = JOB_BUCKETS_MIN;

    memset(t, 0, sizeof *t);
    while (n < expected * 2 && n < JOB_BUCKETS_MAX)
        n *= 2;
    t->buckets = calloc(n, sizeof *t->buckets);
    if (t->buckets == NULL)
        return HOOKD_ENOMEM;
    t->n_buckets = n;
    t->max_spare = expected < JOB_SPARE_MAX ? expected : JOB_SPARE_MAX;
    return 0;
}

void job_table_destroy(struct job_table *t)
{
    struct job *j;

    while ((j = t->spare) != NULL) {
        t->spare = j->next;
        free(j);
    }
    free(t->buckets);
    memset(t, 0, sizeof *t);
}

struct job *job_table_new(struct job_table *t)
{
    struct job *j = t->spare;

    if (j == NULL)
        return calloc(1, sizeof *j);
    t->spare = j->next;
    t->n_spare--;
    memset(j, 0, sizeof *j);
    return j;
}

void job_table_recycle(struct job_table *t, struct job *j)
{
    if (t->n_spare >= t->max_spare) {
        free(j);
        return;
    }
    j->next = t->spare;
    t->spare = j;
    t->n_spare++;
}

void job_table_add(struct job_table *t, struct job *j)
{
    size_t b = bucket_of(t, j->dj.d.id);

    j->index_next = t->buckets[b];
    t->buckets[b] = j;
}

void job_table_remove(struct job_table *t, struct job *j)
{
    struct job **pp = &t->buckets[bucket_of(t, j->dj.d.id)];

    while (*pp != NULL && *pp != j)
        pp = &(*pp)->index_next;
    if (*pp == j)
        *pp = j->index_next;
    j->index_next = NULL;
}

struct job *job_table_find(struct job_table *t, const char *delivery_id)
{
    struct job *j = t->buckets[bucket_of(t, delivery_id)];

    while (j != NULL && strcmp(j->dj.d.id, delivery_id) != 0)
        j = j->index_next;
    return j;
}

void job_table_each(struct job_table *t, void (*fn)(struct job *j, void *arg), void *arg)
{
    for (size_t b = 0; b < t->n_buckets; b++) {
        for (struct job *j = t->buckets[b]; j != NULL; j = j->index_next)
            fn(j, arg);
    }
}

/* ---- results ------------------------------------------------------------ */

static const enum delivery_status next_status[] = {
    [NEXT_DELIVERED] = DELIVERY_DELIVERED,
    [NEXT_RETRY] = DELIVERY_RETRYING,
    [NEXT_DEAD] = DELIVERY_DEAD,
};

/*
 * The snippet as bytes (the endpoint's, NULs and all); one cut at the cap
 * ends on a character boundary when it is text. Without memory the attempt
 * is still recorded, only without its snippet.
 */
static void snippet_set(struct attempt *a, const char *response, size_t len, bool truncated)
{
    if (truncated)
        len = utf8_cut(response, len);
    a->response_truncated = truncated;
    if (len == 0)
        return;
    a->response = malloc(len + 1);
    if (a->response == NULL)
        return;
    memcpy(a->response, response, len);
    a->response[len] = '\0';
    a->response_len = len;
}

void job_set_result(struct job *j, const struct retry_policy *policy, const struct request_outcome *o,
                    const char *response, int64_t started_at, int64_t now, double rnd01, const char *node)
{
    const struct delivery *d = &j->dj.d;
    int64_t first = d->first_attempt_at > 0 ? d->first_attempt_at : started_at;
    struct delivery_result *res = &j->result;
    struct retry_decision dec;

    retry_decide(policy, o->outcome, d->attempt_count + 1, first, now,
                 o->retry_after_ms, rnd01, &dec);
    free(res->attempt.response);
    memset(res, 0, sizeof *res);
    res->delivery_id = d->id;
    res->lease_owner = d->lease_owner;
    res->lease_token = d->lease_token;
    res->status = next_status[dec.next];
    res->next_attempt_at = dec.next == NEXT_RETRY ? dec.next_attempt_at_ms : 0;
    res->disable_endpoint_reason = dec.disable_endpoint ? "endpoint answered 410 Gone" : NULL;
    res->unrecorded = d->unrecorded ? d : NULL; /* its first result writes its row */
    res->attempt.n = d->attempt_count + 1;
    res->attempt.started_at = started_at;
    res->attempt.duration_ms = o->duration_ms;
    res->attempt.status_code = o->err == TRANSPORT_OK ? o->status_code : 0;
    res->attempt.node = (char *)node; /* the store only reads it */
    snprintf(res->attempt.delivery_id, sizeof res->attempt.delivery_id, "%s", d->id);
    if (o->err != TRANSPORT_OK) {
        snprintf(j->error_class, sizeof j->error_class, "%s", transport_error_name(o->err));
        res->attempt.error_class = j->error_class;
    }
    if (o->error[0] != '\0') {
        /* A dead delivery's last error also says why it will not be retried. */
        if (dec.next == NEXT_DEAD)
            snprintf(j->error, sizeof j->error, "%s (%s)", o->error, dec.reason);
        else
            snprintf(j->error, sizeof j->error, "%s", o->error);
        res->attempt.error = j->error;
    }
    snippet_set(&res->attempt, response, response != NULL ? o->response_len : 0, o->response_truncated);
    j->recorded_now = now;
}

void job_log_result(const struct job *j)
{
    const struct delivery_result *res = &j->result;
    const char *ep = j->dj.d.endpoint_id;
    char what[64];
    char delay[24];

    if (res->attempt.status_code > 0)
        snprintf(what, sizeof what, "%d", res->attempt.status_code);
    else
        snprintf(what, sizeof what, "%s", res->attempt.error_class != NULL ? res->attempt.error_class : "error");
    switch (res->status) {
    case DELIVERY_DELIVERED:
        log_info(PART, "delivered %s %s to %s (%s, %d ms)", j->dj.d.id, j->dj.ev.id, ep, what,
                 res->attempt.duration_ms);
        break;
    case DELIVERY_RETRYING:
        duration_format(res->next_attempt_at > j->recorded_now ? res->next_attempt_at - j->recorded_now : 0, delay);
        log_info(PART, "attempt %d of %s %s to %s failed (%s, %d ms), next in %s", res->attempt.n, j->dj.d.id,
                 j->dj.ev.id, ep, what, res->attempt.duration_ms, delay);
        break;
    default:
        log_warn(PART, "%s %s to %s is dead after %d attempt%s: %s", j->dj.d.id, j->dj.ev.id, ep, res->attempt.n,
                 res->attempt.n == 1 ? "" : "s", res->attempt.error != NULL ? res->attempt.error : what);
        break;
    }
}
