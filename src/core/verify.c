/* hookd_verify: the public Standard Webhooks check, on the wall clock. */
#include "hookd.h"

#include "core/clock.h"
#include "core/signature.h"

#define DEFAULT_TOLERANCE_S 300

int hookd_verify(const char *secret, const char *msg_id, const char *timestamp, const char *signature_header,
                 const void *body, size_t body_len, int64_t tolerance_s)
{
    if (tolerance_s < 0)
        return HOOKD_EINVAL;
    if (tolerance_s == 0)
        tolerance_s = DEFAULT_TOLERANCE_S;
    return signature_verify(secret, msg_id, timestamp, signature_header, body, body_len, clock_now_ms() / 1000,
                            tolerance_s);
}
