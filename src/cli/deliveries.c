/*
 * `hookd deliveries …`: list deliveries with filters and get one with its
 * attempts and, in plain words, what happened and what happens next
 * ("timeout after 10 s, retry in 47 s").
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/client.h"
#include "core/timefmt.h"

enum {
    O_STATUS = 1,
    O_ENDPOINT,
    O_EVENT,
    O_ACCOUNT,
    O_SINCE,
    O_UNTIL,
    O_LIMIT,
    O_CURSOR,
};

static const struct option delivery_options[] = {
    {"status", required_argument, NULL, O_STATUS},
    {"endpoint", required_argument, NULL, O_ENDPOINT},
    {"event", required_argument, NULL, O_EVENT},
    {"account", required_argument, NULL, O_ACCOUNT},
    {"since", required_argument, NULL, O_SINCE},
    {"until", required_argument, NULL, O_UNTIL},
    {"limit", required_argument, NULL, O_LIMIT},
    {"cursor", required_argument, NULL, O_CURSOR},
    {NULL, 0, NULL, 0},
};

const struct out_column cli_delivery_columns[] = {
    {"ID", "id", NULL},
    {"EVENT", "event_id", NULL},
    {"ENDPOINT", "endpoint_id", NULL},
    {"ACCOUNT", "account", NULL},
    {"STATUS", "status", out_fmt_status},
    {"ATTEMPTS", "attempt_count", NULL},
    {"NEXT_ATTEMPT", "next_attempt_at", out_fmt_time},
    {"CODE", "last_status_code", NULL},
    {"ERROR", "last_error", NULL},
    OUT_COLUMNS_END,
};

/* What one attempt came to, in words: "HTTP 503", "timeout after 10 s", "could not connect". */
static void attempt_words(const json_t *attempt, char *out, size_t cap)
{
    static const struct {
        const char *class;
        const char *words;
    } classes[] = {
        {"connect", "could not connect"},
        {"dns", "DNS lookup failed"},
        {"blocked", "address refused (private network)"},
    };
    const char *error = json_string_value(json_object_get(attempt, "error"));
    const json_t *code = json_object_get(attempt, "status_code");
    char took[48];

    if (error && strncmp(error, "timeout", 7) == 0) {
        out_duration_words(json_integer_value(json_object_get(attempt, "duration_ms")), took, sizeof took);
        snprintf(out, cap, "timeout after %s", took);
        return;
    }
    for (size_t i = 0; error && i < sizeof classes / sizeof classes[0]; i++) {
        size_t n = strlen(classes[i].class);
        if (strncmp(error, classes[i].class, n) == 0 && (error[n] == ':' || error[n] == '\0')) {
            snprintf(out, cap, "%s", classes[i].words);
            return;
        }
    }
    if (json_is_integer(code))
        snprintf(out, cap, "HTTP %" JSON_INTEGER_FORMAT, json_integer_value(code));
    else
        snprintf(out, cap, "%s", error ? error : "no answer");
}

static void fmt_attempt_words(const struct out *o, const json_t *value, const json_t *row, size_t max,
                              struct out_cell *cell)
{
    char words[256];

    (void)o;
    (void)value;
    attempt_words(row, words, sizeof words);
    out_cell_text(words, strlen(words), max, cell->text, sizeof cell->text);
}

/* "in 47 s" / "due now" for an RFC 3339 time; false when there is none. */
static bool next_words(const json_t *when, int64_t now_ms, char *out, size_t cap)
{
    int64_t ms;

    if (!json_is_string(when) || rfc3339_parse(json_string_value(when), &ms) != 0)
        return false;
    if (ms <= now_ms + 999)
        snprintf(out, cap, "due now");
    else
        out_relative_time(ms, now_ms, out, cap);
    return true;
}

/*
 * The delivery's state in plain words, from its status, its last attempt and
 * next_attempt_at: "timeout after 10 s, retry in 47 s", "HTTP 410, no more
 * retries (dead)", "delivered 2 m ago (HTTP 200)", "first attempt due now".
 */
void cli_delivery_words(const json_t *d, int64_t now_ms, char *out, size_t cap)
{
    const char *status = json_string_value(json_object_get(d, "status"));
    const json_t *attempts = json_object_get(d, "attempts");
    const json_t *last = json_array_get(attempts, json_array_size(attempts) ? json_array_size(attempts) - 1 : 0);
    const char *last_error = json_string_value(json_object_get(d, "last_error"));
    char what[256] = "", next[64], when[64];
    int64_t ms;

    if (last)
        attempt_words(last, what, sizeof what);
    else if (last_error)
        snprintf(what, sizeof what, "%s", last_error);
    if (!status)
        status = "?";
    if (strcmp(status, "delivered") == 0) {
        const json_t *at = json_object_get(d, "delivered_at");
        if (json_is_string(at) && rfc3339_parse(json_string_value(at), &ms) == 0)
            out_relative_time(ms, now_ms, when, sizeof when);
        else
            snprintf(when, sizeof when, "-");
        snprintf(out, cap, "delivered %s%s%s%s", when, what[0] ? " (" : "", what, what[0] ? ")" : "");
    } else if (strcmp(status, "pending") == 0 || strcmp(status, "retrying") == 0) {
        bool has_next = next_words(json_object_get(d, "next_attempt_at"), now_ms, next, sizeof next);
        if (!what[0])
            snprintf(out, cap, "first attempt %s", has_next ? next : "waiting for a slot");
        else
            snprintf(out, cap, "%s, %s%s", what, has_next ? "retry " : "retry waiting for a slot",
                     has_next ? next : "");
    } else if (strcmp(status, "dead") == 0) {
        snprintf(out, cap, "%s%sno more retries (dead)", what, what[0] ? ", " : "");
    } else if (strcmp(status, "skipped") == 0) {
        snprintf(out, cap, "skipped%s%s", what[0] ? ": " : "", what);
    } else if (strcmp(status, "superseded") == 0) {
        snprintf(out, cap, "superseded by a newer event for the same resource");
    } else {
        snprintf(out, cap, "%s%s%s", status, what[0] ? ": " : "", what);
    }
}

static const struct out_column attempt_columns[] = {
    {"N", "n", NULL},
    {"STARTED", "started_at", out_fmt_time},
    {"DURATION", "duration_ms", out_fmt_duration},
    {"CODE", "status_code", NULL},
    {"RESULT", NULL, fmt_attempt_words},
    {"ERROR", "error", NULL},
    {"RESPONSE", "response", NULL},
    OUT_COLUMNS_END,
};

static const struct out_subtable delivery_subtables[] = {{"attempts", attempt_columns}, {NULL, NULL}};
static const struct out_record_spec delivery_spec = {NULL, NULL, delivery_subtables};

/* The record, with the plain-words line ("outcome") after its fields and before the attempts. */
static void delivery_view(const struct out *o, FILE *f, const json_t *answer, const void *arg)
{
    json_t *shown = json_copy((json_t *)answer);
    char words[512];

    (void)arg;
    cli_delivery_words(answer, o->now_ms, words, sizeof words);
    if (shown && json_object_set_new(shown, "outcome", json_string(words)) == 0)
        out_record(o, f, shown, &delivery_spec);
    else
        out_record(o, f, answer, &delivery_spec);
    json_decref(shown);
}

static int deliveries_list(const struct client *c, const struct cli_args *a)
{
    static const struct cli_query_param params[] = {
        {O_STATUS, "status"}, {O_ENDPOINT, "endpoint_id"}, {O_EVENT, "event_id"}, {O_ACCOUNT, "account"},
        {O_SINCE, "since"},   {O_UNTIL, "until"},          {O_LIMIT, "limit"},    {O_CURSOR, "cursor"},
    };
    char path[2048];

    if (!cli_list_path(path, sizeof path, "/v1/deliveries", params, sizeof params / sizeof params[0], O_LIMIT, a))
        return CLI_EXIT_USAGE;
    return cli_show(c, a, "GET", path, NULL, NULL, out_view_list, cli_delivery_columns);
}

static int deliveries_get(const struct client *c, const struct cli_args *a)
{
    char path[512];

    if (!cli_item_path(path, sizeof path, "/v1/deliveries", a->pos[0], NULL))
        return CLI_EXIT_USAGE;
    return cli_show(c, a, "GET", path, NULL, NULL, delivery_view, NULL);
}

static const struct cli_subcommand delivery_commands[] = {
    {"list", deliveries_list,
     CLI_OPT(O_STATUS) | CLI_OPT(O_ENDPOINT) | CLI_OPT(O_EVENT) | CLI_OPT(O_ACCOUNT) | CLI_OPT(O_SINCE) |
         CLI_OPT(O_UNTIL) | CLI_OPT(O_LIMIT) | CLI_OPT(O_CURSOR) | CLI_WATCH,
     0,
     "list [--status pending|retrying|delivered|dead|superseded|skipped] [--endpoint ID] [--event ID] "
     "[--account A] [--since TIME] [--until TIME] [--limit N] [--cursor C]"},
    {"get", deliveries_get, CLI_WATCH, 1, "get ID"},
};

int cmd_deliveries(int argc, char **argv)
{
    return cli_dispatch("deliveries", delivery_commands, sizeof delivery_commands / sizeof delivery_commands[0],
                        delivery_options, argc, argv);
}
