/*
 * workload_rng.h - the xoshiro128** generator of the policybook decode-4096
 * trace, seeded from one uint32 the way the registry specifies, and its
 * unbiased bounded draw. Owns nothing else: the traces that use it are in
 * trace_decode.h. Deterministic on every platform (uint32 arithmetic only).
 */
#ifndef PB_WORKLOAD_RNG_H
#define PB_WORKLOAD_RNG_H

#include <stdint.h>

typedef struct pb_wl_rng {
    uint32_t s[4];
} pb_wl_rng;

/* Seeds the four state words by four rounds of
 * state += 0x9E3779B9; z = state; z ^= z>>16; z *= 0x21F0AAAD;
 * z ^= z>>15; z *= 0x735A2D97; z ^= z>>15; s[i] = z (all wrapping).
 * An all-zero state becomes s[0] = 1. Seed 7 gives {3838393609,
 * 4210744933, 801465066, 1648156487}. */
void pb_wl_rng_seed(pb_wl_rng *rng, uint32_t seed);

/* The next output, rotl(s1 * 5, 7) * 9, then the xoshiro128** update. */
uint32_t pb_wl_rng_next(pb_wl_rng *rng);

/* A uniform value in [0, bound) for bound >= 1: threshold =
 * (2^32 - bound) mod bound; draws until a value >= threshold and returns
 * it mod bound. */
uint32_t pb_wl_rng_next_int(pb_wl_rng *rng, uint32_t bound);

#endif /* PB_WORKLOAD_RNG_H */
