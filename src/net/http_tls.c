/* The HTTP engine's TLS (net/http_tls.h), on OpenSSL 3. */
#include "net/http_tls.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

SSL_CTX *http_tls_context(const char *ca_file)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

    if (ctx == NULL)
        return NULL;
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1)
        goto fail;
    if (ca_file != NULL ? SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1
                        : SSL_CTX_set_default_verify_paths(ctx) != 1)
        goto fail;
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    /* Writes resume with a moved pointer and may be partial: the engine's sends are non-blocking. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
    return ctx;
fail:
    SSL_CTX_free(ctx);
    ERR_clear_error();
    return NULL;
}

SSL *http_tls_session(SSL_CTX *ctx, int fd, const char *host, bool host_is_ip)
{
    SSL *ssl = SSL_new(ctx);

    if (ssl == NULL)
        return NULL;
    if (SSL_set_fd(ssl, fd) != 1)
        goto fail;
    if (host_is_ip) {
        X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);
        if (X509_VERIFY_PARAM_set1_ip_asc(vp, host) != 1)
            goto fail;
    } else {
        /* SNI is for names only (RFC 6066 §3). */
        if (SSL_set_tlsext_host_name(ssl, host) != 1 || SSL_set1_host(ssl, host) != 1)
            goto fail;
        SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    }
    SSL_set_connect_state(ssl);
    return ssl;
fail:
    SSL_free(ssl);
    ERR_clear_error();
    return NULL;
}

void http_tls_reason(SSL *ssl, int ssl_error, char *out, size_t n)
{
    long verify = SSL_get_verify_result(ssl);
    unsigned long e = ERR_peek_last_error();
    const char *why = e != 0 ? ERR_reason_error_string(e) : NULL;

    if (verify != X509_V_OK)
        snprintf(out, n, "certificate verify failed: %s", X509_verify_cert_error_string(verify));
    else if (why != NULL)
        snprintf(out, n, "%s", why);
    else if (ssl_error == SSL_ERROR_SYSCALL)
        snprintf(out, n, "%s", errno != 0 ? strerror(errno) : "connection closed during the handshake");
    else
        snprintf(out, n, "handshake failed (SSL error %d)", ssl_error);
    ERR_clear_error();
}
