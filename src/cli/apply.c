/*
 * `hookd apply FILE.json`: an idempotent upsert of {"machines": [...],
 * "sources": [...], "endpoints": [...]} through the admin API (machines
 * first, as sources name them). Each machine and source is created, or
 * PATCHed with its whole definition (absent fields as null, so the file is
 * what the source becomes); the server writes nothing when nothing differs,
 * which the unchanged updated_at shows. Each endpoint is found by its id when
 * given, else by url and account; a found one gets a PATCH of the fields that
 * differ (and a rotation when its secret differs). Prints a table of the
 * items and one of the counts per kind (--json: both as one JSON object);
 * exits 1 when any item failed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "core/duration.h"

#define APPLY_ITEMS_MAX 10000
#define APPLY_PAGES_MAX 1000

enum outcome { CREATED, UPDATED, UNCHANGED, FAILED, N_OUTCOMES };
static const char *const outcome_words[N_OUTCOMES] = {"created", "updated", "unchanged", "failed"};

/* One request with a JSON body (may be NULL); *out gets the parsed answer (may be NULL). Returns the HTTP
 * status, or 0 when the API cannot be reached (after printing why). */
static long call(const struct client *c, const char *method, const char *path, const json_t *body, json_t **out)
{
    char *raw = NULL;
    long status = 0;

    if (client_exchange(c, method, path, body, NULL, &status, &raw, out) != CLI_EXIT_OK)
        status = 0;
    free(raw);
    return status;
}

/* Text from the file or the server, safe for the terminal. */
static const char *safe(const char *text, char out[OUT_CELL_BYTES])
{
    out_cell_text(text ? text : "?", strlen(text ? text : "?"), 200, out, OUT_CELL_BYTES);
    return out;
}

static void print_failure(const char *kind, const char *what, long status, const json_t *answer)
{
    const char *message = json_string_value(json_object_get(json_object_get(answer, "error"), "message"));
    char w[OUT_CELL_BYTES], m[OUT_CELL_BYTES];

    fprintf(stderr, "%s %s: failed: %s (HTTP %ld)\n", kind, safe(what, w), safe(message ? message : "no answer", m),
            status);
}

/* One row of the items table: {"kind", "name", "result", "id"}. */
static void record(json_t *items, const char *kind, const char *name, enum outcome result, const char *id)
{
    json_array_append_new(items, json_pack("{s:s,s:s?,s:s,s:s?}", "kind", kind, "name", name, "result",
                                           outcome_words[result], "id", id));
}

/* ---- sources ------------------------------------------------------------------------------- */

/* Top-level fields a PATCH sets to null when the file leaves them out. */
static const char *const source_optional[] = {"event_id", "event_type", "entity", "required", "max_body",
                                              "handler", "retry_schedule", "max_defer", "reconcile"};

/* Machines: the same upsert by name (a machine's states and emit may be left out). */
static const char *const machine_optional[] = {"states", "emit"};

/* One named resource (a source or a machine): created, or PATCHed whole (absent optional fields as null). */
static enum outcome apply_named(const struct client *c, const char *kind, const char *collection,
                                const char *const *optional, size_t n_optional, const json_t *src, json_t *items)
{
    const char *name = json_string_value(json_object_get(src, "name"));
    char path[512];
    json_t *got = NULL, *answer = NULL, *patch;
    enum outcome result = FAILED;
    char w[OUT_CELL_BYTES];
    long status;

    snprintf(path, sizeof path, "%s", collection);
    if (!json_is_object(src) || !name) {
        fprintf(stderr, "%s: each entry of \"%ss\" must be an object with a \"name\"\n", kind, kind);
        record(items, kind, NULL, FAILED, NULL);
        return FAILED;
    }
    if (!cli_path_segment(path, sizeof path, name)) {
        fprintf(stderr, "%s %s: name too long\n", kind, safe(name, w));
        record(items, kind, name, FAILED, NULL);
        return FAILED;
    }
    status = call(c, "GET", path, NULL, &got);
    if (status == 404) {
        status = call(c, "POST", collection, src, &answer);
        result = status == 201 ? CREATED : FAILED;
    } else if (status == 200) {
        patch = json_deep_copy(src);
        json_object_del(patch, "name");
        for (size_t i = 0; patch && i < n_optional; i++) {
            if (!json_object_get(patch, optional[i]))
                json_object_set_new(patch, optional[i], json_null());
        }
        status = patch ? call(c, "PATCH", path, patch, &answer) : 0;
        json_decref(patch);
        if (status == 200) {
            const char *before = json_string_value(json_object_get(got, "updated_at"));
            const char *after = json_string_value(json_object_get(answer, "updated_at"));
            result = before && after && strcmp(before, after) == 0 ? UNCHANGED : UPDATED;
        }
    }
    if (result == FAILED && status != 0)
        print_failure(kind, name, status, answer ? answer : got);
    record(items, kind, name, result, NULL);
    json_decref(got);
    json_decref(answer);
    return result;
}

/* ---- endpoints ----------------------------------------------------------------------------- */

static const char *const endpoint_fields[] = {"id", "url", "account", "event_types", "secret", "ordering",
                                              "max_in_flight", "rate_limit", "timeout", "retry_schedule",
                                              "description"};

static bool known_endpoint_field(const char *key)
{
    for (size_t i = 0; i < sizeof endpoint_fields / sizeof endpoint_fields[0]; i++) {
        if (strcmp(endpoint_fields[i], key) == 0)
            return true;
    }
    return false;
}

/* Durations compared by value ("60s" is "1m"); lists of them too. */
static bool durations_equal(const char *a, const char *b)
{
    int64_t xa[64], xb[64];
    size_t na = 0, nb = 0;

    if (duration_list_parse(a, xa, 64, &na) != 0 || duration_list_parse(b, xb, 64, &nb) != 0)
        return strcmp(a, b) == 0;
    return na == nb && memcmp(xa, xb, na * sizeof xa[0]) == 0;
}

static const char *text_of(const json_t *v) { return json_is_string(v) ? json_string_value(v) : NULL; }

/* Whether the file's value of key is what the endpoint has (null, "" and 0 read as unset). */
static bool field_equal(const char *key, const json_t *want, const json_t *have)
{
    bool want_unset = json_is_null(want) || (json_is_string(want) && json_string_length(want) == 0) ||
                      (json_is_integer(want) && json_integer_value(want) == 0);
    bool have_unset = !have || json_is_null(have) || (json_is_integer(have) && json_integer_value(have) == 0) ||
                      (json_is_array(have) && json_array_size(have) == 0 && strcmp(key, "event_types") == 0);

    if (want_unset || have_unset)
        return want_unset && (have_unset || (strcmp(key, "ordering") == 0 && text_of(have) &&
                                             strcmp(text_of(have), "none") == 0));
    if (strcmp(key, "timeout") == 0 || strcmp(key, "retry_schedule") == 0) {
        char joined[1024] = "";
        if (json_is_array(want)) { /* ["1s","2s"] as "1s,2s" */
            size_t i, used = 0;
            json_t *item;
            json_array_foreach(want, i, item)
                used += (size_t)snprintf(joined + used, sizeof joined - used, "%s%s", i ? "," : "",
                                         text_of(item) ? text_of(item) : "?");
        }
        const char *w = json_is_array(want) ? joined : text_of(want);
        return w && text_of(have) && durations_equal(w, text_of(have));
    }
    return json_equal(want, have);
}

/* The endpoint the file means: by id, else the one with its url and account. *found NULL when none. */
static long endpoint_find(const struct client *c, const json_t *ep, json_t **found)
{
    const char *id = text_of(json_object_get(ep, "id")), *url = text_of(json_object_get(ep, "url"));
    const char *account = text_of(json_object_get(ep, "account"));
    char path[2048], cursor[256] = "";
    long status;

    *found = NULL;
    if (id) {
        snprintf(path, sizeof path, "/v1/endpoints");
        if (!cli_path_segment(path, sizeof path, id))
            return 0;
        status = call(c, "GET", path, NULL, found);
        if (status != 200) {
            json_decref(*found);
            *found = NULL;
        }
        return status == 404 ? 200 : status;
    }
    for (int page = 0; page < APPLY_PAGES_MAX; page++) {
        json_t *list = NULL, *item;
        size_t i;
        snprintf(path, sizeof path, "/v1/endpoints");
        if (!cli_path_query(path, sizeof path, "account", account) || !cli_path_query(path, sizeof path, "limit", "1000") ||
            !cli_path_query(path, sizeof path, "cursor", cursor[0] ? cursor : NULL))
            return 0;
        status = call(c, "GET", path, NULL, &list);
        if (status != 200) {
            json_decref(list);
            return status;
        }
        json_array_foreach(json_object_get(list, "data"), i, item) {
            const char *item_account = text_of(json_object_get(item, "account"));
            if (!*found && url && json_equal(json_object_get(item, "url"), json_object_get(ep, "url")) &&
                ((!account && !item_account) || (account && item_account && strcmp(account, item_account) == 0)))
                *found = json_incref(item);
        }
        const char *next = text_of(json_object_get(list, "next_cursor"));
        snprintf(cursor, sizeof cursor, "%s", next ? next : "");
        json_decref(list);
        if (*found || !next)
            break;
    }
    if (*found) { /* the list hides the secret: read the endpoint itself */
        json_t *one = NULL;
        snprintf(path, sizeof path, "/v1/endpoints");
        if (!cli_path_segment(path, sizeof path, text_of(json_object_get(*found, "id"))))
            return 0;
        json_decref(*found);
        *found = NULL;
        status = call(c, "GET", path, NULL, &one);
        if (status == 200)
            *found = one;
        else
            json_decref(one);
        return status;
    }
    return 200;
}

static enum outcome apply_endpoint(const struct client *c, const json_t *ep, json_t *items)
{
    const char *url = text_of(json_object_get(ep, "url")), *id = text_of(json_object_get(ep, "id"));
    const char *key, *label = id ? id : url ? url : "?";
    json_t *found = NULL, *answer = NULL, *patch = NULL, *v;
    enum outcome result = FAILED;
    char path[512], w[OUT_CELL_BYTES], k[OUT_CELL_BYTES];
    long status;

    if (!json_is_object(ep) || (!url && !id)) {
        fprintf(stderr, "endpoint: each entry of \"endpoints\" must be an object with a \"url\" (or an \"id\")\n");
        record(items, "endpoint", NULL, FAILED, NULL);
        return FAILED;
    }
    json_object_foreach((json_t *)ep, key, v) {
        if (!known_endpoint_field(key)) {
            fprintf(stderr, "endpoint %s: unknown field %s\n", safe(label, w), safe(key, k));
            record(items, "endpoint", label, FAILED, NULL);
            return FAILED;
        }
    }
    status = endpoint_find(c, ep, &found);
    if (status != 200) {
        if (status != 0)
            fprintf(stderr, "endpoint %s: cannot look it up (HTTP %ld)\n", safe(label, w), status);
        json_decref(found);
        record(items, "endpoint", label, FAILED, NULL);
        return FAILED;
    }
    if (!found && id) {
        fprintf(stderr, "endpoint %s: no endpoint has this id (leave \"id\" out to create one)\n", safe(id, w));
        record(items, "endpoint", label, FAILED, NULL);
        return FAILED;
    }
    if (!found) {
        status = call(c, "POST", "/v1/endpoints", ep, &answer);
        result = status == 201 ? CREATED : FAILED;
        if (status != 201 && status)
            print_failure("endpoint", label, status, answer);
        record(items, "endpoint", label, result, text_of(json_object_get(answer, "id")));
        json_decref(answer);
        return result;
    }
    snprintf(path, sizeof path, "/v1/endpoints");
    if (!cli_path_segment(path, sizeof path, text_of(json_object_get(found, "id")))) {
        json_decref(found);
        record(items, "endpoint", label, FAILED, NULL);
        return FAILED;
    }
    result = UNCHANGED;
    patch = json_object();
    json_object_foreach((json_t *)ep, key, v) {
        if (strcmp(key, "id") != 0 && strcmp(key, "secret") != 0 && !field_equal(key, v, json_object_get(found, key)))
            json_object_set(patch, key, v);
    }
    if (patch && json_object_size(patch) > 0) {
        status = call(c, "PATCH", path, patch, &answer);
        result = status == 200 ? UPDATED : FAILED;
        if (result == FAILED && status)
            print_failure("endpoint", label, status, answer);
        json_decref(answer);
        answer = NULL;
    }
    const char *secret = text_of(json_object_get(ep, "secret"));
    const char *current = text_of(json_object_get(found, "secret"));
    if (result != FAILED && secret && (!current || strcmp(secret, current) != 0)) {
        json_t *body = json_pack("{s:s}", "secret", secret);
        char rotate[600];
        snprintf(rotate, sizeof rotate, "%s/secret/rotate", path);
        status = body ? call(c, "POST", rotate, body, &answer) : 0;
        json_decref(body);
        result = status == 200 ? UPDATED : FAILED;
        if (result == FAILED && status)
            print_failure("endpoint", label, status, answer);
        json_decref(answer);
    }
    record(items, "endpoint", label, result, text_of(json_object_get(found, "id")));
    json_decref(patch);
    json_decref(found);
    return result;
}

/* ---- the command ------------------------------------------------------------------------------ */

static void print_usage(FILE *f)
{
    fputs("usage: hookd apply [-c hookd.conf] [--json] FILE.json|-\n"
          "  FILE: {\"machines\": [...], \"sources\": [...], \"endpoints\": [...]}; each item is created, updated\n"
          "  or left unchanged (idempotent); prints one row per item and the counts by kind.\n"
          "options:\n"
          "  -c, --config FILE   hookd.conf to read admin_listen and admin_token from\n"
          "  --json              the report as one line of JSON {\"items\", \"summary\"} instead of tables\n"
          "  -h, --help          this text\n"
          "environment: HOOKD_ADMIN_URL (e.g. http://127.0.0.1:8081), HOOKD_ADMIN_TOKEN;\n"
          "NO_COLOR set: no colours (there are none when stdout is not a terminal)\n",
          f);
}

static int usage(void)
{
    print_usage(stderr);
    return CLI_EXIT_USAGE;
}

static const struct out_column item_columns[] = {
    {"KIND", "kind", NULL}, {"NAME", "name", NULL}, {"RESULT", "result", out_fmt_status}, {"ID", "id", NULL},
    OUT_COLUMNS_END,
};
static const struct out_column summary_columns[] = {
    {"KIND", "kind", NULL},           {"CREATED", "created", NULL}, {"UPDATED", "updated", NULL},
    {"UNCHANGED", "unchanged", NULL}, {"FAILED", "failed", NULL},   OUT_COLUMNS_END,
};

/* The items table and the counts per kind (machines only when the file has them); with --json {"items": [...], "summary": [...]} (one line). */
static void print_report(const struct out *o, json_t *items, int counts[3][N_OUTCOMES], bool machines)
{
    static const char *const kinds[3] = {"sources", "endpoints", "machines"};
    json_t *summary = json_array(), *report;

    for (size_t k = 0; k < 3; k++)
        if (k < 2 || machines) /* the machines row only for a file that has machines */
            json_array_append_new(summary, json_pack("{s:s,s:i,s:i,s:i,s:i}", "kind", kinds[k], "created",
                                                 counts[k][CREATED], "updated", counts[k][UPDATED], "unchanged",
                                                 counts[k][UNCHANGED], "failed", counts[k][FAILED]));
    if (o->json) {
        report = json_pack("{s:O,s:O}", "items", items, "summary", summary);
        if (report)
            json_dumpf(report, stdout, JSON_COMPACT);
        fputc('\n', stdout);
        json_decref(report);
    } else {
        if (json_array_size(items) > 0) {
            out_table(o, stdout, item_columns, items, 0);
            fputc('\n', stdout);
        }
        out_table(o, stdout, summary_columns, summary, 0);
    }
    json_decref(summary);
}

int cmd_apply(int argc, char **argv)
{
    const char *config = NULL, *file = NULL, *key;
    int counts[3][N_OUTCOMES] = {{0}};
    struct out o = {0};
    struct client client;
    json_error_t jerr;
    json_t *doc, *v, *item, *items;
    char err[512];
    size_t i;

    for (int k = 1; k < argc; k++) {
        if ((strcmp(argv[k], "-c") == 0 || strcmp(argv[k], "--config") == 0) && k + 1 < argc)
            config = argv[++k];
        else if (strcmp(argv[k], "-h") == 0 || strcmp(argv[k], "--help") == 0)
            return print_usage(stdout), CLI_EXIT_OK;
        else if (strcmp(argv[k], "--json") == 0)
            o.json = true;
        else if (argv[k][0] == '-' && argv[k][1] != '\0')
            return usage();
        else if (!file)
            file = argv[k];
        else
            return usage();
    }
    if (!file)
        return usage();
    o.colour = out_colour_wanted(STDOUT_FILENO, getenv("NO_COLOR"));
    doc = strcmp(file, "-") == 0 ? json_loadf(stdin, JSON_REJECT_DUPLICATES, &jerr)
                                 : json_load_file(file, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(doc)) {
        char f[OUT_CELL_BYTES], t[OUT_CELL_BYTES];
        /* The parser's words quote the file's bytes. */
        fprintf(stderr, "hookd apply: %s: %s (line %d)\n", safe(file, f), safe(doc ? "must be a JSON object" : jerr.text, t),
                doc ? 0 : jerr.line);
        json_decref(doc);
        return CLI_EXIT_USAGE;
    }
    json_object_foreach(doc, key, v) {
        if ((strcmp(key, "sources") != 0 && strcmp(key, "endpoints") != 0 && strcmp(key, "machines") != 0) ||
            !json_is_array(v) ||
            json_array_size(v) > APPLY_ITEMS_MAX) {
            char k[OUT_CELL_BYTES];
            fprintf(stderr,
                    "hookd apply: %s: \"%s\": the file holds only \"machines\", \"sources\" and \"endpoints\" arrays\n",
                    file, safe(key, k));
            json_decref(doc);
            return CLI_EXIT_USAGE;
        }
    }
    if (client_init(&client, config, err, sizeof err) != 0) {
        fprintf(stderr, "hookd: %s\n", err);
        json_decref(doc);
        return CLI_EXIT_USAGE;
    }
    if (!(items = json_array())) {
        fprintf(stderr, "hookd: out of memory\n");
        client_close(&client);
        json_decref(doc);
        return CLI_EXIT_USAGE;
    }
    /* Machines first: a source's handler.machine must name one that exists. */
    json_array_foreach(json_object_get(doc, "machines"), i, item)
        counts[2][apply_named(&client, "machine", "/v1/machines", machine_optional,
                              sizeof machine_optional / sizeof machine_optional[0], item, items)]++;
    json_array_foreach(json_object_get(doc, "sources"), i, item)
        counts[0][apply_named(&client, "source", "/v1/sources", source_optional,
                              sizeof source_optional / sizeof source_optional[0], item, items)]++;
    json_array_foreach(json_object_get(doc, "endpoints"), i, item)
        counts[1][apply_endpoint(&client, item, items)]++;
    client_close(&client);
    bool machines = json_object_get(doc, "machines") != NULL;
    json_decref(doc);
    print_report(&o, items, counts, machines);
    json_decref(items);
    return counts[0][FAILED] + counts[1][FAILED] + counts[2][FAILED] > 0 ? CLI_EXIT_API : CLI_EXIT_OK;
}
