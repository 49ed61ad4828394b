/*
 * wl_suite.h - what the harness suites of tests/workload share: the run
 * parameters of the published figures, a run that must succeed, and the
 * check that two runs (the library and a reference model) made the same
 * decisions, layer by layer. Include after <cmocka.h>.
 */
#ifndef PB_TESTS_WL_SUITE_H
#define PB_TESTS_WL_SUITE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "workload_harness.h"

/* The three budgets of the published figures, one layer each. */
static const pb_wl_config wl_three_budgets[3] = {{256u, 1u}, {512u, 1u},
                                                 {1024u, 1u}};

/* The harness parameters of the published figures (every position,
 * recent window 32, observation window 16, kernel 7) on these configs;
 * the caller sets the policy: vtable, params_kind, kept_count, sinks. */
static inline pb_wl_run_params wl_params(pb_wl_profile profile,
                                         uint32_t layers,
                                         const pb_wl_config *configs,
                                         size_t n) {
    pb_wl_run_params p;
    memset(&p, 0, sizeof p);
    p.profile = profile;
    p.layers = layers;
    p.positions = PB_WL_POSITIONS;
    p.recent_window = 32u;
    p.obs_window = 16u;
    p.pool_kernel = 7u;
    p.configs = configs;
    p.n_configs = n;
    return p;
}

/* pb_wl_run, which must succeed (its message printed if not). */
static inline void wl_run_ok(const pb_wl_run_params *p, pb_wl_result *res,
                             pb_wl_layer_info *info) {
    char err[256] = "";
    const int rc = pb_wl_run(p, res, info, err, sizeof err);
    if (rc != 0) print_error("pb_wl_run: %s\n", err);
    assert_int_equal(rc, 0);
}

/* For each of n_configs results and n_layers layers: the same retained
 * weight (exactly), hits and evictions. */
static inline void wl_assert_same_layers(const pb_wl_result *lib,
                                         const pb_wl_result *ref,
                                         size_t n_configs, uint32_t n_layers) {
    for (size_t c = 0; c < n_configs; ++c)
        for (uint32_t l = 0; l < n_layers; ++l) {
            assert_true(lib[c].layers[l].retained_sum ==
                        ref[c].layers[l].retained_sum);
            assert_int_equal(lib[c].layers[l].hits, ref[c].layers[l].hits);
            assert_int_equal(lib[c].layers[l].evictions,
                             ref[c].layers[l].evictions);
        }
}

#endif
