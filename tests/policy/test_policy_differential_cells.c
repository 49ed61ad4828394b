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
#include "reference_model.h"
#include "test_rng.h"

#define PB_CELL_SCENARIOS 100u
#define MAX_HELD 1024u

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
    unsigned long scenarios, created, refused, vtable, steps, evicts, victims,
        scores;
} cell_seen;
static cell_seen seen[N_CELLS];
static unsigned long status_seen[PB_STATUS_COUNT_];

static int chance(pbt_rng *r, double p) { return pbt_unit(r) < p; }

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

static uint32_t pick_budget(pbt_rng *r) {
    const uint32_t k = pbt_below(r, 100);
    if (k < 55) return 1 + pbt_below(r, 24);
    if (k < 90) return 25 + pbt_below(r, 96);
    return 121 + pbt_below(r, 280);
}

/* The vtable that means this cell, if one does, chosen now and then. */
static surface pick_surface(pbt_rng *r, int scorer, int share, int sinks) {
    if (!chance(r, .25)) return SURF_NATIVE;
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
    c->budget = pick_budget(r);
    c->num_layers = chance(r, .3) ? 1 : 1 + pbt_below(r, 6);
    c->layer = pbt_below(r, c->num_layers);
    static const uint32_t ratios[] = {1, 2, 3, 4, 8};
    c->pyramid_ratio =
        chance(r, .8) ? ratios[pbt_below(r, 5)] : 1 + pbt_below(r, 30);
    const uint32_t rmax = c->budget - 1 < 24 ? c->budget - 1 : 24;
    c->recent_window = chance(r, .3) ? pbt_below(r, rmax < 3 ? rmax + 1 : 3)
                                     : pbt_below(r, rmax + 1);
    const uint32_t o = pbt_below(r, 100);
    c->obs_window = o < 40   ? 1 + pbt_below(r, 4)
                    : o < 95 ? 1 + pbt_below(r, 20)
                             : 64;
    const uint32_t k = pbt_below(r, 100);
    c->pool_kernel = k < 70   ? 1 + 2 * pbt_below(r, 4)
                     : k < 90 ? 9 + 2 * pbt_below(r, 12)
                              : 33 + 2 * pbt_below(r, 85);
    c->pool = chance(r, .25) ? (uint32_t)PB_POOL_AVG : (uint32_t)PB_POOL_MAX;
    if (share) /* any schedule's share: below, around or above the budget */
        c->share = 1 + pbt_below(r, 2 * c->budget + 8);
    if (sinks) /* positions below 1 .. 12, some past what is ever held */
        c->sinks = 1 + pbt_below(r, chance(r, .8) ? 6 : 12);
    if (chance(r, .4))
        c->capacity = c->recent_window + 2 + pbt_below(r, 300);
    if (scorer == PB_SCORER_WINDOW && !sinks && chance(r, .1))
        c->prefill_max_len = pbt_below(r, 100);
    c->prefill_scope = pbt_below(r, 2);

    /* Now and then one refused field (or one the cell's axes refuse). */
    if (chance(r, .03)) {
        switch (pbt_below(r, 11)) {
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
    const pb_kvcache_vtable *vt; /* NULL: the native surface */
    surface surf;
    int cell;
    unsigned long seed;
    uint32_t op;
} pair;

static void fail_at(const pair *pr, const char *what) {
    const int c = pr->cell;
    fprintf(stderr, "cell %s / %s / %s / %s, seed %lu, call %u: %s\n",
            scorer_name[c / (N_SHARES * N_SINKS * N_CADENCES)],
            share_name[(c / (N_SINKS * N_CADENCES)) % N_SHARES],
            sinks_name[(c / N_CADENCES) % N_SINKS],
            cadence_name[c % N_CADENCES], pr->seed, pr->op, what);
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
    if (pb_kvcache_sink_count(pr->lib) != ref_sink_count(&pr->ref))
        fail_at(pr, "sink count differs");
    const size_t checks = all_scores || n <= 48 ? n : 24;
    seen[pr->cell].scores += checks;
    for (size_t c = 0; c < checks; ++c) {
        const size_t i = checks == n ? c : pbt_below(r, (uint32_t)n);
        double a = -7, b = -8;
        if (pb_kvcache_score(pr->lib, lib_pos[i], &a) != PB_OK ||
            ref_score(&pr->ref, lib_pos[i], &b) != PB_OK)
            fail_at(pr, "score of a held position failed");
        if (!same_double(a, b)) {
            char msg[160];
            snprintf(msg, sizeof msg,
                     "score of %u: library %.17g, reference %.17g",
                     lib_pos[i], a, b);
            fail_at(pr, msg);
        }
    }
}

static pb_status do_observe(pair *pr, uint32_t pos, const float *w,
                            size_t len) {
    const pb_status want = ref_observe(&pr->ref, pos, w, len);
    seen[pr->cell].steps += 1;
    status_seen[want] += 1;
    if (pr->vt != NULL) {
        const size_t before = pb_kvcache_kept_count(pr->lib);
        pr->vt->on_decode_step(pr->lib, pos, w, len);
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
    const size_t sinks_before = ref_sink_count(&pr->ref);
    /* TOVA's vtable checks the buffer against held - budget before the
     * unobserved positions are spared. */
    const int tova_refuses = pr->surf == SURF_TOVA && kept > ask &&
                             cap < kept - (size_t)ask;
    pb_status want = PB_ERR_BUFFER;
    if (!tova_refuses) want = ref_evict(&pr->ref, ask, vb, cap, &nb);
    seen[pr->cell].evicts += 1;
    status_seen[want] += 1;
    if (want == PB_OK) seen[pr->cell].victims += nb;
    if (ref_sink_count(&pr->ref) != sinks_before)
        fail_at(pr, "the reference evicted a sink");
    if (pr->vt != NULL) {
        na = pr->vt->evict(pr->lib, ask, va, cap);
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
    pair pr;
    memset(&pr, 0, sizeof pr);
    pr.seed = seed;
    pr.cell = cell;
    pr.surf = sc.surf;
    seen[cell].scenarios += 1;

    const pb_status want = ref_create_config(&pr.ref, &sc.config);
    if (sc.surf != SURF_NATIVE) {
        pr.lib = create_vtable(&sc, &pr.vt);
        if ((pr.lib != NULL) != (want == PB_OK))
            fail_at(&pr, "vtable create disagrees with the reference");
        seen[cell].vtable += pr.lib != NULL;
    } else {
        const pb_status got = pb_kvcache_create(&sc.config, NULL, &pr.lib);
        if (got != want) fail_at(&pr, "create status differs");
        size_t bytes = 0;
        if (pb_kvcache_size(&sc.config, &bytes) != got)
            fail_at(&pr, "size status differs from create");
        if (got == PB_OK && bytes != pb_kvcache_memory_bytes(pr.lib))
            fail_at(&pr, "size differs from memory_bytes");
    }
    if (want != PB_OK) {
        seen[cell].refused += 1;
        return;
    }
    seen[cell].created += 1;
    if (pr.ref.capacity > MAX_HELD) fail_at(&pr, "scenario too large");
    if (pb_kvcache_effective_budget(pr.lib) != pr.ref.effective ||
        pb_kvcache_capacity(pr.lib) != pr.ref.capacity)
        fail_at(&pr, "effective budget or capacity differs");
    compare_state(&pr, &r, 1);

    static float w[MAX_HELD + 2];
    uint32_t last = 0;
    const uint32_t budget = sc.config.budget;
    for (pr.op = 0; pr.op < sc.ops; ++pr.op) {
        const uint32_t kind = pbt_below(&r, 100);
        if (kind < 70) { /* a decode step, sometimes invalid */
            uint32_t pos = last + 1;
            if (chance(&r, .1)) pos = last + 1 + pbt_below(&r, 8);
            if (chance(&r, .02)) pos = last + 1 + pbt_below(&r, 1000);
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
            if (fill > 0 && chance(&r, .02))
                w[pbt_below(&r, (uint32_t)fill)] = bad_weight(&r);
            const float *attn = w;
            if (chance(&r, .12)) {
                attn = NULL;
                len = pbt_below(&r, 5); /* ignored */
            }
            if (do_observe(&pr, pos, attn, len) == PB_OK) last = pos;
            if (chance(&r, sc.evict_rate)) {
                uint32_t ask = pr.vt != NULL && pr.surf != SURF_PYRAMIDKV
                                   ? budget
                                   : pb_kvcache_effective_budget(pr.lib);
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
            pb_status sa = pb_kvcache_score(pr.lib, pos, &a);
            pb_status sb = ref_score(&pr.ref, pos, &b);
            if (sa != sb) fail_at(&pr, "score status differs");
            if (sa == PB_OK && !same_double(a, b))
                fail_at(&pr, "score differs");
            sa = pb_kvcache_window_score(pr.lib, pos, &a);
            sb = ref_window_score(&pr.ref, pos, &b);
            if (sa != sb) fail_at(&pr, "window score status differs");
            if (sa == PB_OK && !same_double(a, b))
                fail_at(&pr, "window score differs");
        }
    }
    compare_state(&pr, &r, 1);
    pb_kvcache_destroy(pr.lib);
    ref_destroy(&pr.ref);
}

static void every_cell_matches_the_reference(void **state) {
    (void)state;
    for (int scorer = 0; scorer < N_SCORERS; ++scorer)
        for (int share = 0; share < N_SHARES; ++share)
            for (int sinks = 0; sinks < N_SINKS; ++sinks)
                for (int cadence = 0; cadence < N_CADENCES; ++cadence) {
                    const int cell =
                        ((scorer * N_SHARES + share) * N_SINKS + sinks) *
                            N_CADENCES +
                        cadence;
                    for (unsigned long s = 0; s < per_cell; ++s)
                        run_scenario(cell, scorer, share, sinks, cadence,
                                     first_seed + s);
                }
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
               s->refused, s->vtable, s->steps, s->evicts, s->victims,
               s->scores);
        /* A cell that created nothing or evicted nothing compared
         * nothing. */
        if (per_cell >= 50 && (s->created == 0 || s->victims == 0))
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

int main(int argc, char **argv) {
    if (argc > 1) per_cell = strtoul(argv[1], NULL, 10);
    if (argc > 2) first_seed = strtoul(argv[2], NULL, 10);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_cell_matches_the_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
