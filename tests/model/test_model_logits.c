/*
 * test_model_logits.c - the C runtime reproduces the torch model: for each
 * committed reference prompt, the logits at every position match the torch
 * logits exported with the same weights (bench/model/export.py) within 1e-3
 * relative (max |c - t| over a position's 256 logits <= 1e-3 * max(1,
 * max |t|)), both with a plain full cache and through libpyramidkv with a
 * budget that evicts nothing (SnapKV's one-shot prefill and H2O's replayed
 * prompt). A third test runs real eviction and checks that the K/V slots
 * always hold exactly the library's kept positions. Built once per model
 * file (PKM_MODEL_FILE, PKM_REF_FILE under bench/model/data): the trained
 * first model m1, m1t (m1 taught the task suite), the trained second model
 * m2g (12 layers, 4 query heads per KV head, 4 KV heads, head dim 32,
 * 1024 positions) and a random-init model of m2's shape (the same but
 * head dim 16).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pkm_cache.h"
#include "pkm_io.h"
#include "pkm_model.h"

#ifndef PKM_DATA_DIR
#error "PKM_DATA_DIR must name bench/model/data"
#endif
#ifndef PKM_MODEL_FILE
#define PKM_MODEL_FILE "model.pkvm"
#define PKM_REF_FILE "ref_logits.bin"
#endif

typedef struct fixture {
    pkm_model m;
    pkm_ref ref;
    float *attn;   /* [layers][heads][rope_len] */
    float *logits; /* [vocab] */
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    char err[256];
    if (!f) return -1;
    if (pkm_model_load(&f->m, PKM_DATA_DIR "/" PKM_MODEL_FILE, err, sizeof err) != 0 ||
        pkm_ref_load(&f->ref, PKM_DATA_DIR "/" PKM_REF_FILE) != 0) {
        free(f);
        return -1;
    }
    f->attn = calloc((size_t)f->m.c.n_layers * f->m.c.n_heads * f->m.rope_len,
                     sizeof(float));
    f->logits = calloc(f->m.c.vocab, sizeof(float));
    *state = f;
    return f->attn && f->logits ? 0 : -1;
}

static int teardown(void **state)
{
    fixture *f = *state;
    pkm_model_free(&f->m);
    pkm_ref_free(&f->ref);
    free(f->attn);
    free(f->logits);
    free(f);
    return 0;
}

/* The relative error of one position's logits. */
static double rel_err(const float *c, const float *t, uint32_t vocab)
{
    double mx = 1.0, d = 0.0;
    for (uint32_t i = 0; i < vocab; i++) {
        if (fabs((double)t[i]) > mx) mx = fabs((double)t[i]);
        const double e = fabs((double)c[i] - (double)t[i]);
        if (!(e <= d)) d = e; /* NaN propagates as a failure */
    }
    return d / mx;
}

static double worst; /* the largest relative error seen, printed */

static void check_position(const float *c, const pkm_ref_prompt *p, uint32_t t)
{
    const double e = rel_err(c, p->logits + (size_t)t * 256, 256);
    if (e > worst) worst = e;
    if (!(e <= 1e-3))
        fail_msg("position %u of a %u-byte prompt: relative error %.3g", t,
                 p->len, e);
}

static void test_full_cache_matches_torch(void **state)
{
    fixture *f = *state;
    assert_int_equal(f->m.c.vocab, 256);
    for (uint32_t r = 0; r < f->ref.count; r++) {
        const pkm_ref_prompt *p = &f->ref.prompts[r];
        pkm_cache kc;
        char err[128];
        pkm_cache_params cp = {NULL, 0, 0, 1, 1, 1, p->len};
        assert_int_equal(pkm_cache_init(&kc, &f->m, &cp, err, sizeof err), 0);
        for (uint32_t t = 0; t < p->len; t++) {
            assert_int_equal(pkm_model_step(&f->m, kc.slots, p->bytes[t], t,
                                            NULL, 0, f->logits), 0);
            check_position(f->logits, p, t);
        }
        pkm_cache_free(&kc);
    }
    print_message("largest relative error %.3g (limit 1e-3)\n", worst);
}

/* Every slot holds exactly the library's kept positions, in order. */
static void check_slots_mirror_library(const pkm_cache *kc)
{
    uint32_t pos[1024];
    for (size_t s = 0; s < (size_t)kc->n_layers * kc->n_kv; s++) {
        size_t n = 0;
        assert_int_equal(pb_kvcache_kept_positions(kc->pol[s], pos, 1024, &n),
                         PB_OK);
        assert_int_equal(n, kc->slots[s].n);
        assert_true(n <= kc->slots[s].cap);
        assert_memory_equal(pos, kc->slots[s].pos, n * sizeof(uint32_t));
    }
}

/* Prefill the first half through pkm_cache_prefill, decode the rest with
 * pkm_cache_after_step; returns the smallest slot count seen after the
 * prefill (to tell whether anything was evicted). */
static uint32_t run_with_library(fixture *f, const pkm_ref_prompt *p,
                                 const pkm_method *method, uint32_t budget,
                                 uint32_t recent,
                                 uint32_t obs, uint32_t cadence,
                                 int compare)
{
    const pkm_config *c = &f->m.c;
    const uint32_t half = p->len / 2, W = obs < half ? obs : half;
    const size_t n_slots = (size_t)c->n_layers * c->n_kv_heads;
    pkm_slot *full = calloc(n_slots, sizeof *full);
    float *rows = calloc((size_t)c->n_layers * c->n_heads * W * half,
                         sizeof(float));
    assert_non_null(full);
    assert_non_null(rows);
    for (size_t s = 0; s < n_slots; s++)
        assert_int_equal(pkm_slot_init(&full[s], p->len, c->head_dim), 0);
    assert_int_equal(pkm_prefill_full(&f->m, full, p->bytes, half, rows, W,
                                      f->logits, f->attn), 0);
    if (compare) check_position(f->logits, p, half - 1);

    pkm_cache kc;
    char err[128];
    pkm_cache_params cp = {method, budget, recent, obs, 7, cadence, p->len};
    assert_int_equal(pkm_cache_init(&kc, &f->m, &cp, err, sizeof err), 0);
    assert_int_equal(pkm_cache_prefill(&kc, full, rows, W, half), 0);
    check_slots_mirror_library(&kc);
    uint32_t least = UINT32_MAX;
    for (uint32_t t = half; t < p->len; t++) {
        assert_int_equal(pkm_model_step(&f->m, kc.slots, p->bytes[t], t,
                                        f->attn, f->m.rope_len, f->logits),
                         0);
        for (uint32_t i = 0; i < c->vocab; i++)
            assert_true(isfinite(f->logits[i]));
        if (compare) check_position(f->logits, p, t);
        assert_int_equal(pkm_cache_after_step(&kc, f->attn, f->m.rope_len, t),
                         0);
        check_slots_mirror_library(&kc);
        for (size_t s = 0; s < n_slots; s++)
            if (kc.slots[s].n < least) least = kc.slots[s].n;
    }
    pkm_cache_free(&kc);
    for (size_t s = 0; s < n_slots; s++) pkm_slot_free(&full[s]);
    free(full);
    free(rows);
    return least;
}

/* The first method with this scorer and no sinks (the window one is
 * SnapKV, the cumulative one H2O: the one-shot prefill and the replayed
 * prompt). */
static const pkm_method *method_with(uint32_t scorer)
{
    for (size_t i = 0; i < pkm_method_count; i++)
        if (pkm_methods[i].scorer == scorer && pkm_methods[i].sinks == 0)
            return &pkm_methods[i];
    fail_msg("no method with scorer %u in pkm_methods", scorer);
    return NULL;
}

static void test_library_without_eviction_matches_torch(void **state)
{
    fixture *f = *state;
    const uint32_t scorers[2] = {PB_SCORER_WINDOW, PB_SCORER_CUMULATIVE};
    for (size_t k = 0; k < 2; k++) {
        for (uint32_t r = 0; r < f->ref.count; r++) {
            const pkm_ref_prompt *p = &f->ref.prompts[r];
            /* a budget above the length: the library holds everything */
            const uint32_t least = run_with_library(
                f, p, method_with(scorers[k]), p->len + 8, 4, 4, 3, 1);
            assert_int_equal(least, p->len / 2 + 1);
        }
    }
}

static void test_eviction_keeps_slots_and_library_in_step(void **state)
{
    fixture *f = *state;
    uint32_t longest = 0;
    for (uint32_t r = 1; r < f->ref.count; r++)
        if (f->ref.prompts[r].len > f->ref.prompts[longest].len) longest = r;
    const pkm_ref_prompt *p = &f->ref.prompts[longest];
    assert_true(p->len >= 40);
    /* budget 8, recent 2, window 4, evicting every third step: the slots
     * never exceed share + 3 and do shrink back to the share, with the
     * one-shot prefill (window scorer) and with the replayed prompt (H2O) */
    assert_int_equal(run_with_library(f, p, method_with(PB_SCORER_WINDOW), 8,
                                      2, 4, 3, 0),
                     8);
    assert_int_equal(run_with_library(f, p, method_with(PB_SCORER_CUMULATIVE),
                                      8, 2, 4, 3, 0),
                     8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_cache_matches_torch),
        cmocka_unit_test(test_library_without_eviction_matches_torch),
        cmocka_unit_test(test_eviction_keeps_slots_and_library_in_step),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
