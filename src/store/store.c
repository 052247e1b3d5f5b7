/*
 * The store front: finds a backend by DSN, and the thin store_*() wrappers
 * every caller goes through (the one place for test fault injection), plus
 * the record helpers (free, copy, status and ordering names).
 */
#include "store/store.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/secret_box.h"
#include "store/store_common.h"

/* ---- backends ----------------------------------------------------------- */

/* Every backend's `struct store` begins with its `const struct store_ops *`. */
static const struct store_ops *const backends[] = {
    &store_sqlite_ops,
    &store_postgres_ops,
};

#define N_BACKENDS (sizeof backends / sizeof backends[0])

const struct store_ops *store_find(const char *dsn)
{
    if (!dsn)
        return NULL;
    for (size_t i = 0; i < N_BACKENDS; i++) {
        if (backends[i]->handles(dsn))
            return backends[i];
    }
    return NULL;
}

void store_process_owned(void) { store_sqlite_process_owned(); }

int store_open(const char *dsn, struct store **out)
{
    const struct store_ops *ops = store_find(dsn);

    *out = NULL;
    if (!ops || ops->version != STORE_OPS_VERSION)
        return HOOKD_EINVAL;
    return ops->open(dsn, out);
}

/* A pointer to a struct may be converted to a pointer to its first member. */
const struct store_ops *store_backend(struct store *s) { return *(const struct store_ops *const *)(void *)s; }

void store_close(struct store *s)
{
    if (s)
        store_backend(s)->close(s);
}

/* ---- fault injection ---------------------------------------------------- */

static pthread_mutex_t fault_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool fault_armed;
static char fault_method[64];   /* empty: any method but the polling ones */
static int fault_countdown;
static int fault_err;
static atomic_uint_least64_t fault_calls; /* counted calls, for torture tests */
static _Thread_local bool fault_exempt;   /* this thread's calls are neither counted nor failed */

void store_fault_inject(const char *method, int n, int err)
{
    pthread_mutex_lock(&fault_mu);
    fault_method[0] = '\0';
    if (method)
        snprintf(fault_method, sizeof fault_method, "%s", method);
    fault_countdown = n > 0 ? n : 0;
    fault_err = err;
    atomic_store(&fault_armed, n > 0);
    pthread_mutex_unlock(&fault_mu);
}

bool store_fault_pending(void) { return atomic_load(&fault_armed); }
uint64_t store_fault_calls(void) { return atomic_load(&fault_calls); }
void store_fault_exempt_thread(bool exempt) { fault_exempt = exempt; }

/* The calls a loop makes every millisecond or so while idle: only a fault naming them hits them. */
static bool fault_polling(const char *method)
{
    return strcmp(method, "changed") == 0 || strcmp(method, "changed_fd") == 0;
}

/* Returns the injected error when this call is the armed one, else 0. */
/* Whether the armed method names this wrapper (under fault_mu): the same name, or a prefix ending in '*'. */
static bool fault_names(const char *method)
{
    size_t n = strlen(fault_method);

    if (n > 0 && fault_method[n - 1] == '*')
        return strncmp(fault_method, method, n - 1) == 0;
    return strcmp(fault_method, method) == 0;
}

static int fault_check(const char *method)
{
    int err = 0;
    bool polling;

    if (fault_exempt)
        return 0;
    polling = fault_polling(method);
    if (!polling)
        atomic_fetch_add_explicit(&fault_calls, 1, memory_order_relaxed);
    if (!atomic_load_explicit(&fault_armed, memory_order_relaxed))
        return 0;
    pthread_mutex_lock(&fault_mu);
    if (fault_countdown > 0 && (fault_method[0] == '\0' ? !polling : fault_names(method))) {
        if (--fault_countdown == 0) {
            err = fault_err;
            atomic_store(&fault_armed, false);
        }
    }
    pthread_mutex_unlock(&fault_mu);
    if (err == STORE_FAULT_KILL) {
        raise(SIGKILL);
        _exit(137); /* not reached */
    }
    return err;
}

int store_fault_from_env(const char *spec)
{
    char method[64];
    const char *colon, *end;
    long n;

    if (spec == NULL || spec[0] == '\0')
        return 0;
    colon = strchr(spec, ':');
    if (colon == NULL || colon == spec || (size_t)(colon - spec) >= sizeof method)
        return HOOKD_EINVAL;
    memcpy(method, spec, (size_t)(colon - spec));
    method[colon - spec] = '\0';
    errno = 0;
    n = strtol(colon + 1, (char **)&end, 10);
    if (errno != 0 || end == colon + 1 || n < 1 || n > 1000000)
        return HOOKD_EINVAL;
    if (*end == '\0') {
        store_fault_inject(method, (int)n, HOOKD_EIO);
        return 0;
    }
    if (strcmp(end, ":kill") != 0)
        return HOOKD_EINVAL;
    store_fault_inject(method, (int)n, STORE_FAULT_KILL);
    return 0;
}

/* ---- wrappers ----------------------------------------------------------- */

/*
 * Every wrapper is store_<method> and goes through the fault check under the
 * name <method> (its own name without "store_"), then to the backend's
 * method: a connection method of struct store_ops, or one of a family's
 * sub-table. A backend without the method or the family: HOOKD_EUNAVAIL.
 * The asserts catch what is a caller's bug on any backend (a NULL out
 * pointer, an array missing for n > 0); what depends on the data (an invalid
 * row, an unknown id) is the backend's to answer.
 */
#define FAULT_NAME (__func__ + sizeof "store_" - 1)

#define STORE_CALL(s, method, ...)                                        \
    do {                                                                  \
        const struct store_ops *ops_ = store_backend(s);                  \
        int fault_ = fault_check(FAULT_NAME);                             \
        if (fault_)                                                       \
            return fault_;                                                \
        if (!ops_->method)                                                \
            return HOOKD_EUNAVAIL;                                        \
        return ops_->method(s __VA_OPT__(,) __VA_ARGS__);                 \
    } while (0)

#define FAMILY_CALL(s, family, method, ...)                               \
    do {                                                                  \
        const struct store_ops *ops_ = store_backend(s);                  \
        int fault_ = fault_check(FAULT_NAME);                             \
        if (fault_)                                                       \
            return fault_;                                                \
        if (!ops_->family || !ops_->family->method)                       \
            return HOOKD_EUNAVAIL;                                        \
        return ops_->family->method(s __VA_OPT__(,) __VA_ARGS__);         \
    } while (0)

int store_migrate(struct store *s) { assert(s); STORE_CALL(s, migrate); }
int store_begin(struct store *s) { assert(s); STORE_CALL(s, begin); }
int store_commit(struct store *s) { assert(s); STORE_CALL(s, commit); }
int store_commit_lazy(struct store *s) { assert(s); STORE_CALL(s, commit_lazy); }
int store_rollback(struct store *s) { assert(s); STORE_CALL(s, rollback); }
int store_savepoint(struct store *s) { assert(s); STORE_CALL(s, savepoint); }
int store_release(struct store *s) { assert(s); STORE_CALL(s, release); }
int store_rollback_to(struct store *s) { assert(s); STORE_CALL(s, rollback_to); }

int store_changed(struct store *s, bool *changed)
{
    assert(s && changed);
    STORE_CALL(s, changed, changed);
}

int store_watch(struct store *s, const char *channel)
{
    assert(s && channel);
    return store_backend(s)->watch ? store_backend(s)->watch(s, channel) : 0;
}

int store_maintain(struct store *s)
{
    assert(s);
    return store_backend(s)->maintain ? store_backend(s)->maintain(s) : 0;
}

int store_changed_fd(struct store *s)
{
    assert(s);
    return fault_check(FAULT_NAME) != 0 || !store_backend(s)->changed_fd ? -1 : store_backend(s)->changed_fd(s);
}

int store_lock_wait(struct store *s, int64_t ms)
{
    assert(s && ms > 0);
    return store_backend(s)->lock_wait ? store_backend(s)->lock_wait(s, ms) : HOOKD_EUNAVAIL;
}

int store_checkpoint_aside(struct store *s)
{
    assert(s);
    return store_backend(s)->checkpoint_aside ? store_backend(s)->checkpoint_aside(s) : 0;
}

void store_checkpoint_due(struct store *s)
{
    assert(s);
    if (store_backend(s)->checkpoint_due)
        store_backend(s)->checkpoint_due(s);
}

bool store_others_open(struct store *s)
{
    assert(s);
    return store_backend(s)->others_open ? store_backend(s)->others_open(s) : false;
}

int store_quiet_outbox(struct store *s)
{
    assert(s);
    return store_backend(s)->quiet_outbox ? store_backend(s)->quiet_outbox(s) : 0;
}

/* ---- meta ---- */

int store_meta_get(struct store *s, const char *key, char **value_out)
{
    assert(s && key && value_out);
    FAMILY_CALL(s, meta, get, key, value_out);
}

int store_meta_set(struct store *s, const char *key, const char *value)
{
    assert(s && key);
    FAMILY_CALL(s, meta, set, key, value);
}

/* ---- events ---- */

int store_event_insert(struct store *s, struct event *ev, struct event *existing)
{
    assert(s && ev && ev != existing);
    FAMILY_CALL(s, events, insert, ev, existing);
}

int store_event_get(struct store *s, const char *id, struct event *out)
{
    assert(s && id && out);
    FAMILY_CALL(s, events, get, id, out);
}

int store_event_list(struct store *s, const struct event_filter *f, struct event_list *out)
{
    assert(s && f && out);
    FAMILY_CALL(s, events, list, f, out);
}

int store_outbox_fetch(struct store *s, int64_t after_seq, int limit, struct event_list *out)
{
    assert(s && out && after_seq >= 0);
    FAMILY_CALL(s, events, fetch, after_seq, limit, out);
}

int store_outbox_mark_dispatched(struct store *s, const int64_t *seqs, size_t n, int64_t at)
{
    assert(s && (n == 0 || seqs));
    FAMILY_CALL(s, events, mark_dispatched, seqs, n, at);
}

int store_outbox_reject(struct store *s, int64_t seq, const char *error, int64_t at)
{
    assert(s && error);
    FAMILY_CALL(s, events, reject, seq, error, at);
}

int store_outbox_pending(struct store *s, bool *any)
{
    assert(s && any);
    FAMILY_CALL(s, events, pending, any);
}

int store_outbox_take(struct store *s, int limit, int64_t at, struct event_list *out, int64_t *endpoints_version)
{
    assert(s && out && endpoints_version);
    out->items = NULL;
    out->n = 0;
    FAMILY_CALL(s, events, take, limit, at, out, endpoints_version);
}

/* ---- endpoints ---- */

int store_endpoint_insert(struct store *s, const struct endpoint *ep)
{
    assert(s && ep);
    FAMILY_CALL(s, endpoints, insert, ep);
}

int store_endpoint_update(struct store *s, const struct endpoint *ep)
{
    assert(s && ep);
    FAMILY_CALL(s, endpoints, update, ep);
}

int store_endpoint_get(struct store *s, const char *id, struct endpoint *out)
{
    assert(s && id && out);
    FAMILY_CALL(s, endpoints, get, id, out);
}

int store_endpoint_list(struct store *s, const struct endpoint_filter *f, struct endpoint_list *out)
{
    assert(s && f && out);
    FAMILY_CALL(s, endpoints, list, f, out);
}

int store_endpoint_list_all(struct store *s, struct endpoint_list *out)
{
    assert(s && out);
    FAMILY_CALL(s, endpoints, list_all, out);
}

int store_endpoint_delete(struct store *s, const char *id)
{
    assert(s && id);
    FAMILY_CALL(s, endpoints, delete, id);
}

int store_endpoint_set_enabled(struct store *s, const char *id, bool enabled, const char *reason, int64_t at)
{
    assert(s && id && at >= 0);
    FAMILY_CALL(s, endpoints, set_enabled, id, enabled, reason, at);
}

int store_endpoint_version(struct store *s, int64_t *version)
{
    assert(s && version);
    FAMILY_CALL(s, endpoints, version, version);
}

/* ---- deliveries ---- */

int store_delivery_insert(struct store *s, const struct delivery *d)
{
    assert(s && d);
    FAMILY_CALL(s, deliveries, insert, d);
}

int store_delivery_insert_many(struct store *s, const struct delivery *ds, size_t n)
{
    assert(s && (n == 0 || ds));
    FAMILY_CALL(s, deliveries, insert_many, ds, n);
}

int store_delivery_claim_due(struct store *s, const char *node, int64_t now, int64_t lease_until, int limit,
                             const struct lease_limits *lim, struct job_list *out)
{
    assert(s && out && lim && lease_until >= now);
    FAMILY_CALL(s, deliveries, claim_due, node, now, lease_until, limit, lim, out);
}

void lease_limits_held(const struct lease_limits *lim, const char *endpoint_id)
{
    if (lim->n_held == NULL)
        return;
    if (*lim->n_held < lim->held_room)
        snprintf(lim->held[*lim->n_held], HOOKD_ID_MAX, "%s", endpoint_id);
    (*lim->n_held)++;
}

int store_delivery_slots(struct store *s, int64_t now, const struct lease_limits *lim,
                         const char *const *endpoint_ids, size_t n, int *slots)
{
    assert(s && lim && (n == 0 || (endpoint_ids && slots)));
    FAMILY_CALL(s, deliveries, slots, now, lim, endpoint_ids, n, slots);
}

int store_delivery_next_due(struct store *s, int64_t *at)
{
    assert(s && at);
    FAMILY_CALL(s, deliveries, next_due, at);
}

int store_delivery_supersede(struct store *s, const char *const *endpoint_ids, const char *const *order_keys, size_t n,
                             int64_t now)
{
    assert(s && (n == 0 || (endpoint_ids && order_keys)));
    FAMILY_CALL(s, deliveries, supersede, endpoint_ids, order_keys, n, now);
}

int store_delivery_complete(struct store *s, const struct delivery_result *r, int64_t now)
{
    assert(s && r);
    FAMILY_CALL(s, deliveries, complete, r, now);
}

int store_delivery_complete_many(struct store *s, const struct delivery_result *rs, size_t n, int64_t now,
                                 int *results)
{
    assert(s && (n == 0 || (rs && results)));
    FAMILY_CALL(s, deliveries, complete_many, rs, n, now, results);
}

int store_delivery_release(struct store *s, const char *id, const char *owner, int64_t token)
{
    assert(s && id && owner);
    FAMILY_CALL(s, deliveries, release, id, owner, token);
}

int store_delivery_release_node(struct store *s, const char *node)
{
    assert(s && node);
    FAMILY_CALL(s, deliveries, release_node, node);
}

int store_delivery_renew(struct store *s, const char *node, const char *const *ids, const int64_t *tokens, size_t n,
                         int64_t lease_until, bool *renewed)
{
    assert(s && node && (n == 0 || (ids && tokens && renewed)));
    FAMILY_CALL(s, deliveries, renew, node, ids, tokens, n, lease_until, renewed);
}

int store_delivery_get(struct store *s, const char *id, struct delivery *out)
{
    assert(s && id && out);
    FAMILY_CALL(s, deliveries, get, id, out);
}

int store_delivery_replay(struct store *s, const char *id, int64_t now, struct delivery *out)
{
    assert(s && id && out);
    FAMILY_CALL(s, deliveries, replay, id, now, out);
}

int store_delivery_list(struct store *s, const struct delivery_filter *f, struct delivery_list *out)
{
    assert(s && f && out);
    FAMILY_CALL(s, deliveries, list, f, out);
}

int store_attempt_list(struct store *s, const char *delivery_id, struct attempt_list *out)
{
    assert(s && delivery_id && out);
    FAMILY_CALL(s, deliveries, attempt_list, delivery_id, out);
}

/* ---- names -------------------------------------------------------------- */

static const char *const ordering_names[] = {
    [ORDERING_NONE] = "none",
    [ORDERING_KEY] = "key",
    [ORDERING_LATEST] = "latest",
};

static const char *const status_names[] = {
    [DELIVERY_PENDING] = "pending",
    [DELIVERY_RETRYING] = "retrying",
    [DELIVERY_DELIVERED] = "delivered",
    [DELIVERY_DEAD] = "dead",
    [DELIVERY_SUPERSEDED] = "superseded",
    [DELIVERY_SKIPPED] = "skipped",
};

#define N_ORDERINGS (sizeof ordering_names / sizeof ordering_names[0])
#define N_STATUSES (sizeof status_names / sizeof status_names[0])

const char *ordering_name(enum ordering_mode m) { return (size_t)m < N_ORDERINGS ? ordering_names[m] : "none"; }

int ordering_parse(const char *s, enum ordering_mode *out)
{
    for (size_t i = 0; s && i < N_ORDERINGS; i++) {
        if (strcmp(s, ordering_names[i]) == 0) {
            *out = (enum ordering_mode)i;
            return 0;
        }
    }
    return HOOKD_EINVAL;
}

const char *delivery_status_name(enum delivery_status st) { return (size_t)st < N_STATUSES ? status_names[st] : "?"; }

int delivery_status_parse(const char *s, enum delivery_status *out)
{
    for (size_t i = 0; s && i < N_STATUSES; i++) {
        if (strcmp(s, status_names[i]) == 0) {
            *out = (enum delivery_status)i;
            return 0;
        }
    }
    return HOOKD_EINVAL;
}

bool delivery_status_valid(int st) { return st >= DELIVERY_PENDING && st <= DELIVERY_SKIPPED; }
bool delivery_status_open(enum delivery_status st) { return st == DELIVERY_PENDING || st == DELIVERY_RETRYING; }

bool delivery_insertable(const struct delivery *d)
{
    return d->id[0] != '\0' && d->event_id[0] != '\0' && d->endpoint_id[0] != '\0' && delivery_status_valid((int)d->status);
}

bool delivery_result_valid(const struct delivery_result *r)
{
    return r->delivery_id && r->lease_owner && delivery_status_valid((int)r->status);
}

/* ---- records ------------------------------------------------------------ */

void event_free(struct event *e)
{
    if (!e)
        return;
    free(e->type);
    free(e->account);
    free(e->resource_type);
    free(e->resource_id);
    free(e->payload);
    free(e->idempotency_key);
    free(e->error);
    memset(e, 0, sizeof *e);
}

static void secret_free(struct endpoint_secret *sec)
{
    if (sec->key) {
        explicit_bzero(sec->key, strlen(sec->key));
        free(sec->key);
    }
    memset(sec, 0, sizeof *sec);
}

void endpoint_free(struct endpoint *ep)
{
    if (!ep)
        return;
    free(ep->account);
    free(ep->url);
    free(ep->description);
    for (size_t i = 0; i < ep->n_event_types && i < ENDPOINT_MAX_TYPES; i++)
        free(ep->event_types[i]);
    for (size_t i = 0; i < ep->n_secrets && i < ENDPOINT_MAX_SECRETS; i++)
        secret_free(&ep->secrets[i]);
    free(ep->disabled_reason);
    for (size_t i = 0; i < ep->n_headers && i < CUSTOM_HEADERS_MAX; i++)
        free(ep->headers[i]);
    memset(ep, 0, sizeof *ep);
}

/* strdup that keeps NULL and reports failure through *ok. */
static char *dup_or_null(const char *s, bool *ok)
{
    char *d;

    if (!s)
        return NULL;
    d = strdup(s);
    if (!d)
        *ok = false;
    return d;
}

int endpoint_copy(struct endpoint *dst, const struct endpoint *src)
{
    bool ok = true;

    if (src->n_event_types > ENDPOINT_MAX_TYPES || src->n_secrets > ENDPOINT_MAX_SECRETS ||
        src->n_retry_schedule > RETRY_MAX_SCHEDULE || src->n_headers > CUSTOM_HEADERS_MAX)
        return HOOKD_EINVAL;
    /* Scalars and the id first; every pointer is then replaced by its copy. */
    *dst = *src;
    dst->account = dup_or_null(src->account, &ok);
    dst->url = dup_or_null(src->url, &ok);
    dst->description = dup_or_null(src->description, &ok);
    dst->disabled_reason = dup_or_null(src->disabled_reason, &ok);
    for (size_t i = 0; i < src->n_event_types; i++)
        dst->event_types[i] = dup_or_null(src->event_types[i], &ok);
    for (size_t i = 0; i < src->n_secrets; i++)
        dst->secrets[i].key = dup_or_null(src->secrets[i].key, &ok);
    for (size_t i = 0; i < src->n_headers; i++)
        dst->headers[i] = dup_or_null(src->headers[i], &ok);
    if (!ok) {
        endpoint_free(dst);
        return HOOKD_ENOMEM;
    }
    return 0;
}

void delivery_free(struct delivery *d)
{
    if (!d)
        return;
    free(d->account);
    free(d->last_error);
    free(d->lease_owner);
    free(d->order_key);
    memset(d, 0, sizeof *d);
}

int delivery_order_key(enum ordering_mode m, const struct event *ev, char **out)
{
    size_t n;

    *out = NULL;
    if (m == ORDERING_NONE || ev->resource_type == NULL || ev->resource_id == NULL)
        return 0;
    /* The type's length first: "K5:order" "12" and "K6:order1" "2" differ. */
    n = strlen(ev->resource_type) + strlen(ev->resource_id) + 32;
    *out = malloc(n);
    if (*out == NULL)
        return HOOKD_ENOMEM;
    snprintf(*out, n, "%c%zu:%s%s", m == ORDERING_LATEST ? 'L' : 'K', strlen(ev->resource_type), ev->resource_type,
             ev->resource_id);
    return 0;
}

void delivery_job_free(struct delivery_job *j)
{
    if (!j)
        return;
    delivery_free(&j->d);
    event_free(&j->ev);
}

void attempt_free(struct attempt *a)
{
    if (!a)
        return;
    free(a->error_class);
    free(a->error);
    free(a->response);
    free(a->node);
    memset(a, 0, sizeof *a);
}

#define LIST_FREE(l, item_free)                      \
    do {                                             \
        if (!(l))                                    \
            return;                                  \
        for (size_t i_ = 0; i_ < (l)->n; i_++)       \
            item_free(&(l)->items[i_]);              \
        free((l)->items);                            \
        (l)->items = NULL;                           \
        (l)->n = 0;                                  \
    } while (0)

void event_list_free(struct event_list *l) { LIST_FREE(l, event_free); }
void endpoint_list_free(struct endpoint_list *l) { LIST_FREE(l, endpoint_free); }
void delivery_list_free(struct delivery_list *l) { LIST_FREE(l, delivery_free); }
void job_list_free(struct job_list *l) { LIST_FREE(l, delivery_job_free); }
void attempt_list_free(struct attempt_list *l) { LIST_FREE(l, attempt_free); }

/* ---- endpoint state ---- */

int store_endpoint_state_record(struct store *s, struct endpoint_outcome *o, size_t n, const struct breaker_policy *p,
                                int64_t now)
{
    assert(s && p && (n == 0 || o));
    FAMILY_CALL(s, endpoint_state, record, o, n, p, now);
}

int store_endpoint_state_get(struct store *s, const char *endpoint_id, struct endpoint_state *out)
{
    assert(s && endpoint_id && out);
    FAMILY_CALL(s, endpoint_state, get, endpoint_id, out);
}

int store_endpoint_state_get_many(struct store *s, const char *const *endpoint_ids, size_t n,
                                  struct endpoint_state *out)
{
    assert(s && (n == 0 || (endpoint_ids && out)));
    FAMILY_CALL(s, endpoint_state, get_many, endpoint_ids, n, out);
}

int store_endpoint_state_reset(struct store *s, const char *endpoint_id)
{
    assert(s && endpoint_id);
    FAMILY_CALL(s, endpoint_state, reset, endpoint_id);
}

int store_endpoint_state_expire_paused(struct store *s, int64_t now, int64_t window_ms, int64_t *n)
{
    assert(s && window_ms > 0);
    FAMILY_CALL(s, endpoint_state, expire_paused, now, window_ms, n);
}

static const char *const breaker_names[] = {[BREAKER_CLOSED] = "closed", [BREAKER_OPEN] = "open",
                                            [BREAKER_HALF_OPEN] = "half_open"};

const char *breaker_name(enum breaker_state b)
{
    return (size_t)b < sizeof breaker_names / sizeof breaker_names[0] ? breaker_names[b] : "closed";
}

int breaker_parse(const char *s, enum breaker_state *out)
{
    for (size_t i = 0; s && i < sizeof breaker_names / sizeof breaker_names[0]; i++) {
        if (strcmp(s, breaker_names[i]) == 0) {
            *out = (enum breaker_state)i;
            return 0;
        }
    }
    return HOOKD_EINVAL;
}

/* ---- inbound: sources, inbox, rejections --------------------------------- */

/*
 * A source's secrets column is sealed here, for both backends, with "source:<name>" as the row's
 * identity (core/secret_box.h); store_read_source opens it. *sealed borrows src's other fields.
 */
static int source_sealed(const struct source *src, struct source *sealed)
{
    char aad[16 + SOURCE_NAME_MAX];

    *sealed = *src;
    sealed->secrets = NULL;
    snprintf(aad, sizeof aad, "source:%s", src->name);
    return src->secrets ? secret_box_seal(aad, src->secrets, &sealed->secrets) : 0;
}

static int store_source_insert_sealed(struct store *s, const struct source *src) { FAMILY_CALL(s, sources, insert, src); }
static int store_source_update_sealed(struct store *s, const struct source *src) { FAMILY_CALL(s, sources, update, src); }

int store_source_insert(struct store *s, const struct source *src)
{
    struct source sealed;
    int result;

    assert(s && src);
    result = source_sealed(src, &sealed);
    if (result == 0)
        result = store_source_insert_sealed(s, &sealed);
    secret_text_free(sealed.secrets);
    return result;
}

int store_source_update(struct store *s, const struct source *src)
{
    struct source sealed;
    int result;

    assert(s && src);
    result = source_sealed(src, &sealed);
    if (result == 0)
        result = store_source_update_sealed(s, &sealed);
    secret_text_free(sealed.secrets);
    return result;
}

int store_source_get(struct store *s, const char *name, struct source *out)
{
    assert(s && name && out);
    FAMILY_CALL(s, sources, get, name, out);
}

int store_source_list(struct store *s, const struct source_filter *f, struct source_list *out)
{
    assert(s && f && out);
    FAMILY_CALL(s, sources, list, f, out);
}

int store_source_list_all(struct store *s, struct source_list *out)
{
    assert(s && out);
    FAMILY_CALL(s, sources, list_all, out);
}

int store_source_delete(struct store *s, const char *name)
{
    assert(s && name);
    FAMILY_CALL(s, sources, delete, name);
}

int store_source_version(struct store *s, int64_t *version)
{
    assert(s && version);
    FAMILY_CALL(s, sources, version, version);
}

int store_inbox_insert(struct store *s, struct inbox_item *it, struct inbox_outcome *out)
{
    assert(s && it && out);
    FAMILY_CALL(s, inbox, insert, it, out);
}

int store_inbox_insert_many(struct store *s, struct inbox_item *const *items, size_t n, struct inbox_outcome *outs)
{
    assert(s && ((items && outs) || n == 0));
    FAMILY_CALL(s, inbox, insert_many, items, n, outs);
}

int store_inbox_get(struct store *s, const char *id, struct inbox_item *out)
{
    assert(s && id && out);
    FAMILY_CALL(s, inbox, get, id, out);
}

int store_inbox_list(struct store *s, const struct inbox_filter *f, struct inbox_list *out)
{
    assert(s && f && out);
    FAMILY_CALL(s, inbox, list, f, out);
}

int store_inbox_claim_due(struct store *s, const char *node, int64_t now, int64_t lease_until, int limit,
                          struct inbox_list *out)
{
    assert(s && node && out && limit > 0 && limit <= STORE_LIST_MAX);
    FAMILY_CALL(s, inbox, claim_due, node, now, lease_until, limit, out);
}

int store_inbox_complete(struct store *s, const struct inbox_result *r, int64_t now)
{
    assert(s && r && r->id && r->lease_owner);
    FAMILY_CALL(s, inbox, complete, r, now);
}

int store_inbox_replay(struct store *s, const char *id, int64_t now, struct inbox_item *out)
{
    assert(s && id);
    FAMILY_CALL(s, inbox, replay, id, now, out);
}

int store_inbox_replay_range(struct store *s, const struct inbox_filter *f, bool dry_run, int64_t now,
                             int64_t *count)
{
    assert(s && f && count && f->limit > 0 && f->limit <= INBOX_REPLAY_MAX);
    assert(f->status == INBOX_DEFERRED || f->status == INBOX_QUARANTINED);
    FAMILY_CALL(s, inbox, replay_range, f, dry_run, now, count);
}

int store_inbox_release_node(struct store *s, const char *node)
{
    assert(s && node);
    FAMILY_CALL(s, inbox, release_node, node);
}

int store_rejection_insert(struct store *s, struct rejection *r, int keep)
{
    assert(s && r && keep > 0);
    FAMILY_CALL(s, rejections, insert, r, keep);
}

int store_rejection_list(struct store *s, const struct rejection_filter *f, struct rejection_list *out)
{
    assert(s && f && f->source && out);
    FAMILY_CALL(s, rejections, list, f, out);
}

int store_rejection_counts(struct store *s, const char *source, struct rejection_count_list *out)
{
    assert(s && source && out);
    FAMILY_CALL(s, rejections, counts, source, out);
}

/* ---- operations: alerts, figures, retention ---- */

int store_alert_open(struct store *s, struct alert *a, int64_t quiet_since)
{
    assert(s && a && a->rule[0] && a->subject && a->message && a->details);
    FAMILY_CALL(s, alerts, open, a, quiet_since);
}

int store_alert_resolve(struct store *s, const char *id, int64_t at, struct alert *out)
{
    assert(s && id && out);
    FAMILY_CALL(s, alerts, resolve, id, at, out);
}

int store_alert_get(struct store *s, const char *id, struct alert *out)
{
    assert(s && id && out);
    FAMILY_CALL(s, alerts, get, id, out);
}

int store_alert_list(struct store *s, const struct alert_filter *f, struct alert_list *out)
{
    assert(s && f && out);
    FAMILY_CALL(s, alerts, list, f, out);
}

int store_alert_signals(struct store *s, int64_t since, struct alert_signal_list *out)
{
    assert(s && out);
    FAMILY_CALL(s, alerts, signals, since, out);
}

int store_figures(struct store *s, int64_t now, struct store_figures *out)
{
    assert(s && out);
    FAMILY_CALL(s, upkeep, figures, now, out);
}

int store_purge_deliveries(struct store *s, int64_t before, int limit, int64_t *purged)
{
    assert(s && limit > 0 && purged);
    FAMILY_CALL(s, upkeep, purge_deliveries, before, limit, purged);
}

int store_purge_events(struct store *s, int64_t after_seq, int64_t before, int limit, int64_t *next_seq,
                       int64_t *purged)
{
    assert(s && limit > 0 && next_seq && purged);
    FAMILY_CALL(s, upkeep, purge_events, after_seq, before, limit, next_seq, purged);
}

int store_purge_inbox(struct store *s, int64_t before, int limit, int64_t *purged)
{
    assert(s && limit > 0 && purged);
    FAMILY_CALL(s, upkeep, purge_inbox, before, limit, purged);
}

void alert_free(struct alert *a)
{
    if (!a)
        return;
    free(a->subject);
    free(a->message);
    free(a->details);
    memset(a, 0, sizeof *a);
}

static void alert_signal_free(struct alert_signal *g)
{
    free(g->subject);
    free(g->account);
    memset(g, 0, sizeof *g);
}

void alert_list_free(struct alert_list *l) { LIST_FREE(l, alert_free); }
void alert_signal_list_free(struct alert_signal_list *l) { LIST_FREE(l, alert_signal_free); }

static const char *const inbox_status_names[] = {
    [INBOX_PENDING] = "pending",
    [INBOX_PROCESSED] = "processed",
    [INBOX_DEFERRED] = "deferred",
    [INBOX_QUARANTINED] = "quarantined",
};
#define N_INBOX_STATUSES (sizeof inbox_status_names / sizeof inbox_status_names[0])

const char *inbox_status_name(enum inbox_status st)
{
    return (size_t)st < N_INBOX_STATUSES ? inbox_status_names[st] : "?";
}

int inbox_status_parse(const char *s, enum inbox_status *out)
{
    for (size_t i = 0; s && i < N_INBOX_STATUSES; i++) {
        if (strcmp(s, inbox_status_names[i]) == 0) {
            *out = (enum inbox_status)i;
            return 0;
        }
    }
    return HOOKD_EINVAL;
}

void source_free(struct source *src)
{
    if (!src)
        return;
    free(src->definition);
    if (src->secrets) {
        explicit_bzero(src->secrets, strlen(src->secrets));
        free(src->secrets);
    }
    memset(src, 0, sizeof *src);
}

void inbox_item_free(struct inbox_item *it)
{
    if (!it)
        return;
    free(it->event_id);
    free(it->event_type);
    free(it->entity_kind);
    free(it->entity_id);
    free(it->payload);
    free(it->lease_owner);
    free(it->result);
    free(it->error);
    memset(it, 0, sizeof *it);
}

void rejection_free(struct rejection *r)
{
    if (!r)
        return;
    free(r->reason);
    free(r->peer);
    memset(r, 0, sizeof *r);
}

static void rejection_count_free(struct rejection_count *c)
{
    free(c->reason);
    memset(c, 0, sizeof *c);
}

void source_list_free(struct source_list *l) { LIST_FREE(l, source_free); }
void inbox_list_free(struct inbox_list *l) { LIST_FREE(l, inbox_item_free); }
void rejection_list_free(struct rejection_list *l) { LIST_FREE(l, rejection_free); }
void rejection_count_list_free(struct rejection_count_list *l) { LIST_FREE(l, rejection_count_free); }

/* ---- state machines ----------------------------------------------------- */

int store_machine_insert(struct store *s, const struct machine_record *m)
{
    assert(s && m);
    FAMILY_CALL(s, machines, insert, m);
}

int store_machine_update(struct store *s, const struct machine_record *m)
{
    assert(s && m);
    FAMILY_CALL(s, machines, update, m);
}

int store_machine_get(struct store *s, const char *name, struct machine_record *out)
{
    assert(s && name && out);
    FAMILY_CALL(s, machines, get, name, out);
}

int store_machine_list(struct store *s, const struct machine_filter *f, struct machine_list *out)
{
    assert(s && f && out);
    FAMILY_CALL(s, machines, list, f, out);
}

int store_machine_delete(struct store *s, const char *name)
{
    assert(s && name);
    FAMILY_CALL(s, machines, delete, name);
}

int store_entity_lock(struct store *s, const char *kind, const char *id)
{
    assert(s && kind && id);
    FAMILY_CALL(s, machines, entity_lock, kind, id);
}

int store_entity_hold(struct store *s, const char *machine, const char *kind, const char *id,
                      struct entity_hold *out)
{
    assert(s && machine && kind && id && out);
    memset(out, 0, sizeof *out);
    FAMILY_CALL(s, machines, entity_hold, machine, kind, id, NULL, out);
}

int store_entity_hold_window(struct store *s, const char *machine, const char *kind, const char *id,
                             const struct hold_window *w, struct entity_hold *out)
{
    assert(s && machine && kind && id && out); /* w NULL: every open item, as store_entity_hold */
    memset(out, 0, sizeof *out);
    FAMILY_CALL(s, machines, entity_hold, machine, kind, id, w, out);
}

void entity_hold_free(struct entity_hold *h)
{
    if (!h)
        return;
    machine_record_free(&h->machine);
    entity_record_free(&h->entity);
    inbox_list_free(&h->open);
    memset(h, 0, sizeof *h);
}

int store_entity_get(struct store *s, const char *kind, const char *id, struct entity_record *out)
{
    assert(s && kind && id && out);
    FAMILY_CALL(s, machines, entity_get, kind, id, out);
}

int store_entity_put(struct store *s, const struct entity_record *e)
{
    assert(s && e && e->kind && e->id);
    FAMILY_CALL(s, machines, entity_put, e);
}

int store_transition_insert(struct store *s, struct transition_record *t)
{
    assert(s && t && t->source && t->kind && t->entity_id && t->result);
    FAMILY_CALL(s, machines, transition_insert, t);
}

int store_transition_list(struct store *s, const char *kind, const char *id, struct transition_list *out)
{
    assert(s && kind && id && out);
    FAMILY_CALL(s, machines, transition_list, kind, id, out);
}

int store_inbox_settle(struct store *s, const struct inbox_settle *r, int64_t now)
{
    assert(s && r && r->id);
    FAMILY_CALL(s, machines, settle, r, now);
}

int store_decision_gather(struct store *s, int (*fn)(struct store *s, void *arg), void *arg)
{
    assert(s && fn);
    FAMILY_CALL(s, machines, decision_gather, fn, arg);
}

int store_inbox_taken(struct store *s, const char *source, const char *event_id, bool *taken)
{
    assert(s && source && event_id && taken);
    *taken = false;
    FAMILY_CALL(s, machines, inbox_taken, source, event_id, taken);
}

int store_inbox_insert_decided(struct store *s, struct inbox_item *it, const struct inbox_settle *r, int attempts,
                               int64_t now)
{
    assert(s && it && it->id[0] && r);
    FAMILY_CALL(s, machines, inbox_insert_decided, it, r, attempts, now);
}

int store_decision_write(struct store *s, struct decision_writes *w, int64_t now)
{
    assert(s && w && (w->n_transitions == 0 || w->transitions) && (w->n_events == 0 || w->events) &&
           (w->n_settles == 0 || w->settles) && (!w->complete || (w->complete->id && w->complete->lease_owner)));
    w->emitted = 0;
    w->complete_lost = false;
    FAMILY_CALL(s, machines, decision_write, w, now);
}

int store_audit(struct store *s, const char *source, int64_t since, int64_t until, struct audit_report *out)
{
    assert(s && out);
    FAMILY_CALL(s, machines, audit, source, since, until, out);
}

void machine_record_free(struct machine_record *m)
{
    if (!m)
        return;
    free(m->definition);
    memset(m, 0, sizeof *m);
}

void entity_record_free(struct entity_record *e)
{
    if (!e)
        return;
    free(e->kind);
    free(e->id);
    free(e->state);
    free(e->last_event_id);
    memset(e, 0, sizeof *e);
}

void transition_record_free(struct transition_record *t)
{
    if (!t)
        return;
    free(t->source);
    free(t->kind);
    free(t->entity_id);
    free(t->event_id);
    free(t->from_state);
    free(t->to_state);
    free(t->result);
    free(t->reason);
    free(t->worker);
    memset(t, 0, sizeof *t);
}

void machine_list_free(struct machine_list *l)
{
    for (size_t i = 0; l && i < l->n; i++)
        machine_record_free(&l->items[i]);
    if (l) {
        free(l->items);
        l->items = NULL;
        l->n = 0;
    }
}

void transition_list_free(struct transition_list *l)
{
    for (size_t i = 0; l && i < l->n; i++)
        transition_record_free(&l->items[i]);
    if (l) {
        free(l->items);
        l->items = NULL;
        l->n = 0;
    }
}

const char *transition_result_name(enum transition_result r)
{
    static const char *const names[] = {"applied", "stale", "deferred", "quarantined", "reconciled"};
    return (size_t)r < sizeof names / sizeof names[0] ? names[r] : "unknown";
}
/* ---- operations: replays and account tokens ------------------------------- */

int store_delivery_count(struct store *s, const struct delivery_filter *f, int64_t *n)
{
    assert(s && f && n);
    FAMILY_CALL(s, deliveries, count, f, n);
}

int store_delivery_replay_many(struct store *s, const char *const *ids, size_t n, unsigned statuses, int64_t now,
                               bool *replayed)
{
    assert(s && (n == 0 || (ids && replayed)) && n <= STORE_LIST_MAX);
    /* Only final statuses: an open delivery is never made pending twice. */
    assert((statuses & ((1u << DELIVERY_PENDING) | (1u << DELIVERY_RETRYING) | (1u << DELIVERY_SUPERSEDED))) == 0);
    FAMILY_CALL(s, deliveries, replay_many, ids, n, statuses, now, replayed);
}

int store_replay_insert(struct store *s, const struct replay *r)
{
    assert(s && r && r->id[0]);
    FAMILY_CALL(s, replays, insert, r);
}

int store_replay_record(struct store *s, const char *id, const char *const *delivery_ids, size_t n, int skipped,
                        bool done, int64_t at)
{
    assert(s && id && (n == 0 || delivery_ids));
    FAMILY_CALL(s, replays, record, id, delivery_ids, n, skipped, done, at);
}

int store_replay_get(struct store *s, const char *id, struct replay *out)
{
    assert(s && id && out);
    FAMILY_CALL(s, replays, get, id, out);
}

int store_replay_list(struct store *s, const struct replay_filter *f, struct replay_list *out)
{
    assert(s && f && out);
    FAMILY_CALL(s, replays, list, f, out);
}

int store_token_insert(struct store *s, const struct api_token *t)
{
    assert(s && t && t->id[0] && t->account && t->hash[0]);
    FAMILY_CALL(s, tokens, insert, t);
}

int store_token_get(struct store *s, const char *id, struct api_token *out)
{
    assert(s && id && out);
    FAMILY_CALL(s, tokens, get, id, out);
}

int store_token_list(struct store *s, const struct token_filter *f, struct token_list *out)
{
    assert(s && f && out);
    FAMILY_CALL(s, tokens, list, f, out);
}

int store_token_list_active(struct store *s, int64_t now, struct token_list *out)
{
    assert(s && out);
    FAMILY_CALL(s, tokens, list_active, now, out);
}

int store_token_revoke(struct store *s, const char *id, int64_t at)
{
    assert(s && id);
    FAMILY_CALL(s, tokens, revoke, id, at);
}

int store_token_version(struct store *s, int64_t *version)
{
    assert(s && version);
    FAMILY_CALL(s, tokens, version, version);
}

static const char *const replay_kind_names[] = {
    [REPLAY_DELIVERY] = "delivery",
    [REPLAY_EVENT] = "event",
    [REPLAY_RANGE] = "range",
};

const char *replay_kind_name(enum replay_kind k)
{
    return (unsigned)k < sizeof replay_kind_names / sizeof *replay_kind_names ? replay_kind_names[k] : "unknown";
}

int replay_kind_parse(const char *s, enum replay_kind *out)
{
    for (size_t i = 0; s && i < sizeof replay_kind_names / sizeof *replay_kind_names; i++) {
        if (strcmp(s, replay_kind_names[i]) == 0) {
            *out = (enum replay_kind)i;
            return 0;
        }
    }
    return HOOKD_EINVAL;
}

static const char *const token_scope_names[] = {
    [TOKEN_SCOPE_READ] = "read",
    [TOKEN_SCOPE_READ_REPLAY] = "read_replay",
};

const char *token_scope_name(enum token_scope sc)
{
    return (unsigned)sc < sizeof token_scope_names / sizeof *token_scope_names ? token_scope_names[sc] : "unknown";
}

int token_scope_parse(const char *s, enum token_scope *out)
{
    for (size_t i = 0; s && i < sizeof token_scope_names / sizeof *token_scope_names; i++) {
        if (strcmp(s, token_scope_names[i]) == 0) {
            *out = (enum token_scope)i;
            return 0;
        }
    }
    return HOOKD_EINVAL;
}

void replay_free(struct replay *r)
{
    if (!r)
        return;
    free(r->actor);
    free(r->account);
    free(r->filter);
    memset(r, 0, sizeof *r);
}

void api_token_free(struct api_token *t)
{
    if (!t)
        return;
    free(t->account);
    free(t->description);
    free(t->created_by);
    explicit_bzero(t->hash, sizeof t->hash);
    memset(t, 0, sizeof *t);
}

void replay_list_free(struct replay_list *l) { LIST_FREE(l, replay_free); }
void token_list_free(struct token_list *l) { LIST_FREE(l, api_token_free); }
/* ---- health ---- */

int store_health_record(struct store *s, const struct health_attempt *a, size_t n, int64_t purge_before)
{
    assert(s && (n == 0 || a) && purge_before >= 0);
    FAMILY_CALL(s, health, record, a, n, purge_before);
}

int store_health_queue(struct store *s, const char *endpoint_id, int64_t now, struct health_queue *out)
{
    assert(s && endpoint_id && out);
    FAMILY_CALL(s, health, queue, endpoint_id, now, out);
}

int store_health_activity(struct store *s, const char *endpoint_id, struct health_activity *out)
{
    assert(s && endpoint_id && out);
    FAMILY_CALL(s, health, activity, endpoint_id, out);
}

int store_health_window(struct store *s, const char *endpoint_id, int64_t since, struct health_window *out)
{
    assert(s && endpoint_id && out);
    FAMILY_CALL(s, health, window, endpoint_id, since, out);
}

int store_health_summary(struct store *s, int64_t since, struct health_window_list *windows,
                         struct health_failure_list *failures)
{
    assert(s && windows && failures);
    FAMILY_CALL(s, health, summary, since, windows, failures);
}

int store_health_oldest(struct store *s, struct health_oldest *out)
{
    assert(s && out);
    FAMILY_CALL(s, health, oldest, out);
}

int store_health_resource(struct store *s, const char *resource_type, const char *resource_id, const char *account,
                          struct resource_sync_list *out)
{
    assert(s && resource_type && resource_id && out);
    FAMILY_CALL(s, health, resource, resource_type, resource_id, account, out);
}

int store_stats_minutes(struct store *s, int64_t since, const char *endpoint_id, struct stats_minute *out, size_t n)
{
    assert(s && out && n > 0 && n <= STATS_MINUTES_MAX && since % HEALTH_MINUTE_MS == 0);
    FAMILY_CALL(s, stats, minutes, since, endpoint_id, out, n);
}

int store_stats_rejected(struct store *s, struct rejection_count_list *out)
{
    assert(s && out);
    FAMILY_CALL(s, stats, rejected, out);
}

void health_activity_free(struct health_activity *a)
{
    if (!a)
        return;
    free(a->last_error_class);
    free(a->last_error);
    memset(a, 0, sizeof *a);
}

static void health_window_free(struct health_window *w) { (void)w; }

void health_failure_list_free(struct health_failure_list *l) { LIST_FREE(l, store_free_health_failure); }
void health_window_list_free(struct health_window_list *l) { LIST_FREE(l, health_window_free); }
void resource_sync_list_free(struct resource_sync_list *l) { LIST_FREE(l, store_free_resource_sync); }
