/*
 * workload_rng.c - xoshiro128** as the decode-4096 trace specifies it (see
 * workload_rng.h). Every operation is on uint32_t so that wrapping is
 * defined and identical everywhere.
 */
#include "workload_rng.h"

static uint32_t rotl32(uint32_t x, unsigned k) {
    return (x << k) | (x >> (32u - k));
}

void pb_wl_rng_seed(pb_wl_rng *rng, uint32_t seed) {
    uint32_t state = seed;
    for (int i = 0; i < 4; ++i) {
        state += 0x9E3779B9u;
        uint32_t z = state;
        z ^= z >> 16;
        z *= 0x21F0AAADu;
        z ^= z >> 15;
        z *= 0x735A2D97u;
        z ^= z >> 15;
        rng->s[i] = z;
    }
    if ((rng->s[0] | rng->s[1] | rng->s[2] | rng->s[3]) == 0u) rng->s[0] = 1u;
}

uint32_t pb_wl_rng_next(pb_wl_rng *rng) {
    uint32_t *s = rng->s;
    const uint32_t result = rotl32(s[1] * 5u, 7) * 9u;
    const uint32_t t = s[1] << 9;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl32(s[3], 11);
    return result;
}

uint32_t pb_wl_rng_next_int(pb_wl_rng *rng, uint32_t bound) {
    /* (2^32 - bound) mod bound, computed in uint32 as (-bound) % bound. */
    const uint32_t threshold = (0u - bound) % bound;
    for (;;) {
        const uint32_t v = pb_wl_rng_next(rng);
        if (v >= threshold) return v % bound;
    }
}
