/*
 * weight_check.h - the validity test of one attention weight (docs/spec.md
 * section 1, item 2), read from its bits, and the always-inline marker the
 * kernels use. Everything that only checks weights (the attention profile,
 * the head reductions, the layer group, the layer preference) includes this
 * alone; the engine's headers include it too. Not installed.
 */
#ifndef PB_SRC_WEIGHT_CHECK_H
#define PB_SRC_WEIGHT_CHECK_H

#include <stdint.h>
#include <string.h>

/* A static function inlined whatever the compiler's size heuristics say:
 * the kernels' bodies (inlined into functions of another target) and the
 * steps of a one-victim decode step, where a call costs a measurable share
 * (docs/performance.md). */
#if defined(__GNUC__) || defined(__clang__)
#define PB__ALWAYS_INLINE static inline __attribute__((always_inline))
#else
#define PB__ALWAYS_INLINE static inline
#endif

/* Nonzero where the bit pattern b of an attention weight makes it invalid
 * (docs/spec.md §1, item 2): above the largest finite positive float (+inf,
 * NaN, or the sign bit set), -0.0 excepted. Read from the bits, so no
 * floating-point environment changes it (x86's denormals-are-zero mode
 * reads a negative subnormal as -0.0), and loops over it vectorise. */
PB__ALWAYS_INLINE uint32_t pb__weight_bad_bits(uint32_t b) {
    return (uint32_t)(b > UINT32_C(0x7F7FFFFF)) &
           (uint32_t)(b != UINT32_C(0x80000000));
}

/* pb__weight_bad_bits of a weight. */
PB__ALWAYS_INLINE uint32_t pb__weight_bad(float w) {
    uint32_t b;
    memcpy(&b, &w, sizeof b);
    return pb__weight_bad_bits(b);
}

/* The same rule for a weight held as a double (a layer's preference):
 * nonzero above the largest finite positive double, -0.0 excepted. */
PB__ALWAYS_INLINE uint64_t pb__weight_bad_double(double w) {
    uint64_t b;
    memcpy(&b, &w, sizeof b);
    return (uint64_t)(b > UINT64_C(0x7FEFFFFFFFFFFFFF)) &
           (uint64_t)(b != UINT64_C(0x8000000000000000));
}

#endif /* PB_SRC_WEIGHT_CHECK_H */
