/*
 * policy_internal.h - the engine behind every policy door (the native
 * functions, the policybook vtables, and the prefill door). Not installed;
 * every name here is pb__ or a struct member.
 *
 * It owns the common part of an instance (struct pb_kvcache: what every
 * scorer has, which the doors validate against), the table of scorer
 * operations a door dispatches through, and the contracts of the modules
 * every scorer may use:
 *   - reading, validating and sizing a configuration, and the table of
 *     scorers (policy_config.c),
 *   - pooling of scores across neighbours (pooling.c),
 *   - selection of the k lowest keys (selection.c),
 *   - the hot loops, one variant per instruction set (kernels.h).
 * Each scorer keeps its own state in a struct that starts with the common
 * part, in the instance's one block: the window scorer's in
 * window_internal.h (its ring, holes, sums and fast paths), the other
 * scorers' in source_internal.h. A new scorer is a new file defining a
 * pb__scorer_ops and one entry in the table of policy_config.c.
 * It does not own the budget arithmetic (pyramid_budget.c) or any public
 * declaration (pyramidkv.h).
 *
 * A door validates its caller's input, then drives these pieces; none of
 * them allocates, prints or aborts, and each assumes validated arguments
 * (they assert their invariants).
 */
#ifndef PB_SRC_POLICY_INTERNAL_H
#define PB_SRC_POLICY_INTERNAL_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "block_layout.h"
#include "kernels.h"
#include "pyramidkv/pyramidkv.h"
#include "weight_check.h"


/* A hint that the cache line holding addr is read (rw 0) or written (rw 1)
 * soon. It changes no value; compilers without the builtin get nothing. */
#if defined(__GNUC__) || defined(__clang__)
#define PB__PREFETCH(addr, rw) __builtin_prefetch((addr), (rw), 3)
#else
#define PB__PREFETCH(addr, rw) ((void)(addr))
#endif

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

/* The index of the lowest set bit of v != 0: the compilers' count of
 * trailing zeros where there is one, else a de Bruijn multiply. */
static inline unsigned pb__lowest_bit(uint64_t v) {
    assert(v != 0u);
#if defined(__GNUC__) || defined(__clang__)
    return (unsigned)__builtin_ctzll(v);
#else
    static const unsigned char index[64] = {
         0,  1,  2, 53,  3,  7, 54, 27,  4, 38, 41,  8, 34, 55, 48, 28,
        62,  5, 39, 46, 44, 42, 22,  9, 24, 35, 59, 56, 49, 18, 29, 11,
        63, 52,  6, 26, 37, 40, 33, 47, 61, 45, 43, 21, 23, 58, 17, 10,
        51, 25, 36, 32, 60, 20, 57, 16, 50, 31, 19, 15, 30, 14, 13, 12};
    return index[((v & (~v + 1u)) * UINT64_C(0x022FDD63CC95386D)) >> 58];
#endif
}

/* How many of the ascending pos[0 .. n-1] are below `bound` (the sinks
 * held: few, and the oldest). A short walk, then a binary search without
 * branches on the data. The doors keep that count as they admit
 * (sinks_kept); debug builds check it against this at every evict. */
static inline size_t pb__count_below(const uint32_t *pos, size_t n,
                                     uint32_t bound) {
    size_t i = 0;
    for (; i < n && i < 8u; ++i)
        if (pos[i] >= bound) return i;
    if (i == n) return n;
    size_t lo = i, len = n - i; /* pos[lo - 1] < bound, len >= 1 */
    while (len > 1u) {
        const size_t half = len / 2u;
        lo = pos[lo + half] < bound ? lo + half : lo;
        len -= half;
    }
    return lo + (pos[lo] < bound);
}

/* ------------------------------------------------------------------------ */
/* Runs of live columns                                                     */

/* A run of live columns: ranks [rank, rank + len) live in columns
 * [col, col + len). */
typedef struct pb__run {
    size_t rank, col, len;
} pb__run;

/* Walks the runs covering ranks 0 .. n-1 in order: start from a zeroed
 * pb__runs and call pb__run_next until it returns 0. */
typedef struct pb__runs {
    size_t rank, col, hole;
} pb__runs;

/* An iterator positioned at rank `rank`, for pb__run_next with n > rank. */
pb__runs pb__runs_at(const size_t *holes, size_t n_holes, size_t rank);

static inline int pb__run_next(pb__runs *it, const size_t *holes,
                               size_t n_holes, size_t n, pb__run *out) {
    if (it->rank >= n) return 0;
    while (it->hole < n_holes && holes[it->hole] == it->col) {
        it->col += 1u;
        it->hole += 1u;
    }
    size_t len = n - it->rank;
    if (it->hole < n_holes && holes[it->hole] - it->col < len)
        len = holes[it->hole] - it->col;
    out->rank = it->rank;
    out->col = it->col;
    out->len = len;
    it->rank += len;
    it->col += len;
    return 1;
}

/* ------------------------------------------------------------------------ */
/* The instance and its scorer                                              */

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
    /* pb_kvcache_prefill_workspace_size for this instance, NULL where
     * prefill is (the size is then pb__prefill_scratch_of's with no
     * pooling scratch of the instance's own). */
    pb_status (*prefill_workspace)(const pb_kvcache *p, size_t len,
                                   size_t *bytes);
} pb__scorer_ops;

/* The scorers, each defined in its own file, and the table of
 * policy_config.c that maps a pb_scorer to them (NULL for an unknown
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

/* ------------------------------------------------------------------------ */
/* Pooling (pooling.c)                                                      */

/* Scratch bytes pb__pool_max and pb__pool_avg need for arrays of up to
 * `n_max` scores with this kernel; 0 if none. Never overflows for
 * n_max < SIZE_MAX / 16. */
size_t pb__pool_work_bytes(uint32_t pool_kernel, size_t n_max);

/* x[i] <- max of x[max(0, i-h) .. min(n-1, i+h)], in place, for scores
 * x[i] >= +0. O(n) for every h: doubling for small h, a monotonic queue
 * beyond. work: pb__pool_work_bytes(2h+1, n) bytes, 8-aligned. */
void pb__pool_max(double *x, size_t n, size_t h, void *work,
                  size_t work_bytes);

/* The half-width up to which max pooling doubles instead of queueing. */
#define PB__DOUBLING_MAX_HALF ((size_t)15)

/* out[k] = max of x[max(0, i-h) .. min(n-1, i+h)] over the whole ranked
 * array, for i = i0 + k, k = 0 .. m-1 (h <= PB__DOUBLING_MAX_HALF): the same
 * arithmetic as pb__pool_max, a block at a time, on a span the caller no
 * longer needs. x[0 .. len-1] holds ranks lo .. lo+len-1 (lo = max(0, i0-h),
 * the span reaching h past the block or to the end), the block starts at
 * x[off], and x is overwritten. */
void pb__window_max_span(const pb__kernels *k, double *x, size_t len,
                         size_t h, size_t off, size_t m, double *out);

/* x[i] <- (0.0 + x[lo] + ... + x[hi]) / kernel, lo = max(0, i-h),
 * hi = min(n-1, i+h), summed in ascending order: the out-of-range
 * neighbours count as zeros. O(n * min(kernel, n)): the sum order is part
 * of the definition, so no running sum may replace it. */
void pb__pool_avg(double *x, size_t n, size_t h, uint32_t kernel, void *work,
                  size_t work_bytes);

/* ------------------------------------------------------------------------ */
/* Selection (selection.c)                                                  */

#define PB__HIST_BINS 256u

/* A cut through a key array: the chosen keys are those whose bit pattern is
 * below `below`, plus the first `take_equal` (in index order) equal to it.
 * Non-negative doubles order like their bit patterns. */
typedef struct pb__cut {
    uint64_t below;
    size_t take_equal;
} pb__cut;

/* The cut choosing exactly the k smallest of keys[0 .. n-1] (k <= n), ties
 * to the lower index. Keys must be >= +0.0 (not -0.0) and not NaN.
 * O(n) per pass, at most 8 passes; hist has PB__HIST_BINS entries. */
void pb__select_lowest(const double *keys, size_t n, size_t k, size_t *hist,
                       pb__cut *out);

/* pb__select_lowest for 32-bit keys ordered as unsigned integers (vote
 * counts, or the bits of non-negative floats other than -0.0). */
void pb__select_lowest_u32(const uint32_t *keys, size_t n, size_t k,
                           size_t *hist, pb__cut *out);

/* The bit pattern of a double. */
uint64_t pb__key_bits(double v);

/* Applies a cut to the next key in index order: 1 if chosen. */
static inline int pb__cut_takes(pb__cut *cut, uint64_t bits) {
    if (bits < cut->below) return 1;
    if (bits == cut->below && cut->take_equal > 0) {
        cut->take_equal -= 1;
        return 1;
    }
    return 0;
}

#endif /* PB_SRC_POLICY_INTERNAL_H */
