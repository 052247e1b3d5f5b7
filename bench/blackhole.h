/*
 * A receiver that accepts connections, reads what arrives and never answers: the hung endpoints
 * of the isolation scenario, each request held until hookd's timeout closes it.
 *
 *   blackhole_start / blackhole_stop   the listener and its thread on a free loopback port
 */
#ifndef LOADGEN_BLACKHOLE_H
#define LOADGEN_BLACKHOLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define BLACKHOLE_MAX_CONNS 4096 /* connections held at once; more are closed at once */

struct blackhole {
    int listen_fd, stop_fd, port;
    pthread_t thread;
    bool running;
    int fds[BLACKHOLE_MAX_CONNS];
    int n_fds;
    atomic_long accepted;
    atomic_int held; /* n_fds, for other threads */
};

__attribute__((warn_unused_result)) int blackhole_start(struct blackhole *h);
void blackhole_stop(struct blackhole *h);

#endif
