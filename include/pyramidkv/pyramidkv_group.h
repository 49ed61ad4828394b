/*
 * pyramidkv_group.h - head-adaptive allocation inside a layer (Ada-KV): the
 * KV heads of one layer share one pool of positions. Every head keeps its
 * protected positions and a floor; the rest of the layer's pool goes to the
 * best scores across all of its heads. Included by <pyramidkv/pyramidkv.h>
 * (including it directly works too: it includes the umbrella header first).
 *
 * It owns the layer group (an object above one ordinary instance per KV
 * head, all in one allocation), its sizing and planning queries, its decode
 * step, evict and prefill. Any layer schedule's share drives a group as it
 * drives an instance (Ada-PyramidKV: a pyramid share per layer, adaptive
 * across the layer's heads). The rules, to the last position, are in
 * docs/spec.md §16; docs/head_adaptive.md is the user's guide.
 */
#ifndef PYRAMIDKV_PYRAMIDKV_GROUP_H
#define PYRAMIDKV_PYRAMIDKV_GROUP_H

#include <stddef.h>
#include <stdint.h>

#include "pyramidkv/pyramidkv.h"
#include "pyramidkv/pyramidkv_runtime.h" /* pb_qk */

#ifdef __cplusplus
extern "C" {
#endif

/* One layer's KV heads sharing one pool. Opaque. */
typedef struct pb_kvcache_group pb_kvcache_group;

/* The first released size of pb_kvcache_group_params (0.2.0). */
#define PB_KVCACHE_GROUP_PARAMS_SIZE_0_2 24u

/* Most KV heads a group takes. */
#define PB_KVCACHE_GROUP_MAX_HEADS 4096u

/* What a group adds to the per-head pb_kvcache_config. Grows by the rule of
 * docs/abi.md (struct_size first, PB_KVCACHE_GROUP_PARAMS_DEFAULT sets it).
 * Defaults in brackets; create refuses any value outside the range. */
typedef struct pb_kvcache_group_params {
    uint32_t struct_size;     /* sizeof(pb_kvcache_group_params) of the
                                 caller's header; at least 24 */
    uint32_t num_heads;       /* [8] KV heads of the layer, 1 ..
                                 PB_KVCACHE_GROUP_MAX_HEADS */
    uint32_t floor_permille;  /* [200] Ada-KV's safeguard alpha in
                                 thousandths, 0 .. 1000: every head keeps
                                 at least floor((S - recent_window) *
                                 floor_permille / 1000) positions beside
                                 its protected ones (S: the per-head
                                 share); 1000 is uniform */
    uint32_t slack;           /* [1] decode steps the group may take
                                 between two evicts, 1 .. 65536: each
                                 head's capacity is its maximum plus this */
    uint32_t prefill_max_len; /* [0] longest prompt pb_kvcache_group_prefill
                                 takes without a caller workspace; 0: none
                                 reserved */
    uint32_t head_cap_permille; /* [0] 0, or at least 1000: no head keeps
                                 more than C = floor(S * head_cap_permille
                                 / 1000) positions after an evict or
                                 prefill (it gives up its lowest first),
                                 which bounds head_capacity; 0: no cap */
    uint32_t pooled_rows;     /* [0] 0 or 1 (added in 0.3.0): 1 numbers
                                 the K/V rows of one layer pool of
                                 pool_rows rows (plan_info): every held
                                 (head, position) has one row, given at
                                 admission and freed at evict
                                 (pb_kvcache_group_head_rows,
                                 pb_kvcache_group_new_rows,
                                 pb_kvcache_group_evict_rows); 0: none,
                                 and the group's memory is as without the
                                 field */
} pb_kvcache_group_params;

#define PB_KVCACHE_GROUP_PARAMS_DEFAULT                                       \
    { (uint32_t)sizeof(pb_kvcache_group_params), 8u, 200u, 1u, 0u, 0u, 0u }

/* A group's sizes, all known before anything runs (pb_kvcache_group_plan)
 * and fixed for its life. The caller sets struct_size to
 * sizeof(pb_kvcache_group_plan_info) as its header knows it; the library
 * writes the fields that size covers. First released size 40 bytes. */
typedef struct pb_kvcache_group_plan_info {
    uint32_t struct_size;   /* set by the caller; at least 40 */
    uint32_t num_heads;     /* H */
    uint32_t head_share;    /* S: the per-head share, effective
                               (max(share, recent_window + 1)) */
    uint32_t floor;         /* f: evictable positions every head keeps
                               beside its protected ones */
    uint32_t head_min;      /* recent_window + f: a head holding more
                               never drops below this in a group evict */
    uint32_t head_max;      /* the most a head holds after a group evict
                               or prefill that reached the layer total
                               (at most the cap C when there is one) */
    uint32_t head_capacity; /* head_max + slack: the most a head ever
                               holds (size each head's K/V buffer so) */
    uint32_t reserved;      /* 0 */
    uint64_t layer_total;   /* T = H x S: the layer's pool, the most the
                               heads hold together after a group evict */
    uint64_t pool_rows;     /* (added in 0.3.0) P = H x (max(S, g) + slack),
                               g = sinks + floor + recent_window (at least
                               1 with the last scorer): T + H x slack
                               whenever g <= S (always without sinks but
                               for the last scorer at recent_window 0).
                               The K/V rows of the layer's pooled layout
                               (params.pooled_rows); reported with or
                               without it */
} pb_kvcache_group_plan_info;

#define PB_KVCACHE_GROUP_PLAN_INFO_INIT                                       \
    { (uint32_t)sizeof(pb_kvcache_group_plan_info), 0u, 0u, 0u, 0u, 0u, 0u,  \
      0u, 0u, 0u }

/* Computes the sizes of the group that pb_kvcache_group_create would make
 * for *head (each head's configuration; NULL: PB_KVCACHE_CONFIG_DEFAULT) and
 * *params (NULL: PB_KVCACHE_GROUP_PARAMS_DEFAULT), written to *info.
 *
 * head's share (or its pyramid formula) is the per-head share S of a
 * uniform allocation; the layer's pool is num_heads x S. head->capacity and
 * head->prefill_max_len must be 0 (the group sets them) and its
 * prefill_scope PB_PREFILL_CONSISTENT.
 *
 * Returns PB_OK; otherwise, checked in this order: PB_ERR_NULL if info is
 * NULL; PB_ERR_PARAM if info->struct_size is below 40, head->struct_size
 * is below 64 or a byte past the known fields is not zero, a field of
 * *params is out of range, or head's capacity, prefill_max_len or
 * prefill_scope is not as above; PB_ERR_TOO_LARGE if a head's capacity does
 * not fit in uint32_t, or params->pooled_rows is 1 and pool_rows does not
 * (a field of *params out of range includes pooled_rows above 1); then PB_ERR_PARAM (or PB_ERR_TOO_LARGE) for a field
 * of *head that pb_kvcache_create refuses at that capacity. *info is
 * written on PB_OK only. Pure, no allocation, thread-safe. */
PB_API pb_status pb_kvcache_group_plan(const pb_kvcache_config *head,
                                       const pb_kvcache_group_params *params,
                                       pb_kvcache_group_plan_info *info);

/* The exact bytes pb_kvcache_group_create allocates for these arguments,
 * written to *bytes on PB_OK only. Statuses as pb_kvcache_group_plan
 * (PB_ERR_NULL: bytes NULL), plus PB_ERR_TOO_LARGE if the size does not fit
 * in size_t. Pure, no allocation. */
PB_API pb_status pb_kvcache_group_size(const pb_kvcache_config *head,
                                       const pb_kvcache_group_params *params,
                                       size_t *bytes);

/* Creates a group: num_heads instances of *head, each holding position 0,
 * sized per pb_kvcache_group_plan, and the scratch its evict and prefill
 * use, in one allocation of pb_kvcache_group_size bytes. allocator NULL:
 * malloc/free.
 *
 * Returns PB_OK and sets *out; PB_ERR_NULL if out is NULL; PB_ERR_PARAM or
 * PB_ERR_TOO_LARGE as pb_kvcache_group_size (or an allocator lacking a
 * function); PB_ERR_NOMEM if the allocator fails. On error *out is NULL
 * (when out is not NULL) and nothing is left allocated. Thread-safe. */
PB_API pb_status pb_kvcache_group_create(const pb_kvcache_config *head,
                                         const pb_kvcache_group_params *params,
                                         const pb_allocator *allocator,
                                         pb_kvcache_group **out);

/* Frees the group and its instances. Accepts NULL. */
PB_API void pb_kvcache_group_destroy(pb_kvcache_group *group);

/* The sizes of this group, as pb_kvcache_group_plan gave them. Returns
 * PB_OK; PB_ERR_NULL if group or info is NULL; PB_ERR_PARAM if
 * info->struct_size is below 40. */
PB_API pb_status pb_kvcache_group_info(const pb_kvcache_group *group,
                                       pb_kvcache_group_plan_info *info);

/* Head h's instance, for the read-only queries (pb_kvcache_kept_count,
 * pb_kvcache_kept_positions, pb_kvcache_score, ...). Change it only through
 * the group. NULL if group is NULL or h >= num_heads. */
PB_API const pb_kvcache *pb_kvcache_group_head(const pb_kvcache_group *group,
                                               uint32_t h);

/* Positions the heads hold together. 0 if group is NULL. */
PB_API uint64_t pb_kvcache_group_kept_total(const pb_kvcache_group *group);

/* The bytes the group allocated, exactly (pb_kvcache_group_size). 0 if
 * group is NULL. */
PB_API size_t pb_kvcache_group_memory_bytes(const pb_kvcache_group *group);

/* Returns every head to its state after create (holding position 0).
 * PB_ERR_NULL if group is NULL. No allocation. */
PB_API pb_status pb_kvcache_group_reset(pb_kvcache_group *group);

/* One decode step for every head: the token at `pos` attended to head h's
 * held positions with weights attn[h * head_stride + i], i = 0 ..
 * attn_len[h] - 1 (ascending held position), then every head admits pos.
 * attn == NULL admits pos everywhere without observing (attn_len and
 * head_stride ignored).
 *
 * Returns PB_OK; PB_ERR_NULL if group is NULL, or attn is not NULL and
 * attn_len is NULL; PB_ERR_POSITION if pos is not greater than every
 * position the group has admitted since create or reset (0 at first);
 * PB_ERR_LENGTH if an attn_len[h] is not head h's held count, or is above
 * head_stride while there is more than one head; PB_ERR_WEIGHT if a
 * weight is NaN, infinite or negative; PB_ERR_FULL if a head holds its
 * capacity, or (pooled_rows) fewer than num_heads pool rows are free
 * (evict first; evicting to layer_total at least every slack steps
 * avoids both). With pooled_rows each head's new position takes a row
 * (pb_kvcache_group_new_rows). The first in that order over all heads is
 * returned, and every head is checked before any changes: on error nothing
 * changed. O(total held), no allocation. Not thread-safe on one group. */
PB_API pb_status pb_kvcache_group_observe(pb_kvcache_group *group,
                                          uint32_t pos, const float *attn,
                                          size_t head_stride,
                                          const size_t *attn_len);

/* Evicts the layer as a whole down to target = min(budget, layer_total)
 * positions held together (UINT64_MAX: the layer's total). Each head's
 * candidates are its evictable positions (as for pb_kvcache_evict:
 * neither sinks, nor the newest recent_window, nor the last scorer's
 * unobserved ones) ranked by its own scorer's key and position, except
 * its `floor` best-ranked ones. With a head cap C, a head holding more
 * than C first gives up its lowest candidates down to C. Then the lowest
 * candidates of all heads, ordered by key ascending, then position
 * ascending, then head index ascending, go until held_total - target have
 * gone (docs/spec.md §16.3). Fewer go when fewer are candidates (the layer
 * then stays above target).
 *
 * victims receives the victims head by head (head 0's ascending, then head
 * 1's, ...), counts[h] the number head h gave up, *n_victims their sum.
 * victims may be NULL when victims_cap is 0.
 *
 * Returns PB_OK (also when nothing needs to go); PB_ERR_NULL if group,
 * counts or n_victims is NULL, or victims is NULL with victims_cap > 0;
 * PB_ERR_BUFFER if counts_len < num_heads (*n_victims untouched) or
 * victims_cap is below the number to go (*n_victims set to it). On error
 * nothing changed and nothing else is written. No allocation. */
PB_API pb_status pb_kvcache_group_evict(pb_kvcache_group *group,
                                        uint64_t budget, uint32_t *victims,
                                        size_t victims_cap, size_t *counts,
                                        size_t counts_len, size_t *n_victims);

/* One decode step of the layer in one call: pb_kvcache_group_observe(group,
 * pos, attn, head_stride, attn_len), then pb_kvcache_group_evict(group,
 * budget, victims, victims_cap, counts, counts_len, n_victims), with the
 * same results as those two calls (victims head by head, counts[h],
 * *n_victims; nothing goes when the layer holds no more than
 * min(budget, layer_total) and no head is above its cap). For a runtime
 * that evicts every step and for bindings, whose cost is per call; at a
 * longer cadence call pb_kvcache_group_observe between the steps. It
 * returns no pool rows: a runtime on the pooled layout (params.pooled_rows)
 * calls pb_kvcache_group_observe, pb_kvcache_group_new_rows and
 * pb_kvcache_group_evict_rows instead.
 *
 * victims_cap must hold the most this step can evict: the layer's excess
 * over min(budget, layer_total) once every head has admitted pos (at
 * cadence 1 with the default budget, num_heads), or, if larger, what the
 * heads above a head cap must give up.
 *
 * Returns PB_OK, or, checked in this order, with nothing changed:
 *   PB_ERR_NULL     group, counts or n_victims is NULL, attn is not NULL
 *                   and attn_len is NULL, or victims is NULL with
 *                   victims_cap > 0;
 *   PB_ERR_BUFFER   counts_len < num_heads (*n_victims untouched), or
 *                   victims_cap is below that bound (*n_victims set to
 *                   the bound);
 *   then pb_kvcache_group_observe's statuses in its order
 *   (PB_ERR_POSITION, PB_ERR_LENGTH, PB_ERR_WEIGHT, PB_ERR_FULL).
 * No allocation. Not thread-safe on one group. */
PB_API pb_status pb_kvcache_group_step(pb_kvcache_group *group, uint32_t pos,
                                       const float *attn, size_t head_stride,
                                       const size_t *attn_len, uint64_t budget,
                                       uint32_t *victims, size_t victims_cap,
                                       size_t *counts, size_t counts_len,
                                       size_t *n_victims);

/* One decode step for every head scored from the token's queries and the
 * heads' keys, as pb_qk_observe does for one instance: for KV head h,
 * pb_qk_attention of one row with queries q + h * q_kv_stride (its
 * qk->group query heads q_head_stride floats apart) over the n_keys[h]
 * keys at k[h] (element i * k_stride: head h's held positions in the held
 * order, optionally followed by the new token's own key, n_keys[h] =
 * held + 1, which takes part in the softmax and is not observed); then
 * pb_kvcache_group_observe(group, pos, the rows). One scorer (its shape:
 * head_dim, group, key type; max_keys at least each n_keys[h]) serves
 * every head. The rows live in the group's own scratch: no allocation.
 *
 * Returns PB_OK; PB_ERR_NULL if qk, group, q, k, n_keys or a k[h] is
 * NULL; PB_ERR_LENGTH if an n_keys[h] is neither head h's held count nor
 * one more; then, head by head, pb_qk_attention's statuses (PB_ERR_PARAM,
 * PB_ERR_WEIGHT for a query or key element that is NaN or infinite); then
 * pb_kvcache_group_observe's (PB_ERR_POSITION, PB_ERR_FULL). On error
 * every head is unchanged. Not thread-safe on one scorer or one group. */
PB_API pb_status pb_qk_group_observe(pb_qk *qk, pb_kvcache_group *group,
                                     uint32_t pos, const float *q,
                                     size_t q_kv_stride, size_t q_head_stride,
                                     const void *const *k, size_t k_stride,
                                     const size_t *n_keys);

/* The exact bytes of workspace pb_kvcache_group_prefill needs for a prompt
 * of len positions: 16 x H x len (the candidates), 16 x len (one head's
 * window and pooled scores) and one head's pb_kvcache_prefill_workspace_size,
 * each rounded up to 64. Returns PB_OK; PB_ERR_NULL if group or bytes is
 * NULL; PB_ERR_TOO_LARGE if len is above UINT32_MAX or the size does not
 * fit in size_t. No allocation, thread-safe. */
PB_API pb_status pb_kvcache_group_prefill_workspace_size(
    const pb_kvcache_group *group, size_t len, size_t *bytes);

/* Compresses a prompt of positions 0 .. len-1 for every head of a fresh
 * group in one call. Head h's rows are attn + h * head_stride, rows x len
 * floats row-major as for pb_kvcache_prefill. The layer keeps
 * min(budget, layer_total) positions (UINT64_MAX: the layer's total): the
 * victims are chosen as by pb_kvcache_group_evict on the heads fed these
 * rows (consistent scope), and each head ends exactly as pb_kvcache_prefill
 * leaves it with its own count.
 *
 * With pooled_rows, the survivors take rows 0, 1, 2, ... in the order
 * kept lists them (head by head, ascending).
 *
 * kept receives the survivors head by head (ascending within a head; NULL:
 * not wanted, they stay available from each head's
 * pb_kvcache_kept_positions), counts[h] head h's survivor count, *n_kept
 * their sum.
 * workspace: PB_PREFILL_WORKSPACE_ALIGN-aligned, at least
 * pb_kvcache_group_prefill_workspace_size bytes, or NULL for the scratch
 * reserved at create for params.prefill_max_len.
 *
 * Returns PB_OK, or, checked in this order, with every head unchanged:
 *   PB_ERR_NULL      group, attn, counts or n_kept is NULL;
 *   PB_ERR_PARAM     len 0, rows 0 or above len, the heads have sinks or
 *                    a scorer other than PB_SCORER_WINDOW, or the
 *                    workspace is misaligned;
 *   PB_ERR_TOO_LARGE len above UINT32_MAX or rows x len overflows;
 *   PB_ERR_PARAM     head_stride below rows x len with more than one head;
 *   PB_ERR_NOT_FRESH the group observed or evicted since create or reset;
 *   PB_ERR_WEIGHT    a weight of any head is NaN, infinite or negative;
 *   PB_ERR_WORKSPACE the workspace is too small (or NULL beyond the
 *                    reserved length);
 *   PB_ERR_BUFFER    counts_len < num_heads, or kept is not NULL and
 *                    kept_cap is below the survivors' total.
 * No allocation. Not thread-safe on one group. */
PB_API pb_status pb_kvcache_group_prefill(
    pb_kvcache_group *group, const float *attn, size_t head_stride,
    size_t rows, size_t len, uint64_t budget, void *workspace,
    size_t workspace_bytes, uint32_t *kept, size_t kept_cap, size_t *counts,
    size_t counts_len, size_t *n_kept);

/* ------------------------------------------------------------------------ */
/* The pooled K/V layout (params.pooled_rows = 1; docs/spec.md §16.6)       */

/* Head h's K/V rows in the layer pool, in its held order (row i holds the
 * i-th position of pb_kvcache_kept_positions(pb_kvcache_group_head(group,
 * h))): what a runtime gathers head h's keys and values by. A row is in
 * 0 .. pool_rows - 1 and never moves while its position is held.
 *
 * Returns PB_OK with *n the held count; PB_ERR_NULL if group or n is NULL,
 * or rows is NULL with rows_cap > 0; PB_ERR_PARAM if h >= num_heads or the
 * group was created without pooled_rows; PB_ERR_BUFFER if rows_cap is
 * below the held count (*n set to it, rows untouched). No allocation;
 * thread-safe with other readers of one group. */
PB_API pb_status pb_kvcache_group_head_rows(const pb_kvcache_group *group,
                                            uint32_t h, uint32_t *rows,
                                            size_t rows_cap, size_t *n);

/* rows[h] = the pool row of head h's newest held position: after an
 * observe (pb_kvcache_group_observe, pb_qk_group_observe), the row each
 * head's new token took, where the runtime writes that token's K/V for
 * head h. UINT32_MAX for a head that holds nothing.
 *
 * Returns PB_OK; PB_ERR_NULL if group or rows is NULL; PB_ERR_PARAM if the
 * group was created without pooled_rows; PB_ERR_BUFFER if rows_len <
 * num_heads (nothing written). No allocation; thread-safe with other
 * readers of one group. */
PB_API pb_status pb_kvcache_group_new_rows(const pb_kvcache_group *group,
                                           uint32_t *rows, size_t rows_len);

/* pb_kvcache_group_evict, with rows[i] the pool row victims[i] held, now
 * free (a later admission may take it). victims and rows are parallel, of
 * cap entries each.
 *
 * Returns PB_OK; PB_ERR_NULL if group, counts or n_victims is NULL, or
 * victims or rows is NULL with cap > 0; PB_ERR_PARAM if the group was
 * created without pooled_rows; then pb_kvcache_group_evict's
 * PB_ERR_BUFFER (cap as its victims_cap). On error nothing changed and
 * nothing but *n_victims (as pb_kvcache_group_evict sets it) is written.
 * No allocation. Not thread-safe on one group. */
PB_API pb_status pb_kvcache_group_evict_rows(pb_kvcache_group *group,
                                             uint64_t budget,
                                             uint32_t *victims,
                                             uint32_t *rows, size_t cap,
                                             size_t *counts,
                                             size_t counts_len,
                                             size_t *n_victims);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PYRAMIDKV_PYRAMIDKV_GROUP_H */
