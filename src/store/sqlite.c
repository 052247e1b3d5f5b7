/*
 * The SQLite store backend: connection set-up (WAL, synchronous=FULL), the
 * migrations runner, transactions and savepoints, change detection through
 * PRAGMA data_version, hookd_meta, the method table, and the helpers the
 * table families share (statements, binding, the row readers). The families
 * themselves are in sqlite_events.c, sqlite_endpoints.c and
 * sqlite_deliveries.c.
 */
#include "store/sqlite_internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "log.h"
#include "store/schema/sqlite.h"

#define BUSY_TIMEOUT_MS 5000
#define LOG_PART "store"

/* ---- errors --------------------------------------------------------------- */

/* Primary (and a few extended) SQLite codes and what callers see. */
static const struct {
    int code;
    int err;
    bool quiet; /* expected in normal operation: not logged */
} error_map[] = {
    {SQLITE_CONSTRAINT_UNIQUE, HOOKD_EEXISTS, true},
    {SQLITE_CONSTRAINT_PRIMARYKEY, HOOKD_EEXISTS, true},
    {SQLITE_CONSTRAINT, HOOKD_EINVAL, false},
    {SQLITE_BUSY, HOOKD_EBUSY, true},
    {SQLITE_LOCKED, HOOKD_EBUSY, true},
    {SQLITE_NOMEM, HOOKD_ENOMEM, false},
    {SQLITE_CANTOPEN, HOOKD_EUNAVAIL, false},
    {SQLITE_RANGE, HOOKD_EINVAL, false},
    {SQLITE_TOOBIG, HOOKD_EINVAL, false},
    {SQLITE_MISMATCH, HOOKD_EINVAL, false},
};

int sq_error(struct store *s, int rc)
{
    if (rc == SQLITE_OK || rc == SQLITE_DONE || rc == SQLITE_ROW)
        return 0;
    for (size_t i = 0; i < sizeof error_map / sizeof error_map[0]; i++) {
        /* An extended code matches exactly; a primary one matches its family. */
        bool extended = error_map[i].code > 0xff;
        if (extended ? rc == error_map[i].code : (rc & 0xff) == error_map[i].code) {
            if (!error_map[i].quiet)
                log_warn(LOG_PART, "sqlite: %s (%d)", s && s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc), rc);
            return error_map[i].err;
        }
    }
    /* Everything else (I/O, full disk, corruption, SQL errors) is an I/O failure of the store. */
    log_warn(LOG_PART, "sqlite: %s (%d)", s && s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc), rc);
    return HOOKD_EIO;
}

/* ---- statements ----------------------------------------------------------- */

int sq_stmt(struct store *s, int slot, const char *sql, sqlite3_stmt **out)
{
    int rc;

    *out = NULL;
    if (slot < 0 || slot >= SQ_SLOTS)
        return HOOKD_EINVAL;
    if (!s->stmts[slot]) {
        rc = sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s->stmts[slot], NULL);
        if (rc != SQLITE_OK)
            return sq_error(s, rc);
    }
    *out = s->stmts[slot];
    return 0;
}

void sq_reset(sqlite3_stmt *st)
{
    if (st) {
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
    }
}

int sq_run(struct store *s, sqlite3_stmt *st, int *changes)
{
    int rc = sqlite3_step(st);
    int result = rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : sq_error(s, rc);

    if (changes)
        *changes = result == 0 ? sqlite3_changes(s->db) : 0;
    sq_reset(st);
    return result;
}

int sq_exec(struct store *s, int slot, const char *sql)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, slot, sql, &st);

    if (result == 0)
        result = sq_run(s, st, NULL);
    return result;
}

/*
 * Inside a transaction (the writer's batch) the op's own savepoint already
 * makes a failed op undo all of its work, and a savepoint per method is not
 * free: each one copies every page it touches to the statement journal
 * (about a third of delivery_complete's time). So the method savepoint is
 * only taken in autocommit mode, where it is the whole transaction.
 */
int sq_atomic_begin(struct store *s)
{
    int rc;

    /* A method that calls others: only the outermost pair takes the savepoint. */
    if (s->atomic_depth++ > 0)
        return 0;
    s->atomic_own = sqlite3_get_autocommit(s->db) != 0;
    rc = s->atomic_own ? sq_exec(s, SQ_ATOMIC_BEGIN, "SAVEPOINT hookd_method") : 0;
    if (rc) {
        s->atomic_depth = 0; /* the caller returns without sq_atomic_end */
        s->atomic_own = false;
    }
    return rc;
}

int sq_atomic_end(struct store *s, int result)
{
    int rc;

    if (s->atomic_depth > 0 && --s->atomic_depth > 0)
        return result;
    if (!s->atomic_own)
        return result;
    s->atomic_own = false;
    if (result >= 0) {
        rc = sq_exec(s, SQ_ATOMIC_RELEASE, "RELEASE hookd_method");
        if (rc == 0)
            return result;
        result = rc;
    }
    /* If SQLite already rolled the whole transaction back (full disk, I/O
     * error), the savepoint is gone and these fail: the first error stands. */
    if (sq_exec(s, SQ_ATOMIC_ROLLBACK, "ROLLBACK TO hookd_method") == 0 &&
        sq_exec(s, SQ_ATOMIC_ROLLBACK_RELEASE, "RELEASE hookd_method") != 0)
        log_warn(LOG_PART, "sqlite: cannot release a rolled back savepoint");
    return result;
}

int sq_bind_text(sqlite3_stmt *st, int i, const char *v)
{
    return v ? sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC) : sqlite3_bind_null(st, i);
}

int sq_bind_time(sqlite3_stmt *st, int i, int64_t ms)
{
    return ms ? sqlite3_bind_int64(st, i, ms) : sqlite3_bind_null(st, i);
}

void sq_bind_values(sqlite3_stmt *st, const struct store_value *v, int n)
{
    for (int i = 0; i < n; i++) {
        if (v[i].null)
            sqlite3_bind_null(st, i + 1);
        else if (v[i].type == STORE_V_TEXT)
            sqlite3_bind_text(st, i + 1, v[i].text, -1, SQLITE_STATIC);
        else
            sqlite3_bind_int64(st, i + 1, v[i].num);
    }
}

char *sq_col_str(sqlite3_stmt *st, int i, bool *ok)
{
    const unsigned char *t;
    char *copy;
    int n;

    if (sqlite3_column_type(st, i) == SQLITE_NULL)
        return NULL;
    t = sqlite3_column_text(st, i);
    n = sqlite3_column_bytes(st, i);
    copy = t ? malloc((size_t)n + 1) : NULL;
    if (!copy) {
        *ok = false;
        return NULL;
    }
    memcpy(copy, t, (size_t)n);
    copy[n] = '\0';
    return copy;
}

void sq_col_id(sqlite3_stmt *st, int i, char out[HOOKD_ID_MAX])
{
    const unsigned char *t = sqlite3_column_text(st, i);

    snprintf(out, HOOKD_ID_MAX, "%s", t ? (const char *)t : "");
}

int64_t sq_col_i64(sqlite3_stmt *st, int i) { return sqlite3_column_int64(st, i); }

/* ---- row readers ----------------------------------------------------------- */

static sqlite3_stmt *row_stmt(const struct store_row *r) { return (sqlite3_stmt *)r->src; }
static bool row_null(const struct store_row *r, int col)
{
    return sqlite3_column_type(row_stmt(r), col) == SQLITE_NULL;
}
static const char *row_text(const struct store_row *r, int col)
{
    return (const char *)sqlite3_column_text(row_stmt(r), col);
}
/* After row_text of the column, the bytes of the text it gave (a blob's converted the same way). */
static size_t row_len(const struct store_row *r, int col)
{
    return (size_t)sqlite3_column_bytes(row_stmt(r), col);
}
static char *row_str(const struct store_row *r, int col, bool *ok) { return sq_col_str(row_stmt(r), col, ok); }
static int64_t row_i64(const struct store_row *r, int col) { return sqlite3_column_int64(row_stmt(r), col); }
static bool row_flag(const struct store_row *r, int col) { return sqlite3_column_int(row_stmt(r), col) != 0; }

static const struct store_row_ops row_ops = {
    .null = row_null,
    .text = row_text,
    .len = row_len,
    .str = row_str,
    .i64 = row_i64,
    .flag = row_flag,
};

int sq_row_read(struct store *s, sqlite3_stmt *st, store_read_fn read, void *item)
{
    const struct store_row row = {.ops = &row_ops, .src = st};
    int rc = sqlite3_step(st);
    int result;

    if (rc == SQLITE_ROW)
        result = read(&row, item);
    else
        result = rc == SQLITE_DONE ? HOOKD_ENOTFOUND : sq_error(s, rc);
    sq_reset(st);
    return result;
}

int sq_rows_read(struct store *s, sqlite3_stmt *st, size_t max_rows, store_read_fn read, struct store_rows rows)
{
    const struct store_row row = {.ops = &row_ops, .src = st};
    int result = 0;

    store_rows_start(&rows);
    for (size_t i = 0; i < max_rows && result == 0; i++) {
        void *item;
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE)
            break;
        if (rc != SQLITE_ROW) {
            result = sq_error(s, rc);
            break;
        }
        item = store_rows_slot(&rows);
        result = item ? read(&row, item) : HOOKD_ENOMEM;
        if (result == 0)
            store_rows_keep(&rows);
    }
    sq_reset(st);
    if (result)
        store_rows_free(&rows);
    return result;
}

int sq_get_by_id(struct store *s, int slot, const char *sql, const char *id, store_read_fn read, void *item,
                 size_t item_size)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, slot, sql, &st);

    memset(item, 0, item_size);
    if (result)
        return result;
    sq_bind_text(st, 1, id);
    return sq_row_read(s, st, read, item);
}

int sq_list_newest(struct store *s, int slot, const char *sql, int slot_of, const char *sql_of, const char *before_id,
                   const char *account, int limit, store_read_fn read, struct store_rows rows)
{
    sqlite3_stmt *st;
    int max = store_list_limit(limit);
    int result = sq_stmt(s, account ? slot_of : slot, account ? sql_of : sql, &st);

    store_rows_start(&rows);
    if (result)
        return result;
    sq_bind_text(st, 1, before_id);
    sqlite3_bind_int(st, 2, max);
    if (account)
        sq_bind_text(st, 3, account);
    return sq_rows_read(s, st, (size_t)max, read, rows);
}

int sq_meta_counter(struct store *s, int slot, const char *sql, int64_t *version)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, slot, sql, &st);

    *version = 0;
    if (result == 0)
        result = sq_get_i64(s, st, version);
    return result == HOOKD_ENOTFOUND ? 0 : result;
}

int sq_get_i64(struct store *s, sqlite3_stmt *st, int64_t *v)
{
    int rc = sqlite3_step(st);
    int result = 0;

    if (rc == SQLITE_ROW)
        *v = sqlite3_column_int64(st, 0);
    else
        result = rc == SQLITE_DONE ? HOOKD_ENOTFOUND : sq_error(s, rc);
    sq_reset(st);
    return result;
}

/* ---- connection ----------------------------------------------------------- */

static bool sqlite_handles(const char *dsn)
{
    if (strncmp(dsn, "sqlite:", 7) == 0 || strncmp(dsn, "file:", 5) == 0)
        return true;
    /* A bare path: anything that is not a URL or a libpq keyword string. */
    return dsn[0] != '\0' && !strstr(dsn, "://") && !strchr(dsn, '=');
}

/* Settings every connection gets, in order. */
static const char *const connection_pragmas[] = {
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=FULL",
    "PRAGMA temp_store=MEMORY",
    /* 16 MiB of pages (the default is 2 MiB): the inbox, transitions and outbox indexes a decision walks stay in memory. */
    "PRAGMA cache_size=-16384",
};

static void sqlite_close(struct store *s)
{
    if (!s)
        return;
    sqlite_checkpoint_stop(s);
    sqlite_gather_free(s);
    for (int i = 0; i < SQ_SLOTS; i++)
        sqlite3_finalize(s->stmts[i]);
    sqlite3_close_v2(s->db);
    free(s);
}

/*
 * Waits for another connection's write lock in short steps (50 µs doubling to
 * 1 ms) for up to BUSY_TIMEOUT_MS (or the connection's lock_wait). SQLite's own busy_timeout handler sleeps 1, 2,
 * 5, 10 … 100 ms, so one collision with an application's commit would add tens
 * of milliseconds to commit→arrival latency.
 */
static int sqlite_busy_wait(void *arg, int count)
{
    struct store *s = arg;
    int64_t now = clock_mono_ms();
    long step_us = count < 5 ? 50L << count : 1000;

    if (count == 0)
        s->busy_since_ms = now;
    else if (now - s->busy_since_ms >= (s->busy_timeout_ms > 0 ? s->busy_timeout_ms : BUSY_TIMEOUT_MS))
        return 0;
    usleep((useconds_t)step_us);
    return 1;
}

void store_sqlite_process_owned(void)
{
    /* Fails (SQLITE_MISUSE) only once the library is initialised: then the statistics stay on. */
    if (sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) != SQLITE_OK)
        log_debug(LOG_PART, "sqlite: memory statistics stay on (the library was initialised first)");
}

static int sqlite_open(const char *dsn, struct store **out)
{
    const char *path = strncmp(dsn, "sqlite:", 7) == 0 ? dsn + 7 : dsn;
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI;
    struct store *s;
    int result, rc;

    *out = NULL;
    if (path[0] == '\0')
        return HOOKD_EINVAL;
    s = calloc(1, sizeof *s);
    if (!s)
        return HOOKD_ENOMEM;
    s->ops = &store_sqlite_ops;
    s->shm_fd = -1;
    rc = sqlite3_open_v2(path, &s->db, flags, NULL);
    if (rc != SQLITE_OK) {
        result = rc == SQLITE_NOMEM ? HOOKD_ENOMEM : HOOKD_EUNAVAIL;
        log_warn(LOG_PART, "sqlite: cannot open %s: %s", path, s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
        goto fail;
    }
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_handler(s->db, sqlite_busy_wait, s);
    for (size_t i = 0; i < sizeof connection_pragmas / sizeof connection_pragmas[0]; i++) {
        /*
         * Turning a new file to WAL takes it alone; when two connections try at once, each holding a shared
         * lock, SQLite answers BUSY at once instead of calling the busy handler (waiting could deadlock):
         * retried for as long as a lock wait may last.
         */
        int64_t start = clock_mono_ms();
        while ((rc = sqlite3_exec(s->db, connection_pragmas[i], NULL, NULL, NULL)) != SQLITE_OK &&
               (rc & 0xff) == SQLITE_BUSY && clock_mono_ms() - start < BUSY_TIMEOUT_MS)
            usleep(1000);
        if (rc != SQLITE_OK) {
            result = sq_error(s, rc);
            goto fail;
        }
    }
    *out = s;
    return 0;
fail:
    sqlite_close(s);
    return result;
}

/* ---- migrations ----------------------------------------------------------- */

static int schema_version(struct store *s, int *version)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "SELECT COALESCE(MAX(version), 0) FROM hookd_schema", -1, &st, NULL);

    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
            *version = sqlite3_column_int(st, 0);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 0 : sq_error(s, rc);
}

static int migration_record(struct store *s, int version)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "INSERT INTO hookd_schema(version, applied_at) VALUES (?1, ?2)", -1, &st,
                                NULL);

    if (rc == SQLITE_OK) {
        sqlite3_bind_int(st, 1, version);
        sqlite3_bind_int64(st, 2, clock_now_ms());
        rc = sqlite3_step(st);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : sq_error(s, rc);
}

/* Runs inside BEGIN IMMEDIATE: a second process starting at the same time
 * waits for the first, then finds the schema current. */
static int sqlite_migrate(struct store *s)
{
    int version = 0, result, rc;
    size_t latest = sqlite_migrations_count;

    rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return sq_error(s, rc);
    rc = sqlite3_exec(s->db,
                      "CREATE TABLE IF NOT EXISTS hookd_schema ("
                      " version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)",
                      NULL, NULL, NULL);
    result = sq_error(s, rc);
    if (result == 0)
        result = schema_version(s, &version);
    for (size_t i = 0; result == 0 && i < latest; i++) {
        const struct schema_migration *m = &sqlite_migrations[i];
        if (m->version <= version)
            continue;
        rc = sqlite3_exec(s->db, m->sql, NULL, NULL, NULL);
        result = sq_error(s, rc);
        if (result == 0)
            result = migration_record(s, m->version);
        if (result == 0)
            log_info(LOG_PART, "sqlite: schema migrated to version %d", m->version);
    }
    /* A migration that stopped between its copy's two pragmas must not leave the connection without checks. */
    sqlite3_exec(s->db, "PRAGMA ignore_check_constraints = OFF", NULL, NULL, NULL);
    if (result == 0 && latest > 0 && version > sqlite_migrations[latest - 1].version)
        log_warn(LOG_PART, "sqlite: schema version %d is newer than this build knows (%d)", version,
                 sqlite_migrations[latest - 1].version);
    if (result == 0) {
        rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
        result = sq_error(s, rc);
    }
    if (result != 0)
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return result;
}

/* ---- transactions ----------------------------------------------------------- */

static int sqlite_begin(struct store *s) { return sq_exec(s, SQ_BEGIN, "BEGIN IMMEDIATE"); }
static int sqlite_commit(struct store *s) { return sq_exec(s, SQ_COMMIT, "COMMIT"); }

static int sqlite_rollback(struct store *s)
{
    /* Already rolled back by SQLite itself (after an I/O error): nothing to undo. */
    if (sqlite3_get_autocommit(s->db))
        return 0;
    return sq_exec(s, SQ_ROLLBACK, "ROLLBACK");
}

static int sqlite_savepoint(struct store *s) { return sq_exec(s, SQ_SAVEPOINT, "SAVEPOINT hookd_op"); }
static int sqlite_release(struct store *s) { return sq_exec(s, SQ_RELEASE, "RELEASE hookd_op"); }

/* Undoes the op and also ends its savepoint, like release does. */
static int sqlite_rollback_to(struct store *s)
{
    int result = sq_exec(s, SQ_ROLLBACK_TO, "ROLLBACK TO hookd_op");

    if (result == 0)
        result = sq_exec(s, SQ_ROLLBACK_TO_RELEASE, "RELEASE hookd_op");
    return result;
}

/* PRAGMA data_version reads no table: it changes when another connection commits. */
/* PRAGMA data_version has nothing to wait on: the relay asks every millisecond. */
static int sqlite_changed_fd(struct store *s)
{
    (void)s;
    return -1;
}

static int sqlite_changed(struct store *s, bool *changed)
{
    sqlite3_stmt *st;
    int64_t v;
    int rc, result = sq_stmt(s, SQ_DATA_VERSION, "PRAGMA data_version", &st);

    if (result)
        return result;
    rc = sqlite3_step(st);
    if (rc != SQLITE_ROW) {
        result = sq_error(s, rc);
        goto out;
    }
    v = sqlite3_column_int64(st, 0);
    *changed = !s->data_version_known || v != s->data_version;
    s->data_version = v;
    s->data_version_known = true;
out:
    sq_reset(st);
    return result;
}

static int sqlite_lock_wait(struct store *s, int64_t ms)
{
    s->busy_timeout_ms = ms;
    return 0;
}

/* ---- meta ------------------------------------------------------------------- */

static int sqlite_meta_get(struct store *s, const char *key, char **value_out)
{
    sqlite3_stmt *st;
    bool ok = true;
    int rc, result = sq_stmt(s, SQ_META_GET, "SELECT value FROM hookd_meta WHERE key = ?1", &st);

    *value_out = NULL;
    if (result)
        return result;
    sq_bind_text(st, 1, key);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *value_out = sqlite3_column_type(st, 0) == SQLITE_NULL ? strdup("") : sq_col_str(st, 0, &ok);
        result = ok && *value_out ? 0 : HOOKD_ENOMEM;
    } else {
        result = rc == SQLITE_DONE ? HOOKD_ENOTFOUND : sq_error(s, rc);
    }
    sq_reset(st);
    return result;
}

static int sqlite_meta_set(struct store *s, const char *key, const char *value)
{
    sqlite3_stmt *st;
    int result = sq_stmt(s, SQ_META_SET,
                         "INSERT INTO hookd_meta(key, value) VALUES (?1, ?2)"
                         " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                         &st);

    if (result)
        return result;
    if (!key || !value) {
        sq_reset(st);
        return HOOKD_EINVAL;
    }
    sq_bind_text(st, 1, key);
    sq_bind_text(st, 2, value);
    return sq_run(s, st, NULL);
}

static const struct store_meta_ops sqlite_meta_ops = {
    .get = sqlite_meta_get,
    .set = sqlite_meta_set,
};

/*
 * Whether another process has the file open: every connection in WAL mode
 * holds a shared lock on the "dead man switch" byte of its -shm file for as
 * long as it is open (SQLite 3.x's unix VFS: offset 128, after the eight
 * lock slots at 120), and a POSIX F_GETLK for a write lock on it reports a
 * lock of another process only (this process's own connections never
 * conflict with it), as SQLite itself asks when it opens the file. It asks
 * through the descriptor SQLite holds on the -shm file (found once in
 * /proc/self/fd by device and inode, then only checked): a descriptor of
 * hookd's own, once closed, would drop every lock this process holds on the
 * file. Not /proc/locks: reading it takes the kernel's file-lock rwsem for
 * writing, an RCU grace period that stalled the writer 5 to 76 ms once a
 * second under load (and every fcntl lock in the system meanwhile). False
 * when the file cannot be looked at.
 */
#define SQ_SHM_DMS_OFFSET 128

static bool same_file(int fd, const struct stat *want)
{
    struct stat st;

    return fstat(fd, &st) == 0 && st.st_dev == want->st_dev && st.st_ino == want->st_ino;
}

static int shm_fd_find(const struct stat *want)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int found = -1;

    if (d == NULL)
        return -1;
    while (found < 0 && (e = readdir(d)) != NULL) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        if (*end == '\0' && end != e->d_name && fd != dirfd(d) && same_file((int)fd, want))
            found = (int)fd;
    }
    closedir(d);
    return found;
}

static bool sqlite_others_open(struct store *s)
{
    const char *db = sqlite3_db_filename(s->db, "main");
    char shm[PATH_MAX + 8];
    struct stat st;
    struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = SQ_SHM_DMS_OFFSET, .l_len = 1};

    if (db == NULL || db[0] == '\0' || snprintf(shm, sizeof shm, "%s-shm", db) >= (int)sizeof shm ||
        stat(shm, &st) != 0)
        return false;
    if (s->shm_fd < 0 || !same_file(s->shm_fd, &st))
        s->shm_fd = shm_fd_find(&st);
    if (s->shm_fd < 0 || fcntl(s->shm_fd, F_GETLK, &lk) != 0)
        return false;
    return lk.l_type != F_UNLCK;
}

/* ---- the method table ------------------------------------------------------- */

const struct store_ops store_sqlite_ops = {
    .version = STORE_OPS_VERSION,
    .name = "sqlite",
    .single_node = true,
    .handles = sqlite_handles,
    .open = sqlite_open,
    .close = sqlite_close,
    .migrate = sqlite_migrate,
    .begin = sqlite_begin,
    .commit = sqlite_commit,
    .commit_lazy = sqlite_commit,
    .rollback = sqlite_rollback,
    .savepoint = sqlite_savepoint,
    .release = sqlite_release,
    .rollback_to = sqlite_rollback_to,
    .changed = sqlite_changed,
    .changed_fd = sqlite_changed_fd,
    .lock_wait = sqlite_lock_wait,
    .checkpoint_aside = sqlite_checkpoint_aside,
    .checkpoint_due = sqlite_checkpoint_due,
    .others_open = sqlite_others_open,
    .meta = &sqlite_meta_ops,
    .events = &sqlite_event_ops,
    .endpoints = &sqlite_endpoint_ops,
    .deliveries = &sqlite_delivery_ops,
    .endpoint_state = &sqlite_endpoint_state_ops,
    .health = &sqlite_health_ops,
    .stats = &sqlite_stats_ops,
    .sources = &sqlite_source_ops,
    .inbox = &sqlite_inbox_ops,
    .rejections = &sqlite_rejection_ops,
    .machines = &sqlite_machine_ops,
    .replays = &sqlite_replay_ops,
    .tokens = &sqlite_token_ops,
    .alerts = &sqlite_alert_ops,
    .upkeep = &sqlite_upkeep_ops,
};
