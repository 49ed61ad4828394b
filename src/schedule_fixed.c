/*
 * schedule_fixed.c - exact integer arithmetic for the allocation family:
 * the fixed-point log2 / 2^-y with which curve and geometric weights are
 * defined (docs/spec.md §12.8), on the 128-bit kit of u128.h. No floating point, no libm, no compiler
 * extensions, so every platform computes the same bits.
 *
 * Owns arithmetic only; the schedules themselves are in schedule.c.
 */
#include "schedule_internal.h"

#define LO32(x) ((x) & 0xFFFFFFFFu)

/* floor(sqrt(hi:lo)), bit by bit; the value is below 2^126 here. */
static uint64_t isqrt128(uint64_t hi, uint64_t lo) {
    uint64_t root = 0;
    for (int bit = 63; bit >= 0; --bit) {
        const uint64_t cand = root | (UINT64_C(1) << bit);
        uint64_t sh, sl;
        pb__mul64(cand, cand, &sh, &sl);
        if (sh < hi || (sh == hi && sl <= lo)) root = cand;
    }
    return root;
}

void pb__exp2_constants(uint64_t c[32]) {
    uint64_t prev = UINT64_C(1) << 63; /* 2 in Q62 */
    for (int i = 0; i < 32; ++i) {
        /* prev * 2^62 as (hi:lo) */
        const uint64_t hi = prev >> 2, lo = prev << 62;
        prev = isqrt128(hi, lo);
        c[i] = prev;
    }
}

/* floor(a * b / 2^62) for a, b < 2^64 whose result fits in 64 bits. */
static uint64_t mul_q62(uint64_t a, uint64_t b) {
    uint64_t hi, lo;
    pb__mul64(a, b, &hi, &lo);
    return (hi << 2) | (lo >> 62);
}

uint64_t pb__log2_q32(uint32_t n) {
    const int k = 63 - pb__leading_zeros(n); /* floor(log2 n), 0 .. 31 */
    uint64_t z = (uint64_t)n << (62 - k); /* n / 2^k in Q62: [1, 2) */
    uint64_t result = (uint64_t)k << 32;
    for (int i = 1; i <= 32; ++i) {
        z = mul_q62(z, z); /* [1, 4) */
        if (z >= (UINT64_C(1) << 63)) {
            z >>= 1;
            result |= UINT64_C(1) << (32 - i);
        }
    }
    return result;
}

uint32_t pb__exp2_neg_q31(uint64_t y, const uint64_t c[32]) {
    const uint64_t k = y >> 32, f = LO32(y);
    if (f == 0u) return k <= 31u ? (uint32_t)1u << (31u - k) : 0u;
    /* 2^-y = 2^(g / 2^32) / 2^(k+1) with g = 2^32 - f in (0, 2^32). */
    if (k >= 31u) return 0u; /* below 2^31 * 2^-32 */
    const uint64_t g = (UINT64_C(1) << 32) - f;
    uint64_t p = UINT64_C(1) << 62;
    for (int i = 1; i <= 32; ++i)
        if ((g >> (32 - i)) & 1u) p = mul_q62(p, c[i - 1]);
    /* p in [2^62, 2^63); the value is p / 2^62 / 2^(k+1) times 2^31. */
    return (uint32_t)(p >> (32u + k));
}
