/*
 * policy_rules_helpers.h - what the two programs of the policy's rules
 * share (test_policy_rules.c, test_policy_contract.c): instances made from
 * parameters, steps and evicts checked against values worked out by hand,
 * a snapshot of everything observable (to prove an error changed nothing)
 * and the worked steps of docs/spec.md 11.1.
 */
#ifndef PB_TESTS_POLICY_RULES_HELPERS_H
#define PB_TESTS_POLICY_RULES_HELPERS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "pyramidkv/pyramidkv.h"

static inline pb_kvcache_pyramidkv_params
params_of(uint32_t budget, uint32_t layer, uint32_t num_layers, uint32_t ratio,
          uint32_t recent, uint32_t obs, uint32_t kernel) {
    pb_kvcache_pyramidkv_params p = {budget, layer,  num_layers, ratio,
                                     recent, obs,    kernel};
    return p;
}

static inline pb_kvcache *make(const pb_kvcache_pyramidkv_params *p,
                               const pb_kvcache_options *o) {
    pb_kvcache *k = NULL;
    assert_int_equal(pb_kvcache_pyramidkv_create(p, o, NULL, &k), PB_OK);
    assert_non_null(k);
    return k;
}

static inline void observe_ok(pb_kvcache *k, uint32_t pos, const float *w,
                              size_t n) {
    assert_int_equal(pb_kvcache_observe(k, pos, w, n), PB_OK);
}

static inline double score_of(const pb_kvcache *k, uint32_t pos) {
    double s = -1.0;
    assert_int_equal(pb_kvcache_window_score(k, pos, &s), PB_OK);
    return s;
}

/* Evicts and checks the victims against want[0 .. n_want-1]. */
static inline void evict_expect(pb_kvcache *k, uint32_t budget,
                                const uint32_t *want, size_t n_want) {
    uint32_t got[64];
    size_t n = 999;
    assert_int_equal(pb_kvcache_evict(k, budget, got, 64, &n), PB_OK);
    assert_int_equal(n, n_want);
    for (size_t i = 0; i < n_want; ++i) assert_int_equal(got[i], want[i]);
}

static inline void kept_expect(const pb_kvcache *k, const uint32_t *want,
                               size_t n_want) {
    uint32_t got[64];
    size_t n = 999;
    assert_int_equal(pb_kvcache_kept_positions(k, got, 64, &n), PB_OK);
    assert_int_equal(n, n_want);
    assert_int_equal(pb_kvcache_kept_count(k), n_want);
    for (size_t i = 0; i < n_want; ++i) assert_int_equal(got[i], want[i]);
}

/* A snapshot of everything observable, to prove an error changed nothing. */
typedef struct snapshot {
    size_t kept;
    uint32_t pos[64];
    double score[64];
} snapshot;

static inline snapshot snap(const pb_kvcache *k) {
    snapshot s;
    memset(&s, 0, sizeof s);
    size_t n = 0;
    assert_int_equal(pb_kvcache_kept_positions(k, s.pos, 64, &n), PB_OK);
    s.kept = n;
    for (size_t i = 0; i < n; ++i) s.score[i] = score_of(k, s.pos[i]);
    return s;
}

static inline void same_as(const pb_kvcache *k, const snapshot *before) {
    const snapshot now = snap(k);
    assert_int_equal(now.kept, before->kept);
    assert_memory_equal(now.pos, before->pos, sizeof now.pos);
    assert_memory_equal(now.score, before->score, sizeof now.score);
}

/* The worked steps (docs/spec.md 11.1): obs_window 8, pool 1, recent 1. */
static inline void feed_worked_steps(pb_kvcache *k) {
    static const float s1[] = {1.0f};
    static const float s2[] = {.5f, .5f};
    static const float s3[] = {.25f, .25f, .5f};
    static const float s4[] = {.125f, .125f, .25f, .5f};
    static const float s5[] = {.0625f, .0625f, .125f, .25f, .5f};
    static const float s6[] = {.0625f, .0625f, .0625f, .125f, .25f, .4375f};
    observe_ok(k, 1, s1, 1);
    observe_ok(k, 2, s2, 2);
    observe_ok(k, 3, s3, 3);
    observe_ok(k, 4, s4, 4);
    observe_ok(k, 5, s5, 5);
    observe_ok(k, 6, s6, 6);
}

#endif
