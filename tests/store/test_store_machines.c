/*
 * Store conformance, the machines family on either backend (HOOKD_TEST_STORE):
 * machine definitions (CRUD, cursor), entities, the append-only transitions
 * log, settling a deferred item (never one a worker holds), the audit counts,
 * a decision's reads (entity_hold) and writes (decision_write), and (PostgreSQL) the entity lock holding
 * a second connection off and a decision connection's quiet outbox.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <unistd.h>

#include "store_fixture.h"

static void test_machine_crud(void **state)
{
    struct fixture *fx = *state;
    struct machine_record m = {0}, got = {0};
    struct machine_list l = {0};

    id_new(m.name, "mach_");
    m.definition = strdup("{\"name\":\"x\"}");
    assert_int_equal(store_machine_insert(fx->s, &m), 0);
    assert_int_equal(store_machine_insert(fx->s, &m), HOOKD_EEXISTS);
    assert_int_equal(store_machine_get(fx->s, m.name, &got), 0);
    assert_string_equal(got.definition, m.definition);
    assert_true(got.created_at > 0);
    int64_t created = got.created_at;
    machine_record_free(&got);
    free(m.definition);
    m.definition = strdup("{\"name\":\"y\"}");
    m.created_at = 1;
    m.updated_at = created + 10;
    assert_int_equal(store_machine_update(fx->s, &m), 0);
    assert_int_equal(store_machine_get(fx->s, m.name, &got), 0);
    assert_string_equal(got.definition, "{\"name\":\"y\"}");
    assert_int_equal(got.created_at, created); /* kept */
    assert_int_equal(got.updated_at, created + 10);
    machine_record_free(&got);
    const struct machine_filter f = {.limit = 1000};
    assert_int_equal(store_machine_list(fx->s, &f, &l), 0);
    bool found = false;
    for (size_t i = 0; i < l.n; i++)
        found = found || strcmp(l.items[i].name, m.name) == 0;
    assert_true(found);
    machine_list_free(&l);
    assert_int_equal(store_machine_delete(fx->s, m.name), 0);
    assert_int_equal(store_machine_delete(fx->s, m.name), HOOKD_ENOTFOUND);
    assert_int_equal(store_machine_update(fx->s, &m), HOOKD_ENOTFOUND);
    assert_int_equal(store_machine_get(fx->s, m.name, &got), HOOKD_ENOTFOUND);
    machine_record_free(&m);
}

static void test_entity_and_transitions(void **state)
{
    struct fixture *fx = *state;
    char id[HOOKD_ID_MAX];
    struct entity_record e = {0}, got = {0};
    struct transition_list l = {0};

    id_new(id, "ent_");
    assert_int_equal(store_entity_get(fx->s, "order", id, &got), HOOKD_ENOTFOUND);
    e.kind = "order";
    e.id = id;
    e.state = "created";
    e.last_event_id = "ev1";
    assert_int_equal(store_entity_put(fx->s, &e), 0);
    assert_int_equal(store_entity_get(fx->s, "order", id, &got), 0);
    assert_string_equal(got.state, "created");
    assert_false(got.has_version);
    entity_record_free(&got);
    e.state = "paid";
    e.has_version = true;
    e.version = 7;
    e.last_event_id = "ev2";
    assert_int_equal(store_entity_put(fx->s, &e), 0);
    assert_int_equal(store_entity_get(fx->s, "order", id, &got), 0);
    assert_string_equal(got.state, "paid");
    assert_true(got.has_version);
    assert_int_equal(got.version, 7);
    assert_string_equal(got.last_event_id, "ev2");
    entity_record_free(&got);

    struct transition_record t = {.source = "shop", .kind = "order", .entity_id = id, .event_id = "ev1",
                                  .to_state = "created", .result = "applied", .worker = "n1", .at = 5};
    snprintf(t.inbox_id, sizeof t.inbox_id, "inb_a");
    assert_int_equal(store_transition_insert(fx->s, &t), 0);
    int64_t first = t.seq;
    t.from_state = "created";
    t.to_state = "paid";
    t.has_version = true;
    t.version = 7;
    t.reason = "why \"quoted\"\n";
    assert_int_equal(store_transition_insert(fx->s, &t), 0);
    assert_true(t.seq > first);
    t.result = "sideways"; /* the table's check refuses a result it does not know */
    assert_int_not_equal(store_transition_insert(fx->s, &t), 0);
    assert_int_equal(store_transition_list(fx->s, "order", id, &l), 0);
    assert_int_equal(l.n, 2);
    assert_null(l.items[0].from_state);
    assert_false(l.items[0].has_version);
    assert_string_equal(l.items[1].from_state, "created");
    assert_int_equal(l.items[1].version, 7);
    assert_string_equal(l.items[1].reason, "why \"quoted\"\n");
    assert_string_equal(l.items[1].worker, "n1");
    transition_list_free(&l);
}

static void item_add(struct fixture *fx, const char *source, const char *event_id, const char *entity,
                     int64_t version, struct inbox_outcome *out)
{
    struct inbox_item it = {0};

    snprintf(it.source, sizeof it.source, "%s", source);
    it.event_id = strdup(event_id);
    it.event_type = strdup("order.paid");
    it.entity_kind = strdup("order");
    it.entity_id = strdup(entity);
    it.has_version = true;
    it.version = version;
    it.payload = strdup("{}");
    snprintf(it.payload_sha256, sizeof it.payload_sha256, "%064d", 0);
    assert_int_equal(store_inbox_insert(fx->s, &it, out), 0);
    inbox_item_free(&it);
}

static void test_settle_and_audit(void **state)
{
    struct fixture *fx = *state;
    char source[SOURCE_NAME_MAX], entity[HOOKD_ID_MAX];
    struct inbox_outcome a, b, dup;
    struct inbox_list claimed = {0};
    struct audit_report r;
    struct inbox_item got;
    int64_t now = clock_now_ms();

    id_new(source, "src_");
    id_new(entity, "ent_");
    item_add(fx, source, "e2", entity, 2, &a);
    item_add(fx, source, "e1", entity, 1, &b); /* lower after higher */
    item_add(fx, source, "e1", entity, 1, &dup); /* a duplicate */
    assert_true(dup.duplicate);
    const struct inbox_settle st = {.id = a.id, .status = INBOX_PROCESSED, .result = "applied"};
    /* Open and leased by a worker: not settled (the worker decides). */
    assert_int_equal(store_inbox_claim_due(fx->s, "n1", now + 10, now + 60000, 10, &claimed), 0);
    bool mine = false;
    for (size_t i = 0; i < claimed.n; i++) {
        if (strcmp(claimed.items[i].id, b.id) == 0 || strcmp(claimed.items[i].id, a.id) == 0) {
            const struct inbox_result res = {.id = claimed.items[i].id, .lease_owner = "n1",
                                             .lease_token = claimed.items[i].lease_token, .status = INBOX_DEFERRED,
                                             .attempts = 1, .next_attempt_at = now + 60000, .error = "gap"};
            assert_int_equal(store_inbox_complete(fx->s, &res, now), 0);
            mine = true;
        }
    }
    assert_true(mine);
    inbox_list_free(&claimed);
    struct inbox_list again = {0};
    assert_int_equal(store_inbox_claim_due(fx->s, "n2", now + 70000, now + 130000, 10, &again), 0);
    for (size_t i = 0; i < again.n; i++)
        if (strcmp(again.items[i].id, a.id) == 0)
            assert_int_equal(store_inbox_settle(fx->s, &st, now + 70000), HOOKD_ESTALE);
    inbox_list_free(&again);
    assert_int_equal(store_inbox_release_node(fx->s, "n2"), 0);
    assert_int_equal(store_inbox_get(fx->s, a.id, &got), 0);
    enum inbox_status a_status = got.status;
    inbox_item_free(&got);
    if (a_status == INBOX_DEFERRED || a_status == INBOX_PENDING) {
        assert_int_equal(store_inbox_settle(fx->s, &st, now), 0);
        assert_int_equal(store_inbox_get(fx->s, a.id, &got), 0);
        assert_int_equal(got.status, INBOX_PROCESSED);
        assert_string_equal(got.result, "applied");
        assert_true(got.processed_at > 0);
        inbox_item_free(&got);
        assert_int_equal(store_inbox_settle(fx->s, &st, now), HOOKD_ESTALE); /* once */
    }
    /* Audit: two applied rows for one version, and one applied row on an item not processed. */
    struct transition_record t = {.source = source, .kind = "order", .entity_id = entity, .to_state = "paid",
                                  .has_version = true, .version = 2, .result = "applied", .at = now};
    snprintf(t.inbox_id, sizeof t.inbox_id, "%s", b.id);
    assert_int_equal(store_transition_insert(fx->s, &t), 0);
    assert_int_equal(store_transition_insert(fx->s, &t), 0);
    assert_int_equal(store_audit(fx->s, source, 0, 0, &r), 0);
    assert_int_equal(r.received_twice, 1);
    assert_int_equal(r.extra_copies, 1);
    assert_int_equal(r.lower_after_higher, 1);
    assert_int_equal(r.applied_twice, 2); /* the version, and the item */
    assert_true(r.unprocessed_changes >= 2);
    assert_int_equal(r.conflicting, 0);
    /* A range before everything counts nothing. */
    assert_int_equal(store_audit(fx->s, source, 1, 2, &r), 0);
    assert_int_equal(r.received_twice + r.lower_after_higher + r.applied_twice + r.unprocessed_changes, 0);
}

/* The first event of the store whose idempotency key is key (0 when none). */
static int64_t event_by_key(struct fixture *fx, const char *key, struct event *out)
{
    struct event_list l = {0};
    const struct event_filter f = {.limit = 1000};
    int64_t seq = 0;

    assert_int_equal(store_event_list(fx->s, &f, &l), 0);
    for (size_t i = 0; i < l.n && !seq; i++) {
        if (l.items[i].idempotency_key && strcmp(l.items[i].idempotency_key, key) == 0) {
            seq = l.items[i].seq;
            *out = l.items[i];
            memset(&l.items[i], 0, sizeof l.items[i]);
        }
    }
    event_list_free(&l);
    return seq;
}

/*
 * A decision's writes at once: transitions in order, events (a key already
 * taken is no error and not counted), the entity, settled items; text with
 * the characters an array literal or a quoted string treats specially comes
 * back byte for byte; a settled item a worker holds fails the whole call.
 */
static void test_decision_write(void **state)
{
    struct fixture *fx = *state;
    char source[SOURCE_NAME_MAX], entity[HOOKD_ID_MAX + 16], key1[HOOKD_ID_MAX + 16], key2[HOOKD_ID_MAX + 16];
    struct inbox_outcome a, b, c;
    struct transition_list l = {0};
    struct entity_record got = {0};
    struct inbox_item item;
    struct event ev = {0};
    int64_t now = clock_now_ms();

    id_new(source, "src_");
    id_new(entity, "ent_");
    strcat(entity, "\"{,}NULL '"); /* quotes, backslash, braces, comma, the word NULL */
    item_add(fx, source, "d1", entity, 1, &a);
    item_add(fx, source, "d2", entity, 2, &b);
    item_add(fx, source, "d3", entity, 3, &c);
    snprintf(key1, sizeof key1, "hookd.machine:%s", a.id);
    snprintf(key2, sizeof key2, "hookd.machine:%s", b.id);
    struct transition_record t[3] = {
        {.source = source, .kind = "order", .entity_id = entity, .event_id = "d1", .to_state = "created",
         .has_version = true, .version = 1, .result = "applied", .worker = "n1", .at = now},
        {.source = source, .kind = "order", .entity_id = entity, .event_id = "d2", .from_state = "created",
         .to_state = "paid", .has_version = true, .version = 2, .result = "applied", .worker = "n1", .at = now},
        {.source = source, .kind = "order", .entity_id = entity, .event_id = "d3", .from_state = "paid",
         .result = "deferred", .reason = "gap \"v\" {1,2}\\", .at = now},
    };
    snprintf(t[0].inbox_id, sizeof t[0].inbox_id, "%s", a.id);
    snprintf(t[1].inbox_id, sizeof t[1].inbox_id, "%s", b.id);
    snprintf(t[2].inbox_id, sizeof t[2].inbox_id, "%s", c.id);
    struct event evs[2] = {
        {.type = "order.status_changed", .resource_type = "order", .resource_id = entity,
         .has_resource_version = true, .resource_version = 1, .payload = "{\"state\":\"created\"}",
         .idempotency_key = key1},
        {.type = "order.status_changed", .resource_type = "order", .resource_id = entity,
         .payload = "{\"state\":\"paid\"}", .idempotency_key = key2},
    };
    const struct entity_record e = {.kind = "order", .id = entity, .state = "paid", .has_version = true,
                                    .version = 2, .last_event_id = "d2", .updated_at = now};
    const struct inbox_settle st[2] = {{.id = a.id, .status = INBOX_PROCESSED, .result = "applied"},
                                       {.id = b.id, .status = INBOX_PROCESSED, .result = "applied"}};
    struct decision_writes w = {.transitions = t, .n_transitions = 3, .events = evs, .n_events = 2,
                                .entity = &e, .settles = st, .n_settles = 2};
    assert_int_equal(store_decision_write(fx->s, &w, now), 0);
    assert_int_equal(w.emitted, 2);
    assert_int_equal(store_transition_list(fx->s, "order", entity, &l), 0);
    assert_int_equal(l.n, 3);
    assert_string_equal(l.items[0].event_id, "d1");
    assert_null(l.items[0].from_state);
    assert_string_equal(l.items[1].to_state, "paid");
    assert_int_equal(l.items[1].version, 2);
    assert_string_equal(l.items[2].result, "deferred");
    assert_null(l.items[2].to_state);
    assert_null(l.items[2].worker);
    assert_string_equal(l.items[2].reason, "gap \"v\" {1,2}\\");
    assert_string_equal(l.items[2].entity_id, entity);
    assert_true(l.items[0].seq < l.items[1].seq && l.items[1].seq < l.items[2].seq);
    transition_list_free(&l);
    assert_int_equal(store_entity_get(fx->s, "order", entity, &got), 0);
    assert_string_equal(got.state, "paid");
    assert_int_equal(got.version, 2);
    entity_record_free(&got);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(store_inbox_get(fx->s, i ? b.id : a.id, &item), 0);
        assert_int_equal(item.status, INBOX_PROCESSED);
        assert_string_equal(item.result, "applied");
        assert_int_equal(item.attempts, 1);
        inbox_item_free(&item);
    }
    int64_t seq1 = event_by_key(fx, key1, &ev);
    assert_true(seq1 > 0);
    assert_string_equal(ev.resource_id, entity);
    assert_true(ev.has_resource_version);
    assert_string_equal(ev.payload, "{\"state\":\"created\"}");
    event_free(&ev);
    int64_t seq2 = event_by_key(fx, key2, &ev);
    assert_true(seq2 > seq1); /* in the decision's order */
    assert_false(ev.has_resource_version);
    event_free(&ev);

    /* Again: the keys are taken (nothing emitted), the items are settled already (ESTALE). */
    struct event again[2] = {evs[0], evs[1]};
    again[0].id[0] = again[1].id[0] = '\0';
    struct decision_writes w2 = {.events = again, .n_events = 2};
    assert_int_equal(store_decision_write(fx->s, &w2, now), 0);
    assert_int_equal(w2.emitted, 0);
    struct decision_writes w3 = {.settles = st, .n_settles = 1};
    assert_int_equal(store_decision_write(fx->s, &w3, now), HOOKD_ESTALE);
    /* One event alone: a taken key emits nothing, a new one emits it. */
    char key3[HOOKD_ID_MAX + 16];
    snprintf(key3, sizeof key3, "hookd.machine:%s", c.id);
    struct event one = evs[0];
    one.id[0] = '\0';
    struct decision_writes w6 = {.events = &one, .n_events = 1};
    assert_int_equal(store_decision_write(fx->s, &w6, now), 0);
    assert_int_equal(w6.emitted, 0);
    one.id[0] = '\0';
    one.idempotency_key = key3;
    assert_int_equal(store_decision_write(fx->s, &w6, now), 0);
    assert_int_equal(w6.emitted, 1);
    assert_true(event_by_key(fx, key3, &ev) > seq2);
    event_free(&ev);

    /* A settled item held by a worker fails the call, and the transaction undoes what it wrote. */
    struct inbox_list claimed = {0};
    assert_int_equal(store_inbox_claim_due(fx->s, "n1", now + 1000, now + 60000, 100, &claimed), 0);
    bool held = false;
    int64_t token = 0;
    for (size_t i = 0; i < claimed.n; i++)
        if (strcmp(claimed.items[i].id, c.id) == 0) {
            held = true;
            token = claimed.items[i].lease_token;
        }
    inbox_list_free(&claimed);
    assert_true(held);
    struct transition_record t4 = t[2];
    t4.reason = "undone";
    const struct inbox_settle st_c[2] = {{.id = c.id, .status = INBOX_PROCESSED, .result = "stale"},
                                         {.id = c.id, .status = INBOX_PROCESSED, .result = "stale"}};
    for (size_t k = 1; k <= 2; k++) { /* the single-row statement, and the one for several */
        struct decision_writes w4 = {.transitions = &t4, .n_transitions = 1, .settles = st_c, .n_settles = k};
        assert_int_equal(store_begin(fx->s), 0);
        assert_int_equal(store_decision_write(fx->s, &w4, now + 1020), HOOKD_ESTALE);
        assert_int_equal(store_rollback(fx->s), 0);
    }
    assert_int_equal(store_transition_list(fx->s, "order", entity, &l), 0);
    assert_int_equal(l.n, 3);
    transition_list_free(&l);
    /* The decided item's own outcome goes with the decision, fenced by its lease: a lease that is not the
     * holder's fails the call (complete_lost) and the transaction undoes the rest; the holder's completes it. */
    struct inbox_result done = {.id = c.id, .lease_owner = "n2", .lease_token = token, .status = INBOX_PROCESSED,
                                .attempts = 1, .result = "applied"};
    struct transition_record t5 = t[2];
    t5.result = "applied";
    t5.reason = NULL;
    struct decision_writes w7 = {.transitions = &t5, .n_transitions = 1, .complete = &done};
    assert_int_equal(store_begin(fx->s), 0);
    assert_int_equal(store_decision_write(fx->s, &w7, now + 1030), HOOKD_ESTALE);
    assert_true(w7.complete_lost);
    assert_int_equal(store_rollback(fx->s), 0);
    done.lease_owner = "n1";
    assert_int_equal(store_decision_write(fx->s, &w7, now + 1040), 0);
    assert_false(w7.complete_lost);
    assert_int_equal(store_inbox_get(fx->s, c.id, &item), 0);
    assert_int_equal(item.status, INBOX_PROCESSED);
    assert_string_equal(item.result, "applied");
    assert_null(item.lease_owner);
    inbox_item_free(&item);
    assert_int_equal(store_transition_list(fx->s, "order", entity, &l), 0);
    assert_int_equal(l.n, 4);
    transition_list_free(&l);
    /* An empty decision writes nothing and is no error. */
    struct decision_writes none = {0};
    assert_int_equal(store_decision_write(fx->s, &none, now), 0);
    /* A row the table refuses (an unknown result) is an error. */
    struct transition_record bad = t[0];
    bad.result = "sideways";
    struct decision_writes w5 = {.transitions = &bad, .n_transitions = 1};
    assert_int_not_equal(store_decision_write(fx->s, &w5, now), 0);
}

/* Two connections deciding on one entity: the second waits for the first's transaction. */
static void test_entity_lock_holds_others_off(void **state)
{
    struct fixture *fx = *state;
    struct store *other = NULL;
    char id[HOOKD_ID_MAX];

    postgres_only(fx);
    id_new(id, "ent_");
    assert_int_equal(store_open(fx->dsn, &other), 0);
    assert_int_equal(store_lock_wait(other, 200), 0);
    assert_int_equal(store_begin(fx->s), 0);
    assert_int_equal(store_entity_lock(fx->s, "order", id), 0);
    assert_int_equal(store_begin(other), 0);
    assert_int_equal(store_entity_lock(other, "order", "another"), 0); /* another entity: no wait */
    assert_int_equal(store_entity_lock(other, "order", id), HOOKD_EBUSY);
    assert_int_equal(store_rollback(other), 0);
    assert_int_equal(store_commit(fx->s), 0);
    assert_int_equal(store_begin(other), 0);
    assert_int_equal(store_entity_lock(other, "order", id), 0); /* free once the first ended */
    assert_int_equal(store_commit(other), 0);
    store_close(other);
}

/* What a decision reads in one go: the machine, the entity, its open items (any source), each absent too. */
static void test_entity_hold_reads_what_a_decision_needs(void **state)
{
    struct fixture *fx = *state;
    char src1[SOURCE_NAME_MAX], src2[SOURCE_NAME_MAX], entity[HOOKD_ID_MAX], other[HOOKD_ID_MAX];
    char mach[MACHINE_NAME_MAX], sql[512];
    struct inbox_outcome a, b, c, done, elsewhere;
    struct machine_record m = {0};
    struct entity_hold h;

    id_new(src1, "src_");
    id_new(src2, "src_");
    id_new(entity, "ent_");
    id_new(other, "ent_");
    id_new(mach, "mach_");
    /* Nothing yet: no machine, a new entity, no items. */
    assert_int_equal(store_begin(fx->s), 0);
    assert_int_equal(store_entity_hold(fx->s, mach, "order", entity, &h), 0);
    assert_false(h.machine_found);
    assert_false(h.known);
    assert_null(h.entity.state);
    assert_int_equal(h.open.n, 0);
    entity_hold_free(&h);
    assert_int_equal(store_commit(fx->s), 0);

    snprintf(m.name, sizeof m.name, "%s", mach);
    m.definition = "{\"name\": \"text \\\"as stored\\\"\"}";
    m.updated_at = 1234;
    assert_int_equal(store_machine_insert(fx->s, &m), 0);
    const struct entity_record e = {.kind = "order", .id = entity, .state = "paid", .has_version = true,
                                    .version = 2, .last_event_id = "e2", .updated_at = 99};
    assert_int_equal(store_entity_put(fx->s, &e), 0);
    item_add(fx, src1, "e3", entity, 3, &a);
    item_add(fx, src2, "e4", entity, 4, &b); /* another source, the same entity */
    item_add(fx, src1, "e5", entity, 5, &c);
    item_add(fx, src1, "e6", entity, 6, &done);
    item_add(fx, src1, "e1", other, 1, &elsewhere);
    snprintf(sql, sizeof sql, "UPDATE hookd_inbox SET status = 'deferred', deferred_at = 1 WHERE id = '%s'", c.id);
    fixture_sql(fx, sql);
    snprintf(sql, sizeof sql, "UPDATE hookd_inbox SET status = 'processed', processed_at = 1 WHERE id = '%s'",
             done.id);
    fixture_sql(fx, sql);

    assert_int_equal(store_begin(fx->s), 0);
    assert_int_equal(store_entity_hold(fx->s, mach, "order", entity, &h), 0);
    assert_true(h.machine_found);
    assert_string_equal(h.machine.name, mach);
    assert_string_equal(h.machine.definition, m.definition);
    assert_int_equal(h.machine.updated_at, 1234);
    assert_true(h.known);
    assert_string_equal(h.entity.state, "paid");
    assert_true(h.entity.has_version);
    assert_int_equal(h.entity.version, 2);
    assert_string_equal(h.entity.last_event_id, "e2");
    /* Pending and deferred, of every source; not the processed one, not another entity's; in any order. */
    assert_int_equal(h.open.n, 3);
    int seen = 0;
    for (size_t i = 0; i < h.open.n; i++) {
        const char *got = h.open.items[i].id;
        assert_string_equal(h.open.items[i].entity_id, entity);
        assert_true(h.open.items[i].status == INBOX_PENDING || h.open.items[i].status == INBOX_DEFERRED);
        assert_string_equal(h.open.items[i].payload, ""); /* the bodies are not read */
        assert_true(h.open.items[i].has_version);
        /* What the step reads is the stored row's (store_read_inbox_open); what it never reads stays zero. */
        struct inbox_item row;
        const struct inbox_item *o = &h.open.items[i];
        assert_int_equal(store_inbox_get(fx->s, got, &row), 0);
        assert_string_equal(o->source, row.source);
        assert_string_equal(o->event_id, row.event_id);
        assert_string_equal(o->event_type ? o->event_type : "-", row.event_type ? row.event_type : "-");
        assert_string_equal(o->entity_kind, row.entity_kind);
        assert_int_equal(o->version, row.version);
        assert_int_equal(o->status, row.status);
        assert_int_equal(o->attempts, row.attempts);
        assert_true((o->lease_owner == NULL) == (row.lease_owner == NULL));
        assert_int_equal(o->lease_until, row.lease_until);
        assert_int_equal(o->received_at, row.received_at);
        assert_int_equal(o->deferred_at, row.deferred_at);
        assert_int_equal(o->deferred_at, strcmp(got, c.id) == 0 ? 1 : 0);
        assert_string_equal(o->payload_sha256, "");
        assert_null(o->result);
        assert_null(o->error);
        assert_int_equal(o->next_attempt_at, 0);
        inbox_item_free(&row);
        seen |= strcmp(got, a.id) == 0 ? 1 : strcmp(got, b.id) == 0 ? 2 : strcmp(got, c.id) == 0 ? 4 : 8;
    }
    assert_int_equal(seen, 7); /* a, b and c once each (3 items, no other) */
    entity_hold_free(&h);
    assert_int_equal(store_commit(fx->s), 0);
    assert_int_equal(store_machine_delete(fx->s, mach), 0);
}

/* The versions of the open items h read, as a bit set (bit v; bit 0: an item without a version). */
static uint64_t hold_versions(const struct entity_hold *h)
{
    uint64_t bits = 0;

    for (size_t i = 0; i < h->open.n; i++)
        bits |= (uint64_t)1 << (h->open.items[i].has_version ? h->open.items[i].version : 0);
    return bits;
}

#define BIT(v) ((uint64_t)1 << (v))

static bool created_starts(const char *event_type, void *arg)
{
    (void)arg;
    return strcmp(event_type, "order.created") == 0;
}

static bool nothing_starts(const char *event_type, void *arg)
{
    (void)event_type;
    (void)arg;
    return false;
}

/*
 * A window (struct hold_window): SQLite leaves out the deferred items above
 * the run of consecutive versions from the entity's (with the decision's own
 * item), and counts them; pending, due (so leased) and versionless items
 * are read whatever their version; a new entity reads the items up to the highest run
 * from one that may make it; no window reads every one. PostgreSQL reads
 * every one anyway.
 */
static void test_entity_hold_window(void **state)
{
    struct fixture *fx = *state;
    static const int64_t versions[] = {3, 4, 6, 9, 20, 30, 40};
    char src[SOURCE_NAME_MAX], entity[HOOKD_ID_MAX], fresh[HOOKD_ID_MAX], sql[512];
    struct inbox_outcome o[7], n;
    struct entity_hold h;
    bool sqlite = strcmp(store_backend(fx->s)->name, "sqlite") == 0;
    uint64_t every = BIT(0) | BIT(3) | BIT(4) | BIT(6) | BIT(9) | BIT(20) | BIT(30);

    id_new(src, "src_");
    id_new(entity, "ent_");
    id_new(fresh, "ent_");
    const struct entity_record e = {.kind = "order", .id = entity, .state = "paid", .has_version = true,
                                    .version = 2, .last_event_id = "e2", .updated_at = 99};
    assert_int_equal(store_entity_put(fx->s, &e), 0);
    for (int i = 0; i < 7; i++) {
        char ev[16];
        snprintf(ev, sizeof ev, "e%d", (int)versions[i]);
        item_add(fx, src, ev, entity, versions[i], &o[i]);
    }
    item_add(fx, src, "n1", fresh, 7, &n);
    /*
     * 3, 4, 6, 9 and 40 deferred, waiting for a change (next look far off);
     * 20 pending; 30 deferred and leased (claimed when it was due, at 1); 9
     * keeps an expired lease that a settle left, and is not due: it leases
     * nothing and is read no more than any gap; 40 loses its version.
     */
    snprintf(sql, sizeof sql,
             "UPDATE hookd_inbox SET status = 'deferred', deferred_at = 1, next_attempt_at = 9000000000000000"
             " WHERE entity_id = '%s' AND version <> 20",
             entity);
    fixture_sql(fx, sql);
    snprintf(sql, sizeof sql,
             "UPDATE hookd_inbox SET lease_owner = 'w', lease_until = 9000000000000000, next_attempt_at = 1"
             " WHERE id = '%s'",
             o[5].id);
    fixture_sql(fx, sql);
    snprintf(sql, sizeof sql, "UPDATE hookd_inbox SET lease_owner = 'old', lease_until = 1 WHERE id = '%s'", o[3].id);
    fixture_sql(fx, sql);
    snprintf(sql, sizeof sql, "UPDATE hookd_inbox SET version = NULL WHERE id = '%s'", o[6].id);
    fixture_sql(fx, sql);

    const struct {
        struct hold_window w;
        uint64_t read; /* on SQLite */
    } cases[] = {
        /* The item's 5 joins 3, 4 and 6 into a run: up to 7 may pass, 9 cannot. */
        {{.has_version = true, .version = 5}, BIT(0) | BIT(3) | BIT(4) | BIT(6) | BIT(20) | BIT(30)},
        /* Without it the run ends at 4: 6 cannot pass either. */
        {{.has_version = false}, BIT(0) | BIT(3) | BIT(4) | BIT(20) | BIT(30)},
        /* An item at 8 starts no run: it is not next to the entity's 2. */
        {{.has_version = true, .version = 8}, BIT(0) | BIT(3) | BIT(4) | BIT(20) | BIT(30)},
    };
    assert_int_equal(store_begin(fx->s), 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct hold_window w = cases[i].w;
        w.now = 1000; /* 30 is due (and leased), the others wait */
        assert_int_equal(store_entity_hold_window(fx->s, "m", "order", entity, &w, &h), 0);
        assert_true(h.known);
        assert_int_equal(h.open_total, 7);
        if (hold_versions(&h) != (sqlite ? cases[i].read : every))
            fail_msg("case %zu: read %#llx, want %#llx", i, (unsigned long long)hold_versions(&h),
                     (unsigned long long)(sqlite ? cases[i].read : every));
        for (size_t k = 0; k < h.open.n; k++) /* whole, as without a window */
            assert_string_equal(h.open.items[k].source, src);
        entity_hold_free(&h);
    }
    /* Read at 0, before 30 was due (a lease is only taken on an item due): a gap like the others. */
    const struct hold_window before = {.has_version = true, .version = 5, .now = 0};
    assert_int_equal(store_entity_hold_window(fx->s, "m", "order", entity, &before, &h), 0);
    assert_int_equal(hold_versions(&h), sqlite ? BIT(0) | BIT(3) | BIT(4) | BIT(6) | BIT(20) : every);
    entity_hold_free(&h);
    /* No window: every one. */
    assert_int_equal(store_entity_hold(fx->s, "m", "order", entity, &h), 0);
    assert_int_equal(h.open_total, 7);
    assert_int_equal(hold_versions(&h), every);
    assert_false(h.machine_found); /* no machine m */
    entity_hold_free(&h);
    /* The machine's row the caller read in this transaction is the hold's (SQLite: not read again). */
    struct machine_record given = {.name = "m", .definition = "{\"name\": \"m\"}", .updated_at = 7};
    const struct hold_window with_row = {.has_version = true, .version = 5, .now = 1000, .machine = &given};
    assert_int_equal(store_entity_hold_window(fx->s, "m", "order", entity, &with_row, &h), 0);
    assert_true(h.machine_found == sqlite);
    if (sqlite) {
        assert_string_equal(h.machine.definition, given.definition);
        assert_int_equal(h.machine.updated_at, 7);
        assert_true(h.machine.definition != given.definition); /* a copy, freed with the hold */
    }
    entity_hold_free(&h);
    assert_int_equal(store_commit(fx->s), 0);

    /*
     * A new entity: only an order.created (may_start) can make it, and the
     * items at or below the top of a run from one are read: 7 starts 7, 8.
     */
    static const int64_t fresh_versions[] = {2, 3, 5, 7, 8, 12};
    for (int i = 0; i < 6; i++) {
        char ev[16];
        snprintf(ev, sizeof ev, "f%d", (int)fresh_versions[i]);
        item_add(fx, src, ev, fresh, fresh_versions[i], &o[i]);
    }
    snprintf(sql, sizeof sql,
             "UPDATE hookd_inbox SET status = 'deferred', deferred_at = 1, next_attempt_at = 9000000000000000"
             " WHERE entity_id = '%s' AND event_id <> 'n1'",
             fresh);
    fixture_sql(fx, sql);
    snprintf(sql, sizeof sql, "UPDATE hookd_inbox SET event_type = 'order.created' WHERE id = '%s'", o[3].id);
    fixture_sql(fx, sql);
    uint64_t fresh_every = BIT(2) | BIT(3) | BIT(5) | BIT(7) | BIT(8) | BIT(12);
    const struct {
        struct hold_window w;
        uint64_t read; /* on SQLite */
    } fresh_cases[] = {
        /* The item (a paid at 4) cannot make the entity; 7 can, and runs to 8: up to 9. */
        {{.has_version = true, .version = 4, .event_type = "order.paid", .may_start = created_starts},
         BIT(2) | BIT(3) | BIT(5) | BIT(7) | BIT(8)},
        /* A created at 1 runs to 3; 7's run is higher. */
        {{.has_version = true, .version = 1, .event_type = "order.created", .may_start = created_starts},
         BIT(2) | BIT(3) | BIT(5) | BIT(7) | BIT(8)},
        /* Nothing can make it: no deferred item can pass. */
        {{.has_version = true, .version = 4, .event_type = "order.paid", .may_start = nothing_starts}, 0},
        /* A created without a version makes an entity without one: any version may pass after it. */
        {{.has_version = false, .event_type = "order.created", .may_start = created_starts}, fresh_every},
    };
    assert_int_equal(store_begin(fx->s), 0);
    for (size_t i = 0; i < sizeof fresh_cases / sizeof fresh_cases[0]; i++) {
        assert_int_equal(store_entity_hold_window(fx->s, "m", "order", fresh, &fresh_cases[i].w, &h), 0);
        assert_false(h.known);
        assert_int_equal(h.open_total, 7); /* with n1, pending: read whatever its version */
        uint64_t want = (sqlite ? fresh_cases[i].read : fresh_every) | BIT(7);
        if (hold_versions(&h) != want)
            fail_msg("new entity, case %zu: read %#llx, want %#llx", i, (unsigned long long)hold_versions(&h),
                     (unsigned long long)want);
        entity_hold_free(&h);
    }
    assert_int_equal(store_commit(fx->s), 0);
}

/* Two connections holding one entity: the second waits for the first's transaction (entity_hold locks too). */
static void test_entity_hold_holds_others_off(void **state)
{
    struct fixture *fx = *state;
    struct store *other = NULL;
    struct entity_hold h;
    char id[HOOKD_ID_MAX];

    postgres_only(fx);
    id_new(id, "ent_");
    assert_int_equal(store_open(fx->dsn, &other), 0);
    assert_int_equal(store_lock_wait(other, 200), 0);
    assert_int_equal(store_begin(fx->s), 0);
    assert_int_equal(store_entity_hold(fx->s, "m", "order", id, &h), 0);
    entity_hold_free(&h);
    assert_int_equal(store_begin(other), 0);
    assert_int_equal(store_entity_hold(other, "m", "order", id, &h), HOOKD_EBUSY);
    assert_int_equal(h.open.n, 0); /* nothing left to free */
    assert_int_equal(store_rollback(other), 0);
    assert_int_equal(store_commit(fx->s), 0);
    store_close(other);
}

static void terminate_hookd_sessions(struct fixture *fx)
{
    PGconn *c = PQconnectdb(fx->dsn);
    PGresult *r = PQstatus(c) == CONNECTION_OK
                      ? PQexec(c, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                                  " WHERE datname = current_database() AND application_name = 'hookd'")
                      : NULL;

    assert_true(r && PQresultStatus(r) == PGRES_TUPLES_OK);
    PQclear(r);
    PQfinish(c);
    usleep(50000);
}

/* Inserts one outbox event on s and commits it. */
static void event_commit(struct fixture *fx, struct store *s)
{
    struct event ev = {.type = "order.status_changed", .account = fx->account, .payload = "{}"};

    assert_int_equal(store_begin(s), 0);
    assert_int_equal(store_event_insert(s, &ev, NULL), 0);
    assert_int_equal(store_commit(s), 0);
}

/*
 * A decision connection's outbox inserts wake no relay (no NOTIFY, whose
 * commit lock would serialize the decision connections), after a reconnect
 * too; every other connection's still do.
 */
static void test_quiet_outbox_notifies_no_one(void **state)
{
    struct fixture *fx = *state;
    struct store *listener = NULL, *quiet = NULL;
    bool changed;

    postgres_only(fx);
    assert_int_equal(store_open(fx->dsn, &listener), 0);
    assert_int_equal(store_open(fx->dsn, &quiet), 0);
    assert_int_equal(store_quiet_outbox(quiet), 0);
    assert_int_equal(store_changed(listener, &changed), 0); /* LISTEN */
    assert_false(changed_within(listener, 50));
    event_commit(fx, fx->s);
    assert_true(changed_within(listener, 2000));
    event_commit(fx, quiet);
    assert_false(changed_within(listener, 300));
    /* Both connections lost and made again: the setting comes back with the session. */
    terminate_hookd_sessions(fx);
    for (int i = 0; i < 2000; i++) {
        int rc = store_changed(listener, &changed);
        if (rc == 0 && changed)
            break; /* reconnected: a change is reported, notifications may have been lost */
        usleep(1000);
    }
    assert_false(changed_within(listener, 50));
    struct event ev = {.type = "order.status_changed", .account = fx->account, .payload = "{}"};
    for (int i = 0; i < 2000 && store_event_insert(quiet, &ev, NULL) != 0; i++)
        usleep(1000); /* the first statement finds the connection gone, a later one reconnects */
    assert_false(changed_within(listener, 300));
    for (int i = 0; i < 2000 && store_meta_set(fx->s, "quiet-test", "1") != 0; i++)
        usleep(1000);
    event_commit(fx, fx->s);
    assert_true(changed_within(listener, 2000));
    store_close(quiet);
    store_close(listener);
}

/* SQLite has nothing to quiet: the call succeeds and changes nothing. */
static void test_quiet_outbox_sqlite_is_a_no_op(void **state)
{
    struct fixture *fx = *state;

    if (strcmp(store_backend(fx->s)->name, "sqlite") != 0)
        skip();
    assert_int_equal(store_quiet_outbox(fx->s), 0);
    event_commit(fx, fx->s);
}


/*
 * A machine's update makes the deferred items of its sources due now (they
 * wait for a change, not for the retry schedule): only deferred ones, only of
 * the sources naming that machine (not another machine's, not a source whose
 * definition is no JSON), in the update's own transaction.
 */
static void test_machine_update_wakes_its_deferred(void **state)
{
    struct fixture *fx = *state;
    struct machine_record m = {0};
    char mine[SOURCE_NAME_MAX], other[SOURCE_NAME_MAX], broken[SOURCE_NAME_MAX], sql[512];
    struct inbox_outcome d1, p1, d2, d3;
    const int64_t later = clock_now_ms() + 3600000;

    id_new(m.name, "mach_");
    id_new(mine, "src_");
    id_new(other, "src_");
    id_new(broken, "src_");
    m.definition = strdup("{\"name\":\"x\"}");
    assert_int_equal(store_machine_insert(fx->s, &m), 0);
    snprintf(sql, sizeof sql,
             "INSERT INTO hookd_sources(name, definition) VALUES ('%s', '{\"handler\": {\"machine\": \"%s\"}}'),"
             " ('%s', '{\"handler\": {\"machine\": \"%s-other\"}}'), ('%s', '{\"handler\": \"machine\"')",
             mine, m.name, other, m.name, broken);
    fixture_sql(fx, sql);
    item_add(fx, mine, "e1", "o1", 1, &d1);
    item_add(fx, mine, "e2", "o2", 1, &p1);
    item_add(fx, other, "e3", "o3", 1, &d2);
    item_add(fx, broken, "e4", "o4", 1, &d3);
    snprintf(sql, sizeof sql,
             "UPDATE hookd_inbox SET status = 'deferred', next_attempt_at = %lld WHERE id IN ('%s', '%s', '%s')",
             (long long)later, d1.id, d2.id, d3.id);
    fixture_sql(fx, sql);
    snprintf(sql, sizeof sql, "UPDATE hookd_inbox SET next_attempt_at = %lld WHERE id = '%s'", (long long)later,
             p1.id);
    fixture_sql(fx, sql);

    int64_t before = clock_now_ms();
    assert_int_equal(store_begin(fx->s), 0);
    assert_int_equal(store_machine_update(fx->s, &m), 0);
    assert_int_equal(store_commit(fx->s), 0);
    struct inbox_item it;
    assert_int_equal(store_inbox_get(fx->s, d1.id, &it), 0);
    assert_true(it.next_attempt_at >= before && it.next_attempt_at <= clock_now_ms());
    inbox_item_free(&it);
    const char *const untouched[] = {p1.id, d2.id, d3.id}; /* pending; another machine's; no JSON */
    for (size_t i = 0; i < sizeof untouched / sizeof untouched[0]; i++) {
        assert_int_equal(store_inbox_get(fx->s, untouched[i], &it), 0);
        assert_int_equal(it.next_attempt_at, later);
        inbox_item_free(&it);
    }
    /* Nothing of this test left due for the others' claims (the shared database keeps its rows). */
    const struct inbox_settle done = {.id = d1.id, .status = INBOX_PROCESSED, .result = "applied"};
    assert_int_equal(store_inbox_settle(fx->s, &done, clock_now_ms()), 0);
    machine_record_free(&m);
}

/* decision_gather's fn: 21 decisions of one entity (16 + 4 + 1 rows of each kind), each a log row and an event. */
struct gather_case {
    char *entity;
    char keys[21][HOOKD_ID_MAX + 32];
    int emitted;
    int fail_at; /* -1: none */
};

static int gather_decisions(struct store *s, void *arg)
{
    struct gather_case *g = arg;

    for (int i = 0; i < 21; i++) {
        char reason[32];
        snprintf(reason, sizeof reason, "row %d", i);
        struct transition_record t = {.source = "src", .kind = "order", .entity_id = g->entity, .event_id = "e",
                                      .to_state = "paid", .has_version = true, .version = i + 1,
                                      .result = "applied", .reason = reason, .worker = "n1", .at = 1000 + i};
        snprintf(t.inbox_id, sizeof t.inbox_id, "inb_gather_%d", i);
        snprintf(g->keys[i], sizeof g->keys[i], "hookd.machine:%s:%d", g->entity, i);
        char payload[64];
        snprintf(payload, sizeof payload, "{\"n\":%d}", i);
        struct event ev = {.type = "order.status_changed", .resource_type = "order", .resource_id = g->entity,
                           .has_resource_version = true, .resource_version = i + 1, .payload = payload,
                           .idempotency_key = g->keys[i]};
        struct decision_writes w = {.transitions = &t, .n_transitions = 1, .events = &ev, .n_events = 1};
        int rc = store_decision_write(s, &w, 2000);
        if (rc)
            return rc;
        g->emitted += w.emitted;
        if (i == g->fail_at)
            return HOOKD_EIO;
    }
    return 0;
}

/*
 * SQLite's accepts' group: the decisions' log rows and events are kept and
 * written after the group, in order, through statements of several rows; a
 * failed group writes none of them, and a decision after it writes at once.
 */
static void test_decision_gather(void **state)
{
    struct fixture *fx = *state;
    char entity[HOOKD_ID_MAX];
    struct transition_list l = {0};
    struct event ev;

    if (strcmp(store_backend(fx->s)->name, "sqlite") != 0) {
        assert_int_equal(store_decision_gather(fx->s, gather_decisions, NULL), HOOKD_EUNAVAIL);
        skip();
    }
    id_new(entity, "ent_");
    struct gather_case g = {.entity = entity, .fail_at = 7};
    assert_int_equal(store_begin(fx->s), 0);
    assert_int_equal(store_decision_gather(fx->s, gather_decisions, &g), HOOKD_EIO);
    assert_int_equal(store_rollback(fx->s), 0);
    assert_int_equal(store_transition_list(fx->s, "order", entity, &l), 0);
    assert_int_equal(l.n, 0);
    transition_list_free(&l);

    g = (struct gather_case){.entity = entity, .fail_at = -1};
    assert_int_equal(store_begin(fx->s), 0);
    assert_int_equal(store_decision_gather(fx->s, gather_decisions, &g), 0);
    assert_int_equal(store_commit(fx->s), 0);
    assert_int_equal(g.emitted, 21);
    assert_int_equal(store_transition_list(fx->s, "order", entity, &l), 0);
    assert_int_equal(l.n, 21);
    int64_t last_seq = 0;
    for (int i = 0; i < 21; i++) {
        char reason[32];
        snprintf(reason, sizeof reason, "row %d", i);
        assert_string_equal(l.items[i].reason, reason);
        assert_int_equal(l.items[i].version, i + 1);
        assert_int_equal(l.items[i].at, 1000 + i);
        assert_true(l.items[i].seq > last_seq);
        last_seq = l.items[i].seq;
        int64_t seq = event_by_key(fx, g.keys[i], &ev);
        assert_true(seq > 0);
        char payload[64];
        snprintf(payload, sizeof payload, "{\"n\":%d}", i);
        assert_string_equal(ev.payload, payload);
        assert_int_equal(ev.resource_version, i + 1);
        event_free(&ev);
    }
    transition_list_free(&l);
    /* Outside a group a decision writes at once: its row is there before any commit. */
    struct transition_record t = {.source = "src", .kind = "order", .entity_id = entity, .event_id = "e",
                                  .result = "stale", .worker = "n1", .at = 3000};
    snprintf(t.inbox_id, sizeof t.inbox_id, "inb_after");
    struct decision_writes w = {.transitions = &t, .n_transitions = 1};
    assert_int_equal(store_decision_write(fx->s, &w, 3000), 0);
    assert_int_equal(store_transition_list(fx->s, "order", entity, &l), 0);
    assert_int_equal(l.n, 22);
    transition_list_free(&l);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_machine_crud),
        T(test_machine_update_wakes_its_deferred),
        T(test_entity_and_transitions),
        T(test_settle_and_audit),
        T(test_decision_write),
        T(test_entity_lock_holds_others_off),
        T(test_entity_hold_reads_what_a_decision_needs),
        T(test_entity_hold_window),
        T(test_entity_hold_holds_others_off),
        T(test_quiet_outbox_notifies_no_one),
        T(test_quiet_outbox_sqlite_is_a_no_op),
        T(test_decision_gather),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
