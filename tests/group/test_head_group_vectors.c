/*
 * test_head_group_vectors.c - the layer group's hand-derived cases
 * (tests/group/head_group_vectors.json, docs/spec.md §16.5): the plan, the
 * survivors of a prefill per head and the victims of each decode step's
 * evict per head. A mismatch prints the case, the expected and the actual.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>
#include <cmocka.h>

#include "pyramidkv/pyramidkv.h"

#define MAXN 64

static cJSON *load(void) {
    FILE *f = fopen(PB_GROUP_VECTORS, "rb");
    assert_non_null(f);
    static char buf[1 << 16];
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    cJSON *root = cJSON_Parse(buf);
    assert_non_null(root);
    return root;
}

static uint32_t u32(const cJSON *o, const char *k, uint32_t dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? (uint32_t)v->valuedouble : dflt;
}

static uint64_t budget_of(const cJSON *o) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "budget");
    return cJSON_IsNumber(v) ? (uint64_t)v->valuedouble : UINT64_MAX;
}

static void expect_list(const char *name, const char *what, uint32_t h,
                        const cJSON *want, const uint32_t *got, size_t n) {
    int same = (size_t)cJSON_GetArraySize(want) == n;
    for (size_t i = 0; same && i < n; i++)
        same = (uint32_t)cJSON_GetArrayItem(want, (int)i)->valuedouble ==
               got[i];
    if (same) return;
    char w[256] = "", g[256] = "";
    for (int i = 0; i < cJSON_GetArraySize(want); i++)
        snprintf(w + strlen(w), sizeof w - strlen(w), " %u",
                 (uint32_t)cJSON_GetArrayItem(want, i)->valuedouble);
    for (size_t i = 0; i < n; i++)
        snprintf(g + strlen(g), sizeof g - strlen(g), " %u", got[i]);
    print_error("%s: %s of head %u: expected [%s ] got [%s ]\n", name, what,
                h, w, g);
    fail();
}

static void run_case(const cJSON *c) {
    const char *name = cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring;
    const cJSON *cf = cJSON_GetObjectItemCaseSensitive(c, "config");
    const cJSON *gp = cJSON_GetObjectItemCaseSensitive(c, "group");
    pb_kvcache_config cfg = PB_KVCACHE_CONFIG_DEFAULT;
    cfg.share = u32(cf, "share", 0);
    cfg.budget = u32(cf, "budget", cfg.budget);
    cfg.recent_window = u32(cf, "recent_window", cfg.recent_window);
    cfg.obs_window = u32(cf, "obs_window", cfg.obs_window);
    cfg.pool_kernel = u32(cf, "pool_kernel", cfg.pool_kernel);
    cfg.scorer = u32(cf, "scorer", 0);
    pb_kvcache_group_params p = PB_KVCACHE_GROUP_PARAMS_DEFAULT;
    p.num_heads = u32(gp, "num_heads", 8);
    p.floor_permille = u32(gp, "floor_permille", 200);
    p.slack = u32(gp, "slack", 1);
    pb_kvcache_group_plan_info info = PB_KVCACHE_GROUP_PLAN_INFO_INIT;
    assert_int_equal(pb_kvcache_group_plan(&cfg, &p, &info), PB_OK);
    const cJSON *plan = cJSON_GetObjectItemCaseSensitive(c, "plan");
    assert_int_equal(info.head_share, u32(plan, "head_share", 0));
    assert_int_equal(info.floor, u32(plan, "floor", 0));
    assert_int_equal(info.head_max, u32(plan, "head_max", 0));
    assert_int_equal(info.head_capacity, u32(plan, "head_capacity", 0));
    assert_int_equal(info.layer_total, u32(plan, "layer_total", 0));
    pb_kvcache_group *g = NULL;
    assert_int_equal(pb_kvcache_group_create(&cfg, &p, NULL, &g), PB_OK);

    const cJSON *pf = cJSON_GetObjectItemCaseSensitive(c, "prefill");
    const size_t len = u32(pf, "len", 0), rows = u32(pf, "rows", 0);
    float attn[8 * MAXN];
    const cJSON *heads = cJSON_GetObjectItemCaseSensitive(pf, "attn");
    for (uint32_t h = 0; h < p.num_heads; h++) {
        const cJSON *a = cJSON_GetArrayItem(heads, (int)h);
        assert_int_equal(cJSON_GetArraySize(a), rows * len);
        for (size_t i = 0; i < rows * len; i++)
            attn[h * rows * len + i] =
                (float)cJSON_GetArrayItem(a, (int)i)->valuedouble;
    }
    size_t bytes = 0;
    assert_int_equal(pb_kvcache_group_prefill_workspace_size(g, len, &bytes),
                     PB_OK);
    void *ws = malloc(bytes);
    uint32_t kept[8 * MAXN];
    size_t counts[8], n = 0;
    assert_int_equal(pb_kvcache_group_prefill(g, attn, rows * len, rows, len,
                                              budget_of(pf), ws, bytes, kept,
                                              8 * MAXN, counts, 8, &n),
                     PB_OK);
    free(ws);
    size_t at = 0;
    const cJSON *want = cJSON_GetObjectItemCaseSensitive(pf, "kept");
    for (uint32_t h = 0; h < p.num_heads; h++) {
        expect_list(name, "prefill survivors", h,
                    cJSON_GetArrayItem(want, (int)h), kept + at, counts[h]);
        at += counts[h];
    }
    const cJSON *step;
    cJSON_ArrayForEach(step, cJSON_GetObjectItemCaseSensitive(c, "steps")) {
        const cJSON *sa = cJSON_GetObjectItemCaseSensitive(step, "attn");
        size_t lens[8];
        for (uint32_t h = 0; h < p.num_heads; h++) {
            const cJSON *a = cJSON_GetArrayItem(sa, (int)h);
            lens[h] = (size_t)cJSON_GetArraySize(a);
            for (size_t i = 0; i < lens[h]; i++)
                attn[h * MAXN + i] =
                    (float)cJSON_GetArrayItem(a, (int)i)->valuedouble;
        }
        assert_int_equal(pb_kvcache_group_observe(g, u32(step, "pos", 0), attn,
                                                  MAXN, lens),
                         PB_OK);
        uint32_t victims[8 * MAXN];
        assert_int_equal(pb_kvcache_group_evict(g, budget_of(step), victims,
                                                8 * MAXN, counts, 8, &n),
                         PB_OK);
        const cJSON *wv = cJSON_GetObjectItemCaseSensitive(step, "victims");
        at = 0;
        for (uint32_t h = 0; h < p.num_heads; h++) {
            expect_list(name, "victims", h, cJSON_GetArrayItem(wv, (int)h),
                        victims + at, counts[h]);
            at += counts[h];
        }
    }
    pb_kvcache_group_destroy(g);
}

static void hand_derived_cases(void **state) {
    (void)state;
    cJSON *root = load();
    const cJSON *c;
    int count = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(root, "cases")) {
        run_case(c);
        count++;
    }
    assert_true(count >= 3);
    cJSON_Delete(root);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hand_derived_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
