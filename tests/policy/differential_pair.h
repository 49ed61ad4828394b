/*
 * differential_pair.h - what both differential tests share: the library
 * and tests/reference_model driven side by side by one seeded run of calls
 * (steps with awkward weights, null and invalid steps, evicts with random
 * asks and short buffers, resets, score queries), every status, victim
 * list, kept set, sink count and score compared bit for bit after each
 * call. test_policy_differential draws PyramidKV parameters and options;
 * test_policy_differential_cells draws a config per cell of scorer x share
 * x sinks x cadence; each fills a dpair and a dmix and calls dpair_run.
 */
#ifndef PB_TESTS_DIFFERENTIAL_PAIR_H
#define PB_TESTS_DIFFERENTIAL_PAIR_H

#include <stdint.h>

#include "pyramidkv/pyramidkv.h"
#include "reference_model.h"
#include "test_rng.h"

#define DPAIR_MAX_HELD 1024u

/* What a run exercised, printed by the tests so a reader can see that the
 * comparison was not vacuous. */
typedef struct dpair_seen {
    unsigned long steps, evicts, victims, scores;
} dpair_seen;

typedef struct dpair {
    pb_kvcache *lib;
    ref_policy ref;
    const pb_kvcache_vtable *vt; /* NULL: the native surface */
    int tova_vtable; /* TOVA's vtable checks the buffer before sparing */
    int scores;      /* compare pb_kvcache_score and the sink count too,
                        not only pb_kvcache_window_score */
    unsigned long seed;
    uint32_t op;
    dpair_seen *seen;
    unsigned long *status_seen; /* [PB_STATUS_COUNT_] */
    /* Writes what identifies the scenario (before "seed ..."), or NULL. */
    void (*describe)(const struct dpair *pr, char *buf, size_t len);
    const void *ctx; /* for describe */
} dpair;

/* The call mix of a run. */
typedef struct dmix {
    uint32_t ops;
    uint32_t budget;       /* the asks are drawn around it */
    int ask_effective;     /* a step's evict asks the effective budget */
    uint32_t step_percent; /* calls that are decode steps */
    double small_gap;      /* a step skips up to 8 positions */
    double large_gap;      /* a step skips up to 1000 positions */
    double null_step;      /* a step without attention */
    double evict_rate;     /* an evict follows a step */
    int weight_style;      /* see dpair_weight */
} dmix;

static inline int dpair_chance(pbt_rng *r, double p) {
    return pbt_unit(r) < p;
}

/* The parameters both tests draw alike, in this order: the budget (most
 * small, some past 120), layers and layer, pyramid ratio, recent window,
 * observation window, pooling kernel (now and then far wider than the
 * window) and pooling (average a quarter of the time). */
typedef struct dshape {
    uint32_t budget, num_layers, layer, pyramid_ratio, recent_window,
        obs_window, pool_kernel, pool;
} dshape;

dshape dpair_draw_shape(pbt_rng *r);

/* One attention weight of a style 0..8: uniform, few levels (exact ties),
 * zeros, subnormals, wide exponents, `constant`, small integers, -0.0 and
 * powers, softmax-like heavy hitters over a light tail. */
float dpair_weight(pbt_rng *r, int style, float constant);

/* Reports a disagreement with the scenario, seed and call; fails. */
void dpair_fail(const dpair *pr, const char *what);

/* Compares kept positions, counts, sink counts and scores (all of them, or
 * up to 24 drawn at random when more than 48 are held). */
void dpair_compare(dpair *pr, pbt_rng *r, int all_scores);

/* Runs the mix on a created pair; compares the state at the end. */
void dpair_run(dpair *pr, pbt_rng *r, const dmix *m);

#endif /* PB_TESTS_DIFFERENTIAL_PAIR_H */
