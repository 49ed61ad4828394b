/*
 * bench_shape.h - the synthetic attention of the model-shape benchmarks
 * (bench_model_shape, bench_pair): the rows of weights each instance is
 * given, made the same way for both so that they measure the same work.
 * Calls nothing of the library.
 */
#ifndef PB_BENCH_SHAPE_H
#define PB_BENCH_SHAPE_H

#include <stddef.h>
#include <stdint.h>

/* Rows of pre-generated weights per instance; token k uses row
 * k mod BENCH_SHAPE_ROWS (bench_shape_row), cut to the held count. */
#define BENCH_SHAPE_ROWS 16u

/* How many positions an instance holds at steady state: its layer's share,
 * at least recent + 1 (33), as the library's effective share. */
static inline uint32_t bench_shape_steady(uint32_t share) {
    return share > 32u ? share : 33u;
}

/* Floats per pool row: room for the steady count plus the largest cadence,
 * padded to 16 floats so that every row starts 64-aligned. */
static inline uint32_t bench_shape_rowcap(uint32_t steady,
                                          uint32_t max_cadence) {
    return (steady + max_cadence + 15u) / 16u * 16u;
}

/* The calls that bring an instance to its steady count: positions 1 ..
 * steady-1, the last BENCH_SHAPE_FILL_OBSERVED of them with pool rows (so
 * that the whole observation window is populated), the others without
 * attention. */
#define BENCH_SHAPE_FILL_OBSERVED 16u

/* The position of token k: above every fill position of every layer
 * (layer 0's steady count is the largest). */
static inline uint64_t bench_shape_pos(uint32_t steady0, uint64_t k) {
    return (uint64_t)steady0 + 1000u + k;
}

/* Row k of a pool of BENCH_SHAPE_ROWS rows of rowcap floats. */
static inline const float *bench_shape_row(const float *pool,
                                           uint32_t rowcap, uint64_t k) {
    return pool + (size_t)(k % BENCH_SHAPE_ROWS) * rowcap;
}

/* Fills rows[0 .. BENCH_SHAPE_ROWS * rowcap - 1], the pool of the
 * instance of KV head `head` of `layer`: in each row, a heavy-tailed noise
 * (u^3), four attention sinks (+4 before normalising) and a few strong
 * positions (+2 where u > 0.995), normalised over the whole row. The same
 * (head, layer, rowcap) give the same rows on every platform. */
void bench_shape_fill(float *rows, uint32_t rowcap, uint32_t head,
                      uint32_t layer);

#endif /* PB_BENCH_SHAPE_H */
