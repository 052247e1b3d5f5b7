/*
 * The machine cache (machine_cache.h): a short list of parsed definitions
 * under one mutex, each with a count of the decisions using it; parsing runs
 * outside the mutex.
 */
#include "inbound/machine_cache.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

struct cached {
    struct machine m; /* first: machine_cache_put finds the entry from it */
    char *definition; /* the stored text m was parsed from */
    int64_t updated_at;
    int refs;         /* decisions using it */
    bool listed;      /* still in the list (not replaced or dropped) */
    struct cached *next;
};

struct machine_cache {
    pthread_mutex_t mu;
    struct cached *head; /* most recently added first */
    size_t n;
};

static void cached_free(struct cached *e)
{
    machine_free(&e->m);
    free(e->definition);
    free(e);
}

int machine_cache_create(struct machine_cache **out)
{
    struct machine_cache *c = calloc(1, sizeof *c);

    *out = NULL;
    if (!c)
        return HOOKD_ENOMEM;
    pthread_mutex_init(&c->mu, NULL);
    *out = c;
    return 0;
}

void machine_cache_destroy(struct machine_cache *c)
{
    if (!c)
        return;
    for (struct cached *e = c->head, *next; e; e = next) {
        next = e->next;
        cached_free(e);
    }
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static bool same_row(const struct cached *e, const struct machine_record *rec)
{
    return e->updated_at == rec->updated_at && strcmp(e->definition, rec->definition) == 0;
}

/* Unlinks *pp (under mu); freed now unless a decision still uses it. */
static void unlink_entry(struct machine_cache *c, struct cached **pp)
{
    struct cached *e = *pp;

    *pp = e->next;
    c->n--;
    e->listed = false;
    if (e->refs == 0)
        cached_free(e);
}

int machine_cache_get(struct machine_cache *c, const struct machine_record *rec, const struct machine **out)
{
    struct cached *e, **pp;
    int rc;

    *out = NULL;
    pthread_mutex_lock(&c->mu);
    for (e = c->head; e; e = e->next) {
        if (strcmp(e->m.name, rec->name) == 0 && same_row(e, rec)) {
            e->refs++;
            *out = &e->m;
            break;
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (*out)
        return 0;
    if (!(e = calloc(1, sizeof *e)) || !(e->definition = strdup(rec->definition))) {
        free(e);
        return HOOKD_ENOMEM;
    }
    rc = machine_from_record(rec, &e->m);
    if (rc == 0 && strcmp(e->m.name, rec->name) != 0)
        rc = HOOKD_EIO; /* the row's name and its definition's disagree (plain SQL) */
    if (rc) {
        cached_free(e);
        return rc;
    }
    e->updated_at = rec->updated_at;
    e->refs = 1;
    e->listed = true;
    pthread_mutex_lock(&c->mu);
    /* The machine's older text, and past the bound an unused entry, leave the list. */
    for (pp = &c->head; *pp;) {
        if (strcmp((*pp)->m.name, rec->name) == 0)
            unlink_entry(c, pp);
        else
            pp = &(*pp)->next;
    }
    if (c->n >= MACHINE_CACHE_MAX) {
        struct cached **victim = NULL;
        for (pp = &c->head; *pp; pp = &(*pp)->next)
            if ((*pp)->refs == 0)
                victim = pp;
        if (victim)
            unlink_entry(c, victim);
    }
    e->next = c->head;
    c->head = e;
    c->n++;
    pthread_mutex_unlock(&c->mu);
    *out = &e->m;
    return 0;
}

void machine_cache_put(struct machine_cache *c, const struct machine *m)
{
    struct cached *e;

    if (!m)
        return;
    e = (struct cached *)((char *)m - offsetof(struct cached, m));
    pthread_mutex_lock(&c->mu);
    e->refs--;
    bool gone = !e->listed && e->refs == 0;
    pthread_mutex_unlock(&c->mu);
    if (gone)
        cached_free(e);
}
