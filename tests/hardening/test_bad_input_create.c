/*
 * test_bad_input_create.c - the bad-input matrix (test_bad_input.c) for
 * pb_version_number, pb_version_string, pb_status_str and the native
 * create, size and destroy.
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
#include "ca_checks.h"

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
/* pb_kvcache_pyramidkv_create and pb_kvcache_pyramidkv_size                */

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
        ca_check_created(&ca, out, bytes);
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

/* An allocator lacking a function: PB_ERR_PARAM, *out NULL, and neither
 * of its functions called. */
static void expect_allocator_refused(const pb_allocator *a) {
    const pb_kvcache_pyramidkv_params p = small_params();
    pb_kvcache *out = (pb_kvcache *)(void *)&p;
    assert_int_equal(pb_kvcache_pyramidkv_create(&p, NULL, a, &out),
                     PB_ERR_PARAM);
    assert_null(out);
}

static void create_allocator_lacks_alloc(void **state) {
    (void)state;
    const pb_allocator a = {NULL, never_free, NULL};
    expect_allocator_refused(&a);
}

static void create_allocator_lacks_free(void **state) {
    (void)state;
    const pb_allocator a = {never_alloc, NULL, NULL};
    expect_allocator_refused(&a);
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

/* Rows that move two fields together, with NULL options. */
#define PARAM2_ROW(name, field1, value1, field2, value2, want)         \
    static void name(void **state) {                                  \
        (void)state;                                                  \
        pb_kvcache_pyramidkv_params p = small_params();               \
        p.field1 = (value1);                                          \
        p.field2 = (value2);                                          \
        expect_create(&p, NULL, (want));                              \
    }

PARAM2_ROW(create_budget_one, budget, 1u, recent_window, 0u, PB_OK)
PARAM2_ROW(create_layer_last, num_layers, 32u, layer, 31u, PB_OK)
PARAM2_ROW(create_num_layers_uint32_max, num_layers, UINT32_MAX, layer,
           UINT32_MAX - 1u, PB_OK)

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

#define ROW(fn) cmocka_unit_test(fn)

int main(void) {
    const struct CMUnitTest tests[] = {
        ROW(version_number_matches_header),
        ROW(version_string_never_null),
        ROW(status_str_unknown_values),

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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
