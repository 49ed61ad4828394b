/*
 * test_qk_math.c - the arithmetic under the Q/K scorer, white-box
 * (src/runtime_internal.h, src/qk_math.c compiled in): every binary16
 * and bfloat16 bit pattern converts to the value its fields define, and
 * the exponential stays within 2 ulp of libm's over its whole domain,
 * with 0 below -745; every variant of the logits kernel (qk_kernels.c)
 * this CPU runs gives the same bits as the portable one, for every key
 * type, head dims with and without a tail, and groups of 1 to 9 heads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "qk_reference.h"
#include "runtime_internal.h"
#include "test_rng.h"
#include "test_main.h"

static int same_value(float got, double want) {
    if (isnan(want)) return isnan(got);
    return (double)got == want && !signbit(got) == !signbit(want);
}

static void f16_every_pattern(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 65536u; ++h) {
        const float got = pb__f16_to_f32((uint16_t)h);
        if (!same_value(got, qkr_f16((uint16_t)h)))
            fprintf(stderr, "f16 %04x: got %a want %a\n", h, (double)got,
                    qkr_f16((uint16_t)h));
        assert_true(same_value(got, qkr_f16((uint16_t)h)));
    }
}

static void bf16_every_pattern(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 65536u; ++h)
        assert_true(same_value(pb__bf16_to_f32((uint16_t)h),
                               qkr_bf16((uint16_t)h)));
}

static void exp_within_two_ulp(void **state) {
    (void)state;
    pbt_rng g = {5u};
    for (int i = 0; i < 2000000; ++i) {
        const double x = i < 1000 ? -(double)i * 0.75 : -pbt_unit(&g) * 746.0;
        const double got = pb__exp_nonpos(x);
        const double want = x > -745.0 ? exp(x) : 0.0;
        /* 2 ulp of want, or of the smallest normal where want is
         * subnormal */
        const double ulp = ldexp(1.0, ilogb(want > 0x1p-1022 ? want : 0x1p-1022) - 52);
        if (!(fabs(got - want) <= 2.0 * ulp))
            fprintf(stderr, "exp(%a): got %a want %a\n", x, got, want);
        assert_true(fabs(got - want) <= 2.0 * ulp);
    }
    assert_true(pb__exp_nonpos(0.0) == 1.0);
    assert_true(pb__exp_nonpos(-800.0) == 0.0);
    assert_true(pb__exp_nonpos(-745.0) == 0.0);
    assert_true(pb__exp_nonpos(-1e300) == 0.0);
}

static void kernels_identical(void **state) {
    (void)state;
    pb__qk_logits_fn fns[8];
    const size_t n_fns = pb__qk_logits_available(fns, 8u);
    assert_true(n_fns >= 1u && n_fns <= 8u);
    fprintf(stderr, "%zu logits variants on this CPU\n", n_fns);
    pbt_rng g = {77u};
    enum { MAXD = 136, MAXG = 9, KEYS = 37 };
    static double qd[MAXG * MAXD], kd[MAXD], want[MAXG * KEYS],
        got[MAXG * KEYS];
    static uint32_t k[KEYS * (MAXD + 3)];
    const size_t dims[6] = {1u, 7u, 8u, 64u, 128u, 136u};
    for (size_t di = 0; di < 6u; ++di)
        for (size_t grp = 1; grp <= MAXG; ++grp)
            for (uint32_t t = 0; t < 3u; ++t) {
                const size_t d = dims[di], stride = d + 3u;
                for (size_t i = 0; i < grp * d; ++i)
                    qd[i] = (double)(float)(pbt_unit(&g) * 4.0 - 2.0);
                for (size_t i = 0; i < KEYS * stride; ++i) {
                    const uint32_t r = (uint32_t)pbt_next(&g);
                    if (t == 0u) {
                        const float f = (float)(pbt_unit(&g) * 4.0 - 2.0);
                        memcpy(&k[i], &f, sizeof f);
                    } else { /* finite 16-bit patterns of any size */
                        const uint16_t h = (uint16_t)(t == 1u ? r & 0x7BFFu
                                                              : r & 0x7F7Fu);
                        ((uint16_t *)k)[i] = h;
                    }
                }
                memset(want, 0, sizeof want);
                const double bw = fns[0](qd, grp, d, k, stride, t, KEYS,
                                         0.125, want, KEYS, kd);
                for (size_t f = 1; f < n_fns; ++f) {
                    memset(got, 0, sizeof got);
                    const double bg = fns[f](qd, grp, d, k, stride, t, KEYS,
                                             0.125, got, KEYS, kd);
                    assert_memory_equal(&bw, &bg, sizeof bw);
                    assert_memory_equal(want, got, sizeof want);
                }
            }
}

/* Every variant of the softmax numerators gives the portable one's bits,
 * over the whole domain, the underflow edge and the subnormal range. */
static void exp_variants_identical(void **state) {
    (void)state;
    pb__qk_exp_fn fns[8];
    const size_t n_fns = pb__qk_exp_available(fns, 8u);
    assert_true(n_fns >= 1u && n_fns <= 8u);
    enum { N = 4099 };
    static double in[N], want[N], got[N];
    pbt_rng g = {31u};
    for (size_t i = 0; i < N; ++i)
        in[i] = i < 64u ? -745.0 + (double)i * 0.0625 - 2.0
                        : -pbt_unit(&g) * (i % 3u == 0u ? 750.0 : 40.0);
    memcpy(want, in, sizeof in);
    fns[0](want, N, 0.0);
    for (size_t i = 0; i < N; ++i)
        assert_memory_equal(&want[i], &(double){pb__exp_nonpos(in[i])},
                            sizeof(double));
    for (size_t f = 1; f < n_fns; ++f) {
        memcpy(got, in, sizeof in);
        fns[f](got, N, 0.0);
        assert_memory_equal(want, got, sizeof want);
    }
}

PB_TEST_MAIN(cmocka_unit_test(f16_every_pattern),
             cmocka_unit_test(bf16_every_pattern),
             cmocka_unit_test(exp_within_two_ulp),
             cmocka_unit_test(kernels_identical),
             cmocka_unit_test(exp_variants_identical))
