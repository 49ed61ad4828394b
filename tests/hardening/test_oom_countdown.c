/*
 * test_oom_countdown.c - allocation-failure injection. For each
 * configuration an allocator fails the 1st, 2nd, ... allocation (and, in a
 * second sweep, every allocation from the k-th on) until create succeeds:
 * every failure must return PB_ERR_NOMEM (NULL on the compatible surface),
 * set *out to NULL and leave zero bytes outstanding; the allocator must
 * receive, on free, exactly the pointer and size it handed out. Then, with
 * every further allocation failing, a full workload (observe, evict, reset,
 * every introspection call, every vtable, every scorer) must never call
 * the allocator.
 * The sweep prints how many allocations each create makes (one, the
 * object's block, for every object). The attention profile
 * (pyramidkv_profile.h) gets the same sweep and the same no-allocation
 * workload.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "counting_allocator.h"
#include "pyramidkv/pyramidkv.h"
#include "test_configs.h"
#include "test_rng.h"
#include "test_main.h"

/* No create may need this many allocations. */
#define MAX_SWEEP 64u

typedef struct config {
    const char *name;
    int surface; /* 0 native, 1 pyramidkv vtable, 2 snapkv vtable, 3 native
                    pb_kvcache_create with `scorer`, 4 .. 8 the h2o,
                    scissorhands, tova, streaming_llm and sliding_window
                    vtables with {budget, extra} */
    pb_kvcache_pyramidkv_params params;
    pb_kvcache_snapkv_params snap;
    pb_kvcache_options options;
    int params_null;
    uint32_t scorer, sinks, share; /* surface 3 (budget, recent: params) */
    uint32_t extra;                /* surfaces 4 .. 8: recent or sinks */
} config;

static const pb_kvcache_vtable *const FAMILY[5] = {
    &pb_kvcache_h2o, &pb_kvcache_scissorhands, &pb_kvcache_tova,
    &pb_kvcache_streaming_llm, &pb_kvcache_sliding_window};

/* Rows name only what is not zero. */
static const config CONFIGS[] = {
    {.name = "native, defaults", .params_null = 1,
     .params = {512u, 0u, 1u, 4u, 32u, 16u, 7u}},
    {.name = "native, small, pool max",
     .params = {16u, 3u, 8u, 4u, 4u, 4u, 3u}},
    {.name = "native, pool avg, explicit capacity",
     .params = {16u, 0u, 1u, 1u, 2u, 1u, 1u}, .options = {40u, 1u, 0u, 0u}},
    {.name = "native, prefill scratch reserved",
     .params = {64u, 0u, 2u, 4u, 8u, 8u, 5u}, .options = {0u, 0u, 1u, 1000u}},
    {.name = "vtable pyramidkv, defaults", .surface = 1, .params_null = 1,
     .params = {512u, 0u, 1u, 4u, 32u, 16u, 7u}},
    {.name = "vtable pyramidkv, layer 5 of 32", .surface = 1,
     .params = {128u, 5u, 32u, 4u, 8u, 8u, 7u}},
    {.name = "vtable snapkv, defaults", .surface = 2, .params_null = 1,
     .snap = {512u, 32u, 16u, 7u}},
    {.name = "vtable snapkv, small", .surface = 2, .snap = {10u, 3u, 2u, 3u}},
#define SCORER_ROW(name, scorer, sinks, share)                               \
    {name, 3, {64u, 2u, 4u, 4u, 4u, 4u, 3u}, {0u, 0u, 0u, 0u},              \
     {0u, 0u, 0u, 0u}, 0, scorer, sinks, share, 0u}
    SCORER_ROW("native window, 4 sinks", PB_SCORER_WINDOW, 4u, 0u),
    SCORER_ROW("native cumulative, pyramid, 4 sinks", PB_SCORER_CUMULATIVE,
               4u, 0u),
    SCORER_ROW("native cumulative, explicit share", PB_SCORER_CUMULATIVE, 0u,
               40u),
    SCORER_ROW("native last, pyramid", PB_SCORER_LAST, 0u, 0u),
    SCORER_ROW("native last, explicit share, sinks", PB_SCORER_LAST, 2u, 30u),
    SCORER_ROW("native votes, pyramid, sinks", PB_SCORER_VOTES, 3u, 0u),
    SCORER_ROW("native none, explicit share", PB_SCORER_NONE, 0u, 50u),
    SCORER_ROW("native none, pyramid, 4 sinks", PB_SCORER_NONE, 4u, 0u),
#undef SCORER_ROW
#define FAMILY_ROW(name, surface, params_null, budget, extra)                \
    {name, surface, {0u, 0u, 0u, 0u, 0u, 0u, 0u}, {0u, 0u, 0u, 0u},          \
     {0u, 0u, 0u, 0u}, params_null, 0u, 0u, 0u, (budget) << 8 | (extra)}
    FAMILY_ROW("vtable h2o, defaults", 4, 1, 0u, 0u),
    FAMILY_ROW("vtable h2o, small", 4, 0, 20u, 3u),
    FAMILY_ROW("vtable scissorhands, defaults", 5, 1, 0u, 0u),
    FAMILY_ROW("vtable scissorhands, small", 5, 0, 20u, 0u),
    FAMILY_ROW("vtable tova, defaults", 6, 1, 0u, 0u),
    FAMILY_ROW("vtable tova, small", 6, 0, 20u, 0u),
    FAMILY_ROW("vtable streaming_llm, defaults", 7, 1, 0u, 0u),
    FAMILY_ROW("vtable streaming_llm, small", 7, 0, 20u, 4u),
    FAMILY_ROW("vtable sliding_window, defaults", 8, 1, 0u, 0u),
    FAMILY_ROW("vtable sliding_window, small", 8, 0, 20u, 0u),
#undef FAMILY_ROW
};
#define N_CONFIGS (sizeof CONFIGS / sizeof CONFIGS[0])

/* Creates per the configuration; returns the status (PB_ERR_NOMEM for a
 * NULL from a vtable, which cannot say why). */
static pb_status create(const config *c, const pb_allocator *a,
                        pb_kvcache **out) {
    if (c->surface == 0)
        return pb_kvcache_pyramidkv_create(
            c->params_null ? NULL : &c->params, &c->options, a, out);
    if (c->surface == 3) {
        pb_kvcache_config k = PB_KVCACHE_CONFIG_DEFAULT;
        k.budget = c->params.budget;
        k.layer = c->params.layer;
        k.num_layers = c->params.num_layers;
        k.recent_window = c->params.recent_window;
        k.obs_window = c->params.obs_window;
        k.pool_kernel = c->params.pool_kernel;
        k.scorer = c->scorer;
        k.sinks = c->sinks;
        k.share = c->share;
        return pb_kvcache_create(&k, a, out);
    }
    if (c->surface >= 4) {
        /* Every family params struct starts {budget, uint32_t}; TOVA's and
         * the sliding window's read only the budget. */
        const uint32_t two[2] = {c->extra >> 8, c->extra & 0xFFu};
        *out = FAMILY[c->surface - 4]->create(c->params_null ? NULL : two, a,
                                             NULL);
        return *out != NULL ? PB_OK : PB_ERR_NOMEM;
    }
    const pb_kvcache_vtable *vt =
        c->surface == 1 ? &pb_kvcache_pyramidkv : &pb_kvcache_snapkv;
    const void *params = c->params_null ? NULL
                         : c->surface == 1 ? (const void *)&c->params
                                           : (const void *)&c->snap;
    *out = vt->create(params, a, NULL);
    return *out != NULL ? PB_OK : PB_ERR_NOMEM;
}

static void destroy(const config *c, pb_kvcache *p) {
    if (c->surface == 0 || c->surface == 3) pb_kvcache_destroy(p);
    else if (c->surface >= 4) FAMILY[c->surface - 4]->destroy(p);
    else if (c->surface == 1) pb_kvcache_pyramidkv.destroy(p);
    else pb_kvcache_snapkv.destroy(p);
}

/* Sweeps fail_at = 1, 2, ... until create succeeds and returns how many
 * allocation calls the successful create made. */
static size_t sweep(const config *c, int persist) {
    for (size_t k = 1; k <= MAX_SWEEP; ++k) {
        counting_allocator ca;
        ca_init_failing(&ca, k, persist);
        const pb_allocator a = ca_allocator(&ca);
        pb_kvcache *out = (pb_kvcache *)(void *)&ca;
        const pb_status st = create(c, &a, &out);
        if (st == PB_OK) {
            assert_non_null(out);
            /* The create that succeeds made k - 1 calls that all worked,
             * exactly as many as an unlimited allocator sees. */
            assert_int_equal(ca.alloc_failures, 0u);
            assert_int_equal(ca.alloc_calls, k - 1u);
            assert_int_equal(pb_kvcache_memory_bytes(out), ca.outstanding);
            destroy(c, out);
            assert_int_equal(ca.outstanding, 0u);
            assert_int_equal(ca.bad_frees, 0u);
            assert_int_equal(ca.live_blocks, 0u);
            return k - 1u;
        }
        if (st != PB_ERR_NOMEM)
            fail_msg("%s: fail_at %zu returned %s", c->name, k,
                     pb_status_str(st));
        assert_null(out);
        assert_int_equal(ca.alloc_failures >= 1u, 1);
        assert_int_equal(ca.outstanding, 0u);
        assert_int_equal(ca.live_blocks, 0u);
        assert_int_equal(ca.bad_frees, 0u);
        assert_int_equal(ca.table_overflows, 0u);
    }
    fail_msg("%s: create still failing after %u refused allocations", c->name,
             MAX_SWEEP);
    return 0;
}

static void countdown_every_allocation(void **state) {
    (void)state;
    for (size_t i = 0; i < N_CONFIGS; ++i) {
        const size_t once = sweep(&CONFIGS[i], 0);
        const size_t persist = sweep(&CONFIGS[i], 1);
        assert_int_equal(once, persist);
        assert_true(once >= 1u);
        print_message("oom sweep: %-40s %zu allocation(s) per create, %zu "
                      "failure point(s) x 2 modes, 0 bytes leaked\n",
                      CONFIGS[i].name, once, once);
    }
}

/* Everything after create, with an allocator that refuses every call: the
 * workload must succeed and the allocator must see no call at all. */
static pbt_rng rng = {0x2545F491u};
static uint32_t next_rand(void) { return (uint32_t)(pbt_next(&rng) >> 32); }

static void workload(pb_kvcache *p, const pb_kvcache_vtable *vt) {
    float w[1100];
    uint32_t out[1100];
    uint32_t pos = 0;
    for (int step = 0; step < 3000; ++step) {
        const size_t held = pb_kvcache_kept_count(p);
        assert_true(held <= 1024u);
        for (size_t i = 0; i < held; ++i)
            w[i] = (float)(next_rand() % 8u) * 0.125f;
        pos += 1u + next_rand() % 3u;
        const uint32_t r = next_rand() % 16u;
        if (held == pb_kvcache_capacity(p) || r == 0u) {
            size_t n = 0;
            const uint32_t budget = next_rand() % 2u ? 0u : next_rand() % 64u;
            if (vt != NULL) {
                (void)vt->evict(p, budget, out, 1100u);
            } else {
                assert_int_equal(pb_kvcache_evict(p, budget, out, 1100u, &n),
                                 PB_OK);
                (void)pb_kvcache_evict(p, budget, out, 0u, &n);
            }
            continue;
        }
        if (r == 1u) {
            assert_int_equal(pb_kvcache_reset(p), PB_OK);
            pos = 0;
            continue;
        }
        if (vt != NULL) vt->on_decode_step(p, pos, r == 2u ? NULL : w, held);
        else
            assert_int_equal(
                pb_kvcache_observe(p, pos, r == 2u ? NULL : w, held), PB_OK);
        /* Introspection and refused calls, every step. */
        size_t n = 0;
        double s = 0.0;
        assert_int_equal(pb_kvcache_kept_positions(p, out, 1100u, &n), PB_OK);
        if (n > 0u) {
            assert_int_equal(pb_kvcache_score(p, out[n - 1u], &s), PB_OK);
            (void)pb_kvcache_window_score(p, out[n - 1u], &s);
        }
        (void)pb_kvcache_window_score(p, pos + 1u, &s);
        (void)pb_kvcache_score(p, pos + 1u, &s);
        (void)pb_kvcache_sink_count(p);
        (void)pb_kvcache_observe(p, pos, w, 0u);
        (void)pb_kvcache_effective_budget(p);
        (void)pb_kvcache_memory_bytes(p);
        if (vt != NULL) (void)vt->memory_bytes(p);
    }
}

static void no_allocation_after_create(void **state) {
    (void)state;
    for (size_t i = 0; i < N_CONFIGS; ++i) {
        const config *c = &CONFIGS[i];
        counting_allocator ca;
        ca_init(&ca);
        const pb_allocator a = ca_allocator(&ca);
        pb_kvcache *p = NULL;
        assert_int_equal(create(c, &a, &p), PB_OK);
        const size_t calls = ca.alloc_calls;
        const size_t bytes = ca.outstanding;
        ca.fail_at = calls + 1u;
        ca.fail_persist = 1;
        const pb_kvcache_vtable *vt =
            c->surface == 1   ? &pb_kvcache_pyramidkv
            : c->surface == 2 ? &pb_kvcache_snapkv
            : c->surface >= 4 ? FAMILY[c->surface - 4]
                              : NULL;
        workload(p, vt);
        assert_int_equal(ca.alloc_calls, calls);
        assert_int_equal(ca.free_calls, 0u);
        assert_int_equal(ca.outstanding, bytes);
        destroy(c, p);
        assert_int_equal(ca.outstanding, 0u);
        assert_int_equal(ca.bad_frees, 0u);
    }
}

/* The profile: every create failure is PB_ERR_NOMEM with nothing left;
 * then a workload of rows and queries with every allocation refused. */
static void profile_countdown_and_no_allocation(void **state) {
    (void)state;
    pb_profile_params pp = pbt_profile_params(3u, 200u);
    size_t calls_ok = 0;
    for (int persist = 0; persist < 2; ++persist) {
        for (size_t k = 1; k <= MAX_SWEEP; ++k) {
            counting_allocator ca;
            ca_init_failing(&ca, k, persist);
            const pb_allocator a = ca_allocator(&ca);
            pb_profile *out = (pb_profile *)(void *)&ca;
            const pb_status st = pb_profile_create(&pp, &a, &out);
            if (st == PB_OK) {
                calls_ok = k - 1u;
                assert_int_equal(ca.alloc_calls, k - 1u);
                assert_int_equal(pb_profile_memory_bytes(out), ca.outstanding);
                pb_profile_destroy(out);
                assert_int_equal(ca.outstanding, 0u);
                assert_int_equal(ca.bad_frees, 0u);
                break;
            }
            assert_int_equal(st, PB_ERR_NOMEM);
            assert_null(out);
            assert_int_equal(ca.outstanding, 0u);
            assert_int_equal(ca.live_blocks, 0u);
        }
    }
    assert_int_equal(calls_ok, 1u);
    print_message("oom sweep: %-40s %zu allocation(s) per create, %zu "
                  "failure point(s) x 2 modes, 0 bytes leaked\n",
                  "profile", calls_ok, calls_ok);

    counting_allocator ca;
    ca_init(&ca);
    const pb_allocator a = ca_allocator(&ca);
    pb_profile *p = NULL;
    assert_int_equal(pb_profile_create(&pp, &a, &p), PB_OK);
    ca.fail_at = ca.alloc_calls + 1u;
    ca.fail_persist = 1;
    const size_t calls = ca.alloc_calls;
    float row[200];
    uint32_t w[3];
    for (int step = 0; step < 500; ++step) {
        const uint32_t len = 1u + next_rand() % 200u;
        for (uint32_t i = 0; i < len; ++i)
            row[i] = (float)(next_rand() % 9u) * 0.125f;
        row[len - 1u] = 1.0f;
        assert_int_equal(pb_profile_add_row(p, next_rand() % 3u, row, len),
                         PB_OK);
        (void)pb_profile_add_row(p, 3u, row, len);
        double h = 0.0, m = 0.0;
        uint32_t k = 0, r = 0;
        (void)pb_profile_entropy(p, 0u, &h, &m);
        (void)pb_profile_mass(p, 1u, 1u + next_rand() % 200u, &m);
        (void)pb_profile_mass_k(p, 2u, 900000u, &k);
        if (pb_profile_weights(p, 900000u, 8u, w, 3u) == PB_OK)
            assert_int_equal(pb_profile_fit_ratio(w, 3u, 16u, &r, NULL), PB_OK);
        if (step == 250) assert_int_equal(pb_profile_reset(p), PB_OK);
    }
    assert_int_equal(ca.alloc_calls, calls);
    assert_int_equal(ca.free_calls, 0u);
    pb_profile_destroy(p);
    assert_int_equal(ca.outstanding, 0u);
}

PB_TEST_MAIN(cmocka_unit_test(countdown_every_allocation),
             cmocka_unit_test(no_allocation_after_create),
             cmocka_unit_test(profile_countdown_and_no_allocation))
