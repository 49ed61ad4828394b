/*
 * window_ring.c - the observation ring: obs_window rows of float weights,
 * one column per held position (see struct pb_kvcache).
 *
 * Owns the row store of a decode step, clearing a new column, the exact
 * window scores and the compaction of rows after an evict. It knows nothing
 * of positions, budgets or pooling.
 *
 * Why slot-major: a decode step writes the same slot for every held
 * position, so in this layout it is one contiguous copy; and the window
 * scores of many columns are computed row by row with independent
 * accumulators per column, which vectorises across columns while each
 * column is still summed in exactly the defined order (0.0, then slot 0, 1,
 * ..., obs_window-1). The result is bit-identical to a plain scalar fold on
 * every code path, because no column's additions are ever reordered.
 */
#include <assert.h>
#include <string.h>

#include "policy_internal.h"

/* Columns summed together: the accumulators (2 KiB) stay in L1. */
#define PB__SCORE_BLOCK 256u

void pb__ring_store_row(float *ring, size_t row_stride, uint32_t slot,
                        const float *weights, size_t n) {
    assert(n <= row_stride);
    memcpy(ring + (size_t)slot * row_stride, weights, n * sizeof *weights);
}

void pb__ring_clear_column(float *ring, size_t row_stride,
                           uint32_t obs_window, size_t col) {
    assert(col < row_stride);
    for (uint32_t s = 0; s < obs_window; ++s)
        ring[(size_t)s * row_stride + col] = 0.0f;
}

double pb__ring_window_score(const float *ring, size_t row_stride,
                             uint32_t obs_window, size_t col) {
    double sum = 0.0;
    for (uint32_t s = 0; s < obs_window; ++s)
        sum += (double)ring[(size_t)s * row_stride + col];
    return sum;
}

void pb__ring_window_scores(const float *ring, size_t row_stride,
                            uint32_t obs_window, size_t n, double *out) {
    double acc[PB__SCORE_BLOCK];
    for (size_t c = 0; c < n; c += PB__SCORE_BLOCK) {
        const size_t m = n - c < PB__SCORE_BLOCK ? n - c : PB__SCORE_BLOCK;
        for (size_t k = 0; k < m; ++k) acc[k] = 0.0;
        for (uint32_t s = 0; s < obs_window; ++s) {
            const float *row = ring + (size_t)s * row_stride + c;
            for (size_t k = 0; k < m; ++k) acc[k] += (double)row[k];
        }
        memcpy(out + c, acc, m * sizeof *acc);
    }
}

/* Index of the lowest set bit of v != 0. */
static unsigned lowest_bit(uint64_t v) {
    assert(v != 0u);
#if defined(__GNUC__) || defined(__clang__)
    return (unsigned)__builtin_ctzll(v);
#else
    unsigned i = 0;
    while (((v >> i) & 1u) == 0u) ++i;
    return i;
#endif
}

/* Copies the set columns of one row to its front; returns their count. */
static size_t compact_row(float *row, const uint64_t *alive, size_t n) {
    size_t w = 0;
    const size_t words = (n + 63u) / 64u;
    for (size_t wi = 0; wi < words; ++wi) {
        uint64_t bits = alive[wi];
        const size_t base = wi * 64u;
        while (bits != 0u) {
            /* One run of consecutive survivors per iteration. */
            const unsigned start = lowest_bit(bits);
            const uint64_t rest = ~(bits >> start);
            const unsigned end = rest == 0u ? 64u : start + lowest_bit(rest);
            const size_t len = (size_t)(end - start);
            if (w != base + start)
                memmove(row + w, row + base + start, len * sizeof *row);
            w += len;
            bits = end < 64u ? bits & ~((UINT64_C(1) << end) - 1u) : 0u;
        }
    }
    return w;
}

void pb__ring_compact(float *ring, size_t row_stride, uint32_t obs_window,
                      const uint64_t *alive, size_t n) {
    for (uint32_t s = 0; s < obs_window; ++s)
        (void)compact_row(ring + (size_t)s * row_stride, alive, n);
}
