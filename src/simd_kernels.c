/*
 * simd_kernels.c - the engine's hot loops, compiled once for the baseline
 * instruction set and again for AVX2 and AVX-512 where the compiler can
 * (GCC or clang on x86), with the variant chosen per instance at create
 * from what the CPU offers.
 *
 * It owns only these loops (exact folds of ring rows over a run of columns,
 * the running prefix folds, the step that stores a row and updates the
 * quantised sums, the rebuild of
 * those sums, the weight check, the max-widening and combining passes of
 * pooling, the search for the first score below a bound, the least score
 * and the first score at most a bound for the other scorers' evicts) and
 * the choice among their variants, plus the row copy that can bypass the
 * caches (one body for every variant). It knows nothing of policy rules.
 *
 * Why this is safe for exactness: every variant is the same C function body
 * (an always-inlined static function) compiled for a different target, and
 * every loop vectorises across positions, never within one position's fold:
 * each lane performs exactly the scalar sequence of IEEE operations of its
 * position (conversions float -> double are exact; the sums add in ring-slot
 * order; max and compares never round). So the variants agree bit for bit,
 * which the white-box tests check by running every evict path under each
 * variant the machine supports against the reference model.
 *
 * One loop has a second body: the AVX-512 weight check first screens the
 * row with the class instruction (vfpclassps) and runs the common body
 * only when some weight is suspect, so its answer is the common body's or
 * "none" where no weight can make one (weight_flags_classed below).
 *
 * Define PB_NO_SIMD to build the baseline variant only, PB_NO_AVX512 to
 * build no AVX-512 variant (the best is then AVX2).
 */
#include <assert.h>
#include <string.h>

#include "column_runs.h"
#include "kernels.h"

#if !defined(PB_NO_SIMD) && (defined(__GNUC__) || defined(__clang__)) && \
    (defined(__x86_64__) || defined(__i386__))
#define PB__X86_VARIANTS 1
#define PB__INLINE PB__ALWAYS_INLINE
#else
#define PB__X86_VARIANTS 0
#define PB__INLINE static inline
#endif
#if PB__X86_VARIANTS && !defined(PB_NO_AVX512)
#define PB__AVX512_VARIANT 1
#else
#define PB__AVX512_VARIANT 0
#endif
#if PB__AVX512_VARIANT
#include <immintrin.h>
#endif

/* ------------------------------------------------------------------------ */
/* Bodies                                                                   */

/* Columns whose accumulators stay in registers while the rows go by. */
#define PB__GROUP_MAX 32u

/* out[j] = 0.0 (or init[j]) + row row_begin + ... + row row_end-1 of
 * column col + j, for j < n, in row order. */
PB__INLINE void fold_rows_body(const float *ring, size_t row_stride,
                               uint32_t row_begin, uint32_t row_end,
                               size_t col, size_t n, const double *init,
                               size_t avail, double *out,
                               const size_t group) {
    size_t c = 0;
    /* A last group may run past the n columns wanted as long as it stays
     * inside what may be read (`avail` cells of the row and of init from
     * col on; the ring is zeroed at create, so those cells hold finite
     * values); the extra lanes are dropped. */
    for (; c < n && c + group <= avail; c += group) {
        double acc[PB__GROUP_MAX];
        for (size_t k = 0; k < group; ++k)
            acc[k] = init != NULL ? init[c + k] : 0.0;
        const float *row = ring + (size_t)row_begin * row_stride + col + c;
        for (uint32_t s = row_begin; s < row_end; ++s, row += row_stride)
            for (size_t k = 0; k < group; ++k) acc[k] += (double)row[k];
        /* A whole group is stored straight from the registers; a copy
         * of a variable count would become a library call. */
        if (n - c >= group) {
            for (size_t k = 0; k < group; ++k) out[c + k] = acc[k];
        } else {
            for (size_t k = 0; k < n - c; ++k) out[c + k] = acc[k];
        }
    }
    for (; c < n; ++c) {
        double sum = init != NULL ? init[c] : 0.0;
        const float *cell = ring + (size_t)row_begin * row_stride + col + c;
        for (uint32_t s = row_begin; s < row_end; ++s, cell += row_stride)
            sum += (double)*cell;
        out[c] = sum;
    }
}

/* For every run of live columns: q = (restart ? 0.0 : q) + row. */
PB__INLINE void prefix_add_body(const float *row, double *q,
                                const size_t *holes, size_t n_holes,
                                size_t n, unsigned restart) {
    pb__runs it = {0, 0, 0};
    pb__run run;
    while (pb__run_next(&it, holes, n_holes, n, &run)) {
        const float *restrict src = row + run.col;
        double *restrict dst = q + run.col;
        if (restart)
            for (size_t j = 0; j < run.len; ++j) dst[j] = 0.0 + (double)src[j];
        else
            for (size_t j = 0; j < run.len; ++j) dst[j] += (double)src[j];
    }
}

/* See score_filter.c for why this rounds to an exact integer. */
PB__INLINE double quantise(double scale, float w) {
    return ((double)w * scale + 0x1p52) - 0x1p52;
}

/* The bits of q(w) - w * scale: 0 exactly when q did not round (w * scale
 * is an integer; a non-zero difference never rounds to 0). OR-ed over a
 * loop they say whether any weight rounded (see score_filter.c for what an
 * instance without any such weight gains). */
PB__INLINE uint64_t rounding_bits(double q, double scale, float w) {
    const double d = q - (double)w * scale;
    uint64_t b;
    memcpy(&b, &d, sizeof b);
    return b;
}

/* Stores the row, updates the sums; returns 1 if q rounded some weight
 * stored. */
PB__INLINE unsigned store_sums_body(float *restrict row,
                                    const float *restrict weights,
                                    double *restrict sums, size_t n,
                                    double scale) {
    uint64_t rounded = 0u;
    for (size_t j = 0; j < n; ++j) {
        const float old = row[j], w = weights[j];
        row[j] = w;
        const double qw = quantise(scale, w);
        sums[j] += qw - quantise(scale, old);
        rounded |= rounding_bits(qw, scale, w);
    }
    return rounded != 0u;
}

/* store_sums_body over every run of live columns of a row. */
PB__INLINE unsigned store_sums_runs_body(float *row, const float *weights,
                                         double *sums, const size_t *holes,
                                         size_t n_holes, size_t n,
                                         double scale) {
    pb__runs it = {0, 0, 0};
    pb__run run;
    unsigned rounded = 0u;
    while (pb__run_next(&it, holes, n_holes, n, &run))
        rounded |= store_sums_body(row + run.col, weights + run.rank,
                                   sums + run.col, run.len, scale);
    return rounded;
}

PB__INLINE unsigned quantise_add_body(const float *restrict src,
                                      double *restrict sums, size_t n,
                                      double scale, uint32_t limit,
                                      unsigned *rounded) {
    uint32_t big = 0u;
    uint64_t r = 0u;
    for (size_t j = 0; j < n; ++j) {
        uint32_t b;
        memcpy(&b, src + j, sizeof b);
        big |= (uint32_t)((b & UINT32_C(0x7FFFFFFF)) >= limit);
        const double q = quantise(scale, src[j]);
        sums[j] += q;
        r |= rounding_bits(q, scale, src[j]);
    }
    *rounded |= (unsigned)(r != 0u);
    return big != 0u;
}

PB__INLINE unsigned weight_flags_body(const float *w, size_t n,
                                      uint32_t limit) {
    uint32_t bad = 0u, big = 0u;
    if (limit > UINT32_C(0x7FFFFFFF)) {
        /* No weight is at or above such a limit: the check alone, half
         * the work per weight (the scorers that do not quantise). */
        for (size_t i = 0; i < n; ++i) {
            uint32_t b;
            memcpy(&b, w + i, sizeof b);
            bad |= pb__weight_bad_bits(b);
        }
        return bad ? PB__WEIGHT_BAD : 0u;
    }
    for (size_t i = 0; i < n; ++i) {
        uint32_t b;
        memcpy(&b, w + i, sizeof b);
        bad |= pb__weight_bad_bits(b);
        big |= (uint32_t)((b & UINT32_C(0x7FFFFFFF)) >= limit);
    }
    return (bad ? PB__WEIGHT_BAD : 0u) | (big ? PB__WEIGHT_BIG : 0u);
}

/* x[i] <- max(x[i], x[i+d]) for i + d < n, ascending. */
PB__INLINE void widen_body(double *x, size_t n, size_t d) {
    if (d >= n) return;
    const size_t m = n - d;
    for (size_t i = 0; i < m; ++i) {
        const double a = x[i], b = x[i + d];
        x[i] = a < b ? b : a;
    }
}

/* out[j] = max(x[j], y[j]) for j < n. */
PB__INLINE void max_of_body(const double *x, const double *y, double *out,
                            size_t n) {
    for (size_t j = 0; j < n; ++j) {
        const double a = x[j], b = y[j];
        out[j] = a < b ? b : a;
    }
}

/* The first j < n with x[j] < t (at_most: x[j] <= t), or n: whole chunks
 * are tested with one vectorised compare each, and only the chunk holding
 * a hit is looked at one value at a time. */
#define PB__BELOW_CHUNK 32u
PB__INLINE size_t first_hit_body(const double *x, size_t n, double t,
                                 int at_most) {
    size_t j = 0;
    for (; j + PB__BELOW_CHUNK <= n; j += PB__BELOW_CHUNK) {
        size_t hits = 0; /* a count: the form the compilers vectorise */
        for (size_t k = 0; k < PB__BELOW_CHUNK; ++k)
            hits += (size_t)(at_most ? x[j + k] <= t : x[j + k] < t);
        if (hits != 0u) break;
    }
    for (; j < n; ++j)
        if (at_most ? x[j] <= t : x[j] < t) return j;
    return n;
}

#include "source_kernel_bodies.h"

/* bits[j / 64] bit j % 64 is set iff x[j] < t, for j < n; the bits of the
 * last word past n are 0. Every x[j] is >= +0 and t > 0 (both finite), so
 * their bit patterns are below 2^63 and order as the values do: x[j] < t
 * exactly when the 64-bit difference of the patterns wraps, i.e. has its
 * top bit set. With shifts by lane (wide: AVX2, AVX-512) each 64 columns
 * make one word by OR-ing those top bits shifted into place (a vectorised
 * loop: subtract, shift, shift by lane, OR), no compare, pack or table.
 * Without them (the baseline, whose vectors shift every lane alike) that
 * loop is one scalar chain; there the top bits go to 64 bytes first (a
 * vectorised loop), and each 8 bytes of 0 or 1 become 8 bits by one
 * multiply: byte i of B is 1 at bit 8i, and B * 0x0102040810204080 puts
 * bit 8i at bit 56 + i for every i at once with no carries (the partial
 * products are distinct powers of two), so bits 56 .. 63 are the 8 bits
 * in order. That reads bytes as a little-endian uint64_t; a big-endian
 * target keeps the chain. */
/* 1 where the first byte of a uint64_t in memory is its lowest (the
 * compilers fold it to a constant). below_bits_body's bytes rely on it. */
PB__INLINE int little_endian(void) {
    const uint64_t one = 1u;
    unsigned char first;
    memcpy(&first, &one, sizeof first);
    return first == 1u;
}

PB__INLINE void below_bits_body(const double *x, size_t n, double t,
                                uint64_t *bits, int wide) {
    uint64_t tb;
    memcpy(&tb, &t, sizeof tb);
    size_t j = 0;
    for (; j + 64u <= n; j += 64u) {
        uint64_t word = 0u;
        if (wide || !little_endian()) {
            for (size_t k = 0; k < 64u; ++k) {
                uint64_t b;
                memcpy(&b, x + j + k, sizeof b);
                word |= ((b - tb) >> 63) << k;
            }
        } else {
            unsigned char top[64];
            for (size_t k = 0; k < 64u; ++k) {
                uint64_t b;
                memcpy(&b, x + j + k, sizeof b);
                top[k] = (unsigned char)((b - tb) >> 63);
            }
            for (size_t g = 0; g < 8u; ++g) {
                uint64_t eight;
                memcpy(&eight, top + 8u * g, sizeof eight);
                word |= ((eight * UINT64_C(0x0102040810204080)) >> 56)
                        << (8u * g);
            }
        }
        bits[j / 64u] = word;
    }
    if (j < n) {
        /* The patterns here too: t may be the double just above +0, a
         * subnormal, which a floating-point compare under x86's
         * denormals-are-zero mode would read as 0. */
        uint64_t word = 0u;
        for (size_t k = 0; j + k < n; ++k) {
            uint64_t b;
            memcpy(&b, x + j + k, sizeof b);
            word |= ((b - tb) >> 63) << k;
        }
        bits[j / 64u] = word;
    }
}

/* ------------------------------------------------------------------------ */
/* Variants                                                                 */

/* One variant: every kernel body compiled with the target attribute attr;
 * group is the fold's accumulators per pass, wide says the target's
 * vectors shift each lane by its own count (below_bits_body), check is
 * the weight check's body (weight_flags_body, or a screen in front of
 * it). */
#define PB__DEFINE_VARIANT(suffix, attr, group, wide, check)                  \
    attr static void fold_rows_##suffix(                                      \
        const float *ring, size_t row_stride, uint32_t row_begin,             \
        uint32_t row_end, size_t col, size_t n, const double *init,           \
        size_t avail, double *out) {                                          \
        fold_rows_body(ring, row_stride, row_begin, row_end, col, n, init,    \
                       avail, out, group);                                    \
    }                                                                         \
    attr static void prefix_add_##suffix(const float *row, double *q,         \
                                         const size_t *holes, size_t n_holes, \
                                         size_t n, unsigned restart) {        \
        prefix_add_body(row, q, holes, n_holes, n, restart);                  \
    }                                                                         \
    attr static unsigned store_sums_##suffix(                                 \
        float *row, const float *weights, double *sums, const size_t *holes,  \
        size_t n_holes, size_t n, double scale) {                             \
        return store_sums_runs_body(row, weights, sums, holes, n_holes, n,    \
                                    scale);                                   \
    }                                                                         \
    attr static unsigned quantise_add_##suffix(                               \
        const float *src, double *sums, size_t n, double scale,               \
        uint32_t limit, unsigned *rounded) {                                  \
        return quantise_add_body(src, sums, n, scale, limit, rounded);        \
    }                                                                         \
    attr static unsigned weight_flags_##suffix(const float *w, size_t n,      \
                                               uint32_t limit) {              \
        return check(w, n, limit);                                            \
    }                                                                         \
    attr static void widen_##suffix(double *x, size_t n, size_t d) {          \
        widen_body(x, n, d);                                                  \
    }                                                                         \
    attr static void max_of_##suffix(const double *x, const double *y,        \
                                     double *out, size_t n) {                 \
        max_of_body(x, y, out, n);                                            \
    }                                                                         \
    attr static size_t first_below_##suffix(const double *x, size_t n,        \
                                            double t) {                       \
        return first_hit_body(x, n, t, 0);                                    \
    }                                                                         \
    attr static uint64_t least_bits_##suffix(const double *x, size_t n,       \
                                             size_t *at) {                    \
        return least_first_body(x, n, at);                                    \
    }                                                                         \
    attr static uint32_t least_u32_##suffix(const uint32_t *x, size_t n,      \
                                            size_t *at) {                     \
        return least_u32_first_body(x, n, at);                                \
    }                                                                         \
    attr static void add_weights_##suffix(double *x, const float *w,         \
                                          size_t n) {                        \
        add_weights_body(x, w, n);                                            \
    }                                                                         \
    attr static uint32_t record_least_##suffix(                               \
        uint32_t *x, const float *w, size_t lo, size_t hi, size_t n,          \
        size_t *at, unsigned *bad) {                                          \
        if (at == NULL)                                                       \
            return record_least_body(x, w, 0, 0, n, at, bad, 0);              \
        return record_least_body(x, w, lo, hi, n, at, bad, 1);                \
    }                                                                         \
    attr static void votes_##suffix(uint32_t *x, const float *w, size_t n,   \
                                    float bar, unsigned *bad) {              \
        votes_body(x, w, n, bar, bad);                                        \
    }                                                                         \
    attr static void below_bits_##suffix(const double *x, size_t n, double t, \
                                         uint64_t *bits) {                    \
        below_bits_body(x, n, t, bits, wide);                                 \
    }                                                                         \
    static const pb__kernels kernels_##suffix = {                             \
        #suffix,           fold_rows_##suffix,    prefix_add_##suffix,        \
        store_sums_##suffix, quantise_add_##suffix, weight_flags_##suffix,    \
        widen_##suffix,    max_of_##suffix,       first_below_##suffix,       \
        least_bits_##suffix, least_u32_##suffix,  add_weights_##suffix,       \
        record_least_##suffix, votes_##suffix,                                \
        below_bits_##suffix};

/* 16 accumulators: 8 SSE2 registers. */
PB__DEFINE_VARIANT(generic, , 16u, 0, weight_flags_body)

#if PB__X86_VARIANTS
/* 16 accumulators: 4 AVX registers. */
PB__DEFINE_VARIANT(avx2, __attribute__((target("avx2"))), 16u, 1,
                   weight_flags_body)
#endif
#if PB__AVX512_VARIANT
/* 32 accumulators: 4 AVX-512 registers. Both compilers would otherwise
 * keep to 256-bit vectors in these functions. */
#if defined(__clang__)
#define PB__AVX512_TARGET                                                     \
    __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw"),             \
                   min_vector_width(512)))
#else
#define PB__AVX512_TARGET                                                     \
    __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,"               \
                          "prefer-vector-width=512")))
#endif
/* The classes a weight_flags_classed screen treats as suspect: QNaN (bit
 * 0), -0 (2), +infinity (3), -infinity (4), negative finite (6), SNaN
 * (7); not +0 (1) or denormal (5). Every bad weight is in one of them
 * whatever the MXCSR says: with denormals-are-zero set the instruction
 * reads a negative subnormal as -0, which is why -0, a valid weight, is
 * suspect too. */
#define PB__CLASS_SUSPECT 0xDD

/* weight_flags_body's answer, with one vfpclassps (and, with a quantising
 * limit, one unsigned compare) per 16 weights first: a row with no
 * suspect weight (above) and, with a limit below that of infinity, none
 * at or above it has no bad weight and no big one, so the answer is 0
 * without the body's two compares per weight; any other row gets the
 * body's answer. A step of the cumulative scorer at @512 took 0.88-0.91x
 * the time with this screen (docs/performance.md). */
PB__AVX512_TARGET static inline unsigned
weight_flags_classed(const float *w, size_t n, uint32_t limit) {
    const int limited = limit < UINT32_C(0x7F800000);
    const __m512i lim = _mm512_set1_epi32(limited ? (int)limit : 0);
    __mmask16 any = 0;
    size_t i = 0;
    for (; i + 16u <= n; i += 16u) {
        const __m512 v = _mm512_loadu_ps(w + i);
        any |= _mm512_fpclass_ps_mask(v, PB__CLASS_SUSPECT);
        if (limited)
            any |= _mm512_cmpge_epu32_mask(_mm512_castps_si512(v), lim);
    }
    if (i < n) {
        const __mmask16 t = (__mmask16)((1u << (n - i)) - 1u);
        const __m512 v = _mm512_maskz_loadu_ps(t, w + i);
        any |= _mm512_mask_fpclass_ps_mask(t, v, PB__CLASS_SUSPECT);
        if (limited)
            any |= _mm512_mask_cmpge_epu32_mask(t, _mm512_castps_si512(v),
                                                lim);
    }
    return any == 0 ? 0u : weight_flags_body(w, n, limit);
}
PB__DEFINE_VARIANT(avx512, PB__AVX512_TARGET, 32u, 1, weight_flags_classed)
#endif

const pb__kernels *pb__kernels_generic(void) { return &kernels_generic; }

const pb__kernels *pb__kernels_best(void) {
#if PB__X86_VARIANTS
    __builtin_cpu_init();
#if PB__AVX512_VARIANT
    if (__builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw"))
        return &kernels_avx512;
#endif
    if (__builtin_cpu_supports("avx2")) return &kernels_avx2;
#endif
    return &kernels_generic;
}

size_t pb__kernels_available(const pb__kernels **out, size_t cap) {
    size_t n = 0;
    if (n < cap) out[n] = &kernels_generic;
    ++n;
#if PB__X86_VARIANTS
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) {
        if (n < cap) out[n] = &kernels_avx2;
        ++n;
    }
#if PB__AVX512_VARIANT
    if (pb__kernels_best() == &kernels_avx512) {
        if (n < cap) out[n] = &kernels_avx512;
        ++n;
    }
#endif
#endif
    return n;
}
