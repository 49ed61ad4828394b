/*
 * window_ring.c - the observation ring: obs_window rows of float weights,
 * one column per held position (see struct pb_kvcache).
 *
 * Owns the row store of a decode step, clearing a new column, the exact
 * window scores, the rank -> column map (ranks skip the dead columns a
 * filtered evict leaves behind) and the compaction of rows. It knows
 * nothing of positions, budgets or pooling.
 *
 * Why slot-major: a decode step writes the same slot for every held
 * position, so in this layout it is one contiguous copy; and the window
 * scores of many columns are computed row by row with independent
 * accumulators per column (simd_kernels.c), which vectorises across columns
 * while each column is still summed in exactly the defined order (0.0, then
 * slot 0, 1, ..., obs_window-1). The result is bit-identical to a plain
 * scalar fold on every code path, because no column's additions are ever
 * reordered.
 */
#include <assert.h>
#include <string.h>

#include "window_internal.h"

size_t pb__ring_column_of(const size_t *holes, size_t n_holes, size_t rank) {
    /* holes[k] - k does not decrease with k; rank r skips every hole with
     * holes[k] - k <= r. Binary search for how many those are. */
    size_t lo = 0, hi = n_holes;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2u;
        if (holes[mid] - mid <= rank)
            lo = mid + 1u;
        else
            hi = mid;
    }
    return rank + lo;
}

pb__runs pb__runs_at(const size_t *holes, size_t n_holes, size_t rank) {
    /* The holes before rank's column are exactly those counted by
     * pb__ring_column_of. */
    const size_t col = pb__ring_column_of(holes, n_holes, rank);
    pb__runs it = {rank, col, col - rank};
    return it;
}

void pb__ring_store_row(float *ring, size_t row_stride, uint32_t slot,
                        const float *weights, size_t n, const size_t *holes,
                        size_t n_holes, int streamed) {
    float *row = ring + (size_t)slot * row_stride;
    pb__runs it = {0, 0, 0};
    pb__run run;
    while (pb__run_next(&it, holes, n_holes, n, &run)) {
        assert(run.col + run.len <= row_stride);
        pb__copy_floats(row + run.col, weights + run.rank, run.len, streamed);
    }
    pb__copy_fence(streamed);
}

void pb__ring_clear_column(float *ring, size_t row_stride,
                           uint32_t obs_window, size_t col) {
    assert(col < row_stride);
    for (uint32_t s = 0; s < obs_window; ++s)
        ring[(size_t)s * row_stride + col] = 0.0f;
}

void pb__ring_clear_columns(float *ring, size_t row_stride,
                            uint32_t obs_window, size_t col, size_t count) {
    assert(col + count <= row_stride);
    if (count == 0u) return;
    for (uint32_t s = 0; s < obs_window; ++s)
        memset(ring + (size_t)s * row_stride + col, 0, count * sizeof *ring);
}

double pb__ring_window_score(const float *ring, size_t row_stride,
                             uint32_t obs_window, size_t col,
                             const size_t *lazy, size_t n_lazy,
                             uint64_t dense_rows) {
    double sum = 0.0;
    if (n_lazy == 0u) {
        for (uint32_t s = 0; s < obs_window; ++s)
            sum += (double)ring[(size_t)s * row_stride + col];
        return sum;
    }
    const size_t old_col = pb__ring_column_of(lazy, n_lazy, col);
    for (uint32_t s = 0; s < obs_window; ++s) {
        const size_t c = ((dense_rows >> s) & 1u) ? col : old_col;
        sum += (double)ring[(size_t)s * row_stride + c];
    }
    return sum;
}

void pb__ring_window_scores(const pb__kernels *k, const float *ring,
                            size_t row_stride, uint32_t obs_window, size_t n,
                            const size_t *holes, size_t n_holes,
                            double *out) {
    pb__runs it = {0, 0, 0};
    pb__run run;
    while (pb__run_next(&it, holes, n_holes, n, &run))
        k->fold_rows(ring, row_stride, 0u, obs_window, run.col, run.len, NULL,
                     row_stride - run.col, out + run.rank);
}

void pb__ring_window_scores_range(const pb__kernels *k, const float *ring,
                                  size_t row_stride, uint32_t obs_window,
                                  const size_t *holes, size_t n_holes,
                                  size_t first, size_t count,
                                  const double *prefix, size_t prefix_len,
                                  uint32_t row_begin, double *out) {
    assert(prefix != NULL || row_begin == 0u);
    const size_t limit =
        prefix != NULL && prefix_len < row_stride ? prefix_len : row_stride;
    pb__runs it = pb__runs_at(holes, n_holes, first);
    pb__run run;
    while (pb__run_next(&it, holes, n_holes, first + count, &run))
        k->fold_rows(ring, row_stride, row_begin, obs_window, run.col,
                     run.len, prefix != NULL ? prefix + run.col : NULL,
                     limit - run.col, out + (run.rank - first));
}

/* Copies the set columns of one array of elem-byte elements to its front;
 * returns their count. */
static size_t compact_row(unsigned char *row, size_t elem,
                          const uint64_t *alive, size_t n) {
    size_t w = 0;
    const size_t words = (n + 63u) / 64u;
    for (size_t wi = 0; wi < words; ++wi) {
        uint64_t bits = alive[wi];
        const size_t base = wi * 64u;
        while (bits != 0u) {
            /* One run of consecutive survivors per iteration. */
            const unsigned start = pb__lowest_bit(bits);
            const uint64_t rest = ~(bits >> start);
            const unsigned end =
                rest == 0u ? 64u : start + pb__lowest_bit(rest);
            const size_t len = (size_t)(end - start);
            if (w != base + start)
                memmove(row + w * elem, row + (base + start) * elem,
                        len * elem);
            w += len;
            bits = end < 64u ? bits & ~((UINT64_C(1) << end) - 1u) : 0u;
        }
    }
    return w;
}

void pb__ring_move_row(float *row, const size_t *dead, size_t n_dead,
                       size_t n) {
    pb__runs it = {0, 0, 0};
    pb__run run; /* run.rank: a column of the new layout, run.col: old */
    while (pb__run_next(&it, dead, n_dead, n, &run))
        if (run.col != run.rank)
            memmove(row + run.rank, row + run.col, run.len * sizeof *row);
}

void pb__ring_compact(float *ring, size_t row_stride, uint32_t obs_window,
                      const uint64_t *alive, size_t n_cols) {
    for (uint32_t s = 0; s < obs_window; ++s)
        (void)compact_row((unsigned char *)(ring + (size_t)s * row_stride),
                          sizeof *ring, alive, n_cols);
}

void pb__compact_columns(void *array, size_t elem_size, const uint64_t *alive,
                         size_t n_cols) {
    (void)compact_row((unsigned char *)array, elem_size, alive, n_cols);
}
