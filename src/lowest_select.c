/*
 * lowest_select.c - the k lowest ranks of a run of keys by (key, rank) in
 * one pass (lowest_select.h): a max-heap of the k best so far, held in the
 * output array, whose root (the worst kept) is the one comparison most
 * keys need; then a heap sort into ascending order.
 */
#include "lowest_select.h"

#include <assert.h>
#include <string.h>

#include "selection.h"
#include "weight_check.h"

PB__ALWAYS_INLINE uint64_t key_at(const void *keys, unsigned width,
                                  size_t i) {
    if (width == 8u) {
        uint64_t k;
        memcpy(&k, (const unsigned char *)keys + 8u * i, sizeof k);
        return k;
    }
    uint32_t k;
    memcpy(&k, (const unsigned char *)keys + 4u * i, sizeof k);
    return k;
}

/* (key of a, a) > (key of b, b). */
PB__ALWAYS_INLINE int worse(const void *keys, unsigned width, uint32_t a,
                            uint32_t b) {
    const uint64_t ka = key_at(keys, width, a), kb = key_at(keys, width, b);
    return ka > kb || (ka == kb && a > b);
}

/* Restores the max-heap h[0 .. n-1] below i. */
PB__ALWAYS_INLINE void sift_down(const void *keys, unsigned width,
                                 uint32_t *h, size_t n, size_t i) {
    const uint32_t v = h[i];
    for (;;) {
        size_t c = 2u * i + 1u;
        if (c >= n) break;
        if (c + 1u < n && worse(keys, width, h[c + 1u], h[c])) c++;
        if (!worse(keys, width, h[c], v)) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = v;
}

PB__ALWAYS_INLINE void select_body(const void *keys, unsigned width,
                                   size_t first, size_t end, size_t k,
                                   uint32_t *h) {
    /* The first k ranks, heapified. */
    for (size_t j = 0; j < k; j++) h[j] = (uint32_t)(first + j);
    for (size_t j = k / 2u; j-- > 0u;) sift_down(keys, width, h, k, j);
    /* Every later rank is above the ones before it, so it enters only on
     * a key strictly below the root's. */
    uint64_t root = key_at(keys, width, h[0]);
    for (size_t i = first + k; i < end; i++) {
        const uint64_t key = key_at(keys, width, i);
        if (key >= root) continue;
        h[0] = (uint32_t)i;
        sift_down(keys, width, h, k, 0u);
        root = key_at(keys, width, h[0]);
    }
    /* Heap sort: the worst to the end, so h ascends. */
    for (size_t n = k; n > 1u; n--) {
        const uint32_t t = h[0];
        h[0] = h[n - 1u];
        h[n - 1u] = t;
        sift_down(keys, width, h, n - 1u, 0u);
    }
}

static void select_wide(const void *keys, size_t first, size_t end, size_t k,
                        uint32_t *ranks) {
    select_body(keys, 8u, first, end, k, ranks);
}

static void select_narrow(const void *keys, size_t first, size_t end,
                          size_t k, uint32_t *ranks) {
    select_body(keys, 4u, first, end, k, ranks);
}

void pb__lowest_ranks(const void *keys, unsigned width, size_t first,
                      size_t end, size_t k, uint32_t *ranks) {
    assert(k >= 1u && first <= end && k <= end - first);
    assert(width == 0u || width == 4u || width == 8u);
    assert(end <= (size_t)UINT32_MAX + 1u);
    if (width == 0u) {
        for (size_t j = 0; j < k; j++) ranks[j] = (uint32_t)(first + j);
        return;
    }
    if (width == 8u)
        select_wide(keys, first, end, k, ranks);
    else
        select_narrow(keys, first, end, k, ranks);
}

/* The heap sort of select_body's end, on its own: ranks[0 .. k-1] into
 * ascending (key, rank) order. */
static void sort_ranks(const void *keys, unsigned width, uint32_t *h,
                       size_t k) {
    for (size_t j = k / 2u; j-- > 0u;) sift_down(keys, width, h, k, j);
    for (size_t n = k; n > 1u; n--) {
        const uint32_t t = h[0];
        h[0] = h[n - 1u];
        h[n - 1u] = t;
        sift_down(keys, width, h, n - 1u, 0u);
    }
}

void pb__lowest_ranks_cut(const void *keys, unsigned width, size_t first,
                          size_t end, size_t k, size_t *hist,
                          uint32_t *ranks) {
    assert(k >= 1u && first <= end && k <= end - first);
    assert(width == 4u || width == 8u);
    assert(end <= (size_t)UINT32_MAX + 1u);
    pb__cut cut;
    if (width == 8u)
        pb__select_lowest((const double *)keys + first, end - first, k, hist,
                          &cut);
    else
        pb__select_lowest_u32((const uint32_t *)keys + first, end - first, k,
                              hist, &cut);
    size_t n = 0;
    for (size_t i = first; i < end && n < k; i++)
        if (pb__cut_takes(&cut, key_at(keys, width, i)))
            ranks[n++] = (uint32_t)i;
    assert(n == k);
    if (width == 8u)
        sort_ranks(keys, 8u, ranks, k);
    else
        sort_ranks(keys, 4u, ranks, k);
}
