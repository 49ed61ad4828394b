/*
 * bench_shape.c - the synthetic attention rows of the model-shape
 * benchmarks (see bench_shape.h).
 */
#include "bench_shape.h"

#include "bench_common.h"

void bench_shape_fill(float *rows, uint32_t rowcap, uint64_t seed,
                      uint32_t layer) {
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
