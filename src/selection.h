/*
 * selection.h - selection of the k lowest keys (selection.c): a radix cut
 * through non-negative doubles or 32-bit keys by their bit patterns, in
 * at most eight passes, ties to the lower index. Not installed.
 */
#ifndef PB_SRC_SELECTION_H
#define PB_SRC_SELECTION_H

#include <stddef.h>
#include <stdint.h>

#define PB__HIST_BINS 256u

/* A cut through a key array: the chosen keys are those whose bit pattern is
 * below `below`, plus the first `take_equal` (in index order) equal to it.
 * Non-negative doubles order like their bit patterns. */
typedef struct pb__cut {
    uint64_t below;
    size_t take_equal;
} pb__cut;

/* The cut choosing exactly the k smallest of keys[0 .. n-1] (k <= n), ties
 * to the lower index. Keys must be >= +0.0 (not -0.0) and not NaN.
 * O(n) per pass, at most 8 passes; hist has PB__HIST_BINS entries. */
void pb__select_lowest(const double *keys, size_t n, size_t k, size_t *hist,
                       pb__cut *out);

/* pb__select_lowest for 32-bit keys ordered as unsigned integers (vote
 * counts, or the bits of non-negative floats other than -0.0). */
void pb__select_lowest_u32(const uint32_t *keys, size_t n, size_t k,
                           size_t *hist, pb__cut *out);

/* The bit pattern of a double. */
uint64_t pb__key_bits(double v);

/* Applies a cut to the next key in index order: 1 if chosen. */
static inline int pb__cut_takes(pb__cut *cut, uint64_t bits) {
    if (bits < cut->below) return 1;
    if (bits == cut->below && cut->take_equal > 0) {
        cut->take_equal -= 1;
        return 1;
    }
    return 0;
}

#endif /* PB_SRC_SELECTION_H */
