/*
 * Admin API replays: one delivery (POST /v1/deliveries/{id}/replay), one
 * event to all or one endpoint (POST /v1/events/{id}/replay), a bounded
 * range (POST /v1/replays), and their audit records (GET /v1/replays,
 * /v1/replays/{id}). Each replay is a run of writer ops of at most
 * REPLAY_BATCH deliveries, the first also recording the replay, each one
 * committed before the next is queued: a range of 10,000 never holds the
 * writer for long, and the request is answered after the last commit. A
 * delivery that is pending or in flight is never sent twice: it is left as
 * it is and counted as skipped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/ids.h"
#include "core/timefmt.h"
#include "hub.h"
#include "ops/api_common.h"
#include "ops/list_queries.h"
#include "store/pool.h"

#define REPLAY_BATCH 100 /* deliveries per writer op */

/* One replay being run; heap, freed after its answer. */
struct replay_run {
    const struct api_ctx *api;
    struct http_request *req;
    struct replay rec;        /* the record (id, actor, account, kind, filter, matched) */
    char (*ids)[HOOKD_ID_MAX]; /* the deliveries to replay */
    size_t n, next;           /* how many, and the first of the next batch */
    unsigned allowed;         /* bit per enum delivery_status that may be replayed */
    bool recorded;            /* the record's insert committed */
    struct delivery one;      /* REPLAY_DELIVERY: the delivery as replayed or as found */
};

static void run_free(struct replay_run *r)
{
    replay_free(&r->rec);
    delivery_free(&r->one);
    free(r->ids);
    free(r);
}

static unsigned status_bit(enum delivery_status st) { return 1u << (unsigned)st; }

/* Final statuses a caller may send again: an account token only its dead letters and skipped ones. */
static unsigned allowed_for(const struct http_request *req)
{
    unsigned bits = status_bit(DELIVERY_DEAD) | status_bit(DELIVERY_SKIPPED);

    return api_caller(req)->admin ? bits | status_bit(DELIVERY_DELIVERED) : bits;
}

/* One delivery, in the writer's transaction: replayed when its status allows it now (else ECONFLICT). */
static int replay_one(struct store *s, struct replay_run *r, int64_t now)
{
    int rc = store_delivery_get(s, r->ids[0], &r->one);

    if (rc == 0 && !(r->allowed & status_bit(r->one.status)))
        rc = HOOKD_ECONFLICT;
    if (rc == 0) {
        delivery_free(&r->one);
        rc = store_delivery_replay(s, r->ids[0], now, &r->one);
    }
    return rc;
}

/* One batch, in the writer's transaction: the record first (first batch), each delivery replayed
 * when its status allows it now (one statement for the batch), then the batch's items and counts. */
static int op_batch(struct store *s, void *arg)
{
    struct replay_run *r = arg;
    const char *batch[REPLAY_BATCH], *done_ids[REPLAY_BATCH];
    bool replayed[REPLAY_BATCH];
    size_t end = r->next + REPLAY_BATCH < r->n ? r->next + REPLAY_BATCH : r->n, k = 0, m = end - r->next;
    int64_t now = clock_now_ms();
    int rc = 0;

    if (r->rec.kind == REPLAY_DELIVERY) {
        /* Nothing replayed: no record either (the 404 or 409 says it all). */
        if ((rc = replay_one(s, r, now)) != 0)
            return rc;
        replayed[0] = true;
        batch[0] = r->ids[0];
    } else {
        for (size_t i = 0; i < m; i++)
            batch[i] = r->ids[r->next + i];
        rc = store_delivery_replay_many(s, batch, m, r->allowed, now, replayed);
    }
    if (rc == 0 && !r->recorded)
        rc = store_replay_insert(s, &r->rec);
    for (size_t i = 0; rc == 0 && i < m; i++)
        if (replayed[i])
            done_ids[k++] = batch[i];
    /* The others were pending or in flight already, or changed since they matched: left as they are. */
    if (rc == 0)
        rc = store_replay_record(s, r->rec.id, done_ids, k, (int)(m - k), end == r->n, now);
    return rc;
}

static json_t *replay_json(const struct replay *rp)
{
    json_t *filter = rp->filter ? json_loads(rp->filter, 0, NULL) : NULL;
    int open = rp->pending;

    return json_pack("{s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:i,s:i,s:i,s:{s:i,s:i,s:i,s:i},s:b}", "id", rp->id, "kind",
                     replay_kind_name(rp->kind), "actor", api_json_text(rp->actor), "account",
                     api_json_text(rp->account), "filter", filter ? filter : json_object(), "created_at",
                     api_json_time(rp->created_at), "finished_at", api_json_time(rp->finished_at), "matched",
                     rp->matched, "replayed", rp->replayed, "skipped", rp->skipped, "progress", "pending", open,
                     "delivered", rp->delivered, "failed", rp->failed, "superseded", rp->superseded, "done",
                     rp->finished_at != 0 && open == 0);
}

/* The record as committed, read back for the answer (its progress counted now). */
static json_t *replay_read_json(const struct replay_run *r)
{
    struct replay rp = {0};
    struct store *s = NULL;
    json_t *j = NULL;
    int rc = r->api->readers ? store_pool_get(r->api->readers, &s) : HOOKD_EUNAVAIL;

    if (rc == 0)
        rc = store_replay_get(s, r->rec.id, &rp);
    if (s)
        store_pool_put(r->api->readers, s, rc == HOOKD_EIO || rc == HOOKD_EUNAVAIL);
    j = replay_json(rc == 0 ? &rp : &r->rec);
    replay_free(&rp);
    return j;
}

static void run_answer(struct replay_run *r, int rc)
{
    struct http_response res = {.status = 200};
    char what[HOOKD_ID_MAX + 16];

    if (r->rec.kind == REPLAY_DELIVERY) {
        snprintf(what, sizeof what, "delivery %s", r->ids[0]);
        if (rc == 0) {
            json_t *j = api_delivery_json(&r->one);
            if (j)
                json_object_set_new(j, "replay_id", json_string(r->rec.id));
            http_reply_json(&res, 202, j);
        } else if (rc == HOOKD_ECONFLICT) {
            const char *which = r->allowed & status_bit(DELIVERY_DELIVERED)
                                    ? "a dead, skipped or delivered delivery can be replayed"
                                    : "a dead or skipped delivery can be replayed with an account token";
            http_reply_error(&res, 409, "not_replayable", "delivery %s is %s: only %s", r->ids[0],
                             delivery_status_name(r->one.status), which);
        } else {
            api_reply_store_error(&res, rc, what);
        }
    } else if (rc == 0) {
        http_reply_json(&res, 202, replay_read_json(r));
    } else if (r->recorded) {
        /* Earlier batches are committed: the record says how far it got. */
        http_reply_error(&res, api_store_down(rc) ? 503 : 500, "replay_incomplete",
                         "replay %s stopped after %zu of %zu deliveries (%s); GET /v1/replays/%s shows what was done",
                         r->rec.id, r->next, r->n, hookd_strerror(rc), r->rec.id);
    } else {
        api_reply_store_error(&res, rc, "replay");
    }
    struct http_request *req = r->req;
    run_free(r);
    http_resume(req, &res);
}

/* Writer thread, after a batch's commit: the dispatchers are told, then the next batch or the answer. */
static void batch_done(void *arg, int rc)
{
    struct replay_run *r = arg;

    if (rc == 0) {
        r->recorded = true;
        r->next = r->next + REPLAY_BATCH < r->n ? r->next + REPLAY_BATCH : r->n;
        hub_notify(r->api->hub, HUB_DELIVERIES_DUE);
        if (r->next < r->n) {
            rc = writer_submit_bounded(r->api->writer, op_batch, batch_done, r);
            if (rc == 0)
                return;
        }
    }
    run_answer(r, rc);
}

/* Starts the run (the request waits suspended); answers on every path. */
static void run_start(struct replay_run *r)
{
    int rc;

    http_suspend(r->req);
    rc = r->api->writer ? writer_submit_bounded(r->api->writer, op_batch, batch_done, r) : HOOKD_EUNAVAIL;
    if (rc != 0)
        run_answer(r, rc);
}

static struct replay_run *run_new(const struct api_ctx *api, struct http_request *req, enum replay_kind kind,
                                  size_t n, json_t *filter, const char *account)
{
    struct replay_run *r = calloc(1, sizeof *r);

    if (r && n > 0)
        r->ids = calloc(n, sizeof *r->ids);
    if (r)
        r->rec.filter = filter ? json_dumps(filter, JSON_COMPACT | JSON_SORT_KEYS) : strdup("{}");
    if (r) {
        r->rec.actor = strdup(api_actor(req));
        r->rec.account = account ? strdup(account) : NULL;
    }
    json_decref(filter);
    if (!r || (n > 0 && !r->ids) || !r->rec.filter || !r->rec.actor || (account && !r->rec.account)) {
        if (r)
            run_free(r);
        return NULL;
    }
    r->api = api;
    r->req = req;
    r->rec.kind = kind;
    r->rec.created_at = clock_now_ms();
    r->allowed = allowed_for(req);
    id_new(r->rec.id, "rpl_");
    return r;
}

/* An optional id member into out ("" when absent or null); false after the 400. */
static bool body_id(struct http_response *res, json_t *body, const char *name, char out[HOOKD_ID_MAX])
{
    json_t *v = json_object_get(body, name);

    out[0] = '\0';
    if (!v || json_is_null(v))
        return true;
    if (!json_is_string(v) || !id_is_valid(json_string_value(v))) {
        http_reply_error(res, 400, "invalid_field", "%s: must be an id", name);
        return false;
    }
    snprintf(out, HOOKD_ID_MAX, "%s", json_string_value(v));
    return true;
}

/*
 * POST /v1/deliveries/{id}/replay: a dead, skipped or delivered delivery (an
 * account token: dead or skipped, of its account) is sent again through the
 * normal path with the same webhook-id and a fresh timestamp and signature;
 * 202 with the delivery and its "replay_id". A pending or retrying one
 * (queued or in flight) or a superseded one answers 409 not_replayable and
 * is left as it is: the store's status predicate decides, so two replays
 * never make two sends.
 */
void api_deliveries_replay(struct http_request *req, struct http_response *res, void *ctx)
{
    static const char *const known[] = {NULL};
    struct api_ctx *api = api_begin(req, res, ctx);
    const char *id = http_param(req, "id");
    struct delivery d = {0};
    const char *owner = NULL;
    struct replay_run *r;
    struct store *s;
    json_t *body;
    int rc;

    if (!id || !id_is_valid(id)) {
        http_reply_error(res, 404, "not_found", "delivery %.64s not found", id ? id : "");
        return;
    }
    if (!(body = api_body_object(req, res, true)))
        return;
    if (!api_body_known(res, body, known)) {
        json_decref(body);
        return;
    }
    json_decref(body);
    /* Its account: the record's, and what an account token must own. */
    if (!(s = api_reader_get(api, res)))
        return;
    rc = store_delivery_get(s, id, &d);
    if (rc == 0)
        rc = api_delivery_owner(s, &d, &owner);
    api_reader_put(api, s, rc);
    if (rc == 0 && !api_caller(req)->admin && !(owner && api_caller_sees(req, owner)))
        rc = HOOKD_ENOTFOUND; /* another account's, or one to the operator's own endpoint */
    if (rc != 0) {
        char what[HOOKD_ID_MAX + 16];
        snprintf(what, sizeof what, "delivery %s", id);
        api_reply_store_error(res, rc, what);
        delivery_free(&d);
        return;
    }
    r = run_new(api, req, REPLAY_DELIVERY, 1, json_pack("{s:s}", "delivery_id", id), owner);
    delivery_free(&d);
    if (!r) {
        api_reply_store_error(res, HOOKD_ENOMEM, "replay");
        return;
    }
    snprintf(r->ids[0], HOOKD_ID_MAX, "%s", id);
    r->n = 1;
    r->rec.matched = 1;
    run_start(r);
}

/*
 * POST /v1/events/{id}/replay {"endpoint_id"}: the event's deliveries (to
 * every endpoint, or to the one named) sent again; those pending, in flight
 * or superseded are left as they are and counted as skipped. 202 with the
 * replay record. An event without a delivery to the endpoint is 404.
 */
void api_events_replay(struct http_request *req, struct http_response *res, void *ctx)
{
    static const char *const known[] = {"endpoint_id", NULL};
    struct api_ctx *api = api_begin(req, res, ctx);
    const char *id = http_param(req, "id");
    struct delivery_filter f = {.status = -1, .limit = STORE_LIST_MAX};
    struct delivery_list dl = {0};
    struct event ev = {0};
    const char *owner = NULL;
    char endpoint[HOOKD_ID_MAX], what[HOOKD_ID_MAX * 2 + 32];
    struct replay_run *r = NULL;
    struct store *s;
    json_t *body, *filter;
    int rc;

    snprintf(what, sizeof what, "event %.63s", id ? id : "");
    if (!id || !id_is_valid(id)) {
        api_reply_store_error(res, HOOKD_ENOTFOUND, what);
        return;
    }
    if (!(body = api_body_object(req, res, true)))
        return;
    if (!api_body_known(res, body, known) || !body_id(res, body, "endpoint_id", endpoint)) {
        json_decref(body);
        return;
    }
    json_decref(body);
    f.event_id = id;
    f.endpoint_id = endpoint[0] ? endpoint : NULL;
    f.own_endpoints = !api_caller(req)->admin; /* an account token: to its account's endpoints only */
    if (!(s = api_reader_get(api, res)))
        return;
    rc = store_event_get(s, id, &ev);
    if (rc == 0 && !api_caller_sees(req, ev.account))
        rc = HOOKD_ENOTFOUND;
    f.account = ev.account;
    if (rc == 0)
        rc = store_delivery_list(s, &f, &dl);
    if (rc == 0)
        owner = api_deliveries_owner(s, &f, &rc);
    api_reader_put(api, s, rc);
    if (rc == 0 && dl.n == 0 && endpoint[0]) {
        snprintf(what, sizeof what, "delivery of event %.63s to endpoint %.63s", id, endpoint);
        rc = HOOKD_ENOTFOUND;
    }
    if (rc != 0) {
        api_reply_store_error(res, rc, what);
        goto out;
    }
    filter = endpoint[0] ? json_pack("{s:s,s:s}", "event_id", id, "endpoint_id", endpoint)
                         : json_pack("{s:s}", "event_id", id);
    if (!(r = run_new(api, req, REPLAY_EVENT, dl.n, filter, owner))) {
        api_reply_store_error(res, HOOKD_ENOMEM, "replay");
        goto out;
    }
    for (size_t i = 0; i < dl.n; i++)
        snprintf(r->ids[i], HOOKD_ID_MAX, "%s", dl.items[i].id);
    r->n = dl.n;
    r->rec.matched = (int)dl.n;
    run_start(r);
out:
    delivery_list_free(&dl);
    event_free(&ev);
}

/* A time member: RFC 3339 text; false after a 400 naming it. */
static bool body_time(struct http_response *res, json_t *body, const char *name, int64_t *out)
{
    json_t *v = json_object_get(body, name);

    if (!v || json_is_null(v))
        return true;
    if (!json_is_string(v) || rfc3339_parse(json_string_value(v), out) != 0) {
        http_reply_error(res, 400, "invalid_field", "%s: must be an RFC 3339 time", name);
        return false;
    }
    return true;
}

/* The range's matching ids, newest first, page by page (at most limit). */
static int range_ids(struct store *s, struct delivery_filter f, struct replay_run *r, size_t limit)
{
    struct delivery_list page = {0};
    char cursor[HOOKD_ID_MAX] = "";
    int rc = 0;

    while (rc == 0 && r->n < limit) {
        f.before_id = cursor[0] ? cursor : NULL;
        f.limit = limit - r->n < STORE_LIST_MAX ? (int)(limit - r->n) : STORE_LIST_MAX;
        rc = store_delivery_list(s, &f, &page);
        for (size_t i = 0; rc == 0 && i < page.n && r->n < limit; i++)
            snprintf(r->ids[r->n++], HOOKD_ID_MAX, "%s", page.items[i].id);
        if (rc == 0 && page.n > 0)
            snprintf(cursor, sizeof cursor, "%s", page.items[page.n - 1].id);
        bool last = page.n < (size_t)f.limit;
        delivery_list_free(&page);
        if (last)
            break;
    }
    return rc;
}

/*
 * POST /v1/replays {"endpoint_id", "account", "status": "dead" (default) |
 * "skipped", "since", "until" (created time, RFC 3339), "limit" (default
 * 1,000, at most 10,000), "dry_run"}: a range matching more than limit is
 * refused (409 range_too_large, saying how many match); a dry run answers
 * {"dry_run": true, "count"} and writes nothing; otherwise 202 with the
 * replay record. An account token replays only its own account's range.
 */
void api_replays_create(struct http_request *req, struct http_response *res, void *ctx)
{
    static const char *const known[] = {"endpoint_id", "account", "status", "since", "until", "limit", "dry_run",
                                        NULL};
    struct api_ctx *api = api_begin(req, res, ctx);
    struct delivery_filter f = {.status = DELIVERY_DEAD};
    char endpoint[HOOKD_ID_MAX];
    json_t *body = api_body_object(req, res, true), *v, *filter;
    const char *account = NULL, *owner = NULL;
    struct replay_run *r = NULL;
    json_int_t limit = REPLAY_LIMIT_DEFAULT;
    bool dry_run = false;
    struct store *s = NULL;
    int64_t count = 0;
    int rc;

    if (!body)
        return;
    if (!api_body_known(res, body, known) || !body_id(res, body, "endpoint_id", endpoint))
        goto out;
    if ((v = json_object_get(body, "account")) && !json_is_null(v)) {
        account = json_string_value(v);
        if (!account || !field_text_ok(account, API_ACCOUNT_MAX) || account[0] == '\0' ||
            strlen(account) != json_string_length(v)) {
            http_reply_error(res, 400, "invalid_field",
                             "account: must be a non-empty string of at most %d bytes without control characters",
                             API_ACCOUNT_MAX);
            goto out;
        }
    }
    if (!api_scope_account(req, res, &account))
        goto out;
    if ((v = json_object_get(body, "status")) && !json_is_null(v)) {
        const char *st = json_string_value(v);
        if (!st || (strcmp(st, "dead") != 0 && strcmp(st, "skipped") != 0)) {
            http_reply_error(res, 400, "invalid_field", "status: must be \"dead\" or \"skipped\"");
            goto out;
        }
        f.status = strcmp(st, "dead") == 0 ? DELIVERY_DEAD : DELIVERY_SKIPPED;
    }
    if (!body_time(res, body, "since", &f.since) || !body_time(res, body, "until", &f.until))
        goto out;
    if ((v = json_object_get(body, "limit")) && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > REPLAY_LIMIT_MAX) {
            http_reply_error(res, 400, "invalid_field", "limit: must be an integer from 1 to %d", REPLAY_LIMIT_MAX);
            goto out;
        }
        limit = json_integer_value(v);
    }
    if ((v = json_object_get(body, "dry_run")) && !json_is_null(v)) {
        if (!json_is_boolean(v)) {
            http_reply_error(res, 400, "invalid_field", "dry_run: must be true or false");
            goto out;
        }
        dry_run = json_is_true(v);
    }
    f.endpoint_id = endpoint[0] ? endpoint : NULL;
    f.account = account;
    f.own_endpoints = !api_caller(req)->admin; /* an account token: to its account's endpoints only */
    if (!(s = api_reader_get(api, res)))
        goto out;
    rc = store_delivery_count(s, &f, &count);
    if (rc != 0) {
        api_reader_put(api, s, rc);
        api_reply_store_error(res, rc, "deliveries");
        goto out;
    }
    if (dry_run || count > limit) {
        api_reader_put(api, s, rc);
        if (dry_run)
            http_reply_json(res, 200, json_pack("{s:b,s:I,s:I}", "dry_run", 1, "count", (json_int_t)count, "limit",
                                                limit));
        else
            http_reply_error(res, 409, "range_too_large",
                             "%lld deliveries match, more than the limit of %lld: narrow the range (endpoint_id, "
                             "account, since, until) or raise limit (at most %d)",
                             (long long)count, (long long)limit, REPLAY_LIMIT_MAX);
        goto out;
    }
    filter = json_pack("{s:s,s:I}", "status", delivery_status_name((enum delivery_status)f.status), "limit", limit);
    if (filter && endpoint[0])
        json_object_set_new(filter, "endpoint_id", json_string(endpoint));
    if (filter && account)
        json_object_set_new(filter, "account", json_string(account));
    if (filter && f.since)
        json_object_set_new(filter, "since", api_json_time(f.since));
    if (filter && f.until)
        json_object_set_new(filter, "until", api_json_time(f.until));
    owner = api_deliveries_owner(s, &f, &rc);
    r = rc == 0 ? run_new(api, req, REPLAY_RANGE, (size_t)count, filter, owner) : NULL;
    if (rc == 0)
        rc = r ? range_ids(s, f, r, (size_t)count) : HOOKD_ENOMEM;
    else
        json_decref(filter);
    api_reader_put(api, s, rc);
    if (rc != 0) {
        api_reply_store_error(res, rc, "deliveries");
        if (r)
            run_free(r);
        goto out;
    }
    /* Status changes after the count only shrink what the batches take; the record says what matched. */
    r->rec.matched = (int)r->n;
    r->allowed = status_bit((enum delivery_status)f.status);
    json_decref(body);
    run_start(r);
    return;
out:
    json_decref(body);
}

void api_replays_list(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *d = api_begin(req, res, ctx);
    struct replay_filter f = {0};
    struct replay_list list = {0};
    struct query_scratch scratch;
    struct store *s;
    json_t *data;

    if (!api_query_parse(req, res, replay_list_query, replay_list_query_count, &f, &scratch) ||
        !api_scope_account(req, res, &f.account))
        return;
    if (!(s = api_reader_get(d, res)) || !api_reader_done(d, s, store_replay_list(s, &f, &list), res, "replays"))
        return;
    data = json_array();
    for (size_t i = 0; data && i < list.n; i++)
        json_array_append_new(data, replay_json(&list.items[i]));
    api_reply_page(res, LIST_REPLAYS, data, list.n, f.limit, list.n > 0 ? list.items[list.n - 1].id : NULL);
    replay_list_free(&list);
}

void api_replays_get(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *d = api_begin(req, res, ctx);
    const char *id = http_param(req, "id");
    struct replay rp = {0};
    char what[HOOKD_ID_MAX + 16];
    struct store *s;
    int rc;

    snprintf(what, sizeof what, "replay %.63s", id ? id : "");
    if (!id || !id_is_valid(id)) {
        api_reply_store_error(res, HOOKD_ENOTFOUND, what);
        return;
    }
    if (!(s = api_reader_get(d, res)))
        return;
    rc = store_replay_get(s, id, &rp);
    api_reader_put(d, s, rc);
    if (rc == 0 && !api_caller_sees(req, rp.account))
        rc = HOOKD_ENOTFOUND;
    if (rc != 0)
        api_reply_store_error(res, rc, what);
    else
        http_reply_json(res, 200, replay_json(&rp));
    replay_free(&rp);
}
