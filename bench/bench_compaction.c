/*
 * bench_compaction.c - engine benchmark 2 (docs/performance.md): one-shot
 * compaction. An instance created with an explicit capacity holds N
 * positions (0 .. N-1; the last 16 were admitted by decode steps with random
 * attention over everything held, so every held position has a full
 * observation window), then one evict(B) call drops all but B. Only that
 * call is timed, for the library and for the reference model
 * (tests/reference_model.c, same flags, same process). Cases: 32,768 -> 512
 * and 131,072 -> 2,048.
 *
 * Both implementations must return the same victims in every run; any
 * difference is an error exit. The reference is slow (one linear scan per
 * victim); when a single call of it takes longer than REF_SLOW_SECONDS it
 * is measured once, without a warm-up, and the output says so.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "pyramidkv/pyramidkv.h"
#include "reference_model.h"

static const char *const NAME = "bench_compaction";

/* One reference call above this is measured once (see the file comment). */
#define REF_SLOW_SECONDS 25.0

/* Decode steps with attention at the end of the fill: one obs_window. */
#define OBSERVED_STEPS 16u

typedef struct compaction_case {
    uint32_t held;   /* N: positions held before the evict */
    uint32_t budget; /* B: the evict's ask and the params' budget */
} compaction_case;

/* The attention rows of the OBSERVED_STEPS steps, pre-generated: row k is
 * given by position held-16+k and covers the held-16+k positions held then. */
typedef struct fill_rows {
    float *rows[OBSERVED_STEPS];
    uint32_t len[OBSERVED_STEPS];
} fill_rows;

static void rows_free(fill_rows *f) {
    for (unsigned k = 0; k < OBSERVED_STEPS; ++k) bench_free(f->rows[k]);
    memset(f, 0, sizeof *f);
}

static int rows_make(fill_rows *f, uint32_t held, uint64_t seed) {
    memset(f, 0, sizeof *f);
    bench_rng rng = {seed};
    for (unsigned k = 0; k < OBSERVED_STEPS; ++k) {
        const uint32_t n = held - OBSERVED_STEPS + k;
        f->len[k] = n;
        f->rows[k] = bench_alloc((size_t)n * sizeof(float));
        if (f->rows[k] == NULL) {
            rows_free(f);
            return 1;
        }
        double sum = 0.0;
        for (uint32_t i = 0; i < n; ++i) {
            const double u = bench_rng_unit(&rng);
            f->rows[k][i] = (float)u;
            sum += (double)f->rows[k][i];
        }
        for (uint32_t i = 0; i < n; ++i)
            f->rows[k][i] = (float)((double)f->rows[k][i] / sum);
    }
    return 0;
}

static pb_kvcache_pyramidkv_params params_for(uint32_t budget) {
    pb_kvcache_pyramidkv_params p = PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
    p.budget = budget;
    return p;
}

/* Brings the library instance to N held positions (untimed). */
static int fill_library(pb_kvcache *p, const fill_rows *f, uint32_t held) {
    unsigned bad = (unsigned)pb_kvcache_reset(p);
    for (uint32_t pos = 1; pos < held - OBSERVED_STEPS; ++pos)
        bad |= (unsigned)pb_kvcache_observe(p, pos, NULL, 0);
    for (unsigned k = 0; k < OBSERVED_STEPS; ++k)
        bad |= (unsigned)pb_kvcache_observe(p, held - OBSERVED_STEPS + k,
                                            f->rows[k], f->len[k]);
    return bad || pb_kvcache_kept_count(p) != held;
}

static int fill_reference(ref_policy *r, const fill_rows *f, uint32_t held) {
    ref_reset(r);
    unsigned bad = 0;
    for (uint32_t pos = 1; pos < held - OBSERVED_STEPS; ++pos)
        bad |= (unsigned)ref_observe(r, pos, NULL, 0);
    for (unsigned k = 0; k < OBSERVED_STEPS; ++k)
        bad |= (unsigned)ref_observe(r, held - OBSERVED_STEPS + k, f->rows[k],
                                     f->len[k]);
    return bad || r->kept != held;
}

static int same_victims(const uint32_t *a, size_t na, const uint32_t *b,
                        size_t nb, const compaction_case *c, const char *who) {
    if (na != nb)
        return bench_fail(NAME, "%u -> %u: %s evicted %zu, the library's "
                                "first run %zu",
                          (unsigned)c->held, (unsigned)c->budget, who, nb, na);
    for (size_t i = 0; i < na; ++i)
        if (a[i] != b[i])
            return bench_fail(NAME, "%u -> %u: victim #%zu: %s %u, the "
                                    "library's first run %u",
                              (unsigned)c->held, (unsigned)c->budget, i, who,
                              (unsigned)b[i], (unsigned)a[i]);
    return 0;
}

static int bench_case(const compaction_case *c, uint64_t seed,
                      const bench_options *opt) {
    fill_rows rows;
    if (rows_make(&rows, c->held, seed))
        return bench_fail(NAME, "out of memory for the attention rows");

    const pb_kvcache_pyramidkv_params params = params_for(c->budget);
    pb_kvcache_options options = PB_KVCACHE_OPTIONS_DEFAULT;
    options.capacity = c->held;
    pb_kvcache *lib = NULL;
    ref_policy ref;
    memset(&ref, 0, sizeof ref);
    const unsigned runs = opt->warmup + opt->reps;
    uint32_t *expect = malloc((size_t)c->held * sizeof *expect);
    uint32_t *got = malloc((size_t)c->held * sizeof *got);
    /* seconds per call; the reference's may hold fewer runs (ref_runs) */
    bench_series tm;
    const int no_series = bench_series_alloc(&tm, runs);
    double *lib_s = tm.v[0], *ref_s = tm.v[1];
    double *lib_c = tm.v[2], *ref_c = tm.v[3];
    size_t n_expect = 0;
    int rc = 0;
    pb_status st;
    if (!expect || !got || no_series) {
        rc = bench_fail(NAME, "out of memory");
        goto done;
    }
    if ((st = pb_kvcache_pyramidkv_create(&params, &options, NULL, &lib)) !=
        PB_OK) {
        rc = bench_fail(NAME, "library create: %s", pb_status_str(st));
        goto done;
    }
    if ((st = ref_create(&ref, &params, &options)) != PB_OK) {
        rc = bench_fail(NAME, "reference create: %s", pb_status_str(st));
        goto done;
    }

    for (unsigned r = 0; r < runs; ++r) {
        if (fill_library(lib, &rows, c->held)) {
            rc = bench_fail(NAME, "library fill failed");
            goto done;
        }
        size_t n = 0;
        const double c0 = bench_cpu_now();
        const double t0 = bench_now();
        st = pb_kvcache_evict(lib, c->budget, r == 0 ? expect : got,
                              c->held, &n);
        const double t1 = bench_now();
        lib_c[r] = bench_cpu_now() - c0;
        if (st != PB_OK || pb_kvcache_kept_count(lib) != c->budget) {
            rc = bench_fail(NAME, "library evict: %s, %zu held",
                            pb_status_str(st), pb_kvcache_kept_count(lib));
            goto done;
        }
        if (r == 0) {
            n_expect = n;
        } else if ((rc = same_victims(expect, n_expect, got, n, c,
                                      "library run")) != 0) {
            goto done;
        }
        lib_s[r] = t1 - t0;
    }

    unsigned ref_runs = 0, ref_warm = opt->warmup;
    for (unsigned r = 0; r < runs; ++r) {
        if (fill_reference(&ref, &rows, c->held)) {
            rc = bench_fail(NAME, "reference fill failed");
            goto done;
        }
        size_t n = 0;
        const double c0 = bench_cpu_now();
        const double t0 = bench_now();
        st = ref_evict(&ref, c->budget, got, c->held, &n);
        const double t1 = bench_now();
        ref_c[ref_runs] = bench_cpu_now() - c0;
        if (st != PB_OK || ref.kept != c->budget) {
            rc = bench_fail(NAME, "reference evict: %s", pb_status_str(st));
            goto done;
        }
        if ((rc = same_victims(expect, n_expect, got, n, c, "reference")) != 0)
            goto done;
        ref_s[ref_runs++] = t1 - t0;
        if (r == 0 && t1 - t0 > REF_SLOW_SECONDS) {
            ref_warm = 0;
            break;
        }
    }

    char note[96] = "";
    if (ref_warm == 0 && opt->warmup)
        snprintf(note, sizeof note,
                 ", measured once without warm-up: one call took over %.0f s",
                 REF_SLOW_SECONDS);
    bench_series_stats_other(&tm, opt, ref_warm, ref_runs - ref_warm);
    const bench_stats l = tm.st[0], f = tm.st[1], lc = tm.st[2], fc = tm.st[3];
    printf("hold %6u -> evict(%u): library %9.3f ms [%.3f - %.3f] (%u rep%s) "
           "| reference %9.3f ms [%.3f - %.3f] (%zu rep%s%s) | ratio %.1fx | "
           "victims identical (%zu)\n",
           (unsigned)c->held, (unsigned)c->budget, l.median * 1e3,
           l.min * 1e3, l.max * 1e3, opt->reps, opt->reps == 1 ? "" : "s", f.median * 1e3, f.min * 1e3,
           f.max * 1e3, f.count, f.count == 1 ? "" : "s",
           note,
           f.median / l.median, n_expect);
    printf("   thread CPU time: library %9.3f ms [%.3f - %.3f] | reference "
           "%9.3f ms [%.3f - %.3f] | ratio %.1fx\n",
           lc.median * 1e3, lc.min * 1e3, lc.max * 1e3, fc.median * 1e3,
           fc.min * 1e3, fc.max * 1e3, fc.median / lc.median);
    fflush(stdout);

done:
    free(expect);
    free(got);
    bench_series_free(&tm);
    ref_destroy(&ref);
    pb_kvcache_destroy(lib);
    rows_free(&rows);
    return rc;
}

int main(int argc, char **argv) {
    bench_options opt;
    int rc = bench_parse_common(&argc, argv, 5,
                                " [--seed S] [--case N:B]...", &opt);
    if (rc) {
        return rc == 1 ? 0 : 2;
    }
    uint32_t seed = 7;
    compaction_case cases[8];
    size_t n_cases = 0;
    for (int i = 1; i < argc; ++i) {
        uint32_t v = 0, held = 0, budget = 0;
        const int has = i + 1 < argc;
        char buf[64];
        if (strcmp(argv[i], "--seed") == 0 && has &&
            !bench_parse_u32(argv[i + 1], 0, UINT32_MAX, &v)) {
            seed = v;
        } else if (strcmp(argv[i], "--case") == 0 && has && n_cases < 8 &&
                   strlen(argv[i + 1]) < sizeof buf &&
                   strchr(argv[i + 1], ':') != NULL) {
            strcpy(buf, argv[i + 1]);
            char *colon = strchr(buf, ':');
            *colon = '\0';
            if (bench_parse_u32(buf, 64, 1u << 26, &held) ||
                bench_parse_u32(colon + 1, 33, held - 1, &budget)) {
                fprintf(stderr, "%s: --case wants N:B with 64 <= N <= 2^26 "
                                "and 33 <= B < N\n", NAME);
                return 2;
            }
            cases[n_cases].held = held;
            cases[n_cases].budget = budget;
            ++n_cases;
        } else {
            fprintf(stderr, "%s: bad argument '%s' (see --help)\n", NAME,
                    argv[i]);
            return 2;
        }
        ++i;
    }
    if (n_cases == 0) {
        const compaction_case full[2] = {{32768, 512}, {131072, 2048}};
        const compaction_case quick[2] = {{2048, 64}, {4096, 256}};
        n_cases = 2;
        memcpy(cases, opt.quick ? quick : full, sizeof full);
    }

    bench_print_header(stdout, NAME, &opt);
    printf("setup:    native create with capacity N; positions 1..N-17 "
           "admitted without attention, N-16..N-1 by decode steps with "
           "uniform random attention over all held positions (normalised, "
           "seed %u); untimed\n",
           (unsigned)seed);
    printf("policy:   budget B, layer 0 of 1, recent 32, obs 16, kernel 7\n");
    printf("timing:   the one evict(B) call; %u warm-up + %u timed runs "
           "each; median [min - max] of the wall clock (CLOCK_MONOTONIC), then "
           "of the thread's CPU time; ratio = reference median / library "
           "median\n\n",
           opt.warmup, opt.reps);
    for (size_t i = 0; i < n_cases; ++i)
        if (bench_case(&cases[i], seed, &opt)) return 1;
    return 0;
}
