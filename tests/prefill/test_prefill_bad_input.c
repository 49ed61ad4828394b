/*
 * test_prefill_bad_input.c - every refusal of pb_kvcache_prefill returns its
 * documented status and leaves the instance exactly as it was (still fresh:
 * a correct prefill afterwards gives the same result as on a new instance);
 * the workspace sizing query is exact; a prefill allocates nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "prefill_reference.h"
#include "pyramidkv/pyramidkv.h"

#define LEN 40u
#define ROWS 4u

/* An allocator that counts what it hands out. */
typedef struct counting {
    size_t calls;
    size_t live_bytes;
} counting;

static void *count_alloc(void *ctx, size_t n) {
    counting *c = ctx;
    c->calls += 1;
    c->live_bytes += n;
    return malloc(n);
}

static void count_free(void *ctx, void *p, size_t n) {
    counting *c = ctx;
    c->live_bytes -= n;
    free(p);
}

typedef struct fixture {
    float attn[ROWS * LEN];
    uint32_t kept[LEN], victims[LEN];
    void *ws;
    size_t ws_bytes;
    counting count;
    pb_allocator alloc;
    pb_kvcache_pyramidkv_params p;
    pb_kvcache_options o;
    pb_kvcache *policy;
    uint32_t good_kept[LEN];
    size_t good_n;
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    if (f == NULL) return -1;
    pbt_rng g = {42};
    pfref_random_block(&g, f->attn, ROWS, LEN);
    f->alloc.alloc = count_alloc;
    f->alloc.free = count_free;
    f->alloc.ctx = &f->count;
    const pb_kvcache_pyramidkv_params p = {20, 0, 1, 4, ROWS, 8, 3};
    const pb_kvcache_options o = PB_KVCACHE_OPTIONS_DEFAULT;
    f->p = p;
    f->o = o;
    if (pb_kvcache_pyramidkv_create(&f->p, &f->o, &f->alloc, &f->policy) !=
            PB_OK ||
        pb_kvcache_prefill_workspace_size(f->policy, LEN, &f->ws_bytes) !=
            PB_OK)
        return -1;
    f->ws = malloc(f->ws_bytes);
    if (f->ws == NULL) return -1;
    /* The result a correct call gives on a fresh instance. */
    pb_kvcache *fresh = NULL;
    if (pb_kvcache_pyramidkv_create(&f->p, &f->o, NULL, &fresh) != PB_OK ||
        pb_kvcache_prefill(fresh, f->attn, ROWS, LEN, 20, f->ws, f->ws_bytes,
                           f->good_kept, LEN, NULL, 0, &f->good_n) != PB_OK)
        return -1;
    pb_kvcache_destroy(fresh);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    pb_kvcache_destroy(f->policy);
    assert_int_equal(f->count.live_bytes, 0);
    free(f->ws);
    free(f);
    return 0;
}

/* The instance still holds {0} with a zero record and nothing observed, and
 * a correct prefill now gives the fresh result. Resets the instance after. */
static void still_fresh(fixture *f) {
    uint32_t pos[LEN];
    size_t n = 99;
    assert_int_equal(pb_kvcache_kept_count(f->policy), 1);
    assert_int_equal(pb_kvcache_kept_positions(f->policy, pos, LEN, &n), PB_OK);
    assert_int_equal(n, 1);
    assert_int_equal(pos[0], 0);
    double s = -1.0;
    assert_int_equal(pb_kvcache_window_score(f->policy, 0, &s), PB_OK);
    assert_true(s == 0.0);
    const size_t calls = f->count.calls;
    assert_int_equal(pb_kvcache_prefill(f->policy, f->attn, ROWS, LEN, 20,
                                        f->ws, f->ws_bytes, pos, LEN, NULL, 0,
                                        &n),
                     PB_OK);
    assert_int_equal(n, f->good_n);
    assert_memory_equal(pos, f->good_kept, n * sizeof *pos);
    assert_int_equal(f->count.calls, calls); /* no allocation */
    assert_int_equal(pb_kvcache_reset(f->policy), PB_OK);
}

/* Prefills policy from the fixture's workspace with no output buffers
 * (kept and victims counted only). */
static pb_status prefill_counts(pb_kvcache *policy, const fixture *f,
                                const float *attn, size_t rows, uint32_t keep,
                                size_t *n) {
    return pb_kvcache_prefill(policy, attn, rows, LEN, keep, f->ws,
                              f->ws_bytes, NULL, 0, NULL, 0, n);
}

static pb_status call(fixture *f, const float *attn, size_t rows, size_t len,
                      void *ws, size_t ws_bytes, size_t *n) {
    return pb_kvcache_prefill(f->policy, attn, rows, len, 20, ws, ws_bytes,
                              f->kept, LEN, f->victims, LEN, n);
}

static void null_arguments(void **state) {
    fixture *f = *state;
    size_t n = 7;
    assert_int_equal(prefill_counts(NULL, f, f->attn, ROWS, 20, &n),
                     PB_ERR_NULL);
    assert_int_equal(call(f, NULL, ROWS, LEN, f->ws, f->ws_bytes, &n),
                     PB_ERR_NULL);
    assert_int_equal(call(f, f->attn, ROWS, LEN, f->ws, f->ws_bytes, NULL),
                     PB_ERR_NULL);
    assert_int_equal(n, 7);
    still_fresh(f);
}

static void bad_shapes(void **state) {
    fixture *f = *state;
    size_t n = 7;
    assert_int_equal(call(f, f->attn, 0, LEN, f->ws, f->ws_bytes, &n),
                     PB_ERR_PARAM);
    assert_int_equal(call(f, f->attn, LEN + 1, LEN, f->ws, f->ws_bytes, &n),
                     PB_ERR_PARAM);
    assert_int_equal(call(f, f->attn, 0, 0, f->ws, f->ws_bytes, &n),
                     PB_ERR_PARAM);
    /* Misaligned workspace. */
    assert_int_equal(call(f, f->attn, ROWS, LEN, (char *)f->ws + 1,
                          f->ws_bytes - 1, &n), PB_ERR_PARAM);
#if SIZE_MAX > UINT32_MAX
    assert_int_equal(call(f, f->attn, 1, (size_t)UINT32_MAX + 1u, f->ws,
                          f->ws_bytes, &n), PB_ERR_TOO_LARGE);
#endif
#if SIZE_MAX <= UINT32_MAX
    /* rows * len overflows only where size_t has 32 bits. */
    assert_int_equal(call(f, f->attn, 70000, 70000, f->ws, f->ws_bytes, &n),
                     PB_ERR_TOO_LARGE);
#endif
    assert_int_equal(n, 7);
    still_fresh(f);
}

static void reference_scope_needs_rows_equal_recent(void **state) {
    fixture *f = *state;
    pb_kvcache_options o = PB_KVCACHE_OPTIONS_DEFAULT;
    o.prefill_scope = PB_PREFILL_REFERENCE;
    pb_kvcache *r = NULL;
    assert_int_equal(pb_kvcache_pyramidkv_create(&f->p, &o, NULL, &r), PB_OK);
    size_t n = 0;
    assert_int_equal(prefill_counts(r, f, f->attn + LEN, ROWS - 1, 20, &n),
                     PB_ERR_PARAM);
    assert_int_equal(pb_kvcache_kept_count(r), 1);
    assert_int_equal(prefill_counts(r, f, f->attn, ROWS, 20, &n),
                     PB_OK);
    assert_int_equal(n, 20);
    pb_kvcache_destroy(r);
}

static void not_fresh(void **state) {
    fixture *f = *state;
    size_t n = 7;
    const float w[1] = {1.0f};
    assert_int_equal(pb_kvcache_observe(f->policy, 1, NULL, 0), PB_OK);
    assert_int_equal(call(f, f->attn, ROWS, LEN, f->ws, f->ws_bytes, &n),
                     PB_ERR_NOT_FRESH);
    assert_int_equal(pb_kvcache_kept_count(f->policy), 2);
    assert_int_equal(pb_kvcache_reset(f->policy), PB_OK);
    /* An observed step, then everything but 0 evicted again: {0} is held
     * but the ring has moved, so it is not fresh either. */
    const pb_kvcache_pyramidkv_params p = {4, 0, 1, 1, 0, 2, 1};
    pb_kvcache *q = NULL;
    assert_int_equal(pb_kvcache_pyramidkv_create(&p, NULL, NULL, &q), PB_OK);
    assert_int_equal(pb_kvcache_observe(q, 1, w, 1), PB_OK);
    size_t nv = 0;
    uint32_t v[2];
    assert_int_equal(pb_kvcache_evict(q, 1, v, 2, &nv), PB_OK);
    assert_int_equal(nv, 1);
    assert_int_equal(v[0], 1); /* 0 scored 1, 1 scored 0 */
    assert_int_equal(prefill_counts(q, f, f->attn, 1, 4, &nv),
                     PB_ERR_NOT_FRESH);
    assert_int_equal(pb_kvcache_reset(q), PB_OK);
    assert_int_equal(prefill_counts(q, f, f->attn, 1, 4, &nv),
                     PB_OK);
    /* Position 0 evicted without any step (recent_window 0, ask 0): the
     * instance holds nothing, which no decode feed starts from. */
    assert_int_equal(pb_kvcache_reset(q), PB_OK);
    assert_int_equal(pb_kvcache_evict(q, 0, v, 2, &nv), PB_OK);
    assert_int_equal(nv, 1);
    assert_int_equal(pb_kvcache_kept_count(q), 0);
    assert_int_equal(prefill_counts(q, f, f->attn, 1, 4, &nv),
                     PB_ERR_NOT_FRESH);
    assert_int_equal(pb_kvcache_reset(q), PB_OK);
    assert_int_equal(prefill_counts(q, f, f->attn, 1, 4, &nv),
                     PB_OK);
    /* And a prefilled instance is no longer fresh. */
    assert_int_equal(prefill_counts(q, f, f->attn, 1, 4, &nv),
                     PB_ERR_NOT_FRESH);
    pb_kvcache_destroy(q);
    still_fresh(f);
}

static void workspace_exact(void **state) {
    fixture *f = *state;
    size_t n = 7, bytes = 0;
    assert_int_equal(call(f, f->attn, ROWS, LEN, f->ws, f->ws_bytes - 1, &n),
                     PB_ERR_WORKSPACE);
    /* No workspace and no reservation at create. */
    assert_int_equal(call(f, f->attn, ROWS, LEN, NULL, 0, &n),
                     PB_ERR_WORKSPACE);
    assert_int_equal(n, 7);
    still_fresh(f);

    /* 8 bytes per position and 8 per four positions for the candidates
     * when the kernel fits the capacity. */
    assert_int_equal(f->ws_bytes, 8u * LEN + 8u * (LEN / 4u));
    assert_int_equal(pb_kvcache_prefill_workspace_size(f->policy, 0, &bytes),
                     PB_OK);
    assert_int_equal(bytes, 0);
    assert_int_equal(pb_kvcache_prefill_workspace_size(f->policy, LEN, NULL),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_prefill_workspace_size(NULL, LEN, &bytes),
                     PB_ERR_NULL);
#if SIZE_MAX > UINT32_MAX
    assert_int_equal(pb_kvcache_prefill_workspace_size(
                         f->policy, (size_t)UINT32_MAX + 1u, &bytes),
                     PB_ERR_TOO_LARGE);
#endif
    /* A prompt shorter than the workspace is fine. */
    assert_int_equal(call(f, f->attn, ROWS, 20, f->ws, f->ws_bytes, &n),
                     PB_OK);
    assert_int_equal(pb_kvcache_reset(f->policy), PB_OK);

    /* The create-time reservation: len above it is refused, len up to it
     * works without a workspace and allocates nothing. */
    pb_kvcache_options o = PB_KVCACHE_OPTIONS_DEFAULT;
    o.prefill_max_len = LEN - 1;
    pb_kvcache *r = NULL;
    counting c = {0, 0};
    pb_allocator a = {count_alloc, count_free, &c};
    assert_int_equal(pb_kvcache_pyramidkv_create(&f->p, &o, &a, &r), PB_OK);
    assert_int_equal(pb_kvcache_prefill(r, f->attn, ROWS, LEN, 20, NULL, 0,
                                        NULL, 0, NULL, 0, &n),
                     PB_ERR_WORKSPACE);
    assert_int_equal(pb_kvcache_kept_count(r), 1);
    o.prefill_max_len = LEN;
    pb_kvcache_destroy(r);
    assert_int_equal(pb_kvcache_pyramidkv_create(&f->p, &o, &a, &r), PB_OK);
    const size_t after_create = c.calls;
    assert_int_equal(pb_kvcache_prefill(r, f->attn, ROWS, LEN, 20, NULL, 0,
                                        f->kept, LEN, NULL, 0, &n), PB_OK);
    assert_int_equal(n, f->good_n);
    assert_memory_equal(f->kept, f->good_kept, n * sizeof *f->kept);
    assert_int_equal(c.calls, after_create); /* no allocation */
    assert_int_equal(pb_kvcache_memory_bytes(r), c.live_bytes);
    size_t sized = 0;
    assert_int_equal(pb_kvcache_pyramidkv_size(&f->p, &o, &sized), PB_OK);
    assert_int_equal(sized, c.live_bytes);
    pb_kvcache_destroy(r);
    assert_int_equal(c.live_bytes, 0);

    /* A kernel wider than the capacity and the prompt: the workspace also
     * carries the pooling scratch, 16 * min(kernel, len) bytes. */
    const pb_kvcache_pyramidkv_params wide = {4, 0, 1, 4, 2, 8, 41};
    for (uint32_t pool = 0; pool < 2; ++pool) {
        o = (pb_kvcache_options)PB_KVCACHE_OPTIONS_DEFAULT;
        o.pool = pool;
        assert_int_equal(pb_kvcache_pyramidkv_create(&wide, &o, NULL, &r),
                         PB_OK);
        assert_int_equal(pb_kvcache_capacity(r), 5);
        assert_int_equal(pb_kvcache_prefill_workspace_size(r, LEN, &bytes),
                         PB_OK);
        assert_int_equal(bytes, 8u * LEN + 16u * LEN + 8u * (LEN / 4u));
        void *big = malloc(bytes);
        assert_non_null(big);
        assert_int_equal(pb_kvcache_prefill(r, f->attn + (ROWS - 2) * LEN, 2,
                                            LEN, 4, big, bytes - 1, NULL, 0,
                                            NULL, 0, &n),
                         PB_ERR_WORKSPACE);
        assert_int_equal(pb_kvcache_prefill(r, f->attn + (ROWS - 2) * LEN, 2,
                                            LEN, 4, big, bytes, f->kept, LEN,
                                            NULL, 0, &n),
                         PB_OK);
        assert_int_equal(n, 4);
        free(big);
        pb_kvcache_destroy(r);
    }
}

static void bad_weights(void **state) {
    fixture *f = *state;
    size_t n = 7;
    const float poison[4] = {NAN, -1e-30f, INFINITY, -INFINITY};
    /* A used entry (row 0, position 3), the diagonal of the last row and a
     * causal zero of the first row: all are checked. */
    const size_t where[3] = {3, (ROWS - 1) * LEN + LEN - 1, LEN - 1};
    for (int k = 0; k < 4; ++k) {
        for (int w = 0; w < 3; ++w) {
            const float saved = f->attn[where[w]];
            f->attn[where[w]] = poison[k];
            assert_int_equal(call(f, f->attn, ROWS, LEN, f->ws, f->ws_bytes,
                                  &n), PB_ERR_WEIGHT);
            f->attn[where[w]] = saved;
        }
    }
    assert_int_equal(n, 7);
    still_fresh(f);
    /* -0.0 is a valid weight, as in pb_kvcache_observe. */
    const float saved = f->attn[LEN - 1];
    f->attn[LEN - 1] = -0.0f;
    assert_int_equal(call(f, f->attn, ROWS, LEN, f->ws, f->ws_bytes, &n),
                     PB_OK);
    f->attn[LEN - 1] = saved;
    assert_int_equal(pb_kvcache_reset(f->policy), PB_OK);
}

static void survivors_over_capacity(void **state) {
    fixture *f = *state;
    /* Capacity 6 (recent 4 + 2): keeping 20 survivors cannot fit. */
    pb_kvcache_options o = PB_KVCACHE_OPTIONS_DEFAULT;
    o.capacity = ROWS + 2;
    pb_kvcache *r = NULL;
    assert_int_equal(pb_kvcache_pyramidkv_create(&f->p, &o, NULL, &r), PB_OK);
    size_t n = 7;
    assert_int_equal(prefill_counts(r, f, f->attn, ROWS, 20, &n),
                     PB_ERR_FULL);
    assert_int_equal(pb_kvcache_kept_count(r), 1);
    /* An ask of 6 fits. */
    assert_int_equal(prefill_counts(r, f, f->attn, ROWS, 6, &n),
                     PB_OK);
    assert_int_equal(n, 6);
    pb_kvcache_destroy(r);
}

static void output_buffers(void **state) {
    fixture *f = *state;
    size_t n = 0;
    assert_int_equal(pb_kvcache_prefill(f->policy, f->attn, ROWS, LEN, 20,
                                        f->ws, f->ws_bytes, f->kept, 19, NULL,
                                        0, &n), PB_ERR_BUFFER);
    assert_int_equal(n, 20);
    n = 0;
    assert_int_equal(pb_kvcache_prefill(f->policy, f->attn, ROWS, LEN, 20,
                                        f->ws, f->ws_bytes, NULL, 0, f->victims,
                                        19, &n), PB_ERR_BUFFER);
    assert_int_equal(n, 20);
    still_fresh(f);
    /* Exactly enough room is fine. */
    assert_int_equal(pb_kvcache_prefill(f->policy, f->attn, ROWS, LEN, 20,
                                        f->ws, f->ws_bytes, f->kept, 20,
                                        f->victims, 20, &n), PB_OK);
    assert_int_equal(pb_kvcache_reset(f->policy), PB_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(null_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_shapes, setup, teardown),
        cmocka_unit_test_setup_teardown(reference_scope_needs_rows_equal_recent,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(not_fresh, setup, teardown),
        cmocka_unit_test_setup_teardown(workspace_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_weights, setup, teardown),
        cmocka_unit_test_setup_teardown(survivors_over_capacity, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(output_buffers, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
