/*
 * bench_common.c - the shared helpers of the benchmark programs (see
 * bench_common.h): clock, statistics, the machine lines, flags and random
 * numbers. It calls nothing of the library (bench_header.c prints the
 * banner that does), so bench_pair, which loads two builds of the library
 * itself, can use it.
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_common.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double bench_cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

bench_stats bench_stats_of(double *values, size_t n) {
    bench_stats s = {0.0, 0.0, 0.0, n};
    if (n == 0) return s;
    qsort(values, n, sizeof *values, cmp_double);
    s.min = values[0];
    s.max = values[n - 1];
    s.median = n % 2 ? values[n / 2]
                     : 0.5 * (values[n / 2 - 1] + values[n / 2]);
    return s;
}

int bench_series_alloc(bench_series *s, size_t runs) {
    int ok = 1;
    for (int k = 0; k < 4; ++k) {
        s->v[k] = malloc(runs * sizeof *s->v[k]);
        ok = ok && s->v[k] != NULL;
    }
    if (ok) return 0;
    bench_series_free(s);
    return -1;
}

void bench_series_stats(bench_series *s, const bench_options *opt) {
    bench_series_stats_other(s, opt, opt->warmup, opt->reps);
}

void bench_series_stats_other(bench_series *s, const bench_options *opt,
                              size_t other_first, size_t other_n) {
    for (int k = 0; k < 4; ++k)
        s->st[k] = k % 2 == 0
                       ? bench_stats_of(s->v[k] + opt->warmup, opt->reps)
                       : bench_stats_of(s->v[k] + other_first, other_n);
}

void bench_series_free(bench_series *s) {
    for (int k = 0; k < 4; ++k) {
        free(s->v[k]);
        s->v[k] = NULL;
    }
}

int bench_parse_u32(const char *text, uint32_t lo, uint32_t hi,
                    uint32_t *out) {
    char *end = NULL;
    if (text == NULL || *text < '0' || *text > '9') return 1;
    unsigned long long v = strtoull(text, &end, 10);
    if (*end != '\0' || v < lo || v > hi) return 1;
    *out = (uint32_t)v;
    return 0;
}

/* Joins argv with spaces into out, before the parser compacts argv. */
static void record_command(char *out, size_t size, int argc, char **argv) {
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < argc; ++i) {
        const size_t len = strlen(argv[i]);
        if (used + len + 2u + 4u > size) {
            memcpy(out + used, " ...", 5u);
            return;
        }
        if (i > 0) out[used++] = ' ';
        memcpy(out + used, argv[i], len + 1u);
        used += len;
    }
}

int bench_parse_common(int *argc, char **argv, unsigned default_reps,
                       const char *usage_extra, bench_options *opt) {
    opt->quick = 0;
    opt->reps = default_reps;
    opt->warmup = 1;
    record_command(opt->command, sizeof opt->command, *argc, argv);
    int reps_given = 0, w = 1;
    for (int i = 1; i < *argc; ++i) {
        if (strcmp(argv[i], "--quick") == 0) {
            opt->quick = 1;
        } else if (strcmp(argv[i], "--reps") == 0) {
            uint32_t v = 0;
            if (i + 1 >= *argc || bench_parse_u32(argv[i + 1], 1, 1000, &v)) {
                fprintf(stderr, "%s: --reps needs a count 1..1000\n", argv[0]);
                return 2;
            }
            opt->reps = v;
            reps_given = 1;
            ++i;
        } else if (strcmp(argv[i], "--help") == 0 ||
                   strcmp(argv[i], "-h") == 0) {
            printf("usage: %s [--quick] [--reps N]%s\n"
                   "  --quick   a tiny correctness run (library vs "
                   "reference), one repetition\n"
                   "  --reps N  timed repetitions after one warm-up "
                   "(default %u, at least 5)\n",
                   argv[0], usage_extra ? usage_extra : "", default_reps);
            return 1;
        } else {
            argv[w++] = argv[i];
        }
    }
    *argc = w;
    argv[w] = NULL;
    if (opt->quick) {
        opt->warmup = 0;
        if (!reps_given) opt->reps = 1;
    } else if (opt->reps < 5) {
        fprintf(stderr, "%s: --reps must be at least 5 (or use --quick)\n",
                argv[0]);
        return 2;
    }
    return 0;
}

/* The "model name" line of /proc/cpuinfo (Linux), or "unknown". */
static void cpu_model(char *buf, size_t cap) {
    snprintf(buf, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL) return;
    char line[512];
    char family[32] = "", model[32] = "";
    int have_name = 0;
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (colon == NULL) continue;
        char *value = colon + 1;
        while (*value == ' ' || *value == '\t') ++value;
        value[strcspn(value, "\n")] = '\0';
        if (!have_name && strncmp(line, "model name", 10) == 0) {
            snprintf(buf, cap, "%s", value);
            have_name = 1;
        } else if (family[0] == '\0' && strncmp(line, "cpu family", 10) == 0) {
            snprintf(family, sizeof family, "%s", value);
        } else if (model[0] == '\0' && strncmp(line, "model\t", 6) == 0) {
            snprintf(model, sizeof model, "%s", value);
        }
        if (have_name && family[0] && model[0]) break;
    }
    fclose(f);
    if (family[0] && model[0]) {
        size_t len = strlen(buf);
        snprintf(buf + len, cap - len, " (family %s, model %s)", family,
                 model);
    }
}

void bench_print_machine(FILE *out) {
    char cpu[256];
    cpu_model(cpu, sizeof cpu);
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    fprintf(out, "machine:  %s, %ld online CPUs\n", cpu, online);
#if defined(__VERSION__)
    fprintf(out, "compiler: %s %s\n",
#  if defined(__clang__)
            "clang",
#  elif defined(__GNUC__)
            "gcc",
#  else
            "cc",
#  endif
            __VERSION__);
#endif
}

uint64_t bench_rng_next(bench_rng *rng) {
    uint64_t z = (rng->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double bench_rng_unit(bench_rng *rng) {
    return (double)(bench_rng_next(rng) >> 11) * 0x1.0p-53;
}

uint64_t bench_hash3(uint64_t a, uint64_t b, uint64_t c) {
    bench_rng r = {a * 0xD6E8FEB86659FD93ull ^ b};
    (void)bench_rng_next(&r);
    r.state ^= c * 0x9E3779B97F4A7C15ull;
    return bench_rng_next(&r);
}

int bench_fail(const char *name, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: FAIL: ", name);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return 1;
}

void *bench_alloc(size_t n) {
    const size_t rounded = (n + 63u) / 64u * 64u;
    void *p = aligned_alloc(64, rounded ? rounded : 64u);
    if (p == NULL)
        fprintf(stderr, "bench: out of memory (%zu bytes)\n", rounded);
    return p;
}

void bench_free(void *p) { free(p); }
