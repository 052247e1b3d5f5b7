/*
 * `hookd health ENDPOINT`, `hookd summary [--window D]`, `hookd sync ACCOUNT`
 * and `hookd sync --resource TYPE ID [--account A]`: what support reads about
 * delivery, through the admin API, shown by the CLI output rules (design §12
 * "CLI output"): a key/value block with the lists as sub-tables.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client.h"

enum { O_WINDOW = 1, O_RESOURCE, O_ACCOUNT };

static const struct option health_options[] = {
    {"window", required_argument, NULL, O_WINDOW},
    {"resource", required_argument, NULL, O_RESOURCE},
    {"account", required_argument, NULL, O_ACCOUNT},
    {NULL, 0, NULL, 0},
};

/* "37 x 401, 12 x timeout" from a row's status-code clusters. */
static void fmt_clusters(const struct out *o, const json_t *value, const json_t *row, size_t max,
                         struct out_cell *cell)
{
    char text[OUT_CELL_BYTES];
    size_t used = 0, i;
    const json_t *c;

    if (!json_is_array(value)) {
        out_fmt_text(o, value, row, max, cell);
        return;
    }
    text[0] = '\0';
    json_array_foreach(value, i, c) {
        struct out_cell count, what;
        const char *key = json_is_integer(json_object_get(c, "status_code")) ? "status_code" : "error_class";
        int n = snprintf(text + used, sizeof text - used, "%s%s x %s", i ? ", " : "", out_word(c, "count", &count),
                         out_word(c, key, &what));
        if (n < 0 || (size_t)n >= sizeof text - used)
            break;
        used += (size_t)n;
    }
    /* The parts are escaped already; this cut only shortens. */
    out_cell_text(used ? text : "-", used ? used : 1, max, cell->text, sizeof cell->text);
}

/* A last error: the text of {"at", "status_code", "error_class", "error"} (or a plain string). */
static void fmt_last_error(const struct out *o, const json_t *value, const json_t *row, size_t max,
                           struct out_cell *cell)
{
    out_fmt_text(o, json_is_object(value) ? json_object_get(value, "error") : value, row, max, cell);
}

/* ---- health --------------------------------------------------------------------------------- */

/* Every field flattened: breaker.state, deliveries.retrying, windows.1h.success_rate, last_error.status_code … */
static const struct out_record_spec health_spec = {NULL, NULL, NULL};

/* ---- summary -------------------------------------------------------------------------------- */

static const struct out_column by_endpoint_columns[] = {
    {"ENDPOINT", "endpoint_id", NULL}, {"URL", "url", NULL},
    {"ATTEMPTS", "attempts", NULL},    {"FAILURES", "failures", NULL},
    {"CLUSTERS", "clusters", fmt_clusters}, OUT_COLUMNS_END,
};
static const struct out_column by_account_columns[] = {
    {"ACCOUNT", "account", NULL},
    {"FAILURES", "failures", NULL},
    {"CLUSTERS", "clusters", fmt_clusters},
    OUT_COLUMNS_END,
};
static const struct out_column growing_columns[] = {
    {"ENDPOINT", "endpoint_id", NULL},
    {"URL", "url", NULL},
    {"RETRYING", "retrying", NULL},
    {"WINDOW_AGO", "retrying_window_ago", NULL},
    {"GROWTH", "growth", NULL},
    OUT_COLUMNS_END,
};
static const struct out_column silent_columns[] = {
    {"ENDPOINT", "endpoint_id", NULL},
    {"URL", "url", NULL},
    {"ATTEMPTS", "attempts", NULL},
    {"LAST_SUCCESS", "last_success_at", out_fmt_time},
    {"LAST_ERROR", "last_error", fmt_last_error},
    OUT_COLUMNS_END,
};
static const struct out_subtable summary_subtables[] = {
    {"failures_by_endpoint", by_endpoint_columns},
    {"failures_by_account", by_account_columns},
    {"growing_backlogs", growing_columns},
    {"no_success", silent_columns},
    {NULL, NULL},
};
static const struct out_record_spec summary_spec = {NULL, NULL, summary_subtables};

/* ---- sync ----------------------------------------------------------------------------------- */

static const struct out_column account_sync_columns[] = {
    {"ENDPOINT", "endpoint_id", NULL},
    {"URL", "url", NULL},
    {"STATUS", "status", out_fmt_status},
    {"DELAYED", "delayed", NULL},
    {"PENDING", "pending", NULL},
    {"RETRYING", "retrying", NULL},
    {"FAILED", "failed", NULL},
    {"LAST_ATTEMPT", "last_attempt_at", out_fmt_time},
    {"NEXT_ATTEMPT", "next_attempt_at", out_fmt_time},
    {"LAST_ERROR", "last_error", fmt_last_error},
    OUT_COLUMNS_END,
};
static const struct out_column resource_sync_columns[] = {
    {"ENDPOINT", "endpoint_id", NULL},
    {"URL", "url", NULL},
    {"STATUS", "status", out_fmt_status},
    {"DELAYED", "delayed", NULL},
    {"EVENT", "event.id", NULL},
    {"VERSION", "event.version", NULL},
    {"ATTEMPTS", "attempts", NULL},
    {"LAST_ATTEMPT", "last_attempt_at", out_fmt_time},
    {"NEXT_ATTEMPT", "next_attempt_at", out_fmt_time},
    {"LAST_ERROR", "last_error", fmt_last_error},
    OUT_COLUMNS_END,
};
static const struct out_subtable account_sync_subtables[] = {{"endpoints", account_sync_columns}, {NULL, NULL}};
static const struct out_subtable resource_sync_subtables[] = {{"endpoints", resource_sync_columns}, {NULL, NULL}};
static const struct out_record_spec account_sync_spec = {NULL, NULL, account_sync_subtables};
static const struct out_record_spec resource_sync_spec = {NULL, NULL, resource_sync_subtables};

/* ---- commands ------------------------------------------------------------------------------- */

static int health_run(const struct client *c, const struct cli_args *a)
{
    char path[512];

    if (!cli_item_path(path, sizeof path, "/v1/endpoints", a->pos[0], "/health"))
        return CLI_EXIT_USAGE;
    return cli_show(c, a, "GET", path, NULL, NULL, out_view_record, &health_spec);
}

static int summary_run(const struct client *c, const struct cli_args *a)
{
    static const struct cli_query_param params[] = {{O_WINDOW, "window"}};
    char path[512];

    if (!cli_list_path(path, sizeof path, "/v1/summary", params, 1, 0, a))
        return CLI_EXIT_USAGE;
    return cli_show(c, a, "GET", path, NULL, NULL, out_view_record, &summary_spec);
}

static int sync_run(const struct client *c, const struct cli_args *a)
{
    char path[2048], base[1024] = "/v1/resources";

    if (a->opt[O_ACCOUNT] && !a->opt[O_RESOURCE]) {
        fprintf(stderr, "hookd sync: --account goes with --resource\n");
        return CLI_EXIT_USAGE;
    }
    if (!a->opt[O_RESOURCE]) {
        if (!cli_item_path(path, sizeof path, "/v1/accounts", a->pos[0], "/sync"))
            return CLI_EXIT_USAGE;
        return cli_show(c, a, "GET", path, NULL, NULL, out_view_record, &account_sync_spec);
    }
    if (!cli_path_segment(base, sizeof base, a->opt[O_RESOURCE]) ||
        !cli_item_path(path, sizeof path, base, a->pos[0], "/sync") ||
        !cli_path_query(path, sizeof path, "account", a->opt[O_ACCOUNT])) {
        fprintf(stderr, "hookd sync: arguments too long\n");
        return CLI_EXIT_USAGE;
    }
    return cli_show(c, a, "GET", path, NULL, NULL, out_view_record, &resource_sync_spec);
}

int cmd_health(int argc, char **argv)
{
    static const struct cli_subcommand health = {"", health_run, CLI_WATCH, 1, "ENDPOINT_ID"};
    return cli_dispatch_one("health", &health, health_options, argc, argv);
}

int cmd_summary(int argc, char **argv)
{
    static const struct cli_subcommand summary = {"", summary_run, CLI_OPT(O_WINDOW) | CLI_WATCH, 0,
                                                  "[--window DURATION]"};
    return cli_dispatch_one("summary", &summary, health_options, argc, argv);
}

int cmd_sync(int argc, char **argv)
{
    static const struct cli_subcommand sync = {"", sync_run, CLI_OPT(O_RESOURCE) | CLI_OPT(O_ACCOUNT) | CLI_WATCH, 1,
                                               "ACCOUNT | --resource TYPE ID [--account A]"};
    return cli_dispatch_one("sync", &sync, health_options, argc, argv);
}
