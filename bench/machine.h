/*
 * The machine scenarios: versioned events for many entities through a
 * contiguous state machine handler (DESIGN §7), sent on the inbound load's
 * keep-alive connections. machine: shuffled, as fast as the connections go;
 * processed events/s from the first accept to the last decision. machine-
 * latency: paced, each entity's versions in order (entities interleaved), so
 * an event waits for nothing but hookd; accept→applied from the items' own
 * received_at and processed_at. Every item must end processed/applied.
 *
 *   machine_bench_run   the whole scenario against node 0; prints its RESULT line
 */
#ifndef LOADGEN_MACHINE_H
#define LOADGEN_MACHINE_H
#include "options.h"

struct nodes;
__attribute__((warn_unused_result)) int machine_bench_run(const struct opts *o, struct nodes *n, const char *store,
                                                          const char *token, bool paced);
#endif
