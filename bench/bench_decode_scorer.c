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
 * positions, and records the victims; every timed library replay must
 * reproduce them exactly, else the program fails.
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

#include "pyramidkv/pyramidkv.h"
#include "reference_model.h"
#include "trace_decode.h"

static const char *const NAME = "bench_decode_replay";

static const char *const scorer_names[5] = {"window", "cumulative", "last",
                                            "votes", "none"};

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
    for (uint32_t s = 0; s < 5u; ++s) {
        if (strlen(scorer_names[s]) != len ||
            strncmp(text, scorer_names[s], len) != 0)
            continue;
        uint32_t sinks = 0u;
        if (colon && bench_parse_u32(colon + 1, 0u, 1u << 20, &sinks))
            return 0u;
        out->scorer = s;
        out->sinks = sinks;
        return 1u;
    }
    return 0u;
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

/* The rows and the expected victims of one replay. */
typedef struct scorer_plan {
    uint32_t steps, budget, cadence;
    size_t *off;       /* [steps] offset of step t's row in attn */
    uint32_t *len;     /* [steps] held count before step t */
    float *attn;       /* all rows back to back */
    size_t n_victims;
    uint32_t *victims; /* [steps] in call order, ascending per call */
    size_t row_bytes;  /* sum of the rows' bytes */
} scorer_plan;

static void plan_free(scorer_plan *pl) {
    free(pl->off);
    free(pl->len);
    bench_free(pl->attn);
    free(pl->victims);
    memset(pl, 0, sizeof *pl);
}

/* Runs the reference once, untimed, building the rows and the victims. */
static int plan_build(scorer_plan *pl, const pb_kvcache_config *config,
                      uint32_t steps, uint32_t cadence) {
    memset(pl, 0, sizeof *pl);
    const uint32_t budget = config->budget;
    pl->steps = steps;
    pl->budget = budget;
    pl->cadence = cadence;
    const size_t most = (size_t)budget + cadence;
    size_t total = 0;
    for (uint32_t t = 1; t <= steps; ++t) total += t < most ? t : most;
    pl->off = malloc(steps * sizeof *pl->off);
    pl->len = malloc(steps * sizeof *pl->len);
    pl->attn = bench_alloc(total * sizeof *pl->attn);
    pl->victims = malloc((size_t)steps * sizeof *pl->victims);
    float *full = malloc(PB_WL_POSITIONS * sizeof *full);
    pb_wl_shape shape;
    pb_wl_trace trace;
    memset(&trace, 0, sizeof trace);
    pb_wl_shape_decode4096(&shape);
    ref_policy ref;
    memset(&ref, 0, sizeof ref);
    int rc = 0;
    if (!pl->off || !pl->len || !pl->attn || !pl->victims || !full ||
        pb_wl_trace_init(&trace, &shape, PB_WL_POSITIONS) != 0 ||
        ref_create_config(&ref, config) != PB_OK)
        rc = bench_fail(NAME, "cannot allocate the plan (scorer %s, budget "
                              "%u, cadence %u)",
                        scorer_names[config->scorer], (unsigned)budget,
                        (unsigned)cadence);
    size_t off = 0;
    for (uint32_t t = 1; t <= steps && rc == 0; ++t) {
        const size_t n = ref.kept;
        if (off + n > total) { /* unreachable: held <= min(t, most) */
            rc = bench_fail(NAME, "plan overflow at step %u", (unsigned)t);
            break;
        }
        if (pb_wl_trace_next(&trace, full) != t) {
            rc = bench_fail(NAME, "the trace ended before step %u",
                            (unsigned)t);
            break;
        }
        float *row = pl->attn + off;
        for (size_t i = 0; i < n; ++i) row[i] = full[ref.pos[i]];
        pl->off[t - 1] = off;
        pl->len[t - 1] = (uint32_t)n;
        off += n;
        pb_status st = ref_observe(&ref, t, row, n);
        if (st == PB_OK && ref.kept >= (size_t)budget + cadence) {
            size_t nv = 0;
            st = ref_evict(&ref, budget, pl->victims + pl->n_victims,
                           steps - pl->n_victims, &nv);
            pl->n_victims += nv;
        }
        if (st != PB_OK)
            rc = bench_fail(NAME, "the reference refused step %u: %s",
                            (unsigned)t, pb_status_str(st));
    }
    pl->row_bytes = off * sizeof(float);
    ref_destroy(&ref);
    pb_wl_trace_free(&trace);
    free(full);
    if (rc) plan_free(pl);
    return rc;
}

/* One timed replay through the library; victims go to out[]. Returns the
 * wall seconds (CPU seconds in *cpu), or a negative value if a call
 * failed. */
static double replay_library(pb_kvcache *p, const scorer_plan *pl,
                             uint32_t *out, size_t out_cap, size_t *n_out,
                             double *cpu) {
    if (pb_kvcache_reset(p) != PB_OK) return -1.0;
    const size_t trigger = (size_t)pl->budget + pl->cadence;
    size_t held = 1, nv = 0;
    unsigned bad = 0;
    const double c0 = bench_cpu_now();
    const double t0 = bench_now();
    for (uint32_t t = 1; t <= pl->steps; ++t) {
        bad |= (unsigned)pb_kvcache_observe(p, t, pl->attn + pl->off[t - 1],
                                            pl->len[t - 1]);
        if (++held >= trigger) {
            size_t n = 0;
            bad |= (unsigned)pb_kvcache_evict(p, pl->budget, out + nv,
                                              out_cap - nv, &n);
            nv += n;
            held -= n;
        }
    }
    const double t1 = bench_now();
    *cpu = bench_cpu_now() - c0;
    *n_out = nv;
    return bad ? -1.0 : t1 - t0;
}

static volatile float floor_sink;

/* The floor over the same steps: one memcpy of each row into dst. */
static double replay_floor(const scorer_plan *pl, float *dst, double *cpu) {
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

static int check_victims(const scorer_plan *pl, const uint32_t *got,
                         size_t n_got, const char *what) {
    if (n_got != pl->n_victims)
        return bench_fail(NAME, "%s: the library evicted %zu positions, the "
                                "reference %zu",
                          what, n_got, pl->n_victims);
    for (size_t i = 0; i < n_got; ++i)
        if (got[i] != pl->victims[i])
            return bench_fail(NAME, "%s: victim #%zu differs: library %u, "
                                    "reference %u",
                              what, i, (unsigned)got[i],
                              (unsigned)pl->victims[i]);
    return 0;
}

static int bench_one(const bench_scorer_spec *spec, uint32_t budget,
                     uint32_t cadence, uint32_t steps,
                     const bench_options *opt) {
    char what[96];
    snprintf(what, sizeof what, "%s sinks %u budget %u cadence %u",
             scorer_names[spec->scorer], (unsigned)spec->sinks,
             (unsigned)budget, (unsigned)cadence);
    const pb_kvcache_config config = config_of(spec, budget, cadence);
    pb_kvcache *lib = NULL;
    pb_status st = pb_kvcache_create(&config, NULL, &lib);
    if (st != PB_OK)
        return bench_fail(NAME, "%s: library create: %s", what,
                          pb_status_str(st));
    scorer_plan pl;
    if (plan_build(&pl, &config, steps, cadence)) {
        pb_kvcache_destroy(lib);
        return 1;
    }
    const unsigned runs = opt->warmup + opt->reps;
    uint32_t *got = malloc((size_t)steps * sizeof *got);
    float *dst = bench_alloc(((size_t)budget + cadence) * sizeof *dst);
    double *v[4]; /* library wall, floor wall, library CPU, floor CPU */
    for (int k = 0; k < 4; ++k) v[k] = malloc(runs * sizeof *v[k]);
    int rc = 0;
    if (!got || !dst || !v[0] || !v[1] || !v[2] || !v[3])
        rc = bench_fail(NAME, "out of memory");
    /* Alternate the two so that drift in the machine's speed hits both. */
    for (unsigned r = 0; r < runs && rc == 0; ++r) {
        size_t n = 0;
        double cpu = 0.0;
        const double s = replay_library(lib, &pl, got, steps, &n, &cpu);
        if (s < 0.0) {
            rc = bench_fail(NAME, "%s: a library call failed", what);
            break;
        }
        if ((rc = check_victims(&pl, got, n, what)) != 0) break;
        v[0][r] = 1e6 * s / steps;
        v[2][r] = 1e6 * cpu / steps;
        v[1][r] = 1e6 * replay_floor(&pl, dst, &cpu) / steps;
        v[3][r] = 1e6 * cpu / steps;
    }
    if (rc == 0) {
        const bench_stats lw = bench_stats_of(v[0] + opt->warmup, opt->reps);
        const bench_stats fw = bench_stats_of(v[1] + opt->warmup, opt->reps);
        const bench_stats lc = bench_stats_of(v[2] + opt->warmup, opt->reps);
        const bench_stats fc = bench_stats_of(v[3] + opt->warmup, opt->reps);
        printf("%-10s sinks %u budget %4u cadence %3u | CPU: library %.3f "
               "us/step [%.3f - %.3f] | floor %.3f us/step [%.3f - %.3f] "
               "(%.0f B/step) | ratio %.2fx | wall: library %.3f, floor "
               "%.3f, ratio %.2fx | victims identical (%zu)\n",
               scorer_names[spec->scorer], (unsigned)spec->sinks,
               (unsigned)budget, (unsigned)cadence, lc.median, lc.min, lc.max,
               fc.median, fc.min, fc.max, (double)pl.row_bytes / steps,
               lc.median / fc.median, lw.median, fw.median,
               lw.median / fw.median, pl.n_victims);
        fflush(stdout);
    }
    free(got);
    bench_free(dst);
    for (int k = 0; k < 4; ++k) free(v[k]);
    plan_free(&pl);
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
