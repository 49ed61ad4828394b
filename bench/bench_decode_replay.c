/*
 * bench_decode_replay.c - engine benchmark 1 (docs/benchmarks.md): decode
 * steps per second of the library and of the reference model
 * (tests/reference_model.c, built with the same flags, run in the same
 * process) on a deterministic decode trace, at budgets 256, 512 and 1024.
 *
 * Harness: the instance starts holding {0}; for t = 1 .. steps the token at
 * t attends to the held positions (its weights, ascending by position), and
 * whenever more than `budget` positions are held, evict(budget) is called.
 * The attention of every step is generated before any timing: a first,
 * untimed pass with the reference model decides which positions are held at
 * each step, so the trace rows can be cut to exactly those positions. Only
 * the observe and evict calls are timed. Every timed run of either
 * implementation must reproduce the victims of that pass exactly; any
 * difference is an error exit.
 *
 * The trace is the policybook decode-4096 trace from bench/workload
 * (trace_decode.h); its FNV-1a hash is checked when all 4,095 steps run.
 *
 * With --scorer, the program runs native instances of the scorers named
 * instead, at each --cadence, against the memcpy floor of their rows
 * (bench_decode_scorer.c).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "bench_decode_family.h"
#include "bench_decode_scorer.h"
#include "pyramidkv/pyramidkv.h"
#include "reference_model.h"
#include "trace_decode.h"

static const char *const NAME = "bench_decode_replay";

/* The attention and the expected victims of every step of one replay. */
typedef struct replay_plan {
    uint32_t steps;      /* decode steps, t = 1 .. steps */
    uint32_t budget;     /* evict(budget) when more are held */
    size_t *attn_off;    /* [steps] offset of step t's row in attn */
    uint32_t *attn_len;  /* [steps] held count before step t */
    float *attn;         /* all rows, back to back */
    size_t n_victims;    /* victims over the whole replay */
    uint32_t *victims;   /* [n_victims] in call order, ascending per call */
} replay_plan;

static void plan_free(replay_plan *pl) {
    free(pl->attn_off);
    free(pl->attn_len);
    bench_free(pl->attn);
    free(pl->victims);
    memset(pl, 0, sizeof *pl);
}

static pb_kvcache_pyramidkv_params params_for(uint32_t budget) {
    pb_kvcache_pyramidkv_params p = PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
    p.budget = budget;
    return p;
}

/* Runs the reference once, untimed, building the rows and the victims.
 * As in the policybook harness, a step's row is the full trace row
 * gathered at the held positions, not renormalised. */
static int plan_build(replay_plan *pl, uint32_t steps, uint32_t budget) {
    memset(pl, 0, sizeof *pl);
    pl->steps = steps;
    pl->budget = budget;
    size_t total = 0;
    for (uint32_t t = 1; t <= steps; ++t) total += t < budget ? t : budget;
    pl->attn_off = malloc(steps * sizeof *pl->attn_off);
    pl->attn_len = malloc(steps * sizeof *pl->attn_len);
    pl->attn = bench_alloc(total * sizeof *pl->attn);
    pl->victims = malloc((size_t)steps * sizeof *pl->victims);
    float *full = malloc(PB_WL_POSITIONS * sizeof *full);
    pb_wl_shape shape;
    pb_wl_trace trace;
    memset(&trace, 0, sizeof trace);
    pb_wl_shape_decode4096(&shape);
    ref_policy ref;
    memset(&ref, 0, sizeof ref);
    const pb_kvcache_pyramidkv_params params = params_for(budget);
    if (!pl->attn_off || !pl->attn_len || !pl->attn || !pl->victims ||
        !full || pb_wl_trace_init(&trace, &shape, PB_WL_POSITIONS) != 0 ||
        ref_create(&ref, &params, NULL) != PB_OK) {
        free(full);
        pb_wl_trace_free(&trace);
        ref_destroy(&ref);
        plan_free(pl);
        return bench_fail(NAME, "cannot allocate the plan for budget %u",
                          (unsigned)budget);
    }

    size_t off = 0;
    uint32_t hash = PB_WL_FNV_OFFSET;
    int rc = 0;
    for (uint32_t t = 1; t <= steps && rc == 0; ++t) {
        const size_t n = ref.kept;
        if (off + n > total) { /* unreachable: held <= min(t, budget) */
            rc = bench_fail(NAME, "plan overflow at step %u", (unsigned)t);
            break;
        }
        if (pb_wl_trace_next(&trace, full) != t) {
            rc = bench_fail(NAME, "the trace ended before step %u",
                            (unsigned)t);
            break;
        }
        hash = pb_wl_fnv1a_floats(hash, full, t);
        float *row = pl->attn + off;
        for (size_t i = 0; i < n; ++i) row[i] = full[ref.pos[i]];
        pl->attn_off[t - 1] = off;
        pl->attn_len[t - 1] = (uint32_t)n;
        off += n;
        pb_status st = ref_observe(&ref, t, row, n);
        if (st == PB_OK && ref.kept > budget) {
            size_t nv = 0;
            st = ref_evict(&ref, budget, pl->victims + pl->n_victims,
                           steps - pl->n_victims, &nv);
            pl->n_victims += nv;
        }
        if (st != PB_OK)
            rc = bench_fail(NAME, "reference refused step %u: %s",
                            (unsigned)t, pb_status_str(st));
    }
    if (rc == 0 && steps == PB_WL_POSITIONS - 1u &&
        hash != PB_WL_DECODE4096_HASH)
        rc = bench_fail(NAME, "decode-4096 hash %u, expected %u",
                        (unsigned)hash, (unsigned)PB_WL_DECODE4096_HASH);
    ref_destroy(&ref);
    pb_wl_trace_free(&trace);
    free(full);
    if (rc) plan_free(pl);
    return rc;
}

/* One timed replay through the library; victims go to out[]. Returns the
 * elapsed seconds (the thread's CPU seconds in *cpu), or a negative value if
 * a call failed. */
static double replay_library(pb_kvcache *p, const replay_plan *pl,
                             uint32_t *out, size_t out_cap, size_t *n_out,
                             double *cpu) {
    if (pb_kvcache_reset(p) != PB_OK) return -1.0;
    const uint32_t budget = pl->budget;
    size_t held = 1, nv = 0;
    unsigned bad = 0;
    const double c0 = bench_cpu_now();
    const double t0 = bench_now();
    for (uint32_t t = 1; t <= pl->steps; ++t) {
        bad |= (unsigned)pb_kvcache_observe(p, t, pl->attn + pl->attn_off[t - 1],
                                            pl->attn_len[t - 1]);
        ++held;
        if (held > budget) {
            size_t n = 0;
            bad |= (unsigned)pb_kvcache_evict(p, budget, out + nv, out_cap - nv,
                                              &n);
            nv += n;
            held -= n;
        }
    }
    const double t1 = bench_now();
    *cpu = bench_cpu_now() - c0;
    *n_out = nv;
    return bad ? -1.0 : t1 - t0;
}

/* The same replay through the reference model. */
static double replay_reference(ref_policy *r, const replay_plan *pl,
                               uint32_t *out, size_t out_cap, size_t *n_out,
                               double *cpu) {
    ref_reset(r);
    const uint32_t budget = pl->budget;
    size_t held = 1, nv = 0;
    unsigned bad = 0;
    const double c0 = bench_cpu_now();
    const double t0 = bench_now();
    for (uint32_t t = 1; t <= pl->steps; ++t) {
        bad |= (unsigned)ref_observe(r, t, pl->attn + pl->attn_off[t - 1],
                                     pl->attn_len[t - 1]);
        ++held;
        if (held > budget) {
            size_t n = 0;
            bad |= (unsigned)ref_evict(r, budget, out + nv, out_cap - nv, &n);
            nv += n;
            held -= n;
        }
    }
    const double t1 = bench_now();
    *cpu = bench_cpu_now() - c0;
    *n_out = nv;
    return bad ? -1.0 : t1 - t0;
}

/* 0 when a run's victims are the plan's; otherwise reports the first
 * difference. */
static int check_victims(const replay_plan *pl, const uint32_t *got,
                         size_t n_got, const char *who) {
    if (n_got != pl->n_victims)
        return bench_fail(NAME, "budget %u: %s evicted %zu positions, the "
                                "reference %zu",
                          (unsigned)pl->budget, who, n_got, pl->n_victims);
    for (size_t i = 0; i < n_got; ++i)
        if (got[i] != pl->victims[i])
            return bench_fail(NAME, "budget %u: victim #%zu differs: %s %u, "
                                    "reference %u",
                              (unsigned)pl->budget, i, who, (unsigned)got[i],
                              (unsigned)pl->victims[i]);
    return 0;
}

static int bench_budget(uint32_t budget, uint32_t steps,
                        const bench_options *opt) {
    replay_plan pl;
    if (plan_build(&pl, steps, budget)) return 1;

    const pb_kvcache_pyramidkv_params params = params_for(budget);
    pb_kvcache *lib = NULL;
    ref_policy ref;
    pb_status st = pb_kvcache_pyramidkv_create(&params, NULL, NULL, &lib);
    if (st != PB_OK) {
        plan_free(&pl);
        return bench_fail(NAME, "library create: %s", pb_status_str(st));
    }
    st = ref_create(&ref, &params, NULL);
    if (st != PB_OK) {
        pb_kvcache_destroy(lib);
        plan_free(&pl);
        return bench_fail(NAME, "reference create: %s", pb_status_str(st));
    }
    const unsigned runs = opt->warmup + opt->reps;
    uint32_t *got = malloc((size_t)steps * sizeof *got);
    double *lib_rate = malloc(runs * sizeof *lib_rate);
    double *ref_rate = malloc(runs * sizeof *ref_rate);
    double *lib_cpu = malloc(runs * sizeof *lib_cpu);
    double *ref_cpu = malloc(runs * sizeof *ref_cpu);
    int rc = 0;
    if (!got || !lib_rate || !ref_rate || !lib_cpu || !ref_cpu) {
        rc = bench_fail(NAME, "out of memory");
        goto done;
    }

    /* Alternate the two so that drift in the machine's speed hits both. */
    for (unsigned r = 0; r < runs && rc == 0; ++r) {
        size_t n = 0;
        double cpu = 0.0;
        double s = replay_library(lib, &pl, got, steps, &n, &cpu);
        if (s < 0.0) {
            rc = bench_fail(NAME, "budget %u: a library call failed",
                            (unsigned)budget);
            break;
        }
        if ((rc = check_victims(&pl, got, n, "library")) != 0) break;
        lib_rate[r] = (double)steps / s;
        lib_cpu[r] = (double)steps / cpu;

        s = replay_reference(&ref, &pl, got, steps, &n, &cpu);
        if (s < 0.0) {
            rc = bench_fail(NAME, "budget %u: a reference call failed",
                            (unsigned)budget);
            break;
        }
        if ((rc = check_victims(&pl, got, n, "reference")) != 0) break;
        ref_rate[r] = (double)steps / s;
        ref_cpu[r] = (double)steps / cpu;
    }
    if (rc == 0) {
        const bench_stats l = bench_stats_of(lib_rate + opt->warmup, opt->reps);
        const bench_stats f = bench_stats_of(ref_rate + opt->warmup, opt->reps);
        const bench_stats lc = bench_stats_of(lib_cpu + opt->warmup, opt->reps);
        const bench_stats fc = bench_stats_of(ref_cpu + opt->warmup, opt->reps);
        printf("budget %4u | library %10.0f steps/s [%.0f - %.0f] "
               "(%.3f us/step) | reference %9.0f steps/s [%.0f - %.0f] "
               "(%.3f us/step) | ratio %.2fx | victims identical (%zu)\n",
               (unsigned)budget, l.median, l.min, l.max, 1e6 / l.median,
               f.median, f.min, f.max, 1e6 / f.median, l.median / f.median,
               pl.n_victims);
        printf("   thread CPU time: library %10.0f steps/s [%.0f - %.0f] | "
               "reference %9.0f steps/s [%.0f - %.0f] | ratio %.2fx\n",
               lc.median, lc.min, lc.max, fc.median, fc.min, fc.max,
               lc.median / fc.median);
        fflush(stdout);
    }
done:
    free(got);
    free(lib_rate);
    free(ref_rate);
    free(lib_cpu);
    free(ref_cpu);
    ref_destroy(&ref);
    pb_kvcache_destroy(lib);
    plan_free(&pl);
    return rc;
}

int main(int argc, char **argv) {
    bench_options opt;
    int rc = bench_parse_common(&argc, argv, 11,
                                " [--steps N] [--budget B]... "
                                "[--scorer NAME[:SINKS]]... [--cadence C]...\n"
                                "  --scorer: time native instances of this "
                                "scorer (window, cumulative, last, votes,\n"
                                "            none; SINKS attention sinks, "
                                "default 0; 'all': cumulative, last,\n"
                                "            votes, none, cumulative:4, "
                                "none:4) against the memcpy floor\n"
                                "            of their rows, instead of the "
                                "default tables (budget 512 and\n"
                                "            cadences 1 and 64 unless "
                                "given)",
                                &opt);
    if (rc) {
        return rc == 1 ? 0 : 2;
    }
    uint32_t steps = PB_WL_POSITIONS - 1u;
    uint32_t budgets[16], cadences[16];
    size_t n_budgets = 0, n_cadences = 0, n_specs = 0;
    bench_scorer_spec specs[16];
    for (int i = 1; i < argc; ++i) {
        uint32_t v = 0;
        const int has = i + 1 < argc;
        if (strcmp(argv[i], "--steps") == 0 && has &&
            !bench_parse_u32(argv[i + 1], 1, PB_WL_POSITIONS - 1u, &v)) {
            steps = v;
        } else if (strcmp(argv[i], "--budget") == 0 && has &&
                   !bench_parse_u32(argv[i + 1], 33, 1u << 20, &v) &&
                   n_budgets < 16) {
            budgets[n_budgets++] = v;
        } else if (strcmp(argv[i], "--cadence") == 0 && has &&
                   !bench_parse_u32(argv[i + 1], 1, 1u << 16, &v) &&
                   n_cadences < 16) {
            cadences[n_cadences++] = v;
        } else if (strcmp(argv[i], "--scorer") == 0 && has &&
                   (v = (uint32_t)bench_scorer_parse(
                        argv[i + 1], specs + n_specs,
                        sizeof specs / sizeof specs[0] - n_specs)) != 0u) {
            n_specs += v;
        } else {
            fprintf(stderr, "%s: bad argument '%s' (see --help)\n", NAME,
                    argv[i]);
            return 2;
        }
        ++i;
    }
    if (n_specs > 0u) {
        if (n_budgets == 0u) budgets[n_budgets++] = opt.quick ? 64u : 512u;
        if (n_cadences == 0u) {
            cadences[n_cadences++] = 1u;
            cadences[n_cadences++] = opt.quick ? 8u : 64u;
        }
        bench_print_header(stdout, NAME, &opt);
        printf("trace:    decode-4096 (bench/workload), %u steps, each row "
               "gathered at the held positions\n",
               (unsigned)steps);
        return bench_decode_scorers(steps, specs, n_specs, budgets,
                                    n_budgets, cadences, n_cadences, &opt);
    }
    if (n_cadences > 0u) {
        fprintf(stderr, "%s: --cadence needs --scorer (see --help)\n", NAME);
        return 2;
    }
    if (n_budgets == 0) {
        const uint32_t full[3] = {256, 512, 1024}, quick[2] = {64, 256};
        const uint32_t *src = opt.quick ? quick : full;
        n_budgets = opt.quick ? 2 : 3;
        memcpy(budgets, src, n_budgets * sizeof *budgets);
    }

    bench_print_header(stdout, NAME, &opt);
    printf("trace:    decode-4096 (bench/workload, FNV-1a %u, checked when "
           "all 4095 steps run), %u steps; row t sums to 1 over positions "
           "0..t-1 and is fed gathered at the held positions, as the "
           "policybook harness does\n",
           (unsigned)PB_WL_DECODE4096_HASH, (unsigned)steps);
    printf("policy:   layer 0 of 1, recent 32, obs 16, kernel 7; step(t), then "
           "evict(budget) whenever more than budget are held\n");
    printf("timing:   observe+evict calls only; %u warm-up + %u timed "
           "replays each, library and reference alternating; median "
           "[min - max] of the wall clock (CLOCK_MONOTONIC), then of the "
           "thread's CPU time; ratio = library median / reference median\n\n",
           opt.warmup, opt.reps);
    for (size_t i = 0; i < n_budgets; ++i)
        if (bench_budget(budgets[i], steps, &opt)) return 1;
    return bench_decode_family(steps, budgets, n_budgets, &opt);
}
