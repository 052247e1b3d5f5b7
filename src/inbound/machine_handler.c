/*
 * The inbox workers' machine handler: one writer op decides an item through
 * its source's machine (machine_step), writes the entity and completes the
 * item; reconciliation asks the provider's API on the loop's engine first.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "inbound/machine_accept.h"
#include "inbound/processor_internal.h"
#include "inbound/source_cache.h"
#include "log.h"
#include "ops/metrics.h"
#include "net/http_client.h"
#include "store/writer.h"

#define PART "inbox"

/* ---- the machine handler: one writer op decides, writes the entity and completes the item ------------------ */

/* An item the machine cannot run on (machine gone, definition unreadable): quarantined with the reason. */
__attribute__((format(printf, 2, 3))) static void machine_refuse(struct job *j, const char *fmt, ...)
{
    j->mo.status = INBOX_QUARANTINED;
    j->mo.attempts = j->it.attempts + 1;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(j->mo.error, sizeof j->mo.error, fmt, ap);
    va_end(ap);
}

/*
 * The decision and the item's fenced outcome in one op (one savepoint of the
 * writer's batch): the entity, its transitions row, the emitted event and the
 * processed mark commit together or not at all. A lost lease (ESTALE) undoes
 * the decision with it.
 */
static int op_machine(struct store *s, void *arg)
{
    struct job *j = arg;
    struct processor *p = j->p;
    struct entity_hold h = {0};
    const struct machine *m = NULL;
    int64_t now = clock_now_ms();
    const struct inbox_result lease = {.id = j->it.id, .lease_owner = p->deps.node, .lease_token = j->it.lease_token};
    int rc;

    j->mo.completed = false; /* a refusal below is completed here */
    if (!j->it.entity_kind || !j->it.entity_id) {
        machine_refuse(j, "the event names no entity (the source's entity.id)");
        rc = 0;
        goto complete;
    }
    rc = store_entity_hold(s, j->machine, j->it.entity_kind, j->it.entity_id, &h);
    if (rc == 0 && !h.machine_found) {
        machine_refuse(j, "the machine %s no longer exists", j->machine);
    } else if (rc == 0 && (rc = machine_cache_get(p->machines, &h.machine, &m)) == HOOKD_EIO) {
        machine_refuse(j, "the stored definition of machine %s does not parse", j->machine);
        rc = 0;
    } else if (rc == 0) {
        const struct machine_step_context c = {
            .node = p->deps.node, .now = now, .max_defer_ms = j->max_defer_ms,
            .schedule_ms = j->schedule_ms, .n_schedule = j->n_schedule,
            .may_reconcile = j->rq != NULL, .reconcile_after_ms = p->deps.reconcile_after_ms,
            .defer_pending = p->deps.n_deciders <= 0, /* decisions on the one writer, with the claims */
            .lease = &lease,
        };
        rc = j->snap.state ? machine_step_reconciled(s, m, &c, &j->it, &j->snap, &h, &j->mo)
                           : machine_step(s, m, &c, &j->it, &h, &j->mo);
    }
    machine_cache_put(p->machines, m);
    entity_hold_free(&h);
    if (rc || j->mo.needs_reconcile)
        return rc; /* needs_reconcile: nothing written, the item stays leased while the provider is asked */
complete:
    j->r.id = j->it.id;
    j->r.lease_owner = p->deps.node;
    j->r.lease_token = j->it.lease_token;
    j->r.status = j->mo.status;
    j->r.attempts = j->mo.attempts;
    j->r.next_attempt_at = j->mo.next_attempt_at;
    j->r.result = j->mo.result;
    j->r.error = j->mo.error[0] ? j->mo.error : NULL;
    return j->mo.completed ? 0 : store_inbox_complete(s, &j->r, now); /* completed: with the decision's writes */
}

static void op_machine_done(void *arg, int result)
{
    struct job *j = arg;
    struct processor *p = j->p;

    if (result == 0 && j->mo.emitted > 0)
        j->emitted = true; /* committed: the loop wakes the relay (hand_overs) */
    if (result == 0 && j->mo.needs_reconcile) {
        /* The provider request runs on the loop's engine: hand the job over. */
        pthread_mutex_lock(&p->mu);
        j->next = p->to_reconcile;
        p->to_reconcile = j;
        pthread_mutex_unlock(&p->mu);
        http_engine_wakeup(p->engine);
        atomic_fetch_sub(&p->outstanding, 1);
        return;
    }
    if (result != 0 && result != HOOKD_ESTALE && !j->retried) {
        /* Nothing of the decision was kept: the item goes back as it was, looked at again in a second. */
        log_debug(PART, "item %s: machine step failed (%s), tried again shortly", j->it.id, hookd_strerror(result));
        j->retried = true;
        j->r = (struct inbox_result){.status = j->it.status == INBOX_DEFERRED ? INBOX_DEFERRED : INBOX_PENDING,
                                     .attempts = j->it.attempts, .next_attempt_at = clock_now_ms() + 1000,
                                     .error = j->it.error};
        j->idle = true;
        j->r.id = j->it.id;
        j->r.lease_owner = p->deps.node;
        j->r.lease_token = j->it.lease_token;
        /* The op's count in outstanding passes to this one (its done is processor_op_complete_done). */
        if (writer_submit(p->deps.writer, processor_op_complete, processor_op_complete_done, j) == 0)
            return;
        result = HOOKD_EUNAVAIL;
    }
    processor_op_complete_done(arg, result);
}

/* The connection that decides j: by its entity, so one entity's decisions queue on one connection. */
static struct writer *machine_writer(const struct processor *p, const struct job *j)
{
    uint32_t h = 2166136261u; /* FNV-1a over kind and id */

    if (p->deps.n_deciders <= 0 || !j->it.entity_kind || !j->it.entity_id)
        return p->deps.writer;
    for (const char *c = j->it.entity_kind; *c; c++)
        h = (h ^ (unsigned char)*c) * 16777619u;
    h = (h ^ 0xffu) * 16777619u;
    for (const char *c = j->it.entity_id; *c; c++)
        h = (h ^ (unsigned char)*c) * 16777619u;
    return p->deps.deciders[h % (uint32_t)p->deps.n_deciders];
}

static void machine_submit(struct processor *p, struct job *j)
{
    atomic_fetch_add(&p->outstanding, 1);
    if (writer_submit(machine_writer(p, j), op_machine, op_machine_done, j) != 0) {
        atomic_fetch_sub(&p->outstanding, 1);
        p->in_flight--;
        processor_job_free(j);
    }
}

/* ---- reconciliation: the provider's view of an entity, fetched on the loop's engine --------------------- */

/* The request for this item's entity; env: values are read now. NULL on allocation failure. */
static struct reconcile_request *reconcile_build(const struct source_def *def, const struct inbox_item *it)
{
    struct reconcile_request *rq = calloc(1, sizeof *rq);

    if (!rq)
        return NULL;
    if (!source_reconcile_url(def, it->entity_id ? it->entity_id : "", rq->url, sizeof rq->url))
        snprintf(rq->problem, sizeof rq->problem, "reconcile.url: too long for this entity id");
    snprintf(rq->lines[rq->n_headers++], RECONCILE_LINE_MAX, "Accept: application/json");
    for (size_t i = 0; i < def->n_reconcile_headers && !rq->problem[0]; i++) {
        const struct source_reconcile_header *h = &def->reconcile_headers[i];
        const char *value = h->value;
        if (strncmp(value, "env:", 4) == 0 && !(value = getenv(value + 4))) {
            snprintf(rq->problem, sizeof rq->problem, "reconcile.headers.%.64s: the environment variable is not set",
                     h->name);
            break;
        }
        if (strlen(value) > SOURCE_RECONCILE_VALUE_MAX || strpbrk(value, "\r\n")) {
            snprintf(rq->problem, sizeof rq->problem, "reconcile.headers.%.64s: the value is not a header value",
                     h->name);
            break;
        }
        snprintf(rq->lines[rq->n_headers++], RECONCILE_LINE_MAX, "%s: %s", h->name, value);
    }
    for (size_t i = 0; i < rq->n_headers; i++)
        rq->headers[i] = rq->lines[i];
    snprintf(rq->state_pointer, sizeof rq->state_pointer, "%s", def->reconcile_state ? def->reconcile_state : "");
    snprintf(rq->version_pointer, sizeof rq->version_pointer, "%s",
             def->reconcile_version ? def->reconcile_version : "");
    return rq;
}

/* A failed reconciliation: the item stays deferred (quarantined past max_defer), tried again with backoff. */
__attribute__((format(printf, 3, 4))) static void reconcile_failed(struct processor *p, struct job *j,
                                                                   const char *fmt, ...)
{
    int64_t now = clock_now_ms();
    int64_t since = j->it.status == INBOX_DEFERRED && j->it.deferred_at ? j->it.deferred_at : now;
    int n = j->it.attempts + 1;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(j->mo.error, sizeof j->mo.error, fmt, ap);
    va_end(ap);
    j->r.attempts = n;
    j->r.result = NULL;
    j->r.error = j->mo.error;
    if (now - since >= j->max_defer_ms) {
        j->r.status = INBOX_QUARANTINED;
        size_t used = strlen(j->mo.error);
        snprintf(j->mo.error + used, sizeof j->mo.error - used, "; deferred for longer than max_defer");
    } else {
        j->r.status = INBOX_DEFERRED;
        j->r.next_attempt_at = now + machine_reconcile_backoff_ms(n);
        if (j->r.next_attempt_at > since + j->max_defer_ms)
            j->r.next_attempt_at = since + j->max_defer_ms;
    }
    log_debug(PART, "item %s of %s: reconciliation failed (attempt %d)", j->it.id, j->it.source, n);
    processor_outcome_write(p, j);
}

static void reconcile_done(void *arg, const struct http_client_result *res)
{
    struct job *j = arg;
    struct processor *p = j->p;
    json_t *doc = NULL, *state = NULL, *version = NULL;

    if (res->cancelled) {
        p->in_flight--;
        processor_job_free(j);
        return;
    }
    if (res->transport != TRANSPORT_OK) {
        reconcile_failed(p, j, "reconciliation: %s", res->error[0] ? res->error : "no answer");
        return;
    }
    if (res->status < 200 || res->status >= 300) {
        reconcile_failed(p, j, "reconciliation: the provider answered %d", res->status);
        return;
    }
    if (res->body_truncated || !(doc = json_loadb(res->body, res->body_len, 0, NULL))) {
        reconcile_failed(p, j, "reconciliation: the provider's answer is not JSON (or over %d KiB)",
                         RECONCILE_RESPONSE_MAX / 1024);
        return;
    }
    if (json_pointer_get(doc, j->rq->state_pointer, &state, NULL) != 0 || !json_is_string(state) ||
        json_string_length(state) == 0 || json_string_length(state) >= sizeof j->snap_state) {
        json_decref(doc);
        reconcile_failed(p, j, "reconciliation: reconcile.state names no state in the provider's answer");
        return;
    }
    if (j->rq->version_pointer[0] &&
        (json_pointer_get(doc, j->rq->version_pointer, &version, NULL) != 0 || !json_is_integer(version))) {
        json_decref(doc);
        reconcile_failed(p, j, "reconciliation: reconcile.version names no integer in the provider's answer");
        return;
    }
    snprintf(j->snap_state, sizeof j->snap_state, "%s", json_string_value(state));
    j->snap.state = j->snap_state;
    j->snap.has_version = version != NULL;
    j->snap.version = version ? json_integer_value(version) : 0;
    json_decref(doc);
    j->mo = (struct machine_outcome){0};
    machine_submit(p, j);
}

/* Asks the provider for the entity of j (loop thread). */
void machine_reconcile_start(struct processor *p, struct job *j)
{
    int rc;

    if (j->rq->problem[0]) {
        reconcile_failed(p, j, "reconciliation: %s", j->rq->problem);
        return;
    }
    const struct http_client_request req = {
        .method = "GET",
        .url = j->rq->url,
        .headers = j->rq->headers,
        .n_headers = j->rq->n_headers,
        .response_max = RECONCILE_RESPONSE_MAX,
    };
    rc = http_engine_submit(p->engine, &req, reconcile_done, j);
    if (rc != 0)
        reconcile_failed(p, j, "reconciliation: cannot send the request: %s", hookd_strerror(rc));
}

void machine_start(struct processor *p, struct job *j, const struct source_def *def)
{
    snprintf(j->machine, sizeof j->machine, "%s", def->machine);
    j->max_defer_ms = def->max_defer_ms ? def->max_defer_ms : p->deps.max_defer_ms;
    j->n_schedule = def->n_retry_schedule ? def->n_retry_schedule : p->deps.retry.n_schedule;
    if (j->n_schedule > RETRY_MAX_SCHEDULE)
        j->n_schedule = RETRY_MAX_SCHEDULE;
    memcpy(j->schedule_ms, def->n_retry_schedule ? def->retry_schedule_ms : p->deps.retry.schedule_ms,
           j->n_schedule * sizeof j->schedule_ms[0]);
    if (def->reconcile_url && !(j->rq = reconcile_build(def, &j->it))) {
        p->in_flight--;
        processor_job_free(j); /* out of memory: its lease expires */
        return;
    }
    /* An event without a version: the provider says what the entity is (DESIGN §7 rule 4). */
    if (j->rq && !j->it.has_version)
        machine_reconcile_start(p, j);
    else
        machine_submit(p, j);
}

/* ---- decisions at accept: where the accepts and the decisions share the one writer ---------------------- */

/* Deciders of their own (a shared store): an entity's lock would be waited for inside the accepts' transaction. */
bool processor_decides_accepts(const struct processor *p)
{
    return p && p->deps.n_deciders <= 0 && !atomic_load(&p->stopping);
}

int processor_accept_insert(struct processor *p, struct store *s, struct inbox_item *it,
                            struct processor_accepted *out)
{
    struct machine_outcome mo;
    struct source_ref ref;
    int rc;

    memset(out, 0, sizeof *out);
    if (!processor_decides_accepts(p) || source_cache_get(p->deps.sources, it->source, &ref) != 0)
        return 0;
    const struct source_def *def = ref.def;
    size_t n_schedule = def->n_retry_schedule ? def->n_retry_schedule : p->deps.retry.n_schedule;
    const struct machine_step_context c = {
        .node = p->deps.node, .now = clock_now_ms(),
        .max_defer_ms = def->max_defer_ms ? def->max_defer_ms : p->deps.max_defer_ms,
        .schedule_ms = def->n_retry_schedule ? def->retry_schedule_ms : p->deps.retry.schedule_ms,
        .n_schedule = n_schedule > RETRY_MAX_SCHEDULE ? RETRY_MAX_SCHEDULE : n_schedule,
        .may_reconcile = def->reconcile_url != NULL, .reconcile_after_ms = p->deps.reconcile_after_ms,
        .defer_pending = true, /* the one writer, as the workers' decisions there */
    };
    rc = def->machine ? machine_accept_insert(s, p->machines, def->machine, &c, it, &mo, &out->decided) : 0;
    source_cache_put(p->deps.sources, &ref);
    if (out->decided) {
        out->emitted = mo.emitted > 0;
        out->status = (int)mo.status;
    }
    return rc;
}

void processor_accept_done(struct processor *p, const struct processor_accepted *a)
{
    if (!p || !a->decided)
        return;
    metrics_inbox_outcome((enum inbox_status)a->status);
    /* The loop wakes the relay (at most every PROCESSOR_RELAY_WAKE_MS): one wake-up of the loop per gap. */
    if (a->emitted && !atomic_exchange(&p->accept_emitted, true))
        http_engine_wakeup(p->engine);
}

/* One claimed item: its source decides what runs. False when nothing ran for it. */
