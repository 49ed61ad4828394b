/*
 * bench_pair.c - two builds of the library in one process, timed in turns
 * over bench_model_shape's instances and weights: how docs/performance.md
 * compares a change with the build before it on a shared, noisy machine,
 * where two separate runs differ by more than most changes do.
 *
 * Each build is a shared library given by its path, loaded with dlopen
 * (RTLD_LOCAL, so that its calls to its own exported functions stay
 * within it) and used only through dlsym: this program does not link the
 * library. Each build gets its own instances (layers x heads, the model
 * shape's shares, recent 32, obs 16, kernel 7, the scorer asked), brought
 * to their share with the same calls; then, after one warm-up block each,
 * blocks of T tokens run in turns, A B A B ..., each timed on the thread's
 * CPU clock, and each A block with the B block after it makes a pair. Each
 * block thus follows one of the other build, whose data have pushed its
 * own out of the caches, the same for both builds (two blocks of the same
 * build in a row, as A B B A would give, make the second of them faster by
 * a fifth at the model shape). A token is one observe on every instance,
 * plus an evict back to the share when an instance holds share + cadence,
 * as in bench_model_shape.
 *
 * Both builds are given exactly the same calls, so both must choose the
 * same victims: every pair compares them, and any difference is an error
 * exit (a changed build that gets a victim wrong is caught here too, not
 * only by the tests).
 *
 * Reported: the median of the pairs' ratios B / A with their quartiles,
 * and each build's median us per token. A ratio below 1 means B is
 * faster. What runs first may still have an edge of its own (where its
 * memory lies, say): docs/performance.md runs each comparison both ways
 * round.
 */
#define _POSIX_C_SOURCE 200809L

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "bench_shape.h"
#include "pyramidkv/pyramidkv.h"

static const char *const NAME = "bench_pair";


/* The functions this program calls, from one build. */
typedef struct build {
    const char *path;
    void *handle;
    pb_status (*create)(const pb_kvcache_config *, const pb_allocator *,
                        pb_kvcache **);
    void (*destroy)(pb_kvcache *);
    pb_status (*observe)(pb_kvcache *, uint32_t, const float *, size_t);
    pb_status (*evict)(pb_kvcache *, uint32_t, uint32_t *, size_t, size_t *);
    uint32_t (*pyramid_budget)(uint32_t, uint32_t, uint32_t, uint32_t);
    const char *(*version_string)(void);
} build;

/* What both builds share: the shape, the weights, the logs' sizes. */
typedef struct pair_config {
    uint32_t layers, heads, budget, ratio, cadence, tokens, scorer, sinks;
    const char *scorer_name; /* as given (NULL: the default, window) */
    size_t n;         /* instances */
    uint32_t *share;  /* [n] */
    uint32_t *rowcap; /* [n] */
    float **pool;     /* [n] BENCH_SHAPE_ROWS rows of rowcap weights */
    size_t log_cap;   /* victims one block may log per instance */
} pair_config;

/* One build's instances and the victims of its last block. */
typedef struct side {
    const build *b;
    pb_kvcache **inst; /* [n] */
    uint32_t *held;    /* [n] */
    uint32_t *log;     /* [n * log_cap] */
    size_t *n_log;     /* [n] */
    uint64_t next;     /* the next token index */
} side;

static const char *const HELP =
    "usage: bench_pair [--quick] [--reps N] [--tokens T] [--cadence C]\n"
    "                  [--layers L] [--heads H] [--budget B] [--ratio R]\n"
    "                  [--scorer S]\n"
    "                  [--sinks S] A.so B.so\n"
    "Times two shared builds of libpyramidkv in turns in one process over\n"
    "bench_model_shape's instances and weights, and checks that they choose\n"
    "the same victims.\n"
    "  A.so, B.so   the two builds (paths; they may be the same file)\n"
    "  --reps N     pairs of timed blocks after one warm-up block each\n"
    "               (default 31, at least 5)\n"
    "  --tokens T   tokens per block (default 8)\n"
    "  --cadence C  evict back to the share every C steps (default 1)\n"
    "  --layers L, --heads H, --budget B, --ratio R\n"
    "               the shape (default 32 x 8 instances, budget 2048,\n"
    "               ratio 4, as bench_model_shape)\n"
    "  --scorer S   the instances' scorer, by its library name\n"
    "               (pb_scorer_from_name; default window)\n"
    "  --sinks S    attention sinks, positions never evicted (default 0)\n"
    "  --quick      a tiny run (4 x 2 instances, budget 256, one pair of\n"
    "               blocks of 32 tokens): victims compared, figures of no\n"
    "               weight\n"
    "Blocks run A B A B ...; each A block and the B block after it are a\n"
    "pair. Prints the median of the pairs' ratios B / A (thread CPU time)\n"
    "with its quartiles and each build's median us per token; run it both\n"
    "ways round (B.so A.so) too.\n"
    "Exit status: 0 success, 1 a failed call or different victims, 2 a\n"
    "usage error or a library that cannot be loaded.\n";

/* dlsym into a function pointer (POSIX guarantees the sizes agree). */
static int symbol(build *b, const char *name, void *fn, size_t size) {
    void *sym = dlsym(b->handle, name);
    if (sym == NULL || size != sizeof sym) {
        fprintf(stderr, "%s: %s has no %s\n", NAME, b->path, name);
        return 1;
    }
    memcpy(fn, &sym, size);
    return 0;
}

static int load(build *b, const char *path) {
    b->path = path;
    b->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (b->handle == NULL) {
        fprintf(stderr, "%s: cannot load %s: %s\n", NAME, path, dlerror());
        return 1;
    }
    return symbol(b, "pb_kvcache_create", &b->create, sizeof b->create) ||
           symbol(b, "pb_kvcache_destroy", &b->destroy, sizeof b->destroy) ||
           symbol(b, "pb_kvcache_observe", &b->observe, sizeof b->observe) ||
           symbol(b, "pb_kvcache_evict", &b->evict, sizeof b->evict) ||
           symbol(b, "pb_kvcache_pyramid_budget", &b->pyramid_budget,
                  sizeof b->pyramid_budget) ||
           symbol(b, "pb_version_string", &b->version_string,
                  sizeof b->version_string);
}

/* The scorer named on the command line, by the names of the first build
 * that has pb_scorer_from_name (B, then A: a build before 0.3 has none). */
static int scorer_of(pair_config *c, const build *b) {
    if (c->scorer_name == NULL) {
        c->scorer_name = "window";
        return 0;
    }
    for (int i = 1; i >= 0; --i) {
        void *sym = dlsym(b[i].handle, "pb_scorer_from_name");
        if (sym == NULL) continue;
        pb_status (*from_name)(const char *, uint32_t *);
        memcpy(&from_name, &sym, sizeof sym);
        if (from_name(c->scorer_name, &c->scorer) == PB_OK) return 0;
        fprintf(stderr, "%s: --scorer: '%s' is not a scorer of %s (see "
                "--help)\n", NAME, c->scorer_name, b[i].path);
        return 2;
    }
    fprintf(stderr, "%s: --scorer needs a build with pb_scorer_from_name\n",
            NAME);
    return 2;
}

static const float *row_of(const pair_config *c, size_t i, uint64_t k) {
    return bench_shape_row(c->pool[i], c->rowcap[i], k);
}

/* The shares (from build A, checked against B), rows and weights. */
static int config_init(pair_config *c, const build *a, const build *b) {
    c->n = (size_t)c->layers * c->heads;
    c->share = calloc(c->n, sizeof *c->share);
    c->rowcap = calloc(c->n, sizeof *c->rowcap);
    c->pool = calloc(c->n, sizeof *c->pool);
    if (c->share == NULL || c->rowcap == NULL || c->pool == NULL)
        return bench_fail(NAME, "out of memory");
    for (size_t i = 0; i < c->n; ++i) {
        const uint32_t layer = (uint32_t)(i / c->heads);
        const uint32_t s =
            a->pyramid_budget(c->budget, layer, c->layers, c->ratio);
        if (s != b->pyramid_budget(c->budget, layer, c->layers, c->ratio))
            return bench_fail(NAME, "the builds give layer %u different "
                                    "shares", (unsigned)layer);
        c->share[i] = bench_shape_steady(s);
        c->rowcap[i] = bench_shape_rowcap(c->share[i], c->cadence);
        c->pool[i] = bench_alloc((size_t)BENCH_SHAPE_ROWS * c->rowcap[i] *
                                 sizeof(float));
        if (c->pool[i] == NULL) return 1;
        bench_shape_fill(c->pool[i], c->rowcap[i], (uint32_t)(i % c->heads),
                         layer);
    }
    c->log_cap = (size_t)c->tokens + c->cadence;
    return 0;
}

static void config_free(pair_config *c) {
    for (size_t i = 0; c->pool != NULL && i < c->n; ++i)
        bench_free(c->pool[i]);
    free(c->pool);
    free(c->rowcap);
    free(c->share);
}

static void side_free(side *s, size_t n) {
    for (size_t i = 0; s->inst != NULL && i < n; ++i)
        if (s->inst[i] != NULL) s->b->destroy(s->inst[i]);
    free(s->inst);
    free(s->held);
    free(s->log);
    free(s->n_log);
}

/* Creates the build's instances and brings each to its share with the
 * calls bench_model_shape makes (bench_shape.h). */
static int side_init(side *s, const build *b, const pair_config *c) {
    memset(s, 0, sizeof *s);
    s->b = b;
    s->inst = calloc(c->n, sizeof *s->inst);
    s->held = calloc(c->n, sizeof *s->held);
    s->log = malloc(c->n * c->log_cap * sizeof *s->log);
    s->n_log = calloc(c->n, sizeof *s->n_log);
    if (!s->inst || !s->held || !s->log || !s->n_log)
        return bench_fail(NAME, "out of memory");
    for (size_t i = 0; i < c->n; ++i) {
        pb_kvcache_config k = PB_KVCACHE_CONFIG_DEFAULT;
        k.budget = c->budget;
        k.layer = (uint32_t)(i / c->heads);
        k.num_layers = c->layers;
        k.pyramid_ratio = c->ratio;
        k.capacity = c->cadence > 1u ? c->share[i] + c->cadence : 0u;
        k.scorer = c->scorer;
        k.sinks = c->sinks;
        if (b->create(&k, NULL, &s->inst[i]) != PB_OK)
            return bench_fail(NAME, "%s: create failed (layer %u)", b->path,
                              (unsigned)k.layer);
        uint32_t held = 1;
        for (uint32_t pos = 1; pos < c->share[i]; ++pos, ++held) {
            const int observed =
                pos + BENCH_SHAPE_FILL_OBSERVED >= c->share[i];
            if (b->observe(s->inst[i], pos,
                           observed ? row_of(c, i, pos) : NULL,
                           held) != PB_OK)
                return bench_fail(NAME, "%s: a fill observe failed",
                                  b->path);
        }
        s->held[i] = held;
    }
    return 0;
}

/* One block of c->tokens tokens; returns the thread's CPU seconds, or a
 * negative value if a call failed. */
static double run_block(side *s, const pair_config *c) {
    const build *b = s->b;
    unsigned bad = 0u;
    memset(s->n_log, 0, c->n * sizeof *s->n_log);
    const double t0 = bench_cpu_now();
    for (uint32_t t = 0; t < c->tokens; ++t, ++s->next) {
        const uint32_t pos = (uint32_t)bench_shape_pos(c->share[0], s->next);
        for (size_t i = 0; i < c->n; ++i) {
            bad |= (unsigned)b->observe(s->inst[i], pos,
                                        row_of(c, i, s->next), s->held[i]);
            s->held[i] += 1u;
            if (s->held[i] - c->share[i] >= c->cadence) {
                size_t nv = 0;
                uint32_t *log = s->log + i * c->log_cap;
                bad |= (unsigned)b->evict(s->inst[i], c->share[i],
                                          log + s->n_log[i],
                                          c->log_cap - s->n_log[i], &nv);
                s->n_log[i] += nv;
                s->held[i] -= (uint32_t)nv;
            }
        }
    }
    const double dt = bench_cpu_now() - t0;
    return bad ? -1.0 : dt;
}

/* The victims of the two sides' last blocks: 0 if the same. */
static int same_victims(const side *a, const side *b, const pair_config *c,
                        size_t *count) {
    for (size_t i = 0; i < c->n; ++i) {
        if (a->n_log[i] != b->n_log[i] ||
            memcmp(a->log + i * c->log_cap, b->log + i * c->log_cap,
                   a->n_log[i] * sizeof *a->log) != 0)
            return bench_fail(NAME, "instance %zu (layer %u): the builds "
                                    "chose different victims", i,
                              (unsigned)(i / c->heads));
        *count += a->n_log[i];
    }
    return 0;
}

/* Quartiles of v[0 .. n-1] (sorted in place). */
static void quartiles(double *v, size_t n, double q[3]) {
    const bench_stats st = bench_stats_of(v, n);
    q[0] = v[n / 4];
    q[1] = st.median;
    q[2] = v[(3 * n) / 4 < n ? (3 * n) / 4 : n - 1];
}

/* Reports a usage error on stderr; returns 2 for `return`. */
static int usage_error(const char *what, const char *arg) {
    fprintf(stderr, "%s: %s%s%s (see --help)\n", NAME, what,
            arg != NULL ? " " : "", arg != NULL ? arg : "");
    return 2;
}

/* The numeric flags: where each goes and the values it takes. */
typedef struct count_flag {
    const char *name;
    size_t offset; /* of its uint32_t in pair_config */
    uint32_t lo, hi;
} count_flag;

static const count_flag COUNT_FLAGS[] = {
    {"--tokens", offsetof(pair_config, tokens), 1u, 1u << 24},
    {"--cadence", offsetof(pair_config, cadence), 1u, 4096u},
    {"--layers", offsetof(pair_config, layers), 1u, 1u << 24},
    {"--heads", offsetof(pair_config, heads), 1u, 1u << 24},
    {"--budget", offsetof(pair_config, budget), 33u, 1u << 24},
    {"--ratio", offsetof(pair_config, ratio), 1u, 1u << 24},
    {"--sinks", offsetof(pair_config, sinks), 0u, 1u << 24},
};
#define N_COUNT_FLAGS (sizeof COUNT_FLAGS / sizeof COUNT_FLAGS[0])

static int parse(int argc, char **argv, pair_config *c, const char **paths) {
    size_t n_paths = 0;
    for (int i = 1; i < argc; ++i) {
        const char *f = argv[i];
        if (strncmp(f, "--", 2) != 0) {
            if (n_paths == 2) return usage_error("a third build:", f);
            paths[n_paths++] = f;
            continue;
        }
        if (i + 1 >= argc) return usage_error("no value for", f);
        const char *v = argv[++i];
        if (strcmp(f, "--scorer") == 0) {
            c->scorer_name = v; /* read by a build's pb_scorer_from_name */
            continue;
        }
        size_t k = 0;
        while (k < N_COUNT_FLAGS && strcmp(f, COUNT_FLAGS[k].name) != 0) ++k;
        if (k == N_COUNT_FLAGS) return usage_error("unknown flag", f);
        const count_flag *cf = &COUNT_FLAGS[k];
        uint32_t value = 0;
        if (bench_parse_u32(v, cf->lo, cf->hi, &value)) {
            fprintf(stderr, "%s: %s takes %u .. %u, not %s (see --help)\n",
                    NAME, f, (unsigned)cf->lo, (unsigned)cf->hi, v);
            return 2;
        }
        memcpy((char *)c + cf->offset, &value, sizeof value);
    }
    if (n_paths != 2)
        return usage_error("give two builds, A.so and B.so", NULL);
    return 0;
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; ++i)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(HELP, stdout);
            return 0;
        }
    bench_options opt;
    if (bench_parse_common(&argc, argv, 31, NULL, &opt)) return 2;
    pair_config c;
    memset(&c, 0, sizeof c);
    c.layers = opt.quick ? 4u : 32u;
    c.heads = opt.quick ? 2u : 8u;
    c.budget = opt.quick ? 256u : 2048u;
    c.ratio = 4u;
    c.cadence = 1u;
    c.tokens = opt.quick ? 32u : 8u;
    c.scorer = (uint32_t)PB_SCORER_WINDOW;
    const char *paths[2] = {NULL, NULL};
    int rc = parse(argc, argv, &c, paths);
    if (rc) return rc;

    build builds[2];
    memset(builds, 0, sizeof builds);
    if (load(&builds[0], paths[0]) || load(&builds[1], paths[1])) return 2;
    rc = scorer_of(&c, builds);
    if (rc) return rc;
    printf("== %s\n", NAME);
    bench_print_machine(stdout);
    printf("A:        %s (libpyramidkv %s)\nB:        %s (libpyramidkv "
           "%s)\ncommand:  %s\n",
           paths[0], builds[0].version_string(), paths[1],
           builds[1].version_string(), opt.command);

    side sides[2];
    memset(sides, 0, sizeof sides);
    double *ratio = NULL, *us[2] = {NULL, NULL};
    const size_t pairs = opt.reps;
    rc = config_init(&c, &builds[0], &builds[1]);
    if (rc == 0) rc = side_init(&sides[0], &builds[0], &c);
    if (rc == 0) rc = side_init(&sides[1], &builds[1], &c);
    ratio = malloc(pairs * sizeof *ratio);
    us[0] = malloc(pairs * sizeof *ratio);
    us[1] = malloc(pairs * sizeof *ratio);
    if (rc == 0 && (!ratio || !us[0] || !us[1]))
        rc = bench_fail(NAME, "out of memory");
    if (rc == 0)
        printf("shape:    %u layers x %u KV heads = %zu instances, budget %u, "
               "ratio %u, recent 32, obs 16, kernel 7, scorer %s, sinks %u, "
               "cadence %u\ntiming:   %u warm-up + %zu pairs of blocks of %u tokens, "
               "A B A B ...; thread CPU time\n\n",
               (unsigned)c.layers, (unsigned)c.heads, c.n,
               (unsigned)c.budget, (unsigned)c.ratio, c.scorer_name,
               (unsigned)c.sinks, (unsigned)c.cadence, opt.warmup, pairs, (unsigned)c.tokens);

    size_t victims = 0;
    for (size_t p = 0; rc == 0 && p < opt.warmup + pairs; ++p) {
        double t[2];
        t[0] = run_block(&sides[0], &c);
        t[1] = run_block(&sides[1], &c);
        if (t[0] < 0.0 || t[1] < 0.0) {
            rc = bench_fail(NAME, "a library call failed");
            break;
        }
        rc = same_victims(&sides[0], &sides[1], &c, &victims);
        if (rc != 0 || p < opt.warmup) continue;
        const size_t q = p - opt.warmup;
        ratio[q] = t[1] / t[0];
        us[0][q] = t[0] / c.tokens * 1e6;
        us[1][q] = t[1] / c.tokens * 1e6;
    }
    if (rc == 0) {
        double r[3];
        quartiles(ratio, pairs, r);
        const bench_stats sa = bench_stats_of(us[0], pairs);
        const bench_stats sb = bench_stats_of(us[1], pairs);
        printf("B / A     %.3f [quartiles %.3f - %.3f] over %zu pairs\n",
               r[1], r[0], r[2], pairs);
        printf("us/token  A %.4g [%.4g - %.4g] | B %.4g [%.4g - %.4g] "
               "(medians [min - max])\n"
               "victims   identical in both builds (%zu)\n",
               sa.median, sa.min, sa.max, sb.median, sb.min, sb.max, victims);
    }
    free(ratio);
    free(us[0]);
    free(us[1]);
    side_free(&sides[1], c.n);
    side_free(&sides[0], c.n);
    config_free(&c);
    /* The libraries stay loaded: nothing of theirs runs at exit. */
    return rc;
}
