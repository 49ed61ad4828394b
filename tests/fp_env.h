/*
 * fp_env.h - the validity of a weight as the library reads it, and x86's
 * flush-to-zero and denormals-are-zero bits, for the tests that run the
 * library with them set, as some inference runtimes leave them
 * on their threads (docs/spec.md §1, item 2: results are those of the
 * operations in that environment; whether a weight is valid is not
 * changed by it). PBT_HAVE_DAZ is 0 where there are no such bits, and
 * those tests skip.
 */
#ifndef PB_TESTS_FP_ENV_H
#define PB_TESTS_FP_ENV_H

#include <stdint.h>
#include <string.h>

/* Whether a weight is valid (docs/spec.md §1, item 2: finite, not
 * negative, -0.0 valid), from its bit pattern: the one reading that holds
 * in any floating-point environment, as the library's does. A test oracle
 * written with float compares would take a negative subnormal for -0.0
 * under denormals-are-zero. */
static inline int pbt_weight_valid(float w) {
    uint32_t b;
    memcpy(&b, &w, sizeof b);
    return (b & 0x7F800000u) != 0x7F800000u &&
           ((b >> 31) == 0u || b == 0x80000000u);
}

#if defined(__SSE2__) || defined(_M_X64)
#include <xmmintrin.h>

#define PBT_HAVE_DAZ 1

/* Sets both bits; returns the MXCSR to give back to pbt_daz_end. */
static inline unsigned pbt_daz_begin(void) {
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040u);
    return csr;
}

static inline void pbt_daz_end(unsigned csr) { _mm_setcsr(csr); }

/* For a cmocka test: runs test(state) with both bits set, or skips where
 * there are none. */
#define PBT_RUN_UNDER_DAZ(test, state)                                       \
    do {                                                                     \
        const unsigned csr_ = pbt_daz_begin();                               \
        test(state);                                                         \
        pbt_daz_end(csr_);                                                   \
    } while (0)
#else
#define PBT_HAVE_DAZ 0
#define PBT_RUN_UNDER_DAZ(test, state)                                       \
    do {                                                                     \
        (void)(state);                                                       \
        skip(); /* no such bits on this architecture */                     \
    } while (0)
#endif

#endif /* PB_TESTS_FP_ENV_H */
