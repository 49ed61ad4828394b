/*
 * fp_env.h - x86's flush-to-zero and denormals-are-zero bits, for the tests
 * that run the library with them set, as some inference runtimes leave them
 * on their threads (docs/spec.md §1, item 2: results are those of the
 * operations in that environment; whether a weight is valid is not
 * changed by it). PBT_HAVE_DAZ is 0 where there are no such bits, and
 * those tests skip.
 */
#ifndef PB_TESTS_FP_ENV_H
#define PB_TESTS_FP_ENV_H

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
#else
#define PBT_HAVE_DAZ 0
#endif

#endif /* PB_TESTS_FP_ENV_H */
