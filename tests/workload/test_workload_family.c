/*
 * test_workload_family.c - the rest of the policybook family (H2O,
 * Scissorhands, TOVA, StreamingLLM, sliding window) in the workload
 * harness against the registry's published figures: decode-4096, one
 * layer, default parameters, budgets 256/512/1024, 15 (mass, recall,
 * evictions) triples. Each is reproduced twice, by the library's vtable
 * and by the naive reference of bench/workload/workload_family_ref.c, and
 * the two must also agree on a pyramid over the layered profiles.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pyramidkv/pyramidkv.h"
#include "workload_family_ref.h"
#include "wl_suite.h"
#include "workload_harness.h"
#include "test_main.h"

typedef struct published {
    uint32_t budget;
    double mass, recall;
    uint64_t evictions;
} published;

typedef struct family_member {
    const char *name;
    pb_wl_params_kind kind;
    const pb_kvcache_vtable *library;
    const pb_kvcache_vtable *reference;
    published figures[3];
} family_member;

/* The registry's figures, default parameters (recent window 32 for H2O
 * and Scissorhands, 4 sinks for StreamingLLM). */
static const family_member family[5] = {
    {"h2o", PB_WL_PARAMS_H2O, &pb_kvcache_h2o, &pb_wl_ref_h2o,
     {{256u, 0.643895, 0.886261, 3840u},
      {512u, 0.714859, 0.913715, 3584u},
      {1024u, 0.784413, 0.945091, 3072u}}},
    {"scissorhands", PB_WL_PARAMS_SCISSORHANDS, &pb_kvcache_scissorhands,
     &pb_wl_ref_scissorhands,
     {{256u, 0.641318, 0.882339, 3840u},
      {512u, 0.711377, 0.906047, 3584u},
      {1024u, 0.784746, 0.945091, 3072u}}},
    {"tova", PB_WL_PARAMS_TOVA, &pb_kvcache_tova, &pb_wl_ref_tova,
     {{256u, 0.778128, 0.882339, 3840u},
      {512u, 0.824012, 0.909793, 3584u},
      {1024u, 0.885888, 0.937247, 3072u}}},
    {"streaming-llm", PB_WL_PARAMS_STREAMING_LLM, &pb_kvcache_streaming_llm,
     &pb_wl_ref_streaming_llm,
     {{256u, 0.736691, 0.859419, 3840u},
      {512u, 0.786153, 0.88348, 3584u},
      {1024u, 0.866203, 0.927572, 3072u}}},
    {"sliding-window", PB_WL_PARAMS_SLIDING_WINDOW,
     &pb_kvcache_sliding_window, &pb_wl_ref_sliding_window,
     {{256u, 0.596637, 0.742171, 3840u},
      {512u, 0.655518, 0.774107, 3584u},
      {1024u, 0.754149, 0.833734, 3072u}}},
};

static pb_wl_run_params params_for(const family_member *m, int library,
                                   pb_wl_profile profile, uint32_t layers,
                                   const pb_wl_config *configs, size_t n) {
    pb_wl_run_params p = wl_params(profile, layers, configs, n);
    p.sinks = 4u;
    p.vtable = library ? m->library : m->reference;
    p.params_kind = m->kind;
    return p;
}

static void fifteen_figures(int library) {
    for (size_t k = 0; k < 5; ++k) {
        const family_member *m = &family[k];
        pb_wl_run_params p =
            params_for(m, library, PB_WL_DECODE4096, 1, wl_three_budgets, 3);
        p.kept_count = library ? pb_kvcache_kept_count : pb_wl_ref_kept_count;
        pb_wl_result res[3];
        wl_run_ok(&p, res, NULL);
        for (size_t i = 0; i < 3; ++i) {
            const published *f = &m->figures[i];
            if (res[i].mass != f->mass || res[i].recall != f->recall ||
                res[i].evictions != f->evictions)
                print_error("%s (%s) budget %u: mass %.6f recall %.6f "
                            "evictions %llu, published %.6f %.6f %llu\n",
                            m->name, library ? "library" : "reference",
                            f->budget, res[i].mass, res[i].recall,
                            (unsigned long long)res[i].evictions, f->mass,
                            f->recall, (unsigned long long)f->evictions);
            assert_true(res[i].mass == f->mass);
            assert_true(res[i].recall == f->recall);
            assert_int_equal(res[i].evictions, f->evictions);
            assert_int_equal(res[i].peak_held, f->budget + 1u);
            assert_int_equal(res[i].share_total, f->budget);
        }
        pb_wl_result_free(res, 3);
    }
}

static void test_fifteen_figures_reference(void **state) {
    (void)state;
    fifteen_figures(0);
}

static void test_fifteen_figures_library(void **state) {
    (void)state;
    fifteen_figures(1);
}

/* Pyramid and uniform over every member on two layered profiles, shortened:
 * the library's decisions are the reference's, layer by layer. */
static void test_layered_library_matches_reference(void **state) {
    (void)state;
    const pb_wl_config configs[2] = {{96u, 1u}, {96u, 4u}};
    for (size_t k = 0; k < 5; ++k)
        for (int prof = 0; prof < 2; ++prof) {
            const pb_wl_profile profile =
                prof == 0 ? PB_WL_FUNNEL : PB_WL_INVERTED;
            pb_wl_result lib[2], ref[2];
            pb_wl_run_params p =
                params_for(&family[k], 1, profile, 5, configs, 2);
            p.positions = 1200u;
            p.kept_count = pb_kvcache_kept_count;
            wl_run_ok(&p, lib, NULL);
            p = params_for(&family[k], 0, profile, 5, configs, 2);
            p.positions = 1200u;
            p.kept_count = pb_wl_ref_kept_count;
            wl_run_ok(&p, ref, NULL);
            wl_assert_same_layers(lib, ref, 2, 5);
            for (size_t c = 0; c < 2; ++c)
                for (uint32_t l = 0; l < 5; ++l)
                    assert_int_equal(lib[c].layers[l].effective,
                                     ref[c].layers[l].effective);
            pb_wl_result_free(lib, 2);
            pb_wl_result_free(ref, 2);
        }
}

/* The floor each kind keeps: a budget below it is refused by the harness
 * before any policy is created. */
static void test_floors(void **state) {
    (void)state;
    assert_int_equal(pb_wl_floor_of(PB_WL_PARAMS_H2O, 32u, 4u), 33u);
    assert_int_equal(pb_wl_floor_of(PB_WL_PARAMS_SCISSORHANDS, 7u, 4u), 8u);
    assert_int_equal(pb_wl_floor_of(PB_WL_PARAMS_TOVA, 32u, 4u), 1u);
    assert_int_equal(pb_wl_floor_of(PB_WL_PARAMS_STREAMING_LLM, 32u, 4u), 5u);
    assert_int_equal(pb_wl_floor_of(PB_WL_PARAMS_SLIDING_WINDOW, 32u, 4u),
                     1u);
    const pb_wl_config small[1] = {{4u, 1u}};
    pb_wl_run_params p =
        params_for(&family[3], 0, PB_WL_DECODE4096, 1, small, 1);
    pb_wl_result res[1];
    char err[256] = "";
    assert_int_equal(pb_wl_run(&p, res, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "at least 5"));
    p = params_for(&family[2], 0, PB_WL_DECODE4096, 1, small, 1);
    p.positions = 200u;
    wl_run_ok(&p, res, NULL);
    assert_int_equal(res[0].peak_held, 5u);
    assert_int_equal(res[0].evictions, 199u - 3u);
    pb_wl_result_free(res, 1);
}

/* `test_workload_family layered` runs only the layered comparison (its
 * own ctest entry, label slow, so valgrind's `unit` run skips it); with no
 * argument, every other test. */
PB_TEST_MAIN_SLOW("layered",
                  PB_TESTS(cmocka_unit_test(test_layered_library_matches_reference)),
                  PB_TESTS(cmocka_unit_test(test_fifteen_figures_reference),
                           cmocka_unit_test(test_fifteen_figures_library),
                           cmocka_unit_test(test_floors)))
