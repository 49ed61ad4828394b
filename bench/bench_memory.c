/*
 * bench_memory.c - engine benchmark 4 (docs/performance.md): bytes per held
 * position and per instance at obs_window 4, 16 and 64 (budget 512, recent
 * 32, kernel 7).
 *
 * For each obs_window and a few capacities it reads the sizing query
 * (pb_kvcache_pyramidkv_size), creates the instance through a counting
 * allocator and checks that the query, the bytes the allocator handed out
 * and pb_kvcache_memory_bytes all agree; any difference is an error exit.
 * The cost per held position is the slope of the size over capacity (the
 * capacity is what the instance can hold, so it is what memory is reserved
 * for); the cost per instance is what is left at capacity 0 of that line.
 *
 * It also runs a short decision check per obs_window: the library and the
 * reference model fill a 1,024-position instance with decode steps and
 * evict to 512, and must choose the same victims.
 *
 * The same is then measured for every scorer of the native surface
 * (pb_kvcache_create) and every vtable of the policybook family, against
 * the registry's bytes per held position (H2O and TOVA 13, Scissorhands 9,
 * StreamingLLM and the sliding window 4): the slope over explicit
 * capacities (any eviction cadence: evicting every k steps needs a capacity
 * of budget + k) and over the vtables' budgets (their capacity is budget +
 * 1). A scorer above its limit is an error exit. Each vtable's decisions
 * are checked against the naive reference of bench/workload.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "bench_family_params.h"
#include "pyramidkv/pyramidkv.h"
#include "reference_model.h"
#include "workload_family_ref.h"

static const char *const NAME = "bench_memory";

/* Counts what the library asks for and checks the sizes given back. */
typedef struct counting_alloc {
    size_t live;   /* bytes allocated and not yet freed */
    size_t total;  /* bytes allocated since the last reset */
    size_t calls;  /* alloc calls since the last reset */
    int bad_free;  /* a free whose size did not match its alloc */
} counting_alloc;

typedef struct count_header {
    size_t n;
    size_t pad[7]; /* keeps the caller's block 64-byte aligned */
} count_header;

static void *count_alloc(void *ctx, size_t n) {
    counting_alloc *c = ctx;
    count_header *h = aligned_alloc(64, (sizeof *h + n + 63u) / 64u * 64u);
    if (h == NULL) return NULL;
    h->n = n;
    c->live += n;
    c->total += n;
    c->calls += 1;
    return h + 1;
}

static void count_free(void *ctx, void *p, size_t n) {
    counting_alloc *c = ctx;
    if (p == NULL) return;
    count_header *h = (count_header *)p - 1;
    if (h->n != n) c->bad_free = 1;
    c->live -= h->n;
    free(h);
}

static pb_kvcache_pyramidkv_params params_for(uint32_t obs) {
    pb_kvcache_pyramidkv_params p = PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
    p.obs_window = obs;
    return p;
}

/* Size query, counted allocation and memory_bytes for one configuration;
 * all three must agree and free must give everything back. */
static int measure(uint32_t obs, uint32_t capacity, size_t *bytes) {
    const pb_kvcache_pyramidkv_params params = params_for(obs);
    pb_kvcache_options options = PB_KVCACHE_OPTIONS_DEFAULT;
    options.capacity = capacity;
    size_t query = 0;
    pb_status st = pb_kvcache_pyramidkv_size(&params, &options, &query);
    if (st != PB_OK)
        return bench_fail(NAME, "size query (obs %u, capacity %u): %s",
                          (unsigned)obs, (unsigned)capacity,
                          pb_status_str(st));
    counting_alloc counter = {0, 0, 0, 0};
    const pb_allocator alloc = {count_alloc, count_free, &counter};
    pb_kvcache *p = NULL;
    st = pb_kvcache_pyramidkv_create(&params, &options, &alloc, &p);
    if (st != PB_OK)
        return bench_fail(NAME, "create (obs %u, capacity %u): %s",
                          (unsigned)obs, (unsigned)capacity,
                          pb_status_str(st));
    const size_t reported = pb_kvcache_memory_bytes(p);
    pb_kvcache_destroy(p);
    if (counter.total != query || reported != query)
        return bench_fail(NAME, "obs %u, capacity %u: size query %zu, "
                                "allocated %zu, memory_bytes %zu",
                          (unsigned)obs, (unsigned)capacity, query,
                          counter.total, reported);
    if (counter.live != 0 || counter.bad_free)
        return bench_fail(NAME, "obs %u, capacity %u: destroy left %zu bytes "
                                "or freed with a wrong size",
                          (unsigned)obs, (unsigned)capacity, counter.live);
    *bytes = query;
    return 0;
}

/* Library and reference choose the same victims at this obs_window. */
static int check_decisions(uint32_t obs) {
    enum { HELD = 1024, KEEP = 512 };
    const pb_kvcache_pyramidkv_params params = params_for(obs);
    pb_kvcache_options options = PB_KVCACHE_OPTIONS_DEFAULT;
    options.capacity = HELD;
    pb_kvcache *lib = NULL;
    ref_policy ref;
    float *row = malloc(HELD * sizeof *row);
    uint32_t *a = malloc(HELD * sizeof *a), *b = malloc(HELD * sizeof *b);
    int rc = 0;
    if (!row || !a || !b ||
        pb_kvcache_pyramidkv_create(&params, &options, NULL, &lib) != PB_OK) {
        free(row);
        free(a);
        free(b);
        return bench_fail(NAME, "decision check setup failed");
    }
    if (ref_create(&ref, &params, &options) != PB_OK) {
        free(row);
        free(a);
        free(b);
        pb_kvcache_destroy(lib);
        return bench_fail(NAME, "decision check setup failed");
    }
    bench_rng rng = {obs};
    unsigned bad = 0;
    for (uint32_t pos = 1; pos < HELD; ++pos) {
        for (uint32_t i = 0; i < pos; ++i) {
            /* Coarse values so that equal window scores occur. */
            row[i] = (float)(bench_rng_next(&rng) % 8u) / 64.0f;
        }
        bad |= (unsigned)pb_kvcache_observe(lib, pos, row, pos);
        bad |= (unsigned)ref_observe(&ref, pos, row, pos);
    }
    size_t na = 0, nb = 0;
    bad |= (unsigned)pb_kvcache_evict(lib, KEEP, a, HELD, &na);
    bad |= (unsigned)ref_evict(&ref, KEEP, b, HELD, &nb);
    if (bad)
        rc = bench_fail(NAME, "obs %u: a call failed in the decision check",
                        (unsigned)obs);
    else if (na != nb || memcmp(a, b, na * sizeof *a) != 0)
        rc = bench_fail(NAME, "obs %u: library and reference chose different "
                              "victims",
                        (unsigned)obs);
    ref_destroy(&ref);
    pb_kvcache_destroy(lib);
    free(row);
    free(a);
    free(b);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Every scorer and the policybook family                                   */

typedef struct scorer_row {
    const char *name;      /* the policy it is */
    pb_scorer scorer;
    uint32_t recent, sinks; /* the vtable's defaults */
    double limit;          /* the registry's bytes per held position */
    const pb_kvcache_vtable *vtable, *reference;
} scorer_row;

static const scorer_row scorer_rows[] = {
    {"h2o", PB_SCORER_CUMULATIVE, 32u, 0u, 13.0, &pb_kvcache_h2o,
     &pb_wl_ref_h2o},
    {"tova", PB_SCORER_LAST, 0u, 0u, 13.0, &pb_kvcache_tova, &pb_wl_ref_tova},
    {"scissorhands", PB_SCORER_VOTES, 32u, 0u, 9.0, &pb_kvcache_scissorhands,
     &pb_wl_ref_scissorhands},
    {"streaming-llm", PB_SCORER_NONE, 0u, 4u, 4.0, &pb_kvcache_streaming_llm,
     &pb_wl_ref_streaming_llm},
    {"sliding-window", PB_SCORER_NONE, 0u, 0u, 4.0,
     &pb_kvcache_sliding_window, &pb_wl_ref_sliding_window},
};
#define N_SCORER_ROWS (sizeof scorer_rows / sizeof scorer_rows[0])

/* Size query, counted allocation and memory_bytes of pb_kvcache_create at
 * (budget, capacity); all three must agree. */
static int measure_config(const scorer_row *r, uint32_t budget,
                          uint32_t capacity, size_t *bytes) {
    pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    c.budget = budget;
    c.recent_window = r->recent;
    c.sinks = r->sinks;
    c.scorer = (uint32_t)r->scorer;
    c.capacity = capacity;
    size_t query = 0;
    pb_status st = pb_kvcache_size(&c, &query);
    if (st != PB_OK)
        return bench_fail(NAME, "%s: size query (capacity %u): %s", r->name,
                          (unsigned)capacity, pb_status_str(st));
    counting_alloc counter = {0, 0, 0, 0};
    const pb_allocator alloc = {count_alloc, count_free, &counter};
    pb_kvcache *p = NULL;
    st = pb_kvcache_create(&c, &alloc, &p);
    if (st != PB_OK)
        return bench_fail(NAME, "%s: create (capacity %u): %s", r->name,
                          (unsigned)capacity, pb_status_str(st));
    const size_t reported = pb_kvcache_memory_bytes(p);
    pb_kvcache_destroy(p);
    if (counter.total != query || reported != query || counter.live != 0 ||
        counter.bad_free)
        return bench_fail(NAME, "%s, capacity %u: size query %zu, allocated "
                                "%zu, memory_bytes %zu, left %zu",
                          r->name, (unsigned)capacity, query, counter.total,
                          reported, counter.live);
    *bytes = query;
    return 0;
}

/* The bytes the vtable's create allocates at `budget`, counted. */
static int measure_vtable(const scorer_row *r, uint32_t budget,
                          size_t *bytes) {
    counting_alloc counter = {0, 0, 0, 0};
    const pb_allocator alloc = {count_alloc, count_free, &counter};
    bench_family_params fp;
    pb_kvcache *p = r->vtable->create(
        bench_family_params_of(r->vtable, budget, &fp), &alloc, NULL);
    if (p == NULL)
        return bench_fail(NAME, "%s: vtable create (budget %u) failed",
                          r->name, (unsigned)budget);
    const size_t reported = r->vtable->memory_bytes(p);
    r->vtable->destroy(p);
    if (reported != counter.total || counter.live != 0 || counter.bad_free)
        return bench_fail(NAME, "%s, budget %u: memory_bytes %zu, allocated "
                                "%zu, left %zu",
                          r->name, (unsigned)budget, reported, counter.total,
                          counter.live);
    *bytes = reported;
    return 0;
}

/* The vtable and the naive reference choose the same victims: a
 * 1,024-budget instance filled to 1,024 positions with coarse weights (so
 * ties occur), then evict(512). */
static int check_family_decisions(const scorer_row *r) {
    enum { BUDGET = 1023, KEEP = 512 };
    bench_family_params fp;
    const void *params = bench_family_params_of(r->vtable, BUDGET, &fp);
    pb_kvcache *lib = r->vtable->create(params, NULL, NULL);
    pb_kvcache *ref = r->reference->create(params, NULL, NULL);
    float *row = malloc((BUDGET + 1) * sizeof *row);
    uint32_t *a = malloc((BUDGET + 1) * sizeof *a);
    uint32_t *b = malloc((BUDGET + 1) * sizeof *b);
    int rc = 0;
    if (lib == NULL || ref == NULL || !row || !a || !b) {
        rc = bench_fail(NAME, "%s: decision check setup failed", r->name);
    } else {
        bench_rng rng = {0x5eed};
        for (uint32_t pos = 1; pos <= BUDGET; ++pos) {
            for (uint32_t i = 0; i < pos; ++i)
                row[i] = (float)(bench_rng_next(&rng) % 8u) / 64.0f;
            r->vtable->on_decode_step(lib, pos, row, pos);
            r->reference->on_decode_step(ref, pos, row, pos);
        }
        const size_t na = r->vtable->evict(lib, KEEP, a, BUDGET + 1);
        const size_t nb = r->reference->evict(ref, KEEP, b, BUDGET + 1);
        if (na == 0 || na != nb || memcmp(a, b, na * sizeof *a) != 0)
            rc = bench_fail(NAME, "%s: library (%zu victims) and reference "
                                  "(%zu) chose differently",
                            r->name, na, nb);
    }
    if (lib) r->vtable->destroy(lib);
    if (ref) r->reference->destroy(ref);
    free(row);
    free(a);
    free(b);
    return rc;
}

static int bench_scorers(int quick) {
    static const uint32_t caps[4] = {1024, 4096, 65536, 262144};
    static const uint32_t budgets[3] = {256, 4096, 65536};
    const size_t n_caps = quick ? 2u : 4u;
    printf("\nscorers: bytes per held position of every policy of the "
           "family (budget 512; recent and sinks as each vtable sets them)\n");
    int over = 0;
    for (size_t k = 0; k < N_SCORER_ROWS; ++k) {
        const scorer_row *r = &scorer_rows[k];
        size_t bytes[4];
        for (size_t c = 0; c < n_caps; ++c)
            if (measure_config(r, 512u, caps[c], &bytes[c])) return 1;
        const double slope = (double)(bytes[n_caps - 1] - bytes[0]) /
                             (double)(caps[n_caps - 1] - caps[0]);
        const double fixed = (double)bytes[0] - slope * (double)caps[0];
        size_t vb[3];
        const size_t n_b = quick ? 2u : 3u;
        for (size_t b = 0; b < n_b; ++b)
            if (measure_vtable(r, budgets[b], &vb[b])) return 1;
        const double vslope = (double)(vb[n_b - 1] - vb[0]) /
                              (double)(budgets[n_b - 1] - budgets[0]);
        const int ok = slope <= r->limit && vslope <= r->limit;
        over |= !ok;
        printf("%-14s %-10s %6.3f B per held position over capacities "
               "%u..%u (%.0f B fixed); vtable %6.3f B over budgets %u..%u; "
               "registry %2.0f B: %s\n",
               r->name,
               pb_scorer_name((uint32_t)r->scorer),
               slope, (unsigned)caps[0], (unsigned)caps[n_caps - 1], fixed,
               vslope, (unsigned)budgets[0], (unsigned)budgets[n_b - 1],
               r->limit, ok ? "within" : "OVER");
        if (check_family_decisions(r)) return 1;
    }
    printf("decision check (1023-budget vtable, 1024 held -> evict(512)): "
           "victims identical to the naive reference for every policy\n");
    if (over) return bench_fail(NAME, "a scorer is above the registry's bytes "
                                      "per held position");
    return 0;
}

int main(int argc, char **argv) {
    bench_options opt;
    int rc = bench_parse_common(&argc, argv, 5, "", &opt);
    if (rc) {
        return rc == 1 ? 0 : 2;
    }
    if (argc > 1) {
        fprintf(stderr, "%s: bad argument '%s' (see --help)\n", NAME, argv[1]);
        return 2;
    }
    bench_print_header(stdout, NAME, &opt);
    printf("params:   budget 512, layer 0 of 1, recent 32, kernel 7; "
           "capacity 0 is the default (max(share, budget) + 1 = 513)\n");
    printf("checked:  size query == bytes the allocator was asked for == "
           "pb_kvcache_memory_bytes, for every row; no timing involved\n\n");

    static const uint32_t obs_list[3] = {4, 16, 64};
    static const uint32_t caps[6] = {0, 1024, 4096, 16384, 65536, 262144};
    const size_t n_caps = opt.quick ? 4u : 6u;
    for (size_t o = 0; o < 3; ++o) {
        const uint32_t obs = obs_list[o];
        size_t bytes[6];
        printf("obs %2u: capacity -> bytes:", (unsigned)obs);
        for (size_t c = 0; c < n_caps; ++c) {
            if (measure(obs, caps[c], &bytes[c])) return 1;
            printf(" %u -> %zu;", caps[c] ? (unsigned)caps[c] : 513u,
                   bytes[c]);
        }
        printf("\n");
        /* Slope over the widest span, and the largest step-wise deviation
         * from it (alignment padding shows up there). */
        const double slope = (double)(bytes[n_caps - 1] - bytes[1]) /
                             (double)(caps[n_caps - 1] - caps[1]);
        const double fixed = (double)bytes[1] - slope * (double)caps[1];
        double worst = 0.0;
        for (size_t c = 0; c < n_caps; ++c) {
            const double cap = caps[c] ? (double)caps[c] : 513.0;
            const double dev = (double)bytes[c] - (fixed + slope * cap);
            if (dev > worst || -dev > worst) worst = dev > 0 ? dev : -dev;
        }
        const double reference = 4.0 + 4.0 * obs + 8.0 + 8.0 + 1.0;
        printf("obs %2u: %.3f B per held position (slope %u..%u), %.0f B per "
               "instance fixed (intercept), %zu B for a default instance; "
               "largest deviation from the line %.0f B; reference model "
               "%.0f B per position (4 + 4*obs + 8 + 8 + 1)\n",
               (unsigned)obs, slope, (unsigned)caps[1],
               (unsigned)caps[n_caps - 1], fixed, bytes[0], worst, reference);
        if (check_decisions(obs)) return 1;
        printf("obs %2u: decision check (1024 held -> evict(512)): victims "
               "identical to the reference\n",
               (unsigned)obs);
    }
    return bench_scorers(opt.quick);
}
