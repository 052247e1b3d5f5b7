/*
 * List cursors: base64url (RFC 4648 §5, unpadded) of a version byte, the key,
 * and 8 bytes of SHA-256 over the list name and the key.
 */
#include "core/cursor.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "core/base64.h"
#include "hookd.h"

#define CURSOR_VERSION 1
#define CURSOR_CHECK_LEN 8
#define CURSOR_LIST_MAX 32 /* longest list name, NUL included */
#define CURSOR_RAW_MAX (1 + CURSOR_KEY_MAX - 1 + CURSOR_CHECK_LEN)

static bool key_ok(const char *key, size_t n)
{
    if (n == 0 || n >= CURSOR_KEY_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (key[i] <= 0x20 || key[i] >= 0x7f)
            return false;
    }
    return true;
}

/* The check value: the list name is hashed in, so a cursor of another list never matches. */
static void check_value(const char *list, const char *key, size_t key_len, unsigned char out[CURSOR_CHECK_LEN])
{
    static const char domain[] = "hookd cursor";
    unsigned char input[sizeof domain + CURSOR_LIST_MAX + CURSOR_KEY_MAX], digest[SHA256_DIGEST_LENGTH];
    size_t list_len = strnlen(list, CURSOR_LIST_MAX - 1), n = 0;

    /* "hookd cursor" NUL list NUL key: the NULs keep the parts apart. */
    memcpy(input, domain, sizeof domain);
    n += sizeof domain;
    memcpy(input + n, list, list_len);
    n += list_len;
    input[n++] = '\0';
    memcpy(input + n, key, key_len);
    n += key_len;
    SHA256(input, n, digest);
    memcpy(out, digest, CURSOR_CHECK_LEN);
}

int cursor_encode(const char *list, const char *key, char out[CURSOR_TEXT_MAX])
{
    unsigned char raw[CURSOR_RAW_MAX];
    char text[(CURSOR_RAW_MAX + 2) / 3 * 4 + 1];
    size_t n, len = 0;

    out[0] = '\0';
    if (list == NULL || key == NULL || !key_ok(key, n = strlen(key)))
        return HOOKD_EINVAL;
    raw[0] = CURSOR_VERSION;
    memcpy(raw + 1, key, n);
    check_value(list, key, n, raw + 1 + n);
    base64_encode(raw, 1 + n + CURSOR_CHECK_LEN, text);
    for (const char *p = text; *p != '\0' && *p != '='; p++)
        out[len++] = *p == '+' ? '-' : *p == '/' ? '_' : *p;
    out[len] = '\0';
    return 0;
}

int cursor_decode(const char *list, const char *text, char key[CURSOR_KEY_MAX])
{
    char std[CURSOR_TEXT_MAX];
    unsigned char raw[CURSOR_RAW_MAX], check[CURSOR_CHECK_LEN];
    size_t n;
    long got;

    key[0] = '\0';
    if (list == NULL || text == NULL || (n = strlen(text)) >= sizeof std)
        return HOOKD_EINVAL;
    for (size_t i = 0; i < n; i++) {
        char c = text[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
            return HOOKD_EINVAL; /* one spelling only: no padding, no standard-alphabet digits */
        std[i] = c == '-' ? '+' : c == '_' ? '/' : c;
    }
    got = base64_decode(std, n, raw, sizeof raw);
    if (got < 2 + CURSOR_CHECK_LEN || raw[0] != CURSOR_VERSION)
        return HOOKD_EINVAL;
    n = (size_t)got - 1 - CURSOR_CHECK_LEN;
    if (!key_ok((const char *)raw + 1, n))
        return HOOKD_EINVAL;
    check_value(list, (const char *)raw + 1, n, check);
    if (CRYPTO_memcmp(check, raw + 1 + n, CURSOR_CHECK_LEN) != 0)
        return HOOKD_EINVAL;
    memcpy(key, raw + 1, n);
    key[n] = '\0';
    return 0;
}
