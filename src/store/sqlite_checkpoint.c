/*
 * SQLite backend, the writer's WAL checkpoints aside: a thread and a
 * connection of the store's own copy the WAL into the database file, so the
 * writer's commits do not (store_checkpoint_aside).
 */
#include "store/sqlite_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "log.h"

#define LOG_PART "store"

/*
 * SQLite checkpoints the WAL in the connection whose commit takes it past
 * wal_autocheckpoint (1000 pages): for the writer, a copy of 4 MB into the
 * database file and its fsync on the thread every request waits for, tens of
 * milliseconds every second or two under load (the ack p99 spikes of bench
 * inbound-latency). Aside, the writer's commits only wake a thread of the
 * store's own with a connection of its own once CKPT_ASIDE_PAGES more pages
 * are in the WAL (the same pace as SQLite's own), and that thread copies the
 * WAL passively (readers and the writer go on). A checkpoint running beside
 * commits rarely finds the WAL whole, so SQLite seldom starts it over: past
 * CKPT_WRITER_PAGES the writer checkpoints itself, a short step by then (the
 * thread has copied nearly all of it), after which the WAL starts over.
 * That step runs after the commit's answers (store_checkpoint_due: the
 * writer calls it once it has answered the batch), not inside the commit:
 * it syncs the database file, a flush every request of the batch would
 * otherwise wait for. Past CKPT_HOOK_PAGES (a connection whose caller never
 * asks) the commit runs it itself, as SQLite's own hook would.
 * Durability is the commit's own fsync of the WAL, as before; the thread's
 * checkpoints sync the database file before SQLite may reuse the WAL.
 */
#define CKPT_ASIDE_PAGES 1000
#define CKPT_WRITER_PAGES 16000
#define CKPT_HOOK_PAGES (2 * CKPT_WRITER_PAGES)
#define CKPT_MIN_GAP_MS 20

struct sq_checkpointer {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool due, stop;
    int woken_at;      /* the WAL's pages when the thread was last woken (writer thread only) */
    bool writer_due;   /* the WAL passed CKPT_WRITER_PAGES: store_checkpoint_due has its step (writer thread only) */
    sqlite3 *db;  /* the thread's own connection */
    struct log_limiter lim;
};

static void *checkpointer_main(void *arg)
{
    struct sq_checkpointer *c = arg;

    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->due && !c->stop)
            pthread_cond_wait(&c->cv, &c->mu);
        if (c->stop)
            break;
        c->due = false;
        pthread_mutex_unlock(&c->mu);
        int rc = sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        if (rc != SQLITE_OK && (rc & 0xff) != SQLITE_BUSY)
            log_limited(&c->lim, LOG_WARN, LOG_PART, "sqlite: checkpoint: %s", sqlite3_errmsg(c->db));
        usleep(CKPT_MIN_GAP_MS * 1000);
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* After each commit of the writer's connection, with the WAL's size in pages. */
static int checkpoint_hook(void *arg, sqlite3 *db, const char *name, int pages)
{
    struct sq_checkpointer *c = arg;

    if (pages >= CKPT_HOOK_PAGES) {
        /* Nobody ran the step it was given: what SQLite's own hook does. A failed checkpoint fails no
         * commit (the next one tries again). */
        (void)sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        c->woken_at = 0;
        c->writer_due = false;
        return SQLITE_OK;
    }
    if (pages >= CKPT_WRITER_PAGES) {
        c->writer_due = true; /* after the answers: store_checkpoint_due */
        return SQLITE_OK;
    }
    if (pages < c->woken_at)
        c->woken_at = 0; /* the WAL started over */
    if (pages - c->woken_at < CKPT_ASIDE_PAGES)
        return SQLITE_OK;
    c->woken_at = pages;
    pthread_mutex_lock(&c->mu);
    if (!c->due) {
        c->due = true;
        pthread_cond_signal(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
    return SQLITE_OK;
}

void sqlite_checkpoint_due(struct store *s)
{
    struct sq_checkpointer *c = s->ckpt;
    int rc;

    if (!c || !c->writer_due)
        return;
    c->writer_due = false;
    c->woken_at = 0;
    /* PASSIVE: it waits for no reader; a busy or failed step is tried again after the next commit. */
    rc = sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    if (rc != SQLITE_OK && (rc & 0xff) != SQLITE_BUSY)
        log_limited(&c->lim, LOG_WARN, LOG_PART, "sqlite: checkpoint: %s", sqlite3_errmsg(s->db));
}

void sqlite_checkpoint_stop(struct store *s)
{
    struct sq_checkpointer *c = s->ckpt;

    if (!c)
        return;
    sqlite3_wal_hook(s->db, NULL, NULL); /* its argument goes with the thread */
    s->ckpt = NULL;
    pthread_mutex_lock(&c->mu);
    c->stop = true;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    sqlite3_close_v2(c->db);
    free(c);
}

int sqlite_checkpoint_aside(struct store *s)
{
    const char *path = sqlite3_db_filename(s->db, "main");
    struct sq_checkpointer *c;
    int rc;

    if (s->ckpt)
        return 0;
    if (!path || path[0] == '\0')
        return HOOKD_EINVAL; /* a memory database has no WAL */
    c = calloc(1, sizeof *c);
    if (!c)
        return HOOKD_ENOMEM;
    c->lim = (struct log_limiter){.interval_ms = 10000};
    rc = sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(c->db, "PRAGMA synchronous=FULL", NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
        log_warn(LOG_PART, "sqlite: cannot open the checkpoint connection: %s",
                 c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
        sqlite3_close_v2(c->db);
        free(c);
        return HOOKD_EUNAVAIL;
    }
    sqlite3_busy_timeout(c->db, 100);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    if (pthread_create(&c->thread, NULL, checkpointer_main, c) != 0) {
        pthread_cond_destroy(&c->cv);
        pthread_mutex_destroy(&c->mu);
        sqlite3_close_v2(c->db);
        free(c);
        return HOOKD_ENOMEM;
    }
    s->ckpt = c;
    sqlite3_wal_hook(s->db, checkpoint_hook, c); /* replaces SQLite's own (wal_autocheckpoint) */
    return 0;
}
