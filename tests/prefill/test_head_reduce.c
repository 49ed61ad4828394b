/*
 * test_head_reduce.c - pb_kvcache_head_reduce: each mode against values
 * worked by hand, the fixed summation order, strides, the in-place form and
 * every refused input (with the output left untouched).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <string.h>

#include "fp_env.h"
#include "pyramidkv/pyramidkv.h"
#include "test_main.h"

/* Three heads of four values, contiguous (head_stride 4). */
static const float k_three_heads[12] = {
    0.5f, 0.25f, 0.0f, 1.0f,  /* head 0 */
    0.25f, 0.25f, 0.0f, 0.0f, /* head 1 */
    0.75f, 0.0f, 0.0f, 0.5f,  /* head 2 */
};

static void mean_max_sum_by_hand(void **state) {
    (void)state;
    float out[4];
    assert_int_equal(pb_kvcache_head_reduce(k_three_heads, 3, 4, 4,
                                            PB_HEAD_REDUCE_SUM, out), PB_OK);
    /* 0.5+0.25+0.75, 0.25+0.25+0, 0, 1+0+0.5 */
    assert_true(out[0] == 1.5f && out[1] == 0.5f && out[2] == 0.0f &&
                out[3] == 1.5f);
    assert_int_equal(pb_kvcache_head_reduce(k_three_heads, 3, 4, 4,
                                            PB_HEAD_REDUCE_MAX, out), PB_OK);
    assert_true(out[0] == 0.75f && out[1] == 0.25f && out[2] == 0.0f &&
                out[3] == 1.0f);
    assert_int_equal(pb_kvcache_head_reduce(k_three_heads, 3, 4, 4,
                                            PB_HEAD_REDUCE_MEAN, out), PB_OK);
    /* 1.5/3, 0.5/3 rounded once to float, 0, 1.5/3 */
    assert_true(out[0] == 0.5f);
    assert_true(out[1] == (float)(0.5 / 3.0));
    assert_true(out[2] == 0.0f && out[3] == 0.5f);
}

/* The sum is taken in double in ascending head order and rounded once: with
 * 2^24, 1, 1 a float accumulator would lose both ones (2^24 + 1 rounds back
 * to 2^24), the double one gives 2^24 + 2 exactly. */
static void sum_is_double_in_head_order(void **state) {
    (void)state;
    const float big = 16777216.0f;
    const float in[3] = {big, 1.0f, 1.0f};
    float out[1];
    assert_int_equal(pb_kvcache_head_reduce(in, 3, 1, 1, PB_HEAD_REDUCE_SUM,
                                            out), PB_OK);
    assert_true(out[0] == 16777218.0f);
    assert_int_equal(pb_kvcache_head_reduce(in, 3, 1, 1, PB_HEAD_REDUCE_MEAN,
                                            out), PB_OK);
    assert_true(out[0] == (float)(16777218.0 / 3.0));
}

/* A [row][head][pos] layout: one call per row with head_stride = len, and a
 * gap between heads (head_stride > n) skips the padding. */
static void strides(void **state) {
    (void)state;
    const float padded[2 * 5] = {1.0f, 2.0f, 3.0f, 99.0f, 99.0f,
                                 3.0f, 2.0f, 1.0f, 99.0f, 99.0f};
    float out[3];
    assert_int_equal(pb_kvcache_head_reduce(padded, 2, 5, 3,
                                            PB_HEAD_REDUCE_MAX, out), PB_OK);
    assert_true(out[0] == 3.0f && out[1] == 2.0f && out[2] == 3.0f);
    /* One head: a copy, whatever the stride. */
    assert_int_equal(pb_kvcache_head_reduce(padded, 1, 0, 3,
                                            PB_HEAD_REDUCE_MEAN, out), PB_OK);
    assert_true(out[0] == 1.0f && out[1] == 2.0f && out[2] == 3.0f);
}

static void in_place(void **state) {
    (void)state;
    float buf[12];
    memcpy(buf, k_three_heads, sizeof buf);
    assert_int_equal(pb_kvcache_head_reduce(buf, 3, 4, 4, PB_HEAD_REDUCE_SUM,
                                            buf), PB_OK);
    assert_true(buf[0] == 1.5f && buf[1] == 0.5f && buf[2] == 0.0f &&
                buf[3] == 1.5f);
    /* The other heads are left as they were. */
    assert_memory_equal(buf + 4, k_three_heads + 4, 8 * sizeof(float));
}

static void refused_inputs_write_nothing(void **state) {
    (void)state;
    float out[4] = {7.0f, 7.0f, 7.0f, 7.0f};
    const float sentinel[4] = {7.0f, 7.0f, 7.0f, 7.0f};
    float bad[12];

    assert_int_equal(pb_kvcache_head_reduce(NULL, 3, 4, 4, 0, out),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_head_reduce(k_three_heads, 3, 4, 4, 0, NULL),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_head_reduce(k_three_heads, 0, 4, 4, 0, out),
                     PB_ERR_PARAM);
    assert_int_equal(pb_kvcache_head_reduce(k_three_heads, 3, 4, 4, 3, out),
                     PB_ERR_PARAM);
    assert_int_equal(pb_kvcache_head_reduce(k_three_heads, 3, 3, 4, 0, out),
                     PB_ERR_PARAM);
    assert_int_equal(pb_kvcache_head_reduce(k_three_heads, 3, SIZE_MAX / 2, 4,
                                            0, out), PB_ERR_TOO_LARGE);

    const float poison[5] = {NAN, -1.0f, INFINITY, -INFINITY,
                             -FLT_TRUE_MIN};
    for (int k = 0; k < 5; ++k) {
        for (uint32_t mode = 0; mode < 3; ++mode) {
            memcpy(bad, k_three_heads, sizeof bad);
            bad[9] = poison[k]; /* the last head: checked before any write */
            assert_int_equal(pb_kvcache_head_reduce(bad, 3, 4, 4, mode, out),
                             PB_ERR_WEIGHT);
            memcpy(bad, k_three_heads, sizeof bad);
            bad[9] = poison[k];
            assert_int_equal(pb_kvcache_head_reduce(bad, 3, 4, 4, mode, bad),
                             PB_ERR_WEIGHT);
            assert_true(bad[0] == k_three_heads[0]); /* in place untouched */
        }
    }
    const float huge[2] = {FLT_MAX, FLT_MAX};
    assert_int_equal(pb_kvcache_head_reduce(huge, 2, 1, 1, PB_HEAD_REDUCE_SUM,
                                            out), PB_ERR_WEIGHT);
    /* Mean and max of the same values are fine. */
    float one[1];
    assert_int_equal(pb_kvcache_head_reduce(huge, 2, 1, 1, PB_HEAD_REDUCE_MEAN,
                                            one), PB_OK);
    assert_true(one[0] == FLT_MAX);
    assert_memory_equal(out, sentinel, sizeof out);

    /* -0.0 is accepted, as pb_kvcache_observe accepts it. */
    const float negzero[2] = {-0.0f, 0.0f};
    assert_int_equal(pb_kvcache_head_reduce(negzero, 2, 1, 1,
                                            PB_HEAD_REDUCE_SUM, one), PB_OK);
    assert_true(one[0] == 0.0f);
}

/* The same refusals with x86's flush-to-zero and denormals-are-zero bits
 * set (tests/fp_env.h): a negative subnormal, which DAZ would read as
 * -0.0, is still refused. */
static void refused_inputs_under_daz(void **state) {
    PBT_RUN_UNDER_DAZ(refused_inputs_write_nothing, state);
}

PB_TEST_MAIN(cmocka_unit_test(mean_max_sum_by_hand),
             cmocka_unit_test(sum_is_double_in_head_order),
             cmocka_unit_test(strides), cmocka_unit_test(in_place),
             cmocka_unit_test(refused_inputs_write_nothing),
             cmocka_unit_test(refused_inputs_under_daz))
