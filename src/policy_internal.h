/*
 * policy_internal.h - the engine behind every policy door (the native
 * functions, the policybook vtables, and the prefill door that lives in its
 * own file). Not installed; every name here is pb__ or a struct member.
 *
 * It owns the definition of struct pb_kvcache and the contracts of the
 * engine's modules:
 *   - the instance layout and its sizing (policy.c),
 *   - the observation ring, stored slot-major (window_ring.c),
 *   - pooling of window scores across neighbours (pooling.c),
 *   - selection of the k lowest keys (selection.c).
 * It does not own the budget arithmetic (pyramid_budget.c) or any public
 * declaration (pyramidkv.h).
 *
 * A door validates its caller's input, then drives these pieces; none of
 * them allocates, prints or aborts, and each assumes validated arguments
 * (they assert their invariants).
 */
#ifndef PB_SRC_POLICY_INTERNAL_H
#define PB_SRC_POLICY_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "pyramidkv/pyramidkv.h"

/* Every array of an instance starts on its own cache line, and the whole
 * instance is padded to whole lines, so two instances never share a line. */
#define PB__ALIGN ((size_t)64)

/* ------------------------------------------------------------------------ */
/* Resolved configuration                                                   */

/* Params and options after validation, with the capacity resolved. */
typedef struct pb__config {
    pb_kvcache_pyramidkv_params params;
    uint32_t pool;            /* pb_pool */
    uint32_t prefill_scope;   /* pb_prefill_scope */
    uint32_t prefill_max_len; /* prompt positions of prefill scratch */
    uint32_t effective;       /* max(share, recent_window + 1) */
    uint64_t capacity;        /* positions held at most, >= 2 */
} pb__config;

/* Validates params and options (NULL: the defaults) in the order the
 * header documents and resolves the capacity. PB_OK or PB_ERR_PARAM. */
pb_status pb__config_resolve(const pb_kvcache_pyramidkv_params *params,
                             const pb_kvcache_options *options,
                             pb__config *out);

/* ------------------------------------------------------------------------ */
/* The instance                                                             */

/*
 * One policy instance. All arrays live in one block obtained at create.
 *
 * Held positions are numbered by their rank i (0 = oldest), which is also
 * their column in the observation ring. pos[] is dense by rank.
 *
 * The ring is slot-major: row s (s = 0 .. obs_window-1) holds, for every
 * column, the weight observed in ring slot s, at ring + s * row_stride. A
 * decode step therefore writes one contiguous row (a copy of the weights),
 * and a window score is the fold of one column over the rows.
 */
struct pb_kvcache {
    pb__config cfg;
    size_t capacity;      /* cfg.capacity as size_t */
    size_t kept;          /* positions held now, 1 .. capacity */
    uint32_t slot;        /* ring slot the next observed step writes */
    int fresh;            /* 1 after create or reset until the first
                             successful observe (the prefill door needs a
                             fresh instance) */
    uint32_t obs_window;  /* cfg.params.obs_window */
    size_t half_kernel;   /* (pool_kernel - 1) / 2 */
    size_t row_stride;    /* floats from one ring row to the next */

    uint32_t *pos;        /* [capacity] held positions, ascending */
    float *ring;          /* [obs_window * row_stride] */
    double *scores;       /* [capacity] evict scratch: window, then pooled
                             scores by rank */
    uint64_t *alive;      /* [ceil(capacity / 64)] evict scratch: survivor
                             bitmap by rank */
    void *work;           /* pooling scratch, work_bytes */
    size_t work_bytes;
    size_t *hist;         /* [PB__HIST_BINS] selection histogram */
    void *prefill_scratch;       /* reserved for the prefill door */
    size_t prefill_scratch_bytes;

    pb_allocator allocator; /* resolved: never NULL functions */
    void *block;            /* what the allocator returned */
    size_t block_bytes;     /* what it was asked for */
};

/* The scratch, in bytes, the prefill door uses for a prompt of `len`
 * positions; the door's pb_kvcache_prefill_workspace_size reports exactly
 * this and create reserves it for options.prefill_max_len (as
 * prefill_scratch). It is one double per position (window, then pooled
 * scores) plus a pooling queue of up to `len` entries (pb__pool_max with a
 * large kernel), rounded up to whole cache lines: PB__PREFILL_BYTES_PER_
 * POSITION bytes a position. PB_OK, or PB_ERR_TOO_LARGE if it does not fit
 * in size_t. Pure. */
#define PB__PREFILL_BYTES_PER_POSITION ((size_t)24)
pb_status pb__prefill_scratch_bytes(size_t len, size_t *bytes);

/* The sizes and offsets (from the aligned start) of an instance's block. */
typedef struct pb__layout {
    size_t row_stride;
    size_t off_pos, off_ring, off_scores, off_alive, off_work, off_hist;
    size_t off_prefill;
    size_t work_bytes, prefill_bytes;
    size_t span;  /* bytes from the aligned start to the end, whole lines */
    size_t total; /* bytes asked of the allocator: span + PB__ALIGN - 1 */
} pb__layout;

/* The block for cfg; PB_OK or PB_ERR_TOO_LARGE if a size overflows. */
pb_status pb__layout_of(const pb__config *cfg, pb__layout *out);

/* ------------------------------------------------------------------------ */
/* Observation ring (window_ring.c)                                         */

/* Copies n weights into ring row `slot`, columns 0 .. n-1. */
void pb__ring_store_row(float *ring, size_t row_stride, uint32_t slot,
                        const float *weights, size_t n);

/* Zeroes column `col` in every row. */
void pb__ring_clear_column(float *ring, size_t row_stride,
                           uint32_t obs_window, size_t col);

/* The window score of column `col`: 0.0 plus each row's weight, as a
 * double, in row order 0 .. obs_window-1. */
double pb__ring_window_score(const float *ring, size_t row_stride,
                             uint32_t obs_window, size_t col);

/* out[j] = pb__ring_window_score(col j) for j = 0 .. n-1, bit for bit. */
void pb__ring_window_scores(const float *ring, size_t row_stride,
                            uint32_t obs_window, size_t n, double *out);

/* Moves, in every row, the columns whose bit is set in alive[] (bits
 * 0 .. n-1; no bit at or above n may be set) to the front, keeping their
 * order. */
void pb__ring_compact(float *ring, size_t row_stride, uint32_t obs_window,
                      const uint64_t *alive, size_t n);

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
