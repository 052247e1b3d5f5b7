/*
 * `hookd trace KIND ID` and `hookd audit`: the investigation commands of
 * DESIGN §7 through the admin API. An entity's events as an aligned table
 * (one row per event: its decision, versions, times, worker), the audit's
 * checks as `key value` lines; the API's JSON with --json.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client.h"

#define CELL_MAX 48 /* longer values are cut with "..." (the --json output has them whole) */

enum { O_JSON = 1, O_ORDER, O_SOURCE, O_SINCE, O_UNTIL, O_CONFIG, O_HELP };

static const struct option options[] = {
    {"json", no_argument, NULL, O_JSON},   {"order", required_argument, NULL, O_ORDER},
    {"source", required_argument, NULL, O_SOURCE}, {"since", required_argument, NULL, O_SINCE},
    {"until", required_argument, NULL, O_UNTIL}, {"config", required_argument, NULL, O_CONFIG},
    {"help", no_argument, NULL, O_HELP},   {NULL, 0, NULL, 0},
};

struct args {
    const char *opt[O_HELP + 1];
    const char *pos[2];
    int n_pos;
};

/* Options and positionals; false (usage printed) on anything else. */
static bool parse(int argc, char **argv, uint32_t allowed, int n_pos, const char *usage, struct args *a)
{
    int code;

    memset(a, 0, sizeof *a);
    optind = 1;
    opterr = 0;
    while ((code = getopt_long(argc, argv, "c:h", options, NULL)) != -1) {
        if (code == 'c')
            code = O_CONFIG;
        if (code == 'h')
            code = O_HELP;
        if (code == O_HELP) {
            printf("usage: hookd %s\n", usage);
            exit(CLI_EXIT_OK);
        }
        if (code <= 0 || code > O_HELP || (code != O_CONFIG && !(allowed & (1u << code)))) {
            fprintf(stderr, "hookd %s: unknown or misplaced option\nusage: hookd %s\n", argv[0], usage);
            return false;
        }
        a->opt[code] = optarg ? optarg : "";
    }
    for (int i = optind; i < argc; i++) {
        if (a->n_pos >= n_pos) {
            fprintf(stderr, "usage: hookd %s\n", usage);
            return false;
        }
        a->pos[a->n_pos++] = argv[i];
    }
    if (a->n_pos != n_pos) {
        fprintf(stderr, "usage: hookd %s\n", usage);
        return false;
    }
    return true;
}

/* One GET; on a 2xx *out is the parsed answer, else the error is printed. */
static int get_json(const struct client *c, const char *path, json_t **out)
{
    char err[512], *response = NULL;
    long status = 0;
    int rc = client_request(c, "GET", path, NULL, NULL, &status, &response, err, sizeof err);

    *out = NULL;
    if (rc != 0) {
        fprintf(stderr, "hookd: %s\n", err);
        return CLI_EXIT_UNREACHABLE;
    }
    *out = json_loads(response, 0, NULL);
    free(response);
    if (status < 200 || status >= 300) {
        json_t *er = json_object_get(*out, "error");
        const char *code = json_string_value(json_object_get(er, "code"));
        const char *msg = json_string_value(json_object_get(er, "message"));
        fprintf(stderr, "hookd: %ld %s: %s\n", status, code ? code : "error", msg ? msg : "no message");
        json_decref(*out);
        *out = NULL;
        return CLI_EXIT_API;
    }
    if (!*out) {
        fprintf(stderr, "hookd: the answer is not JSON\n");
        return CLI_EXIT_API;
    }
    return CLI_EXIT_OK;
}

static void text_of(const json_t *o, const char *key, char out[CELL_MAX + 4])
{
    const json_t *v = json_object_get(o, key);

    if (json_is_string(v) && strlen(json_string_value(v)) > CELL_MAX)
        snprintf(out, CELL_MAX + 4, "%.*s...", CELL_MAX - 3, json_string_value(v));
    else if (json_is_string(v))
        snprintf(out, CELL_MAX + 4, "%s", json_string_value(v));
    else if (json_is_integer(v))
        snprintf(out, CELL_MAX + 4, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    else
        snprintf(out, CELL_MAX + 4, "-");
}

#define N_COLUMNS 10
static const char *const columns[N_COLUMNS] = {"EVENT_ID", "TYPE", "VERSION", "FROM", "TO", "RESULT",
                                               "RECEIVED", "PROCESSED", "WORKER", "DUPS"};
static const char *const keys[N_COLUMNS] = {"event_id", "type", "version", "from", "to", "result",
                                            "received_at", "processed_at", "worker", "dup_count"};

static void print_trace(const json_t *t)
{
    const json_t *events = json_object_get(t, "events"), *row;
    char buf[CELL_MAX + 4], state[CELL_MAX + 4], version[CELL_MAX + 4];
    size_t width[N_COLUMNS], i;

    text_of(t, "state", state);
    text_of(t, "version", version);
    printf("entity %s/%s: state %s, version %s\n", json_string_value(json_object_get(t, "kind")),
           json_string_value(json_object_get(t, "id")), state, version);
    for (size_t k = 0; k < N_COLUMNS; k++)
        width[k] = strlen(columns[k]);
    json_array_foreach(events, i, row) {
        for (size_t k = 0; k < N_COLUMNS; k++) {
            text_of(row, keys[k], buf);
            if (strlen(buf) > width[k])
                width[k] = strlen(buf);
        }
    }
    for (size_t k = 0; k < N_COLUMNS; k++)
        printf("%-*s%s", k + 1 < N_COLUMNS ? (int)width[k] : 0, columns[k], k + 1 < N_COLUMNS ? "  " : "\n");
    json_array_foreach(events, i, row) {
        for (size_t k = 0; k < N_COLUMNS; k++) {
            text_of(row, keys[k], buf);
            printf("%-*s%s", k + 1 < N_COLUMNS ? (int)width[k] : 0, buf, k + 1 < N_COLUMNS ? "  " : "\n");
        }
    }
}

static int run(const struct args *a, const char *path, void (*print)(const json_t *))
{
    struct client client;
    char err[512];
    json_t *answer;
    int rc;

    if (client_init(&client, a->opt[O_CONFIG], err, sizeof err) != 0) {
        fprintf(stderr, "hookd: %s\n", err);
        return CLI_EXIT_USAGE;
    }
    if (a->opt[O_JSON]) {
        rc = client_call(&client, "GET", path, NULL, NULL);
    } else if ((rc = get_json(&client, path, &answer)) == CLI_EXIT_OK) {
        print(answer);
        json_decref(answer);
    }
    client_close(&client);
    return rc;
}

int cmd_trace(int argc, char **argv)
{
    static const char usage[] = "trace KIND ID [--order received|version] [--json]";
    char path[2048] = "/v1/entities";
    struct args a;

    if (!parse(argc, argv, 1u << O_JSON | 1u << O_ORDER, 2, usage, &a))
        return CLI_EXIT_USAGE;
    if (!cli_path_segment(path, sizeof path, a.pos[0]) || !cli_path_segment(path, sizeof path, a.pos[1]) ||
        strlen(path) + sizeof "/trace" > sizeof path) {
        fprintf(stderr, "hookd trace: kind or id too long\n");
        return CLI_EXIT_USAGE;
    }
    size_t used = strlen(path);
    snprintf(path + used, sizeof path - used, "/trace");
    if (!cli_path_query(path, sizeof path, "order", a.opt[O_ORDER])) {
        fprintf(stderr, "hookd trace: query too long\n");
        return CLI_EXIT_USAGE;
    }
    return run(&a, path, print_trace);
}

static void print_audit(const json_t *r)
{
    static const char *const checks[] = {"received_twice", "lower_after_higher", "applied_twice",
                                         "unprocessed_changes", "conflicting_duplicates"};
    const json_t *c = json_object_get(r, "checks");
    char buf[CELL_MAX + 4];

    text_of(r, "source", buf);
    printf("%-24s %s\n", "source", buf);
    text_of(r, "since", buf);
    printf("%-24s %s\n", "since", buf);
    text_of(r, "until", buf);
    printf("%-24s %s\n", "until", buf);
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
        const json_t *one = json_object_get(c, checks[i]);
        text_of(one, "count", buf);
        if (json_object_get(one, "copies")) {
            char copies[CELL_MAX + 4];
            text_of(one, "copies", copies);
            printf("%-24s %s (%s extra copies)\n", checks[i], buf, copies);
        } else {
            printf("%-24s %s%s\n", checks[i], buf,
                   json_is_false(json_object_get(one, "ok")) ? "  MUST BE 0" : "");
        }
    }
    printf("%-24s %s\n", "ok", json_is_true(json_object_get(r, "ok")) ? "yes" : "NO");
}

int cmd_audit(int argc, char **argv)
{
    static const char usage[] = "audit [--source S] [--since TIME] [--until TIME] [--json]";
    char path[2048] = "/v1/audit";
    struct args a;

    if (!parse(argc, argv, 1u << O_JSON | 1u << O_SOURCE | 1u << O_SINCE | 1u << O_UNTIL, 0, usage, &a))
        return CLI_EXIT_USAGE;
    if (!cli_path_query(path, sizeof path, "source", a.opt[O_SOURCE]) ||
        !cli_path_query(path, sizeof path, "since", a.opt[O_SINCE]) ||
        !cli_path_query(path, sizeof path, "until", a.opt[O_UNTIL])) {
        fprintf(stderr, "hookd audit: query too long\n");
        return CLI_EXIT_USAGE;
    }
    return run(&a, path, print_audit);
}
