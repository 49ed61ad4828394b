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

/* exp(x) for x <= 0 by the fixed sequence of double operations of
 * docs/spec.md §14.3 (no libm), so every platform gets the same bits:
 * 0.0 below -745.0, otherwise within 2 ulp of exp(x). */
double pb__exp_nonpos(double x);

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
