/*
 * source_kernel_bodies.h - the bodies of the hot loops of the scorers
 * other than the window (the least score and the first rank holding it,
 * the cumulative update, the last scorer's record with its least, the
 * votes), as always-inlined functions. Included by simd_kernels.c only,
 * after it defines PB__INLINE, which compiles them into each variant of
 * pb__kernels; see that file for why the variants agree bit for bit.
 */
#ifndef PB_SRC_SOURCE_KERNEL_BODIES_H
#define PB_SRC_SOURCE_KERNEL_BODIES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

/* The least bit pattern of x[0 .. n-1] (n >= 1), compared as signed
 * 64-bit integers: the patterns of doubles >= +0 are below 2^63 and order
 * as the values do. Eight independent lanes (a vector compare and blend
 * where the target has one), then the lanes' least. */
#define PB__LEAST_LANES 8u
PB__INLINE uint64_t least_bits_body(const double *x, size_t n) {
    int64_t lane[PB__LEAST_LANES];
    for (size_t k = 0; k < PB__LEAST_LANES; ++k) lane[k] = INT64_MAX;
    size_t i = 0;
    for (; i + PB__LEAST_LANES <= n; i += PB__LEAST_LANES)
        for (size_t k = 0; k < PB__LEAST_LANES; ++k) {
            int64_t b;
            memcpy(&b, x + i + k, sizeof b);
            lane[k] = b < lane[k] ? b : lane[k];
        }
    int64_t m = INT64_MAX;
    for (; i < n; ++i) {
        int64_t b;
        memcpy(&b, x + i, sizeof b);
        m = b < m ? b : m;
    }
    for (size_t k = 0; k < PB__LEAST_LANES; ++k) m = lane[k] < m ? lane[k] : m;
    assert(m >= 0);
    return (uint64_t)m;
}

/* least_bits_body and, when at is not NULL, the first index holding it
 * (*at): the first value at most the least. (Not below the double just
 * above it: when the least is 0 that double is subnormal, which x86's
 * denormals-are-zero mode, if the caller set it, reads as 0.) */
PB__INLINE uint64_t least_first_body(const double *x, size_t n, size_t *at) {
    const uint64_t m = least_bits_body(x, n);
    if (at != NULL) {
        double least;
        memcpy(&least, &m, sizeof least);
        *at = first_hit_body(x, n, least, 1);
    }
    return m;
}

PB__INLINE uint32_t least_u32_body(const uint32_t *x, size_t n) {
    uint32_t m = UINT32_MAX;
    for (size_t i = 0; i < n; ++i) m = x[i] < m ? x[i] : m;
    return m;
}

/* The first j < n with x[j] <= t, or n, a chunk at a time as
 * first_hit_body. */
PB__INLINE size_t first_at_most_u32_body(const uint32_t *x, size_t n,
                                         uint32_t t) {
    size_t j = 0;
    for (; j + PB__BELOW_CHUNK <= n; j += PB__BELOW_CHUNK) {
        uint32_t hits = 0;
        for (size_t k = 0; k < PB__BELOW_CHUNK; ++k)
            hits += (uint32_t)(x[j + k] <= t);
        if (hits != 0u) break;
    }
    for (; j < n; ++j)
        if (x[j] <= t) return j;
    return n;
}

/* least_u32_body and, when at is not NULL, the first index holding it
 * (*at). */
PB__INLINE uint32_t least_u32_first_body(const uint32_t *x, size_t n,
                                         size_t *at) {
    const uint32_t m = least_u32_body(x, n);
    if (at != NULL) *at = first_at_most_u32_body(x, n, m);
    return m;
}

/* The cumulative update: x[i] += (double)w[i] for i < n (its least is
 * found through the scorer's bounds, score_sources.c). */
PB__INLINE void add_weights_body(double *restrict x, const float *restrict w,
                                 size_t n) {
    for (size_t i = 0; i < n; ++i) x[i] += (double)w[i];
}

/* The last and votes updates check the weights in the same pass (the
 * caller undoes the update when *bad says one was bad): one read of a row
 * that usually comes from beyond the L1 cache. A run of the last one
 * returns the least new record of its n (UINT32_MAX for none) and ORs its
 * bad bits into *wrong. */
PB__INLINE uint32_t record_run(uint32_t *restrict x, const float *restrict w,
                               size_t n, uint32_t *wrong) {
    uint32_t m = UINT32_MAX, bad = 0u;
    for (size_t i = 0; i < n; ++i) {
        uint32_t b;
        memcpy(&b, w + i, sizeof b);
        bad |= pb__weight_bad_bits(b);
        b &= UINT32_C(0x7FFFFFFF);
        x[i] = b;
        m = b < m ? b : m;
    }
    *wrong |= bad;
    return m;
}

/* The last scorer's update of ranks 0 .. n-1, in one call: with want, the
 * least new record among ranks lo .. hi-1 and the first rank holding it
 * (*at) found on the way (for lo == hi: UINT32_MAX and lo); else the
 * update alone. The votes update has no least: its scorer finds it
 * through bounds (score_sources.c). */
PB__INLINE uint32_t record_least_body(uint32_t *restrict x,
                                      const float *restrict w, size_t lo,
                                      size_t hi, size_t n, size_t *at,
                                      unsigned *bad, int want) {
    uint32_t wrong = 0u, m = 0u;
    if (!want) {
        (void)record_run(x, w, n, &wrong);
    } else {
        (void)record_run(x, w, lo, &wrong);
        m = record_run(x + lo, w + lo, hi - lo, &wrong);
        (void)record_run(x + hi, w + hi, n - hi, &wrong);
        /* Records are one step's attention: the least lies anywhere. */
        *at = lo + first_at_most_u32_body(x + lo, hi - lo, m);
    }
    *bad |= wrong != 0u ? PB__WEIGHT_BAD : 0u;
    return m;
}

PB__INLINE void votes_body(uint32_t *restrict x, const float *restrict w,
                           size_t n, float bar, unsigned *bad) {
    uint32_t wrong = 0u;
    for (size_t i = 0; i < n; ++i) {
        uint32_t b;
        memcpy(&b, w + i, sizeof b);
        wrong |= pb__weight_bad_bits(b);
        x[i] += (uint32_t)(w[i] > bar) & (uint32_t)(x[i] != UINT32_MAX);
    }
    *bad |= wrong != 0u ? PB__WEIGHT_BAD : 0u;
}

#endif /* PB_SRC_SOURCE_KERNEL_BODIES_H */
