/*
 * The CLI's admin API client (libcurl easy) and the command-line plumbing the
 * API command families share (endpoints.c, events.c, deliveries.c).
 *
 *   client_init     where the daemon is and its token: HOOKD_ADMIN_URL / HOOKD_ADMIN_TOKEN,
 *                   else the config (-c FILE, environment), else "<sqlite path>.admin-token"
 *   client_request  one request; the raw status and body
 *   client_exchange one request; the status, the body and its JSON (bodies with secrets wiped)
 *   client_fetch    client_exchange that takes only a 2xx; the API's error printed otherwise
 *   cli_show        one request shown through the output layer (output.h): a table or
 *                   key/value view, the API's JSON with --json, refreshed with --watch
 *   cli_dispatch    a family's subcommand table: options (and the output options every
 *                   API command shares), positional id, --help, then run
 *   cli_path_*      building a path with escaped segments and query parameters
 *
 * Exit statuses: 0 success, 1 the API refused the request, 2 usage error or
 * the API could not be reached.
 */
#ifndef HOOKD_CLI_CLIENT_H
#define HOOKD_CLI_CLIENT_H
#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "cli/output.h"

#define CLI_EXIT_OK 0
#define CLI_EXIT_API 1
#define CLI_EXIT_USAGE 2
#define CLI_EXIT_UNREACHABLE 2

#define CLIENT_URL_MAX 512
#define CLIENT_TOKEN_MAX 256
#define CLIENT_RESPONSE_MAX (64 * 1024 * 1024)

struct client {
    char base_url[CLIENT_URL_MAX]; /* "http://127.0.0.1:8081", no trailing slash */
    char token[CLIENT_TOKEN_MAX];
};

/* Returns 0, or HOOKD_EINVAL with a message in err (bad config, no token). */
__attribute__((warn_unused_result)) int client_init(struct client *c, const char *config_path, char *err,
                                                    size_t errlen);
/* Wipes the token. */
void client_close(struct client *c);

/*
 * Sends method base_url+path with an optional JSON body and one optional extra
 * header line ("Name: value"). On success *status and *response (heap,
 * NUL-terminated, caller frees) are set. HOOKD_EIO with err filled when the
 * API cannot be reached.
 */
__attribute__((warn_unused_result)) int client_request(const struct client *c, const char *method, const char *path,
                                                       const char *body, const char *extra_header, long *status,
                                                       char **response, char *err, size_t errlen);

/*
 * client_request with body serialised (may be NULL; not consumed; its text is
 * wiped after sending, as it may carry a secret). On 0, *status, *raw (heap,
 * caller frees) and *json (the parsed body, NULL when it is not JSON; caller
 * decrefs) are set; else CLI_EXIT_UNREACHABLE after printing why.
 */
__attribute__((warn_unused_result)) int client_exchange(const struct client *c, const char *method,
                                                        const char *path, const json_t *body,
                                                        const char *extra_header, long *status, char **raw,
                                                        json_t **json);
/* client_exchange that accepts a 2xx only: CLI_EXIT_OK with *raw and *json set, else the exit status after
 * printing the API's error ("hookd: MESSAGE (HTTP 404 not_found)") on stderr. */
__attribute__((warn_unused_result)) int client_fetch(const struct client *c, const char *method, const char *path,
                                                     const json_t *body, const char *extra_header, char **raw,
                                                     json_t **json);

/* ---- command-line plumbing ------------------------------------------------------ */

#define CLI_MAX_OPTIONS 48 /* option codes are 1..CLI_MAX_OPTIONS-1 */
/* Codes of the output options cli_dispatch adds to every family; a family's own codes stay below them. */
#define CLI_O_JSON_INPUT 43 /* not an option: in a subcommand's options, --json VALUE is an input */
#define CLI_O_COUNT 44 /* --count N: snapshots before --watch stops */
#define CLI_O_WATCH 45 /* --watch [INTERVAL] */
#define CLI_O_UTC 46   /* --utc: absolute times in tables */
#define CLI_O_JSON 47  /* --json: the API's JSON (or, with CLI_JSON_INPUT, a value the subcommand reads) */
#define CLI_MAX_POSITIONAL 2
#define CLI_OPT(code) (UINT64_C(1) << (code))

struct cli_args {
    const char *opt[CLI_MAX_OPTIONS]; /* by option code; NULL when not given ("" for flags) */
    const char *pos[CLI_MAX_POSITIONAL];
    int n_pos;
    const char *config; /* -c FILE */
    struct out out;     /* the output options and the terminal */
};

/* In a subcommand's options: a read that --watch and --count apply to; --json VALUE as an input (opt[CLI_O_JSON]). */
#define CLI_WATCH (CLI_OPT(CLI_O_WATCH) | CLI_OPT(CLI_O_COUNT))
#define CLI_JSON_INPUT CLI_OPT(CLI_O_JSON_INPUT)

struct cli_subcommand {
    const char *name;
    int (*run)(const struct client *c, const struct cli_args *a);
    uint64_t options; /* CLI_OPT(code) of every option it accepts, | CLI_WATCH, | CLI_JSON_INPUT */
    int n_pos;        /* positional arguments it requires (an id) */
    const char *synopsis;
};

/*
 * Runs `hookd FAMILY SUB [options] [ID]`: argv[0] is the family, argv[1] the
 * subcommand. longopts maps option names to codes (1..CLI_O_JSON_INPUT-1);
 * -c/--config, -h/--help and the output options (--json, --utc, and for
 * CLI_WATCH subcommands --watch [INTERVAL] and --count N) are added here, each
 * unless the family defines that name itself. Returns the exit status.
 */
int cli_dispatch(const char *family, const struct cli_subcommand *subs, size_t n_subs,
                 const struct option *longopts, int argc, char **argv);

/*
 * Runs `hookd FAMILY [options] ARGS…` of a family that is one command (hookd
 * health, summary, sync, trace, audit): sub->name is "" and argv[0] the
 * family; otherwise as cli_dispatch.
 */
int cli_dispatch_one(const char *family, const struct cli_subcommand *sub, const struct option *longopts, int argc,
                     char **argv);

/*
 * Runs method path (body and extra_header may be NULL) and shows the answer:
 * view(o, answer, arg) by default, the body unchanged with --json, repeated
 * with --watch. Returns the exit status.
 */
int cli_show(const struct client *c, const struct cli_args *a, const char *method, const char *path,
             const json_t *body, const char *extra_header, out_view_fn *view, const void *arg);

/* DELETE path: "deleted ID" on stderr (the API answers no body; --json prints nothing). */
int cli_delete(const struct client *c, const struct cli_args *a, const char *path);

/* Parses a whole-string integer in [min, max] given to --name; prints an error and returns false otherwise. */
bool cli_int(const char *name, const char *value, long long min, long long max, long long *out);

/* Appends "/" + the percent-escaped segment; false when path (cap bytes) is full. */
bool cli_path_segment(char *path, size_t cap, const char *segment);
/* Appends "?name=value" or "&name=value" (escaped) when value is not NULL. */
bool cli_path_query(char *path, size_t cap, const char *name, const char *value);

/* base + "/" + the escaped id + suffix (may be NULL); false after printing an error. */
bool cli_item_path(char *path, size_t cap, const char *base, const char *id, const char *suffix);

/* A list's query parameter and the option that gives it. */
struct cli_query_param {
    int code;
    const char *param;
};
/* base + "?param=value&…" for each given option; --limit (limit_code, 0: none) must be 1..1000. False after
 * printing an error. */
bool cli_list_path(char *path, size_t cap, const char *base, const struct cli_query_param *params, size_t n,
                   int limit_code, const struct cli_args *a);
#endif
