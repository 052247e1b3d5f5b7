/*
 * The CLI output layer's views: column formatters, aligned tables, key/value
 * records with sub-tables, and out_show, which runs a view once, as the API's
 * JSON, or refreshed under --watch.
 */
#include "cli/output.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/timefmt.h"

int64_t out_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- formatters ------------------------------------------------------------------------------- */

static void cell_put(struct out_cell *cell, const char *text, size_t n, size_t max)
{
    out_cell_text(text, n, max, cell->text, sizeof cell->text);
}

void out_fmt_text(const struct out *o, const json_t *value, const json_t *row, size_t max, struct out_cell *cell)
{
    char number[64];

    (void)o;
    (void)row;
    if (json_is_string(value)) {
        cell_put(cell, json_string_value(value), json_string_length(value), max);
    } else if (json_is_integer(value)) {
        snprintf(number, sizeof number, "%" JSON_INTEGER_FORMAT, json_integer_value(value));
        cell_put(cell, number, strlen(number), max);
    } else if (json_is_real(value)) {
        snprintf(number, sizeof number, "%g", json_real_value(value));
        cell_put(cell, number, strlen(number), max);
    } else if (json_is_boolean(value)) {
        cell_put(cell, json_is_true(value) ? "true" : "false", json_is_true(value) ? 4 : 5, max);
    } else if (json_is_object(value) || json_is_array(value)) {
        char *text = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);
        cell_put(cell, text ? text : "?", text ? strlen(text) : 1, max);
        free(text);
    } else {
        cell_put(cell, "-", 1, max);
    }
}

/* "2026-12-01T13:02:12.123Z" → "2026-12-01 13:02:12Z" (the milliseconds are in --json). */
static void absolute_time(int64_t ms, char *out, size_t cap)
{
    char full[RFC3339_LEN];

    rfc3339_format(ms, full);
    snprintf(out, cap, "%.10s %.8sZ", full, full + 11);
}

void out_fmt_time(const struct out *o, const json_t *value, const json_t *row, size_t max, struct out_cell *cell)
{
    char text[64];
    int64_t ms;

    if (!json_is_string(value) || rfc3339_parse(json_string_value(value), &ms) != 0) {
        out_fmt_text(o, value, row, max, cell);
        return;
    }
    if (o->utc)
        absolute_time(ms, text, sizeof text);
    else
        out_relative_time(ms, o->now_ms, text, sizeof text);
    cell_put(cell, text, strlen(text), max);
}

void out_fmt_status(const struct out *o, const json_t *value, const json_t *row, size_t max, struct out_cell *cell)
{
    out_fmt_text(o, value, row, max, cell);
    if (o->colour && json_is_string(value))
        cell->colour = out_status_colour(json_string_value(value));
}

void out_fmt_count(const struct out *o, const json_t *value, const json_t *row, size_t max, struct out_cell *cell)
{
    char text[32];

    if (!json_is_array(value)) {
        out_fmt_text(o, value, row, max, cell);
        return;
    }
    snprintf(text, sizeof text, "%zu", json_array_size(value));
    cell_put(cell, text, strlen(text), max);
}

void out_fmt_duration(const struct out *o, const json_t *value, const json_t *row, size_t max, struct out_cell *cell)
{
    char text[48];

    if (!json_is_integer(value)) {
        out_fmt_text(o, value, row, max, cell);
        return;
    }
    out_duration_words(json_integer_value(value), text, sizeof text);
    cell_put(cell, text, strlen(text), max);
}

void out_fmt_list(const struct out *o, const json_t *value, const json_t *row, size_t max, struct out_cell *cell)
{
    char joined[OUT_CELL_BYTES];
    size_t used = 0, i;
    const json_t *item;

    if (!json_is_array(value)) {
        out_fmt_text(o, value, row, max, cell);
        return;
    }
    joined[0] = '\0';
    json_array_foreach(value, i, item) {
        struct out_cell one = {0};
        out_fmt_text(o, item, row, max, &one);
        int n = snprintf(joined + used, sizeof joined - used, "%s%s", i ? "," : "", one.text);
        if (n < 0 || (size_t)n >= sizeof joined - used)
            break;
        used += (size_t)n;
    }
    /* The items are escaped already; this cut only shortens. */
    cell_put(cell, joined, used, max);
    if (json_array_size(value) == 0)
        cell_put(cell, "-", 1, max);
}

const char *out_word(const json_t *obj, const char *key, struct out_cell *cell)
{
    static const struct out plain = {0};

    cell->colour = NULL;
    out_fmt_text(&plain, json_object_get(obj, key), obj, OUT_CELL_COLUMNS, cell);
    return cell->text;
}

/* ---- tables ----------------------------------------------------------------------------------- */

const json_t *out_member(const json_t *obj, const char *path)
{
    char step[128];

    if (!path)
        return obj;
    while (obj && *path) {
        size_t n = strcspn(path, ".");
        if (n >= sizeof step)
            return NULL;
        memcpy(step, path, n);
        step[n] = '\0';
        obj = json_object_get(obj, step);
        path += n + (path[n] == '.');
    }
    return obj;
}

static void cell_of(const struct out *o, const struct out_column *col, const json_t *row, struct out_cell *cell)
{
    cell->colour = NULL;
    (col->format ? col->format : out_fmt_text)(o, out_member(row, col->key), row, OUT_CELL_COLUMNS, cell);
}

/* Writes text padded to width columns (none after the last column); colour wraps the text only. */
static void put_cell(const struct out *o, FILE *f, const char *text, const char *colour, size_t width, bool last)
{
    size_t w = out_text_width(text);

    if (o->colour && colour)
        fprintf(f, "\033[%sm%s\033[0m", colour, text);
    else
        fputs(text, f);
    if (!last)
        fprintf(f, "%*s", (int)(width - w + 2), "");
}

void out_table(const struct out *o, FILE *f, const struct out_column *columns, const json_t *rows, int indent)
{
    size_t n = 0, i;
    const json_t *row;
    struct out_cell cell;

    while (columns[n].title)
        n++;
    size_t *width = calloc(n ? n : 1, sizeof *width);
    if (!width)
        return;
    for (size_t k = 0; k < n; k++)
        width[k] = out_text_width(columns[k].title);
    json_array_foreach(rows, i, row) {
        for (size_t k = 0; k < n; k++) {
            cell_of(o, &columns[k], row, &cell);
            size_t w = out_text_width(cell.text);
            if (w > width[k])
                width[k] = w;
        }
    }
    fprintf(f, "%*s", indent, "");
    for (size_t k = 0; k < n; k++)
        put_cell(o, f, columns[k].title, o->colour ? "1" : NULL, width[k], k + 1 == n);
    fputc('\n', f);
    json_array_foreach(rows, i, row) {
        fprintf(f, "%*s", indent, "");
        for (size_t k = 0; k < n; k++) {
            cell_of(o, &columns[k], row, &cell);
            put_cell(o, f, cell.text, cell.colour, width[k], k + 1 == n);
        }
        fputc('\n', f);
    }
    free(width);
}

void out_list(const struct out *o, FILE *f, const struct out_column *columns, const json_t *answer)
{
    const json_t *next = json_object_get(answer, "next_cursor");
    struct out_cell cell;

    out_table(o, f, columns, json_object_get(answer, "data"), 0);
    if (json_is_string(next)) {
        out_fmt_text(o, next, answer, OUT_VALUE_COLUMNS, &cell);
        fprintf(f, "more: --cursor %s\n", cell.text);
    }
}

void out_view_list(const struct out *o, FILE *f, const json_t *answer, const void *arg)
{
    out_list(o, f, arg, answer);
}

/* ---- records ---------------------------------------------------------------------------------- */

static bool listed(const char *const *names, const char *key)
{
    for (size_t i = 0; names && names[i]; i++) {
        if (strcmp(names[i], key) == 0)
            return true;
    }
    return false;
}

static const struct out_column *subtable_of(const struct out_record_spec *spec, const char *key)
{
    for (size_t i = 0; spec && spec->subtables && spec->subtables[i].key; i++) {
        if (strcmp(spec->subtables[i].key, key) == 0)
            return spec->subtables[i].columns;
    }
    return NULL;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static bool is_status_key(const char *key)
{
    return strcmp(key, "status") == 0 || strcmp(key, "state") == 0 || ends_with(key, ".state") ||
           ends_with(key, ".status");
}

/* A time's label: its last part ends with "_at" or is "at", "since" or "until" (last_error.at, a window's since). */
static bool is_time_key(const char *key)
{
    const char *dot = strrchr(key, '.');
    const char *last = dot ? dot + 1 : key;

    return ends_with(last, "_at") || strcmp(last, "at") == 0 || strcmp(last, "since") == 0 ||
           strcmp(last, "until") == 0;
}

/* A record's value: times absolute and relative, status words coloured, arrays of scalars joined. */
static void record_value(const struct out *o, const char *key, const json_t *v, struct out_cell *cell)
{
    char text[128], rel[48];
    int64_t ms;

    cell->colour = NULL;
    if (json_is_string(v) && is_time_key(key) && rfc3339_parse(json_string_value(v), &ms) == 0) {
        absolute_time(ms, text, sizeof text);
        out_relative_time(ms, o->now_ms, rel, sizeof rel);
        size_t used = strlen(text);
        snprintf(text + used, sizeof text - used, " (%s)", rel);
        cell_put(cell, text, strlen(text), OUT_VALUE_COLUMNS);
    } else if (json_is_array(v)) {
        out_fmt_list(o, v, NULL, OUT_VALUE_COLUMNS, cell);
    } else if (is_status_key(key)) {
        out_fmt_status(o, v, NULL, OUT_VALUE_COLUMNS, cell);
    } else {
        out_fmt_text(o, v, NULL, OUT_VALUE_COLUMNS, cell);
    }
}

static bool scalar_array(const json_t *a)
{
    size_t i;
    const json_t *v;

    json_array_foreach(a, i, v) {
        if (json_is_object(v) || json_is_array(v))
            return false;
    }
    return true;
}

/* Widest label the record prints (prefix.key for flattened objects). */
static size_t label_width(const json_t *obj, const char *prefix, const struct out_record_spec *spec)
{
    const char *key;
    const json_t *v;
    size_t widest = 0;

    json_object_foreach((json_t *)obj, key, v) {
        char label[256];
        if (!prefix && (listed(spec ? spec->skip : NULL, key) || subtable_of(spec, key)))
            continue;
        snprintf(label, sizeof label, "%s%s%s", prefix ? prefix : "", prefix ? "." : "", key);
        size_t w = json_is_object(v) && json_object_size(v) > 0 && !listed(spec ? spec->compact : NULL, key)
                       ? label_width(v, label, NULL)
                       : out_text_width(label);
        if (w > widest)
            widest = w;
    }
    return widest;
}

void out_record_line(const struct out *o, FILE *f, int key_width, const char *label, const char *value,
                     const char *colour)
{
    char safe[OUT_CELL_BYTES];
    size_t w = out_cell_text(label, strlen(label), 64, safe, sizeof safe);

    fputs(safe, f);
    fprintf(f, "%*s", key_width > (int)w ? key_width - (int)w + 2 : 2, "");
    if (o->colour && colour)
        fprintf(f, "\033[%sm%s\033[0m\n", colour, value);
    else
        fprintf(f, "%s\n", value);
}

/* Prints obj's members as lines; arrays of objects that have a sub-table wait for print_subtables. */
static void record_lines(const struct out *o, FILE *f, const json_t *obj, const char *prefix, int key_width,
                         const struct out_record_spec *spec)
{
    const char *key;
    const json_t *v;
    struct out_cell cell;

    json_object_foreach((json_t *)obj, key, v) {
        char label[256];
        bool top = prefix == NULL;

        if (top && (listed(spec ? spec->skip : NULL, key) || subtable_of(spec, key)))
            continue;
        snprintf(label, sizeof label, "%s%s%s", prefix ? prefix : "", prefix ? "." : "", key);
        if (json_is_object(v) && json_object_size(v) > 0 && !(top && listed(spec ? spec->compact : NULL, key))) {
            record_lines(o, f, v, label, key_width, NULL);
            continue;
        }
        if (json_is_array(v) && !scalar_array(v)) {
            char text[64];
            snprintf(text, sizeof text, "%zu items (--json shows them)", json_array_size(v));
            out_record_line(o, f, key_width, label, text, NULL);
            continue;
        }
        record_value(o, label, v, &cell);
        out_record_line(o, f, key_width, label, cell.text, cell.colour);
    }
}

void out_record(const struct out *o, FILE *f, const json_t *obj, const struct out_record_spec *spec)
{
    int key_width = (int)label_width(obj, NULL, spec);

    if (!json_is_object(obj)) {
        struct out_cell cell;
        out_fmt_text(o, obj, NULL, OUT_VALUE_COLUMNS, &cell);
        fprintf(f, "%s\n", cell.text);
        return;
    }
    record_lines(o, f, obj, NULL, key_width, spec);
    for (size_t i = 0; spec && spec->subtables && spec->subtables[i].key; i++) {
        const json_t *rows = json_object_get(obj, spec->subtables[i].key);
        if (!json_is_array(rows))
            continue;
        fprintf(f, "\n%s (%zu):\n", spec->subtables[i].key, json_array_size(rows));
        if (json_array_size(rows) > 0)
            out_table(o, f, spec->subtables[i].columns, rows, 2);
    }
}

void out_view_record(const struct out *o, FILE *f, const json_t *answer, const void *arg)
{
    out_record(o, f, answer, arg);
}

/* ---- running a view --------------------------------------------------------------------------- */

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig)
{
    (void)sig;
    stop_requested = 1;
}

/* Sleeps ms unless a stop signal comes first; false when one did. */
static bool pause_ms(int64_t ms)
{
    struct timespec left = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

    while (!stop_requested && nanosleep(&left, &left) != 0 && errno == EINTR)
        ;
    return !stop_requested;
}

static int show_once(struct out *o, FILE *f, out_fetch_fn *fetch, void *ctx, out_view_fn *view, const void *arg)
{
    char *raw = NULL;
    json_t *answer = NULL;
    int rc = fetch(ctx, &raw, &answer);

    if (rc == 0) {
        o->now_ms = out_now_ms();
        if (o->json) {
            size_t n = strlen(raw);
            fputs(raw, f);
            if (n == 0 || raw[n - 1] != '\n')
                fputc('\n', f);
        } else {
            view(o, f, answer, arg);
        }
    }
    free(raw);
    json_decref(answer);
    fflush(f);
    return rc;
}

int out_show(struct out *o, FILE *f, out_fetch_fn *fetch, void *ctx, out_view_fn *view, const void *arg)
{
    struct sigaction sa = {0}, old_int, old_term;
    int rc = 0;

    if (o->watch_ms <= 0)
        return show_once(o, f, fetch, ctx, view, arg);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    stop_requested = 0;
    for (long long n = 1; !stop_requested && (o->count == 0 || n <= o->count); n++) {
        char when[RFC3339_LEN];

        if (n > 1 && !pause_ms(o->watch_ms))
            break;
        rfc3339_format(out_now_ms(), when);
        if (o->tty && !o->json) {
            char every[48];
            out_duration_words(o->watch_ms, every, sizeof every);
            fprintf(f, "\033[H\033[2J%s, every %s (Ctrl-C stops)\n\n", when, every);
        }
        else if (!o->json)
            fprintf(f, "%s--- snapshot %lld at %s ---\n", n > 1 ? "\n" : "", n, when);
        rc = show_once(o, f, fetch, ctx, view, arg);
        if (ferror(f))
            break; /* stdout went away (a closed pipe) */
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    return rc;
}
