/*
 * bench_qk.c - the runtime helpers' speed (docs/runtime.md): scoring from
 * queries and keys, and the three-call decode loop, each against the floor
 * of the work it must do, measured in the same run.
 *
 *   decode   one KV head, 4 query heads, head dim 128, 2,048 held keys:
 *            pb_qk_attention (one row: dot products, softmax, group mean)
 *            against a plain loop of the same q.k dot products (float,
 *            one accumulator, as a runtime would write it) and against
 *            an eight-lane float loop the compiler vectorises; float32
 *            keys, then binary16 keys (the loops convert each element).
 *   prefill  32 window rows (causal), 32,768 keys, the same shape:
 *            pb_qk_attention against the plain dot-product loop, GFLOP/s
 *            of the dot products (2 * group * head_dim per query-key
 *            pair).
 *   group    one layer of 8 KV heads, 2,048 keys each, the same shape:
 *            pb_qk_group_observe against the loops over every head and
 *            against one pb_qk_observe per head.
 *   loop     the model shape: 32 layers x 8 KV heads, pyramid shares of
 *            an average 2,048 (ratio 4), group 4, head dim 128, float32
 *            K/V rows, cadence 1: per token and instance, append the
 *            token's K/V row, pb_qk_observe, pb_kvcache_evict_slots,
 *            pb_kvcache_compact_rows; each call's time per token, and the
 *            compaction against the memmove floor of the same rows (the
 *            same offsets and lengths, replayed over all instances after
 *            the step).
 * Figures are medians over the repetitions (--reps).
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "pyramidkv/pyramidkv.h"

static const char *const NAME = "bench_qk";

enum { G = 4, D = 128 };

static volatile float sink;

/* binary16 to float, as a runtime without hardware conversion would. */
static float half_to_float(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    uint32_t b;
    float f;
    if (e == 0u) {
        f = (float)m * 0x1p-24f;
        memcpy(&b, &f, sizeof b);
        b |= sign;
    } else if (e == 31u) {
        b = sign | 0x7f800000u | (m << 13);
    } else {
        b = sign | ((e + 112u) << 23) | (m << 13);
    }
    memcpy(&f, &b, sizeof f);
    return f;
}

static uint16_t float_to_half(float x) { /* finite, normal range only */
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    const uint32_t sign = (b >> 16) & 0x8000u;
    int e = (int)((b >> 23) & 0xffu) - 127 + 15;
    if (e <= 0) return (uint16_t)sign;
    if (e >= 31) e = 30;
    return (uint16_t)(sign | ((uint32_t)e << 10) | ((b >> 13) & 0x3ffu));
}

/* q.k for every (head, key) seen by each row: one float accumulator. */
static void plain_dots(const float *q, size_t rows, const void *k,
                       int half, size_t n, float *out) {
    for (size_t r = 0; r < rows; ++r) {
        const size_t vis = n - rows + r + 1u;
        for (size_t i = 0; i < vis; ++i)
            for (size_t h = 0; h < G; ++h) {
                const float *qh = q + (h * rows + r) * D;
                float s = 0.0f;
                if (half) {
                    const uint16_t *kr = (const uint16_t *)k + i * D;
                    for (size_t j = 0; j < D; ++j)
                        s += qh[j] * half_to_float(kr[j]);
                } else {
                    const float *kr = (const float *)k + i * D;
                    for (size_t j = 0; j < D; ++j) s += qh[j] * kr[j];
                }
                out[h * n + i] = s;
            }
    }
}

/* The same with eight float lanes (vectorised by the compiler). */
static void lane_dots(const float *q, size_t rows, const void *k, int half,
                      size_t n, float *out) {
    float kf[D];
    for (size_t r = 0; r < rows; ++r) {
        const size_t vis = n - rows + r + 1u;
        for (size_t i = 0; i < vis; ++i) {
            const float *kr = (const float *)k + i * D;
            if (half) {
                const uint16_t *kh = (const uint16_t *)k + i * D;
                for (size_t j = 0; j < D; ++j) kf[j] = half_to_float(kh[j]);
                kr = kf;
            }
            for (size_t h = 0; h < G; ++h) {
                const float *qh = q + (h * rows + r) * D;
                float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                for (size_t j = 0; j < D; j += 8)
                    for (size_t l = 0; l < 8; ++l) acc[l] += qh[j + l] * kr[j + l];
                out[h * n + i] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
                                 ((acc[4] + acc[5]) + (acc[6] + acc[7]));
            }
        }
    }
}

/* The median of the timed repetitions of t (after the warm-up ones). */
static double median_of(const bench_options *opt, double *t) {
    return bench_stats_of(t + opt->warmup, opt->reps).median;
}

typedef struct timing {
    double lib, plain, lanes; /* medians, seconds per call */
} timing;

/* Times pb_qk_attention against the two loops over `rows` rows and n keys,
 * interleaved per repetition so that drift hits all three alike. */
static int time_scoring(const bench_options *opt, size_t rows, size_t n,
                        int half, unsigned calls, timing *t) {
    pb_qk_config c = PB_QK_CONFIG_DEFAULT;
    c.head_dim = D;
    c.group = G;
    c.key_type = half ? PB_KEYS_F16 : PB_KEYS_F32;
    c.max_keys = (uint32_t)n;
    c.max_rows = (uint32_t)rows;
    pb_qk *qk = NULL;
    if (pb_qk_create(&c, NULL, &qk) != PB_OK)
        return bench_fail(NAME, "pb_qk_create failed");
    float *q = bench_alloc(G * rows * D * sizeof *q);
    void *k = bench_alloc(n * D * (half ? 2u : 4u));
    float *out = bench_alloc(rows * n * sizeof *out);
    float *dots = bench_alloc(G * n * sizeof *dots);
    bench_rng g = {42u};
    for (size_t i = 0; i < G * rows * D; ++i)
        q[i] = (float)(bench_rng_unit(&g) - 0.5);
    for (size_t i = 0; i < n * D; ++i) {
        const float x = (float)(bench_rng_unit(&g) - 0.5);
        if (half)
            ((uint16_t *)k)[i] = float_to_half(x);
        else
            ((float *)k)[i] = x;
    }
    const unsigned reps = opt->warmup + opt->reps;
    double *tl = calloc(reps, sizeof *tl), *tp = calloc(reps, sizeof *tp);
    double *tv = calloc(reps, sizeof *tv);
    for (unsigned rep = 0; rep < reps; ++rep) {
        double t0 = bench_now();
        for (unsigned i = 0; i < calls; ++i)
            if (pb_qk_attention(qk, q, rows * D, D, rows, k, D, n, out) != PB_OK)
                return bench_fail(NAME, "pb_qk_attention failed");
        double t1 = bench_now();
        for (unsigned i = 0; i < calls; ++i) plain_dots(q, rows, k, half, n, dots);
        double t2 = bench_now();
        for (unsigned i = 0; i < calls; ++i) lane_dots(q, rows, k, half, n, dots);
        double t3 = bench_now();
        sink = out[0] + dots[n - 1];
        tl[rep] = (t1 - t0) / calls;
        tp[rep] = (t2 - t1) / calls;
        tv[rep] = (t3 - t2) / calls;
    }
    t->lib = median_of(opt, tl);
    t->plain = median_of(opt, tp);
    t->lanes = median_of(opt, tv);
    free(tl);
    free(tp);
    free(tv);
    bench_free(q);
    bench_free(k);
    bench_free(out);
    bench_free(dots);
    pb_qk_destroy(qk);
    return 0;
}

static int bench_decode(const bench_options *opt) {
    const size_t n = opt->quick ? 256u : 2048u;
    printf("decode: 1 row, group %d, head dim %d, %zu keys; us per call\n",
           G, D, n);
    printf("| keys | pb_qk_attention | plain q.k loop | 8-lane float loop | "
           "lib / plain | lib / 8-lane |\n| --- | --- | --- | --- | --- | --- |\n");
    for (int half = 0; half < 2; ++half) {
        timing t = {0, 0, 0};
        if (time_scoring(opt, 1u, n, half, opt->quick ? 2u : 200u, &t)) return 1;
        printf("| %s | %.1f | %.1f | %.1f | %.2f | %.2f |\n",
               half ? "fp16" : "float32", t.lib * 1e6, t.plain * 1e6,
               t.lanes * 1e6, t.lib / t.plain, t.lib / t.lanes);
    }
    return 0;
}

static int bench_prefill(const bench_options *opt) {
    const size_t rows = 32u, n = opt->quick ? 512u : 32768u;
    double pairs = 0.0;
    for (size_t r = 0; r < rows; ++r) pairs += (double)(n - rows + r + 1u);
    const double flop = 2.0 * G * D * pairs;
    timing t = {0, 0, 0};
    if (time_scoring(opt, rows, n, 0, 1u, &t)) return 1;
    printf("\nprefill: %zu rows (causal), group %d, head dim %d, %zu keys, "
           "float32; ms per call, GFLOP/s of the dot products\n", rows, G, D, n);
    printf("| pb_qk_attention | plain q.k loop | 8-lane float loop | "
           "lib / plain | lib / 8-lane |\n| --- | --- | --- | --- | --- |\n");
    printf("| %.1f ms, %.2f GFLOP/s | %.1f ms, %.2f GFLOP/s | %.1f ms, %.2f "
           "GFLOP/s | %.2f | %.2f |\n",
           t.lib * 1e3, flop / t.lib * 1e-9, t.plain * 1e3,
           flop / t.plain * 1e-9, t.lanes * 1e3, flop / t.lanes * 1e-9,
           t.lib / t.plain, t.lib / t.lanes);
    return 0;
}

/* The layer group scored from Q and K: pb_qk_group_observe on one layer
 * of KV heads, each holding n keys (n + 1 with the token's own), against
 * the same dot products as the plain and eight-lane loops over every head,
 * and against one pb_qk_observe per head on separate instances. */
static int bench_group(const bench_options *opt) {
    const uint32_t H = 8u, n = opt->quick ? 256u : 2048u;
    const unsigned calls = opt->quick ? 2u : 16u;
    const size_t cap = n + calls + 2u;
    pb_qk_config c = PB_QK_CONFIG_DEFAULT;
    c.head_dim = D;
    c.group = G;
    c.max_keys = (uint32_t)cap;
    pb_kvcache_config hc = PB_KVCACHE_CONFIG_DEFAULT;
    hc.budget = n;
    hc.share = n;
    pb_kvcache_group_params gp = PB_KVCACHE_GROUP_PARAMS_DEFAULT;
    gp.num_heads = H;
    gp.slack = calls + 2u;
    pb_kvcache_config sc = hc;
    sc.capacity = n + calls + 2u;
    pb_qk *qk = NULL;
    pb_kvcache_group *grp = NULL;
    pb_kvcache *sep[8] = {NULL};
    float *q = bench_alloc(H * G * D * sizeof *q);
    float *k = bench_alloc(H * cap * D * sizeof *k);
    float *dots = bench_alloc(G * cap * sizeof *dots);
    if (pb_qk_create(&c, NULL, &qk) != PB_OK ||
        pb_kvcache_group_create(&hc, &gp, NULL, &grp) != PB_OK || !q || !k ||
        !dots)
        return bench_fail(NAME, "group: create failed");
    for (uint32_t h = 0; h < H; ++h)
        if (pb_kvcache_create(&sc, NULL, &sep[h]) != PB_OK)
            return bench_fail(NAME, "group: create failed");
    bench_rng g = {9u};
    for (size_t i = 0; i < H * G * D; ++i)
        q[i] = (float)(bench_rng_unit(&g) - 0.5);
    for (size_t i = 0; i < H * cap * D; ++i)
        k[i] = (float)(bench_rng_unit(&g) - 0.5);
    const void *kp[8];
    size_t nk[8];
    for (uint32_t h = 0; h < H; ++h) kp[h] = k + (size_t)h * cap * D;
    const unsigned reps = opt->warmup + opt->reps;
    bench_series tm; /* group, separate, plain loop, 8-lane loop */
    if (bench_series_alloc(&tm, reps) != 0)
        return bench_fail(NAME, "out of memory");
    for (unsigned rep = 0; rep < reps; ++rep) {
        uint32_t pos = 1;
        if (pb_kvcache_group_reset(grp) != PB_OK) return 1;
        for (uint32_t h = 0; h < H; ++h)
            if (pb_kvcache_reset(sep[h]) != PB_OK) return 1;
        for (; pos < n; ++pos) {
            if (pb_kvcache_group_observe(grp, pos, NULL, 0, NULL) != PB_OK)
                return bench_fail(NAME, "group: fill failed");
            for (uint32_t h = 0; h < H; ++h)
                if (pb_kvcache_observe(sep[h], pos, NULL, 0) != PB_OK)
                    return bench_fail(NAME, "group: fill failed");
        }
        double t0 = bench_now();
        for (unsigned i = 0; i < calls; ++i) {
            for (uint32_t h = 0; h < H; ++h) nk[h] = n + i + 1u;
            if (pb_qk_group_observe(qk, grp, pos + i, q, G * D, D, kp, D,
                                    nk) != PB_OK)
                return bench_fail(NAME, "pb_qk_group_observe failed");
        }
        double t1 = bench_now();
        for (unsigned i = 0; i < calls; ++i)
            for (uint32_t h = 0; h < H; ++h)
                if (pb_qk_observe(qk, sep[h], pos + i, q + h * G * D, D,
                                  kp[h], D, n + i + 1u) != PB_OK)
                    return bench_fail(NAME, "pb_qk_observe failed");
        double t2 = bench_now();
        for (unsigned i = 0; i < calls; ++i)
            for (uint32_t h = 0; h < H; ++h)
                plain_dots(q + h * G * D, 1u, kp[h], 0, n + i + 1u, dots);
        double t3 = bench_now();
        for (unsigned i = 0; i < calls; ++i)
            for (uint32_t h = 0; h < H; ++h)
                lane_dots(q + h * G * D, 1u, kp[h], 0, n + i + 1u, dots);
        double t4 = bench_now();
        sink = dots[0];
        tm.v[0][rep] = (t1 - t0) / calls;
        tm.v[1][rep] = (t2 - t1) / calls;
        tm.v[2][rep] = (t3 - t2) / calls;
        tm.v[3][rep] = (t4 - t3) / calls;
    }
    bench_series_stats(&tm, opt);
    const double mg = tm.st[0].median, ms = tm.st[1].median;
    const double mp = tm.st[2].median, mv = tm.st[3].median;
    printf("\ngroup: one layer of %u KV heads, group %d, head dim %d, about "
           "%u keys per head (+ the token's own), float32; us per layer "
           "step\n", H, G, D, n);
    printf("| pb_qk_group_observe | %u x pb_qk_observe | plain q.k loop | "
           "8-lane float loop | group / plain | group / 8-lane | group / "
           "separate |\n| --- | --- | --- | --- | --- | --- | --- |\n", H);
    printf("| %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f |\n", mg * 1e6,
           ms * 1e6, mp * 1e6, mv * 1e6, mg / mp, mg / mv, mg / ms);
    for (uint32_t h = 0; h < H; ++h) pb_kvcache_destroy(sep[h]);
    pb_kvcache_group_destroy(grp);
    pb_qk_destroy(qk);
    bench_free(q);
    bench_free(k);
    bench_free(dots);
    bench_series_free(&tm);
    return 0;
}

/* One (layer, KV head) of the model-shape loop. */
typedef struct loop_inst {
    pb_kvcache *p;
    float *k, *v; /* [share + 1][D] */
    size_t held;
    uint32_t moved_from, moved_rows; /* this step's compaction */
} loop_inst;

static int bench_loop(const bench_options *opt) {
    const uint32_t L = opt->quick ? 4u : 32u, KV = opt->quick ? 2u : 8u;
    const uint32_t avg = opt->quick ? 256u : 2048u;
    const unsigned tokens = opt->quick ? 2u : 4u;
    const size_t n_inst = (size_t)L * KV, row = D * sizeof(float);
    loop_inst *in = calloc(n_inst, sizeof *in);
    pb_qk_config c = PB_QK_CONFIG_DEFAULT;
    c.head_dim = D;
    c.group = G;
    c.max_keys = 2u * avg * 4u / 5u * 2u + 2u; /* above the largest share + 1 */
    pb_qk *qk = NULL;
    if (pb_qk_create(&c, NULL, &qk) != PB_OK)
        return bench_fail(NAME, "pb_qk_create failed");
    bench_rng g = {7u};
    float q[G * D];
    size_t total_rows = 0;
    for (size_t i = 0; i < n_inst; ++i) {
        pb_kvcache_config kc = PB_KVCACHE_CONFIG_DEFAULT;
        kc.budget = avg;
        kc.layer = (uint32_t)(i / KV);
        kc.num_layers = L;
        kc.pyramid_ratio = 4u;
        if (pb_kvcache_create(&kc, NULL, &in[i].p) != PB_OK)
            return bench_fail(NAME, "create failed");
        const size_t share = pb_kvcache_effective_budget(in[i].p);
        in[i].k = bench_alloc((share + 1u) * row);
        in[i].v = bench_alloc((share + 1u) * row);
        for (size_t e = 0; e < (share + 1u) * D; ++e) {
            in[i].k[e] = (float)(bench_rng_unit(&g) - 0.5);
            in[i].v[e] = (float)e;
        }
        for (uint32_t pos = 1; pos < share; ++pos)
            if (pb_kvcache_observe(in[i].p, pos, NULL, 0) != PB_OK)
                return bench_fail(NAME, "fill failed");
        in[i].held = share;
        total_rows += share;
    }
    const unsigned reps = opt->warmup + opt->reps;
    bench_series tm; /* observe, evict, compact, memmove floor */
    if (bench_series_alloc(&tm, reps) != 0)
        return bench_fail(NAME, "out of memory");
    double bytes = 0.0;
    uint32_t pos = 1u << 20;
    for (unsigned rep = 0; rep < reps; ++rep) {
        double so = 0, se = 0, sc = 0, sf = 0;
        bytes = 0.0;
        for (unsigned t = 0; t < tokens; ++t, ++pos) {
            for (size_t j = 0; j < G * D; ++j)
                q[j] = (float)(bench_rng_unit(&g) - 0.5);
            for (size_t i = 0; i < n_inst; ++i) {
                loop_inst *x = &in[i];
                memcpy(x->k + x->held * D, q, row); /* the token's K row */
                memcpy(x->v + x->held * D, q, row);
                uint32_t slots[4];
                size_t n = 0;
                const double a = bench_now();
                if (pb_qk_observe(qk, x->p, pos, q, D, x->k, D, x->held + 1u) !=
                    PB_OK)
                    return bench_fail(NAME, "observe failed");
                const double b = bench_now();
                if (pb_kvcache_evict_slots(x->p, PB_KVCACHE_BUDGET_SHARE, NULL,
                                           slots, 4u, &n) != PB_OK || n != 1u)
                    return bench_fail(NAME, "evict failed");
                const double cc = bench_now();
                pb_kvcache_compact_rows(slots, n, x->held + 1u, x->k, row, row,
                                        x->v, row, row);
                const double d = bench_now();
                so += b - a;
                se += cc - b;
                sc += d - cc;
                x->moved_from = slots[0];
                x->moved_rows = (uint32_t)(x->held - slots[0]);
                bytes += 2.0 * (double)x->moved_rows * (double)row;
            }
            /* the floor: the same moves, plain memmove, all instances */
            const double f0 = bench_now();
            for (size_t i = 0; i < n_inst; ++i) {
                loop_inst *x = &in[i];
                const size_t s = x->moved_from;
                memmove(x->k + s * D, x->k + (s + 1u) * D, x->moved_rows * row);
                memmove(x->v + s * D, x->v + (s + 1u) * D, x->moved_rows * row);
            }
            sf += bench_now() - f0;
        }
        tm.v[0][rep] = so / tokens;
        tm.v[1][rep] = se / tokens;
        tm.v[2][rep] = sc / tokens;
        tm.v[3][rep] = sf / tokens;
    }
    bench_series_stats(&tm, opt);
    const double mo = tm.st[0].median, me = tm.st[1].median;
    const double mc = tm.st[2].median, mf = tm.st[3].median;
    printf("\nloop: %u layers x %u KV heads (%zu instances, %zu rows held), "
           "average %u, ratio 4, group %d, head dim %d, float32 K/V, "
           "cadence 1; ms per token (all instances)\n",
           L, KV, n_inst, total_rows, avg, G, D);
    printf("| pb_qk_observe | pb_kvcache_evict_slots | pb_kvcache_compact_rows "
           "| memmove floor | compact / floor | MB moved per token |\n"
           "| --- | --- | --- | --- | --- | --- |\n");
    printf("| %.2f | %.3f | %.2f | %.2f | %.2f | %.1f |\n", mo * 1e3, me * 1e3,
           mc * 1e3, mf * 1e3, mc / mf, bytes / tokens / 1e6);
    for (size_t i = 0; i < n_inst; ++i) {
        pb_kvcache_destroy(in[i].p);
        bench_free(in[i].k);
        bench_free(in[i].v);
    }
    free(in);
    bench_series_free(&tm);
    pb_qk_destroy(qk);
    return 0;
}

int main(int argc, char **argv) {
    bench_options opt;
    const int rc = bench_parse_common(&argc, argv, 5, "", &opt);
    if (rc) return rc == 1 ? 0 : 2;
    if (argc > 1) {
        fprintf(stderr, "%s: bad argument '%s' (see --help)\n", NAME, argv[1]);
        return 2;
    }
    bench_print_header(stdout, NAME, &opt);
    printf("timing: wall clock (CLOCK_MONOTONIC), %u warm-up + %u timed "
           "repetitions, medians; the loops run in the same process, "
           "interleaved with the library per repetition\n\n",
           opt.warmup, opt.reps);
    if (bench_decode(&opt) || bench_prefill(&opt) || bench_group(&opt) ||
        bench_loop(&opt))
        return 1;
    return 0;
}
