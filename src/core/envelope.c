/*
 * The webhook body of DESIGN §5, built once per event and signed as is:
 * {"id","type","timestamp","account","resource":{"type","id","version"},"data"}.
 */
#include "core/envelope.h"

#include <inttypes.h>

#include "core/timefmt.h"
#include "hookd.h"

static int append_resource(const struct envelope_in *in, struct buf *out)
{
    int rc = buf_puts(out, ",\"resource\":{\"type\":");

    if (rc == 0)
        rc = buf_json_string(out, in->resource_type);
    if (rc == 0)
        rc = buf_puts(out, ",\"id\":");
    if (rc == 0)
        rc = buf_json_string(out, in->resource_id);
    if (rc == 0 && in->has_resource_version)
        rc = buf_printf(out, ",\"version\":%" PRId64 "}", in->resource_version);
    else if (rc == 0)
        rc = buf_puts(out, ",\"version\":null}");
    return rc;
}

int envelope_build(const struct envelope_in *in, struct buf *out)
{
    char ts[RFC3339_LEN];
    int rc;

    if (in->id == NULL || in->type == NULL)
        return HOOKD_EINVAL;
    rfc3339_format(in->created_at_ms, ts);
    rc = buf_puts(out, "{\"id\":");
    if (rc == 0)
        rc = buf_json_string(out, in->id);
    if (rc == 0)
        rc = buf_puts(out, ",\"type\":");
    if (rc == 0)
        rc = buf_json_string(out, in->type);
    if (rc == 0)
        rc = buf_printf(out, ",\"timestamp\":\"%s\",\"account\":", ts);
    if (rc == 0)
        rc = buf_json_string(out, in->account); /* NULL becomes null */
    if (rc == 0 && (in->resource_type != NULL || in->resource_id != NULL))
        rc = append_resource(in, out);
    if (rc == 0)
        rc = buf_puts(out, ",\"data\":");
    if (rc == 0)
        rc = buf_puts(out, in->data_json != NULL ? in->data_json : "null");
    if (rc == 0)
        rc = buf_puts(out, "}");
    return rc;
}
