/* Growable byte buffer with a maximum set at creation (curl's dynbuf idea). */
#ifndef HOOKD_CORE_BUF_H
#define HOOKD_CORE_BUF_H
#include <stddef.h>
#include <stdint.h>

struct buf {
    char *data; /* always NUL-terminated when len > 0 or after buf_init */
    size_t len;
    size_t cap;
    size_t max; /* appends past max fail with HOOKD_EINVAL */
};

void buf_init(struct buf *b, size_t max);
void buf_free(struct buf *b);  /* frees data; b may be reused after buf_init */
void buf_reset(struct buf *b); /* len = 0, keeps memory */
__attribute__((warn_unused_result)) int buf_append(struct buf *b, const void *data, size_t n);
__attribute__((warn_unused_result)) int buf_puts(struct buf *b, const char *s);
__attribute__((warn_unused_result, format(printf, 2, 3))) int buf_printf(struct buf *b, const char *fmt, ...);
/* Appends s as a JSON string literal, quotes included. */
__attribute__((warn_unused_result)) int buf_json_string(struct buf *b, const char *s);
/* Decimal digits of v and a NUL into out (I64_DIGITS_MAX bytes); returns the length. No locale, no printf. */
#define I64_DIGITS_MAX 21
size_t i64_digits(int64_t v, char out[I64_DIGITS_MAX]);
/* Transfers ownership of the data to the caller (never NULL); b is reset. */
char *buf_steal(struct buf *b);
#endif
