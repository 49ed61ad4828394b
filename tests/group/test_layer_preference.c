/*
 * test_layer_preference.c - CAKE's layer preference, its weights and the
 * `cake` schedule kind, and per-head shares from a per-head profile, on the
 * hand-derived cases of docs/spec.md §17.4; plus their refusals (nothing
 * written on error).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "pyramidkv/pyramidkv.h"

static void cake_preference_by_hand(void **state) {
    (void)state;
    /* One head, window of 2 rows over 3 positions: prefix column 0 gets
     * 0.5 and 0.25. */
    const float a[6] = {0.5f, 0.25f, 0.25f, 0.25f, 0.25f, 0.5f};
    double h = 0, v = 0, p = 0;
    assert_int_equal(pb_cake_layer_preference(a, 1, 0, 2, 3, 1.0, 1.0, &h, &v,
                                              &p),
                     PB_OK);
    const double want_h = -(0.5 * log(0.5 + 1e-10) + 0.25 * log(0.25 + 1e-10));
    assert_true(fabs(h - want_h) < 1e-15);
    assert_true(fabs(h - 0.6931471805) < 1e-9);
    assert_true(v == 0.03125);
    assert_true(fabs(p - want_h * 0.03125) < 1e-15);
    /* tau1 = 2, tau2 = 0.5: sqrt(H) * V^2. */
    assert_int_equal(pb_cake_layer_preference(a, 1, 0, 2, 3, 2.0, 0.5, NULL,
                                              NULL, &p),
                     PB_OK);
    assert_true(fabs(p - sqrt(want_h) * 0.03125 * 0.03125) < 1e-15);
    /* Two heads sum; one row has no variance; no prefix gives 0. */
    float two[12];
    memcpy(two, a, sizeof a);
    memcpy(two + 6, a, sizeof a);
    assert_int_equal(pb_cake_layer_preference(two, 2, 6, 2, 3, 1.0, 1.0, &h,
                                              &v, &p),
                     PB_OK);
    assert_true(fabs(h - 2.0 * want_h) < 1e-15 && v == 0.0625);
    assert_int_equal(pb_cake_layer_preference(a, 1, 0, 1, 3, 1.0, 1.0, &h, &v,
                                              &p),
                     PB_OK);
    assert_true(v == 0.0 && p == 0.0);
    assert_int_equal(pb_cake_layer_preference(a, 1, 0, 2, 2, 1.0, 1.0, &h, &v,
                                              &p),
                     PB_OK);
    assert_true(h == 0.0 && v == 0.0 && p == 0.0);
}

static void cake_preference_refusals(void **state) {
    (void)state;
    const float a[6] = {0.5f, 0.25f, 0.25f, 0.25f, 0.25f, 0.5f};
    float bad[6];
    memcpy(bad, a, sizeof a);
    bad[5] = NAN; /* outside the prefix: still checked */
    double p = 7.0;
    assert_int_equal(pb_cake_layer_preference(NULL, 1, 0, 2, 3, 1, 1, NULL,
                                              NULL, &p),
                     PB_ERR_NULL);
    assert_int_equal(pb_cake_layer_preference(a, 1, 0, 2, 3, 1, 1, NULL, NULL,
                                              NULL),
                     PB_ERR_NULL);
    assert_int_equal(pb_cake_layer_preference(a, 1, 0, 4, 3, 1, 1, NULL, NULL,
                                              &p),
                     PB_ERR_PARAM);
    assert_int_equal(pb_cake_layer_preference(a, 2, 5, 2, 3, 1, 1, NULL, NULL,
                                              &p),
                     PB_ERR_PARAM);
    assert_int_equal(pb_cake_layer_preference(a, 1, 0, 2, 3, 0.0, 1, NULL,
                                              NULL, &p),
                     PB_ERR_PARAM);
    assert_int_equal(pb_cake_layer_preference(a, 1, 0, 2, 3, 1, INFINITY,
                                              NULL, NULL, &p),
                     PB_ERR_PARAM);
    assert_int_equal(pb_cake_layer_preference(bad, 1, 0, 2, 3, 1, 1, NULL,
                                              NULL, &p),
                     PB_ERR_WEIGHT);
    assert_true(p == 7.0);
}

static void cake_weights_and_kind(void **state) {
    (void)state;
    const double pref[3] = {0.5, 0.25, 0.25};
    uint32_t w[3] = {9, 9, 9};
    assert_int_equal(pb_cake_weights(pref, 3, w, 3), PB_OK);
    assert_int_equal(w[0], 16777216u);
    assert_int_equal(w[1], 8388608u);
    assert_int_equal(w[2], 8388608u);
    const double zero[2] = {0.0, 0.0}, neg[2] = {1.0, -1.0};
    uint32_t keep[2] = {5, 5};
    assert_int_equal(pb_cake_weights(zero, 2, keep, 2), PB_ERR_PARAM);
    assert_int_equal(pb_cake_weights(neg, 2, keep, 2), PB_ERR_PARAM);
    assert_int_equal(pb_cake_weights(pref, 3, keep, 2), PB_ERR_BUFFER);
    assert_int_equal(pb_cake_weights(pref, 0, keep, 2), PB_ERR_PARAM);
    assert_int_equal(keep[0], 5u);

    /* L 3, B 10, window 2: 24 prefix units by 2:1:1. */
    pb_schedule s = PB_SCHEDULE_DEFAULT;
    s.kind = PB_SCHEDULE_CAKE;
    s.num_layers = 3;
    s.budget = 10;
    s.window = 2;
    s.weights = w;
    uint32_t sh[3];
    uint64_t total = 0;
    assert_int_equal(pb_kvcache_schedule_shares(&s, sh, 3, &total), PB_OK);
    assert_int_equal(sh[0], 14u);
    assert_int_equal(sh[1], 8u);
    assert_int_equal(sh[2], 8u);
    assert_int_equal(total, 30u);
    const uint32_t w2[3] = {3, 1, 0};
    s.weights = w2;
    assert_int_equal(pb_kvcache_schedule_shares(&s, sh, 3, &total), PB_OK);
    assert_int_equal(sh[0], 20u);
    assert_int_equal(sh[1], 8u);
    assert_int_equal(sh[2], 2u);
    assert_int_equal(total, 30u);
    /* A prompt no longer than the budget is kept whole everywhere. */
    s.prompt_len = 9;
    assert_int_equal(pb_kvcache_schedule_shares(&s, sh, 3, &total), PB_OK);
    assert_int_equal(sh[2], 9u);
    assert_int_equal(total, 27u);
    s.prompt_len = 11;
    assert_int_equal(pb_kvcache_schedule_shares(&s, sh, 3, &total), PB_OK);
    assert_int_equal(sh[0], 20u);
    /* Refusals: window >= budget, weights NULL, all zero. */
    s.window = 10;
    assert_int_equal(pb_kvcache_schedule_shares(&s, sh, 3, &total),
                     PB_ERR_PARAM);
    s.window = 2;
    s.weights = NULL;
    assert_int_equal(pb_kvcache_schedule_shares(&s, sh, 3, &total),
                     PB_ERR_NULL);
    const uint32_t z[3] = {0, 0, 0};
    s.weights = z;
    assert_int_equal(pb_kvcache_schedule_shares(&s, sh, 3, &total),
                     PB_ERR_PARAM);
    assert_string_equal(pb_schedule_kind_name(PB_SCHEDULE_CAKE), "cake");
    uint32_t kind = 0;
    assert_int_equal(pb_schedule_kind_from_name("cake", &kind), PB_OK);
    assert_int_equal(kind, PB_SCHEDULE_CAKE);
}

static void head_shares_by_hand(void **state) {
    (void)state;
    /* One layer of two heads: head 0 one-hot (k 1), head 1 uniform over 8
     * (90 % needs k 8). */
    pb_profile_params pp = PB_PROFILE_PARAMS_DEFAULT;
    pp.num_layers = 2;
    pp.max_len = 8;
    pb_profile *prof = NULL;
    assert_int_equal(pb_profile_create(&pp, NULL, &prof), PB_OK);
    const float onehot[8] = {1, 0, 0, 0, 0, 0, 0, 0};
    const float flat[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    assert_int_equal(pb_profile_add_row(prof, 0, onehot, 8), PB_OK);
    assert_int_equal(pb_profile_add_row(prof, 1, flat, 8), PB_OK);
    uint32_t sh[2] = {0, 0};
    /* share 10, floor 2: 16 units by 1:8 -> 1 (rem 7/9) and 14 (rem 2/9),
     * the one unit left to head 0. */
    assert_int_equal(pb_profile_head_shares(prof, 0, 2, 10, 2, 900000, sh, 2),
                     PB_OK);
    assert_int_equal(sh[0], 4u);
    assert_int_equal(sh[1], 16u);
    uint32_t keep[2] = {5, 5};
    assert_int_equal(pb_profile_head_shares(prof, 1, 2, 10, 2, 900000, keep,
                                            2),
                     PB_ERR_PARAM); /* layers 2, 3 do not exist */
    assert_int_equal(pb_profile_head_shares(prof, 0, 2, 10, 11, 900000, keep,
                                            2),
                     PB_ERR_PARAM);
    assert_int_equal(pb_profile_head_shares(prof, 0, 2, 10, 2, 0, keep, 2),
                     PB_ERR_PARAM);
    assert_int_equal(pb_profile_head_shares(prof, 0, 2, 10, 2, 900000, keep,
                                            1),
                     PB_ERR_BUFFER);
    assert_int_equal(pb_profile_head_shares(prof, 0, 2, UINT32_MAX - 1u, 0,
                                            900000, keep, 2),
                     PB_ERR_TOO_LARGE);
    assert_int_equal(pb_profile_head_shares(NULL, 0, 2, 10, 2, 900000, keep,
                                            2),
                     PB_ERR_NULL);
    assert_int_equal(keep[0], 5u);
    pb_profile_destroy(prof);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cake_preference_by_hand),
        cmocka_unit_test(cake_preference_refusals),
        cmocka_unit_test(cake_weights_and_kind),
        cmocka_unit_test(head_shares_by_hand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
