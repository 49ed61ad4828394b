/*
 * selection.c - which k of n scores are the lowest, ties to the lower index,
 * in O(n) per pass and without moving or sorting anything.
 *
 * Owns the radix select on the bit patterns of non-negative doubles (which
 * order exactly like the values) and its twin on 32-bit keys (vote counts,
 * float bits), and nothing else: callers apply the
 * resulting cut in index order with pb__cut_takes, which is what makes ties
 * go to the lower index.
 *
 * Each pass histograms the next 8 bits of the keys that share the prefix
 * found so far, skipping the leading bits all keys share; the search stops
 * as soon as the bucket holding the k-th key is taken whole, or when the
 * prefix is the whole key (then only ties remain). So a pass never does
 * more than one read per key, there are at most 8, and for spread-out
 * scores usually 2 or 3.
 */
#include <assert.h>
#include <string.h>

#include "selection.h"

uint64_t pb__key_bits(double v) {
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    return b;
}

/* Number of significant bits of v != 0. */
static unsigned bit_length(uint64_t v) {
    assert(v != 0u);
#if defined(__GNUC__) || defined(__clang__)
    return 64u - (unsigned)__builtin_clzll(v);
#else
    unsigned n = 0;
    while (v != 0u) {
        v >>= 1;
        ++n;
    }
    return n;
#endif
}

/* Key i: the bit pattern of a non-negative double (wide) or a 32-bit
 * key. */
static inline uint64_t key_at(const void *keys, int wide, size_t i) {
    if (wide) {
        const uint64_t b = pb__key_bits(((const double *)keys)[i]);
        assert(b >> 63 == 0u); /* no negative key, not even -0.0 */
        return b;
    }
    return ((const uint32_t *)keys)[i];
}

/* The search over either kind of key (`wide` is a constant in each caller,
 * so each gets its own loop). */
static inline void select_lowest(const void *keys, int wide, size_t n,
                                 size_t k, size_t *hist, pb__cut *out) {
    assert(k <= n);
    if (k == 0u) { /* nothing is below 0 */
        out->below = 0u;
        out->take_equal = 0u;
        return;
    }
    if (k == n) { /* every key is below 2^63 (a non-negative double), or
                     below 2^32 */
        out->below = UINT64_C(1) << (wide ? 63u : 32u);
        out->take_equal = 0u;
        return;
    }

    uint64_t lo = UINT64_MAX, hi = 0u;
    for (size_t i = 0; i < n; ++i) {
        const uint64_t b = key_at(keys, wide, i);
        lo = b < lo ? b : lo;
        hi = b > hi ? b : hi;
    }
    if (lo == hi) {
        out->below = lo;
        out->take_equal = k;
        return;
    }

    /* Invariant: the k-th smallest key has the bits `prefix` above bit
     * `top`, and is the rank-th smallest of the keys that do. */
    unsigned top = bit_length(lo ^ hi); /* <= 63: the top bits agree */
    uint64_t prefix = lo >> top;
    size_t rank = k;
    for (;;) {
        const unsigned shift = top > 8u ? top - 8u : 0u;
        const unsigned width = top - shift;
        const size_t bins = (size_t)1 << width;
        const uint64_t mask = (uint64_t)bins - 1u;
        memset(hist, 0, bins * sizeof *hist);
        for (size_t i = 0; i < n; ++i) {
            const uint64_t b = key_at(keys, wide, i);
            if (b >> top == prefix) hist[(b >> shift) & mask] += 1u;
        }
        size_t d = 0, before = 0;
        while (before + hist[d] < rank) before += hist[d++];
        assert(d < bins);
        rank -= before;
        prefix = (prefix << width) | (uint64_t)d;
        top = shift;
        if (hist[d] == rank) { /* the whole bucket is taken */
            out->below = (prefix + 1u) << shift;
            out->take_equal = 0u;
            return;
        }
        if (top == 0u) { /* only equal keys are left: first come first */
            out->below = prefix;
            out->take_equal = rank;
            return;
        }
    }
}

void pb__select_lowest(const double *keys, size_t n, size_t k, size_t *hist,
                       pb__cut *out) {
    select_lowest(keys, 1, n, k, hist, out);
}

/* The same search over 32-bit keys: at most 4 passes. */
void pb__select_lowest_u32(const uint32_t *keys, size_t n, size_t k,
                           size_t *hist, pb__cut *out) {
    select_lowest(keys, 0, n, k, hist, out);
}
