/*
 * bench_decode_scorer.h - the --scorer part of bench_decode_replay (see
 * bench_decode_scorer.c): a native instance of any scorer, with or without
 * sinks, at any eviction cadence, against the memcpy floor of the rows it
 * reads.
 */
#ifndef PB_BENCH_DECODE_SCORER_H
#define PB_BENCH_DECODE_SCORER_H

#include <stddef.h>
#include <stdint.h>

#include "bench_common.h"

/* One row of the table: a scorer and its sinks. */
typedef struct bench_scorer_spec {
    uint32_t scorer; /* a pb_scorer */
    uint32_t sinks;  /* pb_kvcache_config.sinks */
} bench_scorer_spec;

/* Parses "NAME" or "NAME:SINKS" (NAME: window, cumulative, last, votes,
 * none) into *out; "all" writes the default set (cumulative, last, votes,
 * none, then cumulative and none with 4 sinks) to out[0 .. cap-1]. Returns
 * the number of specs written, 0 for text it does not know (or no room). */
size_t bench_scorer_parse(const char *text, bench_scorer_spec *out,
                          size_t cap);

/* Times each (spec, budget, cadence) on `steps` decode-4096 steps and
 * prints one line each: the library's observe+evict cost per step, the
 * memcpy floor of the same rows and their ratio. Returns 0, or 1 after
 * reporting a failure (a refused create or call, victims that differ from
 * the reference model's). */
int bench_decode_scorers(uint32_t steps, const bench_scorer_spec *specs,
                         size_t n_specs, const uint32_t *budgets,
                         size_t n_budgets, const uint32_t *cadences,
                         size_t n_cadences, const bench_options *opt);

#endif /* PB_BENCH_DECODE_SCORER_H */
