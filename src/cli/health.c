/*
 * `hookd health ENDPOINT`, `hookd summary [--window D]`, `hookd sync ACCOUNT`
 * and `hookd sync --resource TYPE ID [--account A]`: what support reads about
 * delivery, through the admin API. Key/value blocks and aligned tables by
 * default (times as the API gives them), the API's JSON with --json.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client.h"

#define CELL_MAX 48 /* longer values are cut with "..." (the --json output has them whole) */
#define TABLE_COLUMNS_MAX 12

enum { O_JSON = 1, O_WINDOW, O_RESOURCE, O_ACCOUNT };

/* The value at key as text: strings as they are, numbers, booleans as yes/no, null as "-". */
static const char *text_of(const json_t *o, const char *key, char buf[64])
{
    const json_t *v = json_object_get(o, key);

    if (json_is_string(v))
        return json_string_value(v);
    if (json_is_integer(v))
        snprintf(buf, 64, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    else if (json_is_real(v))
        snprintf(buf, 64, "%g", json_real_value(v));
    else if (json_is_boolean(v))
        snprintf(buf, 64, "%s", json_is_true(v) ? "yes" : "no");
    else
        snprintf(buf, 64, "-");
    return buf;
}

static void cell(char out[CELL_MAX + 4], const char *text)
{
    size_t n = strlen(text);

    if (n <= CELL_MAX) {
        memcpy(out, text, n + 1);
    } else {
        memcpy(out, text, CELL_MAX - 3);
        memcpy(out + CELL_MAX - 3, "...", 4);
    }
}

/* A cell computed from a row (clusters, an error) instead of read at a key. */
typedef void (*cell_fn)(const json_t *row, char *out, size_t cap);

struct column {
    const char *title;
    const char *key; /* NULL: fn */
    cell_fn fn;
};

static void cell_of(const struct column *c, const json_t *row, char out[CELL_MAX + 4])
{
    char buf[256], num[64];

    if (c->fn)
        c->fn(row, buf, sizeof buf);
    else
        snprintf(buf, sizeof buf, "%s", text_of(row, c->key, num));
    cell(out, buf);
}

/* Rows of data as an aligned table under its title; "(none)" when there are none. */
static void print_table(const char *title, const struct column *cols, size_t n, const json_t *data)
{
    size_t width[TABLE_COLUMNS_MAX], i;
    char buf[CELL_MAX + 4];
    json_t *row;

    printf("\n%s\n", title);
    if (json_array_size(data) == 0) {
        printf("(none)\n");
        return;
    }
    for (size_t k = 0; k < n; k++)
        width[k] = strlen(cols[k].title);
    json_array_foreach(data, i, row) {
        for (size_t k = 0; k < n; k++) {
            cell_of(&cols[k], row, buf);
            width[k] = strlen(buf) > width[k] ? strlen(buf) : width[k];
        }
    }
    for (size_t k = 0; k < n; k++)
        printf("%-*s%s", k + 1 < n ? (int)width[k] : 0, cols[k].title, k + 1 < n ? "  " : "\n");
    json_array_foreach(data, i, row) {
        for (size_t k = 0; k < n; k++) {
            cell_of(&cols[k], row, buf);
            printf("%-*s%s", k + 1 < n ? (int)width[k] : 0, buf, k + 1 < n ? "  " : "\n");
        }
    }
}

static void print_kv(const char *key, const char *value) { printf("%-20s %s\n", key, value); }

static void print_field(const json_t *o, const char *key)
{
    char num[64];

    print_kv(key, text_of(o, key, num));
}

/* "37 × 401, 12 × timeout" */
static void clusters_cell(const json_t *row, char *out, size_t cap)
{
    const json_t *cl = json_object_get(row, "clusters"), *c;
    size_t used = 0, i;

    out[0] = '\0';
    json_array_foreach(cl, i, c) {
        const json_t *code = json_object_get(c, "status_code");
        char what[64];
        if (json_is_integer(code))
            snprintf(what, sizeof what, "%" JSON_INTEGER_FORMAT, json_integer_value(code));
        else
            snprintf(what, sizeof what, "%s", json_string_value(json_object_get(c, "error_class")) ?: "error");
        if (used < cap)
            used += (size_t)snprintf(out + used, cap - used, "%s%" JSON_INTEGER_FORMAT " x %s", i ? ", " : "",
                                     json_integer_value(json_object_get(c, "count")), what);
    }
}

/* The last error as "TIME CODE TEXT" (the code, or the error class) or "-". */
static void error_text(const json_t *e, char *out, size_t cap)
{
    char at[64], code[64];

    if (!json_is_object(e)) {
        snprintf(out, cap, "-");
        return;
    }
    if (!json_is_integer(json_object_get(e, "status_code")))
        snprintf(code, sizeof code, "%s", json_string_value(json_object_get(e, "error_class")) ?: "-");
    else
        text_of(e, "status_code", code);
    snprintf(out, cap, "%s %s %s", text_of(e, "at", at), code, json_string_value(json_object_get(e, "error")) ?: "");
}

static void last_error_cell(const json_t *row, char *out, size_t cap)
{
    const json_t *e = json_object_get(row, "last_error");

    if (json_is_string(e))
        snprintf(out, cap, "%s", json_string_value(e));
    else if (json_is_object(e))
        snprintf(out, cap, "%s", json_string_value(json_object_get(e, "error")) ?: "-");
    else
        snprintf(out, cap, "-");
}

/* ---- health --------------------------------------------------------------------------------- */

static void print_health(const json_t *h)
{
    static const char *const fields[] = {"endpoint_id", "url", "account", "enabled", "disabled_reason",
                                         "last_attempt_at", "last_success_at", "next_attempt_at", NULL};
    static const char *const counts[] = {"pending", "retrying", "in_flight", "dead", "skipped", NULL};
    static const char *const figures[] = {"attempts", "successes", "failures", "success_rate", "latency_p50_ms",
                                          "latency_p99_ms", NULL};
    const json_t *breaker = json_object_get(h, "breaker"), *dl = json_object_get(h, "deliveries");
    const json_t *oldest = json_object_get(h, "oldest_undelivered"), *win = json_object_get(h, "windows");
    char buf[512], num[64], num2[64];

    for (size_t i = 0; fields[i]; i++)
        print_field(h, fields[i]);
    error_text(json_object_get(h, "last_error"), buf, sizeof buf);
    print_kv("last_error", buf);
    snprintf(buf, sizeof buf, "%s (failures %s, next probe %s)", text_of(breaker, "state", num),
             text_of(breaker, "consecutive_failures", num2), text_of(breaker, "next_probe_at", (char[64]){0}));
    print_kv("breaker", buf);
    for (size_t i = 0; counts[i]; i++)
        print_field(dl, counts[i]);
    if (json_is_object(oldest)) {
        snprintf(buf, sizeof buf, "%s (created %s, %s ms old)", text_of(oldest, "event_id", num),
                 text_of(oldest, "created_at", num2), text_of(oldest, "age_ms", (char[64]){0}));
        print_kv("oldest_undelivered", buf);
    } else {
        print_kv("oldest_undelivered", "-");
    }
    printf("\n%-20s %-12s %s\n", "", "1h", "24h");
    for (size_t i = 0; figures[i]; i++)
        printf("%-20s %-12s %s\n", figures[i], text_of(json_object_get(win, "1h"), figures[i], num),
               text_of(json_object_get(win, "24h"), figures[i], num2));
}

/* ---- summary -------------------------------------------------------------------------------- */

static void print_summary(const json_t *s)
{
    static const struct column by_endpoint[] = {{"ENDPOINT", "endpoint_id", NULL}, {"URL", "url", NULL},
                                                {"ATTEMPTS", "attempts", NULL},   {"FAILURES", "failures", NULL},
                                                {"CLUSTERS", NULL, clusters_cell}};
    static const struct column by_account[] = {{"ACCOUNT", "account", NULL}, {"FAILURES", "failures", NULL},
                                               {"CLUSTERS", NULL, clusters_cell}};
    static const struct column growing[] = {{"ENDPOINT", "endpoint_id", NULL}, {"URL", "url", NULL},
                                            {"RETRYING", "retrying", NULL},    {"WINDOW_AGO", "retrying_window_ago", NULL},
                                            {"GROWTH", "growth", NULL}};
    static const struct column silent[] = {{"ENDPOINT", "endpoint_id", NULL}, {"URL", "url", NULL},
                                           {"ATTEMPTS", "attempts", NULL},    {"LAST_SUCCESS", "last_success_at", NULL},
                                           {"LAST_ERROR", NULL, last_error_cell}};
    const json_t *oldest = json_object_get(s, "oldest_undelivered");
    char buf[512], a[64], b[64], c[64];

    snprintf(buf, sizeof buf, "%s (%s .. %s)", text_of(s, "window", a), text_of(s, "since", b),
             text_of(s, "until", c));
    print_kv("window", buf);
    print_field(s, "attempts");
    print_field(s, "failures");
    if (json_is_object(oldest)) {
        snprintf(buf, sizeof buf, "%s to %s (created %s, %s ms old)", text_of(oldest, "event_id", a),
                 text_of(oldest, "endpoint_id", b), text_of(oldest, "created_at", c),
                 text_of(oldest, "age_ms", (char[64]){0}));
        print_kv("oldest_undelivered", buf);
    } else {
        print_kv("oldest_undelivered", "-");
    }
    print_table("FAILURES BY ENDPOINT", by_endpoint, 5, json_object_get(s, "failures_by_endpoint"));
    print_table("FAILURES BY ACCOUNT", by_account, 3, json_object_get(s, "failures_by_account"));
    print_table("GROWING RETRY BACKLOGS", growing, 5, json_object_get(s, "growing_backlogs"));
    print_table("NO SUCCESS IN THE WINDOW", silent, 5, json_object_get(s, "no_success"));
}

/* ---- sync ----------------------------------------------------------------------------------- */

static void event_cell(const json_t *row, char *out, size_t cap)
{
    const json_t *e = json_object_get(row, "event");
    char num[64];

    snprintf(out, cap, "%s", text_of(e, "id", num));
}

static void version_cell(const json_t *row, char *out, size_t cap)
{
    char num[64];

    snprintf(out, cap, "%s", text_of(json_object_get(row, "event"), "version", num));
}

static void print_sync(const json_t *s, bool resource)
{
    static const struct column account_cols[] = {
        {"ENDPOINT", "endpoint_id", NULL},  {"URL", "url", NULL},         {"STATUS", "status", NULL},
        {"DELAYED", "delayed", NULL},       {"PENDING", "pending", NULL}, {"RETRYING", "retrying", NULL},
        {"FAILED", "failed", NULL},         {"LAST_ATTEMPT", "last_attempt_at", NULL},
        {"NEXT_ATTEMPT", "next_attempt_at", NULL}, {"LAST_ERROR", NULL, last_error_cell}};
    static const struct column resource_cols[] = {
        {"ENDPOINT", "endpoint_id", NULL}, {"URL", "url", NULL},      {"STATUS", "status", NULL},
        {"DELAYED", "delayed", NULL},      {"EVENT", NULL, event_cell}, {"VERSION", NULL, version_cell},
        {"ATTEMPTS", "attempts", NULL},    {"LAST_ATTEMPT", "last_attempt_at", NULL},
        {"NEXT_ATTEMPT", "next_attempt_at", NULL}, {"LAST_ERROR", NULL, last_error_cell}};
    const json_t *r = json_object_get(s, "resource");
    char buf[600], a[64], b[64];

    if (resource) {
        snprintf(buf, sizeof buf, "%s/%s", text_of(r, "type", a), text_of(r, "id", b));
        print_kv("resource", buf);
    }
    print_field(s, "account");
    print_field(s, "status");
    print_field(s, "delayed");
    print_field(s, "sync_warn_after");
    print_table("ENDPOINTS", resource ? resource_cols : account_cols, 10, json_object_get(s, "endpoints"));
}

/* ---- commands ------------------------------------------------------------------------------- */

struct parsed {
    const char *opt[8];
    const char *pos[2];
    int n_pos;
    const char *config;
};

/* Options of one command: allowed (CLI_OPT bits of O_*), n_pos positional arguments at most. */
static int parse(int argc, char **argv, uint64_t allowed, int n_pos, const char *usage, struct parsed *p)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, O_JSON},         {"window", required_argument, NULL, O_WINDOW},
        {"resource", required_argument, NULL, O_RESOURCE}, {"account", required_argument, NULL, O_ACCOUNT},
        {"config", required_argument, NULL, 'c'},    {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;

    memset(p, 0, sizeof *p);
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":c:h", opts, NULL)) != -1) {
        if (c == 'c') {
            p->config = optarg;
        } else if (c == 'h') {
            printf("usage: %s\n", usage);
            return -1;
        } else if (c > 0 && c < 8 && (allowed & CLI_OPT(c))) {
            p->opt[c] = optarg ? optarg : "";
        } else {
            fprintf(stderr, "hookd %s: %s option '%s'\nusage: %s\n", argv[0],
                    c == ':' ? "missing value for" : "unknown or misplaced", argv[optind - 1], usage);
            return CLI_EXIT_USAGE;
        }
    }
    for (int i = optind; i < argc; i++) {
        if (p->n_pos == n_pos) {
            fprintf(stderr, "hookd %s: unexpected argument '%s'\nusage: %s\n", argv[0], argv[i], usage);
            return CLI_EXIT_USAGE;
        }
        p->pos[p->n_pos++] = argv[i];
    }
    return CLI_EXIT_OK;
}

/* GETs path; prints its JSON with --json, else through print. */
static int show(const struct parsed *p, const char *path, void (*print)(const json_t *, bool), bool flag)
{
    struct client c;
    char err[512];
    json_t *answer = NULL;
    int rc;

    if (client_init(&c, p->config, err, sizeof err) != 0) {
        fprintf(stderr, "hookd: %s\n", err);
        return CLI_EXIT_USAGE;
    }
    if (p->opt[O_JSON]) {
        rc = client_call(&c, "GET", path, NULL, NULL);
    } else {
        rc = client_call_json(&c, "GET", path, NULL, &answer);
        if (rc == CLI_EXIT_OK)
            print(answer, flag);
    }
    json_decref(answer);
    client_close(&c);
    return rc;
}

static void print_health_block(const json_t *j, bool unused) { (void)unused; print_health(j); }
static void print_summary_block(const json_t *j, bool unused) { (void)unused; print_summary(j); }

int cmd_health(int argc, char **argv)
{
    static const char usage[] = "hookd health ENDPOINT_ID [--json]";
    char path[512] = "/v1/endpoints";
    struct parsed p;
    int rc = parse(argc, argv, CLI_OPT(O_JSON), 1, usage, &p);

    if (rc != CLI_EXIT_OK)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (p.n_pos != 1) {
        fprintf(stderr, "hookd health: an endpoint id is required\nusage: %s\n", usage);
        return CLI_EXIT_USAGE;
    }
    if (!cli_path_segment(path, sizeof path, p.pos[0]) || strlen(path) + 8 > sizeof path) {
        fprintf(stderr, "hookd health: id too long\n");
        return CLI_EXIT_USAGE;
    }
    strncat(path, "/health", sizeof path - strlen(path) - 1);
    return show(&p, path, print_health_block, false);
}

int cmd_summary(int argc, char **argv)
{
    static const char usage[] = "hookd summary [--window DURATION] [--json]";
    char path[256] = "/v1/summary";
    struct parsed p;
    int rc = parse(argc, argv, CLI_OPT(O_JSON) | CLI_OPT(O_WINDOW), 0, usage, &p);

    if (rc != CLI_EXIT_OK)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (!cli_path_query(path, sizeof path, "window", p.opt[O_WINDOW])) {
        fprintf(stderr, "hookd summary: --window too long\n");
        return CLI_EXIT_USAGE;
    }
    return show(&p, path, print_summary_block, false);
}

int cmd_sync(int argc, char **argv)
{
    static const char usage[] = "hookd sync ACCOUNT [--json] | hookd sync --resource TYPE ID [--account A] [--json]";
    char path[2048];
    struct parsed p;
    int rc = parse(argc, argv, CLI_OPT(O_JSON) | CLI_OPT(O_RESOURCE) | CLI_OPT(O_ACCOUNT), 1, usage, &p);
    bool ok;

    if (rc != CLI_EXIT_OK)
        return rc < 0 ? CLI_EXIT_OK : rc;
    if (p.n_pos != 1 || (p.opt[O_ACCOUNT] && !p.opt[O_RESOURCE])) {
        fprintf(stderr, "hookd sync: %s\nusage: %s\n",
                p.n_pos != 1 ? "an account (or --resource TYPE ID) is required" : "--account goes with --resource",
                usage);
        return CLI_EXIT_USAGE;
    }
    if (p.opt[O_RESOURCE]) {
        snprintf(path, sizeof path, "/v1/resources");
        ok = cli_path_segment(path, sizeof path, p.opt[O_RESOURCE]) && cli_path_segment(path, sizeof path, p.pos[0]) &&
             strlen(path) + 6 < sizeof path;
        if (ok)
            strncat(path, "/sync", sizeof path - strlen(path) - 1);
        ok = ok && cli_path_query(path, sizeof path, "account", p.opt[O_ACCOUNT]);
    } else {
        snprintf(path, sizeof path, "/v1/accounts");
        ok = cli_path_segment(path, sizeof path, p.pos[0]) && strlen(path) + 6 < sizeof path;
        if (ok)
            strncat(path, "/sync", sizeof path - strlen(path) - 1);
    }
    if (!ok) {
        fprintf(stderr, "hookd sync: arguments too long\n");
        return CLI_EXIT_USAGE;
    }
    return show(&p, path, print_sync, p.opt[O_RESOURCE] != NULL);
}
