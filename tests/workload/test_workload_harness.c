/*
 * test_workload_harness.c - the multi-layer harness against the policybook
 * registry's published figures (docs/traces.md, decode-4096): decode-4096, one
 * layer, default parameters, budgets 256/512/1024, through the library's
 * pb_kvcache_pyramidkv and pb_kvcache_snapkv vtables and through the
 * reference model; layer 0 of `flat` at ratio 1 gives the same figures;
 * the library and the reference model agree on the layered profiles; the
 * accounting (shares, floors, peak held) and the harness's own checks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pyramidkv/pyramidkv.h"
#include "wl_suite.h"
#include "workload_harness.h"
#include "workload_ref_vtable.h"
#include "test_main.h"

/* The registry's figures at recent 32, obs 16, kernel 7. */
typedef struct published {
    uint32_t budget;
    double mass, recall;
    uint64_t evictions;
} published;

static const published figures[3] = {
    {256u, 0.783378, 0.890183, 3840u},
    {512u, 0.82119, 0.901949, 3584u},
    {1024u, 0.888049, 0.941169, 3072u},
};

static pb_wl_run_params params_for(pb_wl_profile profile, uint32_t layers,
                                   const pb_kvcache_vtable *vt,
                                   const pb_wl_config *configs, size_t n) {
    pb_wl_run_params p = wl_params(profile, layers, configs, n);
    p.vtable = vt;
    p.params_kind = PB_WL_PARAMS_PYRAMIDKV;
    p.kept_count = vt == &pb_wl_test_ref_vtable ? pb_wl_test_ref_kept_count
                                                : pb_kvcache_kept_count;
    return p;
}

static void check_published(const pb_wl_layer_stats *ls, const published *f,
                            const char *what) {
    if (ls->mass != f->mass || ls->recall != f->recall ||
        ls->evictions != f->evictions)
        print_error("%s budget %u: mass %.6f recall %.6f evictions %llu, "
                    "published %.6f %.6f %llu\n", what, f->budget, ls->mass,
                    ls->recall, (unsigned long long)ls->evictions, f->mass,
                    f->recall, (unsigned long long)f->evictions);
    assert_true(ls->mass == f->mass);
    assert_true(ls->recall == f->recall);
    assert_int_equal(ls->evictions, f->evictions);
}

static void nine_figures(const pb_kvcache_vtable *vt, pb_wl_params_kind kind,
                         const char *what) {
    pb_wl_run_params p = params_for(PB_WL_DECODE4096, 1, vt, wl_three_budgets, 3);
    p.params_kind = kind;
    pb_wl_result res[3];
    wl_run_ok(&p, res, NULL);
    for (size_t i = 0; i < 3; ++i) {
        check_published(&res[i].layers[0], &figures[i], what);
        assert_true(res[i].mass == figures[i].mass);
        assert_true(res[i].recall == figures[i].recall);
        assert_int_equal(res[i].evictions, figures[i].evictions);
        assert_int_equal(res[i].peak_held, figures[i].budget + 1u);
        assert_int_equal(res[i].share_total, figures[i].budget);
    }
    pb_wl_result_free(res, 3);
}

static void test_nine_figures_pyramidkv(void **state) {
    (void)state;
    nine_figures(&pb_kvcache_pyramidkv, PB_WL_PARAMS_PYRAMIDKV,
                 "pb_kvcache_pyramidkv");
}

static void test_nine_figures_snapkv(void **state) {
    (void)state;
    nine_figures(&pb_kvcache_snapkv, PB_WL_PARAMS_SNAPKV, "pb_kvcache_snapkv");
}

static void test_nine_figures_reference(void **state) {
    (void)state;
    nine_figures(&pb_wl_test_ref_vtable, PB_WL_PARAMS_PYRAMIDKV,
                 "reference model");
}

/* `flat`, ratio 1: layer 0 is decode-4096 under a uniform budget, so it
 * must give the published figures exactly. Layer 0's trace does not depend
 * on the layer count; 4 layers keep the test quick (test_cli_bench_plan
 * runs the 32-layer command of the acceptance line). */
static void test_flat_layer0_is_decode4096(void **state) {
    (void)state;
    pb_wl_run_params p =
        params_for(PB_WL_FLAT, 4, &pb_kvcache_pyramidkv, wl_three_budgets, 3);
    pb_wl_result res[3];
    wl_run_ok(&p, res, NULL);
    for (size_t i = 0; i < 3; ++i) {
        check_published(&res[i].layers[0], &figures[i], "flat layer 0");
        assert_int_equal(res[i].share_total, 4u * figures[i].budget);
        assert_int_equal(res[i].peak_held, 4u * (figures[i].budget + 1u));
    }
    pb_wl_result_free(res, 3);
}

/* The library and the reference model make the same decisions on the
 * layered profiles, pyramid and uniform alike. */
static void test_library_matches_reference(void **state) {
    (void)state;
    const pb_wl_config configs[3] = {{128u, 1u}, {128u, 4u}, {128u, 8u}};
    const pb_wl_profile profiles[2] = {PB_WL_FUNNEL, PB_WL_INVERTED};
    for (size_t k = 0; k < 2; ++k) {
        pb_wl_result lib[3], ref[3];
        pb_wl_run_params p =
            params_for(profiles[k], 6, &pb_kvcache_pyramidkv, configs, 3);
        p.positions = 1500u;
        wl_run_ok(&p, lib, NULL);
        p.vtable = &pb_wl_test_ref_vtable;
        p.kept_count = pb_wl_test_ref_kept_count;
        wl_run_ok(&p, ref, NULL);
        wl_assert_same_layers(lib, ref, 3, 6);
        pb_wl_result_free(lib, 3);
        pb_wl_result_free(ref, 3);
    }
}

/* Shares, effective shares, floors and peaks add up as documented. */
static void test_accounting_and_floors(void **state) {
    (void)state;
    /* Budget 40, ratio 8, 8 layers: the last layers' shares fall below
     * recent + 1 = 33 and are held at 33. */
    const pb_wl_config configs[2] = {{40u, 1u}, {40u, 8u}};
    pb_wl_run_params p =
        params_for(PB_WL_FUNNEL, 8, &pb_kvcache_pyramidkv, configs, 2);
    p.positions = 700u;
    pb_wl_result res[2];
    pb_wl_layer_info info[8];
    wl_run_ok(&p, res, info);
    for (size_t c = 0; c < 2; ++c) {
        uint64_t shares = 0, effective = 0, peak = 0;
        uint32_t floors = 0;
        for (uint32_t l = 0; l < 8; ++l) {
            const pb_wl_layer_stats *ls = &res[c].layers[l];
            assert_int_equal(ls->share,
                             pb_kvcache_pyramid_budget(40u, l, 8u,
                                                       configs[c].ratio));
            assert_int_equal(ls->effective, ls->share > 32u ? ls->share : 33u);
            assert_int_equal(ls->peak_held, ls->effective + 1u);
            shares += ls->share;
            effective += ls->effective;
            peak += ls->effective + 1u;
            floors += ls->share < 33u;
            assert_int_equal(ls->hit_slots, 32u * 699u - (31u * 32u) / 2u);
        }
        assert_int_equal(res[c].share_total, shares);
        assert_int_equal(res[c].share_total,
                         pb_kvcache_pyramid_total(40u, 8u, configs[c].ratio));
        assert_true(res[c].share_total <= 8u * 40u);
        assert_int_equal(res[c].effective_total, effective);
        assert_int_equal(res[c].floors_binding, floors);
        assert_int_equal(res[c].peak_held, peak);
    }
    assert_int_equal(res[0].floors_binding, 0u);
    assert_true(res[1].floors_binding > 0u);
    /* Layer 0's mixture is decode-4096's; the deepest funnel layer is
     * concentrated, so its attention entropy is lower. */
    assert_true(info[0].shape.seed == 7u);
    assert_true(info[7].entropy < info[0].entropy);
    pb_wl_result_free(res, 2);
}

/* A policy that evicts nothing when asked is caught, not measured. */
static size_t lazy_evict(pb_kvcache *policy, uint32_t budget,
                         uint32_t *victims, size_t capacity) {
    (void)policy;
    (void)budget;
    (void)victims;
    (void)capacity;
    return 0;
}

static void test_harness_catches_bad_policy(void **state) {
    (void)state;
    pb_kvcache_vtable lazy = pb_wl_test_ref_vtable;
    lazy.evict = lazy_evict;
    const pb_wl_config cf = {64u, 1u};
    pb_wl_run_params p = params_for(PB_WL_DECODE4096, 1, &lazy, &cf, 1);
    p.kept_count = NULL;
    pb_wl_result res;
    char err[256] = "";
    assert_int_equal(pb_wl_run(&p, &res, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "evicted 0 positions"));

    /* Refused parameters: budget not above the recent window. */
    const pb_wl_config small = {32u, 1u};
    p = params_for(PB_WL_FLAT, 2, &pb_kvcache_pyramidkv, &small, 1);
    assert_int_equal(pb_wl_run(&p, &res, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "budget 32"));
    p.configs = &cf;
    p.layers = 0;
    assert_int_equal(pb_wl_run(&p, &res, NULL, err, sizeof err), -1);
}

PB_TEST_MAIN(cmocka_unit_test(test_nine_figures_pyramidkv),
             cmocka_unit_test(test_nine_figures_snapkv),
             cmocka_unit_test(test_nine_figures_reference),
             cmocka_unit_test(test_flat_layer0_is_decode4096),
             cmocka_unit_test(test_library_matches_reference),
             cmocka_unit_test(test_accounting_and_floors),
             cmocka_unit_test(test_harness_catches_bad_policy))
