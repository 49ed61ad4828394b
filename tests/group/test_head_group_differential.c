/*
 * test_head_group_differential.c - the layer group against the naive model
 * of group_reference.c: random configurations (every scorer, sinks,
 * pooling, floors 0 .. 1000, 1 .. 6 heads, explicit and pyramid shares,
 * head caps),
 * random attention with ties and null steps, evicts at random cadences
 * and asks; every victim and count
 * must agree, and so must every head's held positions. Then the group
 * prefill against the model fed the rows as decode steps. Seeds and
 * scenario count from argv (default 300 scenarios).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "group/group_reference.h"
#include "pyramidkv/pyramidkv.h"
#include "test_rng.h"

static unsigned long g_scenarios = 300;
static uint64_t g_seed = 1;
static size_t g_victims, g_uneven; /* the runs compared something */

static float draw_weight(pbt_rng *g) {
    switch (pbt_below(g, 4)) {
    case 0: return 0.0f;
    case 1: return 0.25f * (float)pbt_below(g, 4); /* ties */
    default: return (float)pbt_unit(g);
    }
}

static void random_config(pbt_rng *g, pb_kvcache_config *c, uint32_t *heads,
                          uint32_t *floor_pm, uint32_t *slack,
                          uint32_t *cap_pm) {
    const pb_kvcache_config d = PB_KVCACHE_CONFIG_DEFAULT;
    *c = d;
    c->recent_window = pbt_below(g, 4);
    c->share = c->recent_window + 1u + pbt_below(g, 8);
    c->budget = c->share + 1u;
    if (pbt_below(g, 4) == 0) { /* a layer of a pyramid schedule */
        c->share = 0;
        c->num_layers = 1u + pbt_below(g, 8);
        c->layer = pbt_below(g, c->num_layers);
        c->pyramid_ratio = 1u + pbt_below(g, 6);
        c->budget = c->recent_window + 1u + pbt_below(g, 10);
    }
    c->obs_window = 1u + pbt_below(g, 4);
    c->pool_kernel = 1u + 2u * pbt_below(g, 3);
    c->pool = pbt_below(g, 2);
    c->scorer = pbt_below(g, 5);
    c->sinks = pbt_below(g, 3) == 0 ? pbt_below(g, 4) : 0u;
    *heads = 1u + pbt_below(g, 6);
    const uint32_t fl[] = {0u, 200u, 500u, 1000u};
    *floor_pm = pbt_below(g, 5) == 0 ? pbt_below(g, 1001) : fl[pbt_below(g, 4)];
    *slack = 1u + pbt_below(g, 6);
    const uint32_t caps[] = {1000u, 1250u, 1500u, 2000u};
    *cap_pm = pbt_below(g, 3) == 0 ? caps[pbt_below(g, 4)] : 0u;
}

static void check_same_heads(const pb_kvcache_group *grp, const ref_group *ref,
                             unsigned long scenario) {
    for (uint32_t h = 0; h < ref->num_heads; h++) {
        const pb_kvcache *head = pb_kvcache_group_head(grp, h);
        const ref_policy *r = &ref->heads[h];
        static uint32_t pos[4096];
        size_t n = 0;
        assert_int_equal(pb_kvcache_kept_positions(head, pos, 4096, &n), PB_OK);
        if (n != r->kept || memcmp(pos, r->pos, n * sizeof *pos) != 0) {
            print_error("scenario %lu head %u: held sets differ\n", scenario,
                        h);
            fail();
        }
    }
}

/* wide: shares of 40 .. 300 positions and evicts every `cadence` steps
 * (1 .. 100, the slack), so a head gives up more victims in one evict
 * than the few-victim paths take (above 64). */
static void run_decode(pbt_rng *g, unsigned long scenario, int wide) {
    pb_kvcache_config c;
    uint32_t heads, floor_pm, slack, cap_pm;
    random_config(g, &c, &heads, &floor_pm, &slack, &cap_pm);
    uint32_t cadence = 0u;
    if (wide) {
        const uint32_t cad[] = {1u, 3u, 16u, 64u, 100u};
        cadence = cad[pbt_below(g, 5)];
        c.share = c.recent_window + 40u + pbt_below(g, 260);
        c.budget = c.share + 1u;
        heads = 1u + pbt_below(g, 4);
        slack = cadence;
    }
    pb_kvcache_group_params p = PB_KVCACHE_GROUP_PARAMS_DEFAULT;
    p.num_heads = heads;
    p.floor_permille = floor_pm;
    p.slack = slack;
    p.head_cap_permille = cap_pm;
    pb_kvcache_group *grp = NULL;
    pb_status st = pb_kvcache_group_create(&c, &p, NULL, &grp);
    ref_group ref;
    const pb_status rst = ref_group_create(&ref, &c, heads, floor_pm, slack, cap_pm,
                                           0);
    assert_int_equal(st, rst);
    if (st != PB_OK) return;
    pb_kvcache_group_plan_info info = PB_KVCACHE_GROUP_PLAN_INFO_INIT;
    assert_int_equal(pb_kvcache_group_info(grp, &info), PB_OK);
    const size_t stride = info.head_capacity;
    float *attn = malloc(sizeof(float) * stride * heads);
    size_t lens[8];
    static uint32_t v1[4096], v2[4096];
    size_t c1[8], c2[8];
    const uint32_t steps =
        wide ? 300u + pbt_below(g, 400) : 20u + pbt_below(g, 60);
    uint32_t pos = 0;
    for (uint32_t t = 0; t < steps; t++) {
        pos += 1u + (pbt_below(g, 8) == 0 ? pbt_below(g, 3) : 0u);
        const int null_step = pbt_below(g, 10) == 0;
        for (uint32_t h = 0; h < heads; h++) {
            lens[h] = ref.heads[h].kept;
            for (size_t i = 0; i < lens[h]; i++)
                attn[h * stride + i] = draw_weight(g);
        }
        st = pb_kvcache_group_observe(grp, pos, null_step ? NULL : attn,
                                      stride, lens);
        pb_status want = PB_OK;
        for (uint32_t h = 0; h < heads && want == PB_OK; h++)
            if (ref.heads[h].kept >= ref.heads[h].capacity) want = PB_ERR_FULL;
        assert_int_equal(st, want);
        if (st == PB_OK)
            for (uint32_t h = 0; h < heads; h++)
                assert_int_equal(
                    ref_observe(&ref.heads[h], pos,
                                null_step ? NULL : attn + h * stride, lens[h]),
                    PB_OK);
        if (st == PB_OK && (wide ? (t + 1u) % cadence != 0u
                                 : pbt_below(g, slack) != 0u))
            continue;
        const uint64_t ask = pbt_below(g, 6) == 0
                                 ? (uint64_t)pbt_below(g, (uint32_t)
                                                             info.layer_total + 2u)
                                 : UINT64_MAX;
        size_t n1 = 0, n2 = 0;
        st = pb_kvcache_group_evict(grp, ask, v1, 4096, c1, 8, &n1);
        assert_int_equal(st, PB_OK);
        assert_int_equal(ref_group_evict(&ref, ask, v2, 4096, c2, &n2), PB_OK);
        if (n1 != n2 || memcmp(c1, c2, heads * sizeof *c1) != 0 ||
            memcmp(v1, v2, n1 * sizeof *v1) != 0) {
            print_error("scenario %lu step %u: victims differ (%zu vs %zu)\n",
                        scenario, t, n1, n2);
            fail();
        }
        g_victims += n1;
        for (uint32_t h = 1; h < heads; h++)
            if (c1[h] != c1[0]) g_uneven++;
        check_same_heads(grp, &ref, scenario);
        if (ask == UINT64_MAX) {
            for (uint32_t h = 0; h < heads; h++) {
                assert_true(ref.heads[h].kept <= info.head_capacity);
                /* The last scorer's unobserved positions are protected
                 * beyond any bound. */
                if (c.scorer != PB_SCORER_LAST)
                    assert_true(ref.heads[h].kept <= info.head_max);
            }
        }
    }
    free(attn);
    ref_group_destroy(&ref);
    pb_kvcache_group_destroy(grp);
}

static void run_prefill(pbt_rng *g, unsigned long scenario) {
    pb_kvcache_config c;
    uint32_t heads, floor_pm, slack, cap_pm;
    random_config(g, &c, &heads, &floor_pm, &slack, &cap_pm);
    c.scorer = PB_SCORER_WINDOW;
    c.sinks = 0;
    pb_kvcache_group_params p = PB_KVCACHE_GROUP_PARAMS_DEFAULT;
    p.num_heads = heads;
    p.floor_permille = floor_pm;
    p.slack = slack;
    p.head_cap_permille = cap_pm;
    const size_t len = 1u + pbt_below(g, 40);
    const size_t rows = 1u + pbt_below(g, (uint32_t)len);
    p.prefill_max_len = pbt_below(g, 2) ? (uint32_t)len : 0u;
    pb_kvcache_group *grp = NULL;
    assert_int_equal(pb_kvcache_group_create(&c, &p, NULL, &grp), PB_OK);
    ref_group ref;
    assert_int_equal(
        ref_group_create(&ref, &c, heads, floor_pm, slack, cap_pm,
                         (uint32_t)len),
        PB_OK);
    const size_t stride = rows * len + pbt_below(g, 3);
    float *attn = malloc(sizeof(float) * stride * heads);
    for (size_t i = 0; i < stride * heads; i++) attn[i] = draw_weight(g);
    /* The model: the rows as decode steps (docs/spec.md §7.1). */
    float row[64];
    for (uint32_t h = 0; h < heads; h++) {
        ref_policy *r = &ref.heads[h];
        const size_t q0 = len - rows;
        for (size_t q = 1; q < q0; q++)
            assert_int_equal(ref_observe(r, (uint32_t)q, NULL, 0), PB_OK);
        for (size_t j = 0; j < rows; j++) {
            const size_t q = q0 + j;
            if (q == 0) continue;
            for (size_t i = 0; i < q; i++)
                row[i] = attn[h * stride + j * len + i];
            assert_int_equal(ref_observe(r, (uint32_t)q, row, q), PB_OK);
        }
    }
    const uint64_t ask = pbt_below(g, 4) == 0
                             ? (uint64_t)pbt_below(g, (uint32_t)(heads * len) + 2u)
                             : UINT64_MAX;
    size_t bytes = 0;
    assert_int_equal(pb_kvcache_group_prefill_workspace_size(grp, len, &bytes),
                     PB_OK);
    void *ws = p.prefill_max_len ? NULL : malloc(bytes);
    uint32_t kept[512], v2[512];
    size_t c1[8], c2[8], n1 = 0, n2 = 0;
    assert_int_equal(pb_kvcache_group_prefill(grp, attn, stride, rows, len,
                                              ask, ws, bytes, kept, 512, c1, 8,
                                              &n1),
                     PB_OK);
    assert_int_equal(ref_group_evict(&ref, ask, v2, 512, c2, &n2), PB_OK);
    size_t at = 0;
    for (uint32_t h = 0; h < heads; h++) {
        if (c1[h] != len - c2[h] || c1[h] != ref.heads[h].kept ||
            memcmp(kept + at, ref.heads[h].pos, c1[h] * sizeof *kept) != 0) {
            print_error("prefill scenario %lu head %u differs\n", scenario, h);
            fail();
        }
        at += c1[h];
    }
    assert_int_equal(n1, at);
    check_same_heads(grp, &ref, scenario);
    free(ws);
    free(attn);
    ref_group_destroy(&ref);
    pb_kvcache_group_destroy(grp);
}

static void decode_matches_reference(void **state) {
    (void)state;
    for (unsigned long s = 0; s < g_scenarios; s++) {
        pbt_rng g = {g_seed * 1000003u + s};
        run_decode(&g, s, 0);
    }
    assert_true(g_victims > 1000u && g_uneven > 100u);
}

static void wide_decode_matches_reference(void **state) {
    (void)state;
    const size_t before = g_victims;
    for (unsigned long s = 0; s < g_scenarios / 20u + 4u; s++) {
        pbt_rng g = {g_seed * 65537u + s};
        run_decode(&g, s, 1);
    }
    assert_true(g_victims - before > 1000u);
}

static void prefill_matches_reference(void **state) {
    (void)state;
    for (unsigned long s = 0; s < g_scenarios; s++) {
        pbt_rng g = {g_seed * 7919u + s};
        run_prefill(&g, s);
    }
}

int main(int argc, char **argv) {
    if (argc > 1) g_scenarios = strtoul(argv[1], NULL, 10);
    if (argc > 2) g_seed = strtoull(argv[2], NULL, 10);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(decode_matches_reference),
        cmocka_unit_test(wide_decode_matches_reference),
        cmocka_unit_test(prefill_matches_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
