/* `hookd serve`: start the writer, dispatcher, relay and listeners, wait for a stop signal, stop in reverse. */
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/ids.h"
#include "core/secret_box.h"
#include "hub.h"
#include "inbound/inbox_watch.h"
#include "inbound/processor.h"
#include "inbound/source_cache.h"
#include "ops/token_cache.h"
#include "log.h"
#include "net/http.h"
#include "ops/alerts.h"
#include "ops/api.h"
#include "ops/metrics.h"
#include "ops/retention.h"
#include "outbound/dispatcher.h"
#include "outbound/relay.h"
#include "secrets.h"
#include "store/pool.h"
#include "store/store.h"
#include "store/writer.h"

#define sqlite_path secrets_sqlite_path

static void node_name(const struct config *cfg, char *out, size_t n)
{
    char host[64] = "localhost";
    const char *port;

    if (cfg->node_id[0] != '\0') {
        snprintf(out, n, "%s", cfg->node_id);
        return;
    }
    (void)gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    port = strrchr(cfg->admin_listen, ':');
    snprintf(out, n, "%s:%s", host, port != NULL ? port + 1 : "0");
}

/* Writes the generated token beside the SQLite file, readable by its owner only, for the CLI. */
static void token_file_write(const char *dsn, const char *token)
{
    const char *path = sqlite_path(dsn);
    char file[1100];
    int fd;

    if (path == NULL || strcmp(path, ":memory:") == 0)
        return;
    snprintf(file, sizeof file, "%s.admin-token", path);
    fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        log_warn("serve", "cannot write %s: %s", file, strerror(errno));
        return;
    }
    if (fchmod(fd, 0600) != 0) /* a file left by an older version may be 0644 */
        log_warn("serve", "cannot make %s private: %s", file, strerror(errno));
    if (write(fd, token, strlen(token)) < 0 || write(fd, "\n", 1) < 0)
        log_warn("serve", "cannot write %s: %s", file, strerror(errno));
    close(fd);
}

/*
 * The SQLite file and its -wal and -shm are the owner's only: a new file is
 * created 0600 (SQLite gives -wal and -shm the main file's mode), and files
 * an older version left readable are narrowed.
 */
static int store_files_private(const char *dsn)
{
    static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
    const char *path = sqlite_path(dsn);
    char file[1100];
    int fd;

    if (path == NULL || strcmp(path, ":memory:") == 0)
        return 0;
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        log_error("serve", "cannot open %s: %s", path, strerror(errno));
        return HOOKD_EIO;
    }
    close(fd);
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        snprintf(file, sizeof file, "%s%s", path, suffixes[i]);
        if (chmod(file, 0600) != 0 && errno != ENOENT) {
            log_error("serve", "cannot make %s private (mode 0600): %s", file, strerror(errno));
            return HOOKD_EIO;
        }
    }
    return 0;
}

/*
 * Migrates the schema, settles the admin token (configured, else the one kept in
 * hookd_meta, else a new one) and frees the leases this node held before a crash.
 */
static int store_prepare(struct daemon *d)
{
    struct store *s = NULL;
    char *token = NULL;
    int r;

    r = store_files_private(d->cfg.store);
    if (r != 0)
        goto out;
    r = store_open(d->cfg.store, &s);
    if (r != 0) {
        log_error("serve", "cannot open store: %s", hookd_strerror(r));
        goto out;
    }
    r = store_migrate(s);
    if (r != 0) {
        log_error("serve", "schema migration failed: %s", hookd_strerror(r));
        goto out;
    }
    r = secrets_prepare(s, &d->cfg);
    if (r != 0)
        goto out;
    if (d->cfg.admin_token[0] != '\0') {
        snprintf(d->admin_token, sizeof d->admin_token, "%s", d->cfg.admin_token);
    } else {
        r = secrets_token_get(s, &token);
        if (r == HOOKD_ENOTFOUND) {
            unsigned char raw[24];
            char hex[49];
            random_bytes(raw, sizeof raw);
            for (size_t i = 0; i < sizeof raw; i++)
                snprintf(hex + 2 * i, 3, "%02x", raw[i]);
            snprintf(d->admin_token, sizeof d->admin_token, "hkd_%s", hex);
            explicit_bzero(raw, sizeof raw);
            explicit_bzero(hex, sizeof hex);
            r = secrets_token_set(s, d->admin_token);
        } else if (r == 0) {
            snprintf(d->admin_token, sizeof d->admin_token, "%s", token);
        }
        if (r != 0) {
            log_error("serve", "cannot settle the admin token: %s", hookd_strerror(r));
            goto out;
        }
        token_file_write(d->cfg.store, d->admin_token);
    }
    r = store_delivery_release_node(s, d->node);
    if (r == 0)
        r = store_inbox_release_node(s, d->node);
    if (r != 0)
        log_error("serve", "cannot release old leases of %s: %s", d->node, hookd_strerror(r));
out:
    secret_text_free(token);
    if (s != NULL)
        store_close(s);
    return r;
}

/* The dispatcher, then the relay that feeds it: each gets the parts and settings it uses, never the daemon. */
static int outbound_start(struct daemon *d)
{
    const struct config *cfg = &d->cfg;
    const struct dispatcher_deps dd = {
        .store = cfg->store,
        .node = d->node,
        .writer = d->writer,
        .claimer = d->claimer,
        .hub = d->hub,
        .retry = cfg->retry,
        .timeout_ms = cfg->timeout_ms,
        .connect_timeout_ms = cfg->connect_timeout_ms,
        .response_max = cfg->response_max,
        .lease_ms = cfg->lease_ms,
        .max_in_flight = cfg->max_in_flight,
        .endpoint_max_in_flight = cfg->endpoint_max_in_flight,
        .window = cfg->window,
        .allow_private_networks = cfg->allow_private_networks,
        .breaker = {.failures = cfg->breaker_failures, .probe_ms = cfg->breaker_probe_ms,
                    .probe_max_ms = cfg->breaker_probe_max_ms, .jitter = cfg->retry.jitter,
                    .disable_after_ms = cfg->disable_after_ms},
        .ramp_ms = cfg->breaker_ramp_ms,
        .drain_timeout_ms = cfg->drain_timeout_ms > 0 ? cfg->drain_timeout_ms : 1,
    };
    int r = dispatcher_start(&dd, &d->dispatcher);

    if (r != 0) {
        log_error("serve", "cannot start the dispatcher: %s", hookd_strerror(r));
        return r;
    }
    const struct relay_deps rd = {
        .store = cfg->store,
        .node = d->node,
        .lease_ms = cfg->lease_ms,
        .endpoint_max_in_flight = cfg->endpoint_max_in_flight,
        .ramp_ms = cfg->breaker_ramp_ms,
        .writer = d->writer,
        .dispatcher = d->dispatcher,
    };
    r = relay_start(&rd, &d->relay);
    if (r != 0)
        log_error("serve", "cannot start the relay: %s", hookd_strerror(r));
    return r;
}

/* The inbox workers: their own engine (the application is usually on a private address: [inbox]
 * allow_private_networks), claims beside the dispatcher's. */
static int inbound_start(struct daemon *d)
{
    const struct config *cfg = &d->cfg;
    const struct processor_deps pd = {
        .node = d->node,
        .claimer = d->claimer ? d->claimer : d->writer,
        .writer = d->writer,
        .deciders = d->deciders,
        .n_deciders = d->deciders[0] ? PROCESSOR_DECIDERS_MAX : 0,
        .sources = d->sources,
        .hub = d->hub,
        .workers = cfg->workers,
        .claim_gather_ms = d->claimer ? PROCESSOR_CLAIM_GATHER_MS : 0,
        .lease_ms = cfg->lease_ms,
        .timeout_ms = cfg->inbox_timeout_ms,
        .connect_timeout_ms = cfg->connect_timeout_ms,
        .allow_private_networks = cfg->inbox_allow_private_networks,
        .retry = cfg->inbox_retry,
        .max_defer_ms = cfg->max_defer_ms,
        .reconcile_after_ms = cfg->reconcile_after_ms,
    };
    int r = processor_start(&pd, &d->processor);

    if (r != 0)
        log_error("serve", "cannot start the inbox workers: %s", hookd_strerror(r));
    return r;
}

/* Upkeep: the alert evaluator and the retention purge, each a thread writing through the writer. */
static int upkeep_start(struct daemon *d)
{
    const struct config *cfg = &d->cfg;
    const struct alerts_deps ad = {
        .store = cfg->store,
        .writer = d->writer,
        .hub = d->hub,
        .interval_ms = cfg->alerts_interval_ms,
        .settings = {.window_ms = cfg->alerts_window_ms, .reopen_after_ms = cfg->alerts_reopen_after_ms,
                     .sync_warn_after_ms = cfg->sync_warn_after_ms, .backlog_growth = cfg->alerts_backlog_growth,
                     .error_rate = cfg->alerts_error_rate, .error_min_attempts = cfg->alerts_error_min_attempts,
                     .no_success_accounts = cfg->alerts_no_success_accounts, .dead_letters = cfg->alerts_dead_letters,
                     .quarantined = cfg->alerts_quarantined, .signature_rejections = cfg->alerts_signature_rejections},
    };
    const struct retention_deps rd = {
        .writer = d->writer,
        .deliveries_ms = cfg->retention_deliveries_ms,
        .inbox_ms = cfg->retention_inbox_ms,
        .interval_ms = cfg->retention_interval_ms,
        .batch = cfg->retention_batch,
        .pause_ms = cfg->retention_pause_ms,
        .share = cfg->retention_share,
    };
    int r = cfg->alerts_enabled ? alerts_start(&ad, &d->alerts) : 0;

    metrics_set_store_ttl(cfg->metrics_refresh_ms);

    if (r != 0) {
        log_error("serve", "cannot start the alert evaluator: %s", hookd_strerror(r));
        return r;
    }
    r = retention_start(&rd, &d->retention);
    if (r != 0)
        log_error("serve", "cannot start the retention purge: %s", hookd_strerror(r));
    return r;
}

static void on_outbox_changed(void *arg) { relay_wake(arg); }
static void on_endpoints_changed(void *arg) { dispatcher_endpoints_changed(arg); }
static void on_deliveries_due(void *arg) { dispatcher_wake(arg); }
static void on_sources_changed(void *arg) { source_cache_invalidate(arg); }

/* Before the listeners start: the hub's lists are fixed once anything can notify. */
static int hub_wire(struct daemon *d)
{
    int r = hub_subscribe(d->hub, HUB_OUTBOX_CHANGED, on_outbox_changed, d->relay);

    if (r == 0)
        r = hub_subscribe(d->hub, HUB_ENDPOINTS_CHANGED, on_endpoints_changed, d->dispatcher);
    if (r == 0)
        r = hub_subscribe(d->hub, HUB_DELIVERIES_DUE, on_deliveries_due, d->dispatcher);
    if (r == 0)
        r = hub_subscribe(d->hub, HUB_SOURCES_CHANGED, on_sources_changed, d->sources);
    if (r == 0)
        r = hub_subscribe(d->hub, HUB_INBOX_CHANGED, processor_wake, d->processor);
    return r;
}

/* Each connection is a descriptor: take the whole hard limit. */
static void nofile_raise(void)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            log_warn("serve", "cannot raise the open-file limit: %s", strerror(errno));
    }
}

/* The API gets the parts it uses, and the servers the limits; neither sees the daemon. */
static int listeners_start(struct daemon *d)
{
    struct api_ctx *api = calloc(1, sizeof *api);

    if (api == NULL)
        return HOOKD_ENOMEM;
    *api = (struct api_ctx){
        .cfg = &d->cfg, .writer = d->writer, .readers = d->readers, .hub = d->hub, .sources = d->sources,
        .tokens = d->tokens, .node = d->node, .admin_token = d->admin_token, .processor = d->processor,
        .started_at = d->started_at,
    };
    d->api = api;
    nofile_raise();
    struct http_server_options pub = {
        .listen = d->cfg.public_listen, .routes = public_routes, .n_routes = public_routes_n, .ctx = api,
        .max_body = (size_t)d->cfg.max_body, .threads = (unsigned)d->cfg.http_threads,
        .max_connections = (unsigned)d->cfg.max_connections,
        .max_connections_per_ip = (unsigned)d->cfg.max_connections_per_ip,
        .header_timeout_ms = d->cfg.header_timeout_ms, .idle_timeout_s = (unsigned)(d->cfg.idle_timeout_ms / 1000),
        .connection_memory = (size_t)d->cfg.connection_memory,
    };
    struct http_server_options adm = pub;
    adm.listen = d->cfg.admin_listen;
    adm.routes = admin_routes;
    adm.n_routes = admin_routes_n;
    adm.admin_token = d->admin_token;
    adm.token_check = api_token_check;
    adm.max_body = API_BODY_MAX;
    int r = http_server_start(&pub, &d->public_http);

    if (r != 0) {
        log_error("serve", "cannot listen on %s (public): %s", d->cfg.public_listen, hookd_strerror(r));
        return r;
    }
    r = http_server_start(&adm, &d->admin_http);
    if (r != 0)
        log_error("serve", "cannot listen on %s (admin): %s", d->cfg.admin_listen, hookd_strerror(r));
    return r;
}

static int op_release_node(struct store *s, void *arg) { return store_delivery_release_node(s, arg); }

/*
 * At stop, after the dispatcher: every lease this node still holds (work
 * handed over during the drain, attempts abandoned at drain_timeout) is given
 * back in one statement, queued behind the results recorded before it, so
 * other nodes take the work now instead of after the lease.
 */
static void leases_release(struct daemon *d)
{
    int r = writer_exec_bounded(d->writer, op_release_node, d->node);

    if (r != 0)
        log_warn("serve", "cannot release the leases of %s at stop: %s (they expire after the lease)", d->node,
                 hookd_strerror(r));
}

static void banner(const struct daemon *d)
{
    const char *path = sqlite_path(d->cfg.store);

    printf("hookd %s serving (node %s)\n", HOOKD_VERSION, d->node);
    printf("  store:  %s\n", path != NULL ? d->cfg.store : "postgres");
    printf("  public: http://%s (/healthz, /in/{source})\n", d->cfg.public_listen);
    printf("  admin:  http://%s (/v1/…)\n", d->cfg.admin_listen);
    if (d->cfg.admin_token[0] != '\0')
        printf("  admin token: from the configuration\n");
    else if (path != NULL)
        printf("  admin token: in %s.admin-token\n", path);
    fflush(stdout);
}

int daemon_run(const struct config *cfg)
{
    struct daemon *d = calloc(1, sizeof *d);
    struct writer_options wopt = {.max_batch = 1024};
    int64_t lock_wait;
    sigset_t stop;
    int sig = 0;
    int r;
    enum log_level lvl;

    if (d == NULL)
        return 1;
    /* Every file the daemon creates (store, key, token) is its owner's only. */
    umask(077);
    d->cfg = *cfg;
    if (log_level_parse(cfg->log_level, &lvl) == 0)
        log_set_level(lvl);
    node_name(cfg, d->node, sizeof d->node);
    d->started_at = clock_now_ms();
    /*
     * Tests only: a store call that fails or kills the process at an exact
     * point (store.h). Built into the tests' binary alone, so that a stray
     * variable can never make a production daemon fail or kill itself.
     */
#ifdef HOOKD_TEST_HOOKS
    if (store_fault_from_env(getenv("HOOKD_TEST_STORE_FAULT")) != 0) {
        log_error("serve", "HOOKD_TEST_STORE_FAULT must be METHOD:N or METHOD:N:kill");
        free(d);
        return 1;
    }
#else
    if (getenv("HOOKD_TEST_STORE_FAULT") != NULL)
        log_warn("serve", "HOOKD_TEST_STORE_FAULT is ignored: this build has no test hooks");
#endif
    /*
     * Writes are bounded: a batch that finds the store locked is tried again,
     * each try waiting at most lock_wait for the lock, so that ops waiting
     * past write_timeout are answered 503 store_busy within a fraction of it.
     */
    lock_wait = cfg->write_timeout_ms / 10;
    wopt.write_timeout_ms = cfg->write_timeout_ms;
    wopt.lock_wait_ms = lock_wait < 50 ? 50 : lock_wait > 500 ? 500 : lock_wait;
    wopt.application_share = cfg->application_share;

    /* Threads inherit this mask; only sigwait() below sees the stop signals. */
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);

    r = hub_create(&d->hub);
    if (r != 0)
        goto out;
    r = store_prepare(d);
    if (r != 0)
        goto out;
    r = writer_start(cfg->store, &wopt, &d->writer);
    if (r != 0) {
        log_error("serve", "cannot start the store writer: %s", hookd_strerror(r));
        goto out;
    }
    /* On a shared store claims get a connection of their own: they then run
     * beside the attempt results instead of taking turns with them. */
    if (!store_find(cfg->store)->single_node) {
        /*
         * Its commits need not wait for the disk: a claim acknowledges
         * nothing. A server crash that undoes one only means its deliveries
         * are claimed and sent again (same webhook-id), and the first attempt
         * result written durably after it makes it durable too.
         */
        struct writer_options copt = wopt;
        copt.lazy_commit = true;
        r = writer_start(cfg->store, &copt, &d->claimer);
        if (r != 0) {
            log_error("serve", "cannot start the claim writer: %s", hookd_strerror(r));
            goto out;
        }
        /* Their emitted events wake this node's relay through the hub, not by NOTIFY (store_quiet_outbox). */
        struct writer_options dopt = wopt;
        dopt.quiet_outbox = true;
        for (int i = 0; i < PROCESSOR_DECIDERS_MAX; i++) {
            r = writer_start(cfg->store, &dopt, &d->deciders[i]);
            if (r != 0) {
                log_error("serve", "cannot start the machine decisions' writers: %s", hookd_strerror(r));
                goto out;
            }
        }
    }
    r = store_pool_create(cfg->store, 8, &d->readers);
    if (r != 0)
        goto out;
    r = source_cache_create(d->readers, &d->sources);
    if (r != 0)
        goto out;
    r = token_cache_create(d->readers, &d->tokens);
    if (r != 0)
        goto out;
    r = outbound_start(d);
    if (r != 0)
        goto out;
    r = inbound_start(d);
    if (r != 0)
        goto out;
    r = hub_wire(d);
    if (r != 0)
        goto out;
    r = inbox_watch_start(cfg->store, d->hub, &d->inbox_watch);
    if (r != 0) {
        log_error("serve", "cannot start the inbox watch: %s", hookd_strerror(r));
        goto out;
    }
    r = listeners_start(d);
    if (r != 0)
        goto out;
    r = upkeep_start(d);
    if (r != 0)
        goto out;
    banner(d);
    log_info("serve", "started");
    if (sigwait(&stop, &sig) == 0)
        log_info("serve", "stopping on signal %d", sig);
out:
    atomic_store(&d->stopping, true);
    /* No new work: the listeners, then claims and sends, then the fan-out. */
    if (d->admin_http != NULL)
        http_server_stop(d->admin_http);
    if (d->public_http != NULL)
        http_server_stop(d->public_http);
    free(d->api); /* after both servers: suspended requests were answered before their stop returned */
    alerts_stop(d->alerts);
    retention_stop(d->retention);
    inbox_watch_stop(d->inbox_watch); /* it wakes the workers: before them */
    if (d->processor != NULL)
        processor_stop(d->processor);
    dispatcher_drain(d->dispatcher);
    if (d->relay != NULL)
        relay_stop(d->relay);
    if (d->dispatcher != NULL)
        dispatcher_stop(d->dispatcher); /* in-flight attempts finished and recorded, or abandoned at drain_timeout */
    if (d->writer != NULL)
        leases_release(d);
    if (d->claimer != NULL)
        writer_stop(d->claimer);
    for (int i = 0; i < PROCESSOR_DECIDERS_MAX; i++)
        if (d->deciders[i] != NULL)
            writer_stop(d->deciders[i]);
    if (d->writer != NULL)
        writer_stop(d->writer);
    source_cache_destroy(d->sources); /* after the listeners: no request holds a definition */
    token_cache_destroy(d->tokens);
    if (d->readers != NULL)
        store_pool_destroy(d->readers);
    hub_destroy(d->hub);
    explicit_bzero(d->admin_token, sizeof d->admin_token);
    explicit_bzero(d->cfg.admin_token, sizeof d->cfg.admin_token);
    explicit_bzero(d->cfg.secret_key, sizeof d->cfg.secret_key);
    secret_box_use(NULL, NULL);
    free(d);
    return r == 0 ? 0 : 1;
}
