/*
 * u128.h - the one kit of exact unsigned 128-bit arithmetic, built from
 * 64-bit halves and 32-bit limbs (no compiler extension, so every
 * platform computes the same bits): the budget arithmetic
 * (pyramid_budget.c) and the allocation family (schedule.c,
 * schedule_fixed.c) share it. The small operations are inline; the
 * divisions are u128.c. Not installed.
 */
#ifndef PB_SRC_U128_H
#define PB_SRC_U128_H

#include <stddef.h>
#include <stdint.h>

/* An unsigned 128-bit integer as two 64-bit halves. */
typedef struct pb__u128 {
    uint64_t hi;
    uint64_t lo;
} pb__u128;

static inline pb__u128 pb__u128_of(uint64_t v) {
    pb__u128 r = {0u, v};
    return r;
}

static inline int pb__u128_lt(pb__u128 a, pb__u128 b) {
    return a.hi < b.hi || (a.hi == b.hi && a.lo < b.lo);
}

static inline pb__u128 pb__u128_add(pb__u128 a, pb__u128 b) {
    pb__u128 r;
    r.lo = a.lo + b.lo;
    r.hi = a.hi + b.hi + (r.lo < a.lo ? 1u : 0u);
    return r;
}

/* a - b; requires a >= b. */
static inline pb__u128 pb__u128_sub(pb__u128 a, pb__u128 b) {
    pb__u128 r;
    r.lo = a.lo - b.lo;
    r.hi = a.hi - b.hi - (a.lo < b.lo ? 1u : 0u);
    return r;
}

/* The full product of two 64-bit values, from 32-bit limbs. */
static inline pb__u128 pb__u128_mul64(uint64_t a, uint64_t b) {
    const uint64_t a0 = a & 0xFFFFFFFFu, a1 = a >> 32;
    const uint64_t b0 = b & 0xFFFFFFFFu, b1 = b >> 32;
    const uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    const uint64_t mid =
        (p00 >> 32) + (p01 & 0xFFFFFFFFu) + (p10 & 0xFFFFFFFFu);
    pb__u128 r;
    r.lo = (mid << 32) | (p00 & 0xFFFFFFFFu);
    r.hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
    return r;
}

/* The low 128 bits of a * b. Callers only use it where the product fits. */
static inline pb__u128 pb__u128_mul(pb__u128 a, pb__u128 b) {
    pb__u128 r = pb__u128_mul64(a.lo, b.lo);
    r.hi += a.hi * b.lo + a.lo * b.hi;
    return r;
}

static inline pb__u128 pb__u128_shl1(pb__u128 a) {
    pb__u128 r = {(a.hi << 1) | (a.lo >> 63), a.lo << 1};
    return r;
}

/* The leading zero bits of v != 0, in six halving steps. */
static inline int pb__leading_zeros(uint64_t v) {
    int n = 0;
    for (int shift = 32; shift > 0; shift /= 2)
        if ((v >> (64 - shift)) == 0u) {
            v <<= shift;
            n += shift;
        }
    return n;
}

/* q = n / d, *rem = n % d (rem may be NULL), for d != 0. */
pb__u128 pb__u128_divmod(pb__u128 n, pb__u128 d, pb__u128 *rem);

/* The full product a * b as (*hi, *lo). */
static inline void pb__mul64(uint64_t a, uint64_t b, uint64_t *hi,
                             uint64_t *lo) {
    const pb__u128 r = pb__u128_mul64(a, b);
    *hi = r.hi;
    *lo = r.lo;
}

/* (hi:lo) / d with *rem = (hi:lo) % d. Requires d != 0 and hi < d (the
 * quotient fits in 64 bits). */
uint64_t pb__div128(uint64_t hi, uint64_t lo, uint64_t d, uint64_t *rem);

#endif /* PB_SRC_U128_H */
