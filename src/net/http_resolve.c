/*
 * The HTTP engine's resolver (net/http_resolve.h): a queue of lookups under a
 * mutex, served by detached threads that share the queue's ownership with the
 * engine (the last one out frees it, so destroy never waits on a name server).
 */
#include "net/http_resolve.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "hookd.h"
#include "net/http_url.h"

#define LOOKUP_TAGS_MAX 64 /* requests waiting on one lookup; more start one of their own */

struct lookup {
    struct lookup *next;          /* in todo or done, under the mutex */
    struct lookup *pending_next;  /* the engine's list of lookups not yet drained (its thread only) */
    uint64_t tags[LOOKUP_TAGS_MAX]; /* the engine's only: the threads never read them */
    int n_tags;
    char host[HTTP_URL_HOST_MAX];
    struct resolver_answer answer;
};

/* Shared by the engine and the threads. */
struct resolver_shared {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;          /* the engine's and one per thread */
    bool stopping;
    struct lookup *todo, *todo_tail;
    struct lookup *done;
    int fd;            /* eventfd: answers in done */
};

struct cache_entry {
    char host[HTTP_URL_HOST_MAX];
    int64_t expires_at;
    struct resolver_answer answer;
};

struct resolver {
    struct resolver_shared *sh;
    int threads;
    struct lookup *pending; /* submitted, not drained: a name asked for again joins its lookup */
    struct cache_entry cache[RESOLVER_CACHE_ENTRIES];
};

static void shared_put(struct resolver_shared *sh)
{
    struct lookup *l;
    bool last;

    pthread_mutex_lock(&sh->mu);
    last = --sh->refs == 0;
    pthread_mutex_unlock(&sh->mu);
    if (!last)
        return;
    while ((l = sh->todo) != NULL) {
        sh->todo = l->next;
        free(l);
    }
    while ((l = sh->done) != NULL) {
        sh->done = l->next;
        free(l);
    }
    close(sh->fd);
    pthread_cond_destroy(&sh->cv);
    pthread_mutex_destroy(&sh->mu);
    free(sh);
}

static void lookup_run(struct lookup *l)
{
    const struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(l->host, NULL, &hints, &res);

    l->answer.n = 0;
    l->answer.error = rc;
    if (rc != 0)
        return;
    for (struct addrinfo *ai = res; ai != NULL && l->answer.n < RESOLVER_ADDRS_MAX; ai = ai->ai_next) {
        bool dup = false;
        if ((ai->ai_family != AF_INET && ai->ai_family != AF_INET6) || ai->ai_addrlen > sizeof(struct sockaddr_storage))
            continue;
        for (int i = 0; i < l->answer.n && !dup; i++)
            dup = memcmp(&l->answer.addrs[i], ai->ai_addr, ai->ai_addrlen) == 0;
        if (dup)
            continue;
        memset(&l->answer.addrs[l->answer.n], 0, sizeof l->answer.addrs[0]);
        memcpy(&l->answer.addrs[l->answer.n++], ai->ai_addr, ai->ai_addrlen);
    }
    freeaddrinfo(res);
    if (l->answer.n == 0)
        l->answer.error = EAI_NONAME;
}

static void *resolver_main(void *arg)
{
    struct resolver_shared *sh = arg;

    pthread_mutex_lock(&sh->mu);
    for (;;) {
        struct lookup *l;
        uint64_t one = 1;

        while (!sh->stopping && sh->todo == NULL)
            pthread_cond_wait(&sh->cv, &sh->mu);
        if (sh->stopping)
            break;
        l = sh->todo;
        sh->todo = l->next;
        if (sh->todo == NULL)
            sh->todo_tail = NULL;
        pthread_mutex_unlock(&sh->mu);
        lookup_run(l);
        pthread_mutex_lock(&sh->mu);
        l->next = sh->done;
        sh->done = l;
        /* Fails only when the counter is about to overflow: the loop is told already then. */
        if (write(sh->fd, &one, sizeof one) != (ssize_t)sizeof one)
            errno = 0;
    }
    pthread_mutex_unlock(&sh->mu);
    shared_put(sh);
    return NULL;
}

int resolver_create(struct resolver **out)
{
    struct resolver *r = calloc(1, sizeof *r);
    struct resolver_shared *sh = calloc(1, sizeof *sh);

    *out = NULL;
    if (r == NULL || sh == NULL) {
        free(r);
        free(sh);
        return HOOKD_ENOMEM;
    }
    sh->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (sh->fd < 0) {
        free(r);
        free(sh);
        return HOOKD_EIO;
    }
    pthread_mutex_init(&sh->mu, NULL);
    pthread_cond_init(&sh->cv, NULL);
    sh->refs = 1;
    r->sh = sh;
    *out = r;
    return 0;
}

void resolver_destroy(struct resolver *r)
{
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->sh->mu);
    r->sh->stopping = true;
    pthread_cond_broadcast(&r->sh->cv);
    pthread_mutex_unlock(&r->sh->mu);
    shared_put(r->sh);
    free(r);
}

int resolver_fd(const struct resolver *r) { return r->sh->fd; }

int resolver_cached(struct resolver *r, const char *host, int64_t now_ms, struct resolver_answer *out)
{
    for (int i = 0; i < RESOLVER_CACHE_ENTRIES; i++) {
        struct cache_entry *c = &r->cache[i];
        if (c->expires_at > now_ms && strcmp(c->host, host) == 0) {
            *out = c->answer;
            return 1;
        }
    }
    return 0;
}

/* Keeps a good answer in the slot of the same name, a stale one, or the one that expires first. */
static void cache_put(struct resolver *r, const char *host, const struct resolver_answer *a, int64_t now_ms)
{
    struct cache_entry *slot = &r->cache[0];

    if (a->error != 0 || a->n == 0)
        return;
    for (int i = 0; i < RESOLVER_CACHE_ENTRIES; i++) {
        struct cache_entry *c = &r->cache[i];
        if (strcmp(c->host, host) == 0 || c->expires_at <= now_ms) {
            slot = c;
            break;
        }
        if (c->expires_at < slot->expires_at)
            slot = c;
    }
    snprintf(slot->host, sizeof slot->host, "%s", host);
    slot->answer = *a;
    slot->expires_at = now_ms + RESOLVER_CACHE_TTL_MS;
}

int resolver_submit(struct resolver *r, const char *host, uint64_t tag)
{
    struct resolver_shared *sh = r->sh;
    struct lookup *l;
    int rc = 0;

    for (l = r->pending; l != NULL; l = l->pending_next) {
        if (l->n_tags < LOOKUP_TAGS_MAX && strcmp(l->host, host) == 0) {
            l->tags[l->n_tags++] = tag;
            return 0;
        }
    }
    l = calloc(1, sizeof *l);
    if (l == NULL)
        return HOOKD_ENOMEM;
    l->tags[l->n_tags++] = tag;
    snprintf(l->host, sizeof l->host, "%s", host);
    pthread_mutex_lock(&sh->mu);
    while (r->threads < RESOLVER_THREADS) {
        pthread_t th;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        sh->refs++;
        if (pthread_create(&th, &at, resolver_main, sh) != 0) {
            sh->refs--;
            pthread_attr_destroy(&at);
            break;
        }
        pthread_attr_destroy(&at);
        r->threads++;
    }
    if (r->threads == 0) {
        rc = HOOKD_EIO;
        free(l);
    } else {
        if (sh->todo_tail != NULL)
            sh->todo_tail->next = l;
        else
            sh->todo = l;
        sh->todo_tail = l;
        pthread_cond_signal(&sh->cv);
        l->pending_next = r->pending;
        r->pending = l;
    }
    pthread_mutex_unlock(&sh->mu);
    return rc;
}

void resolver_drain(struct resolver *r, int64_t now_ms, resolver_done_fn fn, void *ud)
{
    struct resolver_shared *sh = r->sh;
    struct lookup *list, *l;
    uint64_t v;

    if (read(sh->fd, &v, sizeof v) != (ssize_t)sizeof v)
        v = 0; /* EAGAIN: nothing was counted, the list says the same */
    pthread_mutex_lock(&sh->mu);
    list = sh->done;
    sh->done = NULL;
    pthread_mutex_unlock(&sh->mu);
    while ((l = list) != NULL) {
        list = l->next;
        for (struct lookup **pp = &r->pending; *pp != NULL; pp = &(*pp)->pending_next) {
            if (*pp == l) {
                *pp = l->pending_next;
                break;
            }
        }
        cache_put(r, l->host, &l->answer, now_ms);
        for (int i = 0; i < l->n_tags; i++)
            fn(ud, l->tags[i], &l->answer);
        free(l);
    }
}
