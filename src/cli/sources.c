/* `hookd sources …`: list, get, create, delete and rejections of inbound sources through the admin API. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client.h"

enum {
    O_FILE = 1,
    O_LIMIT,
    O_CURSOR,
};

/* --json is the output option, except in create, where it gives the definition (CLI_JSON_INPUT). */
static const struct option source_options[] = {
    {"file", required_argument, NULL, O_FILE},
    {"limit", required_argument, NULL, O_LIMIT},
    {"cursor", required_argument, NULL, O_CURSOR},
    {NULL, 0, NULL, 0},
};

static const struct out_column source_columns[] = {
    {"NAME", "name", NULL},
    {"SCHEME", "verify.scheme", NULL},
    {"EVENT_ID", "event_id", NULL},
    {"ENTITY", "entity.kind", NULL},
    {"FORWARD_TO", "handler.forward.url", NULL},
    {"CREATED", "created_at", out_fmt_time},
    {"UPDATED", "updated_at", out_fmt_time},
    OUT_COLUMNS_END,
};
static const struct out_record_spec source_spec = {NULL, NULL, NULL};

static const struct out_column rejection_columns[] = {
    {"AT", "at", out_fmt_time}, {"REASON", "reason", NULL}, {"PEER", "peer", NULL},
    {"SIZE", "size", NULL},     {"SHA256", "sha256", NULL}, OUT_COLUMNS_END,
};

/* The rejections table, then the counts by reason. */
static void rejections_view(const struct out *o, FILE *f, const json_t *answer, const void *arg)
{
    const json_t *counts = json_object_get(answer, "counts");
    const char *reason;
    const json_t *n;

    (void)arg;
    out_list(o, f, rejection_columns, answer);
    if (json_object_size(counts) == 0)
        return;
    fprintf(f, "\ncounts by reason:\n");
    json_object_foreach((json_t *)counts, reason, n) {
        struct out_cell cell;
        out_fmt_text(o, n, counts, OUT_CELL_COLUMNS, &cell);
        fputs("  ", f);
        out_record_line(o, f, 0, reason, cell.text, NULL);
    }
}

/* "/v1/sources/NAME" + suffix; false after printing an error. */
static bool source_path(char *path, size_t cap, const char *name, const char *suffix)
{
    return cli_item_path(path, cap, "/v1/sources", name, suffix);
}

static const struct cli_query_param page_params[] = {{O_LIMIT, "limit"}, {O_CURSOR, "cursor"}};

static int sources_list(const struct client *c, const struct cli_args *a)
{
    char path[1024];
    return cli_list_path(path, sizeof path, "/v1/sources", page_params, 2, O_LIMIT, a)
               ? cli_show(c, a, "GET", path, NULL, NULL, out_view_list, source_columns)
               : CLI_EXIT_USAGE;
}

static int sources_get(const struct client *c, const struct cli_args *a)
{
    char path[512];
    return source_path(path, sizeof path, a->pos[0], NULL)
               ? cli_show(c, a, "GET", path, NULL, NULL, out_view_record, &source_spec)
               : CLI_EXIT_USAGE;
}

static int sources_rejections(const struct client *c, const struct cli_args *a)
{
    char base[512], path[1024];
    if (!source_path(base, sizeof base, a->pos[0], "/rejections") ||
        !cli_list_path(path, sizeof path, base, page_params, 2, O_LIMIT, a))
        return CLI_EXIT_USAGE;
    return cli_show(c, a, "GET", path, NULL, NULL, rejections_view, NULL);
}

/* The definition from --file (- for stdin) or --json. */
static int sources_create(const struct client *c, const struct cli_args *a)
{
    const char *inline_json = a->opt[CLI_O_JSON];
    json_error_t jerr;
    json_t *body;
    int rc;

    if (!a->opt[O_FILE] == !inline_json) {
        fprintf(stderr, "hookd sources create: give the definition with --file F.json or --json '{…}'\n");
        return CLI_EXIT_USAGE;
    }
    if (inline_json)
        body = json_loads(inline_json, 0, &jerr);
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
    rc = cli_show(c, a, "POST", "/v1/sources", body, NULL, out_view_record, &source_spec);
    json_decref(body);
    return rc;
}

static int sources_delete(const struct client *c, const struct cli_args *a)
{
    char path[512];
    return source_path(path, sizeof path, a->pos[0], NULL) ? cli_delete(c, a, path) : CLI_EXIT_USAGE;
}

static const struct cli_subcommand source_commands[] = {
    {"list", sources_list, CLI_OPT(O_LIMIT) | CLI_OPT(O_CURSOR) | CLI_WATCH, 0, "list [--limit N] [--cursor C]"},
    {"get", sources_get, CLI_WATCH, 1, "get NAME"},
    {"create", sources_create, CLI_OPT(O_FILE) | CLI_JSON_INPUT, 0,
     "create (--file SOURCE.json | --json '{…}')   (prints the source; here --json is the definition)"},
    {"delete", sources_delete, 0, 1, "delete NAME"},
    {"rejections", sources_rejections, CLI_OPT(O_LIMIT) | CLI_OPT(O_CURSOR) | CLI_WATCH, 1,
     "rejections NAME [--limit N] [--cursor C]"},
};

int cmd_sources(int argc, char **argv)
{
    return cli_dispatch("sources", source_commands, sizeof source_commands / sizeof source_commands[0],
                        source_options, argc, argv);
}
