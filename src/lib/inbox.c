/*
 * hookd_inbox_work(): the application's own handler for a library source,
 * the seed's pattern (the effect and the "processed" mark commit together).
 * The loop both databases share: claim a batch with a lease, then for each
 * item open a transaction, re-check the lease holding the row, run the
 * callback, write the outcome and commit; a failing callback is rolled back
 * with its outcome and recorded as a failed attempt in a transaction of its own.
 */
#include "lib/inbox_lib.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/duration.h"
#include "core/retry.h"
#include "core/utf8.h"

/* The [inbox] defaults of DESIGN §12: a library source without its own schedule or max_defer gets these. */
static const int64_t default_schedule_ms[] = {60000, 300000, 900000};
#define DEFAULT_MAX_DEFER_MS 3600000

/* What the loop needs of the source's definition. */
struct lib_source {
    int64_t schedule_ms[RETRY_MAX_SCHEDULE];
    size_t n_schedule;
    int64_t max_defer_ms;
};

void lib_batch_free(struct lib_batch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        struct lib_item *it = &b->items[i];
        free(it->id);
        free(it->source);
        free(it->event_id);
        free(it->event_type);
        free(it->entity_kind);
        free(it->entity_id);
        free(it->payload);
    }
    b->n = 0;
}

/* HOOKD_EINVAL unless the definition's handler is {"library": true}; its schedule and max_defer, else the defaults. */
static int source_read(const char *definition, struct lib_source *out)
{
    json_t *def = json_loads(definition, 0, NULL);
    const char *schedule, *max_defer;
    int rc = 0;

    memset(out, 0, sizeof *out);
    if (!def || !json_is_true(json_object_get(json_object_get(def, "handler"), "library"))) {
        rc = HOOKD_EINVAL;
        goto out;
    }
    schedule = json_string_value(json_object_get(def, "retry_schedule"));
    max_defer = json_string_value(json_object_get(def, "max_defer"));
    if (schedule && duration_list_parse(schedule, out->schedule_ms, RETRY_MAX_SCHEDULE, &out->n_schedule) != 0)
        out->n_schedule = 0;
    if (out->n_schedule == 0) {
        out->n_schedule = sizeof default_schedule_ms / sizeof default_schedule_ms[0];
        memcpy(out->schedule_ms, default_schedule_ms, sizeof default_schedule_ms);
    }
    if (!max_defer || duration_parse(max_defer, &out->max_defer_ms) != 0 || out->max_defer_ms <= 0)
        out->max_defer_ms = DEFAULT_MAX_DEFER_MS;
out:
    json_decref(def);
    return rc;
}

/* The options in effect: the caller's fields it compiled with (struct_size), the defaults for the rest. */
static void options_read(const struct hookd_inbox_options *in, struct hookd_inbox_options *out, char *owner)
{
    struct hookd_inbox_options given = {0};
    char host[LIB_OWNER_MAX] = "";

    if (in) {
        size_t n = in->struct_size && in->struct_size < sizeof given ? in->struct_size : sizeof given;
        memcpy(&given, in, n);
    }
    *out = given;
    out->struct_size = sizeof *out;
    if (out->max_items <= 0)
        out->max_items = LIB_MAX_ITEMS_DEFAULT;
    if (out->batch <= 0)
        out->batch = LIB_BATCH_DEFAULT;
    if (out->batch > LIB_BATCH_MAX)
        out->batch = LIB_BATCH_MAX;
    if (out->batch > out->max_items)
        out->batch = out->max_items;
    if (out->lease_ms <= 0)
        out->lease_ms = LIB_LEASE_DEFAULT_MS;
    if (given.owner) {
        snprintf(owner, LIB_OWNER_MAX, "%s", given.owner);
    } else {
        if (gethostname(host, sizeof host - 1) != 0)
            snprintf(host, sizeof host, "localhost");
        host[sizeof host - 1] = '\0';
        snprintf(owner, LIB_OWNER_MAX, "app:%.40s:%ld", host, (long)getpid());
    }
    out->owner = owner;
}

/* The callback's note as stored text: well-formed UTF-8 without control characters, else '?' for the bad bytes. */
static void note_clean(char *note)
{
    size_t n = strnlen(note, LIB_NOTE_MAX - 1), i = 0;

    note[n] = '\0';
    while (i < n) {
        size_t ok = utf8_valid_prefix(note + i, n - i);
        for (size_t k = i; k < i + ok; k++) {
            if ((unsigned char)note[k] < 0x20 || note[k] == 0x7f)
                note[k] = '?';
        }
        i += ok;
        if (i < n)
            note[i++] = '?';
    }
}

/*
 * The step for attempt n = attempts + 1 from the callback's answer: processed
 * and quarantined as said; deferred until it has been deferred for max_defer
 * (the next look on the schedule, clamped to that limit), then quarantined; a
 * failure retried on the schedule, then quarantined. text holds the error.
 */
static void step_decide(const struct lib_source *src, const struct lib_item *it, int answer, const char *note,
                        int64_t now, char *text, size_t text_size, struct lib_step *st)
{
    int n = it->attempts + 1;
    size_t len = src->n_schedule;

    memset(st, 0, sizeof *st);
    st->attempts = n;
    st->error = text;
    switch (answer) {
    case HOOKD_INBOX_PROCESSED:
        st->status = "processed";
        st->result = note[0] ? note : "handled";
        st->error = NULL;
        return;
    case HOOKD_INBOX_QUARANTINED:
        st->status = "quarantined";
        snprintf(text, text_size, "%s", note[0] ? note : "the application's handler quarantined it");
        return;
    case HOOKD_INBOX_DEFERRED: {
        int64_t since = it->deferred_at ? it->deferred_at : now;
        snprintf(text, text_size, "%s", note[0] ? note : "the application's handler deferred it");
        if (now - since >= src->max_defer_ms) {
            st->status = "quarantined";
            snprintf(text + strlen(text), text_size - strlen(text), "; deferred for longer than max_defer");
            return;
        }
        st->status = "deferred";
        st->next_attempt_at = now + src->schedule_ms[(size_t)n > len ? len - 1 : (size_t)n - 1];
        if (st->next_attempt_at > since + src->max_defer_ms)
            st->next_attempt_at = since + src->max_defer_ms; /* the last look falls on the limit */
        return;
    }
    default:
        if (note[0])
            snprintf(text, text_size, "the application's handler failed: %s", note);
        else
            snprintf(text, text_size, "the application's handler failed (%d)", answer);
        if ((size_t)n > len) {
            st->status = "quarantined";
            snprintf(text + strlen(text), text_size - strlen(text), "; retry schedule exhausted after %d attempts", n);
            return;
        }
        st->status = "pending";
        st->next_attempt_at = now + src->schedule_ms[n - 1];
        return;
    }
}

static void item_view(const struct lib_item *it, struct hookd_inbox_item *v)
{
    *v = (struct hookd_inbox_item){
        .struct_size = sizeof *v,
        .id = it->id,
        .source = it->source,
        .event_id = it->event_id,
        .event_type = it->event_type,
        .entity_kind = it->entity_kind,
        .entity_id = it->entity_id,
        .version = it->version,
        .has_version = it->has_version,
        .attempt = it->attempts + 1,
        .payload = it->payload,
        .payload_len = it->payload_len,
        .received_at_ms = it->received_at,
        .entity_state = NULL,
    };
}

static void count(struct hookd_inbox_counts *c, const struct lib_step *st, bool failed)
{
    if (failed)
        c->failed++;
    else if (strcmp(st->status, "processed") == 0)
        c->processed++;
    else if (strcmp(st->status, "deferred") == 0)
        c->deferred++;
    else
        c->quarantined++;
}

/* A failed callback: its transaction is gone; the attempt is recorded in one of its own, still fenced. */
static int failure_record(const struct lib_backend *be, void *conn, const struct lib_item *it, const char *owner,
                          const struct lib_step *st, struct hookd_inbox_counts *c)
{
    int rc = be->begin(conn, it, owner);

    if (rc == HOOKD_ESTALE) {
        c->lost++;
        return 0;
    }
    if (rc == 0)
        rc = be->write(conn, it, owner, st, clock_now_ms());
    if (rc == 0)
        rc = be->commit(conn);
    if (rc != 0) {
        be->rollback(conn);
        return rc;
    }
    c->failed++;
    return 0;
}

/* One item through its transaction. 0, or an error that ends the call (the item's lease then expires). */
static int item_work(const struct lib_backend *be, void *conn, const struct lib_source *src, const struct lib_item *it,
                     const char *owner, hookd_inbox_fn fn, void *arg, struct hookd_inbox_counts *c)
{
    struct hookd_inbox_item view;
    struct lib_step st;
    char note[LIB_NOTE_MAX] = "", text[LIB_NOTE_MAX + 128];
    int answer, usable, rc = be->begin(conn, it, owner);

    if (rc == HOOKD_ESTALE) {
        c->lost++;
        return 0;
    }
    if (rc != 0)
        return rc;
    item_view(it, &view);
    answer = fn(arg, &view, note, sizeof note);
    note_clean(note);
    usable = be->usable(conn);
    if (usable == HOOKD_EINVAL) {
        /* The callback committed or rolled back hookd's transaction: what it wrote is beyond recall. */
        be->rollback(conn);
        step_decide(src, it, -1, "it ended hookd's transaction (COMMIT or ROLLBACK in the callback)", clock_now_ms(),
                    text, sizeof text, &st);
        rc = failure_record(be, conn, it, owner, &st, c);
        return rc ? rc : HOOKD_EINVAL;
    }
    if (usable != 0 && answer >= 0 && answer <= HOOKD_INBOX_QUARANTINED) {
        answer = usable; /* a statement failed and the transaction cannot commit */
        if (!note[0])
            snprintf(note, sizeof note, "a statement in the transaction failed");
    }
    if (answer < 0 || answer > HOOKD_INBOX_QUARANTINED) {
        be->rollback(conn);
        step_decide(src, it, answer > 0 ? HOOKD_EINVAL : answer, note, clock_now_ms(), text, sizeof text, &st);
        return failure_record(be, conn, it, owner, &st, c);
    }
    step_decide(src, it, answer, note, clock_now_ms(), text, sizeof text, &st);
    rc = be->write(conn, it, owner, &st, clock_now_ms());
    if (rc == 0)
        rc = be->commit(conn);
    if (rc != 0) {
        be->rollback(conn);
        return rc;
    }
    count(c, &st, false);
    return 0;
}

int lib_inbox_work(const struct lib_backend *be, void *conn, const char *source, hookd_inbox_fn fn, void *arg,
                   const struct hookd_inbox_options *opts, struct hookd_inbox_counts *counts)
{
    struct hookd_inbox_counts local = {0}, *c = counts ? counts : &local;
    struct hookd_inbox_options o;
    struct lib_source src;
    struct lib_batch *batch = NULL;
    char owner[LIB_OWNER_MAX], *definition = NULL;
    int done = 0, result;

    memset(c, 0, sizeof *c);
    if (!conn || !source || !fn || strlen(source) >= HOOKD_ID_MAX)
        return HOOKD_EINVAL;
    options_read(opts, &o, owner);
    result = be->idle(conn);
    if (result == 0)
        result = be->source_definition(conn, source, &definition);
    if (result == 0)
        result = source_read(definition, &src);
    if (result == 0 && !(batch = calloc(1, sizeof *batch)))
        result = HOOKD_ENOMEM;
    while (result == 0 && done < o.max_items) {
        int64_t now = clock_now_ms();
        int limit = o.max_items - done < o.batch ? o.max_items - done : o.batch;
        size_t i;

        result = be->claim(conn, source, owner, now, now + o.lease_ms, limit, batch);
        if (result != 0 || batch->n == 0)
            break;
        for (i = 0; i < batch->n && result == 0; i++) {
            result = item_work(be, conn, &src, &batch->items[i], owner, fn, arg, c);
            done++;
        }
        for (; i < batch->n; i++)
            be->release(conn, &batch->items[i], owner);
        if (batch->n < (size_t)limit)
            break; /* nothing more is due now */
        lib_batch_free(batch);
    }
    if (batch)
        lib_batch_free(batch);
    free(batch);
    free(definition);
    if (result != 0)
        return result;
    return c->processed + c->deferred + c->quarantined + c->failed;
}
