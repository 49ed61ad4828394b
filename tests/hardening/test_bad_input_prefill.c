/*
 * test_bad_input_prefill.c - the bad-input matrix rows of the prefill
 * surface (pyramidkv_prefill.h: pb_kvcache_prefill and
 * pb_kvcache_prefill_workspace_size), in the form of test_bad_input.c: one
 * cmocka test per row, the documented status, and the instance's full
 * observable state identical before and after (hardening_state.h), output
 * arrays untouched. tests/prefill/ tests what a successful prefill computes;
 * this file only proves that a refused one changes nothing.
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

#define LEN 12u
#define ROWS 3u
#define BIG_LEN 17u /* above the reservation of 16 */
#define CANARY 0xC0FFEE11u

/* budget 8 (share 8), recent 2, obs 3, pool 3; capacity 9; scratch for 16
 * positions reserved at create. */
static const pb_kvcache_pyramidkv_params PARAMS = {8u, 0u, 1u, 1u, 2u, 3u, 3u};

typedef struct pfx {
    counting_allocator ca;
    pb_allocator alloc;
    pb_kvcache *p;
    hs_state before;
    float attn[BIG_LEN * BIG_LEN];
    double ws[BIG_LEN * 4u]; /* aligned for PB_PREFILL_WORKSPACE_ALIGN */
    size_t ws_bytes;         /* what LEN needs */
    uint32_t kept[64];
    uint32_t victims[64];
} pfx;

static pfx *make(const pb_kvcache_options *o) {
    pfx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    ca_init(&f->ca);
    f->alloc = ca_allocator(&f->ca);
    assert_int_equal(pb_kvcache_pyramidkv_create(&PARAMS, o, &f->alloc, &f->p),
                     PB_OK);
    for (size_t i = 0; i < BIG_LEN * BIG_LEN; ++i)
        f->attn[i] = (float)((i * 5u) % 7u) * 0.125f;
    assert_int_equal(pb_kvcache_prefill_workspace_size(f->p, LEN, &f->ws_bytes),
                     PB_OK);
    assert_true(f->ws_bytes <= sizeof f->ws);
    for (size_t i = 0; i < 64u; ++i) f->kept[i] = f->victims[i] = CANARY;
    assert_int_equal(hs_capture(f->p, &f->before), 0);
    return f;
}

static int fx_fresh(void **state) {
    const pb_kvcache_options o = {0u, 0u, PB_PREFILL_CONSISTENT, 16u};
    *state = make(&o);
    return 0;
}

static int fx_reference(void **state) {
    const pb_kvcache_options o = {0u, 0u, PB_PREFILL_REFERENCE, 16u};
    *state = make(&o);
    return 0;
}

/* Capacity 4 (recent_window + 2): 8 survivors cannot fit. */
static int fx_small(void **state) {
    const pb_kvcache_options o = {4u, 0u, PB_PREFILL_CONSISTENT, 16u};
    *state = make(&o);
    return 0;
}

/* No scratch reserved at create. */
static int fx_unreserved(void **state) {
    const pb_kvcache_options o = {0u, 0u, PB_PREFILL_CONSISTENT, 0u};
    *state = make(&o);
    return 0;
}

static int fx_done(void **state) {
    pfx *f = *state;
    pb_kvcache_destroy(f->p);
    assert_int_equal(f->ca.outstanding, 0u);
    assert_int_equal(f->ca.bad_frees, 0u);
    free(f);
    return 0;
}

/* The instance, the output arrays and the allocator are untouched. */
static void assert_unchanged(const pfx *f) {
    HS_ASSERT_UNCHANGED(f);
    for (size_t i = 0; i < 64u; ++i) {
        assert_int_equal(f->kept[i], CANARY);
        assert_int_equal(f->victims[i], CANARY);
    }
}

static pb_status prefill(pfx *f, const float *attn, size_t rows, size_t len,
                         void *ws, size_t ws_bytes, size_t *n) {
    return pb_kvcache_prefill(f->p, attn, rows, len, 8u, ws, ws_bytes, f->kept,
                              64u, f->victims, 64u, n);
}

static void expect(pfx *f, pb_status got, pb_status want) {
    assert_int_equal(got, want);
    assert_unchanged(f);
    /* Still fresh: a correct call now succeeds. */
    size_t n = 0;
    assert_int_equal(pb_kvcache_prefill(f->p, f->attn, ROWS, LEN, 8u, f->ws,
                                        f->ws_bytes, NULL, 0u, NULL, 0u, &n),
                     PB_OK);
}

static void prefill_policy_null(void **state) {
    pfx *f = *state;
    size_t n = 0;
    assert_int_equal(pb_kvcache_prefill(NULL, f->attn, ROWS, LEN, 8u, f->ws,
                                        f->ws_bytes, f->kept, 64u, f->victims,
                                        64u, &n),
                     PB_ERR_NULL);
    assert_unchanged(f);
}

static void prefill_attn_null(void **state) {
    pfx *f = *state;
    size_t n = 0;
    expect(f, prefill(f, NULL, ROWS, LEN, f->ws, f->ws_bytes, &n), PB_ERR_NULL);
}

static void prefill_n_kept_null(void **state) {
    pfx *f = *state;
    expect(f, prefill(f, f->attn, ROWS, LEN, f->ws, f->ws_bytes, NULL),
           PB_ERR_NULL);
}

static void prefill_len_zero(void **state) {
    pfx *f = *state;
    size_t n = 0;
    expect(f, prefill(f, f->attn, ROWS, 0u, f->ws, f->ws_bytes, &n),
           PB_ERR_PARAM);
}

static void prefill_rows_zero(void **state) {
    pfx *f = *state;
    size_t n = 0;
    expect(f, prefill(f, f->attn, 0u, LEN, f->ws, f->ws_bytes, &n),
           PB_ERR_PARAM);
}

static void prefill_rows_one_above_len(void **state) {
    pfx *f = *state;
    size_t n = 0;
    expect(f, prefill(f, f->attn, LEN + 1u, LEN, f->ws, f->ws_bytes, &n),
           PB_ERR_PARAM);
}

static void prefill_reference_rows_not_recent(void **state) {
    pfx *f = *state;
    size_t n = 0;
    /* recent_window is 2: 1 and 3 rows are refused, 2 accepted. */
    assert_int_equal(prefill(f, f->attn, 1u, LEN, f->ws, f->ws_bytes, &n),
                     PB_ERR_PARAM);
    assert_unchanged(f);
    assert_int_equal(prefill(f, f->attn, 3u, LEN, f->ws, f->ws_bytes, &n),
                     PB_ERR_PARAM);
    assert_unchanged(f);
    assert_int_equal(prefill(f, f->attn, 2u, LEN, f->ws, f->ws_bytes, &n),
                     PB_OK);
}

static void prefill_workspace_misaligned(void **state) {
    pfx *f = *state;
    size_t n = 0;
    unsigned char *ws = (unsigned char *)(void *)f->ws;
    expect(f, prefill(f, f->attn, ROWS, LEN, ws + 1, f->ws_bytes, &n),
           PB_ERR_PARAM);
}

static void prefill_len_above_uint32_max(void **state) {
    pfx *f = *state;
    size_t n = 0;
#if SIZE_MAX > UINT32_MAX
    /* Refused before a single weight is read. */
    expect(f, prefill(f, f->attn, 1u, (size_t)UINT32_MAX + 1u, f->ws,
                      f->ws_bytes, &n),
           PB_ERR_TOO_LARGE);
#else
    (void)n;
    skip();
#endif
}

static void prefill_not_fresh_after_observe(void **state) {
    pfx *f = *state;
    const float w[1] = {0.5f};
    assert_int_equal(pb_kvcache_observe(f->p, 1u, w, 1u), PB_OK);
    assert_int_equal(hs_capture(f->p, &f->before), 0);
    size_t n = 0;
    assert_int_equal(prefill(f, f->attn, ROWS, LEN, f->ws, f->ws_bytes, &n),
                     PB_ERR_NOT_FRESH);
    assert_unchanged(f);
}

static void prefill_not_fresh_after_null_observe(void **state) {
    pfx *f = *state;
    assert_int_equal(pb_kvcache_observe(f->p, 1u, NULL, 0u), PB_OK);
    assert_int_equal(hs_capture(f->p, &f->before), 0);
    size_t n = 0;
    assert_int_equal(prefill(f, f->attn, ROWS, LEN, f->ws, f->ws_bytes, &n),
                     PB_ERR_NOT_FRESH);
    assert_unchanged(f);
}

static void prefill_not_fresh_after_prefill(void **state) {
    pfx *f = *state;
    size_t n = 0;
    assert_int_equal(pb_kvcache_prefill(f->p, f->attn, ROWS, LEN, 8u, f->ws,
                                        f->ws_bytes, NULL, 0u, NULL, 0u, &n),
                     PB_OK);
    assert_int_equal(hs_capture(f->p, &f->before), 0);
    assert_int_equal(prefill(f, f->attn, ROWS, LEN, f->ws, f->ws_bytes, &n),
                     PB_ERR_NOT_FRESH);
    assert_unchanged(f);
}

static void prefill_fresh_again_after_reset(void **state) {
    pfx *f = *state;
    assert_int_equal(pb_kvcache_observe(f->p, 1u, NULL, 0u), PB_OK);
    assert_int_equal(pb_kvcache_reset(f->p), PB_OK);
    size_t n = 0;
    assert_int_equal(prefill(f, f->attn, ROWS, LEN, f->ws, f->ws_bytes, &n),
                     PB_OK);
}

static void prefill_workspace_one_byte_short(void **state) {
    pfx *f = *state;
    size_t n = 0;
    expect(f, prefill(f, f->attn, ROWS, LEN, f->ws, f->ws_bytes - 1u, &n),
           PB_ERR_WORKSPACE);
}

static void prefill_len_above_reservation(void **state) {
    pfx *f = *state;
    size_t n = 0;
    expect(f, prefill(f, f->attn, ROWS, BIG_LEN, NULL, 0u, &n),
           PB_ERR_WORKSPACE);
}

static void prefill_no_workspace_no_reservation(void **state) {
    pfx *f = *state;
    size_t n = 0;
    assert_int_equal(prefill(f, f->attn, ROWS, LEN, NULL, 0u, &n),
                     PB_ERR_WORKSPACE);
    assert_unchanged(f);
}

static void prefill_survivors_over_capacity(void **state) {
    pfx *f = *state;
    size_t n = 0;
    assert_int_equal(prefill(f, f->attn, ROWS, LEN, f->ws, f->ws_bytes, &n),
                     PB_ERR_FULL);
    assert_unchanged(f);
}

static void prefill_kept_one_short(void **state) {
    pfx *f = *state;
    size_t n = 0;
    /* LEN 12 with a share of 8 keeps 8. */
    assert_int_equal(pb_kvcache_prefill(f->p, f->attn, ROWS, LEN, 8u, f->ws,
                                        f->ws_bytes, f->kept, 7u, NULL, 0u,
                                        &n),
                     PB_ERR_BUFFER);
    assert_int_equal(n, 8u);
    expect(f, PB_ERR_BUFFER, PB_ERR_BUFFER);
}

static void prefill_kept_capacity_zero(void **state) {
    pfx *f = *state;
    size_t n = 0;
    assert_int_equal(pb_kvcache_prefill(f->p, f->attn, ROWS, LEN, 8u, f->ws,
                                        f->ws_bytes, f->kept, 0u, NULL, 0u,
                                        &n),
                     PB_ERR_BUFFER);
    expect(f, PB_ERR_BUFFER, PB_ERR_BUFFER);
}

static void prefill_victims_one_short(void **state) {
    pfx *f = *state;
    size_t n = 0;
    assert_int_equal(pb_kvcache_prefill(f->p, f->attn, ROWS, LEN, 8u, f->ws,
                                        f->ws_bytes, NULL, 0u, f->victims, 3u,
                                        &n),
                     PB_ERR_BUFFER);
    expect(f, PB_ERR_BUFFER, PB_ERR_BUFFER);
}

static void expect_weight(pfx *f, size_t at, float bad) {
    size_t n = 0;
    const float keep = f->attn[at];
    f->attn[at] = bad;
    assert_int_equal(prefill(f, f->attn, ROWS, LEN, f->ws, f->ws_bytes, &n),
                     PB_ERR_WEIGHT);
    f->attn[at] = keep;
    expect(f, PB_ERR_WEIGHT, PB_ERR_WEIGHT);
}

static void prefill_weight_nan(void **state) {
    expect_weight(*state, 3u, NAN);
}

static void prefill_weight_plus_inf(void **state) {
    expect_weight(*state, LEN + 2u, INFINITY);
}

static void prefill_weight_minus_inf(void **state) {
    expect_weight(*state, 0u, -INFINITY);
}

static void prefill_weight_negative(void **state) {
    expect_weight(*state, 2u * LEN + 1u, -0.5f);
}

/* Row 0 is position 9's: entries 10 and 11 are causal, never used, and
 * still checked. */
static void prefill_weight_nan_in_causal_part(void **state) {
    expect_weight(*state, LEN - 1u, NAN);
}

static void prefill_budget_zero_and_max(void **state) {
    pfx *f = *state;
    size_t n = 0;
    assert_int_equal(pb_kvcache_prefill(f->p, f->attn, ROWS, LEN, 0u, f->ws,
                                        f->ws_bytes, f->kept, 64u, NULL, 0u,
                                        &n),
                     PB_OK);
    /* Budget 0: only the recent window survives. */
    assert_int_equal(n, 2u);
    assert_int_equal(f->kept[0], LEN - 2u);
    assert_int_equal(f->kept[1], LEN - 1u);
    assert_int_equal(pb_kvcache_reset(f->p), PB_OK);
    assert_int_equal(pb_kvcache_prefill(f->p, f->attn, ROWS, LEN, UINT32_MAX,
                                        f->ws, f->ws_bytes, NULL, 0u, NULL, 0u,
                                        &n),
                     PB_OK);
    assert_int_equal(n, 8u);
}

static void workspace_size_policy_null(void **state) {
    (void)state;
    size_t bytes = 0;
    assert_int_equal(pb_kvcache_prefill_workspace_size(NULL, LEN, &bytes),
                     PB_ERR_NULL);
}

static void workspace_size_bytes_null(void **state) {
    pfx *f = *state;
    assert_int_equal(pb_kvcache_prefill_workspace_size(f->p, LEN, NULL),
                     PB_ERR_NULL);
    assert_unchanged(f);
}

static void workspace_size_len_above_uint32_max(void **state) {
    pfx *f = *state;
    size_t bytes = 0;
#if SIZE_MAX > UINT32_MAX
    assert_int_equal(pb_kvcache_prefill_workspace_size(
                         f->p, (size_t)UINT32_MAX + 1u, &bytes),
                     PB_ERR_TOO_LARGE);
    assert_int_equal(pb_kvcache_prefill_workspace_size(f->p, SIZE_MAX, &bytes),
                     PB_ERR_TOO_LARGE);
#endif
    assert_int_equal(pb_kvcache_prefill_workspace_size(f->p, UINT32_MAX, &bytes),
                     PB_OK);
    assert_unchanged(f);
}

#define FRESH(fn) cmocka_unit_test_setup_teardown(fn, fx_fresh, fx_done)
#define REFERENCE(fn) cmocka_unit_test_setup_teardown(fn, fx_reference, fx_done)
#define SMALL(fn) cmocka_unit_test_setup_teardown(fn, fx_small, fx_done)
#define UNRESERVED(fn) \
    cmocka_unit_test_setup_teardown(fn, fx_unreserved, fx_done)

int main(void) {
    const struct CMUnitTest tests[] = {
        FRESH(prefill_policy_null),
        FRESH(prefill_attn_null),
        FRESH(prefill_n_kept_null),
        FRESH(prefill_len_zero),
        FRESH(prefill_rows_zero),
        FRESH(prefill_rows_one_above_len),
        REFERENCE(prefill_reference_rows_not_recent),
        FRESH(prefill_workspace_misaligned),
        FRESH(prefill_len_above_uint32_max),
        FRESH(prefill_not_fresh_after_observe),
        FRESH(prefill_not_fresh_after_null_observe),
        FRESH(prefill_not_fresh_after_prefill),
        FRESH(prefill_fresh_again_after_reset),
        FRESH(prefill_workspace_one_byte_short),
        FRESH(prefill_len_above_reservation),
        UNRESERVED(prefill_no_workspace_no_reservation),
        SMALL(prefill_survivors_over_capacity),
        FRESH(prefill_kept_one_short),
        FRESH(prefill_kept_capacity_zero),
        FRESH(prefill_victims_one_short),
        FRESH(prefill_weight_nan),
        FRESH(prefill_weight_plus_inf),
        FRESH(prefill_weight_minus_inf),
        FRESH(prefill_weight_negative),
        FRESH(prefill_weight_nan_in_causal_part),
        FRESH(prefill_budget_zero_and_max),
        cmocka_unit_test(workspace_size_policy_null),
        FRESH(workspace_size_bytes_null),
        FRESH(workspace_size_len_above_uint32_max),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
