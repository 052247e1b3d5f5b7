/*
 * The JSON text columns of hookd_endpoints, shared by the backends: the
 * event type filters, the secrets (sealed at rest by core/secret_box.h, with
 * "endpoint:<id>" as the row's identity, and wiped from memory after use) and
 * the retry schedule.
 */
#include "store/endpoint_json.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/secret_box.h"
#include "log.h"

/* Overwrites the key strings inside a secrets array before it is freed. */
static void secrets_json_wipe(json_t *arr)
{
    size_t i;
    json_t *item;

    json_array_foreach(arr, i, item) {
        json_t *key = json_object_get(item, "key");
        if (json_is_string(key))
            explicit_bzero((char *)json_string_value(key), json_string_length(key));
    }
}

static void text_wipe_free(char *t)
{
    if (t) {
        explicit_bzero(t, strlen(t));
        free(t);
    }
}

void endpoint_json_free(struct endpoint_json *j)
{
    free(j->event_types);
    text_wipe_free(j->secrets);
    free(j->retry_schedule);
    free(j->headers);
    memset(j, 0, sizeof *j);
}

/* The "Name: value" lines as one JSON object, in their order. */
static int headers_encode(const struct endpoint *ep, char **out)
{
    json_t *obj;

    *out = NULL;
    if (ep->n_headers == 0)
        return 0;
    if (ep->n_headers > CUSTOM_HEADERS_MAX)
        return HOOKD_EINVAL;
    if (!(obj = json_object()))
        return HOOKD_ENOMEM;
    for (size_t i = 0; i < ep->n_headers; i++) {
        const char *colon = ep->headers[i] ? strchr(ep->headers[i], ':') : NULL;
        if (!colon || colon[1] != ' ') {
            json_decref(obj);
            return HOOKD_EINVAL;
        }
        if (json_object_setn_new(obj, ep->headers[i], (size_t)(colon - ep->headers[i]), json_string(colon + 2))) {
            json_decref(obj);
            return HOOKD_ENOMEM;
        }
    }
    *out = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(obj);
    return *out ? 0 : HOOKD_ENOMEM;
}

int endpoint_json_encode(const struct endpoint *ep, struct endpoint_json *j)
{
    json_t *types = json_array(), *secrets = json_array(), *sched = ep->n_retry_schedule ? json_array() : NULL;
    char *plain;
    int result = HOOKD_ENOMEM;

    memset(j, 0, sizeof *j);
    if (ep->n_event_types > ENDPOINT_MAX_TYPES || ep->n_secrets > ENDPOINT_MAX_SECRETS ||
        ep->n_retry_schedule > RETRY_MAX_SCHEDULE) {
        result = HOOKD_EINVAL;
        goto out;
    }
    if (!types || !secrets || (ep->n_retry_schedule && !sched))
        goto out;
    for (size_t i = 0; i < ep->n_event_types; i++) {
        if (!ep->event_types[i] || json_array_append_new(types, json_string(ep->event_types[i])))
            goto out;
    }
    for (size_t i = 0; i < ep->n_secrets; i++) {
        const struct endpoint_secret *sec = &ep->secrets[i];
        if (!sec->key || json_array_append_new(secrets, json_pack("{s:s, s:I, s:I}", "key", sec->key, "expires_at",
                                                                  (json_int_t)sec->expires_at, "created_at",
                                                                  (json_int_t)sec->created_at)))
            goto out;
    }
    for (size_t i = 0; i < ep->n_retry_schedule; i++) {
        if (json_array_append_new(sched, json_integer(ep->retry_schedule_ms[i])))
            goto out;
    }
    j->event_types = json_dumps(types, JSON_COMPACT);
    plain = json_dumps(secrets, JSON_COMPACT);
    if (plain) {
        char aad[16 + HOOKD_ID_MAX];
        snprintf(aad, sizeof aad, "endpoint:%s", ep->id);
        result = secret_box_seal(aad, plain, &j->secrets);
        secret_text_free(plain);
        if (result)
            goto out;
        result = HOOKD_ENOMEM;
    }
    j->retry_schedule = sched ? json_dumps(sched, JSON_COMPACT) : NULL;
    if (j->event_types && j->secrets && (!sched || j->retry_schedule))
        result = headers_encode(ep, &j->headers);
out:
    if (result)
        endpoint_json_free(j);
    json_decref(types);
    secrets_json_wipe(secrets);
    json_decref(secrets);
    json_decref(sched);
    return result;
}

static int decode_event_types(const char *text, struct endpoint *ep)
{
    json_t *arr = json_loads(text ? text : "[]", 0, NULL), *item;
    size_t i;
    int result = json_is_array(arr) && json_array_size(arr) <= ENDPOINT_MAX_TYPES ? 0 : HOOKD_EIO;

    json_array_foreach(arr, i, item) {
        if (result)
            break;
        ep->event_types[ep->n_event_types] = json_is_string(item) ? strdup(json_string_value(item)) : NULL;
        if (!ep->event_types[ep->n_event_types])
            result = json_is_string(item) ? HOOKD_ENOMEM : HOOKD_EIO;
        else
            ep->n_event_types++;
    }
    json_decref(arr);
    return result;
}

/* The one place an endpoint's stored secrets are opened: a wrong key is named in the log. */
static int decode_secrets(const char *stored, struct endpoint *ep)
{
    char aad[16 + HOOKD_ID_MAX], wrong[SECRET_KEY_ID_LEN], *text = NULL;
    json_t *arr = NULL, *item;
    size_t i;
    int result;

    snprintf(aad, sizeof aad, "endpoint:%s", ep->id);
    result = secret_box_open(aad, stored ? stored : "[]", &text, wrong);
    if (result == HOOKD_EINVAL)
        log_error("store", "endpoint %s: secrets sealed under key %s, not the configured key %s", ep->id, wrong,
                  secret_box_key_id());
    else if (result == HOOKD_EIO)
        log_error("store", "endpoint %s: sealed secrets do not open (damaged, or not this row's)", ep->id);
    if (result)
        return result == HOOKD_ENOMEM ? result : HOOKD_EIO;
    arr = json_loads(text, 0, NULL);
    secret_text_free(text);
    result = json_is_array(arr) && json_array_size(arr) <= ENDPOINT_MAX_SECRETS ? 0 : HOOKD_EIO;

    json_array_foreach(arr, i, item) {
        struct endpoint_secret *sec = &ep->secrets[ep->n_secrets];
        json_t *key = json_object_get(item, "key");
        if (result)
            break;
        if (!json_is_string(key)) {
            result = HOOKD_EIO;
            break;
        }
        sec->key = strdup(json_string_value(key));
        sec->expires_at = json_integer_value(json_object_get(item, "expires_at"));
        sec->created_at = json_integer_value(json_object_get(item, "created_at"));
        if (!sec->key)
            result = HOOKD_ENOMEM;
        else
            ep->n_secrets++;
    }
    if (arr)
        secrets_json_wipe(arr);
    json_decref(arr);
    return result;
}

static int decode_retry_schedule(const char *text, struct endpoint *ep)
{
    json_t *arr, *item;
    size_t i;
    int result;

    if (!text)
        return 0;
    arr = json_loads(text, 0, NULL);
    result = json_is_array(arr) && json_array_size(arr) <= RETRY_MAX_SCHEDULE ? 0 : HOOKD_EIO;
    json_array_foreach(arr, i, item) {
        if (result || !json_is_integer(item)) {
            result = HOOKD_EIO;
            break;
        }
        ep->retry_schedule_ms[ep->n_retry_schedule++] = json_integer_value(item);
    }
    json_decref(arr);
    return result;
}

int endpoint_json_decode(struct endpoint *ep, const char *event_types, const char *secrets, const char *retry_schedule)
{
    int result = decode_event_types(event_types, ep);

    if (result == 0)
        result = decode_secrets(secrets, ep);
    if (result == 0)
        result = decode_retry_schedule(retry_schedule, ep);
    return result;
}

int endpoint_headers_decode(struct endpoint *ep, const char *text)
{
    json_t *obj, *v;
    const char *name;

    if (!text)
        return 0;
    obj = json_loads(text, 0, NULL);
    if (!json_is_object(obj)) {
        json_decref(obj);
        return HOOKD_EIO;
    }
    json_object_foreach(obj, name, v) {
        const char *value = json_string_value(v);
        size_t len = value ? json_string_length(v) : 0;
        char *line;
        if (ep->n_headers == CUSTOM_HEADERS_MAX || custom_header_problem(name, value, len) != NULL) {
            log_warn("store", "endpoint %s: a stored custom header breaks the rules and is not sent", ep->id);
            continue;
        }
        if (!(line = malloc(strlen(name) + len + 3))) {
            json_decref(obj);
            return HOOKD_ENOMEM;
        }
        snprintf(line, strlen(name) + len + 3, "%s: %s", name, value);
        ep->headers[ep->n_headers++] = line;
    }
    json_decref(obj);
    return 0;
}
