/*
 * Ed25519 keys and signatures for Standard Webhooks v1a (DESIGN §5, §6) over
 * OpenSSL 3 (EVP_PKEY_ED25519). Keys are text: "whsk_" + base64 of the 32-byte
 * private seed (a 64-byte seed‖public key, as libsodium writes it, is read
 * too and its public half checked), "whpk_" + base64 of the 32-byte public key.
 *
 *   ed25519_generate            a new whsk_/whpk_ pair
 *   ed25519_public_from_secret  the whpk_ of a whsk_
 *   ed25519_secret_decode       whsk_ text → seed
 *   ed25519_public_decode       whpk_ text → public key
 *   ed25519_sign / _verify      a message given in parts
 */
#ifndef HOOKD_CORE_ED25519_H
#define HOOKD_CORE_ED25519_H
#include <stddef.h>

#include "core/mac.h"

#define ED25519_SEED_LEN 32
#define ED25519_PUBLIC_LEN 32
#define ED25519_SIG_LEN 64
#define ED25519_SECRET_PREFIX "whsk_"
#define ED25519_PUBLIC_PREFIX "whpk_"
/* "whsk_" + base64 of 64 bytes (88) + NUL fits; whpk_ and generated whsk_ use 5 + 44 + 1. */
#define ED25519_KEY_TEXT_MAX 96

/* A new key pair from the CSPRNG into secret_out ("whsk_…") and public_out ("whpk_…"). Returns 0 or HOOKD_EIO. */
__attribute__((warn_unused_result)) int ed25519_generate(char secret_out[ED25519_KEY_TEXT_MAX],
                                                         char public_out[ED25519_KEY_TEXT_MAX]);
/* The "whpk_…" of a "whsk_…". Returns 0, HOOKD_EINVAL (not a whsk_ key) or HOOKD_EIO. */
__attribute__((warn_unused_result)) int ed25519_public_from_secret(const char *secret,
                                                                   char public_out[ED25519_KEY_TEXT_MAX]);
/* "whsk_…" → seed. Returns 0 or HOOKD_EINVAL; seed is wiped on failure. The caller wipes it after use. */
__attribute__((warn_unused_result)) int ed25519_secret_decode(const char *secret,
                                                              unsigned char seed[ED25519_SEED_LEN]);
/* "whpk_…" → public key. Returns 0 or HOOKD_EINVAL. */
__attribute__((warn_unused_result)) int ed25519_public_decode(const char *key, unsigned char pub[ED25519_PUBLIC_LEN]);
/* The public key of a seed. Returns 0 or HOOKD_EIO. */
__attribute__((warn_unused_result)) int ed25519_public_of_seed(const unsigned char seed[ED25519_SEED_LEN],
                                                               unsigned char pub[ED25519_PUBLIC_LEN]);

/* Signs the concatenated parts. Returns 0, HOOKD_ENOMEM or HOOKD_EIO. */
__attribute__((warn_unused_result)) int ed25519_sign(const unsigned char seed[ED25519_SEED_LEN],
                                                     const struct mac_part *parts, size_t n_parts,
                                                     unsigned char sig[ED25519_SIG_LEN]);
/* Checks sig over the concatenated parts. Returns 0, HOOKD_ESIG, HOOKD_ENOMEM or HOOKD_EIO. */
__attribute__((warn_unused_result)) int ed25519_verify(const unsigned char pub[ED25519_PUBLIC_LEN],
                                                       const struct mac_part *parts, size_t n_parts,
                                                       const unsigned char sig[ED25519_SIG_LEN]);
#endif
