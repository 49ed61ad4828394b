/*
 * window_sums.c - the window scorer's quantised window sums: one integer
 * sum per held column of q(w) = round(w * 2^K) over the ring's rows, kept
 * exact by every decode step while they are wanted (the step stores its
 * row and adds q(new) - q(old)), rebuilt from the ring when they come
 * back, and the quantiser's scale and limit. Why they bound the exact
 * window scores, and the filtered selection that uses them, is
 * score_filter.c.
 */
#include <assert.h>
#include <string.h>

#include "window_internal.h"

/* Weights below 2^4 are quantised; attention weights are at most 1. */
#define PB__Q_LIMIT_LOG2 4
#define PB__Q_LIMIT_BITS UINT32_C(0x41800000) /* 16.0f */
/* The largest obs_window the filter's bound is checked for. */
#define PB__FILTER_MAX_OBS UINT32_C(65536)

/* The quantiser (simd_kernels.c) is q(w) = round(w * scale) computed as
 * ((double)w * scale + 2^52) - 2^52 for 0 <= w * scale < 2^51: adding 2^52
 * leaves no fraction bits, so the sum rounds to an integer (within 1 in any
 * rounding mode), and subtracting 2^52 is exact. The product is exact
 * (scale is a power of two), so contracting it into an FMA changes
 * nothing. */

void pb__filter_configure(pb__window *p) {
    const uint32_t obs = p->obs_window;
    p->stream_ok = p->c.cfg.pool == (uint32_t)PB_POOL_MAX &&
                   p->half_kernel <= PB__DOUBLING_MAX_HALF;
    p->filter_ok = p->stream_ok && obs <= PB__FILTER_MAX_OBS;
    /* K = 53 - 4 - ceil(log2(W + 2)) - 1: then W + 1 quantised weights,
     * each at most 2^(K+4) + 1, add up to less than 2^53, and every
     * w * 2^K is below 2^51. For W <= 2^16, K >= 30. */
    unsigned lg = 0;
    while (((uint64_t)1 << lg) < (uint64_t)obs + 2u) ++lg;
    const int shift = 53 - PB__Q_LIMIT_LOG2 - (int)lg - 1;
    double scale = 1.0;
    for (int i = 0; i < shift; ++i) scale *= 2.0;
    p->q_scale = scale;
    p->c.q_limit_bits = PB__Q_LIMIT_BITS;
}

int pb__filter_rebuild(pb__window *p) {
    double *sums = p->scores; /* by column */
    const size_t n = p->c.kept;
    pb__runs it = {0, 0, 0};
    pb__run run;
    while (pb__run_next(&it, p->holes, p->n_holes, n, &run))
        memset(sums + run.col, 0, run.len * sizeof *sums);
    /* A hole's sum is 0 while the sums are kept: the scan's bound reads
     * it (see window_max_at). */
    for (size_t t = 0; t < p->n_holes; ++t) sums[p->holes[t]] = 0.0;
    unsigned big = 0u;
    p->rounded_rows = 0u;
    for (uint32_t s = 0; s < p->obs_window; ++s) {
        const float *row = p->ring + (size_t)s * p->row_stride;
        pb__runs rit = {0, 0, 0};
        unsigned rounded = 0u;
        while (pb__run_next(&rit, p->holes, p->n_holes, n, &run))
            big |= p->c.k->quantise_add(row + run.col, sums + run.col, run.len,
                                      p->q_scale, p->c.q_limit_bits, &rounded);
        if (rounded && s < 64u) p->rounded_rows |= UINT64_C(1) << s;
    }
    return big == 0u;
}

void pb__filter_store_row(pb__window *p, const float *weights, size_t n) {
    /* The row's held cells are all rewritten, so its bit is the new
     * weights' alone (a dropped column's cells are held no more). */
    const unsigned rounded =
        p->c.k->store_sums(p->ring + (size_t)p->slot * p->row_stride, weights,
                         p->scores, p->holes, p->n_holes, n, p->q_scale);
    if (p->slot < 64u) {
        const uint64_t bit = UINT64_C(1) << p->slot;
        p->rounded_rows = rounded ? p->rounded_rows | bit
                                  : p->rounded_rows & ~bit;
    }
}
