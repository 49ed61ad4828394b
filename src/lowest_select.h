/*
 * lowest_select.h - the k lowest of a run of ranking keys in one pass
 * (lowest_select.c): what a scorer's peek answers for a caller of many
 * instances (the layer group), `want` keys at a time without one pass per
 * key. Not installed.
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

#endif /* PB_SRC_LOWEST_SELECT_H */
