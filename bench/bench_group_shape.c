/*
 * bench_group_shape.c - the layer-group rows of bench_model_shape
 * (bench_group_shape.h). One layer of H KV heads, per-head share S, recent
 * 32, obs 16, kernel 7, window scorer, floor 0.2: the group holds H x S
 * positions at steady state, as the H separate instances do; one token is
 * a decode step on every head, and every `cadence` tokens the group
 * evicts the layer back to H x S (the separate instances each back to S).
 * The attention rows are those of bench_shape.c for layer 0, cut to each
 * head's held count. The group's victims are checked against docs/spec.md
 * §16 by tests/group, not here.
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_group_shape.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_shape.h"
#include "pyramidkv/pyramidkv.h"

static const char *const NAME = "bench_model_shape";

typedef struct group_bench {
    uint32_t heads, share, rowcap, scorer;
    float *pool;        /* [heads][BENCH_SHAPE_ROWS][rowcap] */
    float *step;        /* [heads * rowcap] one token's rows */
    size_t *lens;       /* [heads] */
    uint32_t *victims;  /* [heads * rowcap] */
    size_t *counts;     /* [heads] */
    pb_kvcache_group *group;
    pb_kvcache **sep;   /* [heads] */
} group_bench;

static pb_kvcache_config head_config(uint32_t share, uint32_t scorer) {
    pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    c.budget = share + 1u;
    c.share = share;
    c.scorer = scorer;
    return c;
}

/* The K/V rows of the group's layer in the two layouts (per-head buffers
 * of head_capacity, the pooled store of pool_rows) and the library's MB
 * with the pool on (pooled_rows), as the columns the rows end with. */
static void print_kv_rows(const pb_kvcache_group *g, uint32_t share,
                          uint32_t scorer) {
    pb_kvcache_group_plan_info info = PB_KVCACHE_GROUP_PLAN_INFO_INIT;
    (void)pb_kvcache_group_info(g, &info);
    pb_kvcache_group_params p = PB_KVCACHE_GROUP_PARAMS_DEFAULT;
    p.num_heads = info.num_heads;
    p.slack = info.head_capacity - info.head_max;
    p.pooled_rows = 1u;
    const pb_kvcache_config hc = head_config(share, scorer);
    size_t pooled = 0;
    (void)pb_kvcache_group_size(&hc, &p, &pooled);
    printf(" %llu | %llu | %.2f |\n",
           (unsigned long long)info.num_heads * info.head_capacity,
           (unsigned long long)info.pool_rows, (double)pooled / 1e6);
}

static const char *scorer_name(uint32_t scorer) {
    return scorer == PB_SCORER_WINDOW ? "window" : "cumulative";
}

static const float *pool_row(const group_bench *b, uint32_t h, uint64_t k) {
    return bench_shape_row(b->pool + (size_t)h * BENCH_SHAPE_ROWS * b->rowcap,
                           b->rowcap, k);
}

/* One token on the group (observe every head; evict at the cadence). */
static int group_token(group_bench *b, uint32_t pos, uint64_t k, int evict) {
    for (uint32_t h = 0; h < b->heads; h++) {
        b->lens[h] = pb_kvcache_kept_count(pb_kvcache_group_head(b->group, h));
        memcpy(b->step + (size_t)h * b->rowcap, pool_row(b, h, k),
               b->lens[h] * sizeof(float));
    }
    if (pb_kvcache_group_observe(b->group, pos, b->step, b->rowcap, b->lens))
        return 1;
    if (!evict) return 0;
    size_t n = 0;
    return pb_kvcache_group_evict(b->group, UINT64_MAX, b->victims,
                                  (size_t)b->heads * b->rowcap, b->counts,
                                  b->heads, &n) != PB_OK;
}

/* One token on the separate instances, with the same copy of the rows. */
static int separate_token(group_bench *b, uint32_t pos, uint64_t k,
                          int evict) {
    for (uint32_t h = 0; h < b->heads; h++) {
        const size_t len = pb_kvcache_kept_count(b->sep[h]);
        float *row = b->step + (size_t)h * b->rowcap;
        memcpy(row, pool_row(b, h, k), len * sizeof(float));
        if (pb_kvcache_observe(b->sep[h], pos, row, len)) return 1;
        size_t n = 0;
        if (evict && pb_kvcache_evict(b->sep[h], b->share, b->victims,
                                      b->rowcap, &n))
            return 1;
    }
    return 0;
}

static int fill(group_bench *b, uint32_t cadence) {
    pb_kvcache_group_params p = PB_KVCACHE_GROUP_PARAMS_DEFAULT;
    p.num_heads = b->heads;
    p.slack = cadence;
    const pb_kvcache_config hc = head_config(b->share, b->scorer);
    if (pb_kvcache_group_create(&hc, &p, NULL, &b->group)) return 1;
    pb_kvcache_config sc = hc;
    sc.capacity = b->share + cadence;
    for (uint32_t h = 0; h < b->heads; h++)
        if (pb_kvcache_create(&sc, NULL, &b->sep[h])) return 1;
    for (uint32_t pos = 1; pos < b->share; pos++) {
        const int observed = pos + BENCH_SHAPE_FILL_OBSERVED >= b->share;
        if (observed) {
            if (group_token(b, pos, pos, 0) || separate_token(b, pos, pos, 0))
                return 1;
        } else {
            if (pb_kvcache_group_observe(b->group, pos, NULL, 0, NULL))
                return 1;
            for (uint32_t h = 0; h < b->heads; h++)
                if (pb_kvcache_observe(b->sep[h], pos, NULL, 0)) return 1;
        }
    }
    return 0;
}

static void release(group_bench *b) {
    pb_kvcache_group_destroy(b->group);
    b->group = NULL;
    for (uint32_t h = 0; h < b->heads; h++) {
        pb_kvcache_destroy(b->sep[h]);
        b->sep[h] = NULL;
    }
}

static int run_cadence(group_bench *b, const bench_options *opt,
                       uint32_t tokens, uint32_t cadence) {
    const unsigned runs = opt->warmup + opt->reps;
    double *gs = calloc(runs, sizeof *gs), *ss = calloc(runs, sizeof *ss);
    int rc = gs == NULL || ss == NULL || fill(b, cadence);
    tokens = (tokens + cadence - 1u) / cadence * cadence;
    uint32_t pos = b->share + 1000u;
    for (unsigned r = 0; r < runs && rc == 0; r++) {
        double t0 = bench_now();
        for (uint32_t t = 0; t < tokens && rc == 0; t++)
            rc = group_token(b, pos + t, t, (t + 1u) % cadence == 0u);
        double t1 = bench_now();
        gs[r] = (t1 - t0) / tokens;
        t0 = bench_now();
        for (uint32_t t = 0; t < tokens && rc == 0; t++)
            rc = separate_token(b, pos + t, t, (t + 1u) % cadence == 0u);
        t1 = bench_now();
        ss[r] = (t1 - t0) / tokens;
        pos += tokens;
    }
    if (rc == 0) {
        const bench_stats g = bench_stats_of(gs + opt->warmup, opt->reps);
        const bench_stats s = bench_stats_of(ss + opt->warmup, opt->reps);
        pb_kvcache_group_plan_info info = PB_KVCACHE_GROUP_PLAN_INFO_INIT;
        (void)pb_kvcache_group_info(b->group, &info);
        const double gm = (double)pb_kvcache_group_memory_bytes(b->group);
        double sm = 0.0;
        for (uint32_t h = 0; h < b->heads; h++)
            sm += (double)pb_kvcache_memory_bytes(b->sep[h]);
        printf("| decode | %s | %u | %u | %u | %.1f [%.1f - %.1f] | %.1f "
               "[%.1f - %.1f] | %.2fx | %.2f | %.2f | %.2fx | %u |",
               scorer_name(b->scorer), (unsigned)b->heads,
               (unsigned)b->share, (unsigned)cadence, g.median * 1e6,
               g.min * 1e6, g.max * 1e6, s.median * 1e6, s.min * 1e6,
               s.max * 1e6, g.median / s.median, gm / 1e6, sm / 1e6, gm / sm,
               (unsigned)info.head_capacity);
        print_kv_rows(b->group, b->share, b->scorer);
        fflush(stdout);
    } else {
        rc = bench_fail(NAME, "group rows, cadence %u: a call failed",
                        (unsigned)cadence);
    }
    release(b);
    free(gs);
    free(ss);
    return rc;
}

/* The table header the decode and prefill rows share. */
void bench_group_header(void) {
    printf("\nlayer group: one layer of H KV heads at share S per head, "
           "recent 32, obs 16, kernel 7, floor 0.2. decode: one token = "
           "observe on every head (rows copied into one buffer for both), "
           "an evict of the layer every cadence tokens, us per token; "
           "prefill: a 4 S prompt, 16 window rows per head, one group "
           "prefill against H separate prefills to S, us per layer; "
           "median [min - max], wall clock; ratio = group / separate; "
           "memory: the library's bytes for the layer; K/V rows of the "
           "layer: per-head buffers H x head_capacity, pooled pool_rows "
           "(layer_total + H x slack), pooled MB: the group's bytes with "
           "pooled_rows\n");
    printf("| step | scorer | H | S | cadence | group | separate | ratio | "
           "group MB | separate MB | memory ratio | head capacity | "
           "K/V rows per-head | K/V rows pooled | pooled MB |\n"
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | "
           "--- | --- | --- | --- | --- |\n");
    fflush(stdout);
}

int bench_group_rows(const bench_options *opt, uint32_t heads, uint32_t share,
                     uint32_t scorer, uint32_t tokens,
                     const uint32_t *cadences, size_t n_cadences) {
    group_bench b;
    memset(&b, 0, sizeof b);
    b.heads = heads;
    b.share = share;
    b.scorer = scorer;
    pb_kvcache_group_params p = PB_KVCACHE_GROUP_PARAMS_DEFAULT;
    p.num_heads = heads;
    uint32_t max_cadence = 1;
    for (size_t c = 0; c < n_cadences; c++)
        if (cadences[c] > max_cadence) max_cadence = cadences[c];
    p.slack = max_cadence;
    pb_kvcache_group_plan_info info = PB_KVCACHE_GROUP_PLAN_INFO_INIT;
    const pb_kvcache_config hc = head_config(share, scorer);
    if (pb_kvcache_group_plan(&hc, &p, &info))
        return bench_fail(NAME, "group rows: plan refused");
    b.rowcap = (info.head_capacity + 15u) / 16u * 16u;
    b.pool = bench_alloc((size_t)heads * BENCH_SHAPE_ROWS * b.rowcap *
                         sizeof(float));
    b.step = bench_alloc((size_t)heads * b.rowcap * sizeof(float));
    b.lens = calloc(heads, sizeof *b.lens);
    b.counts = calloc(heads, sizeof *b.counts);
    b.victims = calloc((size_t)heads * b.rowcap, sizeof *b.victims);
    b.sep = calloc(heads, sizeof *b.sep);
    int rc = 0;
    if (!b.pool || !b.step || !b.lens || !b.counts || !b.victims || !b.sep)
        rc = bench_fail(NAME, "group rows: out of memory");
    for (uint32_t h = 0; h < heads && rc == 0; h++)
        bench_shape_fill(b.pool + (size_t)h * BENCH_SHAPE_ROWS * b.rowcap,
                         b.rowcap, h, 0u);
    for (size_t c = 0; c < n_cadences && rc == 0; c++)
        rc = run_cadence(&b, opt, tokens, cadences[c]);
    bench_free(b.pool);
    bench_free(b.step);
    free(b.lens);
    free(b.counts);
    free(b.victims);
    free(b.sep);
    return rc;
}

/* The prefill objects and buffers of one (H, S) row. */
typedef struct prefill_bench {
    pb_kvcache_group *group;
    pb_kvcache **sep;
    float *attn;          /* [heads][16][len] */
    void *gws, *sws;      /* workspaces */
    size_t gws_bytes, sws_bytes;
    size_t *counts;
} prefill_bench;

static int prefill_make(prefill_bench *pb, uint32_t heads, uint32_t share,
                        size_t len) {
    const pb_kvcache_config hc = head_config(share, PB_SCORER_WINDOW);
    pb_kvcache_group_params p = PB_KVCACHE_GROUP_PARAMS_DEFAULT;
    p.num_heads = heads;
    pb_kvcache_config sc = hc;
    sc.capacity = share + 1u;
    pb->sep = calloc(heads, sizeof *pb->sep);
    pb->counts = calloc(heads, sizeof *pb->counts);
    pb->attn = bench_alloc((size_t)heads * 16u * len * sizeof(float));
    if (!pb->sep || !pb->counts || !pb->attn ||
        pb_kvcache_group_create(&hc, &p, NULL, &pb->group) ||
        pb_kvcache_group_prefill_workspace_size(pb->group, len,
                                                &pb->gws_bytes))
        return 1;
    for (uint32_t h = 0; h < heads; h++)
        if (pb_kvcache_create(&sc, NULL, &pb->sep[h])) return 1;
    if (pb_kvcache_prefill_workspace_size(pb->sep[0], len, &pb->sws_bytes))
        return 1;
    pb->gws = bench_alloc(pb->gws_bytes);
    pb->sws = bench_alloc(pb->sws_bytes);
    if (!pb->gws || !pb->sws) return 1;
    for (uint32_t h = 0; h < heads; h++)
        bench_shape_fill(pb->attn + (size_t)h * 16u * len, (uint32_t)len, h,
                         0u);
    return 0;
}

static void prefill_release(prefill_bench *pb, uint32_t heads) {
    pb_kvcache_group_destroy(pb->group);
    for (uint32_t h = 0; pb->sep && h < heads; h++)
        pb_kvcache_destroy(pb->sep[h]);
    free(pb->sep);
    free(pb->counts);
    bench_free(pb->attn);
    bench_free(pb->gws);
    bench_free(pb->sws);
}

int bench_group_prefill(const bench_options *opt, uint32_t heads,
                        uint32_t share) {
    const size_t len = (size_t)share * 4u, rows = 16u;
    prefill_bench pb;
    memset(&pb, 0, sizeof pb);
    const unsigned runs = opt->warmup + opt->reps;
    double *gs = calloc(runs, sizeof *gs), *ss = calloc(runs, sizeof *ss);
    int rc = gs == NULL || ss == NULL || prefill_make(&pb, heads, share, len);
    for (unsigned r = 0; r < runs && rc == 0; r++) {
        size_t n = 0;
        rc |= pb_kvcache_group_reset(pb.group) != PB_OK;
        for (uint32_t h = 0; h < heads; h++)
            rc |= pb_kvcache_reset(pb.sep[h]) != PB_OK;
        double t0 = bench_now();
        rc |= pb_kvcache_group_prefill(pb.group, pb.attn, rows * len, rows,
                                       len, UINT64_MAX, pb.gws, pb.gws_bytes,
                                       NULL, 0u, pb.counts, heads,
                                       &n) != PB_OK;
        double t1 = bench_now();
        for (uint32_t h = 0; h < heads; h++)
            rc |= pb_kvcache_prefill(pb.sep[h], pb.attn + h * rows * len,
                                     rows, len, share, pb.sws, pb.sws_bytes,
                                     NULL, 0u, NULL, 0u, &n) != PB_OK;
        double t2 = bench_now();
        gs[r] = t1 - t0;
        ss[r] = t2 - t1;
    }
    if (rc == 0) {
        const bench_stats g = bench_stats_of(gs + opt->warmup, opt->reps);
        const bench_stats s = bench_stats_of(ss + opt->warmup, opt->reps);
        const double gm = (double)pb_kvcache_group_memory_bytes(pb.group);
        double sm = 0.0;
        for (uint32_t h = 0; h < heads; h++)
            sm += (double)pb_kvcache_memory_bytes(pb.sep[h]);
        printf("| prefill | window | %u | %u | - | %.1f [%.1f - %.1f] | %.1f "
               "[%.1f - %.1f] | %.2fx | %.2f | %.2f | %.2fx | - |",
               (unsigned)heads, (unsigned)share, g.median * 1e6, g.min * 1e6,
               g.max * 1e6, s.median * 1e6, s.min * 1e6, s.max * 1e6,
               g.median / s.median, gm / 1e6, sm / 1e6, gm / sm);
        print_kv_rows(pb.group, share, PB_SCORER_WINDOW);
        fflush(stdout);
    } else {
        rc = bench_fail(NAME, "group prefill rows: a call failed");
    }
    prefill_release(&pb, heads);
    free(gs);
    free(ss);
    return rc;
}
