/* The outbound path's shared rate limit for store-unavailable errors (see outage.h). */
#include "outbound/outage.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

#include "hookd.h"
#include "log.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct log_limiter lim; /* under mu */
static atomic_bool logged;     /* something was logged since the last recovery */

bool outage_error(int err) { return err == HOOKD_EUNAVAIL; }

void outage_log(const char *part, const char *fmt, ...)
{
    char text[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&mu);
    log_limited(&lim, LOG_WARN, part, "%s", text);
    atomic_store(&logged, true);
    pthread_mutex_unlock(&mu);
}

void outage_over(const char *part)
{
    /* The common case, no outage, costs one atomic load. */
    if (!atomic_exchange(&logged, false))
        return;
    pthread_mutex_lock(&mu);
    log_limiter_reset(&lim, part, "store access");
    pthread_mutex_unlock(&mu);
}
