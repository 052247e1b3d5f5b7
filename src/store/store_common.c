/*
 * Backend-neutral store code, shared by the SQLite and PostgreSQL backends:
 * record readers over a backend's result row, list building, list filters
 * in SQL, and the conflict check of an event insert.
 */
#include "store/store_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/duration.h"
#include "core/event_check.h"
#include "core/ids.h"
#include "core/secret_box.h"
#include "core/timefmt.h"
#include "log.h"
#include "store/endpoint_json.h"

/* ---- record readers ------------------------------------------------------ */

/*
 * A text column into a fixed buffer, cut at cap - 1 bytes as snprintf's "%s"
 * would cut it ("" for NULL), without printf's cost: a reader of rows copies
 * two or three of these a row, and the machines' decisions read about twenty
 * rows each (about 600 instructions a copy through snprintf).
 */
static void col_copy(const struct store_row *r, int col, char *out, size_t cap)
{
    const char *t = r->ops->text(r, col);
    size_t n = t ? strnlen(t, cap - 1) : 0;

    memcpy(out, t ? t : "", n);
    out[n] = '\0';
}

void store_row_id(const struct store_row *r, int col, char out[HOOKD_ID_MAX]) { col_copy(r, col, out, HOOKD_ID_MAX); }

static char *col_str(const struct store_row *r, int col, bool *ok) { return r->ops->str(r, col, ok); }
static int64_t col_i64(const struct store_row *r, int col) { return r->ops->i64(r, col); }
static int col_int(const struct store_row *r, int col) { return (int)r->ops->i64(r, col); }

/* The first broken rule of one text column as stored (before a C string could cut it), into ev. */
static void event_check_col(const struct store_row *r, int col, const char *field,
                            const char *(*problem)(const char *, size_t), struct event *ev)
{
    const char *t = r->ops->text(r, col);
    const char *why;

    if (ev->bad_field != NULL)
        return;
    why = problem(t, t != NULL ? r->ops->len(r, col) : 0);
    if (why != NULL) {
        ev->bad_field = field;
        ev->bad_reason = why;
    }
}

/* A payload holding a NUL byte would be cut there (and the rest might even pass the JSON check). */
static const char *payload_problem(const char *s, size_t len)
{
    return s != NULL && strlen(s) != len ? "contains a NUL byte" : NULL;
}

/*
 * Every row of hookd_outbox is checked as it is read: rows may have been
 * written with plain SQL before the schema's check existed, and only here
 * are their bytes seen whole (an over-long id is cut to fit ev->id, a NUL
 * ends a C string early).
 */
static void event_check_row(const struct store_row *r, int first, struct event *ev)
{
    event_check_col(r, first + 1, "event id", event_id_problem, ev);
    event_check_col(r, first + 2, "event type", event_type_problem, ev);
    event_check_col(r, first + 3, "account", event_label_problem, ev);
    event_check_col(r, first + 4, "resource type", event_label_problem, ev);
    event_check_col(r, first + 5, "resource id", event_label_problem, ev);
    event_check_col(r, first + 7, "payload", payload_problem, ev);
}

static int event_read(const struct store_row *r, int first, struct event *ev)
{
    bool ok = true;
    int c = first;

    memset(ev, 0, sizeof *ev);
    event_check_row(r, first, ev);
    ev->seq = col_i64(r, c++);
    store_row_id(r, c++, ev->id);
    ev->type = col_str(r, c++, &ok);
    ev->account = col_str(r, c++, &ok);
    ev->resource_type = col_str(r, c++, &ok);
    ev->resource_id = col_str(r, c++, &ok);
    ev->has_resource_version = !r->ops->null(r, c);
    ev->resource_version = col_i64(r, c++);
    ev->payload = col_str(r, c++, &ok);
    ev->idempotency_key = col_str(r, c++, &ok);
    ev->created_at = col_i64(r, c++);
    ev->dispatched_at = col_i64(r, c++);
    ev->error = col_str(r, c++, &ok);
    if (!ok || !ev->type || !ev->payload) {
        event_free(ev);
        return HOOKD_ENOMEM;
    }
    return 0;
}

static int delivery_read(const struct store_row *r, int first, struct delivery *d)
{
    bool ok = true;
    int c = first;

    memset(d, 0, sizeof *d);
    store_row_id(r, c++, d->id);
    store_row_id(r, c++, d->event_id);
    store_row_id(r, c++, d->endpoint_id);
    d->account = col_str(r, c++, &ok);
    if (delivery_status_parse(r->ops->text(r, c++), &d->status))
        d->status = DELIVERY_DEAD;
    d->attempt_count = col_int(r, c++);
    d->next_attempt_at = col_i64(r, c++);
    d->last_status_code = col_int(r, c++);
    d->last_error = col_str(r, c++, &ok);
    d->first_attempt_at = col_i64(r, c++);
    d->last_attempt_at = col_i64(r, c++);
    d->delivered_at = col_i64(r, c++);
    d->created_at = col_i64(r, c++);
    d->lease_owner = col_str(r, c++, &ok);
    d->lease_until = col_i64(r, c++);
    d->lease_token = col_i64(r, c++);
    if (!ok) {
        delivery_free(d);
        return HOOKD_ENOMEM;
    }
    return 0;
}

int store_read_event(const struct store_row *r, void *item) { return event_read(r, 0, item); }
int store_read_delivery(const struct store_row *r, void *item) { return delivery_read(r, 0, item); }

int store_read_job(const struct store_row *r, void *item)
{
    struct delivery_job *j = item;
    int result = delivery_read(r, 0, &j->d);

    if (result == 0) {
        result = event_read(r, STORE_DELIVERY_NCOLS, &j->ev);
        if (result)
            delivery_free(&j->d);
    }
    return result;
}

int store_read_endpoint(const struct store_row *r, void *item)
{
    struct endpoint *ep = item;
    bool ok = true;
    int result;

    memset(ep, 0, sizeof *ep);
    store_row_id(r, 0, ep->id);
    ep->account = col_str(r, 1, &ok);
    ep->url = col_str(r, 2, &ok);
    ep->description = col_str(r, 3, &ok);
    ep->enabled = r->ops->flag(r, 6);
    ep->disabled_reason = col_str(r, 7, &ok);
    if (ordering_parse(r->ops->text(r, 8), &ep->ordering))
        ep->ordering = ORDERING_NONE;
    ep->max_in_flight = col_int(r, 9);
    ep->rate_limit = col_int(r, 10);
    ep->timeout_ms = col_i64(r, 11);
    ep->created_at = col_i64(r, 13);
    ep->updated_at = col_i64(r, 14);
    result = ok && ep->url ? 0 : HOOKD_ENOMEM;
    if (result == 0)
        result = endpoint_json_decode(ep, r->ops->text(r, 4), r->ops->text(r, 5), r->ops->text(r, 12));
    if (result == 0)
        result = endpoint_headers_decode(ep, r->ops->text(r, 15));
    if (result == HOOKD_EIO)
        log_warn("store", "endpoint %s has malformed JSON columns", ep->id);
    if (result)
        endpoint_free(ep);
    return result;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

void store_hex_encode(const void *p, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *b = p;

    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = '\0';
}

/* The snippet's bytes from their hex text (NUL-terminated copy); false on OOM.
 * Text that is not hex (never written by hookd) reads as no snippet. */
static bool response_read(const struct store_row *r, int col, struct attempt *a)
{
    const char *hex = r->ops->null(r, col) ? NULL : r->ops->text(r, col);
    size_t n = hex ? strlen(hex) / 2 : 0;
    char *out;

    if (n == 0)
        return true;
    out = malloc(n + 1);
    if (!out)
        return false;
    for (size_t i = 0; i < n; i++) {
        int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            free(out);
            return true;
        }
        out[i] = (char)(hi << 4 | lo);
    }
    out[n] = '\0';
    a->response = out;
    a->response_len = n;
    return true;
}

int store_read_attempt(const struct store_row *r, void *item)
{
    struct attempt *a = item;
    bool ok = true;

    memset(a, 0, sizeof *a);
    a->id = col_i64(r, 0);
    store_row_id(r, 1, a->delivery_id);
    a->n = col_int(r, 2);
    a->started_at = col_i64(r, 3);
    a->duration_ms = col_int(r, 4);
    a->status_code = col_int(r, 5);
    a->error_class = col_str(r, 6, &ok);
    a->error = col_str(r, 7, &ok);
    ok = ok && response_read(r, 8, a);
    a->node = col_str(r, 9, &ok);
    a->response_truncated = r->ops->flag(r, 10);
    if (!ok) {
        attempt_free(a);
        return HOOKD_ENOMEM;
    }
    return 0;
}

/* A hash column into a fixed buffer ("" for NULL or a value of another length). */
static void col_sha(const struct store_row *r, int col, char out[SHA256_HEX_LEN])
{
    const char *t = r->ops->text(r, col);

    if (t && strnlen(t, SHA256_HEX_LEN) == SHA256_HEX_LEN - 1)
        memcpy(out, t, SHA256_HEX_LEN);
    else
        out[0] = '\0';
}

/* The one place a source's stored secrets are opened (store_source_insert sealed them); a wrong key is
 * named in the log. On failure src is freed. */
static int source_secrets_open(struct source *src, const char *stored)
{
    char aad[16 + SOURCE_NAME_MAX], wrong[SECRET_KEY_ID_LEN];
    int result;

    if (!stored)
        return 0;
    snprintf(aad, sizeof aad, "source:%s", src->name);
    result = secret_box_open(aad, stored, &src->secrets, wrong);
    if (result == HOOKD_EINVAL)
        log_error("store", "source %s: secrets sealed under key %s, not the configured key %s", src->name, wrong,
                  secret_box_key_id());
    else if (result == HOOKD_EIO)
        log_error("store", "source %s: sealed secrets do not open (damaged, or not this row's)", src->name);
    if (result) {
        source_free(src);
        return result == HOOKD_ENOMEM ? result : HOOKD_EIO;
    }
    return 0;
}

int store_read_source(const struct store_row *r, void *item)
{
    struct source *src = item;
    bool ok = true;

    memset(src, 0, sizeof *src);
    snprintf(src->name, sizeof src->name, "%s", r->ops->text(r, 0) ? r->ops->text(r, 0) : "");
    src->definition = col_str(r, 1, &ok);
    src->created_at = col_i64(r, 3);
    src->updated_at = col_i64(r, 4);
    if (!ok || !src->definition) {
        source_free(src);
        return HOOKD_ENOMEM;
    }
    return source_secrets_open(src, r->ops->text(r, 2));
}

/* The columns both inbox readers start with: id, source, event id and type, entity, version (*c moves past them). */
static void read_inbox_key(const struct store_row *r, struct inbox_item *it, int *c, bool *ok)
{
    memset(it, 0, sizeof *it);
    store_row_id(r, (*c)++, it->id);
    col_copy(r, (*c)++, it->source, sizeof it->source);
    it->event_id = col_str(r, (*c)++, ok);
    it->event_type = col_str(r, (*c)++, ok);
    it->entity_kind = col_str(r, (*c)++, ok);
    it->entity_id = col_str(r, (*c)++, ok);
    it->has_version = !r->ops->null(r, *c);
    it->version = col_i64(r, (*c)++);
}

int store_read_inbox(const struct store_row *r, void *item)
{
    struct inbox_item *it = item;
    bool ok = true;
    int c = 0;

    read_inbox_key(r, it, &c, &ok);
    it->payload = col_str(r, c++, &ok);
    col_sha(r, c++, it->payload_sha256);
    it->signature_verified = r->ops->flag(r, c++);
    if (inbox_status_parse(r->ops->text(r, c++), &it->status))
        it->status = INBOX_QUARANTINED;
    it->attempts = col_int(r, c++);
    it->next_attempt_at = col_i64(r, c++);
    it->lease_owner = col_str(r, c++, &ok);
    it->lease_until = col_i64(r, c++);
    it->lease_token = col_i64(r, c++);
    it->result = col_str(r, c++, &ok);
    it->error = col_str(r, c++, &ok);
    it->received_at = col_i64(r, c++);
    it->processed_at = col_i64(r, c++);
    it->dup_count = col_int(r, c++);
    it->last_dup_at = col_i64(r, c++);
    it->conflict_count = col_int(r, c++);
    it->deferred_at = col_i64(r, c++);
    if (!ok || !it->event_id || !it->payload) {
        inbox_item_free(it);
        return HOOKD_ENOMEM;
    }
    return 0;
}

/* STORE_INBOX_OPEN_COLUMNS: what a decision reads of an entity's other open items (the rest zero, payload ""). */
int store_read_inbox_open(const struct store_row *r, void *item)
{
    struct inbox_item *it = item;
    bool ok = true;
    int c = 0;

    read_inbox_key(r, it, &c, &ok);
    if (inbox_status_parse(r->ops->text(r, c++), &it->status))
        it->status = INBOX_QUARANTINED;
    it->attempts = col_int(r, c++);
    it->lease_owner = col_str(r, c++, &ok);
    it->lease_until = col_i64(r, c++);
    it->received_at = col_i64(r, c++);
    it->deferred_at = col_i64(r, c++);
    it->payload = calloc(1, 1);
    if (!ok || !it->event_id || !it->payload) {
        inbox_item_free(it);
        return HOOKD_ENOMEM;
    }
    return 0;
}

int store_read_rejection(const struct store_row *r, void *item)
{
    struct rejection *rj = item;
    bool ok = true;

    memset(rj, 0, sizeof *rj);
    rj->id = col_i64(r, 0);
    snprintf(rj->source, sizeof rj->source, "%s", r->ops->text(r, 1) ? r->ops->text(r, 1) : "");
    rj->at = col_i64(r, 2);
    rj->reason = col_str(r, 3, &ok);
    rj->peer = col_str(r, 4, &ok);
    rj->size = col_i64(r, 5);
    col_sha(r, 6, rj->sha256);
    if (!ok || !rj->reason) {
        rejection_free(rj);
        return HOOKD_ENOMEM;
    }
    return 0;
}

int store_read_rejection_count(const struct store_row *r, void *item)
{
    struct rejection_count *c = item;
    bool ok = true;

    memset(c, 0, sizeof *c);
    c->reason = col_str(r, 0, &ok);
    c->count = col_i64(r, 1);
    c->last_at = col_i64(r, 2);
    if (!ok || !c->reason) {
        free(c->reason);
        c->reason = NULL;
        return HOOKD_ENOMEM;
    }
    return 0;
}

/* ---- lists --------------------------------------------------------------- */

void store_free_event(void *item) { event_free(item); }
void store_free_endpoint(void *item) { endpoint_free(item); }
void store_free_delivery(void *item) { delivery_free(item); }
void store_free_job(void *item) { delivery_job_free(item); }
void store_free_attempt(void *item) { attempt_free(item); }
void store_free_source(void *item) { source_free(item); }
void store_free_inbox(void *item) { inbox_item_free(item); }
void store_free_rejection(void *item) { rejection_free(item); }
void store_free_rejection_count(void *item)
{
    struct rejection_count *c = item;
    free(c->reason);
    c->reason = NULL;
}

void store_rows_start(struct store_rows *rows)
{
    *rows->items = NULL;
    *rows->n = 0;
    rows->cap = 0;
}

void *store_rows_slot(struct store_rows *rows)
{
    size_t n = *rows->n;
    char *slot;

    if (n >= rows->cap) {
        size_t cap = rows->cap ? rows->cap * 2 : 16;
        void *grown = cap <= SIZE_MAX / rows->item_size ? realloc(*rows->items, cap * rows->item_size) : NULL;
        if (!grown)
            return NULL;
        *rows->items = grown;
        rows->cap = cap;
    }
    slot = (char *)*rows->items + n * rows->item_size;
    memset(slot, 0, rows->item_size);
    return slot;
}

void store_rows_keep(struct store_rows *rows) { (*rows->n)++; }

void store_rows_free(struct store_rows *rows)
{
    for (size_t i = 0; rows->item_free && i < *rows->n; i++)
        rows->item_free((char *)*rows->items + i * rows->item_size);
    free(*rows->items);
    store_rows_start(rows);
}

int store_list_limit(int limit)
{
    if (limit <= 0)
        return 100;
    return limit > STORE_LIST_MAX ? STORE_LIST_MAX : limit;
}

/* ---- list queries ---------------------------------------------------------- */

void store_sql_add(struct store_sql *q, const char *part)
{
    int n;

    if (q->len >= sizeof q->text)
        return;
    n = snprintf(q->text + q->len, sizeof q->text - q->len, "%s", part);
    q->len += n > 0 ? (size_t)n : 0;
}

int event_filter_mask(const struct event_filter *f)
{
    return (f->type ? EV_F_TYPE : 0) | (f->account ? EV_F_ACCOUNT : 0) | (f->since ? EV_F_SINCE : 0) |
           (f->until ? EV_F_UNTIL : 0);
}

int delivery_filter_mask(const struct delivery_filter *f)
{
    return (f->event_id ? DL_F_EVENT : 0) | (f->endpoint_id ? DL_F_ENDPOINT : 0) | (f->account ? DL_F_ACCOUNT : 0) |
           (f->status >= 0 ? DL_F_STATUS : 0) | (f->since ? DL_F_SINCE : 0) | (f->until ? DL_F_UNTIL : 0) |
           (f->account && f->own_endpoints ? DL_F_OWN : 0) | (f->before_id ? DL_F_BEFORE : 0);
}

int endpoint_filter_mask(const struct endpoint_filter *f)
{
    return (f->account ? EP_F_ACCOUNT : 0) | (f->before_id ? EP_F_BEFORE : 0);
}

int inbox_filter_mask(const struct inbox_filter *f)
{
    return (f->source ? IB_F_SOURCE : 0) | (f->status >= 0 ? IB_F_STATUS : 0) | (f->entity_kind ? IB_F_KIND : 0) |
           (f->entity_id ? IB_F_ENTITY : 0) | (f->since ? IB_F_SINCE : 0) | (f->until ? IB_F_UNTIL : 0) |
           (f->before_id ? IB_F_BEFORE : 0);
}

/* Term i (bit 1 << i) compares with parameter i + 1. */
static void filter_sql(const char *const *terms, size_t n, int mask, char mark, char out[FILTER_SQL_MAX])
{
    size_t len = 0;

    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (mask & (1 << i)) {
            int w = snprintf(out + len, FILTER_SQL_MAX - len, " AND %s %c%zu", terms[i], mark, i + 1);
            len += w > 0 && (size_t)w < FILTER_SQL_MAX - len ? (size_t)w : 0;
        }
    }
}

void event_filter_sql(int mask, char mark, char out[FILTER_SQL_MAX])
{
    static const char *const terms[] = {"o.event_type =", "o.account =", "o.created_at >=", "o.created_at <"};

    filter_sql(terms, sizeof terms / sizeof terms[0], mask, mark, out);
}

void delivery_filter_sql(int mask, char mark, char out[FILTER_SQL_MAX])
{
    /* The endpoint's account by its key (an account-less endpoint's is NULL, never equal). */
    static const char *const terms[] = {"d.event_id =",      "d.endpoint_id =",  "d.account =", "d.status =",
                                        "d.created_at >=", "d.created_at <",
                                        "(SELECT e.account FROM hookd_endpoints e WHERE e.id = d.endpoint_id) =",
                                        "d.id <"};

    filter_sql(terms, sizeof terms / sizeof terms[0], mask, mark, out);
}

void endpoint_filter_sql(int mask, char mark, char out[FILTER_SQL_MAX])
{
    static const char *const terms[] = {"account =", "id <"};

    filter_sql(terms, sizeof terms / sizeof terms[0], mask, mark, out);
}

void inbox_filter_sql(int mask, char mark, char out[FILTER_SQL_MAX])
{
    static const char *const terms[] = {"source =",         "status =",        "entity_kind =", "entity_id =",
                                        "received_at >=", "received_at <", "id <"};

    filter_sql(terms, sizeof terms / sizeof terms[0], mask, mark, out);
}

/* ---- values ------------------------------------------------------------------ */

static struct store_value v_text(const char *t)
{
    return (struct store_value){.type = STORE_V_TEXT, .null = !t, .text = t};
}
static struct store_value v_int(int64_t n) { return (struct store_value){.type = STORE_V_INT, .num = n}; }
static struct store_value v_i64(int64_t n) { return (struct store_value){.type = STORE_V_I64, .num = n}; }
static struct store_value v_bool(bool b) { return (struct store_value){.type = STORE_V_BOOL, .num = b}; }
static struct store_value v_null(enum store_value_type t) { return (struct store_value){.type = t, .null = true}; }
/* A time or a count where 0 means none: SQL NULL. */
static struct store_value v_time(int64_t ms) { return ms ? v_i64(ms) : v_null(STORE_V_I64); }
static struct store_value v_code(int code) { return code ? v_int(code) : v_null(STORE_V_INT); }

void store_event_values(struct event *ev, struct store_value v[STORE_EVENT_NVALUES])
{
    /* A new id and created_at share one millisecond (store/stats_sql.h). */
    ev->created_at = ev->id[0] == '\0' ? id_new_time(ev->id, "evt_") : clock_now_ms();
    ev->dispatched_at = 0;
    v[0] = v_text(ev->id);
    v[1] = v_text(ev->account);
    v[2] = v_text(ev->type);
    v[3] = v_text(ev->resource_type);
    v[4] = v_text(ev->resource_id);
    v[5] = ev->has_resource_version ? v_i64(ev->resource_version) : v_null(STORE_V_I64);
    v[6] = v_text(ev->payload ? ev->payload : "{}");
    v[7] = v_text(ev->idempotency_key);
    v[8] = v_i64(ev->created_at);
}

void store_endpoint_values(const struct endpoint *ep, const struct endpoint_json *j, int64_t now,
                           struct store_value v[STORE_ENDPOINT_NVALUES])
{
    v[0] = v_text(ep->id);
    v[1] = v_text(ep->account);
    v[2] = v_text(ep->url);
    v[3] = v_text(ep->description);
    v[4] = v_text(j->event_types);
    v[5] = v_text(j->secrets);
    v[6] = v_bool(ep->enabled);
    v[7] = v_text(ep->enabled ? NULL : ep->disabled_reason);
    v[8] = v_text(ordering_name(ep->ordering));
    v[9] = v_int(ep->max_in_flight);
    v[10] = v_int(ep->rate_limit);
    v[11] = v_i64(ep->timeout_ms);
    v[12] = v_text(j->retry_schedule);
    v[13] = v_i64(ep->created_at ? ep->created_at : now);
    v[14] = v_i64(ep->updated_at ? ep->updated_at : now);
    v[15] = v_text(j->headers);
}

void store_delivery_values(const struct delivery *d, int64_t now, struct store_value v[STORE_DELIVERY_NVALUES])
{
    int64_t created = d->created_at ? d->created_at : now;

    v[0] = v_text(d->id);
    v[1] = v_text(d->event_id);
    v[2] = v_text(d->endpoint_id);
    v[3] = v_text(d->account);
    v[4] = v_text(delivery_status_name(d->status));
    v[5] = v_int(d->attempt_count);
    v[6] = v_time(delivery_status_open(d->status) ? (d->next_attempt_at ? d->next_attempt_at : created) : 0);
    v[7] = v_code(d->last_status_code);
    v[8] = v_text(d->last_error);
    v[9] = v_time(d->first_attempt_at);
    v[10] = v_time(d->last_attempt_at);
    v[11] = v_time(d->delivered_at);
    v[12] = v_i64(created);
    v[13] = v_text(d->lease_owner);
    v[14] = v_time(d->lease_owner ? d->lease_until : 0);
    v[15] = v_i64(d->lease_token);
    v[16] = v_text(d->order_key);
    v[17] = d->order_key ? v_i64(d->order_seq) : v_null(STORE_V_I64);
    v[18] = d->order_key && d->has_order_version ? v_i64(d->order_version) : v_null(STORE_V_I64);
}

int store_inbox_values(struct inbox_item *it, struct store_value v[STORE_INBOX_NVALUES])
{
    if (it->source[0] == '\0' || !it->event_id || !it->payload || strlen(it->payload_sha256) != SHA256_HEX_LEN - 1)
        return HOOKD_EINVAL;
    /* A new id and received_at share one millisecond (store/stats_sql.h). */
    if (it->id[0] == '\0') {
        int64_t at = id_new_time(it->id, "inb_");
        if (it->received_at == 0)
            it->received_at = at;
    }
    if (it->received_at == 0)
        it->received_at = clock_now_ms();
    it->status = INBOX_PENDING;
    it->next_attempt_at = it->received_at;
    v[0] = v_text(it->id);
    v[1] = v_text(it->source);
    v[2] = v_text(it->event_id);
    v[3] = v_text(it->event_type);
    v[4] = v_text(it->entity_kind);
    v[5] = v_text(it->entity_id);
    v[6] = it->has_version ? v_i64(it->version) : v_null(STORE_V_I64);
    v[7] = v_text(it->payload);
    v[8] = v_text(it->payload_sha256);
    v[9] = v_bool(it->signature_verified);
    v[10] = v_text(inbox_status_name(it->status));
    v[11] = v_i64(it->next_attempt_at);
    v[12] = v_i64(it->received_at);
    return 0;
}

int store_rejection_values(struct rejection *r, struct store_value v[STORE_REJECTION_NVALUES])
{
    if (r->source[0] == '\0' || !r->reason)
        return HOOKD_EINVAL;
    if (r->at == 0)
        r->at = clock_now_ms();
    v[0] = v_text(r->source);
    v[1] = v_i64(r->at);
    v[2] = v_text(r->reason);
    v[3] = v_text(r->peer);
    v[4] = v_i64(r->size);
    v[5] = v_text(r->sha256[0] ? r->sha256 : NULL);
    return 0;
}

/* ---- events ---------------------------------------------------------------- */

int store_event_conflict(struct store *s, const struct event *ev, struct event *existing, store_event_lookup_fn lookup)
{
    struct event scratch;
    struct event *out = existing ? existing : &scratch;
    int result = HOOKD_ENOTFOUND;

    if (ev->idempotency_key)
        result = lookup(s, true, ev->idempotency_key, out);
    if (result == HOOKD_ENOTFOUND)
        result = lookup(s, false, ev->id, out);
    if (result == 0 && !existing)
        event_free(&scratch);
    return result == 0 || result == HOOKD_ENOTFOUND ? HOOKD_EEXISTS : result;
}

/* ---- endpoint state -------------------------------------------------------- */

int store_read_endpoint_state(const struct store_row *r, void *item)
{
    struct endpoint_state *st = item;
    int c = 0;

    memset(st, 0, sizeof *st);
    store_row_id(r, c++, st->endpoint_id);
    if (breaker_parse(r->ops->text(r, c++), &st->breaker))
        st->breaker = BREAKER_CLOSED;
    st->consecutive_failures = col_int(r, c++);
    st->opened_at = col_i64(r, c++);
    st->next_probe_at = col_i64(r, c++);
    st->probe_interval_ms = col_i64(r, c++);
    st->probe_until = col_i64(r, c++);
    st->closed_at = col_i64(r, c++);
    st->failing_since = col_i64(r, c++);
    st->tokens_milli = col_i64(r, c++);
    st->tokens_at = col_i64(r, c++);
    return 0;
}

void endpoint_state_default(struct endpoint_state *st, const char *endpoint_id)
{
    memset(st, 0, sizeof *st);
    snprintf(st->endpoint_id, sizeof st->endpoint_id, "%s", endpoint_id);
    st->breaker = BREAKER_CLOSED;
}

void endpoint_state_apply(struct endpoint_state *st, struct endpoint_outcome *o, const struct breaker_policy *p,
                          int64_t now, double rnd01)
{
    bool reopen;
    int64_t interval;

    if (o->succeeded) {
        if (st->breaker != BREAKER_CLOSED)
            st->closed_at = now;
        st->breaker = BREAKER_CLOSED;
        st->consecutive_failures = 0;
        st->failing_since = st->opened_at = st->next_probe_at = st->probe_until = st->probe_interval_ms = 0;
    }
    if (o->failures <= 0)
        return;
    st->consecutive_failures = st->consecutive_failures > INT32_MAX - o->failures ? INT32_MAX
                                                                                  : st->consecutive_failures + o->failures;
    if (st->failing_since == 0)
        st->failing_since = o->first_failure_at > 0 ? o->first_failure_at : now;
    /* A failure while a probe is out is the probe's (or one as telling): the pause grows. */
    reopen = st->breaker == BREAKER_HALF_OPEN;
    if (!reopen && !(st->breaker == BREAKER_CLOSED && p->failures > 0 && st->consecutive_failures >= p->failures))
        return;
    interval = reopen && st->probe_interval_ms > 0 ? st->probe_interval_ms * 2 : p->probe_ms;
    if (p->probe_max_ms > 0 && interval > p->probe_max_ms)
        interval = p->probe_max_ms;
    if (interval < 1)
        interval = 1;
    st->breaker = BREAKER_OPEN;
    if (!reopen || st->opened_at == 0)
        st->opened_at = now;
    st->probe_interval_ms = interval;
    st->next_probe_at = now + (int64_t)((double)interval * (1.0 + p->jitter * (2.0 * rnd01 - 1.0)));
    st->probe_until = 0;
    o->opened = true;
}

bool endpoint_state_disable_due(const struct endpoint_state *st, const struct breaker_policy *p, int64_t now,
                                char reason[ENDPOINT_DISABLE_REASON_MAX])
{
    char since[RFC3339_LEN], after[24];

    if (p->disable_after_ms <= 0 || st->failing_since <= 0 || now - st->failing_since < p->disable_after_ms)
        return false;
    rfc3339_format(st->failing_since, since);
    duration_format(p->disable_after_ms, after);
    snprintf(reason, ENDPOINT_DISABLE_REASON_MAX,
             "failing continuously since %s, for longer than disable_after (%s)", since, after);
    return true;
}
