/*
 * test_rng.h - the one random-number generator of the tests: splitmix64
 * (Steele, Lea, Flood 2014), header-only so every suite and helper library
 * draws the same sequence from the same seed on every platform and build.
 * Not for the library (which draws nothing) nor bench/ (bench_common has
 * its own, to keep the benchmarks free of test code).
 */
#ifndef PB_TESTS_TEST_RNG_H
#define PB_TESTS_TEST_RNG_H

#include <stdint.h>

typedef struct pbt_rng {
    uint64_t state;
} pbt_rng;

static inline uint64_t pbt_next(pbt_rng *g) {
    uint64_t z = (g->state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Uniform in [0, n) for n >= 1 (modulo bias below 2^-32: irrelevant here). */
static inline uint32_t pbt_below(pbt_rng *g, uint32_t n) {
    return (uint32_t)(pbt_next(g) % n);
}

/* Uniform in [0, 1), 53 bits. */
static inline double pbt_unit(pbt_rng *g) {
    return (double)(pbt_next(g) >> 11) * 0x1p-53;
}

#endif
