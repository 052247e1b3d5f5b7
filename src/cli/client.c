/*
 * The CLI's admin API client: finds the daemon and its token, sends one
 * request with libcurl easy, prints the answer; and the subcommand dispatch
 * the endpoints, events and deliveries families share.
 */
#include "cli/client.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "config.h"
#include "core/duration.h"
#include "core/buf.h"
#include "hookd.h"

#define CLIENT_CONNECT_TIMEOUT_MS 5000L
#define CLIENT_TIMEOUT_MS 60000L

/* ---- finding the daemon ------------------------------------------------------- */

/* admin_listen ("host:port", ":port", "[v6]:port") → "http://host:port"; wildcard hosts become loopback. */
static int url_from_listen(const char *listen, char *out, size_t cap)
{
    const char *colon = strrchr(listen, ':');
    char host[160];
    size_t n;

    if (!colon)
        return HOOKD_EINVAL;
    n = (size_t)(colon - listen);
    if (n >= sizeof host)
        return HOOKD_EINVAL;
    memcpy(host, listen, n);
    host[n] = '\0';
    if (host[0] == '\0' || strcmp(host, "0.0.0.0") == 0)
        snprintf(host, sizeof host, "127.0.0.1");
    else if (strcmp(host, "[::]") == 0)
        snprintf(host, sizeof host, "[::1]");
    if ((size_t)snprintf(out, cap, "http://%s:%s", host, colon + 1) >= cap)
        return HOOKD_EINVAL;
    return 0;
}

/* The token `hookd serve` wrote beside a SQLite store, if any. */
static void token_from_file(const char *store, char *out, size_t cap)
{
    char file[1100];
    const char *path = store;
    FILE *f;

    if (strncmp(store, "sqlite:", 7) == 0)
        path = store + 7;
    else if (strstr(store, "://"))
        return;
    if ((size_t)snprintf(file, sizeof file, "%s.admin-token", path) >= sizeof file || !(f = fopen(file, "r")))
        return;
    if (fgets(out, (int)cap, f) == NULL)
        out[0] = '\0';
    fclose(f);
    out[strcspn(out, "\r\n")] = '\0';
}

static void trim_slash(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && s[n - 1] == '/')
        s[--n] = '\0';
}

int client_init(struct client *c, const char *config_path, char *err, size_t errlen)
{
    const char *url = getenv("HOOKD_ADMIN_URL");
    const char *token = getenv("HOOKD_ADMIN_TOKEN");
    struct config *cfg = NULL;
    int rc = HOOKD_EINVAL;

    memset(c, 0, sizeof *c);
    if (url && *url) {
        if ((size_t)snprintf(c->base_url, sizeof c->base_url, "%s", url) >= sizeof c->base_url) {
            snprintf(err, errlen, "HOOKD_ADMIN_URL is too long");
            goto out;
        }
        trim_slash(c->base_url);
    }
    if (token && *token)
        snprintf(c->token, sizeof c->token, "%s", token);
    if (!c->base_url[0] || !c->token[0] || config_path) {
        if (!(cfg = calloc(1, sizeof *cfg))) {
            snprintf(err, errlen, "out of memory");
            goto out;
        }
        if (config_load(cfg, config_path, err, errlen) != 0)
            goto out;
        if (!c->base_url[0] && url_from_listen(cfg->admin_listen, c->base_url, sizeof c->base_url) != 0) {
            snprintf(err, errlen, "admin_listen '%s' is not host:port", cfg->admin_listen);
            goto out;
        }
        if (!c->token[0])
            snprintf(c->token, sizeof c->token, "%s", cfg->admin_token);
        if (!c->token[0])
            token_from_file(cfg->store, c->token, sizeof c->token);
    }
    if (!c->token[0]) {
        snprintf(err, errlen, "no admin token: set HOOKD_ADMIN_TOKEN or admin_token in the config (-c FILE)");
        goto out;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(err, errlen, "libcurl failed to initialise");
        goto out;
    }
    rc = 0;
out:
    if (cfg) {
        explicit_bzero(cfg->admin_token, sizeof cfg->admin_token);
        explicit_bzero(cfg->store, sizeof cfg->store);
        free(cfg);
    }
    if (rc != 0)
        explicit_bzero(c->token, sizeof c->token);
    return rc;
}

void client_close(struct client *c)
{
    explicit_bzero(c->token, sizeof c->token);
    curl_global_cleanup();
}

/* ---- requests ----------------------------------------------------------------------- */

static size_t on_write(char *data, size_t size, size_t nmemb, void *userp)
{
    struct buf *b = userp;
    size_t n = size * nmemb;
    return buf_append(b, data, n) == 0 ? n : 0; /* 0 aborts the transfer past the cap */
}

int client_request(const struct client *c, const char *method, const char *path, const char *body,
                   const char *extra_header, long *status, char **response, char *err, size_t errlen)
{
    char url[CLIENT_URL_MAX + 2048];
    char auth[CLIENT_TOKEN_MAX + 32];
    char curl_err[CURL_ERROR_SIZE] = "";
    struct curl_slist *headers = NULL, *h;
    struct buf out;
    CURL *curl = curl_easy_init();
    CURLcode cc;
    int rc = HOOKD_EIO;

    buf_init(&out, CLIENT_RESPONSE_MAX);
    *response = NULL;
    *status = 0;
    if (!curl) {
        snprintf(err, errlen, "libcurl failed to initialise");
        goto out;
    }
    if ((size_t)snprintf(url, sizeof url, "%s%s", c->base_url, path) >= sizeof url) {
        snprintf(err, errlen, "request path too long");
        rc = HOOKD_EINVAL;
        goto out;
    }
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", c->token);
    const char *lines[] = {auth, "Accept: application/json", "Expect:",
                           body ? "Content-Type: application/json" : NULL, extra_header};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        if (!lines[i])
            continue;
        if (!(h = curl_slist_append(headers, lines[i]))) {
            snprintf(err, errlen, "out of memory");
            goto out;
        }
        headers = h;
    }
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &out);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, curl_err);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, CLIENT_CONNECT_TIMEOUT_MS);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, CLIENT_TIMEOUT_MS);
    curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    if (body || strcmp(method, "POST") == 0 || strcmp(method, "PATCH") == 0) {
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long)(body ? strlen(body) : 0));
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body ? body : "");
    }
    cc = curl_easy_perform(curl);
    if (cc != CURLE_OK) {
        snprintf(err, errlen, "%s", curl_err[0] ? curl_err : curl_easy_strerror(cc));
        goto out;
    }
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
    *response = buf_steal(&out);
    rc = 0;
out:
    explicit_bzero(auth, sizeof auth);
    curl_slist_free_all(headers);
    if (curl)
        curl_easy_cleanup(curl);
    buf_free(&out);
    return rc;
}

int client_exchange(const struct client *c, const char *method, const char *path, const json_t *body,
                    const char *extra_header, long *status, char **raw, json_t **json)
{
    char err[CURL_ERROR_SIZE + 64];
    char *text = body ? json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    int rc;

    *raw = NULL;
    *json = NULL;
    *status = 0;
    if (body && !text) {
        fprintf(stderr, "hookd: out of memory\n");
        return CLI_EXIT_USAGE;
    }
    rc = client_request(c, method, path, text, extra_header, status, raw, err, sizeof err);
    if (text) {
        explicit_bzero(text, strlen(text)); /* may carry an endpoint secret */
        free(text);
    }
    if (rc != 0) {
        char url[OUT_CELL_BYTES], why[OUT_CELL_BYTES];
        /* libcurl's words can quote what the peer sent. */
        out_cell_text(c->base_url, strlen(c->base_url), 200, url, sizeof url);
        out_cell_text(err, strlen(err), 300, why, sizeof why);
        fprintf(stderr, "hookd: cannot reach hookd admin API at %s: %s\n", url, why);
        return CLI_EXIT_UNREACHABLE;
    }
    if ((*raw)[0])
        *json = json_loads(*raw, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL); /* snippets may hold NUL */
    return CLI_EXIT_OK;
}

int client_fetch(const struct client *c, const char *method, const char *path, const json_t *body,
                 const char *extra_header, char **raw, json_t **json)
{
    long status;
    int rc = client_exchange(c, method, path, body, extra_header, &status, raw, json);

    if (rc != CLI_EXIT_OK || (status >= 200 && status < 300))
        return rc;
    const json_t *e = json_object_get(*json, "error");
    const char *message = json_string_value(json_object_get(e, "message"));
    const char *code = json_string_value(json_object_get(e, "code"));
    char safe[OUT_CELL_BYTES], safe_code[128];

    /* The message comes from the server: shown escaped like any other value. */
    if (message) {
        out_cell_text(message, strlen(message), 500, safe, sizeof safe);
        out_cell_text(code ? code : "error", strlen(code ? code : "error"), 64, safe_code, sizeof safe_code);
        fprintf(stderr, "hookd: %s (HTTP %ld %s)\n", safe, status, safe_code);
    } else {
        char where[OUT_CELL_BYTES];
        char *url = NULL;
        out_cell_text(*raw, strlen(*raw), 500, safe, sizeof safe);
        if (asprintf(&url, "%s%s", c->base_url, path) < 0)
            url = NULL;
        out_cell_text(url ? url : path, strlen(url ? url : path), 300, where, sizeof where);
        free(url);
        fprintf(stderr, "hookd: HTTP %ld from %s: %s\n", status, where, safe);
    }
    free(*raw);
    json_decref(*json);
    *raw = NULL;
    *json = NULL;
    return CLI_EXIT_API;
}

struct show_request {
    const struct client *c;
    const char *method, *path, *extra_header;
    const json_t *body;
};

static int show_fetch(void *ctx, char **raw, json_t **answer)
{
    const struct show_request *r = ctx;
    int rc = client_fetch(r->c, r->method, r->path, r->body, r->extra_header, raw, answer);

    if (rc == CLI_EXIT_OK && (*raw)[0] && !*answer) {
        fprintf(stderr, "hookd: the answer is not JSON\n");
        free(*raw);
        *raw = NULL;
        return CLI_EXIT_API;
    }
    return rc;
}

int cli_show(const struct client *c, const struct cli_args *a, const char *method, const char *path,
             const json_t *body, const char *extra_header, out_view_fn *view, const void *arg)
{
    struct show_request r = {c, method, path, extra_header, body};
    struct out o = a->out;

    return out_show(&o, stdout, show_fetch, &r, view, arg);
}

int cli_delete(const struct client *c, const struct cli_args *a, const char *path)
{
    char *raw;
    json_t *j;
    int rc = client_fetch(c, "DELETE", path, NULL, NULL, &raw, &j);

    if (rc == CLI_EXIT_OK) {
        char safe[OUT_CELL_BYTES];
        if (a->out.json && raw[0])
            printf("%s\n", raw);
        out_cell_text(a->pos[0], strlen(a->pos[0]), 200, safe, sizeof safe);
        fprintf(stderr, "deleted %s\n", safe);
    }
    free(raw);
    json_decref(j);
    return rc;
}

/* ---- command-line plumbing --------------------------------------------------------------- */

#define CLI_LONGOPTS_MAX 64

static const char *option_name(const struct option *longopts, int code)
{
    for (size_t i = 0; longopts[i].name; i++) {
        if (longopts[i].val == code)
            return longopts[i].name;
    }
    return "?";
}

bool cli_int(const char *name, const char *value, long long min, long long max, long long *out)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(value, &end, 10);
    if (errno != 0 || end == value || *end != '\0' || isspace((unsigned char)value[0]) || v < min || v > max) {
        fprintf(stderr, "hookd: --%s must be an integer from %lld to %lld\n", name, min, max);
        return false;
    }
    *out = v;
    return true;
}

static bool has_option(const struct option *longopts, const char *name)
{
    for (size_t i = 0; longopts[i].name; i++) {
        if (strcmp(longopts[i].name, name) == 0)
            return true;
    }
    return false;
}

/* The family's options, then -c, -h and the output options it does not define itself. */
static void all_options(struct option *all, const struct option *longopts, const struct cli_subcommand *sub)
{
    const struct option common[] = {
        {"config", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {"json", (sub->options & CLI_JSON_INPUT) ? required_argument : no_argument, NULL, CLI_O_JSON},
        {"utc", no_argument, NULL, CLI_O_UTC},
        {"watch", optional_argument, NULL, CLI_O_WATCH},
        {"count", required_argument, NULL, CLI_O_COUNT},
    };
    size_t n = 0;

    while (longopts[n].name && n < CLI_LONGOPTS_MAX - 8) {
        all[n] = longopts[n];
        n++;
    }
    for (size_t i = 0; i < sizeof common / sizeof common[0]; i++) {
        if (!has_option(longopts, common[i].name))
            all[n++] = common[i];
    }
    all[n] = (struct option){NULL, 0, NULL, 0};
}

/*
 * "--watch 5s" → "--watch=5s" when the next word is a duration, so that the
 * interval may be given either way without taking an id for one. Returns a
 * copy of argv[0..argc) (NULL-terminated; the joined words are heap, listed in
 * joined[] for freeing), or NULL when out of memory.
 */
static char **join_watch_interval(int argc, char **argv, int *argc_out, char **joined, size_t max_joined)
{
    char **out = calloc((size_t)argc + 1, sizeof *out);
    size_t n_joined = 0;
    int n = 0;
    int64_t ms;

    if (!out)
        return NULL;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            while (i < argc)
                out[n++] = argv[i++];
            break;
        }
        if (strcmp(argv[i], "--watch") == 0 && i + 1 < argc && argv[i + 1][0] != '-' && n_joined < max_joined &&
            duration_parse(argv[i + 1], &ms) == 0) {
            size_t len = strlen(argv[i + 1]) + sizeof "--watch=";
            char *word = malloc(len);
            if (!word)
                break;
            snprintf(word, len, "--watch=%s", argv[i + 1]);
            joined[n_joined++] = word;
            out[n++] = word;
            i++;
            continue;
        }
        out[n++] = argv[i];
    }
    *argc_out = n;
    return out;
}

/* Sets a->out from the output options and the terminal; false after printing a usage error. */
static bool output_options(struct cli_args *a, const struct cli_subcommand *sub)
{
    struct out *o = &a->out;

    memset(o, 0, sizeof *o);
    o->json = a->opt[CLI_O_JSON] && !(sub->options & CLI_JSON_INPUT);
    o->utc = a->opt[CLI_O_UTC] != NULL;
    o->tty = isatty(STDOUT_FILENO);
    o->colour = out_colour_wanted(STDOUT_FILENO, getenv("NO_COLOR"));
    if (a->opt[CLI_O_WATCH]) {
        o->watch_ms = 2000;
        if (a->opt[CLI_O_WATCH][0] &&
            (duration_parse(a->opt[CLI_O_WATCH], &o->watch_ms) != 0 || o->watch_ms < 100 || o->watch_ms > 3600000)) {
            fprintf(stderr, "hookd: --watch takes an interval from 100ms to 1h (e.g. 2s)\n");
            return false;
        }
    }
    if (a->opt[CLI_O_COUNT]) {
        if (!a->opt[CLI_O_WATCH]) {
            fprintf(stderr, "hookd: --count applies to --watch\n");
            return false;
        }
        if (!cli_int("count", a->opt[CLI_O_COUNT], 1, 1000000, &o->count))
            return false;
    }
    return true;
}

/* Whether the subcommand takes option code c: its own, and the output options that apply to it. */
static bool takes_option(const struct cli_subcommand *sub, int c)
{
    if (c == CLI_O_JSON || c == CLI_O_UTC)
        return true;
    if (c == CLI_O_JSON_INPUT)
        return false;
    return (sub->options & CLI_OPT(c)) != 0;
}

/* ---- help ---------------------------------------------------------------------------------- */

static bool watches(const struct cli_subcommand *sub) { return (sub->options & CLI_WATCH) == CLI_WATCH; }

/* --name in text as a whole word ("--url" is not in "--url-list"). */
static bool names_option(const char *text, const char *name)
{
    size_t n = strlen(name);

    for (const char *p = text; (p = strstr(p, "--")) != NULL; p += 2) {
        if (strncmp(p + 2, name, n) == 0 && !isalnum((unsigned char)p[2 + n]) && p[2 + n] != '-')
            return true;
    }
    return false;
}

/*
 * The options subs take besides those their synopses show: -c, --json, --utc,
 * -h, and --watch/--count for the reads that take them (design §12 "CLI
 * output"); for one subcommand also any of its own options its synopsis leaves
 * out, so that -h names everything the command accepts.
 */
static void print_options(FILE *f, const char *family, const struct cli_subcommand *subs, size_t n_subs,
                          const struct option *longopts)
{
    size_t n_watch = 0, n_json_input = 0;

    for (size_t i = 0; i < n_subs; i++) {
        n_watch += watches(&subs[i]);
        n_json_input += (subs[i].options & CLI_JSON_INPUT) != 0;
    }
    fputs(n_subs == 1 ? "\noptions:\n" : "\nevery subcommand also takes:\n", f);
    if (n_subs == 1) {
        for (size_t i = 0; longopts[i].name; i++) {
            int c = longopts[i].val;
            if (c > 0 && c < CLI_O_JSON_INPUT && takes_option(subs, c) && !names_option(subs->synopsis, longopts[i].name))
                fprintf(f, "  --%s%s\n", longopts[i].name, longopts[i].has_arg == required_argument ? " VALUE" : "");
        }
    }
    fputs("  -c, --config FILE   hookd.conf to read admin_listen and admin_token from\n", f);
    if (!has_option(longopts, "json") && n_json_input < n_subs)
        fprintf(f, "  --json              print the API's JSON answer unchanged instead of a table or record%s\n",
                n_json_input > 0 ? "\n                      (where the synopsis shows --json VALUE, it is the input)" : "");
    if (!has_option(longopts, "utc"))
        fputs("  --utc               absolute UTC times instead of \"2 m ago\"\n", f);
    if (n_watch == n_subs) {
        fputs("  --watch [INTERVAL]  show it again every INTERVAL (2s; 100ms to 1h) until Ctrl-C\n"
              "  --count N           stop a watch after N snapshots\n",
              f);
    }
    fputs("  -h, --help          this text\n", f);
    if (n_watch > 0 && n_watch < n_subs) {
        fprintf(f, "hookd %s", family);
        for (size_t i = 0, k = 0; i < n_subs; i++)
            if (watches(&subs[i]))
                fprintf(f, "%s%s", k++ ? ", " : " ", subs[i].name);
        fputs(" also take:\n"
              "  --watch [INTERVAL]  show it again every INTERVAL (2s; 100ms to 1h) until Ctrl-C\n"
              "  --count N           stop a watch after N snapshots\n",
              f);
    }
    fputs("environment: HOOKD_ADMIN_URL (e.g. http://127.0.0.1:8081), HOOKD_ADMIN_TOKEN;\n"
          "NO_COLOR set: no colours (there are none when stdout is not a terminal)\n",
          f);
}

static void print_usage(FILE *f, const char *family, const struct cli_subcommand *subs, size_t n_subs,
                        const struct option *longopts)
{
    fprintf(f, "usage: hookd %s <subcommand> [options]\n\nsubcommands:\n", family);
    for (size_t i = 0; i < n_subs; i++)
        fprintf(f, "  hookd %s %s\n", family, subs[i].synopsis);
    print_options(f, family, subs, n_subs, longopts);
    fprintf(f, "`hookd %s SUBCOMMAND --help` describes one.\n", family);
}

/* `hookd FAMILY SUB -h`, `hookd FAMILY -h` for a family of one command. */
static void print_subcommand_usage(FILE *f, const char *family, const struct cli_subcommand *sub,
                                   const struct option *longopts)
{
    fprintf(f, "usage: hookd %s %s\n", family, sub->synopsis);
    print_options(f, family, sub, 1, longopts);
}

static const char *common_option_name(int code)
{
    switch (code) {
    case CLI_O_JSON:
        return "json";
    case CLI_O_UTC:
        return "utc";
    case CLI_O_WATCH:
        return "watch";
    case CLI_O_COUNT:
        return "count";
    default:
        return "?";
    }
}

static int parse_and_run(const char *family, const struct cli_subcommand *sub, const struct option *longopts,
                         int argc, char **argv)
{
    struct option all[CLI_LONGOPTS_MAX];
    struct cli_args a = {0};
    struct client client;
    char err[512], who[128];
    int c, rc;

    snprintf(who, sizeof who, "%s%s%s", family, sub->name[0] ? " " : "", sub->name);

    all_options(all, longopts, sub);
    optind = 0; /* glibc: restart scanning from scratch */
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":c:h", all, NULL)) != -1) {
        if (c == 'c') {
            a.config = optarg;
        } else if (c == 'h') {
            print_subcommand_usage(stdout, family, sub, longopts);
            return CLI_EXIT_OK;
        } else if (c > 0 && c < CLI_MAX_OPTIONS && takes_option(sub, c)) {
            a.opt[c] = optarg ? optarg : "";
        } else if (c > 0 && c < CLI_MAX_OPTIONS) {
            fprintf(stderr, "hookd %s: --%s does not apply here\nusage: hookd %s %s\n", who,
                    c >= CLI_O_COUNT && !has_option(longopts, common_option_name(c)) ? common_option_name(c)
                                                                                      : option_name(longopts, c),
                    family, sub->synopsis);
            return CLI_EXIT_USAGE;
        } else {
            fprintf(stderr, "hookd %s: %s option '%s'\nusage: hookd %s %s\n", who,
                    c == ':' ? "missing value for" : "unknown", argv[optind - 1], family, sub->synopsis);
            return CLI_EXIT_USAGE;
        }
    }
    for (int i = optind; i < argc; i++) {
        if (a.n_pos == CLI_MAX_POSITIONAL || a.n_pos == sub->n_pos) {
            fprintf(stderr, "hookd %s: unexpected argument '%s'\nusage: hookd %s %s\n", who,
                    argv[i], family, sub->synopsis);
            return CLI_EXIT_USAGE;
        }
        a.pos[a.n_pos++] = argv[i];
    }
    if (a.n_pos < sub->n_pos) {
        fprintf(stderr, "hookd %s: %s\nusage: hookd %s %s\n", who,
                sub->name[0] ? "an id is required" : "an argument is missing", family,
                sub->synopsis);
        return CLI_EXIT_USAGE;
    }
    if (!output_options(&a, sub))
        return CLI_EXIT_USAGE;
    if (client_init(&client, a.config, err, sizeof err) != 0) {
        fprintf(stderr, "hookd: %s\n", err);
        return CLI_EXIT_USAGE;
    }
    rc = sub->run(&client, &a);
    client_close(&client);
    return rc;
}

/* argv[0] is the subcommand's name (or the family's, for a family of one command). */
static int run_subcommand(const char *family, const struct cli_subcommand *sub, const struct option *longopts,
                          int argc, char **argv)
{
    char *joined[8] = {0};
    char **args;
    int n_args, rc;

    if (!(args = join_watch_interval(argc, argv, &n_args, joined, sizeof joined / sizeof joined[0]))) {
        fprintf(stderr, "hookd: out of memory\n");
        return CLI_EXIT_USAGE;
    }
    rc = parse_and_run(family, sub, longopts, n_args, args);
    for (size_t i = 0; i < sizeof joined / sizeof joined[0]; i++)
        free(joined[i]);
    free(args);
    return rc;
}

int cli_dispatch(const char *family, const struct cli_subcommand *subs, size_t n_subs,
                 const struct option *longopts, int argc, char **argv)
{
    const struct cli_subcommand *sub = NULL;

    if (argc < 2) {
        print_usage(stderr, family, subs, n_subs, longopts);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        print_usage(stdout, family, subs, n_subs, longopts);
        return CLI_EXIT_OK;
    }
    for (size_t i = 0; i < n_subs && !sub; i++) {
        if (strcmp(subs[i].name, argv[1]) == 0)
            sub = &subs[i];
    }
    if (!sub) {
        fprintf(stderr, "hookd %s: unknown subcommand '%s'\n", family, argv[1]);
        print_usage(stderr, family, subs, n_subs, longopts);
        return CLI_EXIT_USAGE;
    }
    return run_subcommand(family, sub, longopts, argc - 1, argv + 1);
}

int cli_dispatch_one(const char *family, const struct cli_subcommand *sub, const struct option *longopts, int argc,
                     char **argv)
{
    return run_subcommand(family, sub, longopts, argc, argv);
}

/* ---- paths -------------------------------------------------------------------------------- */

static bool append_escaped(char *path, size_t cap, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(path);

    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        bool plain = isalnum(ch) || ch == '-' || ch == '.' || ch == '_' || ch == '~';
        if (n + (plain ? 1 : 3) >= cap)
            return false;
        if (plain) {
            path[n++] = (char)ch;
        } else {
            path[n++] = '%';
            path[n++] = hex[ch >> 4];
            path[n++] = hex[ch & 15];
        }
    }
    path[n] = '\0';
    return true;
}

static bool append_raw(char *path, size_t cap, const char *s)
{
    size_t n = strlen(path), m = strlen(s);
    if (n + m >= cap)
        return false;
    memcpy(path + n, s, m + 1);
    return true;
}

bool cli_path_segment(char *path, size_t cap, const char *segment)
{
    return append_raw(path, cap, "/") && append_escaped(path, cap, segment);
}

bool cli_path_query(char *path, size_t cap, const char *name, const char *value)
{
    if (!value)
        return true;
    return append_raw(path, cap, strchr(path, '?') ? "&" : "?") && append_escaped(path, cap, name) &&
           append_raw(path, cap, "=") && append_escaped(path, cap, value);
}

bool cli_item_path(char *path, size_t cap, const char *base, const char *id, const char *suffix)
{
    if ((size_t)snprintf(path, cap, "%s", base) >= cap || !cli_path_segment(path, cap, id) ||
        (suffix && !append_raw(path, cap, suffix))) {
        fprintf(stderr, "hookd: id too long\n");
        return false;
    }
    return true;
}

bool cli_list_path(char *path, size_t cap, const char *base, const struct cli_query_param *params, size_t n,
                   int limit_code, const struct cli_args *a)
{
    long long limit;

    if (limit_code && a->opt[limit_code] && !cli_int("limit", a->opt[limit_code], 1, 1000, &limit))
        return false;
    if ((size_t)snprintf(path, cap, "%s", base) >= cap)
        goto too_long;
    for (size_t i = 0; i < n; i++) {
        if (!cli_path_query(path, cap, params[i].param, a->opt[params[i].code]))
            goto too_long;
    }
    return true;
too_long:
    fprintf(stderr, "hookd: query too long\n");
    return false;
}
