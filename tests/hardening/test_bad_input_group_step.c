/*
 * test_bad_input_group_step.c - the layer group's one-call decode step
 * (pb_kvcache_group_step): its bad-input matrix (each refusal's status in
 * the header's order, every head's observable state and the group's kept
 * total unchanged, outputs it must not write still holding a canary), its
 * equality with pb_kvcache_group_observe followed by pb_kvcache_group_evict
 * on a twin group, and that it never allocates once a countdown has
 * failed every further allocation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "counting_allocator.h"
#include "hardening_state.h"
#include "pyramidkv/pyramidkv.h"

#define CANARY 0xC0FFEE11u
#define HEADS 3u
#define STRIDE 64u
#define VCAP 256u

typedef struct fx {
    counting_allocator ca;
    pb_allocator alloc;
    pb_kvcache_group *g;
    hs_state before[HEADS];
    uint64_t total;
    float attn[HEADS * STRIDE];
    size_t lens[HEADS];
    uint32_t next_pos;
} fx;

static pb_kvcache_config head_config(void) {
    pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    c.budget = 8u;
    c.share = 6u;
    c.recent_window = 2u;
    c.obs_window = 3u;
    c.pool_kernel = 3u;
    return c;
}

static pb_kvcache_group_params group_params(uint32_t cap_permille) {
    pb_kvcache_group_params p = PB_KVCACHE_GROUP_PARAMS_DEFAULT;
    p.num_heads = HEADS;
    p.floor_permille = 250u;
    p.slack = 2u;
    p.head_cap_permille = cap_permille;
    return p;
}

/* Valid weights for every head over its held positions, differing by
 * head and step so that the heads' evicts differ. */
static void fill_rows(const pb_kvcache_group *g, uint32_t pos, float *attn,
                      size_t *lens) {
    for (uint32_t h = 0; h < HEADS; h++) {
        lens[h] = pb_kvcache_kept_count(pb_kvcache_group_head(g, h));
        for (size_t i = 0; i < lens[h]; i++)
            attn[h * STRIDE + i] =
                (float)((pos * 7u + (uint32_t)i * (3u + h)) % 5u) * 0.25f;
    }
}

static void capture(fx *f) {
    for (uint32_t h = 0; h < HEADS; h++)
        assert_int_equal(hs_capture(pb_kvcache_group_head(f->g, h),
                                    &f->before[h]),
                         0);
    f->total = pb_kvcache_group_kept_total(f->g);
}

static void expect_unchanged(const fx *f) {
    for (uint32_t h = 0; h < HEADS; h++) {
        hs_state now;
        assert_int_equal(hs_capture(pb_kvcache_group_head(f->g, h), &now), 0);
        assert_true(hs_equal(&now, &f->before[h]));
    }
    assert_int_equal(pb_kvcache_group_kept_total(f->g), f->total);
}

/* Twelve steps with an evict after every second: the heads hold
 * different counts, and the layer is at its total. */
static int fx_warm(void **state) {
    fx *f = calloc(1, sizeof *f);
    if (f == NULL) return -1;
    ca_init(&f->ca);
    f->alloc = ca_allocator(&f->ca);
    const pb_kvcache_config c = head_config();
    const pb_kvcache_group_params p = group_params(0u);
    if (pb_kvcache_group_create(&c, &p, &f->alloc, &f->g) != PB_OK) return -1;
    uint32_t victims[VCAP];
    size_t counts[HEADS], n;
    for (f->next_pos = 1; f->next_pos <= 12u; f->next_pos++) {
        fill_rows(f->g, f->next_pos, f->attn, f->lens);
        if (pb_kvcache_group_observe(f->g, f->next_pos, f->attn, STRIDE,
                                     f->lens) != PB_OK)
            return -1;
        if (f->next_pos % 2u == 0u &&
            pb_kvcache_group_evict(f->g, UINT64_MAX, victims, VCAP, counts,
                                   HEADS, &n) != PB_OK)
            return -1;
    }
    fill_rows(f->g, f->next_pos, f->attn, f->lens);
    capture(f);
    *state = f;
    return 0;
}

static int fx_free(void **state) {
    fx *f = *state;
    pb_kvcache_group_destroy(f->g);
    assert_int_equal(f->ca.outstanding, 0u);
    free(f);
    return 0;
}

static pb_status step(fx *f, uint32_t pos, uint64_t budget, uint32_t *v,
                      size_t cap, size_t *counts, size_t counts_len,
                      size_t *n) {
    return pb_kvcache_group_step(f->g, pos, f->attn, STRIDE, f->lens, budget,
                                 v, cap, counts, counts_len, n);
}

static void step_nulls(void **state) {
    fx *f = *state;
    uint32_t v[VCAP];
    size_t counts[HEADS] = {CANARY, CANARY, CANARY}, n = CANARY;
    assert_int_equal(pb_kvcache_group_step(NULL, 13u, f->attn, STRIDE,
                                           f->lens, UINT64_MAX, v, VCAP,
                                           counts, HEADS, &n),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_group_step(f->g, 13u, f->attn, STRIDE, NULL,
                                           UINT64_MAX, v, VCAP, counts,
                                           HEADS, &n),
                     PB_ERR_NULL);
    assert_int_equal(step(f, 13u, UINT64_MAX, v, VCAP, NULL, HEADS, &n),
                     PB_ERR_NULL);
    assert_int_equal(step(f, 13u, UINT64_MAX, v, VCAP, counts, HEADS, NULL),
                     PB_ERR_NULL);
    assert_int_equal(step(f, 13u, UINT64_MAX, NULL, 1u, counts, HEADS, &n),
                     PB_ERR_NULL);
    /* NULL before POSITION. */
    assert_int_equal(step(f, 3u, UINT64_MAX, NULL, 1u, counts, HEADS, &n),
                     PB_ERR_NULL);
    assert_int_equal(n, CANARY);
    assert_int_equal(counts[0], CANARY);
    expect_unchanged(f);
}

static void step_buffers(void **state) {
    fx *f = *state;
    uint32_t v[VCAP];
    size_t counts[HEADS] = {CANARY, CANARY, CANARY}, n = CANARY;
    assert_int_equal(step(f, 13u, UINT64_MAX, v, VCAP, counts, HEADS - 1u,
                          &n),
                     PB_ERR_BUFFER);
    assert_int_equal(n, CANARY);
    /* The layer is at its total: admitting one position on each head
     * puts it HEADS above, so HEADS is the bound at the default budget. */
    assert_int_equal(step(f, 13u, UINT64_MAX, v, HEADS - 1u, counts, HEADS,
                          &n),
                     PB_ERR_BUFFER);
    assert_int_equal(n, HEADS);
    /* Budget 0: everything held after the admission. */
    assert_int_equal(step(f, 13u, 0u, v, HEADS, counts, HEADS, &n),
                     PB_ERR_BUFFER);
    assert_int_equal(n, f->total + HEADS);
    /* BUFFER before POSITION, LENGTH and WEIGHT. */
    f->lens[0]++;
    f->attn[STRIDE] = NAN;
    assert_int_equal(step(f, 3u, UINT64_MAX, v, 0u, counts, HEADS, &n),
                     PB_ERR_BUFFER);
    f->attn[STRIDE] = 0.0f;
    f->lens[0]--;
    assert_int_equal(counts[0], CANARY);
    expect_unchanged(f);
}

static void step_observe_refusals(void **state) {
    fx *f = *state;
    uint32_t v[VCAP];
    size_t counts[HEADS] = {CANARY, CANARY, CANARY}, n = CANARY;
    assert_int_equal(step(f, 12u, UINT64_MAX, v, VCAP, counts, HEADS, &n),
                     PB_ERR_POSITION);
    f->lens[HEADS - 1u]++;
    assert_int_equal(step(f, 13u, UINT64_MAX, v, VCAP, counts, HEADS, &n),
                     PB_ERR_LENGTH);
    f->lens[HEADS - 1u]--;
    const size_t at = (HEADS - 1u) * STRIDE + f->lens[HEADS - 1u] - 1u;
    const float keep = f->attn[at];
    f->attn[at] = -1.0f;
    assert_int_equal(step(f, 13u, UINT64_MAX, v, VCAP, counts, HEADS, &n),
                     PB_ERR_WEIGHT);
    f->attn[at] = keep;
    assert_int_equal(n, CANARY);
    assert_int_equal(counts[0], CANARY);
    expect_unchanged(f);
    /* Full: observe without evicts until a head holds its capacity, then
     * a step is refused before its evict could make room. */
    uint32_t pos = 13u;
    pb_status st = PB_OK;
    while (st == PB_OK) {
        fill_rows(f->g, pos, f->attn, f->lens);
        capture(f);
        st = pb_kvcache_group_observe(f->g, pos++, f->attn, STRIDE, f->lens);
    }
    assert_int_equal(st, PB_ERR_FULL);
    assert_int_equal(step(f, pos, UINT64_MAX, v, VCAP, counts, HEADS, &n),
                     PB_ERR_FULL);
    assert_int_equal(pb_kvcache_group_step(f->g, pos, NULL, 0, NULL,
                                           UINT64_MAX, v, VCAP, counts,
                                           HEADS, &n),
                     PB_ERR_FULL);
    expect_unchanged(f);
}

/* Every step equals observe then evict on a twin group fed the same rows:
 * the same status, victims, counts and held positions, at budgets that
 * take none, the excess, or more; with a head cap too. */
static void step_equals_observe_evict(void **state) {
    (void)state;
    for (uint32_t cap = 0u; cap <= 1500u; cap += 1500u) {
        const pb_kvcache_config c = head_config();
        const pb_kvcache_group_params p = group_params(cap);
        pb_kvcache_group *a = NULL, *b = NULL;
        assert_int_equal(pb_kvcache_group_create(&c, &p, NULL, &a), PB_OK);
        assert_int_equal(pb_kvcache_group_create(&c, &p, NULL, &b), PB_OK);
        float attn[HEADS * STRIDE];
        size_t lens[HEADS], ca[HEADS], cb[HEADS], na, nb;
        uint32_t va[VCAP], vb[VCAP];
        for (uint32_t pos = 1; pos < 60u; pos++) {
            const uint64_t budget = pos % 7u == 0u   ? 10u
                                    : pos % 11u == 0u ? UINT64_MAX - 1u
                                    : pos % 3u == 0u  ? 15u
                                                      : UINT64_MAX;
            const int null_row = pos % 13u == 0u;
            fill_rows(a, pos, attn, lens);
            const pb_status sa = pb_kvcache_group_step(
                a, pos, null_row ? NULL : attn, STRIDE, lens, budget, va,
                VCAP, ca, HEADS, &na);
            pb_status sb = pb_kvcache_group_observe(
                b, pos, null_row ? NULL : attn, STRIDE, lens);
            if (sb == PB_OK)
                sb = pb_kvcache_group_evict(b, budget, vb, VCAP, cb, HEADS,
                                            &nb);
            assert_int_equal(sa, sb);
            assert_int_equal(sa, PB_OK);
            assert_int_equal(na, nb);
            assert_memory_equal(ca, cb, sizeof ca);
            if (na > 0u) assert_memory_equal(va, vb, na * sizeof *va);
            for (uint32_t h = 0; h < HEADS; h++) {
                hs_state x, y;
                assert_int_equal(hs_capture(pb_kvcache_group_head(a, h), &x),
                                 0);
                assert_int_equal(hs_capture(pb_kvcache_group_head(b, h), &y),
                                 0);
                assert_true(hs_equal(&x, &y));
            }
        }
        pb_kvcache_group_destroy(a);
        pb_kvcache_group_destroy(b);
    }
}

/* Once create has succeeded, every further allocation fails; the steps
 * never allocate. */
static void step_never_allocates(void **state) {
    (void)state;
    const pb_kvcache_config c = head_config();
    const pb_kvcache_group_params p = group_params(1500u);
    counting_allocator ca;
    ca_init(&ca);
    const pb_allocator al = ca_allocator(&ca);
    pb_kvcache_group *g = NULL;
    assert_int_equal(pb_kvcache_group_create(&c, &p, &al, &g), PB_OK);
    ca.fail_at = ca.alloc_calls + 1u;
    ca.fail_persist = 1;
    const size_t calls = ca.alloc_calls;
    float attn[HEADS * STRIDE];
    size_t lens[HEADS], counts[HEADS], n;
    uint32_t victims[VCAP];
    for (uint32_t pos = 1; pos < 40u; pos++) {
        fill_rows(g, pos, attn, lens);
        assert_int_equal(pb_kvcache_group_step(g, pos, attn, STRIDE, lens,
                                               pos % 5u ? UINT64_MAX : 4u,
                                               victims, VCAP, counts, HEADS,
                                               &n),
                         PB_OK);
    }
    assert_int_equal(ca.alloc_calls, calls);
    pb_kvcache_group_destroy(g);
    assert_int_equal(ca.outstanding, 0u);
    assert_int_equal(ca.bad_frees, 0u);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(step_nulls, fx_warm, fx_free),
        cmocka_unit_test_setup_teardown(step_buffers, fx_warm, fx_free),
        cmocka_unit_test_setup_teardown(step_observe_refusals, fx_warm,
                                        fx_free),
        cmocka_unit_test(step_equals_observe_evict),
        cmocka_unit_test(step_never_allocates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
