/*
 * State machine definitions: validation of the whole JSON (the rules across
 * transitions and states need all of it at once, so no field table), the
 * stored text and the API's view, and machine_decide, the rules of DESIGN §7.
 */
#include "inbound/machine.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/event_check.h"
#include "core/ids.h"
#include "ops/api_common.h"

static const char *const versioning_names[] = {"contiguous", "monotonic", "none"};

const char *machine_versioning_name(enum machine_versioning v)
{
    return (size_t)v < sizeof versioning_names / sizeof versioning_names[0] ? versioning_names[v] : "none";
}

void machine_free(struct machine *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_transitions; i++) {
        struct machine_transition *t = &m->transitions[i];
        free(t->on);
        free(t->to);
        for (size_t j = 0; j < t->n_from; j++)
            free(t->from[j]);
    }
    free(m->transitions);
    for (size_t i = 0; i < m->n_states; i++)
        free(m->states[i]);
    free(m->states);
    free(m->emit);
    memset(m, 0, sizeof *m);
}

/* ---- validation ----------------------------------------------------------------------------------- */

__attribute__((format(printf, 3, 4))) static int refuse(struct api_error *err, const char *code, const char *fmt,
                                                        ...)
{
    char msg[sizeof err->message];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    api_error_set(err, 400, code, "%s", msg);
    return HOOKD_EINVAL;
}

/* A state's name: 1..MACHINE_STATE_MAX-1 bytes of printable text (no control characters). */
static bool state_name_ok(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n >= MACHINE_STATE_MAX)
        return false;
    return event_label_problem(s, n) == NULL;
}

static bool type_ok(const char *s) { return s[0] && event_type_problem(s, strlen(s)) == NULL; }

static bool state_known(const struct machine *m, const char *s)
{
    for (size_t i = 0; i < m->n_states; i++)
        if (strcmp(m->states[i], s) == 0)
            return true;
    return false;
}

static int states_add(struct machine *m, const char *s)
{
    char **grown;

    if (state_known(m, s))
        return 0;
    if (m->n_states >= MACHINE_MAX_STATES)
        return HOOKD_EINVAL;
    grown = realloc(m->states, (m->n_states + 1) * sizeof *grown);
    if (!grown)
        return HOOKD_ENOMEM;
    m->states = grown;
    if (!(m->states[m->n_states] = strdup(s)))
        return HOOKD_ENOMEM;
    m->n_states++;
    return 0;
}

static int parse_transition(const json_t *o, size_t i, struct machine_transition *t, struct api_error *err)
{
    char field[48];
    const char *key;
    const json_t *v, *from, *item;
    size_t j;

    snprintf(field, sizeof field, "transitions[%zu]", i);
    if (!json_is_object(o))
        return refuse(err, "invalid_field", "%s: must be an object {\"on\", \"from\", \"to\"}", field);
    json_object_foreach((json_t *)o, key, v) {
        if (strcmp(key, "on") != 0 && strcmp(key, "from") != 0 && strcmp(key, "to") != 0) {
            char k[64];
            snprintf(k, sizeof k, "%.60s", key);
            return refuse(err, "unknown_field", "%s.%s: unknown field", field, k);
        }
    }
    v = json_object_get(o, "on");
    if (!v)
        return refuse(err, "missing_field", "%s.on is required", field);
    if (!json_is_string(v) || !type_ok(json_string_value(v)))
        return refuse(err, "invalid_field", "%s.on: must be an event type (1 to 128 of A-Z a-z 0-9 _ . -)", field);
    v = json_object_get(o, "to");
    if (!v)
        return refuse(err, "missing_field", "%s.to is required", field);
    if (!json_is_string(v) || !state_name_ok(json_string_value(v)))
        return refuse(err, "invalid_field", "%s.to: must be a state name (1 to 63 bytes, no control characters)",
                      field);
    from = json_object_get(o, "from");
    if (!from)
        return refuse(err, "missing_field", "%s.from is required", field);
    if (!json_is_array(from) || json_array_size(from) == 0 || json_array_size(from) > MACHINE_MAX_FROM)
        return refuse(err, "invalid_field", "%s.from: must be a list of 1 to 64 states (null: a new entity)", field);
    if (!(t->on = strdup(json_string_value(json_object_get(o, "on")))) ||
        !(t->to = strdup(json_string_value(json_object_get(o, "to")))))
        return HOOKD_ENOMEM;
    json_array_foreach(from, j, item) {
        if (!json_is_null(item) && (!json_is_string(item) || !state_name_ok(json_string_value(item))))
            return refuse(err, "invalid_field", "%s.from: each entry must be a state name or null", field);
        for (size_t k = 0; k < t->n_from; k++) {
            bool same = json_is_null(item) ? t->from[k] == NULL
                                           : t->from[k] && strcmp(t->from[k], json_string_value(item)) == 0;
            if (same)
                return refuse(err, "invalid_field", "%s.from: \"%s\" is listed twice", field,
                              json_is_null(item) ? "null" : json_string_value(item));
        }
        t->from[t->n_from] = NULL;
        if (!json_is_null(item) && !(t->from[t->n_from] = strdup(json_string_value(item))))
            return HOOKD_ENOMEM;
        t->n_from++;
    }
    return 0;
}

static bool same_from(const char *a, const char *b) { return a == b || (a && b && strcmp(a, b) == 0); }

/* The rules across transitions: declared states, duplicate (on, from) pairs, reachability from null. */
static int check_graph(struct machine *m, bool declared, struct api_error *err)
{
    char field[48];
    bool *reached = NULL;
    int rc = 0;

    for (size_t i = 0; i < m->n_transitions; i++) {
        const struct machine_transition *t = &m->transitions[i];
        snprintf(field, sizeof field, "transitions[%zu]", i);
        if (declared && !state_known(m, t->to))
            return refuse(err, "invalid_field", "%s.to: \"%s\" is not one of the declared states", field, t->to);
        for (size_t j = 0; j < t->n_from; j++) {
            if (t->from[j] && declared && !state_known(m, t->from[j]))
                return refuse(err, "invalid_field", "%s.from: \"%s\" is not one of the declared states", field,
                              t->from[j]);
            for (size_t p = 0; p < i; p++) {
                const struct machine_transition *o = &m->transitions[p];
                if (strcmp(o->on, t->on) != 0)
                    continue;
                for (size_t q = 0; q < o->n_from; q++)
                    if (same_from(o->from[q], t->from[j]))
                        return refuse(err, "invalid_field", "%s.from: (on \"%s\", from %s) is also in transitions[%zu]", field, t->on,
                                      t->from[j] ? t->from[j] : "null", p);
            }
        }
    }
    if (!declared) {
        for (size_t i = 0; i < m->n_transitions; i++)
            if ((rc = states_add(m, m->transitions[i].to)) != 0)
                return rc == HOOKD_EINVAL ? refuse(err, "invalid_field", "transitions: more than 256 states") : rc;
        for (size_t i = 0; i < m->n_transitions; i++) {
            const struct machine_transition *t = &m->transitions[i];
            for (size_t j = 0; j < t->n_from; j++) {
                if (t->from[j] && !state_known(m, t->from[j])) {
                    snprintf(field, sizeof field, "transitions[%zu].from", i);
                    return refuse(err, "invalid_field",
                                  "%s: unknown state \"%s\" (no transition leads to it; declare it in states or "
                                  "add one)", field, t->from[j]);
                }
            }
        }
    }
    /* Reachability: from a new entity (null), through the transitions, until nothing changes. */
    if (!(reached = calloc(m->n_states ? m->n_states : 1, sizeof *reached)))
        return HOOKD_ENOMEM;
    for (bool changed = true; changed;) {
        changed = false;
        for (size_t i = 0; i < m->n_transitions; i++) {
            const struct machine_transition *t = &m->transitions[i];
            bool from_reached = false;
            for (size_t j = 0; j < t->n_from && !from_reached; j++) {
                if (!t->from[j]) {
                    from_reached = true;
                    continue;
                }
                for (size_t s = 0; s < m->n_states; s++)
                    if (reached[s] && strcmp(m->states[s], t->from[j]) == 0)
                        from_reached = true;
            }
            for (size_t s = 0; from_reached && s < m->n_states; s++) {
                if (!reached[s] && strcmp(m->states[s], t->to) == 0) {
                    reached[s] = true;
                    changed = true;
                }
            }
        }
    }
    for (size_t s = 0; s < m->n_states; s++) {
        if (!reached[s]) {
            rc = refuse(err, "invalid_field",
                        "%s: state \"%s\" is unreachable (no chain of transitions leads to it from a new entity)",
                        declared ? "states" : "transitions", m->states[s]);
            break;
        }
    }
    free(reached);
    return rc;
}

int machine_parse(const json_t *body, struct machine *m, struct api_error *err)
{
    static const char *const known[] = {"name", "versioning", "transitions", "states", "emit",
                                        "created_at", "updated_at"};
    const char *key, *name;
    const json_t *v, *arr, *item;
    size_t i;
    int rc;

    memset(m, 0, sizeof *m);
    if (!json_is_object(body))
        return refuse(err, "invalid_field", "the body must be a JSON object");
    json_object_foreach((json_t *)body, key, v) {
        bool ok = false;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            ok = ok || strcmp(key, known[k]) == 0;
        if (!ok) {
            char k[64];
            snprintf(k, sizeof k, "%.60s", key);
            return refuse(err, "unknown_field", "%s: unknown field", k);
        }
    }
    v = json_object_get(body, "name");
    if (!v)
        return refuse(err, "missing_field", "name is required");
    name = json_string_value(v);
    if (!name || strlen(name) >= sizeof m->name || !id_is_valid(name))
        return refuse(err, "invalid_field", "name: must be 1 to 63 characters of A-Z a-z 0-9 _ . : -");
    snprintf(m->name, sizeof m->name, "%s", name);
    v = json_object_get(body, "versioning");
    if (!v)
        return refuse(err, "missing_field", "versioning is required (contiguous, monotonic or none)");
    for (i = 0; i < 3; i++)
        if (json_is_string(v) && strcmp(json_string_value(v), versioning_names[i]) == 0)
            break;
    if (i == 3)
        return refuse(err, "invalid_field", "versioning: must be contiguous, monotonic or none");
    m->versioning = (enum machine_versioning)i;
    v = json_object_get(body, "emit");
    if (v && !json_is_null(v)) {
        if (!json_is_string(v) || !type_ok(json_string_value(v)))
            return refuse(err, "invalid_field", "emit: must be an event type (1 to 128 of A-Z a-z 0-9 _ . -) or null");
        if (!(m->emit = strdup(json_string_value(v))))
            return HOOKD_ENOMEM;
    }
    arr = json_object_get(body, "states");
    if (arr && !json_is_null(arr)) {
        if (!json_is_array(arr) || json_array_size(arr) == 0 || json_array_size(arr) > MACHINE_MAX_STATES)
            return refuse(err, "invalid_field", "states: must be a list of 1 to 256 state names");
        json_array_foreach(arr, i, item) {
            if (!json_is_string(item) || !state_name_ok(json_string_value(item)))
                return refuse(err, "invalid_field", "states: each entry must be a state name (1 to 63 bytes)");
            if (state_known(m, json_string_value(item)))
                return refuse(err, "invalid_field", "states: \"%s\" is listed twice", json_string_value(item));
            if ((rc = states_add(m, json_string_value(item))) != 0)
                return rc;
        }
    }
    arr = json_object_get(body, "transitions");
    if (!arr)
        return refuse(err, "missing_field", "transitions is required");
    if (!json_is_array(arr) || json_array_size(arr) == 0 || json_array_size(arr) > MACHINE_MAX_TRANSITIONS)
        return refuse(err, "invalid_field", "transitions: must be a list of 1 to 256 transitions");
    if (!(m->transitions = calloc(json_array_size(arr), sizeof *m->transitions)))
        return HOOKD_ENOMEM;
    json_array_foreach(arr, i, item) {
        m->n_transitions = i + 1;
        if ((rc = parse_transition(item, i, &m->transitions[i], err)) != 0)
            return rc;
    }
    m->states_declared = m->n_states > 0 && json_object_get(body, "states") != NULL;
    return check_graph(m, m->states_declared, err);
}

int machine_from_record(const struct machine_record *rec, struct machine *m)
{
    struct api_error err = {0};
    json_t *def = json_loads(rec->definition, 0, NULL);
    int rc;

    memset(m, 0, sizeof *m);
    if (!def)
        return HOOKD_EIO;
    rc = machine_parse(def, m, &err);
    json_decref(def);
    if (rc == HOOKD_EINVAL)
        rc = HOOKD_EIO;
    m->created_at = rec->created_at;
    m->updated_at = rec->updated_at;
    return rc;
}

/* ---- JSON ----------------------------------------------------------------------------------------- */

json_t *machine_definition_json(const struct machine *m)
{
    json_t *ts = json_array(), *o;

    for (size_t i = 0; ts && i < m->n_transitions; i++) {
        const struct machine_transition *t = &m->transitions[i];
        json_t *from = json_array();
        for (size_t j = 0; from && j < t->n_from; j++)
            json_array_append_new(from, t->from[j] ? json_string(t->from[j]) : json_null());
        json_array_append_new(ts, json_pack("{s:s,s:o*,s:s}", "on", t->on, "from", from, "to", t->to));
    }
    o = json_pack("{s:s,s:s,s:o*,s:o}", "name", m->name, "versioning", machine_versioning_name(m->versioning),
                  "transitions", ts, "emit", m->emit ? json_string(m->emit) : json_null());
    return o;
}

json_t *machine_json(const struct machine *m)
{
    json_t *o = machine_definition_json(m), *states = json_array();

    for (size_t i = 0; states && i < m->n_states; i++)
        json_array_append_new(states, json_string(m->states[i]));
    if (o && (json_object_set_new(o, "states", states ? states : json_null()) != 0 ||
              json_object_set_new(o, "created_at", api_json_time(m->created_at)) != 0 ||
              json_object_set_new(o, "updated_at", api_json_time(m->updated_at)) != 0)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* ---- the decision --------------------------------------------------------------------------------- */

/*
 * The verdict of machine_decide, without its reason's text (and without
 * clearing the decision's reason buffer): the re-evaluation asks it of every
 * other open item of an entity at every pass, and most of those only keep
 * waiting (about 1,500 instructions a call with the reason, most of them its
 * snprintf). to and sets_version are set for VERDICT_APPLY.
 */
static enum machine_verdict verdict_of(const struct machine *m, const char *state, bool has_applied, int64_t a,
                                       const char *type, bool has_version, int64_t v, const char **to,
                                       bool *sets_version)
{
    bool versioned = m->versioning != VERSIONING_NONE && has_version;

    if (versioned && has_applied && v <= a)
        return VERDICT_STALE;
    if (versioned && has_applied && m->versioning == VERSIONING_CONTIGUOUS && v > a + 1)
        return VERDICT_GAP;
    for (size_t i = 0; type && i < m->n_transitions; i++) {
        const struct machine_transition *t = &m->transitions[i];
        if (strcmp(t->on, type) != 0)
            continue;
        for (size_t j = 0; j < t->n_from; j++) {
            if (same_from(t->from[j], state)) {
                *to = t->to;
                *sets_version = versioned;
                return VERDICT_APPLY;
            }
        }
    }
    return VERDICT_NOT_ALLOWED;
}

bool machine_may_pass(const struct machine *m, const char *state, bool has_applied, int64_t a, const char *type,
                      bool has_version, int64_t v)
{
    const char *to;
    bool sets_version;
    enum machine_verdict verdict = verdict_of(m, state, has_applied, a, type, has_version, v, &to, &sets_version);

    return verdict == VERDICT_APPLY || verdict == VERDICT_STALE;
}

void machine_decide(const struct machine *m, const char *state, bool has_applied, int64_t a, const char *type,
                    bool has_version, int64_t v, struct machine_decision *out)
{
    memset(out, 0, sizeof *out);
    out->verdict = verdict_of(m, state, has_applied, a, type, has_version, v, &out->to, &out->sets_version);
    switch (out->verdict) {
    case VERDICT_STALE:
        snprintf(out->reason, sizeof out->reason, "version %" PRId64 " is not above the applied version %" PRId64, v,
                 a);
        break;
    case VERDICT_GAP:
        snprintf(out->reason, sizeof out->reason, "waiting for version %" PRId64 " (gap: applied %" PRId64 ", got %" PRId64 ")",
                 a + 1, a, v);
        break;
    case VERDICT_NOT_ALLOWED:
        snprintf(out->reason, sizeof out->reason, "no transition on %.64s from %.64s", type ? type : "(no type)",
                 state ? state : "a new entity");
        break;
    default:
        break;
    }
}
