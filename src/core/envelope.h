/* The webhook body of DESIGN §5: {"id","type","timestamp","account","resource":{…},"data":…}. */
#ifndef HOOKD_CORE_ENVELOPE_H
#define HOOKD_CORE_ENVELOPE_H
#include <stdbool.h>
#include <stdint.h>
#include "core/buf.h"

struct envelope_in {
    const char *id;
    const char *type;
    int64_t created_at_ms;
    const char *account;       /* NULL → null */
    const char *resource_type; /* resource omitted when type and id are NULL */
    const char *resource_id;
    bool has_resource_version;
    int64_t resource_version;
    const char *data_json; /* inserted verbatim: the caller has validated it */
};

/* Appends the body to out (which the caller owns). */
__attribute__((warn_unused_result)) int envelope_build(const struct envelope_in *in, struct buf *out);
#endif
