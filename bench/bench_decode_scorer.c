/*
 * bench_decode_scorer.c - the --scorer part of bench_decode_replay: what a
 * decode step costs a native instance (pb_kvcache_create) of each scorer,
 * with or without sinks, at an eviction cadence, against the memcpy floor
 * of the attention row that step reads.
 *
 * Harness, for one (scorer, sinks, budget B, cadence C): the instance holds
 * {0} after reset; for t = 1 .. steps the token at t attends to the held
 * positions (the decode-4096 row gathered at them, not renormalised, as the
 * policybook harness feeds it) and is admitted; whenever B + C or more are
 * held, evict(B) runs. Cadence 1 is an evict after every step once the
 * instance is full (capacity B + 1, the default); cadence C > 1 gives the
 * instance capacity B + C and drops C positions at once. Layer 0 of 1,
 * recent window 32 (the config default), obs 16, kernel 7.
 *
 * A first, untimed pass through the reference model (tests/
 * reference_model.c, created from the same pb_kvcache_config) decides which
 * positions are held at each step, so each row is cut to exactly those
 * positions, and records the victims (bench_replay_plan.c); every timed
 * library replay must reproduce them exactly, else the program fails.
 *
 * The floor is the cheapest thing a step can do with its row: one memcpy of
 * the row (the same bytes, the same order of steps) into a buffer of the
 * instance's capacity. Library and floor replays alternate; only the
 * observe and evict calls (or the memcpy) are timed, on the thread's CPU
 * clock and on the wall clock. The ratio is the library's median over the
 * floor's median in the same run.
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_decode_scorer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_replay_plan.h"
#include "pyramidkv/pyramidkv.h"

static const char *const NAME = "bench_decode_replay";

size_t bench_scorer_parse(const char *text, bench_scorer_spec *out,
                          size_t cap) {
    if (strcmp(text, "all") == 0) {
        static const bench_scorer_spec all[6] = {
            {PB_SCORER_CUMULATIVE, 0u}, {PB_SCORER_LAST, 0u},
            {PB_SCORER_VOTES, 0u},      {PB_SCORER_NONE, 0u},
            {PB_SCORER_CUMULATIVE, 4u}, {PB_SCORER_NONE, 4u}};
        if (cap < 6u) return 0u;
        memcpy(out, all, sizeof all);
        return 6u;
    }
    if (cap == 0u) return 0u;
    const char *colon = strchr(text, ':');
    const size_t len = colon ? (size_t)(colon - text) : strlen(text);
    char name[32];
    if (len >= sizeof name) return 0u;
    memcpy(name, text, len);
    name[len] = '\0';
    uint32_t s = 0u;
    if (pb_scorer_from_name(name, &s) != PB_OK) return 0u;
    uint32_t sinks = 0u;
    if (colon && bench_parse_u32(colon + 1, 0u, 1u << 20, &sinks)) return 0u;
    out->scorer = s;
    out->sinks = sinks;
    return 1u;
}

static pb_kvcache_config config_of(const bench_scorer_spec *spec,
                                   uint32_t budget, uint32_t cadence) {
    pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    c.budget = budget;
    c.scorer = spec->scorer;
    c.sinks = spec->sinks;
    c.capacity = cadence > 1u ? budget + cadence : 0u;
    return c;
}

static volatile float floor_sink;

/* The floor over the same steps: one memcpy of each row into dst. */
static double replay_floor(const bench_replay_plan *pl, float *dst,
                           double *cpu) {
    float acc = 0.0f;
    const double c0 = bench_cpu_now();
    const double t0 = bench_now();
    for (uint32_t t = 1; t <= pl->steps; ++t) {
        const size_t n = pl->len[t - 1];
        memcpy(dst, pl->attn + pl->off[t - 1], n * sizeof *dst);
        acc += dst[n - 1];
    }
    const double t1 = bench_now();
    *cpu = bench_cpu_now() - c0;
    floor_sink = acc;
    return t1 - t0;
}

static int bench_one(const bench_scorer_spec *spec, uint32_t budget,
                     uint32_t cadence, uint32_t steps,
                     const bench_options *opt) {
    char what[96];
    snprintf(what, sizeof what, "%s sinks %u budget %u cadence %u",
             pb_scorer_name(spec->scorer), (unsigned)spec->sinks,
             (unsigned)budget, (unsigned)cadence);
    const pb_kvcache_config config = config_of(spec, budget, cadence);
    pb_kvcache *lib = NULL;
    pb_status st = pb_kvcache_create(&config, NULL, &lib);
    if (st != PB_OK)
        return bench_fail(NAME, "%s: library create: %s", what,
                          pb_status_str(st));
    bench_replay_plan pl;
    if (bench_replay_plan_build(&pl, &config, steps, cadence)) {
        pb_kvcache_destroy(lib);
        return 1;
    }
    const bench_replayer library = bench_replayer_library(lib);
    const unsigned runs = opt->warmup + opt->reps;
    uint32_t *got = malloc((size_t)steps * sizeof *got);
    float *dst = bench_alloc(((size_t)budget + cadence) * sizeof *dst);
    bench_series t; /* microseconds per step; the other side: the floor */
    int rc = 0;
    if (bench_series_alloc(&t, runs) != 0 || !got || !dst)
        rc = bench_fail(NAME, "out of memory");
    /* Alternate the two so that drift in the machine's speed hits both. */
    for (unsigned r = 0; r < runs && rc == 0; ++r) {
        size_t n = 0;
        double cpu = 0.0;
        const double s = bench_replay_run(&library, &pl, got, steps, &n, &cpu);
        if (s < 0.0) {
            rc = bench_fail(NAME, "%s: a library call failed", what);
            break;
        }
        if ((rc = bench_replay_check(&pl, got, n, what, "library")) != 0)
            break;
        t.v[0][r] = 1e6 * s / steps;
        t.v[2][r] = 1e6 * cpu / steps;
        t.v[1][r] = 1e6 * replay_floor(&pl, dst, &cpu) / steps;
        t.v[3][r] = 1e6 * cpu / steps;
    }
    if (rc == 0) {
        bench_series_stats(&t, opt);
        const bench_stats lw = t.st[0], fw = t.st[1], lc = t.st[2], fc = t.st[3];
        printf("%-10s sinks %u budget %4u cadence %3u | CPU: library %.3f "
               "us/step [%.3f - %.3f] | floor %.3f us/step [%.3f - %.3f] "
               "(%.0f B/step) | ratio %.2fx | wall: library %.3f, floor "
               "%.3f, ratio %.2fx | victims identical (%zu)\n",
               pb_scorer_name(spec->scorer), (unsigned)spec->sinks,
               (unsigned)budget, (unsigned)cadence, lc.median, lc.min, lc.max,
               fc.median, fc.min, fc.max, (double)pl.row_bytes / steps,
               lc.median / fc.median, lw.median, fw.median,
               lw.median / fw.median, pl.n_victims);
        fflush(stdout);
    }
    free(got);
    bench_free(dst);
    bench_series_free(&t);
    bench_replay_plan_free(&pl);
    pb_kvcache_destroy(lib);
    return rc;
}

int bench_decode_scorers(uint32_t steps, const bench_scorer_spec *specs,
                         size_t n_specs, const uint32_t *budgets,
                         size_t n_budgets, const uint32_t *cadences,
                         size_t n_cadences, const bench_options *opt) {
    printf("scorers:  native instances (pb_kvcache_create), layer 0 of 1, "
           "recent 32, obs 16, kernel 7; step(t), then evict(budget) "
           "whenever budget + cadence or more are held (capacity budget + "
           "cadence, default budget + 1 at cadence 1); victims checked "
           "against the reference model on every replay\n");
    printf("floor:    one memcpy of each step's row (the weights the step "
           "reads, same steps) into a buffer; ratio = library CPU median / "
           "floor CPU median, %u warm-up + %u timed replays alternating\n\n",
           opt->warmup, opt->reps);
    for (size_t i = 0; i < n_specs; ++i)
        for (size_t b = 0; b < n_budgets; ++b)
            for (size_t c = 0; c < n_cadences; ++c)
                if (bench_one(&specs[i], budgets[b], cadences[c], steps, opt))
                    return 1;
    return 0;
}
