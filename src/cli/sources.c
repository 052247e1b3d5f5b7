/* `hookd sources …`: list, get, create, delete and rejections of inbound sources through the admin API. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client.h"

enum {
    O_FILE = 1,
    O_JSON,
    O_LIMIT,
    O_CURSOR,
};

static const struct option source_options[] = {
    {"file", required_argument, NULL, O_FILE},
    {"json", required_argument, NULL, O_JSON},
    {"limit", required_argument, NULL, O_LIMIT},
    {"cursor", required_argument, NULL, O_CURSOR},
    {NULL, 0, NULL, 0},
};

/* "/v1/sources/NAME" + suffix; false after printing an error. */
static bool source_path(char *path, size_t cap, const char *name, const char *suffix)
{
    snprintf(path, cap, "/v1/sources");
    if (!cli_path_segment(path, cap, name) || (suffix && strlen(path) + strlen(suffix) >= cap)) {
        fprintf(stderr, "hookd: name too long\n");
        return false;
    }
    if (suffix)
        memcpy(path + strlen(path), suffix, strlen(suffix) + 1);
    return true;
}

/* A list path with --limit and --cursor; false after printing an error. */
static bool list_path(char *path, size_t cap, const struct cli_args *a)
{
    long long limit;

    if (a->opt[O_LIMIT] && !cli_int("limit", a->opt[O_LIMIT], 1, 1000, &limit))
        return false;
    if (!cli_path_query(path, cap, "limit", a->opt[O_LIMIT]) || !cli_path_query(path, cap, "cursor", a->opt[O_CURSOR])) {
        fprintf(stderr, "hookd: query too long\n");
        return false;
    }
    return true;
}

static int sources_list(const struct client *c, const struct cli_args *a)
{
    char path[1024] = "/v1/sources";
    return list_path(path, sizeof path, a) ? client_call(c, "GET", path, NULL, NULL) : CLI_EXIT_USAGE;
}

static int sources_get(const struct client *c, const struct cli_args *a)
{
    char path[512];
    return source_path(path, sizeof path, a->pos[0], NULL) ? client_call(c, "GET", path, NULL, NULL) : CLI_EXIT_USAGE;
}

static int sources_rejections(const struct client *c, const struct cli_args *a)
{
    char path[1024];
    if (!source_path(path, sizeof path, a->pos[0], "/rejections") || !list_path(path, sizeof path, a))
        return CLI_EXIT_USAGE;
    return client_call(c, "GET", path, NULL, NULL);
}

/* The definition from --file (- for stdin) or --json. */
static int sources_create(const struct client *c, const struct cli_args *a)
{
    json_error_t jerr;
    json_t *body;
    int rc;

    if (!a->opt[O_FILE] == !a->opt[O_JSON]) {
        fprintf(stderr, "hookd sources create: give the definition with --file F.json or --json '{…}'\n");
        return CLI_EXIT_USAGE;
    }
    if (a->opt[O_JSON])
        body = json_loads(a->opt[O_JSON], 0, &jerr);
    else if (strcmp(a->opt[O_FILE], "-") == 0)
        body = json_loadf(stdin, 0, &jerr);
    else
        body = json_load_file(a->opt[O_FILE], 0, &jerr);
    if (!json_is_object(body)) {
        fprintf(stderr, "hookd sources create: not a JSON object: %s (line %d)\n", body ? "" : jerr.text,
                body ? 0 : jerr.line);
        json_decref(body);
        return CLI_EXIT_USAGE;
    }
    rc = client_call(c, "POST", "/v1/sources", body, NULL);
    json_decref(body);
    return rc;
}

static int sources_delete(const struct client *c, const struct cli_args *a)
{
    char path[512];
    int rc;

    if (!source_path(path, sizeof path, a->pos[0], NULL))
        return CLI_EXIT_USAGE;
    rc = client_call(c, "DELETE", path, NULL, NULL);
    if (rc == CLI_EXIT_OK)
        fprintf(stderr, "deleted %s\n", a->pos[0]);
    return rc;
}

static const struct cli_subcommand source_commands[] = {
    {"list", sources_list, CLI_OPT(O_LIMIT) | CLI_OPT(O_CURSOR), 0, "list [--limit N] [--cursor C]"},
    {"get", sources_get, 0, 1, "get NAME"},
    {"create", sources_create, CLI_OPT(O_FILE) | CLI_OPT(O_JSON), 0, "create (--file SOURCE.json | --json '{…}')"},
    {"delete", sources_delete, 0, 1, "delete NAME"},
    {"rejections", sources_rejections, CLI_OPT(O_LIMIT) | CLI_OPT(O_CURSOR), 1,
     "rejections NAME [--limit N] [--cursor C]"},
};

int cmd_sources(int argc, char **argv)
{
    return cli_dispatch("sources", source_commands, sizeof source_commands / sizeof source_commands[0],
                        source_options, argc, argv);
}
