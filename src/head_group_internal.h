/*
 * head_group_internal.h - the layer group's record and the selection it
 * shares between decode evict and prefill (internal). It owns nothing of
 * the per-head engine: a group drives its heads through the public
 * operations of pyramidkv.h and the engine's table doors
 * (instance_internal.h): a head's lowest keys (pb__kvcache_lowest, at
 * prefill pb__kvcache_prefill_lowest) and the evict of the positions the
 * group chose (pb__kvcache_evict_positions).
 */
#ifndef PB_SRC_HEAD_GROUP_INTERNAL_H
#define PB_SRC_HEAD_GROUP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "head_group_rows.h"
#include "pyramidkv/pyramidkv.h"

/* One candidate victim: its ranking key under its head's scorer and its
 * position. Ordered by key, then position (pb__group_entry_less). */
typedef struct pb__group_entry {
    double key;
    uint32_t pos;
    uint32_t pad_;
} pb__group_entry;

struct pb_kvcache_group {
    pb_allocator allocator;
    size_t bytes;           /* the one block, as allocated */
    pb_kvcache_config head; /* each head's configuration, as created */
    uint32_t num_heads;
    uint32_t head_share;    /* S */
    uint32_t floor;         /* f */
    uint32_t head_max;
    uint32_t head_capacity;
    uint32_t recent;        /* recent_window */
    uint32_t last_pos;      /* the newest position admitted */
    int fresh;              /* no step, evict or prefill since reset */
    uint64_t layer_total;   /* T */
    pb_kvcache **heads;     /* [num_heads] */
    size_t *take;           /* [num_heads] victims per head (scratch) */
    size_t *must;           /* [num_heads] victims the cap forces */
    uint32_t head_cap;      /* C, 0 without a cap */
    size_t *cand_n;         /* [num_heads] candidates listed per head */
    uint32_t *pos_scratch;  /* [head_capacity] held positions of one head */
    double *x_scratch;      /* [head_capacity] scores of one head */
    size_t *rank_scratch;   /* [head_capacity] victim ranks of one head,
                             * in x_scratch's bytes (not live together) */
    pb__group_entry *cand;  /* [num_heads * head_capacity] candidates */
    void *peek_work;        /* the engine peek's work area */
    void *prefill_ws;       /* reserved prefill workspace, or NULL */
    size_t prefill_ws_bytes;
    size_t prefill_ws_len;  /* the prompt length it was sized for */
    uint64_t pool_rows;     /* P, as the plan reports it */
    pb__row_pool pool;      /* the pooled K/V rows (off: pool.on 0) */
};

/* a < b: lower key, then lower position. */
static inline int pb__group_entry_less(const pb__group_entry *a,
                                       const pb__group_entry *b) {
    return a->key < b->key || (a->key == b->key && a->pos < b->pos);
}

/* Head h's `want` lowest-ranked candidates (evictable positions but its
 * floor best-ranked ones), ascending, to out[0 .. *n_out-1]; at most
 * `want`. Uses the group's pos and x scratch. Changes no decision of the
 * head (its scorer's hints only). */
void pb__group_peek_lowest(const pb_kvcache_group *group, uint32_t h,
                           size_t want, pb__group_entry *out, size_t *n_out);

/* Merges the per-head ascending lists lists[h * stride ..] of cand_n[h]
 * entries: first min(must[h], cand_n[h]) of each head's, then the lowest
 * by (key, position, head) until k are taken; take[h] gets how many of
 * head h's. Returns their total (below k when the lists run out; above
 * when the musts add up to more). */
size_t pb__group_merge(const pb__group_entry *lists, size_t stride,
                       const size_t *cand_n, uint32_t num_heads, size_t k,
                       const size_t *must, size_t *take);

/* pb_kvcache_group_observe after its NULL checks: every row checked
 * once (each head's own check, before any head steps). */
pb_status pb__group_observe(pb_kvcache_group *group, uint32_t pos,
                            const float *attn, size_t head_stride,
                            const size_t *attn_len);

/* The decode evict's choice of k victims across heads (with the musts
 * in must[]): each head lists its musts and its even part of k plus one,
 * and a head whose list is taken lists twice as many while it has more,
 * so the victims are those pb__group_merge picks from full lists. take[h] gets
 * head h's count; returns their total (as pb__group_merge). */
size_t pb__group_choose(pb_kvcache_group *group, size_t k);

/* The bytes of prefill workspace for a prompt of len positions
 * (pb_kvcache_group_prefill_workspace_size), from the plan alone.
 * PB_ERR_TOO_LARGE if it does not fit in size_t. */
pb_status pb__group_prefill_bytes(uint32_t num_heads,
                                  const pb_kvcache_config *head, size_t len,
                                  size_t *bytes);

#endif /* PB_SRC_HEAD_GROUP_INTERNAL_H */
