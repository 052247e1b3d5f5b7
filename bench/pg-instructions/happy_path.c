/*
 * bench/pg-instructions.sh's client: the happy path's store writes on
 * PostgreSQL as the fan-out and the writer make them: n unrecorded deliveries
 * leased in batches of b (insert_many), then each batch's first results,
 * delivered (complete_many). n = 0 only migrates the store.
 *   happy_path DSN N B   (exit 0; 1 with the reason on stderr)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/ids.h"
#include "store/store.h"

/* One batch: leased at fan-out without their rows, then delivered by their first results. */
static int batch_run(struct store *s, const char *endpoint_id, struct delivery *ds, struct delivery_result *rs,
                     int *results, int b)
{
    int64_t now = clock_now_ms();

    for (int i = 0; i < b; i++) {
        ds[i] = (struct delivery){.status = DELIVERY_PENDING, .lease_owner = (char *)"node-a",
                                  .lease_until = now + 30000, .lease_token = 1, .next_attempt_at = now,
                                  .created_at = now, .unrecorded = true, .account = (char *)"acct"};
        id_new(ds[i].id, "dlv_");
        id_new(ds[i].event_id, "evt_");
        snprintf(ds[i].endpoint_id, sizeof ds[i].endpoint_id, "%s", endpoint_id);
    }
    if (store_delivery_insert_many(s, ds, (size_t)b) != 0)
        return fprintf(stderr, "happy_path: insert_many failed\n"), 1;
    for (int i = 0; i < b; i++)
        rs[i] = (struct delivery_result){
            .delivery_id = ds[i].id, .lease_owner = "node-a", .lease_token = 1, .status = DELIVERY_DELIVERED,
            .unrecorded = &ds[i],
            .attempt = {.n = 1, .started_at = now, .duration_ms = 3, .status_code = 200,
                        .response = "{\"ok\":true}", .node = "node-a"},
        };
    if (store_delivery_complete_many(s, rs, (size_t)b, now + 3, results) != 0)
        return fprintf(stderr, "happy_path: complete_many failed\n"), 1;
    for (int i = 0; i < b; i++)
        if (results[i] != 0)
            return fprintf(stderr, "happy_path: result %d: %s\n", i, hookd_strerror(results[i])), 1;
    return 0;
}

int main(int argc, char **argv)
{
    struct store *s = NULL;
    struct delivery *ds = NULL;
    struct delivery_result *rs = NULL;
    int *results = NULL;
    char endpoint_id[HOOKD_ID_MAX];
    long n, b;
    int result = 1;

    if (argc != 4 || (n = strtol(argv[2], NULL, 10)) < 0 || (b = strtol(argv[3], NULL, 10)) < 1 || b > 10000) {
        fprintf(stderr, "usage: happy_path DSN N BATCH\n");
        return 1;
    }
    ds = calloc((size_t)b, sizeof *ds);
    rs = calloc((size_t)b, sizeof *rs);
    results = calloc((size_t)b, sizeof *results);
    if (!ds || !rs || !results || store_open(argv[1], &s) != 0 || store_migrate(s) != 0) {
        fprintf(stderr, "happy_path: no memory, or the store did not open and migrate\n");
        goto out;
    }
    id_new(endpoint_id, "ep_");
    for (long done = 0; done < n; done += b)
        if (batch_run(s, endpoint_id, ds, rs, results, (int)(n - done < b ? n - done : b)) != 0)
            goto out;
    result = 0;
out:
    if (s)
        store_close(s);
    free(ds);
    free(rs);
    free(results);
    return result;
}
