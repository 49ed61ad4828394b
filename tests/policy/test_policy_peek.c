/*
 * test_policy_peek.c - the internal peek of an instance's lowest-ranked
 * evictable positions (pb__kvcache_peek_lowest, policy_internal.h), for
 * every scorer, against what the evict then removes. Linked with the
 * library's objects (the peek is not exported).
 *
 * Two instances of one config see the same steps; before each evict one
 * of them is peeked (twice, and with a smaller cap), then both evict.
 * The peek must report as many as the evict takes, the set it takes (in
 * the order of choice: scores ascending, ties to the older), a prefix of
 * that order for a smaller cap, the same answer twice, and must leave the
 * instance as it was (the peeked one chooses what the other does, now and
 * at every later step). For the score sources the reported scores are
 * pb_kvcache_score's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "policy_internal.h"
#include "test_rng.h"
#include "test_main.h"

#define MAXN 1024u

/* Weights with ties now and then (a repeated value, zeros), so that the
 * order's tie rule is exercised. */
static float weight(pbt_rng *r, int style, size_t n) {
    switch (style) {
    case 0: return (float)pbt_unit(r) / (float)n;
    case 1: return pbt_below(r, 4) == 0 ? 0.0f : 0.25f;
    default: return (float)pbt_below(r, 8) / 8.0f;
    }
}

static unsigned long peeks, peeked_victims;

static void run(unsigned long seed) {
    pbt_rng r = {seed * UINT64_C(0x9E3779B97F4A7C15) + 11};
    pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    c.scorer = pbt_below(&r, 5);
    c.budget = 4 + pbt_below(&r, 120);
    c.recent_window = pbt_below(&r, 3) ? pbt_below(&r, c.budget / 2u) : 0u;
    c.obs_window = 1 + pbt_below(&r, 12);
    c.pool_kernel = 1 + 2 * pbt_below(&r, 4);
    c.pool = pbt_below(&r, 4) == 0 ? PB_POOL_AVG : PB_POOL_MAX;
    const uint32_t max_cadence = 1 + pbt_below(&r, 12);
    c.capacity = c.budget + max_cadence + 1u;
    if (pbt_below(&r, 3) == 0) c.sinks = pbt_below(&r, 4);
    const int style = (int)pbt_below(&r, 3);

    pb_kvcache *a = NULL, *b = NULL;
    assert_int_equal(pb_kvcache_create(&c, NULL, &a), PB_OK);
    assert_int_equal(pb_kvcache_create(&c, NULL, &b), PB_OK);
    const size_t work_bytes = pb__kvcache_peek_work_bytes(a);
    double *work = malloc(work_bytes + sizeof(double));
    assert_non_null(work);

    static float w[MAXN];
    static uint32_t va[MAXN], vb[MAXN], pp[MAXN], pp2[MAXN], sorted[MAXN];
    static double ps[MAXN], ps2[MAXN];
    const uint32_t steps = 200 + pbt_below(&r, 400);
    uint32_t since = 0, cadence = 1 + pbt_below(&r, max_cadence);
    for (uint32_t pos = 1; pos <= steps; ++pos) {
        const size_t n = pb_kvcache_kept_count(a);
        for (size_t i = 0; i < n; ++i) w[i] = weight(&r, style, n);
        const float *attn = pbt_below(&r, 20) == 0 ? NULL : w;
        assert_int_equal(pb_kvcache_observe(a, pos, attn, n), PB_OK);
        assert_int_equal(pb_kvcache_observe(b, pos, attn, n), PB_OK);
        if (++since < cadence && pb_kvcache_kept_count(a) < c.capacity)
            continue;
        since = 0;
        const uint32_t ask =
            pbt_below(&r, 4) ? c.budget : pbt_below(&r, c.budget + 1u);

        const size_t k = pb__kvcache_peek_lowest(a, ask, pp, ps, MAXN, work);
        assert_int_equal(pb__kvcache_peek_lowest(a, ask, pp2, ps2, MAXN,
                                                 work),
                         k);
        assert_memory_equal(pp, pp2, k * sizeof *pp);
        assert_memory_equal(ps, ps2, k * sizeof *ps);
        if (k > 1u) { /* a smaller cap: the first pairs of the order */
            const size_t cap = 1u + pbt_below(&r, (uint32_t)k - 1u);
            assert_int_equal(pb__kvcache_peek_lowest(a, ask, pp2, ps2, cap,
                                                     work),
                             k);
            assert_memory_equal(pp, pp2, cap * sizeof *pp);
            assert_memory_equal(ps, ps2, cap * sizeof *ps);
        }
        for (size_t t = 1; t < k; ++t) /* the order of choice */
            assert_true(ps[t - 1u] < ps[t] ||
                        (ps[t - 1u] == ps[t] && pp[t - 1u] < pp[t]));
        if (c.scorer != PB_SCORER_WINDOW)
            for (size_t t = 0; t < k; ++t) {
                double s = -2.0;
                assert_int_equal(pb_kvcache_score(a, pp[t], &s), PB_OK);
                assert_true(s == ps[t]);
            }

        size_t na = 0, nb = 0;
        assert_int_equal(pb_kvcache_evict(a, ask, va, MAXN, &na), PB_OK);
        assert_int_equal(pb_kvcache_evict(b, ask, vb, MAXN, &nb), PB_OK);
        assert_int_equal(na, k);
        assert_int_equal(nb, na);
        assert_memory_equal(va, vb, na * sizeof *va);
        memcpy(sorted, pp, k * sizeof *pp);
        for (size_t i = 1; i < k; ++i) { /* insertion sort: k is small */
            const uint32_t v = sorted[i];
            size_t j = i;
            for (; j > 0u && sorted[j - 1u] > v; --j)
                sorted[j] = sorted[j - 1u];
            sorted[j] = v;
        }
        assert_memory_equal(sorted, va, k * sizeof *va);
        peeks += 1u;
        peeked_victims += k;
        if (pbt_below(&r, 20) == 0) cadence = 1 + pbt_below(&r, max_cadence);
    }
    free(work);
    pb_kvcache_destroy(a);
    pb_kvcache_destroy(b);
}

static void peek_matches_evict(void **state) {
    (void)state;
    for (unsigned long s = 1; s <= 300; ++s) run(s);
    printf("peeks %lu, victims peeked and evicted %lu\n", peeks,
           peeked_victims);
    assert_true(peeked_victims > 1000u);
}

PB_TEST_MAIN(cmocka_unit_test(peek_matches_evict))
