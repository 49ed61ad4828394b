/*
 * test_prefill_reference_diff.c - the reference scope of pb_kvcache_prefill
 * against the plain-loop transcription of the paper's selection
 * (prefill_reference.c) on 1,200 seeded random inputs: prompt lengths
 * 16 .. 4096, windows 1 .. 64, odd kernels 1 .. 15, both pooling modes,
 * shares from 1 to above the prompt, one-layer and pyramid instances, caller
 * workspace and create-time reservation. The kept sets and the victims must
 * be identical.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prefill_reference.h"
#include "pyramidkv/pyramidkv.h"
#include "test_main.h"

#define CASES 1200u
#define MAX_LEN 4096u
#define MAX_W 64u

typedef struct diff_buffers {
    float *attn;
    unsigned char *keep;
    uint32_t *kept;
    uint32_t *victims;
    void *workspace;
    size_t workspace_bytes;
} diff_buffers;

/* An ask spread over the interesting regimes: tiny (at most W), between W
 * and len, exactly len - 1 or len, and above len. */
static uint32_t random_ask(pbt_rng *g, uint32_t w, uint32_t len) {
    switch (pbt_below(g, 6)) {
    case 0: return 1u + pbt_below(g, w);
    case 1: return w + 1u + pbt_below(g, len - w);
    case 2: return w + 1u + pbt_below(g, len - w);
    case 3: return len - 1u;
    case 4: return len;
    default: return len + 1u + pbt_below(g, 1000);
    }
}

static void one_case(unsigned index, diff_buffers *b, unsigned *compressed) {
    pbt_rng g = {0x5eed0000u + index};
    /* Half the prompts short, so that many small edge cases are covered. */
    const uint32_t len = pbt_below(&g, 2)
                             ? 16u + pbt_below(&g, 241)
                             : 16u + pbt_below(&g, MAX_LEN - 15u);
    const uint32_t w_max = len - 1u < MAX_W ? len - 1u : MAX_W;
    const uint32_t w = 1u + pbt_below(&g, w_max);
    const uint32_t kernel = 1u + 2u * pbt_below(&g, 8);
    const uint32_t pool = pbt_below(&g, 2);
    const int pyramid = (int)pbt_below(&g, 3) == 0;
    const int reserved = (int)pbt_below(&g, 4) == 0;

    pb_kvcache_pyramidkv_params p = PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
    p.recent_window = w;
    p.obs_window = 1u + pbt_below(&g, 40);
    p.pool_kernel = kernel;
    if (pyramid) {
        /* A real pyramid: the effective share binds some of the time. */
        p.num_layers = 2u + pbt_below(&g, 31);
        p.layer = pbt_below(&g, p.num_layers);
        p.pyramid_ratio = 1u + pbt_below(&g, 8);
        p.budget = w + 1u + pbt_below(&g, len);
    } else {
        p.budget = len + 1u + pbt_below(&g, 100); /* share = the ask */
    }
    pb_kvcache_options o = PB_KVCACHE_OPTIONS_DEFAULT;
    o.pool = pool;
    o.prefill_scope = PB_PREFILL_REFERENCE;
    o.capacity = len + 1u; /* holds any survivor set */
    if (reserved) o.prefill_max_len = len + pbt_below(&g, 8);

    pb_kvcache *policy = NULL;
    assert_int_equal(pb_kvcache_pyramidkv_create(&p, &o, NULL, &policy), PB_OK);
    const uint32_t ask = random_ask(&g, w, len);
    const uint32_t effective = pb_kvcache_effective_budget(policy);
    const size_t share = ask < effective ? ask : effective;

    pfref_random_block(&g, b->attn, w, len);
    const size_t want = pfref_select(b->attn, w, len, share, kernel, pool,
                                     b->keep);
    assert_true(want != (size_t)-1);

    /* Exactly the bytes the sizing query asks for. */
    size_t ws_bytes = 0;
    assert_int_equal(pb_kvcache_prefill_workspace_size(policy, len, &ws_bytes),
                     PB_OK);
    assert_true(ws_bytes <= b->workspace_bytes);
    size_t n_kept = 0;
    const pb_status st = pb_kvcache_prefill(
        policy, b->attn, w, len, ask, reserved ? NULL : b->workspace,
        reserved ? 0u : ws_bytes, b->kept, MAX_LEN, b->victims, MAX_LEN,
        &n_kept);
    if (st != PB_OK || n_kept != want) {
        fprintf(stderr,
                "case %u: len %u W %u kernel %u pool %u ask %u share %zu: "
                "status %s, kept %zu, want %zu\n",
                index, len, w, kernel, pool, ask, share, pb_status_str(st),
                n_kept, want);
        fail();
    }
    size_t k = 0, v = 0;
    for (uint32_t pos = 0; pos < len; ++pos) {
        if (b->keep[pos]) {
            if (b->kept[k] != pos) {
                fprintf(stderr, "case %u: kept[%zu] = %u, want %u\n", index, k,
                        b->kept[k], pos);
                fail();
            }
            ++k;
        } else {
            if (b->victims[v] != pos) {
                fprintf(stderr, "case %u: victims[%zu] = %u, want %u\n", index,
                        v, b->victims[v], pos);
                fail();
            }
            ++v;
        }
    }
    assert_int_equal(pb_kvcache_kept_count(policy), want);
    if (want < len) ++*compressed;
    pb_kvcache_destroy(policy);
}

static void reference_scope_matches_transcription(void **state) {
    (void)state;
    diff_buffers b;
    /* Room for the largest prompt with any kernel: 8 bytes per position for
     * the scores, 2 for the candidates and 16 per kernel position for
     * pooling. */
    b.workspace_bytes = (size_t)(MAX_LEN + 8u) * 10u + 16u * 16u;
    b.attn = malloc((size_t)MAX_W * MAX_LEN * sizeof *b.attn);
    b.keep = malloc(MAX_LEN);
    b.kept = malloc(MAX_LEN * sizeof *b.kept);
    b.victims = malloc(MAX_LEN * sizeof *b.victims);
    b.workspace = malloc(b.workspace_bytes);
    assert_non_null(b.attn);
    assert_non_null(b.keep);
    assert_non_null(b.kept);
    assert_non_null(b.victims);
    assert_non_null(b.workspace);

    unsigned compressed = 0;
    for (unsigned i = 0; i < CASES; ++i) one_case(i, &b, &compressed);
    /* Most inputs must actually be compressed, or the test proves little. */
    assert_true(compressed > CASES / 2u);
    printf("%u cases, %u compressed, 0 disagreements\n", CASES, compressed);

    free(b.attn);
    free(b.keep);
    free(b.kept);
    free(b.victims);
    free(b.workspace);
}

/* Long prompts with small shares, where the library narrows its selection
 * to the candidates above a sampled floor (a caller workspace has room for
 * them): the kept sets must equal those of the full selection (the
 * create-time reservation has no room, so it selects over every key) in
 * both scopes and pooling modes, and the transcription's in the reference
 * scope. */
static void narrowed_selection_is_exact(void **state) {
    (void)state;
    enum { BIG = 20000, CASES_BIG = 60 };
    float *attn = malloc((size_t)16 * BIG * sizeof *attn);
    unsigned char *keep = malloc(BIG);
    uint32_t *a = malloc(BIG * sizeof *a), *b = malloc(BIG * sizeof *b);
    void *ws = malloc((size_t)BIG * 16u);
    assert_non_null(attn);
    assert_non_null(keep);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(ws);
    for (unsigned index = 0; index < CASES_BIG; ++index) {
        pbt_rng g = {0xb16b00b5u + index};
        const uint32_t len = 2500u + pbt_below(&g, BIG - 2500u);
        const uint32_t w = 1u + pbt_below(&g, 16);
        pb_kvcache_pyramidkv_params p = PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
        p.recent_window = w;
        p.obs_window = 1u + pbt_below(&g, 20);
        p.pool_kernel = 1u + 2u * pbt_below(&g, 8);
        p.budget = len + 1u;
        pb_kvcache_options o = PB_KVCACHE_OPTIONS_DEFAULT;
        o.pool = pbt_below(&g, 2);
        o.prefill_scope = index % 2u ? PB_PREFILL_REFERENCE
                                     : PB_PREFILL_CONSISTENT;
        o.capacity = len + 1u;
        /* Few survivors, and sometimes ties galore: quantised weights. */
        const uint32_t ask = w + 1u + pbt_below(&g, len / 10u);
        pfref_random_block(&g, attn, w, len);
        if (index % 3u == 0u)
            for (size_t i = 0; i < (size_t)w * len; ++i)
                attn[i] = (float)(int)(attn[i] * 4096.0f) / 4096.0f;

        pb_kvcache *with_room = NULL, *without = NULL;
        assert_int_equal(pb_kvcache_pyramidkv_create(&p, &o, NULL, &with_room),
                         PB_OK);
        o.prefill_max_len = len;
        assert_int_equal(pb_kvcache_pyramidkv_create(&p, &o, NULL, &without),
                         PB_OK);
        size_t bytes = 0, na = 0, nb = 0;
        assert_int_equal(
            pb_kvcache_prefill_workspace_size(with_room, len, &bytes), PB_OK);
        assert_true(bytes <= (size_t)BIG * 16u);
        assert_int_equal(pb_kvcache_prefill(with_room, attn, w, len, ask, ws,
                                            bytes, a, BIG, NULL, 0, &na),
                         PB_OK);
        assert_int_equal(pb_kvcache_prefill(without, attn, w, len, ask, NULL,
                                            0, b, BIG, NULL, 0, &nb),
                         PB_OK);
        assert_int_equal(na, nb);
        assert_memory_equal(a, b, na * sizeof *a);
        if (o.prefill_scope == PB_PREFILL_REFERENCE) {
            const size_t want = pfref_select(attn, w, len, ask,
                                             p.pool_kernel, o.pool, keep);
            assert_int_equal(want, na);
            size_t k = 0;
            for (uint32_t pos = 0; pos < len; ++pos)
                if (keep[pos]) assert_int_equal(a[k++], pos);
        }
        pb_kvcache_destroy(with_room);
        pb_kvcache_destroy(without);
    }
    free(attn);
    free(keep);
    free(a);
    free(b);
    free(ws);
}

PB_TEST_MAIN(cmocka_unit_test(reference_scope_matches_transcription),
             cmocka_unit_test(narrowed_selection_is_exact))
