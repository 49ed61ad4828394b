/*
 * instance_internal.h - the common part of every policy instance: the
 * resolved configuration (read and validated by policy_config.c), struct
 * pb_kvcache (what every scorer has, which the doors validate against),
 * the reserve at the start of an instance's block, the holes a scorer may
 * leave among its columns and the position lookups through them, and the
 * engine's peek of an evict's victims (policy.c). Not installed; every
 * name is pb__ or a struct member.
 */
#ifndef PB_SRC_INSTANCE_INTERNAL_H
#define PB_SRC_INSTANCE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "block_layout.h"
#include "kernels.h"
#include "pyramidkv/pyramidkv.h"

/* ------------------------------------------------------------------------ */
/* Resolved configuration                                                   */

/* A configuration after validation, with the share and the capacity
 * resolved: what the engine reads of it (the budget, the layer and the
 * pyramid are spent in resolving the share). */
typedef struct pb__config {
    uint32_t recent_window;   /* newest positions never evicted */
    uint32_t obs_window;      /* steps a window score sums */
    uint32_t pool_kernel;     /* odd width of the score pooling */
    uint32_t share;           /* explicit share, 0: the pyramid formula */
    uint32_t scorer;          /* pb_scorer */
    uint32_t sinks;           /* earliest positions never evicted */
    uint32_t pool;            /* pb_pool */
    uint32_t prefill_scope;   /* pb_prefill_scope */
    uint32_t prefill_max_len; /* prompt positions of prefill scratch */
    uint32_t row_stores;      /* pb_row_stores */
    uint32_t effective;       /* max(share, recent_window + 1) */
    uint64_t capacity;        /* positions held at most, >= 2 */
} pb__config;

/* The versioned config that the released params + options (NULL: their
 * defaults) describe. */
void pb__config_from_params(const pb_kvcache_pyramidkv_params *params,
                            const pb_kvcache_options *options,
                            pb_kvcache_config *out);

/* Reads a caller's versioned config by the rule of docs/abi.md (the
 * fields its struct_size covers, the defaults for the rest; NULL: the
 * defaults), validates it in the order the header documents and resolves
 * the share and the capacity. PB_OK or PB_ERR_PARAM (also for a
 * struct_size below its first released size, struct_growth.h, or a byte past the fields this
 * library knows that is not zero). */
pb_status pb__config_load(const pb_kvcache_config *user, pb__config *out);

/* ------------------------------------------------------------------------ */
/* The instance                                                             */

struct pb__scorer_ops;

/* The dead columns of an instance's pos[], ascending: at[0 .. n-1]. */
typedef struct pb__holes {
    const size_t *at;
    size_t n;
} pb__holes;

/*
 * The common part of one policy instance: the first member of every
 * scorer's state struct, at the start of the instance's one block (all
 * arrays live in that block, obtained at create).
 *
 * Held positions are numbered by their rank i (0 = oldest); pos[] holds
 * them by column, ascending. Columns and ranks differ only by holes: a
 * scorer may leave the columns of a few victims in place (the window
 * scorer does, until a compaction: window_internal.h), each keeping its
 * old position, so pos[] stays ascending over all columns; its table entry
 * `holes` lists them. Every other scorer has none (column == rank).
 */
struct pb_kvcache {
    const struct pb__scorer_ops *ops; /* the scorer's, chosen at create */
    pb__config cfg;
    const pb__kernels *k; /* the hot loops, chosen at create */
    size_t capacity;      /* cfg.capacity as size_t */
    size_t kept;          /* positions held now, 0 .. capacity */
    size_t sinks_kept;    /* of them, those below cfg.sinks: the oldest
                             ranks, never evicted (admissions count
                             them) */
    uint32_t *pos;        /* positions by column, ascending */
    uint32_t q_limit_bits;/* the door's weight check also flags weights at
                             or above this bit pattern (PB__WEIGHT_BIG;
                             UINT32_MAX: none) */
    int self_checks;      /* the scorer's observe checks the weights of an
                             instance that is not full itself, in the pass
                             that reads them for the scores (undoing the
                             step on a bad one), so the door need not */
    int fresh;            /* 1 after create or reset until the first
                             successful observe (the prefill door needs a
                             fresh instance) */
    pb_allocator allocator; /* resolved: never NULL functions */
    void *block;            /* what the allocator returned */
    size_t block_bytes;     /* what it was asked for */
};

/* The first column whose position is at least pos (kept + h.n if none):
 * the columns' positions, holes h included, ascend. */
static inline size_t pb__column_at_least(const pb_kvcache *p, pb__holes h,
                                         uint32_t pos) {
    size_t lo = 0, hi = p->kept + h.n;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2u;
        if (p->pos[mid] < pos)
            lo = mid + 1u;
        else
            hi = mid;
    }
    return lo;
}

/* How many of the holes h lie below column col. */
static inline size_t pb__holes_below(pb__holes h, size_t col) {
    size_t lo = 0, hi = h.n;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2u;
        if (h.at[mid] < col)
            lo = mid + 1u;
        else
            hi = mid;
    }
    return lo;
}

/* The first lines of every instance's block: its state, the common part
 * and the scorer's own struct (each scorer checks that its struct fits).
 * Every scorer reserves the same, so an instance's size depends on its
 * arrays only. */
#define PB__STATE_BYTES ((size_t)8 * PB__ALIGN)

/* The newest positions an instance of scorer `scorer` with this recent
 * window spares right after an observe with weights: the recent window,
 * or 1 where it is 0 and the scorer spares its unobserved newest
 * (pb__scorer_ops.unobserved), as pb_kvcache_evict does (policy.c). */
uint32_t pb__recent_protected(uint32_t scorer, uint32_t recent_window);

/* The bytes pb__kvcache_peek_lowest's work area needs for this instance. */
size_t pb__kvcache_peek_work_bytes(const pb_kvcache *p);

/* The first k victims an evict with this budget would choose, in the
 * order it chooses them (lowest score first, ties to the older), as
 * (score, position) pairs; the instance is not changed. Writes at most
 * cap pairs (positions[], scores[]) and returns how many the evict would
 * take in all (0 when it would take none); the pairs written are the
 * first min(cap, that) of them. work: pb__kvcache_peek_work_bytes(p)
 * bytes, 8-aligned. Allocates nothing (policy.c). */
size_t pb__kvcache_peek_lowest(const pb_kvcache *p, uint32_t budget,
                               uint32_t *positions, double *scores,
                               size_t cap, void *work);

/* pb__kvcache_peek_lowest through the scorer's lowest entry (where it has
 * one): the same answer; the instance's hints may change. */
size_t pb__kvcache_lowest(pb_kvcache *p, uint32_t budget,
                          uint32_t *positions, double *scores, size_t cap,
                          void *work);

/* Evicts exactly the held positions positions[0 .. k-1] (k >= 1: the k
 * an evict of k would choose, as pb__kvcache_lowest lists them), by the
 * scorer's evict_ranks entry: no second selection (its evict where it has
 * none). Sorts
 * positions[] ascending in place and uses ranks[0 .. k-1] as scratch;
 * their positions go ascending to victims[]. Allocates nothing
 * (policy.c). */
void pb__kvcache_evict_positions(pb_kvcache *p, uint32_t *positions,
                                 size_t k, size_t *ranks, uint32_t *victims);

/* pb_kvcache_observe's weight check of a row of n weights: the
 * PB__WEIGHT_* flags (kernels.h) it finds (policy.c). */
unsigned pb__kvcache_check_row(const pb_kvcache *p, const float *attn,
                               size_t n);

/* pb_kvcache_observe once its checks have passed (position, length, not
 * full, and the weights by pb__kvcache_check_row, whose flags are
 * passed): the step itself, so a caller of many instances that checked
 * every row first does not check them again (policy.c). */
pb_status pb__kvcache_observe_checked(pb_kvcache *p, uint32_t pos,
                                      const float *attn, size_t attn_len,
                                      unsigned flags);

/* Nonzero if the prefill door refuses this instance (PB_ERR_PARAM): its
 * scorer has no prefill entry, or it has sinks (prefill.c). */
int pb__prefill_refused(const pb_kvcache *p);

/* The prefill workspace an instance created from cfg (its capacity set)
 * asks for a prompt of len positions, as
 * pb_kvcache_prefill_workspace_size reports it (prefill.c).
 * PB_ERR_TOO_LARGE if it does not fit. */
pb_status pb__prefill_bytes_of(const pb_kvcache_config *cfg, size_t len,
                               size_t *bytes);

/* The most pb__kvcache_peek_work_bytes asks of an instance created from
 * cfg (its capacity set), whatever its scorer (policy.c). */
size_t pb__peek_work_bound(const pb_kvcache_config *cfg);

/* The positions a consistent-scope prefill of a prompt of len positions
 * may evict: all but the newest min(recent_window, len) (prefill.c). */
size_t pb__kvcache_prefill_evictable(const pb_kvcache *p, size_t len);

/* The scorer's prefill_lowest entry (scorer_ops.h) for a fresh instance
 * and a checked prompt (attn, rows, len; workspace of
 * pb_kvcache_prefill_workspace_size bytes): the k (<= end, end <=
 * pb__kvcache_prefill_evictable) lowest ranking keys among positions 0 ..
 * end-1, ascending by (key, position). PB_ERR_PARAM where the scorer has
 * no prefill (prefill.c). */
pb_status pb__kvcache_prefill_lowest(pb_kvcache *p, const float *attn,
                                     size_t rows, size_t len, void *workspace,
                                     size_t workspace_bytes, size_t end,
                                     size_t k, uint32_t *positions,
                                     double *keys);

#endif /* PB_SRC_INSTANCE_INTERNAL_H */
