/*
 * bench_decode_replay.c - engine benchmark 1 (docs/performance.md): decode
 * steps per second of the library and of the reference model
 * (tests/reference_model.c, built with the same flags, run in the same
 * process) on a deterministic decode trace, at budgets 256, 512 and 1024.
 *
 * Harness: the instance starts holding {0}; for t = 1 .. steps the token at
 * t attends to the held positions (its weights, ascending by position), and
 * whenever more than `budget` positions are held, evict(budget) is called.
 * The attention of every step is generated before any timing: a first,
 * untimed pass with the reference model decides which positions are held at
 * each step, so the trace rows can be cut to exactly those positions
 * (bench_replay_plan.c, which the --scorer tables share). Only
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
#include "bench_replay_plan.h"
#include "pyramidkv/pyramidkv.h"
#include "reference_model.h"
#include "trace_decode.h"

static const char *const NAME = "bench_decode_replay";

/* PyramidKV's defaults at this budget: layer 0 of 1, recent 32, obs 16,
 * kernel 7, max pooling, capacity budget + 1. */
static pb_kvcache_config config_for(uint32_t budget) {
    pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    c.budget = budget;
    return c;
}

static int bench_budget(uint32_t budget, uint32_t steps,
                        const bench_options *opt) {
    const pb_kvcache_config config = config_for(budget);
    bench_replay_plan pl;
    if (bench_replay_plan_build(&pl, &config, steps, 1u)) return 1;

    pb_kvcache *lib = NULL;
    ref_policy ref;
    pb_status st = pb_kvcache_create(&config, NULL, &lib);
    if (st != PB_OK) {
        bench_replay_plan_free(&pl);
        return bench_fail(NAME, "library create: %s", pb_status_str(st));
    }
    st = ref_create_config(&ref, &config);
    if (st != PB_OK) {
        pb_kvcache_destroy(lib);
        bench_replay_plan_free(&pl);
        return bench_fail(NAME, "reference create: %s", pb_status_str(st));
    }
    const bench_replayer side[2] = {bench_replayer_library(lib),
                                    bench_replayer_reference(&ref)};
    static const char *const side_name[2] = {"library", "reference"};
    char what[32];
    snprintf(what, sizeof what, "budget %u", (unsigned)budget);
    const unsigned runs = opt->warmup + opt->reps;
    uint32_t *got = malloc((size_t)steps * sizeof *got);
    bench_series rate;
    int rc = 0;
    if (bench_series_alloc(&rate, runs) != 0 || !got) {
        rc = bench_fail(NAME, "out of memory");
        goto done;
    }

    /* Alternate the two so that drift in the machine's speed hits both. */
    for (unsigned r = 0; r < runs && rc == 0; ++r) {
        for (int who = 0; who < 2 && rc == 0; ++who) {
            size_t n = 0;
            double cpu = 0.0;
            const double s =
                bench_replay_run(&side[who], &pl, got, steps, &n, &cpu);
            if (s < 0.0) {
                rc = bench_fail(NAME, "%s: a %s call failed", what,
                                side_name[who]);
                break;
            }
            rc = bench_replay_check(&pl, got, n, what, side_name[who]);
            rate.v[who][r] = (double)steps / s;
            rate.v[2 + who][r] = (double)steps / cpu;
        }
    }
    if (rc == 0) {
        bench_series_stats(&rate, opt);
        const bench_stats l = rate.st[0], f = rate.st[1];
        const bench_stats lc = rate.st[2], fc = rate.st[3];
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
    bench_series_free(&rate);
    ref_destroy(&ref);
    pb_kvcache_destroy(lib);
    bench_replay_plan_free(&pl);
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
