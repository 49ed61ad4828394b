/*
 * bench_shape.h - the synthetic attention of the model-shape benchmarks
 * (bench_model_shape, bench_pair): the rows of weights each instance is
 * given, made the same way for both so that they measure the same work.
 * Calls nothing of the library.
 */
#ifndef PB_BENCH_SHAPE_H
#define PB_BENCH_SHAPE_H

#include <stdint.h>

/* Rows of pre-generated weights per instance; token k uses row
 * k mod BENCH_SHAPE_ROWS, cut to the held count. */
#define BENCH_SHAPE_ROWS 16u

/* The seed of the model shape's rows: instance i of head h (of any layer)
 * takes BENCH_SHAPE_SEED ^ (h << 32). */
#define BENCH_SHAPE_SEED 11u

/* Fills rows[0 .. BENCH_SHAPE_ROWS * rowcap - 1], BENCH_SHAPE_ROWS rows of
 * rowcap floats: in each, a heavy-tailed noise (u^3), four attention sinks
 * (+4 before normalising) and a few strong positions (+2 where u > 0.995),
 * normalised over the whole row. The same (seed, layer) give the same
 * rows on every platform. */
void bench_shape_fill(float *rows, uint32_t rowcap, uint64_t seed,
                      uint32_t layer);

#endif /* PB_BENCH_SHAPE_H */
