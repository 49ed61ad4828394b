/*
 * head_reduce.c - pb_kvcache_head_reduce: the group of query heads that
 * share one KV head reduced to one attention block (mean, max or sum) before
 * prefill compression. A pure function with a fixed order of operations; it
 * owns nothing else and touches no policy instance.
 */
#include <float.h>

#include "weight_check.h"
#include "pyramidkv/pyramidkv.h"

static double group_sum(const float *attn, size_t heads, size_t head_stride,
                        size_t i) {
    double sum = 0.0;
    for (size_t h = 0; h < heads; ++h)
        sum += (double)attn[h * head_stride + i];
    return sum;
}

PB_API pb_status pb_kvcache_head_reduce(const float *attn, size_t heads,
                                        size_t head_stride, size_t n,
                                        uint32_t mode, float *out) {
    if (attn == NULL || out == NULL) return PB_ERR_NULL;
    if (heads == 0u || mode > (uint32_t)PB_HEAD_REDUCE_SUM) return PB_ERR_PARAM;
    if (heads > 1u && head_stride < n) return PB_ERR_PARAM;
    if (heads > 1u && head_stride > (SIZE_MAX - n) / (heads - 1u))
        return PB_ERR_TOO_LARGE;

    /* Validate everything first so that an error leaves out untouched (the
     * in-place form would otherwise already have overwritten head 0). */
    for (size_t h = 0; h < heads; ++h) {
        const float *row = attn + h * head_stride;
        uint32_t bad = 0u; /* -0.0 passes, as in pb_kvcache_observe */
        for (size_t i = 0; i < n; ++i) bad |= pb__weight_bad(row[i]);
        if (bad) return PB_ERR_WEIGHT;
    }
    if (mode == (uint32_t)PB_HEAD_REDUCE_SUM) {
        for (size_t i = 0; i < n; ++i)
            if (group_sum(attn, heads, head_stride, i) > (double)FLT_MAX)
                return PB_ERR_WEIGHT;
    }

    /* Element i reads every head's element i before out[i] is written, so
     * out == attn (the first head's block) is safe. */
    for (size_t i = 0; i < n; ++i) {
        switch (mode) {
        case PB_HEAD_REDUCE_MAX: {
            float best = attn[i];
            for (size_t h = 1; h < heads; ++h) {
                const float v = attn[h * head_stride + i];
                if (v > best) best = v;
            }
            out[i] = best;
            break;
        }
        case PB_HEAD_REDUCE_SUM:
            out[i] = (float)group_sum(attn, heads, head_stride, i);
            break;
        default:
            out[i] = (float)(group_sum(attn, heads, head_stride, i) /
                             (double)heads);
            break;
        }
    }
    return PB_OK;
}
