/*
 * Admin API for investigation: GET /v1/entities/{kind}/{id} (what a machine
 * keeps), /trace (each event of the entity, with the decision taken on it),
 * and GET /v1/audit (the five checks of DESIGN §7 over a source and a range
 * of received time).
 */
#include <stdlib.h>
#include <string.h>

#include "core/event_check.h"
#include "inbound/machine_step.h"
#include "ops/api_common.h"
#include "ops/list_queries.h"

/* {kind} and {id} of the path: labels as the inbox keeps them; others answer 404. */
static bool path_entity(struct http_request *req, struct http_response *res, const char **kind, const char **id)
{
    *kind = http_param(req, "kind");
    *id = http_param(req, "id");
    if (!*kind || !*id || !**kind || !**id || strlen(*kind) >= INBOX_TEXT_MAX || strlen(*id) >= INBOX_TEXT_MAX ||
        event_label_problem(*kind, strlen(*kind)) || event_label_problem(*id, strlen(*id))) {
        http_reply_error(res, 404, "not_found", "entity not found");
        return false;
    }
    return true;
}

static json_t *entity_json(const struct entity_record *e)
{
    return json_pack("{s:s,s:s,s:o,s:o,s:o,s:o}", "kind", e->kind, "id", e->id, "state", api_json_str(e->state),
                     "version", e->has_version ? json_integer(e->version) : json_null(), "last_event_id",
                     api_json_str(e->last_event_id), "updated_at", api_json_time(e->updated_at));
}

void api_entities_get(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    struct entity_record e = {0};
    const char *kind, *id;
    struct store *s;
    int rc;

    if (!path_entity(req, res, &kind, &id) || !(s = api_reader_get(api, res)))
        return;
    rc = store_entity_get(s, kind, id, &e);
    api_reader_put(api, s, rc);
    if (rc != 0) {
        api_reply_store_error(res, rc, "entity");
        return;
    }
    http_reply_json(res, 200, entity_json(&e));
    entity_record_free(&e);
}

static int by_received(const void *a, const void *b)
{
    const struct inbox_item *x = a, *y = b;

    if (x->received_at != y->received_at)
        return x->received_at < y->received_at ? -1 : 1;
    return strcmp(x->id, y->id);
}

/* The decision that stands for an item: its last row in the log (NULL: none yet). */
static const struct transition_record *last_decision(const struct transition_list *t, const char *inbox_id)
{
    const struct transition_record *found = NULL;

    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->items[i].inbox_id, inbox_id) == 0)
            found = &t->items[i];
    return found;
}

static json_t *trace_event_json(const struct inbox_item *it, const struct transition_record *d)
{
    return json_pack("{s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:s,s:o,s:o,s:i,s:o}", "inbox_id", it->id, "source",
                     it->source, "event_id", it->event_id, "type", api_json_str(it->event_type), "version",
                     it->has_version ? json_integer(it->version) : json_null(), "received_at",
                     api_json_time(it->received_at), "processed_at", api_json_time(it->processed_at), "from",
                     api_json_str(d ? d->from_state : NULL), "to", api_json_str(d ? d->to_state : NULL), "status",
                     inbox_status_name(it->status), "result",
                     api_json_str(it->result ? it->result : d ? d->result : NULL), "worker",
                     api_json_str(d ? d->worker : NULL), "dup_count", it->dup_count, "error", api_json_str(it->error));
}

void api_entities_trace(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    struct trace_query q = {0};
    struct query_scratch scratch;
    struct inbox_list items = {0};
    struct transition_list log = {0};
    struct entity_record e = {0};
    const char *kind, *id;
    struct store *s;
    json_t *events, *body;
    int rc;

    if (!path_entity(req, res, &kind, &id) ||
        !api_query_parse(req, res, trace_query_params, trace_query_params_count, &q, &scratch) ||
        !(s = api_reader_get(api, res)))
        return;
    const struct inbox_filter f = {.status = -1, .entity_kind = kind, .entity_id = id, .limit = STORE_LIST_MAX};
    rc = store_inbox_list(s, &f, &items);
    if (rc == 0)
        rc = store_transition_list(s, kind, id, &log);
    if (rc == 0) {
        rc = store_entity_get(s, kind, id, &e);
        if (rc == HOOKD_ENOTFOUND)
            rc = items.n > 0 ? 0 : HOOKD_ENOTFOUND; /* events that changed nothing yet still have a trace */
    }
    api_reader_put(api, s, rc);
    if (rc != 0) {
        api_reply_store_error(res, rc, "entity");
        goto out;
    }
    if (items.n > 1)
        qsort(items.items, items.n, sizeof items.items[0], q.order == 1 ? machine_version_order : by_received);
    events = json_array();
    for (size_t i = 0; events && i < items.n; i++)
        json_array_append_new(events, trace_event_json(&items.items[i], last_decision(&log, items.items[i].id)));
    body = json_pack("{s:s,s:s,s:o,s:o,s:s,s:o*}", "kind", kind, "id", id, "state", api_json_str(e.state), "version",
                     e.has_version ? json_integer(e.version) : json_null(), "order",
                     q.order == 1 ? "version" : "received", "events", events);
    http_reply_json(res, 200, body);
out:
    entity_record_free(&e);
    inbox_list_free(&items);
    transition_list_free(&log);
}

void api_audit(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    struct audit_query q = {0};
    struct query_scratch scratch;
    struct audit_report r;
    struct store *s;
    int rc;

    if (!api_query_parse(req, res, audit_query_params, audit_query_params_count, &q, &scratch) ||
        !(s = api_reader_get(api, res)))
        return;
    if (q.since && q.until && q.until <= q.since) {
        api_reader_put(api, s, 0);
        http_reply_error(res, 400, "invalid_field", "until: must be after since");
        return;
    }
    rc = store_audit(s, q.source, q.since, q.until, &r);
    api_reader_put(api, s, rc);
    if (rc != 0) {
        api_reply_store_error(res, rc, "audit");
        return;
    }
    http_reply_json(
        res, 200,
        json_pack("{s:o,s:o,s:o,s:b,s:{s:{s:I,s:I},s:{s:I},s:{s:I,s:b},s:{s:I,s:b},s:{s:I}}}", "source",
                  api_json_str(q.source), "since", api_json_time(q.since), "until", api_json_time(q.until), "ok",
                  r.applied_twice == 0 && r.unprocessed_changes == 0, "checks", "received_twice", "count",
                  (json_int_t)r.received_twice, "copies", (json_int_t)r.extra_copies, "lower_after_higher", "count",
                  (json_int_t)r.lower_after_higher, "applied_twice", "count", (json_int_t)r.applied_twice, "ok",
                  r.applied_twice == 0, "unprocessed_changes", "count", (json_int_t)r.unprocessed_changes, "ok",
                  r.unprocessed_changes == 0, "conflicting_duplicates", "count", (json_int_t)r.conflicting));
}
