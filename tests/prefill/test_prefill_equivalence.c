/*
 * test_prefill_equivalence.c - compress -> decode equivalence. A prefilled
 * instance must be indistinguishable from one fed the same rows as decode
 * steps (the feed pb_kvcache_prefill documents):
 *   - consistent scope: the library fed and evicted once, and the reference
 *     model fed and evicted once, give the same victims, the same survivors
 *     and bit-identical window scores;
 *   - reference scope: the survivors are the paper's selection and carry the
 *     records the reference model gives them when fed without eviction;
 * and, in both, the same later decode behaviour: the same victims and window
 * scores through a run of further decode steps and evictions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prefill_reference.h"
#include "pyramidkv/pyramidkv.h"
#include "reference_model.h"
#include "test_main.h"

#define CASES 1000u
#define MAX_LEN 300u
#define MAX_ROWS 48u
#define LATER_STEPS 120u

typedef struct eq_case {
    unsigned index;
    uint32_t len, rows, ask;
    pb_kvcache_pyramidkv_params p;
    pb_kvcache_options o;
} eq_case;

static void report(const eq_case *c, const char *what) {
    fprintf(stderr,
            "case %u (%s scope, pool %u): len %u rows %u ask %u budget %u "
            "layer %u/%u ratio %u recent %u obs %u kernel %u: %s\n",
            c->index, c->o.prefill_scope ? "reference" : "consistent",
            c->o.pool, c->len, c->rows, c->ask, c->p.budget, c->p.layer,
            c->p.num_layers, c->p.pyramid_ratio, c->p.recent_window,
            c->p.obs_window, c->p.pool_kernel, what);
}

/* The library instance and the model hold the same positions with
 * bit-identical window scores. */
static void same_state(const eq_case *c, const pb_kvcache *lib,
                       const ref_policy *r) {
    uint32_t pos[MAX_LEN + LATER_STEPS];
    size_t n = 0;
    assert_int_equal(pb_kvcache_kept_positions(lib, pos, MAX_LEN + LATER_STEPS,
                                               &n), PB_OK);
    if (n != r->kept || memcmp(pos, r->pos, n * sizeof *pos) != 0) {
        report(c, "held positions differ");
        fail();
    }
    for (size_t i = 0; i < n; ++i) {
        double a = -1.0, b = -2.0;
        assert_int_equal(pb_kvcache_window_score(lib, pos[i], &a), PB_OK);
        assert_int_equal(ref_window_score(r, pos[i], &b), PB_OK);
        if (memcmp(&a, &b, sizeof a) != 0) {
            char what[128];
            snprintf(what, sizeof what, "window score of %u: %.17g vs %.17g",
                     pos[i], a, b);
            report(c, what);
            fail();
        }
    }
}

/* Drops the positions with keep[p] == 0 from a model fed the whole prompt:
 * the state the reference scope must leave (survivors keep their records,
 * the ring slot is that of the feed). */
static void compact_model(ref_policy *r, const unsigned char *keep) {
    size_t w = 0;
    const uint32_t ow = r->params.obs_window;
    for (size_t i = 0; i < r->kept; ++i) {
        if (!keep[r->pos[i]]) continue;
        r->pos[w] = r->pos[i];
        memmove(r->ring + w * ow, r->ring + i * ow, ow * sizeof(float));
        ++w;
    }
    r->kept = w;
}

/* Further decode steps and evictions on the prefilled instance and the
 * model, with the same victims and scores at every evict. */
static void same_later_behaviour(const eq_case *c, pb_kvcache *lib,
                                 ref_policy *r, pbt_rng *g) {
    float attn[MAX_LEN + LATER_STEPS];
    uint32_t va[MAX_LEN + LATER_STEPS], vb[MAX_LEN + LATER_STEPS];
    const size_t cap = pb_kvcache_capacity(lib);
    uint32_t pos = c->len;
    for (unsigned step = 0; step < LATER_STEPS; ++step, ++pos) {
        if (pb_kvcache_kept_count(lib) >= cap || pbt_below(g, 8) == 0) {
            /* Ask 0 with recent_window 0 may evict everything; decoding
             * goes on from nothing held. */
            const uint32_t ask = pbt_below(g, 2)
                                     ? c->p.budget
                                     : pbt_below(g, c->len + 2u);
            size_t na = 0, nb = 0;
            assert_int_equal(
                pb_kvcache_evict(lib, ask, va, MAX_LEN + LATER_STEPS, &na),
                PB_OK);
            assert_int_equal(ref_evict(r, ask, vb, MAX_LEN + LATER_STEPS, &nb),
                             PB_OK);
            if (na != nb || memcmp(va, vb, na * sizeof *va) != 0) {
                report(c, "later evict victims differ");
                fail();
            }
            if (pb_kvcache_kept_count(lib) >= cap) continue;
        }
        const size_t held = pb_kvcache_kept_count(lib);
        const int null_step = pbt_below(g, 10) == 0;
        double total = 0.0;
        for (size_t i = 0; i < held; ++i) {
            attn[i] = (float)(pbt_below(g, 1000) + 1u);
            total += attn[i];
        }
        for (size_t i = 0; i < held; ++i)
            attn[i] = (float)((double)attn[i] / total);
        const pb_status st =
            pb_kvcache_observe(lib, pos, null_step ? NULL : attn, held);
        if (st != PB_OK) {
            report(c, pb_status_str(st));
            fail();
        }
        assert_int_equal(ref_observe(r, pos, null_step ? NULL : attn, held),
                         PB_OK);
    }
    same_state(c, lib, r);
}

static void random_case(unsigned index, eq_case *c, pbt_rng *g) {
    memset(c, 0, sizeof *c);
    c->index = index;
    c->len = 2u + pbt_below(g, MAX_LEN - 1u);
    if (index % 10u == 0u) c->len = 1u + pbt_below(g, 4); /* tiny prompts */
    const uint32_t max_rows = c->len < MAX_ROWS ? c->len : MAX_ROWS;
    c->rows = 1u + pbt_below(g, max_rows);
    if (index % 7u == 0u) c->rows = c->len < MAX_ROWS ? c->len : c->rows;

    pb_kvcache_pyramidkv_params p = PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
    pb_kvcache_options o = PB_KVCACHE_OPTIONS_DEFAULT;
    o.prefill_scope = index % 3u == 2u ? PB_PREFILL_REFERENCE
                                       : PB_PREFILL_CONSISTENT;
    o.pool = pbt_below(g, 2);
    p.obs_window = 1u + pbt_below(g, 24);
    p.pool_kernel = 1u + 2u * pbt_below(g, 6);
    p.recent_window = o.prefill_scope == PB_PREFILL_REFERENCE
                          ? c->rows
                          : pbt_below(g, 12);
    p.num_layers = 1u + pbt_below(g, 6);
    p.layer = pbt_below(g, p.num_layers);
    p.pyramid_ratio = 1u + pbt_below(g, 8);
    p.budget = p.recent_window + 1u + pbt_below(g, c->len + 8u);
    /* Default capacity most of the time; sometimes just what is needed. */
    if (pbt_below(g, 4) == 0) o.capacity = p.recent_window + 2u + c->len;
    if (pbt_below(g, 4) == 0) o.prefill_max_len = c->len;
    c->ask = pbt_below(g, 2) ? pbt_below(g, c->len + 4u) : p.budget;
    c->p = p;
    c->o = o;
}

/* What the random cases covered, printed so a reader can see the test is
 * not vacuous. */
typedef struct eq_counts {
    unsigned consistent, reference, compressed, rows_eq_len, ring_wrapped,
        refused_full;
} eq_counts;

static void one_case(unsigned index, float *attn, void *ws, size_t ws_bytes,
                     eq_counts *k) {
    pbt_rng g = {0xe0e0e0e0u + index};
    eq_case c;
    random_case(index, &c, &g);
    pfref_random_block(&g, attn, c.rows, c.len);

    pb_kvcache *a = NULL;
    assert_int_equal(pb_kvcache_pyramidkv_create(&c.p, &c.o, NULL, &a), PB_OK);
    uint32_t kept[MAX_LEN], victims[MAX_LEN];
    size_t n_kept = 0;
    const int reserved = c.o.prefill_max_len != 0u;
    size_t exact = 0;
    assert_int_equal(pb_kvcache_prefill_workspace_size(a, c.len, &exact),
                     PB_OK);
    assert_true(exact <= ws_bytes);
    ws_bytes = exact;
    const pb_status st = pb_kvcache_prefill(
        a, attn, c.rows, c.len, c.ask, reserved ? NULL : ws,
        reserved ? 0u : ws_bytes, kept, MAX_LEN, victims, MAX_LEN, &n_kept);
    if (st == PB_ERR_FULL) {
        /* Only an explicit capacity below the survivors may refuse. */
        assert_true(c.o.capacity != 0u);
        k->refused_full += 1;
        pb_kvcache_destroy(a);
        return;
    }
    if (st != PB_OK) {
        report(&c, pb_status_str(st));
        fail();
    }
    assert_int_equal(pb_kvcache_kept_count(a), n_kept);
    if (c.o.prefill_scope == PB_PREFILL_CONSISTENT) k->consistent += 1;
    else k->reference += 1;
    if (n_kept < c.len) k->compressed += 1;
    if (c.rows == c.len) k->rows_eq_len += 1;
    if (c.rows - (c.rows == c.len) > c.p.obs_window) k->ring_wrapped += 1;

    /* The model fed the whole prompt (capacity for all of it). */
    pb_kvcache_options big = c.o;
    big.capacity = c.len + c.p.recent_window + 2u + LATER_STEPS;
    big.prefill_max_len = 0;
    ref_policy r;
    assert_int_equal(ref_create(&r, &c.p, &big), PB_OK);
    assert_int_equal(pfref_feed_reference(&r, attn, c.rows, c.len), PB_OK);

    uint32_t rv[MAX_LEN];
    size_t rn = 0;
    if (c.o.prefill_scope == PB_PREFILL_CONSISTENT) {
        /* The library fed the same steps and evicted once. */
        pb_kvcache *b = NULL;
        assert_int_equal(pb_kvcache_pyramidkv_create(&c.p, &big, NULL, &b),
                         PB_OK);
        assert_int_equal(pfref_feed_library(b, attn, c.rows, c.len), PB_OK);
        uint32_t bv[MAX_LEN];
        size_t bn = 0;
        assert_int_equal(pb_kvcache_evict(b, c.ask, bv, MAX_LEN, &bn), PB_OK);
        assert_int_equal(ref_evict(&r, c.ask, rv, MAX_LEN, &rn), PB_OK);
        if (bn != rn || memcmp(bv, rv, bn * sizeof *bv) != 0) {
            report(&c, "the library feed and the model disagree");
            fail();
        }
        same_state(&c, b, &r);
        pb_kvcache_destroy(b);
    } else {
        unsigned char keep[MAX_LEN];
        const uint32_t eff = pb_kvcache_effective_budget(a);
        const size_t share = c.ask < eff ? c.ask : eff;
        assert_int_equal(pfref_select(attn, c.rows, c.len, share,
                                      c.p.pool_kernel, c.o.pool, keep),
                         n_kept);
        for (uint32_t q = 0; q < c.len; ++q)
            if (!keep[q]) rv[rn++] = q;
        compact_model(&r, keep);
    }
    if (c.len - n_kept != rn || memcmp(victims, rv, rn * sizeof *rv) != 0) {
        report(&c, "prefill victims differ");
        fail();
    }
    assert_memory_equal(kept, r.pos, n_kept * sizeof *kept);
    same_state(&c, a, &r);
    same_later_behaviour(&c, a, &r, &g);

    ref_destroy(&r);
    pb_kvcache_destroy(a);
}

static void prefill_equals_decode_feed(void **state) {
    (void)state;
    float *attn = malloc((size_t)MAX_ROWS * MAX_LEN * sizeof *attn);
    const size_t ws_bytes = (size_t)MAX_LEN * 10u + 16u * 16u;
    void *ws = malloc(ws_bytes);
    assert_non_null(attn);
    assert_non_null(ws);
    eq_counts k = {0, 0, 0, 0, 0, 0};
    for (unsigned i = 0; i < CASES; ++i) one_case(i, attn, ws, ws_bytes, &k);
    printf("%u cases: %u consistent, %u reference, %u compressed, %u with "
           "rows == len, %u with more steps than obs_window, %u refused "
           "(capacity below the survivors)\n",
           CASES, k.consistent, k.reference, k.compressed, k.rows_eq_len,
           k.ring_wrapped, k.refused_full);
    assert_true(k.compressed > CASES / 2u && k.reference > CASES / 4u &&
                k.rows_eq_len > 10u && k.ring_wrapped > 100u);
    free(ws);
    free(attn);
}

/* The worked decode example (docs/spec.md 11.1) as a prefill: len = 7, rows = 7, so
 * row 0 belongs to position 0 (it observes nothing and is ignored) and rows
 * 1 .. 6 are the six steps, causal part zero. With
 * obs_window 8, pool 1, recent 1, budget 6, one layer: window scores of
 * 0 .. 6 are 2, 1, .9375, .875, .75, .4375, 0 and evict(6) drops [5]. */
static void issue_two_worked_example(void **state) {
    (void)state;
    const float rows[7][7] = {
        {1, 0, 0, 0, 0, 0, 0}, /* position 0: observes nothing */
        {1, 0, 0, 0, 0, 0, 0},
        {.5f, .5f, 0, 0, 0, 0, 0},
        {.25f, .25f, .5f, 0, 0, 0, 0},
        {.125f, .125f, .25f, .5f, 0, 0, 0},
        {.0625f, .0625f, .125f, .25f, .5f, 0, 0},
        {.0625f, .0625f, .0625f, .125f, .25f, .4375f, 0},
    };
    pb_kvcache_pyramidkv_params p = {6, 0, 1, 4, 1, 8, 1};
    pb_kvcache_options o = PB_KVCACHE_OPTIONS_DEFAULT;
    o.prefill_max_len = 7;
    pb_kvcache *a = NULL;
    assert_int_equal(pb_kvcache_pyramidkv_create(&p, &o, NULL, &a), PB_OK);
    uint32_t kept[7], victims[7];
    size_t n = 0;
    assert_int_equal(pb_kvcache_prefill(a, &rows[0][0], 7, 7, 6, NULL, 0, kept,
                                        7, victims, 7, &n), PB_OK);
    assert_int_equal(n, 6);
    assert_int_equal(victims[0], 5);
    const double want[7] = {2, 1, .9375, .875, .75, -1, 0};
    for (uint32_t q = 0; q < 7; ++q) {
        double s = -1.0;
        if (q == 5) {
            assert_int_equal(pb_kvcache_window_score(a, q, &s),
                             PB_ERR_NOT_HELD);
            continue;
        }
        assert_int_equal(pb_kvcache_window_score(a, q, &s), PB_OK);
        assert_true(s == want[q]);
    }
    /* Decoding goes on: a step at 7 adds to the records of 0 and 6. */
    const float s7[6] = {.5f, 0, 0, 0, 0, .5f};
    assert_int_equal(pb_kvcache_observe(a, 7, s7, 6), PB_OK);
    double s0 = 0.0, s6 = 0.0;
    assert_int_equal(pb_kvcache_window_score(a, 0, &s0), PB_OK);
    assert_int_equal(pb_kvcache_window_score(a, 6, &s6), PB_OK);
    assert_true(s0 == 2.5 && s6 == .5);
    pb_kvcache_destroy(a);
}

PB_TEST_MAIN(cmocka_unit_test(issue_two_worked_example),
             cmocka_unit_test(prefill_equals_decode_feed))
