/*
 * bench_shape.c - the synthetic attention rows of the model-shape
 * benchmarks (see bench_shape.h).
 */
#include "bench_shape.h"

#include "bench_common.h"

/* The seed of every pool: head h takes SEED ^ (h << 32). */
#define SEED UINT64_C(11)

void bench_shape_fill(float *rows, uint32_t rowcap, uint32_t head,
                      uint32_t layer) {
    const uint64_t seed = SEED ^ (uint64_t)head << 32;
    for (unsigned r = 0; r < BENCH_SHAPE_ROWS; ++r) {
        float *row = rows + (size_t)r * rowcap;
        bench_rng rng = {bench_hash3(seed, layer, r)};
        double sum = 0.0;
        for (uint32_t i = 0; i < rowcap; ++i) {
            const double u = bench_rng_unit(&rng);
            double w = u * u * u;
            if (i < 4u) w += 4.0;
            if (u > 0.995) w += 2.0;
            row[i] = (float)w;
            sum += w;
        }
        for (uint32_t i = 0; i < rowcap; ++i)
            row[i] = (float)((double)row[i] / sum);
    }
}
