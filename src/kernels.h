/*
 * kernels.h - the table of the engine's hot loops (one variant per
 * instruction set, simd_kernels.c) and the row copy that may bypass the
 * caches (row_copy.c). It says what each loop computes, bit for bit; the
 * policy rules that use them live elsewhere. Not installed.
 */
#ifndef PB_SRC_KERNELS_H
#define PB_SRC_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "weight_check.h"

/* ------------------------------------------------------------------------ */
/* Hot loops (simd_kernels.c)                                               */

#define PB__WEIGHT_BAD 1u /* NaN, infinite or negative (-0.0 is allowed) */
#define PB__WEIGHT_BIG 2u /* at or above the filter's quantising limit */

/* One variant of the hot loops. All variants give bit-identical results. */
typedef struct pb__kernels {
    const char *name; /* "generic", "avx2" or "avx512" */
    /* out[j] = init[j] (0.0 if init is NULL) + row row_begin + ... +
     * row row_end-1 of column col + j, added in row order, j = 0 .. n-1.
     * It may read up to `avail` cells from col on, in every row and in
     * init (whole groups of columns are summed). With rows 0 .. obs_window
     * and no init, out[j] is column col + j's window score. */
    void (*fold_rows)(const float *ring, size_t row_stride,
                      uint32_t row_begin, uint32_t row_end, size_t col,
                      size_t n, const double *init, size_t avail,
                      double *out);
    /* For the live columns of ranks 0 .. n-1: q[col] = (restart ? 0.0 :
     * q[col]) + row[col]. */
    void (*prefix_add)(const float *row, double *q, const size_t *holes,
                       size_t n_holes, size_t n, unsigned restart);
    /* For ranks 0 .. n-1 in their columns (past the holes): the row's
     * cell = weights[rank], and the column's sum += q(new) - q(old).
     * Returns 1 if q rounded some new weight (w * scale not an integer;
     * or, in a directed rounding mode, perhaps when it did not). */
    unsigned (*store_sums)(float *row, const float *weights, double *sums,
                           const size_t *holes, size_t n_holes, size_t n,
                           double scale);
    /* sums[j] += q(src[j]); sets *rounded to 1 if q rounded some src[j]
     * (as store_sums says it); returns 1 if some src[j] is at or above the
     * limit (bit pattern of a float). */
    unsigned (*quantise_add)(const float *src, double *sums, size_t n,
                             double scale, uint32_t limit, unsigned *rounded);
    /* PB__WEIGHT_BAD | PB__WEIGHT_BIG as they apply to w[0 .. n-1]. */
    unsigned (*weight_flags)(const float *w, size_t n, uint32_t limit);
    /* x[i] <- max(x[i], x[i+d]) for i + d < n. */
    void (*widen)(double *x, size_t n, size_t d);
    /* out[j] = max(x[j], y[j]), j < n; out may be neither x nor y. */
    void (*max_of)(const double *x, const double *y, double *out, size_t n);
    /* The least j < n with x[j] < t, or n if there is none. */
    size_t (*first_below)(const double *x, size_t n, double t);
    /* The least bit pattern among x[0 .. n-1], n >= 1: the pattern of the
     * least value, for doubles >= +0 (not -0.0), whose patterns order as
     * their values do; with at not NULL also the first j holding it. */
    uint64_t (*least_bits)(const double *x, size_t n, size_t *at);
    /* The least of x[0 .. n-1], n >= 1; with at not NULL also the first j
     * holding it. */
    uint32_t (*least_u32)(const uint32_t *x, size_t n, size_t *at);
    /* The score updates of the other scorers over x[0 .. n-1].
     * cumulative: x[i] += (double)w[i] (the least comes from the scorer's
     * bounds, score_sources.c); */
    void (*add_weights)(double *x, const float *w, size_t n);
    /* last: the update returns the least new record among
     * x[lo .. hi-1] (lo <= hi <= n; as least_u32) and writes to *at the
     * first j holding it (for lo == hi: UINT32_MAX and lo); with at NULL
     * it only updates (returning 0; lo and hi are not read):
     * x[i] = the bits of w[i] with the sign cleared. */
    uint32_t (*record_least)(uint32_t *x, const float *w, size_t lo,
                             size_t hi, size_t n, size_t *at, unsigned *bad);
    /* votes: x[i] += 1 where w[i] > bar and x[i] < UINT32_MAX (the least
     * from the bounds too).
     * Last and votes check the weights as they read them: *bad |=
     * PB__WEIGHT_BAD if some w[i] is bad (x is updated all the same). */
    void (*votes)(uint32_t *x, const float *w, size_t n, float bar,
                  unsigned *bad);
    /* Bit j % 64 of bits[j / 64] is set iff x[j] < t, j < n; the rest of
     * the last word is 0. Writes ceil(n / 64) words. Every x[j] >= +0 and
     * t > 0, all finite (the quantised sums and a bound above them). */
    void (*below_bits)(const double *x, size_t n, double t, uint64_t *bits);
} pb__kernels;


/* The fastest variant this CPU runs; the baseline one; and every variant
 * this CPU runs (count returned, at most cap written) for tests. */
const pb__kernels *pb__kernels_best(void);
const pb__kernels *pb__kernels_generic(void);
size_t pb__kernels_available(const pb__kernels **out, size_t cap);

/* dst[0 .. n-1] = src[0 .. n-1] (no overlap); with `streamed`, written
 * past the caches where the target can (non-temporal stores on x86), else
 * as memcpy. Not a variant: the values are the same. pb__copy_fence(
 * streamed) must follow the last such copy of a batch (one store fence on
 * x86, nothing elsewhere). */
void pb__copy_floats(float *dst, const float *src, size_t n, int streamed);
void pb__copy_fence(int streamed);

#endif /* PB_SRC_KERNELS_H */
