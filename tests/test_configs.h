/*
 * test_configs.h - the configurations the suites start from: the
 * documented defaults with the one or two fields that nearly every test
 * sets, so that a test states only what it is about.
 */
#ifndef PB_TESTS_TEST_CONFIGS_H
#define PB_TESTS_TEST_CONFIGS_H

#include <stdint.h>

#include "pyramidkv/pyramidkv.h"

/* Defines static inline T name(uint32_t a, uint32_t b): the DEFAULT
 * initialiser of T with its fields a and b set to those values. */
#define PBT_DEFAULT_WITH(T, name, DEFAULT, a, b)                            \
    static inline T name(uint32_t a, uint32_t b) {                          \
        T v = DEFAULT;                                                      \
        v.a = a;                                                            \
        v.b = b;                                                            \
        return v;                                                           \
    }

/* pbt_kvcache_config(budget, recent_window) */
PBT_DEFAULT_WITH(pb_kvcache_config, pbt_kvcache_config,
                 PB_KVCACHE_CONFIG_DEFAULT, budget, recent_window)
/* pbt_profile_params(num_layers, max_len) */
PBT_DEFAULT_WITH(pb_profile_params, pbt_profile_params,
                 PB_PROFILE_PARAMS_DEFAULT, num_layers, max_len)

#endif
