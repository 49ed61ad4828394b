/*
 * bench_prefill.c - the prefill benchmark (docs/performance.md): prefill
 * compression of a whole model. A 32,768-token prompt, 32 layers x 8 KV
 * heads (256 instances), the last W = 32 prompt tokens as the observation
 * rows, kernel 7, pyramid ratio 4, average share 2,048, reference scope (the
 * paper's selection).
 *
 * Per repetition, in this order and in one process run:
 *   - the floor: one plain pass summing the same rows (for every instance,
 *     the 32 rows added position by position into one array of doubles, no
 *     check, no selection), in two forms (row by row, and four rows folded
 *     per pass); the faster is the floor;
 *   - compress: pb_kvcache_prefill on all 256 instances (reset untimed
 *     before), one shared caller workspace;
 *   - the reference transcription (tests/prefill/prefill_reference.c: plain
 *     loops and a full sort) doing the same selection.
 * It reports the median [min - max] of each, the ratio of compress to the
 * floor (the target is at most 2x) and of the reference to compress, and
 * the memory held after compression against a uniform allocation.
 *
 * The attention blocks (32 x 32,768 floats, 4 MiB each) are generated once:
 * BLOCKS distinct blocks, instance i reading block i % BLOCKS, so that
 * consecutive instances never find their rows in the last-level cache,
 * like rows a runtime has just written for another layer. Every kept set is
 * checked against the reference transcription in the first repetition; a
 * difference is an error exit.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"
#include "prefill_reference.h"
#include "pyramidkv/pyramidkv.h"

static const char *const NAME = "bench_prefill";

/* Seconds of CPU time of this thread. On a shared machine the wall clock
 * also counts the time other programs held the core; this clock does not,
 * so both are reported. */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One timed phase: wall and CPU seconds per repetition. */
typedef struct phase_times {
    double *wall, *cpu;
} phase_times;

typedef struct phase_clock {
    double wall, cpu;
} phase_clock;

static phase_clock clock_start(void) {
    phase_clock c = {bench_now(), cpu_now()};
    return c;
}

static void clock_stop(phase_clock c, phase_times *t, unsigned rep) {
    t->wall[rep] = bench_now() - c.wall;
    t->cpu[rep] = cpu_now() - c.cpu;
}

typedef struct prefill_setup {
    uint32_t len, layers, heads, window, kernel, ratio, budget, blocks;
    uint32_t pool;  /* pb_pool */
    uint32_t scope; /* pb_prefill_scope */
} prefill_setup;

/* Softmax-like rows with a heavy tail: row j (position q = len - W + j)
 * gives u^4-distributed weight to positions 0 .. q, normalised, and 0 to
 * the causal part. */
static void make_block(float *attn, const prefill_setup *s, uint64_t seed) {
    bench_rng rng = {seed};
    for (uint32_t j = 0; j < s->window; ++j) {
        const uint32_t q = s->len - s->window + j;
        float *row = attn + (size_t)j * s->len;
        double sum = 0.0;
        for (uint32_t p = 0; p <= q; ++p) {
            const double u = bench_rng_unit(&rng);
            row[p] = (float)(u * u * u * u + 1e-7);
            sum += (double)row[p];
        }
        for (uint32_t p = 0; p <= q; ++p)
            row[p] = (float)((double)row[p] / sum);
        for (uint32_t p = q + 1u; p < s->len; ++p) row[p] = 0.0f;
    }
}

/* The floor: the same rows summed into x, nothing else (no check, no
 * selection). Two plain forms: row by row, and four rows folded into each
 * sum per pass (x[p] = (((x[p] + a) + b) + c) + d, the structure the
 * library's scoring uses). The floor is the faster of the two, so that it
 * stays a floor. The volatile sink keeps the compiler from dropping the
 * work. */
static volatile double floor_sink;

static void floor_rows(double *x, const float *attn, uint32_t rows,
                       uint32_t len) {
    for (uint32_t p = 0; p < len; ++p) x[p] = 0.0 + (double)attn[p];
    for (uint32_t j = 1; j < rows; ++j) {
        const float *row = attn + (size_t)j * len;
        for (uint32_t p = 0; p < len; ++p) x[p] += (double)row[p];
    }
    floor_sink = x[len / 2u];
}

static void floor_fold4(double *x, const float *attn, uint32_t rows,
                        uint32_t len) {
    for (uint32_t p = 0; p < len; ++p) x[p] = 0.0;
    uint32_t j = 0;
    for (; j + 4u <= rows; j += 4u) {
        const float *a = attn + (size_t)j * len, *b = a + len, *c = b + len,
                    *d = c + len;
        for (uint32_t p = 0; p < len; ++p)
            x[p] = (((x[p] + (double)a[p]) + (double)b[p]) + (double)c[p]) +
                   (double)d[p];
    }
    for (; j < rows; ++j) {
        const float *row = attn + (size_t)j * len;
        for (uint32_t p = 0; p < len; ++p) x[p] += (double)row[p];
    }
    floor_sink = x[len / 2u];
}

typedef struct prefill_run {
    pb_kvcache **inst;
    float **block;
    void *workspace;
    size_t workspace_bytes;
    double *x;               /* the floor's array */
    uint32_t *kept;          /* [len] */
    unsigned char *keep;     /* [len] the transcription's flags */
    size_t total_kept;
} prefill_run;

static int compress_all(prefill_run *r, const prefill_setup *s, size_t n) {
    r->total_kept = 0;
    for (size_t i = 0; i < n; ++i) {
        size_t k = 0;
        /* The ask is the layer's own share, so each layer keeps its
         * pyramid share (an ask of `budget` would cap the shallow ones). */
        const pb_status st = pb_kvcache_prefill(
            r->inst[i], r->block[i % s->blocks], s->window, s->len,
            pb_kvcache_effective_budget(r->inst[i]), r->workspace,
            r->workspace_bytes, NULL, 0, NULL, 0, &k);
        if (st != PB_OK)
            return bench_fail(NAME, "prefill of instance %zu: %s", i,
                              pb_status_str(st));
        r->total_kept += k;
    }
    return 0;
}

/* The transcription on every instance; with check set, also compares its
 * kept set with the library's (the instances must hold their survivors). */
static int reference_all(prefill_run *r, const prefill_setup *s, size_t n,
                         int check) {
    for (size_t i = 0; i < n; ++i) {
        const size_t share = pb_kvcache_effective_budget(r->inst[i]);
        const size_t want = pfref_select(r->block[i % s->blocks], s->window,
                                         s->len, share, s->kernel, s->pool,
                                         r->keep);
        if (want == (size_t)-1) return bench_fail(NAME, "out of memory");
        if (!check) continue;
        size_t got = 0;
        if (pb_kvcache_kept_positions(r->inst[i], r->kept, s->len, &got) !=
                PB_OK ||
            got != want)
            return bench_fail(NAME, "instance %zu keeps %zu, the reference "
                                    "%zu", i, got, want);
        size_t k = 0;
        for (uint32_t p = 0; p < s->len; ++p) {
            if (!r->keep[p]) continue;
            if (r->kept[k] != p)
                return bench_fail(NAME, "instance %zu: kept #%zu is %u, the "
                                        "reference's %u", i, k,
                                  (unsigned)r->kept[k], (unsigned)p);
            ++k;
        }
    }
    return 0;
}

static void reset_all(prefill_run *r, size_t n) {
    for (size_t i = 0; i < n; ++i) (void)pb_kvcache_reset(r->inst[i]);
}

/* Bytes of the policy instances when every layer gets `budget` (uniform:
 * pyramid ratio 1, capacity budget + 1), for the memory comparison. */
static size_t uniform_bytes(const prefill_setup *s) {
    pb_kvcache_pyramidkv_params p = PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
    p.budget = s->budget;
    p.num_layers = s->layers;
    p.pyramid_ratio = 1;
    p.recent_window = s->window;
    p.pool_kernel = s->kernel;
    pb_kvcache_options o = PB_KVCACHE_OPTIONS_DEFAULT;
    o.prefill_scope = PB_PREFILL_REFERENCE;
    size_t total = 0;
    for (uint32_t l = 0; l < s->layers; ++l) {
        size_t b = 0;
        p.layer = l;
        if (pb_kvcache_pyramidkv_size(&p, &o, &b) != PB_OK) return 0;
        total += b * s->heads;
    }
    return total;
}

static int run(const prefill_setup *s, const bench_options *opt) {
    const size_t n = (size_t)s->layers * s->heads;
    const size_t block_floats = (size_t)s->window * s->len;
    prefill_run r;
    memset(&r, 0, sizeof r);
    const unsigned runs = opt->warmup + opt->reps;
    /* Phases: 0 floor row by row, 1 floor four rows, 2 compress,
     * 3 reference; then the per-repetition ratios (wall, cpu). */
    double *times = malloc(10u * runs * sizeof *times);
    phase_times ph[5];
    for (unsigned k = 0; k < 5; ++k) {
        ph[k].wall = times ? times + (2u * k) * runs : NULL;
        ph[k].cpu = times ? times + (2u * k + 1u) * runs : NULL;
    }
    r.inst = calloc(n, sizeof *r.inst);
    r.block = calloc(s->blocks, sizeof *r.block);
    r.x = bench_alloc((size_t)s->len * sizeof *r.x);
    r.kept = malloc((size_t)s->len * sizeof *r.kept);
    r.keep = malloc(s->len);
    int rc = 0;
    if (!times || !r.inst || !r.block ||
        !r.x || !r.kept || !r.keep) {
        rc = bench_fail(NAME, "out of memory");
        goto done;
    }
    for (uint32_t b = 0; b < s->blocks; ++b) {
        r.block[b] = bench_alloc(block_floats * sizeof(float));
        if (r.block[b] == NULL) {
            rc = bench_fail(NAME, "out of memory for the attention blocks");
            goto done;
        }
        make_block(r.block[b], s, bench_hash3(7u, b, s->len));
    }

    pb_kvcache_pyramidkv_params p = PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
    p.budget = s->budget;
    p.num_layers = s->layers;
    p.pyramid_ratio = s->ratio;
    p.recent_window = s->window;
    p.pool_kernel = s->kernel;
    pb_kvcache_options o = PB_KVCACHE_OPTIONS_DEFAULT;
    o.pool = s->pool;
    o.prefill_scope = s->scope;
    size_t lib_bytes = 0;
    for (size_t i = 0; i < n; ++i) {
        p.layer = (uint32_t)(i / s->heads);
        /* Capacity: the layer's share plus one step of slack, so a deep
         * layer does not reserve the average budget it will never hold. */
        const uint32_t share = pb_kvcache_pyramid_budget(
            p.budget, p.layer, p.num_layers, p.pyramid_ratio);
        o.capacity = (share > s->window ? share : s->window + 1u) + 1u;
        pb_status st = pb_kvcache_pyramidkv_create(&p, &o, NULL, &r.inst[i]);
        if (st != PB_OK) {
            rc = bench_fail(NAME, "create: %s", pb_status_str(st));
            goto done;
        }
        size_t ws = 0;
        st = pb_kvcache_prefill_workspace_size(r.inst[i], s->len, &ws);
        if (st != PB_OK) {
            rc = bench_fail(NAME, "workspace size: %s", pb_status_str(st));
            goto done;
        }
        if (ws > r.workspace_bytes) r.workspace_bytes = ws;
        lib_bytes += pb_kvcache_memory_bytes(r.inst[i]);
    }
    r.workspace = bench_alloc(r.workspace_bytes);
    if (r.workspace == NULL) {
        rc = bench_fail(NAME, "out of memory for the workspace");
        goto done;
    }

    for (unsigned rep = 0; rep < runs; ++rep) {
        phase_clock c = clock_start();
        for (size_t i = 0; i < n; ++i)
            floor_rows(r.x, r.block[i % s->blocks], s->window, s->len);
        clock_stop(c, &ph[0], rep);
        c = clock_start();
        for (size_t i = 0; i < n; ++i)
            floor_fold4(r.x, r.block[i % s->blocks], s->window, s->len);
        clock_stop(c, &ph[1], rep);

        reset_all(&r, n);
        c = clock_start();
        if ((rc = compress_all(&r, s, n)) != 0) goto done;
        clock_stop(c, &ph[2], rep);
        for (unsigned k = 0; k < 2; ++k) {
            const double *f0 = k ? ph[0].cpu : ph[0].wall;
            const double *f1 = k ? ph[1].cpu : ph[1].wall;
            const double lib = k ? ph[2].cpu[rep] : ph[2].wall[rep];
            const double fl = f1[rep] < f0[rep] ? f1[rep] : f0[rep];
            (k ? ph[4].cpu : ph[4].wall)[rep] = lib / fl;
        }

        /* The transcription is of the paper's selection: reference scope
         * only. */
        c = clock_start();
        if (s->scope == PB_PREFILL_REFERENCE &&
            (rc = reference_all(&r, s, n, rep == 0)) != 0)
            goto done;
        clock_stop(c, &ph[3], rep);
    }

    const int ref = s->scope == PB_PREFILL_REFERENCE;
    printf("%s scope, pool %s (median [min - max] of %u repetitions; wall "
           "clock | CPU time of the thread):\n",
           ref ? "reference" : "consistent",
           s->pool == PB_POOL_AVG ? "avg" : "max", opt->reps);
    static const char *const label[4] = {
        "floor, row by row      ", "floor, 4 rows per pass ",
        "compress (library)     ", "reference transcription"};
    bench_stats st[5][2];
    for (unsigned k = 0; k < 5; ++k) {
        st[k][0] = bench_stats_of(ph[k].wall + opt->warmup, opt->reps);
        st[k][1] = bench_stats_of(ph[k].cpu + opt->warmup, opt->reps);
    }
    for (unsigned k = 0; k < (ref ? 4u : 3u); ++k)
        printf("  %s %9.2f ms [%.2f - %.2f] | %9.2f ms [%.2f - %.2f]\n",
               label[k], st[k][0].median * 1e3, st[k][0].min * 1e3,
               st[k][0].max * 1e3, st[k][1].median * 1e3, st[k][1].min * 1e3,
               st[k][1].max * 1e3);
    printf("  compress / floor          %.2fx [%.2f - %.2f] | %.2fx [%.2f - "
           "%.2f]  (per repetition, against the faster floor of the same "
           "repetition; target <= 2x)\n",
           st[4][0].median, st[4][0].min, st[4][0].max, st[4][1].median,
           st[4][1].min, st[4][1].max);
    if (ref)
        printf("  reference / compress      %.1fx | %.1fx\n",
               st[3][0].median / st[2][0].median,
               st[3][1].median / st[2][1].median);
    const size_t uniform_kept = n * (size_t)s->budget;
    const size_t uni_bytes = uniform_bytes(s);
    printf("  kept after compression   %zu positions (K/V entries) over %zu "
           "instances (uniform %u each: %zu; %.3f of uniform)%s\n",
           r.total_kept, n, (unsigned)s->budget, uniform_kept,
           (double)r.total_kept / (double)uniform_kept,
           ref ? "; kept sets identical to the reference" : "");
    printf("  policy memory            %zu bytes in %zu instances, capacity "
           "share + 1 (uniform, capacity %u + 1: %zu bytes; %.3f of uniform) "
           "+ one %zu-byte workspace shared by all\n\n",
           lib_bytes, n, (unsigned)s->budget, uni_bytes,
           uni_bytes ? (double)lib_bytes / (double)uni_bytes : 0.0,
           r.workspace_bytes);
    fflush(stdout);

done:
    if (r.inst)
        for (size_t i = 0; i < n; ++i) pb_kvcache_destroy(r.inst[i]);
    if (r.block)
        for (uint32_t b = 0; b < s->blocks; ++b) bench_free(r.block[b]);
    free(r.inst);
    free(r.block);
    bench_free(r.x);
    bench_free(r.workspace);
    free(r.kept);
    free(r.keep);
    free(times);
    return rc;
}

int main(int argc, char **argv) {
    bench_options opt;
    const int prc = bench_parse_common(
        &argc, argv, 5,
        " [--pool max|avg|both] [--scope reference|consistent|both]", &opt);
    if (prc) {
        return prc == 1 ? 0 : 2;
    }
    int pools = 1;  /* bit 0: max, bit 1: avg */
    int scopes = 2; /* bit 0: consistent, bit 1: reference */
    for (int i = 1; i < argc; ++i) {
        /* --scope consistent|reference|both, --pool max|avg|both: bits */
        const int scope = strcmp(argv[i], "--scope") == 0;
        int *dst = scope                             ? &scopes
                   : strcmp(argv[i], "--pool") == 0 ? &pools
                                                    : NULL;
        if (dst != NULL && i + 1 < argc) {
            const char *v = argv[++i];
            *dst = strcmp(v, scope ? "consistent" : "max") == 0   ? 1
                   : strcmp(v, scope ? "reference" : "avg") == 0 ? 2
                   : strcmp(v, "both") == 0                      ? 3
                                                                 : 0;
            if (*dst) continue;
        }
        fprintf(stderr, "%s: bad argument '%s' (see --help)\n", NAME, argv[i]);
        return 2;
    }
    prefill_setup s = {32768u, 32u, 8u,          32u,
                       7u,     4u,  2048u,       32u,
                       PB_POOL_MAX, PB_PREFILL_REFERENCE};
    if (opt.quick) {
        const prefill_setup q = {2048u, 4u, 2u,          32u,
                                 7u,    4u, 256u,        3u,
                                 PB_POOL_MAX, PB_PREFILL_REFERENCE};
        s = q;
        scopes = 3; /* both, for the smoke test */
    }

    bench_print_header(stdout, NAME, &opt);
    printf("setup:    prompt %u, %u layers x %u KV heads = %u instances, W = "
           "recent_window = %u rows, kernel %u, ratio %u, budget (average "
           "share) %u, ask = the layer's share, obs_window 16; %u distinct "
           "%zu-KiB "
           "attention blocks, instance i reads block i %% %u\n",
           (unsigned)s.len, (unsigned)s.layers, (unsigned)s.heads,
           (unsigned)(s.layers * s.heads), (unsigned)s.window,
           (unsigned)s.kernel, (unsigned)s.ratio, (unsigned)s.budget,
           (unsigned)s.blocks, (size_t)s.window * s.len * 4u / 1024u,
           (unsigned)s.blocks);
    printf("timing:   one thread; per repetition the two floors, then compress "
           "(instances reset untimed), then the reference; %u warm-up + %u "
           "timed; median [min - max]\n\n",
           opt.warmup, opt.reps);
    for (uint32_t scope = 2; scope-- > 0;) {
        if (!(scopes & (1 << scope))) continue;
        s.scope = scope;
        for (uint32_t pool = 0; pool < 2; ++pool) {
            if (!(pools & (1 << pool))) continue;
            s.pool = pool;
            if (run(&s, &opt)) return 1;
        }
    }
    return 0;
}
