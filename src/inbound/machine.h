/*
 * State machine definitions (DESIGN §7): the JSON of POST/PATCH /v1/machines
 * validated whole, its stored form, the API's view, and the one decision a
 * machine makes about one event on one entity (state in, decision out: no
 * store, so any handler can call it inside its own transaction).
 *
 *   machine_parse        a body onto a definition (400 naming the field)
 *   machine_from_record  the stored row back to a definition
 *   machine_json / machine_definition_text   the API's view, the stored text
 *   machine_decide       stale, gap, apply (to which state) or not allowed
 *   machine_free
 */
#ifndef HOOKD_INBOUND_MACHINE_H
#define HOOKD_INBOUND_MACHINE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "ops/fields.h"
#include "store/store.h"

struct api_error;

#define MACHINE_MAX_TRANSITIONS 256
#define MACHINE_MAX_FROM 64     /* states one transition leaves from */
#define MACHINE_MAX_STATES 256
#define MACHINE_STATE_MAX 64    /* bytes of a state's name */

enum machine_versioning { VERSIONING_CONTIGUOUS, VERSIONING_MONOTONIC, VERSIONING_NONE };
const char *machine_versioning_name(enum machine_versioning v);

struct machine_transition {
    char *on;               /* the event type */
    char *from[MACHINE_MAX_FROM]; /* NULL entry: the entity is not known yet */
    size_t n_from;
    char *to;
};

struct machine {
    char name[MACHINE_NAME_MAX];
    enum machine_versioning versioning;
    struct machine_transition *transitions;
    size_t n_transitions;
    char **states;          /* as declared ("states"), or NULL: the targets of the transitions */
    size_t n_states;
    bool states_declared;   /* the definition lists its states (else they are derived, and not stored) */
    char *emit;             /* the outbox event type of an applied change; NULL: none */
    int64_t created_at, updated_at;
};

void machine_free(struct machine *m);

/*
 * Validates a whole definition (POST, or a PATCH merged onto the current one
 * by the caller) into *m: name (1–63 id characters), versioning (contiguous,
 * monotonic, none), transitions (each {on, from, to}; from a non-empty list of
 * states or null), optional states (when given, every from and to must be one
 * of them), emit (an event type or null). Refused: unknown fields, unknown
 * states, a (on, from) pair given twice, states no event can reach from a new
 * entity. Returns 0, HOOKD_EINVAL with err (400 naming the field), HOOKD_ENOMEM.
 */
__attribute__((warn_unused_result)) int machine_parse(const json_t *body, struct machine *m, struct api_error *err);
/* HOOKD_EIO when the stored text does not parse as a definition. */
__attribute__((warn_unused_result)) int machine_from_record(const struct machine_record *rec, struct machine *m);
/* The definition as JSON (name, versioning, states, transitions, emit); the API adds its times. */
json_t *machine_definition_json(const struct machine *m);
json_t *machine_json(const struct machine *m);

enum machine_verdict {
    VERDICT_APPLY,       /* the transition is allowed: to `to` */
    VERDICT_STALE,       /* version at or below the applied one */
    VERDICT_GAP,         /* contiguous: a version between is missing */
    VERDICT_NOT_ALLOWED, /* no transition on this type from this state (yet) */
};

struct machine_decision {
    enum machine_verdict verdict;
    const char *to;        /* VERDICT_APPLY: borrowed from the machine */
    bool sets_version;     /* VERDICT_APPLY: the event's version becomes the entity's */
    char reason[160];      /* the others: why, for the item's error and the transitions log */
};

/*
 * The rules of DESIGN §7 for an event of type `type` (version v when
 * has_version) on an entity at `state` (NULL: not known) whose last applied
 * version is a (when has_applied). Pure: reads nothing else.
 */
void machine_decide(const struct machine *m, const char *state, bool has_applied, int64_t a, const char *type,
                    bool has_version, int64_t v, struct machine_decision *out);
/* Whether machine_decide would apply the event or find it stale (its verdict alone, no reason written). */
bool machine_may_pass(const struct machine *m, const char *state, bool has_applied, int64_t a, const char *type,
                      bool has_version, int64_t v);
#endif
