/*
 * differential_pair.c - the library and the reference model driven side
 * by side (differential_pair.h): the weights, the comparisons and the run
 * of calls both differential tests share.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "differential_pair.h"

dshape dpair_draw_shape(pbt_rng *r) {
    dshape d;
    const uint32_t b = pbt_below(r, 100);
    d.budget = b < 55   ? 1 + pbt_below(r, 24)
               : b < 90 ? 25 + pbt_below(r, 96)
                        : 121 + pbt_below(r, 280);
    d.num_layers = dpair_chance(r, .3) ? 1 : 1 + pbt_below(r, 6);
    d.layer = pbt_below(r, d.num_layers);
    static const uint32_t ratios[] = {1, 2, 3, 4, 8};
    d.pyramid_ratio =
        dpair_chance(r, .8) ? ratios[pbt_below(r, 5)] : 1 + pbt_below(r, 30);
    const uint32_t rmax = d.budget - 1 < 24 ? d.budget - 1 : 24;
    d.recent_window = dpair_chance(r, .3)
                          ? pbt_below(r, rmax < 3 ? rmax + 1 : 3)
                          : pbt_below(r, rmax + 1);
    const uint32_t o = pbt_below(r, 100);
    d.obs_window = o < 40   ? 1 + pbt_below(r, 4)
                   : o < 95 ? 1 + pbt_below(r, 20)
                            : 64;
    const uint32_t k = pbt_below(r, 100);
    d.pool_kernel = k < 70   ? 1 + 2 * pbt_below(r, 4)
                    : k < 90 ? 9 + 2 * pbt_below(r, 12)
                             : 33 + 2 * pbt_below(r, 85);
    d.pool = dpair_chance(r, .25) ? (uint32_t)PB_POOL_AVG
                                  : (uint32_t)PB_POOL_MAX;
    return d;
}

float dpair_weight(pbt_rng *r, int style, float constant) {
    switch (style) {
    case 0: return (float)pbt_unit(r);
    case 1: { /* few levels: exact ties everywhere */
        static const float lv[] = {0.0f, .125f, .25f, .5f, 1.0f};
        return lv[pbt_below(r, 5)];
    }
    case 2: return dpair_chance(r, .5) ? 0.0f : (float)pbt_unit(r);
    case 3: /* subnormal and tiny */
        return dpair_chance(r, .2) ? 0.0f
                                   : ldexpf((float)(1 + pbt_below(r, 8)),
                                            -(int)(100 + pbt_below(r, 49)));
    case 4: /* wide exponents: sums that round */
        return ldexpf((float)pbt_unit(r), (int)pbt_below(r, 120) - 60);
    case 5: return constant;
    case 6: return (float)pbt_below(r, 4);
    case 7:
        return dpair_chance(r, .1) ? -0.0f : (float)pow(pbt_unit(r), 4.0);
    default: /* softmax-like: a few heavy hitters, a long light tail */
        return dpair_chance(r, .05) ? (float)(.1 + pbt_unit(r))
                                    : (float)(pbt_unit(r) * 1e-4);
    }
}

static float bad_weight(pbt_rng *r) {
    static const float bad[] = {NAN, -1.0f, INFINITY, -INFINITY, -1e-40f};
    return bad[pbt_below(r, 5)];
}

void dpair_fail(const dpair *pr, const char *what) {
    char where[160] = "";
    if (pr->describe != NULL) pr->describe(pr, where, sizeof where);
    fprintf(stderr, "%s%sseed %lu, call %u: %s\n", where,
            where[0] != '\0' ? ", " : "", pr->seed, pr->op, what);
    fail();
}

static int same_double(double a, double b) {
    return memcmp(&a, &b, sizeof a) == 0;
}

/* The score the pair compares: pb_kvcache_score, or the window score. */
static pb_status lib_score(const dpair *pr, uint32_t pos, double *out) {
    return pr->scores ? pb_kvcache_score(pr->lib, pos, out)
                      : pb_kvcache_window_score(pr->lib, pos, out);
}

static pb_status ref_any_score(const dpair *pr, uint32_t pos, double *out) {
    return pr->scores ? ref_score(&pr->ref, pos, out)
                      : ref_window_score(&pr->ref, pos, out);
}

void dpair_compare(dpair *pr, pbt_rng *r, int all_scores) {
    static uint32_t lib_pos[DPAIR_MAX_HELD];
    size_t n = 0;
    if (pb_kvcache_kept_positions(pr->lib, lib_pos, DPAIR_MAX_HELD, &n) !=
        PB_OK)
        dpair_fail(pr, "kept_positions failed");
    if (n != pr->ref.kept || pb_kvcache_kept_count(pr->lib) != n)
        dpair_fail(pr, "kept count differs");
    if (memcmp(lib_pos, pr->ref.pos, n * sizeof *lib_pos) != 0)
        dpair_fail(pr, "kept positions differ");
    if (pr->scores &&
        pb_kvcache_sink_count(pr->lib) != ref_sink_count(&pr->ref))
        dpair_fail(pr, "sink count differs");
    const size_t checks = all_scores || n <= 48 ? n : 24;
    pr->seen->scores += checks;
    for (size_t c = 0; c < checks; ++c) {
        const size_t i = checks == n ? c : pbt_below(r, (uint32_t)n);
        double a = -7, b = -8;
        if (lib_score(pr, lib_pos[i], &a) != PB_OK ||
            ref_any_score(pr, lib_pos[i], &b) != PB_OK)
            dpair_fail(pr, "score of a held position failed");
        if (!same_double(a, b)) {
            char msg[160];
            snprintf(msg, sizeof msg,
                     "%sscore of %u: library %.17g, reference %.17g",
                     pr->scores ? "" : "window ", lib_pos[i], a, b);
            dpair_fail(pr, msg);
        }
    }
}

static pb_status do_observe(dpair *pr, uint32_t pos, const float *w,
                            size_t len) {
    const pb_status want = ref_observe(&pr->ref, pos, w, len);
    pr->seen->steps += 1;
    pr->status_seen[want] += 1;
    if (pr->vt != NULL) {
        const size_t before = pb_kvcache_kept_count(pr->lib);
        pr->vt->on_decode_step(pr->lib, pos, w, len);
        const size_t after = pb_kvcache_kept_count(pr->lib);
        if ((want == PB_OK) != (after == before + 1))
            dpair_fail(pr, "vtable step disagrees with the reference");
        return want;
    }
    const pb_status got = pb_kvcache_observe(pr->lib, pos, w, len);
    if (got != want) {
        char msg[120];
        snprintf(msg, sizeof msg, "observe(%u, len %zu): library %d, "
                 "reference %d", pos, len, (int)got, (int)want);
        dpair_fail(pr, msg);
    }
    return got;
}

static void do_evict(dpair *pr, pbt_rng *r, uint32_t ask) {
    static uint32_t va[DPAIR_MAX_HELD], vb[DPAIR_MAX_HELD];
    const size_t kept = pr->ref.kept;
    size_t cap = kept;
    if (dpair_chance(r, .25)) cap = pbt_below(r, (uint32_t)kept + 2u);
    size_t na = 12345, nb = 54321;
    const size_t sinks_before = ref_sink_count(&pr->ref);
    /* TOVA's vtable checks the buffer against held - budget before the
     * unobserved positions are spared. */
    const int tova_refuses = pr->tova_vtable && kept > ask &&
                             cap < kept - (size_t)ask;
    pb_status want = PB_ERR_BUFFER;
    if (!tova_refuses) want = ref_evict(&pr->ref, ask, vb, cap, &nb);
    pr->seen->evicts += 1;
    pr->status_seen[want] += 1;
    if (want == PB_OK) pr->seen->victims += nb;
    if (ref_sink_count(&pr->ref) != sinks_before)
        dpair_fail(pr, "the reference evicted a sink");
    if (pr->vt != NULL) {
        na = pr->vt->evict(pr->lib, ask, va, cap);
        const size_t expect = want == PB_OK ? nb : 0u;
        if (na != expect) dpair_fail(pr, "vtable evict count differs");
    } else {
        const pb_status got =
            pb_kvcache_evict(pr->lib, ask, cap ? va : NULL, cap, &na);
        if (got != want) dpair_fail(pr, "evict status differs");
        if (na != nb) dpair_fail(pr, "evict count differs");
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
        dpair_fail(pr, msg);
    }
}

/* A decode step, sometimes invalid (a gap, a repeated or past position,
 * the end of the position range, a wrong length, a bad weight, no
 * attention), then an evict at the mix's rate. */
static void step(dpair *pr, pbt_rng *r, const dmix *m, uint32_t *last) {
    static float w[DPAIR_MAX_HELD + 2];
    uint32_t pos = *last + 1;
    if (dpair_chance(r, m->small_gap)) pos = *last + 1 + pbt_below(r, 8);
    if (dpair_chance(r, m->large_gap)) pos = *last + 1 + pbt_below(r, 1000);
    if (dpair_chance(r, .005) && *last < UINT32_MAX - 8)
        pos = UINT32_MAX - pbt_below(r, 3);
    if (*last == UINT32_MAX) pos = UINT32_MAX;
    if (dpair_chance(r, .02)) pos = *last - (*last ? pbt_below(r, 2) : 0);
    size_t len = pr->ref.kept;
    if (dpair_chance(r, .02)) len = len + 1 - 2 * (size_t)pbt_below(r, 2);
    const int style =
        dpair_chance(r, .1) ? (int)pbt_below(r, 9) : m->weight_style;
    const float constant = dpair_weight(r, 0, 0);
    const size_t fill = len < DPAIR_MAX_HELD ? len : DPAIR_MAX_HELD;
    for (size_t i = 0; i < fill; ++i) w[i] = dpair_weight(r, style, constant);
    if (fill > 0 && dpair_chance(r, .02))
        w[pbt_below(r, (uint32_t)fill)] = bad_weight(r);
    const float *attn = w;
    if (dpair_chance(r, m->null_step)) {
        attn = NULL;
        len = pbt_below(r, 5); /* ignored */
    }
    if (do_observe(pr, pos, attn, len) == PB_OK) *last = pos;
    if (dpair_chance(r, m->evict_rate)) {
        uint32_t ask = m->ask_effective ? pb_kvcache_effective_budget(pr->lib)
                                        : m->budget;
        const uint32_t a = pbt_below(r, 10);
        if (a == 0) ask = pbt_below(r, 2 * m->budget + 2);
        if (a == 1) ask = UINT32_MAX;
        if (a == 2) ask = pbt_below(r, 3);
        do_evict(pr, r, ask);
        dpair_compare(pr, r, 0);
    }
}

/* A score query, of a held position or not; both scores when the pair
 * compares pb_kvcache_score. */
static void query(dpair *pr, pbt_rng *r, uint32_t last) {
    uint32_t pos;
    if (dpair_chance(r, .5) && pr->ref.kept > 0)
        pos = pr->ref.pos[pbt_below(r, (uint32_t)pr->ref.kept)];
    else if (last > UINT32_MAX - 2)
        pos = UINT32_MAX - pbt_below(r, 4);
    else
        pos = pbt_below(r, last + 2);
    double a = -1, b = -2;
    pb_status sa, sb;
    if (pr->scores) {
        sa = pb_kvcache_score(pr->lib, pos, &a);
        sb = ref_score(&pr->ref, pos, &b);
        if (sa != sb) dpair_fail(pr, "score status differs");
        if (sa == PB_OK && !same_double(a, b))
            dpair_fail(pr, "score differs");
    }
    sa = pb_kvcache_window_score(pr->lib, pos, &a);
    sb = ref_window_score(&pr->ref, pos, &b);
    if (sa != sb) dpair_fail(pr, "window score status differs");
    if (sa == PB_OK && !same_double(a, b))
        dpair_fail(pr, "window score differs");
}

void dpair_run(dpair *pr, pbt_rng *r, const dmix *m) {
    uint32_t last = 0;
    for (pr->op = 0; pr->op < m->ops; ++pr->op) {
        const uint32_t kind = pbt_below(r, 100);
        if (kind < m->step_percent) {
            step(pr, r, m, &last);
        } else if (kind < 80) { /* an evict on its own */
            const uint32_t ask = dpair_chance(r, .5)
                                     ? m->budget
                                     : pbt_below(r, 2 * m->budget + 2);
            do_evict(pr, r, ask);
            dpair_compare(pr, r, 0);
        } else if (kind < 82) { /* reset */
            ref_reset(&pr->ref);
            if (pb_kvcache_reset(pr->lib) != PB_OK) dpair_fail(pr, "reset");
            last = 0;
            dpair_compare(pr, r, 1);
        } else {
            query(pr, r, last);
        }
    }
    dpair_compare(pr, r, 1);
}
