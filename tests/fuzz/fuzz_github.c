/* Fuzzes the X-Hub-Signature-256 parser and verify: input is "header\nbody"; also sign → verify. */
#include <stdint.h>
#include <stdlib.h>

#include "core/signature_scheme.h"
#include "fuzz_common.h"
#include "hookd.h"

static const char *const secrets[] = {"It's a Secret to Everybody"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct signature_scheme *gh = signature_scheme_find("github");
    struct fuzz_input in;
    char sig[SIGNATURE_HEADER_MAX];

    if (fuzz_split(&in, data, size, 2) != 0)
        return 0;
    struct fuzz_headers h = {{"X-Hub-Signature-256"}, {in.field[0]}};
    struct signature_request req = {.header = fuzz_header, .header_ctx = &h, .body = in.field[1],
                                    .body_len = in.len[1], .now_s = 0, .tolerance_s = 0};
    int rc = gh->verify(&req, secrets, 1);
    if (rc != 0 && rc != HOOKD_ESIG && rc != HOOKD_EINVAL)
        abort();
    const struct signature_message msg = {.body = in.field[1], .body_len = in.len[1]};
    if (gh->sign(&msg, secrets, 1, sig, sizeof sig) != 0)
        abort();
    h.values[0] = sig;
    if (gh->verify(&req, secrets, 1) != 0)
        abort();
    free(in.copy);
    return 0;
}
