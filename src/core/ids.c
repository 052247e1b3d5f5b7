/*
 * Time-sortable identifiers (PREFIX + 12 hex digits of unix ms + 20 random hex
 * digits) and the CSPRNG every other module draws from. Within one process the
 * ids are strictly increasing: an id made in the same millisecond as the last
 * one (or after the clock stepped back) takes the last one's time and its
 * random part plus one, so "received in this order" survives a tie in the
 * millisecond (the inbox claims and audits by received time, then id).
 */
#include "core/ids.h"

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "core/clock.h"

#define ID_RANDOM_BYTES 10 /* 20 hex digits */

void random_bytes(void *buf, size_t n)
{
    unsigned char *p = buf;

    /* RAND_bytes takes an int; feed large requests in chunks. */
    while (n > 0) {
        int chunk = n > INT_MAX ? INT_MAX : (int)n;
        if (RAND_bytes(p, chunk) != 1) {
            fputs("hookd: CSPRNG failure, aborting\n", stderr);
            abort();
        }
        p += chunk;
        n -= (size_t)chunk;
    }
}

/*
 * The random parts of ids are drawn ID_POOL_IDS at a time: one RAND_bytes
 * call costs about as much as an accepted item's whole index write (its
 * locking and DRBG state work, whatever the length), and a busy writer makes
 * an id in a new millisecond for nearly every item it accepts. The bytes are
 * the CSPRNG's all the same; an id's random part is public once the id is,
 * so keeping the next ones in memory exposes nothing a caller could not see.
 * Each thread keeps its own pool (no lock); a fork empties the child's, so
 * parent and child never hand out the same bytes.
 */
#define ID_POOL_IDS 32
static _Thread_local unsigned char id_pool[ID_POOL_IDS * ID_RANDOM_BYTES];
static _Thread_local size_t id_pool_left;
static pthread_once_t id_pool_once = PTHREAD_ONCE_INIT;

static void id_pool_forget(void) { id_pool_left = 0; }

static void id_pool_register(void)
{
    if (pthread_atfork(NULL, NULL, id_pool_forget) != 0) {
        fputs("hookd: pthread_atfork failed, aborting\n", stderr);
        abort();
    }
}

static void id_random(unsigned char rnd[ID_RANDOM_BYTES])
{
    if (id_pool_left == 0) {
        pthread_once(&id_pool_once, id_pool_register);
        random_bytes(id_pool, sizeof id_pool);
        id_pool_left = sizeof id_pool;
    }
    id_pool_left -= ID_RANDOM_BYTES;
    memcpy(rnd, id_pool + id_pool_left, ID_RANDOM_BYTES);
    explicit_bzero(id_pool + id_pool_left, ID_RANDOM_BYTES); /* handed out once */
}

/*
 * The prefix is taken as given ("evt_"); a prefix that lacks the trailing
 * underscore gets one, so "evt" and "evt_" produce the same shape. A prefix
 * too long to fit is truncated so the result always has its 32 digits.
 */
static pthread_mutex_t id_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t id_last_ms;
static unsigned char id_last_rnd[ID_RANDOM_BYTES];

/* The time and random part of the next id, after the last one made here. */
static void id_next(uint64_t *ms, unsigned char rnd[ID_RANDOM_BYTES])
{
    bool carry = true, fresh;

    /* Only an id of a new millisecond draws randomness (outside the lock); one within the last millisecond is
     * the last one plus one, so the draw would be thrown away (a CSPRNG call per id at thousands a second). */
    pthread_mutex_lock(&id_lock);
    fresh = *ms > id_last_ms;
    pthread_mutex_unlock(&id_lock);
    if (fresh)
        id_random(rnd);
    pthread_mutex_lock(&id_lock);
    if (!fresh || *ms <= id_last_ms) { /* the last id's millisecond, or another thread's since the look */
        *ms = id_last_ms;
        memcpy(rnd, id_last_rnd, ID_RANDOM_BYTES);
        for (size_t i = ID_RANDOM_BYTES; i-- > 0 && carry;)
            carry = ++rnd[i] == 0;
        if (carry) /* 2^80 ids in one millisecond: borrow the next one */
            *ms = id_last_ms + 1;
    }
    id_last_ms = *ms;
    memcpy(id_last_rnd, rnd, ID_RANDOM_BYTES);
    pthread_mutex_unlock(&id_lock);
}

int64_t id_new_time(char out[HOOKD_ID_MAX], const char *prefix)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char rnd[ID_RANDOM_BYTES];
    uint64_t ms = (uint64_t)clock_now_ms();
    size_t plen = prefix != NULL ? strlen(prefix) : 0;
    size_t max_prefix = HOOKD_ID_MAX - 1 - 32 - 1;
    size_t o = 0;

    id_next(&ms, rnd);
    if (plen > max_prefix)
        plen = max_prefix;
    memcpy(out, prefix != NULL ? prefix : "", plen);
    o = plen;
    if (plen > 0 && out[plen - 1] != '_')
        out[o++] = '_';
    for (int shift = 44; shift >= 0; shift -= 4)
        out[o++] = hex[(ms >> shift) & 0xf];
    for (size_t i = 0; i < sizeof rnd; i++) {
        out[o++] = hex[rnd[i] >> 4];
        out[o++] = hex[rnd[i] & 0xf];
    }
    out[o] = '\0';
    return (int64_t)ms;
}

void id_new(char out[HOOKD_ID_MAX], const char *prefix) { (void)id_new_time(out, prefix); }

static bool id_char_ok(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == ':' || c == '-';
}

bool id_is_valid(const char *id)
{
    size_t n = 0;

    if (id == NULL)
        return false;
    for (; id[n] != '\0'; n++) {
        if (n >= HOOKD_ID_MAX - 1 || !id_char_ok((unsigned char)id[n]))
            return false;
    }
    return n > 0;
}
