/* Secrets at rest around the store: the server key at start and in rotate-key, and the sealed admin token. */
#include "secrets.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/secret_box.h"
#include "hookd.h"
#include "log.h"

#define META_KEY_ID "secret_key_id" /* hookd_meta: the id of the key the store's secrets are sealed under */
#define META_TOKEN "admin_token"
#define TOKEN_AAD "meta:admin_token"

const char *secrets_sqlite_path(const char *dsn)
{
    if (strncmp(dsn, "sqlite:", 7) == 0)
        return dsn + 7;
    if (strstr(dsn, "://") != NULL)
        return NULL;
    return dsn;
}

/* The key file: configured, else beside the SQLite file; "" when there is none (PostgreSQL, :memory:). */
static void key_path(const struct config *cfg, char *out, size_t n)
{
    const char *db = secrets_sqlite_path(cfg->store);

    if (cfg->secret_key_file[0] != '\0')
        snprintf(out, n, "%s", cfg->secret_key_file);
    else if (db != NULL && strcmp(db, ":memory:") != 0)
        snprintf(out, n, "%s.secret-key", db);
    else
        out[0] = '\0';
}

int secrets_token_get(struct store *s, char **token)
{
    char *stored = NULL;
    int r = store_meta_get(s, META_TOKEN, &stored);

    *token = NULL;
    if (r == 0)
        r = secret_box_open(TOKEN_AAD, stored, token, NULL);
    secret_text_free(stored);
    return r == HOOKD_EINVAL ? HOOKD_EIO : r;
}

int secrets_token_set(struct store *s, const char *token)
{
    char *sealed = NULL;
    int r = secret_box_seal(TOKEN_AAD, token, &sealed);

    if (r == 0)
        r = store_meta_set(s, META_TOKEN, sealed);
    secret_text_free(sealed);
    return r;
}

/*
 * Re-seals every secret under the sealing key in one transaction: each endpoint and source is read
 * (opened under either key) and written back, the token likewise, and the key id recorded. Without
 * force nothing is written when every value already is sealed under the sealing key.
 */
static int reseal_all(struct store *s, bool force, size_t *count)
{
    struct endpoint_list eps = {0};
    struct source_list srcs = {0};
    unsigned long stale = secret_box_stale_count();
    char *token = NULL;
    int r = store_begin(s), tr;

    *count = 0;
    if (r != 0)
        return r;
    r = store_endpoint_list_all(s, &eps);
    if (r == 0)
        r = store_source_list_all(s, &srcs);
    tr = r == 0 ? secrets_token_get(s, &token) : 0;
    if (r == 0 && tr != 0 && tr != HOOKD_ENOTFOUND)
        r = tr;
    if (r == 0 && (force || secret_box_stale_count() != stale)) {
        for (size_t i = 0; r == 0 && i < eps.n; i++)
            r = store_endpoint_update(s, &eps.items[i]);
        for (size_t i = 0; r == 0 && i < srcs.n; i++)
            r = store_source_update(s, &srcs.items[i]);
        if (r == 0 && token != NULL)
            r = secrets_token_set(s, token);
        *count = eps.n + srcs.n + (token != NULL);
    }
    if (r == 0)
        r = store_meta_set(s, META_KEY_ID, secret_box_key_id());
    if (r == 0)
        r = store_commit(s);
    else if (store_rollback(s) != 0)
        log_warn("secrets", "rollback failed after: %s", hookd_strerror(r));
    endpoint_list_free(&eps);
    source_list_free(&srcs);
    secret_text_free(token);
    return r;
}

/*
 * The configured key into *key: HOOKD_SERVER_SECRET_KEY, else the key file (generated when absent,
 * if generate and the store holds nothing sealed yet). *from names it for messages.
 */
static int key_settle(const struct config *cfg, const char *stored_id, bool generate, struct secret_key *key,
                      char *from, size_t from_len)
{
    char path[1100];
    int r;

    if (cfg->secret_key[0] != '\0') {
        snprintf(from, from_len, "HOOKD_SERVER_SECRET_KEY");
        return secret_key_parse(cfg->secret_key, key);
    }
    key_path(cfg, path, sizeof path);
    snprintf(from, from_len, "%s", path);
    if (path[0] == '\0') {
        if (secrets_sqlite_path(cfg->store) != NULL) { /* :memory: — nothing is at rest */
            snprintf(from, from_len, "a key of this process (in-memory store)");
            return secret_key_generate(key);
        }
        log_error("secrets", "a PostgreSQL store needs the key that seals secrets at rest: set [server] "
                             "secret_key_file or HOOKD_SERVER_SECRET_KEY, the same on every node (docs/multinode.md)");
        return HOOKD_EINVAL;
    }
    r = secret_key_load_file(path, key);
    if (r == HOOKD_ENOTFOUND && generate && stored_id == NULL) {
        r = secret_key_write_file(path, true, key);
        if (r == 0)
            log_warn("secrets", "generated the key that seals secrets at rest: %s (mode 0600); back it up, and give "
                                "every node of a cluster the same key", path);
        else
            log_error("secrets", "cannot write the new key file %s: %s", path, strerror(errno));
        return r;
    }
    if (r == HOOKD_ENOTFOUND)
        log_error("secrets", "the key file %s does not exist, but the store's secrets are sealed under key %s: "
                             "restore the key file (or set HOOKD_SERVER_SECRET_KEY)", path, stored_id ? stored_id : "?");
    else if (r != 0)
        log_error("secrets", "cannot read the key file %s: %s", path,
                  r == HOOKD_EINVAL ? "not 32 bytes as base64 or hex" : strerror(errno));
    return r;
}

/* The id recorded with the store's sealed secrets, into id ("" when none yet). */
static int stored_key_id(struct store *s, char id[SECRET_KEY_ID_LEN])
{
    char *v = NULL;
    int r = store_meta_get(s, META_KEY_ID, &v);

    id[0] = '\0';
    if (r == 0)
        snprintf(id, SECRET_KEY_ID_LEN, "%s", v);
    free(v);
    return r == HOOKD_ENOTFOUND ? 0 : r;
}

/* A rotation that committed but stopped before its key file was renamed: PATH.new holds the store's key. */
static bool rotation_finish(const struct config *cfg, const char *stored_id, struct secret_key *key)
{
    char path[1100], pending[1200];
    struct secret_key next;
    bool done = false;

    key_path(cfg, path, sizeof path);
    if (path[0] == '\0' || cfg->secret_key[0] != '\0')
        return false;
    snprintf(pending, sizeof pending, "%s.new", path);
    if (secret_key_load_file(pending, &next) == 0 && strcmp(next.id, stored_id) == 0 && rename(pending, path) == 0) {
        log_warn("secrets", "finished an interrupted rotate-key: %s is now the new key %s", path, next.id);
        secret_key_wipe(key);
        *key = next;
        done = true;
    }
    secret_key_wipe(&next);
    return done;
}

int secrets_prepare(struct store *s, const struct config *cfg)
{
    char stored[SECRET_KEY_ID_LEN], from[1100];
    struct secret_key key;
    size_t count = 0;
    int r = stored_key_id(s, stored);

    memset(&key, 0, sizeof key);
    if (r != 0) {
        log_error("secrets", "cannot read the store's key id: %s", hookd_strerror(r));
        return r;
    }
    r = key_settle(cfg, stored[0] ? stored : NULL, true, &key, from, sizeof from);
    if (r != 0)
        goto out;
    if (stored[0] != '\0' && strcmp(stored, key.id) != 0 && !rotation_finish(cfg, stored, &key)) {
        log_error("secrets", "wrong key: the store's secrets are sealed under key %s, the key from %s is %s "
                             "(wrong secret_key_file or HOOKD_SERVER_SECRET_KEY?); refusing to start", stored, from,
                  key.id);
        r = HOOKD_EINVAL;
        goto out;
    }
    secret_box_use(&key, NULL);
    r = reseal_all(s, stored[0] == '\0', &count);
    if (r != 0)
        log_error("secrets", "cannot seal the store's secrets: %s", hookd_strerror(r));
    else if (count > 0)
        log_info("secrets", "sealed %zu stored secret sets under key %s", count, key.id);
out:
    secret_key_wipe(&key);
    return r;
}

int secrets_rotate(struct store *s, const struct config *cfg, const char *new_key_file)
{
    char stored[SECRET_KEY_ID_LEN], from[1100], path[1100], pending[1200];
    struct secret_key old, next;
    size_t count = 0;
    int r = stored_key_id(s, stored);

    memset(&old, 0, sizeof old);
    memset(&next, 0, sizeof next);
    if (r == 0)
        r = key_settle(cfg, stored[0] ? stored : NULL, false, &old, from, sizeof from);
    if (r != 0)
        goto out;
    if (stored[0] != '\0' && strcmp(stored, old.id) != 0) {
        log_error("secrets", "wrong key: the store's secrets are sealed under key %s, the key from %s is %s", stored,
                  from, old.id);
        r = HOOKD_EINVAL;
        goto out;
    }
    if (new_key_file != NULL) {
        r = secret_key_load_file(new_key_file, &next);
        if (r == HOOKD_ENOTFOUND)
            r = secret_key_write_file(new_key_file, true, &next);
        if (r != 0) {
            log_error("secrets", "cannot read or write the new key file %s", new_key_file);
            goto out;
        }
    } else if (cfg->secret_key[0] != '\0') {
        log_error("secrets", "the key comes from HOOKD_SERVER_SECRET_KEY: give the new one with --new-key-file");
        r = HOOKD_EINVAL;
        goto out;
    }
    key_path(cfg, path, sizeof path);
    if (cfg->secret_key[0] != '\0')
        path[0] = '\0'; /* the environment's key is replaced by the operator */
    /* The new key is on disk before the store needs it: a crash after the commit leaves PATH.new,
     * which the next start (secrets_prepare) recognises by its id and renames. */
    if (path[0] != '\0') {
        snprintf(pending, sizeof pending, "%s.new", path);
        r = secret_key_write_file(pending, new_key_file == NULL, &next);
        if (r != 0) {
            log_error("secrets", "cannot write %s", pending);
            goto out;
        }
    }
    if (strcmp(next.id, old.id) == 0) {
        log_error("secrets", "the new key is the current key");
        r = HOOKD_EINVAL;
        goto out;
    }
    secret_box_use(&next, &old);
    r = reseal_all(s, true, &count);
    if (r != 0) {
        log_error("secrets", "rotation failed, nothing changed: %s", hookd_strerror(r));
        if (path[0] != '\0')
            (void)unlink(pending);
        goto out;
    }
    if (path[0] != '\0' && rename(pending, path) != 0) {
        log_error("secrets", "the store is sealed under the new key, but %s could not be renamed to %s: %s "
                             "(the next start finishes it)", pending, path, strerror(errno));
        r = HOOKD_EIO;
        goto out;
    }
    printf("re-sealed %zu secret sets under key %s (was %s)\n", count, next.id, old.id);
    if (path[0] != '\0')
        printf("key file: %s\n", path);
    else
        printf("new key: %s — set HOOKD_SERVER_SECRET_KEY to its contents (or secret_key_file to it) on every node\n",
               new_key_file);
out:
    secret_box_use(NULL, NULL);
    secret_key_wipe(&old);
    secret_key_wipe(&next);
    return r;
}
