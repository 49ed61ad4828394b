/*
 * pooling.h - pooling of scores across neighbouring ranks (pooling.c):
 * max pooling, by doubling or a monotonic queue, and average pooling in a
 * fixed sum order. Not installed.
 */
#ifndef PB_SRC_POOLING_H
#define PB_SRC_POOLING_H

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"

/* Scratch bytes pb__pool_max and pb__pool_avg need for arrays of up to
 * `n_max` scores with this kernel; 0 if none. Never overflows for
 * n_max < SIZE_MAX / 16. */
size_t pb__pool_work_bytes(uint32_t pool_kernel, size_t n_max);

/* x[i] <- max of x[max(0, i-h) .. min(n-1, i+h)], in place, for scores
 * x[i] >= +0. O(n) for every h: doubling for small h, a monotonic queue
 * beyond. work: pb__pool_work_bytes(2h+1, n) bytes, 8-aligned. */
void pb__pool_max(double *x, size_t n, size_t h, void *work,
                  size_t work_bytes);

/* The half-width up to which max pooling doubles instead of queueing. */
#define PB__DOUBLING_MAX_HALF ((size_t)15)

/* out[k] = max of x[max(0, i-h) .. min(n-1, i+h)] over the whole ranked
 * array, for i = i0 + k, k = 0 .. m-1 (h <= PB__DOUBLING_MAX_HALF): the same
 * arithmetic as pb__pool_max, a block at a time, on a span the caller no
 * longer needs. x[0 .. len-1] holds ranks lo .. lo+len-1 (lo = max(0, i0-h),
 * the span reaching h past the block or to the end), the block starts at
 * x[off], and x is overwritten. */
void pb__window_max_span(const pb__kernels *k, double *x, size_t len,
                         size_t h, size_t off, size_t m, double *out);

/* x[i] <- (0.0 + x[lo] + ... + x[hi]) / kernel, lo = max(0, i-h),
 * hi = min(n-1, i+h), summed in ascending order: the out-of-range
 * neighbours count as zeros. O(n * min(kernel, n)): the sum order is part
 * of the definition, so no running sum may replace it. */
void pb__pool_avg(double *x, size_t n, size_t h, uint32_t kernel, void *work,
                  size_t work_bytes);

#endif /* PB_SRC_POOLING_H */
