/*
 * schedule_internal.h - the exact integer helpers of the allocation family
 * (schedule_fixed.c), shared with schedule.c: the fixed-point log2 and
 * 2^-y that curve and geometric are defined with (docs/spec.md §12.8), and
 * the 128-bit kit (u128.h) they are computed on; and the taper schedule
 * (schedule_taper.c).
 */
#ifndef PB_SCHEDULE_INTERNAL_H
#define PB_SCHEDULE_INTERNAL_H

#include <stdint.h>

#include "pyramidkv/pyramidkv.h"
#include "u128.h"


/* The 32 constants c_i ~ 2^(2^-i) in Q62, i = 1 .. 32 (c[0] is c_1):
 * c_0 = 2^63, c_i = isqrt(c_{i-1} * 2^62). */
void pb__exp2_constants(uint64_t c[32]);

/* log2(n) in Q32 (the integer part above bit 32) for 1 <= n < 2^32, by
 * repeated squaring (docs/spec.md §12.8). Non-decreasing in n;
 * log2(1) = 0. */
uint64_t pb__log2_q32(uint32_t n);

/* floor(2^31 * 2^-y) for y >= 0 in Q32, through the constants c. Non-
 * increasing in y; 2^31 at y = 0. */
uint32_t pb__exp2_neg_q31(uint64_t y, const uint64_t c[32]);

/* 1 if v is finite (not NaN, not infinite). */
static inline int pb__finite(double v) { return v - v == 0.0; }

/* The taper schedule's shares and their total for a checked schedule
 * (schedule_taper.c): PB_OK or PB_ERR_TOO_LARGE. */
pb_status pb__taper_shares(const pb_schedule *s, uint32_t *shares,
                           uint64_t *total);

#endif /* PB_SCHEDULE_INTERNAL_H */
