/*
 * test_bad_input.c - the bad-input matrix: one cmocka test per row, for
 * every public function of pyramidkv.h except prefill (whose rows are in
 * test_bad_input_prefill.c) and the attention profile (in
 * test_bad_input_profile.c). A row passes one bad (or boundary) argument
 * and asserts the documented status or return value AND, where there is an
 * instance, that its full observable state (held positions, every window
 * score, effective share, held count, capacity, memory bytes; see
 * hardening_state.h) is identical before and after. Output buffers a
 * refused call must not write are filled with a canary and checked.
 *
 * The row names are the first column of the table in docs/robustness.md.
 * Where the header leaves an outcome unstated (the compatible evict with a
 * NULL victims array), the row asserts the outcome the native surface
 * documents and says so.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "counting_allocator.h"
#include "hardening_state.h"
#include "pyramidkv/pyramidkv.h"

#define CANARY 0xC0FFEE11u
#define BIG_LIMIT ((size_t)64 << 20)

/* ------------------------------------------------------------------------ */
/* Fixtures                                                                 */

/* budget 8 (one layer, so the share is 8), recent 2, obs 3, pool 3,
 * capacity 12. */
static const pb_kvcache_pyramidkv_params WARM_PARAMS = {8u, 0u, 1u, 1u,
                                                        2u, 3u, 3u};
static const pb_kvcache_options WARM_OPTIONS = {12u, 0u, 0u, 0u};

typedef struct fx {
    counting_allocator ca;
    pb_allocator alloc;
    pb_kvcache *p;
    hs_state before;
    uint32_t evicted; /* a position the warm-up evicted */
    float attn[64];
    uint32_t buf[64];
} fx;

/* Admits pos with a deterministic pattern of valid weights (ties, zeros). */
static void feed(pb_kvcache *p, uint32_t pos) {
    float w[64];
    const size_t held = pb_kvcache_kept_count(p);
    assert_true(held < 64u);
    for (size_t i = 0; i < held; ++i)
        w[i] = (float)((pos * 7u + (uint32_t)i * 3u) % 5u) * 0.25f;
    assert_int_equal(pb_kvcache_observe(p, pos, w, held), PB_OK);
}

static void capture(const fx *f, hs_state *s) {
    assert_int_equal(hs_capture(f->p, s), 0);
}

static void set_before(fx *f) { capture(f, &f->before); }

#define ASSERT_UNCHANGED(f)                          \
    do {                                             \
        hs_state after_;                             \
        capture((f), &after_);                       \
        assert_true(hs_equal(&(f)->before, &after_)); \
    } while (0)

/* Fills attn[0 .. n-1] with valid weights. */
static float *weights(fx *f, size_t n) {
    assert_true(n <= 64u);
    for (size_t i = 0; i < n; ++i) f->attn[i] = 0.125f * (float)(i % 3u);
    return f->attn;
}

static uint32_t last_held(const fx *f) {
    return f->before.pos[f->before.kept - 1u];
}

/* Held 0 .. 9, evicted to 6, then 12 admitted: 7 held, scores differ, the
 * ring has advanced ten steps. */
static int fx_warm(void **state) {
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    ca_init(&f->ca);
    f->alloc = ca_allocator(&f->ca);
    assert_int_equal(pb_kvcache_pyramidkv_create(&WARM_PARAMS, &WARM_OPTIONS,
                                                 &f->alloc, &f->p),
                     PB_OK);
    for (uint32_t pos = 1; pos <= 9u; ++pos) feed(f->p, pos);
    size_t n = 0;
    assert_int_equal(pb_kvcache_evict(f->p, 6u, f->buf, 64u, &n), PB_OK);
    assert_int_equal(n, 4u);
    f->evicted = f->buf[0];
    feed(f->p, 12u);
    set_before(f);
    assert_int_equal(f->before.kept, 7u);
    *state = f;
    return 0;
}

/* The warm instance filled to its capacity of 12. */
static int fx_full(void **state) {
    fx_warm(state);
    fx *f = *state;
    for (uint32_t pos = 13; pb_kvcache_kept_count(f->p) < 12u; ++pos)
        feed(f->p, pos);
    set_before(f);
    return 0;
}

static int fx_done(void **state) {
    fx *f = *state;
    pb_kvcache_destroy(f->p);
    assert_int_equal(f->ca.outstanding, 0u);
    assert_int_equal(f->ca.bad_frees, 0u);
    assert_int_equal(f->ca.live_blocks, 0u);
    free(f);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* pb_version_number, pb_version_string, pb_status_str                      */

static void version_number_matches_header(void **state) {
    (void)state;
    assert_int_equal(pb_version_number(), PB_VERSION_NUMBER);
}

static void version_string_never_null(void **state) {
    (void)state;
    assert_non_null(pb_version_string());
    assert_string_equal(pb_version_string(), PB_VERSION_STRING);
}

static void status_str_unknown_values(void **state) {
    (void)state;
    const int bad[] = {-1, PB_STATUS_COUNT_, PB_STATUS_COUNT_ + 1, INT_MAX,
                       INT_MIN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i)
        assert_string_equal(pb_status_str((pb_status)bad[i]),
                            "unknown status");
}

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
/* pb_kvcache_pyramidkv_create and pb_kvcache_pyramidkv_size                */

static pb_kvcache_pyramidkv_params small_params(void) {
    const pb_kvcache_pyramidkv_params p = {16u, 0u, 1u, 4u, 4u, 4u, 3u};
    return p;
}

static pb_kvcache_options no_options(void) {
    const pb_kvcache_options o = PB_KVCACHE_OPTIONS_DEFAULT;
    return o;
}

/* Create with a counting allocator limited to BIG_LIMIT and check the
 * documented outcome: on error *out is NULL, nothing is left allocated
 * and, unless the error is PB_ERR_NOMEM, the allocator was never called
 * and the size query returns the same status; on success the size query,
 * the allocator and memory_bytes agree. */
static void expect_create(const pb_kvcache_pyramidkv_params *p,
                          const pb_kvcache_options *o, pb_status want) {
    counting_allocator ca;
    ca_init(&ca);
    ca.limit_bytes = BIG_LIMIT;
    const pb_allocator a = ca_allocator(&ca);
    pb_kvcache *out = (pb_kvcache *)(void *)&ca;
    size_t bytes = (size_t)0x5A5A5A5Au; /* a canary: written on PB_OK only */
    const pb_status ss = pb_kvcache_pyramidkv_size(p, o, &bytes);
    if (ss != PB_OK) assert_int_equal(bytes, (size_t)0x5A5A5A5Au);
    assert_int_equal(pb_kvcache_pyramidkv_create(p, o, &a, &out), want);
    if (want == PB_OK) {
        assert_int_equal(ss, PB_OK);
        assert_non_null(out);
        assert_int_equal(pb_kvcache_memory_bytes(out), bytes);
        assert_int_equal(ca.outstanding, bytes);
        pb_kvcache_destroy(out);
    } else {
        assert_null(out);
        if (want == PB_ERR_NOMEM) {
            assert_int_equal(ss, PB_OK);
            assert_true(bytes > BIG_LIMIT);
        } else {
            assert_int_equal(ss, want);
            assert_int_equal(ca.alloc_calls, 0u);
        }
    }
    assert_int_equal(ca.outstanding, 0u);
    assert_int_equal(ca.bad_frees, 0u);
}

static void create_out_null(void **state) {
    (void)state;
    const pb_kvcache_pyramidkv_params p = small_params();
    counting_allocator ca;
    ca_init(&ca);
    const pb_allocator a = ca_allocator(&ca);
    assert_int_equal(pb_kvcache_pyramidkv_create(&p, NULL, &a, NULL),
                     PB_ERR_NULL);
    /* out is checked first: refused params do not change the status. */
    pb_kvcache_pyramidkv_params bad = p;
    bad.pool_kernel = 0u;
    assert_int_equal(pb_kvcache_pyramidkv_create(&bad, NULL, &a, NULL),
                     PB_ERR_NULL);
    assert_int_equal(ca.alloc_calls, 0u);
}

static void create_params_null_is_default(void **state) {
    (void)state;
    const pb_kvcache_pyramidkv_params d = PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
    size_t a = 0, b = 0;
    assert_int_equal(pb_kvcache_pyramidkv_size(NULL, NULL, &a), PB_OK);
    assert_int_equal(pb_kvcache_pyramidkv_size(&d, NULL, &b), PB_OK);
    assert_int_equal(a, b);
    expect_create(NULL, NULL, PB_OK);
    pb_kvcache *p = NULL;
    assert_int_equal(pb_kvcache_pyramidkv_create(NULL, NULL, NULL, &p), PB_OK);
    assert_int_equal(pb_kvcache_effective_budget(p), 512u);
    assert_int_equal(pb_kvcache_capacity(p), 513u);
    pb_kvcache_destroy(p);
}

static void create_allocator_null_is_malloc(void **state) {
    (void)state;
    const pb_kvcache_pyramidkv_params p = small_params();
    pb_kvcache *out = NULL;
    assert_int_equal(pb_kvcache_pyramidkv_create(&p, NULL, NULL, &out), PB_OK);
    assert_non_null(out);
    pb_kvcache_destroy(out);
}

static void *never_alloc(void *ctx, size_t n) {
    (void)ctx;
    (void)n;
    fail_msg("the allocator of a refused create was called");
    return NULL;
}

static void never_free(void *ctx, void *p, size_t n) {
    (void)ctx;
    (void)p;
    (void)n;
    fail_msg("the allocator of a refused create was called");
}

static void create_allocator_lacks_alloc(void **state) {
    (void)state;
    const pb_kvcache_pyramidkv_params p = small_params();
    const pb_allocator a = {NULL, never_free, NULL};
    pb_kvcache *out = (pb_kvcache *)(void *)&p;
    assert_int_equal(pb_kvcache_pyramidkv_create(&p, NULL, &a, &out),
                     PB_ERR_PARAM);
    assert_null(out);
}

static void create_allocator_lacks_free(void **state) {
    (void)state;
    const pb_kvcache_pyramidkv_params p = small_params();
    const pb_allocator a = {never_alloc, NULL, NULL};
    pb_kvcache *out = (pb_kvcache *)(void *)&p;
    assert_int_equal(pb_kvcache_pyramidkv_create(&p, NULL, &a, &out),
                     PB_ERR_PARAM);
    assert_null(out);
}

/* One row per parameter bound: at the bound (accepted) and past it. */
#define PARAM_ROW(name, field, value, want)               \
    static void name(void **state) {                      \
        (void)state;                                      \
        pb_kvcache_pyramidkv_params p = small_params();   \
        const pb_kvcache_options o = no_options();        \
        p.field = (value);                                \
        expect_create(&p, &o, (want));                    \
    }

PARAM_ROW(create_budget_zero, budget, 0u, PB_ERR_PARAM)
PARAM_ROW(create_budget_uint32_max, budget, UINT32_MAX, PB_ERR_PARAM)
/* In range, but its capacity of 2^32 - 1 positions exceeds the limit. */
PARAM_ROW(create_budget_uint32_max_minus_1, budget, UINT32_MAX - 1u,
          PB_ERR_NOMEM)
PARAM_ROW(create_layer_at_num_layers, layer, 1u, PB_ERR_PARAM)
PARAM_ROW(create_layer_uint32_max, layer, UINT32_MAX, PB_ERR_PARAM)
PARAM_ROW(create_num_layers_zero, num_layers, 0u, PB_ERR_PARAM)
PARAM_ROW(create_ratio_zero, pyramid_ratio, 0u, PB_ERR_PARAM)
PARAM_ROW(create_ratio_one, pyramid_ratio, 1u, PB_OK)
PARAM_ROW(create_ratio_uint32_max, pyramid_ratio, UINT32_MAX, PB_OK)
PARAM_ROW(create_recent_at_budget, recent_window, 16u, PB_ERR_PARAM)
PARAM_ROW(create_recent_budget_minus_1, recent_window, 15u, PB_OK)
PARAM_ROW(create_recent_zero, recent_window, 0u, PB_OK)
PARAM_ROW(create_recent_uint32_max, recent_window, UINT32_MAX, PB_ERR_PARAM)
PARAM_ROW(create_obs_zero, obs_window, 0u, PB_ERR_PARAM)
PARAM_ROW(create_obs_one, obs_window, 1u, PB_OK)
/* 17 positions x 2^32 - 1 steps of float: fits size_t, not the limit. */
PARAM_ROW(create_obs_uint32_max, obs_window, UINT32_MAX, PB_ERR_NOMEM)
PARAM_ROW(create_pool_kernel_zero, pool_kernel, 0u, PB_ERR_PARAM)
PARAM_ROW(create_pool_kernel_even, pool_kernel, 2u, PB_ERR_PARAM)
PARAM_ROW(create_pool_kernel_one, pool_kernel, 1u, PB_OK)
PARAM_ROW(create_pool_kernel_uint32_max, pool_kernel, UINT32_MAX, PB_OK)
PARAM_ROW(create_pool_kernel_uint32_max_minus_1, pool_kernel, UINT32_MAX - 1u,
          PB_ERR_PARAM)

static void create_budget_one(void **state) {
    (void)state;
    pb_kvcache_pyramidkv_params p = small_params();
    p.budget = 1u;
    p.recent_window = 0u;
    expect_create(&p, NULL, PB_OK);
}

static void create_layer_last(void **state) {
    (void)state;
    pb_kvcache_pyramidkv_params p = small_params();
    p.num_layers = 32u;
    p.layer = 31u;
    expect_create(&p, NULL, PB_OK);
}

static void create_num_layers_uint32_max(void **state) {
    (void)state;
    pb_kvcache_pyramidkv_params p = small_params();
    p.num_layers = UINT32_MAX;
    p.layer = UINT32_MAX - 1u;
    expect_create(&p, NULL, PB_OK);
}

#define OPTION_ROW(name, field, value, want)              \
    static void name(void **state) {                      \
        (void)state;                                      \
        const pb_kvcache_pyramidkv_params p = small_params(); \
        pb_kvcache_options o = no_options();              \
        o.field = (value);                                \
        expect_create(&p, &o, (want));                    \
    }

/* small_params has recent_window 4: capacity must be 0 or >= 6. */
OPTION_ROW(create_capacity_recent_plus_1, capacity, 5u, PB_ERR_PARAM)
OPTION_ROW(create_capacity_one, capacity, 1u, PB_ERR_PARAM)
OPTION_ROW(create_capacity_recent_plus_2, capacity, 6u, PB_OK)
OPTION_ROW(create_capacity_uint32_max, capacity, UINT32_MAX, PB_ERR_NOMEM)
OPTION_ROW(create_pool_avg, pool, 1u, PB_OK)
OPTION_ROW(create_pool_two, pool, 2u, PB_ERR_PARAM)
OPTION_ROW(create_pool_uint32_max, pool, UINT32_MAX, PB_ERR_PARAM)
OPTION_ROW(create_prefill_scope_reference, prefill_scope, 1u, PB_OK)
OPTION_ROW(create_prefill_scope_two, prefill_scope, 2u, PB_ERR_PARAM)
OPTION_ROW(create_prefill_max_len_uint32_max, prefill_max_len, UINT32_MAX,
           PB_ERR_NOMEM)

/* capacity x obs_window x sizeof(float) needs more than 64 bits. */
static void create_capacity_and_obs_too_large(void **state) {
    (void)state;
    pb_kvcache_pyramidkv_params p = small_params();
    pb_kvcache_options o = no_options();
    p.obs_window = UINT32_MAX;
    o.capacity = UINT32_MAX;
    expect_create(&p, &o, PB_ERR_TOO_LARGE);
}

static void size_bytes_null(void **state) {
    (void)state;
    const pb_kvcache_pyramidkv_params p = small_params();
    assert_int_equal(pb_kvcache_pyramidkv_size(&p, NULL, NULL), PB_ERR_NULL);
    assert_int_equal(pb_kvcache_pyramidkv_size(NULL, NULL, NULL), PB_ERR_NULL);
    pb_kvcache_pyramidkv_params bad = p;
    bad.pool_kernel = 0u;
    assert_int_equal(pb_kvcache_pyramidkv_size(&bad, NULL, NULL), PB_ERR_NULL);
}

static void size_matches_create_and_memory(void **state) {
    (void)state;
    const pb_kvcache_pyramidkv_params p = small_params();
    pb_kvcache_options o = no_options();
    o.pool = 1u;
    o.prefill_max_len = 100u;
    expect_create(&p, &o, PB_OK);
}

/* ------------------------------------------------------------------------ */
/* pb_kvcache_destroy                                                       */

static void destroy_null(void **state) {
    (void)state;
    pb_kvcache_destroy(NULL);
}

/* ------------------------------------------------------------------------ */
/* pb_kvcache_observe                                                       */

static void observe_policy_null(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_observe(NULL, 100u, weights(f, 7u), 7u),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_observe(NULL, 100u, NULL, 0u), PB_ERR_NULL);
    ASSERT_UNCHANGED(f);
}

static void observe_position_equal_last(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_observe(f->p, last_held(f), weights(f, 7u), 7u),
                     PB_ERR_POSITION);
    ASSERT_UNCHANGED(f);
}

static void observe_position_below_last(void **state) {
    fx *f = *state;
    assert_int_equal(
        pb_kvcache_observe(f->p, last_held(f) - 1u, weights(f, 7u), 7u),
        PB_ERR_POSITION);
    ASSERT_UNCHANGED(f);
}

static void observe_position_zero(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_observe(f->p, 0u, weights(f, 7u), 7u),
                     PB_ERR_POSITION);
    ASSERT_UNCHANGED(f);
}

static void observe_position_repeats_held(void **state) {
    fx *f = *state;
    assert_int_equal(
        pb_kvcache_observe(f->p, f->before.pos[2], weights(f, 7u), 7u),
        PB_ERR_POSITION);
    ASSERT_UNCHANGED(f);
}

static void observe_position_repeats_evicted(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_observe(f->p, f->evicted, weights(f, 7u), 7u),
                     PB_ERR_POSITION);
    assert_int_equal(pb_kvcache_observe(f->p, f->evicted, NULL, 0u),
                     PB_ERR_POSITION);
    ASSERT_UNCHANGED(f);
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
    ASSERT_UNCHANGED(f);
}

static void observe_length_one_short(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_observe(f->p, 100u, weights(f, 7u), 6u),
                     PB_ERR_LENGTH);
    ASSERT_UNCHANGED(f);
}

static void observe_length_one_long(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_observe(f->p, 100u, weights(f, 8u), 8u),
                     PB_ERR_LENGTH);
    ASSERT_UNCHANGED(f);
}

static void observe_length_zero(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_observe(f->p, 100u, weights(f, 1u), 0u),
                     PB_ERR_LENGTH);
    ASSERT_UNCHANGED(f);
}

static void observe_length_size_max(void **state) {
    fx *f = *state;
    /* Must be refused before a single weight is read. */
    assert_int_equal(pb_kvcache_observe(f->p, 100u, weights(f, 7u), SIZE_MAX),
                     PB_ERR_LENGTH);
    ASSERT_UNCHANGED(f);
}

static void expect_weight_refused(fx *f, size_t at, float bad) {
    float *w = weights(f, 7u);
    w[at] = bad;
    assert_int_equal(pb_kvcache_observe(f->p, 100u, w, 7u), PB_ERR_WEIGHT);
    ASSERT_UNCHANGED(f);
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
    ASSERT_UNCHANGED(f);
}

static void observe_first_error_position_over_length(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_observe(f->p, 0u, weights(f, 3u), 3u),
                     PB_ERR_POSITION);
    ASSERT_UNCHANGED(f);
}

static void observe_first_error_length_over_weight(void **state) {
    fx *f = *state;
    float *w = weights(f, 8u);
    w[0] = NAN;
    assert_int_equal(pb_kvcache_observe(f->p, 100u, w, 8u), PB_ERR_LENGTH);
    ASSERT_UNCHANGED(f);
}

static void observe_first_error_weight_over_full(void **state) {
    fx *f = *state;
    float *w = weights(f, 12u);
    w[11] = -1.0f;
    assert_int_equal(pb_kvcache_observe(f->p, 1000u, w, 12u), PB_ERR_WEIGHT);
    ASSERT_UNCHANGED(f);
}

static void observe_first_error_length_over_full(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_observe(f->p, 1000u, weights(f, 11u), 11u),
                     PB_ERR_LENGTH);
    ASSERT_UNCHANGED(f);
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

/* budget 3 on the warm instance: 7 held, 2 protected, so 4 must go. */
#define EVICT_NEEDS 4u

static void evict_policy_null(void **state) {
    fx *f = *state;
    size_t n = 9;
    assert_int_equal(pb_kvcache_evict(NULL, 3u, f->buf, 64u, &n), PB_ERR_NULL);
    ASSERT_UNCHANGED(f);
}

static void evict_n_victims_null(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_evict(f->p, 3u, f->buf, 64u, NULL),
                     PB_ERR_NULL);
    ASSERT_UNCHANGED(f);
}

static void evict_victims_null_with_capacity(void **state) {
    fx *f = *state;
    size_t n = 9;
    assert_int_equal(pb_kvcache_evict(f->p, 3u, NULL, 64u, &n), PB_ERR_NULL);
    assert_int_equal(pb_kvcache_evict(f->p, 100u, NULL, 1u, &n), PB_ERR_NULL);
    ASSERT_UNCHANGED(f);
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
    ASSERT_UNCHANGED(f);
}

static void evict_victims_one_short(void **state) {
    fx *f = *state;
    size_t n = 0;
    assert_int_equal(pb_kvcache_evict(f->p, 3u, f->buf, EVICT_NEEDS - 1u, &n),
                     PB_ERR_BUFFER);
    assert_int_equal(n, EVICT_NEEDS);
    ASSERT_UNCHANGED(f);
}

static void evict_budget_uint32_max(void **state) {
    fx *f = *state;
    size_t n = 9;
    /* The target is the share (8) and 7 are held: nothing to drop. */
    assert_int_equal(pb_kvcache_evict(f->p, UINT32_MAX, NULL, 0u, &n), PB_OK);
    assert_int_equal(n, 0u);
    ASSERT_UNCHANGED(f);
}

static void evict_nothing_needed(void **state) {
    fx *f = *state;
    size_t n = 9;
    assert_int_equal(pb_kvcache_evict(f->p, 7u, f->buf, 64u, &n), PB_OK);
    assert_int_equal(n, 0u);
    ASSERT_UNCHANGED(f);
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
 * in progress; see docs/robustness.md). */
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
    ASSERT_UNCHANGED(f);
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
    ASSERT_UNCHANGED(f);
}

static void after_reset_position_zero(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_reset(f->p), PB_OK);
    set_before(f);
    assert_int_equal(pb_kvcache_observe(f->p, 0u, weights(f, 1u), 1u),
                     PB_ERR_POSITION);
    ASSERT_UNCHANGED(f);
}

static void after_reset_old_position_not_held(void **state) {
    fx *f = *state;
    const uint32_t old = last_held(f);
    assert_int_equal(pb_kvcache_reset(f->p), PB_OK);
    set_before(f);
    double s = 5.0;
    assert_int_equal(pb_kvcache_window_score(f->p, old, &s), PB_ERR_NOT_HELD);
    ASSERT_UNCHANGED(f);
}

static void after_reset_evict_nothing(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_reset(f->p), PB_OK);
    set_before(f);
    size_t n = 9;
    assert_int_equal(pb_kvcache_evict(f->p, 0u, f->buf, 64u, &n), PB_OK);
    /* One position held, recent_window 2 protects it. */
    assert_int_equal(n, 0u);
    ASSERT_UNCHANGED(f);
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
    ASSERT_UNCHANGED(f);
}

static void kept_positions_out_null(void **state) {
    fx *f = *state;
    size_t n = 9;
    assert_int_equal(pb_kvcache_kept_positions(f->p, NULL, 64u, &n),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_kept_positions(f->p, NULL, 0u, &n),
                     PB_ERR_NULL);
    ASSERT_UNCHANGED(f);
}

static void kept_positions_n_null(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_kept_positions(f->p, f->buf, 64u, NULL),
                     PB_ERR_NULL);
    ASSERT_UNCHANGED(f);
}

static void kept_positions_one_short(void **state) {
    fx *f = *state;
    size_t n = 0;
    for (size_t i = 0; i < 64u; ++i) f->buf[i] = CANARY;
    assert_int_equal(pb_kvcache_kept_positions(f->p, f->buf, 6u, &n),
                     PB_ERR_BUFFER);
    assert_int_equal(n, 7u);
    for (size_t i = 0; i < 64u; ++i) assert_int_equal(f->buf[i], CANARY);
    ASSERT_UNCHANGED(f);
}

static void kept_positions_capacity_zero(void **state) {
    fx *f = *state;
    size_t n = 0;
    f->buf[0] = CANARY;
    assert_int_equal(pb_kvcache_kept_positions(f->p, f->buf, 0u, &n),
                     PB_ERR_BUFFER);
    assert_int_equal(n, 7u);
    assert_int_equal(f->buf[0], CANARY);
    ASSERT_UNCHANGED(f);
}

static void kept_positions_one_long(void **state) {
    fx *f = *state;
    size_t n = 0;
    for (size_t i = 0; i < 64u; ++i) f->buf[i] = CANARY;
    assert_int_equal(pb_kvcache_kept_positions(f->p, f->buf, 8u, &n), PB_OK);
    assert_int_equal(n, 7u);
    assert_memory_equal(f->buf, f->before.pos, 7u * sizeof f->buf[0]);
    assert_int_equal(f->buf[7], CANARY);
    ASSERT_UNCHANGED(f);
}

static void window_score_policy_null(void **state) {
    fx *f = *state;
    double s = 0.0;
    assert_int_equal(pb_kvcache_window_score(NULL, 0u, &s), PB_ERR_NULL);
    ASSERT_UNCHANGED(f);
}

static void window_score_score_null(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_window_score(f->p, last_held(f), NULL),
                     PB_ERR_NULL);
    ASSERT_UNCHANGED(f);
}

static void window_score_not_held(void **state) {
    fx *f = *state;
    double s = 0.0;
    const uint32_t never[] = {f->evicted, 10u, 11u, last_held(f) + 1u,
                              UINT32_MAX};
    for (size_t i = 0; i < sizeof never / sizeof never[0]; ++i)
        assert_int_equal(pb_kvcache_window_score(f->p, never[i], &s),
                         PB_ERR_NOT_HELD);
    ASSERT_UNCHANGED(f);
}

/* ------------------------------------------------------------------------ */
/* The compatible vtables                                                   */

static const pb_kvcache_vtable *const VTABLES[2] = {&pb_kvcache_pyramidkv,
                                                    &pb_kvcache_snapkv};

static void vtable_create_null_params_defaults(void **state) {
    (void)state;
    for (size_t v = 0; v < 2u; ++v) {
        counting_allocator ca;
        ca_init(&ca);
        const pb_allocator a = ca_allocator(&ca);
        pb_kvcache *p = VTABLES[v]->create(NULL, &a, NULL);
        assert_non_null(p);
        assert_int_equal(pb_kvcache_capacity(p), 513u);
        assert_int_equal(pb_kvcache_effective_budget(p), 512u);
        assert_int_equal(VTABLES[v]->memory_bytes(p), ca.outstanding);
        VTABLES[v]->destroy(p);
        assert_int_equal(ca.outstanding, 0u);
    }
}

static void vtable_pyramidkv_create_refused_params(void **state) {
    (void)state;
    const pb_kvcache_pyramidkv_params base = small_params();
    pb_kvcache_pyramidkv_params bad[10];
    for (size_t i = 0; i < 10u; ++i) bad[i] = base;
    bad[0].budget = 0u;
    bad[1].budget = UINT32_MAX;
    bad[2].layer = 1u;
    bad[3].num_layers = 0u;
    bad[4].pyramid_ratio = 0u;
    bad[5].recent_window = 16u;
    bad[6].obs_window = 0u;
    bad[7].pool_kernel = 0u;
    bad[8].pool_kernel = 4u;
    bad[9].recent_window = UINT32_MAX;
    for (size_t i = 0; i < 10u; ++i) {
        counting_allocator ca;
        ca_init(&ca);
        const pb_allocator a = ca_allocator(&ca);
        assert_null(pb_kvcache_pyramidkv.create(&bad[i], &a, NULL));
        assert_int_equal(ca.outstanding, 0u);
    }
}

static void vtable_snapkv_create_refused_params(void **state) {
    (void)state;
    const pb_kvcache_snapkv_params base = {16u, 4u, 4u, 3u};
    pb_kvcache_snapkv_params bad[7];
    for (size_t i = 0; i < 7u; ++i) bad[i] = base;
    bad[0].budget = 0u;
    bad[1].budget = UINT32_MAX;
    bad[2].recent_window = 16u;
    bad[3].recent_window = UINT32_MAX;
    bad[4].obs_window = 0u;
    bad[5].pool_kernel = 0u;
    bad[6].pool_kernel = 2u;
    for (size_t i = 0; i < 7u; ++i) {
        counting_allocator ca;
        ca_init(&ca);
        const pb_allocator a = ca_allocator(&ca);
        assert_null(pb_kvcache_snapkv.create(&bad[i], &a, NULL));
        assert_int_equal(ca.outstanding, 0u);
    }
}

static void vtable_create_allocator_lacking(void **state) {
    (void)state;
    const pb_allocator no_alloc = {NULL, never_free, NULL};
    const pb_allocator no_free = {never_alloc, NULL, NULL};
    for (size_t v = 0; v < 2u; ++v) {
        assert_null(VTABLES[v]->create(NULL, &no_alloc, NULL));
        assert_null(VTABLES[v]->create(NULL, &no_free, NULL));
    }
}

static void vtable_create_nomem(void **state) {
    (void)state;
    const pb_kvcache_pyramidkv_params p = {UINT32_MAX - 1u, 0u, 1u, 1u,
                                           0u, 16u, 1u};
    const pb_kvcache_snapkv_params sp = {UINT32_MAX - 1u, 0u, 16u, 1u};
    const void *params[2] = {&p, &sp};
    for (size_t v = 0; v < 2u; ++v) {
        counting_allocator ca;
        ca_init(&ca);
        ca.limit_bytes = BIG_LIMIT;
        const pb_allocator a = ca_allocator(&ca);
        assert_null(VTABLES[v]->create(params[v], &a, NULL));
        assert_true(ca.alloc_failures > 0u);
        assert_int_equal(ca.outstanding, 0u);
        assert_int_equal(ca.bad_frees, 0u);
    }
}

static void vtable_create_rng_ignored(void **state) {
    (void)state;
    /* Never read: a pointer to anything must do. */
    unsigned char junk[16] = {0};
    for (size_t v = 0; v < 2u; ++v) {
        pb_kvcache *p = VTABLES[v]->create(NULL, NULL, (pb_rng *)(void *)junk);
        assert_non_null(p);
        VTABLES[v]->destroy(p);
    }
}

static void vtable_decode_policy_null(void **state) {
    fx *f = *state;
    for (size_t v = 0; v < 2u; ++v)
        VTABLES[v]->on_decode_step(NULL, 100u, weights(f, 7u), 7u);
    ASSERT_UNCHANGED(f);
}

static void vtable_decode_refused_changes_nothing(void **state) {
    fx *f = *state;
    for (size_t v = 0; v < 2u; ++v) {
        const pb_kvcache_vtable *vt = VTABLES[v];
        vt->on_decode_step(f->p, last_held(f), weights(f, 7u), 7u);
        vt->on_decode_step(f->p, f->evicted, NULL, 0u);
        vt->on_decode_step(f->p, 100u, weights(f, 8u), 6u);
        vt->on_decode_step(f->p, 100u, weights(f, 8u), 8u);
        vt->on_decode_step(f->p, 100u, weights(f, 7u), SIZE_MAX);
        float *w = weights(f, 7u);
        w[4] = NAN;
        vt->on_decode_step(f->p, 100u, w, 7u);
        w[4] = -INFINITY;
        vt->on_decode_step(f->p, 100u, w, 7u);
        ASSERT_UNCHANGED(f);
    }
}

static void vtable_decode_full(void **state) {
    fx *f = *state;
    for (size_t v = 0; v < 2u; ++v) {
        VTABLES[v]->on_decode_step(f->p, 1000u, weights(f, 12u), 12u);
        VTABLES[v]->on_decode_step(f->p, 1000u, NULL, 0u);
    }
    ASSERT_UNCHANGED(f);
}

static void vtable_evict_policy_null(void **state) {
    fx *f = *state;
    for (size_t v = 0; v < 2u; ++v)
        assert_int_equal(VTABLES[v]->evict(NULL, 3u, f->buf, 64u), 0u);
    ASSERT_UNCHANGED(f);
}

static void vtable_evict_capacity_zero(void **state) {
    fx *f = *state;
    for (size_t v = 0; v < 2u; ++v) {
        assert_int_equal(VTABLES[v]->evict(f->p, 3u, f->buf, 0u), 0u);
        assert_int_equal(VTABLES[v]->evict(f->p, 3u, NULL, 0u), 0u);
    }
    ASSERT_UNCHANGED(f);
}

static void vtable_evict_capacity_one_short(void **state) {
    fx *f = *state;
    for (size_t v = 0; v < 2u; ++v)
        assert_int_equal(
            VTABLES[v]->evict(f->p, 3u, f->buf, EVICT_NEEDS - 1u), 0u);
    ASSERT_UNCHANGED(f);
}

/* Not stated in the header for the compatible surface; the native rule
 * (NULL victims with a capacity is refused) is what a caller would expect,
 * and anything else would write through NULL. */
static void vtable_evict_victims_null_with_capacity(void **state) {
    fx *f = *state;
    for (size_t v = 0; v < 2u; ++v)
        assert_int_equal(VTABLES[v]->evict(f->p, 3u, NULL, 64u), 0u);
    ASSERT_UNCHANGED(f);
}

static void vtable_evict_budget_uint32_max(void **state) {
    fx *f = *state;
    for (size_t v = 0; v < 2u; ++v)
        assert_int_equal(VTABLES[v]->evict(f->p, UINT32_MAX, f->buf, 64u), 0u);
    ASSERT_UNCHANGED(f);
}

static void vtable_evict_budget_zero(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_snapkv.evict(f->p, 0u, f->buf, 64u), 5u);
    assert_memory_equal(f->buf, f->before.pos, 5u * sizeof f->buf[0]);
    assert_int_equal(pb_kvcache_kept_count(f->p), 2u);
}

static void vtable_memory_bytes_null(void **state) {
    (void)state;
    for (size_t v = 0; v < 2u; ++v)
        assert_int_equal(VTABLES[v]->memory_bytes(NULL), 0u);
}

static void vtable_memory_bytes_matches_native(void **state) {
    fx *f = *state;
    for (size_t v = 0; v < 2u; ++v)
        assert_int_equal(VTABLES[v]->memory_bytes(f->p), f->before.memory);
}

static void vtable_destroy_null(void **state) {
    (void)state;
    for (size_t v = 0; v < 2u; ++v) VTABLES[v]->destroy(NULL);
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
    pb_schedule s = sched_of(PB_SCHEDULE_PROFILE + 1u);
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
    assert_null(pb_schedule_kind_name(PB_SCHEDULE_PROFILE + 1u));
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
#define WARM(fn) cmocka_unit_test_setup_teardown(fn, fx_warm, fx_done)
#define FULL(fn) cmocka_unit_test_setup_teardown(fn, fx_full, fx_done)

int main(void) {
    const struct CMUnitTest tests[] = {
        ROW(version_number_matches_header),
        ROW(version_string_never_null),
        ROW(status_str_unknown_values),

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

        ROW(create_out_null),
        ROW(create_params_null_is_default),
        ROW(create_allocator_null_is_malloc),
        ROW(create_allocator_lacks_alloc),
        ROW(create_allocator_lacks_free),
        ROW(create_budget_zero),
        ROW(create_budget_one),
        ROW(create_budget_uint32_max),
        ROW(create_budget_uint32_max_minus_1),
        ROW(create_layer_at_num_layers),
        ROW(create_layer_uint32_max),
        ROW(create_layer_last),
        ROW(create_num_layers_zero),
        ROW(create_num_layers_uint32_max),
        ROW(create_ratio_zero),
        ROW(create_ratio_one),
        ROW(create_ratio_uint32_max),
        ROW(create_recent_at_budget),
        ROW(create_recent_budget_minus_1),
        ROW(create_recent_zero),
        ROW(create_recent_uint32_max),
        ROW(create_obs_zero),
        ROW(create_obs_one),
        ROW(create_obs_uint32_max),
        ROW(create_pool_kernel_zero),
        ROW(create_pool_kernel_even),
        ROW(create_pool_kernel_one),
        ROW(create_pool_kernel_uint32_max),
        ROW(create_pool_kernel_uint32_max_minus_1),
        ROW(create_capacity_recent_plus_1),
        ROW(create_capacity_one),
        ROW(create_capacity_recent_plus_2),
        ROW(create_capacity_uint32_max),
        ROW(create_capacity_and_obs_too_large),
        ROW(create_pool_avg),
        ROW(create_pool_two),
        ROW(create_pool_uint32_max),
        ROW(create_prefill_scope_reference),
        ROW(create_prefill_scope_two),
        ROW(create_prefill_max_len_uint32_max),
        ROW(size_bytes_null),
        ROW(size_matches_create_and_memory),
        ROW(destroy_null),

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

        ROW(vtable_create_null_params_defaults),
        ROW(vtable_pyramidkv_create_refused_params),
        ROW(vtable_snapkv_create_refused_params),
        ROW(vtable_create_allocator_lacking),
        ROW(vtable_create_nomem),
        ROW(vtable_create_rng_ignored),
        WARM(vtable_decode_policy_null),
        WARM(vtable_decode_refused_changes_nothing),
        FULL(vtable_decode_full),
        WARM(vtable_evict_policy_null),
        WARM(vtable_evict_capacity_zero),
        WARM(vtable_evict_capacity_one_short),
        WARM(vtable_evict_victims_null_with_capacity),
        WARM(vtable_evict_budget_uint32_max),
        WARM(vtable_evict_budget_zero),
        ROW(vtable_memory_bytes_null),
        WARM(vtable_memory_bytes_matches_native),
        ROW(vtable_destroy_null),

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
