/*
 * Record readers of the operations tables, the same for both backends:
 * replays (with their progress columns) and account tokens. A row whose
 * kind or scope is not one hookd writes (an edit by hand) reads as EIO,
 * never as a wider permission.
 */
#include <stdlib.h>
#include <string.h>

#include "store/store_common.h"

static char *col_str(const struct store_row *r, int col, bool *ok) { return r->ops->str(r, col, ok); }
static int64_t col_i64(const struct store_row *r, int col) { return r->ops->i64(r, col); }
static int col_int(const struct store_row *r, int col) { return (int)r->ops->i64(r, col); }

int store_read_replay(const struct store_row *r, void *item)
{
    struct replay *rp = item;
    const char *kind = r->ops->text(r, 3);
    bool ok = true;

    memset(rp, 0, sizeof *rp);
    store_row_id(r, 0, rp->id);
    rp->actor = col_str(r, 1, &ok);
    rp->account = col_str(r, 2, &ok);
    rp->filter = col_str(r, 4, &ok);
    rp->created_at = col_i64(r, 5);
    rp->finished_at = col_i64(r, 6);
    rp->matched = col_int(r, 7);
    rp->replayed = col_int(r, 8);
    rp->skipped = col_int(r, 9);
    rp->pending = col_int(r, 10);
    rp->delivered = col_int(r, 11);
    rp->failed = col_int(r, 12);
    rp->superseded = col_int(r, 13);
    if (!ok) {
        replay_free(rp);
        return HOOKD_ENOMEM;
    }
    if (replay_kind_parse(kind, &rp->kind) != 0) {
        replay_free(rp);
        return HOOKD_EIO;
    }
    return 0;
}

int store_read_token(const struct store_row *r, void *item)
{
    struct api_token *t = item;
    const char *scope = r->ops->text(r, 2);
    const char *hash = r->ops->text(r, 3);
    bool ok = true;

    memset(t, 0, sizeof *t);
    store_row_id(r, 0, t->id);
    t->account = col_str(r, 1, &ok);
    t->description = col_str(r, 4, &ok);
    t->created_by = col_str(r, 5, &ok);
    t->created_at = col_i64(r, 6);
    t->expires_at = col_i64(r, 7);
    t->revoked_at = col_i64(r, 8);
    if (hash && strlen(hash) == SHA256_HEX_LEN - 1)
        memcpy(t->hash, hash, SHA256_HEX_LEN);
    if (!ok) {
        api_token_free(t);
        return HOOKD_ENOMEM;
    }
    /* A malformed hash (an edit by hand) reads as none: such a token matches nothing, and the others load. */
    if (!t->account || token_scope_parse(scope, &t->scope) != 0) {
        api_token_free(t);
        return HOOKD_EIO;
    }
    return 0;
}

void store_free_replay(void *item) { replay_free(item); }
void store_free_token(void *item) { api_token_free(item); }
