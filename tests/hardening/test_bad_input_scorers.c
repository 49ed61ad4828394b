/*
 * test_bad_input_scorers.c - the bad-input matrix of the scorers, the
 * sinks and the policybook family vtables (docs/spec.md, "Scorers and
 * sinks"): one cmocka test per row, each run on a warm instance of every
 * scorer (window with sinks, cumulative, last, votes, none; each with
 * sinks) or on every family vtable. A row passes one bad (or boundary)
 * argument and asserts the documented status or return value AND that the
 * instance's full observable state (held positions, every score under its
 * scorer, sinks held, effective share, held count, capacity, memory bytes;
 * see hardening_state.h) is identical before and after. Output buffers a
 * refused call must not write are filled with a canary and checked.
 *
 * The row names are the first column of the scorer table in
 * docs/robustness.md.
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
#include "fp_env.h"
#include "hardening_state.h"
#include "pyramidkv/pyramidkv.h"
#include "test_configs.h"
#include "test_main.h"

#define CANARY 0xC0FFEE11u
#define N_SCORERS 5u
#define N_FAMILY 5u

static const pb_kvcache_vtable *const FAMILY[N_FAMILY] = {
    &pb_kvcache_h2o, &pb_kvcache_scissorhands, &pb_kvcache_tova,
    &pb_kvcache_streaming_llm, &pb_kvcache_sliding_window};

/* ------------------------------------------------------------------------ */
/* Warm instances                                                           */

/* budget 8 (one layer: share 8), recent 2, sinks 2, obs 3, pool 3,
 * capacity 12, the given scorer. */
static pb_kvcache_config warm_config(uint32_t scorer) {
    pb_kvcache_config c = pbt_kvcache_config(8u, 2u);
    c.obs_window = 3u;
    c.pool_kernel = 3u;
    c.scorer = scorer;
    c.sinks = 2u;
    c.capacity = 12u;
    return c;
}

/* Admits pos with a deterministic pattern of valid weights (ties, zeros),
 * or with none when pos is a multiple of 4. */
static void feed_vt(const pb_kvcache_vtable *vt, pb_kvcache *p, uint32_t pos) {
    float w[64];
    const size_t held = pb_kvcache_kept_count(p);
    assert_true(held < 64u);
    for (size_t i = 0; i < held; ++i)
        w[i] = (float)((pos * 7u + (uint32_t)i * 3u) % 5u) * 0.25f;
    const float *attn = pos % 4u == 0u ? NULL : w;
    if (vt != NULL) {
        vt->on_decode_step(p, pos, attn, held);
        assert_int_equal(pb_kvcache_kept_count(p), held + 1u);
    } else {
        assert_int_equal(pb_kvcache_observe(p, pos, attn, held), PB_OK);
    }
}

typedef struct warm {
    counting_allocator ca;
    pb_allocator alloc;
    pb_kvcache *p;
    const pb_kvcache_vtable *vt; /* NULL: native */
    hs_state before;
    float attn[64];
    uint32_t buf[64];
} warm;

static void capture(const warm *f, hs_state *s) {
    assert_int_equal(hs_capture(f->p, s), 0);
}

/* Held 0 .. 9, evicted to 6 (the sinks 0 and 1 spared), then 13 admitted:
 * 7 held. full: then filled to the capacity. */
static void warm_native(warm *f, uint32_t scorer, int full) {
    memset(f, 0, sizeof *f);
    ca_init(&f->ca);
    f->alloc = ca_allocator(&f->ca);
    const pb_kvcache_config c = warm_config(scorer);
    assert_int_equal(pb_kvcache_create(&c, &f->alloc, &f->p), PB_OK);
    for (uint32_t pos = 1; pos <= 9u; ++pos) feed_vt(NULL, f->p, pos);
    size_t n = 0;
    assert_int_equal(pb_kvcache_evict(f->p, 6u, f->buf, 64u, &n), PB_OK);
    assert_int_equal(n, 4u);
    assert_int_equal(pb_kvcache_sink_count(f->p), 2u);
    feed_vt(NULL, f->p, 13u);
    for (uint32_t pos = 14; full && pb_kvcache_kept_count(f->p) < 12u; ++pos)
        feed_vt(NULL, f->p, pos);
    capture(f, &f->before);
}

/* A family instance of budget 6 (recent 2 or sinks 2 where it has them):
 * 0 .. 5 fed, then evicted to 4, then 9 admitted. full: then 10 .. until
 * the capacity of 7. */
static void warm_family(warm *f, size_t which, int full) {
    memset(f, 0, sizeof *f);
    ca_init(&f->ca);
    f->alloc = ca_allocator(&f->ca);
    f->vt = FAMILY[which];
    const uint32_t params[2] = {6u, 2u};
    f->p = f->vt->create(params, &f->alloc, NULL);
    assert_non_null(f->p);
    for (uint32_t pos = 1; pos <= 5u; ++pos) feed_vt(f->vt, f->p, pos);
    assert_true(f->vt->evict(f->p, 4u, f->buf, 64u) >= 1u);
    feed_vt(f->vt, f->p, 9u);
    for (uint32_t pos = 10; full && pb_kvcache_kept_count(f->p) < 7u; ++pos)
        feed_vt(f->vt, f->p, pos);
    capture(f, &f->before);
}

static void done(warm *f) {
    if (f->vt != NULL)
        f->vt->destroy(f->p);
    else
        pb_kvcache_destroy(f->p);
    assert_int_equal(f->ca.outstanding, 0u);
    assert_int_equal(f->ca.bad_frees, 0u);
}

static uint32_t last_held(const warm *f) {
    return f->before.pos[f->before.kept - 1u];
}

static float *valid_weights(warm *f, size_t n) {
    for (size_t i = 0; i < n; ++i) f->attn[i] = 0.125f * (float)(i % 3u);
    return f->attn;
}

/* Runs body(f) on a warm instance of every scorer, native, then on every
 * family vtable instance. */
typedef void (*row_body)(warm *f);

static void every_instance(row_body body, int full) {
    for (uint32_t s = 0; s < N_SCORERS; ++s) {
        warm f;
        warm_native(&f, s, full);
        body(&f);
        done(&f);
    }
    for (size_t i = 0; i < N_FAMILY; ++i) {
        warm f;
        warm_family(&f, i, full);
        body(&f);
        done(&f);
    }
}

/* One observe through the instance's own door: the native status, or the
 * vtable's (which has none: the state says it). */
static pb_status observe(warm *f, uint32_t pos, const float *attn,
                         size_t len) {
    if (f->vt == NULL) return pb_kvcache_observe(f->p, pos, attn, len);
    f->vt->on_decode_step(f->p, pos, attn, len);
    return PB_ERR_PARAM; /* checked by ASSERT_UNCHANGED only */
}

static void expect_observe_refused(warm *f, uint32_t pos, const float *attn,
                                   size_t len, pb_status want) {
    const pb_status st = observe(f, pos, attn, len);
    if (f->vt == NULL) assert_int_equal(st, want);
    HS_ASSERT_UNCHANGED(f);
}

/* ------------------------------------------------------------------------ */
/* Observe                                                                  */

static void body_observe_position_not_above(warm *f) {
    const size_t held = f->before.kept;
    expect_observe_refused(f, last_held(f), valid_weights(f, held), held,
                           PB_ERR_POSITION);
    expect_observe_refused(f, 1u, NULL, 0u, PB_ERR_POSITION); /* a sink */
}

static void body_observe_length_wrong(warm *f) {
    const size_t held = f->before.kept;
    float *w = valid_weights(f, held + 1u);
    expect_observe_refused(f, last_held(f) + 1u, w, held - 1u, PB_ERR_LENGTH);
    expect_observe_refused(f, last_held(f) + 1u, w, held + 1u, PB_ERR_LENGTH);
    expect_observe_refused(f, last_held(f) + 1u, w, 0u, PB_ERR_LENGTH);
}

static void body_observe_weight_bad(warm *f) {
    const size_t held = f->before.kept;
    const float bad[] = {NAN, INFINITY, -INFINITY, -1.0f, -1e-40f};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; ++b) {
        float *w = valid_weights(f, held);
        w[b % held] = bad[b];
        expect_observe_refused(f, last_held(f) + 1u, w, held, PB_ERR_WEIGHT);
    }
}

static void body_observe_full(warm *f) {
    const size_t held = f->before.kept;
    assert_int_equal(held, pb_kvcache_capacity(f->p));
    expect_observe_refused(f, last_held(f) + 1u, valid_weights(f, held), held,
                           PB_ERR_FULL);
    expect_observe_refused(f, last_held(f) + 1u, NULL, 0u, PB_ERR_FULL);
}

static void body_observe_policy_null(warm *f) {
    if (f->vt == NULL)
        assert_int_equal(pb_kvcache_observe(NULL, 99u, NULL, 0u),
                         PB_ERR_NULL);
    else
        f->vt->on_decode_step(NULL, 99u, NULL, 0u);
    HS_ASSERT_UNCHANGED(f);
}

static void scorer_observe_position_not_above(void **state) {
    (void)state;
    every_instance(body_observe_position_not_above, 0);
}
static void scorer_observe_length_wrong(void **state) {
    (void)state;
    every_instance(body_observe_length_wrong, 0);
}
static void scorer_observe_weight_bad(void **state) {
    (void)state;
    every_instance(body_observe_weight_bad, 0);
}
/* The same with x86's flush-to-zero and denormals-are-zero bits set, as
 * some inference runtimes leave them: the check reads bit patterns, so a
 * negative subnormal (which DAZ would read as -0.0) is still refused, by
 * every scorer and in every kernel variant the machine runs. */
static void scorer_observe_weight_bad_under_daz(void **state) {
    PBT_RUN_UNDER_DAZ(scorer_observe_weight_bad, state);
}
static void scorer_observe_full(void **state) {
    (void)state;
    every_instance(body_observe_full, 1);
}
static void scorer_observe_policy_null(void **state) {
    (void)state;
    every_instance(body_observe_policy_null, 0);
}

/* ------------------------------------------------------------------------ */
/* Evict                                                                    */

/* A buffer one short of what evict(0) would drop. */
static void body_evict_buffer_short(warm *f) {
    for (size_t i = 0; i < 64u; ++i) f->buf[i] = CANARY;
    if (f->vt == NULL) {
        size_t n = 0;
        assert_int_equal(pb_kvcache_evict(f->p, 0u, f->buf, 0u, &n),
                         PB_ERR_BUFFER);
        const size_t needed = n;
        assert_true(needed >= 1u);
        assert_int_equal(
            pb_kvcache_evict(f->p, 0u, f->buf, needed - 1u, &n),
            PB_ERR_BUFFER);
        assert_int_equal(n, needed);
    } else {
        /* No status to say how many: every buffer shorter than the count
         * returns 0 and writes nothing, the first long enough evicts (the
         * last call; the instance is not used afterwards). */
        size_t cap = 0;
        while (cap <= f->before.kept &&
               f->vt->evict(f->p, 0u, f->buf, cap) == 0u) {
            for (size_t i = 0; i < 64u; ++i)
                assert_int_equal(f->buf[i], CANARY);
            HS_ASSERT_UNCHANGED(f);
            ++cap;
        }
        assert_true(cap >= 1u && cap <= f->before.kept);
        assert_true(pb_kvcache_kept_count(f->p) < f->before.kept);
        return;
    }
    for (size_t i = 0; i < 64u; ++i) assert_int_equal(f->buf[i], CANARY);
    HS_ASSERT_UNCHANGED(f);
}

static void body_evict_null_arguments(warm *f) {
    size_t n = 7u;
    if (f->vt == NULL) {
        assert_int_equal(pb_kvcache_evict(NULL, 0u, f->buf, 64u, &n),
                         PB_ERR_NULL);
        assert_int_equal(pb_kvcache_evict(f->p, 0u, f->buf, 64u, NULL),
                         PB_ERR_NULL);
        assert_int_equal(pb_kvcache_evict(f->p, 0u, NULL, 4u, &n),
                         PB_ERR_NULL);
    } else {
        assert_int_equal(f->vt->evict(NULL, 0u, f->buf, 64u), 0u);
        assert_int_equal(f->vt->evict(f->p, 0u, NULL, 64u), 0u);
        assert_int_equal(f->vt->evict(f->p, 0u, NULL, 0u), 0u);
    }
    HS_ASSERT_UNCHANGED(f);
}

/* Evicting to the held count or above drops nothing and changes
 * nothing. */
static void body_evict_nothing_to_drop(warm *f) {
    const uint32_t held = (uint32_t)f->before.kept;
    const uint32_t asks[] = {held, held + 1u, UINT32_MAX};
    for (size_t a = 0; a < 3u; ++a) {
        if (f->vt == NULL) {
            size_t n = 7u;
            /* The native target is min(ask, share 8) and 7 are held. */
            assert_int_equal(pb_kvcache_evict(f->p, asks[a], NULL, 0u, &n),
                             PB_OK);
            assert_int_equal(n, 0u);
        } else {
            assert_int_equal(f->vt->evict(f->p, asks[a], f->buf, 64u), 0u);
        }
        HS_ASSERT_UNCHANGED(f);
    }
}

static void scorer_evict_buffer_short(void **state) {
    (void)state;
    every_instance(body_evict_buffer_short, 0);
}
static void scorer_evict_null_arguments(void **state) {
    (void)state;
    every_instance(body_evict_null_arguments, 0);
}
static void scorer_evict_nothing_to_drop(void **state) {
    (void)state;
    every_instance(body_evict_nothing_to_drop, 0);
}

/* TOVA refuses a buffer below held - budget even when only the observed
 * (fewer) would go: 0 observed + 3 fresh of budget 2. */
static void tova_evict_unclamped_capacity(void **state) {
    (void)state;
    warm f;
    memset(&f, 0, sizeof f);
    const pb_kvcache_tova_params tp = {2u};
    f.p = pb_kvcache_tova.create(&tp, NULL, NULL);
    f.vt = &pb_kvcache_tova;
    ca_init(&f.ca);
    const float w[] = {.5f, .5f};
    pb_kvcache_tova.on_decode_step(f.p, 1u, NULL, 0u);
    pb_kvcache_tova.on_decode_step(f.p, 2u, w, 2u); /* 0, 1 observed */
    capture(&f, &f.before);
    for (size_t i = 0; i < 64u; ++i) f.buf[i] = CANARY;
    assert_int_equal(pb_kvcache_tova.evict(f.p, 0u, f.buf, 2u), 0u);
    assert_int_equal(f.buf[0], CANARY);
    HS_ASSERT_UNCHANGED(&f);
    assert_int_equal(pb_kvcache_tova.evict(f.p, 0u, f.buf, 3u), 2u);
    pb_kvcache_tova.destroy(f.p);
}

/* ------------------------------------------------------------------------ */
/* Introspection                                                            */

static void body_score_refusals(warm *f) {
    double s = -42.0;
    assert_int_equal(pb_kvcache_score(NULL, 0u, &s), PB_ERR_NULL);
    assert_int_equal(pb_kvcache_score(f->p, 0u, NULL), PB_ERR_NULL);
    /* 2 .. 5 were evicted or never held. */
    assert_int_equal(pb_kvcache_score(f->p, last_held(f) + 1u, &s),
                     PB_ERR_NOT_HELD);
    assert_int_equal(pb_kvcache_score(f->p, UINT32_MAX, &s), PB_ERR_NOT_HELD);
    assert_true(s == -42.0);
    /* The window score exists for the window scorer only. */
    const pb_status ws = pb_kvcache_window_score(f->p, 0u, &s);
    if (ws != PB_OK) {
        assert_int_equal(ws, PB_ERR_PARAM);
        assert_true(s == -42.0);
    }
    assert_int_equal(pb_kvcache_sink_count(NULL), 0u);
    HS_ASSERT_UNCHANGED(f);
}

static void scorer_score_refusals(void **state) {
    (void)state;
    every_instance(body_score_refusals, 0);
}

/* Which instances have a window score: the native window scorer only. */
static void window_score_only_on_window(void **state) {
    (void)state;
    for (uint32_t s = 0; s < N_SCORERS; ++s) {
        warm f;
        warm_native(&f, s, 0);
        double a = -1.0, b = -2.0;
        const pb_status st = pb_kvcache_window_score(f.p, 0u, &a);
        assert_int_equal(st, s == PB_SCORER_WINDOW ? PB_OK : PB_ERR_PARAM);
        if (st == PB_OK) {
            assert_int_equal(pb_kvcache_score(f.p, 0u, &b), PB_OK);
            assert_memory_equal(&a, &b, sizeof a);
        }
        HS_ASSERT_UNCHANGED(&f);
        done(&f);
    }
}

/* Prefill: the window scorer without sinks only. */
static void prefill_refused_with_scorer_or_sinks(void **state) {
    (void)state;
    for (uint32_t s = 0; s < N_SCORERS; ++s) {
        warm f;
        memset(&f, 0, sizeof f);
        ca_init(&f.ca);
        pb_kvcache_config c = warm_config(s);
        assert_int_equal(pb_kvcache_create(&c, NULL, &f.p), PB_OK);
        capture(&f, &f.before);
        const float rows[4] = {.25f, .25f, .25f, .25f};
        uint32_t kept[4] = {CANARY, CANARY, CANARY, CANARY};
        size_t n = 77u;
        assert_int_equal(pb_kvcache_prefill(f.p, rows, 1u, 4u, 8u, NULL, 0u,
                                            kept, 4u, NULL, 0u, &n),
                         PB_ERR_PARAM);
        assert_int_equal(n, 77u);
        assert_int_equal(kept[0], CANARY);
        HS_ASSERT_UNCHANGED(&f);
        pb_kvcache_destroy(f.p);
    }
}

/* ------------------------------------------------------------------------ */
/* Create: the new fields and the family params                             */

static void *never_alloc(void *ctx, size_t n) {
    (void)ctx;
    (void)n;
    fail_msg("the allocator of a refused create was called");
    return NULL;
}

static void never_free(void *ctx, void *p, size_t n) {
    (void)ctx;
    (void)p;
    (void)n;
    fail_msg("the allocator of a refused create was called");
}

static void expect_config(const pb_kvcache_config *c, pb_status want) {
    size_t bytes = (size_t)0x5A5A5A5Au;
    const pb_status ss = pb_kvcache_size(c, &bytes);
    assert_int_equal(ss, want);
    if (ss != PB_OK) assert_int_equal(bytes, (size_t)0x5A5A5A5Au);
    const pb_allocator never = {never_alloc, never_free, NULL};
    pb_kvcache *out = (pb_kvcache *)(void *)&bytes;
    if (want != PB_OK) {
        assert_int_equal(pb_kvcache_create(c, &never, &out), want);
        assert_null(out);
        return;
    }
    counting_allocator ca;
    ca_init(&ca);
    const pb_allocator a = ca_allocator(&ca);
    assert_int_equal(pb_kvcache_create(c, &a, &out), PB_OK);
    assert_int_equal(pb_kvcache_memory_bytes(out), bytes);
    assert_int_equal(ca.outstanding, bytes);
    pb_kvcache_destroy(out);
    assert_int_equal(ca.outstanding, 0u);
}

static void create_scorer_out_of_range(void **state) {
    (void)state;
    pb_kvcache_config c = warm_config(PB_SCORER_NONE);
    expect_config(&c, PB_OK);
    c.scorer = (uint32_t)PB_SCORER_NONE + 1u;
    expect_config(&c, PB_ERR_PARAM);
    c.scorer = UINT32_MAX;
    expect_config(&c, PB_ERR_PARAM);
}

/* sinks + recent_window must stay below the capacity (12, recent 2). */
static void create_sinks_bounds(void **state) {
    (void)state;
    for (uint32_t s = 0; s < N_SCORERS; ++s) {
        pb_kvcache_config c = warm_config(s);
        c.sinks = 9u;
        expect_config(&c, PB_OK);
        c.sinks = 10u;
        expect_config(&c, PB_ERR_PARAM);
        c.sinks = UINT32_MAX;
        expect_config(&c, PB_ERR_PARAM);
        c.sinks = 0u;
        expect_config(&c, PB_OK);
        /* The default capacity: max(share 8, budget 8) + 1 = 9. */
        c.capacity = 0u;
        c.sinks = 6u;
        expect_config(&c, PB_OK);
        c.sinks = 7u;
        expect_config(&c, PB_ERR_PARAM);
    }
}

static void create_prefill_reservation_with_scorer_or_sinks(void **state) {
    (void)state;
    for (uint32_t s = 0; s < N_SCORERS; ++s) {
        pb_kvcache_config c = warm_config(s);
        c.sinks = 0u;
        c.prefill_max_len = 16u;
        expect_config(&c, s == PB_SCORER_WINDOW ? PB_OK : PB_ERR_PARAM);
        c.sinks = 1u;
        expect_config(&c, PB_ERR_PARAM);
    }
}

/* Every refused family params struct: NULL, and the allocator never
 * called. Each struct starts {budget, second}. */
static void family_create_refused(void **state) {
    (void)state;
    const pb_allocator never = {never_alloc, never_free, NULL};
    const uint32_t any[][2] = {{0u, 0u}, {UINT32_MAX, 0u}};
    for (size_t v = 0; v < N_FAMILY; ++v)
        for (size_t i = 0; i < 2u; ++i)
            assert_null(FAMILY[v]->create(any[i], &never, NULL));
    /* recent_window >= budget (h2o, scissorhands), sinks >= budget
     * (streaming_llm). */
    const uint32_t second_at_budget[2] = {5u, 5u};
    const uint32_t second_above[2] = {5u, UINT32_MAX};
    const size_t second_used[] = {0, 1, 3};
    for (size_t k = 0; k < 3u; ++k) {
        assert_null(FAMILY[second_used[k]]->create(second_at_budget, &never,
                                                   NULL));
        assert_null(FAMILY[second_used[k]]->create(second_above, &never,
                                                   NULL));
    }
    /* A lacking allocator. */
    const pb_allocator lacking[] = {{NULL, never_free, NULL},
                                    {never_alloc, NULL, NULL}};
    for (size_t v = 0; v < N_FAMILY; ++v)
        for (size_t l = 0; l < 2u; ++l)
            assert_null(FAMILY[v]->create(NULL, &lacking[l], NULL));
    /* At the bounds, accepted: budget UINT32_MAX - 1 would need 2^32
     * positions: refused by the allocator, not the params. */
    const uint32_t at_bound[2] = {5u, 4u};
    for (size_t v = 0; v < N_FAMILY; ++v) {
        counting_allocator ca;
        ca_init(&ca);
        const pb_allocator a = ca_allocator(&ca);
        pb_kvcache *p = FAMILY[v]->create(at_bound, &a, NULL);
        assert_non_null(p);
        assert_int_equal(FAMILY[v]->memory_bytes(p), ca.outstanding);
        FAMILY[v]->destroy(p);
        assert_int_equal(ca.outstanding, 0u);
        ca_init(&ca);
        ca.limit_bytes = (size_t)64 << 20;
        const pb_allocator lim = ca_allocator(&ca);
        const uint32_t huge[2] = {UINT32_MAX - 1u, 0u};
        assert_null(FAMILY[v]->create(huge, &lim, NULL));
        assert_int_equal(ca.outstanding, 0u);
    }
    for (size_t v = 0; v < N_FAMILY; ++v) FAMILY[v]->destroy(NULL);
    for (size_t v = 0; v < N_FAMILY; ++v)
        assert_int_equal(FAMILY[v]->memory_bytes(NULL), 0u);
}

PB_TEST_MAIN(cmocka_unit_test(scorer_observe_position_not_above),
             cmocka_unit_test(scorer_observe_length_wrong),
             cmocka_unit_test(scorer_observe_weight_bad),
             cmocka_unit_test(scorer_observe_weight_bad_under_daz),
             cmocka_unit_test(scorer_observe_full),
             cmocka_unit_test(scorer_observe_policy_null),
             cmocka_unit_test(scorer_evict_buffer_short),
             cmocka_unit_test(scorer_evict_null_arguments),
             cmocka_unit_test(scorer_evict_nothing_to_drop),
             cmocka_unit_test(tova_evict_unclamped_capacity),
             cmocka_unit_test(scorer_score_refusals),
             cmocka_unit_test(window_score_only_on_window),
             cmocka_unit_test(prefill_refused_with_scorer_or_sinks),
             cmocka_unit_test(create_scorer_out_of_range),
             cmocka_unit_test(create_sinks_bounds),
             cmocka_unit_test(create_prefill_reservation_with_scorer_or_sinks),
             cmocka_unit_test(family_create_refused))
