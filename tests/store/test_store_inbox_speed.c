/*
 * The store conformance suite: the inbox's accept path at speed. A group of
 * inserts in one call (store_inbox_insert_many, the receiver's group commit)
 * gives every item the outcome n single inserts in queue order would give:
 * new rows, duplicates of stored rows and of an earlier copy in the same
 * group, conflicting copies counted, sources kept apart; a group the store
 * cannot take as a whole (a row refused by a trigger, as an operator's SQL
 * could) costs only that row once the writer runs the ops alone. And the
 * plans: after the index changes of session 7, no inbox query reads the
 * table whole (both backends' EXPLAIN).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/stat.h>

#include "store/store_fixture.h"
#include "store/writer.h"

#include "store/inbox_sql.h"

#define SHA_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define SHA_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static void item_init(struct inbox_item *it, const char *source, const char *event_id, const char *sha)
{
    memset(it, 0, sizeof *it);
    snprintf(it->source, sizeof it->source, "%s", source);
    it->event_id = strdup(event_id);
    it->payload = strdup("{\"k\":\"a \\\"quoted\\\" \\\\ {brace}, comma\"}"); /* what an array literal must escape */
    snprintf(it->payload_sha256, sizeof it->payload_sha256, "%s", sha);
    it->signature_verified = true;
}

static int64_t count_of(struct fixture *fx, const char *source, const char *event_id, int64_t *dups,
                        int64_t *conflicts)
{
    struct inbox_filter f = {.status = -1, .source = source, .limit = STORE_LIST_MAX};
    struct inbox_list l = {0};
    int64_t n = 0;

    assert_int_equal(store_inbox_list(fx->s, &f, &l), 0);
    for (size_t i = 0; i < l.n; i++) {
        if (strcmp(l.items[i].event_id, event_id) != 0)
            continue;
        n++;
        *dups = l.items[i].dup_count;
        *conflicts = l.items[i].conflict_count;
    }
    inbox_list_free(&l);
    return n;
}

/* One group: every outcome as n single inserts in queue order would give. */
static void test_group_outcomes(void **state)
{
    struct fixture *fx = *state;
    char a[SOURCE_NAME_MAX], b[SOURCE_NAME_MAX], e1[HOOKD_ID_MAX], e2[HOOKD_ID_MAX], e3[HOOKD_ID_MAX];
    struct inbox_item stored, it[7];
    struct inbox_item *items[7];
    struct inbox_outcome o, outs[7];
    struct inbox_item got;
    int64_t dups = 0, conflicts = 0;

    id_new(a, "src_");
    id_new(b, "src_");
    id_new(e1, "e_");
    id_new(e2, "e_");
    id_new(e3, "e_");
    item_init(&stored, a, e1, SHA_A);
    assert_int_equal(store_inbox_insert(fx->s, &stored, &o), 0);
    assert_false(o.duplicate);

    item_init(&it[0], a, e2, SHA_A); /* new */
    item_init(&it[1], a, e1, SHA_A); /* a copy of the stored row */
    item_init(&it[2], a, e2, SHA_A); /* a copy of it[0], in the same group */
    item_init(&it[3], a, e2, SHA_B); /* another copy of it[0], with another body */
    item_init(&it[4], b, e2, SHA_B); /* the same event id from another source: its own row */
    item_init(&it[5], a, e3, SHA_A); /* new */
    item_init(&it[6], a, e1, SHA_B); /* the stored row again, another body */
    for (int i = 0; i < 7; i++)
        items[i] = &it[i];
    assert_int_equal(store_inbox_insert_many(fx->s, items, 7, outs), 0);

    assert_false(outs[0].duplicate);
    assert_string_equal(outs[0].id, it[0].id);
    assert_true(outs[1].duplicate && !outs[1].conflicting);
    assert_string_equal(outs[1].id, stored.id);
    assert_int_equal(outs[1].dup_count, 1);
    assert_true(outs[2].duplicate && !outs[2].conflicting);
    assert_string_equal(outs[2].id, it[0].id);
    assert_int_equal(outs[2].dup_count, 1);
    assert_true(outs[3].duplicate && outs[3].conflicting);
    assert_string_equal(outs[3].id, it[0].id);
    assert_int_equal(outs[3].dup_count, 2);
    assert_false(outs[4].duplicate);
    assert_string_equal(outs[4].id, it[4].id);
    assert_false(outs[5].duplicate);
    assert_true(outs[6].duplicate && outs[6].conflicting);
    assert_int_equal(outs[6].dup_count, 2);

    assert_int_equal(count_of(fx, a, e1, &dups, &conflicts), 1);
    assert_int_equal(dups, 2);
    assert_int_equal(conflicts, 1);
    assert_int_equal(count_of(fx, a, e2, &dups, &conflicts), 1);
    assert_int_equal(dups, 2);
    assert_int_equal(conflicts, 1);
    assert_int_equal(count_of(fx, b, e2, &dups, &conflicts), 1);
    assert_int_equal(dups, 0);
    /* The body comes back byte for byte, through the array literal's quoting. */
    assert_int_equal(store_inbox_get(fx->s, it[0].id, &got), 0);
    assert_string_equal(got.payload, it[0].payload);
    assert_true(got.signature_verified);
    assert_int_equal(got.status, INBOX_PENDING);
    assert_int_equal(got.received_at, it[0].received_at);
    inbox_item_free(&got);

    /* A group of one, and of none. */
    assert_int_equal(store_inbox_insert_many(fx->s, items, 1, outs), 0);
    assert_true(outs[0].duplicate);
    assert_int_equal(store_inbox_insert_many(fx->s, items, 0, outs), 0);
    /* An item without its hash: the call fails as a whole. */
    struct inbox_item bad;
    item_init(&bad, a, "bad", "");
    items[1] = &bad;
    assert_int_equal(store_inbox_insert_many(fx->s, items, 2, outs), HOOKD_EINVAL);

    inbox_item_free(&stored);
    inbox_item_free(&bad);
    for (int i = 0; i < 7; i++)
        inbox_item_free(&it[i]);
}

/* Event ids and types that an array literal must quote: each comes back as sent, none is SQL NULL. */
static void test_group_hostile_text(void **state)
{
    struct fixture *fx = *state;
    static const char *const ids[] = {"NULL", "a\"b\\c", "{x,y}", " spaced ", "caf\xc3\xa9 \xe2\x80\x94", "'; DROP TABLE hookd_inbox; --"};
    enum { N = sizeof ids / sizeof ids[0] };
    char source[SOURCE_NAME_MAX];
    struct inbox_item it[N], got;
    struct inbox_item *items[N];
    struct inbox_outcome outs[N];

    id_new(source, "src_");
    for (int i = 0; i < N; i++) {
        item_init(&it[i], source, ids[i], SHA_A);
        it[i].event_type = strdup(ids[N - 1 - i]);
        it[i].entity_kind = strdup("kind");
        it[i].entity_id = strdup(ids[i]);
        it[i].has_version = i % 2 == 0;
        it[i].version = i;
        items[i] = &it[i];
    }
    assert_int_equal(store_inbox_insert_many(fx->s, items, N, outs), 0);
    for (int i = 0; i < N; i++) {
        assert_false(outs[i].duplicate);
        assert_int_equal(store_inbox_get(fx->s, outs[i].id, &got), 0);
        assert_string_equal(got.event_id, ids[i]);
        assert_string_equal(got.event_type, ids[N - 1 - i]);
        assert_string_equal(got.entity_id, ids[i]);
        assert_int_equal(got.has_version, i % 2 == 0);
        if (got.has_version)
            assert_int_equal(got.version, i);
        inbox_item_free(&got);
    }
    /* Sent again as one group: every one a duplicate of its own row. */
    assert_int_equal(store_inbox_insert_many(fx->s, items, N, outs), 0);
    for (int i = 0; i < N; i++) {
        assert_true(outs[i].duplicate);
        assert_string_equal(outs[i].id, it[i].id);
    }
    for (int i = 0; i < N; i++)
        inbox_item_free(&it[i]);
}

/* An accept through the writer, grouped as the receiver's are. */
struct accept {
    struct inbox_item it;
    struct inbox_outcome out;
    int result;
    bool done;
};

static int accept_one(struct store *s, void *arg)
{
    struct accept *a = arg;
    return store_inbox_insert(s, &a->it, &a->out);
}

static int accept_group(struct store *s, void *const *args, size_t n, int *results)
{
    struct inbox_item *items[16];
    struct inbox_outcome outs[16];
    int rc;

    assert_true(n <= 16);
    for (size_t i = 0; i < n; i++)
        items[i] = &((struct accept *)args[i])->it;
    rc = store_inbox_insert_many(s, items, n, outs);
    for (size_t i = 0; i < n && rc == 0; i++) {
        ((struct accept *)args[i])->out = outs[i];
        results[i] = 0;
    }
    return rc;
}

static pthread_mutex_t done_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;

static void accept_done(void *arg, int result)
{
    struct accept *a = arg;

    pthread_mutex_lock(&done_mu);
    a->result = result;
    a->done = true;
    pthread_cond_broadcast(&done_cv);
    pthread_mutex_unlock(&done_mu);
}

/*
 * A trigger refuses one row (event id "boom-…"): the group's statement fails,
 * the writer rolls it back and runs each accept alone, so the others are
 * stored and acknowledged, each with its own outcome, and only that one fails.
 */
static void test_group_row_refused(void **state)
{
    struct fixture *fx = *state;
    bool pg = strncmp(fx->dsn, "sqlite:", 7) != 0;
    char source[SOURCE_NAME_MAX], ev[HOOKD_ID_MAX], sql[512];
    struct writer_options opt = {.max_wait_us = 20000, .write_timeout_ms = 10000};
    struct accept acc[8];
    struct writer *w;

    id_new(source, "src_");
    if (pg) {
        fixture_sql(fx, "CREATE OR REPLACE FUNCTION hookd_test_boom() RETURNS trigger LANGUAGE plpgsql AS $$"
                        " BEGIN IF NEW.event_id LIKE 'boom-%' THEN RAISE EXCEPTION 'refused by the test'; END IF;"
                        " RETURN NEW; END $$");
        fixture_sql(fx, "DROP TRIGGER IF EXISTS hookd_test_boom ON hookd_inbox;"
                        " CREATE TRIGGER hookd_test_boom BEFORE INSERT ON hookd_inbox FOR EACH ROW"
                        " EXECUTE FUNCTION hookd_test_boom()");
    } else {
        fixture_sql(fx, "CREATE TRIGGER IF NOT EXISTS hookd_test_boom BEFORE INSERT ON hookd_inbox"
                        " WHEN NEW.event_id LIKE 'boom-%' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END");
    }
    assert_int_equal(writer_start(fx->dsn, &opt, &w), 0);
    for (int i = 0; i < 8; i++) {
        id_new(ev, i == 5 ? "boom-" : "e_");
        item_init(&acc[i].it, source, i == 7 ? acc[2].it.event_id : ev, SHA_A); /* 7 repeats 2 */
        acc[i].done = false;
        assert_int_equal(writer_submit_bounded_grouped(w, accept_one, accept_group, accept_done, &acc[i]), 0);
    }
    pthread_mutex_lock(&done_mu);
    for (int i = 0; i < 8; i++)
        while (!acc[i].done)
            pthread_cond_wait(&done_cv, &done_mu);
    pthread_mutex_unlock(&done_mu);
    writer_stop(w);

    for (int i = 0; i < 8; i++) {
        if (i == 5) {
            assert_true(acc[i].result < 0);
            continue;
        }
        assert_int_equal(acc[i].result, 0);
        assert_int_equal(acc[i].out.duplicate, i == 7);
    }
    assert_string_equal(acc[7].out.id, acc[2].it.id);
    struct inbox_filter f = {.status = -1, .source = source, .limit = STORE_LIST_MAX};
    struct inbox_list l = {0};
    assert_int_equal(store_inbox_list(fx->s, &f, &l), 0);
    assert_int_equal(l.n, 6);
    inbox_list_free(&l);

    snprintf(sql, sizeof sql, "DROP TRIGGER %s", pg ? "hookd_test_boom ON hookd_inbox" : "hookd_test_boom");
    fixture_sql(fx, sql);
    for (int i = 0; i < 8; i++)
        inbox_item_free(&acc[i].it);
}

/*
 * SQLite: once a connection's checkpoints are aside, its commits past 1000
 * pages of WAL no longer copy it into the database file themselves (its WAL
 * hook only wakes the store's checkpoint thread), and the thread does copy
 * it: the database file grows to hold the rows while the writer goes on.
 */
static void test_checkpoints_aside(void **state)
{
    struct fixture *fx = *state;
    char source[SOURCE_NAME_MAX], ev[HOOKD_ID_MAX], path[300];
    char *payload;
    struct stat st = {0};
    struct store *s;

    if (strncmp(fx->dsn, "sqlite:", 7) != 0)
        skip(); /* PostgreSQL has no checkpoint on the client's side */
    payload = malloc(4001);
    assert_non_null(payload);
    memset(payload, 'x', 4000);
    payload[4000] = '\0';
    snprintf(path, sizeof path, "%s", fx->dsn + 7);
    assert_int_equal(stat(path, &st), 0);
    off_t before = st.st_size;
    assert_int_equal(store_open(fx->dsn, &s), 0);
    assert_int_equal(store_checkpoint_aside(s), 0);
    assert_int_equal(store_checkpoint_aside(s), 0); /* once is enough */
    id_new(source, "src_");
    /* 3000 rows of 4 kB in 30 commits: some 3000 pages of WAL. */
    for (int c = 0; c < 30; c++) {
        assert_int_equal(store_begin(s), 0);
        for (int i = 0; i < 100; i++) {
            struct inbox_item it;
            struct inbox_outcome o;
            id_new(ev, "e_");
            item_init(&it, source, ev, SHA_A);
            free(it.payload);
            it.payload = strdup(payload);
            assert_int_equal(store_inbox_insert(s, &it, &o), 0);
            inbox_item_free(&it);
        }
        assert_int_equal(store_commit(s), 0);
    }
    /* The thread copies the WAL into the file within a few of its passes. */
    for (int i = 0; i < 300 && st.st_size < before + 8 * 1024 * 1024; i++) {
        usleep(10000);
        assert_int_equal(stat(path, &st), 0);
    }
    assert_true(st.st_size >= before + 8 * 1024 * 1024);
    store_close(s); /* stops the thread */
    free(payload);
}

static bool changed_soon(struct store *w, int ms)
{
    bool changed = false;

    for (int i = 0; i < ms / 10 && !changed; i++) {
        usleep(10000);
        assert_int_equal(store_changed(w, &changed), 0);
    }
    return changed;
}

/* One group of two items of source a, then one of b, through store_inbox_insert_many. */
static void group_put(struct fixture *fx, const char *a, const char *b)
{
    struct inbox_item it[3];
    struct inbox_item *items[3] = {&it[0], &it[1], &it[2]};
    struct inbox_outcome outs[3];
    char ev[HOOKD_ID_MAX];

    for (int i = 0; i < 3; i++) {
        id_new(ev, "e_");
        item_init(&it[i], i < 2 ? a : b, ev, SHA_A);
    }
    assert_int_equal(store_inbox_insert_many(fx->s, items, 3, outs), 0);
    for (int i = 0; i < 3; i++)
        inbox_item_free(&it[i]);
}

/*
 * PostgreSQL: an inserting statement wakes the workers (LISTEN hookd_inbox)
 * only when one of its new rows is of a source with a handler: a group of
 * items nothing processes wakes no one, a group with one such item among
 * others does.
 */
static void test_notify_only_handled(void **state)
{
    struct fixture *fx = *state;
    char idle[SOURCE_NAME_MAX], idle2[SOURCE_NAME_MAX], fwd[SOURCE_NAME_MAX], sql[512];
    struct store *w = NULL;
    bool changed;

    postgres_only(fx);
    id_new(idle, "src_");
    id_new(idle2, "src_");
    id_new(fwd, "src_");
    snprintf(sql, sizeof sql,
             "INSERT INTO hookd_sources(name, definition) VALUES ('%s', '{\"verify\":{\"scheme\":\"none\"}}'),"
             " ('%s', '{\"handler\":null}'),"
             " ('%s', '{\"handler\":{\"forward\":{\"url\":\"http://127.0.0.1:9/\"}}}')",
             idle, idle2, fwd);
    fixture_sql(fx, sql);
    assert_int_equal(store_open(fx->dsn, &w), 0);
    assert_int_equal(store_watch(w, STORE_CHANNEL_INBOX), 0);
    assert_int_equal(store_changed(w, &changed), 0); /* LISTEN */
    assert_int_equal(store_changed(w, &changed), 0);

    group_put(fx, idle, idle2); /* nothing processes these */
    assert_false(changed_soon(w, 200));
    group_put(fx, idle, fwd); /* one of them is worked on */
    assert_true(changed_soon(w, 1000));
    /* A source unknown to hookd_sources (rows written by SQL): nothing processes it either. */
    group_put(fx, "no-such-source", idle);
    assert_false(changed_soon(w, 200));
    store_close(w);
}

/* ---- plans --------------------------------------------------------------------- */

struct query {
    const char *what;
    const char *sqlite;
    const char *pg;
    const char *pg_args;
};

#define LIST(where_sqlite, where_pg)                                                                         \
    "SELECT id FROM hookd_inbox WHERE 1 " where_sqlite " ORDER BY id DESC LIMIT 100",                       \
        "SELECT id FROM hookd_inbox WHERE true " where_pg " ORDER BY id DESC LIMIT 100"

static const struct query queries[] = {
    {"claim", /* as sqlite_inbox.c and postgres_inbox.c run it */
     "SELECT i.id FROM hookd_inbox i INDEXED BY hookd_inbox_due WHERE " INBOX_CLAIMABLE("?2")
     " AND i.source NOT IN (" INBOX_LIBRARY_SOURCES_SQLITE ") ORDER BY i.next_attempt_at, i.id LIMIT ?4",
     "SELECT i.id FROM hookd_inbox i WHERE " INBOX_CLAIMABLE("$1::bigint")
     " AND i.source NOT IN (" INBOX_LIBRARY_SOURCES_PG ") ORDER BY i.next_attempt_at, i.id LIMIT $2::int"
     " FOR UPDATE SKIP LOCKED",
     "1, 10"},
    {"entity busy test", /* alone: a candidate of a kind */
     "SELECT 1 FROM hookd_inbox i WHERE i.id = ?1 AND " INBOX_ENTITY_BUSY_KIND("j.entity_kind = i.entity_kind", "?2"),
     "SELECT 1 FROM hookd_inbox i WHERE i.id = $1::text AND "
     INBOX_ENTITY_BUSY_KIND("j.entity_kind = i.entity_kind", "$2::bigint"),
     "'x', 1"},
    {"list by source", LIST("AND source = ?1", "AND source = $1::text"), "'s'"},
    {"list by status", LIST("AND status = ?1", "AND status = $1::text"), "'quarantined'"},
    {"list by kind", LIST("AND entity_kind = ?1", "AND entity_kind = $1::text"), "'order'"},
    {"list by entity", LIST("AND entity_kind = ?1 AND entity_id = ?2", "AND entity_kind = $1::text AND entity_id = $2::text"),
     "'order', 'o-1'"},
    {"machine's open items", /* sqlite_hold.c names the index */
     "SELECT id FROM hookd_inbox INDEXED BY hookd_inbox_entity WHERE entity_kind = ?1 AND entity_id = ?2"
     " AND status IN ('pending', 'deferred') ORDER BY id DESC LIMIT ?3",
     "SELECT id FROM hookd_inbox WHERE entity_kind = $1::text AND entity_id = $2::text"
     " AND status IN ('pending', 'deferred') ORDER BY id DESC LIMIT $3::int",
     "'order', 'o-1', 10"},
    {"machine's open items as the accept's window reads them first", /* sqlite_hold.c, SQLite only */
     "SELECT rowid, version, next_attempt_at, event_type FROM hookd_inbox INDEXED BY hookd_inbox_entity"
     " WHERE entity_kind = ?1 AND entity_id = ?2 AND status = 'deferred' LIMIT ?3",
     "SELECT id, version FROM hookd_inbox WHERE entity_kind = $1::text AND entity_id = $2::text"
     " AND status IN ('pending', 'deferred') LIMIT $3::int",
     "'order', 'o-1', 10"},
    {"an open item the window reads whole", /* by rowid on SQLite */
     "SELECT id, version FROM hookd_inbox WHERE rowid = ?1",
     "SELECT id, version FROM hookd_inbox WHERE id = $1::text",
     "'x'"},
    {"audit: a lower version after a higher one",
     "SELECT count(*) FROM hookd_inbox i WHERE i.source = ?1 AND i.version IS NOT NULL AND i.entity_id IS NOT NULL"
     " AND EXISTS (SELECT 1 FROM hookd_inbox h WHERE h.entity_kind = i.entity_kind AND h.entity_id = i.entity_id"
     " AND h.source = i.source AND h.version > i.version)",
     "SELECT count(*) FROM hookd_inbox i WHERE i.source = $1::text AND i.version IS NOT NULL"
     " AND i.entity_id IS NOT NULL AND EXISTS (SELECT 1 FROM hookd_inbox h WHERE h.entity_kind = i.entity_kind"
     " AND h.entity_id = i.entity_id AND h.source = i.source AND h.version > i.version)",
     "'s'"},
    {"insert or duplicate",
     "INSERT INTO hookd_inbox(id, source, event_id, payload, payload_sha256, received_at) VALUES (?1, ?2, ?3, '', '', 0)"
     " ON CONFLICT(source, event_id) DO UPDATE SET dup_count = dup_count + 1",
     "INSERT INTO hookd_inbox AS i(id, source, event_id, payload, payload_sha256, received_at)"
     " SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[])"
     " ON CONFLICT (source, event_id) DO UPDATE SET dup_count = i.dup_count + 1",
     "'{a}', '{s}', '{e}', '{p}', '{h}', '{0}'"},
};

/* The plans read no inbox table whole: the indexes left after session 7 serve every query. */
static void test_plans(void **state)
{
    struct fixture *fx = *state;
    bool pg = strncmp(fx->dsn, "sqlite:", 7) != 0;
    /* The table by its name and by the queries' aliases (SQLite names a table by its alias). */
    static const char *const tables[] = {"hookd_inbox", "i", "j", "h"};
    char plan[16384];

    for (size_t i = 0; i < sizeof queries / sizeof queries[0]; i++) {
        fixture_plan(fx, pg ? queries[i].pg : queries[i].sqlite, queries[i].pg_args, plan, sizeof plan);
        bool scans = false;
        for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
            scans = scans || plan_scans(plan, tables[t], "hookd_inbox_due");
        if (getenv("HOOKD_TEST_SHOW_PLANS") || scans)
            print_message("%s:\n%s\n", queries[i].what, plan);
        assert_false(scans);
    }
    /* The entity test walks the entity index (two short ranges), not the open items. */
    fixture_plan(fx, pg ? queries[1].pg : queries[1].sqlite, queries[1].pg_args, plan, sizeof plan);
    assert_non_null(strstr(plan, "hookd_inbox_entity"));
    /* The window's first pass reads the entity index alone (SQLite migration 30), no item's row. */
    if (!pg) {
        fixture_plan(fx, queries[7].sqlite, queries[7].pg_args, plan, sizeof plan);
        assert_non_null(strstr(plan, "COVERING INDEX hookd_inbox_entity"));
    }
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {T(test_group_outcomes), T(test_group_hostile_text), T(test_group_row_refused), T(test_checkpoints_aside), T(test_notify_only_handled), T(test_plans)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
