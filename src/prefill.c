/*
 * prefill.c - the prefill door: pb_kvcache_prefill and its workspace query
 * (pyramidkv_prefill.h), and the rule of the prompt scratch that create
 * reserves and the query reports.
 *
 * It checks what every prompt shares (the arguments, that the instance's
 * scorer has a prefill entry in the scorer table and no sinks, the rows a
 * scope asks for, the workspace's alignment), then hands the prompt to
 * the scorer's entry (pb__scorer_ops prefill): the window scorer's is
 * window_prefill.c. It reads no scorer's state.
 */
#include <stdint.h>

#include "pooling.h"
#include "scorer_ops.h"

pb_status pb__prefill_scratch_of(uint32_t pool_kernel, size_t work_bytes,
                                 size_t len, pb__prefill_scratch *out) {
    /* pb__pool_work_bytes is exact for len < SIZE_MAX / 16; the three parts
     * then add up without overflow. */
    if ((uint64_t)len > (uint64_t)UINT32_MAX || len > SIZE_MAX / 32u)
        return PB_ERR_TOO_LARGE;
    const size_t pool = pb__pool_work_bytes(pool_kernel, len);
    out->score_bytes = len * sizeof(double);
    out->pool_bytes = work_bytes >= pool ? 0u : pool;
    out->cand_bytes = (len / 4u) * sizeof(double);
    out->total = out->score_bytes + out->pool_bytes + out->cand_bytes;
    return PB_OK;
}

int pb__prefill_refused(const pb_kvcache *p) {
    /* Prompt scoring is a scorer's entry, and the door knows no sinks. */
    return p->ops->prefill == NULL || p->cfg.sinks != 0u;
}

pb_status pb__prefill_bytes_of(const pb_kvcache_config *cfg, size_t len,
                               size_t *bytes) {
    pb__prefill_scratch need;
    if (pb__prefill_scratch_of(
            cfg->pool_kernel,
            pb__pool_work_bytes(cfg->pool_kernel, (size_t)cfg->capacity), len,
            &need) != PB_OK)
        return PB_ERR_TOO_LARGE;
    *bytes = need.total;
    return PB_OK;
}

PB_API pb_status pb_kvcache_prefill_workspace_size(const pb_kvcache *policy,
                                                   size_t len, size_t *bytes) {
    if (policy == NULL || bytes == NULL) return PB_ERR_NULL;
    if (policy->ops->prefill_workspace != NULL)
        return policy->ops->prefill_workspace(policy, len, bytes);
    /* A scorer without a prefill entry has no pooling scratch of its own:
     * the size is the rule's for that. */
    pb__prefill_scratch need;
    if (pb__prefill_scratch_of(policy->cfg.pool_kernel, 0u, len, &need) !=
        PB_OK)
        return PB_ERR_TOO_LARGE;
    *bytes = need.total;
    return PB_OK;
}

PB_API pb_status pb_kvcache_prefill(pb_kvcache *policy, const float *attn,
                                    size_t rows, size_t len, uint32_t budget,
                                    void *workspace, size_t workspace_bytes,
                                    uint32_t *kept, size_t kept_cap,
                                    uint32_t *victims, size_t victims_cap,
                                    size_t *n_kept) {
    if (policy == NULL || attn == NULL || n_kept == NULL) return PB_ERR_NULL;
    if (len == 0u || rows == 0u || rows > len) return PB_ERR_PARAM;
    if (pb__prefill_refused(policy)) return PB_ERR_PARAM;
    if (policy->cfg.prefill_scope == (uint32_t)PB_PREFILL_REFERENCE &&
        rows != (size_t)policy->cfg.recent_window)
        return PB_ERR_PARAM;
    if ((uintptr_t)workspace % PB_PREFILL_WORKSPACE_ALIGN != 0u)
        return PB_ERR_PARAM;
    const pb__prompt in = {attn,    rows,     len,      budget,
                           workspace, workspace_bytes, kept, kept_cap,
                           victims, victims_cap};
    return policy->ops->prefill(policy, &in, n_kept);
}

size_t pb__kvcache_prefill_evictable(const pb_kvcache *p, size_t len) {
    const size_t rw = (size_t)p->cfg.recent_window;
    return len - (rw < len ? rw : len);
}

pb_status pb__kvcache_prefill_lowest(pb_kvcache *p, const float *attn,
                                     size_t rows, size_t len, void *workspace,
                                     size_t workspace_bytes, size_t end,
                                     size_t k, uint32_t *positions,
                                     double *keys) {
    if (p->ops->prefill_lowest == NULL) return PB_ERR_PARAM;
    const pb__prompt in = {attn,      rows,
                           len,       0u,
                           workspace, workspace_bytes,
                           NULL,      0u,
                           NULL,      0u};
    p->ops->prefill_lowest(p, &in, end, k, positions, keys);
    return PB_OK;
}
