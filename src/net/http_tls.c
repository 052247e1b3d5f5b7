/* The HTTP engine's TLS (net/http_tls.h), on OpenSSL 3. */
#include "net/http_tls.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

/*
 * OpenSSL's socket BIO writes with write(), which raises SIGPIPE on a peer
 * that went away; this one is the same but for send(MSG_NOSIGNAL), so the
 * engine never needs its process to ignore the signal.
 */
static BIO_METHOD *nosignal_method;
static pthread_once_t nosignal_once = PTHREAD_ONCE_INIT;

static int nosignal_write(BIO *b, const char *data, int n)
{
    int fd = -1;
    ssize_t w;

    if (BIO_get_fd(b, &fd) < 0 || fd < 0)
        return -1;
    w = send(fd, data, (size_t)(n < 0 ? 0 : n), MSG_NOSIGNAL);
    BIO_clear_retry_flags(b);
    if (w <= 0 && BIO_sock_should_retry((int)w))
        BIO_set_retry_write(b);
    return (int)w;
}

static void nosignal_init(void)
{
    const BIO_METHOD *sock = BIO_s_socket();
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR, "hookd socket");

    if (m == NULL)
        return;
    if (BIO_meth_set_write(m, nosignal_write) != 1 || BIO_meth_set_read(m, BIO_meth_get_read(sock)) != 1 ||
        BIO_meth_set_puts(m, BIO_meth_get_puts(sock)) != 1 || BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(sock)) != 1 ||
        BIO_meth_set_create(m, BIO_meth_get_create(sock)) != 1 ||
        BIO_meth_set_destroy(m, BIO_meth_get_destroy(sock)) != 1) {
        BIO_meth_free(m);
        return;
    }
    nosignal_method = m;
}

/* A BIO on fd (not closed with it) that never raises SIGPIPE; NULL on failure. */
static BIO *nosignal_bio(int fd)
{
    BIO *b;

    pthread_once(&nosignal_once, nosignal_init);
    if (nosignal_method == NULL || (b = BIO_new(nosignal_method)) == NULL)
        return NULL;
    BIO_set_fd(b, fd, BIO_NOCLOSE);
    return b;
}

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
    BIO *bio = nosignal_bio(fd);
    if (bio == NULL)
        goto fail;
    SSL_set_bio(ssl, bio, bio); /* the session owns it now */
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
