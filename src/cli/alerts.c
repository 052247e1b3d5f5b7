/*
 * `hookd alerts [list] [--status open|resolved] [--rule R] [--limit N]
 * [--cursor C] [--json]` and `hookd alerts get ID [--json]`: the alerts
 * through the admin API, as an aligned table or key/value lines; --json
 * prints the API's JSON.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client.h"

enum { O_STATUS = 1, O_RULE, O_LIMIT, O_CURSOR, O_JSON };

static const struct option alerts_options[] = {
    {"status", required_argument, NULL, O_STATUS},
    {"rule", required_argument, NULL, O_RULE},
    {"limit", required_argument, NULL, O_LIMIT},
    {"cursor", required_argument, NULL, O_CURSOR},
    {"json", no_argument, NULL, O_JSON},
    {NULL, 0, NULL, 0},
};

/* GETs path; on a 2xx *out is the parsed answer (caller decrefs), else the API's error is printed. */
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
    if (status < 200 || status >= 300 || *out == NULL) {
        const json_t *e = json_object_get(*out, "error");
        fprintf(stderr, "hookd: %ld %s: %s\n", status, json_string_value(json_object_get(e, "code")) ?: "error",
                json_string_value(json_object_get(e, "message")) ?: "the answer is not JSON");
        json_decref(*out);
        *out = NULL;
        free(response);
        return CLI_EXIT_API;
    }
    free(response);
    return CLI_EXIT_OK;
}

/* A cell: the string, "-" for null, cut at CELL_MAX bytes (--json has it whole); control bytes become '?'. */
#define CELL_MAX 60
static void cell(char out[CELL_MAX + 4], const json_t *row, const char *key)
{
    const char *s = json_string_value(json_object_get(row, key));
    size_t n;

    snprintf(out, CELL_MAX + 4, "%s", s ? s : "-");
    n = strlen(out);
    if (n > CELL_MAX)
        memcpy(out + CELL_MAX - 3, "...", 4);
    for (char *p = out; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
}

#define N_COLUMNS 7
static const char *const columns[N_COLUMNS] = {"ID", "RULE", "SUBJECT", "STATUS", "OPENED", "RESOLVED", "MESSAGE"};
static const char *const keys[N_COLUMNS] = {"id", "rule", "subject", "status", "opened_at", "resolved_at", "message"};

static void print_table(const json_t *data)
{
    size_t width[N_COLUMNS], i;
    const json_t *row;
    char buf[CELL_MAX + 4];

    for (size_t k = 0; k < N_COLUMNS; k++)
        width[k] = strlen(columns[k]);
    json_array_foreach(data, i, row) {
        for (size_t k = 0; k < N_COLUMNS; k++) {
            cell(buf, row, keys[k]);
            width[k] = strlen(buf) > width[k] ? strlen(buf) : width[k];
        }
    }
    for (size_t k = 0; k < N_COLUMNS; k++)
        printf("%-*s%s", k + 1 < N_COLUMNS ? (int)width[k] : 0, columns[k], k + 1 < N_COLUMNS ? "  " : "\n");
    json_array_foreach(data, i, row) {
        for (size_t k = 0; k < N_COLUMNS; k++) {
            cell(buf, row, keys[k]);
            printf("%-*s%s", k + 1 < N_COLUMNS ? (int)width[k] : 0, buf, k + 1 < N_COLUMNS ? "  " : "\n");
        }
    }
}

static int alerts_list(const struct client *c, const struct cli_args *a)
{
    static const struct {
        int code;
        const char *param;
    } params[] = {{O_STATUS, "status"}, {O_RULE, "rule"}, {O_LIMIT, "limit"}, {O_CURSOR, "cursor"}};
    char path[2048] = "/v1/alerts";
    long long limit;
    json_t *answer;
    int rc;

    if (a->opt[O_LIMIT] && !cli_int("limit", a->opt[O_LIMIT], 1, 1000, &limit))
        return CLI_EXIT_USAGE;
    for (size_t i = 0; i < sizeof params / sizeof params[0]; i++) {
        if (!cli_path_query(path, sizeof path, params[i].param, a->opt[params[i].code])) {
            fprintf(stderr, "hookd: query too long\n");
            return CLI_EXIT_USAGE;
        }
    }
    if (a->opt[O_JSON])
        return client_call(c, "GET", path, NULL, NULL);
    rc = get_json(c, path, &answer);
    if (rc != CLI_EXIT_OK)
        return rc;
    print_table(json_object_get(answer, "data"));
    if (json_is_string(json_object_get(answer, "next_cursor")))
        printf("more: --cursor %s\n", json_string_value(json_object_get(answer, "next_cursor")));
    json_decref(answer);
    return CLI_EXIT_OK;
}

static int alerts_get(const struct client *c, const struct cli_args *a)
{
    static const char *const fields[] = {"id", "rule", "subject", "status", "opened_at", "resolved_at", "message"};
    char path[512] = "/v1/alerts", buf[CELL_MAX + 4];
    json_t *answer;
    int rc;

    if (!cli_path_segment(path, sizeof path, a->pos[0])) {
        fprintf(stderr, "hookd: id too long\n");
        return CLI_EXIT_USAGE;
    }
    if (a->opt[O_JSON])
        return client_call(c, "GET", path, NULL, NULL);
    rc = get_json(c, path, &answer);
    if (rc != CLI_EXIT_OK)
        return rc;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        cell(buf, answer, fields[i]);
        printf("%-12s %s\n", fields[i], buf);
    }
    char *details = json_dumps(json_object_get(answer, "details"), JSON_COMPACT | JSON_ENSURE_ASCII);
    printf("%-12s %s\n", "details", details ? details : "-");
    free(details);
    json_decref(answer);
    return CLI_EXIT_OK;
}

static const struct cli_subcommand alerts_commands[] = {
    {"list", alerts_list, CLI_OPT(O_STATUS) | CLI_OPT(O_RULE) | CLI_OPT(O_LIMIT) | CLI_OPT(O_CURSOR) | CLI_OPT(O_JSON),
     0, "[list] [--status open|resolved] [--rule RULE] [--limit N] [--cursor C] [--json]"},
    {"get", alerts_get, CLI_OPT(O_JSON), 1, "get ID [--json]"},
};

/* `hookd alerts` alone, or with options only, lists. */
int cmd_alerts(int argc, char **argv)
{
    char *args[64];
    int n = 0;

    if (argc >= 2 && argv[1][0] != '-')
        return cli_dispatch("alerts", alerts_commands, 2, alerts_options, argc, argv);
    if (argc + 1 > (int)(sizeof args / sizeof args[0])) {
        fprintf(stderr, "hookd alerts: too many arguments\n");
        return CLI_EXIT_USAGE;
    }
    args[n++] = argv[0];
    args[n++] = (char *)"list";
    for (int i = 1; i < argc; i++)
        args[n++] = argv[i];
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
        return cli_dispatch("alerts", alerts_commands, 2, alerts_options, argc, argv);
    return cli_dispatch("alerts", alerts_commands, 2, alerts_options, n, args);
}
