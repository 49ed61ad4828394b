/*
 * test_profile.c - the attention profile accumulator (pyramidkv_profile.h)
 * against a plain reference computation: entropy with natural logarithms
 * divided by ln 2, the mass curve from a qsort of every row and a sum over
 * every k, on thousands of random rows; exact values on constructed rows
 * (uniform over n, one-hot, scaled rows); the derived weights and the
 * arithmetic ratio fit; sizing, reset and the params struct_size rule.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyramidkv/pyramidkv.h"
#include "test_configs.h"
#include "test_rng.h"
#include "test_main.h"

#define REF_LAYERS 4u
#define REF_MAX_LEN 300u
#define REF_ROWS 1200u

static pb_profile *make(uint32_t layers, uint32_t max_len) {
    pb_profile_params p = pbt_profile_params(layers, max_len);
    pb_profile *prof = NULL;
    assert_int_equal(pb_profile_create(&p, NULL, &prof), PB_OK);
    assert_non_null(prof);
    return prof;
}

static int cmp_desc(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? 1 : (x > y ? -1 : 0);
}

static void expect_close(double got, double want, double rel,
                         const char *what, uint32_t layer, uint32_t k) {
    const double scale = fabs(want) > 1.0 ? fabs(want) : 1.0;
    if (fabs(got - want) > rel * scale) {
        fprintf(stderr, "%s layer %u k %u: got %.17g want %.17g\n", what,
                layer, k, got, want);
        fail();
    }
}

/* A random row: lengths 1 .. REF_MAX_LEN, a mix of shapes (flat noise, a
 * few spikes, zeros), never all zero, not normalised. */
static uint32_t random_row(pbt_rng *g, float *row) {
    const uint32_t len = 1u + pbt_below(g, REF_MAX_LEN);
    const uint32_t shape = pbt_below(g, 4u);
    for (uint32_t i = 0; i < len; ++i) {
        double v = pbt_unit(g);
        if (shape == 1u) v = v * v * v * v * v * v; /* peaked */
        if (shape == 2u && pbt_below(g, 3u) == 0u) v = 0.0;
        if (shape == 3u) v *= 1e-3;
        row[i] = (float)v;
    }
    row[pbt_below(g, len)] += 0.5f; /* never all zero */
    if (pbt_below(g, 5u) == 0u) row[pbt_below(g, len)] = 40.0f;
    return len;
}

static void matches_reference_on_random_rows(void **state) {
    (void)state;
    pb_profile *prof = make(REF_LAYERS, REF_MAX_LEN);
    static double ref_mass[REF_LAYERS][REF_MAX_LEN];
    double ref_h[REF_LAYERS] = {0};
    uint64_t ref_rows[REF_LAYERS] = {0};
    memset(ref_mass, 0, sizeof ref_mass);
    pbt_rng g = {12345u};
    float row[REF_MAX_LEN];
    double sorted[REF_MAX_LEN];
    for (uint32_t r = 0; r < REF_ROWS; ++r) {
        const uint32_t layer = pbt_below(&g, REF_LAYERS);
        const uint32_t len = random_row(&g, row);
        assert_int_equal(pb_profile_add_row(prof, layer, row, len), PB_OK);
        /* The reference: plain loops, natural logs, qsort. */
        double s = 0.0;
        for (uint32_t i = 0; i < len; ++i) s += row[i];
        double h = 0.0;
        for (uint32_t i = 0; i < len; ++i) {
            if (row[i] == 0.0f) continue;
            const double p = row[i] / s;
            h += -p * log(p) / log(2.0);
        }
        ref_h[layer] += h;
        for (uint32_t i = 0; i < len; ++i) sorted[i] = row[i];
        qsort(sorted, len, sizeof sorted[0], cmp_desc);
        for (uint32_t k = 1; k <= REF_MAX_LEN; ++k) {
            double top = 0.0;
            for (uint32_t i = 0; i < k && i < len; ++i) top += sorted[i];
            ref_mass[layer][k - 1u] += k >= len ? 1.0 : top / s;
        }
        ref_rows[layer] += 1u;
    }
    for (uint32_t l = 0; l < REF_LAYERS; ++l) {
        uint64_t rows = 0;
        assert_int_equal(pb_profile_layer_rows(prof, l, &rows), PB_OK);
        assert_true(rows == ref_rows[l]);
        assert_true(rows > 200u);
        double bits = 0.0, support = 0.0;
        assert_int_equal(pb_profile_entropy(prof, l, &bits, &support), PB_OK);
        const double want = ref_h[l] / (double)rows;
        expect_close(bits, want, 1e-12, "entropy", l, 0u);
        expect_close(support, pow(2.0, want), 1e-12, "support", l, 0u);
        double prev = 0.0;
        for (uint32_t k = 1; k <= REF_MAX_LEN; ++k) {
            double m = -1.0;
            assert_int_equal(pb_profile_mass(prof, l, k, &m), PB_OK);
            expect_close(m, ref_mass[l][k - 1u] / (double)rows, 1e-12, "mass",
                         l, k);
            assert_true(m >= prev - 1e-15);
            prev = m;
        }
        assert_true(prev == 1.0);
        static double curve[REF_MAX_LEN];
        assert_int_equal(pb_profile_mass_curve(prof, l, curve, REF_MAX_LEN),
                         PB_OK);
        for (uint32_t k = 1; k <= REF_MAX_LEN; ++k) {
            double m = -1.0;
            assert_int_equal(pb_profile_mass(prof, l, k, &m), PB_OK);
            assert_memory_equal(&m, &curve[k - 1u], sizeof m);
        }
        /* The smallest k for 50/90/99 %: the reference scans its curve
         * with the documented quantisation. */
        const uint32_t fracs[] = {500000u, 900000u, 990000u, 1000000u, 1u};
        for (size_t f = 0; f < sizeof fracs / sizeof fracs[0]; ++f) {
            uint32_t k = 0, want_k = 0;
            for (uint32_t kk = 1; kk <= REF_MAX_LEN && want_k == 0u; ++kk) {
                const double q =
                    floor(ref_mass[l][kk - 1u] / (double)rows * 1e6 + 0.5);
                if (q >= (double)fracs[f]) want_k = kk;
            }
            assert_int_equal(pb_profile_mass_k(prof, l, fracs[f], &k), PB_OK);
            assert_int_equal(k, want_k);
        }
    }
    pb_profile_destroy(prof);
}

static void uniform_and_one_hot_rows(void **state) {
    (void)state;
    const uint32_t ns[] = {1u, 2u, 3u, 7u, 64u, 1000u, 4096u};
    for (size_t t = 0; t < sizeof ns / sizeof ns[0]; ++t) {
        const uint32_t n = ns[t];
        pb_profile *prof = make(2u, 4096u);
        float *row = calloc(n, sizeof *row);
        assert_non_null(row);
        for (uint32_t i = 0; i < n; ++i) row[i] = 1.0f / (float)n;
        for (int rep = 0; rep < 3; ++rep)
            assert_int_equal(pb_profile_add_row(prof, 0u, row, n), PB_OK);
        memset(row, 0, n * sizeof *row);
        row[n / 2u] = 0.25f; /* one-hot, not normalised */
        assert_int_equal(pb_profile_add_row(prof, 1u, row, n), PB_OK);
        double bits = -1.0, support = -1.0;
        assert_int_equal(pb_profile_entropy(prof, 0u, &bits, &support), PB_OK);
        expect_close(bits, log2((double)n), 1e-12, "uniform entropy", 0u, n);
        expect_close(support, (double)n, 1e-12, "uniform support", 0u, n);
        assert_int_equal(pb_profile_entropy(prof, 1u, &bits, &support), PB_OK);
        assert_true(bits == 0.0);
        assert_true(support == 1.0);
        /* Uniform: the k largest hold k/n; one-hot: everything from k = 1. */
        for (uint32_t k = 1; k <= n; k += (n / 7u) + 1u) {
            double m = 0.0;
            assert_int_equal(pb_profile_mass(prof, 0u, k, &m), PB_OK);
            expect_close(m, (double)k / (double)n, 1e-12, "uniform mass", 0u, k);
            assert_int_equal(pb_profile_mass(prof, 1u, k, &m), PB_OK);
            assert_true(m == 1.0);
        }
        uint32_t k = 0;
        assert_int_equal(pb_profile_mass_k(prof, 0u, 500000u, &k), PB_OK);
        assert_int_equal(k, (n + 1u) / 2u);
        assert_int_equal(pb_profile_mass_k(prof, 1u, 1000000u, &k), PB_OK);
        assert_int_equal(k, 1u);
        free(row);
        pb_profile_destroy(prof);
    }
}

static void scaled_rows_count_the_same(void **state) {
    (void)state;
    pb_profile *a = make(1u, 64u), *b = make(1u, 64u);
    float row[64], scaled[64];
    pbt_rng g = {7u};
    for (int r = 0; r < 50; ++r) {
        for (int i = 0; i < 64; ++i) {
            row[i] = (float)pbt_below(&g, 100u);
            scaled[i] = row[i] * 4.0f; /* exact in float */
        }
        row[0] += 1.0f;
        scaled[0] += 4.0f;
        assert_int_equal(pb_profile_add_row(a, 0u, row, 64u), PB_OK);
        assert_int_equal(pb_profile_add_row(b, 0u, scaled, 64u), PB_OK);
    }
    double ha = 0, hb = 0;
    assert_int_equal(pb_profile_entropy(a, 0u, &ha, NULL), PB_OK);
    assert_int_equal(pb_profile_entropy(b, 0u, &hb, NULL), PB_OK);
    assert_true(ha == hb);
    for (uint32_t k = 1; k <= 64u; ++k) {
        double ma = 0, mb = 0;
        assert_int_equal(pb_profile_mass(a, 0u, k, &ma), PB_OK);
        assert_int_equal(pb_profile_mass(b, 0u, k, &mb), PB_OK);
        assert_true(ma == mb);
    }
    pb_profile_destroy(a);
    pb_profile_destroy(b);
}

/* Layer l's rows are uniform over widths[l] positions of a 256-long row:
 * the k for 90 % is ceil(0.9 * width). */
static pb_profile *width_profile(const uint32_t *widths, uint32_t layers) {
    pb_profile *prof = make(layers, 256u);
    float row[256];
    for (uint32_t l = 0; l < layers; ++l) {
        if (widths[l] == 0u) continue; /* a layer left unmeasured */
        memset(row, 0, sizeof row);
        for (uint32_t i = 0; i < widths[l]; ++i) row[255u - i] = 1.0f;
        assert_int_equal(pb_profile_add_row(prof, l, row, 256u), PB_OK);
    }
    return prof;
}

static void weights_follow_the_mass_needed(void **state) {
    (void)state;
    const uint32_t widths[6] = {200u, 0u, 100u, 0u, 0u, 10u};
    pb_profile *prof = width_profile(widths, 6u);
    uint32_t w[6];
    assert_int_equal(pb_profile_weights(prof, 900000u, 1u, w, 6u), PB_OK);
    /* Measured: 180, 90, 9. Layer 1 is equally near 0 and 2: the lower;
     * layer 3 is nearest 2, layer 4 nearest 5. */
    const uint32_t want[6] = {180u, 180u, 90u, 90u, 9u, 9u};
    for (int l = 0; l < 6; ++l) assert_int_equal(w[l], want[l]);
    assert_int_equal(pb_profile_weights(prof, 900000u, 50u, w, 6u), PB_OK);
    const uint32_t floored[6] = {180u, 180u, 90u, 90u, 50u, 50u};
    for (int l = 0; l < 6; ++l) assert_int_equal(w[l], floored[l]);
    pb_profile_destroy(prof);
}

static void fit_ratio_recovers_an_arithmetic_schedule(void **state) {
    (void)state;
    const uint32_t ratios[] = {1u, 2u, 3u, 4u, 8u, 16u};
    for (size_t i = 0; i < sizeof ratios / sizeof ratios[0]; ++i) {
        uint32_t shares[32];
        assert_int_equal(
            pb_kvcache_pyramid_budgets(1000u, 32u, ratios[i], shares, 32u),
            PB_OK);
        uint32_t r = 0;
        uint64_t d = 99;
        assert_int_equal(pb_profile_fit_ratio(shares, 32u, 64u, &r, &d), PB_OK);
        assert_int_equal(r, ratios[i]);
    }
    /* The distance is computed from the library's own shares: weights
     * equal to pb_kvcache_pyramid_budget(2^20, ...) are at distance 0. */
    const uint32_t ns[] = {1u, 2u, 5u, 80u, 1000u};
    static uint32_t exact[1000];
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; ++i) {
        for (uint32_t r = 1; r <= 512u; r *= 8u) {
            for (uint32_t l = 0; l < ns[i]; ++l)
                exact[l] = pb_kvcache_pyramid_budget(1u << 20, l, ns[i], r);
            uint32_t got = 0;
            uint64_t d = 1;
            assert_int_equal(pb_profile_fit_ratio(exact, ns[i], 600u, &got,
                                                  &d), PB_OK);
            assert_true(d == 0u);
            if (ns[i] > 1u) assert_int_equal(got, r);
        }
    }
    /* Weights growing with depth (inverted) fit uniform. */
    uint32_t inv[32];
    for (uint32_t l = 0; l < 32u; ++l) inv[l] = 10u + 5u * l;
    uint32_t r = 0;
    assert_int_equal(pb_profile_fit_ratio(inv, 32u, 64u, &r, NULL), PB_OK);
    assert_int_equal(r, 1u);
    /* A funnel from a profile: layers need less and less. */
    uint32_t widths[8];
    for (uint32_t l = 0; l < 8u; ++l) widths[l] = 240u - 30u * l;
    pb_profile *prof = width_profile(widths, 8u);
    uint32_t w[8];
    assert_int_equal(pb_profile_weights(prof, 900000u, 1u, w, 8u), PB_OK);
    for (uint32_t l = 1; l < 8u; ++l) assert_true(w[l] < w[l - 1u]);
    assert_int_equal(pb_profile_fit_ratio(w, 8u, 64u, &r, NULL), PB_OK);
    assert_true(r >= 4u);
    pb_profile_destroy(prof);
}

static void size_memory_and_reset(void **state) {
    (void)state;
    pb_profile_params p = pbt_profile_params(3u, 100u);
    size_t bytes = 0;
    assert_int_equal(pb_profile_size(&p, &bytes), PB_OK);
    /* 64-byte parts: record, rows, entropy, mass, counts, scratch. */
    assert_true(bytes >= 64u + 64u + 64u + 2400u + 2400u + 400u);
    assert_true(bytes <= 64u * 8u + 2400u + 2400u + 400u + 64u * 6u);
    pb_profile *prof = NULL;
    assert_int_equal(pb_profile_create(&p, NULL, &prof), PB_OK);
    assert_int_equal(pb_profile_memory_bytes(prof), bytes);
    assert_int_equal(pb_profile_memory_bytes(NULL), 0u);
    float row[3] = {1.0f, 2.0f, 3.0f};
    assert_int_equal(pb_profile_add_row(prof, 2u, row, 3u), PB_OK);
    uint64_t rows = 0;
    assert_int_equal(pb_profile_layer_rows(prof, 2u, &rows), PB_OK);
    assert_true(rows == 1u);
    assert_int_equal(pb_profile_reset(prof), PB_OK);
    assert_int_equal(pb_profile_layer_rows(prof, 2u, &rows), PB_OK);
    assert_true(rows == 0u);
    double h = 0;
    assert_int_equal(pb_profile_entropy(prof, 2u, &h, NULL), PB_ERR_PARAM);
    pb_profile_destroy(prof);
    pb_profile_destroy(NULL);
    /* Defaults: NULL params equal PB_PROFILE_PARAMS_DEFAULT. */
    size_t a = 0, b = 0;
    const pb_profile_params def = PB_PROFILE_PARAMS_DEFAULT;
    assert_int_equal(pb_profile_size(NULL, &a), PB_OK);
    assert_int_equal(pb_profile_size(&def, &b), PB_OK);
    assert_int_equal(a, b);
}

/* The struct_size rule (docs/abi.md): below the first released size is
 * refused; a longer struct must be zero beyond the known fields. */
static void params_struct_size_rule(void **state) {
    (void)state;
    size_t def = 0, got = 0;
    assert_int_equal(pb_profile_size(NULL, &def), PB_OK);
    struct {
        pb_profile_params p;
        uint32_t extra[2];
    } big;
    memset(&big, 0, sizeof big);
    big.p.struct_size = (uint32_t)sizeof big;
    big.p.num_layers = 32u;
    big.p.max_len = 4096u;
    assert_int_equal(pb_profile_size(&big.p, &got), PB_OK);
    assert_int_equal(got, def);
    big.extra[1] = 1u;
    assert_int_equal(pb_profile_size(&big.p, &got), PB_ERR_PARAM);
    pb_profile_params small = PB_PROFILE_PARAMS_DEFAULT;
    small.struct_size = PB_PROFILE_PARAMS_SIZE_0_2; /* the first release */
    assert_int_equal(pb_profile_size(&small, &got), PB_OK);
    assert_int_equal(got, def);
    small.struct_size = PB_PROFILE_PARAMS_SIZE_0_2 - 1u;
    assert_int_equal(pb_profile_size(&small, &got), PB_ERR_PARAM);
    small.struct_size = 4u;
    assert_int_equal(pb_profile_size(&small, &got), PB_ERR_PARAM);
}

PB_TEST_MAIN(cmocka_unit_test(matches_reference_on_random_rows),
             cmocka_unit_test(uniform_and_one_hot_rows),
             cmocka_unit_test(scaled_rows_count_the_same),
             cmocka_unit_test(weights_follow_the_mass_needed),
             cmocka_unit_test(fit_ratio_recovers_an_arithmetic_schedule),
             cmocka_unit_test(size_memory_and_reset),
             cmocka_unit_test(params_struct_size_rule))
