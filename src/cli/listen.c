/*
 * `hookd listen`: a local webhook receiver that verifies Standard Webhooks
 * signatures, prints one record per request, and answers from a script of
 * statuses and delays (it is also the scenario tests' sink).
 */
#include "cli/listen.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/output.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/duration.h"
#include "core/signature.h"
#include "core/signature_scheme.h"
#include "core/timefmt.h"
#include "hookd.h"
#include "net/http.h"

#define LISTEN_DEFAULT "127.0.0.1:9000"
#define LISTEN_MAX_SECRETS 8
#define LISTEN_MAX_STATUS_RULES 32
#define LISTEN_MAX_BODY (8u * 1024 * 1024)
#define LISTEN_TOLERANCE_S 300
#define LISTEN_DELAY_MAX_MS (10 * 60 * 1000) /* one scripted delay */
#define LISTEN_STOP_POLL_MS 50
#define LISTEN_DRAIN_MS 100 /* after --max-requests: let the last answers go out */

/* ---- script parsing ------------------------------------------------------- */

/* err = "what 'a'" (a is not NUL-terminated: alen bytes). */
static void set_err(char *err, size_t errlen, const char *what, const char *a, size_t alen)
{
    if (err != NULL && errlen > 0)
        snprintf(err, errlen, "%s '%.*s'", what, (int)alen, a);
}

/* Splits text on sep into trimmed spans; fn gets each. Empty items are an error. */
static int for_each_item(const char *text, char sep, int (*fn)(const char *s, size_t n, void *arg), void *arg,
                         char *err, size_t errlen)
{
    const char *p = text;
    size_t count = 0;

    if (text == NULL || *text == '\0') {
        set_err(err, errlen, "empty list", "", 0);
        return HOOKD_EINVAL;
    }
    for (;;) {
        const char *end = strchr(p, sep);
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        const char *s = p;
        int rc;

        while (n > 0 && (*s == ' ' || *s == '\t')) {
            s++;
            n--;
        }
        while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
            n--;
        if (n == 0) {
            set_err(err, errlen, "empty item in", text, strlen(text));
            return HOOKD_EINVAL;
        }
        if (++count > LISTEN_SCRIPT_MAX) {
            set_err(err, errlen, "more than a million items in", text, strlen(text) > 40 ? 40 : strlen(text));
            return HOOKD_EINVAL;
        }
        rc = fn(s, n, arg);
        if (rc != 0) {
            set_err(err, errlen, "bad item", s, n);
            return rc;
        }
        if (end == NULL)
            return 0;
        p = end + 1;
    }
}

static int parse_status(const char *s, size_t n, int *out)
{
    int v = 0;

    if (n != 3)
        return HOOKD_EINVAL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return HOOKD_EINVAL;
        v = v * 10 + (s[i] - '0');
    }
    if (v < 100 || v > 599)
        return HOOKD_EINVAL;
    *out = v;
    return 0;
}

static int parse_duration_span(const char *s, size_t n, int64_t *out)
{
    char tmp[32];

    if (n == 0 || n >= sizeof tmp)
        return HOOKD_EINVAL;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    if (duration_parse(tmp, out) != 0 || *out > LISTEN_DELAY_MAX_MS)
        return HOOKD_EINVAL;
    return 0;
}

/* A header value from the script: printable, bounded, heap copy. */
static int header_value(const char *s, size_t n, char **out)
{
    if (n == 0 || n > LISTEN_HEADER_VALUE_MAX || *out != NULL)
        return HOOKD_EINVAL;
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return HOOKD_EINVAL;
    }
    *out = strndup(s, n);
    return *out != NULL ? 0 : HOOKD_ENOMEM;
}

/* One "key=value" option of an answer. */
static int answer_option(struct listen_answer *a, const char *s, size_t n)
{
    const char *eq = memchr(s, '=', n);
    size_t klen, vlen;
    const char *v;

    if (eq == NULL)
        return HOOKD_EINVAL;
    klen = (size_t)(eq - s);
    v = eq + 1;
    vlen = n - klen - 1;
    if (klen == 11 && strncmp(s, "retry-after", klen) == 0)
        return header_value(v, vlen, &a->retry_after);
    if (klen == 8 && strncmp(s, "location", klen) == 0)
        return header_value(v, vlen, &a->location);
    if (klen == 5 && strncmp(s, "delay", klen) == 0)
        return parse_duration_span(v, vlen, &a->delay_ms);
    return HOOKD_EINVAL;
}

struct growable {
    void *items;
    size_t n, cap, size;
};

static void *grow_one(struct growable *g)
{
    if (g->n == g->cap) {
        size_t cap = g->cap == 0 ? 16 : g->cap * 2;
        void *p = realloc(g->items, cap * g->size);
        if (p == NULL)
            return NULL;
        g->items = p;
        g->cap = cap;
    }
    return (char *)g->items + g->size * g->n++;
}

static void answer_free(struct listen_answer *a)
{
    free(a->retry_after);
    free(a->location);
    memset(a, 0, sizeof *a);
}

/* "STATUS[;key=value]…" */
static int add_answer(const char *s, size_t n, void *arg)
{
    struct growable *g = arg;
    struct listen_answer *a = grow_one(g);
    size_t seg = 0;
    int rc;

    if (a == NULL)
        return HOOKD_ENOMEM;
    memset(a, 0, sizeof *a);
    while (seg < n && s[seg] != ';')
        seg++;
    rc = parse_status(s, seg, &a->status);
    while (rc == 0 && seg < n) {
        size_t start = seg + 1, end = start;
        while (end < n && s[end] != ';')
            end++;
        rc = answer_option(a, s + start, end - start);
        seg = end;
    }
    if (rc != 0) {
        answer_free(a);
        g->n--;
    }
    return rc;
}

int listen_script_parse(const char *text, struct listen_script *out, char *err, size_t errlen)
{
    struct growable g = {.size = sizeof(struct listen_answer)};
    int rc = for_each_item(text, ',', add_answer, &g, err, errlen);

    out->items = g.items;
    out->n = g.n;
    if (rc != 0)
        listen_script_free(out);
    return rc;
}

void listen_script_free(struct listen_script *s)
{
    for (size_t i = 0; i < s->n; i++)
        answer_free(&s->items[i]);
    free(s->items);
    s->items = NULL;
    s->n = 0;
}

static int add_delay(const char *s, size_t n, void *arg)
{
    struct growable *g = arg;
    int64_t *d = grow_one(g);
    int rc;

    if (d == NULL)
        return HOOKD_ENOMEM;
    rc = parse_duration_span(s, n, d);
    if (rc != 0)
        g->n--;
    return rc;
}

int listen_delays_parse(const char *text, struct listen_delays *out, char *err, size_t errlen)
{
    struct growable g = {.size = sizeof(int64_t)};
    int rc = for_each_item(text, ',', add_delay, &g, err, errlen);

    out->ms = g.items;
    out->n = g.n;
    if (rc != 0)
        listen_delays_free(out);
    return rc;
}

void listen_delays_free(struct listen_delays *d)
{
    free(d->ms);
    d->ms = NULL;
    d->n = 0;
}

int listen_status_rule_parse(const char *text, struct listen_status_rule *out, char *err, size_t errlen)
{
    const char *eq = text != NULL ? strrchr(text, '=') : NULL;

    memset(out, 0, sizeof *out);
    if (eq == NULL || text[0] != '/' || parse_status(eq + 1, strlen(eq + 1), &out->status) != 0) {
        set_err(err, errlen, "expected PATH=CODE (e.g. /gone=410), got", text != NULL ? text : "",
                text != NULL ? strlen(text) : 0);
        return HOOKD_EINVAL;
    }
    out->path = strndup(text, (size_t)(eq - text));
    return out->path != NULL ? 0 : HOOKD_ENOMEM;
}

void listen_status_rule_free(struct listen_status_rule *r)
{
    free(r->path);
    memset(r, 0, sizeof *r);
}

/* ---- options ----------------------------------------------------------------- */

struct listener {
    const char *listen;
    const char *secrets[LISTEN_MAX_SECRETS];
    size_t n_secrets;
    struct listen_script script;
    struct listen_delays delays;
    struct listen_status_rule rules[LISTEN_MAX_STATUS_RULES];
    size_t n_rules;
    bool json, quiet;
    uint64_t max_requests; /* 0: no limit */

    atomic_uint_fast64_t received;     /* requests so far: the record number */
    atomic_uint_fast64_t script_used;  /* --respond items consumed */
    atomic_bool done;                  /* --max-requests reached */
    atomic_bool stopping;              /* cuts scripted delays short at exit */
    pthread_mutex_t out_mu;            /* one record at a time on stdout */
};

struct option_spec {
    const char *name;
    bool takes_value;
    int (*set)(struct listener *l, const char *value, char *err, size_t errlen);
};

static int opt_listen(struct listener *l, const char *v, char *err, size_t errlen)
{
    l->listen = v;
    return 0;
}

static int opt_secret(struct listener *l, const char *v, char *err, size_t errlen)
{
    if (l->n_secrets == LISTEN_MAX_SECRETS || !secret_is_valid(v)) {
        snprintf(err, errlen, "--secret: expected whsec_… of 24..64 bytes (at most %d secrets)", LISTEN_MAX_SECRETS);
        return HOOKD_EINVAL;
    }
    l->secrets[l->n_secrets++] = v;
    return 0;
}

static int opt_respond(struct listener *l, const char *v, char *err, size_t errlen)
{
    listen_script_free(&l->script);
    return listen_script_parse(v, &l->script, err, errlen);
}

static int opt_delay(struct listener *l, const char *v, char *err, size_t errlen)
{
    listen_delays_free(&l->delays);
    return listen_delays_parse(v, &l->delays, err, errlen);
}

static int opt_status(struct listener *l, const char *v, char *err, size_t errlen)
{
    if (l->n_rules == LISTEN_MAX_STATUS_RULES) {
        snprintf(err, errlen, "--status: at most %d rules", LISTEN_MAX_STATUS_RULES);
        return HOOKD_EINVAL;
    }
    int rc = listen_status_rule_parse(v, &l->rules[l->n_rules], err, errlen);
    if (rc == 0)
        l->n_rules++;
    return rc;
}

static int opt_json(struct listener *l, const char *v, char *err, size_t errlen)
{
    l->json = true;
    return 0;
}

static int opt_quiet(struct listener *l, const char *v, char *err, size_t errlen)
{
    l->quiet = true;
    return 0;
}

static int opt_max_requests(struct listener *l, const char *v, char *err, size_t errlen)
{
    char *end;
    unsigned long long n;

    errno = 0;
    n = strtoull(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || v[0] == '-' || n == 0) {
        snprintf(err, errlen, "--max-requests: expected a positive number");
        return HOOKD_EINVAL;
    }
    l->max_requests = n;
    return 0;
}

static const struct option_spec options[] = {
    {"listen", true, opt_listen},   {"secret", true, opt_secret}, {"respond", true, opt_respond},
    {"delay", true, opt_delay},     {"status", true, opt_status}, {"json", false, opt_json},
    {"quiet", false, opt_quiet},    {"max-requests", true, opt_max_requests},
};

static void usage(FILE *f)
{
    fputs("usage: hookd listen [--listen 127.0.0.1:9000] [--secret whsec_… ...] [--respond LIST] [--delay LIST]\n"
          "                    [--status PATH=CODE ...] [--json] [--quiet] [--max-requests N]\n"
          "  --respond 500,429;retry-after=1,302;location=URL,200;delay=2s   one answer per request, then 200\n"
          "  --delay 10ms,3s,0   one delay per request, then none\n"
          "  --status /gone=410  always answer CODE on PATH (before --respond)\n"
          "  A request whose signature does not verify with any --secret is answered 401\n"
          "  unless --respond or --status says otherwise.\n",
          f);
}

/* Returns 0, 1 (help shown) or HOOKD_EINVAL with err filled. */
static int parse_args(struct listener *l, int argc, char **argv, char *err, size_t errlen)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *value = NULL, *eq;
        size_t k, nlen;

        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)
            return 1;
        if (strncmp(arg, "--", 2) != 0) {
            snprintf(err, errlen, "unexpected argument '%s'", arg);
            return HOOKD_EINVAL;
        }
        arg += 2;
        eq = strchr(arg, '=');
        nlen = eq != NULL ? (size_t)(eq - arg) : strlen(arg);
        for (k = 0; k < sizeof options / sizeof options[0]; k++) {
            if (strlen(options[k].name) == nlen && strncmp(options[k].name, arg, nlen) == 0)
                break;
        }
        if (k == sizeof options / sizeof options[0]) {
            snprintf(err, errlen, "unknown option '%s'", argv[i]);
            return HOOKD_EINVAL;
        }
        if (options[k].takes_value) {
            value = eq != NULL ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
            if (value == NULL) {
                snprintf(err, errlen, "--%s needs a value", options[k].name);
                return HOOKD_EINVAL;
            }
        } else if (eq != NULL) {
            snprintf(err, errlen, "--%s takes no value", options[k].name);
            return HOOKD_EINVAL;
        }
        int rc = options[k].set(l, value, err, errlen);
        if (rc != 0) {
            if (strncmp(err, "--", 2) != 0) {
                char detail[256];
                snprintf(detail, sizeof detail, "%.200s", err);
                snprintf(err, errlen, "--%s: %.200s", options[k].name, detail);
            }
            return rc;
        }
    }
    return 0;
}

/* ---- requests ------------------------------------------------------------------- */

enum verdict { VERDICT_NONE, VERDICT_OK, VERDICT_BAD, VERDICT_UNSIGNED };

static const char *const verdict_words[] = {
    [VERDICT_NONE] = "unchecked", [VERDICT_OK] = "verified", [VERDICT_BAD] = "UNVERIFIED",
    [VERDICT_UNSIGNED] = "unsigned",
};

static const char *request_header(void *ctx, const char *name) { return http_header(ctx, name); }

/* Through the scheme table, like every signature check. */
static enum verdict verify(const struct listener *l, struct http_request *req, const char *body, size_t len)
{
    const struct signature_scheme *scheme = signature_scheme_find(SIGNATURE_SCHEME_DEFAULT);
    const struct signature_request sreq = {
        .header = request_header,
        .header_ctx = req,
        .body = body,
        .body_len = len,
        .now_s = clock_now_ms() / 1000,
        .tolerance_s = LISTEN_TOLERANCE_S,
    };

    if (l->n_secrets == 0)
        return VERDICT_NONE;
    if (http_header(req, "webhook-id") == NULL || http_header(req, "webhook-timestamp") == NULL ||
        http_header(req, scheme->header) == NULL)
        return VERDICT_UNSIGNED;
    return scheme->verify(&sreq, l->secrets, l->n_secrets) == 0 ? VERDICT_OK : VERDICT_BAD;
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

    while (ms > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* A scripted delay, in slices, so that stopping the server does not wait for it. */
static void delay_answer(struct listener *l, int64_t ms)
{
    while (ms > 0 && !atomic_load(&l->stopping)) {
        int64_t slice = ms < LISTEN_STOP_POLL_MS ? ms : LISTEN_STOP_POLL_MS;
        sleep_ms(slice);
        ms -= slice;
    }
}

/* Text from the request as a JSON string, invalid UTF-8 replaced (jansson refuses it as it is). */
static json_t *text_json(const char *text, size_t len)
{
    json_t *v = json_stringn(text, len);
    struct buf b;

    if (v != NULL)
        return v;
    buf_init(&b, len * 6 + 16);
    if (buf_json_string(&b, text) == 0)
        v = json_loadb(b.data, b.len, JSON_DECODE_ANY, NULL);
    buf_free(&b);
    return v;
}

/* The body as JSON when it parses, else as a JSON string. */
static json_t *body_json(const char *body, size_t len)
{
    json_t *v = json_loadb(body, len, JSON_DECODE_ANY, NULL);

    return v != NULL ? v : text_json(body, len);
}

struct record {
    uint64_t n;
    const char *method, *path, *id, *ts;
    enum verdict verdict;
    int status;
    int64_t received_at;
    const char *body;
    size_t body_len;
};

static void print_json(const struct record *r)
{
    char at[RFC3339_LEN];
    json_t *o;
    char *line;

    rfc3339_format(r->received_at, at);
    /* The path is percent-decoded and header values are any bytes: either may be invalid UTF-8. */
    o = json_pack("{s:I,s:s,s:o?,s:o?,s:o?,s:o,s:i,s:s,s:o?}", "n", (json_int_t)r->n, "method", r->method, "path",
                  text_json(r->path, strlen(r->path)), "webhook_id", r->id ? text_json(r->id, strlen(r->id)) : NULL,
                  "webhook_timestamp", r->ts ? text_json(r->ts, strlen(r->ts)) : NULL, "verified",
                  r->verdict == VERDICT_NONE ? json_null() : json_boolean(r->verdict == VERDICT_OK), "status",
                  r->status, "received_at", at, "body", body_json(r->body, r->body_len));
    /* ASCII only: C1 controls and bidi characters in the request reach the terminal as JSON escapes. */
    line = o != NULL ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
    json_decref(o);
    if (line == NULL) {
        fprintf(stderr, "hookd listen: cannot encode record %" PRIu64 "\n", r->n);
        return;
    }
    /* DEL is the one terminal-hostile byte JSON leaves raw; it only occurs inside strings. */
    for (const char *p = line; *p; p++) {
        if (*p == 0x7f)
            fputs("\\u007f", stdout);
        else
            fputc(*p, stdout);
    }
    fputc('\n', stdout);
    fflush(stdout);
    free(line);
}

/* Text from the request (its path is percent-decoded, its header values are any bytes) shown escaped. */
static void put_text(const char *text, size_t n, bool lines) { out_write_text(stdout, text, n, lines); }

static void print_human(const struct record *r)
{
    json_t *v = json_loadb(r->body, r->body_len, JSON_DECODE_ANY, NULL);
    char *pretty = v != NULL ? json_dumps(v, JSON_INDENT(2) | JSON_ENCODE_ANY) : NULL;
    const char *id = r->id != NULL ? r->id : "-";

    json_decref(v);
    printf("[%" PRIu64 "] ", r->n);
    put_text(r->method, strlen(r->method), false);
    fputc(' ', stdout);
    put_text(r->path, strlen(r->path), false);
    fputs(" webhook-id=", stdout);
    put_text(id, strlen(id), false);
    printf(" %s → %d\n", verdict_words[r->verdict], r->status);
    if (pretty != NULL) {
        put_text(pretty, strlen(pretty), true);
        fputc('\n', stdout);
    } else if (r->body_len > 0) {
        put_text(r->body, r->body_len, true);
        fputc('\n', stdout);
    }
    fflush(stdout);
    free(pretty);
}

static const struct listen_status_rule *rule_for(const struct listener *l, const char *path)
{
    for (size_t i = 0; i < l->n_rules; i++) {
        if (strcmp(l->rules[i].path, path) == 0)
            return &l->rules[i];
    }
    return NULL;
}

static void on_request(struct http_request *req, struct http_response *res, void *ctx)
{
    struct listener *l = ctx;
    struct record r = {.received_at = clock_now_ms()};
    const struct listen_status_rule *rule;
    const struct listen_answer *answer = NULL;
    int64_t delay = 0;
    static const char ok_body[] = "ok\n";

    r.n = atomic_fetch_add(&l->received, 1) + 1;
    r.method = http_method(req);
    r.path = http_path(req);
    r.body = http_body(req, &r.body_len);
    r.id = http_header(req, "webhook-id");
    r.ts = http_header(req, "webhook-timestamp");
    r.verdict = verify(l, req, r.body, r.body_len);

    rule = rule_for(l, r.path);
    if (rule != NULL) {
        r.status = rule->status;
    } else {
        uint64_t k = atomic_fetch_add(&l->script_used, 1);
        if (k < l->script.n)
            answer = &l->script.items[k];
        r.status = answer != NULL ? answer->status
                   : (r.verdict == VERDICT_BAD || r.verdict == VERDICT_UNSIGNED) ? 401 : 200;
    }
    if (r.n - 1 < l->delays.n)
        delay += l->delays.ms[r.n - 1];
    if (answer != NULL) {
        delay += answer->delay_ms;
        if (answer->retry_after != NULL)
            http_add_header(res, "Retry-After", answer->retry_after);
        if (answer->location != NULL)
            http_add_header(res, "Location", answer->location);
    }
    delay_answer(l, delay);
    http_reply(res, r.status, strdup(ok_body), sizeof ok_body - 1);
    res->content_type = "text/plain";

    if (!l->quiet) {
        pthread_mutex_lock(&l->out_mu);
        if (l->json)
            print_json(&r);
        else
            print_human(&r);
        pthread_mutex_unlock(&l->out_mu);
    }
    if (l->max_requests > 0 && r.n >= l->max_requests)
        atomic_store(&l->done, true);
}

/* ---- the command ------------------------------------------------------------------ */

/* The host part of the listen address as it goes into a URL ("127.0.0.1", "[::1]"). */
static void url_host(const char *listen, char *out, size_t len)
{
    const char *colon = strrchr(listen, ':');
    size_t n = colon != NULL ? (size_t)(colon - listen) : strlen(listen);

    if (n == 0)
        snprintf(out, len, "127.0.0.1");
    else
        snprintf(out, len, "%.*s", (int)n, listen);
}

/* Blocks until SIGINT/SIGTERM or --max-requests; the signals are blocked in every thread. */
static void wait_for_stop(struct listener *l, const sigset_t *stop_signals)
{
    const struct timespec poll = {.tv_sec = 0, .tv_nsec = LISTEN_STOP_POLL_MS * 1000000L};

    for (;;) {
        int sig = sigtimedwait(stop_signals, NULL, &poll);
        if (sig == SIGINT || sig == SIGTERM)
            return;
        if (atomic_load(&l->done)) {
            sleep_ms(LISTEN_DRAIN_MS);
            return;
        }
    }
}

static void listener_free(struct listener *l)
{
    listen_script_free(&l->script);
    listen_delays_free(&l->delays);
    for (size_t i = 0; i < l->n_rules; i++)
        listen_status_rule_free(&l->rules[i]);
    pthread_mutex_destroy(&l->out_mu);
}

int cmd_listen(int argc, char **argv)
{
    static const struct http_route routes[] = {{"*", "/*", on_request, HTTP_AUTH_NONE, 0, NULL, 0}};
    struct listener l = {.listen = LISTEN_DEFAULT};
    struct http_server *srv = NULL;
    sigset_t stop_signals;
    char err[512] = "";
    char host[256];
    int rc, status = 0;

    pthread_mutex_init(&l.out_mu, NULL);
    rc = parse_args(&l, argc, argv, err, sizeof err);
    if (rc != 0) {
        if (rc == 1) {
            usage(stdout);
        } else {
            fputs("hookd listen: ", stderr);
            out_write_text(stderr, err, strlen(err), false);
            fputc('\n', stderr);
            usage(stderr);
            status = 2;
        }
        goto out;
    }
    /* Blocked before the server starts, so its threads inherit the mask and only sigtimedwait sees them. */
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN);

    const struct http_server_options opt = {
        .listen = l.listen,
        .routes = routes,
        .n_routes = sizeof routes / sizeof routes[0],
        .ctx = &l,
        .max_body = LISTEN_MAX_BODY,
        .threads = 0, /* a connection per thread: one delayed answer holds up no other */
    };
    rc = http_server_start(&opt, &srv);
    if (rc != 0) {
        fprintf(stderr, "hookd listen: cannot listen on %s: %s\n", l.listen, hookd_strerror(rc));
        status = 1;
        goto out;
    }
    url_host(l.listen, host, sizeof host);
    fprintf(stderr, "listening on http://%s:%d\n", host, http_server_port(srv));
    fflush(stderr);
    wait_for_stop(&l, &stop_signals);
    atomic_store(&l.stopping, true);
    http_server_stop(srv);
out:
    listener_free(&l);
    return status;
}
