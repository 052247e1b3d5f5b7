/*
 * Fuzzes the Standard Webhooks header parser and verify (v1 and v1a): input is
 * "signature\ntimestamp\nid\nbody". Also checks that sign is verify's inverse
 * for the fuzzed id and body.
 */
#include <stdint.h>
#include <stdlib.h>

#include "core/signature_scheme.h"
#include "fuzz_common.h"
#include "hookd.h"

static const char *const secrets[] = {
    "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "whpk_11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=",
};
static const char *const signers[] = {
    "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "whsk_nWGxne/9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A=",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct signature_scheme *sw = signature_scheme_find("standard-webhooks");
    struct fuzz_input in;
    char sig[SIGNATURE_HEADER_MAX];

    if (fuzz_split(&in, data, size, 4) != 0)
        return 0;
    struct fuzz_headers h = {{"webhook-signature", "webhook-timestamp", "webhook-id"},
                             {in.field[0], in.field[1], in.field[2]}};
    struct signature_request req = {.header = fuzz_header, .header_ctx = &h, .body = in.field[3],
                                    .body_len = in.len[3], .now_s = 1700000000, .tolerance_s = 300};
    int rc = sw->verify(&req, secrets, 2);
    if (rc != 0 && rc != HOOKD_ESIG && rc != HOOKD_EINVAL && rc != HOOKD_ETIME)
        abort();

    /* sign → verify accepts, whenever the id is one a header can carry. */
    size_t id_len = strlen(in.field[2]);
    if (id_len > 0 && id_len <= 256) {
        const struct signature_message msg = {.id = in.field[2], .timestamp_s = 1700000000, .body = in.field[3],
                                              .body_len = in.len[3]};
        if (sw->sign(&msg, signers, 2, sig, sizeof sig) != 0)
            abort();
        h.values[0] = sig;
        h.values[1] = "1700000000";
        if (sw->verify(&req, secrets, 2) != 0 || sw->verify(&req, secrets + 1, 1) != 0)
            abort();
    }
    free(in.copy);
    return 0;
}
