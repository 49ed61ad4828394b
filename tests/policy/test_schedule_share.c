/*
 * test_schedule_share.c - any schedule drives any instance: a layer's share
 * from pb_kvcache_schedule_shares, given to pb_kvcache_create as an
 * explicit share, makes an instance that decides exactly like one whose
 * pyramid formula yields that share (pb_kvcache_pyramidkv_create with one
 * layer and that budget). Same victims at every evict, same held positions,
 * same window scores bit for bit, same effective share, on seeded random
 * decode streams, for every schedule kind.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "pyramidkv/pyramidkv.h"
#include "test_rng.h"
#include "test_main.h"

#define MAX_HELD 700u

static void drive_pair(pb_kvcache *a, pb_kvcache *b, pbt_rng *r,
                       uint32_t steps, uint32_t ask_max) {
    static float attn[MAX_HELD];
    static uint32_t va[MAX_HELD], vb[MAX_HELD];
    for (uint32_t pos = 1; pos <= steps; ++pos) {
        const size_t held = pb_kvcache_kept_count(a);
        assert_int_equal(held, pb_kvcache_kept_count(b));
        assert_true(held <= MAX_HELD);
        for (size_t i = 0; i < held; ++i)
            attn[i] = pbt_below(r, 5u) == 0u
                          ? 0.0f
                          : (float)pbt_below(r, 64u) / 64.0f; /* ties */
        const pb_status sa = pb_kvcache_observe(a, pos, attn, held);
        assert_int_equal(sa, pb_kvcache_observe(b, pos, attn, held));
        if (sa == PB_ERR_FULL || pbt_below(r, 4u) == 0u) {
            const uint32_t ask = pbt_below(r, 4u) == 0u
                                     ? UINT32_MAX
                                     : pbt_below(r, ask_max + 1u);
            size_t na = 0, nb = 0;
            assert_int_equal(pb_kvcache_evict(a, ask, va, MAX_HELD, &na),
                             PB_OK);
            assert_int_equal(pb_kvcache_evict(b, ask, vb, MAX_HELD, &nb),
                             PB_OK);
            assert_int_equal(na, nb);
            assert_memory_equal(va, vb, na * sizeof va[0]);
            if (sa == PB_ERR_FULL) --pos;
        }
    }
    size_t na = 0, nb = 0;
    assert_int_equal(pb_kvcache_kept_positions(a, va, MAX_HELD, &na), PB_OK);
    assert_int_equal(pb_kvcache_kept_positions(b, vb, MAX_HELD, &nb), PB_OK);
    assert_int_equal(na, nb);
    assert_memory_equal(va, vb, na * sizeof va[0]);
    for (size_t i = 0; i < na; ++i) {
        double sa = -1.0, sb = -2.0;
        assert_int_equal(pb_kvcache_window_score(a, va[i], &sa), PB_OK);
        assert_int_equal(pb_kvcache_window_score(b, va[i], &sb), PB_OK);
        assert_memory_equal(&sa, &sb, sizeof sa);
    }
}

static pb_schedule random_schedule(pbt_rng *r, uint32_t kind, uint32_t *w) {
    pb_schedule s = PB_SCHEDULE_DEFAULT;
    s.kind = kind;
    s.num_layers = 1u + pbt_below(r, 40u);
    s.budget = 16u + pbt_below(r, 300u);
    s.ratio = 1u + pbt_below(r, 10u);
    s.window = pbt_below(r, 12u);
    s.beta = 1u + pbt_below(r, 30u);
    s.prompt_len = pbt_below(r, 3u) == 0u ? s.budget + pbt_below(r, 900u) : 0u;
    s.sinks = pbt_below(r, 6u);
    s.taper_beta = 1.0 + (double)pbt_below(r, 40u) * 0.125;
    s.gamma_milli = 100u + pbt_below(r, 2000u);
    for (uint32_t l = 0; l < s.num_layers; ++l) w[l] = pbt_below(r, 50u);
    w[pbt_below(r, s.num_layers)] = 7u;
    s.weights = w;
    s.min_share = pbt_below(r, 8u);
    return s;
}

static void explicit_share_decides_like_the_formula(void **state) {
    (void)state;
    pbt_rng r = {0x5A4E5u};
    uint32_t w[64], shares[64];
    int driven[PB_SCHEDULE_PROFILE + 1] = {0};
    for (int round = 0; round < 480; ++round) {
        const uint32_t kind = (uint32_t)round % (PB_SCHEDULE_PROFILE + 1u);
        const pb_schedule s = random_schedule(&r, kind, w);
        uint64_t total = 0;
        assert_int_equal(pb_kvcache_schedule_shares(&s, shares, 64u, &total),
                         PB_OK);
        const uint32_t l = pbt_below(&r, s.num_layers);
        const uint32_t share = shares[l];
        if (share < 2u) continue; /* 0 means "the formula"; need recent < */
        const uint32_t recent = pbt_below(&r, share < 24u ? share : 24u);
        const uint32_t capacity =
            (share > recent + 1u ? share : recent + 1u) + 1u +
            pbt_below(&r, 40u);

        /* a: the formula yields the share (one layer, budget = share). */
        pb_kvcache_pyramidkv_params p = PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
        p.budget = share;
        p.num_layers = 1u;
        p.recent_window = recent;
        p.obs_window = 1u + pbt_below(&r, 12u);
        p.pool_kernel = 1u + 2u * pbt_below(&r, 4u);
        pb_kvcache_options o = PB_KVCACHE_OPTIONS_DEFAULT;
        o.capacity = capacity;
        o.pool = pbt_below(&r, 2u);

        /* b: the schedule's own budget, layer and layer count, the pyramid
         * ratio of the schedule, and the share given explicitly. */
        pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
        c.budget = s.budget > recent ? s.budget : recent + 1u;
        c.layer = l;
        c.num_layers = s.num_layers;
        c.pyramid_ratio = s.ratio;
        c.share = share;
        c.recent_window = recent;
        c.obs_window = p.obs_window;
        c.pool_kernel = p.pool_kernel;
        c.pool = o.pool;
        c.capacity = capacity;

        pb_kvcache *a = NULL, *b = NULL;
        assert_int_equal(pb_kvcache_pyramidkv_create(&p, &o, NULL, &a), PB_OK);
        assert_int_equal(pb_kvcache_create(&c, NULL, &b), PB_OK);
        assert_int_equal(pb_kvcache_effective_budget(a), share);
        assert_int_equal(pb_kvcache_effective_budget(b), share);
        drive_pair(a, b, &r, 200u + pbt_below(&r, 400u), 2u * share);
        pb_kvcache_destroy(a);
        pb_kvcache_destroy(b);
        driven[kind]++;
    }
    for (uint32_t k = 0; k <= PB_SCHEDULE_PROFILE; ++k) {
        print_message("%s: %d instance pairs\n", pb_schedule_kind_name(k),
                      driven[k]);
        assert_true(driven[k] >= 40);
    }
}

PB_TEST_MAIN(cmocka_unit_test(explicit_share_decides_like_the_formula))
