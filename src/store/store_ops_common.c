/*
 * What both backends share for the operations families (alerts, figures,
 * retention): the alert and signal row readers and the folding of the
 * figures' rows into struct store_figures.
 */
#include "store/store_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int store_read_alert(const struct store_row *r, void *item)
{
    struct alert *a = item;
    const char *rule = r->ops->text(r, 1);
    bool ok = true;

    memset(a, 0, sizeof *a);
    store_row_id(r, 0, a->id);
    snprintf(a->rule, sizeof a->rule, "%s", rule ? rule : "");
    a->subject = r->ops->str(r, 2, &ok);
    a->message = r->ops->str(r, 3, &ok);
    a->details = r->ops->str(r, 4, &ok);
    a->opened_at = r->ops->i64(r, 5);
    a->resolved_at = r->ops->i64(r, 6);
    /* Columns are NOT NULL; a row written by hand without them reads as empty text. */
    if (ok && !a->subject)
        ok = (a->subject = strdup("")) != NULL;
    if (ok && !a->message)
        ok = (a->message = strdup("")) != NULL;
    if (ok && !a->details)
        ok = (a->details = strdup("{}")) != NULL;
    if (!ok) {
        alert_free(a);
        return HOOKD_ENOMEM;
    }
    return 0;
}

void store_free_alert(void *item) { alert_free(item); }

int store_read_signal(const struct store_row *r, void *item)
{
    struct alert_signal *g = item;
    bool ok = true;

    memset(g, 0, sizeof *g);
    g->kind = (enum alert_signal_kind)r->ops->i64(r, 0);
    g->subject = r->ops->str(r, 1, &ok);
    g->account = r->ops->str(r, 2, &ok);
    g->n = r->ops->i64(r, 3);
    g->m = r->ops->i64(r, 4);
    if (!ok) {
        free(g->subject);
        free(g->account);
        memset(g, 0, sizeof *g);
        return HOOKD_ENOMEM;
    }
    return 0;
}

void store_free_signal(void *item)
{
    struct alert_signal *g = item;

    free(g->subject);
    free(g->account);
    memset(g, 0, sizeof *g);
}

void store_figures_fold(const struct alert_signal_list *rows, struct store_figures *out)
{
    int64_t endpoints = 0;

    memset(out, 0, sizeof *out);
    out->deliveries[DELIVERY_DELIVERED] = out->deliveries[DELIVERY_SUPERSEDED] = -1;
    out->inbox[INBOX_PROCESSED] = -1;
    for (size_t i = 0; i < rows->n; i++) {
        const struct alert_signal *g = &rows->items[i];
        enum delivery_status ds;
        enum breaker_state b;
        enum inbox_status is;
        switch ((int)g->kind) {
        case 0:
            if (delivery_status_parse(g->subject, &ds) == 0) /* a status may have two rows: added up */
                out->deliveries[ds] = (out->deliveries[ds] > 0 ? out->deliveries[ds] : 0) + g->n;
            break;
        case 1:
            out->leased = g->n;
            break;
        case 2:
            out->outbox_undispatched = g->n;
            if (g->m > 0 && (out->oldest_open_at == 0 || g->m < out->oldest_open_at))
                out->oldest_open_at = g->m;
            break;
        case 3: /* the rows come in any order: the older of the two wins */
            if (g->n > 0 && (out->oldest_open_at == 0 || g->n < out->oldest_open_at))
                out->oldest_open_at = g->n;
            break;
        case 4:
            if (breaker_parse(g->subject, &b) == 0)
                out->breakers[b] += g->n;
            break;
        case 5:
            endpoints = g->n;
            out->endpoints_disabled = g->m;
            break;
        case 6:
            if (inbox_status_parse(g->subject, &is) == 0)
                out->inbox[is] = g->n;
            break;
        default:
            break;
        }
    }
    out->breakers[BREAKER_CLOSED] = endpoints - out->breakers[BREAKER_OPEN] - out->breakers[BREAKER_HALF_OPEN];
    if (out->breakers[BREAKER_CLOSED] < 0)
        out->breakers[BREAKER_CLOSED] = 0;
}
