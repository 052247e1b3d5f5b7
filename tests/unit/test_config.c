/* Unit tests of daemon settings: defaults, INI file, HOOKD_* environment, and error text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "hookd.h"
#include "ops/portal_link.h"

/* Writes text to a fresh temporary file; path receives its name. */
static void write_conf(char path[64], const char *text)
{
    int fd;
    FILE *f;

    snprintf(path, 64, "/tmp/hookd-test-conf-XXXXXX");
    fd = mkstemp(path);
    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

/* Loads text as a config file; returns config_load's result, err holds its text. */
static int load_text(struct config *c, const char *text, char *err, size_t errlen)
{
    char path[64];
    int rc;

    write_conf(path, text);
    rc = config_load(c, path, err, errlen);
    unlink(path);
    return rc;
}

static void test_defaults(void **state)
{
    struct config c;
    char err[256];

    assert_int_equal(config_load(&c, NULL, err, sizeof err), 0);
    assert_string_equal(c.store, "sqlite:hookd.db");
    assert_string_equal(c.public_listen, "127.0.0.1:8080");
    assert_string_equal(c.admin_listen, "127.0.0.1:8081");
    assert_string_equal(c.admin_token, "");
    assert_string_equal(c.node_id, "");
    assert_string_equal(c.log_level, "info");
    assert_true(c.timeout_ms == 10000);
    assert_true(c.connect_timeout_ms == 5000);
    assert_int_equal(c.retry.n_schedule, 9);
    assert_true(c.retry.schedule_ms[0] == 10000 && c.retry.schedule_ms[8] == 28800000);
    assert_true(c.retry.window_ms == 86400000);
    assert_true(c.retry.jitter == 0.2);
    assert_true(c.retry.retry_after_max_ms == 3600000);
    assert_int_equal(c.max_in_flight, 256);
    assert_int_equal(c.endpoint_max_in_flight, 32);
    assert_false(c.allow_private_networks);
    assert_true(c.response_max == 4096);
    assert_true(c.lease_ms == 60000);
    assert_true(c.rotate_grace_ms == 86400000);
    assert_int_equal(c.window, 4096);
    assert_int_equal(c.breaker_failures, 5);
    assert_true(c.breaker_probe_ms == 10000);
    assert_true(c.breaker_probe_max_ms == 600000);
    assert_true(c.breaker_ramp_ms == 30000);
    assert_true(c.disable_after_ms == 5 * 86400000LL);
    assert_int_equal(c.inbox_retry.n_schedule, 3);
    assert_true(c.inbox_retry.schedule_ms[0] == 60000 && c.inbox_retry.schedule_ms[1] == 300000 &&
                c.inbox_retry.schedule_ms[2] == 900000);
    assert_true(c.max_defer_ms == 3600000);
    assert_true(c.max_body == 1048576);
    assert_int_equal(c.workers, 32);
    assert_int_equal(c.http_threads, 2);
    assert_int_equal(c.max_connections, 10240);
    assert_int_equal(c.max_connections_per_ip, 1024);
    assert_true(c.header_timeout_ms == 10000);
    assert_true(c.idle_timeout_ms == 60000);
    assert_true(c.connection_memory == 131072);
    assert_true(c.write_timeout_ms == 5000);
    assert_true(c.drain_timeout_ms == 10000);
}

static void test_file(void **state)
{
    struct config c;
    char err[256] = "";
    int rc = load_text(&c,
                       "; hookd test config\n"
                       "[server]\n"
                       "store = sqlite:/tmp/x.db\n"
                       "admin_token = s3cret-0123456789abcdef0123456789\n"
                       "log_level = debug\n"
                       "http_threads = 4\n"
                       "max_connections = 20000\n"
                       "max_connections_per_ip = 64\n"
                       "header_timeout = 2s\n"
                       "idle_timeout = 30s\n"
                       "connection_memory = 64KiB\n"
                       "write_timeout = 2s\n"
                       "drain_timeout = 30s\n"
                       "public_listen = [::1]:0\n"
                       "\n"
                       "# delivery\n"
                       "[delivery]\n"
                       "timeout = 2s\n"
                       "retry_schedule = 100ms, 200ms ,1s\n"
                       "retry_window = 1h\n"
                       "jitter = 10%\n"
                       "allow_private_networks = yes\n"
                       "max_in_flight = 8\n"
                       "response_max = 512KiB\n"
                       "retry_after_max = 30s\n"
                       "[inbox]\n"
                       "retry_schedule = 1s\n"
                       "max_body = 2MiB\n"
                       "workers = 4\n",
                       err, sizeof err);

    assert_int_equal(rc, 0);
    assert_string_equal(err, "");
    assert_string_equal(c.store, "sqlite:/tmp/x.db");
    assert_string_equal(c.admin_token, "s3cret-0123456789abcdef0123456789");
    assert_string_equal(c.log_level, "debug");
    assert_string_equal(c.public_listen, "[::1]:0");
    assert_true(c.timeout_ms == 2000);
    assert_int_equal(c.retry.n_schedule, 3);
    assert_true(c.retry.schedule_ms[0] == 100 && c.retry.schedule_ms[1] == 200 && c.retry.schedule_ms[2] == 1000);
    assert_true(c.retry.window_ms == 3600000);
    assert_true(c.retry.jitter == 0.1);
    assert_true(c.retry.retry_after_max_ms == 30000);
    assert_true(c.allow_private_networks);
    assert_int_equal(c.max_in_flight, 8);
    assert_true(c.response_max == 524288);
    assert_int_equal(c.inbox_retry.n_schedule, 1);
    assert_true(c.max_body == 2097152);
    assert_int_equal(c.workers, 4);
    assert_int_equal(c.http_threads, 4);
    assert_int_equal(c.max_connections, 20000);
    assert_int_equal(c.max_connections_per_ip, 64);
    assert_true(c.header_timeout_ms == 2000);
    assert_true(c.idle_timeout_ms == 30000);
    assert_true(c.connection_memory == 65536);
    assert_true(c.write_timeout_ms == 2000);
    assert_true(c.drain_timeout_ms == 30000);
    /* Untouched keys keep their defaults. */
    assert_true(c.connect_timeout_ms == 5000);
    assert_string_equal(c.admin_listen, "127.0.0.1:8081");
}

static void test_env_overrides_file(void **state)
{
    struct config c;
    char err[256];

    assert_int_equal(setenv("HOOKD_DELIVERY_RETRY_SCHEDULE", "100ms,200ms", 1), 0);
    assert_int_equal(setenv("HOOKD_SERVER_STORE", "postgres://localhost/hookd", 1), 0);
    assert_int_equal(setenv("HOOKD_DELIVERY_JITTER", "0", 1), 0);
    assert_int_equal(setenv("HOOKD_INBOX_WORKERS", "7", 1), 0);
    assert_int_equal(setenv("HOOKD_DELIVERY_ALLOW_PRIVATE_NETWORKS", "on", 1), 0);
    assert_int_equal(
        load_text(&c, "[delivery]\nretry_schedule = 5s\ntimeout = 3s\n[inbox]\nworkers = 3\n", err, sizeof err), 0);
    assert_int_equal(c.retry.n_schedule, 2);
    assert_true(c.retry.schedule_ms[0] == 100 && c.retry.schedule_ms[1] == 200);
    assert_string_equal(c.store, "postgres://localhost/hookd");
    assert_true(c.retry.jitter == 0.0);
    assert_int_equal(c.workers, 7);
    assert_true(c.allow_private_networks);
    assert_true(c.timeout_ms == 3000); /* from the file, no env override */
    unsetenv("HOOKD_DELIVERY_RETRY_SCHEDULE");
    unsetenv("HOOKD_SERVER_STORE");
    unsetenv("HOOKD_DELIVERY_JITTER");
    unsetenv("HOOKD_INBOX_WORKERS");
    unsetenv("HOOKD_DELIVERY_ALLOW_PRIVATE_NETWORKS");

    /* Without a file, the environment alone. */
    assert_int_equal(setenv("HOOKD_DELIVERY_TIMEOUT", "250ms", 1), 0);
    assert_int_equal(config_load(&c, NULL, err, sizeof err), 0);
    assert_true(c.timeout_ms == 250);
    assert_int_equal(setenv("HOOKD_DELIVERY_TIMEOUT", "abc", 1), 0);
    assert_int_equal(config_load(&c, NULL, err, sizeof err), HOOKD_EINVAL);
    assert_string_equal(err, "HOOKD_DELIVERY_TIMEOUT: invalid duration 'abc'");
    unsetenv("HOOKD_DELIVERY_TIMEOUT");
}

static void test_file_errors(void **state)
{
    static const struct {
        const char *text;
        const char *want; /* err after the "path:" prefix */
    } cases[] = {
        {"[delivery]\ntimeout = abc\n", ":2: delivery.timeout: invalid duration 'abc'"},
        {"[delivery]\n\ntimeout = 5s\nbogus = 1\n", ":4: delivery.bogus: unknown key"},
        {"[nowhere]\nkey = 1\n", ":2: unknown section [nowhere] (key 'key')"},
        {"top = 1\n", ":1: unknown section [] (key 'top')"},
        {"[server]\nthis line has no equals\n", ":2: syntax error (expected [section] or key = value)"},
        {"[delivery]\njitter = 1.5\n", ":2: delivery.jitter: invalid fraction '1.5' (0..1, or 0%..100%)"},
        {"[delivery]\njitter = 120%\n", ":2: delivery.jitter: invalid fraction '120%' (0..1, or 0%..100%)"},
        {"[delivery]\nallow_private_networks = maybe\n",
         ":2: delivery.allow_private_networks: invalid boolean 'maybe' (true/false, yes/no, on/off, 1/0)"},
        {"[delivery]\nmax_in_flight = 0\n", ":2: delivery.max_in_flight: '0' out of range (1..1000000)"},
        {"[delivery]\nmax_in_flight = 12x\n", ":2: delivery.max_in_flight: invalid integer '12x'"},
        {"[delivery]\nmax_in_flight = -4\n", ":2: delivery.max_in_flight: invalid integer '-4'"},
        {"[delivery]\ntimeout = 0\n", ":2: delivery.timeout: '0' out of range (1ms..1d)"},
        {"[delivery]\nretry_schedule = 10s,,1m\n",
         ":2: delivery.retry_schedule: invalid duration list '10s,,1m' (e.g. 10s,30s,2m; at most 32 items)"},
        {"[inbox]\nmax_body = 1MB\n", ":2: inbox.max_body: invalid size '1MB' (e.g. 4096, 512KiB, 1MiB)"},
        {"[server]\nhttp_threads = 0\n", ":2: server.http_threads: '0' out of range (1..64)"},
        {"[server]\nheader_timeout = 10ms\n", ":2: server.header_timeout: '10ms' out of range (100ms..1h)"},
        {"[server]\nwrite_timeout = 10ms\n", ":2: server.write_timeout: '10ms' out of range (100ms..1h)"},
        {"[server]\ndrain_timeout = 2h\n", ":2: server.drain_timeout: '2h' out of range (0s..1h)"},
        {"[server]\nconnection_memory = 1KiB\n",
         ":2: server.connection_memory: '1KiB' out of range (16384..16777216)"},
        {"[server]\nlog_level = loud\n", ":2: server.log_level: invalid log level (debug, info, warn, error) 'loud'"},
        {"[server]\nadmin_listen = localhost\n",
         ":2: server.admin_listen: invalid listen address (host:port) 'localhost'"},
        {"[server]\nadmin_listen = 127.0.0.1:70000\n",
         ":2: server.admin_listen: invalid listen address (host:port) '127.0.0.1:70000'"},
        {"[delivery]\nretry_window = 1h\n  2h\n", ":3: delivery.retry_window: continuation lines are not supported"},
        /* The first error is reported, not a later one. */
        {"[delivery]\ntimeout = x\nlease = y\n", ":2: delivery.timeout: invalid duration 'x'"},
        {"[delivery]\nnot a pair\ntimeout = x\n", ":2: syntax error (expected [section] or key = value)"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct config c;
        char path[64], err[512], want[600];
        write_conf(path, cases[i].text);
        assert_int_equal(config_load(&c, path, err, sizeof err), HOOKD_EINVAL);
        snprintf(want, sizeof want, "%s%s", path, cases[i].want);
        assert_string_equal(err, want);
        unlink(path);
    }
}

static void test_secrets_not_echoed(void **state)
{
    struct config c;
    char err[512], text[600], token[300];

    /* An admin_token too long for its field is refused without quoting it. */
    memset(token, 'T', 299);
    token[299] = '\0';
    memcpy(token, "tok-", 4);
    assert_int_equal(config_set(&c, "server", "admin_token", token, err, sizeof err), HOOKD_EINVAL);
    assert_null(strstr(err, "tok-"));
    assert_non_null(strstr(err, "server.admin_token"));
    /* A store URL may carry a password: refused without quoting it either. */
    config_defaults(&c);
    assert_int_equal(config_set(&c, "server", "store", "mysql://user:pw-XYZ@host/db", err, sizeof err),
                     HOOKD_EINVAL);
    assert_null(strstr(err, "pw-XYZ"));
    assert_non_null(strstr(err, "server.store"));
    /* An admin token shorter than 32 characters is refused, saying why, without quoting it. */
    config_defaults(&c);
    assert_int_equal(config_set(&c, "server", "admin_token", "tok-0123456789abcdef0123456789a", err, sizeof err),
                     HOOKD_EINVAL);
    assert_null(strstr(err, "tok-"));
    assert_non_null(strstr(err, "at least 32 characters"));
    assert_int_equal(config_set(&c, "server", "admin_token", "tok-0123456789abcdef0123456789ab", err, sizeof err), 0);
    /* The secret key: base64 or hex of 32 bytes, else refused without quoting it. */
    assert_int_equal(config_set(&c, "server", "secret_key", "00112233445566778899aabbccddeeff0011223344556677",
                                err, sizeof err),
                     HOOKD_EINVAL);
    assert_null(strstr(err, "0011223344"));
    assert_non_null(strstr(err, "32 bytes"));
    assert_int_equal(config_set(&c, "server", "secret_key",
                                "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", err, sizeof err),
                     0);
    assert_int_equal(config_set(&c, "server", "secret_key", "ABEiM0RVZneImaq7zN3u/wARIjNEVWZ3iJmqu8zd7v8=", err,
                                sizeof err),
                     0);
    /* A syntax error on the token's line does not quote the line. */
    snprintf(text, sizeof text, "[server]\nadmin_token tok-abc\n");
    assert_int_equal(load_text(&c, text, err, sizeof err), HOOKD_EINVAL);
    assert_null(strstr(err, "tok-abc"));
}

static void test_config_set_and_limits(void **state)
{
    struct config c;
    char err[256], text[400];
    char path[64];

    config_defaults(&c);
    assert_int_equal(config_set(&c, "delivery", "timeout", "1m", err, sizeof err), 0);
    assert_true(c.timeout_ms == 60000);
    assert_int_equal(config_set(&c, "DELIVERY", "Timeout", "2m", err, sizeof err), 0); /* names ignore case */
    assert_true(c.timeout_ms == 120000);
    assert_int_equal(config_set(&c, "delivery", "jitter", "0.35", err, sizeof err), 0);
    assert_true(c.retry.jitter == 0.35);
    assert_int_equal(config_set(&c, "delivery", "timeout", "abc", err, sizeof err), HOOKD_EINVAL);
    assert_string_equal(err, "delivery.timeout: invalid duration 'abc'");
    assert_true(c.timeout_ms == 120000); /* a refused value changes nothing */
    assert_int_equal(config_set(&c, "delivery", "nope", "1", err, sizeof err), HOOKD_EINVAL);
    assert_string_equal(err, "delivery.nope: unknown key");
    assert_int_equal(config_set(&c, "delivery", "timeout", "1s", NULL, 0), 0);

    static const char *const bools[][2] = {{"true", "1"}, {"YES", "1"}, {"on", "1"}, {"1", "1"},
                                           {"false", "0"}, {"No", "0"}, {"off", "0"}, {"0", "0"}};
    for (size_t i = 0; i < sizeof bools / sizeof bools[0]; i++) {
        assert_int_equal(config_set(&c, "delivery", "allow_private_networks", bools[i][0], err, sizeof err), 0);
        assert_int_equal(c.allow_private_networks, bools[i][1][0] == '1');
    }
    /* The breaker and auto-disable; 0 turns either off, and a probe interval must be positive. */
    assert_int_equal(config_set(&c, "delivery", "breaker_failures", "0", err, sizeof err), 0);
    assert_int_equal(c.breaker_failures, 0);
    assert_int_equal(config_set(&c, "delivery", "breaker_failures", "-1", err, sizeof err), HOOKD_EINVAL);
    assert_int_equal(config_set(&c, "delivery", "breaker_probe", "250ms", err, sizeof err), 0);
    assert_true(c.breaker_probe_ms == 250);
    assert_int_equal(config_set(&c, "delivery", "breaker_probe", "0s", err, sizeof err), HOOKD_EINVAL);
    assert_int_equal(config_set(&c, "delivery", "breaker_probe_max", "1h", err, sizeof err), 0);
    assert_true(c.breaker_probe_max_ms == 3600000);
    assert_int_equal(config_set(&c, "delivery", "breaker_ramp", "0s", err, sizeof err), 0);
    assert_true(c.breaker_ramp_ms == 0);
    assert_int_equal(config_set(&c, "delivery", "disable_after", "36h", err, sizeof err), 0);
    assert_true(c.disable_after_ms == 36 * 3600000LL);
    assert_int_equal(config_set(&c, "delivery", "disable_after", "0s", err, sizeof err), 0);
    assert_true(c.disable_after_ms == 0);
    assert_int_equal(config_set(&c, "delivery", "disable_after", "soon", err, sizeof err), HOOKD_EINVAL);
    /* Size units. */
    assert_int_equal(config_set(&c, "inbox", "max_body", "4096", err, sizeof err), 0);
    assert_true(c.max_body == 4096);
    assert_int_equal(config_set(&c, "inbox", "max_body", "512KiB", err, sizeof err), 0);
    assert_true(c.max_body == 524288);
    assert_int_equal(config_set(&c, "inbox", "max_body", "2GiB", err, sizeof err), HOOKD_EINVAL);
    /* 33 schedule entries exceed RETRY_MAX_SCHEDULE. */
    for (size_t i = 0, off = 0; i < 33; i++)
        off += (size_t)snprintf(text + off, sizeof text - off, "%s", i == 0 ? "1s" : ",1s");
    assert_int_equal(config_set(&c, "delivery", "retry_schedule", text, err, sizeof err), HOOKD_EINVAL);
    text[strlen(text) - 3] = '\0';
    assert_int_equal(config_set(&c, "delivery", "retry_schedule", text, err, sizeof err), 0);
    assert_int_equal(c.retry.n_schedule, 32);

    /* A line longer than inih's buffer is an error, not a silent cut. */
    snprintf(text, sizeof text, "[server]\nnode_id = %0300d\n", 7);
    write_conf(path, text);
    assert_int_equal(config_load(&c, path, err, sizeof err), HOOKD_EINVAL);
    assert_non_null(strstr(err, ":2: line too long"));
    unlink(path);
    assert_int_equal(config_load(&c, "/nonexistent/hookd.conf", err, sizeof err), HOOKD_EINVAL);
    assert_string_equal(err, "/nonexistent/hookd.conf: cannot open: No such file or directory");
}

/* The portal's link: the configured base (trailing slashes dropped), else the admin listener's
 * address, a wildcard host becoming this machine's name; a link that does not fit is refused. */
static void test_portal_link(void **state)
{
    struct config c;
    char link[PORTAL_LINK_MAX], want[PORTAL_LINK_MAX], host[256] = "";
    char err[256];

    (void)state;
    config_defaults(&c);
    assert_true(portal_link(&c, "hkat_x", link, sizeof link));
    assert_string_equal(link, "http://127.0.0.1:8081/portal/#token=hkat_x");
    snprintf(c.admin_listen, sizeof c.admin_listen, "[::1]:9000");
    assert_true(portal_link(&c, "hkat_x", link, sizeof link));
    assert_string_equal(link, "http://[::1]:9000/portal/#token=hkat_x");
    assert_int_equal(gethostname(host, sizeof host - 1), 0);
    for (size_t i = 0; i < 3; i++) {
        static const char *const wild[] = {"0.0.0.0:8081", "[::]:8081", ":8081"};
        snprintf(c.admin_listen, sizeof c.admin_listen, "%s", wild[i]);
        assert_true(portal_link(&c, "hkat_x", link, sizeof link));
        snprintf(want, sizeof want, "http://%s:8081/portal/#token=hkat_x", host);
        assert_string_equal(link, want);
    }
    assert_int_equal(load_text(&c, "[server]\nportal_url = https://status.example.com/hooks//\n", err, sizeof err), 0);
    assert_true(portal_link(&c, "hkat_y", link, sizeof link));
    assert_string_equal(link, "https://status.example.com/hooks/portal/#token=hkat_y");
    assert_false(portal_link(&c, "hkat_y", link, 20));
    for (size_t i = 0; i < 5; i++) {
        static const char *const bad[] = {"ftp://x", "https://", "https://x/?q", "https://x/ y", "https://x/<"};
        char text[128];
        snprintf(text, sizeof text, "[server]\nportal_url = %s\n", bad[i]);
        assert_int_equal(load_text(&c, text, err, sizeof err), HOOKD_EINVAL);
        assert_non_null(strstr(err, "portal_url"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),         cmocka_unit_test(test_file),
        cmocka_unit_test(test_env_overrides_file), cmocka_unit_test(test_file_errors),
        cmocka_unit_test(test_secrets_not_echoed), cmocka_unit_test(test_config_set_and_limits),
        cmocka_unit_test(test_portal_link),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
