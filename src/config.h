/*
 * Daemon settings: defaults, then the INI file (-c), then HOOKD_<SECTION>_<KEY>
 * environment variables. Keys are one table in config.c (name, type, default).
 */
#ifndef HOOKD_CONFIG_H
#define HOOKD_CONFIG_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/retry.h"

#define ADMIN_TOKEN_MIN 32 /* shorter admin tokens are refused */
#define ADMIN_TOKEN_MIN_TEXT "32"

struct config {
    /* [server] */
    char store[1024];        /* "sqlite:PATH" or "postgres://…"; default "sqlite:hookd.db" */
    char public_listen[128]; /* "127.0.0.1:8080" */
    char admin_listen[128];  /* "127.0.0.1:8081" */
    char admin_token[256];   /* empty: generated at first start and kept beside the store; else >= ADMIN_TOKEN_MIN */
    char secret_key_file[1024]; /* the key sealing secrets at rest; empty: beside the SQLite file (PATH.secret-key) */
    char secret_key[128];       /* HOOKD_SERVER_SECRET_KEY: the key itself (base64 or hex of 32 bytes), over the file */
    char node_id[128];       /* empty: "hostname:admin_port" (stable across restarts, so a restarted node frees its own leases) */
    char log_level[16];      /* "debug", "info", "warn", "error"; default "info" */
    int http_threads;             /* event-loop threads per listener; 2 */
    int max_connections;          /* per listener; 10240 (at most what the open-file limit allows) */
    int max_connections_per_ip;   /* per listener and client address; 1024 */
    int64_t header_timeout_ms;    /* whole request header, from its first byte; 10s */
    int64_t idle_timeout_ms;      /* a connection with no traffic (keep-alive wait); 60s */
    int64_t connection_memory;    /* per-connection buffers; 128KiB */
    int64_t write_timeout_ms;     /* a write that cannot commit within it answers 503 store_busy; 5s */
    int64_t drain_timeout_ms;     /* at SIGTERM, in-flight attempts get this long to finish; 10s */
    int64_t metrics_refresh_ms;   /* the store's gauges in /metrics are read at most this often; 5s */
    char metrics_auth[16];         /* "token" (default): GET /metrics needs the admin token; "none": it does not */
    char portal_url[512];          /* the customer portal's base in account tokens' links; empty: the admin listener's */
    /* [delivery] */
    int64_t timeout_ms;          /* 10s */
    int64_t connect_timeout_ms;  /* 5s */
    struct retry_policy retry;   /* retry_schedule, retry_window, jitter, retry_after_max */
    int max_in_flight;           /* whole dispatcher; 256 */
    int endpoint_max_in_flight;  /* per endpoint default; 32 */
    bool allow_private_networks; /* false */
    int64_t response_max;        /* response snippet cap, bytes; 4096 */
    int64_t lease_ms;            /* claim lease; 60s */
    int64_t rotate_grace_ms;     /* old secret keeps signing after rotation; 24h */
    int window;                  /* deliveries held in memory; 4096 */
    int breaker_failures;        /* consecutive failed attempts that open an endpoint's breaker; 5 (0: never) */
    int64_t breaker_probe_ms;    /* first interval between probes of an open breaker; 10s */
    int64_t breaker_probe_max_ms; /* the longest (it doubles per failed probe); 10m */
    int64_t breaker_ramp_ms;     /* after recovery the cap grows from 1 to full over this; 30s */
    int64_t disable_after_ms;    /* failing continuously this long disables an endpoint; 5d (0: never) */
    int64_t sync_warn_after_ms;  /* undelivered longer than this is "delayed" (sync status, alert); 60s */
    /* [inbox] (parsed now, used by the inbound receiver) */
    struct retry_policy inbox_retry;
    int64_t max_defer_ms;  /* 1h */
    int64_t max_body;      /* 1 MiB */
    int workers;           /* 2: inbox items in flight at once per node */
    int64_t inbox_timeout_ms;          /* one forward request; 10s */
    bool inbox_allow_private_networks; /* forward to private addresses (the application's); true */
    int64_t reconcile_after_ms;        /* a contiguous gap waits this long before the provider is asked; 5s */
    /* [alerts] (ops/alerts.c; a threshold of 0 turns its rule off) */
    bool alerts_enabled;               /* true */
    int64_t alerts_interval_ms;        /* evaluation period; 30s */
    int64_t alerts_window_ms;          /* what "recent" means for rates, dead letters, rejections, growth; 5m */
    int64_t alerts_reopen_after_ms;    /* a resolved (rule, subject) does not open again sooner; 10m */
    int alerts_backlog_growth;         /* an endpoint's retrying deliveries grew by this many over window; 100 */
    double alerts_error_rate;          /* failed / attempts of an endpoint over window; 0.5 */
    int alerts_error_min_attempts;     /* ... with at least this many attempts; 20 */
    int alerts_no_success_accounts;    /* accounts with attempts and no success over window; 3 */
    int alerts_dead_letters;           /* an endpoint's deliveries dead over window; 1 */
    int alerts_quarantined;            /* a source's quarantined inbox items; 1 */
    int alerts_signature_rejections;   /* a source's requests refused for their signature over window; 20 */
    /* [retention] (ops/retention.c; an age of 0 keeps forever) */
    int64_t retention_deliveries_ms;   /* delivered and superseded deliveries and their attempts; 30d */
    int64_t retention_inbox_ms;        /* payloads of processed inbox items (the row and its key stay); 30d */
    int64_t retention_interval_ms;     /* how often the purge looks; 1m */
    int retention_batch;               /* rows per batch (one short writer op each); 500 */
    int64_t retention_pause_ms;        /* at least this between two batches; 10ms */
    double application_share;          /* SQLite: the writer, busy back to back, leaves the write lock free this share of the time; 0.2 */
    double retention_share;            /* the purge holds the writer at most this fraction of the time; 0.05 */
};

/* Fills defaults. */
void config_defaults(struct config *c);
/*
 * defaults + file (path may be NULL) + environment. On error returns
 * HOOKD_EINVAL and writes "file:line: key: problem" or "HOOKD_X_Y: problem" to err.
 */
__attribute__((warn_unused_result)) int config_load(struct config *c, const char *path, char *err, size_t errlen);
/* Sets one key ("section", "key", "value"); the same path the file and env use. */
__attribute__((warn_unused_result)) int config_set(struct config *c, const char *section, const char *key,
                                                   const char *value, char *err, size_t errlen);
#endif
