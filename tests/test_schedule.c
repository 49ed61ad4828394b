/*
 * test_schedule.c - pb_kvcache_schedule_shares against docs/spec.md §12
 * ("Schedules"): the published facts to the unit; kvfactory and taper
 * against plain transcriptions of their references on random inputs
 * (every kvfactory branch counted, taper with beta up to 10 and no sinks);
 * exact totals and monotonicity of the apportioned kinds; profile against
 * a sort-based apportionment in 128-bit integers; curve and geometric
 * within one unit of their real-valued ideal; arithmetic identical to
 * pb_kvcache_pyramid_budget; the refusals, which write nothing.
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
#include "test_rng.h"
#include "test_main.h"

#define CANARY 0xC0FFEE11u
#define MAXL 300u
#define DIFF_RUNS 100000u

static pb_schedule sched(uint32_t kind, uint32_t layers, uint32_t budget) {
    pb_schedule s = PB_SCHEDULE_DEFAULT;
    s.kind = kind;
    s.num_layers = layers;
    s.budget = budget;
    return s;
}

static pb_status run(const pb_schedule *s, uint32_t *shares, uint64_t *total) {
    return pb_kvcache_schedule_shares(s, shares, MAXL, total);
}

/* Runs s, which must succeed; returns the total. */
static uint64_t run_ok(const pb_schedule *s, uint32_t *shares) {
    uint64_t total = 0;
    assert_int_equal(run(s, shares, &total), PB_OK);
    return total;
}

/* A kvfactory schedule of the facts: 32 layers, window 8, beta 20. */
static pb_schedule kvf_sched(uint32_t kind, uint32_t budget) {
    pb_schedule s = sched(kind, 32u, budget);
    s.window = 8u;
    s.beta = 20u;
    return s;
}

static uint64_t sum_of(const uint32_t *v, uint32_t n) {
    uint64_t t = 0;
    for (uint32_t i = 0; i < n; ++i) t += v[i];
    return t;
}

/* ------------------------------------------------------------------------ */
/* The facts                                                                */

static void fact_kvfactory_overshoot(void **state) {
    (void)state;
    pb_schedule s = kvf_sched(PB_SCHEDULE_KVFACTORY, 64u);
    uint32_t sh[MAXL];
    const uint64_t total = run_ok(&s, sh);
    assert_int_equal(sh[0], 118u);
    assert_int_equal(sh[31], 25u);
    for (uint32_t l = 0; l < 32u; ++l) assert_int_equal(sh[l], 118u - 3u * l);
    assert_int_equal(total, 2288u);
    assert_int_equal(sum_of(sh, 32u), 2288u);
}

static void fact_kvfactory_long_prompt(void **state) {
    (void)state;
    pb_schedule s = kvf_sched(PB_SCHEDULE_KVFACTORY, 2048u);
    s.prompt_len = 8192u;
    uint32_t sh[MAXL];
    const uint64_t total = run_ok(&s, sh);
    assert_int_equal(sh[0], 3986u);
    assert_int_equal(sh[31], 111u);
    for (uint32_t l = 0; l < 32u; ++l) assert_int_equal(sh[l], 3986u - 125u * l);
    assert_int_equal(total, 65552u);
}

static void fact_kvfactory_balanced(void **state) {
    (void)state;
    pb_schedule s = kvf_sched(PB_SCHEDULE_KVFACTORY_BALANCED, 64u);
    uint32_t sh[MAXL];
    const uint64_t total = run_ok(&s, sh);
    static const uint32_t head[4] = {118u, 115u, 111u, 108u};
    static const uint32_t tail[4] = {20u, 17u, 13u, 10u};
    for (uint32_t i = 0; i < 4u; ++i) {
        assert_int_equal(sh[i], head[i]);
        assert_int_equal(sh[28u + i], tail[i]);
    }
    assert_int_equal(total, 2048u);
    assert_int_equal(sum_of(sh, 32u), 2048u);
}

static void fact_taper(void **state) {
    (void)state;
    pb_schedule s = sched(PB_SCHEDULE_TAPER, 12u, 512u);
    s.sinks = 4u;
    s.taper_beta = 2.0;
    uint32_t sh[MAXL];
    const uint64_t total = run_ok(&s, sh);
    static const uint32_t want[12] = {1019u, 927u, 835u, 742u, 650u, 558u,
                                      466u,  374u, 282u, 189u, 97u,  5u};
    for (uint32_t i = 0; i < 12u; ++i) assert_int_equal(sh[i], want[i]);
    assert_int_equal(total, sum_of(want, 12u));
}

/* ------------------------------------------------------------------------ */
/* kvfactory: a plain transcription of the integer rules                    */

static int kvf_branch[4]; /* q < C, q < 2p, schedule unclamped, clamped */

static void kvfactory_plain(uint64_t C, uint64_t w, uint64_t beta, uint64_t L,
                            uint64_t q, uint64_t *out) {
    const uint64_t p = C - w;
    if (q != 0 && q < C) {
        kvf_branch[0]++;
        for (uint64_t l = 0; l < L; ++l) out[l] = q;
        return;
    }
    if (q != 0 && q < 2 * p) {
        kvf_branch[1]++;
        for (uint64_t l = 0; l < L; ++l) out[l] = C;
        return;
    }
    if (L == 1) {
        out[0] = C;
        return;
    }
    uint64_t mn = p / beta, mx = 2 * p - mn;
    int clamped = 0;
    if (q != 0 && mx >= q - w) {
        mx = q - w;
        mn = 2 * p - mx;
        clamped = 1;
    }
    kvf_branch[2 + clamped]++;
    const uint64_t steps = (mx - mn) / (L - 1);
    for (uint64_t l = 0; l < L; ++l) out[l] = mx - l * steps + w;
}

static void kvfactory_differential(void **state) {
    (void)state;
    pbt_rng g = {0x5C4ED01Eu};
    uint32_t sh[MAXL];
    uint64_t want[MAXL];
    memset(kvf_branch, 0, sizeof kvf_branch);
    for (uint32_t run_i = 0; run_i < DIFF_RUNS; ++run_i) {
        const uint32_t L = 1u + pbt_below(&g, (run_i % 4u) == 0u ? 3u : 128u);
        uint32_t C;
        switch (run_i % 3u) {
        case 0: C = 2u + pbt_below(&g, 200u); break;
        case 1: C = 2u + pbt_below(&g, 1u << 16); break;
        default: C = 2u + pbt_below(&g, UINT32_MAX / 2u); break;
        }
        const uint32_t w = pbt_below(&g, C < 64u ? C : 64u);
        const uint32_t beta = 1u + pbt_below(&g, (run_i & 1u) ? 40u : 1000u);
        uint32_t q = 0;
        switch (pbt_below(&g, 4u)) {
        case 0: q = 0; break;
        case 1: q = 1u + pbt_below(&g, C); break;              /* < C + 1 */
        case 2: q = C + pbt_below(&g, 2u * (C - w) + 1u); break; /* near 2p */
        default: q = C + pbt_below(&g, 8u * C + 1u); break;
        }
        pb_schedule s = sched(PB_SCHEDULE_KVFACTORY, L, C);
        s.window = w;
        s.beta = beta;
        s.prompt_len = q;
        kvfactory_plain(C, w, beta, L, q, want);
        uint64_t total = 0;
        const int fits = want[0] <= UINT32_MAX;
        const pb_status st = run(&s, sh, &total);
        if (!fits) {
            assert_int_equal(st, PB_ERR_TOO_LARGE);
            continue;
        }
        assert_int_equal(st, PB_OK);
        uint64_t t = 0;
        for (uint32_t l = 0; l < L; ++l) {
            if (sh[l] != want[l])
                fail_msg("C=%u w=%u beta=%u L=%u q=%u layer %u: %u != %llu",
                         C, w, beta, L, q, l, sh[l],
                         (unsigned long long)want[l]);
            t += want[l];
        }
        assert_int_equal(total, t);
    }
    for (int b = 0; b < 4; ++b) {
        print_message("kvfactory branch %d: %d inputs\n", b, kvf_branch[b]);
        assert_true(kvf_branch[b] > 1000);
    }
}

/* ------------------------------------------------------------------------ */
/* taper: a plain transcription of the reference's double arithmetic        */

static double round_half_even_plain(double x) {
    const double r = nearbyint(x); /* the default mode: to nearest, even */
    return r;
}

static void taper_plain(uint32_t L, uint32_t B, uint32_t sinks, double beta,
                        uint64_t *out, int *passes_used) {
    const double fl = (double)sinks + 1.0;
    const long long fi = (long long)sinks + 1;
    if (L == 1) {
        out[0] = (uint64_t)((long long)B > fi ? (long long)B : fi);
        return;
    }
    double v[MAXL];
    int fixed[MAXL];
    const double span = (double)((long long)B - fi) * (beta - 1.0);
    const double hi = (double)B + span;
    const double lo = (double)B - span;
    for (uint32_t i = 0; i < L; ++i) {
        v[i] = hi + (lo - hi) * ((double)i / (double)(L - 1));
        fixed[i] = 0;
    }
    const double target = (double)((unsigned long long)B * L);
    int passes = 0;
    for (uint32_t pass = 0; pass < L; ++pass) {
        for (uint32_t i = 0; i < L; ++i)
            if (v[i] < fl) {
                v[i] = fl;
                fixed[i] = 1;
            }
        double sum = 0.0;
        for (uint32_t i = 0; i < L; ++i) sum += v[i];
        const double excess = sum - target;
        if (excess <= 1e-9) break;
        double slack = 0.0;
        int nfree = 0;
        for (uint32_t i = 0; i < L; ++i)
            if (!fixed[i]) {
                slack += v[i] - fl;
                ++nfree;
            }
        if (nfree == 0 || slack <= 1e-9) break;
        for (uint32_t i = 0; i < L; ++i)
            if (!fixed[i]) v[i] -= excess * (v[i] - fl) / slack;
        ++passes;
    }
    for (uint32_t i = 0; i < L; ++i) {
        const double r = round_half_even_plain(v[i]);
        out[i] = r > fl ? (uint64_t)r : (uint64_t)fi;
    }
    *passes_used = passes;
}

static void taper_differential(void **state) {
    (void)state;
    pbt_rng g = {0x7A9E2u};
    uint32_t sh[MAXL];
    uint64_t want[MAXL];
    int multi_pass = 0, no_sinks = 0, beta_big = 0;
    for (uint32_t run_i = 0; run_i < DIFF_RUNS; ++run_i) {
        const uint32_t L = 1u + pbt_below(&g, (run_i % 8u) == 0u ? 3u : 96u);
        const uint32_t sinks =
            (run_i % 5u) == 0u ? 0u : pbt_below(&g, (run_i & 1u) ? 8u : 300u);
        uint32_t B;
        switch (run_i % 3u) {
        case 0: B = pbt_below(&g, 64u); break;
        case 1: B = pbt_below(&g, 8192u); break;
        default: B = pbt_below(&g, 1u << 24); break;
        }
        double beta;
        switch (pbt_below(&g, 4u)) {
        case 0: beta = 1.0 + (double)pbt_below(&g, 10u); break; /* integers */
        case 1: beta = 1.0 + (double)pbt_below(&g, 37u) * 0.25; break;
        default: beta = 1.0 + 9.0 * pbt_unit(&g); break;
        }
        pb_schedule s = sched(PB_SCHEDULE_TAPER, L, B);
        s.sinks = sinks;
        s.taper_beta = beta;
        int passes = 0;
        taper_plain(L, B, sinks, beta, want, &passes);
        const uint64_t total = run_ok(&s, sh);
        uint64_t t = 0;
        for (uint32_t l = 0; l < L; ++l) {
            if (sh[l] != want[l])
                fail_msg("L=%u B=%u sinks=%u beta=%.17g layer %u: %u != %llu",
                         L, B, sinks, beta, l, sh[l],
                         (unsigned long long)want[l]);
            t += want[l];
        }
        assert_int_equal(total, t);
        multi_pass += passes >= 2;
        no_sinks += sinks == 0u;
        beta_big += beta >= 8.0;
    }
    print_message("taper: %d inputs needed >= 2 passes, %d without sinks, "
                  "%d with beta >= 8\n",
                  multi_pass, no_sinks, beta_big);
    assert_true(multi_pass > 1000);
    assert_true(no_sinks > 1000);
    assert_true(beta_big > 1000);
}

/* Round half to even on exact halves: L = 2, B odd, beta 1.5 puts both
 * layers on .5 values. */
static void taper_half_even(void **state) {
    (void)state;
    pb_schedule s = sched(PB_SCHEDULE_TAPER, 2u, 10u);
    s.sinks = 0u;
    s.taper_beta = 1.5; /* span 4.5: 14.5 and 5.5 */
    uint32_t sh[MAXL];
    const uint64_t total = run_ok(&s, sh);
    assert_int_equal(sh[0], 14u);
    assert_int_equal(sh[1], 6u);
    assert_int_equal(total, 20u);
}

/* ------------------------------------------------------------------------ */
/* Apportioned kinds                                                        */

__extension__ typedef unsigned __int128 u128;

/* Largest remainder over `units` by weights, ties to the lower layer, by
 * sorting: the plain reading of docs/spec.md §12. */
static void apportion_plain(const uint32_t *w, uint32_t L, uint64_t units,
                            uint32_t base, uint64_t *out) {
    u128 wsum = 0;
    for (uint32_t l = 0; l < L; ++l) wsum += w[l];
    u128 rem[MAXL];
    uint32_t order[MAXL];
    uint64_t floors = 0;
    for (uint32_t l = 0; l < L; ++l) {
        const u128 num = (u128)units * w[l];
        out[l] = (uint64_t)(num / wsum);
        rem[l] = num % wsum;
        floors += out[l];
        order[l] = l;
    }
    /* insertion sort: remainder descending, layer ascending */
    for (uint32_t i = 1; i < L; ++i) {
        const uint32_t k = order[i];
        uint32_t j = i;
        while (j > 0 && rem[order[j - 1]] < rem[k]) {
            order[j] = order[j - 1];
            --j;
        }
        order[j] = k;
    }
    for (uint64_t i = 0; i < units - floors; ++i) out[order[i]]++;
    for (uint32_t l = 0; l < L; ++l) out[l] += base;
}

static void profile_differential(void **state) {
    (void)state;
    pbt_rng g = {0x9F0F11Eu};
    uint32_t sh[MAXL], w[MAXL];
    uint64_t want[MAXL];
    int with_min = 0, ties = 0;
    for (uint32_t run_i = 0; run_i < 8000u; ++run_i) {
        const uint32_t L = 1u + pbt_below(&g, (run_i % 4u) == 0u ? 4u : 80u);
        const uint32_t B = (run_i % 3u) == 0u ? pbt_below(&g, 5000u)
                                              : pbt_below(&g, 1u << 26);
        const uint32_t wmax = (run_i % 3u) == 0u   ? 4u
                              : (run_i % 3u) == 1u ? 1000000u
                                                   : UINT32_MAX;
        uint32_t nz = 0;
        for (uint32_t l = 0; l < L; ++l) {
            w[l] = pbt_below(&g, 3u) == 0u ? 0u : pbt_below(&g, wmax) + 1u;
            if (wmax == UINT32_MAX && w[l] != 0u) w[l] = (uint32_t)pbt_next(&g);
            nz += w[l] != 0u;
        }
        if (nz == 0u) w[pbt_below(&g, L)] = 1u;
        pb_schedule s = sched(PB_SCHEDULE_PROFILE, L, B);
        s.weights = w;
        s.min_share = (run_i & 1u) ? pbt_below(&g, B + 1u) : 0u;
        with_min += s.min_share != 0u;
        ties += wmax == 4u;
        apportion_plain(w, L, (uint64_t)(B - s.min_share) * L, s.min_share,
                        want);
        const uint64_t total = run_ok(&s, sh);
        for (uint32_t l = 0; l < L; ++l) {
            if (sh[l] != want[l])
                fail_msg("profile L=%u B=%u min=%u layer %u: %u != %llu", L, B,
                         s.min_share, l, sh[l], (unsigned long long)want[l]);
            assert_true(sh[l] >= s.min_share);
        }
        assert_int_equal(total, (uint64_t)B * L);
        assert_int_equal(sum_of(sh, L), (uint64_t)B * L);
    }
    assert_true(with_min > 1000 && ties > 1000); /* of 8000 */
}

/* kvfactory-balanced against the rational rule, by the same sort. */
static void balanced_differential(void **state) {
    (void)state;
    pbt_rng g = {0xBA1A2CEu};
    uint32_t sh[MAXL];
    for (uint32_t run_i = 0; run_i < 8000u; ++run_i) {
        const uint32_t L = 2u + pbt_below(&g, 100u);
        const uint32_t C =
            2u + pbt_below(&g, (run_i & 1u) ? 300u : UINT32_MAX / 3u);
        const uint32_t w = pbt_below(&g, C < 64u ? C : 64u);
        pb_schedule s = sched(PB_SCHEDULE_KVFACTORY_BALANCED, L, C);
        s.window = w;
        s.beta = 1u + pbt_below(&g, 40u);
        s.prompt_len = (run_i % 3u) == 0u ? C + pbt_below(&g, 4u * C) : 0u;
        uint64_t total = 0;
        const pb_status st = run(&s, sh, &total);
        /* The ends, as the plain kvfactory transcription takes them. */
        const uint64_t p = (uint64_t)C - w;
        uint64_t q = s.prompt_len;
        if (q != 0 && (q < C || q < 2 * p)) {
            assert_int_equal(st, PB_OK);
            const uint64_t flat = q < C ? q : C;
            for (uint32_t l = 0; l < L; ++l) assert_int_equal(sh[l], flat);
            continue;
        }
        uint64_t mn = p / s.beta, mx = 2 * p - mn;
        if (q != 0 && mx >= q - w) {
            mx = q - w;
            mn = 2 * p - mx;
        }
        if (mx + w > UINT32_MAX) {
            assert_int_equal(st, PB_ERR_TOO_LARGE);
            continue;
        }
        assert_int_equal(st, PB_OK);
        /* raw_l = (mx (L-1) - l (mx - mn)) / (L-1), summing to L p. */
        u128 rem[MAXL];
        uint64_t want[MAXL], floors = 0;
        for (uint32_t l = 0; l < L; ++l) {
            const u128 num = (u128)mx * (L - 1) - (u128)l * (mx - mn);
            want[l] = (uint64_t)(num / (L - 1));
            rem[l] = num % (L - 1);
            floors += want[l];
        }
        for (uint64_t k = 0; k < (uint64_t)L * p - floors; ++k) {
            uint32_t best = L;
            for (uint32_t l = 0; l < L; ++l)
                if (rem[l] != (u128)-1 &&
                    (best == L || rem[l] > rem[best]))
                    best = l;
            want[best]++;
            rem[best] = (u128)-1; /* taken */
        }
        for (uint32_t l = 0; l < L; ++l) {
            if (sh[l] != want[l] + w)
                fail_msg("balanced C=%u w=%u L=%u layer %u: %u != %llu", C, w,
                         L, l, sh[l], (unsigned long long)(want[l] + w));
            if (l > 0) assert_true(sh[l] <= sh[l - 1]);
        }
        assert_int_equal(total, (uint64_t)C * L);
        assert_int_equal(sum_of(sh, L), (uint64_t)C * L);
    }
}

/* Curve and geometric: exact total, non-increasing, and each share within
 * one unit (plus the fixed-point's 2^-28 relative error) of the real-valued
 * ideal computed with libm. */
static void powered_properties(void **state) {
    (void)state;
    pbt_rng g = {0xC0A7Eu};
    uint32_t sh[MAXL];
    double ideal[MAXL];
    for (uint32_t run_i = 0; run_i < 8000u; ++run_i) {
        const int curve = (run_i & 1u) != 0u;
        const uint32_t L = 1u + pbt_below(&g, (run_i % 8u) < 2u ? 4u : 140u);
        const uint32_t B = (run_i % 3u) == 0u ? pbt_below(&g, 300u)
                                              : pbt_below(&g, 1u << 24);
        const uint32_t r = (run_i % 5u) == 0u ? 1u + pbt_below(&g, 3u)
                                              : 1u + pbt_below(&g, 64u);
        pb_schedule s = sched(curve ? PB_SCHEDULE_CURVE : PB_SCHEDULE_GEOMETRIC,
                              L, B);
        s.ratio = r;
        s.gamma_milli = (run_i % 7u) == 0u ? 1000u : 1u + pbt_below(&g, 5000u);
        const uint64_t total = run_ok(&s, sh);
        assert_int_equal(total, (uint64_t)B * L);
        assert_int_equal(sum_of(sh, L), (uint64_t)B * L);
        double wsum = 0;
        for (uint32_t l = 0; l < L; ++l) {
            const double x = L == 1u ? 1.0 : (double)(L - 1u - l) / (L - 1u);
            ideal[l] = curve ? (1.0 + (r - 1.0) * pow(x, s.gamma_milli / 1000.0)) / r
                             : pow((double)r, L == 1u ? 0.0 : -(double)l / (L - 1u));
            wsum += ideal[l];
        }
        for (uint32_t l = 0; l < L; ++l) {
            const double want = (double)B * L * ideal[l] / wsum;
            if (fabs((double)sh[l] - want) > 1.0 + want * 0x1p-24 + 1e-9)
                fail_msg("%s L=%u B=%u r=%u g=%u layer %u: %u vs ideal %.6f",
                         curve ? "curve" : "geometric", L, B, r, s.gamma_milli,
                         l, sh[l], want);
            if (l > 0 && sh[l] > sh[l - 1])
                fail_msg("%s L=%u B=%u r=%u layer %u rises: %u > %u",
                         curve ? "curve" : "geometric", L, B, r, l, sh[l],
                         sh[l - 1]);
        }
    }
}

static void arithmetic_is_pyramid_budget(void **state) {
    (void)state;
    pbt_rng g = {0xA817u};
    uint32_t sh[MAXL];
    for (uint32_t run_i = 0; run_i < 5000u; ++run_i) {
        const uint32_t L = 1u + pbt_below(&g, 200u);
        const uint32_t B = pbt_below(&g, (run_i & 1u) ? 4096u : 1u << 30);
        pb_schedule s = sched(PB_SCHEDULE_ARITHMETIC, L, B);
        s.ratio = 1u + pbt_below(&g, 16u);
        uint64_t total = run_ok(&s, sh);
        for (uint32_t l = 0; l < L; ++l)
            assert_int_equal(sh[l], pb_kvcache_pyramid_budget(B, l, L, s.ratio));
        assert_int_equal(total, pb_kvcache_pyramid_total(B, L, s.ratio));
        s.kind = PB_SCHEDULE_UNIFORM;
        assert_int_equal(run(&s, sh, &total), PB_OK);
        for (uint32_t l = 0; l < L; ++l) assert_int_equal(sh[l], B);
        assert_int_equal(total, (uint64_t)B * L);
    }
}

/* ------------------------------------------------------------------------ */
/* Edges and refusals                                                       */

static void one_and_two_layers(void **state) {
    (void)state;
    uint32_t sh[MAXL];
    uint64_t total = 0;
    static const uint32_t w1[1] = {7u};
    for (uint32_t kind = 0; kind <= PB_SCHEDULE_PROFILE; ++kind) {
        pb_schedule s = sched(kind, 1u, 100u);
        s.weights = w1;
        assert_int_equal(run(&s, sh, &total), PB_OK);
        assert_int_equal(sh[0], 100u); /* the floor (sinks + 1 = 5) is lower */
        assert_int_equal(total, 100u);
    }
    /* Two layers: geometric r = 4 gives 4 : 1 of 200 exactly. */
    pb_schedule s = sched(PB_SCHEDULE_GEOMETRIC, 2u, 100u);
    assert_int_equal(run(&s, sh, &total), PB_OK);
    assert_int_equal(sh[0], 160u);
    assert_int_equal(sh[1], 40u);
    s.kind = PB_SCHEDULE_CURVE; /* x = 1 and 0 whatever gamma: also 4 : 1 */
    assert_int_equal(run(&s, sh, &total), PB_OK);
    assert_int_equal(sh[0], 160u);
    assert_int_equal(sh[1], 40u);
}

static void huge_inputs(void **state) {
    (void)state;
    uint32_t sh[MAXL];
    uint64_t total = 0;
    /* 2^32 - 1 per layer on 200 layers: exact totals past 2^32. */
    pb_schedule s = sched(PB_SCHEDULE_UNIFORM, 200u, UINT32_MAX);
    assert_int_equal(run(&s, sh, &total), PB_OK);
    assert_int_equal(total, (uint64_t)UINT32_MAX * 200u);
    s.kind = PB_SCHEDULE_GEOMETRIC; /* layer 0 above the average: too large */
    memset(sh, 0xAB, sizeof sh);
    assert_int_equal(run(&s, sh, &total), PB_ERR_TOO_LARGE);
    assert_int_equal(sh[0], 0xABABABABu);
    s.ratio = 1u; /* uniform weights: every share exactly UINT32_MAX fits */
    assert_int_equal(run(&s, sh, &total), PB_OK);
    assert_int_equal(sh[199], UINT32_MAX);
    s.kind = PB_SCHEDULE_CURVE;
    assert_int_equal(run(&s, sh, &total), PB_OK);
    assert_int_equal(total, (uint64_t)UINT32_MAX * 200u);
    /* kvfactory: 2C - w above 2^32 is refused; balanced too. */
    s = sched(PB_SCHEDULE_KVFACTORY, 32u, 3000000000u);
    assert_int_equal(run(&s, sh, &total), PB_ERR_TOO_LARGE);
    s.kind = PB_SCHEDULE_KVFACTORY_BALANCED;
    assert_int_equal(run(&s, sh, &total), PB_ERR_TOO_LARGE);
    /* Taper: beta 1e300 overflows to infinity; a start above 2^32 too. */
    s = sched(PB_SCHEDULE_TAPER, 4u, 1000u);
    s.taper_beta = 1e300;
    assert_int_equal(run(&s, sh, &total), PB_ERR_TOO_LARGE);
    s.taper_beta = 1e7;
    assert_int_equal(run(&s, sh, &total), PB_ERR_TOO_LARGE);
    s.taper_beta = 1e6; /* start ~1e9 fits; everything but layer 0 floors */
    assert_int_equal(run(&s, sh, &total), PB_OK);
    /* Arithmetic: layer 0 = floor(2Br/(r+1)) above 2^32 is refused rather
     * than saturated. */
    s = sched(PB_SCHEDULE_ARITHMETIC, 8u, 3000000000u);
    assert_int_equal(run(&s, sh, &total), PB_ERR_TOO_LARGE);
    s.budget = 2147483647u; /* 2B r/(r+1) < 2^32 for r = 4 */
    assert_int_equal(run(&s, sh, &total), PB_OK);
    assert_int_equal(total, pb_kvcache_pyramid_total(s.budget, 8u, 4u));
}

typedef struct bad_row {
    const char *name;
    pb_schedule s;
    size_t len;
    pb_status want;
} bad_row;

static void refusals_write_nothing(void **state) {
    (void)state;
    static const uint32_t zeros[4] = {0u, 0u, 0u, 0u};
    static const uint32_t ok_w[4] = {1u, 2u, 3u, 4u};
    bad_row rows[32];
    size_t n = 0;
#define ROW(nm, kind_, field, value, len_, st_)                   \
    do {                                                          \
        rows[n].name = nm;                                        \
        rows[n].s = sched(kind_, 4u, 64u);                        \
        rows[n].s.weights = ok_w;                                 \
        rows[n].s.field = value;                                  \
        rows[n].len = len_;                                       \
        rows[n].want = st_;                                       \
        ++n;                                                      \
    } while (0)
    ROW("layers 0", PB_SCHEDULE_UNIFORM, num_layers, 0u, 4u, PB_ERR_PARAM);
    ROW("kind 9", PB_SCHEDULE_UNIFORM, kind, 9u, 4u, PB_ERR_PARAM);
    ROW("kind max", PB_SCHEDULE_UNIFORM, kind, UINT32_MAX, 4u, PB_ERR_PARAM);
    ROW("struct_size 0", PB_SCHEDULE_UNIFORM, struct_size, 0u, 4u,
        PB_ERR_PARAM);
    /* Below the first released layout (0.2: every field up to weights);
     * a shorter struct of a later release's older caller is read. */
    ROW("struct_size short", PB_SCHEDULE_UNIFORM, struct_size,
        (uint32_t)(offsetof(pb_schedule, weights) + sizeof(void *)) - 1u, 4u,
        PB_ERR_PARAM);
    ROW("ratio 0", PB_SCHEDULE_ARITHMETIC, ratio, 0u, 4u, PB_ERR_PARAM);
    ROW("ratio 0 geometric", PB_SCHEDULE_GEOMETRIC, ratio, 0u, 4u,
        PB_ERR_PARAM);
    ROW("ratio 0 curve", PB_SCHEDULE_CURVE, ratio, 0u, 4u, PB_ERR_PARAM);
    ROW("gamma 0", PB_SCHEDULE_CURVE, gamma_milli, 0u, 4u, PB_ERR_PARAM);
    ROW("gamma too big", PB_SCHEDULE_CURVE, gamma_milli, 1000001u, 4u,
        PB_ERR_PARAM);
    ROW("window = C", PB_SCHEDULE_KVFACTORY, window, 64u, 4u, PB_ERR_PARAM);
    ROW("window > C", PB_SCHEDULE_KVFACTORY_BALANCED, window, 65u, 4u,
        PB_ERR_PARAM);
    ROW("beta 0", PB_SCHEDULE_KVFACTORY, beta, 0u, 4u, PB_ERR_PARAM);
    ROW("taper beta < 1", PB_SCHEDULE_TAPER, taper_beta, 0.999, 4u,
        PB_ERR_PARAM);
    ROW("taper beta NaN", PB_SCHEDULE_TAPER, taper_beta, NAN, 4u,
        PB_ERR_PARAM);
    ROW("taper beta inf", PB_SCHEDULE_TAPER, taper_beta, INFINITY, 4u,
        PB_ERR_PARAM);
    ROW("taper sinks max", PB_SCHEDULE_TAPER, sinks, UINT32_MAX, 4u,
        PB_ERR_PARAM);
    ROW("weights NULL", PB_SCHEDULE_PROFILE, weights, NULL, 4u, PB_ERR_NULL);
    ROW("weights zero", PB_SCHEDULE_PROFILE, weights, zeros, 4u,
        PB_ERR_PARAM);
    ROW("min_share > B", PB_SCHEDULE_PROFILE, min_share, 65u, 4u,
        PB_ERR_PARAM);
    ROW("buffer short", PB_SCHEDULE_CURVE, ratio, 4u, 3u, PB_ERR_BUFFER);
    ROW("buffer zero", PB_SCHEDULE_TAPER, sinks, 0u, 0u, PB_ERR_BUFFER);
    ROW("param before buffer", PB_SCHEDULE_CURVE, gamma_milli, 0u, 0u,
        PB_ERR_PARAM);
#undef ROW
    for (size_t i = 0; i < n; ++i) {
        uint32_t sh[8];
        uint64_t total = 0xDEADu;
        for (size_t k = 0; k < 8u; ++k) sh[k] = CANARY;
        const pb_status st =
            pb_kvcache_schedule_shares(&rows[i].s, sh, rows[i].len, &total);
        if (st != rows[i].want)
            fail_msg("row '%s': status %d, want %d", rows[i].name, (int)st,
                     (int)rows[i].want);
        for (size_t k = 0; k < 8u; ++k) assert_int_equal(sh[k], CANARY);
        assert_int_equal(total, 0xDEADu);
    }
    /* NULL schedule or shares; total NULL is allowed. */
    pb_schedule s = sched(PB_SCHEDULE_UNIFORM, 4u, 64u);
    uint32_t sh[4];
    assert_int_equal(pb_kvcache_schedule_shares(NULL, sh, 4u, NULL),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_schedule_shares(&s, NULL, 4u, NULL),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_schedule_shares(&s, sh, 4u, NULL), PB_OK);
    assert_int_equal(sh[3], 64u);
}

/* A caller whose header had a longer pb_schedule: zero tail accepted, any
 * non-zero byte in it refused. */
static void struct_size_tail(void **state) {
    (void)state;
    struct {
        pb_schedule s;
        unsigned char tail[24];
    } big;
    memset(&big, 0, sizeof big);
    big.s = sched(PB_SCHEDULE_UNIFORM, 3u, 9u);
    big.s.struct_size = (uint32_t)sizeof big;
    uint32_t sh[3];
    uint64_t total = 0;
    assert_int_equal(pb_kvcache_schedule_shares(&big.s, sh, 3u, &total), PB_OK);
    assert_int_equal(total, 27u);
    for (size_t i = 0; i < sizeof big.tail; ++i) {
        big.tail[i] = 1u;
        assert_int_equal(pb_kvcache_schedule_shares(&big.s, sh, 3u, &total),
                         PB_ERR_PARAM);
        big.tail[i] = 0u;
    }
}

static void kind_names(void **state) {
    (void)state;
    for (uint32_t k = 0; k <= PB_SCHEDULE_CAKE; ++k) {
        const char *name = pb_schedule_kind_name(k);
        assert_non_null(name);
        uint32_t back = 99u;
        assert_int_equal(pb_schedule_kind_from_name(name, &back), PB_OK);
        assert_int_equal(back, k);
    }
    assert_string_equal(pb_schedule_kind_name(PB_SCHEDULE_KVFACTORY_BALANCED),
                        "kvfactory-balanced");
    assert_null(pb_schedule_kind_name(PB_SCHEDULE_CAKE + 1u));
    uint32_t k = 42u;
    assert_int_equal(pb_schedule_kind_from_name("Curve", &k), PB_ERR_PARAM);
    assert_int_equal(pb_schedule_kind_from_name("", &k), PB_ERR_PARAM);
    assert_int_equal(k, 42u);
    assert_int_equal(pb_schedule_kind_from_name(NULL, &k), PB_ERR_NULL);
    assert_int_equal(pb_schedule_kind_from_name("taper", NULL), PB_ERR_NULL);
}

PB_TEST_MAIN(cmocka_unit_test(fact_kvfactory_overshoot),
             cmocka_unit_test(fact_kvfactory_long_prompt),
             cmocka_unit_test(fact_kvfactory_balanced),
             cmocka_unit_test(fact_taper),
             cmocka_unit_test(kvfactory_differential),
             cmocka_unit_test(taper_differential),
             cmocka_unit_test(taper_half_even),
             cmocka_unit_test(profile_differential),
             cmocka_unit_test(balanced_differential),
             cmocka_unit_test(powered_properties),
             cmocka_unit_test(arithmetic_is_pyramid_budget),
             cmocka_unit_test(one_and_two_layers),
             cmocka_unit_test(huge_inputs),
             cmocka_unit_test(refusals_write_nothing),
             cmocka_unit_test(struct_size_tail), cmocka_unit_test(kind_names))
