/*
 * test_policy_rules.c - one cmocka test per rule of the per-layer policy
 * (docs/spec.md, sections 4 to 6) and the worked example of docs/spec.md
 * section 11.1. The error contract, memory accounting and the policybook
 * vtables are test_policy_contract.c's.
 *
 * Expected values are worked out by hand in the comments; none is taken
 * from the code under test.
 */
#include <math.h>
#include <stdlib.h>

#include "policy_rules_helpers.h"
#include "test_main.h"

/* ------------------------------------------------------------------------ */
/* The worked example (docs/spec.md 11.1)                                   */

static void worked_window_scores(void **state) {
    (void)state;
    const pb_kvcache_pyramidkv_params p = params_of(6, 0, 1, 4, 1, 8, 1);
    pb_kvcache *k = make(&p, NULL);
    feed_worked_steps(k);
    /* Position 0: 1 + .5 + .25 + .125 + .0625 + .0625 = 2;
     * 1: .5 + .25 + .125 + .0625 + .0625 = 1; 2: .5 + .25 + .125 + .0625 =
     * .9375; 3: .5 + .25 + .125 = .875; 4: .5 + .25 = .75; 5: .4375; 6: 0. */
    const double want[] = {2, 1, .9375, .875, .75, .4375, 0};
    for (uint32_t pos = 0; pos <= 6; ++pos)
        assert_true(score_of(k, pos) == want[pos]);
    pb_kvcache_destroy(k);
}

static void worked_single_layer_drops_5(void **state) {
    (void)state;
    const pb_kvcache_pyramidkv_params p = params_of(6, 0, 1, 4, 1, 8, 1);
    pb_kvcache *k = make(&p, NULL);
    assert_int_equal(pb_kvcache_effective_budget(k), 6);
    feed_worked_steps(k);
    const uint32_t v[] = {5};
    evict_expect(k, 6, v, 1);
    const uint32_t kept[] = {0, 1, 2, 3, 4, 6};
    kept_expect(k, kept, 6);
    pb_kvcache_destroy(k);
}

static void worked_share_tighter_than_ask(void **state) {
    (void)state;
    /* Layer 2 of 3, ratio 2: floor(2*6*(2*2 - 2*1) / (3*2)) = 4. */
    const pb_kvcache_pyramidkv_params p = params_of(6, 2, 3, 2, 1, 8, 1);
    pb_kvcache *k = make(&p, NULL);
    assert_int_equal(pb_kvcache_effective_budget(k), 4);
    feed_worked_steps(k);
    const uint32_t v[] = {3, 4, 5}; /* the three lowest: .875, .75, .4375 */
    evict_expect(k, 6, v, 3);
    const uint32_t kept[] = {0, 1, 2, 6};
    kept_expect(k, kept, 4);
    pb_kvcache_destroy(k);
}

static void worked_ask_binds_shallow_layer(void **state) {
    (void)state;
    /* Layer 0 of 3, ratio 2: floor(2*6*(2*2) / (3*2)) = 8 > ask 6. */
    const pb_kvcache_pyramidkv_params p = params_of(6, 0, 3, 2, 1, 8, 1);
    pb_kvcache *k = make(&p, NULL);
    assert_int_equal(pb_kvcache_effective_budget(k), 8);
    feed_worked_steps(k);
    const uint32_t v[] = {5};
    evict_expect(k, 6, v, 1);
    assert_int_equal(pb_kvcache_kept_count(k), 6);
    pb_kvcache_destroy(k);
}

static void worked_recent_floor(void **state) {
    (void)state;
    /* Budget 10, layer 3 of 4, ratio 4: floor(2*10*(4*3 - 3*3) / (5*3)) = 4,
     * raised to recent + 1 = 5. Positions 3..6 are the protected newest 4,
     * so the two lowest of 0, 1, 2 (scores 2, 1, .9375) go: [1, 2]. */
    const pb_kvcache_pyramidkv_params p = params_of(10, 3, 4, 4, 4, 8, 1);
    pb_kvcache *k = make(&p, NULL);
    assert_int_equal(pb_kvcache_effective_budget(k), 5);
    feed_worked_steps(k);
    const uint32_t v[] = {1, 2};
    evict_expect(k, 10, v, 2);
    const uint32_t kept[] = {0, 3, 4, 5, 6};
    kept_expect(k, kept, 5);
    pb_kvcache_destroy(k);
}

/* ------------------------------------------------------------------------ */
/* Rules                                                                    */

static void window_ageing(void **state) {
    (void)state;
    /* obs_window 2: only the last two observed steps count. */
    const pb_kvcache_pyramidkv_params p = params_of(20, 0, 1, 4, 0, 2, 1);
    pb_kvcache *k = make(&p, NULL);
    const float a[] = {4.0f};
    const float b[] = {2.0f, 8.0f};
    const float c[] = {1.0f, 16.0f, 32.0f};
    observe_ok(k, 1, a, 1); /* slot 0 */
    assert_true(score_of(k, 0) == 4.0);
    observe_ok(k, 2, b, 2); /* slot 1 */
    assert_true(score_of(k, 0) == 6.0);
    assert_true(score_of(k, 1) == 8.0);
    observe_ok(k, 3, c, 3); /* slot 0 again: the 4 and the 0 age out */
    assert_true(score_of(k, 0) == 1.0 + 2.0);
    assert_true(score_of(k, 1) == 16.0 + 8.0);
    assert_true(score_of(k, 2) == 32.0);
    assert_true(score_of(k, 3) == 0.0);
    pb_kvcache_destroy(k);
}

static void window_score_is_slot_order_double_sum(void **state) {
    (void)state;
    /* obs 3; slot order 0, 1, 2 after wrapping. With x = 2^24 as float:
     * slots hold [1, x, 1] in slot order after the steps below, and the
     * double sum is exact 2^24 + 2 (floats could not hold it). */
    const pb_kvcache_pyramidkv_params p = params_of(20, 0, 1, 4, 0, 3, 1);
    pb_kvcache *k = make(&p, NULL);
    const float x = 16777216.0f;
    const float s1[] = {1.0f};
    const float s2[] = {x, 0.0f};
    const float s3[] = {1.0f, 0.0f, 0.0f};
    observe_ok(k, 1, s1, 1);
    observe_ok(k, 2, s2, 2);
    observe_ok(k, 3, s3, 3);
    assert_true(score_of(k, 0) == 16777218.0);
    pb_kvcache_destroy(k);
}

static void null_steps_admit_without_ageing(void **state) {
    (void)state;
    const pb_kvcache_pyramidkv_params p = params_of(20, 0, 1, 4, 0, 2, 1);
    pb_kvcache *k = make(&p, NULL);
    const float a[] = {1.0f};
    observe_ok(k, 1, a, 1);                   /* slot 0 */
    observe_ok(k, 2, NULL, 12345);            /* length ignored, no slot */
    observe_ok(k, 5, NULL, 0);
    const float b[] = {2.0f, 3.0f, 4.0f, 5.0f};
    observe_ok(k, 6, b, 4);                   /* slot 1: nothing aged */
    assert_true(score_of(k, 0) == 3.0);
    assert_true(score_of(k, 1) == 3.0);
    assert_true(score_of(k, 2) == 4.0);
    assert_true(score_of(k, 5) == 5.0);
    assert_true(score_of(k, 6) == 0.0);
    const uint32_t kept[] = {0, 1, 2, 5, 6};
    kept_expect(k, kept, 5);
    pb_kvcache_destroy(k);
}

/* Scores by position after one step over 6 held positions. */
static pb_kvcache *six_scored(uint32_t kernel, uint32_t pool,
                              const float *w6) {
    const pb_kvcache_pyramidkv_params p = params_of(30, 0, 1, 4, 1, 4, kernel);
    pb_kvcache_options o = PB_KVCACHE_OPTIONS_DEFAULT;
    o.pool = pool;
    pb_kvcache *k = make(&p, &o);
    for (uint32_t pos = 1; pos <= 5; ++pos) observe_ok(k, pos, NULL, 0);
    observe_ok(k, 6, w6, 6); /* positions 0..5 scored, 6 new (protected) */
    return k;
}

static void pooling_changes_the_victim(void **state) {
    (void)state;
    /* Scores 5, .1, 5, .2, .3, .4, (6: 0). Kernel 1: position 1 (.1) is the
     * lowest. Kernel 3: pooled = max of neighbours: 0:5 1:5 2:5 3:5 4:.4
     * 5:.4 -> positions 4 and 5 tie at .4; the lower, 4, goes. */
    const float w[] = {5.0f, .1f, 5.0f, .2f, .3f, .4f};
    pb_kvcache *k1 = six_scored(1, PB_POOL_MAX, w);
    const uint32_t v1[] = {1};
    evict_expect(k1, 6, v1, 1);
    pb_kvcache_destroy(k1);
    pb_kvcache *k3 = six_scored(3, PB_POOL_MAX, w);
    const uint32_t v3[] = {4};
    evict_expect(k3, 6, v3, 1);
    pb_kvcache_destroy(k3);
}

static void protected_newest_take_part_in_pooling(void **state) {
    (void)state;
    /* Kernel 3, recent 2: positions 5 and 6 are protected. Scores
     * 0..5 = .9, .9, .9, .2, .1, 9 (6: 0). Pooled: 0..3 = .9 (3 is
     * max(.9, .2, .1)), and 4 = max(.2, .1, 9) = 9 because the protected 5
     * is its neighbour. So 0 goes (ties at .9 to the lower position); were
     * protected positions left out of pooling, 4 (pooled .2) would go. */
    const pb_kvcache_pyramidkv_params p = params_of(30, 0, 1, 4, 2, 4, 3);
    pb_kvcache *k = make(&p, NULL);
    for (uint32_t pos = 1; pos <= 5; ++pos) observe_ok(k, pos, NULL, 0);
    const float w[] = {.9f, .9f, .9f, .2f, .1f, 9.0f};
    observe_ok(k, 6, w, 6);
    const uint32_t v[] = {0};
    evict_expect(k, 6, v, 1);
    pb_kvcache_destroy(k);
}

static void average_pooling_counts_padding(void **state) {
    (void)state;
    /* Kernel 3, average: (sum of in-range neighbours) / 3.
     * Scores 0:.9 1:.3 2:.3 3:.9 4:.9 5:.9 6:0.
     *  pooled 0 = (.9+.3)/3 = .4      (padding counted)
     *  pooled 1 = (.9+.3+.3)/3 = .5
     *  pooled 2 = (.3+.3+.9)/3 = .5
     *  pooled 3 = (.3+.9+.9)/3 = .7, 4 = .9, 5 = (.9+.9+0)/3 = .6
     * Lowest: position 0, although its own score is the highest. */
    const float w[] = {.9f, .3f, .3f, .9f, .9f, .9f};
    pb_kvcache *k = six_scored(3, PB_POOL_AVG, w);
    const uint32_t v[] = {0};
    evict_expect(k, 6, v, 1);
    pb_kvcache_destroy(k);
    /* Kernel 1 averages nothing: the plain scores, where 1 and 2 tie at .3
     * and the lower goes. */
    pb_kvcache *k1 = six_scored(1, PB_POOL_AVG, w);
    const uint32_t v1[] = {1};
    evict_expect(k1, 6, v1, 1);
    pb_kvcache_destroy(k1);
}

static void recent_window_outranks_score(void **state) {
    (void)state;
    /* recent 3: positions 4, 5, 6 are never chosen although their scores
     * (0, 0, 0) are the lowest; the budget-4 ask drops 3 of 0..3. */
    const pb_kvcache_pyramidkv_params p = params_of(20, 0, 1, 4, 3, 4, 1);
    pb_kvcache *k = make(&p, NULL);
    for (uint32_t pos = 1; pos <= 3; ++pos) observe_ok(k, pos, NULL, 0);
    const float w[] = {1.0f, 3.0f, 2.0f, 4.0f};
    observe_ok(k, 4, w, 4);
    observe_ok(k, 5, NULL, 0);
    observe_ok(k, 6, NULL, 0);
    const uint32_t v[] = {0, 1, 2};
    evict_expect(k, 4, v, 3);
    const uint32_t kept[] = {3, 4, 5, 6};
    kept_expect(k, kept, 4);
    /* Asking for less than the protected count changes nothing more. */
    evict_expect(k, 0, (const uint32_t[]){3}, 1);
    evict_expect(k, 0, NULL, 0);
    const uint32_t kept2[] = {4, 5, 6};
    kept_expect(k, kept2, 3);
    pb_kvcache_destroy(k);
}

static void ties_evict_the_lower_position(void **state) {
    (void)state;
    const float w[] = {.5f, .25f, .5f, .25f, .25f, .5f};
    pb_kvcache *k = six_scored(1, PB_POOL_MAX, w);
    /* Ask 4 of 7: 3 go, among the tied .25 at 1, 3, 4. */
    const uint32_t v[] = {1, 3, 4};
    evict_expect(k, 4, v, 3);
    pb_kvcache_destroy(k);
    pb_kvcache *k2 = six_scored(1, PB_POOL_MAX, w);
    const uint32_t v2[] = {1, 3};
    evict_expect(k2, 5, v2, 2);
    pb_kvcache_destroy(k2);
}

static void zeros_and_negative_zero_tie(void **state) {
    (void)state;
    /* -0.0 is an accepted weight and scores +0, tying with plain 0. */
    const float w[] = {1.0f, -0.0f, 0.0f, 1.0f, -0.0f, 1.0f};
    pb_kvcache *k = six_scored(1, PB_POOL_MAX, w);
    const double s = score_of(k, 1);
    assert_true(s == 0.0 && !signbit(s));
    const uint32_t v[] = {1, 2};
    evict_expect(k, 5, v, 2);
    pb_kvcache_destroy(k);
}

static void nothing_to_do_when_within_target(void **state) {
    (void)state;
    /* Budget 10 (share 10): 7 held. */
    const pb_kvcache_pyramidkv_params p = params_of(10, 0, 1, 4, 1, 8, 1);
    pb_kvcache *k = make(&p, NULL);
    feed_worked_steps(k);
    size_t n = 99;
    assert_int_equal(pb_kvcache_evict(k, 7, NULL, 0, &n), PB_OK);
    assert_int_equal(n, 0);
    n = 99;
    assert_int_equal(pb_kvcache_evict(k, UINT32_MAX, NULL, 0, &n), PB_OK);
    assert_int_equal(n, 0);
    assert_int_equal(pb_kvcache_kept_count(k), 7);
    /* The share binds a large ask: budget 6 holds at most its share. */
    const pb_kvcache_pyramidkv_params q = params_of(6, 0, 1, 4, 1, 8, 1);
    pb_kvcache *k6 = make(&q, NULL);
    feed_worked_steps(k6);
    const uint32_t v[] = {5};
    evict_expect(k6, UINT32_MAX, v, 1);
    pb_kvcache_destroy(k6);
    pb_kvcache_destroy(k);
}

PB_TEST_MAIN(cmocka_unit_test(worked_window_scores),
             cmocka_unit_test(worked_single_layer_drops_5),
             cmocka_unit_test(worked_share_tighter_than_ask),
             cmocka_unit_test(worked_ask_binds_shallow_layer),
             cmocka_unit_test(worked_recent_floor),
             cmocka_unit_test(window_ageing),
             cmocka_unit_test(window_score_is_slot_order_double_sum),
             cmocka_unit_test(null_steps_admit_without_ageing),
             cmocka_unit_test(pooling_changes_the_victim),
             cmocka_unit_test(protected_newest_take_part_in_pooling),
             cmocka_unit_test(average_pooling_counts_padding),
             cmocka_unit_test(recent_window_outranks_score),
             cmocka_unit_test(ties_evict_the_lower_position),
             cmocka_unit_test(zeros_and_negative_zero_tie),
             cmocka_unit_test(nothing_to_do_when_within_target))
