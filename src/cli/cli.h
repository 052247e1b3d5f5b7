/*
 * CLI commands: each is int cmd_NAME(int argc, char **argv) with argv[0] the
 * command name, returning the process exit status. The table is in main.c.
 * Commands other than serve, listen, send and check-config talk to the admin API
 * (client.h): HOOKD_ADMIN_URL (default from admin_listen) and HOOKD_ADMIN_TOKEN.
 */
#ifndef HOOKD_CLI_H
#define HOOKD_CLI_H
#include <stddef.h>
#include <stdint.h>

#include "cli/output.h"

int cmd_serve(int argc, char **argv);        /* serve.c */
int cmd_check_config(int argc, char **argv); /* serve.c */
int cmd_listen(int argc, char **argv);       /* listen.c */
int cmd_endpoints(int argc, char **argv);    /* endpoints.c */
int cmd_events(int argc, char **argv);       /* events.c */
int cmd_deliveries(int argc, char **argv);   /* deliveries.c */
int cmd_sources(int argc, char **argv);      /* sources.c */
int cmd_inbox(int argc, char **argv);        /* inbox.c */
int cmd_alerts(int argc, char **argv);       /* alerts.c */
int cmd_apply(int argc, char **argv);        /* apply.c */
int cmd_send(int argc, char **argv);         /* send.c */
int cmd_rotate_key(int argc, char **argv);   /* rotate_key.c */
int cmd_trace(int argc, char **argv);        /* trace.c */
int cmd_audit(int argc, char **argv);        /* trace.c */
int cmd_replay(int argc, char **argv);       /* replays.c */
int cmd_tokens(int argc, char **argv);       /* tokens.c */
int cmd_health(int argc, char **argv);       /* health.c */
int cmd_summary(int argc, char **argv);      /* health.c */
int cmd_sync(int argc, char **argv);         /* health.c */

/* Views more than one family shows (deliveries.c): a delivery list's columns; a delivery's state in words. */
extern const struct out_column cli_delivery_columns[];
void cli_delivery_words(const json_t *delivery, int64_t now_ms, char *out, size_t cap);
#endif
