/*
 * vector_families.c - THE FAMILY TABLE: which document "policy" runs which
 * family of cases (docs/vectors.md).
 *
 * Adding a family is one entry here plus its file: a per-layer policy
 * (h2o, tova, a sliding window ...) gives pb__vr_run_policy_case and its
 * pb__vr_policy (see vector_policy_pyramidkv.c for the model, and
 * vector_runner_internal.h for the map of the runner); a family whose
 * cases have another shape gives its own run_case, as the allocation
 * family does. The "unknown policy" message lists the entries in this
 * order.
 */
#include <stddef.h>

#include "vector_runner_internal.h"

const pb__vr_family pb__vr_families[] = {
    {"kv-cache/pyramidkv", pb__vr_run_policy_case, &pb__vr_policy_pyramidkv},
    {"kv-cache/snapkv", pb__vr_run_policy_case, &pb__vr_policy_snapkv},
    {"kv-cache/h2o", pb__vr_run_policy_case, &pb__vr_policy_h2o},
    {"kv-cache/scissorhands", pb__vr_run_policy_case,
     &pb__vr_policy_scissorhands},
    {"kv-cache/tova", pb__vr_run_policy_case, &pb__vr_policy_tova},
    {"kv-cache/streaming-llm", pb__vr_run_policy_case,
     &pb__vr_policy_streaming_llm},
    {"kv-cache/sliding-window", pb__vr_run_policy_case,
     &pb__vr_policy_sliding_window},
    {"kv-cache/pyramid-budget", pb__vr_run_budget_case, NULL},
    {"kv-cache/schedule", pb__vr_run_schedule_case, NULL},
    {"kv-cache/calibrate", pb__vr_run_calibrate_case, NULL},
    {NULL, NULL, NULL}};

int (*pb__vr_calibrate_hook)(case_state *c, const cJSON *cs) = NULL;

int pb__vr_run_calibrate_case(case_state *c, const pb__vr_policy *unused,
                              const cJSON *cs) {
    (void)unused;
    if (pb__vr_calibrate_hook == NULL)
        return pb__vr_fail(c, "calibrate cases run in the pyramidkv "
                              "program (pyramidkv vectors)");
    return pb__vr_calibrate_hook(c, cs);
}
