/*
 * pyramidkv_runtime.h - what an inference runtime needs around a policy
 * instance: evicting to the instance's own share, victims as slot indices
 * of the caller's K/V buffers, compacting those buffers in place, and
 * scoring straight from the runtime's queries and keys (for attention
 * kernels that never materialise the softmaxed rows). Included by
 * <pyramidkv/pyramidkv.h> (including it directly works too: it includes
 * the umbrella header first).
 *
 * It owns these declarations only; the instances they drive are ordinary
 * pb_kvcache instances. docs/guide.md shows the three-call decode loop
 * (pb_qk_observe, pb_kvcache_evict_slots, pb_kvcache_compact_rows), and
 * docs/spec.md §15 states the Q/K scoring arithmetic exactly.
 */
#ifndef PYRAMIDKV_PYRAMIDKV_RUNTIME_H
#define PYRAMIDKV_PYRAMIDKV_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#include "pyramidkv/pyramidkv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Evicting to the instance's share                                         */

/* The budget that asks pb_kvcache_evict (or pb_kvcache_evict_slots) for the
 * instance's own effective share: the target is min(budget, effective
 * share), so the largest budget leaves the share alone. Pass it unless a
 * layer must be tightened below its share. (Passing the model's average
 * budget instead would clip every layer whose share is above the average
 * to the average, and the pyramid would be lost.) */
#define PB_KVCACHE_BUDGET_SHARE UINT32_MAX

/* pb_kvcache_evict(policy, PB_KVCACHE_BUDGET_SHARE, victims, victims_cap,
 * n_victims): evicts down to the instance's effective share
 * (pb_kvcache_effective_budget). Same statuses, same state after an error,
 * no allocation; not thread-safe on one instance. */
PB_API pb_status pb_kvcache_evict_to_share(pb_kvcache *policy,
                                           uint32_t *victims,
                                           size_t victims_cap,
                                           size_t *n_victims);

/* pb_kvcache_evict(policy, budget, ...), with each victim also given as its
 * slot: its index in the held order (ascending positions) just before the
 * call. A runtime that appends each admitted token's K/V row to the end of
 * its buffer and compacts the buffer after every evict
 * (pb_kvcache_compact_rows) keeps the i-th held position in row i, so the
 * slots are the rows to drop.
 *
 * slots[0 .. *n_victims-1] ascend, as the victims do. victims may be NULL
 * (positions not wanted); slots is required (also when victims_cap is 0).
 *
 * Returns PB_OK; PB_ERR_NULL if policy, slots or n_victims is NULL;
 * PB_ERR_BUFFER if victims_cap is below the number to drop (*n_victims is
 * set to that number, nothing else changes); otherwise as
 * pb_kvcache_evict. On error the instance is unchanged and slots and
 * victims are not written. O(evict + victims * log held), no allocation;
 * not thread-safe on one instance. */
PB_API pb_status pb_kvcache_evict_slots(pb_kvcache *policy, uint32_t budget,
                                        uint32_t *victims, uint32_t *slots,
                                        size_t victims_cap,
                                        size_t *n_victims);

/* ------------------------------------------------------------------------ */
/* Compacting the caller's K/V rows                                          */

/* Removes rows slots[0 .. n_slots-1] from one or two row buffers of n_rows
 * rows in place, keeping the order of the others: afterwards rows
 * 0 .. n_rows-n_slots-1 hold the survivors. Row r of a buffer starts at
 * byte r * stride of it and is row_bytes long (any element type and size:
 * row_bytes = elements * element size); bytes between rows are not
 * touched, nor are rows past the last survivor's new place.
 *
 * k is required; v may be NULL (then v_row_bytes and v_stride are
 * ignored). Pass the slots of pb_kvcache_evict_slots.
 *
 * Returns PB_OK; PB_ERR_NULL if k is NULL, or slots is NULL with n_slots >
 * 0; PB_ERR_PARAM if a row_bytes is 0 or above its stride (k's, then
 * v's), or the slots do not strictly ascend below n_rows; PB_ERR_TOO_LARGE
 * if n_rows * a stride does not fit in size_t; checked in that order. On error nothing is moved. Moves each surviving
 * run once (memmove), no allocation; thread-safe for distinct buffers. */
PB_API pb_status pb_kvcache_compact_rows(const uint32_t *slots,
                                         size_t n_slots, size_t n_rows,
                                         void *k, size_t k_row_bytes,
                                         size_t k_stride, void *v,
                                         size_t v_row_bytes,
                                         size_t v_stride);

/* ------------------------------------------------------------------------ */
/* Scoring from queries and keys                                            */

/* The element type of a key buffer. Values are never renumbered. */
typedef enum pb_key_type {
    PB_KEYS_F32 = 0,  /* IEEE binary32 */
    PB_KEYS_F16 = 1,  /* IEEE binary16, in a uint16_t */
    PB_KEYS_BF16 = 2  /* bfloat16 (the high half of a binary32), in a
                         uint16_t */
} pb_key_type;

/* A Q/K scorer: the shape of one KV head and its group of query heads, and
 * the scratch to score against up to max_keys keys. Opaque. One scorer
 * serves any number of instances of that shape, one call at a time. */
typedef struct pb_qk pb_qk;

/* The shape and scratch of a pb_qk, growing by the struct_size rule of
 * docs/abi.md. Defaults in brackets; create refuses values outside the
 * stated range. */
typedef struct pb_qk_config {
    uint32_t struct_size; /* sizeof(pb_qk_config) of the caller's header;
                             at least 32 (the first layout) */
    uint32_t head_dim;    /* [128] d: elements per query and key row,
                             1 .. 65536 */
    uint32_t group;       /* [1] query heads sharing the KV head (GQA),
                             1 .. 1024 */
    uint32_t key_type;    /* [PB_KEYS_F32] a pb_key_type */
    uint32_t reduce;      /* [PB_HEAD_REDUCE_MEAN] a pb_head_reduce: how the
                             group's attention rows become one */
    float scale;          /* [0] the logit scale; 0: 1/sqrt(head_dim),
                             otherwise finite and > 0 */
    uint32_t max_keys;    /* [4096] most keys a call scores, 1 ..
                             UINT32_MAX */
    uint32_t max_rows;    /* [32] most query rows per call (the prefill
                             observation window), 1 .. 65536 */
} pb_qk_config;

#define PB_QK_CONFIG_DEFAULT \
    { (uint32_t)sizeof(pb_qk_config), 128u, 1u, 0u, 0u, 0.0f, 4096u, 32u }

/* The exact bytes pb_qk_create allocates for *config (NULL: defaults),
 * written to *bytes on PB_OK only: about max_keys * (12 * group + 16 +
 * 4 * max_rows) plus 8 * group * head_dim. Returns PB_OK, PB_ERR_NULL if
 * bytes is NULL, PB_ERR_PARAM (a refused field, a struct_size below 32 or
 * a non-zero byte past the known fields) or PB_ERR_TOO_LARGE, in that
 * order. Pure, no allocation. */
PB_API pb_status pb_qk_size(const pb_qk_config *config, size_t *bytes);

/* Creates a scorer (config NULL: PB_QK_CONFIG_DEFAULT; allocator NULL:
 * malloc/free). All scratch it will use is allocated here, in the amount
 * pb_qk_size reports. Returns PB_OK and sets *out; PB_ERR_NULL if out is
 * NULL; PB_ERR_PARAM, PB_ERR_TOO_LARGE as pb_qk_size, or PB_ERR_PARAM if
 * the allocator lacks a function; PB_ERR_NOMEM if the allocator fails. On
 * error *out is NULL (out not NULL) and nothing is left allocated.
 * Thread-safe. */
PB_API pb_status pb_qk_create(const pb_qk_config *config,
                              const pb_allocator *allocator, pb_qk **out);

/* Frees the scorer. Accepts NULL. */
PB_API void pb_qk_destroy(pb_qk *qk);

/* The attention of `rows` query rows over n_keys keys, the group reduced,
 * written to out[r * n_keys + i] (docs/spec.md §15 gives every operation
 * and its order).
 *
 * Queries: float32; head h's row r starts at q + h * q_head_stride +
 * r * q_row_stride (floats), head_dim elements. Keys: the scorer's
 * key_type; key i starts at element i * k_stride of k, head_dim elements;
 * keys are used as given (after rotary embedding: the library never
 * rotates). Causal: row r is the query of key index n_keys - rows + r and
 * sees keys 0 .. n_keys - rows + r; the keys it does not see get 0. With
 * rows == 1 the row sees every key (a decode step).
 *
 * Returns PB_OK; PB_ERR_NULL if qk, q, k or out is NULL; PB_ERR_PARAM if
 * rows is 0 or above max_rows or n_keys, n_keys is 0 or above max_keys,
 * k_stride < head_dim, or (group > 1) q_head_stride < head_dim, or (rows >
 * 1) q_row_stride < head_dim (checked in that order); PB_ERR_WEIGHT if a
 * query element of the rows or a key element is NaN or infinite (finite
 * inputs always give finite logits). On error out is not written. No allocation; not thread-safe on one scorer. */
PB_API pb_status pb_qk_attention(pb_qk *qk, const float *q,
                                 size_t q_head_stride, size_t q_row_stride,
                                 size_t rows, const void *k, size_t k_stride,
                                 size_t n_keys, float *out);

/* A decode step scored from the new token's queries: pb_qk_attention with
 * one row over the keys, then pb_kvcache_observe(policy, pos, row, held).
 * k holds the held positions' keys in the held order (row i: the i-th
 * held position), optionally followed by the new token's own key (n_keys =
 * held + 1): it then takes part in the softmax, as it does in the model,
 * and its own weight is not observed. Works with every scorer.
 *
 * Returns PB_OK; PB_ERR_NULL if qk, policy, q or k is NULL; PB_ERR_LENGTH
 * if n_keys is neither held nor held + 1; then pb_qk_attention's statuses
 * (rows 1, q_row_stride ignored); then pb_kvcache_observe's (PB_ERR_POSITION,
 * PB_ERR_FULL). On error the instance is unchanged. No allocation; not
 * thread-safe on one scorer or one instance. */
PB_API pb_status pb_qk_observe(pb_qk *qk, pb_kvcache *policy, uint32_t pos,
                               const float *q, size_t q_head_stride,
                               const void *k, size_t k_stride,
                               size_t n_keys);

/* Prefill compression scored from the observation window's queries:
 * pb_qk_attention with `rows` rows over the len prompt keys (causal: row r
 * is the query of position len - rows + r), then pb_kvcache_prefill(policy,
 * block, rows, len, budget, ...) with the scorer's scratch as workspace.
 * The instance must be one pb_kvcache_prefill takes (window scorer, no
 * sinks, fresh).
 *
 * Returns PB_OK; PB_ERR_NULL if qk, policy, q, k or n_kept is NULL; then
 * pb_qk_attention's statuses; then pb_kvcache_prefill's. On error the
 * instance is unchanged. No allocation; not thread-safe on one scorer or
 * one instance. */
PB_API pb_status pb_qk_prefill(pb_qk *qk, pb_kvcache *policy, const float *q,
                               size_t q_head_stride, size_t q_row_stride,
                               size_t rows, const void *k, size_t k_stride,
                               size_t len, uint32_t budget, uint32_t *kept,
                               size_t kept_cap, uint32_t *victims,
                               size_t victims_cap, size_t *n_kept);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PYRAMIDKV_PYRAMIDKV_RUNTIME_H */
