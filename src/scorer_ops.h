/*
 * scorer_ops.h - what a scorer is to the engine: the table of operations
 * (pb__scorer_ops) a door dispatches through, the prompt a prefill entry
 * takes and the rule of its scratch (prefill.c), and the scorers the
 * table of scorer_table.c maps each pb_scorer to. A new scorer is a new
 * file defining a pb__scorer_ops and one entry in that table
 * (docs/architecture.md). Not installed.
 */
#ifndef PB_SRC_SCORER_OPS_H
#define PB_SRC_SCORER_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "instance_internal.h"

/* The scratch the prefill door needs for a prompt of `len` positions, in
 * three parts laid out in this order: one double per position (window,
 * then pooled scores), a pooling scratch of pb__pool_work_bytes(kernel,
 * len) only when the instance's own (work_bytes) is smaller, and one double
 * per four positions for the candidates of the narrowed selection.
 * pb_kvcache_prefill_workspace_size reports the total, and create reserves
 * it (rounded up to a whole line) for options.prefill_max_len; the parts
 * only grow with len, so the reservation serves every shorter prompt. */
typedef struct pb__prefill_scratch {
    size_t score_bytes, pool_bytes, cand_bytes;
    size_t total;
} pb__prefill_scratch;

/* Fills *out for this kernel, instance pooling scratch and len. PB_OK, or
 * PB_ERR_TOO_LARGE if len is above UINT32_MAX or a size does not fit in
 * size_t. Pure (prefill.c). */
pb_status pb__prefill_scratch_of(uint32_t pool_kernel, size_t work_bytes,
                                 size_t len, pb__prefill_scratch *out);

/* A prompt handed to a scorer's prefill entry: the arguments of
 * pb_kvcache_prefill (pyramidkv_prefill.h) after the door's checks. */
typedef struct pb__prompt {
    const float *attn;
    size_t rows, len;
    uint32_t budget;
    void *workspace;
    size_t workspace_bytes;
    uint32_t *kept;
    size_t kept_cap;
    uint32_t *victims;
    size_t victims_cap;
} pb__prompt;

/*
 * What a scorer does, called by the doors (policy.c, prefill.c) with
 * validated arguments. Chosen at create from cfg.scorer (pb__scorer_ops_of); the
 * common path never asks which scorer an instance has.
 */
typedef struct pb__scorer_ops {
    const char *name;
    /* The bytes an instance of cfg asks of the allocator: its state
     * struct and arrays from an aligned start, padded to whole lines,
     * plus PB__ALIGN - 1 for the alignment. PB_OK or PB_ERR_TOO_LARGE.
     * Pure; pb_kvcache_size reports it. */
    pb_status (*size)(const pb__config *cfg, size_t *total);
    /* Sets up a new instance: the common part is filled (cfg, capacity,
     * k, the block), the rest of the state struct is zero. Lays out the
     * arrays after the struct, then resets. */
    void (*init)(pb_kvcache *p);
    /* Back to the state after create: position 0 held, score 0. */
    void (*reset)(pb_kvcache *p);
    /* The memory the next observed step writes (prefetched by the door's
     * weight check as it reads the weights), or NULL. May be NULL. */
    const float *(*next_row)(const pb_kvcache *p);
    /* One decode step: attn (NULL: nothing observed; else attn_len ==
     * kept and, unless self_checks, checked: `flags` is what the check
     * found, PB__WEIGHT_BIG at most) updates the scores, then pos is
     * admitted. The instance is not full. PB_OK, or PB_ERR_WEIGHT with
     * the state as it was (only with self_checks). */
    pb_status (*observe)(pb_kvcache *p, uint32_t pos, const float *attn,
                         size_t attn_len, unsigned flags);
    /* Drops the `needed` (>= 1) ranks with the lowest scores among first
     * .. end-1 (ties to the lower rank), writing their positions
     * ascending to victims[]. */
    void (*evict)(pb_kvcache *p, size_t first, size_t end, size_t needed,
                  uint32_t *victims);
    /* What the evict above would choose, without changing anything: the
     * k (<= end - first) ranks with the lowest scores among first ..
     * end-1 in the order they are chosen (lowest score first, ties to the
     * lower rank), their positions to positions[] and their scores (as
     * pb_kvcache_score reports them; the window scorer's pooled) to
     * scores[]. `work` holds pb__peek_work_bytes(p) bytes, 8-aligned. */
    void (*peek_lowest)(const pb_kvcache *p, size_t first, size_t end,
                        size_t k, uint32_t *positions, double *scores,
                        void *work);
    /* The scratch peek_lowest needs for this instance. */
    size_t (*peek_work_bytes)(const pb_kvcache *p);
    /* For a caller of many instances (the layer group): exactly what
     * peek_lowest answers, by the scorer's cheapest way, which may update
     * the scorer's hints and kept sums (never what any query or evict
     * answers). NULL: peek_lowest serves. */
    void (*lowest)(pb_kvcache *p, size_t first, size_t end, size_t k,
                   uint32_t *positions, double *scores, void *work);
    /* Drops exactly ranks[0 .. k-1] (k >= 1, ascending, each among the
     * evictable ranks an evict would choose from), writing their
     * positions ascending to victims[]: the evict above with its choice
     * made by the caller (the layer group, from the lowest entry), so a
     * caller of many instances selects once. NULL: the evict above
     * serves (and selects again). */
    void (*evict_ranks)(pb_kvcache *p, const size_t *ranks, size_t k,
                        uint32_t *victims);
    /* The score pb_kvcache_score reports for the held column col. */
    double (*score)(const pb_kvcache *p, size_t col);
    /* 1: that score is a window score (pb_kvcache_window_score answers). */
    int window;
    /* The dead columns the scorer leaves in pos[] now; NULL: it leaves
     * none (column == rank). */
    pb__holes (*holes)(const pb_kvcache *p);
    /* The newest positions the scorer has not observed, which an evict
     * spares besides the recent window; NULL: none. */
    size_t (*unobserved)(const pb_kvcache *p);
    /* The prompt's compress (pb_kvcache_prefill) on a scorer that scores
     * prompts, NULL on one that does not (the door then refuses with
     * PB_ERR_PARAM, and so does a config asking for prefill scratch). The
     * door has checked the arguments, that the instance has no sinks, the
     * rows of the reference scope and the workspace's alignment; the entry
     * checks the rest in the order the header documents, and changes
     * nothing on an error. */
    pb_status (*prefill)(pb_kvcache *p, const pb__prompt *in,
                         size_t *n_kept);
    /* For a caller of many instances (the layer group's prefill): the
     * ranking keys this scorer's prefill of a fresh instance in the
     * consistent scope gives the prompt's positions, and the k lowest of
     * its evictable ones (the first `end`) ascending by (key, position):
     * positions to positions[], keys to keys[]. The prompt is checked
     * (weights valid, workspace as prefill_workspace reports); k <= end.
     * Writes only the workspace and the instance's pooling scratch. NULL
     * where prefill is. */
    void (*prefill_lowest)(pb_kvcache *p, const pb__prompt *in, size_t end,
                           size_t k, uint32_t *positions, double *keys);
    /* pb_kvcache_prefill_workspace_size for this instance, NULL where
     * prefill is (the size is then pb__prefill_scratch_of's with no
     * pooling scratch of the instance's own). */
    pb_status (*prefill_workspace)(const pb_kvcache *p, size_t len,
                                   size_t *bytes);
} pb__scorer_ops;

/* The scorers, each defined in its own file, and the table of
 * scorer_table.c that maps a pb_scorer to them (NULL for an unknown
 * one). */
extern const pb__scorer_ops pb__window_ops;     /* window_scorer.c */
extern const pb__scorer_ops pb__cumulative_ops; /* score_cumulative.c */
extern const pb__scorer_ops pb__last_ops;       /* score_last.c */
extern const pb__scorer_ops pb__votes_ops;      /* score_votes.c */
extern const pb__scorer_ops pb__none_ops;       /* score_none.c */
const pb__scorer_ops *pb__scorer_ops_of(uint32_t scorer);

/* The holes of an instance (its scorer's entry; none without one). */
static inline pb__holes pb__holes_of(const pb_kvcache *p) {
    const pb__holes none = {NULL, 0u};
    return p->ops->holes != NULL ? p->ops->holes(p) : none;
}

#endif /* PB_SRC_SCORER_OPS_H */
