/*
 * bench_model_shape.c - engine benchmark 3 (docs/performance.md): the
 * policy's cost per generated token for a Llama-3-8B shape. 32 layers x 8 KV
 * heads = 256 instances, average budget 2,048, pyramid ratio 4, recent 32,
 * obs 16, kernel 7; every instance starts at its layer's share (steady
 * state). One token is one decode step on all 256 instances, single thread.
 * At cadence C an instance evicts back to its share every C steps (capacity
 * share + C; cadence 1 uses the default capacity and evicts every step).
 * Each cadence runs with the instances' rows cached and streamed
 * (pb_kvcache_config.row_stores; --rows picks one).
 *
 * The floor is the cost of touching the same attention bytes once: a memcpy
 * of each instance's weights for the token into a per-instance buffer, with
 * the same lengths as the policy run. The ratio policy / floor is reported.
 *
 * Attention is pre-generated outside the timed region (bench_shape.c):
 * each instance has POOL_ROWS rows of weights; token k uses row k mod
 * POOL_ROWS, cut to the held count. The library's victims are logged
 * during the timed runs and, afterwards, every instance is replayed through
 * the reference model (tests/reference_model.c) with the same calls; any
 * different victim is an error exit.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "bench_group_shape.h"
#include "bench_shape.h"
#include "pyramidkv/pyramidkv.h"
#include "reference_model.h"

static const char *const NAME = "bench_model_shape";

#define POOL_ROWS BENCH_SHAPE_ROWS
#define MAX_CADENCES 8

typedef struct shape_config {
    uint32_t layers, heads, budget, ratio;
    uint32_t tokens; /* tokens per timed repetition (rounded up to a multiple
                        of the cadence) */
    uint32_t cadences[MAX_CADENCES];
    size_t n_cadences;
    uint32_t max_cadence;
    unsigned rows; /* bit pb_row_stores: the row stores to measure */
    int group_only;  /* --group-only: the layer-group rows alone */
    int prefill;     /* --prefill: the group prefill rows too */
    unsigned scorers; /* bit scorer: the group rows' scorers */
    uint32_t gheads[MAX_CADENCES], gshares[MAX_CADENCES];
    size_t n_gheads, n_gshares;
} shape_config;

typedef struct shape_instance {
    pb_kvcache *lib;
    uint32_t layer;
    uint32_t share;  /* effective share: the evict ask and the steady size */
    uint32_t held;
    uint32_t rowcap; /* floats per pool row (>= share + max cadence) */
    float *pool;     /* [POOL_ROWS * rowcap] pre-generated attention */
    float *dst;      /* [rowcap] memcpy floor destination */
    uint32_t *log;   /* [log_cap] the library's victims, in call order */
    size_t n_log, log_cap;
} shape_instance;

typedef struct shape_state {
    shape_config cfg;
    bench_options opt;
    size_t n;                  /* instances */
    shape_instance *inst;
} shape_state;

/* One instance's config: PyramidKV's defaults (recent 32, obs 16, kernel
 * 7, max pooling) at this shape. */
static pb_kvcache_config config_of(const shape_config *cfg, uint32_t layer,
                                   uint32_t capacity, uint32_t row_stores) {
    pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    c.budget = cfg->budget;
    c.layer = layer;
    c.num_layers = cfg->layers;
    c.pyramid_ratio = cfg->ratio;
    c.capacity = capacity;
    c.row_stores = row_stores;
    return c;
}

static const float *row_of(const shape_instance *in, uint64_t k) {
    return bench_shape_row(in->pool, in->rowcap, k);
}

static void state_free(shape_state *s) {
    if (s->inst == NULL) return;
    for (size_t i = 0; i < s->n; ++i) {
        pb_kvcache_destroy(s->inst[i].lib);
        bench_free(s->inst[i].pool);
        bench_free(s->inst[i].dst);
        free(s->inst[i].log);
    }
    free(s->inst);
    s->inst = NULL;
}

/* Allocates the instances' pools, floor buffers and logs (no policies). */
static int state_init(shape_state *s) {
    const shape_config *cfg = &s->cfg;
    s->n = (size_t)cfg->layers * cfg->heads;
    s->inst = calloc(s->n, sizeof *s->inst);
    if (s->inst == NULL) return bench_fail(NAME, "out of memory");
    for (size_t i = 0; i < s->n; ++i) {
        shape_instance *in = &s->inst[i];
        in->layer = (uint32_t)(i / cfg->heads);
        const uint32_t share = pb_kvcache_pyramid_budget(
            cfg->budget, in->layer, cfg->layers, cfg->ratio);
        in->share = bench_shape_steady(share);
        in->rowcap = bench_shape_rowcap(in->share, cfg->max_cadence);
        in->pool = bench_alloc((size_t)POOL_ROWS * in->rowcap * sizeof(float));
        in->dst = bench_alloc((size_t)in->rowcap * sizeof(float));
        if (in->pool == NULL || in->dst == NULL) {
            state_free(s);
            return bench_fail(NAME, "out of memory for the attention pool");
        }
        bench_shape_fill(in->pool, in->rowcap, (uint32_t)(i % cfg->heads),
                         in->layer);
    }
    return 0;
}

/* The calls that bring one instance to its share (bench_shape.h); the
 * library and the reference get exactly the same calls. */
#define FILL_OBSERVED BENCH_SHAPE_FILL_OBSERVED

static uint64_t first_token_pos(const shape_state *s) {
    return bench_shape_pos(s->inst[0].share, 0u);
}

static unsigned fill_library(shape_instance *in) {
    unsigned bad = (unsigned)pb_kvcache_reset(in->lib);
    uint32_t held = 1;
    for (uint32_t pos = 1; pos < in->share; ++pos) {
        const int observed = pos + FILL_OBSERVED >= in->share;
        bad |= (unsigned)pb_kvcache_observe(
            in->lib, pos, observed ? row_of(in, pos) : NULL, held);
        ++held;
    }
    in->held = held;
    return bad;
}

static unsigned fill_reference(ref_policy *r, const shape_instance *in) {
    ref_reset(r);
    unsigned bad = 0;
    uint32_t held = 1;
    for (uint32_t pos = 1; pos < in->share; ++pos) {
        const int observed = pos + FILL_OBSERVED >= in->share;
        bad |= (unsigned)ref_observe(r, pos, observed ? row_of(in, pos) : NULL,
                                     held);
        ++held;
    }
    return bad;
}

/* Tokens [k0, k0+count) on every instance through the library. */
static unsigned run_library(shape_state *s, uint32_t cadence, uint64_t k0,
                            uint64_t count) {
    const uint64_t pos0 = first_token_pos(s);
    unsigned bad = 0;
    for (uint64_t k = k0; k < k0 + count; ++k) {
        const uint32_t pos = (uint32_t)(pos0 + k);
        for (size_t i = 0; i < s->n; ++i) {
            shape_instance *in = &s->inst[i];
            bad |= (unsigned)pb_kvcache_observe(in->lib, pos, row_of(in, k),
                                                in->held);
            ++in->held;
            if (in->held - in->share >= cadence) {
                size_t nv = 0;
                bad |= (unsigned)pb_kvcache_evict(in->lib, in->share,
                                                  in->log + in->n_log,
                                                  in->log_cap - in->n_log, &nv);
                in->n_log += nv;
                in->held -= (uint32_t)nv;
            }
        }
    }
    return bad;
}

static volatile float floor_sink;

/* The floor for the same tokens: one memcpy of each instance's weights. */
static void run_floor(shape_state *s, uint32_t cadence, uint64_t k0,
                      uint64_t count) {
    float acc = 0.0f;
    for (uint64_t k = k0; k < k0 + count; ++k) {
        const uint32_t phase = (uint32_t)(k % cadence);
        for (size_t i = 0; i < s->n; ++i) {
            shape_instance *in = &s->inst[i];
            const uint32_t len = in->share + phase;
            memcpy(in->dst, row_of(in, k), (size_t)len * sizeof(float));
            acc += in->dst[len - 1];
        }
    }
    floor_sink = acc;
}

/* Replays instance i through the reference and compares its victims with
 * the library's log. */
static int verify_instance(const shape_state *s, size_t i, uint32_t cadence,
                           uint64_t total_tokens) {
    const shape_instance *in = &s->inst[i];
    const pb_kvcache_config config = config_of(
        &s->cfg, in->layer, cadence > 1u ? in->share + cadence : 0u, 0u);
    ref_policy r;
    pb_status st = ref_create_config(&r, &config);
    if (st != PB_OK)
        return bench_fail(NAME, "reference create: %s", pb_status_str(st));
    uint32_t *vic = malloc(((size_t)cadence + 1u) * sizeof *vic);
    unsigned bad = vic == NULL ? 1u : fill_reference(&r, in);
    const uint64_t pos0 = first_token_pos(s);
    size_t at = 0;
    int rc = 0;
    for (uint64_t k = 0; k < total_tokens && !bad && rc == 0; ++k) {
        bad |= (unsigned)ref_observe(&r, (uint32_t)(pos0 + k), row_of(in, k),
                                     r.kept);
        if (r.kept - in->share >= cadence) {
            size_t nv = 0;
            bad |= (unsigned)ref_evict(&r, in->share, vic, cadence + 1u, &nv);
            for (size_t v = 0; v < nv && rc == 0; ++v, ++at) {
                if (at >= in->n_log || in->log[at] != vic[v])
                    rc = bench_fail(
                        NAME, "cadence %u, layer %u, instance %zu: victim #%zu "
                              "is %u in the reference, %s%u in the library",
                        (unsigned)cadence, (unsigned)in->layer, i, at,
                        (unsigned)vic[v], at >= in->n_log ? "none " : "",
                        at >= in->n_log ? 0u : (unsigned)in->log[at]);
            }
        }
    }
    if (rc == 0 && bad) rc = bench_fail(NAME, "a reference call failed");
    if (rc == 0 && at != in->n_log)
        rc = bench_fail(NAME, "instance %zu: the library evicted %zu, the "
                              "reference %zu", i, in->n_log, at);
    free(vic);
    ref_destroy(&r);
    return rc;
}

static int bench_cadence(shape_state *s, uint32_t cadence,
                         uint32_t row_stores) {
    const shape_config *cfg = &s->cfg;
    const bench_options *opt = &s->opt;
    const uint64_t tokens = (cfg->tokens + cadence - 1u) / cadence * cadence;
    const unsigned runs = opt->warmup + opt->reps;
    const uint64_t total = tokens * runs;
    double *lib_s = malloc(runs * sizeof *lib_s);
    double *floor_s = malloc(runs * sizeof *floor_s);
    double *lib_c = malloc(runs * sizeof *lib_c);
    double *floor_c = malloc(runs * sizeof *floor_c);
    int rc = 0;
    if (!lib_s || !floor_s || !lib_c || !floor_c) {
        rc = bench_fail(NAME, "out of memory");
        goto done;
    }

    size_t bytes = 0, peak_held = 0, steady_held = 0;
    for (size_t i = 0; i < s->n; ++i) {
        shape_instance *in = &s->inst[i];
        const pb_kvcache_config config = config_of(
            cfg, in->layer, cadence > 1u ? in->share + cadence : 0u,
            row_stores);
        pb_status st = pb_kvcache_create(&config, NULL, &in->lib);
        if (st != PB_OK) {
            rc = bench_fail(NAME, "library create (layer %u): %s",
                            (unsigned)in->layer, pb_status_str(st));
            goto done;
        }
        if (pb_kvcache_effective_budget(in->lib) != in->share) {
            rc = bench_fail(NAME, "layer %u: effective share %u, expected %u",
                            (unsigned)in->layer,
                            (unsigned)pb_kvcache_effective_budget(in->lib),
                            (unsigned)in->share);
            goto done;
        }
        free(in->log);
        in->log_cap = (size_t)total + 1u;
        in->n_log = 0;
        in->log = malloc(in->log_cap * sizeof *in->log);
        if (in->log == NULL || fill_library(in) != 0u) {
            rc = bench_fail(NAME, "library fill failed (layer %u)",
                            (unsigned)in->layer);
            goto done;
        }
        bytes += pb_kvcache_memory_bytes(in->lib);
        steady_held += in->share;
        peak_held += (size_t)in->share + cadence;
    }

    /* Policy and floor alternate per repetition, over the same tokens. */
    for (unsigned r = 0; r < runs; ++r) {
        const uint64_t k0 = (uint64_t)r * tokens;
        double c0 = bench_cpu_now();
        double t0 = bench_now();
        const unsigned bad = run_library(s, cadence, k0, tokens);
        double t1 = bench_now();
        lib_c[r] = (bench_cpu_now() - c0) / (double)tokens;
        if (bad) {
            rc = bench_fail(NAME, "cadence %u: a library call failed",
                            (unsigned)cadence);
            goto done;
        }
        lib_s[r] = (t1 - t0) / (double)tokens;
        c0 = bench_cpu_now();
        t0 = bench_now();
        run_floor(s, cadence, k0, tokens);
        t1 = bench_now();
        floor_s[r] = (t1 - t0) / (double)tokens;
        floor_c[r] = (bench_cpu_now() - c0) / (double)tokens;
    }

    size_t victims = 0;
    for (size_t i = 0; i < s->n; ++i) {
        if ((rc = verify_instance(s, i, cadence, total)) != 0) goto done;
        victims += s->inst[i].n_log;
    }

    {
        double attn_bytes = 0.0;
        for (size_t i = 0; i < s->n; ++i)
            attn_bytes += 4.0 * ((double)s->inst[i].share +
                                 (double)(cadence - 1u) / 2.0);
        const bench_stats l = bench_stats_of(lib_s + opt->warmup, opt->reps);
        const bench_stats f = bench_stats_of(floor_s + opt->warmup, opt->reps);
        printf("cadence %3u, rows %-8s | library %8.1f us/token [%.1f - "
               "%.1f] | memcpy "
               "floor %7.1f us/token [%.1f - %.1f] (%.2f MB/token) | ratio "
               "%.2fx | peak held %zu (steady %zu, +%.1f%%), library memory "
               "%.1f MB | victims identical to the reference (%zu over %llu "
               "tokens)\n",
               (unsigned)cadence, row_stores ? "streamed" : "cached",
               l.median * 1e6, l.min * 1e6, l.max * 1e6,
               f.median * 1e6, f.min * 1e6, f.max * 1e6, attn_bytes / 1e6,
               l.median / f.median, peak_held, steady_held,
               100.0 * (double)(peak_held - steady_held) / (double)steady_held,
               (double)bytes / 1e6, victims, (unsigned long long)total);
        const bench_stats lc = bench_stats_of(lib_c + opt->warmup, opt->reps);
        const bench_stats fc = bench_stats_of(floor_c + opt->warmup, opt->reps);
        printf("   thread CPU time: library %8.1f us/token [%.1f - %.1f] | "
               "memcpy floor %7.1f us/token [%.1f - %.1f] | ratio %.2fx\n",
               lc.median * 1e6, lc.min * 1e6, lc.max * 1e6, fc.median * 1e6,
               fc.min * 1e6, fc.max * 1e6, lc.median / fc.median);
        fflush(stdout);
    }

done:
    for (size_t i = 0; i < s->n; ++i) {
        pb_kvcache_destroy(s->inst[i].lib);
        s->inst[i].lib = NULL;
    }
    free(lib_s);
    free(floor_s);
    free(lib_c);
    free(floor_c);
    return rc;
}

/* The per-instance rows of the whole model shape. */
static int instance_rows(shape_state *s) {
    shape_config *cfg = &s->cfg;
    int rc;
    if (state_init(s)) return 1;
    size_t held = 0;
    for (size_t i = 0; i < s->n; ++i) held += s->inst[i].share;
    printf("shape:    %u layers x %u KV heads = %zu instances, budget %u, "
           "ratio %u, recent 32, obs 16, kernel 7; shares %u (layer 0) .. %u "
           "(layer %u), %zu positions held in all at steady state\n",
           (unsigned)cfg->layers, (unsigned)cfg->heads, s->n,
           (unsigned)cfg->budget, (unsigned)cfg->ratio,
           (unsigned)s->inst[0].share, (unsigned)s->inst[s->n - 1].share,
           (unsigned)(cfg->layers - 1u), held);
    printf("timing:   single thread; one token = observe on every instance "
           "(+ evict(share) when it holds share + cadence); %u tokens per "
           "repetition (a multiple of the cadence), %u warm-up + %u timed "
           "repetitions, policy and floor alternating; median [min - max] of "
           "us per token, wall clock (CLOCK_MONOTONIC) then the thread's CPU "
           "time; ratio = library median / floor median\n",
           (unsigned)cfg->tokens, s->opt.warmup, s->opt.reps);
    printf("floor:    memcpy of each instance's attention weights for the "
           "token (the same lengths) into a per-instance buffer\n");
    rc = 0;
    printf("rows:     pb_kvcache_config.row_stores; streamed writes the rows "
           "a step copies past the caches (it changes nothing at cadence 1, "
           "whose steps update running sums instead)\n\n");
    for (size_t c = 0; c < cfg->n_cadences && rc == 0; ++c)
        for (uint32_t m = 0; m < 2u && rc == 0; ++m)
            if (cfg->rows >> m & 1u) rc = bench_cadence(s, cfg->cadences[c], m);
    state_free(s);
    return rc;
}

int main(int argc, char **argv) {
    shape_state s;
    memset(&s, 0, sizeof s);
    int rc = bench_parse_common(
        &argc, argv, 7,
        " [--layers L] [--heads H] [--budget B] [--ratio R] [--tokens T] "
        "[--cadence C]... [--rows cached|streamed|both] [--group-only] "
        "[--group-heads H]... [--group-share S]... "
        "[--scorer window|cumulative|both] [--prefill]",
        &s.opt);
    if (rc) {
        return rc == 1 ? 0 : 2;
    }
    shape_config *cfg = &s.cfg;
    const int quick = s.opt.quick;
    cfg->layers = quick ? 8u : 32u;
    cfg->heads = quick ? 2u : 8u;
    cfg->budget = quick ? 256u : 2048u;
    cfg->ratio = 4u;
    cfg->tokens = quick ? 128u : 64u;
    cfg->rows = 3u;
    /* --quick smokes every group row kind. */
    cfg->scorers = 1u << PB_SCORER_WINDOW |
                   (quick ? 1u << PB_SCORER_CUMULATIVE : 0u);
    cfg->prefill = quick;
    for (int i = 1; i < argc; ++i) {
        uint32_t v = 0;
        if (strcmp(argv[i], "--group-only") == 0 ||
            strcmp(argv[i], "--prefill") == 0) {
            *(argv[i][2] == 'g' ? &cfg->group_only : &cfg->prefill) = 1;
            continue;
        }
        if (i + 1 < argc && strcmp(argv[i], "--scorer") == 0) {
            const char *m = argv[++i];
            cfg->scorers = strcmp(m, "window") == 0 ? 1u << PB_SCORER_WINDOW
                           : strcmp(m, "cumulative") == 0
                               ? 1u << PB_SCORER_CUMULATIVE
                           : strcmp(m, "both") == 0
                               ? (1u << PB_SCORER_WINDOW |
                                  1u << PB_SCORER_CUMULATIVE)
                               : 0u;
            if (cfg->scorers == 0u) {
                fprintf(stderr, "%s: --scorer takes window, cumulative or "
                                "both, not '%s'\n", NAME, m);
                return 2;
            }
            continue;
        }
        if (i + 1 < argc && strcmp(argv[i], "--rows") == 0) {
            const char *m = argv[++i];
            cfg->rows = strcmp(m, "cached") == 0     ? 1u
                        : strcmp(m, "streamed") == 0 ? 2u
                        : strcmp(m, "both") == 0     ? 3u
                                                     : 0u;
            if (cfg->rows == 0u) {
                fprintf(stderr, "%s: --rows takes cached, streamed or both, "
                                "not '%s'\n", NAME, m);
                return 2;
            }
            continue;
        }
        const int ok = i + 1 < argc &&
                       !bench_parse_u32(argv[i + 1], 1, 1u << 24, &v);
        if (ok && strcmp(argv[i], "--layers") == 0) {
            cfg->layers = v;
        } else if (ok && strcmp(argv[i], "--heads") == 0) {
            cfg->heads = v;
        } else if (ok && strcmp(argv[i], "--budget") == 0 && v > 32u) {
            cfg->budget = v;
        } else if (ok && strcmp(argv[i], "--group-heads") == 0 &&
                   cfg->n_gheads < MAX_CADENCES && v <= 4096u) {
            cfg->gheads[cfg->n_gheads++] = v;
        } else if (ok && strcmp(argv[i], "--group-share") == 0 &&
                   cfg->n_gshares < MAX_CADENCES && v > 32u) {
            cfg->gshares[cfg->n_gshares++] = v;
        } else if (ok && strcmp(argv[i], "--ratio") == 0) {
            cfg->ratio = v;
        } else if (ok && strcmp(argv[i], "--tokens") == 0) {
            cfg->tokens = v;
        } else if (ok && strcmp(argv[i], "--cadence") == 0 &&
                   cfg->n_cadences < MAX_CADENCES && v <= 4096u) {
            cfg->cadences[cfg->n_cadences++] = v;
        } else {
            fprintf(stderr, "%s: bad argument '%s' (see --help)\n", NAME,
                    argv[i]);
            return 2;
        }
        ++i;
    }
    if (cfg->n_cadences == 0) {
        /* --quick adds an odd cadence so that evicts fall at every phase of
         * the observation ring. */
        cfg->cadences[0] = 1;
        cfg->cadences[1] = 64;
        cfg->cadences[2] = 7;
        cfg->n_cadences = quick ? 3 : 2;
    }
    for (size_t c = 0; c < cfg->n_cadences; ++c)
        if (cfg->cadences[c] > cfg->max_cadence)
            cfg->max_cadence = cfg->cadences[c];

    bench_print_header(stdout, NAME, &s.opt);
    rc = cfg->group_only ? 0 : instance_rows(&s);
    if (cfg->n_gheads == 0u) cfg->gheads[cfg->n_gheads++] = cfg->heads;
    if (cfg->n_gshares == 0u) cfg->gshares[cfg->n_gshares++] = cfg->budget;
    /* One layer's heads as a head-adaptive group against the same heads
     * as separate instances. */
    if (rc == 0) bench_group_header();
    for (size_t h = 0; h < cfg->n_gheads && rc == 0; ++h)
        for (size_t b = 0; b < cfg->n_gshares && rc == 0; ++b) {
            for (uint32_t sc = 0; sc < 2u && rc == 0; ++sc)
                if (cfg->scorers >> sc & 1u)
                    rc = bench_group_rows(&s.opt, cfg->gheads[h],
                                          cfg->gshares[b], sc, cfg->tokens,
                                          cfg->cadences, cfg->n_cadences);
            if (rc == 0 && cfg->prefill)
                rc = bench_group_prefill(&s.opt, cfg->gheads[h],
                                         cfg->gshares[b]);
        }
    return rc;
}
