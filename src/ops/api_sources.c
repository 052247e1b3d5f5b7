/*
 * Admin API /v1/sources: create, list, get, update, delete, and a source's
 * rejection log. Bodies go through the source field tables
 * (inbound/source_def.h); every change is one writer op answered after its
 * commit, after which the hub tells the receiver's cache. Secrets are
 * write-only: answers show when each was set, never the key.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/ids.h"
#include "hub.h"
#include "inbound/source_def.h"
#include "ops/api_common.h"
#include "ops/list_queries.h"

/* One source write; heap (it outlives the handler call), freed by the reply. */
struct source_op {
    const struct api_ctx *api;
    const char *name;     /* the path's {name}, or the body's: valid until the reply */
    json_t *body;         /* owned */
    int64_t now;
    int status;           /* the answer on success */
    struct source_def def; /* the source as it stands after the op */
    struct api_error err;
};

static struct source_op *source_op_new(const struct api_ctx *api, struct http_response *res, json_t *body)
{
    struct source_op *o = calloc(1, sizeof *o);

    if (!o) {
        json_decref(body);
        api_reply_store_error(res, HOOKD_ENOMEM, "source");
        return NULL;
    }
    o->api = api;
    o->body = body;
    o->now = clock_now_ms();
    return o;
}

static void source_op_free(struct source_op *o)
{
    if (!o)
        return;
    source_def_free(&o->def);
    json_decref(o->body);
    free(o);
}

static void reply_op_error(struct http_response *res, int rc, const struct source_op *o)
{
    char what[SOURCE_NAME_MAX + 16];

    if (rc == HOOKD_EINVAL && o->err.status != 0) {
        api_reply_api_error(res, &o->err);
        return;
    }
    if (rc == HOOKD_EEXISTS) {
        http_reply_error(res, 409, "conflict", "source %s exists (change it with PATCH /v1/sources/%s)", o->name,
                         o->name);
        return;
    }
    snprintf(what, sizeof what, "source %s", o->name ? o->name : "");
    api_reply_store_error(res, rc, what);
}

/* The {name} of the path; a name that cannot exist answers 404 at once. */
static const char *path_name(struct http_request *req, struct http_response *res)
{
    const char *name = http_param(req, "name");

    if (!name || !id_is_valid(name)) {
        http_reply_error(res, 404, "not_found", "source not found");
        return NULL;
    }
    return name;
}

/* handler.machine names a machine that exists, checked in the write's own transaction. */
static int machine_exists(struct store *s, struct source_op *o)
{
    struct machine_record m = {0};
    int rc;

    if (!o->def.machine)
        return 0;
    rc = store_machine_get(s, o->def.machine, &m);
    machine_record_free(&m);
    if (rc == HOOKD_ENOTFOUND) {
        api_error_set(&o->err, 400, "invalid_field", "handler.machine: no machine is named %s (POST /v1/machines)",
                      o->def.machine);
        return HOOKD_EINVAL;
    }
    return rc;
}

static int op_insert(struct store *s, void *arg)
{
    struct source_op *o = arg;
    struct source rec = {0};
    int rc = machine_exists(s, o);

    if (rc == 0)
        rc = source_def_to_record(&o->def, &rec);

    if (rc == 0)
        rc = store_source_insert(s, &rec);
    source_free(&rec);
    return rc;
}

/* The PATCH applied to the stored source; a body that changes nothing writes nothing. */
static int op_update(struct store *s, void *arg)
{
    struct source_op *o = arg;
    struct source_def before;
    struct source rec = {0};
    int rc = store_source_get(s, o->name, &rec);

    if (rc != 0)
        return rc;
    rc = source_def_from_record(&rec, &o->def);
    if (rc == 0)
        rc = source_def_from_record(&rec, &before);
    source_free(&rec);
    if (rc == 0)
        rc = source_def_apply(&o->def, o->body, API_BODY_PATCH, o->now, &o->err);
    if (rc == 0)
        rc = machine_exists(s, o);
    if (rc == 0 && source_def_same(&before, &o->def))
        o->def.updated_at = before.updated_at; /* unchanged: no write, the old time stands */
    else if (rc == 0 && (rc = source_def_to_record(&o->def, &rec)) == 0) {
        rc = store_source_update(s, &rec);
        source_free(&rec);
    }
    source_def_free(&before);
    return rc;
}

static int op_delete(struct store *s, void *arg)
{
    struct source_op *o = arg;
    return store_source_delete(s, o->name);
}

static void write_reply(void *arg, int rc, struct http_response *res)
{
    struct source_op *o = arg;

    if (rc != 0) {
        reply_op_error(res, rc, o);
    } else {
        hub_notify(o->api->hub, HUB_SOURCES_CHANGED);
        if (o->status == 204)
            http_reply(res, 204, NULL, 0);
        else
            http_reply_json(res, o->status, source_def_json(&o->def));
    }
    source_op_free(o);
}

void api_sources_create(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    struct source_op *o;
    json_t *body;

    if (!(body = api_body_object(req, res, false)) || !(o = source_op_new(api, res, body)))
        return;
    if (source_def_apply(&o->def, body, API_BODY_CREATE, o->now, &o->err) != 0) {
        reply_op_error(res, HOOKD_EINVAL, o);
        source_op_free(o);
        return;
    }
    o->name = o->def.name;
    o->status = 201;
    api_write_async(api, req, op_insert, write_reply, o);
}

void api_sources_update(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    struct source_op *o;
    const char *name;
    json_t *body;

    if (!(name = path_name(req, res)) || !(body = api_body_object(req, res, false)) ||
        !(o = source_op_new(api, res, body)))
        return;
    o->name = name;
    o->status = 200;
    api_write_async(api, req, op_update, write_reply, o);
}

void api_sources_delete(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    struct source_op *o;
    const char *name;

    if (!(name = path_name(req, res)) || !(o = source_op_new(api, res, NULL)))
        return;
    o->name = name;
    o->status = 204;
    api_write_async(api, req, op_delete, write_reply, o);
}

/* The stored row of a source as the API's JSON, or a 404/503 answered. */
static json_t *source_read(const struct api_ctx *api, const char *name, struct http_response *res)
{
    struct source rec = {0};
    struct source_def def;
    struct store *s;
    json_t *j = NULL;
    int rc;

    if (!(s = api_reader_get(api, res)))
        return NULL;
    rc = store_source_get(s, name, &rec);
    api_reader_put(api, s, rc);
    if (rc == 0) {
        rc = source_def_from_record(&rec, &def);
        if (rc == 0 && !(j = source_def_json(&def)))
            rc = HOOKD_ENOMEM;
        source_def_free(&def);
        source_free(&rec);
    }
    if (rc != 0) {
        char what[SOURCE_NAME_MAX + 16];
        snprintf(what, sizeof what, "source %s", name);
        api_reply_store_error(res, rc, what);
    }
    return j;
}

void api_sources_get(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    const char *name;
    json_t *j;

    if ((name = path_name(req, res)) && (j = source_read(api, name, res)))
        http_reply_json(res, 200, j);
}

void api_sources_list(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    struct source_filter f = {0};
    struct source_list list = {0};
    struct query_scratch scratch;
    char next[CURSOR_TEXT_MAX];
    struct store *s;
    json_t *data;
    int rc;

    if (!api_query_parse(req, res, source_list_query, source_list_query_count, &f, &scratch))
        return;
    if (!(s = api_reader_get(api, res)))
        return;
    rc = store_source_list(s, &f, &list);
    api_reader_put(api, s, rc);
    if (rc != 0) {
        api_reply_store_error(res, rc, "sources");
        return;
    }
    data = json_array();
    for (size_t i = 0; data && i < list.n; i++) {
        struct source_def def;
        if (source_def_from_record(&list.items[i], &def) == 0)
            json_array_append_new(data, source_def_json(&def));
        source_def_free(&def);
    }
    http_reply_json(res, 200,
                    api_list_json(data, query_cursor_make(LIST_SOURCES,
                                                          list.n == (size_t)f.limit && list.n > 0
                                                              ? list.items[list.n - 1].name
                                                              : NULL,
                                                          next)));
    source_list_free(&list);
}

static json_t *rejection_json(const struct rejection *r)
{
    return json_pack("{s:o,s:s,s:o,s:I,s:o}", "at", api_json_time(r->at), "reason", r->reason, "peer",
                     api_json_str(r->peer), "size", (json_int_t)r->size, "sha256",
                     api_json_str(r->sha256[0] ? r->sha256 : NULL));
}

/* {"data": [rejections, newest first], "next_cursor", "counts": {reason: n}} */
void api_sources_rejections(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    struct rejection_filter f = {0};
    struct rejection_list list = {0};
    struct rejection_count_list counts = {0};
    struct query_scratch scratch;
    char next[CURSOR_TEXT_MAX], key[24];
    struct source rec = {0};
    struct store *s;
    json_t *data, *by_reason, *body;
    int rc;

    if (!(f.source = path_name(req, res)) ||
        !api_query_parse(req, res, rejection_list_query, rejection_list_query_count, &f, &scratch))
        return;
    if (!(s = api_reader_get(api, res)))
        return;
    rc = store_source_get(s, f.source, &rec);
    source_free(&rec);
    /*
     * The counts before the list: a rejection's row and its count commit together, and two reads see two
     * moments, so in this order every rejection counted is also in the list (the other order could show a
     * count whose row came after the list was read).
     */
    if (rc == 0)
        rc = store_rejection_counts(s, f.source, &counts);
    if (rc == 0)
        rc = store_rejection_list(s, &f, &list);
    api_reader_put(api, s, rc);
    if (rc != 0) {
        char what[SOURCE_NAME_MAX + 16];
        snprintf(what, sizeof what, "source %s", f.source);
        api_reply_store_error(res, rc, what);
        rejection_list_free(&list);
        rejection_count_list_free(&counts);
        return;
    }
    data = json_array();
    for (size_t i = 0; data && i < list.n; i++)
        json_array_append_new(data, rejection_json(&list.items[i]));
    by_reason = json_object();
    for (size_t i = 0; by_reason && i < counts.n; i++)
        json_object_set_new(by_reason, counts.items[i].reason, json_integer(counts.items[i].count));
    snprintf(key, sizeof key, "%lld", list.n > 0 ? (long long)list.items[list.n - 1].id : 0LL);
    body = api_list_json(data, query_cursor_make(LIST_REJECTIONS,
                                                 list.n == (size_t)f.limit && list.n > 0 ? key : NULL, next));
    if (body && by_reason && json_object_set_new(body, "counts", by_reason) == 0) {
        http_reply_json(res, 200, body);
    } else {
        if (!body)
            json_decref(by_reason);
        json_decref(body);
        http_reply_error(res, 500, "internal", "out of memory");
    }
    rejection_list_free(&list);
    rejection_count_list_free(&counts);
}
