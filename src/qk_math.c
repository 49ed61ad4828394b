/*
 * qk_math.c - the exponential of the Q/K scorer: a fixed sequence of
 * IEEE double operations (docs/spec.md §14.3), without libm, so that the
 * softmax, and with it every victim, is the same on every platform and
 * build. Built with floating-point contraction off: no fused multiply-add
 * may merge two of its roundings.
 */
#include <stdint.h>
#include <string.h>

#include "runtime_internal.h"

/* 2^k for -1022 <= k <= 1023, from its bits. */
static double pow2(int k) {
    const uint64_t b = (uint64_t)(k + 1023) << 52;
    double d;
    memcpy(&d, &b, sizeof d);
    return d;
}

double pb__exp_nonpos(double x) {
    /* ln 2 split (Cody and Waite): LN2_HI has 32 significant bits, so
     * k * LN2_HI is exact for |k| < 2^20. */
    static const double LN2_HI = 0x1.62e42feep-1;
    static const double LN2_LO = 0x1.a39ef35793c76p-33;
    static const double INV_LN2 = 0x1.71547652b82fep0;
    if (!(x > -745.0)) return 0.0; /* also NaN: callers never pass one */
    if (x > 0.0) x = 0.0;
    /* k = round-half-up(x / ln 2), -1075 <= k <= 0. */
    const double t = x * INV_LN2 + 0.5;
    int k = (int)t;              /* truncation toward zero ... */
    if ((double)k > t) k -= 1;   /* ... made a floor */
    const double r = (x - (double)k * LN2_HI) - (double)k * LN2_LO;
    /* exp(r), |r| <= 0.35: Taylor to degree 13 by Horner; the first
     * omitted term is below 4.2e-18 relative. */
    static const double c[14] = {
        1.0,
        1.0,
        1.0 / 2.0,
        1.0 / 6.0,
        1.0 / 24.0,
        1.0 / 120.0,
        1.0 / 720.0,
        1.0 / 5040.0,
        1.0 / 40320.0,
        1.0 / 362880.0,
        1.0 / 3628800.0,
        1.0 / 39916800.0,
        1.0 / 479001600.0,
        1.0 / 6227020800.0};
    double p = c[13];
    for (int i = 12; i >= 0; --i) p = p * r + c[i];
    /* p * 2^k, in two exact-or-once-rounded steps below 2^-1022. */
    if (k < -1000) {
        p *= pow2(-100);
        k += 100;
    }
    return p * pow2(k);
}
