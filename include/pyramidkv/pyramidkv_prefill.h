/*
 * pyramidkv_prefill.h - prefill compression, the mode of the PyramidKV and
 * SnapKV papers: at the end of prefill the last prompt tokens act as queries,
 * their attention over the whole prompt scores every earlier position, and
 * each layer keeps its share. Included by <pyramidkv/pyramidkv.h> (including
 * it directly works too: it includes the umbrella header first).
 *
 * It owns the declarations of the one-shot compress call, its workspace
 * sizing query and the head-group reduction. The instance it works on is an
 * ordinary pb_kvcache: after a prefill it goes on with pb_kvcache_observe and
 * pb_kvcache_evict exactly as if it had been fed the prompt step by step.
 * docs/prefill.md explains the two scopes with worked examples.
 */
#ifndef PYRAMIDKV_PYRAMIDKV_PREFILL_H
#define PYRAMIDKV_PYRAMIDKV_PREFILL_H

#include <stddef.h>
#include <stdint.h>

#include "pyramidkv/pyramidkv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Head-group reduction                                                     */

/* How pb_kvcache_head_reduce combines the heads of a group. */
typedef enum pb_head_reduce {
    PB_HEAD_REDUCE_MEAN = 0, /* the double-precision sum in ascending head
                                order divided by the head count, rounded
                                once to float */
    PB_HEAD_REDUCE_MAX = 1,  /* the largest value among the heads */
    PB_HEAD_REDUCE_SUM = 2   /* the double-precision sum in ascending head
                                order, rounded once to float */
} pb_head_reduce;

/* Reduces `heads` blocks of n floats to one block of n floats:
 * out[i] = reduce over h = 0 .. heads-1 of attn[h * head_stride + i].
 *
 * Use it for grouped-query attention: the query heads that share one KV head
 * are reduced to one attention block before pb_kvcache_prefill (the paper's
 * code reduces the group before pooling). With the usual [head][row][pos]
 * layout a whole rows x len block is reduced in one call (n = rows * len,
 * head_stride = n); with [row][head][pos] call it once per row (n = len,
 * head_stride = len). A policy instance then serves one layer over the
 * reduced group; a caller who keeps one instance per (layer, KV head) without
 * a group passes that head's rows directly. The caller chooses.
 *
 * The order of operations is fixed, so the result is the same on every
 * platform. `out` may be the first head's block itself (attn == out, for an
 * in-place reduction); any other overlap is undefined.
 *
 * Returns PB_OK; PB_ERR_NULL if attn or out is NULL (also when n is 0);
 * PB_ERR_PARAM if heads is 0, mode is not a pb_head_reduce, or head_stride <
 * n while heads > 1; PB_ERR_TOO_LARGE if (heads - 1) * head_stride + n does
 * not fit in size_t; PB_ERR_WEIGHT if an input is NaN, infinite or negative,
 * or a PB_HEAD_REDUCE_SUM result exceeds the largest float. On error nothing
 * is written to out. Pure: no allocation, thread-safe; it reads the input
 * twice (once to validate, once to reduce). */
PB_API pb_status pb_kvcache_head_reduce(const float *attn, size_t heads,
                                        size_t head_stride, size_t n,
                                        uint32_t mode, float *out);

/* ------------------------------------------------------------------------ */
/* One-shot compress                                                        */

/* The alignment, in bytes, a caller workspace passed to pb_kvcache_prefill
 * must have. Any pointer returned by malloc qualifies. */
#define PB_PREFILL_WORKSPACE_ALIGN 8u

/* The exact number of bytes of workspace pb_kvcache_prefill needs on this
 * instance for a prompt of `len` positions, written to *bytes: one double
 * per position for the scores (8 * len), one double per four positions for
 * the candidates of the selection (8 * floor(len / 4)), plus
 * 16 * min(pool_kernel, len) for pooling only when pool_kernel > 1 and the
 * instance's capacity is below both pool_kernel and len (otherwise the
 * instance's own pooling scratch serves). A workspace of exactly this size
 * is enough; one byte less is refused with PB_ERR_WORKSPACE. Instances with the same
 * pool_kernel (or a kernel within their capacity, the usual case) need the
 * same size, so one workspace sized for the longest prompt serves every
 * instance of a model, compressed one after another.
 *
 * Returns PB_OK; PB_ERR_NULL if policy or bytes is NULL; PB_ERR_TOO_LARGE if
 * len is above UINT32_MAX or the size does not fit in size_t. No
 * allocation; thread-safe (the instance is only read). */
PB_API pb_status pb_kvcache_prefill_workspace_size(const pb_kvcache *policy,
                                                   size_t len, size_t *bytes);

/* Compresses a whole prompt in one call: the instance, which must be fresh,
 * ends holding exactly the positions of 0 .. len-1 that survive, each with
 * the observation record the rows give it, ready for pb_kvcache_observe and
 * pb_kvcache_evict.
 *
 * Input. attn is rows x len float32, row-major: row j is the attention of
 * the prompt token at position q_j = len - rows + j over positions
 * 0 .. len-1 (already softmaxed; the causal part p > q_j may hold zeros or
 * anything finite and non-negative; it is never used). budget is the ask,
 * as in pb_kvcache_evict: the target is min(budget, effective share).
 *
 * The rows as decode steps. Row j is the decode step that admits position
 * q_j: it observes positions p < q_j with weights attn[j][p] (its own
 * diagonal entry and the causal part are not observed). Positions before
 * the first row's are admitted without observation. A row for position 0
 * (rows == len) has no earlier position and no decode step admits position 0,
 * so it observes nothing and does not advance the ring. The survivors' ring
 * records, the window scores and the ring slot after the call are exactly
 * those of an instance fed these steps: the last min(steps, obs_window)
 * rows are the observed steps, older ones have been overwritten.
 *
 * Selection, by the scope chosen at create (pb_kvcache_options):
 *   PB_PREFILL_CONSISTENT (default): exactly pb_kvcache_evict(budget) on
 *     that fed instance: window scores over the ring, pooling (the create's
 *     pool mode) over all len positions including the protected newest
 *     min(recent_window, len), victims the lowest pooled evictable positions,
 *     equal pooled scores evicting the lower position first. If
 *     len <= target nothing is evicted.
 *   PB_PREFILL_REFERENCE: the paper's code (KVCache-Factory
 *     pyramidkv_utils.py, SnapKV selection). It requires rows ==
 *     recent_window; W = rows. share = min(budget, effective share). If
 *     len <= share the prompt is not compressed (every position is kept).
 *     Otherwise s[p] = sum over the W rows (double, ascending row order) of
 *     attn[row][p] for the prefix p < len - W; s is pooled over the prefix
 *     alone with kernel pool_kernel, stride 1, padding pool_kernel/2 (max:
 *     out-of-range neighbours ignored; average: the in-range sum divided by
 *     pool_kernel); the max(share - W, 0) prefix positions with the highest
 *     pooled score are kept (equal scores: the lower position is kept), and
 *     the W window positions are always kept. So share <= W keeps the window
 *     alone. Note the tie rule is the reverse of the consistent scope's.
 *
 * Output. If kept is not NULL the survivors are written to kept[0 .. n-1]
 * in ascending order (to gather K/V); if victims is not NULL the evicted
 * positions are written to victims[] in ascending order; NULL means "not
 * wanted" (the survivors stay available from pb_kvcache_kept_positions and
 * the victims are the rest of 0 .. len-1). *n_kept is set to the survivor
 * count; the victim count is len - *n_kept.
 *
 * Scratch. workspace (PB_PREFILL_WORKSPACE_ALIGN-aligned, at least
 * pb_kvcache_prefill_workspace_size(policy, len) bytes) is used if not
 * NULL; otherwise the scratch reserved at create for
 * options.prefill_max_len positions is used (exactly
 * pb_kvcache_prefill_workspace_size for that length, rounded up to a
 * 64-byte line; it serves every prompt up to that length). The two give the
 * same result at the same speed. The memory never holds len x obs_window
 * values: the scratch is O(len), and only the survivors' records are
 * stored in the instance. No allocation.
 *
 * Returns PB_OK, or, checked in this order (the first that applies), with
 * the instance unchanged:
 *   PB_ERR_NULL      policy, attn or n_kept is NULL;
 *   PB_ERR_PARAM     len is 0, rows is 0 or above len, the instance's
 *                    scorer is not PB_SCORER_WINDOW or it has sinks (a
 *                    prompt is scored by observation windows only), rows
 *                    differs from recent_window in the reference scope, or
 *                    the workspace is not PB_PREFILL_WORKSPACE_ALIGN-aligned;
 *   PB_ERR_TOO_LARGE len is above UINT32_MAX or rows * len does not fit in
 *                    size_t;
 *   PB_ERR_NOT_FRESH the instance is not fresh: it has observed a step
 *                    since create or reset, or does not hold exactly
 *                    position 0 (pb_kvcache_reset makes it fresh again);
 *   PB_ERR_WORKSPACE the workspace (or, without one, the create-time
 *                    reservation of prefill_max_len positions) is smaller
 *                    than len needs;
 *   PB_ERR_FULL      the survivors would not fit the instance's capacity;
 *   PB_ERR_BUFFER    kept_cap or victims_cap (for a non-NULL array) is
 *                    below the count to write;
 *   PB_ERR_WEIGHT    an entry of the block is NaN, infinite or negative
 *                    (every entry is checked, also the ones never used).
 * *n_kept is set on PB_OK and on PB_ERR_BUFFER; the workspace contents are
 * unspecified afterwards.
 *
 * Cost: one pass over the rows x len block; O(len) for max pooling,
 * O(len x pool_kernel) for average pooling; O(len) for the selection (a
 * radix selection, narrowed to the likely survivors when they are few: no
 * quadratic worst case); O(survivors x obs_window) to write the records.
 * Not thread-safe on one instance; the workspace must not be shared by
 * concurrent calls. */
PB_API pb_status pb_kvcache_prefill(pb_kvcache *policy, const float *attn,
                                    size_t rows, size_t len, uint32_t budget,
                                    void *workspace, size_t workspace_bytes,
                                    uint32_t *kept, size_t kept_cap,
                                    uint32_t *victims, size_t victims_cap,
                                    size_t *n_kept);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PYRAMIDKV_PYRAMIDKV_PREFILL_H */
