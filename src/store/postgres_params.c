/*
 * PostgreSQL backend, values in and out: statement parameters in text
 * format, array literals for the batch statements, result columns, and the
 * row readers over them.
 */
#include "store/postgres_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- parameters and columns ------------------------------------------------- */

static void param_set(struct pg_params *p, int i, const char *v, Oid type)
{
    if (i < 1 || i > PG_MAX_PARAMS)
        return;
    p->values[i - 1] = v;
    p->types[i - 1] = type;
    if (i > p->n)
        p->n = i;
}

void pg_param_text(struct pg_params *p, int i, const char *v) { param_set(p, i, v, PG_OID_TEXT); }
void pg_param_null(struct pg_params *p, int i, Oid type) { param_set(p, i, NULL, type); }
void pg_param_text_array(struct pg_params *p, int i, const char *literal) { param_set(p, i, literal, PG_OID_TEXT_ARRAY); }
void pg_param_i64_array(struct pg_params *p, int i, const char *literal) { param_set(p, i, literal, PG_OID_INT8_ARRAY); }
void pg_param_bool(struct pg_params *p, int i, bool v) { param_set(p, i, v ? "t" : "f", PG_OID_BOOL); }

void pg_param_i64(struct pg_params *p, int i, int64_t v)
{
    if (i < 1 || i > PG_MAX_PARAMS)
        return;
    snprintf(p->num[i - 1], sizeof p->num[i - 1], "%" PRId64, v);
    param_set(p, i, p->num[i - 1], PG_OID_INT8);
}

void pg_param_int(struct pg_params *p, int i, int v)
{
    if (i < 1 || i > PG_MAX_PARAMS)
        return;
    snprintf(p->num[i - 1], sizeof p->num[i - 1], "%d", v);
    param_set(p, i, p->num[i - 1], PG_OID_INT4);
}

void pg_param_time(struct pg_params *p, int i, int64_t ms)
{
    if (ms)
        pg_param_i64(p, i, ms);
    else
        pg_param_null(p, i, PG_OID_INT8);
}

void pg_param_values(struct pg_params *p, const struct store_value *v, int n)
{
    static const Oid types[] = {[STORE_V_TEXT] = PG_OID_TEXT, [STORE_V_INT] = PG_OID_INT4,
                                [STORE_V_I64] = PG_OID_INT8, [STORE_V_BOOL] = PG_OID_BOOL};

    for (int i = 0; i < n; i++) {
        if (v[i].null)
            pg_param_null(p, i + 1, types[v[i].type]);
        else if (v[i].type == STORE_V_TEXT)
            pg_param_text(p, i + 1, v[i].text);
        else if (v[i].type == STORE_V_INT)
            pg_param_int(p, i + 1, (int)v[i].num);
        else if (v[i].type == STORE_V_I64)
            pg_param_i64(p, i + 1, v[i].num);
        else
            pg_param_bool(p, i + 1, v[i].num != 0);
    }
}

/* ---- array literals ---------------------------------------------------------- */

static bool array_reserve(struct pg_array *a, size_t more)
{
    size_t cap;
    char *grown;

    if (a->failed)
        return false;
    if (a->len + more + 2 <= a->cap) /* room for the closing "}" and NUL too */
        return true;
    cap = a->cap ? a->cap : 256;
    while (cap < a->len + more + 2)
        cap *= 2;
    grown = realloc(a->buf, cap);
    if (!grown) {
        a->failed = true;
        return false;
    }
    a->buf = grown;
    a->cap = cap;
    return true;
}

/* Opens the literal on the first element, else adds the separator. */
static bool array_next(struct pg_array *a, size_t more)
{
    if (!array_reserve(a, more + 1))
        return false;
    a->buf[a->len] = a->len == 0 ? '{' : ',';
    a->len++;
    return true;
}

void pg_array_text(struct pg_array *a, const char *v)
{
    if (!v) {
        if (array_next(a, 4)) {
            memcpy(a->buf + a->len, "NULL", 4);
            a->len += 4;
        }
        return;
    }
    if (!array_next(a, 2 * strlen(v) + 2))
        return;
    a->buf[a->len++] = '"';
    for (const char *c = v; *c; c++) {
        if (*c == '"' || *c == '\\')
            a->buf[a->len++] = '\\';
        a->buf[a->len++] = *c;
    }
    a->buf[a->len++] = '"';
}

void pg_array_i64(struct pg_array *a, int64_t v)
{
    char num[24];
    int n = snprintf(num, sizeof num, "%" PRId64, v);

    if (array_next(a, (size_t)n)) {
        memcpy(a->buf + a->len, num, (size_t)n);
        a->len += (size_t)n;
    }
}

void pg_array_time(struct pg_array *a, int64_t ms)
{
    if (ms)
        pg_array_i64(a, ms);
    else
        pg_array_text(a, NULL);
}

void pg_array_value(struct pg_array *a, const struct store_value *v)
{
    if (v->null || v->type == STORE_V_TEXT)
        pg_array_text(a, v->null ? NULL : v->text);
    else
        pg_array_i64(a, v->num);
}

const char *pg_array_end(struct pg_array *a)
{
    if (!array_reserve(a, 2))
        return NULL;
    if (a->len == 0)
        memcpy(a->buf, "{}", 3);
    else
        memcpy(a->buf + a->len, "}", 2);
    return a->buf;
}

const char *pg_array_texts(struct pg_array *a, const char *const *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        pg_array_text(a, v[i]);
    return pg_array_end(a);
}

void pg_array_free(struct pg_array *a)
{
    free(a->buf);
    memset(a, 0, sizeof *a);
}

/* ---- columns -------------------------------------------------------------------- */

bool pg_col_null(const PGresult *r, int row, int col) { return PQgetisnull(r, row, col) != 0; }

char *pg_col_str(const PGresult *r, int row, int col, bool *ok)
{
    size_t n;
    char *copy;

    if (PQgetisnull(r, row, col))
        return NULL;
    n = (size_t)PQgetlength(r, row, col);
    copy = malloc(n + 1);
    if (!copy) {
        *ok = false;
        return NULL;
    }
    memcpy(copy, PQgetvalue(r, row, col), n);
    copy[n] = '\0';
    return copy;
}

void pg_col_id(const PGresult *r, int row, int col, char out[HOOKD_ID_MAX])
{
    snprintf(out, HOOKD_ID_MAX, "%s", PQgetvalue(r, row, col));
}

int64_t pg_col_i64(const PGresult *r, int row, int col)
{
    return PQgetisnull(r, row, col) ? 0 : strtoll(PQgetvalue(r, row, col), NULL, 10);
}

/* ---- row readers ---------------------------------------------------------------- */

static const PGresult *row_res(const struct store_row *r) { return r->src; }
static bool row_null(const struct store_row *r, int col) { return PQgetisnull(row_res(r), r->row, col) != 0; }
static const char *row_text(const struct store_row *r, int col)
{
    return row_null(r, col) ? NULL : PQgetvalue(row_res(r), r->row, col);
}
static size_t row_len(const struct store_row *r, int col)
{
    return row_null(r, col) ? 0 : (size_t)PQgetlength(row_res(r), r->row, col);
}
static char *row_str(const struct store_row *r, int col, bool *ok) { return pg_col_str(row_res(r), r->row, col, ok); }
static int64_t row_i64(const struct store_row *r, int col) { return pg_col_i64(row_res(r), r->row, col); }
static bool row_flag(const struct store_row *r, int col)
{
    return strcmp(PQgetvalue(row_res(r), r->row, col), "t") == 0;
}

static const struct store_row_ops row_ops = {
    .null = row_null,
    .text = row_text,
    .len = row_len,
    .str = row_str,
    .i64 = row_i64,
    .flag = row_flag,
};

int pg_rows_read(const PGresult *res, store_read_fn read, struct store_rows rows)
{
    struct store_row row = {.ops = &row_ops, .src = res};
    int n = PQntuples(res), result = 0;

    store_rows_start(&rows);
    for (row.row = 0; row.row < n && result == 0; row.row++) {
        void *item = store_rows_slot(&rows);
        result = item ? read(&row, item) : HOOKD_ENOMEM;
        if (result == 0)
            store_rows_keep(&rows);
    }
    if (result)
        store_rows_free(&rows);
    return result;
}

int pg_row_read(const PGresult *res, int row, store_read_fn read, void *item)
{
    const struct store_row r = {.ops = &row_ops, .src = res, .row = row};

    return read(&r, item);
}

int pg_get(struct store *s, int slot, const char *sql, const struct pg_params *p, store_read_fn read, void *item)
{
    PGresult *res;
    int result = pg_run(s, slot, sql, p, &res);
    const struct store_row row = {.ops = &row_ops, .src = res, .row = 0};

    if (result)
        return result;
    result = PQntuples(res) > 0 ? read(&row, item) : HOOKD_ENOTFOUND;
    PQclear(res);
    return result;
}

/* The rows of a statement's run (result its outcome, res its result then), read and cleared. */
static int list_read(int result, PGresult *res, store_read_fn read, struct store_rows rows)
{
    if (result) {
        store_rows_start(&rows);
        return result;
    }
    result = pg_rows_read(res, read, rows);
    PQclear(res);
    return result;
}

int pg_list(struct store *s, int slot, const char *sql, const struct pg_params *p, store_read_fn read,
            struct store_rows rows)
{
    PGresult *res;
    int result = pg_run(s, slot, sql, p, &res);

    return list_read(result, res, read, rows);
}

int pg_list_planned(struct store *s, int slot, const char *sql, const struct pg_params *p, store_read_fn read,
                    struct store_rows rows)
{
    PGresult *res;
    int result = pg_run_planned(s, slot, sql, p, &res);

    return list_read(result, res, read, rows);
}


int pg_get_by_id(struct store *s, int slot, const char *sql, const char *id, store_read_fn read, void *item,
                 size_t item_size)
{
    struct pg_params p = {.n = 0};

    memset(item, 0, item_size);
    pg_param_text(&p, 1, id);
    return pg_get(s, slot, sql, &p, read, item);
}

int pg_list_newest(struct store *s, int slot, const char *sql, int slot_of, const char *sql_of, const char *before_id,
                   const char *account, int limit, store_read_fn read, struct store_rows rows)
{
    struct pg_params p = {.n = 0};

    store_rows_start(&rows);
    pg_param_text(&p, 1, before_id);
    pg_param_int(&p, 2, store_list_limit(limit));
    if (account)
        pg_param_text(&p, 3, account);
    return pg_list(s, account ? slot_of : slot, account ? sql_of : sql, &p, read, rows);
}

int pg_meta_counter(struct store *s, int slot, const char *sql, int64_t *version)
{
    PGresult *res;
    int result = pg_run(s, slot, sql, NULL, &res);

    *version = 0;
    if (result)
        return result;
    if (PQntuples(res) > 0)
        *version = pg_col_i64(res, 0, 0);
    PQclear(res);
    return 0;
}
