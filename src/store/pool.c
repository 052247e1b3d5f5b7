/* A small pool of read connections: a mutex-protected stack of idle ones, opened on demand. */
#include "store/pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct store_pool {
    pthread_mutex_t mu;
    char *dsn;
    int max_idle;
    int n_idle;
    struct store **idle; /* max_idle slots; the top is idle[n_idle - 1] */
};

int store_pool_create(const char *dsn, int max_idle, struct store_pool **out)
{
    struct store_pool *p;

    *out = NULL;
    if (!dsn || max_idle < 0)
        return HOOKD_EINVAL;
    p = calloc(1, sizeof *p);
    if (!p)
        return HOOKD_ENOMEM;
    p->dsn = strdup(dsn);
    p->max_idle = max_idle;
    p->idle = calloc((size_t)max_idle + 1, sizeof *p->idle);
    if (!p->dsn || !p->idle) {
        free(p->dsn);
        free(p->idle);
        free(p);
        return HOOKD_ENOMEM;
    }
    pthread_mutex_init(&p->mu, NULL);
    *out = p;
    return 0;
}

void store_pool_destroy(struct store_pool *p)
{
    if (!p)
        return;
    for (int i = 0; i < p->n_idle; i++)
        store_close(p->idle[i]);
    pthread_mutex_destroy(&p->mu);
    free(p->idle);
    free(p->dsn);
    free(p);
}

int store_pool_get(struct store_pool *p, struct store **out)
{
    *out = NULL;
    pthread_mutex_lock(&p->mu);
    if (p->n_idle > 0)
        *out = p->idle[--p->n_idle];
    pthread_mutex_unlock(&p->mu);
    /* Opening happens outside the lock: it may wait on the file. */
    return *out ? 0 : store_open(p->dsn, out);
}

void store_pool_put(struct store_pool *p, struct store *s, bool broken)
{
    if (!s)
        return;
    if (!broken) {
        pthread_mutex_lock(&p->mu);
        if (p->n_idle < p->max_idle) {
            p->idle[p->n_idle++] = s;
            s = NULL;
        }
        pthread_mutex_unlock(&p->mu);
    }
    store_close(s);
}
