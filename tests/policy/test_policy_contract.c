/*
 * test_policy_contract.c - the per-layer policy's parameters and capacity
 * (docs/spec.md section 3), the error contract of every native function
 * (status, and the instance unchanged: section 9), memory accounting
 * against a counting allocator, and both policybook vtables (section 10).
 * The rules of a decode step and an evict are test_policy_rules.c's.
 *
 * Expected values are worked out by hand in the comments; none is taken
 * from the code under test.
 */
#include <math.h>
#include <stdlib.h>

#include "policy_rules_helpers.h"
#include "test_main.h"

/* ------------------------------------------------------------------------ */
/* Parameters and capacity                                                  */

static void refused_params(void **state) {
    (void)state;
    const pb_kvcache_pyramidkv_params good =
        PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
    pb_kvcache_pyramidkv_params bad[12];
    size_t nb = 0;
    bad[nb] = good, bad[nb++].budget = 0;
    bad[nb] = good, bad[nb++].budget = UINT32_MAX;
    bad[nb] = good, bad[nb++].num_layers = 0;
    bad[nb] = good, bad[nb].num_layers = 4, bad[nb++].layer = 4;
    bad[nb] = good, bad[nb++].pyramid_ratio = 0;
    bad[nb] = good, bad[nb++].recent_window = 512; /* == budget */
    bad[nb] = good, bad[nb++].obs_window = 0;
    bad[nb] = good, bad[nb++].pool_kernel = 0;
    bad[nb] = good, bad[nb++].pool_kernel = 8;
    for (size_t i = 0; i < nb; ++i) {
        pb_kvcache *k = (pb_kvcache *)&bad[i]; /* must be reset to NULL */
        assert_int_equal(pb_kvcache_pyramidkv_create(&bad[i], NULL, NULL, &k),
                         PB_ERR_PARAM);
        assert_null(k);
        size_t bytes = 77;
        assert_int_equal(pb_kvcache_pyramidkv_size(&bad[i], NULL, &bytes),
                         PB_ERR_PARAM);
        assert_int_equal(bytes, 77);
        assert_null(pb_kvcache_pyramidkv.create(&bad[i], NULL, NULL));
    }
    /* Options. */
    pb_kvcache_options o = PB_KVCACHE_OPTIONS_DEFAULT;
    pb_kvcache *k = NULL;
    o.pool = 2;
    assert_int_equal(pb_kvcache_pyramidkv_create(NULL, &o, NULL, &k),
                     PB_ERR_PARAM);
    o.pool = 0, o.prefill_scope = 2;
    assert_int_equal(pb_kvcache_pyramidkv_create(NULL, &o, NULL, &k),
                     PB_ERR_PARAM);
    o.prefill_scope = 1, o.capacity = 33; /* recent 32 needs >= 34 */
    assert_int_equal(pb_kvcache_pyramidkv_create(NULL, &o, NULL, &k),
                     PB_ERR_PARAM);
    o.capacity = 34;
    assert_int_equal(pb_kvcache_pyramidkv_create(NULL, &o, NULL, &k), PB_OK);
    assert_int_equal(pb_kvcache_capacity(k), 34);
    pb_kvcache_destroy(k);
    /* Boundary values that are accepted. */
    pb_kvcache_pyramidkv_params edge = good;
    edge.budget = 1, edge.recent_window = 0, edge.obs_window = 1;
    edge.pool_kernel = 1;
    assert_int_equal(pb_kvcache_pyramidkv_create(&edge, NULL, NULL, &k),
                     PB_OK);
    assert_int_equal(pb_kvcache_effective_budget(k), 1);
    assert_int_equal(pb_kvcache_capacity(k), 2);
    pb_kvcache_destroy(k);
    /* NULL out, and an allocator that lacks a function. */
    assert_int_equal(pb_kvcache_pyramidkv_create(NULL, NULL, NULL, NULL),
                     PB_ERR_NULL);
    const pb_allocator half = {NULL, NULL, NULL};
    assert_int_equal(pb_kvcache_pyramidkv_create(NULL, NULL, &half, &k),
                     PB_ERR_PARAM);
    assert_null(k);
    size_t bytes = 0;
    assert_int_equal(pb_kvcache_pyramidkv_size(NULL, NULL, NULL), PB_ERR_NULL);
    assert_int_equal(pb_kvcache_pyramidkv_size(NULL, NULL, &bytes), PB_OK);
    assert_true(bytes > 0);
}

static void too_large_is_reported(void **state) {
    (void)state;
    pb_kvcache_pyramidkv_params p = PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
    p.obs_window = UINT32_MAX;
    pb_kvcache_options o = PB_KVCACHE_OPTIONS_DEFAULT;
    o.capacity = UINT32_MAX;
    size_t bytes = 5;
    /* 2^32 rows of 2^32 floats: beyond any size_t. */
    assert_int_equal(pb_kvcache_pyramidkv_size(&p, &o, &bytes),
                     PB_ERR_TOO_LARGE);
    assert_int_equal(bytes, 5);
    pb_kvcache *k = NULL;
    assert_int_equal(pb_kvcache_pyramidkv_create(&p, &o, NULL, &k),
                     PB_ERR_TOO_LARGE);
    assert_null(k);
}

static void default_capacity_and_full(void **state) {
    (void)state;
    /* Layer 0 of 3, ratio 2, budget 6: share 8 -> capacity 9. */
    const pb_kvcache_pyramidkv_params p = params_of(6, 0, 3, 2, 1, 8, 1);
    pb_kvcache *k = make(&p, NULL);
    assert_int_equal(pb_kvcache_capacity(k), 9);
    float w[9] = {0};
    for (uint32_t pos = 1; pos <= 8; ++pos) observe_ok(k, pos, w, pos);
    assert_int_equal(pb_kvcache_kept_count(k), 9);
    const snapshot before = snap(k);
    assert_int_equal(pb_kvcache_observe(k, 9, w, 9), PB_ERR_FULL);
    assert_int_equal(pb_kvcache_observe(k, 9, NULL, 0), PB_ERR_FULL);
    same_as(k, &before);
    /* The vtable step is silently refused the same way. */
    pb_kvcache_pyramidkv.on_decode_step(k, 9, w, 9);
    same_as(k, &before);
    pb_kvcache_destroy(k);
    /* Layer 2 of 3: share 4 < budget 6 -> capacity 7. */
    const pb_kvcache_pyramidkv_params q = params_of(6, 2, 3, 2, 1, 8, 1);
    k = make(&q, NULL);
    assert_int_equal(pb_kvcache_capacity(k), 7);
    pb_kvcache_destroy(k);
}

static void explicit_capacity_batches_evictions(void **state) {
    (void)state;
    const pb_kvcache_pyramidkv_params p = params_of(4, 0, 1, 4, 1, 4, 1);
    pb_kvcache_options o = PB_KVCACHE_OPTIONS_DEFAULT;
    o.capacity = 12;
    pb_kvcache *k = make(&p, &o);
    assert_int_equal(pb_kvcache_capacity(k), 12);
    float w[12];
    for (uint32_t pos = 1; pos <= 11; ++pos) {
        /* Position j receives weight j+1 in every step: older = higher. */
        for (uint32_t j = 0; j < pos; ++j) w[j] = (float)(pos - j);
        observe_ok(k, pos, w, pos);
    }
    assert_int_equal(pb_kvcache_observe(k, 12, NULL, 0), PB_ERR_FULL);
    /* Scores (obs 4: steps at pos 8..11) favour old positions; the newest
     * 11 is protected, so 8 = 12 - 4 go: positions 3..10. */
    const uint32_t v[] = {3, 4, 5, 6, 7, 8, 9, 10};
    evict_expect(k, 4, v, 8);
    const uint32_t kept[] = {0, 1, 2, 11};
    kept_expect(k, kept, 4);
    observe_ok(k, 12, NULL, 0);
    pb_kvcache_destroy(k);
}

/* ------------------------------------------------------------------------ */
/* Error contract                                                           */

static void observe_check_order(void **state) {
    (void)state;
    /* Share 2 (recent 1 keeps the newest): capacity 3. */
    const pb_kvcache_pyramidkv_params p = params_of(2, 0, 1, 4, 1, 4, 1);
    pb_kvcache *k = make(&p, NULL);
    const float nan1[] = {NAN};
    observe_ok(k, 1, (const float[]){.5f}, 1);
    observe_ok(k, 2, (const float[]){.5f, .5f}, 2);
    const snapshot before = snap(k);
    /* Full, wrong length, a NaN and an old position: POSITION first. */
    assert_int_equal(pb_kvcache_observe(k, 2, nan1, 1), PB_ERR_POSITION);
    assert_int_equal(pb_kvcache_observe(NULL, 2, nan1, 1), PB_ERR_NULL);
    assert_int_equal(pb_kvcache_observe(k, 3, nan1, 1), PB_ERR_LENGTH);
    const float bad3[][3] = {{1, NAN, 1}, {1, INFINITY, 1}, {1, -INFINITY, 1},
                             {-1e-30f, 1, 1}, {-1.0f, 1, 1}};
    for (size_t i = 0; i < 5; ++i)
        assert_int_equal(pb_kvcache_observe(k, 3, bad3[i], 3),
                         PB_ERR_WEIGHT);
    const float good3[] = {0.0f, -0.0f, 3.4e38f};
    assert_int_equal(pb_kvcache_observe(k, 3, good3, 3), PB_ERR_FULL);
    same_as(k, &before);
    /* Once there is room, the same call succeeds. */
    size_t n = 0;
    uint32_t v[4];
    assert_int_equal(pb_kvcache_evict(k, 2, v, 4, &n), PB_OK);
    assert_int_equal(n, 1);
    assert_int_equal(pb_kvcache_observe(k, UINT32_MAX, (const float[]){1, 1},
                                        2),
                     PB_OK);
    assert_int_equal(pb_kvcache_evict(k, 2, v, 4, &n), PB_OK);
    /* Nothing can follow UINT32_MAX. */
    assert_int_equal(pb_kvcache_observe(k, UINT32_MAX, NULL, 0),
                     PB_ERR_POSITION);
    pb_kvcache_destroy(k);
}

static void evict_buffer_and_null(void **state) {
    (void)state;
    const pb_kvcache_pyramidkv_params p = params_of(6, 2, 3, 2, 1, 8, 1);
    pb_kvcache *k = make(&p, NULL);
    feed_worked_steps(k);
    const snapshot before = snap(k);
    uint32_t v[3] = {0};
    size_t n = 0;
    assert_int_equal(pb_kvcache_evict(k, 6, v, 2, &n), PB_ERR_BUFFER);
    assert_int_equal(n, 3);
    assert_int_equal(pb_kvcache_evict(k, 6, NULL, 0, &n), PB_ERR_BUFFER);
    assert_int_equal(n, 3);
    same_as(k, &before);
    n = 42;
    assert_int_equal(pb_kvcache_evict(k, 6, NULL, 3, &n), PB_ERR_NULL);
    assert_int_equal(pb_kvcache_evict(k, 6, v, 3, NULL), PB_ERR_NULL);
    assert_int_equal(pb_kvcache_evict(NULL, 6, v, 3, &n), PB_ERR_NULL);
    assert_int_equal(n, 42);
    same_as(k, &before);
    /* The vtable returns 0 and changes nothing when capacity is short. */
    assert_int_equal(pb_kvcache_pyramidkv.evict(k, 6, v, 2), 0);
    assert_int_equal(pb_kvcache_pyramidkv.evict(NULL, 6, v, 3), 0);
    same_as(k, &before);
    assert_int_equal(pb_kvcache_pyramidkv.evict(k, 6, v, 3), 3);
    assert_int_equal(v[0], 3);
    assert_int_equal(v[1], 4);
    assert_int_equal(v[2], 5);
    pb_kvcache_destroy(k);
}

/* The worked example's instance (budget 6, window 1) after its steps and
 * an evict to 6, which drops position 5. */
static pb_kvcache *worked_and_evicted(void) {
    const pb_kvcache_pyramidkv_params p = params_of(6, 0, 1, 4, 1, 8, 1);
    pb_kvcache *k = make(&p, NULL);
    feed_worked_steps(k);
    size_t n = 0;
    uint32_t v[8];
    assert_int_equal(pb_kvcache_evict(k, 6, v, 8, &n), PB_OK);
    assert_int_equal(n, 1);
    assert_int_equal(v[0], 5);
    return k;
}

static void reset_returns_to_position_zero(void **state) {
    (void)state;
    pb_kvcache *k = worked_and_evicted();
    const size_t mem = pb_kvcache_memory_bytes(k);
    assert_int_equal(pb_kvcache_reset(k), PB_OK);
    assert_int_equal(pb_kvcache_reset(NULL), PB_ERR_NULL);
    const uint32_t kept[] = {0};
    kept_expect(k, kept, 1);
    assert_true(score_of(k, 0) == 0.0);
    assert_int_equal(pb_kvcache_memory_bytes(k), mem);
    /* It behaves like a new instance, ring slot included. */
    feed_worked_steps(k);
    const double want[] = {2, 1, .9375, .875, .75, .4375, 0};
    for (uint32_t pos = 0; pos <= 6; ++pos)
        assert_true(score_of(k, pos) == want[pos]);
    pb_kvcache_destroy(k);
}

static void kept_positions_contract(void **state) {
    (void)state;
    const pb_kvcache_pyramidkv_params p = params_of(6, 0, 1, 4, 1, 8, 1);
    pb_kvcache *k = make(&p, NULL);
    observe_ok(k, 10, NULL, 0);
    observe_ok(k, 20, NULL, 0);
    uint32_t out[3] = {7, 7, 7};
    size_t n = 0;
    assert_int_equal(pb_kvcache_kept_positions(k, out, 2, &n), PB_ERR_BUFFER);
    assert_int_equal(n, 3);
    assert_int_equal(out[0], 7);
    assert_int_equal(pb_kvcache_kept_positions(NULL, out, 3, &n), PB_ERR_NULL);
    assert_int_equal(pb_kvcache_kept_positions(k, NULL, 3, &n), PB_ERR_NULL);
    assert_int_equal(pb_kvcache_kept_positions(k, out, 3, NULL), PB_ERR_NULL);
    assert_int_equal(pb_kvcache_kept_positions(k, out, 3, &n), PB_OK);
    assert_int_equal(n, 3);
    assert_int_equal(out[0], 0);
    assert_int_equal(out[1], 10);
    assert_int_equal(out[2], 20);
    pb_kvcache_destroy(k);
}

static void window_score_not_held(void **state) {
    (void)state;
    pb_kvcache *k = worked_and_evicted();
    double s = 123.0;
    assert_int_equal(pb_kvcache_window_score(k, 5, &s), PB_ERR_NOT_HELD);
    assert_int_equal(pb_kvcache_window_score(k, 7, &s), PB_ERR_NOT_HELD);
    assert_int_equal(pb_kvcache_window_score(k, UINT32_MAX, &s),
                     PB_ERR_NOT_HELD);
    assert_true(s == 123.0);
    assert_int_equal(pb_kvcache_window_score(NULL, 0, &s), PB_ERR_NULL);
    assert_int_equal(pb_kvcache_window_score(k, 0, NULL), PB_ERR_NULL);
    assert_true(score_of(k, 6) == 0.0);
    assert_true(score_of(k, 4) == .75);
    pb_kvcache_destroy(k);
}

static void null_policy_queries(void **state) {
    (void)state;
    assert_int_equal(pb_kvcache_effective_budget(NULL), 0);
    assert_int_equal(pb_kvcache_kept_count(NULL), 0);
    assert_int_equal(pb_kvcache_capacity(NULL), 0);
    assert_int_equal(pb_kvcache_memory_bytes(NULL), 0);
    pb_kvcache_destroy(NULL);
    pb_kvcache_pyramidkv.destroy(NULL);
    assert_int_equal(pb_kvcache_pyramidkv.memory_bytes(NULL), 0);
    pb_kvcache_pyramidkv.on_decode_step(NULL, 1, NULL, 0);
}

/* ------------------------------------------------------------------------ */
/* Memory                                                                   */

typedef struct counting {
    size_t live_bytes, total_bytes, calls, frees;
    size_t fail_at; /* fail the n-th call (1-based); 0: never */
} counting;

static void *count_alloc(void *ctx, size_t n) {
    counting *c = ctx;
    c->calls += 1;
    if (c->fail_at != 0 && c->calls == c->fail_at) return NULL;
    c->live_bytes += n;
    c->total_bytes += n;
    return malloc(n);
}

static void count_free(void *ctx, void *p, size_t n) {
    counting *c = ctx;
    c->frees += 1;
    c->live_bytes -= n;
    free(p);
}

static void memory_bytes_equals_allocation(void **state) {
    (void)state;
    const pb_kvcache_pyramidkv_params cases[] = {
        PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT,
        {2048, 3, 32, 4, 64, 16, 7},
        {6, 0, 1, 4, 1, 8, 1},
        {100, 0, 1, 1, 10, 64, 101},
        {1, 0, 1, 1, 0, 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        for (uint32_t cap = 0; cap <= 2000; cap += 1000) {
            pb_kvcache_options o = PB_KVCACHE_OPTIONS_DEFAULT;
            o.capacity = cap ? cap + cases[i].recent_window + 2 : 0;
            o.prefill_max_len = cap;
            counting c = {0};
            const pb_allocator a = {count_alloc, count_free, &c};
            pb_kvcache *k = NULL;
            assert_int_equal(pb_kvcache_pyramidkv_create(&cases[i], &o, &a, &k),
                             PB_OK);
            size_t want = 0;
            assert_int_equal(pb_kvcache_pyramidkv_size(&cases[i], &o, &want),
                             PB_OK);
            assert_int_equal(c.calls, 1);
            assert_int_equal(c.total_bytes, want);
            assert_int_equal(pb_kvcache_memory_bytes(k), want);
            assert_int_equal(pb_kvcache_pyramidkv.memory_bytes(k), want);
            /* Nothing allocates after create. */
            float w[64] = {0};
            for (uint32_t pos = 1; pos < 40; ++pos) {
                const size_t held = pb_kvcache_kept_count(k);
                (void)pb_kvcache_observe(k, pos, held <= 64 ? w : NULL, held);
                size_t n = 0;
                uint32_t v[64];
                (void)pb_kvcache_evict(k, 3, v, 64, &n);
            }
            (void)pb_kvcache_reset(k);
            assert_int_equal(c.calls, 1);
            pb_kvcache_destroy(k);
            assert_int_equal(c.live_bytes, 0);
            assert_int_equal(c.frees, 1);
        }
    }
}

static void allocation_failure(void **state) {
    (void)state;
    counting c = {0};
    c.fail_at = 1;
    const pb_allocator a = {count_alloc, count_free, &c};
    pb_kvcache *k = (pb_kvcache *)&c;
    assert_int_equal(pb_kvcache_pyramidkv_create(NULL, NULL, &a, &k),
                     PB_ERR_NOMEM);
    assert_null(k);
    assert_int_equal(c.live_bytes, 0);
    c.calls = 0;
    assert_null(pb_kvcache_pyramidkv.create(NULL, &a, NULL));
    c.calls = 0;
    assert_null(pb_kvcache_snapkv.create(NULL, &a, NULL));
    assert_int_equal(c.live_bytes, 0);
}

/* ------------------------------------------------------------------------ */
/* The policybook vtables                                                   */

static void pyramidkv_vtable(void **state) {
    (void)state;
    /* NULL params are the defaults; the rng is never read (a bogus pointer
     * is passed on purpose). */
    pb_rng *bogus = (pb_rng *)(uintptr_t)0x1;
    pb_kvcache *d = pb_kvcache_pyramidkv.create(NULL, NULL, bogus);
    assert_non_null(d);
    assert_int_equal(pb_kvcache_effective_budget(d), 512);
    assert_int_equal(pb_kvcache_capacity(d), 513);
    size_t want = 0;
    assert_int_equal(pb_kvcache_pyramidkv_size(NULL, NULL, &want), PB_OK);
    assert_int_equal(pb_kvcache_pyramidkv.memory_bytes(d), want);
    pb_kvcache_pyramidkv.destroy(d);

    const pb_kvcache_pyramidkv_params p = params_of(6, 2, 3, 2, 1, 8, 1);
    pb_kvcache *k = pb_kvcache_pyramidkv.create(&p, NULL, NULL);
    assert_non_null(k);
    const float s1[] = {1.0f};
    pb_kvcache_pyramidkv.on_decode_step(k, 1, s1, 1);
    pb_kvcache_pyramidkv.on_decode_step(k, 1, s1, 1); /* refused: pos */
    pb_kvcache_pyramidkv.on_decode_step(k, 2, s1, 1); /* refused: length */
    assert_int_equal(pb_kvcache_kept_count(k), 2);
    pb_kvcache_destroy(k);

    k = pb_kvcache_pyramidkv.create(&p, NULL, NULL);
    static const float w[6][6] = {
        {1},
        {.5f, .5f},
        {.25f, .25f, .5f},
        {.125f, .125f, .25f, .5f},
        {.0625f, .0625f, .125f, .25f, .5f},
        {.0625f, .0625f, .0625f, .125f, .25f, .4375f}};
    for (uint32_t s = 0; s < 6; ++s)
        pb_kvcache_pyramidkv.on_decode_step(k, s + 1, w[s], s + 1);
    uint32_t v[8];
    assert_int_equal(pb_kvcache_pyramidkv.evict(k, 6, v, 8), 3);
    assert_int_equal(v[0], 3);
    assert_int_equal(v[1], 4);
    assert_int_equal(v[2], 5);
    pb_kvcache_pyramidkv.destroy(k);
}

static void snapkv_vtable(void **state) {
    (void)state;
    pb_kvcache *d = pb_kvcache_snapkv.create(NULL, NULL, NULL);
    assert_non_null(d);
    assert_int_equal(pb_kvcache_effective_budget(d), 512);
    assert_int_equal(pb_kvcache_capacity(d), 513);
    pb_kvcache_snapkv.destroy(d);

    /* SnapKV is PyramidKV with one layer: the share is the budget. */
    const pb_kvcache_snapkv_params s = {6, 1, 8, 1};
    pb_kvcache *k = pb_kvcache_snapkv.create(&s, NULL, (pb_rng *)&s);
    assert_non_null(k);
    assert_int_equal(pb_kvcache_effective_budget(k), 6);
    feed_worked_steps(k);
    uint32_t v[8];
    assert_int_equal(pb_kvcache_snapkv.evict(k, 6, v, 8), 1);
    assert_int_equal(v[0], 5);
    size_t want = 0;
    const pb_kvcache_pyramidkv_params same = params_of(6, 0, 1, 4, 1, 8, 1);
    assert_int_equal(pb_kvcache_pyramidkv_size(&same, NULL, &want), PB_OK);
    assert_int_equal(pb_kvcache_snapkv.memory_bytes(k), want);
    pb_kvcache_snapkv.destroy(k);

    /* Refused SnapKV params: recent >= budget, even kernel, obs 0. */
    const pb_kvcache_snapkv_params bad[] = {
        {6, 6, 8, 1}, {6, 1, 8, 2}, {6, 1, 0, 1}, {0, 0, 8, 1}};
    for (size_t i = 0; i < 4; ++i)
        assert_null(pb_kvcache_snapkv.create(&bad[i], NULL, NULL));
}

PB_TEST_MAIN(cmocka_unit_test(refused_params),
             cmocka_unit_test(too_large_is_reported),
             cmocka_unit_test(default_capacity_and_full),
             cmocka_unit_test(explicit_capacity_batches_evictions),
             cmocka_unit_test(observe_check_order),
             cmocka_unit_test(evict_buffer_and_null),
             cmocka_unit_test(reset_returns_to_position_zero),
             cmocka_unit_test(kept_positions_contract),
             cmocka_unit_test(window_score_not_held),
             cmocka_unit_test(null_policy_queries),
             cmocka_unit_test(memory_bytes_equals_allocation),
             cmocka_unit_test(allocation_failure),
             cmocka_unit_test(pyramidkv_vtable),
             cmocka_unit_test(snapkv_vtable))
