/*
 * test_threads.c - what the header promises about threads: distinct
 * instances on distinct threads need no synchronisation (32 layers on 4
 * threads give bit for bit the results of running them one after another),
 * concurrent const calls on one shared instance are safe, and the pure
 * functions (budgets, pb_status_str, head reduction) may run anywhere. Run
 * under ThreadSanitizer by the `tsan` preset (.ci/run), where any data race
 * in the library fails the test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <string.h>

#include "counting_allocator.h"
#include "pyramidkv/pyramidkv.h"
#include "test_main.h"

#define LAYERS 32u
#define THREADS 4u
#define STEPS 2000u

/* FNV-1a over the bytes of everything a layer produced. */
static void mix(uint64_t *h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; ++i) {
        *h ^= p[i];
        *h *= 0x100000001b3u;
    }
}

/* Mixes the kept positions and their window scores into *h. */
static void mix_kept(uint64_t *h, const pb_kvcache *p) {
    uint32_t buf[256];
    size_t n = 0;
    pb_kvcache_kept_positions(p, buf, 256u, &n);
    mix(h, buf, n * sizeof buf[0]);
    for (size_t i = 0; i < n; ++i) {
        double s = 0.0;
        pb_kvcache_window_score(p, buf[i], &s);
        mix(h, &s, sizeof s);
    }
}

/* One layer's decode: deterministic weights seeded by the layer, an evict
 * to the budget every 8 steps or when full, one reset half way. Everything
 * observable goes into the digest. The allocator is the layer's own. */
static uint64_t run_layer(uint32_t layer) {
    const pb_kvcache_pyramidkv_params params = {48u, layer, LAYERS, 4u,
                                                6u,  8u,    5u};
    counting_allocator ca;
    ca_init(&ca);
    const pb_allocator a = ca_allocator(&ca);
    pb_kvcache *p = NULL;
    if (pb_kvcache_pyramidkv_create(&params, NULL, &a, &p) != PB_OK) return 0;
    uint64_t h = 0xcbf29ce484222325u;
    uint32_t rng = 0x9E3779B9u ^ (layer * 0x85EBCA6Bu);
    float w[256];
    uint32_t buf[256];
    for (uint32_t step = 1; step <= STEPS; ++step) {
        const size_t held = pb_kvcache_kept_count(p);
        for (size_t i = 0; i < held; ++i) {
            rng ^= rng << 13;
            rng ^= rng >> 17;
            rng ^= rng << 5;
            w[i] = (float)(rng % 16u) / 16.0f;
        }
        const pb_status st = pb_kvcache_observe(p, step, w, held);
        mix(&h, &st, sizeof st);
        if (step % 8u == 0u || held + 1u >= pb_kvcache_capacity(p)) {
            size_t n = 0;
            const pb_status se = pb_kvcache_evict(p, 40u, buf, 256u, &n);
            mix(&h, &se, sizeof se);
            mix(&h, buf, n * sizeof buf[0]);
        }
        if (step == STEPS / 2u) pb_kvcache_reset(p);
    }
    mix_kept(&h, p);
    const size_t mem = pb_kvcache_memory_bytes(p);
    mix(&h, &mem, sizeof mem);
    pb_kvcache_destroy(p);
    if (ca.outstanding != 0u || ca.bad_frees != 0u) return 0;
    return h;
}

typedef struct worker {
    uint32_t first; /* layers first, first + THREADS, ... */
    uint64_t digest[LAYERS];
} worker;

static void *layers_worker(void *arg) {
    worker *wk = arg;
    for (uint32_t layer = wk->first; layer < LAYERS; layer += THREADS)
        wk->digest[layer] = run_layer(layer);
    return NULL;
}

static void layers_on_threads_match_sequential(void **state) {
    (void)state;
    uint64_t sequential[LAYERS];
    for (uint32_t layer = 0; layer < LAYERS; ++layer) {
        sequential[layer] = run_layer(layer);
        assert_true(sequential[layer] != 0u);
    }
    /* Layers differ, so the digests do too: the comparison means
     * something. */
    assert_true(sequential[0] != sequential[LAYERS - 1u]);

    worker wk[THREADS];
    pthread_t th[THREADS];
    memset(wk, 0, sizeof wk);
    for (uint32_t t = 0; t < THREADS; ++t) {
        wk[t].first = t;
        assert_int_equal(pthread_create(&th[t], NULL, layers_worker, &wk[t]),
                         0);
    }
    for (uint32_t t = 0; t < THREADS; ++t)
        assert_int_equal(pthread_join(th[t], NULL), 0);
    for (uint32_t layer = 0; layer < LAYERS; ++layer)
        assert_true(wk[layer % THREADS].digest[layer] == sequential[layer]);
}

/* Const calls on one shared instance from several threads at once. */
typedef struct reader {
    const pb_kvcache *p;
    uint64_t digest;
} reader;

static uint64_t read_all(const pb_kvcache *p) {
    uint64_t h = 0xcbf29ce484222325u;
    mix_kept(&h, p);
    const size_t values[4] = {pb_kvcache_kept_count(p), pb_kvcache_capacity(p),
                              pb_kvcache_memory_bytes(p),
                              pb_kvcache_effective_budget(p)};
    mix(&h, values, sizeof values);
    const size_t vm = pb_kvcache_pyramidkv.memory_bytes(p);
    mix(&h, &vm, sizeof vm);
    return h;
}

static void *reader_worker(void *arg) {
    reader *r = arg;
    uint64_t h = 0;
    for (int i = 0; i < 200; ++i) h = read_all(r->p);
    r->digest = h;
    return NULL;
}

static void shared_instance_const_calls(void **state) {
    (void)state;
    const pb_kvcache_pyramidkv_params params = {64u, 0u, 1u, 1u, 4u, 4u, 3u};
    pb_kvcache *p = NULL;
    assert_int_equal(pb_kvcache_pyramidkv_create(&params, NULL, NULL, &p),
                     PB_OK);
    float w[64];
    for (uint32_t pos = 1; pos < 60u; ++pos) {
        const size_t held = pb_kvcache_kept_count(p);
        for (size_t i = 0; i < held; ++i)
            w[i] = (float)((pos + i) % 7u) * 0.125f;
        assert_int_equal(pb_kvcache_observe(p, pos, w, held), PB_OK);
    }
    const uint64_t expected = read_all(p);
    reader rd[THREADS];
    pthread_t th[THREADS];
    for (uint32_t t = 0; t < THREADS; ++t) {
        rd[t].p = p;
        rd[t].digest = 0;
        assert_int_equal(pthread_create(&th[t], NULL, reader_worker, &rd[t]),
                         0);
    }
    for (uint32_t t = 0; t < THREADS; ++t) {
        assert_int_equal(pthread_join(th[t], NULL), 0);
        assert_true(rd[t].digest == expected);
    }
    pb_kvcache_destroy(p);
}

/* The pure functions from every thread at once. */
static void *pure_worker(void *arg) {
    uint64_t *out = arg;
    uint64_t h = 0xcbf29ce484222325u;
    uint32_t shares[32];
    const float in[8] = {0.5f, 0.25f, 0.0f, 1.0f, 0.5f, 0.5f, 2.0f, 0.0f};
    float red[4];
    for (uint32_t i = 0; i < 500u; ++i) {
        const uint32_t b = 100u + i;
        const uint32_t s = pb_kvcache_pyramid_budget(b, i % 32u, 32u, 4u);
        const uint64_t t = pb_kvcache_pyramid_total(b, 32u, 4u);
        pb_kvcache_pyramid_budgets(b, 32u, 4u, shares, 32u);
        const char *msg = pb_status_str((pb_status)(i % 14u));
        pb_kvcache_head_reduce(in, 2u, 4u, 4u, i % 3u, red);
        mix(&h, &s, sizeof s);
        mix(&h, &t, sizeof t);
        mix(&h, shares, sizeof shares);
        mix(&h, msg, strlen(msg));
        mix(&h, red, sizeof red);
    }
    *out = h;
    return NULL;
}

static void pure_functions_concurrently(void **state) {
    (void)state;
    uint64_t expected = 0;
    pure_worker(&expected);
    uint64_t got[THREADS];
    pthread_t th[THREADS];
    for (uint32_t t = 0; t < THREADS; ++t)
        assert_int_equal(pthread_create(&th[t], NULL, pure_worker, &got[t]),
                         0);
    for (uint32_t t = 0; t < THREADS; ++t) {
        assert_int_equal(pthread_join(th[t], NULL), 0);
        assert_true(got[t] == expected);
    }
}

PB_TEST_MAIN(cmocka_unit_test(layers_on_threads_match_sequential),
             cmocka_unit_test(shared_instance_const_calls),
             cmocka_unit_test(pure_functions_concurrently))
