/*
 * vector_budget.c - the allocation family of golden vectors
 * ("kv-cache/pyramid-budget", docs/vectors.md): a case pins
 * pb_kvcache_pyramid_budget for one layer or for every layer, and checks
 * that pb_kvcache_pyramid_budgets and pb_kvcache_pyramid_total agree with
 * it (docs/spec.md, the allocation section).
 *
 * Owns the budget case keys and checks only; the document loop is
 * vector_runner.c's.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vector_runner_internal.h"

static const char *const budget_case_keys[] = {
    "name", "why", "budget", "numLayers", "pyramidRatio", "layer", "expect",
    "expectTotal", NULL};

int pb__vr_run_budget_case(case_state *c, const pb__vr_policy *unused,
                           const cJSON *cs) {
    (void)unused;
    if (!pb__vr_check_keys(c, cs, "the case", budget_case_keys)) return -1;
    uint32_t b, l, r, layer = 0;
    if (!pb__vr_get_u32(cJSON_GetObjectItemCaseSensitive(cs, "budget"), &b))
        return pb__vr_fail(c, "malformed: \"budget\" must be an integer "
                              "0..4294967295");
    if (!pb__vr_get_u32(cJSON_GetObjectItemCaseSensitive(cs, "numLayers"), &l))
        return pb__vr_fail(c, "malformed: \"numLayers\" must be an integer "
                              "0..4294967295");
    if (!pb__vr_get_u32(cJSON_GetObjectItemCaseSensitive(cs, "pyramidRatio"), &r))
        return pb__vr_fail(c, "malformed: \"pyramidRatio\" must be an integer "
                              "0..4294967295");
    const cJSON *jlayer = cJSON_GetObjectItemCaseSensitive(cs, "layer");
    const cJSON *jexpect = cJSON_GetObjectItemCaseSensitive(cs, "expect");
    const cJSON *jtotal = cJSON_GetObjectItemCaseSensitive(cs, "expectTotal");
    uint64_t expect_total = 0;
    if (jtotal != NULL && !pb__vr_get_u64(jtotal, &expect_total))
        return pb__vr_fail(c, "malformed: \"expectTotal\" must be an integer (a decimal "
                              "string above 2^53)");

    if (jlayer != NULL) {
        uint32_t want;
        if (!pb__vr_get_u32(jlayer, &layer))
            return pb__vr_fail(c, "malformed: \"layer\" must be an integer "
                                  "0..4294967295");
        if (!pb__vr_get_u32(jexpect, &want))
            return pb__vr_fail(c, "malformed: with \"layer\", \"expect\" must be one "
                                  "integer 0..4294967295");
        c->run->totals->budget_layers += 1u;
        const uint32_t got = pb_kvcache_pyramid_budget(b, layer, l, r);
        if (got != want)
            return pb__vr_fail(c, "pb_kvcache_pyramid_budget(%lu, layer %lu, %lu layers, "
                                  "ratio %lu): expected %lu, got %lu",
                               (unsigned long)b, (unsigned long)layer, (unsigned long)l,
                               (unsigned long)r, (unsigned long)want, (unsigned long)got);
    } else {
        uint32_t *want = NULL, *got = NULL;
        size_t n = 0;
        if (!pb__vr_get_u32_list(jexpect, &want, &n))
            return pb__vr_fail(c, "malformed: \"expect\" must be a list of integers "
                                  "0..4294967295 (or give \"layer\")");
        if (n != l) {
            free(want);
            return pb__vr_fail(c, "malformed: \"expect\" lists %zu shares for %lu layers",
                               n, (unsigned long)l);
        }
        got = malloc((n + 1u) * sizeof *got);
        if (got == NULL) {
            free(want);
            return pb__vr_fail(c, "out of memory");
        }
        int bad = 0;
        uint64_t sum = 0;
        for (size_t k = 0; k < n; ++k) {
            got[k] = pb_kvcache_pyramid_budget(b, (uint32_t)k, l, r);
            bad |= got[k] != want[k];
            sum += want[k];
        }
        c->run->totals->budget_layers += n;
        if (bad) {
            pb__vr_fail(c, "pb_kvcache_pyramid_budget(%lu, k, %lu layers, ratio %lu) "
                           "for every layer k: expected ",
                        (unsigned long)b, (unsigned long)l, (unsigned long)r);
            pb__vr_msg_add_expected_got(&c->msg, want, n, got, n);
        }
        /* The all-layers call must agree with the per-layer one, and refuse
         * exactly where no share is defined. */
        if (!c->failed) {
            const pb_status want_st = (l == 0u || r == 0u) ? PB_ERR_PARAM : PB_OK;
            const pb_status st = pb_kvcache_pyramid_budgets(b, l, r, got, n);
            if (st != want_st) {
                pb__vr_fail(c, "pb_kvcache_pyramid_budgets: expected %s, got %s",
                            pb__vr_status_name(want_st), pb__vr_status_name(st));
            } else if (st == PB_OK && memcmp(got, want, n * sizeof *got) != 0) {
                pb__vr_fail(c, "pb_kvcache_pyramid_budgets: expected ");
                pb__vr_msg_add_expected_got(&c->msg, want, n, got, n);
            }
        }
        /* The total is by definition the sum of the shares. */
        if (!c->failed) {
            const uint64_t total = pb_kvcache_pyramid_total(b, l, r);
            if (total != sum)
                pb__vr_fail(c, "pb_kvcache_pyramid_total: expected %llu (the sum of "
                               "\"expect\"), got %llu",
                            (unsigned long long)sum, (unsigned long long)total);
            else if (jtotal != NULL && expect_total != sum)
                pb__vr_fail(c, "\"expectTotal\" %llu is not the sum of \"expect\", %llu",
                            (unsigned long long)expect_total, (unsigned long long)sum);
        }
        free(want);
        free(got);
        if (c->failed) return -1;
    }
    if (jtotal != NULL) {
        const uint64_t total = pb_kvcache_pyramid_total(b, l, r);
        if (total != expect_total)
            return pb__vr_fail(c, "pb_kvcache_pyramid_total(%lu, %lu layers, ratio %lu): "
                                  "expected %llu, got %llu",
                               (unsigned long)b, (unsigned long)l, (unsigned long)r,
                               (unsigned long long)expect_total,
                               (unsigned long long)total);
    }
    return 0;
}
