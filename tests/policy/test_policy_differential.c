/*
 * test_policy_differential.c - the library against tests/reference_model on
 * seeded random scenarios: random parameters (tiny budgets and windows, every
 * layer position, small and large kernels, both pool modes, default and
 * explicit capacities, now and then refused ones), random steps (attention
 * with zeros, -0.0, exact ties, subnormals, wide exponents; null steps;
 * invalid calls of every kind), random evict cadences and asks (also with
 * short victim buffers), resets and queries. After every call the statuses
 * must agree; every victim list, kept set and window score must agree bit
 * for bit.
 *
 * Usage: test_policy_differential [scenarios [first_seed]]; the default
 * runs PB_DIFF_SCENARIOS scenarios from seed 1. A failure prints the seed
 * and the call, so `test_policy_differential 1 SEED` replays it.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "pyramidkv/pyramidkv.h"
#include "differential_pair.h"
#include "fp_env.h"
#include "reference_model.h"
#include "test_rng.h"

#define PB_DIFF_SCENARIOS 12000u

static unsigned long n_scenarios = PB_DIFF_SCENARIOS;

/* What the run exercised, printed at the end so a reader can see that the
 * comparison was not vacuous. */
static struct {
    unsigned long created, refused;
    dpair_seen run;
    unsigned long status[PB_STATUS_COUNT_];
} seen;
static unsigned long first_seed = 1;

/* ------------------------------------------------------------------------ */
/* Scenario parameters                                                      */

typedef struct scenario {
    pb_kvcache_pyramidkv_params params;
    pb_kvcache_options options;
    int use_vtable;     /* drive the policybook surface instead */
    double evict_rate;  /* probability an evict follows a step */
    int weight_style;   /* see dpair_weight() */
    uint32_t ops;
} scenario;

static scenario draw(pbt_rng *r) {
    scenario sc;
    memset(&sc, 0, sizeof sc);
    pb_kvcache_pyramidkv_params *p = &sc.params;
    const dshape shape = dpair_draw_shape(r);
    p->budget = shape.budget;
    p->num_layers = shape.num_layers;
    p->layer = shape.layer;
    p->pyramid_ratio = shape.pyramid_ratio;
    p->recent_window = shape.recent_window;
    p->obs_window = shape.obs_window;
    p->pool_kernel = shape.pool_kernel;
    sc.options.pool = shape.pool;
    if (dpair_chance(r, .4))
        sc.options.capacity = p->recent_window + 2 + pbt_below(r, 300);
    sc.options.prefill_max_len = dpair_chance(r, .1) ? pbt_below(r, 100) : 0;
    sc.options.prefill_scope = pbt_below(r, 2);

    /* Now and then one refused field. */
    if (dpair_chance(r, .03)) {
        switch (pbt_below(r, 9)) {
        case 0: p->budget = 0; break;
        case 1: p->budget = UINT32_MAX; break;
        case 2: p->num_layers = 0; break;
        case 3: p->layer = p->num_layers; break;
        case 4: p->pyramid_ratio = 0; break;
        case 5: p->recent_window = p->budget; break;
        case 6: p->obs_window = 0; break;
        case 7: p->pool_kernel = 2 * pbt_below(r, 5); break;
        default: sc.options.capacity = p->recent_window + 1; break;
        }
    }

    sc.use_vtable = sc.options.capacity == 0 &&
                    sc.options.pool == (uint32_t)PB_POOL_MAX && dpair_chance(r, .2);
    static const double rates[] = {1.0, 1.0, .5, .2, .05};
    sc.evict_rate = rates[pbt_below(r, 5)];
    sc.weight_style = (int)pbt_below(r, 9);
    /* Large instances get fewer calls, to keep the reference fast. */
    sc.ops = p->budget > 120 ? 40 + pbt_below(r, 200) : 10 + pbt_below(r, 300);
    return sc;
}

static void run_scenario(unsigned long seed) {
    pbt_rng r = {seed * UINT64_C(0x2545F4914F6CDD1D)};
    const scenario sc = draw(&r);
    dpair pr;
    memset(&pr, 0, sizeof pr);
    pr.seed = seed;
    pr.seen = &seen.run;
    pr.status_seen = seen.status;
    if (sc.use_vtable) pr.vt = &pb_kvcache_pyramidkv;

    const pb_status want = ref_create(&pr.ref, &sc.params, &sc.options);
    if (sc.use_vtable) {
        pr.lib = pb_kvcache_pyramidkv.create(&sc.params, NULL, NULL);
        if ((pr.lib != NULL) != (want == PB_OK))
            dpair_fail(&pr, "vtable create disagrees with the reference");
    } else {
        const pb_status got =
            pb_kvcache_pyramidkv_create(&sc.params, &sc.options, NULL, &pr.lib);
        if (got != want) dpair_fail(&pr, "create status differs");
        size_t bytes = 0;
        if (pb_kvcache_pyramidkv_size(&sc.params, &sc.options, &bytes) != got)
            dpair_fail(&pr, "size status differs from create");
        if (got == PB_OK && bytes != pb_kvcache_memory_bytes(pr.lib))
            dpair_fail(&pr, "size differs from memory_bytes");
    }
    if (want != PB_OK) {
        seen.refused += 1;
        return;
    }
    seen.created += 1;
    if (pr.ref.capacity > DPAIR_MAX_HELD) dpair_fail(&pr, "scenario too large");
    if (pb_kvcache_effective_budget(pr.lib) != pr.ref.effective ||
        pb_kvcache_capacity(pr.lib) != pr.ref.capacity)
        dpair_fail(&pr, "effective budget or capacity differs");

    const dmix mix = {.ops = sc.ops,
                      .budget = sc.params.budget,
                      .step_percent = 62,
                      .large_gap = .1,
                      .null_step = .1,
                      .evict_rate = sc.evict_rate,
                      .weight_style = sc.weight_style};
    dpair_run(&pr, &r, &mix);
    pb_kvcache_destroy(pr.lib);
    ref_destroy(&pr.ref);
}

static void library_matches_reference(void **state) {
    (void)state;
    for (unsigned long s = 0; s < n_scenarios; ++s)
        run_scenario(first_seed + s);
    printf("%lu scenarios from seed %lu: no disagreement\n", n_scenarios,
           first_seed);
    printf("  %lu created, %lu refused; %lu steps, %lu evicts, %lu victims, "
           "%lu window scores compared\n",
           seen.created, seen.refused, seen.run.steps, seen.run.evicts,
           seen.run.victims, seen.run.scores);
    printf("  statuses seen:");
    for (int st = 0; st < PB_STATUS_COUNT_; ++st)
        if (seen.status[st] != 0)
            printf(" %s %lu,", pb_status_str((pb_status)st), seen.status[st]);
    printf("\n");
}

/* A quarter of the scenarios again under FTZ and DAZ (tests/fp_env.h):
 * no bound the library builds from bit patterns may be a subnormal that it
 * then compares as a double. */
static void library_matches_reference_under_daz(void **state) {
    (void)state;
#if PBT_HAVE_DAZ
    const unsigned long n = (n_scenarios + 3u) / 4u;
    const unsigned csr = pbt_daz_begin();
    for (unsigned long s = 0; s < n; ++s) run_scenario(first_seed + s);
    pbt_daz_end(csr);
    printf("%lu scenarios from seed %lu under FTZ and DAZ: no disagreement\n",
           n, first_seed);
#else
    skip(); /* no such bits on this architecture */
#endif
}

int main(int argc, char **argv) {
    if (argc > 1) n_scenarios = strtoul(argv[1], NULL, 10);
    if (argc > 2) first_seed = strtoul(argv[2], NULL, 10);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(library_matches_reference),
        cmocka_unit_test(library_matches_reference_under_daz),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
