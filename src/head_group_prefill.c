/*
 * head_group_prefill.c - a layer group's prefill (docs/spec.md §16.4): each
 * head's lowest ranking keys of the prompt from its scorer's prefill entry
 * (the keys its own prefill ranks by), the victims chosen across heads as
 * a group evict chooses them, then each head compressed by its own
 * pb_kvcache_prefill with its exact count.
 */
#include <assert.h>
#include <string.h>

#include "block_layout.h"
#include "head_group_internal.h"
#include "policy_internal.h"
#include "weight_check.h"

pb_status pb__group_prefill_bytes(uint32_t num_heads,
                                  const pb_kvcache_config *head, size_t len,
                                  size_t *bytes) {
    if (len > UINT32_MAX || len > SIZE_MAX / 64u / num_heads)
        return PB_ERR_TOO_LARGE;
    const size_t cand = pb__lines(16u * (size_t)num_heads * len);
    const size_t one = pb__lines(16u * len);
    size_t head_bytes = 0;
    if (pb__prefill_bytes_of(head, len, &head_bytes) != PB_OK)
        return PB_ERR_TOO_LARGE;
    const size_t ws = pb__lines(head_bytes);
    if (SIZE_MAX - cand < one || SIZE_MAX - cand - one < ws)
        return PB_ERR_TOO_LARGE;
    *bytes = cand + one + ws;
    return PB_OK;
}

pb_status pb_kvcache_group_prefill_workspace_size(
    const pb_kvcache_group *group, size_t len, size_t *bytes) {
    if (group == NULL || bytes == NULL) return PB_ERR_NULL;
    size_t b = 0;
    const pb_status st = pb__group_prefill_bytes(
        group->num_heads, &group->head, len, &b);
    if (st != PB_OK) return st;
    *bytes = b;
    return PB_OK;
}

pb_status pb_kvcache_group_prefill(
    pb_kvcache_group *group, const float *attn, size_t head_stride,
    size_t rows, size_t len, uint64_t budget, void *workspace,
    size_t workspace_bytes, uint32_t *kept, size_t kept_cap, size_t *counts,
    size_t counts_len, size_t *n_kept) {
    if (group == NULL || attn == NULL || counts == NULL || n_kept == NULL)
        return PB_ERR_NULL;
    const uint32_t nh = group->num_heads;
    if (len == 0u || rows == 0u || rows > len ||
        pb__prefill_refused(group->heads[0]) ||
        (workspace != NULL &&
         ((uintptr_t)workspace % PB_PREFILL_WORKSPACE_ALIGN) != 0u))
        return PB_ERR_PARAM;
    if (len > UINT32_MAX || rows > SIZE_MAX / len) return PB_ERR_TOO_LARGE;
    if (nh > 1u && head_stride < rows * len) return PB_ERR_PARAM;
    if (!group->fresh) return PB_ERR_NOT_FRESH;
    for (uint32_t h = 0; h < nh; h++) {
        const float *a = attn + (size_t)h * head_stride;
        for (size_t i = 0; i < rows * len; i++)
            if (pb__weight_bad(a[i])) return PB_ERR_WEIGHT;
    }
    size_t need = 0;
    if (pb__group_prefill_bytes(nh, &group->head, len, &need) != PB_OK)
        return PB_ERR_TOO_LARGE;
    unsigned char *ws = (unsigned char *)workspace;
    if (ws == NULL) {
        if (group->prefill_ws == NULL || len > group->prefill_ws_len)
            return PB_ERR_WORKSPACE;
        ws = (unsigned char *)group->prefill_ws;
    } else if (workspace_bytes < need) {
        return PB_ERR_WORKSPACE;
    }
    if (counts_len < nh) return PB_ERR_BUFFER;

    pb__group_entry *cand = (pb__group_entry *)ws;
    const size_t cand_bytes = pb__lines(16u * (size_t)nh * len);
    double *x = (double *)(ws + cand_bytes);
    uint32_t *pos = (uint32_t *)(ws + cand_bytes + 8u * len);
    unsigned char *head_ws = ws + cand_bytes + pb__lines(16u * len);
    size_t head_ws_bytes = 0;
    (void)pb__prefill_bytes_of(&group->head, len, &head_ws_bytes); /* fits */
    head_ws_bytes = pb__lines(head_ws_bytes);

    const uint64_t held = (uint64_t)nh * len;
    const uint64_t target =
        budget < group->layer_total ? budget : group->layer_total;
    const uint64_t k64 = held > target ? held - target : 0u;
    const size_t k = k64 > SIZE_MAX ? SIZE_MAX : (size_t)k64;
    const size_t must =
        group->head_cap != 0u && len > group->head_cap ? len - group->head_cap
                                                       : 0u;
    size_t taken = 0;
    for (uint32_t h = 0; h < nh; h++) {
        group->take[h] = 0u;
        group->must[h] = must;
    }
    if (k > 0u || must > 0u) {
        const size_t want = k > must ? k : must;
        for (uint32_t h = 0; h < nh; h++) {
            /* The head's lowest keys by its scorer's prefill entry, its
             * floor best-ranked evictable positions excepted. */
            pb_kvcache *head = group->heads[h];
            const size_t e = pb__kvcache_prefill_evictable(head, len);
            const size_t cands = e > group->floor ? e - group->floor : 0u;
            const size_t w = want < cands ? want : cands;
            pb__group_entry *out = cand + (size_t)h * len;
            group->cand_n[h] = w;
            if (w == 0u) continue;
            const pb_status st = pb__kvcache_prefill_lowest(
                head, attn + (size_t)h * head_stride, rows, len, head_ws,
                head_ws_bytes, e, w, pos, x);
            assert(st == PB_OK); /* the door checked for a prefill entry */
            (void)st;
            for (size_t i = 0; i < w; i++) {
                out[i].key = x[i];
                out[i].pos = pos[i];
                out[i].pad_ = 0u;
            }
        }
        taken = pb__group_merge(cand, len, group->cand_n, nh, k, group->must,
                                group->take);
    }
    const size_t survivors = (size_t)held - taken;
    if (kept != NULL && kept_cap < survivors) return PB_ERR_BUFFER;

    size_t at = 0;
    pb__row_pool_clear(&group->pool);
    for (uint32_t h = 0; h < nh; h++) {
        const size_t keep = len - group->take[h];
        size_t n = 0;
        const pb_status st = pb_kvcache_prefill(
            group->heads[h], attn + (size_t)h * head_stride, rows, len,
            (uint32_t)keep, head_ws, head_ws_bytes,
            kept != NULL ? kept + at : NULL, kept != NULL ? kept_cap - at : 0u,
            NULL, 0u, &n);
        /* Every input was checked above; the head keeps exactly its count. */
        assert(st == PB_OK && n == keep);
        (void)st;
        counts[h] = n;
        at += n;
        if (group->pool.on) {
            /* The survivors take the next rows, ascending (§16.6). */
            size_t m = 0;
            (void)pb_kvcache_kept_positions(group->heads[h],
                                            group->pos_scratch,
                                            group->head_capacity, &m);
            pb__row_pool_assign(&group->pool, h, group->pos_scratch, m);
        }
    }
    pb__row_pool_close(&group->pool);
    group->fresh = 0;
    group->last_pos = (uint32_t)(len - 1u);
    *n_kept = at;
    return PB_OK;
}
