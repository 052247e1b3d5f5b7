/* Fuzzes the Stripe-Signature parser and verify: input is "header\nbody"; also sign → verify. */
#include <stdint.h>
#include <stdlib.h>

#include "core/signature_scheme.h"
#include "fuzz_common.h"
#include "hookd.h"

static const char *const secrets[] = {"whsec_fuzz", "whsec_other"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct signature_scheme *st = signature_scheme_find("stripe");
    struct fuzz_input in;
    char sig[SIGNATURE_HEADER_MAX];

    if (fuzz_split(&in, data, size, 2) != 0)
        return 0;
    struct fuzz_headers h = {{"Stripe-Signature"}, {in.field[0]}};
    struct signature_request req = {.header = fuzz_header, .header_ctx = &h, .body = in.field[1],
                                    .body_len = in.len[1], .now_s = 1700000000, .tolerance_s = 300};
    int rc = st->verify(&req, secrets, 2);
    if (rc != 0 && rc != HOOKD_ESIG && rc != HOOKD_EINVAL && rc != HOOKD_ETIME)
        abort();
    const struct signature_message msg = {.timestamp_s = 1700000000, .body = in.field[1], .body_len = in.len[1]};
    if (st->sign(&msg, secrets, 2, sig, sizeof sig) != 0)
        abort();
    h.values[0] = sig;
    if (st->verify(&req, secrets + 1, 1) != 0)
        abort();
    free(in.copy);
    return 0;
}
