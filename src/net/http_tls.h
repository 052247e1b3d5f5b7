/*
 * The HTTP engine's TLS: one client context per engine (TLS 1.2 at least,
 * peers verified against the system's trust store, which honours
 * SSL_CERT_FILE, or a CA file given), and a connection's session with SNI
 * and the name or address the certificate must carry.
 *
 *   http_tls_context   the context (NULL when OpenSSL cannot make one)
 *   http_tls_session   a session on a connected socket, for host (its writes never raise SIGPIPE)
 *   http_tls_reason    why a handshake failed, in OpenSSL's words (never the peer's)
 */
#ifndef HOOKD_NET_HTTP_TLS_H
#define HOOKD_NET_HTTP_TLS_H
#include <stdbool.h>
#include <stddef.h>
#include <openssl/ssl.h>

/* ca_file NULL: the default verify paths. */
SSL_CTX *http_tls_context(const char *ca_file);
/* A client session on fd (not owned) for host, an IP literal when host_is_ip; NULL on failure. */
SSL *http_tls_session(SSL_CTX *ctx, int fd, const char *host, bool host_is_ip);
/* The reason of a failed SSL_connect that returned ssl_error; empties OpenSSL's error queue. */
void http_tls_reason(SSL *ssl, int ssl_error, char *out, size_t n);
#endif
