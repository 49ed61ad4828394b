/*
 * bench_decode_family.h - the policybook family's part of
 * bench_decode_replay (see bench_decode_family.c).
 */
#ifndef PB_BENCH_DECODE_FAMILY_H
#define PB_BENCH_DECODE_FAMILY_H

#include <stddef.h>
#include <stdint.h>

#include "bench_common.h"

/* Times H2O, Scissorhands, TOVA, StreamingLLM and the sliding window
 * against their naive reference on `steps` decode-4096 steps at each
 * budget, printing one line per (policy, budget). Returns 0, or 1 after
 * reporting a failure (a create that failed, victims that differ). */
int bench_decode_family(uint32_t steps, const uint32_t *budgets,
                        size_t n_budgets, const bench_options *opt);

#endif /* PB_BENCH_DECODE_FAMILY_H */
