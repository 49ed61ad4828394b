/*
 * test_policy_config.c - the versioned create door (pb_kvcache_create,
 * pb_kvcache_size) and its growth rule (docs/abi.md): struct_size below the
 * first released size is refused, a larger struct from a newer header is
 * taken when the bytes this library does not know are zero and refused
 * otherwise, and every refusal leaves *out NULL with nothing allocated. The
 * released door (pb_kvcache_pyramidkv_create) and the versioned one make
 * the same instance from the same values: same size, same victims, same
 * window scores on seeded random steps. An explicit share gives the
 * effective share max(share, recent_window + 1).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "ca_checks.h"
#include "counting_allocator.h"
#include "pyramidkv/pyramidkv.h"
#include "reference_model.h"
#include "test_configs.h"
#include "test_rng.h"
#include "test_main.h"

/* ------------------------------------------------------------------------ */
/* Growth rule                                                              */

/* A caller whose header knows one more field than this library. */
typedef struct newer_config {
    pb_kvcache_config known;
    uint32_t future_field;
} newer_config;

/* create and size agree on the status; a refusal leaves *out NULL, calls
 * no allocator and writes no size. */
static void expect_status(const pb_kvcache_config *c, pb_status want) {
    counting_allocator ca;
    ca_init(&ca);
    const pb_allocator a = ca_allocator(&ca);
    size_t bytes = (size_t)0x5A5A5A5Au;
    assert_int_equal(pb_kvcache_size(c, &bytes), want);
    pb_kvcache *out = (pb_kvcache *)(void *)&ca;
    assert_int_equal(pb_kvcache_create(c, &a, &out), want);
    if (want == PB_OK) {
        ca_check_created(&ca, out, bytes);
    } else {
        assert_null(out);
        assert_int_equal(bytes, (size_t)0x5A5A5A5Au);
        assert_int_equal(ca.alloc_calls, 0u);
    }
    assert_int_equal(ca.outstanding, 0u);
}

static void default_macro_and_null_agree(void **state) {
    (void)state;
    const pb_kvcache_config d = PB_KVCACHE_CONFIG_DEFAULT;
    assert_int_equal(d.struct_size, sizeof(pb_kvcache_config));
    assert_int_equal(sizeof(pb_kvcache_config), 64u);
    size_t a = 0, b = 0, c = 0;
    assert_int_equal(pb_kvcache_size(NULL, &a), PB_OK);
    assert_int_equal(pb_kvcache_size(&d, &b), PB_OK);
    assert_int_equal(pb_kvcache_pyramidkv_size(NULL, NULL, &c), PB_OK);
    assert_int_equal(a, b);
    assert_int_equal(a, c);
    expect_status(NULL, PB_OK);
    expect_status(&d, PB_OK);
}

static void struct_size_too_small(void **state) {
    (void)state;
    pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    c.struct_size = 63u;
    expect_status(&c, PB_ERR_PARAM);
    c.struct_size = 0u;
    expect_status(&c, PB_ERR_PARAM);
}

/* A newer caller's struct: the defaults, its own size, the tail zero. */
static newer_config newer_default(void) {
    newer_config n;
    memset(&n, 0, sizeof n);
    const pb_kvcache_config d = PB_KVCACHE_CONFIG_DEFAULT;
    n.known = d;
    n.known.struct_size = (uint32_t)sizeof n;
    return n;
}

static void newer_struct_with_zero_tail(void **state) {
    (void)state;
    newer_config n = newer_default();
    n.known.budget = 64u;
    n.known.recent_window = 4u;
    expect_status(&n.known, PB_OK);
    pb_kvcache *p = NULL;
    assert_int_equal(pb_kvcache_create(&n.known, NULL, &p), PB_OK);
    assert_int_equal(pb_kvcache_effective_budget(p), 64u);
    pb_kvcache_destroy(p);
}

static void newer_struct_with_set_tail(void **state) {
    (void)state;
    newer_config n = newer_default();
    n.future_field = 1u;
    expect_status(&n.known, PB_ERR_PARAM);
}

static void refused_fields(void **state) {
    (void)state;
    const pb_kvcache_config d = PB_KVCACHE_CONFIG_DEFAULT;
    pb_kvcache_config c = d;
    c.budget = 0u;
    expect_status(&c, PB_ERR_PARAM);
    c = d;
    c.pool = 2u;
    expect_status(&c, PB_ERR_PARAM);
    c = d;
    c.scorer = 99u;
    expect_status(&c, PB_ERR_PARAM);
    c = d;
    c.layer = 1u; /* num_layers 1 */
    expect_status(&c, PB_ERR_PARAM);
    c = d;
    c.capacity = c.recent_window + 1u;
    expect_status(&c, PB_ERR_PARAM);
    c = d;
    c.row_stores = 2u;
    expect_status(&c, PB_ERR_PARAM);
    c = d;
    c.row_stores = (uint32_t)PB_ROW_STORES_STREAMED;
    expect_status(&c, PB_OK);
}

static void null_arguments(void **state) {
    (void)state;
    assert_int_equal(pb_kvcache_create(NULL, NULL, NULL), PB_ERR_NULL);
    assert_int_equal(pb_kvcache_size(NULL, NULL), PB_ERR_NULL);
    /* out is checked before the config. */
    pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    c.struct_size = 1u;
    assert_int_equal(pb_kvcache_create(&c, NULL, NULL), PB_ERR_NULL);
    const pb_allocator lacking = {NULL, NULL, NULL};
    pb_kvcache *out = NULL;
    assert_int_equal(pb_kvcache_create(NULL, &lacking, &out), PB_ERR_PARAM);
    assert_null(out);
}

/* ------------------------------------------------------------------------ */
/* Explicit share                                                           */

static void explicit_share_is_the_effective_share(void **state) {
    (void)state;
    pb_kvcache_config c = pbt_kvcache_config(100u, 10u);
    const uint32_t shares[] = {1u, 10u, 11u, 57u, 100u, 1000u};
    const uint32_t want[] = {11u, 11u, 11u, 57u, 100u, 1000u};
    for (size_t i = 0; i < sizeof shares / sizeof shares[0]; ++i) {
        c.share = shares[i];
        pb_kvcache *p = NULL;
        assert_int_equal(pb_kvcache_create(&c, NULL, &p), PB_OK);
        assert_int_equal(pb_kvcache_effective_budget(p), want[i]);
        /* The default capacity holds max(effective, budget) + 1. */
        const size_t cap = (want[i] > 100u ? want[i] : 100u) + 1u;
        assert_int_equal(pb_kvcache_capacity(p), cap);
        pb_kvcache_destroy(p);
    }
}

/* Drives two instances with the same seeded steps and evicts; every evict's
 * victims and, at the end, every window score must agree bit for bit. */
static void drive_pair(pb_kvcache *a, pb_kvcache *b, pbt_rng *r,
                       uint32_t steps) {
    float attn[600];
    uint32_t va[600], vb[600];
    for (uint32_t pos = 1; pos <= steps; ++pos) {
        const size_t held = pb_kvcache_kept_count(a);
        assert_int_equal(held, pb_kvcache_kept_count(b));
        for (size_t i = 0; i < held; ++i)
            attn[i] = (pbt_below(r, 4u) == 0u)
                          ? 0.0f
                          : (float)pbt_below(r, 1000u) / 1000.0f;
        const pb_status sa = pb_kvcache_observe(a, pos, attn, held);
        assert_int_equal(sa, pb_kvcache_observe(b, pos, attn, held));
        if (sa == PB_ERR_FULL || pbt_below(r, 3u) == 0u) {
            const uint32_t ask = pbt_below(r, 400u);
            size_t na = 0, nb = 0;
            assert_int_equal(pb_kvcache_evict(a, ask, va, 600u, &na), PB_OK);
            assert_int_equal(pb_kvcache_evict(b, ask, vb, 600u, &nb), PB_OK);
            assert_int_equal(na, nb);
            assert_memory_equal(va, vb, na * sizeof va[0]);
            if (sa == PB_ERR_FULL) --pos;
        }
    }
    size_t n = 0;
    assert_int_equal(pb_kvcache_kept_positions(a, va, 600u, &n), PB_OK);
    for (size_t i = 0; i < n; ++i) {
        double sa = -1.0, sb = -2.0;
        assert_int_equal(pb_kvcache_window_score(a, va[i], &sa), PB_OK);
        assert_int_equal(pb_kvcache_window_score(b, va[i], &sb), PB_OK);
        assert_memory_equal(&sa, &sb, sizeof sa);
    }
}

static void released_and_versioned_doors_agree(void **state) {
    (void)state;
    pbt_rng r = {7u};
    for (int round = 0; round < 200; ++round) {
        pb_kvcache_pyramidkv_params p = PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
        p.budget = 8u + pbt_below(&r, 300u);
        p.num_layers = 1u + pbt_below(&r, 40u);
        p.layer = pbt_below(&r, p.num_layers);
        p.pyramid_ratio = 1u + pbt_below(&r, 8u);
        p.recent_window = pbt_below(&r, p.budget < 20u ? p.budget : 20u);
        p.obs_window = 1u + pbt_below(&r, 20u);
        p.pool_kernel = 1u + 2u * pbt_below(&r, 5u);
        pb_kvcache_options o = PB_KVCACHE_OPTIONS_DEFAULT;
        o.pool = pbt_below(&r, 2u);

        /* The versioned door with the same values, and with the share the
         * formula yields given explicitly. */
        pb_kvcache_config c = ref_config_of(&p, &o);
        if (round % 2 == 1) {
            c.share = pb_kvcache_pyramid_budget(p.budget, p.layer,
                                                p.num_layers,
                                                p.pyramid_ratio);
            if (c.share == 0u) continue;
            /* Any layer position: the explicit share decides alone. */
            c.layer = 0u;
            c.num_layers = 1u;
        }
        size_t sa = 0, sb = 0;
        assert_int_equal(pb_kvcache_pyramidkv_size(&p, &o, &sa), PB_OK);
        assert_int_equal(pb_kvcache_size(&c, &sb), PB_OK);
        assert_int_equal(sa, sb);
        pb_kvcache *a = NULL, *b = NULL;
        assert_int_equal(pb_kvcache_pyramidkv_create(&p, &o, NULL, &a), PB_OK);
        assert_int_equal(pb_kvcache_create(&c, NULL, &b), PB_OK);
        assert_int_equal(pb_kvcache_effective_budget(a),
                         pb_kvcache_effective_budget(b));
        drive_pair(a, b, &r, 150u + pbt_below(&r, 300u));
        pb_kvcache_destroy(a);
        pb_kvcache_destroy(b);
    }
}

PB_TEST_MAIN(cmocka_unit_test(default_macro_and_null_agree),
             cmocka_unit_test(struct_size_too_small),
             cmocka_unit_test(newer_struct_with_zero_tail),
             cmocka_unit_test(newer_struct_with_set_tail),
             cmocka_unit_test(refused_fields), cmocka_unit_test(null_arguments),
             cmocka_unit_test(explicit_share_is_the_effective_share),
             cmocka_unit_test(released_and_versioned_doors_agree))
