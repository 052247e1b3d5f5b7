/* `hookd serve` and `hookd check-config`: load the configuration, then run the daemon or report. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "config.h"
#include "core/duration.h"
#include "daemon.h"

static const struct option config_options[] = {
    {"config", required_argument, NULL, 'c'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Parses -c FILE; returns 0, 1 on a bad option, or -1 after --help. */
static int parse_config_option(int argc, char **argv, const char **path, const char *usage)
{
    int c;

    optind = 1;
    while ((c = getopt_long(argc, argv, "c:h", config_options, NULL)) != -1) {
        switch (c) {
        case 'c':
            *path = optarg;
            break;
        case 'h':
            printf("%s", usage);
            return -1;
        default:
            fprintf(stderr, "%s", usage);
            return 1;
        }
    }
    return 0;
}

static int load(int argc, char **argv, struct config *cfg, const char *usage)
{
    const char *path = NULL;
    char err[512];
    int r = parse_config_option(argc, argv, &path, usage);

    if (r != 0)
        return r;
    if (config_load(cfg, path, err, sizeof err) != 0) {
        fprintf(stderr, "hookd: configuration error: %s\n", err);
        return 1;
    }
    return 0;
}

int cmd_serve(int argc, char **argv)
{
    static const char usage[] = "usage: hookd serve [-c hookd.conf]\n"
                                "Settings come from the file, then HOOKD_<SECTION>_<KEY> environment variables.\n";
    struct config cfg;
    int r = load(argc, argv, &cfg, usage);

    if (r != 0)
        return r < 0 ? 0 : r;
    return daemon_run(&cfg);
}

int cmd_check_config(int argc, char **argv)
{
    static const char usage[] = "usage: hookd check-config [-c hookd.conf]\n";
    struct config cfg;
    char sched[RETRY_MAX_SCHEDULE * 24 + 1] = "";
    char d[24];
    int r = load(argc, argv, &cfg, usage);

    if (r != 0)
        return r < 0 ? 0 : r;
    for (size_t i = 0; i < cfg.retry.n_schedule; i++) {
        duration_format(cfg.retry.schedule_ms[i], d);
        if (i > 0)
            strncat(sched, ",", sizeof sched - strlen(sched) - 1);
        strncat(sched, d, sizeof sched - strlen(sched) - 1);
    }
    printf("configuration ok\n");
    printf("  store            %s\n", strstr(cfg.store, "://") != NULL ? "postgres (URL not shown)" : cfg.store);
    printf("  public_listen    %s\n", cfg.public_listen);
    printf("  admin_listen     %s\n", cfg.admin_listen);
    printf("  admin_token      %s\n", cfg.admin_token[0] != '\0' ? "set" : "generated at first start");
    printf("  retry_schedule   %s\n", sched);
    return 0;
}
