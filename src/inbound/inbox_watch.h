/*
 * Inbox wake-ups from other nodes (PostgreSQL): a thread with a connection of
 * its own LISTENs on hookd_inbox and notifies the hub's inbox_changed when an
 * item is committed anywhere (or put back to pending by a replay), so this
 * node's workers claim within milliseconds instead of at their next poll.
 * SQLite has one node: nothing to watch, no thread.
 *
 *   inbox_watch_start   the thread (none, *out NULL, on SQLite)
 *   inbox_watch_stop    stops and joins it (NULL is fine)
 */
#ifndef HOOKD_INBOUND_INBOX_WATCH_H
#define HOOKD_INBOUND_INBOX_WATCH_H

struct hub;
struct inbox_watch;

__attribute__((warn_unused_result)) int inbox_watch_start(const char *store_url, struct hub *hub,
                                                          struct inbox_watch **out);
void inbox_watch_stop(struct inbox_watch *w);
#endif
