/*
 * Admin API /v1/machines: create, list, get, update (top-level fields
 * replaced, the whole definition validated again) and delete (refused while
 * a source's handler names the machine). Every change is one writer op
 * answered after its commit; the workers read a machine in the transaction
 * of each decision, so a change holds from the next event on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/ids.h"
#include "inbound/machine.h"
#include "inbound/source_def.h"
#include "ops/api_common.h"
#include "ops/list_queries.h"

/* One machine write; heap (it outlives the handler call), freed by the reply. */
struct machine_op {
    const struct api_ctx *api;
    const char *name;  /* the path's {name}, or the body's */
    json_t *body;      /* owned */
    int64_t now;
    int status;
    struct machine def; /* as it stands after the op */
    char user[SOURCE_NAME_MAX]; /* delete: a source that uses it */
    struct api_error err;
};

static struct machine_op *machine_op_new(const struct api_ctx *api, struct http_response *res, json_t *body)
{
    struct machine_op *o = calloc(1, sizeof *o);

    if (!o) {
        json_decref(body);
        api_reply_store_error(res, HOOKD_ENOMEM, "machine");
        return NULL;
    }
    o->api = api;
    o->body = body;
    o->now = clock_now_ms();
    return o;
}

static void machine_op_free(struct machine_op *o)
{
    if (!o)
        return;
    machine_free(&o->def);
    json_decref(o->body);
    free(o);
}

static void reply_op_error(struct http_response *res, int rc, const struct machine_op *o)
{
    char what[MACHINE_NAME_MAX + 16];

    if (rc == HOOKD_EINVAL && o->err.status != 0) {
        api_reply_api_error(res, &o->err);
        return;
    }
    if (rc == HOOKD_EEXISTS) {
        http_reply_error(res, 409, "conflict", "machine %s exists (change it with PATCH /v1/machines/%s)", o->name,
                         o->name);
        return;
    }
    if (rc == HOOKD_ECONFLICT) {
        http_reply_error(res, 409, "conflict", "machine %s is the handler of source %s (change the source first)",
                         o->name, o->user);
        return;
    }
    snprintf(what, sizeof what, "machine %s", o->name ? o->name : "");
    api_reply_store_error(res, rc, what);
}

static const char *path_name(struct http_request *req, struct http_response *res)
{
    const char *name = http_param(req, "name");

    if (!name || !id_is_valid(name)) {
        http_reply_error(res, 404, "not_found", "machine not found");
        return NULL;
    }
    return name;
}

static int record_write(struct store *s, struct machine_op *o, bool update)
{
    struct machine_record rec = {0};
    json_t *j = machine_definition_json(&o->def);
    int rc;

    /* Derived states are not stored: a later change of the transitions derives them again. */
    if (j && o->def.states_declared && json_object_set_new(j, "states", json_array()) == 0) {
        json_t *arr = json_object_get(j, "states");
        for (size_t i = 0; i < o->def.n_states; i++)
            json_array_append_new(arr, json_string(o->def.states[i]));
    }
    snprintf(rec.name, sizeof rec.name, "%s", o->def.name);
    rec.definition = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    rec.created_at = o->def.created_at;
    rec.updated_at = o->def.updated_at;
    json_decref(j);
    if (!rec.definition)
        return HOOKD_ENOMEM;
    rc = update ? store_machine_update(s, &rec) : store_machine_insert(s, &rec);
    machine_record_free(&rec);
    return rc;
}

static int op_insert(struct store *s, void *arg) { return record_write(s, arg, false); }

/* The stored definition with the body's top-level fields replaced, validated whole. */
static int op_update(struct store *s, void *arg)
{
    struct machine_op *o = arg;
    struct machine_record rec = {0};
    struct machine before;
    json_t *merged = NULL, *name;
    const char *key;
    json_t *v;
    int rc = store_machine_get(s, o->name, &rec);

    if (rc != 0)
        return rc;
    rc = machine_from_record(&rec, &before);
    if (rc == 0 && !(merged = machine_definition_json(&before)))
        rc = HOOKD_ENOMEM;
    if (rc == 0 && before.n_states) {
        json_t *arr = json_array();
        for (size_t i = 0; arr && i < before.n_states; i++)
            json_array_append_new(arr, json_string(before.states[i]));
        /* States that were derived, not declared, are not in the stored text. */
        json_t *stored = json_loads(rec.definition, 0, NULL);
        if (stored && json_object_get(stored, "states"))
            json_object_set_new(merged, "states", arr);
        else
            json_decref(arr);
        json_decref(stored);
    }
    name = json_object_get(o->body, "name");
    if (rc == 0 && name && (!json_is_string(name) || strcmp(json_string_value(name), o->name) != 0)) {
        api_error_set(&o->err, 400, "invalid_field", "name: a machine keeps its name");
        rc = HOOKD_EINVAL;
    }
    json_object_foreach(o->body, key, v) {
        if (rc == 0 && (strcmp(key, "created_at") == 0 || strcmp(key, "updated_at") == 0))
            continue;
        if (rc == 0 && json_object_set(merged, key, v) != 0)
            rc = HOOKD_ENOMEM;
    }
    if (rc == 0)
        rc = machine_parse(merged, &o->def, &o->err);
    o->def.created_at = rec.created_at;
    o->def.updated_at = o->now;
    if (rc == 0) {
        json_t *a = machine_json(&before), *b = machine_json(&o->def);
        json_object_del(a, "updated_at");
        json_object_del(b, "updated_at");
        if (a && b && json_equal(a, b) && before.states_declared == o->def.states_declared)
            o->def.updated_at = rec.updated_at; /* unchanged: no write */
        else
            rc = record_write(s, o, true);
        json_decref(a);
        json_decref(b);
    }
    json_decref(merged);
    machine_free(&before);
    machine_record_free(&rec);
    return rc;
}

/* Refused while a source's handler names it: its events would have no rules. */
static int op_delete(struct store *s, void *arg)
{
    struct machine_op *o = arg;
    struct source_list all = {0};
    int rc = store_source_list_all(s, &all);

    for (size_t i = 0; rc == 0 && i < all.n; i++) {
        struct source_def d;
        if (source_def_from_record(&all.items[i], &d) == 0 && d.machine && strcmp(d.machine, o->name) == 0) {
            snprintf(o->user, sizeof o->user, "%s", d.name);
            rc = HOOKD_ECONFLICT;
        }
        source_def_free(&d);
    }
    source_list_free(&all);
    if (rc == 0)
        rc = store_machine_delete(s, o->name);
    return rc;
}

static void write_reply(void *arg, int rc, struct http_response *res)
{
    struct machine_op *o = arg;

    if (rc != 0)
        reply_op_error(res, rc, o);
    else if (o->status == 204)
        http_reply(res, 204, NULL, 0);
    else
        http_reply_json(res, o->status, machine_json(&o->def));
    machine_op_free(o);
}

void api_machines_create(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    struct machine_op *o;
    json_t *body;

    if (!(body = api_body_object(req, res, false)) || !(o = machine_op_new(api, res, body)))
        return;
    if (machine_parse(body, &o->def, &o->err) != 0) {
        reply_op_error(res, HOOKD_EINVAL, o);
        machine_op_free(o);
        return;
    }
    o->def.created_at = o->def.updated_at = o->now;
    o->name = o->def.name;
    o->status = 201;
    api_write_async(api, req, op_insert, write_reply, o);
}

void api_machines_update(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    struct machine_op *o;
    const char *name;
    json_t *body;

    if (!(name = path_name(req, res)) || !(body = api_body_object(req, res, false)) ||
        !(o = machine_op_new(api, res, body)))
        return;
    o->name = name;
    o->status = 200;
    api_write_async(api, req, op_update, write_reply, o);
}

void api_machines_delete(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    struct machine_op *o;
    const char *name;

    if (!(name = path_name(req, res)) || !(o = machine_op_new(api, res, NULL)))
        return;
    o->name = name;
    o->status = 204;
    api_write_async(api, req, op_delete, write_reply, o);
}

static json_t *record_json(const struct machine_record *rec)
{
    struct machine m;
    json_t *j = NULL;

    if (machine_from_record(rec, &m) == 0)
        j = machine_json(&m);
    machine_free(&m);
    return j;
}

void api_machines_get(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    struct machine_record rec = {0};
    const char *name;
    struct store *s;
    json_t *j;
    int rc;

    if (!(name = path_name(req, res)) || !(s = api_reader_get(api, res)))
        return;
    rc = store_machine_get(s, name, &rec);
    api_reader_put(api, s, rc);
    if (rc == 0 && !(j = record_json(&rec)))
        rc = HOOKD_EIO;
    machine_record_free(&rec);
    if (rc != 0) {
        char what[MACHINE_NAME_MAX + 16];
        snprintf(what, sizeof what, "machine %s", name);
        api_reply_store_error(res, rc, what);
        return;
    }
    http_reply_json(res, 200, j);
}

void api_machines_list(struct http_request *req, struct http_response *res, void *ctx)
{
    struct api_ctx *api = api_begin(req, res, ctx);
    struct machine_filter f = {0};
    struct machine_list list = {0};
    struct query_scratch scratch;
    char next[CURSOR_TEXT_MAX];
    struct store *s;
    json_t *data;
    int rc;

    if (!api_query_parse(req, res, machine_list_query, machine_list_query_count, &f, &scratch))
        return;
    if (!(s = api_reader_get(api, res)))
        return;
    rc = store_machine_list(s, &f, &list);
    api_reader_put(api, s, rc);
    if (rc != 0) {
        api_reply_store_error(res, rc, "machines");
        return;
    }
    data = json_array();
    for (size_t i = 0; data && i < list.n; i++) {
        json_t *j = record_json(&list.items[i]);
        if (j)
            json_array_append_new(data, j);
    }
    http_reply_json(res, 200,
                    api_list_json(data, query_cursor_make(LIST_MACHINES,
                                                          list.n == (size_t)f.limit && list.n > 0
                                                              ? list.items[list.n - 1].name
                                                              : NULL,
                                                          next)));
    machine_list_free(&list);
}
