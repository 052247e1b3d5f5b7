/*
 * Declarative field tables, as config keys are (conf_keys): the JSON body
 * fields of a resource and the query parameters of a list route, each one row
 * of name, type, bounds and flags, read by one validator whose 400s name the
 * field. Endpoints and the list routes use them; sources and machines will.
 *
 *   fields_apply        a JSON object onto a target struct through a body table
 *   query_parse         name/value pairs onto a filter struct through a query table
 *   api_query_parse     the same for a request's query string (answers the 400 itself)
 *   query_cursor_make   the next_cursor of a list page
 */
#ifndef HOOKD_OPS_FIELDS_H
#define HOOKD_OPS_FIELDS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "core/cursor.h"

struct api_error;
struct http_request;
struct http_response;

enum api_body_mode { API_BODY_CREATE, API_BODY_PATCH };

/* ---- body fields ------------------------------------------------------------------ */

enum field_type {
    FIELD_STRING,        /* text without control characters, at most max_len bytes */
    FIELD_INT,           /* an integer in [min, max] */
    FIELD_BOOL,
    FIELD_DURATION,      /* "10s", in [min, max] milliseconds */
    FIELD_DURATION_LIST, /* "10s,30s" or ["10s", "30s"]: at most max entries */
    FIELD_URL,           /* an http(s) URL, as api_url_check has it */
    FIELD_ENUM,          /* one of values[] (NULL-terminated), kept as its index */
    FIELD_STRING_ARRAY,  /* at most max strings, each at most max_len bytes */
    FIELD_OBJECT,        /* a JSON object, handed whole to set */
};

enum {
    FIELD_REQUIRED = 1 << 0, /* must be given on create */
    FIELD_FIXED = 1 << 1,    /* set on create only: a PATCH naming it is refused (with fixed_hint) */
    FIELD_NULLABLE = 1 << 2, /* null resets it: to NULL, 0, values[0] or no entries */
    FIELD_BLANK_NULL = 1 << 3, /* "" means null (text, durations and duration lists) */
};

#define FIELD_ITEMS_MAX 64 /* longest list a field holds (strings or durations) */

/* A value that passed its field's rules; strings are borrowed from the JSON. */
struct field_value {
    bool null;                   /* null, or "" where that means the same */
    const char *str;             /* STRING, URL, ENUM (the word) */
    long long num;               /* INT, BOOL, ENUM (the index) */
    int64_t ms;                  /* DURATION */
    const char *items[FIELD_ITEMS_MAX]; /* STRING_ARRAY */
    int64_t durations[FIELD_ITEMS_MAX]; /* DURATION_LIST */
    size_t n;                    /* entries of items or durations */
    const json_t *json;          /* OBJECT, and every type: the value as given */
};

struct field {
    const char *name;
    enum field_type type;
    unsigned flags;
    long long min, max;          /* INT and DURATION (ms): bounds; lists: max is the most entries */
    size_t max_len;              /* STRING and STRING_ARRAY entries: most bytes */
    const char *const *values;   /* ENUM */
    bool (*check)(const char *s); /* STRING and STRING_ARRAY entries: a further rule (event type, secret) */
    /* OBJECT: a rule for the members; false with why filled (it follows "name: " in the 400) */
    bool (*check_object)(const json_t *v, char *why, size_t why_len);
    const char *hint;            /* replaces the generated "must be …" when a value is refused */
    const char *fixed_hint;      /* FIXED: what to do instead of a PATCH */
    /*
     * Where the value goes. With set NULL it is stored at offset: STRING and
     * URL as a heap copy in a char * (NULL when cleared; the old one freed),
     * INT and ENUM in an int, BOOL in a bool, DURATION in an int64_t. Lists
     * and objects need set. set returns 0 or HOOKD_ENOMEM.
     */
    size_t offset;
    int (*set)(void *target, const struct field_value *v);
};

/*
 * Applies every member of body (a JSON object) to target through the table:
 * an unknown member is 400 unknown_field, a value its field refuses 400
 * invalid_field "name: why", a FIXED field in a PATCH 400 invalid_field, a
 * REQUIRED field missing from a create 400 missing_field "name is required".
 * Returns 0, HOOKD_EINVAL with err filled, or HOOKD_ENOMEM. On failure target
 * may be partly changed; it stays freeable.
 */
__attribute__((warn_unused_result)) int fields_apply(const struct field *table, size_t n, void *target,
                                                     const json_t *body, enum api_body_mode mode,
                                                     struct api_error *err);

/* Checks an http(s) URL: a host, an optional port, no credentials or blanks, at most
 * API_URL_MAX bytes. On failure writes the reason to why and returns HOOKD_EINVAL. */
__attribute__((warn_unused_result)) int api_url_check(const char *url, char *why, size_t why_len);

/* Whole-string decimal integer in [min, max]. */
bool field_int_parse(const char *s, long long min, long long max, long long *out);
/* Text without control characters, at most max bytes. */
bool field_text_ok(const char *s, size_t max);

/* ---- query parameters ------------------------------------------------------------- */

enum query_type {
    QUERY_LIMIT,      /* 1..API_LIMIT_MAX into an int; absent: API_LIMIT_DEFAULT */
    QUERY_CURSOR_ID,  /* a cursor of list whose key is an id: a const char * into the scratch */
    QUERY_CURSOR_SEQ, /* a cursor of list whose key is a sequence number: an int64_t */
    QUERY_TIME,       /* RFC 3339 into an int64_t of unix ms */
    QUERY_ID,         /* id-shaped (id_is_valid): a const char * */
    QUERY_TEXT,       /* at most max_len bytes, no control characters, passing check: a const char * */
    QUERY_ENUM,       /* one of values[] (NULL-terminated): its index in an int */
};

struct query_param {
    const char *name;
    enum query_type type;
    size_t offset;               /* in the filter struct */
    size_t max_len;              /* TEXT */
    const char *const *values;   /* ENUM */
    bool (*check)(const char *s); /* TEXT: a further rule */
    const char *hint;            /* replaces the generated "must be …" */
    const char *list;            /* CURSOR_*: the list the cursor belongs to */
};

/* One name=value of a query string; value "" when given without '='. */
struct query_pair {
    const char *name, *value;
};

/* Holds the key a QUERY_CURSOR_ID points to (one such cursor per table); lives as long as the filter is used. */
struct query_scratch {
    char cursor_key[CURSOR_KEY_MAX];
};

#define QUERY_PAIRS_MAX 32 /* parameters a list route reads at most */

/*
 * Applies each pair through the table onto the filter struct target. Values
 * pointed to are borrowed from pairs (or scratch). Refused with 400, the
 * message naming the parameter: a name the table does not know
 * (unknown_field, listing those it does), a name given twice, a value its
 * type refuses, a cursor this list did not make (invalid_field).
 * Returns 0 or HOOKD_EINVAL with err filled.
 */
__attribute__((warn_unused_result)) int query_parse(const struct query_param *table, size_t n,
                                                    const struct query_pair *pairs, size_t n_pairs, void *target,
                                                    struct query_scratch *scratch, struct api_error *err);

/* query_parse over a request's query string; on failure answers the 400 and returns false. */
bool api_query_parse(struct http_request *req, struct http_response *res, const struct query_param *table, size_t n,
                     void *target, struct query_scratch *scratch);

/* The next_cursor text of a page ending at key, or NULL (page not full, or a key a cursor cannot hold). */
const char *query_cursor_make(const char *list, const char *key, char out[CURSOR_TEXT_MAX]);
#endif
