/*
 * The inbox watcher: LISTEN hookd_inbox on a connection of its own, and the
 * hub's inbox_changed for every notification (inbound/inbox_watch.h). A lost
 * connection is reopened each second; the workers' safety poll covers the gap.
 * The session waits on its socket almost all the time, so it also does the
 * store's maintenance (store_maintain: on PostgreSQL a vacuum of the lease table
 * every second), off every path a delivery or an inbound event waits on.
 */
#include "inbound/inbox_watch.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "hub.h"
#include "log.h"
#include "store/store.h"

#define PART "inbox"
#define WATCH_POLL_MS 1000 /* the longest wait on the socket, and the pause before a reconnect */
#define WATCH_COALESCE_MS 10 /* after a wake-up, notifications within this are one: at most 100 claims/s */

struct inbox_watch {
    char *url;
    struct hub *hub;
    struct store *s; /* the watcher thread's; NULL while down */
    int stop_fd;     /* eventfd: readable once stopping */
    atomic_bool stopping;
    pthread_t thread;
};

/* Opens the connection and turns LISTEN on (the first changed() does); false while the store is down. */
static bool watch_connect(struct inbox_watch *w)
{
    bool changed;

    if (store_open(w->url, &w->s) != 0) {
        w->s = NULL;
        return false;
    }
    if (store_watch(w->s, STORE_CHANNEL_INBOX) != 0 || store_changed(w->s, &changed) != 0) {
        store_close(w->s);
        w->s = NULL;
        return false;
    }
    hub_notify(w->hub, HUB_INBOX_CHANGED); /* anything committed while we were not listening */
    return true;
}

static void *watch_main(void *arg)
{
    struct inbox_watch *w = arg;

    while (!atomic_load(&w->stopping)) {
        struct pollfd fds[2] = {{.fd = w->stop_fd, .events = POLLIN}, {.fd = -1, .events = POLLIN}};
        bool changed = false;

        if (!w->s && !watch_connect(w)) {
            (void)poll(fds, 1, WATCH_POLL_MS);
            continue;
        }
        fds[1].fd = store_changed_fd(w->s);
        if (poll(fds, 2, WATCH_POLL_MS) < 0 && errno != EINTR)
            break;
        if (store_changed(w->s, &changed) != 0) {
            log_debug(PART, "inbox watch: connection lost, reconnecting");
            store_close(w->s);
            w->s = NULL;
            continue;
        }
        if (changed) {
            hub_notify(w->hub, HUB_INBOX_CHANGED);
            (void)poll(fds, 1, WATCH_COALESCE_MS); /* the next ones wait on the socket meanwhile */
        }
        /* The otherwise idle session also does the store's maintenance (at most once a second). */
        if (store_maintain(w->s) != 0)
            log_debug(PART, "store maintenance failed (tried again in a second)");
    }
    return NULL;
}

int inbox_watch_start(const char *store_url, struct hub *hub, struct inbox_watch **out)
{
    struct inbox_watch *w;
    struct store *probe = NULL;
    bool postgres;
    int rc;

    *out = NULL;
    rc = store_open(store_url, &probe);
    if (rc != 0)
        return rc;
    postgres = strcmp(store_backend(probe)->name, "postgres") == 0;
    store_close(probe);
    if (!postgres)
        return 0;
    if (!(w = calloc(1, sizeof *w)) || !(w->url = strdup(store_url))) {
        free(w);
        return HOOKD_ENOMEM;
    }
    w->hub = hub;
    w->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (w->stop_fd < 0 || pthread_create(&w->thread, NULL, watch_main, w) != 0) {
        if (w->stop_fd >= 0)
            close(w->stop_fd);
        free(w->url);
        free(w);
        return HOOKD_ENOMEM;
    }
    *out = w;
    return 0;
}

void inbox_watch_stop(struct inbox_watch *w)
{
    uint64_t one = 1;

    if (!w)
        return;
    atomic_store(&w->stopping, true);
    if (write(w->stop_fd, &one, sizeof one) != sizeof one)
        log_debug(PART, "inbox watch: cannot signal the stop");
    pthread_join(w->thread, NULL);
    if (w->s)
        store_close(w->s);
    close(w->stop_fd);
    free(w->url);
    free(w);
}
