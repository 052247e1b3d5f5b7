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

#include <curl/curl.h>

#include "config.h"
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

int client_call_json(const struct client *c, const char *method, const char *path, const json_t *body,
                     json_t **out)
{
    char err[CURL_ERROR_SIZE + 64], *text = NULL, *response = NULL;
    long status = 0;
    int rc;

    *out = NULL;
    if (body && !(text = json_dumps(body, JSON_COMPACT))) {
        fprintf(stderr, "hookd: out of memory\n");
        return CLI_EXIT_USAGE;
    }
    rc = client_request(c, method, path, text, NULL, &status, &response, err, sizeof err);
    free(text);
    if (rc != 0) {
        fprintf(stderr, "hookd: %s\n", err);
        return CLI_EXIT_UNREACHABLE;
    }
    if (status < 200 || status >= 300) {
        json_t *e = json_loads(response, 0, NULL);
        json_t *er = json_object_get(e, "error");
        fprintf(stderr, "hookd: %ld %s: %s\n", status, json_string_value(json_object_get(er, "code")) ?: "error",
                json_string_value(json_object_get(er, "message")) ?: response);
        json_decref(e);
        free(response);
        return CLI_EXIT_API;
    }
    *out = json_loads(response, 0, NULL);
    free(response);
    if (!*out) {
        fprintf(stderr, "hookd: the answer is not JSON\n");
        return CLI_EXIT_API;
    }
    return CLI_EXIT_OK;
}

int client_call(const struct client *c, const char *method, const char *path, const json_t *body,
                const char *extra_header)
{
    char err[CURL_ERROR_SIZE + 64];
    char *text = body ? json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    char *response = NULL;
    long status = 0;
    json_t *j = NULL;
    int exit_status;

    if (body && !text) {
        fprintf(stderr, "hookd: out of memory\n");
        return CLI_EXIT_USAGE;
    }
    int rc = client_request(c, method, path, text, extra_header, &status, &response, err, sizeof err);
    if (text) {
        explicit_bzero(text, strlen(text)); /* may carry an endpoint secret */
        free(text);
    }
    if (rc != 0) {
        fprintf(stderr, "hookd: cannot reach hookd admin API at %s: %s\n", c->base_url, err);
        return CLI_EXIT_UNREACHABLE;
    }
    if (response[0])
        j = json_loads(response, JSON_DECODE_ANY, NULL);
    if (status >= 200 && status < 300) {
        if (j) {
            json_dumpf(j, stdout, JSON_INDENT(2) | JSON_ENCODE_ANY);
            fputc('\n', stdout);
        } else if (response[0]) {
            fputs(response, stdout);
        }
        exit_status = CLI_EXIT_OK;
    } else {
        json_t *e = json_object_get(j, "error");
        const char *message = json_string_value(json_object_get(e, "message"));
        const char *code = json_string_value(json_object_get(e, "code"));
        if (message)
            fprintf(stderr, "hookd: %s (HTTP %ld %s)\n", message, status, code ? code : "error");
        else
            fprintf(stderr, "hookd: HTTP %ld from %s%s: %.500s\n", status, c->base_url, path, response);
        exit_status = CLI_EXIT_API;
    }
    json_decref(j);
    free(response);
    return exit_status;
}

/* ---- command-line plumbing --------------------------------------------------------------- */

#define CLI_LONGOPTS_MAX 64

static void print_usage(FILE *f, const char *family, const struct cli_subcommand *subs, size_t n_subs)
{
    fprintf(f, "usage: hookd %s <subcommand> [options]\n\nsubcommands:\n", family);
    for (size_t i = 0; i < n_subs; i++)
        fprintf(f, "  hookd %s %s\n", family, subs[i].synopsis);
    fprintf(f, "\nevery subcommand also takes:\n"
               "  -c, --config FILE   hookd.conf to read admin_listen and admin_token from\n"
               "  -h, --help          this text\n"
               "environment: HOOKD_ADMIN_URL (e.g. http://127.0.0.1:8081), HOOKD_ADMIN_TOKEN\n");
}

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

int cli_dispatch(const char *family, const struct cli_subcommand *subs, size_t n_subs,
                 const struct option *longopts, int argc, char **argv)
{
    struct option all[CLI_LONGOPTS_MAX];
    const struct cli_subcommand *sub = NULL;
    struct cli_args a = {0};
    struct client client;
    char err[512];
    size_t n = 0;
    int c, rc;

    if (argc < 2) {
        print_usage(stderr, family, subs, n_subs);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        print_usage(stdout, family, subs, n_subs);
        return CLI_EXIT_OK;
    }
    for (size_t i = 0; i < n_subs && !sub; i++) {
        if (strcmp(subs[i].name, argv[1]) == 0)
            sub = &subs[i];
    }
    if (!sub) {
        fprintf(stderr, "hookd %s: unknown subcommand '%s'\n", family, argv[1]);
        print_usage(stderr, family, subs, n_subs);
        return CLI_EXIT_USAGE;
    }
    while (longopts[n].name && n < CLI_LONGOPTS_MAX - 3) {
        all[n] = longopts[n];
        n++;
    }
    all[n++] = (struct option){"config", required_argument, NULL, 'c'};
    all[n++] = (struct option){"help", no_argument, NULL, 'h'};
    all[n] = (struct option){NULL, 0, NULL, 0};

    optind = 0; /* glibc: restart scanning from scratch */
    opterr = 0;
    while ((c = getopt_long(argc - 1, argv + 1, ":c:h", all, NULL)) != -1) {
        if (c == 'c') {
            a.config = optarg;
        } else if (c == 'h') {
            printf("usage: hookd %s %s\n", family, sub->synopsis);
            return CLI_EXIT_OK;
        } else if (c > 0 && c < CLI_MAX_OPTIONS && (sub->options & CLI_OPT(c))) {
            a.opt[c] = optarg ? optarg : "";
        } else if (c > 0 && c < CLI_MAX_OPTIONS) {
            fprintf(stderr, "hookd %s %s: --%s does not apply here\nusage: hookd %s %s\n", family, sub->name,
                    option_name(longopts, c), family, sub->synopsis);
            return CLI_EXIT_USAGE;
        } else {
            fprintf(stderr, "hookd %s %s: %s option '%s'\nusage: hookd %s %s\n", family, sub->name,
                    c == ':' ? "missing value for" : "unknown", argv[optind], family, sub->synopsis);
            return CLI_EXIT_USAGE;
        }
    }
    for (int i = optind + 1; i < argc; i++) {
        if (a.n_pos == CLI_MAX_POSITIONAL || a.n_pos == sub->n_pos) {
            fprintf(stderr, "hookd %s %s: unexpected argument '%s'\nusage: hookd %s %s\n", family, sub->name,
                    argv[i], family, sub->synopsis);
            return CLI_EXIT_USAGE;
        }
        a.pos[a.n_pos++] = argv[i];
    }
    if (a.n_pos < sub->n_pos) {
        fprintf(stderr, "hookd %s %s: an id is required\nusage: hookd %s %s\n", family, sub->name, family,
                sub->synopsis);
        return CLI_EXIT_USAGE;
    }
    if (client_init(&client, a.config, err, sizeof err) != 0) {
        fprintf(stderr, "hookd: %s\n", err);
        return CLI_EXIT_USAGE;
    }
    rc = sub->run(&client, &a);
    client_close(&client);
    return rc;
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
