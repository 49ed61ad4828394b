/*
 * compact.c - pb_kvcache_compact_rows: a caller's K and V row buffers
 * compacted in place after an evict, so that row i holds the i-th held
 * position again. Plain byte moves of any row size and stride; it touches
 * no policy instance.
 */
#include <string.h>

#include "pyramidkv/pyramidkv.h"

/* The survivors between slots moved down, one run per memmove (or one
 * memmove per row where rows are strided). */
static void compact_one(unsigned char *base, size_t row_bytes, size_t stride,
                        const uint32_t *slots, size_t n_slots,
                        size_t n_rows) {
    size_t to = slots[0];
    for (size_t s = 0; s < n_slots; ++s) {
        const size_t from = (size_t)slots[s] + 1u;
        const size_t end = s + 1u < n_slots ? slots[s + 1] : n_rows;
        const size_t run = end - from;
        if (run == 0u) continue;
        if (stride == row_bytes) {
            memmove(base + to * stride, base + from * stride,
                    run * row_bytes);
        } else {
            for (size_t i = 0; i < run; ++i)
                memmove(base + (to + i) * stride, base + (from + i) * stride,
                        row_bytes);
        }
        to += run;
    }
}

PB_API pb_status pb_kvcache_compact_rows(const uint32_t *slots,
                                         size_t n_slots, size_t n_rows,
                                         void *k, size_t k_row_bytes,
                                         size_t k_stride, void *v,
                                         size_t v_row_bytes,
                                         size_t v_stride) {
    if (k == NULL || (slots == NULL && n_slots > 0u)) return PB_ERR_NULL;
    if (k_row_bytes == 0u || k_row_bytes > k_stride) return PB_ERR_PARAM;
    if (v != NULL && (v_row_bytes == 0u || v_row_bytes > v_stride))
        return PB_ERR_PARAM;
    for (size_t s = 0; s < n_slots; ++s) {
        if (slots[s] >= n_rows) return PB_ERR_PARAM;
        if (s > 0u && slots[s] <= slots[s - 1]) return PB_ERR_PARAM;
    }
    if (n_rows > 0u && (k_stride > SIZE_MAX / n_rows ||
                        (v != NULL && v_stride > SIZE_MAX / n_rows)))
        return PB_ERR_TOO_LARGE;
    if (n_slots == 0u) return PB_OK;
    compact_one((unsigned char *)k, k_row_bytes, k_stride, slots, n_slots,
                n_rows);
    if (v != NULL)
        compact_one((unsigned char *)v, v_row_bytes, v_stride, slots, n_slots,
                    n_rows);
    return PB_OK;
}
