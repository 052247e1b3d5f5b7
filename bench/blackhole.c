/*
 * The isolation scenario's hung endpoints: accept, read and discard, never answer. Closed
 * connections (hookd's timeout) are dropped; the rest stay open until the scenario ends.
 */
#include "blackhole.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

static void *blackhole_main(void *arg)
{
    static struct pollfd pfd[BLACKHOLE_MAX_CONNS + 2];
    struct blackhole *h = arg;
    char buf[16384];

    for (;;) {
        int n = 0;
        pfd[n++] = (struct pollfd){.fd = h->stop_fd, .events = POLLIN};
        pfd[n++] = (struct pollfd){.fd = h->listen_fd, .events = POLLIN};
        for (int i = 0; i < h->n_fds; i++)
            pfd[n++] = (struct pollfd){.fd = h->fds[i], .events = POLLIN};
        if (poll(pfd, (nfds_t)n, 1000) < 0 && errno != EINTR)
            break;
        if (pfd[0].revents & POLLIN)
            break;
        /* Read and drop; a connection hookd closed is closed here too (kept in order, compacted). */
        int kept = 0;
        for (int i = 0; i < h->n_fds; i++) {
            bool gone = false;
            if (pfd[i + 2].revents & (POLLIN | POLLHUP | POLLERR)) {
                ssize_t r = read(h->fds[i], buf, sizeof buf);
                gone = r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR);
            }
            if (gone)
                close(h->fds[i]);
            else
                h->fds[kept++] = h->fds[i];
        }
        h->n_fds = kept;
        atomic_store(&h->held, kept);
        if (pfd[1].revents & POLLIN) {
            int fd = accept4(h->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd >= 0 && h->n_fds < BLACKHOLE_MAX_CONNS) {
                h->fds[h->n_fds++] = fd;
                atomic_store(&h->held, h->n_fds);
                atomic_fetch_add(&h->accepted, 1);
            } else if (fd >= 0) {
                close(fd);
            }
        }
    }
    return NULL;
}

int blackhole_start(struct blackhole *h)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;

    memset(h, 0, sizeof *h);
    h->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    h->stop_fd = eventfd(0, EFD_CLOEXEC);
    if (h->listen_fd < 0 || h->stop_fd < 0 || bind(h->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(h->listen_fd, 1024) != 0 || getsockname(h->listen_fd, (struct sockaddr *)&a, &len) != 0) {
        perror("loadgen: blackhole");
        return -1;
    }
    h->port = ntohs(a.sin_port);
    if (pthread_create(&h->thread, NULL, blackhole_main, h) != 0) {
        fprintf(stderr, "loadgen: cannot start the blackhole thread\n");
        return -1;
    }
    h->running = true;
    return 0;
}

void blackhole_stop(struct blackhole *h)
{
    uint64_t one = 1;

    if (h->running) {
        if (write(h->stop_fd, &one, sizeof one) != (ssize_t)sizeof one)
            perror("loadgen: blackhole stop");
        pthread_join(h->thread, NULL);
        h->running = false;
    }
    for (int i = 0; i < h->n_fds; i++)
        close(h->fds[i]);
    h->n_fds = 0;
    if (h->listen_fd > 0)
        close(h->listen_fd);
    if (h->stop_fd > 0)
        close(h->stop_fd);
}
