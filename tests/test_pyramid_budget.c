/*
 * test_pyramid_budget.c - pb_kvcache_pyramid_budget, _budgets and _total
 * against the published facts and against a 128-bit evaluation of the
 * formula for random and extreme uint32 inputs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "pyramidkv/pyramidkv.h"
#include "test_rng.h"
#include "test_main.h"

__extension__ typedef unsigned __int128 wide;

/* The formula as written in the specification, in 128-bit arithmetic. */
static uint32_t oracle(uint32_t b, uint32_t k, uint32_t l, uint32_t r) {
    if (l == 0u || k >= l || r == 0u) return 0u;
    if (l == 1u) return b;
    const wide num = (wide)2u * b * ((wide)r * (l - 1u) - (wide)k * (r - 1u));
    const wide den = (wide)(r + (wide)1u) * (l - 1u);
    const wide q = num / den;
    return q > UINT32_MAX ? UINT32_MAX : (uint32_t)q;
}

static pbt_rng rng = {UINT64_C(0x9E3779B97F4A7C15)};
static uint32_t next_u32(void) { return (uint32_t)(pbt_next(&rng) >> 32); }

static void published_facts(void **state) {
    (void)state;
    const uint32_t b512[][2] = {{0, 819}, {1, 799}, {15, 521},
                                {16, 502}, {30, 224}, {31, 204}};
    for (size_t i = 0; i < sizeof b512 / sizeof b512[0]; ++i)
        assert_int_equal(pb_kvcache_pyramid_budget(512, b512[i][0], 32, 4),
                         b512[i][1]);
    assert_int_equal(pb_kvcache_pyramid_budget(6, 0, 3, 2), 8);
    assert_int_equal(pb_kvcache_pyramid_budget(6, 1, 3, 2), 6);
    assert_int_equal(pb_kvcache_pyramid_budget(6, 2, 3, 2), 4);
    const uint32_t b10[] = {16, 12, 8, 4}, b100[] = {150, 116, 83, 50};
    for (uint32_t k = 0; k < 4; ++k) {
        assert_int_equal(pb_kvcache_pyramid_budget(10, k, 4, 4), b10[k]);
        assert_int_equal(pb_kvcache_pyramid_budget(100, k, 4, 3), b100[k]);
    }
    assert_int_equal(pb_kvcache_pyramid_total(100, 4, 3), 399);
    assert_int_equal(pb_kvcache_pyramid_budget(3000000000u, 0, 2, 4),
                     UINT32_MAX);
    for (uint32_t k = 0; k < 7; ++k)
        assert_int_equal(pb_kvcache_pyramid_budget(777, k, 7, 1), 777);
}

static void undefined_shares_are_zero(void **state) {
    (void)state;
    assert_int_equal(pb_kvcache_pyramid_budget(512, 0, 0, 4), 0);
    assert_int_equal(pb_kvcache_pyramid_budget(512, 32, 32, 4), 0);
    assert_int_equal(pb_kvcache_pyramid_budget(512, UINT32_MAX, 32, 4), 0);
    assert_int_equal(pb_kvcache_pyramid_budget(512, 3, 32, 0), 0);
    assert_int_equal(pb_kvcache_pyramid_budget(0, 3, 32, 4), 0);
    assert_int_equal(pb_kvcache_pyramid_budget(99, 0, 1, 8), 99);
    assert_int_equal(pb_kvcache_pyramid_total(512, 0, 4), 0);
    assert_int_equal(pb_kvcache_pyramid_total(512, 32, 0), 0);
}

static void extremes_match_the_formula(void **state) {
    (void)state;
    const uint32_t edge[] = {0u, 1u, 2u, 3u, 4u, 7u, 8u, 255u, 65535u,
                             65536u, 0x7FFFFFFFu, 0x80000000u,
                             UINT32_MAX - 2u, UINT32_MAX - 1u, UINT32_MAX};
    const size_t n = sizeof edge / sizeof edge[0];
    for (size_t bi = 0; bi < n; ++bi)
        for (size_t li = 0; li < n; ++li)
            for (size_t ri = 0; ri < n; ++ri) {
                const uint32_t b = edge[bi], l = edge[li], r = edge[ri];
                const uint32_t ks[] = {0u, 1u, l / 2u, l - 1u, l, l - 2u};
                for (size_t ki = 0; ki < 6; ++ki)
                    assert_int_equal(pb_kvcache_pyramid_budget(b, ks[ki], l, r),
                                     oracle(b, ks[ki], l, r));
            }
}

static void random_inputs_match_the_formula(void **state) {
    (void)state;
    for (int i = 0; i < 2000000; ++i) {
        const uint32_t shift = next_u32() % 33u;
        const uint32_t b = shift == 32u ? next_u32() : next_u32() >> shift;
        const uint32_t l = next_u32() >> (next_u32() % 32u);
        const uint32_t r = next_u32() >> (next_u32() % 32u);
        const uint32_t k = l ? next_u32() % l : next_u32();
        const uint32_t got = pb_kvcache_pyramid_budget(b, k, l, r);
        const uint32_t want = oracle(b, k, l, r);
        if (got != want)
            fail_msg("budget(%u, %u, %u, %u) = %u, want %u", b, k, l, r, got,
                     want);
    }
}

static void budgets_fill_every_layer(void **state) {
    (void)state;
    uint32_t shares[33];
    shares[32] = 12345u;
    assert_int_equal(pb_kvcache_pyramid_budgets(512, 32, 4, shares, 33), PB_OK);
    for (uint32_t k = 0; k < 32; ++k)
        assert_int_equal(shares[k], pb_kvcache_pyramid_budget(512, k, 32, 4));
    assert_int_equal(shares[32], 12345u); /* nothing past num_layers */
    assert_int_equal(pb_kvcache_pyramid_budgets(512, 32, 4, NULL, 32),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_pyramid_budgets(512, 0, 4, shares, 32),
                     PB_ERR_PARAM);
    assert_int_equal(pb_kvcache_pyramid_budgets(512, 32, 0, shares, 32),
                     PB_ERR_PARAM);
    shares[0] = 7u;
    assert_int_equal(pb_kvcache_pyramid_budgets(512, 32, 4, shares, 31),
                     PB_ERR_BUFFER);
    assert_int_equal(shares[0], 7u); /* nothing written on error */
}

static uint64_t looped_total(uint32_t b, uint32_t l, uint32_t r) {
    uint64_t sum = 0;
    for (uint32_t k = 0; k < l; ++k) sum += pb_kvcache_pyramid_budget(b, k, l, r);
    return sum;
}

static void total_is_the_exact_sum(void **state) {
    (void)state;
    for (uint32_t l = 1; l <= 40; ++l)
        for (uint32_t r = 1; r <= 9; ++r)
            for (uint32_t b = 1; b <= 70; b += 3)
                assert_int_equal(pb_kvcache_pyramid_total(b, l, r),
                                 looped_total(b, l, r));
    for (int i = 0; i < 3000; ++i) {
        const uint32_t b = next_u32() >> (next_u32() % 32u);
        const uint32_t l = 1u + (next_u32() % 3000u);
        const uint32_t r = 1u + (next_u32() >> (next_u32() % 32u)) % UINT32_MAX;
        const uint64_t got = pb_kvcache_pyramid_total(b, l, r);
        const uint64_t want = looped_total(b, l, r);
        if (got != want)
            fail_msg("total(%u, %u, %u) = %llu, want %llu", b, l, r,
                     (unsigned long long)got, (unsigned long long)want);
        assert_true(got <= (uint64_t)l * b ||
                    pb_kvcache_pyramid_budget(b, 0, l, r) == UINT32_MAX);
    }
}

static void total_of_huge_stacks(void **state) {
    (void)state;
    /* r = 1: every layer gets exactly budget. */
    assert_true(pb_kvcache_pyramid_total(UINT32_MAX - 1u, UINT32_MAX, 1) ==
                (uint64_t)(UINT32_MAX - 1u) * UINT32_MAX);
    /* Never above L * B, and at least L * B minus one per layer. */
    const uint32_t l = UINT32_MAX, b = 1000u, r = 4u;
    const uint64_t t = pb_kvcache_pyramid_total(b, l, r);
    assert_true(t <= (uint64_t)l * b);
    assert_true(t + l >= (uint64_t)l * b);
    /* Saturating layers are counted as UINT32_MAX. */
    const uint64_t two = pb_kvcache_pyramid_total(3000000000u, 2, 4);
    assert_true(two == (uint64_t)UINT32_MAX +
                           pb_kvcache_pyramid_budget(3000000000u, 1, 2, 4));
}

PB_TEST_MAIN(cmocka_unit_test(published_facts),
             cmocka_unit_test(undefined_shares_are_zero),
             cmocka_unit_test(extremes_match_the_formula),
             cmocka_unit_test(random_inputs_match_the_formula),
             cmocka_unit_test(budgets_fill_every_layer),
             cmocka_unit_test(total_is_the_exact_sum),
             cmocka_unit_test(total_of_huge_stacks))
