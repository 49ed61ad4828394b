/*
 * test_runtime_loop.c - the runtime helpers without Q/K: victims as slots
 * (pb_kvcache_evict_slots against the held order read before the evict,
 * over every evict path: one victim, batches, holes), the compaction of
 * strided rows of odd sizes against a naive copy, and the decode loop of
 * the README (32 layers, average 512, ratio 4) ending with every layer at
 * exactly its share.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "pyramidkv/pyramidkv.h"
#include "test_configs.h"
#include "test_rng.h"
#include "test_main.h"

static void random_row(pbt_rng *g, float *w, size_t n) {
    for (size_t i = 0; i < n; ++i)
        w[i] = pbt_below(g, 5u) == 0u ? 0.0f : (float)pbt_unit(g);
}

/* Every scorer, capacity well above the share so that evicts come one at a
 * time (cadence 1) and in batches (a full instance): the slots are the
 * victims' indices in the held order just before the evict. */
static void slots_are_old_ranks(void **state) {
    (void)state;
    enum { CAP = 160 };
    for (uint32_t scorer = 0; scorer <= (uint32_t)PB_SCORER_NONE; ++scorer) {
        pbt_rng g = {11u + scorer};
        pb_kvcache_config c = pbt_kvcache_config(64u, 8u);
        c.obs_window = 4u;
        c.pool_kernel = 1u + 2u * pbt_below(&g, 3u);
        c.capacity = CAP;
        c.scorer = scorer;
        c.sinks = scorer == 0u ? 0u : 2u;
        pb_kvcache *p = NULL;
        assert_int_equal(pb_kvcache_create(&c, NULL, &p), PB_OK);
        static float w[CAP];
        uint32_t before[CAP], victims[CAP], slots[CAP];
        for (uint32_t pos = 1; pos < 3000u; ++pos) {
            const size_t held = pb_kvcache_kept_count(p);
            random_row(&g, w, held);
            assert_int_equal(pb_kvcache_observe(p, pos, w, held), PB_OK);
            /* evict now and then (batches), or every step */
            const int now = pos < 1500u ? pbt_below(&g, 40u) == 0u ||
                                              held + 1u == CAP
                                        : 1;
            if (!now) continue;
            size_t n_before = 0, n = 0;
            assert_int_equal(
                pb_kvcache_kept_positions(p, before, CAP, &n_before), PB_OK);
            const uint32_t budget =
                pbt_below(&g, 4u) == 0u ? 40u : PB_KVCACHE_BUDGET_SHARE;
            assert_int_equal(pb_kvcache_evict_slots(p, budget, victims, slots,
                                                    CAP, &n),
                             PB_OK);
            for (size_t j = 0; j < n; ++j) {
                assert_true(slots[j] < n_before);
                assert_int_equal(before[slots[j]], victims[j]);
                if (j > 0u) assert_true(slots[j] > slots[j - 1u]);
            }
            assert_int_equal(pb_kvcache_kept_count(p), n_before - n);
        }
        /* victims NULL: the slots alone */
        const size_t held = pb_kvcache_kept_count(p);
        random_row(&g, w, held);
        assert_int_equal(pb_kvcache_observe(p, 5000u, w, held), PB_OK);
        size_t n = 0;
        assert_int_equal(pb_kvcache_evict_slots(p, 10u, NULL, slots, CAP, &n),
                         PB_OK);
        pb_kvcache_destroy(p);
    }
}

/* Too small a buffer: PB_ERR_BUFFER with the count, nothing written. */
static void slots_buffer_too_small(void **state) {
    (void)state;
    pb_kvcache_config c = pbt_kvcache_config(8u, 2u);
    c.capacity = 20u;
    pb_kvcache *p = NULL;
    assert_int_equal(pb_kvcache_create(&c, NULL, &p), PB_OK);
    float w[20] = {0};
    for (uint32_t pos = 1; pos < 15u; ++pos)
        assert_int_equal(pb_kvcache_observe(p, pos, w, pb_kvcache_kept_count(p)),
                         PB_OK);
    uint32_t slots[4] = {7u, 7u, 7u, 7u};
    size_t n = 0;
    assert_int_equal(pb_kvcache_evict_slots(p, 8u, NULL, slots, 4u, &n),
                     PB_ERR_BUFFER);
    assert_int_equal(n, 7u);
    assert_int_equal(slots[0], 7u);
    assert_int_equal(pb_kvcache_kept_count(p), 15u);
    assert_int_equal(pb_kvcache_evict_slots(NULL, 8u, NULL, slots, 4u, &n),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_evict_slots(p, 8u, NULL, NULL, 4u, &n),
                     PB_ERR_NULL);
    pb_kvcache_destroy(p);
}

/* Rows of 3, 5 and 7 bytes in strides of 3, 8 and 11: each byte tagged
 * with its row; after compaction the survivors are in order, the bytes
 * between rows untouched. */
static void compact_odd_strides(void **state) {
    (void)state;
    const size_t shapes[3][2] = {{3u, 3u}, {5u, 8u}, {7u, 11u}};
    pbt_rng g = {3u};
    for (int round = 0; round < 300; ++round) {
        const size_t n_rows = 1u + pbt_below(&g, 60u);
        const size_t *ks = shapes[pbt_below(&g, 3u)];
        const size_t *vs = shapes[pbt_below(&g, 3u)];
        unsigned char *k = malloc(n_rows * ks[1]), *v = malloc(n_rows * vs[1]);
        unsigned char *k0 = malloc(n_rows * ks[1]), *v0 = malloc(n_rows * vs[1]);
        for (size_t r = 0; r < n_rows; ++r) {
            memset(k + r * ks[1], 0xEE, ks[1]);
            memset(v + r * vs[1], 0xEE, vs[1]);
            for (size_t b = 0; b < ks[0]; ++b)
                k[r * ks[1] + b] = (unsigned char)(r * 3u + b);
            for (size_t b = 0; b < vs[0]; ++b)
                v[r * vs[1] + b] = (unsigned char)(r * 5u + b + 1u);
        }
        memcpy(k0, k, n_rows * ks[1]);
        memcpy(v0, v, n_rows * vs[1]);
        uint32_t slots[60];
        size_t n_slots = 0;
        for (size_t r = 0; r < n_rows; ++r)
            if (pbt_below(&g, 3u) == 0u) slots[n_slots++] = (uint32_t)r;
        assert_int_equal(pb_kvcache_compact_rows(slots, n_slots, n_rows, k,
                                                 ks[0], ks[1], v, vs[0],
                                                 vs[1]),
                         PB_OK);
        size_t to = 0, s = 0;
        for (size_t r = 0; r < n_rows; ++r) {
            if (s < n_slots && slots[s] == r) {
                ++s;
                continue;
            }
            assert_memory_equal(k + to * ks[1], k0 + r * ks[1], ks[0]);
            assert_memory_equal(v + to * vs[1], v0 + r * vs[1], vs[0]);
            for (size_t b = ks[0]; b < ks[1]; ++b)
                assert_int_equal(k[to * ks[1] + b], 0xEE);
            ++to;
        }
        /* the rows past the survivors are as they were */
        for (size_t r = to; r < n_rows; ++r) {
            assert_memory_equal(k + r * ks[1], k0 + r * ks[1], ks[1]);
            assert_memory_equal(v + r * vs[1], v0 + r * vs[1], vs[1]);
        }
        free(k);
        free(v);
        free(k0);
        free(v0);
    }
}

/* The README's loop: every layer of 32 (average 512, ratio 4) driven
 * past its share with pb_kvcache_evict_to_share ends at exactly its share
 * (819 for layer 0 ... 204 for layer 31), the pyramid intact. */
static void readme_loop_keeps_every_share(void **state) {
    (void)state;
    enum { L = 32, STEPS = 1000 };
    uint32_t shares[L];
    assert_int_equal(pb_kvcache_pyramid_budgets(512u, L, 4u, shares, L), PB_OK);
    static float w[1024];
    pbt_rng g = {17u};
    for (uint32_t layer = 0; layer < L; ++layer) {
        pb_kvcache_pyramidkv_params p = PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
        p.budget = 512u;
        p.layer = layer;
        p.num_layers = L;
        p.pyramid_ratio = 4u;
        pb_kvcache *c = NULL;
        assert_int_equal(pb_kvcache_pyramidkv_create(&p, NULL, NULL, &c), PB_OK);
        for (uint32_t pos = 1; pos < STEPS; ++pos) {
            const size_t held = pb_kvcache_kept_count(c);
            random_row(&g, w, held);
            assert_int_equal(pb_kvcache_observe(c, pos, w, held), PB_OK);
            uint32_t victims[64];
            size_t n = 0;
            assert_int_equal(pb_kvcache_evict_to_share(c, victims, 64u, &n),
                             PB_OK);
        }
        assert_int_equal(pb_kvcache_kept_count(c), shares[layer]);
        pb_kvcache_destroy(c);
    }
}

PB_TEST_MAIN(cmocka_unit_test(slots_are_old_ranks),
             cmocka_unit_test(slots_buffer_too_small),
             cmocka_unit_test(compact_odd_strides),
             cmocka_unit_test(readme_loop_keeps_every_share))
