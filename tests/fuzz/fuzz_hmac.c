/*
 * Fuzzes hmac's settings parser (template included) and its verify: input is
 * "flags\ntemplate\nprefix\nsignature\ntimestamp\nbody" where the first byte of
 * flags picks algorithm, encoding and whether a timestamp header is set.
 * When the settings parse, sign → verify must accept.
 */
#include <stdint.h>
#include <stdlib.h>

#include "core/signature_scheme.h"
#include "fuzz_common.h"
#include "hookd.h"

static const char *const secrets[] = {"fuzz-secret"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct signature_scheme *hm = signature_scheme_find("hmac");
    struct signature_params p;
    struct fuzz_input in;
    char sig[SIGNATURE_HEADER_MAX];
    const char *field, *problem;

    if (fuzz_split(&in, data, size, 6) != 0)
        return 0;
    unsigned flags = in.len[0] > 0 ? (unsigned char)in.field[0][0] : 0;
    const struct signature_params_text text = {
        .header = "X-Sig",
        .algorithm = flags & 1 ? "sha512" : "sha256",
        .encoding = flags & 2 ? "base64" : "hex",
        .prefix = in.field[2],
        .timestamp_header = flags & 4 ? "X-Ts" : NULL,
        .template_text = in.field[1],
    };
    if (signature_params_parse(&p, &text, &field, &problem) != 0) {
        if (field == NULL || problem == NULL)
            abort();
        free(in.copy);
        return 0;
    }
    struct fuzz_headers h = {{"X-Sig", "X-Ts", "X-Id"}, {in.field[3], in.field[4], "id-1"}};
    struct signature_request req = {.header = fuzz_header, .header_ctx = &h, .body = in.field[5],
                                    .body_len = in.len[5], .now_s = 1700000000, .tolerance_s = 300, .params = &p};
    int rc = hm->verify(&req, secrets, 1);
    if (rc != 0 && rc != HOOKD_ESIG && rc != HOOKD_EINVAL && rc != HOOKD_ETIME)
        abort();
    const struct signature_message msg = {.timestamp_s = 1700000000, .body = in.field[5], .body_len = in.len[5],
                                          .params = &p, .header = fuzz_header, .header_ctx = &h};
    h.values[1] = "1700000000";
    rc = hm->sign(&msg, secrets, 1, sig, sizeof sig);
    /* Signing fails only when the template names a header the request lacks. */
    if (rc == 0) {
        h.values[0] = sig;
        if (hm->verify(&req, secrets, 1) != 0)
            abort();
    } else if (rc != HOOKD_EINVAL) {
        abort();
    }
    free(in.copy);
    return 0;
}
