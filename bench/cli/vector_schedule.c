/*
 * vector_schedule.c - the schedule family of golden vectors
 * ("kv-cache/schedule", docs/vectors.md): a case describes one schedule
 * (docs/spec.md §12) and pins every layer's share and the exact
 * total of pb_kvcache_schedule_shares, or the status it refuses with (in
 * which case nothing may be written).
 *
 * Owns the schedule case keys and checks only; the document loop is
 * vector_runner.c's.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vector_runner_internal.h"

/* A case may not ask for more layers than this (hostile documents). */
#define VR_MAX_SCHEDULE_LAYERS 65536u
#define VR_CANARY 0xC0FFEE11u

static const char *const schedule_case_keys[] = {
    "name",   "why",      "schedule",   "numLayers", "budget",
    "ratio",  "window",   "beta",       "promptLen", "sinks",
    "taperBeta", "gammaMilli", "weights", "minShare", "sharesLen",
    "expect", "expectTotal", "expectStatus", NULL};

/* Reads an optional u32 key into *out (left as it is when absent).
 * Returns 1, or 0 with the case failed. */
static int opt_u32(case_state *c, const cJSON *cs, const char *key,
                   uint32_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cs, key);
    if (v == NULL) return 1;
    if (!pb__vr_get_u32(v, out)) {
        pb__vr_fail(c, "malformed: \"%s\" must be an integer 0..4294967295",
                    key);
        return 0;
    }
    return 1;
}

int pb__vr_run_schedule_case(case_state *c, const pb__vr_policy *unused,
                             const cJSON *cs) {
    (void)unused;
    if (!pb__vr_check_keys(c, cs, "the case", schedule_case_keys)) return -1;
    pb_schedule s = PB_SCHEDULE_DEFAULT;
    const cJSON *jkind = cJSON_GetObjectItemCaseSensitive(cs, "schedule");
    if (!cJSON_IsString(jkind) ||
        pb_schedule_kind_from_name(jkind->valuestring, &s.kind) != PB_OK)
        return pb__vr_fail(c, "malformed: \"schedule\" must be one of "
                              "arithmetic, uniform, kvfactory, "
                              "kvfactory-balanced, taper, curve, geometric, "
                              "profile");
    if (cJSON_GetObjectItemCaseSensitive(cs, "numLayers") == NULL ||
        cJSON_GetObjectItemCaseSensitive(cs, "budget") == NULL)
        return pb__vr_fail(c, "malformed: \"numLayers\" and \"budget\" are "
                              "required");
    if (!opt_u32(c, cs, "numLayers", &s.num_layers) ||
        !opt_u32(c, cs, "budget", &s.budget) ||
        !opt_u32(c, cs, "ratio", &s.ratio) ||
        !opt_u32(c, cs, "window", &s.window) ||
        !opt_u32(c, cs, "beta", &s.beta) ||
        !opt_u32(c, cs, "promptLen", &s.prompt_len) ||
        !opt_u32(c, cs, "sinks", &s.sinks) ||
        !opt_u32(c, cs, "gammaMilli", &s.gamma_milli) ||
        !opt_u32(c, cs, "minShare", &s.min_share))
        return -1;
    if (s.num_layers > VR_MAX_SCHEDULE_LAYERS)
        return pb__vr_fail(c, "malformed: \"numLayers\" above %u",
                           VR_MAX_SCHEDULE_LAYERS);
    uint32_t shares_len = s.num_layers;
    if (!opt_u32(c, cs, "sharesLen", &shares_len)) return -1;
    if (shares_len > VR_MAX_SCHEDULE_LAYERS)
        return pb__vr_fail(c, "malformed: \"sharesLen\" above %u",
                           VR_MAX_SCHEDULE_LAYERS);
    const cJSON *jbeta = cJSON_GetObjectItemCaseSensitive(cs, "taperBeta");
    if (jbeta != NULL) {
        if (!cJSON_IsNumber(jbeta))
            return pb__vr_fail(c, "malformed: \"taperBeta\" must be a number");
        s.taper_beta = jbeta->valuedouble;
    }
    uint32_t *weights = NULL;
    size_t n_weights = 0;
    const cJSON *jw = cJSON_GetObjectItemCaseSensitive(cs, "weights");
    if (jw != NULL) {
        if (!pb__vr_get_u32_list(jw, &weights, &n_weights))
            return pb__vr_fail(c, "malformed: \"weights\" must be a list of "
                                  "integers 0..4294967295");
        if (n_weights != s.num_layers) {
            free(weights);
            return pb__vr_fail(c, "malformed: \"weights\" lists %zu values "
                                  "for %lu layers",
                               n_weights, (unsigned long)s.num_layers);
        }
        s.weights = weights;
    }

    const cJSON *jexpect = cJSON_GetObjectItemCaseSensitive(cs, "expect");
    const cJSON *jtotal = cJSON_GetObjectItemCaseSensitive(cs, "expectTotal");
    const cJSON *jstatus = cJSON_GetObjectItemCaseSensitive(cs, "expectStatus");
    pb_status want_st = PB_OK;
    uint32_t *want = NULL;
    size_t n_want = 0;
    uint64_t want_total = 0;
    if ((jexpect == NULL) == (jstatus == NULL)) {
        free(weights);
        return pb__vr_fail(c, "malformed: give \"expect\" (and "
                              "\"expectTotal\") or \"expectStatus\"");
    }
    if (jstatus != NULL && (!pb__vr_get_status(jstatus, &want_st) ||
                            want_st == PB_OK || jtotal != NULL)) {
        free(weights);
        return pb__vr_fail(c, "malformed: \"expectStatus\" must name a "
                              "refusal (PB_ERR_...), without \"expectTotal\"");
    }
    if (jexpect != NULL) {
        if (!pb__vr_get_u32_list(jexpect, &want, &n_want) ||
            n_want != s.num_layers || jtotal == NULL ||
            !pb__vr_get_u64(jtotal, &want_total)) {
            free(weights);
            free(want);
            return pb__vr_fail(c, "malformed: \"expect\" must list one share "
                                  "per layer and \"expectTotal\" their sum");
        }
        uint64_t sum = 0;
        for (size_t k = 0; k < n_want; ++k) sum += want[k];
        if (sum != want_total) {
            free(weights);
            free(want);
            return pb__vr_fail(c, "\"expectTotal\" %llu is not the sum of "
                                  "\"expect\", %llu",
                               (unsigned long long)want_total,
                               (unsigned long long)sum);
        }
    }

    /* One slot past the buffer as a canary, and canaries everywhere for a
     * refusal. */
    uint32_t *got = malloc(((size_t)shares_len + 1u) * sizeof *got);
    if (got == NULL) {
        free(weights);
        free(want);
        return pb__vr_fail(c, "out of memory");
    }
    for (size_t k = 0; k <= shares_len; ++k) got[k] = VR_CANARY;
    uint64_t total = 0xDEADBEEFu;
    const pb_status st =
        pb_kvcache_schedule_shares(&s, got, shares_len, &total);
    c->run->totals->budget_layers += s.num_layers;
    if (st != want_st) {
        pb__vr_fail(c, "pb_kvcache_schedule_shares (%s, %lu layers, budget "
                       "%lu): expected %s, got %s",
                    jkind->valuestring, (unsigned long)s.num_layers,
                    (unsigned long)s.budget, pb__vr_status_name(want_st),
                    pb__vr_status_name(st));
    } else if (st != PB_OK) {
        for (size_t k = 0; k <= shares_len; ++k)
            if (got[k] != VR_CANARY) {
                pb__vr_fail(c, "refused with %s but wrote share %zu",
                            pb__vr_status_name(st), k);
                break;
            }
        if (!c->failed && total != 0xDEADBEEFu)
            pb__vr_fail(c, "refused with %s but wrote the total",
                        pb__vr_status_name(st));
    } else {
        if (memcmp(got, want, n_want * sizeof *got) != 0) {
            pb__vr_fail(c, "pb_kvcache_schedule_shares (%s): expected ",
                        jkind->valuestring);
            pb__vr_msg_add_expected_got(&c->msg, want, n_want, got, n_want);
        } else if (total != want_total) {
            pb__vr_fail(c, "pb_kvcache_schedule_shares (%s): expected total "
                           "%llu, got %llu",
                        jkind->valuestring, (unsigned long long)want_total,
                        (unsigned long long)total);
        } else if (got[shares_len] != VR_CANARY ||
                   (shares_len > n_want && got[n_want] != VR_CANARY)) {
            pb__vr_fail(c, "pb_kvcache_schedule_shares wrote past the layers");
        }
    }
    free(weights);
    free(want);
    free(got);
    return c->failed ? -1 : 0;
}
