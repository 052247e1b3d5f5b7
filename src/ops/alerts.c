/*
 * Alerts: the rules (signals from the store in, findings out), the evaluator
 * thread that opens and resolves them, and the operational events each
 * change publishes through hookd's own outbox.
 */
#include "ops/alerts.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "ops/api_common.h"
#include "hub.h"
#include "log.h"
#include "ops/metrics.h"
#include "store/writer.h"

#define PART "alerts"
#define BACKLOG_RING 64  /* samples kept per endpoint; one is taken at most every window / 32 */
#define OPEN_LIST_MAX STORE_LIST_MAX

/* ---- the rules -------------------------------------------------------------------- */

struct rule_def {
    const char *name;
    const char *opened_type, *resolved_type;
};

static const struct rule_def rules[] = {
    {"retry_backlog", "hookd.alert.opened", "hookd.alert.resolved"},
    {"error_rate", "hookd.alert.opened", "hookd.alert.resolved"},
    {"no_success", "hookd.alert.opened", "hookd.alert.resolved"},
    {"delivery_delayed", "hookd.alert.opened", "hookd.alert.resolved"},
    {"dead_letters", "hookd.alert.opened", "hookd.alert.resolved"},
    {"quarantined", "hookd.alert.opened", "hookd.alert.resolved"},
    {"signature_rejections", "hookd.alert.opened", "hookd.alert.resolved"},
    {"endpoint_disabled", "hookd.endpoint.disabled", "hookd.endpoint.recovered"},
};
#define N_RULES (sizeof rules / sizeof rules[0])

static const struct rule_def *rule_find(const char *name)
{
    for (size_t i = 0; name && i < N_RULES; i++)
        if (strcmp(rules[i].name, name) == 0)
            return &rules[i];
    return NULL;
}

bool alert_rule_known(const char *rule) { return rule_find(rule) != NULL; }

const char *alert_event_type(const char *rule, bool opened)
{
    const struct rule_def *d = rule_find(rule);

    if (d == NULL)
        return opened ? "hookd.alert.opened" : "hookd.alert.resolved";
    return opened ? d->opened_type : d->resolved_type;
}

void *alert_json(const struct alert *a)
{
    json_t *details = json_loads(a->details ? a->details : "{}", 0, NULL);

    if (!json_is_object(details)) {
        json_decref(details);
        details = json_object(); /* a row written by hand with something else: shown empty, never passed on raw */
    }
    /* Text from the row as text that is always valid JSON: a row written by hand may hold any bytes. */
    return json_pack("{s:o,s:o,s:o,s:s,s:o,s:o,s:o,s:o}", "id", api_json_text(a->id), "rule", api_json_text(a->rule),
                     "subject", api_json_text(a->subject ? a->subject : ""), "status",
                     a->resolved_at ? "resolved" : "open", "message", api_json_text(a->message ? a->message : ""),
                     "details", details, "opened_at", api_json_time(a->opened_at), "resolved_at",
                     api_json_time(a->resolved_at));
}

void alert_findings_free(struct alert_findings *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->items[i].subject);
        free(f->items[i].message);
        free(f->items[i].details);
    }
    for (size_t i = 0; i < f->n_undecided; i++)
        free(f->undecided[i].subject);
    free(f->items);
    free(f->undecided);
    memset(f, 0, sizeof *f);
}

/* Appends a finding; details is a json_t * taken over. false on OOM. */
static bool finding_add(struct alert_findings *f, const char *rule, const char *subject, json_t *details,
                        const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static bool finding_add(struct alert_findings *f, const char *rule, const char *subject, json_t *details,
                        const char *fmt, ...)
{
    struct alert_finding *grown = realloc(f->items, (f->n + 1) * sizeof *grown);
    char message[ALERT_TEXT_MAX];
    char *text = details ? json_dumps(details, JSON_COMPACT) : NULL;
    va_list ap;

    json_decref(details);
    if (grown == NULL || text == NULL) {
        if (grown != NULL)
            f->items = grown;
        free(text);
        return false;
    }
    f->items = grown;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    struct alert_finding *x = &f->items[f->n];
    memset(x, 0, sizeof *x);
    snprintf(x->rule, sizeof x->rule, "%s", rule);
    x->subject = strdup(subject);
    x->message = strdup(message);
    x->details = text;
    if (!x->subject || !x->message) {
        free(x->subject);
        free(x->message);
        free(x->details);
        return false;
    }
    f->n++;
    return true;
}

static bool undecided_add(struct alert_findings *f, const char *rule, const char *subject)
{
    struct alert_finding *grown = realloc(f->undecided, (f->n_undecided + 1) * sizeof *grown);

    if (grown == NULL)
        return false;
    f->undecided = grown;
    memset(&grown[f->n_undecided], 0, sizeof *grown);
    snprintf(grown[f->n_undecided].rule, sizeof grown->rule, "%s", rule);
    grown[f->n_undecided].subject = strdup(subject);
    if (grown[f->n_undecided].subject == NULL)
        return false;
    f->n_undecided++;
    return true;
}

/* ---- retry backlog history -------------------------------------------------------------- */

struct backlog_endpoint {
    char *id;
    int64_t at[BACKLOG_RING], count[BACKLOG_RING];
    int n, head;   /* head: index of the newest sample */
    bool seen;     /* in this pass's signals */
};

struct backlog_history {
    struct backlog_endpoint *items;
    size_t n;
    int64_t first_pass_at; /* every endpoint with a backlog has been sampled since then */
};

void backlog_history_free(struct backlog_history *h)
{
    if (h == NULL)
        return;
    for (size_t i = 0; i < h->n; i++)
        free(h->items[i].id);
    free(h->items);
    free(h);
}

static struct backlog_endpoint *backlog_find(struct backlog_history *h, const char *id, bool add)
{
    for (size_t i = 0; i < h->n; i++)
        if (strcmp(h->items[i].id, id) == 0)
            return &h->items[i];
    if (!add)
        return NULL;
    struct backlog_endpoint *grown = realloc(h->items, (h->n + 1) * sizeof *grown);
    if (grown == NULL)
        return NULL;
    h->items = grown;
    memset(&grown[h->n], 0, sizeof *grown);
    grown[h->n].id = strdup(id);
    if (grown[h->n].id == NULL)
        return NULL;
    grown[h->n].head = -1;
    return &grown[h->n++];
}

static void backlog_sample(struct backlog_endpoint *e, int64_t now, int64_t count, int64_t spacing)
{
    if (e->n > 0 && now - e->at[e->head] < spacing) {
        return; /* too soon for a new sample: the ring would cover less than the window */
    }
    e->head = (e->head + 1) % BACKLOG_RING;
    e->at[e->head] = now;
    e->count[e->head] = count;
    if (e->n < BACKLOG_RING)
        e->n++;
}

/*
 * The count as of the window's start: the newest sample at or before it; an endpoint first seen after
 * it, by passes that have sampled every backlog since before it, had none then. false: history too short.
 */
static bool backlog_baseline(const struct backlog_history *h, const struct backlog_endpoint *e, int64_t since,
                             int64_t *out)
{
    for (int k = 0; k < e->n; k++) {
        int i = ((e->head - k) % BACKLOG_RING + BACKLOG_RING) % BACKLOG_RING;
        if (e->at[i] <= since) {
            *out = e->count[i];
            return true;
        }
    }
    if (h->first_pass_at <= since && e->n < BACKLOG_RING) { /* its first sample is still in the ring */
        *out = 0;
        return true;
    }
    return false;
}

static bool rule_backlog(const struct alert_settings *cfg, const struct alert_signal_list *sig,
                         struct backlog_history *h, int64_t now, struct alert_findings *out)
{
    int64_t spacing = cfg->window_ms / 32;
    bool ok = true;

    if (h->first_pass_at == 0)
        h->first_pass_at = now;
    for (size_t i = 0; i < h->n; i++)
        h->items[i].seen = false;
    for (size_t i = 0; i < sig->n && ok; i++) {
        const struct alert_signal *g = &sig->items[i];
        struct backlog_endpoint *e;
        if (g->kind != SIGNAL_RETRYING || g->subject == NULL)
            continue;
        if ((e = backlog_find(h, g->subject, true)) == NULL)
            return false;
        e->seen = true;
        backlog_sample(e, now, g->n, spacing);
    }
    for (size_t i = 0; i < h->n && ok; i++) {
        struct backlog_endpoint *e = &h->items[i];
        int64_t base, current;
        if (!e->seen)
            backlog_sample(e, now, 0, spacing);
        current = e->count[e->head];
        if (!backlog_baseline(h, e, now - cfg->window_ms, &base)) {
            /* Too little history to judge growth; an empty backlog is not growing whatever came before. */
            if (current > 0)
                ok = undecided_add(out, "retry_backlog", e->id);
            continue;
        }
        if (cfg->backlog_growth > 0 && current - base >= cfg->backlog_growth)
            ok = finding_add(out, "retry_backlog", e->id,
                             json_pack("{s:I,s:I,s:I}", "retrying", (json_int_t)current, "grown_by",
                                       (json_int_t)(current - base), "window_ms", (json_int_t)cfg->window_ms),
                             "endpoint %s: retry backlog grew by %lld to %lld deliveries within the window",
                             e->id, (long long)(current - base), (long long)current);
    }
    /* Endpoints whose backlog stayed empty for the whole ring are forgotten: they are not growing. */
    for (size_t i = 0; i < h->n;) {
        struct backlog_endpoint *e = &h->items[i];
        bool empty = e->n == BACKLOG_RING;
        for (int k = 0; empty && k < e->n; k++)
            empty = e->count[k] == 0;
        if (empty) {
            free(e->id);
            h->items[i] = h->items[--h->n];
        } else {
            i++;
        }
    }
    return ok;
}

/* Attempts per endpoint (summed over accounts) and per account (summed over endpoints). */
struct tally {
    const char *key;
    int64_t attempts, ok;
};

static struct tally *tally_find(struct tally **t, size_t *n, const char *key)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*t)[i].key, key) == 0)
            return &(*t)[i];
    struct tally *grown = realloc(*t, (*n + 1) * sizeof *grown);
    if (grown == NULL)
        return NULL;
    *t = grown;
    grown[*n] = (struct tally){.key = key};
    return &grown[(*n)++];
}

static bool rule_attempts(const struct alert_settings *cfg, const struct alert_signal_list *sig,
                          struct alert_findings *out)
{
    struct tally *eps = NULL, *accounts = NULL;
    size_t n_eps = 0, n_accounts = 0, failing = 0;
    bool ok = true;

    for (size_t i = 0; i < sig->n && ok; i++) {
        const struct alert_signal *g = &sig->items[i];
        struct tally *e, *a;
        if (g->kind != SIGNAL_ATTEMPTS || g->subject == NULL)
            continue;
        e = tally_find(&eps, &n_eps, g->subject);
        /* Deliveries without an account count as one account with an empty name. */
        a = e ? tally_find(&accounts, &n_accounts, g->account ? g->account : "") : NULL;
        if (e == NULL || a == NULL) {
            ok = false;
            break;
        }
        e->attempts += g->n;
        e->ok += g->m;
        a->attempts += g->n;
        a->ok += g->m;
    }
    for (size_t i = 0; i < n_eps && ok && cfg->error_rate > 0; i++) {
        const struct tally *e = &eps[i];
        double rate = e->attempts > 0 ? (double)(e->attempts - e->ok) / (double)e->attempts : 0;
        if (e->attempts >= cfg->error_min_attempts && rate >= cfg->error_rate)
            ok = finding_add(out, "error_rate", e->key,
                             json_pack("{s:I,s:I,s:f,s:I}", "attempts", (json_int_t)e->attempts, "failed",
                                       (json_int_t)(e->attempts - e->ok), "rate", rate, "window_ms",
                                       (json_int_t)cfg->window_ms),
                             "endpoint %s: %lld of %lld attempts failed within the window (%.0f%%)", e->key,
                             (long long)(e->attempts - e->ok), (long long)e->attempts, rate * 100.0);
    }
    json_t *examples = json_array();
    for (size_t i = 0; i < n_accounts && examples; i++) {
        if (accounts[i].attempts > 0 && accounts[i].ok == 0) {
            if (failing++ < 10)
                json_array_append_new(examples, json_string(accounts[i].key));
        }
    }
    if (ok && examples == NULL)
        ok = false;
    if (ok && cfg->no_success_accounts > 0 && failing >= (size_t)cfg->no_success_accounts)
        ok = finding_add(out, "no_success", "*",
                         json_pack("{s:I,s:O,s:I}", "accounts", (json_int_t)failing, "examples", examples, "window_ms",
                                   (json_int_t)cfg->window_ms),
                         "%zu accounts had attempts and no successful delivery within the window", failing);
    json_decref(examples);
    free(eps);
    free(accounts);
    return ok;
}

/* The rules over one signal each: a count at or over a threshold, or an age past a bound. */
static bool rule_counts(const struct alert_settings *cfg, const struct alert_signal_list *sig, int64_t now,
                        struct alert_findings *out)
{
    bool ok = true;

    for (size_t i = 0; i < sig->n && ok; i++) {
        const struct alert_signal *g = &sig->items[i];
        const char *s = g->subject;
        if (s == NULL)
            continue;
        switch (g->kind) {
        case SIGNAL_DEAD:
            if (cfg->dead_letters > 0 && g->n >= cfg->dead_letters)
                ok = finding_add(out, "dead_letters", s,
                                 json_pack("{s:I,s:I}", "dead", (json_int_t)g->n, "window_ms",
                                           (json_int_t)cfg->window_ms),
                                 "endpoint %s: %lld deliveries became dead letters within the window", s,
                                 (long long)g->n);
            break;
        case SIGNAL_OLDEST_OPEN:
            if (cfg->sync_warn_after_ms > 0 && g->n > 0 && now - g->n > cfg->sync_warn_after_ms)
                ok = finding_add(out, "delivery_delayed", s,
                                 json_pack("{s:o,s:I,s:I}", "oldest_created_at", api_json_time(g->n), "age_ms",
                                           (json_int_t)(now - g->n), "sync_warn_after_ms",
                                           (json_int_t)cfg->sync_warn_after_ms),
                                 "endpoint %s: its oldest undelivered delivery has waited %lld s", s,
                                 (long long)((now - g->n) / 1000));
            break;
        case SIGNAL_QUARANTINED:
            if (cfg->quarantined > 0 && g->n >= cfg->quarantined)
                ok = finding_add(out, "quarantined", s, json_pack("{s:I}", "quarantined", (json_int_t)g->n),
                                 "source %s: %lld inbound events are quarantined", s, (long long)g->n);
            break;
        case SIGNAL_SIG_REJECTIONS:
            if (cfg->signature_rejections > 0 && g->n >= cfg->signature_rejections)
                ok = finding_add(out, "signature_rejections", s,
                                 json_pack("{s:I,s:I}", "rejected", (json_int_t)g->n, "window_ms",
                                           (json_int_t)cfg->window_ms),
                                 "source %s: %lld requests refused for a bad or missing signature within the window",
                                 s, (long long)g->n);
            break;
        case SIGNAL_DISABLED:
            ok = finding_add(out, "endpoint_disabled", s,
                             json_pack("{s:o}", "reason", g->account ? json_string(g->account) : json_null()),
                             "endpoint %s is disabled", s);
            break;
        default:
            break;
        }
    }
    return ok;
}

int alerts_decide(const struct alert_settings *cfg, const struct alert_signal_list *signals,
                  struct backlog_history **history, int64_t now, struct alert_findings *out)
{
    memset(out, 0, sizeof *out);
    if (*history == NULL && (*history = calloc(1, sizeof **history)) == NULL)
        return HOOKD_ENOMEM;
    if (!rule_backlog(cfg, signals, *history, now, out) || !rule_attempts(cfg, signals, out) ||
        !rule_counts(cfg, signals, now, out)) {
        alert_findings_free(out);
        return HOOKD_ENOMEM;
    }
    return 0;
}

/* ---- opening and resolving: one writer op each, alert and event together ------------------ */

struct change_op {
    bool open;
    struct alert alert;    /* open: what to open; resolve: the row as resolved (filled by the op) */
    char resolve_id[HOOKD_ID_MAX];
    int64_t at, quiet_since;
};

/*
 * The operational event: its id is the alert's and the change's, so a repeat could never send it twice.
 * An endpoint_disabled alert resolved because its endpoint was deleted is not a recovery: it resolves as
 * hookd.alert.resolved, hookd.endpoint.recovered only for an endpoint enabled again.
 */
static int event_write(struct store *s, const struct alert *a, bool opened)
{
    const char *type = alert_event_type(a->rule, opened);
    json_t *j = alert_json(a);
    char *payload = j ? json_dumps(j, JSON_COMPACT) : NULL;
    struct event ev = {0}, existing = {0};
    int r;

    json_decref(j);
    if (payload == NULL)
        return HOOKD_ENOMEM;
    if (!opened && a->subject && strcmp(a->rule, "endpoint_disabled") == 0) {
        struct endpoint ep = {0};
        r = store_endpoint_get(s, a->subject, &ep);
        endpoint_free(&ep);
        if (r == HOOKD_ENOTFOUND)
            type = "hookd.alert.resolved";
        else if (r != 0) {
            free(payload);
            return r;
        }
    }
    snprintf(ev.id, sizeof ev.id, "%.48s.%s", a->id, opened ? "opened" : "resolved");
    ev.type = (char *)type; /* borrowed: the insert only reads it */
    ev.payload = payload;
    r = store_event_insert(s, &ev, &existing);
    event_free(&existing);
    free(payload);
    return r;
}

static int op_change(struct store *s, void *arg)
{
    struct change_op *o = arg;
    int r;

    if (o->open) {
        r = store_alert_open(s, &o->alert, o->quiet_since);
    } else {
        r = store_alert_resolve(s, o->resolve_id, o->at, &o->alert);
    }
    if (r == 0)
        r = event_write(s, &o->alert, o->open);
    return r;
}

struct alerts {
    struct alerts_deps deps;
    struct store *s;
    struct backlog_history *history;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stopping, started;
    struct log_limiter lim;
};

static void change_logged(const struct alerts *a, const struct change_op *o)
{
    if (o->open)
        log_warn(PART, "alert %s opened (%s, %s): %s", o->alert.id, o->alert.rule, o->alert.subject,
                 o->alert.message);
    else
        log_info(PART, "alert %s resolved (%s, %s)", o->alert.id, o->alert.rule, o->alert.subject);
    metrics_count(o->open ? METRIC_ALERTS_OPENED : METRIC_ALERTS_RESOLVED);
    hub_notify(a->deps.hub, HUB_OUTBOX_CHANGED);
}

/* Runs one change through the writer and waits for its commit. EEXISTS / ENOTFOUND: another node did it. */
static int change_run(struct alerts *a, struct change_op *o)
{
    int r = writer_exec(a->deps.writer, op_change, o);

    if (r == 0)
        change_logged(a, o);
    else if (r != HOOKD_EEXISTS && r != HOOKD_ENOTFOUND)
        log_limited(&a->lim, LOG_WARN, PART, "cannot %s an alert (%s): %s", o->open ? "open" : "resolve",
                    o->open ? o->alert.rule : o->resolve_id, hookd_strerror(r));
    return r == HOOKD_EEXISTS || r == HOOKD_ENOTFOUND ? 0 : r;
}

static bool pair_in(const struct alert_finding *items, size_t n, const char *rule, const char *subject)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(items[i].rule, rule) == 0 && strcmp(items[i].subject, subject) == 0)
            return true;
    return false;
}

int alerts_evaluate(struct alerts *a, int64_t now)
{
    const struct alert_settings *cfg = &a->deps.settings;
    struct alert_signal_list sig = {0};
    struct alert_list open = {0};
    struct alert_filter af = {.status = 0, .limit = OPEN_LIST_MAX};
    struct alert_findings found = {0};
    int r = store_alert_signals(a->s, now - cfg->window_ms, &sig);

    if (r == 0)
        r = store_alert_list(a->s, &af, &open);
    if (r == 0)
        r = alerts_decide(cfg, &sig, &a->history, now, &found);
    for (size_t i = 0; r == 0 && i < found.n; i++) {
        const struct alert_finding *f = &found.items[i];
        bool is_open = false;
        for (size_t k = 0; k < open.n && !is_open; k++)
            is_open = strcmp(open.items[k].rule, f->rule) == 0 && strcmp(open.items[k].subject, f->subject) == 0;
        if (is_open)
            continue;
        struct change_op o = {.open = true, .at = now, .quiet_since = now - cfg->reopen_after_ms};
        snprintf(o.alert.rule, sizeof o.alert.rule, "%s", f->rule);
        o.alert.subject = f->subject;
        o.alert.message = f->message;
        o.alert.details = f->details;
        o.alert.opened_at = now;
        r = change_run(a, &o); /* the strings stay found's */
    }
    for (size_t k = 0; r == 0 && k < open.n; k++) {
        const struct alert *x = &open.items[k];
        if (pair_in(found.items, found.n, x->rule, x->subject) ||
            pair_in(found.undecided, found.n_undecided, x->rule, x->subject))
            continue;
        struct change_op o = {.open = false, .at = now};
        snprintf(o.resolve_id, sizeof o.resolve_id, "%s", x->id);
        r = change_run(a, &o);
        alert_free(&o.alert);
    }
    alert_findings_free(&found);
    alert_list_free(&open);
    alert_signal_list_free(&sig);
    return r;
}

/* ---- the thread ------------------------------------------------------------------------ */

static void *alerts_main(void *arg)
{
    struct alerts *a = arg;

    pthread_mutex_lock(&a->mu);
    while (!a->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += a->deps.interval_ms / 1000;
        until.tv_nsec += (a->deps.interval_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        while (!a->stopping && pthread_cond_timedwait(&a->cv, &a->mu, &until) != ETIMEDOUT) {
        }
        if (a->stopping)
            break;
        pthread_mutex_unlock(&a->mu);
        int r = alerts_evaluate(a, clock_now_ms());
        if (r != 0)
            log_limited(&a->lim, LOG_WARN, PART, "alert evaluation failed: %s (tried again next interval)",
                        hookd_strerror(r));
        else
            log_limiter_reset(&a->lim, PART, "alert evaluation");
        pthread_mutex_lock(&a->mu);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

int alerts_start(const struct alerts_deps *deps, struct alerts **out)
{
    struct alerts *a = calloc(1, sizeof *a);
    int r;

    *out = NULL;
    if (a == NULL)
        return HOOKD_ENOMEM;
    a->deps = *deps;
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    r = store_open(deps->store, &a->s);
    if (r == 0 && deps->interval_ms > 0) {
        r = pthread_create(&a->thread, NULL, alerts_main, a) == 0 ? 0 : HOOKD_ENOMEM;
        a->started = r == 0;
    }
    if (r != 0) {
        alerts_stop(a);
        return r;
    }
    *out = a;
    return 0;
}

void alerts_stop(struct alerts *a)
{
    if (a == NULL)
        return;
    pthread_mutex_lock(&a->mu);
    a->stopping = true;
    pthread_cond_signal(&a->cv);
    pthread_mutex_unlock(&a->mu);
    if (a->started)
        pthread_join(a->thread, NULL);
    store_close(a->s);
    backlog_history_free(a->history);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    free(a);
}
