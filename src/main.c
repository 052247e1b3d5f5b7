/* Entry point: the command table. `hookd serve` is the daemon; the rest is the CLI. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "hookd.h"
#include "store/store.h"

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

static int cmd_version(int argc, char **argv);
static int cmd_help(int argc, char **argv);

static const struct command commands[] = {
    {"serve", cmd_serve, "run the daemon (-c hookd.conf)"},
    {"check-config", cmd_check_config, "validate a config file and the environment, then exit"},
    {"listen", cmd_listen, "local receiver: verify and print incoming webhooks, scripted answers"},
    {"send", cmd_send, "sign a test event as a provider does and post it to /in/SOURCE"},
    {"endpoints", cmd_endpoints, "create, list, get, update, delete, disable, enable, rotate-secret"},
    {"events", cmd_events, "publish, list, get"},
    {"deliveries", cmd_deliveries, "list, get"},
    {"sources", cmd_sources, "inbound sources: list, get, create, delete, rejections"},
    {"inbox", cmd_inbox, "inbound items: list, get, replay, replay-range"},
    {"apply", cmd_apply, "create or update the machines, sources and endpoints of a JSON file (idempotent)"},
    {"trace", cmd_trace, "an entity's events and the decision on each: trace KIND ID"},
    {"audit", cmd_audit, "inbound checks: duplicates, late versions, versions applied twice, …"},
    {"replay", cmd_replay, "replay a delivery, an event or a bounded range; list and show replays"},
    {"tokens", cmd_tokens, "account-scoped API tokens: create, list, revoke"},
    {"alerts", cmd_alerts, "alerts: list (the default), get"},
    {"health", cmd_health, "one endpoint's health: last success and error, queue, success rate, latency"},
    {"summary", cmd_summary, "failures by endpoint and account, growing backlogs, endpoints without success"},
    {"sync", cmd_sync, "customer sync status of an account, or of one resource (--resource TYPE ID)"},
    {"rotate-key", cmd_rotate_key, "re-seal the stored secrets under a new server key (nodes stopped)"},
    {"version", cmd_version, "print the version"},
    {"help", cmd_help, "this list"},
};

static int cmd_version(int argc, char **argv)
{
    printf("hookd %s\n", HOOKD_VERSION);
    return 0;
}

static int cmd_help(int argc, char **argv)
{
    printf("usage: hookd <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        printf("  %-14s %s\n", commands[i].name, commands[i].summary);
    printf("\nThe admin API commands print tables and key/value blocks (relative times, colours on a\n"
           "terminal unless NO_COLOR); --json prints the API's JSON, --utc absolute times, and lists\n"
           "and gets take --watch [INTERVAL] [--count N].\n"
           "`hookd <command> --help` describes each command.\n");
    return 0;
}

int main(int argc, char **argv)
{
    store_process_owned();
    if (argc < 2) {
        cmd_help(0, NULL);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
        return cmd_help(0, NULL);
    if (strcmp(argv[1], "--version") == 0)
        return cmd_version(0, NULL);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    }
    fprintf(stderr, "hookd: unknown command '%s' (see `hookd help`)\n", argv[1]);
    return 2;
}
