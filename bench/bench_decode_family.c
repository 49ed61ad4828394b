/*
 * bench_decode_family.c - the part of bench_decode_replay that times the
 * rest of the policybook family (H2O, Scissorhands, TOVA, StreamingLLM,
 * sliding window): decode steps per second of each library vtable against
 * the naive reference of bench/workload/workload_family_ref.c, on the
 * decode-4096 trace, at each budget.
 *
 * As for PyramidKV in bench_decode_replay.c: a first, untimed pass with the
 * reference decides which positions are held at each step, so every row is
 * cut to exactly those positions (the full trace row gathered at the held
 * positions, not renormalised, as the policybook harness feeds it); only
 * the on_decode_step and evict calls are timed; every timed run of either
 * implementation must reproduce the victims of that pass exactly. The
 * instances are created before the clock starts. Default parameters of
 * each policy (recent 32 for H2O and Scissorhands, 4 sinks for
 * StreamingLLM).
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_decode_family.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_family_params.h"
#include "pyramidkv/pyramidkv.h"
#include "trace_decode.h"
#include "workload_family_ref.h"

static const char *const NAME = "bench_decode_replay";

typedef struct member {
    const char *name;
    const pb_kvcache_vtable *library, *reference;
} member;

static const member family[5] = {
    {"h2o", &pb_kvcache_h2o, &pb_wl_ref_h2o},
    {"scissorhands", &pb_kvcache_scissorhands, &pb_wl_ref_scissorhands},
    {"tova", &pb_kvcache_tova, &pb_wl_ref_tova},
    {"streaming-llm", &pb_kvcache_streaming_llm, &pb_wl_ref_streaming_llm},
    {"sliding-window", &pb_kvcache_sliding_window, &pb_wl_ref_sliding_window},
};

/* The rows and the expected victims of one replay. */
typedef struct plan {
    uint32_t steps, budget;
    size_t *off;       /* [steps] offset of step t's row */
    uint32_t *len;     /* [steps] held count before step t */
    float *attn;       /* all rows back to back */
    size_t n_victims;
    uint32_t *victims; /* [steps + 1] in call order */
} plan;

static void plan_free(plan *pl) {
    free(pl->off);
    free(pl->len);
    bench_free(pl->attn);
    free(pl->victims);
    memset(pl, 0, sizeof *pl);
}

static int plan_build(plan *pl, const member *m, uint32_t steps,
                      uint32_t budget) {
    memset(pl, 0, sizeof *pl);
    pl->steps = steps;
    pl->budget = budget;
    size_t total = 0;
    for (uint32_t t = 1; t <= steps; ++t) total += t < budget ? t : budget;
    pl->off = malloc(steps * sizeof *pl->off);
    pl->len = malloc(steps * sizeof *pl->len);
    pl->attn = bench_alloc(total * sizeof *pl->attn);
    pl->victims = malloc(((size_t)steps + 1u) * sizeof *pl->victims);
    float *full = malloc(PB_WL_POSITIONS * sizeof *full);
    uint32_t *held = malloc(((size_t)budget + 1u) * sizeof *held);
    bench_family_params mp;
    pb_kvcache *ref = m->reference->create(
        bench_family_params_of(m->library, budget, &mp), NULL, NULL);
    pb_wl_shape shape;
    pb_wl_trace trace;
    memset(&trace, 0, sizeof trace);
    pb_wl_shape_decode4096(&shape);
    int rc = 0;
    if (!pl->off || !pl->len || !pl->attn || !pl->victims || !full ||
        !held || ref == NULL ||
        pb_wl_trace_init(&trace, &shape, PB_WL_POSITIONS) != 0)
        rc = bench_fail(NAME, "%s: cannot allocate the plan for budget %u",
                        m->name, (unsigned)budget);
    size_t off = 0, n_held = 1;
    if (held != NULL) held[0] = 0;
    for (uint32_t t = 1; t <= steps && rc == 0; ++t) {
        if (pb_wl_trace_next(&trace, full) != t) {
            rc = bench_fail(NAME, "the trace ended before step %u",
                            (unsigned)t);
            break;
        }
        if (off + n_held > total) { /* unreachable: held <= min(t, budget) */
            rc = bench_fail(NAME, "%s: plan overflow at step %u", m->name,
                            (unsigned)t);
            break;
        }
        float *row = pl->attn + off;
        for (size_t i = 0; i < n_held; ++i) row[i] = full[held[i]];
        pl->off[t - 1] = off;
        pl->len[t - 1] = (uint32_t)n_held;
        off += n_held;
        m->reference->on_decode_step(ref, t, row, n_held);
        held[n_held++] = t;
        if (pb_wl_ref_kept_count(ref) != n_held) {
            rc = bench_fail(NAME, "%s: the reference refused step %u",
                            m->name, (unsigned)t);
            break;
        }
        if (n_held > budget) {
            uint32_t *v = pl->victims + pl->n_victims;
            const size_t nv = m->reference->evict(
                ref, budget, v, (size_t)steps + 1u - pl->n_victims);
            /* Drop the victims (ascending) from the held list. */
            size_t w = 0, k = 0;
            for (size_t i = 0; i < n_held; ++i) {
                if (k < nv && held[i] == v[k]) {
                    ++k;
                    continue;
                }
                held[w++] = held[i];
            }
            n_held = w;
            pl->n_victims += nv;
        }
    }
    if (ref != NULL) m->reference->destroy(ref);
    pb_wl_trace_free(&trace);
    free(full);
    free(held);
    if (rc) plan_free(pl);
    return rc;
}

/* One timed replay of `vt` from a fresh instance (created before the
 * clock starts); victims go to out[]. Returns the elapsed seconds (thread
 * CPU seconds in *cpu), or a negative value if create failed. */
static double replay(const member *m, const pb_kvcache_vtable *vt,
                     const plan *pl, uint32_t *out, size_t out_cap,
                     size_t *n_out, double *cpu) {
    bench_family_params mp;
    pb_kvcache *p =
        vt->create(bench_family_params_of(m->library, pl->budget, &mp), NULL,
                   NULL);
    if (p == NULL) return -1.0;
    const uint32_t budget = pl->budget;
    size_t held = 1, nv = 0;
    const double c0 = bench_cpu_now();
    const double t0 = bench_now();
    for (uint32_t t = 1; t <= pl->steps; ++t) {
        vt->on_decode_step(p, t, pl->attn + pl->off[t - 1], pl->len[t - 1]);
        ++held;
        if (held > budget) {
            const size_t n = vt->evict(p, budget, out + nv, out_cap - nv);
            nv += n;
            held -= n;
        }
    }
    const double t1 = bench_now();
    *cpu = bench_cpu_now() - c0;
    vt->destroy(p);
    *n_out = nv;
    return t1 - t0;
}

static int same_victims(const plan *pl, const uint32_t *got, size_t n,
                        const member *m, const char *who) {
    if (n != pl->n_victims)
        return bench_fail(NAME, "%s budget %u: %s evicted %zu positions, the "
                                "plan %zu",
                          m->name, (unsigned)pl->budget, who, n,
                          pl->n_victims);
    for (size_t i = 0; i < n; ++i)
        if (got[i] != pl->victims[i])
            return bench_fail(NAME, "%s budget %u: victim #%zu differs: %s "
                                    "%u, plan %u",
                              m->name, (unsigned)pl->budget, i, who,
                              (unsigned)got[i], (unsigned)pl->victims[i]);
    return 0;
}

static int bench_member(const member *m, uint32_t budget, uint32_t steps,
                        const bench_options *opt) {
    plan pl;
    if (plan_build(&pl, m, steps, budget)) return 1;
    const unsigned runs = opt->warmup + opt->reps;
    const size_t cap = (size_t)steps + 1u;
    uint32_t *got = malloc(cap * sizeof *got);
    bench_series rate;
    int rc = 0;
    if (bench_series_alloc(&rate, runs) != 0 || !got)
        rc = bench_fail(NAME, "out of memory");
    /* Alternate the two so that drift in the machine's speed hits both. */
    for (unsigned r = 0; r < runs && rc == 0; ++r) {
        for (int who = 0; who < 2 && rc == 0; ++who) {
            size_t n = 0;
            double cpu = 0.0;
            const double s = replay(m, who ? m->reference : m->library, &pl,
                                    got, cap, &n, &cpu);
            if (s < 0.0) {
                rc = bench_fail(NAME, "%s: create failed", m->name);
                break;
            }
            rc = same_victims(&pl, got, n, m, who ? "reference" : "library");
            rate.v[who][r] = (double)steps / s;
            rate.v[2 + who][r] = (double)steps / cpu;
        }
    }
    if (rc == 0) {
        bench_series_stats(&rate, opt);
        const bench_stats l = rate.st[0], f = rate.st[1];
        printf("%-14s budget %4u | library %10.0f steps/s [%.0f - %.0f] "
               "(%.3f us/step) | reference %9.0f steps/s [%.0f - %.0f] | "
               "ratio %.2fx | CPU ratio %.2fx | victims identical (%zu)\n",
               m->name, (unsigned)budget, l.median, l.min, l.max,
               1e6 / l.median, f.median, f.min, f.max, l.median / f.median,
               rate.st[2].median / rate.st[3].median, pl.n_victims);
        fflush(stdout);
    }
    free(got);
    bench_series_free(&rate);
    plan_free(&pl);
    return rc;
}

int bench_decode_family(uint32_t steps, const uint32_t *budgets,
                        size_t n_budgets, const bench_options *opt) {
    printf("\nthe policybook family (default params: recent 32 for h2o and "
           "scissorhands, 4 sinks for streaming-llm): each vtable against "
           "the naive reference of bench/workload (workload_family_ref.c), "
           "same trace, same timing; CPU ratio = the same on thread CPU "
           "time\n");
    for (size_t k = 0; k < sizeof family / sizeof family[0]; ++k)
        for (size_t i = 0; i < n_budgets; ++i)
            if (bench_member(&family[k], budgets[i], steps, opt)) return 1;
    return 0;
}
