/*
 * test_policy_differential_cells.c - the library against
 * tests/reference_model on seeded random scenarios, cell by cell: every
 * scorer (window, cumulative, last, votes, none) x share (the pyramid
 * formula, or an explicit share) x sinks (none, some) x evict cadence
 * (after every step, every few steps, rarely) runs its own count of
 * scenarios, on the native surface or, where a policybook vtable means
 * that cell (pyramidkv; h2o, scissorhands, tova, streaming_llm and
 * sliding_window with their own explicit share), through the vtable.
 *
 * A scenario draws a config (tiny to a few hundred positions, every layer
 * position, windows, kernels, pool modes, explicit capacities, now and
 * then a refused field) and runs steps with awkward weights (zeros, -0.0,
 * exact ties, subnormals, wide exponents, heavy hitters), null steps,
 * invalid calls of every kind, evicts at the cell's cadence with random
 * asks and short buffers, resets and queries. After every call the
 * statuses must agree; every victim list, kept set, sink count and score
 * must agree bit for bit.
 *
 * Usage: test_policy_differential_cells [per_cell [first_seed]]; the
 * default runs PB_CELL_SCENARIOS scenarios per cell. A failure prints the
 * cell, the seed and the call; `test_policy_differential_cells 1 SEED`
 * with the printed seed replays the scenario (it runs in every cell, the
 * failing one among them).
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

#define PB_CELL_SCENARIOS 100u

enum { N_SCORERS = 5, N_SHARES = 2, N_SINKS = 2, N_CADENCES = 3 };
#define N_CELLS (N_SCORERS * N_SHARES * N_SINKS * N_CADENCES)

static const char *const scorer_name[N_SCORERS] = {"window", "cumulative",
                                                   "last", "votes", "none"};
static const char *const share_name[N_SHARES] = {"formula", "explicit"};
static const char *const sinks_name[N_SINKS] = {"no sinks", "sinks"};
static const char *const cadence_name[N_CADENCES] = {"every step",
                                                     "every few", "rare"};
static const double cadence_rate[N_CADENCES] = {1.0, .25, .03};

static unsigned long per_cell = PB_CELL_SCENARIOS;
static unsigned long first_seed = 1;

/* What each cell exercised, printed at the end so a reader can see that
 * the comparison was not vacuous. */
typedef struct cell_seen {
    unsigned long scenarios, created, refused, vtable;
    dpair_seen run;
} cell_seen;
static cell_seen seen[N_CELLS];
static unsigned long status_seen[PB_STATUS_COUNT_];

/* ------------------------------------------------------------------------ */
/* Scenarios                                                                */

typedef enum surface {
    SURF_NATIVE = 0,
    SURF_PYRAMIDKV, /* window, formula, no sinks */
    SURF_H2O,       /* cumulative, explicit, no sinks */
    SURF_SCISSORHANDS, /* votes, explicit, no sinks */
    SURF_TOVA,      /* last, explicit, no sinks, recent 0 */
    SURF_STREAMING_LLM, /* none, explicit, sinks, recent 0 */
    SURF_SLIDING_WINDOW /* none, explicit, no sinks, recent 0 */
} surface;

typedef struct scenario {
    pb_kvcache_config config; /* what the reference is created with */
    surface surf;
    double evict_rate;
    int weight_style;
    uint32_t ops;
} scenario;

/* The vtable that means this cell, if one does, chosen now and then. */
static surface pick_surface(pbt_rng *r, int scorer, int share, int sinks) {
    if (!dpair_chance(r, .25)) return SURF_NATIVE;
    if (scorer == PB_SCORER_WINDOW && share == 0 && sinks == 0)
        return SURF_PYRAMIDKV;
    if (share == 0) return SURF_NATIVE;
    switch (scorer) {
    case PB_SCORER_CUMULATIVE: return sinks ? SURF_NATIVE : SURF_H2O;
    case PB_SCORER_VOTES: return sinks ? SURF_NATIVE : SURF_SCISSORHANDS;
    case PB_SCORER_LAST: return sinks ? SURF_NATIVE : SURF_TOVA;
    case PB_SCORER_NONE:
        return sinks ? SURF_STREAMING_LLM : SURF_SLIDING_WINDOW;
    default: return SURF_NATIVE;
    }
}

static scenario draw(pbt_rng *r, int scorer, int share, int sinks,
                     int cadence) {
    scenario sc;
    memset(&sc, 0, sizeof sc);
    pb_kvcache_config d = PB_KVCACHE_CONFIG_DEFAULT;
    pb_kvcache_config *c = &sc.config;
    *c = d;
    c->scorer = (uint32_t)scorer;
    const dshape shape = dpair_draw_shape(r);
    c->budget = shape.budget;
    c->num_layers = shape.num_layers;
    c->layer = shape.layer;
    c->pyramid_ratio = shape.pyramid_ratio;
    c->recent_window = shape.recent_window;
    c->obs_window = shape.obs_window;
    c->pool_kernel = shape.pool_kernel;
    c->pool = shape.pool;
    if (share) /* any schedule's share: below, around or above the budget */
        c->share = 1 + pbt_below(r, 2 * c->budget + 8);
    if (sinks) /* positions below 1 .. 12, some past what is ever held */
        c->sinks = 1 + pbt_below(r, dpair_chance(r, .8) ? 6 : 12);
    if (dpair_chance(r, .4))
        c->capacity = c->recent_window + 2 + pbt_below(r, 300);
    if (scorer == PB_SCORER_WINDOW && !sinks && dpair_chance(r, .1))
        c->prefill_max_len = pbt_below(r, 100);
    c->prefill_scope = pbt_below(r, 2);
    c->row_stores = pbt_below(r, 2);

    /* Now and then one refused field (or one the cell's axes refuse). */
    if (dpair_chance(r, .03)) {
        switch (pbt_below(r, 12)) {
        case 0: c->budget = 0; break;
        case 1: c->budget = UINT32_MAX; break;
        case 2: c->num_layers = 0; break;
        case 3: c->layer = c->num_layers; break;
        case 4: c->pyramid_ratio = 0; break;
        case 5: c->recent_window = c->budget; break;
        case 6: c->obs_window = 0; break;
        case 7: c->pool_kernel = 2 * pbt_below(r, 5); break;
        case 8: c->scorer = 5 + pbt_below(r, 3); break;
        case 9: c->prefill_max_len = 1 + pbt_below(r, 9); break;
        case 10: c->row_stores = 2 + pbt_below(r, 9); break;
        default: c->capacity = c->recent_window + 1; break;
        }
    }

    sc.surf = pick_surface(r, scorer, share, sinks);
    if (sc.surf != SURF_NATIVE && sc.surf != SURF_PYRAMIDKV) {
        /* The family vtables: budget + 1 positions, no share of their own,
         * their own recent window and sinks; the window fields at their
         * defaults (unused). */
        const uint32_t budget = c->budget, recent = c->recent_window;
        *c = d;
        c->scorer = (uint32_t)scorer;
        c->budget = budget;
        c->recent_window = recent;
        c->share = UINT32_MAX;
        c->capacity = c->budget + 1u;
        if (sc.surf != SURF_H2O && sc.surf != SURF_SCISSORHANDS)
            c->recent_window = 0;
        if (sc.surf == SURF_STREAMING_LLM && c->budget > 1)
            c->sinks = 1 + pbt_below(r, c->budget - 1); /* < budget */
        if (sc.surf == SURF_STREAMING_LLM && c->budget == 1)
            sc.surf = SURF_SLIDING_WINDOW; /* sinks 1 would be refused */
        if (sc.surf != SURF_STREAMING_LLM) c->sinks = 0;
    }
    if (sc.surf == SURF_PYRAMIDKV) {
        /* Its params carry neither options nor a scorer. */
        c->scorer = PB_SCORER_WINDOW;
        c->capacity = 0;
        c->pool = PB_POOL_MAX;
        c->prefill_max_len = 0;
    }
    sc.evict_rate = cadence_rate[cadence];
    sc.weight_style = (int)pbt_below(r, 9);
    sc.ops = c->budget > 120 ? 40 + pbt_below(r, 200) : 10 + pbt_below(r, 300);
    return sc;
}

/* ------------------------------------------------------------------------ */
/* The comparison (differential_pair.c)                                     */

static void describe(const dpair *pr, char *buf, size_t len) {
    const int c = *(const int *)pr->ctx;
    snprintf(buf, len, "cell %s / %s / %s / %s",
             scorer_name[c / (N_SHARES * N_SINKS * N_CADENCES)],
             share_name[(c / (N_SINKS * N_CADENCES)) % N_SHARES],
             sinks_name[(c / N_CADENCES) % N_SINKS], cadence_name[c % N_CADENCES]);
}

static pb_kvcache *create_vtable(const scenario *sc,
                                 const pb_kvcache_vtable **vt) {
    const pb_kvcache_config *c = &sc->config;
    switch (sc->surf) {
    case SURF_PYRAMIDKV: {
        const pb_kvcache_pyramidkv_params p = {
            c->budget,        c->layer,      c->num_layers, c->pyramid_ratio,
            c->recent_window, c->obs_window, c->pool_kernel};
        *vt = &pb_kvcache_pyramidkv;
        return pb_kvcache_pyramidkv.create(&p, NULL, NULL);
    }
    case SURF_H2O: {
        const pb_kvcache_h2o_params p = {c->budget, c->recent_window};
        *vt = &pb_kvcache_h2o;
        return pb_kvcache_h2o.create(&p, NULL, NULL);
    }
    case SURF_SCISSORHANDS: {
        const pb_kvcache_scissorhands_params p = {c->budget, c->recent_window};
        *vt = &pb_kvcache_scissorhands;
        return pb_kvcache_scissorhands.create(&p, NULL, NULL);
    }
    case SURF_TOVA: {
        const pb_kvcache_tova_params p = {c->budget};
        *vt = &pb_kvcache_tova;
        return pb_kvcache_tova.create(&p, NULL, NULL);
    }
    case SURF_STREAMING_LLM: {
        const pb_kvcache_streaming_llm_params p = {c->budget, c->sinks};
        *vt = &pb_kvcache_streaming_llm;
        return pb_kvcache_streaming_llm.create(&p, NULL, NULL);
    }
    default: {
        const pb_kvcache_sliding_window_params p = {c->budget};
        *vt = &pb_kvcache_sliding_window;
        return pb_kvcache_sliding_window.create(&p, NULL, NULL);
    }
    }
}

static void run_scenario(int cell, int scorer, int share, int sinks,
                         int cadence, unsigned long seed) {
    pbt_rng r = {seed * UINT64_C(0x2545F4914F6CDD1D) + (uint64_t)cell};
    const scenario sc = draw(&r, scorer, share, sinks, cadence);
    dpair pr;
    memset(&pr, 0, sizeof pr);
    pr.seed = seed;
    pr.scores = 1;
    pr.seen = &seen[cell].run;
    pr.status_seen = status_seen;
    pr.describe = describe;
    pr.ctx = &cell;
    pr.tova_vtable = sc.surf == SURF_TOVA;
    seen[cell].scenarios += 1;

    const pb_status want = ref_create_config(&pr.ref, &sc.config);
    if (sc.surf != SURF_NATIVE) {
        pr.lib = create_vtable(&sc, &pr.vt);
        if ((pr.lib != NULL) != (want == PB_OK))
            dpair_fail(&pr, "vtable create disagrees with the reference");
        seen[cell].vtable += pr.lib != NULL;
    } else {
        const pb_status got = pb_kvcache_create(&sc.config, NULL, &pr.lib);
        if (got != want) dpair_fail(&pr, "create status differs");
        size_t bytes = 0;
        if (pb_kvcache_size(&sc.config, &bytes) != got)
            dpair_fail(&pr, "size status differs from create");
        if (got == PB_OK && bytes != pb_kvcache_memory_bytes(pr.lib))
            dpair_fail(&pr, "size differs from memory_bytes");
    }
    if (want != PB_OK) {
        seen[cell].refused += 1;
        return;
    }
    seen[cell].created += 1;
    if (pr.ref.capacity > DPAIR_MAX_HELD) dpair_fail(&pr, "scenario too large");
    if (pb_kvcache_effective_budget(pr.lib) != pr.ref.effective ||
        pb_kvcache_capacity(pr.lib) != pr.ref.capacity)
        dpair_fail(&pr, "effective budget or capacity differs");
    dpair_compare(&pr, &r, 1);

    /* A step's evict asks the budget a vtable knows, else the effective
     * one (the pyramid's share of this layer). */
    const dmix mix = {.ops = sc.ops,
                      .budget = sc.config.budget,
                      .ask_effective = !(pr.vt != NULL &&
                                         sc.surf != SURF_PYRAMIDKV),
                      .step_percent = 70,
                      .small_gap = .1,
                      .large_gap = .02,
                      .null_step = .12,
                      .evict_rate = sc.evict_rate,
                      .weight_style = sc.weight_style};
    dpair_run(&pr, &r, &mix);
    pb_kvcache_destroy(pr.lib);
    ref_destroy(&pr.ref);
}

/* `per` scenarios in every cell. */
static void run_every_cell(unsigned long per) {
    for (int scorer = 0; scorer < N_SCORERS; ++scorer)
        for (int share = 0; share < N_SHARES; ++share)
            for (int sinks = 0; sinks < N_SINKS; ++sinks)
                for (int cadence = 0; cadence < N_CADENCES; ++cadence) {
                    const int cell =
                        ((scorer * N_SHARES + share) * N_SINKS + sinks) *
                            N_CADENCES +
                        cadence;
                    for (unsigned long s = 0; s < per; ++s)
                        run_scenario(cell, scorer, share, sinks, cadence,
                                     first_seed + s);
                }
}

static void every_cell_matches_the_reference(void **state) {
    (void)state;
    run_every_cell(per_cell);
    unsigned long total = 0;
    printf("%-10s %-8s %-8s %-10s %9s %8s %7s %7s %9s %8s %9s %10s\n",
           "scorer", "share", "sinks", "cadence", "scenarios", "created",
           "refused", "vtable", "steps", "evicts", "victims", "scores");
    for (int c = 0; c < N_CELLS; ++c) {
        const cell_seen *s = &seen[c];
        total += s->scenarios;
        printf("%-10s %-8s %-8s %-10s %9lu %8lu %7lu %7lu %9lu %8lu %9lu "
               "%10lu\n",
               scorer_name[c / (N_SHARES * N_SINKS * N_CADENCES)],
               share_name[(c / (N_SINKS * N_CADENCES)) % N_SHARES],
               sinks_name[(c / N_CADENCES) % N_SINKS],
               cadence_name[c % N_CADENCES], s->scenarios, s->created,
               s->refused, s->vtable, s->run.steps, s->run.evicts,
               s->run.victims, s->run.scores);
        /* A cell that created nothing or evicted nothing compared
         * nothing. */
        if (per_cell >= 50 && (s->created == 0 || s->run.victims == 0))
            fail_msg("cell %d exercised nothing", c);
    }
    printf("%lu scenarios in %d cells (%lu per cell) from seed %lu: no "
           "disagreement\n", total, N_CELLS, per_cell, first_seed);
    printf("  statuses seen:");
    for (int st = 0; st < PB_STATUS_COUNT_; ++st)
        if (status_seen[st] != 0)
            printf(" %s %lu,", pb_status_str((pb_status)st), status_seen[st]);
    printf("\n");
}

/* A quarter of the scenarios again under FTZ and DAZ (tests/fp_env.h),
 * after the table above is printed. */
static void every_cell_matches_under_daz(void **state) {
    (void)state;
#if PBT_HAVE_DAZ
    const unsigned long per = (per_cell + 3u) / 4u;
    const unsigned csr = pbt_daz_begin();
    run_every_cell(per);
    pbt_daz_end(csr);
    printf("%lu scenarios per cell from seed %lu under FTZ and DAZ: no "
           "disagreement\n", per, first_seed);
#else
    skip(); /* no such bits on this architecture */
#endif
}

int main(int argc, char **argv) {
    if (argc > 1) per_cell = strtoul(argv[1], NULL, 10);
    if (argc > 2) first_seed = strtoul(argv[2], NULL, 10);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_cell_matches_the_reference),
        cmocka_unit_test(every_cell_matches_under_daz),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
