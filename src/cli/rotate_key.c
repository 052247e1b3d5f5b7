/* `hookd rotate-key`: re-seal every stored secret under a new server key (offline: the nodes are stopped). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "config.h"
#include "hookd.h"
#include "secrets.h"
#include "store/store.h"

static const char usage[] =
    "usage: hookd rotate-key [-c hookd.conf] [--new-key-file FILE]\n"
    "Re-seals every endpoint secret, source secret and the admin token under a new key, in one\n"
    "transaction, then replaces the key file atomically. Stop every node first; afterwards give every\n"
    "node the new key. Without --new-key-file a new key is generated; with it, FILE's key is used\n"
    "(generated into FILE when it does not exist).\n";

int cmd_rotate_key(int argc, char **argv)
{
    static const struct option options[] = {
        {"config", required_argument, NULL, 'c'},
        {"new-key-file", required_argument, NULL, 'k'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *path = NULL, *new_key_file = NULL;
    struct config cfg;
    struct store *s = NULL;
    char err[512];
    int c, r;

    optind = 1;
    while ((c = getopt_long(argc, argv, "c:k:h", options, NULL)) != -1) {
        switch (c) {
        case 'c':
            path = optarg;
            break;
        case 'k':
            new_key_file = optarg;
            break;
        case 'h':
            printf("%s", usage);
            return 0;
        default:
            fprintf(stderr, "%s", usage);
            return 1;
        }
    }
    if (config_load(&cfg, path, err, sizeof err) != 0) {
        fprintf(stderr, "hookd: configuration error: %s\n", err);
        return 1;
    }
    umask(077);
    r = store_open(cfg.store, &s);
    if (r == 0)
        r = store_migrate(s);
    if (r != 0)
        fprintf(stderr, "hookd: cannot open the store: %s\n", hookd_strerror(r));
    else
        r = secrets_rotate(s, &cfg, new_key_file);
    if (s != NULL)
        store_close(s);
    explicit_bzero(cfg.admin_token, sizeof cfg.admin_token);
    explicit_bzero(cfg.secret_key, sizeof cfg.secret_key);
    return r == 0 ? 0 : 1;
}
