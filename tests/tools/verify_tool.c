/*
 * verify_tool: checks a request with hookd_verify_scheme, for the interop
 * tests. An application of the public library (include/hookd.h) only.
 *   verify_tool --scheme S --secret X... --header 'Name: value'... [--tolerance N]
 *               [--hmac-header H --algorithm A --encoding E --prefix P
 *                --timestamp-header T --template TPL]  < body
 * Prints "ok" or the error (ESIG, ETIME, EINVAL) and exits 0 or 1; 2 on misuse.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hookd.h"

#define MAX_ITEMS 16
#define BODY_MAX (16u << 20)

static const char *error_name(int rc)
{
    switch (rc) {
    case HOOKD_ESIG:
        return "ESIG";
    case HOOKD_ETIME:
        return "ETIME";
    case HOOKD_EINVAL:
        return "EINVAL";
    default:
        return "OTHER";
    }
}

int main(int argc, char **argv)
{
    const char *scheme = NULL, *secrets[MAX_ITEMS];
    struct hookd_header headers[MAX_ITEMS];
    char *names[MAX_ITEMS];
    struct hookd_hmac_params hmac = {0};
    size_t n_secrets = 0, n_headers = 0, len = 0, got;
    long long tolerance = 0;
    char *body = malloc(BODY_MAX);
    int rc, status = 2;

    if (body == NULL)
        return 2;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *opt = argv[i], *v = argv[i + 1];
        if (strcmp(opt, "--scheme") == 0)
            scheme = v;
        else if (strcmp(opt, "--secret") == 0 && n_secrets < MAX_ITEMS)
            secrets[n_secrets++] = v;
        else if (strcmp(opt, "--header") == 0 && n_headers < MAX_ITEMS && strchr(v, ':') != NULL) {
            size_t n = (size_t)(strchr(v, ':') - v);
            const char *value = v + n + 1;
            while (*value == ' ')
                value++;
            names[n_headers] = strndup(v, n);
            headers[n_headers].name = names[n_headers];
            headers[n_headers++].value = value;
        } else if (strcmp(opt, "--tolerance") == 0)
            tolerance = strtoll(v, NULL, 10);
        else if (strcmp(opt, "--hmac-header") == 0)
            hmac.header = v;
        else if (strcmp(opt, "--algorithm") == 0)
            hmac.algorithm = v;
        else if (strcmp(opt, "--encoding") == 0)
            hmac.encoding = v;
        else if (strcmp(opt, "--prefix") == 0)
            hmac.prefix = v;
        else if (strcmp(opt, "--timestamp-header") == 0)
            hmac.timestamp_header = v;
        else if (strcmp(opt, "--template") == 0)
            hmac.template_text = v;
        else {
            fprintf(stderr, "verify_tool: bad option %s\n", opt);
            goto out;
        }
    }
    if (scheme == NULL) {
        fprintf(stderr, "verify_tool: --scheme is required\n");
        goto out;
    }
    while (len < BODY_MAX && (got = fread(body + len, 1, BODY_MAX - len, stdin)) > 0)
        len += got;
    rc = hookd_verify_scheme(scheme, hmac.header != NULL ? &hmac : NULL, headers, n_headers, body, len, secrets,
                             n_secrets, tolerance);
    printf("%s\n", rc == 0 ? "ok" : error_name(rc));
    status = rc == 0 ? 0 : 1;
out:
    for (size_t i = 0; i < n_headers; i++)
        free(names[i]);
    free(body);
    return status;
}
