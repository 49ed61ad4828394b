/*
 * test_lowest_select.c - pb__lowest_ranks (src/lowest_select.c), white-box:
 * the k lowest ranks by (key, rank) in one pass against the naive
 * selection of one pass per key (as the scorers' peeks made it), on random
 * runs with many ties, every key width, every k.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "lowest_select.h"
#include "test_rng.h"

enum { N = 300 };

static uint64_t key_of(const void *keys, unsigned width, size_t i) {
    if (width == 0u) return 0u;
    if (width == 4u) return ((const uint32_t *)keys)[i];
    uint64_t k;
    memcpy(&k, (const double *)keys + i, sizeof k);
    return k;
}

/* One pass per key: the least (key, rank) above the one found before. */
static void naive(const void *keys, unsigned width, size_t first, size_t end,
                  size_t k, uint32_t *out) {
    uint64_t pk = 0u;
    size_t pr = 0u;
    for (size_t t = 0; t < k; t++) {
        size_t best = end;
        uint64_t bk = 0u;
        for (size_t i = first; i < end; i++) {
            const uint64_t key = key_of(keys, width, i);
            if (t > 0u && (key < pk || (key == pk && i <= pr))) continue;
            if (best == end || key < bk) {
                bk = key;
                best = i;
            }
        }
        assert_true(best < end);
        out[t] = (uint32_t)best;
        pk = bk;
        pr = best;
    }
}

static void random_runs(void **state) {
    (void)state;
    static double d[N];
    static uint32_t u[N];
    uint32_t got[N], want[N];
    pbt_rng g = {2026u};
    for (int round = 0; round < 3000; round++) {
        const uint32_t levels = 1u + pbt_below(&g, round % 2 ? 8u : 1000u);
        for (size_t i = 0; i < N; i++) {
            const uint32_t l = pbt_below(&g, levels);
            d[i] = l == 0u && pbt_below(&g, 4u) == 0u ? -0.0 : (double)l * 0.125;
            u[i] = l;
        }
        const unsigned width = (unsigned[]){0u, 4u, 8u}[round % 3];
        const void *keys = width == 4u ? (const void *)u : (const void *)d;
        const size_t first = pbt_below(&g, 40u);
        const size_t end = first + 1u + pbt_below(&g, (uint32_t)(N - first));
        const size_t span = end - first;
        const size_t k = round % 5 == 0 ? span : 1u + pbt_below(&g, (uint32_t)span);
        pb__lowest_ranks(keys, width, first, end, k, got);
        naive(keys, width, first, end, k, want);
        assert_memory_equal(got, want, k * sizeof *got);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(random_runs)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
