/* The notification hub: fixed subscriber lists per topic, run on the notifier's thread. */
#include "hub.h"

#include <stdlib.h>

#include "hookd.h"

struct subscriber {
    hub_fn fn;
    void *arg;
};

struct hub {
    struct subscriber subs[HUB_TOPICS][HUB_MAX_SUBSCRIBERS];
    int n[HUB_TOPICS];
};

int hub_create(struct hub **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? 0 : HOOKD_ENOMEM;
}

void hub_destroy(struct hub *h) { free(h); }

int hub_subscribe(struct hub *h, enum hub_topic topic, hub_fn fn, void *arg)
{
    if (!h || !fn || (int)topic < 0 || topic >= HUB_TOPICS || h->n[topic] >= HUB_MAX_SUBSCRIBERS)
        return HOOKD_EINVAL;
    h->subs[topic][h->n[topic]++] = (struct subscriber){fn, arg};
    return 0;
}

void hub_notify(struct hub *h, enum hub_topic topic)
{
    if (!h || (int)topic < 0 || topic >= HUB_TOPICS)
        return;
    /* The lists do not change once threads run (hub_subscribe's rule), so no lock. */
    for (int i = 0; i < h->n[topic]; i++)
        h->subs[topic][i].fn(h->subs[topic][i].arg);
}

const char *hub_topic_name(enum hub_topic topic)
{
    static const char *const names[HUB_TOPICS] = {
        [HUB_OUTBOX_CHANGED] = "outbox_changed",
        [HUB_ENDPOINTS_CHANGED] = "endpoints_changed",
        [HUB_DELIVERIES_DUE] = "deliveries_due",
        [HUB_INBOX_CHANGED] = "inbox_changed",
        [HUB_SOURCES_CHANGED] = "sources_changed",
    };
    return (int)topic >= 0 && topic < HUB_TOPICS ? names[topic] : "?";
}
