/*
 * The machines family's record readers, the same for both backends: machine
 * definitions, entities and transition rows read from a store_row.
 */
#include "store/store_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int store_read_machine(const struct store_row *r, void *item)
{
    struct machine_record *m = item;
    const char *name = r->ops->text(r, 0);
    bool ok = true;

    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name ? name : "");
    m->definition = r->ops->str(r, 1, &ok);
    m->created_at = r->ops->i64(r, 2);
    m->updated_at = r->ops->i64(r, 3);
    if (!ok || !m->definition) {
        machine_record_free(m);
        return HOOKD_ENOMEM;
    }
    return 0;
}

int store_read_entity(const struct store_row *r, void *item)
{
    struct entity_record *e = item;
    bool ok = true;

    memset(e, 0, sizeof *e);
    e->kind = r->ops->str(r, 0, &ok);
    e->id = r->ops->str(r, 1, &ok);
    e->state = r->ops->str(r, 2, &ok);
    e->has_version = !r->ops->null(r, 3);
    e->version = r->ops->i64(r, 3);
    e->last_event_id = r->ops->str(r, 4, &ok);
    e->updated_at = r->ops->i64(r, 5);
    if (!ok || !e->kind || !e->id) {
        entity_record_free(e);
        return HOOKD_ENOMEM;
    }
    return 0;
}

int store_read_transition(const struct store_row *r, void *item)
{
    struct transition_record *t = item;
    bool ok = true;
    int c = 0;

    memset(t, 0, sizeof *t);
    t->seq = r->ops->i64(r, c++);
    store_row_id(r, c++, t->inbox_id);
    t->source = r->ops->str(r, c++, &ok);
    t->kind = r->ops->str(r, c++, &ok);
    t->entity_id = r->ops->str(r, c++, &ok);
    t->event_id = r->ops->str(r, c++, &ok);
    t->from_state = r->ops->str(r, c++, &ok);
    t->to_state = r->ops->str(r, c++, &ok);
    t->has_version = !r->ops->null(r, c);
    t->version = r->ops->i64(r, c++);
    t->result = r->ops->str(r, c++, &ok);
    t->reason = r->ops->str(r, c++, &ok);
    t->worker = r->ops->str(r, c++, &ok);
    t->at = r->ops->i64(r, c++);
    if (!ok || !t->source || !t->kind || !t->entity_id || !t->result) {
        transition_record_free(t);
        return HOOKD_ENOMEM;
    }
    return 0;
}

void store_free_machine(void *item) { machine_record_free(item); }
void store_free_transition(void *item) { transition_record_free(item); }
