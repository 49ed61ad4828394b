/*
 * test_workload_trace.c - the workload library's generators and measures:
 * the xoshiro128** seeding and outputs for seed 7, the decode-4096 hash and
 * first weights (docs/traces.md, decode-4096), the layered shapes (layer 0 of every
 * profile is decode-4096; the anchors of the deepest layer), the seeds of
 * the layers, the top-k tie rule, round6 and entropy.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "trace_decode.h"
#include "trace_layered.h"
#include "workload_metrics.h"
#include "workload_rng.h"
#include "test_main.h"

static uint32_t bits_of(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

static void test_rng_seed7(void **state) {
    (void)state;
    pb_wl_rng r;
    pb_wl_rng_seed(&r, 7u);
    assert_int_equal(r.s[0], 3838393609u);
    assert_int_equal(r.s[1], 4210744933u);
    assert_int_equal(r.s[2], 801465066u);
    assert_int_equal(r.s[3], 1648156487u);
    assert_int_equal(pb_wl_rng_next(&r), 210494603u);
    assert_int_equal(pb_wl_rng_next(&r), 711084892u);
    assert_int_equal(pb_wl_rng_next(&r), 3993689120u);
    assert_int_equal(pb_wl_rng_next(&r), 4089369890u);
}

static void test_rng_next_int(void **state) {
    (void)state;
    pb_wl_rng a, b;
    pb_wl_rng_seed(&a, 7u);
    pb_wl_rng_seed(&b, 7u);
    /* A power of two has threshold 0: the first output, reduced. */
    assert_int_equal(pb_wl_rng_next_int(&a, 1024u), 210494603u % 1024u);
    /* bound 3: threshold (2^32 - 3) mod 3 = 1; no rejection here. */
    assert_int_equal(pb_wl_rng_next_int(&a, 3u), 711084892u % 3u);
    for (int i = 0; i < 1000; ++i) assert_true(pb_wl_rng_next_int(&b, 60u) < 60u);
    assert_int_equal(pb_wl_rng_next_int(&b, 1u), 0u);
}

/* The first four steps bit for bit, a step with heavy hitters and the
 * last step (positions 0 .. 5 and t-1), and the hash of all 4,095 steps. */
static void test_decode4096_hash_and_first_weights(void **state) {
    (void)state;
    static const uint32_t first[10] = {
        0x3f800000u,                                           /* t = 1 */
        0x3f01efc2u, 0x3efc207bu,                              /* t = 2 */
        0x3eb10866u, 0x3eaaaaabu, 0x3ea44cefu,                 /* t = 3 */
        0x3e890ff9u, 0x3e830553u, 0x3e79f55au, 0x3e6de00du};   /* t = 4 */
    static const uint32_t at128[7] = {0x3d775c29u, 0x3d39eb85u, 0x3cf8f5c3u,
                                      0x3c7c28f6u, 0x3b17c150u, 0x39cccccdu,
                                      0x3c8dd577u};
    static const uint32_t at4095[7] = {0x3d75cf5du, 0x3d385eb9u, 0x3cf5dc2bu,
                                       0x3c75f5c6u, 0x374cd99au, 0x374cd99au,
                                       0x3c8abbdfu};
    pb_wl_shape s;
    pb_wl_trace tr;
    pb_wl_shape_decode4096(&s);
    assert_int_equal(pb_wl_trace_init(&tr, &s, PB_WL_POSITIONS), 0);
    float *w = malloc(PB_WL_POSITIONS * sizeof *w);
    assert_non_null(w);
    uint32_t hash = PB_WL_FNV_OFFSET, t, steps = 0, k = 0;
    while ((t = pb_wl_trace_next(&tr, w)) != 0) {
        assert_int_equal(t, ++steps);
        hash = pb_wl_fnv1a_floats(hash, w, t);
        if (t <= 4)
            for (uint32_t i = 0; i < t; ++i)
                assert_int_equal(bits_of(w[i]), first[k++]);
        const uint32_t *want = t == 128 ? at128 : t == 4095 ? at4095 : NULL;
        if (want != NULL) {
            for (uint32_t i = 0; i < 6; ++i)
                assert_int_equal(bits_of(w[i]), want[i]);
            assert_int_equal(bits_of(w[t - 1]), want[6]);
        }
        if (t == 128) {
            /* The first draw: 32 distinct hitters in [4, 63]. */
            assert_int_equal(tr.heavy_n, 32u);
            assert_int_equal(tr.heavy_pos[0], 27u);
            assert_int_equal(tr.heavy_pos[31], 4u);
            for (uint32_t i = 0; i < 32; ++i) {
                assert_in_range(tr.heavy_pos[i], 4u, 63u);
                for (uint32_t j = 0; j < i; ++j)
                    assert_int_not_equal(tr.heavy_pos[i], tr.heavy_pos[j]);
            }
        }
    }
    assert_int_equal(steps, 4095u);
    assert_int_equal(hash, PB_WL_DECODE4096_HASH);
    assert_int_equal(hash, 3136039440u);

    /* Rewinding replays the same trace. */
    pb_wl_trace_rewind(&tr);
    hash = PB_WL_FNV_OFFSET;
    while ((t = pb_wl_trace_next(&tr, w)) != 0)
        hash = pb_wl_fnv1a_floats(hash, w, t);
    assert_int_equal(hash, 3136039440u);
    pb_wl_trace_free(&tr);
    free(w);
}

static uint32_t trace_hash(const pb_wl_shape *s) {
    pb_wl_trace tr;
    float *w = malloc(PB_WL_POSITIONS * sizeof *w);
    assert_non_null(w);
    assert_int_equal(pb_wl_trace_init(&tr, s, PB_WL_POSITIONS), 0);
    uint32_t hash = PB_WL_FNV_OFFSET, t;
    while ((t = pb_wl_trace_next(&tr, w)) != 0) {
        hash = pb_wl_fnv1a_floats(hash, w, t);
    }
    pb_wl_trace_free(&tr);
    free(w);
    return hash;
}

static void test_layer0_is_decode4096(void **state) {
    (void)state;
    pb_wl_shape d;
    pb_wl_shape_decode4096(&d);
    const pb_wl_profile profiles[] = {PB_WL_DECODE4096, PB_WL_FUNNEL,
                                      PB_WL_FLAT, PB_WL_INVERTED};
    const uint32_t layer_counts[] = {1u, 2u, 32u, 80u};
    for (size_t p = 0; p < 4; ++p)
        for (size_t n = 0; n < 4; ++n) {
            pb_wl_shape s;
            assert_int_equal(
                pb_wl_layer_shape(profiles[p], 0, layer_counts[n], &s), 0);
            assert_true(s.sink_mass == d.sink_mass);
            assert_true(s.local_mass == d.local_mass);
            assert_true(s.heavy_mass == d.heavy_mass);
            assert_true(s.noise_mass == d.noise_mass);
            assert_int_equal(s.local_width, d.local_width);
            assert_int_equal(s.heavy_count, d.heavy_count);
            assert_int_equal(s.heavy_start, d.heavy_start);
            assert_int_equal(s.heavy_period, d.heavy_period);
            assert_int_equal(s.seed, 7u);
        }
    /* And therefore its weights: the hash of funnel layer 0 of 32. */
    pb_wl_shape s;
    assert_int_equal(pb_wl_layer_shape(PB_WL_FUNNEL, 0, 32, &s), 0);
    assert_int_equal(trace_hash(&s), 3136039440u);
}

static void test_layer_shapes(void **state) {
    (void)state;
    pb_wl_shape s;
    /* Deepest funnel layer: the concentrated anchor. */
    assert_int_equal(pb_wl_layer_shape(PB_WL_FUNNEL, 31, 32, &s), 0);
    assert_true(s.sink_mass == 0.45 && s.local_mass == 0.39);
    assert_true(s.heavy_mass == 0.15 && s.noise_mass == 0.01);
    assert_int_equal(s.local_width, 16u);
    assert_int_equal(s.heavy_count, 8u);
    assert_int_equal(s.heavy_start, 128u);
    assert_int_equal(s.seed, 7u + 0x85EBCA6Bu * 31u);
    /* Deepest inverted layer: the broad anchor. */
    assert_int_equal(pb_wl_layer_shape(PB_WL_INVERTED, 31, 32, &s), 0);
    assert_true(s.sink_mass == 0.05 && s.local_mass == 0.35);
    assert_true(s.heavy_mass == 0.35 && s.noise_mass == 0.25);
    assert_int_equal(s.local_width, 256u);
    assert_int_equal(s.heavy_count, 128u);
    assert_int_equal(s.heavy_start, 256u + 4u + 128u);
    /* A middle layer: a + floor((b - a) * 10 / 31), floored toward minus
     * infinity: 64 + floor(-15.48) = 48, 32 + floor(-7.74) = 24. */
    assert_int_equal(pb_wl_layer_shape(PB_WL_FUNNEL, 10, 32, &s), 0);
    assert_int_equal(s.local_width, 48u);
    assert_int_equal(s.heavy_count, 24u);
    assert_int_equal(pb_wl_layer_shape(PB_WL_INVERTED, 10, 32, &s), 0);
    assert_int_equal(s.local_width, 64u + 61u); /* 192 * 10 / 31 = 61.9 */
    assert_int_equal(s.heavy_count, 32u + 30u); /* 96 * 10 / 31 = 30.97 */
    /* Flat: decode-4096's mixture with the layer's own seed. */
    assert_int_equal(pb_wl_layer_shape(PB_WL_FLAT, 5, 32, &s), 0);
    assert_true(s.sink_mass == 0.15 && s.local_width == 64u);
    assert_int_equal(s.seed, 7u + 0x85EBCA6Bu * 5u);
    /* Every shape of every profile generates. */
    for (uint32_t l = 0; l < 32; ++l) {
        assert_int_equal(pb_wl_layer_shape(PB_WL_FUNNEL, l, 32, &s), 0);
        assert_int_equal(pb_wl_shape_check(&s, PB_WL_POSITIONS), 0);
        assert_int_equal(pb_wl_layer_shape(PB_WL_INVERTED, l, 32, &s), 0);
        assert_int_equal(pb_wl_shape_check(&s, PB_WL_POSITIONS), 0);
    }
    assert_int_equal(pb_wl_layer_shape(PB_WL_FUNNEL, 32, 32, &s), -1);
    assert_int_equal(pb_wl_layer_shape((pb_wl_profile)9, 0, 32, &s), -1);
}

/* The layer seeds never make two layers' seeding sequences overlap:
 * seed_a + i * golden != seed_b + j * golden for rounds i, j in 1 .. 4. */
static void test_layer_seeds_disjoint(void **state) {
    (void)state;
    assert_int_equal(pb_wl_layer_seed(0), 7u);
    for (uint32_t d = 1; d < PB_WL_MAX_LAYERS; ++d) {
        const uint32_t diff = 0x85EBCA6Bu * d;
        for (int32_t j = -3; j <= 3; ++j)
            assert_int_not_equal(diff, (uint32_t)j * 0x9E3779B9u);
    }
}

static void test_profile_names(void **state) {
    (void)state;
    pb_wl_profile p;
    assert_int_equal(pb_wl_profile_parse("funnel", &p), 0);
    assert_int_equal(p, PB_WL_FUNNEL);
    assert_int_equal(pb_wl_profile_parse("decode-4096", &p), 0);
    assert_int_equal(p, PB_WL_DECODE4096);
    assert_int_equal(pb_wl_profile_parse("Funnel", &p), -1);
    assert_string_equal(pb_wl_profile_name(PB_WL_INVERTED), "inverted");
    assert_null(pb_wl_profile_name((pb_wl_profile)4));
}

static void test_top_positions_ties(void **state) {
    (void)state;
    uint32_t out[PB_WL_TOPK];
    /* k = 3: 0.5 is above the 3rd largest (0.2); two slots remain for the
     * three 0.2s, filled in ascending position order. */
    const float w[6] = {0.2f, 0.05f, 0.5f, 0.2f, 0.2f, 0.01f};
    const uint32_t n = pb_wl_top_positions(w, 6, 3, out);
    assert_int_equal(n, 3u);
    assert_int_equal(out[0], 0u);
    assert_int_equal(out[1], 2u);
    assert_int_equal(out[2], 3u);
    /* t < k: every position. */
    assert_int_equal(pb_wl_top_positions(w, 2, 32, out), 2u);
    assert_int_equal(out[0], 0u);
    assert_int_equal(out[1], 1u);
    /* All equal: the lowest k positions. */
    float flat[40];
    for (int i = 0; i < 40; ++i) flat[i] = 0.025f;
    assert_int_equal(pb_wl_top_positions(flat, 40, 32, out), 32u);
    assert_int_equal(out[31], 31u);
    /* A strictly decreasing tail: the largest 32 values. */
    float dec[100];
    for (int i = 0; i < 100; ++i) dec[i] = (float)(i % 50);
    assert_int_equal(pb_wl_top_positions(dec, 100, 32, out), 32u);
    /* values 34..49 appear twice: 32 slots, all above 33. */
    assert_int_equal(out[0], 34u);
    assert_int_equal(out[15], 49u);
    assert_int_equal(out[16], 84u);
    assert_int_equal(out[31], 99u);
}

static void test_round6_and_entropy(void **state) {
    (void)state;
    assert_true(pb_wl_round6(0.8211904) == 0.82119);
    assert_true(pb_wl_round6(0.7833785) == 0.783379);
    assert_true(pb_wl_round6(0.0) == 0.0);
    const float one[1] = {1.0f};
    assert_true(pb_wl_entropy(one, 1) == 0.0);
    const float four[4] = {0.25f, 0.25f, 0.25f, 0.25f};
    assert_true(pb_wl_entropy(four, 4) > 1.3862943 &&
                pb_wl_entropy(four, 4) < 1.3862944); /* ln 4 */
    const float zero[3] = {0.5f, 0.0f, 0.5f};
    assert_true(pb_wl_entropy(zero, 3) > 0.6931471 &&
                pb_wl_entropy(zero, 3) < 0.6931472); /* ln 2 */
}

PB_TEST_MAIN(cmocka_unit_test(test_rng_seed7),
             cmocka_unit_test(test_rng_next_int),
             cmocka_unit_test(test_decode4096_hash_and_first_weights),
             cmocka_unit_test(test_layer0_is_decode4096),
             cmocka_unit_test(test_layer_shapes),
             cmocka_unit_test(test_layer_seeds_disjoint),
             cmocka_unit_test(test_profile_names),
             cmocka_unit_test(test_top_positions_ties),
             cmocka_unit_test(test_round6_and_entropy))
