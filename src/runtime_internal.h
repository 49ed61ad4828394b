/*
 * runtime_internal.h - what the runtime helpers (qk_score.c, evict_slots.c,
 * compact.c) share: the deterministic exponential and the 16-bit key
 * conversions of qk_math.c, and the one engine query they need
 * (policy_rank.c). Not installed; every name here is pb__.
 */
#ifndef PB_SRC_RUNTIME_INTERNAL_H
#define PB_SRC_RUNTIME_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pyramidkv/pyramidkv.h"

/* 2^k for -1022 <= k <= 1023, from its bits. */
static inline double pb__pow2(int32_t k) {
    const uint64_t b = (uint64_t)(int64_t)(k + 1023) << 52;
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

/* exp(x) for finite x <= 0 by the fixed sequence of double operations of
 * docs/spec.md §15.5 (no libm), so every platform gets the same bits:
 * 0.0 unless x > -745.0, otherwise within 2 ulp of exp(x). Written
 * without branches (each case computed, one chosen) so that a loop over
 * it vectorises; the files that use it are built with floating-point
 * contraction off, so no fused multiply-add merges two roundings. */
static inline double pb__exp_core(double x) {
    /* ln 2 split (Cody and Waite): LN2_HI has 32 significant bits, so
     * k * LN2_HI is exact for |k| < 2^20. */
    const double LN2_HI = 0x1.62e42feep-1;
    const double LN2_LO = 0x1.a39ef35793c76p-33;
    const double INV_LN2 = 0x1.71547652b82fep0;
    /* x clamped to 0 above 0 and to -0.0 at or below -745 (where the
     * result is 0 anyway), by exact products with 0.0 or 1.0: arithmetic
     * instead of selects, which compilers vectorise more readily. x is
     * finite (callers pass differences of finite logits). */
    const double xp = x * (double)(x <= 0.0);
    const double xs = xp * (double)(xp > -745.0);
    /* k = floor(x / ln 2 + 1/2), -1075 <= k <= 0 */
    const double t = xs * INV_LN2 + 0.5;
    const int32_t ti = (int32_t)t; /* toward zero ... */
    const int32_t k = ti - (int32_t)((double)ti > t); /* ... made a floor */
    const double kd = (double)k;
    const double r = (xs - kd * LN2_HI) - kd * LN2_LO;
    /* exp(r), |r| <= 0.35: Taylor to degree 13 by Horner; the first
     * omitted term is below 4.2e-18 relative. */
    double p = 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 1.0 / 2.0;
    p = p * r + 1.0;
    p = p * r + 1.0;
    /* p * 2^k in two steps below 2^-1000 (p * 2^-100 is exact), one
     * otherwise (p * 1.0 is p). */
    const int32_t k1 = -100 * (int32_t)(k < -1000);
    const double e = (p * pb__pow2(k1)) * pb__pow2(k - k1);
    return e * (double)(x > -745.0); /* e is finite: 0.0 or e exactly */
}

/* pb__exp_core, out of line (for the tests). */
double pb__exp_nonpos(double x);

/* z[i] = pb__exp_core(z[i] - m) for i < n: the softmax numerators. One
 * variant per instruction set (qk_kernels.c), all bit-identical. */
typedef void (*pb__qk_exp_fn)(double *z, size_t n, double m);

/* The best variant this CPU runs, and all of them (the portable one
 * first; up to cap written, the count returned), for the tests. */
pb__qk_exp_fn pb__qk_exp_best(void);
size_t pb__qk_exp_available(pb__qk_exp_fn *out, size_t cap);

/* An IEEE binary16 value, exactly as binary32 (every binary16 value is
 * one), from its bits, by integer operations plus one exact int-to-float
 * conversion for subnormals (so no denormals-are-zero mode changes it). */
static inline float pb__f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (uint32_t)(h >> 10) & 0x1fu;
    const uint32_t m = (uint32_t)h & 0x3ffu;
    /* Every case computed, one chosen: no branch, so loops vectorise. */
    const float sub = (float)m * 0x1p-24f; /* m * 2^-24: exact, normal */
    uint32_t sub_bits;
    memcpy(&sub_bits, &sub, sizeof sub_bits);
    const uint32_t special = UINT32_C(0x7F800000) | (m << 13);
    const uint32_t normal = ((e + 112u) << 23) | (m << 13);
    const uint32_t b =
        sign | (e == 0u ? sub_bits : e == 31u ? special : normal);
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* A bfloat16 value as binary32: its bits are the high half. */
static inline float pb__bf16_to_f32(uint16_t h) {
    const uint32_t b = (uint32_t)h << 16;
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* The logits of one query row (docs/spec.md §15.4, items 1 to 3): for
 * keys i < vis and heads h < g, logits[h * kmax + i] = dot(q_h, k_i) *
 * scale, with qd the g rows of head_dim d as doubles and kd scratch of d
 * doubles. Returns 0.0 while every logit is finite, NaN otherwise. One
 * variant per instruction set (qk_kernels.c), all bit-identical: the
 * products are exact and every lane adds in the same order. */
typedef double (*pb__qk_logits_fn)(const double *qd, size_t g, size_t d,
                                   const void *k, size_t k_stride,
                                   uint32_t key_type, size_t vis,
                                   double scale, double *logits, size_t kmax,
                                   double *kd);

/* The best variant this CPU runs. */
pb__qk_logits_fn pb__qk_logits_best(void);

/* Every variant this CPU runs, the portable one first: up to cap written
 * to out, the count returned (for the tests). */
size_t pb__qk_logits_available(pb__qk_logits_fn *out, size_t cap);

/* How many positions the instance holds below `pos` (the rank pos has or
 * would have in the held order). O(log held). The one query of the
 * engine's state the runtime helpers make (policy_rank.c). */
size_t pb__kvcache_rank_below(const pb_kvcache *policy, uint32_t pos);

#endif /* PB_SRC_RUNTIME_INTERNAL_H */
