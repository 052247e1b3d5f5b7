/*
 * The notification hub: how one part of the daemon tells the others that
 * something changed, without knowing who listens. Parts subscribe at wiring
 * time (daemon.c) and publishers call hub_notify() after their commit.
 *
 *   hub_create / hub_destroy   the hub (subscriptions are fixed before threads start)
 *   hub_subscribe              call fn(arg) on every notification of a topic
 *   hub_notify                 run a topic's subscribers on the caller's thread
 *
 * Subscribers must be cheap and never block: a wake-up (an eventfd write, a
 * flag and a condition signal), not work. They may run on any thread, several
 * at once.
 */
#ifndef HOOKD_HUB_H
#define HOOKD_HUB_H

enum hub_topic {
    HUB_OUTBOX_CHANGED,    /* outbox rows committed by this process */
    HUB_ENDPOINTS_CHANGED, /* an endpoint was created, updated, disabled, enabled, deleted or rotated */
    HUB_DELIVERIES_DUE,    /* deliveries became due outside the dispatcher's knowledge (replay, start-up) */
    HUB_INBOX_CHANGED,     /* inbox items committed or made due again */
    HUB_SOURCES_CHANGED,   /* an inbound source was created, updated or deleted */
    HUB_TOPICS,
};

#define HUB_MAX_SUBSCRIBERS 8 /* per topic */

typedef void (*hub_fn)(void *arg);
struct hub;

__attribute__((warn_unused_result)) int hub_create(struct hub **out);
void hub_destroy(struct hub *h);
/* Before any hub_notify: subscriptions are not locked. HOOKD_EINVAL for a bad topic, HOOKD_EINVAL also when the topic is full. */
__attribute__((warn_unused_result)) int hub_subscribe(struct hub *h, enum hub_topic topic, hub_fn fn, void *arg);
/* A NULL hub is a no-op, so parts built without one (tests) need no checks. */
void hub_notify(struct hub *h, enum hub_topic topic);
const char *hub_topic_name(enum hub_topic topic);
#endif
