/*
 * test_scorer_lowest.c - the scorer table's lowest entry, white-box: for
 * every scorer, on decode steps with many tied weights and evicts at
 * varying cadences, pb__kvcache_lowest (what a layer group asks each head)
 * gives the same positions and the same score bits as the read-only peek
 * pb__kvcache_peek_lowest, for every count of keys from 1 to 9 (the few
 * keys a source scorer answers with one vectorised pass each, the window
 * filter's guessed scans, and past both) and for 19 and 39 (a source
 * scorer's cut and sort, the window's full peek).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "instance_internal.h"
#include "test_rng.h"

enum { CAP = 160, MAXK = 39 };

static void lowest_equals_peek(pb_scorer scorer, uint64_t seed) {
    pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    c.budget = 96u;
    c.share = 96u;
    c.capacity = CAP;
    c.recent_window = 4u;
    c.obs_window = 8u;
    c.pool_kernel = 3u;
    c.scorer = scorer;
    pb_kvcache *p = NULL;
    assert_int_equal(pb_kvcache_create(&c, NULL, &p), PB_OK);
    void *work = malloc(pb__kvcache_peek_work_bytes(p) + 8u);
    assert_non_null(work);
    pbt_rng g = {seed};
    float row[CAP];
    uint32_t pa[MAXK], pb[MAXK], victims[CAP];
    double sa[MAXK], sb[MAXK];
    size_t checked = 0;
    for (uint32_t pos = 1; pos < 700u; pos++) {
        const size_t held = pb_kvcache_kept_count(p);
        /* Odd seeds: weights from a few values (ties, sums that never
         * round); even seeds: floats of every scale down to 2^-40, which
         * the window's quantised sums round (its filter's bounded path).
         * Now and then a run of one value. */
        const int flat = pbt_below(&g, 9) == 0u;
        for (size_t i = 0; i < held; i++)
            row[i] = flat       ? 0.25f
                     : seed & 1u ? (float)pbt_below(&g, 5) * 0.125f
                                 : (float)ldexp(pbt_unit(&g),
                                                -(int)pbt_below(&g, 40));
        assert_int_equal(pb_kvcache_observe(p, pos, row, held), PB_OK);
        const size_t e = pb__kvcache_peek_lowest(p, 0u, NULL, NULL, 0u, NULL);
        const size_t now = pb_kvcache_kept_count(p);
        for (size_t k = 1; k <= MAXK && k <= e;
             k = k < 9u ? k + 1u : 2u * k + 1u) {
            const size_t na = pb__kvcache_peek_lowest(
                p, (uint32_t)(now - k), pa, sa, k, work);
            const size_t nb = pb__kvcache_lowest(p, (uint32_t)(now - k), pb,
                                                 sb, k, work);
            assert_int_equal(na, nb);
            const size_t m = na < k ? na : k;
            assert_memory_equal(pa, pb, m * sizeof *pa);
            assert_memory_equal(sa, sb, m * sizeof *sa);
            checked++;
        }
        /* Evict at a varying cadence, down to the share or a little
         * below. */
        if (now >= CAP - 1u || pbt_below(&g, 3) == 0u) {
            size_t n = 0;
            const uint32_t ask = 96u - pbt_below(&g, 4);
            assert_int_equal(pb_kvcache_evict(p, ask, victims, CAP, &n),
                             PB_OK);
        }
    }
    assert_true(checked > 1000u);
    free(work);
    pb_kvcache_destroy(p);
}

static void every_scorer(void **state) {
    (void)state;
    const pb_scorer all[] = {PB_SCORER_WINDOW, PB_SCORER_CUMULATIVE,
                             PB_SCORER_LAST, PB_SCORER_VOTES,
                             PB_SCORER_NONE};
    for (size_t s = 0; s < sizeof all / sizeof *all; s++)
        for (uint64_t seed = 1; seed <= 4u; seed++)
            lowest_equals_peek(all[s], seed * 7920u + seed % 2u);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(every_scorer)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
