/*
 * qk_group.c - a layer group's decode step scored from queries and keys
 * (pb_qk_group_observe): every KV head's attention row computed by the
 * Q/K scorer into the group's evict scratch, then one group observe. It
 * owns no state: the rows live in the candidate area of the group's block
 * (unused between evicts), the lengths in its per-head counts.
 */
#include "head_group_internal.h"

pb_status pb_qk_group_observe(pb_qk *qk, pb_kvcache_group *group,
                              uint32_t pos, const float *q,
                              size_t q_kv_stride, size_t q_head_stride,
                              const void *const *k, size_t k_stride,
                              const size_t *n_keys) {
    if (qk == NULL || group == NULL || q == NULL || k == NULL ||
        n_keys == NULL)
        return PB_ERR_NULL;
    const uint32_t nh = group->num_heads;
    for (uint32_t h = 0; h < nh; h++) {
        if (k[h] == NULL) return PB_ERR_NULL;
        const size_t held = pb_kvcache_kept_count(group->heads[h]);
        if (n_keys[h] != held && n_keys[h] != held + 1u)
            return PB_ERR_LENGTH;
    }
    /* Rows of head_capacity + 1 floats (a head may hold its capacity, and
     * the new token's key adds one): H * (cap + 1) * 4 bytes, inside the
     * H * cap * sizeof(pb__group_entry) of the candidate area. */
    const size_t stride = (size_t)group->head_capacity + 1u;
    float *rows = (float *)(void *)group->cand;
    for (uint32_t h = 0; h < nh; h++) {
        const pb_status st =
            pb_qk_attention(qk, q + (size_t)h * q_kv_stride, q_head_stride,
                            0u, 1u, k[h], k_stride, n_keys[h],
                            rows + (size_t)h * stride);
        if (st != PB_OK) return st;
        group->cand_n[h] = pb_kvcache_kept_count(group->heads[h]);
    }
    return pb__group_observe(group, pos, rows, stride, group->cand_n);
}
