/*
 * test_qk_attention.c - the Q/K scorer (pyramidkv_runtime.h) against the
 * naive reference of qk_reference.c on random shapes, strides, key types,
 * groups, reductions and scales; a hand-computed case; and the feeds:
 * pb_qk_observe and pb_qk_prefill decide exactly as pb_kvcache_observe
 * and pb_kvcache_prefill given pb_qk_attention's rows.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyramidkv/pyramidkv.h"
#include "qk_reference.h"
#include "test_configs.h"
#include "test_rng.h"
#include "test_main.h"

/* A random float of a few magnitudes, with exact zeros now and then. */
static float draw(pbt_rng *g) {
    const uint32_t c = pbt_below(g, 16u);
    if (c == 0u) return 0.0f;
    const double u = pbt_unit(g) * 2.0 - 1.0;
    return (float)(c < 12u ? u * 2.0 : u * 8.0);
}

/* A random key element of type t in bits, finite. */
static uint16_t draw16(pbt_rng *g, uint32_t t) {
    for (;;) {
        const uint16_t h = (uint16_t)pbt_below(g, 65536u);
        const double v = t == PB_KEYS_F16 ? qkr_f16(h) : qkr_bf16(h);
        if (isfinite(v) && fabs(v) < 16.0) return h;
    }
}

static void one_case(pbt_rng *g, int verbose) {
    const size_t d = 1u + pbt_below(g, 40u);
    const size_t group = 1u + pbt_below(g, 5u);
    const uint32_t t = pbt_below(g, 3u);
    const uint32_t reduce = pbt_below(g, 3u);
    const size_t n_keys = 1u + pbt_below(g, 70u);
    const size_t rows = 1u + pbt_below(g, (uint32_t)(n_keys < 9u ? n_keys : 9u));
    const size_t k_stride = d + pbt_below(g, 3u);
    const size_t q_row_stride = d + pbt_below(g, 3u);
    const size_t q_head_stride = rows * q_row_stride + pbt_below(g, 5u);
    const float scale = pbt_below(g, 2u) ? 0.0f : (float)(0.05 + pbt_unit(g));

    pb_qk_config c = PB_QK_CONFIG_DEFAULT;
    c.head_dim = (uint32_t)d;
    c.group = (uint32_t)group;
    c.key_type = t;
    c.reduce = reduce;
    c.scale = scale;
    c.max_keys = (uint32_t)(n_keys + pbt_below(g, 4u));
    c.max_rows = (uint32_t)(rows + pbt_below(g, 3u));
    pb_qk *qk = NULL;
    assert_int_equal(pb_qk_create(&c, NULL, &qk), PB_OK);

    float *q = calloc(group * q_head_stride, sizeof *q);
    for (size_t i = 0; i < group * q_head_stride; ++i) q[i] = draw(g);
    const size_t elem = t == PB_KEYS_F32 ? 4u : 2u;
    void *k = calloc(n_keys * k_stride, elem);
    for (size_t i = 0; i < n_keys * k_stride; ++i) {
        if (t == PB_KEYS_F32)
            ((float *)k)[i] = draw(g);
        else
            ((uint16_t *)k)[i] = draw16(g, t);
    }
    float *out = malloc(rows * n_keys * sizeof *out);
    double *want = malloc(rows * n_keys * sizeof *want);
    assert_int_equal(pb_qk_attention(qk, q, q_head_stride, q_row_stride, rows,
                                     k, k_stride, n_keys, out),
                     PB_OK);
    qkr_attention(d, group, t, reduce, (double)scale, q, q_head_stride,
                  q_row_stride, rows, k, k_stride, n_keys, want);
    for (size_t i = 0; i < rows * n_keys; ++i) {
        if (!qkr_close(out[i], want[i]) || verbose)
            fprintf(stderr,
                    "d %zu group %zu type %u reduce %u keys %zu rows %zu "
                    "cell %zu: got %.9g want %.9g\n",
                    d, group, t, reduce, n_keys, rows, i, (double)out[i],
                    want[i]);
        assert_true(qkr_close(out[i], want[i]));
    }
    /* Determinism: the same call gives the same bits. */
    float *again = malloc(rows * n_keys * sizeof *again);
    assert_int_equal(pb_qk_attention(qk, q, q_head_stride, q_row_stride, rows,
                                     k, k_stride, n_keys, again),
                     PB_OK);
    assert_memory_equal(out, again, rows * n_keys * sizeof *out);
    free(again);
    free(out);
    free(want);
    free(k);
    free(q);
    pb_qk_destroy(qk);
}

static void differential_random(void **state) {
    (void)state;
    pbt_rng g = {20261203u};
    for (int i = 0; i < 400; ++i) one_case(&g, 0);
}

/* A Q/K scorer over f32 keys at the default scale, created with malloc. */
static pb_qk *qk_made(uint32_t d, uint32_t group, uint32_t reduce,
                      uint32_t max_keys, uint32_t max_rows) {
    pb_qk_config c = PB_QK_CONFIG_DEFAULT;
    c.head_dim = d;
    c.group = group;
    c.reduce = reduce;
    c.max_keys = max_keys;
    c.max_rows = max_rows;
    pb_qk *qk = NULL;
    assert_int_equal(pb_qk_create(&c, NULL, &qk), PB_OK);
    return qk;
}

/* d 2, one head, scale 1: q = (1, 0), keys (0, 5), (1, -3), (0, 0):
 * logits 0, 1, 0; weights 1/(2+e), e/(2+e), 1/(2+e). */
static void hand_case(void **state) {
    (void)state;
    pb_qk_config c = PB_QK_CONFIG_DEFAULT;
    c.head_dim = 2u;
    c.scale = 1.0f;
    c.max_keys = 3u;
    pb_qk *qk = NULL;
    assert_int_equal(pb_qk_create(&c, NULL, &qk), PB_OK);
    const float q[2] = {1.0f, 0.0f};
    const float k[6] = {0.0f, 5.0f, 1.0f, -3.0f, 0.0f, 0.0f};
    float out[3];
    assert_int_equal(pb_qk_attention(qk, q, 0u, 0u, 1u, k, 2u, 3u, out), PB_OK);
    const double e = exp(1.0);
    assert_true(qkr_close(out[0], 1.0 / (2.0 + e)));
    assert_true(qkr_close(out[1], e / (2.0 + e)));
    assert_true(out[0] == out[2]);
    /* Two rows, causal: row 0 is the query of key 1 and sees keys 0, 1. */
    float q2[4] = {1.0f, 0.0f, 1.0f, 0.0f};
    float out2[6];
    assert_int_equal(pb_qk_attention(qk, q2, 0u, 2u, 2u, k, 2u, 3u, out2),
                     PB_OK);
    assert_true(qkr_close(out2[0], 1.0 / (1.0 + e)));
    assert_true(qkr_close(out2[1], e / (1.0 + e)));
    assert_true(out2[2] == 0.0f);
    assert_memory_equal(out2 + 3, out, sizeof out);
    pb_qk_destroy(qk);
}

/* The decode feed: pb_qk_observe on one instance, pb_qk_attention +
 * pb_kvcache_observe on another, for every scorer: the same victims. */
static void observe_feed_equals(void **state) {
    (void)state;
    enum { D = 16, G = 4, STEPS = 120 };
    for (uint32_t scorer = 0; scorer <= (uint32_t)PB_SCORER_NONE; ++scorer) {
        pbt_rng g = {7u + scorer};
        pb_kvcache_config cfg = pbt_kvcache_config(24u, 4u);
        cfg.obs_window = 5u;
        cfg.pool_kernel = 3u;
        cfg.scorer = scorer;
        pb_kvcache *a = NULL, *b = NULL;
        assert_int_equal(pb_kvcache_create(&cfg, NULL, &a), PB_OK);
        assert_int_equal(pb_kvcache_create(&cfg, NULL, &b), PB_OK);
        pb_qk *qk = qk_made(D, G, PB_HEAD_REDUCE_MEAN, 64u, 32u);
        static float keys[64 * D], q[G * D];
        float row[64];
        uint32_t kept[64];
        size_t held = 1;
        for (size_t j = 0; j < D; ++j) keys[j] = draw(&g);
        for (uint32_t pos = 1; pos < STEPS; ++pos) {
            for (size_t j = 0; j < G * D; ++j) q[j] = draw(&g);
            for (size_t j = 0; j < D; ++j) keys[held * D + j] = draw(&g);
            /* with the new token's own key (held + 1 keys) */
            assert_int_equal(pb_qk_observe(qk, a, pos, q, D, keys, D,
                                           held + 1u),
                             PB_OK);
            assert_int_equal(
                pb_qk_attention(qk, q, D, 0u, 1u, keys, D, held + 1u, row),
                PB_OK);
            assert_int_equal(pb_kvcache_observe(b, pos, row, held), PB_OK);
            uint32_t va[64], vb[64], slots[64];
            size_t na = 0, nb = 0;
            assert_int_equal(pb_kvcache_evict_slots(
                                 a, PB_KVCACHE_BUDGET_SHARE, va, slots, 64u,
                                 &na),
                             PB_OK);
            assert_int_equal(pb_kvcache_evict_to_share(b, vb, 64u, &nb),
                             PB_OK);
            assert_int_equal(na, nb);
            assert_memory_equal(va, vb, na * sizeof *va);
            held += 1u;
            assert_int_equal(pb_kvcache_compact_rows(slots, na, held, keys,
                                                     D * sizeof(float),
                                                     D * sizeof(float), NULL,
                                                     0u, 0u),
                             PB_OK);
            held -= na;
            size_t n = 0;
            assert_int_equal(pb_kvcache_kept_positions(a, kept, 64u, &n),
                             PB_OK);
            assert_int_equal(n, held);
        }
        assert_int_equal(held, pb_kvcache_effective_budget(a));
        pb_qk_destroy(qk);
        pb_kvcache_destroy(a);
        pb_kvcache_destroy(b);
    }
}

/* The prefill feed: pb_qk_prefill against pb_qk_attention +
 * pb_kvcache_prefill. */
static void prefill_feed_equals(void **state) {
    (void)state;
    enum { D = 8, G = 2, LEN = 200, ROWS = 8 };
    pbt_rng g = {99u};
    static float keys[LEN * D], q[G * ROWS * D], block[ROWS * LEN];
    for (size_t j = 0; j < LEN * D; ++j) keys[j] = draw(&g);
    for (size_t j = 0; j < G * ROWS * D; ++j) q[j] = draw(&g);
    pb_kvcache_config cfg = pbt_kvcache_config(64u, ROWS);
    cfg.obs_window = ROWS;
    cfg.prefill_max_len = LEN;
    for (uint32_t scope = 0; scope < 2u; ++scope) {
        cfg.prefill_scope = scope;
        pb_kvcache *a = NULL, *b = NULL;
        assert_int_equal(pb_kvcache_create(&cfg, NULL, &a), PB_OK);
        assert_int_equal(pb_kvcache_create(&cfg, NULL, &b), PB_OK);
        pb_qk *qk = qk_made(D, G, PB_HEAD_REDUCE_MAX, LEN, ROWS);
        uint32_t ka[LEN], kb[LEN];
        size_t na = 0, nb = 0;
        assert_int_equal(pb_qk_prefill(qk, a, q, ROWS * D, D, ROWS, keys, D,
                                       LEN, PB_KVCACHE_BUDGET_SHARE, ka, LEN,
                                       NULL, 0u, &na),
                         PB_OK);
        assert_int_equal(pb_qk_attention(qk, q, ROWS * D, D, ROWS, keys, D,
                                         LEN, block),
                         PB_OK);
        assert_int_equal(pb_kvcache_prefill(b, block, ROWS, LEN,
                                            PB_KVCACHE_BUDGET_SHARE, NULL, 0u,
                                            kb, LEN, NULL, 0u, &nb),
                         PB_OK);
        assert_int_equal(na, nb);
        assert_int_equal(na, pb_kvcache_effective_budget(a));
        assert_memory_equal(ka, kb, na * sizeof *ka);
        pb_qk_destroy(qk);
        pb_kvcache_destroy(a);
        pb_kvcache_destroy(b);
    }
}

/* pb_qk_size is what create asks the allocator for. */
static size_t last_alloc;
static void *count_alloc(void *ctx, size_t n) {
    (void)ctx;
    last_alloc = n;
    return malloc(n);
}
static void count_free(void *ctx, void *p, size_t n) {
    (void)ctx;
    assert_int_equal(n, last_alloc);
    free(p);
}

static void size_is_allocation(void **state) {
    (void)state;
    const pb_allocator a = {count_alloc, count_free, NULL};
    pb_qk_config c = PB_QK_CONFIG_DEFAULT;
    c.group = 4u;
    c.max_keys = 1000u;
    size_t bytes = 0;
    assert_int_equal(pb_qk_size(&c, &bytes), PB_OK);
    pb_qk *qk = NULL;
    assert_int_equal(pb_qk_create(&c, &a, &qk), PB_OK);
    assert_int_equal(bytes, last_alloc);
    pb_qk_destroy(qk);
    pb_qk_destroy(NULL);
}

PB_TEST_MAIN(cmocka_unit_test(differential_random), cmocka_unit_test(hand_case),
             cmocka_unit_test(observe_feed_equals),
             cmocka_unit_test(prefill_feed_equals),
             cmocka_unit_test(size_is_allocation))
