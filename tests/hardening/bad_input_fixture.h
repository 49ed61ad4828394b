/*
 * bad_input_fixture.h - what the bad-input matrix's files share: the
 * canary, the allocation limit, and the instances a row starts from (warm:
 * 7 held after an evict, scores differing; full: warm filled to its
 * capacity), with the capture of their observable state before a call and
 * the check that it is unchanged after (hardening_state.h).
 */
#ifndef PB_BAD_INPUT_FIXTURE_H
#define PB_BAD_INPUT_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "counting_allocator.h"
#include "hardening_state.h"
#include "pyramidkv/pyramidkv.h"

#define CANARY 0xC0FFEE11u
#define BIG_LIMIT ((size_t)64 << 20)

/* ------------------------------------------------------------------------ */
/* Fixtures                                                                 */

/* budget 8 (one layer, so the share is 8), recent 2, obs 3, pool 3,
 * capacity 12. */
static const pb_kvcache_pyramidkv_params WARM_PARAMS = {8u, 0u, 1u, 1u,
                                                        2u, 3u, 3u};
static const pb_kvcache_options WARM_OPTIONS = {12u, 0u, 0u, 0u};

typedef struct fx {
    counting_allocator ca;
    pb_allocator alloc;
    pb_kvcache *p;
    hs_state before;
    uint32_t evicted; /* a position the warm-up evicted */
    float attn[64];
    uint32_t buf[64];
} fx;

/* Admits pos with a deterministic pattern of valid weights (ties, zeros). */
static inline void feed(pb_kvcache *p, uint32_t pos) {
    float w[64];
    const size_t held = pb_kvcache_kept_count(p);
    assert_true(held < 64u);
    for (size_t i = 0; i < held; ++i)
        w[i] = (float)((pos * 7u + (uint32_t)i * 3u) % 5u) * 0.25f;
    assert_int_equal(pb_kvcache_observe(p, pos, w, held), PB_OK);
}

static inline void capture(const fx *f, hs_state *s) {
    assert_int_equal(hs_capture(f->p, s), 0);
}

static inline void set_before(fx *f) { capture(f, &f->before); }

/* Fills attn[0 .. n-1] with valid weights. */
static inline float *weights(fx *f, size_t n) {
    assert_true(n <= 64u);
    for (size_t i = 0; i < n; ++i) f->attn[i] = 0.125f * (float)(i % 3u);
    return f->attn;
}

static inline uint32_t last_held(const fx *f) {
    return f->before.pos[f->before.kept - 1u];
}

/* Held 0 .. 9, evicted to 6, then 12 admitted: 7 held, scores differ, the
 * ring has advanced ten steps. */
static inline int fx_warm(void **state) {
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    ca_init(&f->ca);
    f->alloc = ca_allocator(&f->ca);
    assert_int_equal(pb_kvcache_pyramidkv_create(&WARM_PARAMS, &WARM_OPTIONS,
                                                 &f->alloc, &f->p),
                     PB_OK);
    for (uint32_t pos = 1; pos <= 9u; ++pos) feed(f->p, pos);
    size_t n = 0;
    assert_int_equal(pb_kvcache_evict(f->p, 6u, f->buf, 64u, &n), PB_OK);
    assert_int_equal(n, 4u);
    f->evicted = f->buf[0];
    feed(f->p, 12u);
    set_before(f);
    assert_int_equal(f->before.kept, 7u);
    *state = f;
    return 0;
}

/* Feeds the warm instance from position 13 up to its capacity of 12 and
 * records that state as before. */
static inline void fx_fill(fx *f) {
    for (uint32_t pos = 13; pb_kvcache_kept_count(f->p) < 12u; ++pos)
        feed(f->p, pos);
    set_before(f);
}

/* The warm instance filled to its capacity of 12. */
static inline int fx_full(void **state) {
    fx_warm(state);
    fx_fill(*state);
    return 0;
}

static inline int fx_done(void **state) {
    fx *f = *state;
    pb_kvcache_destroy(f->p);
    assert_int_equal(f->ca.outstanding, 0u);
    assert_int_equal(f->ca.bad_frees, 0u);
    assert_int_equal(f->ca.live_blocks, 0u);
    free(f);
    return 0;
}

/* budget 3 on the warm instance: 7 held, 2 protected, so 4 must go. */
#define EVICT_NEEDS 4u

/* A small valid configuration for the create rows: budget 16 in one layer
 * (ratio 4), recent 4, obs 4, pool 3. */
static inline pb_kvcache_pyramidkv_params small_params(void) {
    const pb_kvcache_pyramidkv_params p = {16u, 0u, 1u, 4u, 4u, 4u, 3u};
    return p;
}

/* The allocator of a create that must be refused before it allocates. */
static inline void *never_alloc(void *ctx, size_t n) {
    (void)ctx;
    (void)n;
    fail_msg("the allocator of a refused create was called");
    return NULL;
}

static inline void never_free(void *ctx, void *p, size_t n) {
    (void)ctx;
    (void)p;
    (void)n;
    fail_msg("the allocator of a refused create was called");
}

#endif /* PB_BAD_INPUT_FIXTURE_H */
