/*
 * Store conformance, the inbound families on either backend (HOOKD_TEST_STORE):
 * sources (CRUD, cursor, cache validator), the inbox's insert-or-duplicate
 * (one row per (source, event_id), duplicates and conflicting duplicates
 * counted, concurrent copies from many connections and through the writer),
 * inbox lists and filters, the bounded rejection log with its counters, and
 * the workers' methods: claims one entity at a time, leases and fencing,
 * completions, replays of one item and of a range, a node's leases released.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "store_fixture.h"
#include "store/schema/sqlite.h"
#include "store/writer.h"

#define SHA_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define SHA_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

/* A source name of this test's own (the shared database holds other runs' rows). */
static void unique_name(char out[SOURCE_NAME_MAX], const char *prefix) { id_new(out, prefix); }

static void item_init(struct inbox_item *it, const char *source, const char *event_id, const char *sha)
{
    memset(it, 0, sizeof *it);
    snprintf(it->source, sizeof it->source, "%s", source);
    it->event_id = strdup(event_id);
    it->event_type = strdup("order.paid");
    it->entity_kind = strdup("order");
    it->entity_id = strdup("o-1");
    it->has_version = true;
    it->version = 3;
    it->payload = strdup("{\"id\":\"x\"}");
    snprintf(it->payload_sha256, sizeof it->payload_sha256, "%s", sha);
    it->signature_verified = true;
}

static void test_source_crud(void **state)
{
    struct fixture *fx = *state;
    struct source src = {0}, got = {0};
    int64_t v0 = 0, v1 = 0, v2 = 0, v3 = 0;

    unique_name(src.name, "src_");
    src.definition = strdup("{\"verify\":{\"scheme\":\"none\"}}");
    src.secrets = strdup("{\"verify\":[]}");
    assert_int_equal(store_source_version(fx->s, &v0), 0);
    assert_int_equal(store_source_insert(fx->s, &src), 0);
    assert_int_equal(store_source_insert(fx->s, &src), HOOKD_EEXISTS);
    assert_int_equal(store_source_version(fx->s, &v1), 0);
    assert_true(v1 != v0);

    assert_int_equal(store_source_get(fx->s, src.name, &got), 0);
    assert_string_equal(got.name, src.name);
    assert_string_equal(got.definition, src.definition);
    assert_string_equal(got.secrets, src.secrets);
    assert_true(got.created_at > 0 && got.updated_at >= got.created_at);
    source_free(&got);

    free(src.definition);
    src.definition = strdup("{\"verify\":{\"scheme\":\"standard-webhooks\"}}");
    src.updated_at = clock_now_ms() + 5;
    assert_int_equal(store_source_update(fx->s, &src), 0);
    assert_int_equal(store_source_version(fx->s, &v2), 0);
    assert_true(v2 != v1);
    assert_int_equal(store_source_get(fx->s, src.name, &got), 0);
    assert_string_equal(got.definition, src.definition);
    assert_int_equal(got.updated_at, src.updated_at);
    source_free(&got);

    assert_int_equal(store_source_delete(fx->s, src.name), 0);
    assert_int_equal(store_source_delete(fx->s, src.name), HOOKD_ENOTFOUND);
    assert_int_equal(store_source_get(fx->s, src.name, &got), HOOKD_ENOTFOUND);
    assert_int_equal(store_source_update(fx->s, &src), HOOKD_ENOTFOUND);
    assert_int_equal(store_source_version(fx->s, &v3), 0);
    assert_true(v3 != v2);
    source_free(&src);
}

static void test_source_list_cursor(void **state)
{
    struct fixture *fx = *state;
    char prefix[SOURCE_NAME_MAX], names[5][SOURCE_NAME_MAX];
    struct source_list all = {0}, page = {0};
    size_t mine = 0;

    unique_name(prefix, "lst_");
    for (int i = 0; i < 5; i++) {
        struct source src = {.definition = "{}"};
        snprintf(names[i], sizeof names[i], "%.40s_%d", prefix, i);
        snprintf(src.name, sizeof src.name, "%s", names[i]);
        assert_int_equal(store_source_insert(fx->s, &src), 0);
    }
    assert_int_equal(store_source_list_all(fx->s, &all), 0);
    for (size_t i = 0; i < all.n; i++)
        mine += strncmp(all.items[i].name, prefix, strlen(prefix)) == 0;
    assert_int_equal(mine, 5);
    source_list_free(&all);

    /* Descending by name, from just after this test's last name: two pages of 2, then 1. */
    char start[SOURCE_NAME_MAX + 8];
    snprintf(start, sizeof start, "%.40s_9", prefix);
    struct source_filter f = {.before_name = start, .limit = 2};
    assert_int_equal(store_source_list(fx->s, &f, &page), 0);
    assert_int_equal(page.n, 2);
    assert_string_equal(page.items[0].name, names[4]);
    assert_string_equal(page.items[1].name, names[3]);
    char cursor[SOURCE_NAME_MAX];
    snprintf(cursor, sizeof cursor, "%s", page.items[1].name);
    source_list_free(&page);
    f.before_name = cursor;
    f.limit = 3;
    assert_int_equal(store_source_list(fx->s, &f, &page), 0);
    assert_int_equal(page.n, 3);
    assert_string_equal(page.items[2].name, names[0]);
    source_list_free(&page);
    for (int i = 0; i < 5; i++)
        assert_int_equal(store_source_delete(fx->s, names[i]), 0);
}

static void test_inbox_insert_and_duplicates(void **state)
{
    struct fixture *fx = *state;
    char source[SOURCE_NAME_MAX], event_id[HOOKD_ID_MAX];
    struct inbox_item a, b, c, got;
    struct inbox_outcome oa, ob, oc;

    unique_name(source, "src_");
    id_new(event_id, "evt_");
    item_init(&a, source, event_id, SHA_A);
    assert_int_equal(store_inbox_insert(fx->s, &a, &oa), 0);
    assert_false(oa.duplicate);
    assert_int_equal(oa.dup_count, 0);
    assert_string_equal(oa.id, a.id);
    assert_memory_equal(a.id, "inb_", 4);

    item_init(&b, source, event_id, SHA_A);
    assert_int_equal(store_inbox_insert(fx->s, &b, &ob), 0);
    assert_true(ob.duplicate);
    assert_false(ob.conflicting);
    assert_int_equal(ob.dup_count, 1);
    assert_string_equal(ob.id, a.id); /* the stored row's id, not the copy's */

    item_init(&c, source, event_id, SHA_B);
    assert_int_equal(store_inbox_insert(fx->s, &c, &oc), 0);
    assert_true(oc.duplicate);
    assert_true(oc.conflicting);
    assert_int_equal(oc.dup_count, 2);

    assert_int_equal(store_inbox_get(fx->s, a.id, &got), 0);
    assert_string_equal(got.source, source);
    assert_string_equal(got.event_id, event_id);
    assert_string_equal(got.event_type, "order.paid");
    assert_string_equal(got.entity_kind, "order");
    assert_string_equal(got.entity_id, "o-1");
    assert_true(got.has_version);
    assert_int_equal(got.version, 3);
    assert_string_equal(got.payload, "{\"id\":\"x\"}");
    assert_string_equal(got.payload_sha256, SHA_A); /* the first body stays */
    assert_true(got.signature_verified);
    assert_int_equal(got.status, INBOX_PENDING);
    assert_int_equal(got.dup_count, 2);
    assert_int_equal(got.conflict_count, 1);
    assert_true(got.last_dup_at >= got.received_at);
    assert_int_equal(got.next_attempt_at, got.received_at);
    assert_null(got.processed_at ? "processed" : NULL);
    inbox_item_free(&got);

    /* The same event id at another source is another event. */
    struct inbox_item d;
    struct inbox_outcome od;
    char other[SOURCE_NAME_MAX];
    unique_name(other, "src_");
    item_init(&d, other, event_id, SHA_A);
    assert_int_equal(store_inbox_insert(fx->s, &d, &od), 0);
    assert_false(od.duplicate);
    assert_string_not_equal(od.id, a.id);

    /* An item without its key is refused. */
    struct inbox_item bad;
    struct inbox_outcome ox;
    item_init(&bad, source, event_id, "short");
    assert_int_equal(store_inbox_insert(fx->s, &bad, &ox), HOOKD_EINVAL);
    inbox_item_free(&bad);
    assert_int_equal(store_inbox_get(fx->s, "inb_nope", &got), HOOKD_ENOTFOUND);
    inbox_item_free(&a);
    inbox_item_free(&b);
    inbox_item_free(&c);
    inbox_item_free(&d);
}

/* Fifty copies of one event at once, each on a connection of its own. */
struct copy_thread {
    pthread_t th;
    const char *dsn, *source, *event_id;
    pthread_barrier_t *start;
    int result;
    struct inbox_outcome out;
};

static void *copy_thread_main(void *arg)
{
    struct copy_thread *t = arg;
    struct store *s = NULL;
    struct inbox_item it;

    t->result = store_open(t->dsn, &s);
    item_init(&it, t->source, t->event_id, SHA_A);
    pthread_barrier_wait(t->start);
    if (t->result == 0)
        t->result = store_inbox_insert(s, &it, &t->out);
    inbox_item_free(&it);
    store_close(s);
    return NULL;
}

#define COPIES 50

static int count_rows(struct fixture *fx, const char *source)
{
    struct inbox_filter f = {.source = source, .status = -1, .limit = 1000};
    struct inbox_list l;
    int n;

    assert_int_equal(store_inbox_list(fx->s, &f, &l), 0);
    n = (int)l.n;
    inbox_list_free(&l);
    return n;
}

static void test_inbox_concurrent_copies(void **state)
{
    struct fixture *fx = *state;
    struct copy_thread t[COPIES];
    pthread_barrier_t start;
    char source[SOURCE_NAME_MAX], event_id[HOOKD_ID_MAX];
    struct inbox_list l;
    int inserted = 0, dups = 0;

    unique_name(source, "src_");
    id_new(event_id, "evt_");
    pthread_barrier_init(&start, NULL, COPIES);
    for (int i = 0; i < COPIES; i++) {
        t[i] = (struct copy_thread){.dsn = fx->dsn, .source = source, .event_id = event_id, .start = &start};
        assert_int_equal(pthread_create(&t[i].th, NULL, copy_thread_main, &t[i]), 0);
    }
    for (int i = 0; i < COPIES; i++) {
        pthread_join(t[i].th, NULL);
        assert_int_equal(t[i].result, 0);
        inserted += !t[i].out.duplicate;
        dups += t[i].out.duplicate;
        assert_string_equal(t[i].out.id, t[0].out.id);
    }
    pthread_barrier_destroy(&start);
    assert_int_equal(inserted, 1);
    assert_int_equal(dups, COPIES - 1);
    struct inbox_filter f = {.source = source, .status = -1, .limit = 10};
    assert_int_equal(store_inbox_list(fx->s, &f, &l), 0);
    assert_int_equal(l.n, 1);
    assert_int_equal(l.items[0].dup_count, COPIES - 1);
    assert_int_equal(l.items[0].conflict_count, 0);
    inbox_list_free(&l);
}

/* The daemon's path: copies as writer ops from many threads, sharing commits. */
struct writer_copy {
    pthread_t th;
    struct writer *w;
    const char *source, *event_id;
    int result;
    struct inbox_outcome out;
};

static int op_inbox_insert(struct store *s, void *arg)
{
    struct writer_copy *c = arg;
    struct inbox_item it;
    int rc;

    item_init(&it, c->source, c->event_id, SHA_A);
    rc = store_inbox_insert(s, &it, &c->out);
    inbox_item_free(&it);
    return rc;
}

static void *writer_copy_main(void *arg)
{
    struct writer_copy *c = arg;
    c->result = writer_exec(c->w, op_inbox_insert, c);
    return NULL;
}

static void test_inbox_copies_through_writer(void **state)
{
    struct fixture *fx = *state;
    struct writer_copy c[COPIES];
    struct writer *w;
    char source[SOURCE_NAME_MAX], event_id[HOOKD_ID_MAX];
    struct writer_stats st;
    int inserted = 0;

    unique_name(source, "src_");
    id_new(event_id, "evt_");
    assert_int_equal(writer_start(fx->dsn, &(struct writer_options){.max_wait_us = 2000}, &w), 0);
    for (int i = 0; i < COPIES; i++) {
        c[i] = (struct writer_copy){.w = w, .source = source, .event_id = event_id, .result = -100};
        assert_int_equal(pthread_create(&c[i].th, NULL, writer_copy_main, &c[i]), 0);
    }
    for (int i = 0; i < COPIES; i++) {
        pthread_join(c[i].th, NULL);
        assert_int_equal(c[i].result, 0);
        inserted += !c[i].out.duplicate;
    }
    writer_stats(w, &st);
    writer_stop(w);
    assert_int_equal(inserted, 1);
    assert_int_equal(count_rows(fx, source), 1);
    assert_true(st.batches < COPIES); /* some copies shared a commit */
}

static void test_inbox_list_filters(void **state)
{
    struct fixture *fx = *state;
    char source[SOURCE_NAME_MAX], ids[4][HOOKD_ID_MAX];
    struct inbox_list l;
    int64_t t0 = clock_now_ms();

    unique_name(source, "src_");
    for (int i = 0; i < 4; i++) {
        struct inbox_item it;
        struct inbox_outcome o;
        char event_id[HOOKD_ID_MAX];
        id_new(event_id, "evt_");
        item_init(&it, source, event_id, SHA_A);
        free(it.entity_id);
        it.entity_id = strdup(i % 2 ? "o-odd" : "o-even");
        it.received_at = t0 + i * 1000;
        assert_int_equal(store_inbox_insert(fx->s, &it, &o), 0);
        snprintf(ids[i], sizeof ids[i], "%s", o.id);
        inbox_item_free(&it);
        usleep(2000); /* ids sort by creation time */
    }
    struct inbox_filter f = {.source = source, .status = -1, .entity_kind = "order", .entity_id = "o-odd", .limit = 10};
    assert_int_equal(store_inbox_list(fx->s, &f, &l), 0);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.items[0].id, ids[3]);
    assert_string_equal(l.items[1].id, ids[1]);
    inbox_list_free(&l);

    f = (struct inbox_filter){.source = source, .status = INBOX_PENDING, .since = t0 + 1000, .until = t0 + 3000,
                              .limit = 10};
    assert_int_equal(store_inbox_list(fx->s, &f, &l), 0);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.items[0].id, ids[2]);
    assert_string_equal(l.items[1].id, ids[1]);
    inbox_list_free(&l);

    f = (struct inbox_filter){.source = source, .status = INBOX_PROCESSED, .limit = 10};
    assert_int_equal(store_inbox_list(fx->s, &f, &l), 0);
    assert_int_equal(l.n, 0);
    inbox_list_free(&l);

    f = (struct inbox_filter){.source = source, .status = -1, .before_id = ids[2], .limit = 1};
    assert_int_equal(store_inbox_list(fx->s, &f, &l), 0);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.items[0].id, ids[1]);
    inbox_list_free(&l);
}

static void test_rejections_bounded_and_counted(void **state)
{
    struct fixture *fx = *state;
    char source[SOURCE_NAME_MAX];
    struct rejection_list l;
    struct rejection_count_list counts;
    static const char *const reasons[] = {"bad_signature", "bad_signature", "too_large", "bad_signature",
                                          "missing_field", "bad_signature", "too_large"};
    const int n = (int)(sizeof reasons / sizeof reasons[0]);

    unique_name(source, "src_");
    for (int i = 0; i < n; i++) {
        struct rejection r = {.size = 100 + i};
        snprintf(r.source, sizeof r.source, "%s", source);
        r.reason = (char *)reasons[i];
        r.peer = "127.0.0.1:5000";
        snprintf(r.sha256, sizeof r.sha256, "%s", i % 2 ? SHA_A : SHA_B);
        assert_int_equal(store_rejection_insert(fx->s, &r, 3), 0);
        assert_true(r.id > 0 && r.at > 0);
    }
    struct rejection_filter f = {.source = source, .limit = 100};
    assert_int_equal(store_rejection_list(fx->s, &f, &l), 0);
    assert_int_equal(l.n, 3); /* only the newest three are kept */
    assert_string_equal(l.items[0].reason, "too_large");
    assert_int_equal(l.items[0].size, 100 + n - 1);
    assert_string_equal(l.items[0].peer, "127.0.0.1:5000");
    assert_string_equal(l.items[0].sha256, SHA_B);
    assert_string_equal(l.items[2].reason, "missing_field");
    int64_t second = l.items[1].id;
    rejection_list_free(&l);

    f.before_id = second;
    assert_int_equal(store_rejection_list(fx->s, &f, &l), 0);
    assert_int_equal(l.n, 1);
    assert_string_equal(l.items[0].reason, "missing_field");
    rejection_list_free(&l);

    /* The counters count every rejection, not only the kept ones. */
    assert_int_equal(store_rejection_counts(fx->s, source, &counts), 0);
    assert_int_equal(counts.n, 3);
    assert_string_equal(counts.items[0].reason, "bad_signature");
    assert_int_equal(counts.items[0].count, 4);
    assert_string_equal(counts.items[1].reason, "missing_field");
    assert_int_equal(counts.items[1].count, 1);
    assert_string_equal(counts.items[2].reason, "too_large");
    assert_int_equal(counts.items[2].count, 2);
    rejection_count_list_free(&counts);

    /* Deleting the source drops its log and counters. */
    struct source src = {.definition = "{}"};
    snprintf(src.name, sizeof src.name, "%s", source);
    assert_int_equal(store_source_insert(fx->s, &src), 0);
    assert_int_equal(store_source_delete(fx->s, source), 0);
    f.before_id = 0;
    assert_int_equal(store_rejection_list(fx->s, &f, &l), 0);
    assert_int_equal(l.n, 0);
    rejection_list_free(&l);
    assert_int_equal(store_rejection_counts(fx->s, source, &counts), 0);
    assert_int_equal(counts.n, 0);
    rejection_count_list_free(&counts);
}

/* A fault injected into the insert reaches the caller, and nothing is stored. */
static void test_inbox_insert_fault(void **state)
{
    struct fixture *fx = *state;
    char source[SOURCE_NAME_MAX], event_id[HOOKD_ID_MAX];
    struct inbox_item it;
    struct inbox_outcome o;

    unique_name(source, "src_");
    id_new(event_id, "evt_");
    item_init(&it, source, event_id, SHA_A);
    store_fault_inject("inbox_insert", 1, HOOKD_EIO);
    assert_int_equal(store_inbox_insert(fx->s, &it, &o), HOOKD_EIO);
    assert_int_equal(count_rows(fx, source), 0);
    assert_int_equal(store_inbox_insert(fx->s, &it, &o), 0);
    assert_int_equal(count_rows(fx, source), 1);
    inbox_item_free(&it);
}

/* ---- the workers' methods ------------------------------------------------------------------------- */

struct claimed { struct inbox_item items[16]; size_t n; };

/* Claims at now and keeps this source's items (a shared database may hold other tests' rows). */
static void claim_mine(struct fixture *fx, const char *node, const char *source, int64_t now, int64_t until,
                       struct claimed *out)
{
    struct inbox_list l = {0};

    out->n = 0;
    assert_int_equal(store_inbox_claim_due(fx->s, node, now, until, 100, &l), 0);
    for (size_t i = 0; i < l.n; i++) {
        if (strcmp(l.items[i].source, source) == 0 && out->n < 16) {
            out->items[out->n++] = l.items[i];
            memset(&l.items[i], 0, sizeof l.items[i]);
        }
    }
    inbox_list_free(&l);
}

static void claimed_free(struct claimed *c)
{
    for (size_t i = 0; i < c->n; i++)
        inbox_item_free(&c->items[i]);
    c->n = 0;
}

static const struct inbox_item *claimed_find(const struct claimed *c, const char *event_id)
{
    for (size_t i = 0; i < c->n; i++) {
        if (strcmp(c->items[i].event_id, event_id) == 0)
            return &c->items[i];
    }
    return NULL;
}

/* An item of entity (kind, entity) received at `at`; kind NULL: an entity id without a kind. */
static void insert_kind_at(struct fixture *fx, const char *source, const char *event_id, const char *kind,
                           const char *entity, int64_t at, char id_out[HOOKD_ID_MAX])
{
    struct inbox_item it;
    struct inbox_outcome o;

    item_init(&it, source, event_id, SHA_A);
    free(it.entity_id);
    free(it.entity_kind);
    it.entity_id = entity ? strdup(entity) : NULL;
    it.entity_kind = kind ? strdup(kind) : NULL;
    it.received_at = at;
    assert_int_equal(store_inbox_insert(fx->s, &it, &o), 0);
    snprintf(id_out, HOOKD_ID_MAX, "%s", o.id);
    inbox_item_free(&it);
}

static void insert_at(struct fixture *fx, const char *source, const char *event_id, const char *entity, int64_t at,
                      char id_out[HOOKD_ID_MAX])
{
    insert_kind_at(fx, source, event_id, entity ? "order" : NULL, entity, at, id_out);
}

static int complete_as(struct fixture *fx, const struct inbox_item *it, const char *node, int64_t token,
                       enum inbox_status st, int64_t next, int64_t now)
{
    const struct inbox_result r = {
        .id = it->id, .lease_owner = node, .lease_token = token, .status = st, .attempts = it->attempts + 1,
        .next_attempt_at = next, .result = st == INBOX_PROCESSED ? "forwarded" : NULL,
        .error = st == INBOX_PROCESSED ? NULL : "the application answered 500",
    };
    return store_inbox_complete(fx->s, &r, now);
}

static void test_inbox_claims_one_entity_at_a_time(void **state)
{
    struct fixture *fx = *state;
    char source[SOURCE_NAME_MAX], a1[HOOKD_ID_MAX], a2[HOOKD_ID_MAX], a3[HOOKD_ID_MAX], b1[HOOKD_ID_MAX],
        x1[HOOKD_ID_MAX];
    /* Ten days back: no other test's items are due at these times. */
    const int64_t base = clock_now_ms() - 10LL * 86400000;
    struct claimed c = {0}, c2 = {0};
    const struct inbox_item *it;
    struct inbox_item got;

    unique_name(source, "src_");
    insert_at(fx, source, "a1", "A", base + 1, a1);
    insert_at(fx, source, "a2", "A", base + 2, a2);
    insert_at(fx, source, "a3", "A", base + 3, a3);
    insert_at(fx, source, "b1", "B", base + 4, b1);
    insert_at(fx, source, "x1", NULL, base + 5, x1);
    /* Not yet due: nothing. */
    claim_mine(fx, "n1", source, base, base + 1000, &c);
    assert_int_equal(c.n, 0);
    /* The oldest of each entity, and the item without one. */
    claim_mine(fx, "n1", source, base + 100, base + 1000, &c);
    assert_int_equal(c.n, 3);
    assert_non_null(claimed_find(&c, "a1"));
    assert_non_null(claimed_find(&c, "b1"));
    assert_non_null(claimed_find(&c, "x1"));
    /* A second node gets nothing: A and B hold live leases, a2 and a3 wait behind a1. */
    claim_mine(fx, "n2", source, base + 100, base + 1000, &c2);
    assert_int_equal(c2.n, 0);

    /* Fencing: the wrong token or owner changes nothing. */
    it = claimed_find(&c, "a1");
    assert_true(it->lease_token > 0);
    assert_string_equal(it->lease_owner, "n1");
    assert_int_equal(complete_as(fx, it, "n1", it->lease_token + 1, INBOX_PROCESSED, 0, base + 110), HOOKD_ESTALE);
    assert_int_equal(complete_as(fx, it, "n2", it->lease_token, INBOX_PROCESSED, 0, base + 110), HOOKD_ESTALE);
    assert_int_equal(complete_as(fx, it, "n1", it->lease_token, INBOX_PROCESSED, 0, base + 110), 0);
    assert_int_equal(complete_as(fx, it, "n1", it->lease_token, INBOX_PROCESSED, 0, base + 110), HOOKD_ESTALE);
    assert_int_equal(store_inbox_get(fx->s, a1, &got), 0);
    assert_int_equal(got.status, INBOX_PROCESSED);
    assert_string_equal(got.result, "forwarded");
    assert_int_equal(got.attempts, 1);
    assert_int_equal(got.processed_at, base + 110);
    assert_null(got.lease_owner);
    assert_int_equal(got.next_attempt_at, 0);
    inbox_item_free(&got);

    /* A is free again: its next item, a2, is taken (by the other node). */
    claim_mine(fx, "n2", source, base + 120, base + 1000, &c2);
    assert_int_equal(c2.n, 1);
    assert_string_equal(c2.items[0].event_id, "a2");
    /* a2 deferred for later: a3 is not held behind an item that is not due. */
    assert_int_equal(complete_as(fx, &c2.items[0], "n2", c2.items[0].lease_token, INBOX_DEFERRED, base + 5000,
                                 base + 130),
                     0);
    assert_int_equal(store_inbox_get(fx->s, a2, &got), 0);
    assert_int_equal(got.status, INBOX_DEFERRED);
    assert_int_equal(got.deferred_at, base + 130);
    assert_int_equal(got.next_attempt_at, base + 5000);
    assert_string_equal(got.error, "the application answered 500");
    inbox_item_free(&got);
    claimed_free(&c2);
    claim_mine(fx, "n2", source, base + 140, base + 1000, &c2);
    assert_int_equal(c2.n, 1);
    assert_string_equal(c2.items[0].event_id, "a3");
    claimed_free(&c2);

    /* An expired lease is taken again with a new token; the old holder is fenced out. */
    claim_mine(fx, "n2", source, base + 1001, base + 2000, &c2);
    assert_int_equal(c2.n, 3); /* b1, x1 and a3, whose leases ended at base + 1000 */
    it = claimed_find(&c2, "x1");
    assert_non_null(it);
    assert_true(it->lease_token > claimed_find(&c, "x1")->lease_token);
    assert_int_equal(complete_as(fx, claimed_find(&c, "x1"), "n1", claimed_find(&c, "x1")->lease_token,
                                 INBOX_PROCESSED, 0, base + 1002),
                     HOOKD_ESTALE);

    /* Replays: a quarantined item goes back to pending, due now, a new run; others are ECONFLICT. */
    assert_int_equal(complete_as(fx, it, "n2", it->lease_token, INBOX_QUARANTINED, 0, base + 1003), 0);
    assert_int_equal(store_inbox_replay(fx->s, x1, base + 1004, &got), 0);
    assert_int_equal(got.status, INBOX_PENDING);
    assert_int_equal(got.attempts, 0);
    assert_int_equal(got.next_attempt_at, base + 1004);
    inbox_item_free(&got);
    assert_int_equal(store_inbox_replay(fx->s, x1, base + 1005, NULL), HOOKD_ECONFLICT);
    assert_int_equal(store_inbox_replay(fx->s, a1, base + 1005, NULL), HOOKD_ECONFLICT); /* processed */
    assert_int_equal(store_inbox_replay(fx->s, "inb_missing", base + 1005, NULL), HOOKD_ENOTFOUND);
    /* A leased item is not replayable (a worker holds it). */
    it = claimed_find(&c2, "b1");
    assert_int_equal(complete_as(fx, it, "n2", it->lease_token, INBOX_QUARANTINED, 0, base + 1006), 0);
    it = claimed_find(&c2, "a3");
    assert_int_equal(store_inbox_replay(fx->s, a3, base + 1006, NULL), HOOKD_ECONFLICT);
    assert_int_equal(complete_as(fx, it, "n2", it->lease_token, INBOX_QUARANTINED, 0, base + 1007), 0);

    /* Range: this source's quarantined items (a3, b1), bounded by limit and time. */
    struct inbox_filter f = {.source = source, .status = INBOX_QUARANTINED, .limit = 10};
    int64_t n = -1;
    assert_int_equal(store_inbox_replay_range(fx->s, &f, true, base + 1010, &n), 0);
    assert_int_equal(n, 2);
    f.limit = 1;
    assert_int_equal(store_inbox_replay_range(fx->s, &f, true, base + 1010, &n), 0);
    assert_int_equal(n, 1);
    f.limit = 10;
    f.since = base + 4; /* received at base + 4: b1 only */
    assert_int_equal(store_inbox_replay_range(fx->s, &f, true, base + 1010, &n), 0);
    assert_int_equal(n, 1);
    f.since = 0;
    f.status = INBOX_DEFERRED;
    assert_int_equal(store_inbox_replay_range(fx->s, &f, true, base + 1010, &n), 0);
    assert_int_equal(n, 1); /* a2 */
    f.status = INBOX_QUARANTINED;
    assert_int_equal(store_inbox_replay_range(fx->s, &f, false, base + 1010, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(store_inbox_replay_range(fx->s, &f, true, base + 1011, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(store_inbox_get(fx->s, b1, &got), 0);
    assert_int_equal(got.status, INBOX_PENDING);
    assert_int_equal(got.next_attempt_at, base + 1010);
    inbox_item_free(&got);

    /* A node's leases released at its start: its items are claimable again at once. */
    claimed_free(&c2);
    claim_mine(fx, "n3", source, base + 1020, base + 900000, &c2);
    assert_true(c2.n >= 2);
    assert_int_equal(store_inbox_release_node(fx->s, "n3"), 0);
    claimed_free(&c2);
    claim_mine(fx, "n4", source, base + 1021, base + 900000, &c2);
    assert_true(c2.n >= 2);
    /* Leave nothing open for other runs on a shared database. */
    for (size_t i = 0; i < c2.n; i++)
        assert_int_equal(complete_as(fx, &c2.items[i], "n4", c2.items[i].lease_token, INBOX_PROCESSED, 0, base + 1030),
                         0);
    claimed_free(&c2);
    assert_int_equal(store_inbox_replay(fx->s, a2, base + 1031, NULL), 0);
    claim_mine(fx, "n4", source, base + 1032, base + 900000, &c2);
    for (size_t i = 0; i < c2.n; i++)
        assert_int_equal(complete_as(fx, &c2.items[i], "n4", c2.items[i].lease_token, INBOX_PROCESSED, 0, base + 1033),
                         0);
    claimed_free(&c2);
    claimed_free(&c);
}

/*
 * The one-entity rule when the entity has an id and no kind (a source without
 * entity.kind, or rows written by SQL): items without a kind and the same id
 * are one entity, and not the entity of that id with a kind.
 */
static void test_inbox_claims_entity_without_kind(void **state)
{
    struct fixture *fx = *state;
    char source[SOURCE_NAME_MAX], id[HOOKD_ID_MAX];
    /* Twenty days back: no other test's items are due at these times. */
    const int64_t base = clock_now_ms() - 20LL * 86400000;
    struct claimed c = {0}, c2 = {0};

    unique_name(source, "src_");
    insert_kind_at(fx, source, "n1", NULL, "K", base + 1, id);
    insert_kind_at(fx, source, "n2", NULL, "K", base + 2, id);
    insert_kind_at(fx, source, "o1", "order", "K", base + 3, id);
    insert_kind_at(fx, source, "o2", "order", "K", base + 4, id);
    claim_mine(fx, "n1", source, base + 100, base + 1000, &c);
    assert_int_equal(c.n, 2);
    assert_non_null(claimed_find(&c, "n1"));
    assert_non_null(claimed_find(&c, "o1"));
    /* Both entities are held: nothing more, on any node. */
    claim_mine(fx, "n2", source, base + 100, base + 1000, &c2);
    assert_int_equal(c2.n, 0);
    /* n1 done: n2 is next for the kindless K; (order, K) stays held by o1. */
    const struct inbox_item *it = claimed_find(&c, "n1");
    assert_int_equal(complete_as(fx, it, "n1", it->lease_token, INBOX_PROCESSED, 0, base + 110), 0);
    claim_mine(fx, "n2", source, base + 120, base + 1000, &c2);
    assert_int_equal(c2.n, 1);
    assert_string_equal(c2.items[0].event_id, "n2");
    /* Leave nothing open for later tests. */
    it = claimed_find(&c, "o1");
    assert_int_equal(complete_as(fx, it, "n1", it->lease_token, INBOX_PROCESSED, 0, base + 130), 0);
    assert_int_equal(complete_as(fx, &c2.items[0], "n2", c2.items[0].lease_token, INBOX_PROCESSED, 0, base + 130), 0);
    claimed_free(&c2);
    claim_mine(fx, "n3", source, base + 140, base + 1000, &c2);
    assert_int_equal(c2.n, 1);
    assert_string_equal(c2.items[0].event_id, "o2");
    assert_int_equal(complete_as(fx, &c2.items[0], "n3", c2.items[0].lease_token, INBOX_PROCESSED, 0, base + 150), 0);
    claimed_free(&c2);
    claimed_free(&c);
}


/*
 * The inbox rebuilt with its status check as comparisons (SQLite migration
 * inbox_check_compare): rows written before it, by SQL, come through with
 * their rowids and every column; the check still refuses other statuses; the
 * indexes are the ones the table had, less the lease index dropped before
 * it (on PostgreSQL, the one change: that index is gone).
 */
static void test_inbox_rebuild_keeps_rows(void **state)
{
    struct fixture *fx = *state, fresh = *fx;
    struct fresh_store f;
    struct store *s;
    struct inbox_item it;

    fresh_store_make(fx, &f);
    memcpy(fresh.dsn, f.dsn, strlen(f.dsn) + 1);
    if (strncmp(f.dsn, "sqlite:", 7) != 0) {
        assert_int_equal(store_open(f.dsn, &s), 0);
        assert_int_equal(store_migrate(s), 0);
        assert_int_equal(fixture_sql_int(&fresh, "SELECT count(*) FROM pg_indexes WHERE indexname = 'hookd_inbox_leased'"), 0);
        store_close(s);
        fresh_store_drop(fx, &f);
        return;
    }
    /* The schema as it was before the rebuild, with rows in it. */
    size_t before = 0;
    while (before < sqlite_migrations_count && strstr(sqlite_migrations[before].sql, "hookd_inbox_new") == NULL)
        before++;
    assert_true(before < sqlite_migrations_count);
    fixture_sql(&fresh, "CREATE TABLE hookd_schema (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)");
    for (size_t i = 0; i < before; i++) {
        char record[96];
        fixture_sql(&fresh, sqlite_migrations[i].sql);
        snprintf(record, sizeof record, "INSERT INTO hookd_schema VALUES (%d, 0)", sqlite_migrations[i].version);
        fixture_sql(&fresh, record);
    }
    fixture_sql(&fresh,
                "INSERT INTO hookd_inbox(rowid, id, source, event_id, event_type, entity_kind, entity_id, version,"
                " payload, payload_sha256, signature_verified, status, attempts, next_attempt_at, lease_owner,"
                " lease_until, lease_token, result, error, received_at, processed_at, dup_count, last_dup_at,"
                " conflict_count, deferred_at) VALUES"
                " (7, 'inb_a', 's1', 'e1', 'order.paid', 'order', 'o1', 3, '{\"x\":1}', '" SHA_A "', 1, 'deferred', 2,"
                " 5000, 'n1', 6000, 4, NULL, 'gap', 1000, NULL, 1, 1500, 1, 1200),"
                " (42, 'inb_b', 's1', 'e2', NULL, NULL, NULL, NULL, '', '" SHA_B "', 0, 'processed', 1, NULL, NULL,"
                " NULL, 0, 'applied', NULL, 2000, 2500, 0, NULL, 0, NULL)");
    assert_int_equal(store_open(f.dsn, &s), 0);
    assert_int_equal(store_migrate(s), 0);
    fresh.s = s;
    assert_int_equal(fixture_sql_int(&fresh, "SELECT count(*) FROM hookd_inbox"), 2);
    assert_int_equal(fixture_sql_int(&fresh, "SELECT rowid FROM hookd_inbox WHERE id = 'inb_b'"), 42);
    assert_int_equal(fixture_sql_int(&fresh,
                                     "SELECT count(*) FROM hookd_inbox WHERE rowid = 7 AND source = 's1' AND"
                                     " event_id = 'e1' AND event_type = 'order.paid' AND entity_kind = 'order' AND"
                                     " entity_id = 'o1' AND version = 3 AND payload = '{\"x\":1}' AND"
                                     " payload_sha256 = '" SHA_A "' AND signature_verified = 1 AND"
                                     " status = 'deferred' AND attempts = 2 AND next_attempt_at = 5000 AND"
                                     " lease_owner = 'n1' AND lease_until = 6000 AND lease_token = 4 AND"
                                     " result IS NULL AND error = 'gap' AND received_at = 1000 AND"
                                     " processed_at IS NULL AND dup_count = 1 AND last_dup_at = 1500 AND"
                                     " conflict_count = 1 AND deferred_at = 1200"),
                     1);
    assert_int_equal(store_inbox_get(s, "inb_b", &it), 0);
    assert_int_equal(it.status, INBOX_PROCESSED);
    assert_string_equal(it.result, "applied");
    inbox_item_free(&it);
    /* The check as comparisons, refusing what it refused. */
    assert_int_equal(fixture_sql_int(&fresh, "SELECT count(*) FROM sqlite_master WHERE name = 'hookd_inbox'"
                                             " AND sql LIKE '%status IN%'"),
                     0);
    assert_int_equal(fixture_sql_int(&fresh, "SELECT count(*) FROM sqlite_master WHERE name = 'hookd_inbox'"
                                             " AND sql LIKE '%status = ''quarantined''%'"),
                     1);
    fixture_sql(&fresh, "CREATE TABLE probe(ok INTEGER)");
    fixture_sql(&fresh, "CREATE TRIGGER probe_t AFTER INSERT ON probe BEGIN"
                        " UPDATE hookd_inbox SET status = 'bogus' WHERE id = 'inb_a'; END");
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(f.dsn + 7, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "INSERT INTO probe VALUES (1)", NULL, NULL, NULL), SQLITE_CONSTRAINT);
    sqlite3_close(db);
    /* Every index of the table, by name and definition (the UNIQUE constraints' own too). */
    assert_int_equal(fixture_sql_int(&fresh, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND"
                                             " tbl_name = 'hookd_inbox'"),
                     9);
    static const char *const names[] = {"hookd_inbox_due",   "hookd_inbox_source", "hookd_inbox_status",
                                        "hookd_inbox_retention", "hookd_inbox_entity", "hookd_inbox_odd_id",
                                        "hookd_inbox_odd_time"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char q[160];
        snprintf(q, sizeof q, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = '%s'", names[i]);
        assert_int_equal(fixture_sql_int(&fresh, q), 1);
    }
    assert_int_equal(fixture_sql_int(&fresh, "SELECT count(*) FROM sqlite_master WHERE name = 'hookd_inbox_leased'"), 0);
    assert_int_equal(fixture_sql_int(&fresh, "SELECT count(*) FROM pragma_index_list('hookd_inbox')"
                                             " WHERE \"unique\" = 1"),
                     2);
    /* Ids and (source, event_id) stay unique. */
    assert_int_equal(sqlite3_open(f.dsn + 7, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "INSERT INTO hookd_inbox(id, source, event_id, payload, payload_sha256,"
                                      " received_at) VALUES ('inb_c', 's1', 'e1', '', '', 1)",
                                  NULL, NULL, NULL),
                     SQLITE_CONSTRAINT);
    sqlite3_close(db);
    store_close(s);
    fresh_store_drop(fx, &f);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_source_crud),
        T(test_inbox_rebuild_keeps_rows),
        T(test_source_list_cursor),
        T(test_inbox_insert_and_duplicates),
        T(test_inbox_concurrent_copies),
        T(test_inbox_copies_through_writer),
        T(test_inbox_list_filters),
        T(test_rejections_bounded_and_counted),
        T(test_inbox_insert_fault),
        T(test_inbox_claims_one_entity_at_a_time),
        T(test_inbox_claims_entity_without_kind),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
