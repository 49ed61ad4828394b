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
 *   - selection of the k lowest keys (selection.c),
 *   - evicts of a few victims: the quantised window sums and the filtered
 *     selection they allow, the streaming selection and the prefix folds
 *     that halve it (score_filter.c),
 *   - the hot loops in one variant per instruction set (simd_kernels.c),
 *   - the score sources of the other scorers (cumulative, last, votes,
 *     none) with their evicts (score_sources.c),
 *   - reading, validating and sizing a configuration (policy_config.c).
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

#include "pyramidkv/pyramidkv.h"

/* Every array of an instance starts on its own cache line, and the whole
 * instance is padded to whole lines, so two instances never share a line. */
#define PB__ALIGN ((size_t)64)

/* A hint that the cache line holding addr is read (rw 0) or written (rw 1)
 * soon. It changes no value; compilers without the builtin get nothing. */
#if defined(__GNUC__) || defined(__clang__)
#define PB__PREFETCH(addr, rw) __builtin_prefetch((addr), (rw), 3)
#else
#define PB__PREFETCH(addr, rw) ((void)(addr))
#endif

/* A static function inlined whatever the compiler's size heuristics say:
 * the kernels' bodies (inlined into functions of another target) and the
 * steps of a one-victim decode step, where a call costs a measurable share
 * (docs/performance.md). */
#if defined(__GNUC__) || defined(__clang__)
#define PB__ALWAYS_INLINE static inline __attribute__((always_inline))
#else
#define PB__ALWAYS_INLINE static inline
#endif

/* Nonzero where the bit pattern b of an attention weight makes it invalid
 * (docs/spec.md §1, item 2): above the largest finite positive float (+inf,
 * NaN, or the sign bit set), -0.0 excepted. Read from the bits, so no
 * floating-point environment changes it (x86's denormals-are-zero mode
 * reads a negative subnormal as -0.0), and loops over it vectorise. */
PB__ALWAYS_INLINE uint32_t pb__weight_bad_bits(uint32_t b) {
    return (uint32_t)(b > UINT32_C(0x7F7FFFFF)) &
           (uint32_t)(b != UINT32_C(0x80000000));
}

/* pb__weight_bad_bits of a weight. */
PB__ALWAYS_INLINE uint32_t pb__weight_bad(float w) {
    uint32_t b;
    memcpy(&b, &w, sizeof b);
    return pb__weight_bad_bits(b);
}

/* ------------------------------------------------------------------------ */
/* Resolved configuration                                                   */

/* A configuration after validation, with the share and the capacity
 * resolved. */
typedef struct pb__config {
    pb_kvcache_pyramidkv_params params;
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

/* The first released size of pb_kvcache_config (0.2): every field up to
 * row_stores. A caller's struct_size may not be smaller. */
#define PB__CONFIG_MIN_SIZE ((size_t)64)

/* The versioned config that the released params + options (NULL: their
 * defaults) describe. */
void pb__config_from_params(const pb_kvcache_pyramidkv_params *params,
                            const pb_kvcache_options *options,
                            pb_kvcache_config *out);

/* Reads a caller's versioned config by the rule of docs/abi.md (the
 * fields its struct_size covers, the defaults for the rest; NULL: the
 * defaults), validates it in the order the header documents and resolves
 * the share and the capacity. PB_OK or PB_ERR_PARAM (also for a
 * struct_size below PB__CONFIG_MIN_SIZE, or a byte past the fields this
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
/* Hot loops (simd_kernels.c)                                               */

#define PB__WEIGHT_BAD 1u /* NaN, infinite or negative (-0.0 is allowed) */
#define PB__WEIGHT_BIG 2u /* at or above the filter's quantising limit */

/* One variant of the hot loops. All variants give bit-identical results. */
typedef struct pb__kernels {
    const char *name; /* "generic", "avx2" or "avx512" */
    /* out[j] = init[j] (0.0 if init is NULL) + row row_begin + ... +
     * row row_end-1 of column col + j, added in row order, j = 0 .. n-1.
     * It may read up to `avail` cells from col on, in every row and in
     * init (whole groups of columns are summed). With rows 0 .. obs_window
     * and no init, out[j] is column col + j's window score. */
    void (*fold_rows)(const float *ring, size_t row_stride,
                      uint32_t row_begin, uint32_t row_end, size_t col,
                      size_t n, const double *init, size_t avail,
                      double *out);
    /* For the live columns of ranks 0 .. n-1: q[col] = (restart ? 0.0 :
     * q[col]) + row[col]. */
    void (*prefix_add)(const float *row, double *q, const size_t *holes,
                       size_t n_holes, size_t n, unsigned restart);
    /* For ranks 0 .. n-1 in their columns (past the holes): the row's
     * cell = weights[rank], and the column's sum += q(new) - q(old).
     * Returns 1 if q rounded some new weight (w * scale not an integer;
     * or, in a directed rounding mode, perhaps when it did not). */
    unsigned (*store_sums)(float *row, const float *weights, double *sums,
                           const size_t *holes, size_t n_holes, size_t n,
                           double scale);
    /* sums[j] += q(src[j]); sets *rounded to 1 if q rounded some src[j]
     * (as store_sums says it); returns 1 if some src[j] is at or above the
     * limit (bit pattern of a float). */
    unsigned (*quantise_add)(const float *src, double *sums, size_t n,
                             double scale, uint32_t limit, unsigned *rounded);
    /* PB__WEIGHT_BAD | PB__WEIGHT_BIG as they apply to w[0 .. n-1]. */
    unsigned (*weight_flags)(const float *w, size_t n, uint32_t limit);
    /* x[i] <- max(x[i], x[i+d]) for i + d < n. */
    void (*widen)(double *x, size_t n, size_t d);
    /* out[j] = max(x[j], y[j]), j < n; out may be neither x nor y. */
    void (*max_of)(const double *x, const double *y, double *out, size_t n);
    /* The least j < n with x[j] < t, or n if there is none. */
    size_t (*first_below)(const double *x, size_t n, double t);
    /* The least bit pattern among x[0 .. n-1], n >= 1: the pattern of the
     * least value, for doubles >= +0 (not -0.0), whose patterns order as
     * their values do; with at not NULL also the first j holding it. */
    uint64_t (*least_bits)(const double *x, size_t n, size_t *at);
    /* The least of x[0 .. n-1], n >= 1; with at not NULL also the first j
     * holding it. */
    uint32_t (*least_u32)(const uint32_t *x, size_t n, size_t *at);
    /* The score updates of the other scorers over x[0 .. n-1].
     * cumulative: x[i] += (double)w[i] (the least comes from the scorer's
     * bounds, score_sources.c); */
    void (*add_weights)(double *x, const float *w, size_t n);
    /* last: the update returns the least new record among
     * x[lo .. hi-1] (lo <= hi <= n; as least_u32) and writes to *at the
     * first j holding it (for lo == hi: UINT32_MAX and lo); with at NULL
     * it only updates (returning 0; lo and hi are not read):
     * x[i] = the bits of w[i] with the sign cleared. */
    uint32_t (*record_least)(uint32_t *x, const float *w, size_t lo,
                             size_t hi, size_t n, size_t *at, unsigned *bad);
    /* votes: x[i] += 1 where w[i] > bar and x[i] < UINT32_MAX (the least
     * from the bounds too).
     * Last and votes check the weights as they read them: *bad |=
     * PB__WEIGHT_BAD if some w[i] is bad (x is updated all the same). */
    void (*votes)(uint32_t *x, const float *w, size_t n, float bar,
                  unsigned *bad);
    /* Bit j % 64 of bits[j / 64] is set iff x[j] < t, j < n; the rest of
     * the last word is 0. Writes ceil(n / 64) words. Every x[j] >= +0 and
     * t > 0, all finite (the quantised sums and a bound above them). */
    void (*below_bits)(const double *x, size_t n, double t, uint64_t *bits);
} pb__kernels;


/* The fastest variant this CPU runs; the baseline one; and every variant
 * this CPU runs (count returned, at most cap written) for tests. */
const pb__kernels *pb__kernels_best(void);
const pb__kernels *pb__kernels_generic(void);
size_t pb__kernels_available(const pb__kernels **out, size_t cap);

/* dst[0 .. n-1] = src[0 .. n-1] (no overlap); with `streamed`, written
 * past the caches where the target can (non-temporal stores on x86), else
 * as memcpy. Not a variant: the values are the same. pb__copy_fence(
 * streamed) must follow the last such copy of a batch (one store fence on
 * x86, nothing elsewhere). */
void pb__copy_floats(float *dst, const float *src, size_t n, int streamed);
void pb__copy_fence(int streamed);

/* ------------------------------------------------------------------------ */
/* The instance                                                             */

/*
 * One policy instance. All arrays live in one block obtained at create.
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
 * rewritten (finish_lazy). The lazy state never has prefix folds, and has
 * no hole unless the sums are kept (or were when the hole came).
 *
 * Doors other than policy.c (the prefill door) may write pos, kept, slot
 * and the ring directly, but only on an instance fresh from create or reset
 * (no holes, not lazy, sums_valid and prefix_valid 0, zero_upto 1), and
 * they must leave n_holes and n_lazy at 0, sums_valid and prefix_valid at
 * 0 and zero_upto at most kept; the engine rebuilds its sums or prefix
 * folds when it next wants them.
 */
struct pb_kvcache {
    pb__config cfg;
    size_t capacity;      /* cfg.capacity as size_t */
    size_t kept;          /* positions held now, 0 .. capacity */
    size_t sinks_kept;    /* of them, those below cfg.sinks: the oldest
                             ranks, never evicted (admissions count
                             them) */
    uint32_t slot;        /* ring slot the next observed step writes */
    int fresh;            /* 1 after create or reset until the first
                             successful observe (the prefill door needs a
                             fresh instance) */
    uint32_t obs_window;  /* cfg.params.obs_window */
    unsigned last_path;   /* how the last evict that chose victims went, a
                             pb__path (read by white-box tests only) */
    const pb__kernels *k; /* the hot loops, chosen at create */
    size_t half_kernel;   /* (pool_kernel - 1) / 2 */
    size_t row_stride;    /* floats from one ring row to the next, >=
                             capacity + pb__lazy_room(capacity) */

    uint32_t *pos;        /* [capacity + max_holes] positions by column,
                             ascending */
    float *ring;          /* [obs_window * row_stride] */
    double *scores;       /* [columns]: by column, the quantised window sums
                             while sums_valid (0 in the holes), or the
                             prefix folds while prefix_valid; else evict
                             scratch by rank (window, then pooled
                             scores) */
    size_t columns;       /* capacity + max_holes: length of pos[], scores[] */
    uint64_t *alive;      /* [ceil(row_stride / 64)] evict scratch:
                             surviving columns */
    size_t *holes;        /* [max_holes] dead columns, ascending */
    size_t n_holes, max_holes;
    size_t *lazy_holes;   /* [pb__lazy_room(capacity)] dead
                             columns of the rows not yet rewritten,
                             ascending; n_lazy > 0 only in the lazy state */
    size_t n_lazy;
    uint64_t dense_rows;  /* in the lazy state, bit s: row s rewritten */
    int lazy_ok;          /* obs_window <= 64: lazy compaction possible */
    unsigned guess_step;  /* the filter's guessed bound has the margin
                             2^-guess_step, 0 .. PB__GUESS_STEPS (with
                             guess_m, below; a hint) */
    size_t zero_upto;     /* ring columns kept + n_holes + n_lazy ..
                             zero_upto-1 are 0 in every row (and, in a row
                             rewritten in the lazy state, so are kept +
                             n_holes ..): an
                             admission there writes nothing, and the next
                             one past it zeroes a whole cache line of
                             columns at once */
    union { /* one scorer or the others, never both */
        struct {
            void *work;        /* window scorer: pooling scratch */
            size_t work_bytes;
        };
        struct {
            void *source_spare; /* last scorer: a second array of records
                                   (source, below), where a step writes
                                   its record before the two swap (a bad
                                   weight found on the way leaves the
                                   scores as they were); else NULL */
            size_t source_shift; /* last scorer: ranks pos[] and the
                                   score arrays have moved up from their
                                   starts, at most pb__source_slack,
                                   closing a victim's gap from the
                                   shorter side; else 0 */
            size_t bar_n;       /* votes: the held count bar is for (0:
                                   none yet) */
            float bar;          /* votes: the vote's bar for bar_n held
                                   (score_sources.c, vote_bar) */
        };
    };
    size_t *hist;         /* [PB__HIST_BINS] selection histogram; the same
                             memory as cands and heap (no call uses both)
                             and as the cumulative and votes scorers'
                             bounds (which a selection drops) */
    void *source;         /* a scorer other than the window: one score per
                             rank (double for cumulative, the float bits of
                             the record for last, uint32 votes), NULL for
                             none; the window scorer leaves it NULL */
    size_t unobserved;    /* last scorer: the newest positions no step has
                             observed yet (never victims) */
    uint64_t least;       /* scorers other than the window and none: the
                             least score (bit pattern) among ranks
                             least_first .. least_end-1 and the first rank
                             holding it, least_at, found by the last
                             observe while it updated the scores; valid
                             while least_ok */
    size_t least_first, least_end, least_at;
    int least_ok;
    int least_wanted;     /* the last evict chose one victim, so the
                             observes look for the least score */
    int bounds_ok;        /* cumulative and votes scorers: hist holds,
                             per block of 2^bounds_shift ranks, a lower
                             bound of the scores the block holds
                             (score_sources.c) */
    unsigned bounds_shift;
    uint64_t bounds_floor; /* while bounds_ok: at or below the bound of
                             every block before block bounds_floor_end
                             (UINT64_MAX when that is none) */
    size_t bounds_floor_end;
    void *prefill_scratch;       /* reserved for the prefill door */
    size_t prefill_scratch_bytes;

    /* Evicts of a few victims (score_filter.c). */
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
    uint32_t q_limit_bits;/* bit pattern of the first float too large to
                             quantise; such a weight drops the sums */
    uint32_t gap;         /* window scorer: observed steps since the last
                             evict that chose victims; votes: steps with
                             weights since reset, saturating (no vote is
                             above it) */
    struct pb__candidate *cands; /* [PB__FILTER_MAX_CANDIDATES] */
    double *heap;         /* [PB__FILTER_MAX_NEEDED] */
    uint32_t filter_wait; /* evicts to go before the sums are rebuilt */
    uint32_t filter_backoff; /* the last wait imposed after a miss */
    size_t seed_col;      /* a column whose window max seeds the next
                             filtered scan of one victim (the runner-up of
                             the last one); only a hint, SIZE_MAX: none */
    double guess_m;       /* the last such scan's needed-th least window
                             max, the next one's guessed bound; a hint,
                             < 0: none (score_filter.c, scan); its margin
                             is guess_step, above */

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
 * size_t. Pure. */
pb_status pb__prefill_scratch_of(uint32_t pool_kernel, size_t work_bytes,
                                 size_t len, pb__prefill_scratch *out);

/* The ranks of room the last scorer's arrays have before their start, so
 * that a victim's gap can close from the shorter side: a 16th of the
 * capacity (3/4 byte per held position). Its scores are one step's
 * attention, so its victims lie anywhere; the cumulative and votes scores
 * grow with age, so theirs lie mostly among the newest ranks, where the
 * room would only cost memory and vectors off their alignment (measured:
 * no gain for cumulative, votes 4 % slower), and the none scorer's go
 * from the front, but its 4 bytes per position are its whole budget. */
static inline size_t pb__source_slack(uint32_t scorer, size_t capacity) {
    return scorer == PB_SCORER_LAST ? capacity / 16u : 0u;
}

/* The bytes per held position of a scorer's own score (its source array);
 * 0 for the window scorer, whose scores live in the ring. */
static inline size_t pb__source_score_bytes(uint32_t scorer) {
    switch (scorer) {
    case PB_SCORER_CUMULATIVE: return sizeof(double);
    case PB_SCORER_LAST: return sizeof(uint32_t);
    case PB_SCORER_VOTES: return sizeof(uint32_t);
    default: return 0u;
    }
}

/* The sizes and offsets (from the aligned start) of an instance's block. */
typedef struct pb__layout {
    size_t row_stride, max_holes;
    size_t off_pos, off_ring, off_scores, off_alive, off_holes, off_work;
    size_t off_spare; /* last scorer: the spare score array */
    size_t off_lazy;
    size_t off_hist, off_prefill, off_cands, off_heap;
    size_t work_bytes, prefill_bytes;
    size_t span;  /* bytes from the aligned start to the end, whole lines */
    size_t total; /* bytes asked of the allocator: span + PB__ALIGN - 1 */
} pb__layout;

/* The block for cfg; PB_OK or PB_ERR_TOO_LARGE if a size overflows. */
pb_status pb__layout_of(const pb__config *cfg, pb__layout *out);

/* The paths an evict can take (struct pb_kvcache.last_path). */
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
/* Evicts of a few victims (score_filter.c)                                 */

/* The filtered and the streaming paths take at most this many victims ... */
#define PB__FILTER_MAX_NEEDED ((size_t)64)

/* The least allowance of holes (policy_config.c), and the least a cheap
 * evict lets gather before it compacts (policy.c). */
#define PB__HOLES_MIN ((size_t)8)

/* The least margin of the filtered scan's guessed bound: 2^-20 of the
 * last needed-th least window max (score_filter.c, scan). */
#define PB__GUESS_STEPS 20u

/* Dead columns a ring row of the lazy state's old layout may hold: the
 * holes and the victims of the evict that entered it (drop_ranks compacts
 * at once beyond). 1/32 of the capacity, at least twice the holes'
 * allowance (policy_config.c), and at least one cheap evict's victims;
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
void pb__filter_configure(pb_kvcache *p);

/* Recomputes the sums of every held column from the ring. Returns 1 if
 * every weight could be quantised (the sums are valid), 0 if not. */
int pb__filter_rebuild(pb_kvcache *p);

/* pb__ring_store_row that also brings the sums of the held ranks up to
 * date; every weight must be below the quantising limit. */
void pb__filter_store_row(pb_kvcache *p, const float *weights, size_t n);

/* Chooses the `needed` victims among ranks 0 .. evictable-1 from the sums,
 * recomputing exact window scores only where the sums cannot decide.
 * On success writes the victims' ranks, ascending, to ranks[0 .. needed-1]
 * and returns 1; returns 0 when deciding this way would cost more than the
 * full path (the caller then takes it). Changes only the scan's seed hint. */
int pb__filter_select(pb_kvcache *p, size_t evictable, size_t needed,
                      size_t *ranks);

/* Recomputes the prefix folds of every held column from the ring (always
 * possible; sets prefix_valid). */
void pb__prefix_rebuild(pb_kvcache *p);

/* Chooses the `needed` victims among ranks 0 .. evictable-1 from exact
 * window scores computed a block at a time (max pooling, half_kernel <=
 * PB__DOUBLING_MAX_HALF), keeping only the best `needed` so far. It uses
 * no array the size of the instance, so scores[] survives it; when it
 * holds prefix folds they are finished instead of every slot being
 * folded. Writes the ranks ascending to ranks[0 .. needed-1].
 * O(held * obs_window). */
void pb__stream_select(pb_kvcache *p, size_t evictable, size_t needed,
                       size_t *ranks);

/* ------------------------------------------------------------------------ */
/* Score sources of the other scorers (score_sources.c)                     */

/* An instance whose scorer is not the window keeps pos[] dense (no holes,
 * no lazy state, column == rank) and one score per rank in p->source.
 * These functions take validated arguments, as the doors of policy.c
 * pass them. */

/* Back to the state after create: position 0 held, score 0 (last: not
 * observed). */
void pb__source_reset(pb_kvcache *p);

/* 1 when pb__source_observe checks the weights of an instance that is not
 * full itself, in the pass that reads them for the scores (last; votes
 * while no vote can saturate), so the door need not check them first. */
static inline int pb__source_checks_weights(const pb_kvcache *p) {
    return p->cfg.scorer == (uint32_t)PB_SCORER_LAST ||
           (p->cfg.scorer == (uint32_t)PB_SCORER_VOTES &&
            p->gap < UINT32_MAX);
}

/* One decode step: attn (NULL: nothing observed) updates the held ranks'
 * scores by the scorer's rule, then pos is admitted with score 0. PB_OK,
 * or PB_ERR_WEIGHT with the state as it was (only where
 * pb__source_checks_weights says so). */
pb_status pb__source_observe(pb_kvcache *p, uint32_t pos, const float *attn,
                             size_t attn_len);

/* Drops the `needed` ranks with the lowest scores among first .. end-1
 * (none: the oldest; ties to the lower rank), writing their positions
 * ascending to victims[] and closing the gaps. */
void pb__source_evict(pb_kvcache *p, size_t first, size_t end, size_t needed,
                      uint32_t *victims);

/* The scorer's value for rank i (last: -1.0 while not observed; none:
 * 0.0). */
double pb__source_score(const pb_kvcache *p, size_t rank);

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
