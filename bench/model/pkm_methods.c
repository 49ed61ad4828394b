/*
 * pkm_methods.c - the rows of the model evaluation: which schedule gives
 * each layer its share and which scorer picks the victims inside a layer.
 * This table is the one place to add a row when the library gains a
 * schedule (a new pb_ share function: wrap it as a pkm_schedule_fn) or a
 * scorer (a pb_scorer value); a row the linked library refuses is printed
 * as "not in this library" instead of failing the run. Every row of one
 * budget gets the same average budget, so the memory is equal up to the
 * schedule's rounding (printed beside each row).
 */
#include "pkm_cache.h"

/* Uniform: every layer the average budget (SnapKV). */
static int sched_uniform(uint32_t budget, uint32_t num_layers, uint32_t arg,
                         uint32_t *shares)
{
    (void)arg;
    return pb_kvcache_pyramid_budgets(budget, num_layers, 1, shares,
                                      num_layers) == PB_OK ? 0 : -1;
}

/* PyramidKV's arithmetic pyramid, first layer's share over the last's =
 * arg (docs/spec.md, the pyramid share). */
static int sched_pyramid(uint32_t budget, uint32_t num_layers, uint32_t arg,
                         uint32_t *shares)
{
    return pb_kvcache_pyramid_budgets(budget, num_layers, arg, shares,
                                      num_layers) == PB_OK ? 0 : -1;
}

uint32_t pkm_profile_weights[PKM_MAX_LAYERS];
int pkm_profile_ready;

/* The profile schedule of `pyramidkv calibrate` (docs/calibrate.md): the
 * total num_layers x budget apportioned by the calibrated weights, each
 * layer first given recent_window + 1 positions (the evaluation's recent
 * window is budget / 4), the rest in proportion to the weight, floored. */
static int sched_profile(uint32_t budget, uint32_t num_layers, uint32_t arg,
                         uint32_t *shares)
{
    (void)arg;
    if (!pkm_profile_ready || num_layers > PKM_MAX_LAYERS) return -1;
    uint64_t wsum = 0;
    for (uint32_t l = 0; l < num_layers; l++) wsum += pkm_profile_weights[l];
    if (wsum == 0) return -1;
    uint32_t min_share = (budget / 4 ? budget / 4 : 1) + 1;
    const uint64_t total = (uint64_t)num_layers * budget;
    uint64_t floor_total = (uint64_t)num_layers * min_share;
    if (floor_total > total) {
        floor_total = total;
        min_share = budget;
    }
    const uint64_t spread = total - floor_total;
    uint64_t given = 0;
    for (uint32_t l = 0; l < num_layers; l++) {
        uint64_t extra = (uint64_t)((double)spread *
                                    (double)pkm_profile_weights[l] /
                                    (double)wsum);
        if (extra > spread - given) extra = spread - given;
        given += extra;
        shares[l] = min_share + (uint32_t)extra;
    }
    return 0;
}

const pkm_method pkm_methods[] = {
    {"SnapKV (uniform)", sched_uniform, 1, PB_SCORER_WINDOW, 0},
    {"PyramidKV r=2", sched_pyramid, 2, PB_SCORER_WINDOW, 0},
    {"PyramidKV r=4", sched_pyramid, 4, PB_SCORER_WINDOW, 0},
    {"PyramidKV r=8", sched_pyramid, 8, PB_SCORER_WINDOW, 0},
    /* the profile schedule calibrated on this model (model_eval does the
     * calibration before it sizes anything) */
    {"profile (calibrated), window", sched_profile, 0, PB_SCORER_WINDOW, 0},
    /* The other scorers of docs/spec.md section 13 on the uniform schedule:
     * they have no one-shot prefill, so the runtime feeds them the prompt's
     * attention rows as decode steps (pkm_cache.c). */
    {"H2O (uniform)", sched_uniform, 1, PB_SCORER_CUMULATIVE, 0},
    {"TOVA (uniform)", sched_uniform, 1, PB_SCORER_LAST, 0},
    {"Scissorhands (uniform)", sched_uniform, 1, PB_SCORER_VOTES, 0},
    {"StreamingLLM (uniform, 4 sinks)", sched_uniform, 1, PB_SCORER_NONE, 4},
};

const size_t pkm_method_count = sizeof pkm_methods / sizeof pkm_methods[0];
