/*
 * HMAC-SHA256/512 over a message in parts (OpenSSL 3 EVP_MAC), and the hex
 * codec the HMAC schemes (stripe, github, hmac) print signatures in.
 */
#ifndef HOOKD_CORE_MAC_H
#define HOOKD_CORE_MAC_H
#include <stddef.h>

enum mac_algorithm { MAC_SHA256, MAC_SHA512 };

#define MAC_MAX_LEN 64 /* SHA-512 */

/* One piece of a message signed in parts; p may be NULL when n is 0. */
struct mac_part {
    const void *p;
    size_t n;
};

/* Length of the algorithm's MAC in bytes (32 or 64). */
size_t mac_len(enum mac_algorithm alg);

/*
 * HMAC of the concatenated parts into out (mac_len(alg) bytes, MAC_MAX_LEN always enough). Returns 0 or
 * HOOKD_EIO when OpenSSL fails. The key is not kept.
 */
__attribute__((warn_unused_result)) int mac_hmac(enum mac_algorithm alg, const void *key, size_t key_len,
                                                 const struct mac_part *parts, size_t n_parts,
                                                 unsigned char *out);

/* Lower-case hex of n bytes and a NUL into out (2n + 1 bytes). */
void hex_encode(const void *in, size_t n, char *out);
/* Decodes exactly n hex digits (either case) into out; returns the bytes written, or -1 (odd, bad digit, too long). */
long hex_decode(const char *in, size_t n, void *out, size_t out_cap);
#endif
