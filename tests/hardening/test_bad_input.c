/*
 * test_bad_input.c - the bad-input matrix of a native instance at work:
 * one cmocka test per row for pb_kvcache_observe, pb_kvcache_evict,
 * pb_kvcache_reset and the introspection functions. The other rows of the
 * matrix are in test_bad_input_create.c (version, status, create, size,
 * destroy), test_bad_input_schedules.c (the schedules and the head
 * reduction), test_bad_input_vtable.c (the compatible vtables),
 * test_bad_input_scorers.c (the rows again for every scorer),
 * test_bad_input_prefill.c and test_bad_input_profile.c.
 *
 * A row passes one bad (or boundary) argument and asserts the documented
 * status or return value AND, where there is an instance, that its full
 * observable state (held positions, every window score, effective share,
 * held count, capacity, memory bytes; see hardening_state.h) is identical
 * before and after. Output buffers a refused call must not write are
 * filled with a canary and checked. The row names are the first column of
 * the table in docs/robustness.md.
 */
#include "bad_input_fixture.h"

/* ------------------------------------------------------------------------ */
/* pb_kvcache_observe                                                       */

static void observe_policy_null(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_observe(NULL, 100u, weights(f, 7u), 7u),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_observe(NULL, 100u, NULL, 0u), PB_ERR_NULL);
    HS_ASSERT_UNCHANGED(f);
}

static void observe_position_equal_last(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_observe(f->p, last_held(f), weights(f, 7u), 7u),
                     PB_ERR_POSITION);
    HS_ASSERT_UNCHANGED(f);
}

static void observe_position_below_last(void **state) {
    fx *f = *state;
    assert_int_equal(
        pb_kvcache_observe(f->p, last_held(f) - 1u, weights(f, 7u), 7u),
        PB_ERR_POSITION);
    HS_ASSERT_UNCHANGED(f);
}

static void observe_position_zero(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_observe(f->p, 0u, weights(f, 7u), 7u),
                     PB_ERR_POSITION);
    HS_ASSERT_UNCHANGED(f);
}

static void observe_position_repeats_held(void **state) {
    fx *f = *state;
    assert_int_equal(
        pb_kvcache_observe(f->p, f->before.pos[2], weights(f, 7u), 7u),
        PB_ERR_POSITION);
    HS_ASSERT_UNCHANGED(f);
}

static void observe_position_repeats_evicted(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_observe(f->p, f->evicted, weights(f, 7u), 7u),
                     PB_ERR_POSITION);
    assert_int_equal(pb_kvcache_observe(f->p, f->evicted, NULL, 0u),
                     PB_ERR_POSITION);
    HS_ASSERT_UNCHANGED(f);
}

static void observe_position_uint32_max(void **state) {
    fx *f = *state;
    /* UINT32_MAX is valid once; nothing can follow it. */
    assert_int_equal(pb_kvcache_observe(f->p, UINT32_MAX, weights(f, 7u), 7u),
                     PB_OK);
    assert_int_equal(pb_kvcache_kept_count(f->p), 8u);
    set_before(f);
    assert_int_equal(pb_kvcache_observe(f->p, UINT32_MAX, weights(f, 8u), 8u),
                     PB_ERR_POSITION);
    assert_int_equal(pb_kvcache_observe(f->p, UINT32_MAX, NULL, 0u),
                     PB_ERR_POSITION);
    HS_ASSERT_UNCHANGED(f);
}

static void observe_length_one_short(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_observe(f->p, 100u, weights(f, 7u), 6u),
                     PB_ERR_LENGTH);
    HS_ASSERT_UNCHANGED(f);
}

static void observe_length_one_long(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_observe(f->p, 100u, weights(f, 8u), 8u),
                     PB_ERR_LENGTH);
    HS_ASSERT_UNCHANGED(f);
}

static void observe_length_zero(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_observe(f->p, 100u, weights(f, 1u), 0u),
                     PB_ERR_LENGTH);
    HS_ASSERT_UNCHANGED(f);
}

static void observe_length_size_max(void **state) {
    fx *f = *state;
    /* Must be refused before a single weight is read. */
    assert_int_equal(pb_kvcache_observe(f->p, 100u, weights(f, 7u), SIZE_MAX),
                     PB_ERR_LENGTH);
    HS_ASSERT_UNCHANGED(f);
}

static void expect_weight_refused(fx *f, size_t at, float bad) {
    float *w = weights(f, 7u);
    w[at] = bad;
    assert_int_equal(pb_kvcache_observe(f->p, 100u, w, 7u), PB_ERR_WEIGHT);
    HS_ASSERT_UNCHANGED(f);
}

static float float_bits(uint32_t bits) {
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

static void observe_weight_nan(void **state) {
    expect_weight_refused(*state, 3u, NAN);
    expect_weight_refused(*state, 0u, -NAN);
    expect_weight_refused(*state, 6u, float_bits(0x7f800001u)); /* sNaN */
}

static void observe_weight_plus_inf(void **state) {
    expect_weight_refused(*state, 6u, INFINITY);
}

static void observe_weight_minus_inf(void **state) {
    expect_weight_refused(*state, 0u, -INFINITY);
}

static void observe_weight_negative(void **state) {
    expect_weight_refused(*state, 2u, -1.0f);
    expect_weight_refused(*state, 2u, -FLT_MAX);
}

static void observe_weight_negative_denormal(void **state) {
    expect_weight_refused(*state, 5u, -FLT_TRUE_MIN);
}

static void observe_weight_edges_accepted(void **state) {
    fx *f = *state;
    float *w = weights(f, 7u);
    w[0] = -0.0f;
    w[1] = FLT_TRUE_MIN;
    w[2] = FLT_MAX;
    w[3] = FLT_MAX;
    w[4] = 0.0f;
    assert_int_equal(pb_kvcache_observe(f->p, 100u, w, 7u), PB_OK);
    double s = -1.0;
    assert_int_equal(pb_kvcache_window_score(f->p, 100u, &s), PB_OK);
    assert_true(s == 0.0);
}

static void observe_full(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_kept_count(f->p), 12u);
    assert_int_equal(pb_kvcache_observe(f->p, 1000u, weights(f, 12u), 12u),
                     PB_ERR_FULL);
    assert_int_equal(pb_kvcache_observe(f->p, 1000u, NULL, 0u), PB_ERR_FULL);
    HS_ASSERT_UNCHANGED(f);
}

static void observe_first_error_position_over_length(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_observe(f->p, 0u, weights(f, 3u), 3u),
                     PB_ERR_POSITION);
    HS_ASSERT_UNCHANGED(f);
}

static void observe_first_error_length_over_weight(void **state) {
    fx *f = *state;
    float *w = weights(f, 8u);
    w[0] = NAN;
    assert_int_equal(pb_kvcache_observe(f->p, 100u, w, 8u), PB_ERR_LENGTH);
    HS_ASSERT_UNCHANGED(f);
}

static void observe_first_error_weight_over_full(void **state) {
    fx *f = *state;
    float *w = weights(f, 12u);
    w[11] = -1.0f;
    assert_int_equal(pb_kvcache_observe(f->p, 1000u, w, 12u), PB_ERR_WEIGHT);
    HS_ASSERT_UNCHANGED(f);
}

static void observe_first_error_length_over_full(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_observe(f->p, 1000u, weights(f, 11u), 11u),
                     PB_ERR_LENGTH);
    HS_ASSERT_UNCHANGED(f);
}

static void observe_attn_null_ignores_length(void **state) {
    fx *f = *state;
    /* Admits the position, observes nothing: every score unchanged. */
    assert_int_equal(pb_kvcache_observe(f->p, 100u, NULL, SIZE_MAX), PB_OK);
    hs_state after;
    capture(f, &after);
    assert_int_equal(after.kept, 8u);
    assert_int_equal(after.pos[7], 100u);
    assert_true(after.score[7] == 0.0);
    assert_memory_equal(after.pos, f->before.pos, 7u * sizeof after.pos[0]);
    assert_memory_equal(after.score, f->before.score,
                        7u * sizeof after.score[0]);
}

/* ------------------------------------------------------------------------ */
/* pb_kvcache_evict                                                         */

static void evict_policy_null(void **state) {
    fx *f = *state;
    size_t n = 9;
    assert_int_equal(pb_kvcache_evict(NULL, 3u, f->buf, 64u, &n), PB_ERR_NULL);
    HS_ASSERT_UNCHANGED(f);
}

static void evict_n_victims_null(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_evict(f->p, 3u, f->buf, 64u, NULL),
                     PB_ERR_NULL);
    HS_ASSERT_UNCHANGED(f);
}

static void evict_victims_null_with_capacity(void **state) {
    fx *f = *state;
    size_t n = 9;
    assert_int_equal(pb_kvcache_evict(f->p, 3u, NULL, 64u, &n), PB_ERR_NULL);
    assert_int_equal(pb_kvcache_evict(f->p, 100u, NULL, 1u, &n), PB_ERR_NULL);
    HS_ASSERT_UNCHANGED(f);
}

static void evict_victims_capacity_zero(void **state) {
    fx *f = *state;
    size_t n = 0;
    for (size_t i = 0; i < 64u; ++i) f->buf[i] = CANARY;
    assert_int_equal(pb_kvcache_evict(f->p, 3u, f->buf, 0u, &n),
                     PB_ERR_BUFFER);
    assert_int_equal(n, EVICT_NEEDS);
    assert_int_equal(f->buf[0], CANARY);
    n = 0;
    assert_int_equal(pb_kvcache_evict(f->p, 3u, NULL, 0u, &n), PB_ERR_BUFFER);
    assert_int_equal(n, EVICT_NEEDS);
    HS_ASSERT_UNCHANGED(f);
}

static void evict_victims_one_short(void **state) {
    fx *f = *state;
    size_t n = 0;
    assert_int_equal(pb_kvcache_evict(f->p, 3u, f->buf, EVICT_NEEDS - 1u, &n),
                     PB_ERR_BUFFER);
    assert_int_equal(n, EVICT_NEEDS);
    HS_ASSERT_UNCHANGED(f);
}

static void evict_budget_uint32_max(void **state) {
    fx *f = *state;
    size_t n = 9;
    /* The target is the share (8) and 7 are held: nothing to drop. */
    assert_int_equal(pb_kvcache_evict(f->p, UINT32_MAX, NULL, 0u, &n), PB_OK);
    assert_int_equal(n, 0u);
    HS_ASSERT_UNCHANGED(f);
}

static void evict_nothing_needed(void **state) {
    fx *f = *state;
    size_t n = 9;
    assert_int_equal(pb_kvcache_evict(f->p, 7u, f->buf, 64u, &n), PB_OK);
    assert_int_equal(n, 0u);
    HS_ASSERT_UNCHANGED(f);
}

static void evict_budget_zero(void **state) {
    fx *f = *state;
    size_t n = 0;
    for (size_t i = 0; i < 64u; ++i) f->buf[i] = CANARY;
    assert_int_equal(pb_kvcache_evict(f->p, 0u, f->buf, 64u, &n), PB_OK);
    /* Everything but the two protected newest positions goes, ascending. */
    assert_int_equal(n, 5u);
    assert_memory_equal(f->buf, f->before.pos, 5u * sizeof f->buf[0]);
    assert_int_equal(f->buf[5], CANARY);
    hs_state after;
    capture(f, &after);
    assert_int_equal(after.kept, 2u);
    assert_int_equal(after.pos[0], f->before.pos[5]);
    assert_int_equal(after.pos[1], f->before.pos[6]);
    assert_true(memcmp(&after.score[0], &f->before.score[5],
                       2u * sizeof after.score[0]) == 0);
}

static void evict_victims_exact_capacity(void **state) {
    fx *f = *state;
    size_t n = 0;
    assert_int_equal(pb_kvcache_evict(f->p, 3u, f->buf, EVICT_NEEDS, &n),
                     PB_OK);
    assert_int_equal(n, EVICT_NEEDS);
    for (size_t i = 1; i < n; ++i) assert_true(f->buf[i - 1] < f->buf[i]);
    assert_int_equal(pb_kvcache_kept_count(f->p), 3u);
}

/* With recent_window 0, budget 0 empties the instance; then any position,
 * 0 included, is above every held one (a fuzz finding against the engine
 * in progress, kept as corpus/native_api/regress-observe-0-*). */
static void evict_to_empty_then_observe_zero(void **state) {
    (void)state;
    const pb_kvcache_pyramidkv_params p = {4u, 0u, 1u, 1u, 0u, 2u, 1u};
    pb_kvcache *k = NULL;
    assert_int_equal(pb_kvcache_pyramidkv_create(&p, NULL, NULL, &k), PB_OK);
    const float w[1] = {0.5f};
    assert_int_equal(pb_kvcache_observe(k, 5u, w, 1u), PB_OK);
    uint32_t victims[2];
    size_t n = 0;
    assert_int_equal(pb_kvcache_evict(k, 0u, victims, 2u, &n), PB_OK);
    assert_int_equal(n, 2u);
    assert_int_equal(pb_kvcache_kept_count(k), 0u);
    assert_int_equal(pb_kvcache_observe(k, 0u, w, 1u), PB_ERR_LENGTH);
    assert_int_equal(pb_kvcache_observe(k, 0u, w, 0u), PB_OK);
    assert_int_equal(pb_kvcache_kept_count(k), 1u);
    assert_int_equal(pb_kvcache_observe(k, 0u, NULL, 0u), PB_ERR_POSITION);
    pb_kvcache_destroy(k);
}

/* ------------------------------------------------------------------------ */
/* pb_kvcache_reset and use after reset                                     */

static void reset_policy_null(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_reset(NULL), PB_ERR_NULL);
    HS_ASSERT_UNCHANGED(f);
}

static void reset_restores_created_state(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_reset(f->p), PB_OK);
    hs_state after;
    capture(f, &after);
    assert_int_equal(after.kept, 1u);
    assert_int_equal(after.pos[0], 0u);
    assert_true(after.score[0] == 0.0);
    assert_int_equal(after.capacity, f->before.capacity);
    assert_int_equal(after.memory, f->before.memory);
    assert_int_equal(after.effective, f->before.effective);
    /* Exactly a fresh instance's state, and reset is idempotent. */
    pb_kvcache *fresh = NULL;
    assert_int_equal(pb_kvcache_pyramidkv_create(&WARM_PARAMS, &WARM_OPTIONS,
                                                 NULL, &fresh),
                     PB_OK);
    hs_state created;
    assert_int_equal(hs_capture(fresh, &created), 0);
    assert_true(hs_equal(&after, &created));
    assert_int_equal(pb_kvcache_reset(f->p), PB_OK);
    capture(f, &after);
    assert_true(hs_equal(&after, &created));
    pb_kvcache_destroy(fresh);
}

static void after_reset_old_length(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_reset(f->p), PB_OK);
    set_before(f);
    assert_int_equal(pb_kvcache_observe(f->p, 100u, weights(f, 7u), 7u),
                     PB_ERR_LENGTH);
    HS_ASSERT_UNCHANGED(f);
}

static void after_reset_position_zero(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_reset(f->p), PB_OK);
    set_before(f);
    assert_int_equal(pb_kvcache_observe(f->p, 0u, weights(f, 1u), 1u),
                     PB_ERR_POSITION);
    HS_ASSERT_UNCHANGED(f);
}

static void after_reset_old_position_not_held(void **state) {
    fx *f = *state;
    const uint32_t old = last_held(f);
    assert_int_equal(pb_kvcache_reset(f->p), PB_OK);
    set_before(f);
    double s = 5.0;
    assert_int_equal(pb_kvcache_window_score(f->p, old, &s), PB_ERR_NOT_HELD);
    HS_ASSERT_UNCHANGED(f);
}

static void after_reset_evict_nothing(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_reset(f->p), PB_OK);
    set_before(f);
    size_t n = 9;
    assert_int_equal(pb_kvcache_evict(f->p, 0u, f->buf, 64u, &n), PB_OK);
    /* One position held, recent_window 2 protects it. */
    assert_int_equal(n, 0u);
    HS_ASSERT_UNCHANGED(f);
}

static void after_reset_old_positions_admissible(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_reset(f->p), PB_OK);
    assert_int_equal(pb_kvcache_observe(f->p, 1u, weights(f, 1u), 1u), PB_OK);
    assert_int_equal(pb_kvcache_kept_count(f->p), 2u);
}

/* ------------------------------------------------------------------------ */
/* Introspection                                                            */

static void effective_budget_null(void **state) {
    (void)state;
    assert_int_equal(pb_kvcache_effective_budget(NULL), 0u);
}

static void kept_count_null(void **state) {
    (void)state;
    assert_int_equal(pb_kvcache_kept_count(NULL), 0u);
}

static void capacity_null(void **state) {
    (void)state;
    assert_int_equal(pb_kvcache_capacity(NULL), 0u);
}

static void memory_bytes_null(void **state) {
    (void)state;
    assert_int_equal(pb_kvcache_memory_bytes(NULL), 0u);
}

static void introspection_values(void **state) {
    fx *f = *state;
    assert_int_equal(f->before.effective, 8u);
    assert_int_equal(f->before.capacity, 12u);
    assert_int_equal(f->before.memory, f->ca.outstanding);
    size_t bytes = 0;
    assert_int_equal(
        pb_kvcache_pyramidkv_size(&WARM_PARAMS, &WARM_OPTIONS, &bytes), PB_OK);
    assert_int_equal(f->before.memory, bytes);
}

static void kept_positions_policy_null(void **state) {
    fx *f = *state;
    size_t n = 9;
    assert_int_equal(pb_kvcache_kept_positions(NULL, f->buf, 64u, &n),
                     PB_ERR_NULL);
    HS_ASSERT_UNCHANGED(f);
}

static void kept_positions_out_null(void **state) {
    fx *f = *state;
    size_t n = 9;
    assert_int_equal(pb_kvcache_kept_positions(f->p, NULL, 64u, &n),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_kept_positions(f->p, NULL, 0u, &n),
                     PB_ERR_NULL);
    HS_ASSERT_UNCHANGED(f);
}

static void kept_positions_n_null(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_kept_positions(f->p, f->buf, 64u, NULL),
                     PB_ERR_NULL);
    HS_ASSERT_UNCHANGED(f);
}

static void kept_positions_one_short(void **state) {
    fx *f = *state;
    size_t n = 0;
    for (size_t i = 0; i < 64u; ++i) f->buf[i] = CANARY;
    assert_int_equal(pb_kvcache_kept_positions(f->p, f->buf, 6u, &n),
                     PB_ERR_BUFFER);
    assert_int_equal(n, 7u);
    for (size_t i = 0; i < 64u; ++i) assert_int_equal(f->buf[i], CANARY);
    HS_ASSERT_UNCHANGED(f);
}

static void kept_positions_capacity_zero(void **state) {
    fx *f = *state;
    size_t n = 0;
    f->buf[0] = CANARY;
    assert_int_equal(pb_kvcache_kept_positions(f->p, f->buf, 0u, &n),
                     PB_ERR_BUFFER);
    assert_int_equal(n, 7u);
    assert_int_equal(f->buf[0], CANARY);
    HS_ASSERT_UNCHANGED(f);
}

static void kept_positions_one_long(void **state) {
    fx *f = *state;
    size_t n = 0;
    for (size_t i = 0; i < 64u; ++i) f->buf[i] = CANARY;
    assert_int_equal(pb_kvcache_kept_positions(f->p, f->buf, 8u, &n), PB_OK);
    assert_int_equal(n, 7u);
    assert_memory_equal(f->buf, f->before.pos, 7u * sizeof f->buf[0]);
    assert_int_equal(f->buf[7], CANARY);
    HS_ASSERT_UNCHANGED(f);
}

static void window_score_policy_null(void **state) {
    fx *f = *state;
    double s = 0.0;
    assert_int_equal(pb_kvcache_window_score(NULL, 0u, &s), PB_ERR_NULL);
    HS_ASSERT_UNCHANGED(f);
}

static void window_score_score_null(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_window_score(f->p, last_held(f), NULL),
                     PB_ERR_NULL);
    HS_ASSERT_UNCHANGED(f);
}

static void window_score_not_held(void **state) {
    fx *f = *state;
    double s = 0.0;
    const uint32_t never[] = {f->evicted, 10u, 11u, last_held(f) + 1u,
                              UINT32_MAX};
    for (size_t i = 0; i < sizeof never / sizeof never[0]; ++i)
        assert_int_equal(pb_kvcache_window_score(f->p, never[i], &s),
                         PB_ERR_NOT_HELD);
    HS_ASSERT_UNCHANGED(f);
}

#define ROW(fn) cmocka_unit_test(fn)
#define WARM(fn) cmocka_unit_test_setup_teardown(fn, fx_warm, fx_done)
#define FULL(fn) cmocka_unit_test_setup_teardown(fn, fx_full, fx_done)

int main(void) {
    const struct CMUnitTest tests[] = {
        WARM(observe_policy_null),
        WARM(observe_position_equal_last),
        WARM(observe_position_below_last),
        WARM(observe_position_zero),
        WARM(observe_position_repeats_held),
        WARM(observe_position_repeats_evicted),
        WARM(observe_position_uint32_max),
        WARM(observe_length_one_short),
        WARM(observe_length_one_long),
        WARM(observe_length_zero),
        WARM(observe_length_size_max),
        WARM(observe_weight_nan),
        WARM(observe_weight_plus_inf),
        WARM(observe_weight_minus_inf),
        WARM(observe_weight_negative),
        WARM(observe_weight_negative_denormal),
        WARM(observe_weight_edges_accepted),
        FULL(observe_full),
        WARM(observe_first_error_position_over_length),
        WARM(observe_first_error_length_over_weight),
        FULL(observe_first_error_weight_over_full),
        FULL(observe_first_error_length_over_full),
        WARM(observe_attn_null_ignores_length),

        WARM(evict_policy_null),
        WARM(evict_n_victims_null),
        WARM(evict_victims_null_with_capacity),
        WARM(evict_victims_capacity_zero),
        WARM(evict_victims_one_short),
        WARM(evict_budget_uint32_max),
        WARM(evict_nothing_needed),
        WARM(evict_budget_zero),
        WARM(evict_victims_exact_capacity),
        ROW(evict_to_empty_then_observe_zero),

        WARM(reset_policy_null),
        WARM(reset_restores_created_state),
        WARM(after_reset_old_length),
        WARM(after_reset_position_zero),
        WARM(after_reset_old_position_not_held),
        WARM(after_reset_evict_nothing),
        WARM(after_reset_old_positions_admissible),

        ROW(effective_budget_null),
        ROW(kept_count_null),
        ROW(capacity_null),
        ROW(memory_bytes_null),
        WARM(introspection_values),
        WARM(kept_positions_policy_null),
        WARM(kept_positions_out_null),
        WARM(kept_positions_n_null),
        WARM(kept_positions_one_short),
        WARM(kept_positions_capacity_zero),
        WARM(kept_positions_one_long),
        WARM(window_score_policy_null),
        WARM(window_score_score_null),
        WARM(window_score_not_held),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
