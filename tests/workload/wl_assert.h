/*
 * wl_assert.h - the assertion the workload suites share: two harness runs
 * (the library and a reference model) made the same decisions, layer by
 * layer. Include after <cmocka.h>.
 */
#ifndef PB_TESTS_WL_ASSERT_H
#define PB_TESTS_WL_ASSERT_H

#include <stddef.h>
#include <stdint.h>

#include "workload_harness.h"

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
