/* A small pool of read connections shared by the HTTP handler threads. */
#ifndef HOOKD_STORE_POOL_H
#define HOOKD_STORE_POOL_H
#include "store/store.h"

struct store_pool;

__attribute__((warn_unused_result)) int store_pool_create(const char *dsn, int max_idle, struct store_pool **out);
void store_pool_destroy(struct store_pool *p); /* all connections must have been put back */
/* Borrows a connection (opening one when none is idle). */
__attribute__((warn_unused_result)) int store_pool_get(struct store_pool *p, struct store **out);
/* Returns it; a connection that saw an I/O error may be passed with broken = true to be closed. */
void store_pool_put(struct store_pool *p, struct store *s, bool broken);
#endif
