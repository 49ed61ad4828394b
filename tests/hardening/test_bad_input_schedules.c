/*
 * test_bad_input_schedules.c - the bad-input matrix (test_bad_input.c) for
 * the pure functions: pb_kvcache_pyramid_budget, _budgets, _total,
 * pb_kvcache_schedule_shares and the kind names, and
 * pb_kvcache_head_reduce. With no instance, "unchanged" is an output left
 * untouched (canaries past the written part).
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
/* pb_kvcache_pyramid_budget, _budgets, _total                              */

static void budget_num_layers_zero(void **state) {
    (void)state;
    assert_int_equal(pb_kvcache_pyramid_budget(512u, 0u, 0u, 4u), 0u);
}

static void budget_layer_at_num_layers(void **state) {
    (void)state;
    assert_int_equal(pb_kvcache_pyramid_budget(512u, 32u, 32u, 4u), 0u);
    assert_int_equal(pb_kvcache_pyramid_budget(512u, UINT32_MAX, 32u, 4u), 0u);
}

static void budget_ratio_zero(void **state) {
    (void)state;
    assert_int_equal(pb_kvcache_pyramid_budget(512u, 0u, 32u, 0u), 0u);
}

static void budget_budget_zero(void **state) {
    (void)state;
    assert_int_equal(pb_kvcache_pyramid_budget(0u, 0u, 32u, 4u), 0u);
}

static void budget_uint32_max_saturates(void **state) {
    (void)state;
    assert_int_equal(pb_kvcache_pyramid_budget(UINT32_MAX, 0u, 2u, UINT32_MAX),
                     UINT32_MAX);
    assert_int_equal(pb_kvcache_pyramid_budget(UINT32_MAX, 0u, 1u, 1u),
                     UINT32_MAX);
}

static void budgets_shares_null(void **state) {
    (void)state;
    assert_int_equal(pb_kvcache_pyramid_budgets(512u, 4u, 4u, NULL, 4u),
                     PB_ERR_NULL);
}

static void budgets_num_layers_zero(void **state) {
    (void)state;
    uint32_t shares[4] = {CANARY, CANARY, CANARY, CANARY};
    assert_int_equal(pb_kvcache_pyramid_budgets(512u, 0u, 4u, shares, 4u),
                     PB_ERR_PARAM);
    for (size_t i = 0; i < 4u; ++i) assert_int_equal(shares[i], CANARY);
}

static void budgets_ratio_zero(void **state) {
    (void)state;
    uint32_t shares[4] = {CANARY, CANARY, CANARY, CANARY};
    assert_int_equal(pb_kvcache_pyramid_budgets(512u, 4u, 0u, shares, 4u),
                     PB_ERR_PARAM);
    for (size_t i = 0; i < 4u; ++i) assert_int_equal(shares[i], CANARY);
}

static void budgets_buffer_one_short(void **state) {
    (void)state;
    uint32_t shares[4] = {CANARY, CANARY, CANARY, CANARY};
    assert_int_equal(pb_kvcache_pyramid_budgets(512u, 4u, 4u, shares, 3u),
                     PB_ERR_BUFFER);
    for (size_t i = 0; i < 4u; ++i) assert_int_equal(shares[i], CANARY);
}

static void budgets_buffer_zero(void **state) {
    (void)state;
    uint32_t shares[1] = {CANARY};
    assert_int_equal(pb_kvcache_pyramid_budgets(512u, 1u, 4u, shares, 0u),
                     PB_ERR_BUFFER);
    assert_int_equal(shares[0], CANARY);
}

static void budgets_buffer_one_long(void **state) {
    (void)state;
    uint32_t shares[5] = {CANARY, CANARY, CANARY, CANARY, CANARY};
    assert_int_equal(pb_kvcache_pyramid_budgets(512u, 4u, 4u, shares, 5u),
                     PB_OK);
    for (uint32_t k = 0; k < 4u; ++k)
        assert_int_equal(shares[k], pb_kvcache_pyramid_budget(512u, k, 4u, 4u));
    assert_int_equal(shares[4], CANARY);
}

static void budgets_uint32_max_inputs(void **state) {
    (void)state;
    uint32_t shares[3];
    assert_int_equal(pb_kvcache_pyramid_budgets(UINT32_MAX, 3u, UINT32_MAX,
                                                shares, 3u),
                     PB_OK);
    for (uint32_t k = 0; k < 3u; ++k)
        assert_int_equal(shares[k], pb_kvcache_pyramid_budget(
                                        UINT32_MAX, k, 3u, UINT32_MAX));
}

static void total_num_layers_zero(void **state) {
    (void)state;
    assert_true(pb_kvcache_pyramid_total(512u, 0u, 4u) == 0u);
}

static void total_ratio_zero(void **state) {
    (void)state;
    assert_true(pb_kvcache_pyramid_total(512u, 32u, 0u) == 0u);
}

static void total_uint32_max_inputs(void **state) {
    (void)state;
    const uint64_t t = pb_kvcache_pyramid_total(UINT32_MAX, UINT32_MAX,
                                                UINT32_MAX);
    assert_true(t <= (uint64_t)UINT32_MAX * UINT32_MAX);
    assert_true(t > 0u);
    assert_true(pb_kvcache_pyramid_total(0u, UINT32_MAX, UINT32_MAX) == 0u);
}

/* ------------------------------------------------------------------------ */
/* pb_kvcache_head_reduce (pure: "unchanged" is the output left untouched) */

static void expect_reduce(const float *attn, size_t heads, size_t stride,
                          size_t n, uint32_t mode, pb_status want) {
    float out[8];
    for (size_t i = 0; i < 8u; ++i) out[i] = -7.0f;
    assert_true(n <= 8u);
    assert_int_equal(pb_kvcache_head_reduce(attn, heads, stride, n, mode, out),
                     want);
    if (want != PB_OK)
        for (size_t i = 0; i < 8u; ++i) assert_true(out[i] == -7.0f);
}

static const float REDUCE_IN[8] = {0.5f, 0.25f, 0.0f, 1.0f,
                                   0.5f, 0.5f,  2.0f, 0.0f};

static void head_reduce_attn_null(void **state) {
    (void)state;
    expect_reduce(NULL, 2u, 4u, 4u, PB_HEAD_REDUCE_MEAN, PB_ERR_NULL);
    expect_reduce(NULL, 2u, 4u, 0u, PB_HEAD_REDUCE_MEAN, PB_ERR_NULL);
}

static void head_reduce_out_null(void **state) {
    (void)state;
    assert_int_equal(pb_kvcache_head_reduce(REDUCE_IN, 2u, 4u, 4u,
                                            PB_HEAD_REDUCE_MAX, NULL),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_head_reduce(REDUCE_IN, 2u, 4u, 0u,
                                            PB_HEAD_REDUCE_MAX, NULL),
                     PB_ERR_NULL);
}

static void head_reduce_heads_zero(void **state) {
    (void)state;
    expect_reduce(REDUCE_IN, 0u, 4u, 4u, PB_HEAD_REDUCE_SUM, PB_ERR_PARAM);
}

static void head_reduce_mode_unknown(void **state) {
    (void)state;
    expect_reduce(REDUCE_IN, 2u, 4u, 4u, 3u, PB_ERR_PARAM);
    expect_reduce(REDUCE_IN, 2u, 4u, 4u, UINT32_MAX, PB_ERR_PARAM);
}

static void head_reduce_stride_one_short(void **state) {
    (void)state;
    expect_reduce(REDUCE_IN, 2u, 3u, 4u, PB_HEAD_REDUCE_MEAN, PB_ERR_PARAM);
}

static void head_reduce_too_large(void **state) {
    (void)state;
    /* Refused before a single value is read. */
    expect_reduce(REDUCE_IN, SIZE_MAX, 4u, 4u, PB_HEAD_REDUCE_MEAN,
                  PB_ERR_TOO_LARGE);
    expect_reduce(REDUCE_IN, 2u, SIZE_MAX, 4u, PB_HEAD_REDUCE_MEAN,
                  PB_ERR_TOO_LARGE);
}

static void head_reduce_bad_weights(void **state) {
    (void)state;
    const float bad[] = {NAN, INFINITY, -INFINITY, -1.0f, -FLT_TRUE_MIN};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; ++b) {
        float in[8];
        memcpy(in, REDUCE_IN, sizeof in);
        in[7] = bad[b];
        for (uint32_t mode = 0; mode < 3u; ++mode)
            expect_reduce(in, 2u, 4u, 4u, mode, PB_ERR_WEIGHT);
    }
}

static void head_reduce_sum_overflows_float(void **state) {
    (void)state;
    const float in[2] = {FLT_MAX, FLT_MAX};
    expect_reduce(in, 2u, 1u, 1u, PB_HEAD_REDUCE_SUM, PB_ERR_WEIGHT);
    /* The mean of the same values is finite. */
    expect_reduce(in, 2u, 1u, 1u, PB_HEAD_REDUCE_MEAN, PB_OK);
}

/* ------------------------------------------------------------------------ */
/* pb_kvcache_schedule_shares and the kind names                            */

static pb_schedule sched_of(uint32_t kind) {
    pb_schedule s = PB_SCHEDULE_DEFAULT;
    s.kind = kind;
    s.num_layers = 4u;
    s.budget = 64u;
    return s;
}

/* A refused call: the status, no share written (canaries past the layers
 * too), no total written. */
static void expect_schedule(const pb_schedule *s, size_t len, pb_status want) {
    uint32_t shares[6];
    uint64_t total = 0xDEADu;
    for (size_t i = 0; i < 6u; ++i) shares[i] = CANARY;
    assert_int_equal(pb_kvcache_schedule_shares(s, shares, len, &total), want);
    for (size_t i = 0; i < 6u; ++i) assert_int_equal(shares[i], CANARY);
    assert_int_equal(total, 0xDEADu);
}

static void schedule_null(void **state) {
    (void)state;
    expect_schedule(NULL, 4u, PB_ERR_NULL);
}

static void schedule_shares_null(void **state) {
    (void)state;
    const pb_schedule s = sched_of(PB_SCHEDULE_UNIFORM);
    uint64_t total = 0xDEADu;
    assert_int_equal(pb_kvcache_schedule_shares(&s, NULL, 4u, &total),
                     PB_ERR_NULL);
    assert_int_equal(total, 0xDEADu);
}

static void schedule_total_null_is_fine(void **state) {
    (void)state;
    const pb_schedule s = sched_of(PB_SCHEDULE_UNIFORM);
    uint32_t shares[4];
    assert_int_equal(pb_kvcache_schedule_shares(&s, shares, 4u, NULL), PB_OK);
    for (size_t i = 0; i < 4u; ++i) assert_int_equal(shares[i], 64u);
}

static void schedule_struct_size_short(void **state) {
    (void)state;
    pb_schedule s = sched_of(PB_SCHEDULE_UNIFORM);
    s.struct_size = (uint32_t)sizeof(pb_schedule) - 4u;
    expect_schedule(&s, 4u, PB_ERR_PARAM);
    s.struct_size = 0u;
    expect_schedule(&s, 4u, PB_ERR_PARAM);
}

static void schedule_struct_tail_nonzero(void **state) {
    (void)state;
    struct {
        pb_schedule s;
        uint32_t future;
    } newer;
    memset(&newer, 0, sizeof newer);
    newer.s = sched_of(PB_SCHEDULE_UNIFORM);
    newer.s.struct_size = (uint32_t)sizeof newer;
    newer.future = 1u;
    expect_schedule(&newer.s, 4u, PB_ERR_PARAM);
}

static void schedule_kind_unknown(void **state) {
    (void)state;
    pb_schedule s = sched_of(PB_SCHEDULE_CAKE + 1u);
    expect_schedule(&s, 4u, PB_ERR_PARAM);
    s.kind = UINT32_MAX;
    expect_schedule(&s, 4u, PB_ERR_PARAM);
}

static void schedule_num_layers_zero(void **state) {
    (void)state;
    pb_schedule s = sched_of(PB_SCHEDULE_CURVE);
    s.num_layers = 0u;
    expect_schedule(&s, 4u, PB_ERR_PARAM);
}

static void schedule_weights_null(void **state) {
    (void)state;
    const pb_schedule s = sched_of(PB_SCHEDULE_PROFILE);
    expect_schedule(&s, 4u, PB_ERR_NULL);
}

static void schedule_weights_all_zero(void **state) {
    (void)state;
    static const uint32_t zeros[4] = {0u, 0u, 0u, 0u};
    pb_schedule s = sched_of(PB_SCHEDULE_PROFILE);
    s.weights = zeros;
    expect_schedule(&s, 4u, PB_ERR_PARAM);
}

static void schedule_window_not_below_c(void **state) {
    (void)state;
    pb_schedule s = sched_of(PB_SCHEDULE_KVFACTORY);
    s.window = 64u;
    expect_schedule(&s, 4u, PB_ERR_PARAM);
    s.kind = PB_SCHEDULE_KVFACTORY_BALANCED;
    expect_schedule(&s, 4u, PB_ERR_PARAM);
}

static void schedule_beta_zero(void **state) {
    (void)state;
    pb_schedule s = sched_of(PB_SCHEDULE_KVFACTORY);
    s.beta = 0u;
    expect_schedule(&s, 4u, PB_ERR_PARAM);
}

static void schedule_gamma_zero(void **state) {
    (void)state;
    pb_schedule s = sched_of(PB_SCHEDULE_CURVE);
    s.gamma_milli = 0u;
    expect_schedule(&s, 4u, PB_ERR_PARAM);
}

static void schedule_taper_beta_below_one_or_nan(void **state) {
    (void)state;
    pb_schedule s = sched_of(PB_SCHEDULE_TAPER);
    s.taper_beta = 0.5;
    expect_schedule(&s, 4u, PB_ERR_PARAM);
    s.taper_beta = NAN;
    expect_schedule(&s, 4u, PB_ERR_PARAM);
    s.taper_beta = INFINITY;
    expect_schedule(&s, 4u, PB_ERR_PARAM);
}

static void schedule_ratio_zero(void **state) {
    (void)state;
    pb_schedule s = sched_of(PB_SCHEDULE_GEOMETRIC);
    s.ratio = 0u;
    expect_schedule(&s, 4u, PB_ERR_PARAM);
}

static void schedule_buffer_one_short(void **state) {
    (void)state;
    const pb_schedule s = sched_of(PB_SCHEDULE_TAPER);
    expect_schedule(&s, 3u, PB_ERR_BUFFER);
}

static void schedule_share_too_large(void **state) {
    (void)state;
    pb_schedule s = sched_of(PB_SCHEDULE_GEOMETRIC);
    s.budget = UINT32_MAX; /* layer 0 above the average */
    expect_schedule(&s, 4u, PB_ERR_TOO_LARGE);
    s.kind = PB_SCHEDULE_KVFACTORY; /* 2C - w - min above 2^32 */
    expect_schedule(&s, 4u, PB_ERR_TOO_LARGE);
}

static void schedule_buffer_one_long(void **state) {
    (void)state;
    const pb_schedule s = sched_of(PB_SCHEDULE_GEOMETRIC);
    uint32_t shares[5] = {CANARY, CANARY, CANARY, CANARY, CANARY};
    uint64_t total = 0;
    assert_int_equal(pb_kvcache_schedule_shares(&s, shares, 5u, &total),
                     PB_OK);
    assert_int_equal(total, 256u);
    assert_int_equal(shares[4], CANARY);
}

static void schedule_kind_names_unknown(void **state) {
    (void)state;
    assert_null(pb_schedule_kind_name(PB_SCHEDULE_CAKE + 1u));
    assert_null(pb_schedule_kind_name(UINT32_MAX));
    uint32_t kind = CANARY;
    assert_int_equal(pb_schedule_kind_from_name("pyramid", &kind),
                     PB_ERR_PARAM);
    assert_int_equal(pb_schedule_kind_from_name(NULL, &kind), PB_ERR_NULL);
    assert_int_equal(kind, CANARY);
    assert_int_equal(pb_schedule_kind_from_name("taper", NULL), PB_ERR_NULL);
}

/* ------------------------------------------------------------------------ */

#define ROW(fn) cmocka_unit_test(fn)

int main(void) {
    const struct CMUnitTest tests[] = {
        ROW(budget_num_layers_zero),
        ROW(budget_layer_at_num_layers),
        ROW(budget_ratio_zero),
        ROW(budget_budget_zero),
        ROW(budget_uint32_max_saturates),
        ROW(budgets_shares_null),
        ROW(budgets_num_layers_zero),
        ROW(budgets_ratio_zero),
        ROW(budgets_buffer_one_short),
        ROW(budgets_buffer_zero),
        ROW(budgets_buffer_one_long),
        ROW(budgets_uint32_max_inputs),
        ROW(total_num_layers_zero),
        ROW(total_ratio_zero),
        ROW(total_uint32_max_inputs),
        ROW(schedule_null),
        ROW(schedule_shares_null),
        ROW(schedule_total_null_is_fine),
        ROW(schedule_struct_size_short),
        ROW(schedule_struct_tail_nonzero),
        ROW(schedule_kind_unknown),
        ROW(schedule_num_layers_zero),
        ROW(schedule_weights_null),
        ROW(schedule_weights_all_zero),
        ROW(schedule_window_not_below_c),
        ROW(schedule_beta_zero),
        ROW(schedule_gamma_zero),
        ROW(schedule_taper_beta_below_one_or_nan),
        ROW(schedule_ratio_zero),
        ROW(schedule_buffer_one_short),
        ROW(schedule_share_too_large),
        ROW(schedule_buffer_one_long),
        ROW(schedule_kind_names_unknown),

        ROW(head_reduce_attn_null),
        ROW(head_reduce_out_null),
        ROW(head_reduce_heads_zero),
        ROW(head_reduce_mode_unknown),
        ROW(head_reduce_stride_one_short),
        ROW(head_reduce_too_large),
        ROW(head_reduce_bad_weights),
        ROW(head_reduce_sum_overflows_float),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
