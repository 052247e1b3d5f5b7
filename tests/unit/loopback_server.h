/*
 * A threaded loopback server for the HTTP engine's tests: a listening socket
 * on 127.0.0.1 or ::1, an accept thread, and one thread per connection
 * running the test's own conn_main (given a struct conn; it reads
 * s->fds[c->slot] and frees c). A connection it closes itself it marks -1
 * under s->mu; the rest are shut down, joined and closed by server_stop.
 * A test's own server (the TLS one) can use listen_on and accept_one alone.
 * Include after <cmocka.h>.
 */
#ifndef HOOKD_TESTS_LOOPBACK_SERVER_H
#define HOOKD_TESTS_LOOPBACK_SERVER_H
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_CONNS 256

struct server {
    int lfd;
    int port;
    bool ipv6;
    pthread_t thread;
    atomic_bool stop;
    atomic_int accepted; /* connections */
    atomic_int requests; /* complete requests read */
    pthread_mutex_t mu;
    int fds[MAX_CONNS];
    pthread_t threads[MAX_CONNS];
    int n;
    char last[8192];      /* the last request: head and the start of the body */
    size_t last_body_len; /* its body's full length */
    void *(*conn_main)(void *);
};

struct conn {
    struct server *s;
    int slot;
};

static bool send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/*
 * Waits for the next connection on lfd and accepts it, looking at *stop every
 * 20 ms; the new descriptor (the caller's to close), or -1 once *stop is set.
 */
static int accept_one(int lfd, atomic_bool *stop)
{
    while (!atomic_load(stop)) {
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        if (poll(&p, 1, 20) <= 0)
            continue;
        int fd = accept(lfd, NULL, NULL);
        if (fd >= 0)
            return fd;
    }
    return -1;
}

static void *accept_main(void *arg)
{
    struct server *s = arg;
    int fd;

    while ((fd = accept_one(s->lfd, &s->stop)) >= 0) {
        atomic_fetch_add(&s->accepted, 1);
        pthread_mutex_lock(&s->mu);
        if (s->n == MAX_CONNS) {
            pthread_mutex_unlock(&s->mu);
            close(fd);
            continue;
        }
        struct conn *c = malloc(sizeof *c);
        assert_non_null(c);
        c->s = s;
        c->slot = s->n;
        s->fds[s->n] = fd;
        assert_int_equal(pthread_create(&s->threads[s->n], NULL, s->conn_main, c), 0);
        s->n++;
        pthread_mutex_unlock(&s->mu);
    }
    return NULL;
}

/* A listening socket on the loopback address of that family, its port in *port; -1 when it cannot bind. */
static int listen_on(bool ipv6, int *port)
{
    struct sockaddr_storage ss = {0};
    socklen_t len;
    int fd = socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;

    assert_true(fd >= 0);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ipv6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_loopback;
        len = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof *a;
    }
    if (bind(fd, (struct sockaddr *)&ss, len) != 0) {
        close(fd);
        return -1;
    }
    assert_int_equal(getsockname(fd, (struct sockaddr *)&ss, &len), 0);
    *port = ntohs(ipv6 ? ((struct sockaddr_in6 *)&ss)->sin6_port : ((struct sockaddr_in *)&ss)->sin_port);
    assert_int_equal(listen(fd, 256), 0);
    return fd;
}

/* A server whose connections run conn_main; NULL when the address family has no loopback here. */
static struct server *server_start_with(bool ipv6, void *(*conn_main)(void *))
{
    struct server *s = calloc(1, sizeof *s);

    assert_non_null(s);
    pthread_mutex_init(&s->mu, NULL);
    s->ipv6 = ipv6;
    s->conn_main = conn_main;
    s->lfd = listen_on(ipv6, &s->port);
    if (s->lfd < 0) {
        pthread_mutex_destroy(&s->mu);
        free(s);
        return NULL;
    }
    assert_int_equal(pthread_create(&s->thread, NULL, accept_main, s), 0);
    return s;
}

static void server_stop(struct server *s)
{
    atomic_store(&s->stop, true);
    pthread_join(s->thread, NULL);
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->n; i++) {
        if (s->fds[i] >= 0)
            shutdown(s->fds[i], SHUT_RDWR);
    }
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->n; i++) {
        pthread_join(s->threads[i], NULL);
        if (s->fds[i] >= 0)
            close(s->fds[i]);
    }
    close(s->lfd);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* The last request the server read (its head and the start of its body). */
static void server_last(struct server *s, char *out, size_t n)
{
    pthread_mutex_lock(&s->mu);
    snprintf(out, n, "%s", s->last);
    pthread_mutex_unlock(&s->mu);
}
#endif
