/*
 * qk_kernels.c - the hot loop of the Q/K scorer: the logits of one query
 * row over the keys it sees, for every head of the group (docs/spec.md
 * §15.4, items 1 to 3), in one variant per instruction set (portable,
 * AVX2, AVX-512) chosen at run time. Every variant gives the same bits:
 * the conversions are exact, the products of two floats are exact in
 * double, and lane l of the eight adds the products j = l (mod 8) in
 * ascending j in all of them (a vector register holds lanes side by side,
 * it never reorders one lane's sums); and the softmax numerators
 * (pb__exp_core over a row), in the same variants. It owns nothing else.
 */
#include <string.h>

#include "runtime_internal.h"

#if !defined(PB_NO_SIMD) && (defined(__GNUC__) || defined(__clang__)) && \
    (defined(__x86_64__) || defined(__i386__))
#define PB__QK_X86 1
#define PB__QK_INLINE static inline __attribute__((always_inline))
#else
#define PB__QK_X86 0
#define PB__QK_INLINE static inline
#endif

/* Key i converted exactly to double. */
PB__QK_INLINE void load_key(const void *k, size_t k_stride, uint32_t type,
                            size_t i, size_t d, double *kd) {
    if (type == PB_KEYS_F16) {
        const uint16_t *row = (const uint16_t *)k + i * k_stride;
        for (size_t j = 0; j < d; ++j) kd[j] = (double)pb__f16_to_f32(row[j]);
    } else if (type == PB_KEYS_BF16) {
        const uint16_t *row = (const uint16_t *)k + i * k_stride;
        for (size_t j = 0; j < d; ++j) kd[j] = (double)pb__bf16_to_f32(row[j]);
    } else {
        const float *row = (const float *)k + i * k_stride;
        for (size_t j = 0; j < d; ++j) kd[j] = (double)row[j];
    }
}

/* The tree of docs/spec.md §15.4 item 2 over one head's eight lanes. */
PB__QK_INLINE double lane_tree(const double *acc) {
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
           ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* The eight-lane dot product and its fixed tree. */
PB__QK_INLINE double dot8(const double *a, const double *b, size_t d) {
    double acc[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    size_t j = 0;
    for (; j + 8u <= d; j += 8u)
        for (size_t l = 0; l < 8u; ++l) acc[l] += a[j + l] * b[j + l];
    for (size_t l = 0; j + l < d; ++l) acc[l] += a[j + l] * b[j + l];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
           ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}


PB__QK_INLINE double logits_body(const double *qd, size_t g, size_t d,
                                 const void *k, size_t k_stride,
                                 uint32_t type, size_t vis, double scale,
                                 double *logits, size_t kmax, double *kd) {
    /* A non-finite element makes its dot product NaN or infinite, and
     * z - z NaN. */
    double bad = 0.0;
    for (size_t i = 0; i < vis; ++i) {
        load_key(k, k_stride, type, i, d, kd);
        for (size_t h = 0; h < g; ++h) {
            const double z = dot8(qd + h * d, kd, d) * scale;
            logits[h * kmax + i] = z;
            bad += z - z;
        }
    }
    return bad;
}

#define PB__QK_VARIANT(name, attr)                                          \
    attr static double name(const double *qd, size_t g, size_t d,           \
                            const void *k, size_t k_stride, uint32_t type,  \
                            size_t vis, double scale, double *logits,       \
                            size_t kmax, double *kd) {                      \
        return logits_body(qd, g, d, k, k_stride, type, vis, scale, logits, \
                           kmax, kd);                                       \
    }

PB__QK_VARIANT(logits_generic, )

#if PB__QK_X86
#include <immintrin.h>

/* The x86 variants keep four heads' eight lanes in registers against one
 * key (four independent chains of additions): lane l of an accumulator
 * adds the products j = l (mod 8) in ascending j, as dot8 does. A
 * head_dim that is not a multiple of 8 takes the portable body. */
#define PB__QK_X86_BODY(VEC, ZERO, LOAD, ADD, MUL, STORE, WIDTH)              \
    if (d % 8u != 0u)                                                         \
        return logits_body(qd, g, d, k, k_stride, type, vis, scale, logits,   \
                           kmax, kd);                                         \
    double bad = 0.0;                                                         \
    for (size_t i = 0; i < vis; ++i) {                                        \
        load_key(k, k_stride, type, i, d, kd);                                \
        size_t h = 0;                                                         \
        for (; h + 4u <= g; h += 4u) {                                        \
            const double *q0 = qd + h * d;                                    \
            VEC acc[4][8 / WIDTH];                                            \
            for (size_t t = 0; t < 4u; ++t)                                   \
                for (size_t v = 0; v < 8u / WIDTH; ++v) acc[t][v] = ZERO;     \
            for (size_t j = 0; j < d; j += 8u)                                \
                for (size_t v = 0; v < 8u / WIDTH; ++v) {                     \
                    const VEC kv = LOAD(kd + j + v * WIDTH);                  \
                    for (size_t t = 0; t < 4u; ++t)                           \
                        acc[t][v] = ADD(                                      \
                            acc[t][v],                                        \
                            MUL(LOAD(q0 + t * d + j + v * WIDTH), kv));       \
                }                                                             \
            for (size_t t = 0; t < 4u; ++t) {                                 \
                double lanes[8];                                              \
                for (size_t v = 0; v < 8u / WIDTH; ++v)                       \
                    STORE(lanes + v * WIDTH, acc[t][v]);                      \
                const double z = lane_tree(lanes) * scale;                    \
                logits[(h + t) * kmax + i] = z;                               \
                bad += z - z;                                                 \
            }                                                                 \
        }                                                                     \
        for (; h < g; ++h) {                                                  \
            const double z = dot8(qd + h * d, kd, d) * scale;                 \
            logits[h * kmax + i] = z;                                         \
            bad += z - z;                                                     \
        }                                                                     \
    }                                                                         \
    return bad;

__attribute__((target("avx2"))) static double logits_avx2(
    const double *qd, size_t g, size_t d, const void *k, size_t k_stride,
    uint32_t type, size_t vis, double scale, double *logits, size_t kmax,
    double *kd) {
    PB__QK_X86_BODY(__m256d, _mm256_setzero_pd(), _mm256_loadu_pd,
                    _mm256_add_pd, _mm256_mul_pd, _mm256_storeu_pd, 4u)
}

#if !defined(PB_NO_AVX512)
#if defined(__clang__)
#define PB__QK_AVX512 \
    __attribute__((target("avx512f,avx512vl"), min_vector_width(512)))
#else
#define PB__QK_AVX512 \
    __attribute__((target("avx512f,avx512vl,prefer-vector-width=512")))
#endif
PB__QK_AVX512 static double logits_avx512(
    const double *qd, size_t g, size_t d, const void *k, size_t k_stride,
    uint32_t type, size_t vis, double scale, double *logits, size_t kmax,
    double *kd) {
    PB__QK_X86_BODY(__m512d, _mm512_setzero_pd(), _mm512_loadu_pd,
                    _mm512_add_pd, _mm512_mul_pd, _mm512_storeu_pd, 8u)
}
#endif
#endif

/* The softmax numerators, in the same variants. */
PB__QK_INLINE void exp_body(double *z, size_t n, double m) {
    for (size_t i = 0; i < n; ++i) z[i] = pb__exp_core(z[i] - m);
}

static void exp_generic(double *z, size_t n, double m) { exp_body(z, n, m); }
#if PB__QK_X86
__attribute__((target("avx2"))) static void exp_avx2(double *z, size_t n,
                                                     double m) {
    exp_body(z, n, m);
}
#if !defined(PB_NO_AVX512)
PB__QK_AVX512 static void exp_avx512(double *z, size_t n, double m) {
    exp_body(z, n, m);
}
#endif
#endif

pb__qk_exp_fn pb__qk_exp_best(void) {
#if PB__QK_X86
    __builtin_cpu_init();
#if !defined(PB_NO_AVX512)
    if (__builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512vl"))
        return exp_avx512;
#endif
    if (__builtin_cpu_supports("avx2")) return exp_avx2;
#endif
    return exp_generic;
}

size_t pb__qk_exp_available(pb__qk_exp_fn *out, size_t cap) {
    size_t n = 0;
    if (n < cap) out[n] = exp_generic;
    ++n;
#if PB__QK_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) {
        if (n < cap) out[n] = exp_avx2;
        ++n;
    }
#if !defined(PB_NO_AVX512)
    if (pb__qk_exp_best() == exp_avx512) {
        if (n < cap) out[n] = exp_avx512;
        ++n;
    }
#endif
#endif
    return n;
}

pb__qk_logits_fn pb__qk_logits_best(void) {
#if PB__QK_X86
    __builtin_cpu_init();
#if !defined(PB_NO_AVX512)
    if (__builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512vl"))
        return logits_avx512;
#endif
    if (__builtin_cpu_supports("avx2")) return logits_avx2;
#endif
    return logits_generic;
}

size_t pb__qk_logits_available(pb__qk_logits_fn *out, size_t cap) {
    size_t n = 0;
    if (n < cap) out[n] = logits_generic;
    ++n;
#if PB__QK_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) {
        if (n < cap) out[n] = logits_avx2;
        ++n;
    }
#if !defined(PB_NO_AVX512)
    if (pb__qk_logits_best() == logits_avx512) {
        if (n < cap) out[n] = logits_avx512;
        ++n;
    }
#endif
#endif
    return n;
}
