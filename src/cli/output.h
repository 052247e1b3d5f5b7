/*
 * The CLI's output layer: how every admin API command shows an answer (design
 * §12 "CLI output").
 *
 *   out_cell_text      one value as safe, cut terminal text: control bytes and escape
 *                      sequences shown escaped, cut at a display width with "…"
 *   out_write_text     outside text of any length (a response body) written escaped the same way, uncut
 *   out_text_width     display columns of text out_cell_text made (wide characters count 2)
 *   out_relative_time  "2 m ago", "in 47 s", "just now" between two instants
 *   out_colour_wanted  colours only on a terminal and without NO_COLOR
 *   out_table          an aligned table from a column spec over a JSON array
 *   out_record         a key/value block for one object: nested objects flattened to
 *                      "a.b", arrays of scalars joined, arrays of objects as sub-tables
 *   out_show           one API request shown as its view, as the API's JSON (--json), or
 *                      refreshed (--watch [INTERVAL] [--count N])
 *
 * Everything prints to a FILE the caller owns; the JSON passed in stays the caller's.
 */
#ifndef HOOKD_CLI_OUTPUT_H
#define HOOKD_CLI_OUTPUT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#define OUT_CELL_COLUMNS 48   /* table cells are cut here (design §12) */
#define OUT_VALUE_COLUMNS 160 /* key/value values are cut here */
#define OUT_CELL_BYTES 1024   /* room for OUT_VALUE_COLUMNS escaped columns and the ellipsis */

/* How the whole run prints: set once by cli_dispatch from the options and the terminal. */
struct out {
    bool json;         /* --json: the API's body unchanged */
    bool utc;          /* --utc: absolute UTC times in tables instead of relative ones */
    bool colour;       /* stdout is a terminal and NO_COLOR is not set */
    bool tty;          /* stdout is a terminal (--watch clears the screen) */
    int64_t watch_ms;  /* --watch: refresh interval; 0 when not watching */
    long long count;   /* --count: snapshots before a watch stops; 0 = until SIGINT */
    int64_t now_ms;    /* the instant relative times are measured from (set per snapshot) */
};

/* A cell: its text (already escaped and cut) and an optional colour (an SGR parameter such as "32"). */
struct out_cell {
    char text[OUT_CELL_BYTES];
    const char *colour;
};

/* Formats value (a member of row; may be NULL) into cell->text; max is the width to cut at. */
typedef void out_format_fn(const struct out *o, const json_t *value, const json_t *row, size_t max,
                           struct out_cell *cell);

struct out_column {
    const char *title;    /* "STATUS" */
    const char *key;      /* member of each row; "a.b" reaches into an object; NULL: the row itself */
    out_format_fn *format; /* NULL: out_fmt_text */
};
#define OUT_COLUMNS_END {NULL, NULL, NULL}

/* Formatters for columns and records. */
out_format_fn out_fmt_text;     /* strings escaped, numbers, true/false, null "-", objects/arrays as compact JSON */
out_format_fn out_fmt_time;     /* RFC 3339 → "2 m ago" (or "2026-12-01 13:02:12Z" with --utc) */
out_format_fn out_fmt_status;   /* a status word, coloured: delivered green, retrying yellow, dead red … */
out_format_fn out_fmt_count;    /* an array's length */
out_format_fn out_fmt_duration; /* milliseconds → "340 ms", "10.0 s" */
out_format_fn out_fmt_list;     /* an array of scalars joined with "," */

/* A record's view: which members to leave out, which to show as compact JSON, which arrays as sub-tables. */
struct out_subtable {
    const char *key;                  /* an array of objects in the record */
    const struct out_column *columns; /* ends with OUT_COLUMNS_END */
};
struct out_record_spec {
    const char *const *skip;             /* NULL-terminated, or NULL */
    const char *const *compact;          /* objects shown as one line of JSON, NULL-terminated, or NULL */
    const struct out_subtable *subtables; /* ends with {NULL, NULL}, or NULL */
};

/* ---- text ------------------------------------------------------------------------------------- */

/*
 * Writes text[0..n) into out (cap bytes, NUL-terminated) as terminal-safe text
 * at most max display columns wide: C0 controls, DEL, C1 controls and bidi
 * overrides as \e \r \n \t \xHH \u202E, bytes that are not UTF-8 as \xHH;
 * longer text is cut (never inside a character or an escape) and ends with
 * "…". Returns the display width written.
 */
size_t out_cell_text(const char *text, size_t n, size_t max, char *out, size_t cap);
/* Writes text[0..n) to f escaped as out_cell_text does, without a cut; with lines, LF and TAB (and
 * CRLF, as LF) stay themselves so that a multi-line body still reads as lines. */
void out_write_text(FILE *f, const char *text, size_t n, bool lines);
/* Display columns of UTF-8 text: East Asian wide characters and emoji count 2, combining marks 0. */
size_t out_text_width(const char *text);
/* then relative to now: "just now" (under 1 s), "47 s ago", "in 2 m", "3 h ago", "5 d ago"; units are floored. */
void out_relative_time(int64_t then_ms, int64_t now_ms, char *out, size_t cap);
/* Milliseconds as people read them: "340 ms", "1.5 s", "10 s", "2 m 5 s", "3 h 10 m". */
void out_duration_words(int64_t ms, char *out, size_t cap);
/* Colours when fd is a terminal and no_color (the NO_COLOR variable) is NULL or empty (no-color.org). */
bool out_colour_wanted(int fd, const char *no_color);
/* The SGR colour of a status word ("32" green, "33" yellow, "31" red), or NULL. */
const char *out_status_colour(const char *word);

/* A member of obj (NULL obj or key: "-") as escaped text cut at a cell's width, for a sentence; returns cell->text. */
const char *out_word(const json_t *obj, const char *key, struct out_cell *cell);

/* ---- views ------------------------------------------------------------------------------------ */

/* Reaches "a.b" in obj; NULL when a step is missing. */
const json_t *out_member(const json_t *obj, const char *path);
/* rows (a JSON array of objects) as an aligned table with a header line; indent spaces before each line. */
void out_table(const struct out *o, FILE *f, const struct out_column *columns, const json_t *rows, int indent);
/* A list answer {"data": [...], "next_cursor"}: the table, then "more: --cursor C" when there is more. */
void out_list(const struct out *o, FILE *f, const struct out_column *columns, const json_t *answer);
/* One object as "key  value" lines, then its sub-tables (spec may be NULL). */
void out_record(const struct out *o, FILE *f, const json_t *obj, const struct out_record_spec *spec);
/* One "label  value" line of a record's block (value escaped and cut like a record's). */
void out_record_line(const struct out *o, FILE *f, int key_width, const char *label, const char *value,
                     const char *colour);

/* ---- running a view --------------------------------------------------------------------------- */

/* Prints a parsed 2xx answer (NULL when the body was empty); arg is the view's spec. */
typedef void out_view_fn(const struct out *o, FILE *f, const json_t *answer, const void *arg);

/* Fetches one answer: 0 with *raw (heap, caller frees) and *answer (caller decrefs), or an exit status after
 * printing why on stderr. */
typedef int out_fetch_fn(void *ctx, char **raw, json_t **answer);

/*
 * Fetches and shows: with --json the body exactly as the API sent it (one
 * line per snapshot), else view(answer, arg). With --watch it repeats every
 * o->watch_ms until SIGINT/SIGTERM or o->count snapshots: on a terminal the
 * screen is cleared before each, otherwise snapshots follow each other, each
 * opening with a "--- snapshot N at TIME ---" line (not with --json). A fetch
 * that fails during a watch is reported and the watch goes on. Returns the
 * exit status of the last fetch.
 */
int out_show(struct out *o, FILE *f, out_fetch_fn *fetch, void *ctx, out_view_fn *view, const void *arg);

/* Views over an answer for out_show: arg is the column spec (out_view_list) or the record spec (out_view_record). */
out_view_fn out_view_list;
out_view_fn out_view_record;

/* The wall clock in milliseconds. */
int64_t out_now_ms(void);
#endif
