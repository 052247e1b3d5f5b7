/* hookd_strerror: the English text of each enum hookd_error. */
#include "hookd.h"

static const char *const error_texts[] = {
    [-HOOKD_OK] = "success",
    [-HOOKD_ENOMEM] = "out of memory",
    [-HOOKD_EINVAL] = "invalid argument or input",
    [-HOOKD_ENOTFOUND] = "not found",
    [-HOOKD_EEXISTS] = "already exists",
    [-HOOKD_ESTALE] = "fencing token no longer current",
    [-HOOKD_EIO] = "store or system I/O error",
    [-HOOKD_EBUSY] = "locked, try again",
    [-HOOKD_ECONFLICT] = "key reused with different content",
    [-HOOKD_EUNAVAIL] = "store unavailable",
    [-HOOKD_ESIG] = "signature did not verify",
    [-HOOKD_ETIME] = "timestamp outside tolerance",
};

const char *hookd_strerror(int err)
{
    if (err > 0 || -(long)err >= (long)(sizeof error_texts / sizeof error_texts[0]) || error_texts[-err] == NULL)
        return "unknown error";
    return error_texts[-err];
}
