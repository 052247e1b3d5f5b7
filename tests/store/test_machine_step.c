/*
 * A machine decision through the store on either backend (HOOKD_TEST_STORE):
 * machine_step inside a transaction, as the inbox workers run it. A late
 * first event lets the waiting ones through in the same step (one
 * decision_write: transitions in version order, one emitted event each, the
 * others settled); a version at or below the applied one is stale; a gap is
 * deferred with its transitions row, and nothing is emitted for either; a
 * deferred item waits for a change (its next look at max_defer). The
 * item's own outcome is written as the worker would (here unleased: settled).
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>

#include "store_fixture.h"

#include "inbound/machine.h"
#include "inbound/machine_accept.h"
#include "inbound/machine_cache.h"
#include "inbound/machine_step.h"

static const int64_t schedule[] = {1000, 5000};

struct run {
    char source[SOURCE_NAME_MAX], entity[HOOKD_ID_MAX], key[HOOKD_ID_MAX + 32];
    struct machine m;
};

static void run_setup(struct fixture *fx, struct run *r)
{
    struct machine_record rec = {0};
    json_t *body;

    id_new(r->source, "src_");
    id_new(r->entity, "ent_");
    id_new(rec.name, "mach_");
    body = json_pack("{s:s,s:s,s:[{s:s,s:[n],s:s},{s:s,s:[s],s:s},{s:s,s:[s],s:s}],s:s}", "name", rec.name,
                     "versioning", "contiguous", "transitions", "on", "order.created", "from", "to", "created", "on",
                     "order.paid", "from", "created", "to", "paid", "on", "order.fulfilled", "from", "paid", "to",
                     "fulfilled", "emit", "order.status_changed");
    assert_non_null(body);
    rec.definition = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    assert_int_equal(store_machine_insert(fx->s, &rec), 0);
    assert_int_equal(machine_from_record(&rec, &r->m), 0);
    free(rec.definition);
}

/* An item of the run's entity from source (the run's own: r->source). */
static void item_add_from(struct fixture *fx, const struct run *r, const char *source, const char *event_id,
                          const char *type, int64_t version, struct inbox_outcome *out)
{
    struct inbox_item it = {0};

    snprintf(it.source, sizeof it.source, "%s", source);
    it.event_id = strdup(event_id);
    it.event_type = strdup(type);
    it.entity_kind = strdup("order");
    it.entity_id = strdup(r->entity);
    it.has_version = true;
    it.version = version;
    it.payload = strdup("{}");
    snprintf(it.payload_sha256, sizeof it.payload_sha256, "%064d", 0);
    assert_int_equal(store_inbox_insert(fx->s, &it, out), 0);
    inbox_item_free(&it);
}

static void item_add_as(struct fixture *fx, const struct run *r, const char *event_id, const char *type,
                        int64_t version, struct inbox_outcome *out)
{
    item_add_from(fx, r, r->source, event_id, type, version, out);
}

static void item_add(struct fixture *fx, const struct run *r, const char *type, int64_t version,
                     struct inbox_outcome *out)
{
    char event_id[32];

    snprintf(event_id, sizeof event_id, "ev%" PRId64, version);
    item_add_as(fx, r, event_id, type, version, out);
}

/* One decision on item id, committed with the item's outcome, as the inbox workers run it. */
static void decide_as(struct fixture *fx, struct run *r, const char *id, bool defer_pending,
                      struct machine_outcome *out)
{
    struct entity_hold h = {0};
    struct inbox_item it;
    int64_t now = clock_now_ms();

    assert_int_equal(store_inbox_get(fx->s, id, &it), 0);
    const struct machine_step_context c = {
        .node = "n1", .now = now, .max_defer_ms = 60000, .schedule_ms = schedule, .n_schedule = 2,
        .defer_pending = defer_pending,
    };
    assert_int_equal(store_begin(fx->s), 0);
    assert_int_equal(store_entity_hold(fx->s, r->m.name, "order", r->entity, &h), 0);
    assert_true(h.machine_found);
    assert_int_equal(machine_step(fx->s, &r->m, &c, &it, &h, out), 0);
    entity_hold_free(&h);
    /* The item's own outcome, as the worker records it (unleased here: settled). */
    const struct inbox_settle own = {.id = id, .status = out->status, .result = out->result,
                                     .error = out->error[0] ? out->error : NULL,
                                     .next_attempt_at = out->next_attempt_at};
    assert_int_equal(store_inbox_settle(fx->s, &own, now), 0);
    assert_int_equal(store_commit(fx->s), 0);
    inbox_item_free(&it);
}

/* As the SQLite node decides (defer_pending: decisions and claims on one writer). */
static void decide(struct fixture *fx, struct run *r, const char *id, struct machine_outcome *out)
{
    decide_as(fx, r, id, true, out);
}

static void assert_status(struct fixture *fx, const char *id, enum inbox_status status, const char *result)
{
    struct inbox_item it;

    assert_int_equal(store_inbox_get(fx->s, id, &it), 0);
    assert_int_equal(it.status, status);
    if (result)
        assert_string_equal(it.result, result);
    inbox_item_free(&it);
}

static int64_t emitted_for(struct fixture *fx, const char *inbox_id)
{
    struct event_list l = {0};
    const struct event_filter f = {.limit = 1000};
    char key[HOOKD_ID_MAX + 32];
    int64_t seq = 0;

    snprintf(key, sizeof key, "hookd.machine:%s", inbox_id);
    assert_int_equal(store_event_list(fx->s, &f, &l), 0);
    for (size_t i = 0; i < l.n; i++)
        if (l.items[i].idempotency_key && strcmp(l.items[i].idempotency_key, key) == 0)
            seq = l.items[i].seq;
    event_list_free(&l);
    return seq;
}

static void test_late_first_event_lets_the_chain_through(void **state)
{
    struct fixture *fx = *state;
    struct inbox_outcome v1, v2, v3;
    struct machine_outcome out;
    struct transition_list l = {0};
    struct entity_record e = {0};
    struct run r;

    run_setup(fx, &r);
    item_add(fx, &r, "order.paid", 2, &v2);
    item_add(fx, &r, "order.fulfilled", 3, &v3);
    item_add(fx, &r, "order.created", 1, &v1);
    decide(fx, &r, v2.id, &out);
    assert_int_equal(out.status, INBOX_PROCESSED);
    assert_string_equal(out.result, "applied");
    assert_int_equal(out.applied, 3);
    assert_int_equal(out.settled, 2);
    assert_int_equal(out.emitted, 3);
    assert_status(fx, v1.id, INBOX_PROCESSED, "applied");
    assert_status(fx, v2.id, INBOX_PROCESSED, "applied");
    assert_status(fx, v3.id, INBOX_PROCESSED, "applied");
    assert_int_equal(store_entity_get(fx->s, "order", r.entity, &e), 0);
    assert_string_equal(e.state, "fulfilled");
    assert_int_equal(e.version, 3);
    assert_string_equal(e.last_event_id, "ev3");
    entity_record_free(&e);
    assert_int_equal(store_transition_list(fx->s, "order", r.entity, &l), 0);
    assert_int_equal(l.n, 3);
    static const char *const to[] = {"created", "paid", "fulfilled"};
    for (size_t i = 0; i < 3; i++) {
        assert_string_equal(l.items[i].result, "applied");
        assert_int_equal(l.items[i].version, (int64_t)i + 1);
        assert_string_equal(l.items[i].to_state, to[i]);
        assert_string_equal(l.items[i].worker, "n1");
    }
    assert_null(l.items[0].from_state);
    assert_string_equal(l.items[2].from_state, "paid");
    transition_list_free(&l);
    /* One event per applied item, in version order. */
    int64_t s1 = emitted_for(fx, v1.id), s2 = emitted_for(fx, v2.id), s3 = emitted_for(fx, v3.id);
    assert_true(s1 > 0 && s1 < s2 && s2 < s3);
    machine_free(&r.m);
}

/*
 * The emitted event's data is JSON whatever the entity's id holds: quotes,
 * backslashes, a slash, UTF-8 (a control character cannot be in it: the id is
 * the event's resource id, which the outbox check refuses so).
 */
static void test_emitted_data_is_json(void **state)
{
    struct fixture *fx = *state;
    struct inbox_outcome v1, v2;
    struct machine_outcome out;
    struct event_list l = {0};
    const struct event_filter f = {.limit = 1000};
    struct run r;
    json_t *doc = NULL;

    run_setup(fx, &r);
    snprintf(r.entity, sizeof r.entity, "o\"1\\ \xc3\xa9/%s", "x");
    item_add(fx, &r, "order.created", 1, &v1);
    item_add(fx, &r, "order.paid", 2, &v2);
    decide(fx, &r, v1.id, &out);
    assert_int_equal(out.applied, 2);
    assert_int_equal(out.emitted, 2);
    assert_int_equal(store_event_list(fx->s, &f, &l), 0);
    char key[HOOKD_ID_MAX + 32];
    snprintf(key, sizeof key, "hookd.machine:%s", v2.id);
    for (size_t i = 0; i < l.n; i++)
        if (l.items[i].idempotency_key && strcmp(l.items[i].idempotency_key, key) == 0) {
            assert_string_equal(l.items[i].type, "order.status_changed");
            assert_string_equal(l.items[i].resource_id, r.entity);
            doc = json_loads(l.items[i].payload, JSON_REJECT_DUPLICATES, NULL);
        }
    event_list_free(&l);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "entity"), "kind")), "order");
    assert_string_equal(json_string_value(json_object_get(json_object_get(doc, "entity"), "id")), r.entity);
    assert_string_equal(json_string_value(json_object_get(doc, "previous_state")), "created");
    assert_string_equal(json_string_value(json_object_get(doc, "state")), "paid");
    assert_int_equal(json_integer_value(json_object_get(doc, "version")), 2);
    assert_string_equal(json_string_value(json_object_get(doc, "source")), r.source);
    assert_string_equal(json_string_value(json_object_get(doc, "source_event_id")), "ev2");
    assert_string_equal(json_string_value(json_object_get(doc, "inbox_id")), v2.id);
    assert_string_equal(json_string_value(json_object_get(doc, "event_type")), "order.paid");
    assert_null(json_object_get(doc, "reconciled"));
    assert_int_equal(json_object_size(doc), 8);
    json_decref(doc);
    /* The first one's previous state is null. */
    assert_int_equal(store_event_list(fx->s, &f, &l), 0);
    snprintf(key, sizeof key, "hookd.machine:%s", v1.id);
    doc = NULL;
    for (size_t i = 0; i < l.n; i++)
        if (l.items[i].idempotency_key && strcmp(l.items[i].idempotency_key, key) == 0)
            doc = json_loads(l.items[i].payload, 0, NULL);
    event_list_free(&l);
    assert_non_null(doc);
    assert_true(json_is_null(json_object_get(doc, "previous_state")));
    assert_string_equal(json_string_value(json_object_get(doc, "state")), "created");
    json_decref(doc);
    machine_free(&r.m);
}

/*
 * An entity id the emitted event could not carry as its resource id (a
 * control character): the item is quarantined with the reason, once, and
 * nothing is written for the entity (before, every decision was undone by the
 * outbox check and the item looked at again every second, for ever).
 */
static void test_unnameable_entity_is_quarantined(void **state)
{
    struct fixture *fx = *state;
    struct inbox_outcome v1;
    struct machine_outcome out;
    struct transition_list l = {0};
    struct entity_record e = {0};
    struct run r;

    run_setup(fx, &r);
    snprintf(r.entity, sizeof r.entity, "o\r\nX-Injected: yes");
    item_add(fx, &r, "order.created", 1, &v1);
    decide(fx, &r, v1.id, &out);
    assert_int_equal(out.status, INBOX_QUARANTINED);
    assert_int_equal(out.emitted, 0);
    assert_non_null(strstr(out.error, "entity id contains control characters"));
    assert_null(strchr(out.error, '\n')); /* the reason names the rule, never the bytes */
    assert_status(fx, v1.id, INBOX_QUARANTINED, NULL);
    assert_int_equal(emitted_for(fx, v1.id), 0);
    assert_int_equal(store_entity_get(fx->s, "order", r.entity, &e), HOOKD_ENOTFOUND);
    assert_int_equal(store_transition_list(fx->s, "order", r.entity, &l), 0);
    assert_int_equal(l.n, 0);
    transition_list_free(&l);
    machine_free(&r.m);
}

static void test_stale_and_gap(void **state)
{
    struct fixture *fx = *state;
    struct inbox_outcome v1, v1b, v3;
    struct machine_outcome out;
    struct transition_list l = {0};
    struct event_list before = {0}, after = {0};
    const struct event_filter f = {.limit = 1000};
    struct run r;

    run_setup(fx, &r);
    item_add(fx, &r, "order.created", 1, &v1);
    decide(fx, &r, v1.id, &out);
    assert_string_equal(out.result, "applied");
    assert_int_equal(out.emitted, 1);
    /* The same version again, under another event id: stale. */
    item_add_as(fx, &r, "ev1-again", "order.created", 1, &v1b);
    item_add(fx, &r, "order.fulfilled", 3, &v3);
    assert_int_equal(store_event_list(fx->s, &f, &before), 0);
    int64_t t0 = clock_now_ms();
    decide(fx, &r, v1b.id, &out);
    assert_int_equal(out.status, INBOX_PROCESSED);
    assert_string_equal(out.result, "stale");
    assert_int_equal(out.emitted, 0);
    /* The gap waiting behind it (pending, same source) is deferred by the same step, not left to its own claim. */
    assert_int_equal(out.deferred, 1);
    assert_int_equal(store_event_list(fx->s, &f, &after), 0);
    assert_int_equal(after.n, before.n); /* neither emitted anything */
    event_list_free(&before);
    event_list_free(&after);
    assert_int_equal(store_transition_list(fx->s, "order", r.entity, &l), 0);
    assert_int_equal(l.n, 3);
    assert_string_equal(l.items[1].result, "stale");
    assert_string_equal(l.items[2].result, "deferred");
    assert_string_equal(l.items[2].inbox_id, v3.id);
    assert_true(strstr(l.items[2].reason, "gap") || strstr(l.items[2].reason, "version"));
    assert_string_equal(l.items[2].from_state, "created");
    assert_null(l.items[2].to_state);
    assert_status(fx, v1b.id, INBOX_PROCESSED, "stale");
    assert_status(fx, v3.id, INBOX_DEFERRED, NULL);
    struct inbox_item it3;
    assert_int_equal(store_inbox_get(fx->s, v3.id, &it3), 0);
    assert_string_equal(it3.error, l.items[2].reason);
    assert_int_equal(it3.attempts, 1);
    assert_true(it3.deferred_at >= t0);
    /* It waits for a change like any deferred item: its next look at max_defer (60 s). */
    assert_true(it3.next_attempt_at >= t0 + 60000 && it3.next_attempt_at <= clock_now_ms() + 60000);
    inbox_item_free(&it3);
    transition_list_free(&l);
    machine_free(&r.m);
}

/*
 * What a step defers besides its own item: only the pending items of the
 * same source that cannot pass from where the entity ends. Another source's
 * item keeps its own rules (schedule, max_defer), an item the step could
 * apply is left to its claim (the claimed one was stale: nothing was
 * re-evaluated), and a leased one is its worker's. A deferred item is not
 * written again.
 */
static void test_step_defers_only_its_sources_waiting_items(void **state)
{
    struct fixture *fx = *state;
    struct inbox_outcome v1, v1b, v2, v4, v5, other;
    struct machine_outcome out;
    struct transition_list l = {0};
    struct inbox_list claimed = {0};
    struct run r;

    run_setup(fx, &r);
    item_add(fx, &r, "order.created", 1, &v1);
    decide(fx, &r, v1.id, &out);
    assert_string_equal(out.result, "applied");
    assert_int_equal(out.deferred, 0);
    /* v4 waits (a gap), deferred by its own claim. */
    item_add(fx, &r, "order.fulfilled", 4, &v4);
    decide(fx, &r, v4.id, &out);
    assert_int_equal(out.status, INBOX_DEFERRED);
    assert_int_equal(out.deferred, 0);
    /* Then: a stale copy of v1, v2 (applicable), v5 (a gap) and another source's v5 of the same entity. */
    item_add_as(fx, &r, "ev1-again", "order.created", 1, &v1b);
    item_add(fx, &r, "order.paid", 2, &v2);
    item_add(fx, &r, "order.fulfilled", 5, &v5);
    char other_source[SOURCE_NAME_MAX];
    id_new(other_source, "src_");
    item_add_from(fx, &r, other_source, "other-ev5", "order.fulfilled", 5, &other);
    decide(fx, &r, v1b.id, &out);
    assert_string_equal(out.result, "stale");
    assert_int_equal(out.deferred, 1); /* v5 only */
    assert_status(fx, v2.id, INBOX_PENDING, NULL);
    assert_status(fx, v5.id, INBOX_DEFERRED, NULL);
    assert_status(fx, other.id, INBOX_PENDING, NULL);
    assert_status(fx, v4.id, INBOX_DEFERRED, NULL);
    assert_int_equal(store_transition_list(fx->s, "order", r.entity, &l), 0);
    size_t deferred_rows = 0;
    for (size_t i = 0; i < l.n; i++)
        if (strcmp(l.items[i].result, "deferred") == 0) {
            deferred_rows++;
            assert_true(strcmp(l.items[i].inbox_id, v4.id) == 0 || strcmp(l.items[i].inbox_id, v5.id) == 0);
        }
    assert_int_equal(deferred_rows, 2); /* v4 once (its claim), v5 once (the stale step) */
    transition_list_free(&l);
    /* A leased pending item is its worker's: v2 claimed, then another step leaves it alone. */
    assert_int_equal(store_inbox_claim_due(fx->s, "n2", clock_now_ms(), clock_now_ms() + 60000, 100, &claimed), 0);
    bool v2_claimed = false;
    for (size_t i = 0; i < claimed.n; i++)
        v2_claimed |= strcmp(claimed.items[i].id, v2.id) == 0;
    assert_true(v2_claimed);
    inbox_list_free(&claimed);
    item_add(fx, &r, "order.fulfilled", 6, &v1b); /* pending, a gap */
    decide(fx, &r, v1b.id, &out);
    assert_int_equal(out.status, INBOX_DEFERRED);
    assert_int_equal(out.deferred, 0); /* v2 leased (and applicable), the other source's not this step's */
    /* Without defer_pending (decisions on connections of their own): a waiting pending item is left pending. */
    struct inbox_outcome v8, v9;
    item_add(fx, &r, "order.fulfilled", 8, &v8);
    item_add(fx, &r, "order.fulfilled", 9, &v9);
    decide_as(fx, &r, v8.id, false, &out);
    assert_int_equal(out.status, INBOX_DEFERRED);
    assert_int_equal(out.deferred, 0);
    assert_status(fx, v9.id, INBOX_PENDING, NULL);
    machine_free(&r.m);
}

/*
 * A deferred item waits for a change, not for the schedule (1 s here): its
 * next look is at max_defer (60 s), as each applied event re-evaluates the
 * entity's waiting items at once (and a machine's update wakes them,
 * test_store_machines), for a gap and for a transition not allowed alike.
 * The missing version then lets the gap through in its own step, and the
 * not-allowed one at that version is stale.
 */
static void test_gap_waits_for_its_entity(void **state)
{
    struct fixture *fx = *state;
    struct inbox_outcome v1, v3, wrong2, v2;
    struct machine_outcome out;
    struct run r;

    run_setup(fx, &r);
    item_add(fx, &r, "order.created", 1, &v1);
    decide(fx, &r, v1.id, &out);
    assert_string_equal(out.result, "applied");
    item_add(fx, &r, "order.fulfilled", 3, &v3);
    int64_t t0 = clock_now_ms();
    decide(fx, &r, v3.id, &out);
    assert_int_equal(out.status, INBOX_DEFERRED);
    assert_true(out.next_attempt_at >= t0 + 60000 && out.next_attempt_at <= clock_now_ms() + 60000);
    item_add_as(fx, &r, "ev2-wrong", "order.fulfilled", 2, &wrong2);
    t0 = clock_now_ms();
    decide(fx, &r, wrong2.id, &out);
    assert_int_equal(out.status, INBOX_DEFERRED);
    assert_true(strstr(out.error, "no transition") != NULL);
    assert_true(out.next_attempt_at >= t0 + 60000 && out.next_attempt_at <= clock_now_ms() + 60000);
    item_add(fx, &r, "order.paid", 2, &v2);
    decide(fx, &r, v2.id, &out);
    assert_string_equal(out.result, "applied");
    assert_int_equal(out.applied, 2);
    assert_status(fx, v3.id, INBOX_PROCESSED, "applied");
    assert_status(fx, wrong2.id, INBOX_PROCESSED, "stale");
    machine_free(&r.m);
}

/*
 * An accepted item decided before its insert (machine_accept_insert), in the
 * accept's transaction, as the receiver runs it where the accepts and the
 * decisions share one writer: the item is inserted with its outcome, or, when
 * the call leaves it (decided false), nothing was written and it is inserted
 * pending as usual. Returns whether it was decided; *id: the item's id.
 */
static bool accept_as(struct fixture *fx, struct run *r, struct machine_cache *mc, const char *event_id,
                      const char *type, int64_t version, struct machine_outcome *out, char id[HOOKD_ID_MAX])
{
    struct inbox_item it = {0};
    struct inbox_outcome plain;
    bool decided = false;
    const struct machine_step_context c = {
        .node = "n1", .now = clock_now_ms(), .max_defer_ms = 60000, .schedule_ms = schedule, .n_schedule = 2,
        .defer_pending = true,
    };

    snprintf(it.source, sizeof it.source, "%s", r->source);
    it.event_id = strdup(event_id);
    it.event_type = strdup(type);
    it.entity_kind = strdup("order");
    it.entity_id = strdup(r->entity);
    it.has_version = true;
    it.version = version;
    it.payload = strdup("{}");
    snprintf(it.payload_sha256, sizeof it.payload_sha256, "%064d", 0);
    assert_int_equal(store_begin(fx->s), 0);
    assert_int_equal(machine_accept_insert(fx->s, mc, r->m.name, &c, &it, out, &decided), 0);
    if (decided) {
        snprintf(id, HOOKD_ID_MAX, "%s", it.id);
    } else {
        assert_int_equal(store_inbox_insert(fx->s, &it, &plain), 0);
        snprintf(id, HOOKD_ID_MAX, "%s", plain.id);
    }
    assert_int_equal(store_commit(fx->s), 0);
    inbox_item_free(&it);
    return decided;
}

static size_t transitions_of(struct fixture *fx, const struct run *r, const char *result)
{
    struct transition_list l = {0};
    size_t n = 0;

    assert_int_equal(store_transition_list(fx->s, "order", r->entity, &l), 0);
    for (size_t i = 0; i < l.n; i++)
        n += strcmp(l.items[i].result, result) == 0;
    transition_list_free(&l);
    return n;
}

/*
 * Decided at accept (SQLite): v1 is inserted applied, v3 (a gap) inserted
 * deferred with its transitions row and its next look at max_defer, v2 applied
 * and lets v3 through at once; a duplicate, and an item of an entity a worker
 * holds, are left to the plain insert with nothing written. PostgreSQL has no
 * such path (its accepts would wait on entity locks): every item is left to
 * the plain insert, pending for the workers, and nothing else is written.
 */
static void test_accept_decides_before_insert(void **state)
{
    struct fixture *fx = *state;
    bool one_writer = strcmp(store_backend(fx->s)->name, "sqlite") == 0;
    char v1[HOOKD_ID_MAX], v2[HOOKD_ID_MAX], v3[HOOKD_ID_MAX], dup[HOOKD_ID_MAX], held[HOOKD_ID_MAX];
    struct machine_cache *mc;
    struct machine_outcome out;
    struct entity_record e = {0};
    struct inbox_item it;
    struct run r;

    run_setup(fx, &r);
    assert_int_equal(machine_cache_create(&mc), 0);
    assert_int_equal(accept_as(fx, &r, mc, "ev1", "order.created", 1, &out, v1), one_writer);
    assert_int_equal(accept_as(fx, &r, mc, "ev3", "order.fulfilled", 3, &out, v3), one_writer);
    if (!one_writer) {
        assert_status(fx, v1, INBOX_PENDING, NULL);
        assert_status(fx, v3, INBOX_PENDING, NULL);
        assert_int_equal(transitions_of(fx, &r, "applied") + transitions_of(fx, &r, "deferred"), 0);
        assert_int_equal(store_entity_get(fx->s, "order", r.entity, &e), HOOKD_ENOTFOUND);
        assert_int_equal(emitted_for(fx, v1), 0);
        machine_cache_destroy(mc);
        machine_free(&r.m);
        return;
    }
    assert_int_equal(out.status, INBOX_DEFERRED);
    assert_int_equal(store_inbox_get(fx->s, v3, &it), 0);
    assert_int_equal(it.status, INBOX_DEFERRED);
    assert_int_equal(it.attempts, 1);
    assert_true(it.deferred_at > 0);
    assert_true(it.next_attempt_at >= it.deferred_at + 60000 - 1000); /* waits for a change, not the schedule */
    assert_null(it.lease_owner);
    inbox_item_free(&it);
    assert_int_equal(store_inbox_get(fx->s, v1, &it), 0);
    assert_int_equal(it.status, INBOX_PROCESSED);
    assert_string_equal(it.result, "applied");
    assert_int_equal(it.attempts, 1);
    assert_true(it.processed_at > 0);
    assert_int_equal(it.lease_token, 0); /* never claimed */
    inbox_item_free(&it);
    assert_int_equal(transitions_of(fx, &r, "deferred"), 1);
    assert_true(emitted_for(fx, v1) > 0);
    assert_int_equal(emitted_for(fx, v3), 0);
    /* The late v2: applied, and v3 through with it, in version order. */
    assert_true(accept_as(fx, &r, mc, "ev2", "order.paid", 2, &out, v2));
    assert_int_equal(out.status, INBOX_PROCESSED);
    assert_int_equal(out.applied, 2);
    assert_int_equal(out.settled, 1);
    assert_status(fx, v2, INBOX_PROCESSED, "applied");
    assert_status(fx, v3, INBOX_PROCESSED, "applied");
    assert_int_equal(store_entity_get(fx->s, "order", r.entity, &e), 0);
    assert_string_equal(e.state, "fulfilled");
    assert_int_equal(e.version, 3);
    entity_record_free(&e);
    assert_int_equal(transitions_of(fx, &r, "applied"), 3);
    int64_t s1 = emitted_for(fx, v1), s2 = emitted_for(fx, v2), s3 = emitted_for(fx, v3);
    assert_true(s1 > 0 && s1 < s2 && s2 < s3);
    /* A duplicate: left to the plain insert, which counts it on the stored row. */
    assert_false(accept_as(fx, &r, mc, "ev2", "order.paid", 2, &out, dup));
    assert_string_equal(dup, v2);
    assert_int_equal(store_inbox_get(fx->s, v2, &it), 0);
    assert_int_equal(it.dup_count, 1);
    inbox_item_free(&it);
    /* An entity one of whose items a worker holds stays that worker's: the new item waits, pending. */
    struct inbox_outcome o4;
    struct inbox_list claimed = {0};
    item_add(fx, &r, "order.paid", 5, &o4); /* a gap: pending, then claimed by n2 */
    assert_int_equal(store_inbox_claim_due(fx->s, "n2", clock_now_ms(), clock_now_ms() + 60000, 100, &claimed), 0);
    assert_int_equal(claimed.n, 1);
    inbox_list_free(&claimed);
    assert_false(accept_as(fx, &r, mc, "ev4", "order.paid", 4, &out, held));
    assert_status(fx, held, INBOX_PENDING, NULL);
    assert_int_equal(transitions_of(fx, &r, "applied"), 3);
    assert_int_equal(transitions_of(fx, &r, "deferred"), 1);
    machine_cache_destroy(mc);
    machine_free(&r.m);
}

/*
 * A decision at accept that fails after it may have written returns the
 * error: the receiver rolls back to before the call and inserts the item as
 * usual (here the same steps by hand), so the accept stands, the item waits
 * pending for the workers, and nothing of the decision is left.
 */
static void test_accept_decision_failure_leaves_the_item_pending(void **state)
{
    struct fixture *fx = *state;
    struct machine_cache *mc;
    struct machine_outcome out;
    struct inbox_item it = {0};
    struct inbox_outcome plain;
    struct entity_record e = {0};
    bool decided = true;
    struct run r;

    if (strcmp(store_backend(fx->s)->name, "sqlite") != 0)
        skip(); /* no decisions at accept elsewhere (test_accept_decides_before_insert) */
    run_setup(fx, &r);
    assert_int_equal(machine_cache_create(&mc), 0);
    const struct machine_step_context c = {
        .node = "n1", .now = clock_now_ms(), .max_defer_ms = 60000, .schedule_ms = schedule, .n_schedule = 2,
        .defer_pending = true,
    };
    snprintf(it.source, sizeof it.source, "%s", r.source);
    it.event_id = strdup("ev1");
    it.event_type = strdup("order.created");
    it.entity_kind = strdup("order");
    it.entity_id = strdup(r.entity);
    it.has_version = true;
    it.version = 1;
    it.payload = strdup("{}");
    snprintf(it.payload_sha256, sizeof it.payload_sha256, "%064d", 0);
    assert_int_equal(store_begin(fx->s), 0);
    assert_int_equal(store_savepoint(fx->s), 0);
    store_fault_inject("inbox_insert_decided", 1, HOOKD_EIO); /* after the decision's writes */
    assert_int_equal(machine_accept_insert(fx->s, mc, r.m.name, &c, &it, &out, &decided), HOOKD_EIO);
    store_fault_inject(NULL, 0, 0);
    assert_false(decided);
    assert_int_equal(store_rollback_to(fx->s), 0);
    assert_int_equal(store_inbox_insert(fx->s, &it, &plain), 0);
    assert_int_equal(store_commit(fx->s), 0);
    assert_status(fx, plain.id, INBOX_PENDING, NULL);
    assert_int_equal(transitions_of(fx, &r, "applied"), 0);
    assert_int_equal(store_entity_get(fx->s, "order", r.entity, &e), HOOKD_ENOTFOUND);
    assert_int_equal(emitted_for(fx, plain.id), 0);
    inbox_item_free(&it);
    machine_cache_destroy(mc);
    machine_free(&r.m);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_late_first_event_lets_the_chain_through),
        T(test_emitted_data_is_json),
        T(test_unnameable_entity_is_quarantined),
        T(test_stale_and_gap),
        T(test_step_defers_only_its_sources_waiting_items),
        T(test_gap_waits_for_its_entity),
        T(test_accept_decides_before_insert),
        T(test_accept_decision_failure_leaves_the_item_pending),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
