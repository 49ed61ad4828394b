/*
 * test_policy_family.c - the scorers and sinks of the native surface and the
 * five policybook vtables of the rest of the family (h2o, scissorhands,
 * tova, streaming_llm, sliding_window), one test per rule of docs/spec.md
 * §13, with the worked facts in the comments.
 *
 * Every weight is an exact binary fraction, so every expected score is
 * exact; none is taken from the code under test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "pyramidkv/pyramidkv.h"
#include "test_configs.h"
#include "test_main.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */

static void step(const pb_kvcache_vtable *vt, pb_kvcache *k, uint32_t pos,
                 const float *w, size_t n) {
    const size_t before = pb_kvcache_kept_count(k);
    vt->on_decode_step(k, pos, w, n);
    assert_int_equal(pb_kvcache_kept_count(k), before + 1u);
}

/* A vtable evict with a roomy buffer, checked against want[]. */
static void evict_expect(const pb_kvcache_vtable *vt, pb_kvcache *k,
                         uint32_t budget, const uint32_t *want,
                         size_t n_want) {
    uint32_t got[64];
    memset(got, 0xAB, sizeof got);
    assert_int_equal(vt->evict(k, budget, got, 64), n_want);
    for (size_t i = 0; i < n_want; ++i) assert_int_equal(got[i], want[i]);
}

static void held_expect(const pb_kvcache *k, const uint32_t *want,
                        size_t n_want) {
    uint32_t got[64];
    size_t n = 0;
    assert_int_equal(pb_kvcache_kept_positions(k, got, 64, &n), PB_OK);
    assert_int_equal(n, n_want);
    for (size_t i = 0; i < n; ++i) assert_int_equal(got[i], want[i]);
}

static double score(const pb_kvcache *k, uint32_t pos) {
    double s = -99.0;
    assert_int_equal(pb_kvcache_score(k, pos, &s), PB_OK);
    return s;
}

/* ------------------------------------------------------------------------ */
/* H2O                                                                      */

static void h2o_sums_and_evicts(void **state) {
    (void)state;
    const pb_kvcache_h2o_params hp = {3u, 1u};
    pb_kvcache *k = pb_kvcache_h2o.create(&hp, NULL, NULL);
    assert_non_null(k);
    const float w1[] = {1.0f};
    const float w2[] = {.5f, .25f};
    const float w3[] = {0.0f, .5f, .5f};
    step(&pb_kvcache_h2o, k, 1, w1, 1); /* 0: 1 */
    step(&pb_kvcache_h2o, k, 2, w2, 2); /* 0: 1.5, 1: .25 */
    step(&pb_kvcache_h2o, k, 3, NULL, 0); /* NULL attn: no score changes */
    assert_true(score(k, 0) == 1.5 && score(k, 1) == .25);
    assert_true(score(k, 2) == 0.0 && score(k, 3) == 0.0);
    /* 4 held, capacity 4 (budget + 1): full, the step does nothing. */
    pb_kvcache_h2o.on_decode_step(k, 4, NULL, 0);
    assert_int_equal(pb_kvcache_kept_count(k), 4);
    /* evict(3): one goes; 3 is protected (recent 1); scores 1.5, .25, 0:
     * position 2 (0.0) goes. */
    const uint32_t v1[] = {2};
    evict_expect(&pb_kvcache_h2o, k, 3, v1, 1);
    step(&pb_kvcache_h2o, k, 4, w3, 3); /* 0: 1.5, 1: .75, 3: .5 */
    assert_true(score(k, 1) == .75 && score(k, 3) == .5);
    /* evict(2): two go among 0, 1, 3 (4 protected): 3 (.5), 1 (.75). */
    const uint32_t v2[] = {1, 3};
    evict_expect(&pb_kvcache_h2o, k, 2, v2, 2);
    const uint32_t h[] = {0, 4};
    held_expect(k, h, 2);
    /* Not held: NOT_HELD, as for every scorer. */
    double s = 7.0;
    assert_int_equal(pb_kvcache_score(k, 1, &s), PB_ERR_NOT_HELD);
    assert_true(s == 7.0);
    pb_kvcache_h2o.destroy(k);
}

static void h2o_clamps_and_checks_the_clamped_count(void **state) {
    (void)state;
    const pb_kvcache_h2o_params hp = {3u, 2u};
    pb_kvcache *k = pb_kvcache_h2o.create(&hp, NULL, NULL);
    const float w[] = {.25f, .25f, .25f};
    step(&pb_kvcache_h2o, k, 1, NULL, 0);
    step(&pb_kvcache_h2o, k, 2, NULL, 0);
    step(&pb_kvcache_h2o, k, 3, w, 3); /* 0, 1, 2: .25 each */
    /* evict(0): 4 over target, 2 protected: the count is clamped to 2
     * (positions 0 and 1). A buffer of 1 is refused, of 2 is enough. */
    uint32_t v[4];
    assert_int_equal(pb_kvcache_h2o.evict(k, 0, v, 1), 0);
    assert_int_equal(pb_kvcache_kept_count(k), 4);
    assert_int_equal(pb_kvcache_h2o.evict(k, 0, v, 2), 2);
    assert_int_equal(v[0], 0);
    assert_int_equal(v[1], 1);
    pb_kvcache_h2o.destroy(k);
}

static void h2o_ties_go_to_the_lower_position(void **state) {
    (void)state;
    const pb_kvcache_h2o_params hp = {2u, 0u};
    pb_kvcache *k = pb_kvcache_h2o.create(&hp, NULL, NULL);
    const float w1[] = {.5f};
    const float w2[] = {.25f, .75f};
    step(&pb_kvcache_h2o, k, 1, w1, 1); /* 0: .5 */
    step(&pb_kvcache_h2o, k, 2, w2, 2); /* 0: .75, 1: .75, 2: 0 */
    const uint32_t v1[] = {2};
    evict_expect(&pb_kvcache_h2o, k, 2, v1, 1);
    const uint32_t v2[] = {0}; /* 0 and 1 tie at .75 */
    evict_expect(&pb_kvcache_h2o, k, 1, v2, 1);
    pb_kvcache_h2o.destroy(k);
}

static void family_refusals(void **state) {
    (void)state;
    const pb_kvcache_h2o_params h_bad[] = {{0u, 0u}, {UINT32_MAX, 0u},
                                           {4u, 4u}, {4u, 9u}};
    for (size_t i = 0; i < 4; ++i) {
        assert_null(pb_kvcache_h2o.create(&h_bad[i], NULL, NULL));
        const pb_kvcache_scissorhands_params s = {h_bad[i].budget,
                                                  h_bad[i].recent_window};
        assert_null(pb_kvcache_scissorhands.create(&s, NULL, NULL));
    }
    const uint32_t b_bad[] = {0u, UINT32_MAX};
    for (size_t i = 0; i < 2; ++i) {
        const pb_kvcache_tova_params t = {b_bad[i]};
        assert_null(pb_kvcache_tova.create(&t, NULL, NULL));
        const pb_kvcache_sliding_window_params sw = {b_bad[i]};
        assert_null(pb_kvcache_sliding_window.create(&sw, NULL, NULL));
        const pb_kvcache_streaming_llm_params sl = {b_bad[i], 0u};
        assert_null(pb_kvcache_streaming_llm.create(&sl, NULL, NULL));
    }
    const pb_kvcache_streaming_llm_params sl_bad[] = {{4u, 4u}, {4u, 5u}};
    for (size_t i = 0; i < 2; ++i)
        assert_null(pb_kvcache_streaming_llm.create(&sl_bad[i], NULL, NULL));
    const pb_allocator lacking = {NULL, NULL, NULL};
    assert_null(pb_kvcache_tova.create(NULL, &lacking, NULL));

    /* params NULL: the defaults (512 and 32 / 4): capacity 513. */
    const pb_kvcache_vtable *all[] = {
        &pb_kvcache_h2o, &pb_kvcache_scissorhands, &pb_kvcache_tova,
        &pb_kvcache_streaming_llm, &pb_kvcache_sliding_window};
    for (size_t i = 0; i < 5; ++i) {
        pb_kvcache *k = all[i]->create(NULL, NULL, NULL);
        assert_non_null(k);
        assert_int_equal(pb_kvcache_capacity(k), 513);
        /* No share of their own: each evict's budget is the target. */
        assert_int_equal(pb_kvcache_effective_budget(k), UINT32_MAX);
        assert_int_equal(pb_kvcache_kept_count(k), 1);
        assert_int_equal(all[i]->memory_bytes(k), pb_kvcache_memory_bytes(k));
        all[i]->destroy(k);
        all[i]->destroy(NULL);
    }
    pb_kvcache *k = pb_kvcache_streaming_llm.create(NULL, NULL, NULL);
    assert_int_equal(pb_kvcache_sink_count(k), 1); /* 0 < 4 */
    pb_kvcache_streaming_llm.destroy(k);

    /* Evict goes to the budget it is given, also above the params': with
     * budget 2 (capacity 3) full, evict(3) drops nothing, evict(2) one. */
    const pb_kvcache_sliding_window_params sw = {2u};
    k = pb_kvcache_sliding_window.create(&sw, NULL, NULL);
    pb_kvcache_sliding_window.on_decode_step(k, 1, NULL, 0);
    pb_kvcache_sliding_window.on_decode_step(k, 2, NULL, 0);
    uint32_t v[4];
    assert_int_equal(pb_kvcache_sliding_window.evict(k, 3, v, 4), 0);
    assert_int_equal(pb_kvcache_kept_count(k), 3);
    pb_kvcache_sliding_window.on_decode_step(k, 3, NULL, 0); /* full */
    assert_int_equal(pb_kvcache_kept_count(k), 3);
    assert_int_equal(pb_kvcache_sliding_window.evict(k, 2, v, 4), 1);
    assert_int_equal(v[0], 0);
    pb_kvcache_sliding_window.destroy(k);
}

/* ------------------------------------------------------------------------ */
/* Scissorhands                                                             */

static void scissorhands_votes_strictly_above_the_share(void **state) {
    (void)state;
    const pb_kvcache_scissorhands_params sp = {3u, 1u};
    pb_kvcache *k = pb_kvcache_scissorhands.create(&sp, NULL, NULL);
    const float w1[] = {1.0f};          /* share 1: 1 is not above it */
    const float w2[] = {.5f, .5f};      /* share .5: nobody */
    const float w3[] = {.5f, .25f, .25f}; /* share 1/3: 0 only */
    step(&pb_kvcache_scissorhands, k, 1, w1, 1);
    assert_true(score(k, 0) == 0.0);
    step(&pb_kvcache_scissorhands, k, 2, w2, 2);
    assert_true(score(k, 0) == 0.0 && score(k, 1) == 0.0);
    step(&pb_kvcache_scissorhands, k, 3, w3, 3);
    assert_true(score(k, 0) == 1.0 && score(k, 1) == 0.0);
    assert_true(score(k, 2) == 0.0 && score(k, 3) == 0.0);
    /* evict(2): 2 go among 0, 1, 2 (3 protected): votes 1, 0, 0 -> 1, 2. */
    const uint32_t v[] = {1, 2};
    evict_expect(&pb_kvcache_scissorhands, k, 2, v, 2);
    const uint32_t h[] = {0, 3};
    held_expect(k, h, 2);
    pb_kvcache_scissorhands.destroy(k);
}

/* ------------------------------------------------------------------------ */
/* TOVA                                                                     */

static void tova_records_and_unobserved(void **state) {
    (void)state;
    const pb_kvcache_tova_params tp = {2u};
    pb_kvcache *k = pb_kvcache_tova.create(&tp, NULL, NULL);
    assert_true(score(k, 0) == -1.0); /* position 0 starts unobserved */
    const float w1[] = {.5f};
    const float w2[] = {.25f, .75f};
    step(&pb_kvcache_tova, k, 1, w1, 1);
    assert_true(score(k, 0) == .5 && score(k, 1) == -1.0);
    step(&pb_kvcache_tova, k, 2, w2, 2); /* assignment, not a sum */
    assert_true(score(k, 0) == .25 && score(k, 1) == .75);
    assert_true(score(k, 2) == -1.0);
    /* evict(2): one goes among the observed 0 (.25) and 1 (.75). */
    const uint32_t v[] = {0};
    evict_expect(&pb_kvcache_tova, k, 2, v, 1);
    pb_kvcache_tova.destroy(k);
}

static void tova_spares_unobserved_and_checks_the_unclamped_count(
    void **state) {
    (void)state;
    const pb_kvcache_tova_params tp = {2u};
    pb_kvcache *k = pb_kvcache_tova.create(&tp, NULL, NULL);
    step(&pb_kvcache_tova, k, 1, NULL, 0);
    step(&pb_kvcache_tova, k, 2, NULL, 0);
    /* 3 held, none observed: nothing can go. */
    uint32_t v[4];
    assert_int_equal(pb_kvcache_tova.evict(k, 2, v, 4), 0);
    assert_int_equal(pb_kvcache_kept_count(k), 3);
    pb_kvcache_tova.destroy(k);

    k = pb_kvcache_tova.create(&tp, NULL, NULL);
    const float w[] = {.5f, .5f};
    step(&pb_kvcache_tova, k, 1, NULL, 0);
    step(&pb_kvcache_tova, k, 2, w, 2); /* 0, 1 observed; 2 not */
    /* evict(0): 3 over target, only 2 observed may go. A buffer of 2 is
     * refused (the check counts 3), of 3 takes both. */
    assert_int_equal(pb_kvcache_tova.evict(k, 0, v, 2), 0);
    assert_int_equal(pb_kvcache_kept_count(k), 3);
    assert_int_equal(pb_kvcache_tova.evict(k, 0, v, 3), 2);
    assert_int_equal(v[0], 0);
    assert_int_equal(v[1], 1);
    const uint32_t h[] = {2};
    held_expect(k, h, 1);
    pb_kvcache_tova.destroy(k);
}

/* ------------------------------------------------------------------------ */
/* StreamingLLM and the sliding window                                      */

static void streaming_llm_keeps_sinks(void **state) {
    (void)state;
    const pb_kvcache_streaming_llm_params sp = {3u, 2u};
    pb_kvcache *k = pb_kvcache_streaming_llm.create(&sp, NULL, NULL);
    const float w[] = {9.0f};
    step(&pb_kvcache_streaming_llm, k, 1, w, 1); /* attn ignored */
    step(&pb_kvcache_streaming_llm, k, 2, NULL, 0);
    step(&pb_kvcache_streaming_llm, k, 3, NULL, 0);
    assert_int_equal(pb_kvcache_sink_count(k), 2); /* 0 and 1 */
    /* evict(3): the oldest non-sink, 2. */
    const uint32_t v1[] = {2};
    evict_expect(&pb_kvcache_streaming_llm, k, 3, v1, 1);
    step(&pb_kvcache_streaming_llm, k, 4, NULL, 0);
    /* evict(1): below the sinks held: every non-sink goes (3, 4), and the
     * instance stays over budget with 0 and 1. */
    const uint32_t v2[] = {3, 4};
    evict_expect(&pb_kvcache_streaming_llm, k, 1, v2, 2);
    const uint32_t h[] = {0, 1};
    held_expect(k, h, 2);
    evict_expect(&pb_kvcache_streaming_llm, k, 0, NULL, 0);
    pb_kvcache_streaming_llm.destroy(k);

    /* Sinks are positions: with 0, 5, 6, 7 held and sinks 2 only 0 is. */
    k = pb_kvcache_streaming_llm.create(&sp, NULL, NULL);
    step(&pb_kvcache_streaming_llm, k, 5, NULL, 0);
    step(&pb_kvcache_streaming_llm, k, 6, NULL, 0);
    step(&pb_kvcache_streaming_llm, k, 7, NULL, 0);
    assert_int_equal(pb_kvcache_sink_count(k), 1);
    const uint32_t v3[] = {5, 6};
    evict_expect(&pb_kvcache_streaming_llm, k, 2, v3, 2);
    pb_kvcache_streaming_llm.destroy(k);
}

static void sliding_window_drops_the_oldest(void **state) {
    (void)state;
    const pb_kvcache_sliding_window_params sp = {2u};
    pb_kvcache *k = pb_kvcache_sliding_window.create(&sp, NULL, NULL);
    const float w[] = {1.0f, 0.0f};
    step(&pb_kvcache_sliding_window, k, 1, NULL, 0);
    step(&pb_kvcache_sliding_window, k, 2, w, 2);
    const uint32_t v1[] = {0};
    evict_expect(&pb_kvcache_sliding_window, k, 2, v1, 1);
    /* Bad input does nothing: wrong length, bad weight. */
    const float bad[] = {-1.0f, 0.0f};
    pb_kvcache_sliding_window.on_decode_step(k, 3, w, 1);
    pb_kvcache_sliding_window.on_decode_step(k, 3, bad, 2);
    assert_int_equal(pb_kvcache_kept_count(k), 2);
    const uint32_t v2[] = {1, 2};
    evict_expect(&pb_kvcache_sliding_window, k, 0, v2, 2);
    assert_int_equal(pb_kvcache_kept_count(k), 0);
    step(&pb_kvcache_sliding_window, k, 9, w, 0);
    pb_kvcache_sliding_window.destroy(k);
}

/* ------------------------------------------------------------------------ */
/* The native surface                                                       */

static pb_kvcache *make(uint32_t scorer, uint32_t sinks, uint32_t budget,
                        uint32_t recent) {
    pb_kvcache_config c = pbt_kvcache_config(budget, recent);
    c.scorer = scorer;
    c.sinks = sinks;
    pb_kvcache *k = NULL;
    assert_int_equal(pb_kvcache_create(&c, NULL, &k), PB_OK);
    return k;
}

static void native_config_rules(void **state) {
    (void)state;
    pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    size_t bytes = 0;
    for (uint32_t s = 0; s <= (uint32_t)PB_SCORER_NONE; ++s) {
        c.scorer = s;
        assert_int_equal(pb_kvcache_size(&c, &bytes), PB_OK);
    }
    c.scorer = (uint32_t)PB_SCORER_NONE + 1u;
    assert_int_equal(pb_kvcache_size(&c, &bytes), PB_ERR_PARAM);
    /* sinks + recent_window must stay below the capacity (513 here). */
    c = (pb_kvcache_config)PB_KVCACHE_CONFIG_DEFAULT;
    c.sinks = 513u - 32u - 1u;
    assert_int_equal(pb_kvcache_size(&c, &bytes), PB_OK);
    c.sinks += 1u;
    assert_int_equal(pb_kvcache_size(&c, &bytes), PB_ERR_PARAM);
    /* No prefill reservation with another scorer or with sinks. */
    c = (pb_kvcache_config)PB_KVCACHE_CONFIG_DEFAULT;
    c.prefill_max_len = 8u;
    assert_int_equal(pb_kvcache_size(&c, &bytes), PB_OK);
    c.sinks = 4u;
    assert_int_equal(pb_kvcache_size(&c, &bytes), PB_ERR_PARAM);
    c.sinks = 0u;
    c.scorer = PB_SCORER_LAST;
    assert_int_equal(pb_kvcache_size(&c, &bytes), PB_ERR_PARAM);
}

/* The bytes per held position of each scorer: the slope of the size over
 * the capacity. */
static void native_bytes_per_position(void **state) {
    (void)state;
    /* In 16ths of a byte; window not pinned here. Last keeps a spare
     * array of records and a 16th of the capacity as room before its
     * three arrays (12 + 12/16). */
    const size_t per16[] = {0, 12 * 16, 12 * 16 + 12, 8 * 16, 4 * 16};
    for (uint32_t s = 1; s <= (uint32_t)PB_SCORER_NONE; ++s) {
        pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
        c.scorer = s;
        size_t a = 0, b = 0;
        c.capacity = 64u * 1024u;
        assert_int_equal(pb_kvcache_size(&c, &a), PB_OK);
        c.capacity = 2u * 64u * 1024u;
        assert_int_equal(pb_kvcache_size(&c, &b), PB_OK);
        assert_int_equal((b - a) * 16u, per16[s] * 64u * 1024u);
        pb_kvcache *k = NULL;
        assert_int_equal(pb_kvcache_create(&c, NULL, &k), PB_OK);
        assert_int_equal(pb_kvcache_memory_bytes(k), b);
        pb_kvcache_destroy(k);
    }
}

/* Pyramid over H2O with 4 sinks: layer 3 of 4 at ratio 4, budget 8:
 * share floor(2*8*(4*3 - 3*3) / (5*3)) = floor(48/15) = 3. */
static void native_pyramid_over_h2o_with_sinks(void **state) {
    (void)state;
    pb_kvcache_config c = pbt_kvcache_config(8u, 1u);
    c.layer = 3u;
    c.num_layers = 4u;
    c.scorer = PB_SCORER_CUMULATIVE;
    c.sinks = 2u;
    pb_kvcache *k = NULL;
    assert_int_equal(pb_kvcache_create(&c, NULL, &k), PB_OK);
    assert_int_equal(pb_kvcache_effective_budget(k), 3);
    const float w1[] = {0.0f};
    const float w2[] = {0.0f, 0.0f};
    const float w3[] = {0.0f, 0.0f, .5f};
    const float w4[] = {0.0f, 0.0f, .5f, .25f};
    assert_int_equal(pb_kvcache_observe(k, 1, w1, 1), PB_OK);
    assert_int_equal(pb_kvcache_observe(k, 2, w2, 2), PB_OK);
    assert_int_equal(pb_kvcache_observe(k, 3, w3, 3), PB_OK);
    assert_int_equal(pb_kvcache_observe(k, 4, w4, 4), PB_OK);
    /* Held 0..4, scores 0, 0, 1, .25, 0; sinks 0 and 1 (lowest, spared);
     * 4 protected. evict(8): target 3, two go among 2 (1.0) and 3 (.25):
     * both. */
    assert_int_equal(pb_kvcache_sink_count(k), 2);
    uint32_t v[8];
    size_t n = 0;
    assert_int_equal(pb_kvcache_evict(k, 8, v, 8, &n), PB_OK);
    assert_int_equal(n, 2);
    assert_int_equal(v[0], 2);
    assert_int_equal(v[1], 3);
    /* The window score is the window scorer's only. */
    double s = 0;
    assert_int_equal(pb_kvcache_window_score(k, 0, &s), PB_ERR_PARAM);
    /* Prefill is the window scorer's only. */
    const float rows[] = {1.0f};
    size_t kept = 0;
    assert_int_equal(pb_kvcache_reset(k), PB_OK);
    assert_int_equal(pb_kvcache_prefill(k, rows, 1, 1, 8, NULL, 0, NULL, 0,
                                        NULL, 0, &kept),
                     PB_ERR_PARAM);
    assert_int_equal(pb_kvcache_kept_count(k), 1);
    pb_kvcache_destroy(k);
}

/* The window scorer with sinks: a sink is never chosen, even with the
 * lowest pooled score. */
static void native_window_with_sinks(void **state) {
    (void)state;
    pb_kvcache_config c = pbt_kvcache_config(2u, 0u);
    c.pool_kernel = 1u;
    c.sinks = 1u;
    pb_kvcache *k = NULL;
    assert_int_equal(pb_kvcache_create(&c, NULL, &k), PB_OK);
    const float w1[] = {0.0f};
    const float w2[] = {0.0f, .5f};
    assert_int_equal(pb_kvcache_observe(k, 1, w1, 1), PB_OK);
    assert_int_equal(pb_kvcache_observe(k, 2, w2, 2), PB_OK);
    /* Window scores 0, .5, 0; 0 is a sink: 2 goes (0 < .5). */
    uint32_t v[4];
    size_t n = 0;
    assert_int_equal(pb_kvcache_evict(k, 2, v, 4, &n), PB_OK);
    assert_int_equal(n, 1);
    assert_int_equal(v[0], 2);
    /* evict(0): everything but the sink. */
    assert_int_equal(pb_kvcache_evict(k, 0, v, 4, &n), PB_OK);
    assert_int_equal(n, 1);
    assert_int_equal(v[0], 1);
    assert_int_equal(pb_kvcache_kept_count(k), 1);
    pb_kvcache_destroy(k);
}

/* Recency with a recent window: the oldest non-protected go; reset brings
 * back position 0 alone. */
static void native_none_and_reset(void **state) {
    (void)state;
    pb_kvcache *k = make(PB_SCORER_NONE, 0u, 2u, 1u);
    for (uint32_t p = 1; p <= 2; ++p)
        assert_int_equal(pb_kvcache_observe(k, p * 10u, NULL, 0), PB_OK);
    uint32_t v[4];
    size_t n = 0;
    assert_int_equal(pb_kvcache_evict(k, 0, v, 1, &n), PB_ERR_BUFFER);
    assert_int_equal(n, 2);
    assert_int_equal(pb_kvcache_evict(k, 0, v, 4, &n), PB_OK);
    assert_int_equal(n, 2);
    assert_int_equal(v[0], 0);
    assert_int_equal(v[1], 10);
    assert_int_equal(pb_kvcache_reset(k), PB_OK);
    const uint32_t h[] = {0};
    held_expect(k, h, 1);
    assert_true(score(k, 0) == 0.0);
    pb_kvcache_destroy(k);

    k = make(PB_SCORER_LAST, 0u, 4u, 0u);
    const float w[] = {.5f};
    assert_int_equal(pb_kvcache_observe(k, 1, w, 1), PB_OK);
    assert_int_equal(pb_kvcache_reset(k), PB_OK);
    assert_true(score(k, 0) == -1.0);
    pb_kvcache_destroy(k);
}

PB_TEST_MAIN(cmocka_unit_test(h2o_sums_and_evicts),
             cmocka_unit_test(h2o_clamps_and_checks_the_clamped_count),
             cmocka_unit_test(h2o_ties_go_to_the_lower_position),
             cmocka_unit_test(family_refusals),
             cmocka_unit_test(scissorhands_votes_strictly_above_the_share),
             cmocka_unit_test(tova_records_and_unobserved),
             cmocka_unit_test(tova_spares_unobserved_and_checks_the_unclamped_count),
             cmocka_unit_test(streaming_llm_keeps_sinks),
             cmocka_unit_test(sliding_window_drops_the_oldest),
             cmocka_unit_test(native_config_rules),
             cmocka_unit_test(native_bytes_per_position),
             cmocka_unit_test(native_pyramid_over_h2o_with_sinks),
             cmocka_unit_test(native_window_with_sinks),
             cmocka_unit_test(native_none_and_reset))
