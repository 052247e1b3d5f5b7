/* Secrets at rest: AES-256-GCM sealing of stored key material under the server key (core/secret_box.h). */
#include "core/secret_box.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "core/base64.h"
#include "hookd.h"

#define NONCE_LEN 12
#define TAG_LEN 16
#define SEALED_MAX (64 * 1024) /* no stored secret set comes near it */

static struct secret_key seal_key, open_key;
static bool have_seal, have_open;
static atomic_ulong stale_count;

static void key_id(struct secret_key *k)
{
    unsigned char digest[SHA256_DIGEST_LENGTH];
    static const char digits[] = "0123456789abcdef";

    SHA256(k->bytes, SECRET_KEY_LEN, digest);
    for (size_t i = 0; i < (SECRET_KEY_ID_LEN - 1) / 2; i++) {
        k->id[2 * i] = digits[digest[i] >> 4];
        k->id[2 * i + 1] = digits[digest[i] & 15];
    }
    k->id[SECRET_KEY_ID_LEN - 1] = '\0';
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int secret_key_parse(const char *text, struct secret_key *out)
{
    size_t n = text ? strlen(text) : 0;
    int result = HOOKD_EINVAL;

    memset(out, 0, sizeof *out);
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r' || text[n - 1] == ' ' || text[n - 1] == '\t'))
        n--;
    if (n == 2 * SECRET_KEY_LEN) {
        result = 0;
        for (size_t i = 0; i < SECRET_KEY_LEN && result == 0; i++) {
            int hi = hex_value(text[2 * i]), lo = hex_value(text[2 * i + 1]);
            if (hi < 0 || lo < 0)
                result = HOOKD_EINVAL;
            else
                out->bytes[i] = (unsigned char)(hi << 4 | lo);
        }
    } else if (n == 44) {
        unsigned char raw[SECRET_KEY_LEN + 2];
        if (base64_decode(text, n, raw, sizeof raw) == SECRET_KEY_LEN) {
            memcpy(out->bytes, raw, SECRET_KEY_LEN);
            result = 0;
        }
        OPENSSL_cleanse(raw, sizeof raw);
    }
    if (result == 0)
        key_id(out);
    else
        secret_key_wipe(out);
    return result;
}

int secret_key_load_file(const char *path, struct secret_key *out)
{
    char text[256];
    ssize_t n;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int result;

    memset(out, 0, sizeof *out);
    if (fd < 0)
        return errno == ENOENT ? HOOKD_ENOTFOUND : HOOKD_EIO;
    n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n < 0)
        return HOOKD_EIO;
    text[n] = '\0';
    result = secret_key_parse(text, out);
    OPENSSL_cleanse(text, sizeof text);
    return result;
}

int secret_key_generate(struct secret_key *out)
{
    memset(out, 0, sizeof *out);
    if (RAND_bytes(out->bytes, SECRET_KEY_LEN) != 1)
        return HOOKD_EIO;
    key_id(out);
    return 0;
}

int secret_key_write_file(const char *path, bool generate, struct secret_key *out)
{
    char tmp[4096], text[64];
    int fd, result = HOOKD_EIO;
    size_t len;

    if (generate && secret_key_generate(out) != 0)
        return HOOKD_EIO;
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp)
        return HOOKD_EINVAL;
    base64_encode(out->bytes, SECRET_KEY_LEN, text);
    len = strlen(text);
    text[len++] = '\n';
    (void)unlink(tmp);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
        if (fchmod(fd, 0600) == 0 && write(fd, text, len) == (ssize_t)len && fsync(fd) == 0)
            result = 0;
        close(fd);
        if (result == 0 && rename(tmp, path) != 0)
            result = HOOKD_EIO;
        if (result != 0)
            (void)unlink(tmp);
    }
    OPENSSL_cleanse(text, sizeof text);
    return result;
}

void secret_key_wipe(struct secret_key *k) { OPENSSL_cleanse(k, sizeof *k); }

void secret_box_use(const struct secret_key *seal, const struct secret_key *also_open)
{
    secret_key_wipe(&seal_key);
    secret_key_wipe(&open_key);
    have_seal = seal != NULL;
    have_open = also_open != NULL;
    if (seal)
        seal_key = *seal;
    if (also_open)
        open_key = *also_open;
}

bool secret_box_active(void) { return have_seal; }
const char *secret_box_key_id(void) { return have_seal ? seal_key.id : ""; }

bool secret_box_is_sealed(const char *text) { return text && strncmp(text, SECRET_BOX_PREFIX, strlen(SECRET_BOX_PREFIX)) == 0; }

/* One AES-256-GCM pass: encrypt (in → out, tag written) or decrypt (tag checked). 0 or HOOKD_EIO. */
static int gcm(bool encrypt, const struct secret_key *k, const unsigned char nonce[NONCE_LEN], const char *aad,
               const unsigned char *in, int in_len, unsigned char *out, unsigned char tag[TAG_LEN])
{
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int len = 0, result = HOOKD_EIO;

    if (!ctx)
        return HOOKD_ENOMEM;
    if (EVP_CipherInit_ex(ctx, EVP_aes_256_gcm(), NULL, NULL, NULL, encrypt) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, NONCE_LEN, NULL) != 1 ||
        EVP_CipherInit_ex(ctx, NULL, NULL, k->bytes, nonce, encrypt) != 1 ||
        EVP_CipherUpdate(ctx, NULL, &len, (const unsigned char *)aad, (int)strlen(aad)) != 1 ||
        (in_len > 0 && EVP_CipherUpdate(ctx, out, &len, in, in_len) != 1))
        goto out;
    if (!encrypt && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, TAG_LEN, tag) != 1)
        goto out;
    if (EVP_CipherFinal_ex(ctx, out + len, &len) != 1)
        goto out;
    if (encrypt && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TAG_LEN, tag) != 1)
        goto out;
    result = 0;
out:
    EVP_CIPHER_CTX_free(ctx);
    return result;
}

int secret_box_seal(const char *aad, const char *plain, char **out)
{
    size_t n = strlen(plain), raw_len = NONCE_LEN + n + TAG_LEN, text_len;
    unsigned char *raw;
    int result;

    *out = NULL;
    if (!have_seal) {
        *out = strdup(plain);
        return *out ? 0 : HOOKD_ENOMEM;
    }
    if (n > SEALED_MAX)
        return HOOKD_EINVAL;
    if (!(raw = malloc(raw_len)))
        return HOOKD_ENOMEM;
    result = RAND_bytes(raw, NONCE_LEN) == 1 ? 0 : HOOKD_EIO;
    if (result == 0)
        result = gcm(true, &seal_key, raw, aad, (const unsigned char *)plain, (int)n, raw + NONCE_LEN,
                     raw + NONCE_LEN + n);
    text_len = strlen(SECRET_BOX_PREFIX) + SECRET_KEY_ID_LEN + base64_encoded_len(raw_len) + 1;
    if (result == 0 && !(*out = malloc(text_len)))
        result = HOOKD_ENOMEM;
    if (result == 0) {
        int w = snprintf(*out, text_len, SECRET_BOX_PREFIX "%s:", seal_key.id);
        base64_encode(raw, raw_len, *out + w);
    }
    OPENSSL_cleanse(raw, raw_len);
    free(raw);
    return result;
}

int secret_box_open(const char *aad, const char *text, char **out, char wrong_key_id[SECRET_KEY_ID_LEN])
{
    const struct secret_key *k = NULL;
    const char *id, *b64;
    unsigned char *raw = NULL;
    size_t b64_len;
    long raw_len;
    int result = HOOKD_EIO;

    *out = NULL;
    if (wrong_key_id)
        wrong_key_id[0] = '\0';
    if (!secret_box_is_sealed(text)) {
        *out = strdup(text ? text : "");
        if (text && have_seal)
            atomic_fetch_add(&stale_count, 1);
        return *out ? 0 : HOOKD_ENOMEM;
    }
    id = text + strlen(SECRET_BOX_PREFIX);
    b64 = strchr(id, ':');
    if (!b64 || b64 - id != SECRET_KEY_ID_LEN - 1)
        return HOOKD_EIO;
    if (have_seal && memcmp(id, seal_key.id, SECRET_KEY_ID_LEN - 1) == 0)
        k = &seal_key;
    else if (have_open && memcmp(id, open_key.id, SECRET_KEY_ID_LEN - 1) == 0)
        k = &open_key;
    if (!k) {
        if (wrong_key_id)
            snprintf(wrong_key_id, SECRET_KEY_ID_LEN, "%.*s", SECRET_KEY_ID_LEN - 1, id);
        return HOOKD_EINVAL;
    }
    b64++;
    b64_len = strlen(b64);
    if (b64_len > SEALED_MAX * 2 || !(raw = malloc(b64_len)))
        return b64_len > SEALED_MAX * 2 ? HOOKD_EIO : HOOKD_ENOMEM;
    raw_len = base64_decode(b64, b64_len, raw, b64_len);
    if (raw_len < NONCE_LEN + TAG_LEN)
        goto out;
    raw_len -= NONCE_LEN + TAG_LEN;
    if (!(*out = malloc((size_t)raw_len + 1))) {
        result = HOOKD_ENOMEM;
        goto out;
    }
    result = gcm(false, k, raw, aad, raw + NONCE_LEN, (int)raw_len, (unsigned char *)*out,
                 raw + NONCE_LEN + raw_len);
    if (result == 0) {
        (*out)[raw_len] = '\0';
        if (k == &open_key)
            atomic_fetch_add(&stale_count, 1);
    } else {
        OPENSSL_cleanse(*out, (size_t)raw_len + 1);
        free(*out);
        *out = NULL;
    }
out:
    OPENSSL_cleanse(raw, b64_len);
    free(raw);
    return result;
}

unsigned long secret_box_stale_count(void) { return atomic_load(&stale_count); }

void secret_text_free(char *t)
{
    if (t) {
        OPENSSL_cleanse(t, strlen(t));
        free(t);
    }
}
