/*
 * Daemon settings: one table of keys (section, name, type, target, default),
 * applied from defaults, then the INI file, then HOOKD_<SECTION>_<KEY>.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <ini.h>

#include "core/duration.h"
#include "core/secret_box.h"
#include "hookd.h"
#include "log.h"

enum conf_type { CONF_STRING, CONF_DURATION, CONF_DURATION_LIST, CONF_INT, CONF_BOOL, CONF_FRACTION, CONF_SIZE };

struct conf_key {
    const char *section;
    const char *name;
    enum conf_type type;
    size_t offset;   /* of the field in struct config (the retry_policy for lists) */
    size_t size;     /* CONF_STRING: size of the char array */
    int64_t min;     /* numeric bounds, inclusive */
    int64_t max;
    const char *def; /* NULL: config_defaults sets it (retry_policy_default) */
    bool secret;     /* never echoed in error text */
    bool (*check)(const char *value); /* CONF_STRING: extra validation */
    const char *what;                 /* CONF_STRING: what check expects, for errors */
};

static bool check_listen(const char *v);
static bool check_log_level(const char *v);
static bool check_store(const char *v);
static bool check_admin_token(const char *v);
static bool check_secret_key(const char *v);
static bool check_metrics_auth(const char *v);
static bool check_portal_url(const char *v);

#define FIELD(f) offsetof(struct config, f)
#define STR(sec, k, f, d, secr, chk, wh) {sec, k, CONF_STRING, FIELD(f), sizeof(((struct config *)0)->f), 0, 0, d, secr, chk, wh}
#define NUM(sec, k, ty, f, lo, hi, d) {sec, k, ty, FIELD(f), 0, lo, hi, d, false, NULL, NULL}

#define DAY_MS (INT64_C(86400000))
#define YEAR_MS (365 * DAY_MS)

static const struct conf_key conf_keys[] = {
    STR("server", "store", store, "sqlite:hookd.db", true, check_store, "store (sqlite:PATH or postgres://...)"),
    STR("server", "public_listen", public_listen, "127.0.0.1:8080", false, check_listen, "listen address (host:port)"),
    STR("server", "admin_listen", admin_listen, "127.0.0.1:8081", false, check_listen, "listen address (host:port)"),
    STR("server", "admin_token", admin_token, "", true, check_admin_token,
        "admin token: it must be at least " ADMIN_TOKEN_MIN_TEXT " characters"),
    STR("server", "secret_key_file", secret_key_file, "", false, NULL, NULL),
    STR("server", "secret_key", secret_key, "", true, check_secret_key,
        "secret key: it must be 32 bytes as base64 (44 characters) or hex (64 digits)"),
    STR("server", "node_id", node_id, "", false, NULL, NULL),
    STR("server", "log_level", log_level, "info", false, check_log_level, "log level (debug, info, warn, error)"),
    NUM("server", "http_threads", CONF_INT, http_threads, 1, 64, "2"),
    NUM("server", "max_connections", CONF_INT, max_connections, 16, 1000000, "10240"),
    NUM("server", "max_connections_per_ip", CONF_INT, max_connections_per_ip, 1, 1000000, "1024"),
    NUM("server", "header_timeout", CONF_DURATION, header_timeout_ms, 100, 3600000, "10s"),
    NUM("server", "idle_timeout", CONF_DURATION, idle_timeout_ms, 1000, DAY_MS, "60s"),
    NUM("server", "connection_memory", CONF_SIZE, connection_memory, 16384, INT64_C(16) << 20, "128KiB"),
    NUM("server", "write_timeout", CONF_DURATION, write_timeout_ms, 100, 3600000, "5s"),
    NUM("server", "application_share", CONF_FRACTION, application_share, 0, 0.5, "0.2"),
    NUM("server", "drain_timeout", CONF_DURATION, drain_timeout_ms, 0, 3600000, "10s"),
    NUM("server", "metrics_refresh", CONF_DURATION, metrics_refresh_ms, 0, 3600000, "5s"),
    STR("server", "metrics_auth", metrics_auth, "token", false, check_metrics_auth, "metrics_auth (token or none)"),
    STR("server", "portal_url", portal_url, "", false, check_portal_url,
        "portal_url (an http:// or https:// URL without query or fragment, e.g. https://status.example.com)"),
    NUM("delivery", "timeout", CONF_DURATION, timeout_ms, 1, DAY_MS, "10s"),
    NUM("delivery", "connect_timeout", CONF_DURATION, connect_timeout_ms, 1, DAY_MS, "5s"),
    NUM("delivery", "retry_schedule", CONF_DURATION_LIST, retry, 0, YEAR_MS, NULL),
    NUM("delivery", "retry_window", CONF_DURATION, retry.window_ms, 0, 10 * YEAR_MS, NULL),
    NUM("delivery", "jitter", CONF_FRACTION, retry.jitter, 0, 1, NULL),
    NUM("delivery", "max_in_flight", CONF_INT, max_in_flight, 1, 1000000, "256"),
    NUM("delivery", "endpoint_max_in_flight", CONF_INT, endpoint_max_in_flight, 1, 1000000, "32"),
    NUM("delivery", "allow_private_networks", CONF_BOOL, allow_private_networks, 0, 1, "false"),
    NUM("delivery", "retry_after_max", CONF_DURATION, retry.retry_after_max_ms, 0, YEAR_MS, NULL),
    NUM("delivery", "response_max", CONF_SIZE, response_max, 0, INT64_C(64) << 20, "4096"),
    NUM("delivery", "lease", CONF_DURATION, lease_ms, 1, DAY_MS, "60s"),
    NUM("delivery", "rotate_grace", CONF_DURATION, rotate_grace_ms, 0, YEAR_MS, "24h"),
    NUM("delivery", "window", CONF_INT, window, 1, 10000000, "4096"),
    NUM("delivery", "breaker_failures", CONF_INT, breaker_failures, 0, 1000000000, "5"),
    NUM("delivery", "breaker_probe", CONF_DURATION, breaker_probe_ms, 1, DAY_MS, "10s"),
    NUM("delivery", "breaker_probe_max", CONF_DURATION, breaker_probe_max_ms, 1, 7 * DAY_MS, "10m"),
    NUM("delivery", "breaker_ramp", CONF_DURATION, breaker_ramp_ms, 0, DAY_MS, "30s"),
    NUM("delivery", "disable_after", CONF_DURATION, disable_after_ms, 0, 10 * YEAR_MS, "5d"),
    NUM("delivery", "sync_warn_after", CONF_DURATION, sync_warn_after_ms, 1, 10 * YEAR_MS, "60s"),
    NUM("inbox", "retry_schedule", CONF_DURATION_LIST, inbox_retry, 0, YEAR_MS, "1m,5m,15m"),
    NUM("inbox", "max_defer", CONF_DURATION, max_defer_ms, 0, YEAR_MS, "1h"),
    NUM("inbox", "max_body", CONF_SIZE, max_body, 1, INT64_C(1) << 30, "1MiB"),
    NUM("inbox", "workers", CONF_INT, workers, 1, 1024, "32"),
    NUM("inbox", "timeout", CONF_DURATION, inbox_timeout_ms, 1, DAY_MS, "10s"),
    NUM("inbox", "allow_private_networks", CONF_BOOL, inbox_allow_private_networks, 0, 1, "true"),
    NUM("inbox", "reconcile_after", CONF_DURATION, reconcile_after_ms, 0, DAY_MS, "5s"),
    NUM("alerts", "enabled", CONF_BOOL, alerts_enabled, 0, 1, "true"),
    NUM("alerts", "interval", CONF_DURATION, alerts_interval_ms, 10, DAY_MS, "30s"),
    NUM("alerts", "window", CONF_DURATION, alerts_window_ms, 100, 7 * DAY_MS, "5m"),
    NUM("alerts", "reopen_after", CONF_DURATION, alerts_reopen_after_ms, 0, 7 * DAY_MS, "10m"),
    NUM("alerts", "backlog_growth", CONF_INT, alerts_backlog_growth, 0, 1000000000, "100"),
    NUM("alerts", "error_rate", CONF_FRACTION, alerts_error_rate, 0, 1, "0.5"),
    NUM("alerts", "error_min_attempts", CONF_INT, alerts_error_min_attempts, 1, 1000000000, "20"),
    NUM("alerts", "no_success_accounts", CONF_INT, alerts_no_success_accounts, 0, 1000000000, "3"),
    NUM("alerts", "dead_letters", CONF_INT, alerts_dead_letters, 0, 1000000000, "1"),
    NUM("alerts", "quarantined", CONF_INT, alerts_quarantined, 0, 1000000000, "1"),
    NUM("alerts", "signature_rejections", CONF_INT, alerts_signature_rejections, 0, 1000000000, "20"),
    NUM("retention", "deliveries", CONF_DURATION, retention_deliveries_ms, 0, 100 * YEAR_MS, "30d"),
    NUM("retention", "inbox", CONF_DURATION, retention_inbox_ms, 0, 100 * YEAR_MS, "30d"),
    NUM("retention", "interval", CONF_DURATION, retention_interval_ms, 10, DAY_MS, "1m"),
    NUM("retention", "batch", CONF_INT, retention_batch, 1, 100000, "200"),
    NUM("retention", "pause", CONF_DURATION, retention_pause_ms, 0, 60000, "10ms"),
    NUM("retention", "share", CONF_FRACTION, retention_share, 0, 1, "0.05"),
};
#define N_KEYS (sizeof conf_keys / sizeof conf_keys[0])

static bool check_listen(const char *v)
{
    const char *colon = strrchr(v, ':');
    char *end;
    long port;

    if (colon == NULL || colon == v || colon[1] == '\0')
        return false;
    errno = 0;
    port = strtol(colon + 1, &end, 10);
    return errno == 0 && *end == '\0' && isdigit((unsigned char)colon[1]) && port >= 0 && port <= 65535;
}

static bool check_log_level(const char *v)
{
    enum log_level l;

    return log_level_parse(v, &l) == 0;
}

static bool check_store(const char *v)
{
    static const char *const schemes[] = {"sqlite:", "postgres://", "postgresql://"};

    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
        size_t n = strlen(schemes[i]);
        if (strncmp(v, schemes[i], n) == 0 && v[n] != '\0')
            return true;
    }
    return false;
}

static bool check_metrics_auth(const char *v) { return strcmp(v, "token") == 0 || strcmp(v, "none") == 0; }

/* Empty, or http(s)://HOST[:PORT][/PATH] of visible ASCII: it is printed in links that customers open. */
static bool check_portal_url(const char *v)
{
    size_t scheme = strncmp(v, "https://", 8) == 0 ? 8 : strncmp(v, "http://", 7) == 0 ? 7 : 0;

    if (v[0] == '\0')
        return true;
    if (scheme == 0 || v[scheme] == '\0' || v[scheme] == '/' || v[scheme] == ':')
        return false;
    for (const unsigned char *p = (const unsigned char *)v; *p; p++)
        if (*p <= ' ' || *p >= 0x7f || strchr("?#\"<>\\^`{|}", *p))
            return false;
    return true;
}

static bool check_admin_token(const char *v) { return v[0] == '\0' || strlen(v) >= ADMIN_TOKEN_MIN; }

static bool check_secret_key(const char *v)
{
    struct secret_key k;
    bool ok = v[0] == '\0' || secret_key_parse(v, &k) == 0;

    secret_key_wipe(&k);
    return ok;
}

struct word_value {
    const char *word;
    bool value;
};

static const struct word_value bool_words[] = {
    {"true", true}, {"yes", true}, {"on", true}, {"1", true},
    {"false", false}, {"no", false}, {"off", false}, {"0", false},
};

/* Parses a non-negative integer with an optional unit suffix: sizes ("1MiB") and counts. */
struct size_unit {
    const char *suffix;
    int64_t mult;
};

static const struct size_unit size_units[] = {
    {"", 1}, {"B", 1}, {"KiB", INT64_C(1) << 10}, {"MiB", INT64_C(1) << 20}, {"GiB", INT64_C(1) << 30},
};

static int parse_scaled(const char *v, const struct size_unit *units, size_t n_units, int64_t *out)
{
    char *end;
    long long n;

    if (!isdigit((unsigned char)v[0]))
        return HOOKD_EINVAL;
    errno = 0;
    n = strtoll(v, &end, 10);
    if (errno != 0)
        return HOOKD_EINVAL;
    for (size_t i = 0; i < n_units; i++) {
        if (strcasecmp(end, units[i].suffix) == 0) {
            if (n > INT64_MAX / units[i].mult)
                return HOOKD_EINVAL;
            *out = (int64_t)n * units[i].mult;
            return 0;
        }
    }
    return HOOKD_EINVAL;
}

/* "0.2" or "20%", within [0, 1]. */
static int parse_fraction(const char *v, double *out)
{
    char *end;
    double d;

    if (!isdigit((unsigned char)v[0]) && v[0] != '.')
        return HOOKD_EINVAL;
    errno = 0;
    d = strtod(v, &end);
    if (errno != 0 || end == v)
        return HOOKD_EINVAL;
    if (*end == '%') {
        d /= 100.0;
        end++;
    }
    if (*end != '\0' || !isfinite(d) || d < 0.0 || d > 1.0)
        return HOOKD_EINVAL;
    *out = d;
    return 0;
}

/*
 * Parses value into the field of k. On failure writes the problem (without the
 * key name) to problem; a secret key's value is never copied there.
 */
static int conf_apply(struct config *c, const struct conf_key *k, const char *value, char *problem, size_t plen)
{
    char *field = (char *)c + k->offset;
    const char *shown = k->secret ? "(hidden)" : value;
    int64_t n = 0;
    double frac;
    int rc = 0;

    switch (k->type) {
    case CONF_STRING:
        if (strlen(value) >= k->size) {
            snprintf(problem, plen, "too long (at most %zu characters)", k->size - 1);
            return HOOKD_EINVAL;
        }
        if (k->check != NULL && !k->check(value)) {
            if (k->secret)
                snprintf(problem, plen, "invalid %s", k->what);
            else
                snprintf(problem, plen, "invalid %s '%.80s'", k->what, shown);
            return HOOKD_EINVAL;
        }
        memcpy(field, value, strlen(value) + 1);
        return 0;
    case CONF_DURATION_LIST: {
        struct retry_policy *p = (struct retry_policy *)(void *)field;
        int64_t list[RETRY_MAX_SCHEDULE];
        size_t count = 0;
        if (duration_list_parse(value, list, RETRY_MAX_SCHEDULE, &count) != 0) {
            snprintf(problem, plen, "invalid duration list '%.80s' (e.g. 10s,30s,2m; at most %d items)", shown,
                     RETRY_MAX_SCHEDULE);
            return HOOKD_EINVAL;
        }
        for (size_t i = 0; i < count; i++) {
            if (list[i] > k->max) {
                snprintf(problem, plen, "duration '%.80s' is too long", shown);
                return HOOKD_EINVAL;
            }
        }
        memcpy(p->schedule_ms, list, count * sizeof list[0]);
        p->n_schedule = count;
        return 0;
    }
    case CONF_BOOL:
        for (size_t i = 0; i < sizeof bool_words / sizeof bool_words[0]; i++) {
            if (strcasecmp(value, bool_words[i].word) == 0) {
                *(bool *)(void *)field = bool_words[i].value;
                return 0;
            }
        }
        snprintf(problem, plen, "invalid boolean '%.80s' (true/false, yes/no, on/off, 1/0)", shown);
        return HOOKD_EINVAL;
    case CONF_FRACTION:
        if (parse_fraction(value, &frac) != 0) {
            snprintf(problem, plen, "invalid fraction '%.80s' (0..1, or 0%%..100%%)", shown);
            return HOOKD_EINVAL;
        }
        *(double *)(void *)field = frac;
        return 0;
    case CONF_DURATION:
        rc = duration_parse(value, &n);
        if (rc != 0)
            snprintf(problem, plen, "invalid duration '%.80s'", shown);
        break;
    case CONF_INT:
        rc = parse_scaled(value, size_units, 1, &n);
        if (rc != 0)
            snprintf(problem, plen, "invalid integer '%.80s'", shown);
        break;
    case CONF_SIZE:
        rc = parse_scaled(value, size_units, sizeof size_units / sizeof size_units[0], &n);
        if (rc != 0)
            snprintf(problem, plen, "invalid size '%.80s' (e.g. 4096, 512KiB, 1MiB)", shown);
        break;
    }
    if (rc != 0)
        return rc;
    if (n < k->min || n > k->max) {
        char lo[24], hi[24];
        if (k->type == CONF_DURATION) {
            duration_format(k->min, lo);
            duration_format(k->max, hi);
        } else {
            snprintf(lo, sizeof lo, "%lld", (long long)k->min);
            snprintf(hi, sizeof hi, "%lld", (long long)k->max);
        }
        snprintf(problem, plen, "'%.80s' out of range (%s..%s)", shown, lo, hi);
        return HOOKD_EINVAL;
    }
    if (k->type == CONF_INT)
        *(int *)(void *)field = (int)n;
    else
        *(int64_t *)(void *)field = n;
    return 0;
}

static const struct conf_key *conf_find(const char *section, const char *name)
{
    for (size_t i = 0; i < N_KEYS; i++) {
        if (strcasecmp(conf_keys[i].section, section) == 0 && strcasecmp(conf_keys[i].name, name) == 0)
            return &conf_keys[i];
    }
    return NULL;
}

static bool conf_section_known(const char *section)
{
    for (size_t i = 0; i < N_KEYS; i++) {
        if (strcasecmp(conf_keys[i].section, section) == 0)
            return true;
    }
    return false;
}

/* Writes "section.key: problem" (or the unknown-key text) to out. */
static int conf_set_problem(struct config *c, const char *section, const char *key, const char *value, char *out,
                            size_t outlen)
{
    const struct conf_key *k = conf_find(section, key);
    char problem[200];

    if (k == NULL) {
        if (!conf_section_known(section))
            snprintf(out, outlen, "unknown section [%.64s] (key '%.64s')", section, key);
        else
            snprintf(out, outlen, "%.64s.%.64s: unknown key", section, key);
        return HOOKD_EINVAL;
    }
    if (conf_apply(c, k, value, problem, sizeof problem) != 0) {
        snprintf(out, outlen, "%s.%s: %s", k->section, k->name, problem);
        return HOOKD_EINVAL;
    }
    return 0;
}

void config_defaults(struct config *c)
{
    char problem[200];

    memset(c, 0, sizeof *c);
    retry_policy_default(&c->retry);
    retry_policy_default(&c->inbox_retry);
    for (size_t i = 0; i < N_KEYS; i++) {
        if (conf_keys[i].def != NULL && conf_apply(c, &conf_keys[i], conf_keys[i].def, problem, sizeof problem) != 0) {
            fprintf(stderr, "hookd: bad built-in default for %s.%s: %s\n", conf_keys[i].section, conf_keys[i].name,
                    problem);
            abort();
        }
    }
}

int config_set(struct config *c, const char *section, const char *key, const char *value, char *err, size_t errlen)
{
    char scratch[1];

    if (section == NULL || key == NULL || value == NULL)
        return HOOKD_EINVAL;
    if (err == NULL || errlen == 0) {
        err = scratch;
        errlen = sizeof scratch;
    }
    return conf_set_problem(c, section, key, value, err, errlen);
}

/* Parse state of one INI file; the reader counts lines so errors can name them. */
struct ini_state {
    struct config *c;
    FILE *f;
    int line;           /* lines read so far */
    bool line_indented; /* the current line starts with a blank */
    char last_name[64]; /* key of the previous handler call */
    int err_line;       /* 0 until the first error */
    char problem[400];
};

static char *ini_read_line(char *str, int num, void *stream)
{
    struct ini_state *st = stream;
    size_t n;
    int next;

    if (st->err_line != 0 || fgets(str, num, st->f) == NULL)
        return NULL;
    st->line++;
    n = strlen(str);
    if (n > 0 && str[n - 1] != '\n' && (next = getc(st->f)) != EOF && next != '\n') {
        /* inih would silently cut the line and read its rest as a new one. */
        st->err_line = st->line;
        snprintf(st->problem, sizeof st->problem, "line too long (at most %d characters)", num - 2);
        return NULL;
    }
    st->line_indented = str[0] == ' ' || str[0] == '\t';
    return str;
}

static int ini_on_value(void *user, const char *section, const char *name, const char *value)
{
    struct ini_state *st = user;

    if (st->err_line != 0)
        return 1; /* only the first error is reported */
    if (st->line_indented && strcmp(name, st->last_name) == 0) {
        snprintf(st->problem, sizeof st->problem, "%.64s.%.64s: continuation lines are not supported", section, name);
        st->err_line = st->line;
    } else if (conf_set_problem(st->c, section, name, value, st->problem, sizeof st->problem) != 0) {
        st->err_line = st->line;
    }
    snprintf(st->last_name, sizeof st->last_name, "%s", name);
    return st->err_line == 0;
}

static int config_load_file(struct config *c, const char *path, char *err, size_t errlen)
{
    struct ini_state st = {.c = c};
    int r;

    st.f = fopen(path, "r");
    if (st.f == NULL) {
        snprintf(err, errlen, "%s: cannot open: %m", path);
        return HOOKD_EINVAL;
    }
    r = ini_parse_stream(ini_read_line, &st, ini_on_value, &st);
    fclose(st.f);
    if (r == -2) {
        snprintf(err, errlen, "%s: out of memory", path);
        return HOOKD_ENOMEM;
    }
    if (r > 0 && (st.err_line == 0 || r < st.err_line)) {
        snprintf(err, errlen, "%s:%d: syntax error (expected [section] or key = value)", path, r);
        return HOOKD_EINVAL;
    }
    if (st.err_line != 0) {
        snprintf(err, errlen, "%s:%d: %s", path, st.err_line, st.problem);
        return HOOKD_EINVAL;
    }
    return 0;
}

/* HOOKD_<SECTION>_<KEY>, upper case. */
static void env_name(const struct conf_key *k, char *out, size_t outlen)
{
    snprintf(out, outlen, "HOOKD_%s_%s", k->section, k->name);
    for (char *p = out; *p != '\0'; p++)
        *p = (char)toupper((unsigned char)*p);
}

static int config_load_env(struct config *c, char *err, size_t errlen)
{
    char name[96], problem[200];

    for (size_t i = 0; i < N_KEYS; i++) {
        const char *value;
        env_name(&conf_keys[i], name, sizeof name);
        value = getenv(name);
        if (value == NULL)
            continue;
        if (conf_apply(c, &conf_keys[i], value, problem, sizeof problem) != 0) {
            snprintf(err, errlen, "%s: %s", name, problem);
            return HOOKD_EINVAL;
        }
    }
    return 0;
}

int config_load(struct config *c, const char *path, char *err, size_t errlen)
{
    char scratch[1];
    int rc = 0;

    if (err == NULL || errlen == 0) {
        err = scratch;
        errlen = sizeof scratch;
    }
    err[0] = '\0';
    config_defaults(c);
    if (path != NULL)
        rc = config_load_file(c, path, err, errlen);
    if (rc == 0)
        rc = config_load_env(c, err, errlen);
    return rc;
}
