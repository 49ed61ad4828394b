/*
 * bench_common.h - what every benchmark program in bench/ shares: the
 * monotonic clock, median/min/max of repetitions, the machine and compiler
 * line, the reproduce line, command-line parsing of the common flags and a
 * small deterministic random generator.
 *
 * It owns no benchmark itself and is not part of the library; the library is
 * used only through <pyramidkv/pyramidkv.h>, the reference model only
 * through tests/reference_model.h. Everything here but bench_print_header
 * (bench_header.c) is in bench_common.c, which calls nothing of the
 * library.
 */
#ifndef PB_BENCH_COMMON_H
#define PB_BENCH_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Seconds on CLOCK_MONOTONIC, from an arbitrary origin. */
double bench_now(void);

/* Seconds of CPU time consumed by the calling thread
 * (CLOCK_THREAD_CPUTIME_ID). Reported next to the wall clock: on a shared
 * machine it leaves out the time the thread waited for a CPU. */
double bench_cpu_now(void);

/* Summary of a set of repetitions. */
typedef struct bench_stats {
    double median; /* the middle value; the mean of the two middle ones for
                      an even count */
    double min;
    double max;
    size_t count;
} bench_stats;

/* Summarises values[0 .. n-1] (n >= 1). Sorts `values` in place. */
bench_stats bench_stats_of(double *values, size_t n);

/* Options every benchmark accepts. */

typedef struct bench_options {
    int quick;       /* --quick: a tiny correctness run, one repetition */
    unsigned reps;   /* --reps N: timed repetitions after the warm-up */
    unsigned warmup; /* warm-up repetitions (1, 0 in --quick) */
    char command[1024]; /* the command line as given, for the banner
                           (arguments past its size are cut, marked "...") */
} bench_options;

/* Four series of figures, one value per run (warm-up runs first); st[k]
 * summarises v[k] once bench_series_stats has run. A comparison of the
 * library with another side holds the library's and the other's figures
 * by the wall clock in v[0] and v[1], by thread CPU time in v[2], v[3]. */
typedef struct bench_series {
    double *v[4];
    bench_stats st[4];
} bench_series;

/* Allocates the four series of `runs` values: 0, or -1 with none held. */
int bench_series_alloc(bench_series *s, size_t runs);
/* st[k] = bench_stats_of the timed repetitions of v[k] (after the
 * warm-up); sorts them in place. */
void bench_series_stats(bench_series *s, const bench_options *opt);
/* The same where the other side timed other_n runs from index other_first
 * (v[1], v[3]) and the library opt->reps after the warm-up (v[0], v[2]). */
void bench_series_stats_other(bench_series *s, const bench_options *opt,
                              size_t other_first, size_t other_n);
void bench_series_free(bench_series *s);

/* Parses --quick, --reps N and --help out of argv, leaving the flags it
 * does not know in argv (compacted, *argc updated) for the program's own
 * parser. `usage_extra` is printed after the common flags by --help.
 * Returns 0 to go on, 1 if --help was printed (exit 0), 2 on a usage error
 * (already reported on stderr). reps defaults to default_reps and must be
 * >= 5 unless --quick. */
int bench_parse_common(int *argc, char **argv, unsigned default_reps,
                       const char *usage_extra, bench_options *opt);

/* Parses a decimal uint32 in [lo, hi]; returns 0 on success. */
int bench_parse_u32(const char *text, uint32_t lo, uint32_t hi,
                    uint32_t *out);

/* Prints the machine line (CPU model, online CPUs) and the compiler line
 * (__VERSION__). */
void bench_print_machine(FILE *out);

/* Prints the banner: benchmark name, the machine line (CPU model, online
 * CPUs), the compiler line (__VERSION__, build type and C flags of this
 * build, which the library and the reference share), the library version
 * and the command that reproduces the run (opt->command). */
void bench_print_header(FILE *out, const char *name, const bench_options *opt);

/* A splitmix64 generator: deterministic across platforms. */
typedef struct bench_rng {
    uint64_t state;
} bench_rng;

uint64_t bench_rng_next(bench_rng *rng);
/* A uniform double in [0, 1) with 53 random bits. */
double bench_rng_unit(bench_rng *rng);
/* Mixes the words into one well-spread 64-bit value (stateless). */
uint64_t bench_hash3(uint64_t a, uint64_t b, uint64_t c);

/* Prints "bench_xxx: FAIL: <message>" on stderr; returns 1 for `return`. */
int bench_fail(const char *name, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Allocates n bytes aligned to 64 or reports and returns NULL. */
void *bench_alloc(size_t n);
void bench_free(void *p);

#endif /* PB_BENCH_COMMON_H */
