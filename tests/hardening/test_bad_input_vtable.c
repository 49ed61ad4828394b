/*
 * test_bad_input_vtable.c - the bad-input matrix (test_bad_input.c) for the
 * compatible vtables pb_kvcache_pyramidkv and pb_kvcache_snapkv. Where the
 * header leaves an outcome unstated (the compatible evict with a NULL
 * victims array), the row asserts the outcome the native surface documents
 * and says so.
 *
 * A row passes one bad (or boundary) argument and asserts the documented
 * status or return value AND, where there is an instance, that its full
 * observable state (held positions, every window score, effective share,
 * held count, capacity, memory bytes; see hardening_state.h) is identical
 * before and after. Output buffers a refused call must not write are
 * filled with a canary and checked. The row names are the first column of
 * the table in docs/robustness.md.
 */
#include "bad_input_fixture.h"

/* ------------------------------------------------------------------------ */
/* The compatible vtables                                                   */

static const pb_kvcache_vtable *const VTABLES[2] = {&pb_kvcache_pyramidkv,
                                                    &pb_kvcache_snapkv};

static void vtable_create_null_params_defaults(void **state) {
    (void)state;
    for (size_t v = 0; v < 2u; ++v) {
        counting_allocator ca;
        ca_init(&ca);
        const pb_allocator a = ca_allocator(&ca);
        pb_kvcache *p = VTABLES[v]->create(NULL, &a, NULL);
        assert_non_null(p);
        assert_int_equal(pb_kvcache_capacity(p), 513u);
        assert_int_equal(pb_kvcache_effective_budget(p), 512u);
        assert_int_equal(VTABLES[v]->memory_bytes(p), ca.outstanding);
        VTABLES[v]->destroy(p);
        assert_int_equal(ca.outstanding, 0u);
    }
}

/* vt->create refuses params: NULL, and nothing left allocated. */
static void expect_refused(const pb_kvcache_vtable *vt, const void *params) {
    counting_allocator ca;
    ca_init(&ca);
    const pb_allocator a = ca_allocator(&ca);
    assert_null(vt->create(params, &a, NULL));
    assert_int_equal(ca.outstanding, 0u);
}

static void vtable_pyramidkv_create_refused_params(void **state) {
    (void)state;
    const pb_kvcache_pyramidkv_params base = small_params();
    pb_kvcache_pyramidkv_params bad[10];
    for (size_t i = 0; i < 10u; ++i) bad[i] = base;
    bad[0].budget = 0u;
    bad[1].budget = UINT32_MAX;
    bad[2].layer = 1u;
    bad[3].num_layers = 0u;
    bad[4].pyramid_ratio = 0u;
    bad[5].recent_window = 16u;
    bad[6].obs_window = 0u;
    bad[7].pool_kernel = 0u;
    bad[8].pool_kernel = 4u;
    bad[9].recent_window = UINT32_MAX;
    for (size_t i = 0; i < 10u; ++i)
        expect_refused(&pb_kvcache_pyramidkv, &bad[i]);
}

static void vtable_snapkv_create_refused_params(void **state) {
    (void)state;
    const pb_kvcache_snapkv_params base = {16u, 4u, 4u, 3u};
    pb_kvcache_snapkv_params bad[7];
    for (size_t i = 0; i < 7u; ++i) bad[i] = base;
    bad[0].budget = 0u;
    bad[1].budget = UINT32_MAX;
    bad[2].recent_window = 16u;
    bad[3].recent_window = UINT32_MAX;
    bad[4].obs_window = 0u;
    bad[5].pool_kernel = 0u;
    bad[6].pool_kernel = 2u;
    for (size_t i = 0; i < 7u; ++i) expect_refused(&pb_kvcache_snapkv, &bad[i]);
}

static void vtable_create_allocator_lacking(void **state) {
    (void)state;
    const pb_allocator no_alloc = {NULL, never_free, NULL};
    const pb_allocator no_free = {never_alloc, NULL, NULL};
    for (size_t v = 0; v < 2u; ++v) {
        assert_null(VTABLES[v]->create(NULL, &no_alloc, NULL));
        assert_null(VTABLES[v]->create(NULL, &no_free, NULL));
    }
}

static void vtable_create_nomem(void **state) {
    (void)state;
    const pb_kvcache_pyramidkv_params p = {UINT32_MAX - 1u, 0u, 1u, 1u,
                                           0u, 16u, 1u};
    const pb_kvcache_snapkv_params sp = {UINT32_MAX - 1u, 0u, 16u, 1u};
    const void *params[2] = {&p, &sp};
    for (size_t v = 0; v < 2u; ++v) {
        counting_allocator ca;
        ca_init(&ca);
        ca.limit_bytes = BIG_LIMIT;
        const pb_allocator a = ca_allocator(&ca);
        assert_null(VTABLES[v]->create(params[v], &a, NULL));
        assert_true(ca.alloc_failures > 0u);
        assert_int_equal(ca.outstanding, 0u);
        assert_int_equal(ca.bad_frees, 0u);
    }
}

static void vtable_create_rng_ignored(void **state) {
    (void)state;
    /* Never read: a pointer to anything must do. */
    unsigned char junk[16] = {0};
    for (size_t v = 0; v < 2u; ++v) {
        pb_kvcache *p = VTABLES[v]->create(NULL, NULL, (pb_rng *)(void *)junk);
        assert_non_null(p);
        VTABLES[v]->destroy(p);
    }
}

static void vtable_decode_policy_null(void **state) {
    fx *f = *state;
    for (size_t v = 0; v < 2u; ++v)
        VTABLES[v]->on_decode_step(NULL, 100u, weights(f, 7u), 7u);
    HS_ASSERT_UNCHANGED(f);
}

static void vtable_decode_refused_changes_nothing(void **state) {
    fx *f = *state;
    for (size_t v = 0; v < 2u; ++v) {
        const pb_kvcache_vtable *vt = VTABLES[v];
        vt->on_decode_step(f->p, last_held(f), weights(f, 7u), 7u);
        vt->on_decode_step(f->p, f->evicted, NULL, 0u);
        vt->on_decode_step(f->p, 100u, weights(f, 8u), 6u);
        vt->on_decode_step(f->p, 100u, weights(f, 8u), 8u);
        vt->on_decode_step(f->p, 100u, weights(f, 7u), SIZE_MAX);
        float *w = weights(f, 7u);
        w[4] = NAN;
        vt->on_decode_step(f->p, 100u, w, 7u);
        w[4] = -INFINITY;
        vt->on_decode_step(f->p, 100u, w, 7u);
        HS_ASSERT_UNCHANGED(f);
    }
}

static void vtable_decode_full(void **state) {
    fx *f = *state;
    for (size_t v = 0; v < 2u; ++v) {
        VTABLES[v]->on_decode_step(f->p, 1000u, weights(f, 12u), 12u);
        VTABLES[v]->on_decode_step(f->p, 1000u, NULL, 0u);
    }
    HS_ASSERT_UNCHANGED(f);
}

static void vtable_evict_policy_null(void **state) {
    fx *f = *state;
    for (size_t v = 0; v < 2u; ++v)
        assert_int_equal(VTABLES[v]->evict(NULL, 3u, f->buf, 64u), 0u);
    HS_ASSERT_UNCHANGED(f);
}

static void vtable_evict_capacity_zero(void **state) {
    fx *f = *state;
    for (size_t v = 0; v < 2u; ++v) {
        assert_int_equal(VTABLES[v]->evict(f->p, 3u, f->buf, 0u), 0u);
        assert_int_equal(VTABLES[v]->evict(f->p, 3u, NULL, 0u), 0u);
    }
    HS_ASSERT_UNCHANGED(f);
}

static void vtable_evict_capacity_one_short(void **state) {
    fx *f = *state;
    for (size_t v = 0; v < 2u; ++v)
        assert_int_equal(
            VTABLES[v]->evict(f->p, 3u, f->buf, EVICT_NEEDS - 1u), 0u);
    HS_ASSERT_UNCHANGED(f);
}

/* Not stated in the header for the compatible surface; the native rule
 * (NULL victims with a capacity is refused) is what a caller would expect,
 * and anything else would write through NULL. */
static void vtable_evict_victims_null_with_capacity(void **state) {
    fx *f = *state;
    for (size_t v = 0; v < 2u; ++v)
        assert_int_equal(VTABLES[v]->evict(f->p, 3u, NULL, 64u), 0u);
    HS_ASSERT_UNCHANGED(f);
}

static void vtable_evict_budget_uint32_max(void **state) {
    fx *f = *state;
    for (size_t v = 0; v < 2u; ++v)
        assert_int_equal(VTABLES[v]->evict(f->p, UINT32_MAX, f->buf, 64u), 0u);
    HS_ASSERT_UNCHANGED(f);
}

static void vtable_evict_budget_zero(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_snapkv.evict(f->p, 0u, f->buf, 64u), 5u);
    assert_memory_equal(f->buf, f->before.pos, 5u * sizeof f->buf[0]);
    assert_int_equal(pb_kvcache_kept_count(f->p), 2u);
}

static void vtable_memory_bytes_null(void **state) {
    (void)state;
    for (size_t v = 0; v < 2u; ++v)
        assert_int_equal(VTABLES[v]->memory_bytes(NULL), 0u);
}

static void vtable_memory_bytes_matches_native(void **state) {
    fx *f = *state;
    for (size_t v = 0; v < 2u; ++v)
        assert_int_equal(VTABLES[v]->memory_bytes(f->p), f->before.memory);
}

static void vtable_destroy_null(void **state) {
    (void)state;
    for (size_t v = 0; v < 2u; ++v) VTABLES[v]->destroy(NULL);
}

#define ROW(fn) cmocka_unit_test(fn)
#define WARM(fn) cmocka_unit_test_setup_teardown(fn, fx_warm, fx_done)
#define FULL(fn) cmocka_unit_test_setup_teardown(fn, fx_full, fx_done)

int main(void) {
    const struct CMUnitTest tests[] = {
        ROW(vtable_create_null_params_defaults),
        ROW(vtable_pyramidkv_create_refused_params),
        ROW(vtable_snapkv_create_refused_params),
        ROW(vtable_create_allocator_lacking),
        ROW(vtable_create_nomem),
        ROW(vtable_create_rng_ignored),
        WARM(vtable_decode_policy_null),
        WARM(vtable_decode_refused_changes_nothing),
        FULL(vtable_decode_full),
        WARM(vtable_evict_policy_null),
        WARM(vtable_evict_capacity_zero),
        WARM(vtable_evict_capacity_one_short),
        WARM(vtable_evict_victims_null_with_capacity),
        WARM(vtable_evict_budget_uint32_max),
        WARM(vtable_evict_budget_zero),
        ROW(vtable_memory_bytes_null),
        WARM(vtable_memory_bytes_matches_native),
        ROW(vtable_destroy_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
