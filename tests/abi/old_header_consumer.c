/*
 * old_header_consumer.c - a program written against the 0.1.0 release: it
 * is compiled with the header copy in tests/abi/v0.1.0/include (never with
 * include/), linked against the library being built, and prints one line
 * per result it gets from every function and vtable that release declared.
 *
 * tests/abi/old_header_consumer.expected is this program's output when it
 * was built against the 0.1.0 headers and run against the 0.1.0 library
 * (the v0.1.0 tag, built as a shared library); test_abi_old_header_consumer
 * compares the output with the new library with that file, byte for byte.
 * So a change that keeps the symbols but moves a field, changes a default,
 * a status value or a decision breaks the test, as it would break a
 * program built against 0.1.0. Weights are binary fractions, so every
 * printed score is exact. The library version is not printed (it may
 * differ); only that it is at least 0.1.0.
 */
#include <pyramidkv/pyramidkv.h>

#include <stdio.h>
#include <string.h>

static void print_list(const char *what, const uint32_t *v, size_t n) {
    printf("%s [", what);
    for (size_t i = 0; i < n; ++i) printf(i ? ", %u" : "%u", (unsigned)v[i]);
    printf("]\n");
}

static void print_state(const char *what, const pb_kvcache *k) {
    uint32_t held[64];
    size_t n = 0;
    const pb_status st = pb_kvcache_kept_positions(k, held, 64, &n);
    printf("%s: status %d, effective %u, capacity %zu, kept %zu\n", what,
           (int)st, (unsigned)pb_kvcache_effective_budget(k),
           pb_kvcache_capacity(k), pb_kvcache_kept_count(k));
    print_list("  held", held, st == PB_OK ? n : 0u);
    for (size_t i = 0; st == PB_OK && i < n; ++i) {
        double score = -1.0;
        const pb_status ws = pb_kvcache_window_score(k, held[i], &score);
        printf("  score(%u) = %.17g (status %d)\n", (unsigned)held[i], score,
               (int)ws);
    }
}

/* The six decode steps of docs/spec.md section 11.1. */
static const float step1[] = {1.0f};
static const float step2[] = {.5f, .5f};
static const float step3[] = {.25f, .25f, .5f};
static const float step4[] = {.125f, .125f, .25f, .5f};
static const float step5[] = {.0625f, .0625f, .125f, .25f, .5f};
static const float step6[] = {.0625f, .0625f, .0625f, .125f, .25f, .4375f};
static const float *const steps[] = {step1, step2, step3, step4, step5, step6};

static void native_surface(void) {
    static const uint32_t layers[][4] = {
        /* budget, layer, num_layers, ratio */
        {6u, 0u, 1u, 4u}, {6u, 2u, 3u, 2u}, {6u, 0u, 3u, 2u}, {10u, 3u, 4u, 4u}};
    for (size_t c = 0; c < sizeof layers / sizeof layers[0]; ++c) {
        pb_kvcache_pyramidkv_params p = PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
        p.budget = layers[c][0];
        p.layer = layers[c][1];
        p.num_layers = layers[c][2];
        p.pyramid_ratio = layers[c][3];
        p.recent_window = c == 3u ? 4u : 1u;
        p.obs_window = 8u;
        p.pool_kernel = 1u;
        pb_kvcache_options o = PB_KVCACHE_OPTIONS_DEFAULT;
        o.capacity = 16u;
        size_t bytes = 0;
        const pb_status sz = pb_kvcache_pyramidkv_size(&p, &o, &bytes);
        pb_kvcache *k = NULL;
        const pb_status st = pb_kvcache_pyramidkv_create(&p, &o, NULL, &k);
        printf("native case %zu: size status %d, create status %d, bytes "
               "match %d\n",
               c, (int)sz, (int)st, bytes == pb_kvcache_memory_bytes(k));
        if (st != PB_OK) continue;
        for (uint32_t s = 0; s < 6u; ++s)
            printf("  observe(%u): %d\n", (unsigned)(s + 1u),
                   (int)pb_kvcache_observe(k, s + 1u, steps[s], s + 1u));
        print_state("  after the steps", k);
        uint32_t victims[16];
        size_t n = 0;
        const pb_status ev =
            pb_kvcache_evict(k, layers[c][0], victims, 16, &n);
        printf("  evict(%u): status %d\n", (unsigned)layers[c][0], (int)ev);
        print_list("  victims", victims, ev == PB_OK ? n : 0u);
        print_state("  after the evict", k);
        /* Refusals leave the state unchanged. */
        float bad[16] = {0.0f};
        bad[1] = -1.0f;
        const size_t held = pb_kvcache_kept_count(k);
        printf("  refusals: position %d, length %d, weight %d, buffer %d\n",
               (int)pb_kvcache_observe(k, 3u, NULL, 0),
               (int)pb_kvcache_observe(k, 100u, bad, held + 1u),
               (int)pb_kvcache_observe(k, 100u, bad, held),
               (int)pb_kvcache_evict(k, 0u, victims, 0u, &n));
        printf("  evict(0) with no room needs %zu\n", n);
        print_state("  after the refusals", k);
        printf("  reset: %d\n", (int)pb_kvcache_reset(k));
        print_state("  after reset", k);
        pb_kvcache_destroy(k);
    }
}

static void compatible_surface(void) {
    const pb_kvcache_snapkv_params sp = {6u, 1u, 8u, 3u};
    pb_kvcache *k = pb_kvcache_snapkv.create(&sp, NULL, NULL);
    printf("snapkv vtable: created %d, memory matches %d\n", k != NULL,
           k != NULL &&
               pb_kvcache_snapkv.memory_bytes(k) == pb_kvcache_memory_bytes(k));
    if (k == NULL) return;
    for (uint32_t s = 0; s < 6u; ++s)
        pb_kvcache_snapkv.on_decode_step(k, s + 1u, steps[s], s + 1u);
    pb_kvcache_snapkv.on_decode_step(k, 7u, NULL, 0u);
    uint32_t victims[16];
    print_state("  snapkv after the steps", k);
    const size_t none = pb_kvcache_snapkv.evict(k, 3u, victims, 1u);
    printf("  evict(3) into room for 1: %zu\n", none);
    const size_t n = pb_kvcache_snapkv.evict(k, 3u, victims, 16u);
    print_list("  evict(3)", victims, n);
    print_state("  snapkv after the evict", k);
    pb_kvcache_snapkv.destroy(k);

    const pb_kvcache_pyramidkv_params pp = {8u, 1u, 4u, 3u, 2u, 2u, 5u};
    k = pb_kvcache_pyramidkv.create(&pp, NULL, NULL);
    printf("pyramidkv vtable: created %d\n", k != NULL);
    if (k == NULL) return;
    for (uint32_t s = 0; s < 6u; ++s)
        pb_kvcache_pyramidkv.on_decode_step(k, s + 1u, steps[s], s + 1u);
    const size_t m = pb_kvcache_pyramidkv.evict(k, 8u, victims, 16u);
    print_list("  evict(8)", victims, m);
    print_state("  pyramidkv after the evict", k);
    pb_kvcache_pyramidkv.destroy(k);
    pb_kvcache_pyramidkv.destroy(NULL);
    const pb_kvcache_pyramidkv_params refused = {4u, 0u, 1u, 4u, 4u, 16u, 7u};
    printf("refused params give NULL: %d\n",
           pb_kvcache_pyramidkv.create(&refused, NULL, NULL) == NULL);
}

static void prefill(void) {
    /* Two rows over eight positions, in both scopes and both poolings. */
    static const float rows[2][8] = {
        {.15625f, .015625f, 0.f, .015625f, .078125f, .09375f, .640625f, 0.f},
        {.15625f, 0.f, .015625f, 0.f, .0625f, .09375f, .3125f, .359375f}};
    for (uint32_t scope = 0; scope < 2u; ++scope) {
        for (uint32_t pool = 0; pool < 2u; ++pool) {
            pb_kvcache_pyramidkv_params p = PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
            p.budget = 4u;
            p.recent_window = 2u;
            p.obs_window = 4u;
            p.pool_kernel = 3u;
            pb_kvcache_options o = PB_KVCACHE_OPTIONS_DEFAULT;
            o.pool = pool;
            o.prefill_scope = scope;
            o.prefill_max_len = scope ? 8u : 0u;
            pb_kvcache *k = NULL;
            if (pb_kvcache_pyramidkv_create(&p, &o, NULL, &k) != PB_OK) {
                printf("prefill scope %u pool %u: create refused\n",
                       (unsigned)scope, (unsigned)pool);
                continue;
            }
            size_t ws_bytes = 0;
            const pb_status wst = pb_kvcache_prefill_workspace_size(k, 8u, &ws_bytes);
            double ws[64];
            uint32_t kept[8], victims[8];
            size_t n = 0;
            const pb_status st = pb_kvcache_prefill(
                k, &rows[0][0], 2u, 8u, 4u, scope ? NULL : ws,
                scope ? 0u : sizeof ws, kept, 8u, victims, 8u, &n);
            printf("prefill scope %u pool %u: workspace status %d bytes %zu, "
                   "status %d\n",
                   (unsigned)scope, (unsigned)pool, (int)wst, ws_bytes, (int)st);
            print_list("  kept", kept, st == PB_OK ? n : 0u);
            print_list("  victims", victims, st == PB_OK ? 8u - n : 0u);
            print_state("  after the prefill", k);
            printf("  again: %d\n",
                   (int)pb_kvcache_prefill(k, &rows[0][0], 2u, 8u, 4u,
                                           scope ? NULL : ws,
                                           scope ? 0u : sizeof ws, kept, 8u,
                                           victims, 8u, &n));
            pb_kvcache_destroy(k);
        }
    }
    static const float heads[3][4] = {
        {.5f, .25f, 0.f, 1.f}, {.25f, .25f, .5f, 0.f}, {.75f, .125f, .5f, .5f}};
    for (uint32_t mode = 0; mode < 4u; ++mode) {
        float out[4] = {-1.f, -1.f, -1.f, -1.f};
        const pb_status st = pb_kvcache_head_reduce(&heads[0][0], 3u, 4u, 4u,
                                                    mode, out);
        printf("head_reduce mode %u: status %d, %.9g %.9g %.9g %.9g\n",
               (unsigned)mode, (int)st, out[0], out[1], out[2], out[3]);
    }
}

int main(void) {
    printf("version at least 0.1.0: %d\n", pb_version_number() >= 100u &&
                                               strlen(pb_version_string()) >= 5u);
    for (int s = 0; s <= 12; ++s)
        printf("status %d: %s\n", s, pb_status_str((pb_status)s));
    static const uint32_t cfg[][3] = {{512u, 32u, 4u}, {6u, 3u, 2u},
                                      {100u, 4u, 3u}, {3000000000u, 2u, 4u},
                                      {7u, 5u, 1u}};
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; ++c) {
        uint32_t shares[32];
        const pb_status st =
            pb_kvcache_pyramid_budgets(cfg[c][0], cfg[c][1], cfg[c][2], shares, 32);
        printf("budgets(%u, %u, %u): status %d, total %llu, layer 0 %u\n",
               (unsigned)cfg[c][0], (unsigned)cfg[c][1], (unsigned)cfg[c][2],
               (int)st,
               (unsigned long long)pb_kvcache_pyramid_total(cfg[c][0], cfg[c][1],
                                                            cfg[c][2]),
               (unsigned)pb_kvcache_pyramid_budget(cfg[c][0], 0u, cfg[c][1],
                                                   cfg[c][2]));
        print_list("  shares", shares, st == PB_OK ? cfg[c][1] : 0u);
    }
    native_surface();
    compatible_surface();
    prefill();
    return 0;
}
