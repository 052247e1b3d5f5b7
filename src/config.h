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
    int64_t sync_warn_after_ms;  /* sync status says delayed once the oldest undelivered event is older; 60s */
    int64_t breaker_ramp_ms;     /* after recovery the cap grows from 1 to full over this; 30s */
    int64_t disable_after_ms;    /* failing continuously this long disables an endpoint; 5d (0: never) */
    /* [inbox] (parsed now, used by the inbound receiver) */
    struct retry_policy inbox_retry;
    int64_t max_defer_ms;  /* 1h */
    int64_t max_body;      /* 1 MiB */
    int workers;           /* 2: inbox items in flight at once per node */
    int64_t inbox_timeout_ms;          /* one forward request; 10s */
    bool inbox_allow_private_networks; /* forward to private addresses (the application's); true */
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
