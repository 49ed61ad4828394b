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
#include "reference_model.h"
#include "test_rng.h"

#define PB_DIFF_SCENARIOS 12000u
#define MAX_HELD 1024u

static unsigned long n_scenarios = PB_DIFF_SCENARIOS;

/* What the run exercised, printed at the end so a reader can see that the
 * comparison was not vacuous. */
static struct {
    unsigned long created, refused, steps, evicts, victims, scores;
    unsigned long status[PB_STATUS_COUNT_];
} seen;
static unsigned long first_seed = 1;

/* ------------------------------------------------------------------------ */
/* Random numbers (test_rng.h), seeded per scenario                         */

static int chance(pbt_rng *r, double p) { return pbt_unit(r) < p; }

/* ------------------------------------------------------------------------ */
/* Scenario parameters                                                      */

typedef struct scenario {
    pb_kvcache_pyramidkv_params params;
    pb_kvcache_options options;
    int use_vtable;     /* drive the policybook surface instead */
    double evict_rate;  /* probability an evict follows a step */
    int weight_style;   /* see weight() */
    uint32_t ops;
} scenario;

static uint32_t pick_budget(pbt_rng *r) {
    const uint32_t k = pbt_below(r, 100);
    if (k < 55) return 1 + pbt_below(r, 24);
    if (k < 90) return 25 + pbt_below(r, 96);
    return 121 + pbt_below(r, 280);
}

static scenario draw(pbt_rng *r) {
    scenario sc;
    memset(&sc, 0, sizeof sc);
    pb_kvcache_pyramidkv_params *p = &sc.params;
    p->budget = pick_budget(r);
    p->num_layers = chance(r, .3) ? 1 : 1 + pbt_below(r, 6);
    p->layer = pbt_below(r, p->num_layers);
    static const uint32_t ratios[] = {1, 2, 3, 4, 8};
    p->pyramid_ratio =
        chance(r, .8) ? ratios[pbt_below(r, 5)] : 1 + pbt_below(r, 30);
    const uint32_t rmax = p->budget - 1 < 24 ? p->budget - 1 : 24;
    p->recent_window = chance(r, .3) ? pbt_below(r, rmax < 3 ? rmax + 1 : 3)
                                     : pbt_below(r, rmax + 1);
    const uint32_t o = pbt_below(r, 100);
    p->obs_window = o < 40   ? 1 + pbt_below(r, 4)
                    : o < 95 ? 1 + pbt_below(r, 20)
                             : 64;
    const uint32_t k = pbt_below(r, 100);
    p->pool_kernel = k < 70   ? 1 + 2 * pbt_below(r, 4)
                     : k < 90 ? 9 + 2 * pbt_below(r, 12)
                              : 33 + 2 * pbt_below(r, 85);
    sc.options.pool = chance(r, .25) ? (uint32_t)PB_POOL_AVG
                                     : (uint32_t)PB_POOL_MAX;
    if (chance(r, .4))
        sc.options.capacity = p->recent_window + 2 + pbt_below(r, 300);
    sc.options.prefill_max_len = chance(r, .1) ? pbt_below(r, 100) : 0;
    sc.options.prefill_scope = pbt_below(r, 2);

    /* Now and then one refused field. */
    if (chance(r, .03)) {
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
                    sc.options.pool == (uint32_t)PB_POOL_MAX && chance(r, .2);
    static const double rates[] = {1.0, 1.0, .5, .2, .05};
    sc.evict_rate = rates[pbt_below(r, 5)];
    sc.weight_style = (int)pbt_below(r, 9);
    /* Large instances get fewer calls, to keep the reference fast. */
    sc.ops = p->budget > 120 ? 40 + pbt_below(r, 200) : 10 + pbt_below(r, 300);
    return sc;
}

/* ------------------------------------------------------------------------ */
/* Weights                                                                  */

static float weight(pbt_rng *r, int style, float constant) {
    switch (style) {
    case 0: return (float)pbt_unit(r);
    case 1: { /* few levels: exact ties everywhere */
        static const float lv[] = {0.0f, .125f, .25f, .5f, 1.0f};
        return lv[pbt_below(r, 5)];
    }
    case 2: return chance(r, .5) ? 0.0f : (float)pbt_unit(r);
    case 3: /* subnormal and tiny */
        return chance(r, .2) ? 0.0f
                             : ldexpf((float)(1 + pbt_below(r, 8)),
                                      -(int)(100 + pbt_below(r, 49)));
    case 4: /* wide exponents: sums that round */
        return ldexpf((float)pbt_unit(r), (int)pbt_below(r, 120) - 60);
    case 5: return constant;
    case 6: return (float)pbt_below(r, 4);
    case 7: return chance(r, .1) ? -0.0f : (float)pow(pbt_unit(r), 4.0);
    default: /* softmax-like: a few heavy hitters, a long light tail */
        return chance(r, .05) ? (float)(.1 + pbt_unit(r))
                              : (float)(pbt_unit(r) * 1e-4);
    }
}

static float bad_weight(pbt_rng *r) {
    static const float bad[] = {NAN, -1.0f, INFINITY, -INFINITY, -1e-40f};
    return bad[pbt_below(r, 5)];
}

/* ------------------------------------------------------------------------ */
/* The comparison                                                           */

typedef struct pair {
    pb_kvcache *lib;
    ref_policy ref;
    int use_vtable;
    unsigned long seed;
    uint32_t op;
} pair;

static void fail_at(const pair *pr, const char *what) {
    fprintf(stderr, "seed %lu, call %u: %s\n", pr->seed, pr->op, what);
    fail();
}

static int same_double(double a, double b) {
    return memcmp(&a, &b, sizeof a) == 0;
}

static void compare_state(pair *pr, pbt_rng *r, int all_scores) {
    static uint32_t lib_pos[MAX_HELD];
    size_t n = 0;
    if (pb_kvcache_kept_positions(pr->lib, lib_pos, MAX_HELD, &n) != PB_OK)
        fail_at(pr, "kept_positions failed");
    if (n != pr->ref.kept || pb_kvcache_kept_count(pr->lib) != n)
        fail_at(pr, "kept count differs");
    if (memcmp(lib_pos, pr->ref.pos, n * sizeof *lib_pos) != 0)
        fail_at(pr, "kept positions differ");
    const size_t checks = all_scores || n <= 48 ? n : 24;
    seen.scores += checks;
    for (size_t c = 0; c < checks; ++c) {
        const size_t i = checks == n ? c : pbt_below(r, (uint32_t)n);
        double a = -1, b = -2;
        if (pb_kvcache_window_score(pr->lib, lib_pos[i], &a) != PB_OK ||
            ref_window_score(&pr->ref, lib_pos[i], &b) != PB_OK)
            fail_at(pr, "window score of a held position failed");
        if (!same_double(a, b)) {
            char msg[160];
            snprintf(msg, sizeof msg,
                     "window score of %u: library %.17g, reference %.17g",
                     lib_pos[i], a, b);
            fail_at(pr, msg);
        }
    }
}

static pb_status do_observe(pair *pr, uint32_t pos, const float *w,
                            size_t len) {
    const pb_status want = ref_observe(&pr->ref, pos, w, len);
    seen.steps += 1;
    seen.status[want] += 1;
    if (pr->use_vtable) {
        const size_t before = pb_kvcache_kept_count(pr->lib);
        pb_kvcache_pyramidkv.on_decode_step(pr->lib, pos, w, len);
        const size_t after = pb_kvcache_kept_count(pr->lib);
        if ((want == PB_OK) != (after == before + 1))
            fail_at(pr, "vtable step disagrees with the reference");
        return want;
    }
    const pb_status got = pb_kvcache_observe(pr->lib, pos, w, len);
    if (got != want) {
        char msg[120];
        snprintf(msg, sizeof msg, "observe(%u, len %zu): library %d, "
                 "reference %d", pos, len, (int)got, (int)want);
        fail_at(pr, msg);
    }
    return got;
}

static void do_evict(pair *pr, pbt_rng *r, uint32_t ask) {
    static uint32_t va[MAX_HELD], vb[MAX_HELD];
    const size_t kept = pr->ref.kept;
    size_t cap = kept;
    if (chance(r, .25)) cap = pbt_below(r, (uint32_t)kept + 2u);
    size_t na = 12345, nb = 54321;
    const pb_status want = ref_evict(&pr->ref, ask, vb, cap, &nb);
    seen.evicts += 1;
    seen.status[want] += 1;
    if (want == PB_OK) seen.victims += nb;
    if (pr->use_vtable) {
        na = pb_kvcache_pyramidkv.evict(pr->lib, ask, va, cap);
        const size_t expect = want == PB_OK ? nb : 0u;
        if (na != expect) fail_at(pr, "vtable evict count differs");
    } else {
        const pb_status got =
            pb_kvcache_evict(pr->lib, ask, cap ? va : NULL, cap, &na);
        if (got != want) fail_at(pr, "evict status differs");
        if (na != nb) fail_at(pr, "evict count differs");
        if (want != PB_OK) return;
    }
    if (want == PB_OK && memcmp(va, vb, nb * sizeof *va) != 0) {
        char msg[200];
        int at = snprintf(msg, sizeof msg, "victims differ (ask %u): lib", ask);
        for (size_t i = 0; i < nb && i < 8 && at < 150; ++i)
            at += snprintf(msg + at, sizeof msg - (size_t)at, " %u", va[i]);
        at += snprintf(msg + at, sizeof msg - (size_t)at, " ref");
        for (size_t i = 0; i < nb && i < 8 && at < 190; ++i)
            at += snprintf(msg + at, sizeof msg - (size_t)at, " %u", vb[i]);
        fail_at(pr, msg);
    }
}

static void run_scenario(unsigned long seed) {
    pbt_rng r = {seed * UINT64_C(0x2545F4914F6CDD1D)};
    const scenario sc = draw(&r);
    pair pr;
    memset(&pr, 0, sizeof pr);
    pr.seed = seed;
    pr.use_vtable = sc.use_vtable;

    const pb_status want = ref_create(&pr.ref, &sc.params, &sc.options);
    if (sc.use_vtable) {
        pr.lib = pb_kvcache_pyramidkv.create(&sc.params, NULL, NULL);
        if ((pr.lib != NULL) != (want == PB_OK))
            fail_at(&pr, "vtable create disagrees with the reference");
    } else {
        const pb_status got =
            pb_kvcache_pyramidkv_create(&sc.params, &sc.options, NULL, &pr.lib);
        if (got != want) fail_at(&pr, "create status differs");
        size_t bytes = 0;
        if (pb_kvcache_pyramidkv_size(&sc.params, &sc.options, &bytes) != got)
            fail_at(&pr, "size status differs from create");
        if (got == PB_OK && bytes != pb_kvcache_memory_bytes(pr.lib))
            fail_at(&pr, "size differs from memory_bytes");
    }
    if (want != PB_OK) {
        seen.refused += 1;
        return;
    }
    seen.created += 1;
    if (pr.ref.capacity > MAX_HELD) fail_at(&pr, "scenario too large");
    if (pb_kvcache_effective_budget(pr.lib) != pr.ref.effective ||
        pb_kvcache_capacity(pr.lib) != pr.ref.capacity)
        fail_at(&pr, "effective budget or capacity differs");

    static float w[MAX_HELD + 2];
    uint32_t last = 0;
    const uint32_t budget = sc.params.budget;
    for (pr.op = 0; pr.op < sc.ops; ++pr.op) {
        const uint32_t kind = pbt_below(&r, 100);
        if (kind < 62) { /* a decode step, sometimes invalid */
            uint32_t pos = last + 1;
            if (chance(&r, .1)) pos = last + 1 + pbt_below(&r, 1000);
            if (chance(&r, .005) && last < UINT32_MAX - 8)
                pos = UINT32_MAX - pbt_below(&r, 3);
            if (last == UINT32_MAX) pos = UINT32_MAX;
            if (chance(&r, .02)) pos = last - (last ? pbt_below(&r, 2) : 0);
            size_t len = pr.ref.kept;
            if (chance(&r, .02)) len = len + 1 - 2 * (size_t)pbt_below(&r, 2);
            const int style = chance(&r, .1) ? (int)pbt_below(&r, 9)
                                             : sc.weight_style;
            const float constant = weight(&r, 0, 0);
            const size_t fill = len < MAX_HELD ? len : MAX_HELD;
            for (size_t i = 0; i < fill; ++i)
                w[i] = weight(&r, style, constant);
            if (fill > 0 && chance(&r, .02)) w[pbt_below(&r, (uint32_t)fill)] =
                bad_weight(&r);
            const float *attn = w;
            if (chance(&r, .1)) {
                attn = NULL;
                len = pbt_below(&r, 5); /* ignored */
            }
            if (do_observe(&pr, pos, attn, len) == PB_OK) last = pos;
            if (chance(&r, sc.evict_rate)) {
                uint32_t ask = budget;
                const uint32_t a = pbt_below(&r, 10);
                if (a == 0) ask = pbt_below(&r, 2 * budget + 2);
                if (a == 1) ask = UINT32_MAX;
                if (a == 2) ask = pbt_below(&r, 3);
                do_evict(&pr, &r, ask);
                compare_state(&pr, &r, 0);
            }
        } else if (kind < 80) { /* an evict on its own */
            const uint32_t ask =
                chance(&r, .5) ? budget : pbt_below(&r, 2 * budget + 2);
            do_evict(&pr, &r, ask);
            compare_state(&pr, &r, 0);
        } else if (kind < 82) { /* reset */
            ref_reset(&pr.ref);
            if (pb_kvcache_reset(pr.lib) != PB_OK) fail_at(&pr, "reset");
            last = 0;
            compare_state(&pr, &r, 1);
        } else { /* a score query, held or not */
            uint32_t pos;
            if (chance(&r, .5) && pr.ref.kept > 0)
                pos = pr.ref.pos[pbt_below(&r, (uint32_t)pr.ref.kept)];
            else if (last > UINT32_MAX - 2)
                pos = UINT32_MAX - pbt_below(&r, 4);
            else
                pos = pbt_below(&r, last + 2);
            double a = -1, b = -2;
            const pb_status sa = pb_kvcache_window_score(pr.lib, pos, &a);
            const pb_status sb = ref_window_score(&pr.ref, pos, &b);
            if (sa != sb) fail_at(&pr, "window score status differs");
            if (sa == PB_OK && !same_double(a, b))
                fail_at(&pr, "window score differs");
        }
    }
    compare_state(&pr, &r, 1);
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
           seen.created, seen.refused, seen.steps, seen.evicts, seen.victims,
           seen.scores);
    printf("  statuses seen:");
    for (int st = 0; st < PB_STATUS_COUNT_; ++st)
        if (seen.status[st] != 0)
            printf(" %s %lu,", pb_status_str((pb_status)st), seen.status[st]);
    printf("\n");
}

int main(int argc, char **argv) {
    if (argc > 1) n_scenarios = strtoul(argv[1], NULL, 10);
    if (argc > 2) first_seed = strtoul(argv[2], NULL, 10);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(library_matches_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
