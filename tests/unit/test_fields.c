/*
 * Field tables (ops/fields.c): each body field type at and past its bounds,
 * unknown, fixed and required fields; query tables: every parameter type,
 * unknown and repeated parameters, cursors (core/cursor.c) made, refused when
 * forged, truncated or from another list; and the list routes' tables.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/cursor.h"
#include "ops/api_common.h"
#include "ops/fields.h"
#include "ops/list_queries.h"

/* ---- a table with one field of every type ------------------------------------------------ */

struct thing {
    char *name;
    char *site;
    int count;
    bool on;
    int64_t wait_ms;
    int colour;
    const char *tags[FIELD_ITEMS_MAX];
    size_t n_tags;
    int64_t delays[FIELD_ITEMS_MAX];
    size_t n_delays;
    const json_t *extra;
};

static bool no_x(const char *s) { return strchr(s, 'x') == NULL; }

static int set_tags(void *target, const struct field_value *v)
{
    struct thing *t = target;
    memcpy(t->tags, v->items, v->n * sizeof v->items[0]);
    t->n_tags = v->n;
    return 0;
}

static int set_delays(void *target, const struct field_value *v)
{
    struct thing *t = target;
    memcpy(t->delays, v->durations, v->n * sizeof v->durations[0]);
    t->n_delays = v->n;
    return 0;
}

static int set_extra(void *target, const struct field_value *v)
{
    ((struct thing *)target)->extra = v->null ? NULL : v->json;
    return 0;
}

static const char *const colours[] = {"red", "green", "blue", NULL};

static const struct field thing_fields[] = {
    {.name = "name", .type = FIELD_STRING, .flags = FIELD_REQUIRED | FIELD_FIXED, .max_len = 5, .check = no_x,
     .fixed_hint = "set once", .offset = offsetof(struct thing, name)},
    {.name = "site", .type = FIELD_URL, .flags = FIELD_NULLABLE, .offset = offsetof(struct thing, site)},
    {.name = "count", .type = FIELD_INT, .min = 2, .max = 9, .offset = offsetof(struct thing, count)},
    {.name = "on", .type = FIELD_BOOL, .offset = offsetof(struct thing, on)},
    {.name = "wait", .type = FIELD_DURATION, .flags = FIELD_NULLABLE | FIELD_BLANK_NULL, .min = 1000, .max = 60000,
     .offset = offsetof(struct thing, wait_ms)},
    {.name = "colour", .type = FIELD_ENUM, .values = colours, .offset = offsetof(struct thing, colour)},
    {.name = "tags", .type = FIELD_STRING_ARRAY, .max = 3, .max_len = 4, .check = no_x, .set = set_tags},
    {.name = "delays", .type = FIELD_DURATION_LIST, .max = 2, .set = set_delays},
    {.name = "extra", .type = FIELD_OBJECT, .flags = FIELD_NULLABLE, .set = set_extra},
};
#define N_THING (sizeof thing_fields / sizeof thing_fields[0])

struct apply_result {
    int rc;
    struct api_error err;
};

/* Applies text to *t (kept across calls, so PATCH sees earlier values). */
static struct apply_result apply_thing(struct thing *t, const char *text, enum api_body_mode mode)
{
    struct apply_result o = {0};
    json_t *j = json_loads(text, 0, NULL);

    assert_non_null(j);
    o.rc = fields_apply(thing_fields, N_THING, t, j, mode, &o.err);
    json_decref(j);
    return o;
}

static void thing_free(struct thing *t)
{
    free(t->name);
    free(t->site);
    memset(t, 0, sizeof *t);
}

/* Refused with 400, code, and a message starting with prefix. */
static void assert_refused(const char *body, enum api_body_mode mode, const char *code, const char *prefix)
{
    struct thing t = {0};
    struct apply_result o = apply_thing(&t, body, mode);

    if (o.rc != HOOKD_EINVAL || o.err.status != 400 || strcmp(o.err.code, code) != 0 ||
        strncmp(o.err.message, prefix, strlen(prefix)) != 0)
        fail_msg("%s: rc %d, %d %s \"%s\"; wanted %s \"%s…\"", body, o.rc, o.err.status, o.err.code, o.err.message,
                 code, prefix);
    thing_free(&t);
}

static void assert_accepted(struct thing *t, const char *body, enum api_body_mode mode)
{
    struct apply_result o = apply_thing(t, body, mode);

    if (o.rc != 0)
        fail_msg("%s: refused %s \"%s\"", body, o.err.code, o.err.message);
}

static void test_field_types(void **state)
{
    struct thing t = {0};

    assert_accepted(&t,
                    "{\"name\": \"abcde\", \"site\": \"https://a.example/x\", \"count\": 9, \"on\": true, "
                    "\"wait\": \"1m\", \"colour\": \"blue\", \"tags\": [\"a\", \"bb\", \"cccc\"], "
                    "\"delays\": \"1s,2s\", \"extra\": {\"k\": 1}}",
                    API_BODY_CREATE);
    assert_string_equal(t.name, "abcde");
    assert_string_equal(t.site, "https://a.example/x");
    assert_int_equal(t.count, 9);
    assert_true(t.on);
    assert_int_equal(t.wait_ms, 60000);
    assert_int_equal(t.colour, 2);
    assert_int_equal(t.n_tags, 3);
    assert_int_equal(t.n_delays, 2);
    assert_int_equal(t.delays[1], 2000);
    assert_non_null(t.extra);
    /* Lower bounds, the array form of a duration list; null and "" reset nullable fields. */
    assert_accepted(&t, "{\"count\": 2, \"wait\": \"1s\", \"delays\": [\"3s\"], \"site\": null, \"extra\": null}",
                    API_BODY_PATCH);
    assert_int_equal(t.count, 2);
    assert_int_equal(t.wait_ms, 1000);
    assert_int_equal(t.n_delays, 1);
    assert_null(t.site);
    assert_null(t.extra);
    assert_accepted(&t, "{\"wait\": \"\"}", API_BODY_PATCH);
    assert_int_equal(t.wait_ms, 0);
    assert_accepted(&t, "{\"wait\": \"2s\"}", API_BODY_PATCH);
    assert_accepted(&t, "{\"wait\": null}", API_BODY_PATCH);
    assert_int_equal(t.wait_ms, 0);
    thing_free(&t);

    /* Each type just past its bounds, and the wrong JSON type. */
    assert_refused("{\"name\": \"abcdef\"}", API_BODY_CREATE, "invalid_field", "name: at most 5");
    assert_refused("{\"name\": \"a\\u0001\"}", API_BODY_CREATE, "invalid_field", "name: at most 5");
    assert_refused("{\"name\": \"axe\"}", API_BODY_CREATE, "invalid_field", "name: is not valid");
    assert_refused("{\"name\": 5}", API_BODY_CREATE, "invalid_field", "name: must be a string");
    assert_refused("{\"name\": null}", API_BODY_CREATE, "invalid_field", "name: must be a string");
    assert_refused("{\"name\": \"a\", \"site\": \"ftp://a.example\"}", API_BODY_CREATE, "invalid_field", "site: ");
    assert_refused("{\"name\": \"a\", \"site\": 1}", API_BODY_CREATE, "invalid_field", "site: must be a string");
    assert_refused("{\"name\": \"a\", \"count\": 1}", API_BODY_CREATE, "invalid_field",
                   "count: must be an integer from 2 to 9");
    assert_refused("{\"name\": \"a\", \"count\": 10}", API_BODY_CREATE, "invalid_field", "count:");
    assert_refused("{\"name\": \"a\", \"count\": 2.5}", API_BODY_CREATE, "invalid_field", "count:");
    assert_refused("{\"name\": \"a\", \"count\": \"3\"}", API_BODY_CREATE, "invalid_field", "count:");
    assert_refused("{\"name\": \"a\", \"count\": null}", API_BODY_CREATE, "invalid_field", "count: must not be null");
    assert_refused("{\"name\": \"a\", \"on\": 1}", API_BODY_CREATE, "invalid_field", "on: must be true or false");
    assert_refused("{\"name\": \"a\", \"wait\": \"999ms\"}", API_BODY_CREATE, "invalid_field",
                   "wait: must be a duration from 1s to 1m");
    assert_refused("{\"name\": \"a\", \"wait\": \"61s\"}", API_BODY_CREATE, "invalid_field", "wait:");
    assert_refused("{\"name\": \"a\", \"wait\": \"soon\"}", API_BODY_CREATE, "invalid_field", "wait:");
    assert_refused("{\"name\": \"a\", \"colour\": \"Red\"}", API_BODY_CREATE, "invalid_field",
                   "colour: must be \"red\", \"green\" or \"blue\"");
    assert_refused("{\"name\": \"a\", \"tags\": [\"a\", \"b\", \"c\", \"d\"]}", API_BODY_CREATE, "invalid_field",
                   "tags: at most 3 entries");
    assert_refused("{\"name\": \"a\", \"tags\": [\"a\", \"xx\"]}", API_BODY_CREATE, "invalid_field",
                   "tags: entry 1 is not valid");
    assert_refused("{\"name\": \"a\", \"tags\": [\"abcde\"]}", API_BODY_CREATE, "invalid_field", "tags: entry 0");
    assert_refused("{\"name\": \"a\", \"tags\": [1]}", API_BODY_CREATE, "invalid_field", "tags: entry 0");
    assert_refused("{\"name\": \"a\", \"tags\": \"a\"}", API_BODY_CREATE, "invalid_field", "tags: must be an array");
    assert_refused("{\"name\": \"a\", \"delays\": \"1s,2s,3s\"}", API_BODY_CREATE, "invalid_field", "delays:");
    assert_refused("{\"name\": \"a\", \"delays\": [\"1s\", \"2s\", \"3s\"]}", API_BODY_CREATE, "invalid_field",
                   "delays: at most 2");
    assert_refused("{\"name\": \"a\", \"delays\": [\"1s\", 2]}", API_BODY_CREATE, "invalid_field",
                   "delays: entry 1");
    assert_refused("{\"name\": \"a\", \"delays\": 5}", API_BODY_CREATE, "invalid_field", "delays: must be a string");
    assert_refused("{\"name\": \"a\", \"extra\": [1]}", API_BODY_CREATE, "invalid_field", "extra: must be an object");
}

static void test_field_names(void **state)
{
    struct thing t = {0};

    /* Unknown, required and fixed fields. */
    assert_refused("{\"name\": \"a\", \"shape\": 1}", API_BODY_CREATE, "unknown_field", "shape: unknown field");
    assert_refused("{\"count\": 3}", API_BODY_CREATE, "missing_field", "name is required");
    assert_refused("{}", API_BODY_CREATE, "missing_field", "name is required");
    assert_refused("{\"name\": \"b\"}", API_BODY_PATCH, "invalid_field", "name: set once");
    assert_accepted(&t, "{}", API_BODY_PATCH); /* a PATCH needs nothing */
    assert_accepted(&t, "{\"count\": 4}", API_BODY_PATCH);
    assert_int_equal(t.count, 4);
    assert_null(t.name);
    thing_free(&t);

    /* Not an object. */
    json_t *arr = json_loads("[1]", 0, NULL);
    struct api_error err = {0};
    assert_int_equal(fields_apply(thing_fields, N_THING, &t, arr, API_BODY_CREATE, &err), HOOKD_EINVAL);
    assert_string_equal(err.code, "malformed_json");
    json_decref(arr);
}

/* The endpoint table: each row's name is unique, and its enum words follow enum ordering_mode. */
static void test_endpoint_table(void **state)
{
    for (size_t i = 0; i < endpoint_fields_count; i++) {
        for (size_t k = i + 1; k < endpoint_fields_count; k++)
            assert_string_not_equal(endpoint_fields[i].name, endpoint_fields[k].name);
        if (endpoint_fields[i].type == FIELD_ENUM) {
            for (int v = 0; endpoint_fields[i].values[v]; v++)
                assert_string_equal(endpoint_fields[i].values[v], ordering_name((enum ordering_mode)v));
        }
        if (endpoint_fields[i].type == FIELD_STRING_ARRAY || endpoint_fields[i].type == FIELD_DURATION_LIST)
            assert_true(endpoint_fields[i].max <= FIELD_ITEMS_MAX);
    }
}

/* ---- query tables --------------------------------------------------------------------------- */

struct filter {
    int limit;
    const char *cursor_id;
    int64_t cursor_seq;
    int64_t since;
    const char *id;
    const char *text;
    int colour;
};

static const struct query_param filter_query[] = {
    {.name = "limit", .type = QUERY_LIMIT, .offset = offsetof(struct filter, limit)},
    {.name = "cursor", .type = QUERY_CURSOR_ID, .list = "things", .offset = offsetof(struct filter, cursor_id)},
    {.name = "after", .type = QUERY_CURSOR_SEQ, .list = "seqs", .offset = offsetof(struct filter, cursor_seq)},
    {.name = "since", .type = QUERY_TIME, .offset = offsetof(struct filter, since)},
    {.name = "id", .type = QUERY_ID, .offset = offsetof(struct filter, id)},
    {.name = "text", .type = QUERY_TEXT, .max_len = 4, .check = no_x, .offset = offsetof(struct filter, text)},
    {.name = "colour", .type = QUERY_ENUM, .values = colours, .offset = offsetof(struct filter, colour)},
};
#define N_FILTER (sizeof filter_query / sizeof filter_query[0])

static struct query_scratch scratch;

/* Parses "a=1&b=2" (no decoding) into f; returns the result and leaves err for inspection. */
static int parse_query(const char *qs, struct filter *f, struct api_error *err)
{
    static char copy[512];
    struct query_pair pairs[QUERY_PAIRS_MAX + 2];
    size_t n = 0;

    snprintf(copy, sizeof copy, "%s", qs);
    memset(f, 0, sizeof *f);
    f->colour = -1;
    memset(err, 0, sizeof *err);
    for (char *p = copy; *p && n < QUERY_PAIRS_MAX + 2;) {
        char *amp = strchr(p, '&'), *eq;
        if (amp)
            *amp = '\0';
        eq = strchr(p, '=');
        if (eq)
            *eq = '\0';
        pairs[n++] = (struct query_pair){p, eq ? eq + 1 : NULL};
        if (!amp)
            break;
        p = amp + 1;
    }
    return query_parse(filter_query, N_FILTER, pairs, n, f, &scratch, err);
}

static void assert_query_refused(const char *qs, const char *code, const char *prefix)
{
    struct filter f;
    struct api_error err;

    if (parse_query(qs, &f, &err) != HOOKD_EINVAL || err.status != 400 || strcmp(err.code, code) != 0 ||
        strncmp(err.message, prefix, strlen(prefix)) != 0)
        fail_msg("%s: %d %s \"%s\"; wanted %s \"%s…\"", qs, err.status, err.code, err.message, code, prefix);
}

static void test_query_types(void **state)
{
    char cursor[CURSOR_TEXT_MAX], seq_cursor[CURSOR_TEXT_MAX], qs[400];
    struct filter f;
    struct api_error err;

    /* Nothing given: the limit's default, the rest untouched. */
    assert_int_equal(parse_query("", &f, &err), 0);
    assert_int_equal(f.limit, API_LIMIT_DEFAULT);
    assert_null(f.cursor_id);
    assert_int_equal(f.colour, -1);

    assert_int_equal(cursor_encode("things", "dlv_0001", cursor), 0);
    assert_int_equal(cursor_encode("seqs", "42", seq_cursor), 0);
    snprintf(qs, sizeof qs, "limit=1000&cursor=%s&after=%s&since=2026-01-31T12:00:00Z&id=ep_1&text=abcd&colour=green",
             cursor, seq_cursor);
    assert_int_equal(parse_query(qs, &f, &err), 0);
    assert_int_equal(f.limit, 1000);
    assert_string_equal(f.cursor_id, "dlv_0001");
    assert_int_equal(f.cursor_seq, 42);
    assert_int_equal(f.since, 1769860800000LL);
    assert_string_equal(f.id, "ep_1");
    assert_string_equal(f.text, "abcd");
    assert_int_equal(f.colour, 1);
    assert_int_equal(parse_query("limit=1", &f, &err), 0);
    assert_int_equal(f.limit, 1);

    assert_query_refused("limit=0", "invalid_field", "limit: must be an integer from 1 to 1000");
    assert_query_refused("limit=1001", "invalid_field", "limit:");
    assert_query_refused("limit=-1", "invalid_field", "limit:");
    assert_query_refused("limit=1x", "invalid_field", "limit:");
    assert_query_refused("limit", "invalid_field", "limit:"); /* given without a value */
    assert_query_refused("since=yesterday", "invalid_field", "since: must be an RFC 3339 time");
    assert_query_refused("id=a%20b", "invalid_field", "id: not a valid id");
    assert_query_refused("id=", "invalid_field", "id:");
    assert_query_refused("text=abcde", "invalid_field", "text: at most 4");
    assert_query_refused("text=ax", "invalid_field", "text:");
    assert_query_refused("colour=dead", "invalid_field", "colour: must be \"red\", \"green\" or \"blue\"");
}

static void test_query_names(void **state)
{
    char many[400];
    size_t used = 0;

    assert_query_refused("status=dead", "unknown_field", "status: unknown query parameter");
    assert_query_refused("limit=5&Limit=5", "unknown_field", "Limit:"); /* names are exact */
    assert_query_refused("limit=5&limit=6", "invalid_field", "limit: given more than once");
    assert_query_refused("=5", "unknown_field", ": unknown query parameter");
    for (int i = 0; i <= QUERY_PAIRS_MAX; i++)
        used += (size_t)snprintf(many + used, sizeof many - used, "%slimit=1", i ? "&" : "");
    assert_query_refused(many, "invalid_field", "query: at most");

    /* The message lists what the route takes. */
    struct filter f;
    struct api_error err;
    assert_int_equal(parse_query("colour=red&nope=1", &f, &err), HOOKD_EINVAL);
    assert_non_null(strstr(err.message, "limit, cursor, after, since, id, text, colour"));
}

static void test_query_cursors(void **state)
{
    char good[CURSOR_TEXT_MAX], other_list[CURSOR_TEXT_MAX], qs[400], edited[CURSOR_TEXT_MAX];
    struct filter f;
    struct api_error err;

    assert_int_equal(cursor_encode("things", "dlv_0001", good), 0);
    assert_int_equal(cursor_encode("other", "dlv_0001", other_list), 0);
    assert_string_not_equal(good, other_list);
    /* What cursors were before (a bare id or sequence number) and anything else the server did not make. */
    assert_query_refused("cursor=dlv_0001", "invalid_field", "cursor: not a cursor this list returned");
    assert_query_refused("after=42", "invalid_field", "after: not a cursor this list returned");
    assert_query_refused("cursor=", "invalid_field", "cursor:");
    assert_query_refused("cursor=bogus", "invalid_field", "cursor:");
    snprintf(qs, sizeof qs, "cursor=%s", other_list);
    assert_query_refused(qs, "invalid_field", "cursor:"); /* another list's */
    snprintf(qs, sizeof qs, "after=%s", good); /* an id cursor where a sequence one belongs */
    assert_query_refused(qs, "invalid_field", "after:");
    /* Every single-character edit and every truncation is refused. */
    for (size_t i = 0; i < strlen(good); i++) {
        snprintf(edited, sizeof edited, "%s", good);
        edited[i] = edited[i] == 'A' ? 'B' : 'A';
        snprintf(qs, sizeof qs, "cursor=%s", edited);
        assert_int_equal(parse_query(qs, &f, &err), HOOKD_EINVAL);
        snprintf(qs, sizeof qs, "cursor=%.*s", (int)i, good);
        assert_int_equal(parse_query(qs, &f, &err), HOOKD_EINVAL);
    }
    snprintf(qs, sizeof qs, "cursor=%s", good);
    assert_int_equal(parse_query(qs, &f, &err), 0);
    assert_string_equal(f.cursor_id, "dlv_0001");
}

static void test_cursor_codec(void **state)
{
    char text[CURSOR_TEXT_MAX], key[CURSOR_KEY_MAX], longest[CURSOR_KEY_MAX];

    memset(longest, 'z', sizeof longest - 1);
    longest[sizeof longest - 1] = '\0';
    assert_int_equal(cursor_encode("deliveries", longest, text), 0);
    assert_true(strlen(text) < CURSOR_TEXT_MAX);
    assert_int_equal(strspn(text, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"), strlen(text));
    assert_int_equal(cursor_decode("deliveries", text, key), 0);
    assert_string_equal(key, longest);
    assert_int_equal(cursor_decode("events", text, key), HOOKD_EINVAL);
    assert_string_equal(key, "");
    assert_int_equal(cursor_encode("events", "9223372036854775807", text), 0);
    assert_int_equal(cursor_decode("events", text, key), 0);
    assert_string_equal(key, "9223372036854775807");
    /* Keys a cursor cannot hold. */
    assert_int_equal(cursor_encode("events", "", text), HOOKD_EINVAL);
    assert_int_equal(cursor_encode("events", "a b", text), HOOKD_EINVAL);
    assert_int_equal(cursor_encode("events", NULL, text), HOOKD_EINVAL);
    char too_long[CURSOR_KEY_MAX + 1];
    memset(too_long, 'z', CURSOR_KEY_MAX);
    too_long[CURSOR_KEY_MAX] = '\0';
    assert_int_equal(cursor_encode("events", too_long, text), HOOKD_EINVAL);
    /* Not base64url, padded, or far too long. */
    assert_int_equal(cursor_decode("events", "a+b/", key), HOOKD_EINVAL);
    assert_int_equal(cursor_encode("events", "1", text), 0);
    char padded[CURSOR_TEXT_MAX + 2];
    snprintf(padded, sizeof padded, "%s=", text);
    assert_int_equal(cursor_decode("events", padded, key), HOOKD_EINVAL);
    char huge[300];
    memset(huge, 'A', sizeof huge - 1);
    huge[sizeof huge - 1] = '\0';
    assert_int_equal(cursor_decode("events", huge, key), HOOKD_EINVAL);
    assert_null(query_cursor_make("events", NULL, text));
    assert_non_null(query_cursor_make("events", "5", text));
}

/* The list routes' tables: every row names a field once; the status words follow enum delivery_status;
 * each route refuses an unknown filter and a bare (old-style) cursor. */
static void test_list_tables(void **state)
{
    const struct {
        const struct query_param *table;
        size_t n;
    } routes[] = {
        {endpoint_list_query, endpoint_list_query_count},
        {event_list_query, event_list_query_count},
        {delivery_list_query, delivery_list_query_count},
    };
    union {
        struct endpoint_filter ep;
        struct event_filter ev;
        struct delivery_filter dl;
    } target;
    struct api_error err;

    for (int v = 0; delivery_status_words[v]; v++)
        assert_string_equal(delivery_status_words[v], delivery_status_name((enum delivery_status)v));
    for (size_t r = 0; r < sizeof routes / sizeof routes[0]; r++) {
        const struct query_pair unknown[] = {{"status_code", "500"}}, bare[] = {{"cursor", "1"}};
        bool has_limit = false, has_cursor = false;

        for (size_t i = 0; i < routes[r].n; i++) {
            for (size_t k = i + 1; k < routes[r].n; k++)
                assert_string_not_equal(routes[r].table[i].name, routes[r].table[k].name);
            has_limit |= routes[r].table[i].type == QUERY_LIMIT;
            has_cursor |= strcmp(routes[r].table[i].name, "cursor") == 0;
        }
        assert_true(has_limit && has_cursor);
        memset(&target, 0, sizeof target);
        assert_int_equal(query_parse(routes[r].table, routes[r].n, unknown, 1, &target, &scratch, &err),
                         HOOKD_EINVAL);
        assert_string_equal(err.code, "unknown_field");
        assert_int_equal(query_parse(routes[r].table, routes[r].n, bare, 1, &target, &scratch, &err), HOOKD_EINVAL);
        assert_string_equal(err.code, "invalid_field");
    }
    /* /v1/events?status=dead: the probe of issue 8. */
    const struct query_pair status[] = {{"status", "dead"}};
    assert_int_equal(query_parse(event_list_query, event_list_query_count, status, 1, &target, &scratch, &err),
                     HOOKD_EINVAL);
    assert_string_equal(err.code, "unknown_field");
    /* And on deliveries it is a filter. */
    target.dl = (struct delivery_filter){.status = -1};
    assert_int_equal(query_parse(delivery_list_query, delivery_list_query_count, status, 1, &target, &scratch, &err),
                     0);
    assert_int_equal(target.dl.status, DELIVERY_DEAD);
    assert_int_equal(target.dl.limit, API_LIMIT_DEFAULT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_field_types),  cmocka_unit_test(test_field_names),
        cmocka_unit_test(test_endpoint_table), cmocka_unit_test(test_query_types),
        cmocka_unit_test(test_query_names),  cmocka_unit_test(test_query_cursors),
        cmocka_unit_test(test_cursor_codec), cmocka_unit_test(test_list_tables),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
