/*
 * test_qk_math.c - the arithmetic under the Q/K scorer, white-box
 * (src/runtime_internal.h, src/qk_math.c compiled in): every binary16
 * and bfloat16 bit pattern converts to the value its fields define, and
 * the exponential stays within 2 ulp of libm's over its whole domain,
 * with 0 below -745.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>

#include "qk_reference.h"
#include "runtime_internal.h"
#include "test_rng.h"

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
    assert_true(pb__exp_nonpos(-INFINITY) == 0.0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(f16_every_pattern),
        cmocka_unit_test(bf16_every_pattern),
        cmocka_unit_test(exp_within_two_ulp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
