/*
 * test_scorer_example.c - the example scorer of docs/architecture.md
 * (score_peak.c) run through the scorer table like any other: its name
 * from pb_scorer_name and back, and its victims, over random decodes and
 * evict cadences, against a naive model of the rule (the lowest peak
 * among the evictable ranks, ties to the older; the recent window and the
 * sinks protected).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "pyramidkv/pyramidkv.h"
#include "test_rng.h"
#include "test_main.h"

#define EXAMPLE_SCORER (PB_SCORER_NONE + 1u)
#define CAP 256u

static void named_in_the_table(void **state) {
    (void)state;
    assert_string_equal(pb_scorer_name(EXAMPLE_SCORER), "peak");
    uint32_t s = 0u;
    assert_int_equal(pb_scorer_from_name("peak", &s), PB_OK);
    assert_int_equal(s, EXAMPLE_SCORER);
    assert_null(pb_scorer_name(EXAMPLE_SCORER + 1u));
}

/* The naive model: positions and peaks by rank. */
typedef struct model {
    uint32_t pos[CAP];
    double peak[CAP];
    size_t n;
} model;

static size_t model_evict(model *m, size_t target, size_t recent,
                          size_t sinks, uint32_t *victims) {
    if (m->n <= target) return 0u;
    const size_t end = m->n - (recent < m->n ? recent : m->n);
    size_t first = 0;
    while (first < end && m->pos[first] < sinks) ++first;
    size_t needed = m->n - target;
    if (needed > end - first) needed = end - first;
    int gone[CAP] = {0};
    for (size_t v = 0; v < needed; ++v) {
        size_t best = SIZE_MAX;
        for (size_t i = first; i < end; ++i)
            if (!gone[i] && (best == SIZE_MAX || m->peak[i] < m->peak[best]))
                best = i;
        gone[best] = 1;
    }
    size_t w = 0, nv = 0;
    for (size_t i = 0; i < m->n; ++i) {
        if (gone[i]) {
            victims[nv++] = m->pos[i];
            continue;
        }
        m->pos[w] = m->pos[i];
        m->peak[w++] = m->peak[i];
    }
    m->n = w;
    return nv;
}

static void decodes_match_the_rule(void **state) {
    (void)state;
    pbt_rng r = {7u};
    for (unsigned run = 0; run < 40u; ++run) {
        pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
        c.scorer = EXAMPLE_SCORER;
        c.budget = 16u + pbt_below(&r, 48);
        c.recent_window = pbt_below(&r, 8);
        c.sinks = run % 3u == 0u ? 2u : 0u;
        c.capacity = CAP;
        pb_kvcache *p = NULL;
        assert_int_equal(pb_kvcache_create(&c, NULL, &p), PB_OK);
        model m = {{0}, {0.0}, 1u};
        const uint32_t cadence = 1u + pbt_below(&r, 8);
        const size_t target = pb_kvcache_effective_budget(p);
        float w[CAP];
        uint32_t got[CAP], want[CAP];
        for (uint32_t pos = 1; pos < 600u; ++pos) {
            for (size_t i = 0; i < m.n; ++i)
                w[i] = pbt_below(&r, 4) == 0 ? 0.0f
                                             : (float)pbt_below(&r, 1000) / 997.0f;
            assert_int_equal(pb_kvcache_observe(p, pos, w, m.n), PB_OK);
            for (size_t i = 0; i < m.n; ++i)
                if ((double)w[i] > m.peak[i]) m.peak[i] = (double)w[i];
            m.pos[m.n] = pos;
            m.peak[m.n++] = 0.0;
            if (pos % cadence != 0u && m.n < CAP - 1u) continue;
            size_t n = 0;
            assert_int_equal(
                pb_kvcache_evict(p, (uint32_t)target, got, CAP, &n), PB_OK);
            const size_t nw = model_evict(&m, target, c.recent_window,
                                          c.sinks, want);
            assert_int_equal(n, nw);
            for (size_t i = 0; i < n; ++i) assert_int_equal(got[i], want[i]);
            for (size_t i = 0; i < m.n; ++i) {
                double s = -1.0;
                assert_int_equal(pb_kvcache_score(p, m.pos[i], &s), PB_OK);
                assert_true(s == m.peak[i]);
            }
        }
        pb_kvcache_destroy(p);
    }
}

PB_TEST_MAIN(cmocka_unit_test(named_in_the_table),
             cmocka_unit_test(decodes_match_the_rule))
