/*
 * `hookd serve`: the parts of one daemon and the wiring between them.
 *   daemon_run   start writer, relay, dispatcher and listeners; run until SIGINT/SIGTERM
 */
#ifndef HOOKD_DAEMON_H
#define HOOKD_DAEMON_H
#include <stdatomic.h>
#include <stdbool.h>
#include "config.h"

struct writer;
struct store_pool;
struct relay;
struct dispatcher;
#include "inbound/processor.h"

struct http_server;
struct hub;
struct api_ctx;
struct source_cache;
struct token_cache;
struct alerts;
struct retention;

struct daemon {
    struct config cfg;
    char node[128];              /* lease owner name of this process */
    char admin_token[256];       /* effective token (configured or generated) */
    struct writer *writer;
    struct writer *claimer;      /* shared stores: the dispatcher's claims, beside the writer; NULL: on the writer */
    struct writer *deciders[PROCESSOR_DECIDERS_MAX]; /* shared stores: machine decisions, by entity; NULL: on the writer */
    struct store_pool *readers;
    struct source_cache *sources; /* the receiver's source definitions */
    struct token_cache *tokens;   /* live account tokens, for the admin listener */
    struct hub *hub;             /* "something changed": publishers notify, parts subscribe (hub.h) */
    struct relay *relay;
    struct dispatcher *dispatcher;
    struct processor *processor; /* the inbox workers */
    struct alerts *alerts;       /* the alert evaluator (ops/alerts.h); NULL when [alerts] enabled = false */
    struct retention *retention; /* the retention purge (ops/retention.h) */
    struct inbox_watch *inbox_watch; /* PostgreSQL: other nodes' new items wake the workers */
    struct http_server *public_http;
    struct http_server *admin_http;
    struct api_ctx *api;         /* the listeners' handlers' context (ops/api.h) */
    atomic_bool stopping;
    int64_t started_at;
};

/* Runs the daemon with cfg until a stop signal; returns the exit status. */
int daemon_run(const struct config *cfg);
#endif
