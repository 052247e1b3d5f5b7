/*
 * Secrets at rest (DESIGN §12a, docs/design.md §12): AES-256-GCM under the
 * server's 32-byte key. A sealed value is text, "hkenc:v1:<key id>:<base64(
 * nonce‖ciphertext‖tag)>", with a random 96-bit nonce per value, the key id
 * (hex of the first 8 bytes of SHA-256 of the key) so a wrong or rotated key
 * is told apart from damage, and the row's identity as AAD so a value cannot
 * be moved to another row.
 *
 *   secret_key_parse       base64 or hex text of 32 bytes → key
 *   secret_key_load_file   a key file (that text, one line)
 *   secret_key_write_file  a new file, mode 0600, written whole then renamed
 *   secret_box_use         the process's keys: one to seal with, one more to open with (rotation)
 *   secret_box_seal / _open  a value and its row's identity
 *
 * The keys are set once at start (or by `hookd rotate-key`, a process of its
 * own) before any thread uses the store; afterwards they are only read.
 */
#ifndef HOOKD_CORE_SECRET_BOX_H
#define HOOKD_CORE_SECRET_BOX_H
#include <stdbool.h>
#include <stddef.h>

#define SECRET_KEY_LEN 32
#define SECRET_KEY_ID_LEN 17 /* 16 hex digits + NUL */
#define SECRET_BOX_PREFIX "hkenc:v1:"

struct secret_key {
    unsigned char bytes[SECRET_KEY_LEN];
    char id[SECRET_KEY_ID_LEN];
};

/* Trailing white space is ignored. Returns 0 or HOOKD_EINVAL. */
__attribute__((warn_unused_result)) int secret_key_parse(const char *text, struct secret_key *out);
/* Returns 0, HOOKD_ENOTFOUND (no such file), HOOKD_EINVAL (not a key) or HOOKD_EIO. */
__attribute__((warn_unused_result)) int secret_key_load_file(const char *path, struct secret_key *out);
/* A new random key. Returns 0 or HOOKD_EIO. */
__attribute__((warn_unused_result)) int secret_key_generate(struct secret_key *out);
/* A new random key into *out, or the given one when generate is false, written as base64 to path
 * (through path.tmp, fsync, rename). Returns 0 or HOOKD_EIO. */
__attribute__((warn_unused_result)) int secret_key_write_file(const char *path, bool generate, struct secret_key *out);
void secret_key_wipe(struct secret_key *k);

/* Seals with seal_key from now on and opens values under it or under also_open (NULL: none).
 * The keys are copied. NULL seal_key: values are written and read as plain text (tests, tools). */
void secret_box_use(const struct secret_key *seal_key, const struct secret_key *also_open);
bool secret_box_active(void);
/* The id of the sealing key ("" when none). */
const char *secret_box_key_id(void);

/* True when text has the sealed form (of any key). */
bool secret_box_is_sealed(const char *text);
/*
 * plain sealed for the row named aad (e.g. "endpoint:ep_…") into a heap string *out; a copy of
 * plain when no key is set. Returns 0, HOOKD_ENOMEM or HOOKD_EIO.
 */
__attribute__((warn_unused_result)) int secret_box_seal(const char *aad, const char *plain, char **out);
/*
 * The plain text of a stored value into a heap string *out (the caller wipes and frees it). Text that
 * is not sealed (written before sealing existed) is returned as it is and counted as stale, as is a
 * value sealed under the also_open key. Returns 0, HOOKD_ENOMEM, HOOKD_EINVAL (sealed under a key
 * not set: *wrong_key_id, when not NULL, gets its id) or HOOKD_EIO (damaged, or moved from another row).
 */
__attribute__((warn_unused_result)) int secret_box_open(const char *aad, const char *text, char **out,
                                                        char wrong_key_id[SECRET_KEY_ID_LEN]);
/* How many stale values secret_box_open has returned since the process started. */
unsigned long secret_box_stale_count(void);
/* Wipes and frees a heap string. */
void secret_text_free(char *t);
#endif
