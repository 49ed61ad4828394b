/*
 * lowest_select.h - the k lowest of a run of ranking keys in one pass
 * (lowest_select.c): what a scorer's peek answers for a caller of many
 * instances (the layer group), `want` keys at a time without one pass per
 * key, by a bounded heap or by a selection's cut. Not installed.
 */
#ifndef PB_SRC_LOWEST_SELECT_H
#define PB_SRC_LOWEST_SELECT_H

#include <stddef.h>
#include <stdint.h>

/* The k (1 <= k <= end - first) lowest ranks of first .. end-1 ordered by
 * (key, rank), ascending, to ranks[0 .. k-1]. Rank i's key is the unsigned
 * integer of `width` bytes at keys + i * width (8: a double's bit pattern
 * read as uint64_t, 4: a uint32_t); width 0: every key is 0 (keys
 * ignored), so the order is the ranks'. ranks[] is the only scratch (a
 * heap of k ranks); ranks must be below 2^32. One pass over the keys plus
 * O(k log k); nothing else is read or written. */
void pb__lowest_ranks(const void *keys, unsigned width, size_t first,
                      size_t end, size_t k, uint32_t *ranks);

/* pb__lowest_ranks for width 4 or 8 on keys a selection cut takes (keys
 * of width 8 the bits of doubles >= +0.0, not -0.0 nor NaN; selection.h):
 * the cut of the k lowest (pb__select_lowest, in hist's PB__HIST_BINS
 * entries), one pass collecting the ranks it takes, and a heap sort of
 * those k. The same ranks in the same order; cheaper when k is more than
 * a few. Writes hist and ranks[] only. */
void pb__lowest_ranks_cut(const void *keys, unsigned width, size_t first,
                          size_t end, size_t k, size_t *hist,
                          uint32_t *ranks);

#endif /* PB_SRC_LOWEST_SELECT_H */
