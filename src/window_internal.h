/*
 * window_internal.h - the window scorer's own state and the contracts of
 * its modules, private to them (and to the prefill door, which scores a
 * prompt by the same windows, and the white-box tests):
 *   - its state struct, its layout and sizing (window_scorer.c),
 *   - its observe, evict and the compactions of its holes (window_scorer.c,
 *     window_evict.c),
 *   - the observation ring, stored slot-major (window_ring.c),
 *   - evicts of a few victims: the quantised window sums and the filtered
 *     selection they allow (window_sums.c, score_filter.c), the streaming
 *     selection and the prefix folds that halve it (score_stream.c).
 * Not installed. The common part and the scorer table are
 * instance_internal.h and scorer_ops.h.
 */
#ifndef PB_SRC_WINDOW_INTERNAL_H
#define PB_SRC_WINDOW_INTERNAL_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include "column_runs.h"
#include "pooling.h"
#include "scorer_ops.h"
#include "selection.h"

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


/* ------------------------------------------------------------------------ */
/* The window scorer's instance                                             */

/*
 * The window scorer's state: the common part, then what its ring, its
 * holes and its fast paths need. All arrays live in the instance's block.
 *
 * Held positions are numbered by their rank i (0 = oldest). The ring is
 * slot-major: row s (s = 0 .. obs_window-1) holds, for every ring column,
 * the weight observed in ring slot s, at ring + s * row_stride. A decode
 * step therefore writes one contiguous row (a copy of the weights), and a
 * window score is the fold of one column over the rows. pos[] and the
 * per-column array scores[] are indexed by column too.
 *
 * Columns and ranks differ only by holes: the columns of positions evicted
 * by a cheap (filtered or streamed) evict stay in place, in the ring, in
 * pos[] and in scores[], until max_holes of them have gathered, so that a
 * few victims move nothing. holes[] lists them in ascending order; rank i
 * lives in column pb__ring_column_of(i), and a hole keeps its old position
 * in pos[], so pos[] stays ascending over all columns. Every other path
 * (create, reset, a full evict) leaves no hole, so column == rank.
 *
 * When a compaction is due and evicts come far apart, or while the sums
 * are kept, the ring is compacted lazily instead: pos[] (and the sums) are
 * compacted at once, but each ring row keeps the old layout, with the dead
 * columns lazy_holes[], until the next decode step of its slot rewrites it
 * in the new layout (moving it first when the sums want its old weights,
 * a row the step brings into the caches anyway); dense_rows has a bit per
 * row so rewritten. Column c of the new layout is cell
 * pb__ring_column_of(lazy_holes, n_lazy, c) of the old one, and a row of
 * the old layout holds n_lazy more columns. After obs_window steps every
 * row is rewritten and the old layout is forgotten. The filter's evicts
 * read either layout and add holes to the new one (holes + n_lazy stay
 * within pb__lazy_room); anything else first moves the rows not yet
 * rewritten (pb__window_finish_lazy). The lazy state never has prefix folds, and has
 * no hole unless the sums are kept (or were when the hole came).
 *
 * The prefill entry (window_prefill.c) writes pos, kept, slot and the ring
 * directly, on an instance fresh from create or reset only (no holes, not
 * lazy, sums_valid and prefix_valid 0, zero_upto 1), and leaves n_holes
 * and n_lazy at 0, sums_valid and prefix_valid at 0 and zero_upto at most
 * kept; the engine rebuilds its sums or prefix folds when it next wants
 * them.
 */
/* Scans of up to this many least window maxima keep a guessed bound of
 * their own (score_filter.c, scan): a head asked for its few lowest keys
 * at every decode step scans as a one-victim evict does. */
#define PB__GUESS_SLOTS 8u

typedef struct pb__window {
    pb_kvcache c;         /* the common part (first: an instance is this) */
    uint32_t slot;        /* ring slot the next observed step writes */
    uint32_t obs_window;  /* cfg.obs_window */
    unsigned last_path;   /* how the last evict that chose victims went, a
                             pb__path (read by white-box tests only) */
    size_t half_kernel;   /* (pool_kernel - 1) / 2 */
    size_t row_stride;    /* floats from one ring row to the next, >=
                             capacity + pb__lazy_room(capacity) */
    float *ring;          /* [obs_window * row_stride] */
    double *scores;       /* [columns]: by column, the quantised window sums
                             while sums_valid (0 in the holes), or the
                             prefix folds while prefix_valid; else evict
                             scratch by rank (window, then pooled
                             scores) */
    size_t columns;       /* capacity + max_holes: length of pos[], scores[] */
    uint64_t *alive;      /* [ceil(row_stride / 64)] evict scratch:
                             surviving columns */
    size_t *holes;        /* dead columns of c.pos[], ascending */
    size_t n_holes;
    size_t max_holes;     /* room of holes[] */
    size_t *lazy_holes;   /* [pb__lazy_room(capacity)] dead
                             columns of the rows not yet rewritten,
                             ascending; n_lazy > 0 only in the lazy state */
    size_t n_lazy;
    uint64_t dense_rows;  /* in the lazy state, bit s: row s rewritten */
    int lazy_ok;          /* obs_window <= 64: lazy compaction possible */
    unsigned guess_step[PB__GUESS_SLOTS]; /* for a scan of n least (n
                             <= PB__GUESS_SLOTS), slot n-1: the filter's
                             guessed bound has the margin 2^-guess_step,
                             0 .. PB__GUESS_STEPS (with guess_m, below; a
                             hint) */
    size_t zero_upto;     /* ring columns kept + n_holes + n_lazy ..
                             zero_upto-1 are 0 in every row (and, in a row
                             rewritten in the lazy state, so are kept +
                             n_holes ..): an
                             admission there writes nothing, and the next
                             one past it zeroes a whole cache line of
                             columns at once */
    void *work;           /* pooling scratch */
    size_t work_bytes;
    size_t *hist;         /* [PB__HIST_BINS] selection histogram; the same
                             memory as cands and heap (no call uses both) */
    void *prefill_scratch;       /* reserved for the prefill door */
    size_t prefill_scratch_bytes;

    /* Evicts of a few victims (score_filter.c, score_stream.c). */
    int stream_ok;        /* the streaming path may be used: max pooling,
                             half_kernel <= PB__DOUBLING_MAX_HALF */
    int filter_ok;        /* the filter may be used: stream_ok and a small
                             obs_window */
    int sums_valid;       /* scores[] holds the quantised sums and every
                             observe keeps them current */
    int prefix_valid;     /* scores[] holds, per column, the exact fold of
                             ring slots 0 .. slot-1 (all slots when slot is
                             0), kept current by every observe: an exact
                             window score then needs only the slots not yet
                             rewritten in this turn of the ring */
    double q_scale;       /* 2^q_shift: weight -> fixed point */
    uint64_t rounded_rows;/* while sums_valid, bit s: ring row s may hold a
                             weight of a held position that q rounded; 0
                             (with obs_window <= 64): every window score
                             is its sum / q_scale, exactly */
    uint32_t gap;         /* observed steps since the last evict that chose
                             victims, saturating */
    struct pb__candidate *cands; /* [PB__FILTER_MAX_CANDIDATES] */
    double *heap;         /* [PB__FILTER_MAX_NEEDED] */
    uint32_t filter_wait; /* evicts to go before the sums are rebuilt */
    uint32_t filter_backoff; /* the last wait imposed after a miss */
    size_t seed_col;      /* a column whose window max seeds the next
                             filtered scan of one victim (the runner-up of
                             the last one); only a hint, SIZE_MAX: none */
    double guess_m[PB__GUESS_SLOTS]; /* slot n-1: the last scan of n
                             least's n-th least window max, the next
                             one's guessed bound; a hint, < 0: none
                             (score_filter.c, scan); its margin is
                             guess_step, above */
} pb__window;

/* The window scorer's state of an instance that has it (NULL for any
 * other scorer). */
static inline pb__window *pb__window_of(pb_kvcache *p) {
    return p->ops == &pb__window_ops ? (pb__window *)(void *)p : NULL;
}
static inline const pb__window *pb__window_of_const(const pb_kvcache *p) {
    return p->ops == &pb__window_ops ? (const pb__window *)(const void *)p
                                     : NULL;
}

/* The sizes and offsets (from the aligned start) of an instance's block. */
typedef struct pb__layout {
    size_t row_stride, max_holes;
    size_t off_pos, off_ring, off_scores, off_alive, off_holes, off_work;
    size_t off_lazy;
    size_t off_hist, off_prefill, off_cands, off_heap;
    size_t work_bytes, prefill_bytes;
    size_t span;  /* bytes from the aligned start to the end, whole lines */
    size_t total; /* bytes asked of the allocator: span + PB__ALIGN - 1 */
} pb__layout;

/* The block of a window scorer for cfg; PB_OK or PB_ERR_TOO_LARGE if a
 * size overflows. */
pb_status pb__window_layout_of(const pb__config *cfg, pb__layout *out);

/* The paths an evict can take (pb__window.last_path). */
enum pb__path {
    PB__PATH_NONE = 0,     /* no evict has chosen victims since reset */
    PB__PATH_FULL = 1,     /* full path */
    PB__PATH_FILTERED = 2, /* filtered, victims' columns left as holes */
    PB__PATH_FILTERED_COMPACTED = 3, /* filtered, then the ring compacted */
    PB__PATH_STREAMED = 4,  /* streamed exact scores, victims left as holes */
    PB__PATH_STREAMED_COMPACTED = 5 /* streamed, then the ring compacted */
};

/* ------------------------------------------------------------------------ */
/* Observation ring (window_ring.c)                                         */

/* The ring column of rank `rank` given the sorted dead columns. */
size_t pb__ring_column_of(const size_t *holes, size_t n_holes, size_t rank);

/* Copies n weights (by rank) into ring row `slot`, past the caches with
 * `streamed` (pb__copy_floats, one fence after the whole row). */
void pb__ring_store_row(float *ring, size_t row_stride, uint32_t slot,
                        const float *weights, size_t n, const size_t *holes,
                        size_t n_holes, int streamed);

/* Zeroes column `col` in every row. */
void pb__ring_clear_column(float *ring, size_t row_stride,
                           uint32_t obs_window, size_t col);

/* Zeroes columns col .. col+count-1 in every row. */
void pb__ring_clear_columns(float *ring, size_t row_stride,
                            uint32_t obs_window, size_t col, size_t count);

/* Moves one row's columns 0 .. n-1 of a layout without the dead columns
 * dead[0 .. n_dead-1] (ascending) from the layout with them: column c
 * takes cell pb__ring_column_of(dead, n_dead, c). */
void pb__ring_move_row(float *row, const size_t *dead, size_t n_dead,
                       size_t n);

/* The window score of column `col`: 0.0 plus each row's weight, as a
 * double, in row order 0 .. obs_window-1. In the lazy state (n_lazy > 0)
 * a row whose bit is clear in dense_rows holds it in its old layout's
 * cell pb__ring_column_of(lazy, n_lazy, col). */
double pb__ring_window_score(const float *ring, size_t row_stride,
                             uint32_t obs_window, size_t col,
                             const size_t *lazy, size_t n_lazy,
                             uint64_t dense_rows);

/* out[i] = the window score of rank i, i = 0 .. n-1, bit for bit as
 * pb__ring_window_score (computed by k->fold_rows). */
void pb__ring_window_scores(const pb__kernels *k, const float *ring,
                            size_t row_stride, uint32_t obs_window, size_t n,
                            const size_t *holes, size_t n_holes, double *out);

/* out[j] = the window score of rank first + j, j = 0 .. count-1. With
 * prefix not NULL (prefix[col]: the fold of rows 0 .. row_begin-1 of that
 * column, prefix_len columns long), only rows row_begin .. obs_window-1
 * are added to it: the same fold, finished. */
void pb__ring_window_scores_range(const pb__kernels *k, const float *ring,
                                  size_t row_stride, uint32_t obs_window,
                                  const size_t *holes, size_t n_holes,
                                  size_t first, size_t count,
                                  const double *prefix, size_t prefix_len,
                                  uint32_t row_begin, double *out);

/* Moves, in every row, the columns whose bit is set in alive[] (bits
 * 0 .. n_cols-1; no bit at or above n_cols may be set) to the front,
 * keeping their order. */
void pb__ring_compact(float *ring, size_t row_stride, uint32_t obs_window,
                      const uint64_t *alive, size_t n_cols);

/* The same for one array of n_cols elements of elem_size bytes. */
void pb__compact_columns(void *array, size_t elem_size, const uint64_t *alive,
                         size_t n_cols);

/* ------------------------------------------------------------------------ */
/* Evicts of a few victims (score_filter.c, score_stream.c)                 */

/* The filtered and the streaming paths take at most this many victims ... */
#define PB__FILTER_MAX_NEEDED ((size_t)64)

/* The least allowance of holes (window_scorer.c, max_holes_of), and the
 * least a cheap evict lets gather before it compacts (window_evict.c). */
#define PB__HOLES_MIN ((size_t)8)

/* The least margin of the filtered scan's guessed bound: 2^-20 of the
 * last scan's needed-th least window max (score_filter.c, scan). */
#define PB__GUESS_STEPS 20u

/* Dead columns a ring row of the lazy state's old layout may hold: the
 * holes and the victims of the evict that entered it (drop_ranks compacts
 * at once beyond). 1/32 of the capacity, at least twice the holes'
 * allowance (window_scorer.c), and at least one cheap evict's victims;
 * from a capacity of 2,048 on the ring carries no fixed columns for it. */
static inline size_t pb__lazy_room(size_t capacity) {
    return capacity / 32u > PB__FILTER_MAX_NEEDED ? capacity / 32u
                                                  : PB__FILTER_MAX_NEEDED;
}
/* ... and as long as no more candidates than this need exact scores. */
#define PB__FILTER_MAX_CANDIDATES ((size_t)128)

struct pb__candidate {
    size_t rank;
    double value; /* the window max of the sums, then the exact pooled */
};

/* Sets stream_ok, filter_ok, q_scale and q_limit_bits for the instance's
 * params. */
void pb__filter_configure(pb__window *p);

/* Recomputes the sums of every held column from the ring. Returns 1 if
 * every weight could be quantised (the sums are valid), 0 if not. */
int pb__filter_rebuild(pb__window *p);

/* pb__ring_store_row that also brings the sums of the held ranks up to
 * date; every weight must be below the quantising limit. */
void pb__filter_store_row(pb__window *p, const float *weights, size_t n);

/* Chooses the `needed` victims among ranks 0 .. evictable-1 from the sums,
 * recomputing exact window scores only where the sums cannot decide.
 * On success writes the victims' ranks, ascending, to ranks[0 .. needed-1]
 * and returns 1; returns 0 when deciding this way would cost more than the
 * full path (the caller then takes it). pooled, when not NULL, receives on
 * success each victim's exact pooled score beside its rank (the bits the
 * ring's fold gives). Changes only the scan's hints. */
int pb__filter_select(pb__window *p, size_t evictable, size_t needed,
                      size_t *ranks, double *pooled);

/* T*(m): no rank whose window max of sums exceeds it can be a victim
 * (score_filter.c gives the bound). */
static inline double pb__filter_threshold(double m, double obs) {
    return m + (2.0 * obs + 2.0) + (obs * m) * 0x1p-49;
}

/* The scan of pb__filter_select (score_filter.c) over ranks 0 ..
 * evictable-1: with thr < 0 it keeps in p->heap the `needed` least window
 * maxima of sums and records in p->cands (rank order) every rank that may
 * still be a candidate; with thr >= 0 it records the ranks at or below
 * thr. Returns the number recorded, or SIZE_MAX when they overflow the
 * room. exact: the sums are exact (pb__filter_select_exact). */
size_t pb__filter_scan(pb__window *p, size_t evictable, size_t needed,
                       double thr, int exact);

/* pb__filter_select when no held weight rounded: the least (window max,
 * rank) pairs, ties unlimited (score_filter.c); pooled as there, every
 * score given. */
int pb__filter_select_exact(pb__window *p, size_t evictable, size_t needed,
                            size_t *ranks, double *pooled);

/* Recomputes the prefix folds of every held column from the ring (always
 * possible; sets prefix_valid). */
void pb__prefix_rebuild(pb__window *p);

/* Chooses the `needed` victims among ranks 0 .. evictable-1 from exact
 * window scores computed a block at a time (max pooling, half_kernel <=
 * PB__DOUBLING_MAX_HALF), keeping only the best `needed` so far. It uses
 * no array the size of the instance, so scores[] survives it; when it
 * holds prefix folds they are finished instead of every slot being
 * folded. Writes the ranks ascending to ranks[0 .. needed-1].
 * O(held * obs_window). */
void pb__stream_select(pb__window *p, size_t evictable, size_t needed,
                       size_t *ranks);

/* The candidates' heaps of the filtered and streaming selections. */
/* 1 if a goes after b in (pooled, rank) order. */
static inline int pb__cand_after(const struct pb__candidate *a,
                      const struct pb__candidate *b) {
    return a->value > b->value || (a->value == b->value && a->rank > b->rank);
}

/* heap[0 .. n-1] is a max-heap in (pooled, rank) order; heap[i] may be
 * too small. */
static inline void pb__cand_sift_down(struct pb__candidate *heap, size_t n, size_t i) {
    const struct pb__candidate v = heap[i];
    for (;;) {
        size_t c = 2u * i + 1u;
        if (c >= n) break;
        if (c + 1u < n && pb__cand_after(&heap[c + 1u], &heap[c])) ++c;
        if (!pb__cand_after(&heap[c], &v)) break;
        heap[i] = heap[c];
        i = c;
    }
    heap[i] = v;
}

static inline void pb__cand_push(struct pb__candidate *heap, size_t n,
                      struct pb__candidate v) {
    size_t i = n;
    while (i > 0u) {
        const size_t parent = (i - 1u) / 2u;
        if (!pb__cand_after(&v, &heap[parent])) break;
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = v;
}

/* Sorts ranks[0 .. n-1] ascending (n is small). */
static inline void pb__sort_ranks(size_t *ranks, size_t n) {
    for (size_t i = 1; i < n; ++i) {
        const size_t v = ranks[i];
        size_t j = i;
        for (; j > 0u && ranks[j - 1u] > v; --j) ranks[j] = ranks[j - 1u];
        ranks[j] = v;
    }
}

/* The scan shared by both selections: the first k' >= k below m with
 * v[k'] < bound, or m (a vectorised search, simd_kernels.c). */
static inline size_t pb__next_below(const pb__kernels *kern, const double *v,
                                    size_t k, size_t m, double bound) {
    return k >= m ? m : k + kern->first_below(v + k, m - k, bound);
}

/* ------------------------------------------------------------------------ */
/* Between the window scorer's files (window_scorer.c, window_evict.c)      */

/* The longest evict cadence (observed steps between evicts that choose
 * victims) for which the sums are kept current. */
#define PB__FILTER_MAX_GAP UINT32_C(8)

/* Leaves the lazy state: moves the rows not yet rewritten to the new
 * layout (holes included; their tails zeroed as the dense ones are). */
void pb__window_finish_lazy(pb__window *p);

/* The window scorer's evict (pb__scorer_ops.evict). */
void pb__window_evict(pb_kvcache *inst, size_t first, size_t end,
                      size_t needed, uint32_t *victims);

/* Its evict of given ranks (pb__scorer_ops.evict_ranks). */
void pb__window_evict_ranks(pb_kvcache *inst, const size_t *ranks, size_t k,
                            uint32_t *victims);

/* Its prefill entry (pb__scorer_ops.prefill, prefill_workspace;
 * window_prefill.c). */
pb_status pb__window_prefill(pb_kvcache *inst, const pb__prompt *in,
                             size_t *n_kept);
pb_status pb__window_prefill_workspace(const pb_kvcache *inst, size_t len,
                                       size_t *bytes);
void pb__window_prefill_lowest(pb_kvcache *inst, const pb__prompt *in,
                               size_t end, size_t k, uint32_t *positions,
                               double *keys);

/* Its peek (pb__scorer_ops.peek_lowest) and the scratch it needs. */
/* The pooled window scores of every held rank, as the peek ranks them,
 * into work (pb__window_peek_work_bytes), which it returns
 * (window_evict.c). */
double *pb__window_pooled_all(const pb__window *p, void *work);
void pb__window_peek_lowest(const pb_kvcache *inst, size_t first, size_t end,
                            size_t k, uint32_t *positions, double *scores,
                            void *work);
size_t pb__window_peek_work_bytes(const pb_kvcache *inst);

/* Its lowest entry (pb__scorer_ops.lowest, window_lowest.c): the peek's
 * answer through the filter when the kept sums allow it. */
void pb__window_lowest(pb_kvcache *inst, size_t first, size_t end, size_t k,
                       uint32_t *positions, double *scores, void *work);

#endif /* PB_SRC_WINDOW_INTERNAL_H */
