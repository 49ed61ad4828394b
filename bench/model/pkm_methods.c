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

const pkm_method pkm_methods[] = {
    {"SnapKV (uniform)", sched_uniform, 1, PB_SCORER_WINDOW, 0},
    {"PyramidKV r=2", sched_pyramid, 2, PB_SCORER_WINDOW, 0},
    {"PyramidKV r=4", sched_pyramid, 4, PB_SCORER_WINDOW, 0},
    {"PyramidKV r=8", sched_pyramid, 8, PB_SCORER_WINDOW, 0},
    /* The other scorers of docs/spec.md section 13 on the uniform schedule:
     * they have no one-shot prefill, so the runtime feeds them the prompt's
     * attention rows as decode steps (pkm_cache.c). */
    {"H2O (uniform)", sched_uniform, 1, PB_SCORER_CUMULATIVE, 0},
    {"TOVA (uniform)", sched_uniform, 1, PB_SCORER_LAST, 0},
    {"Scissorhands (uniform)", sched_uniform, 1, PB_SCORER_VOTES, 0},
    {"StreamingLLM (uniform, 4 sinks)", sched_uniform, 1, PB_SCORER_NONE, 4},
};

const size_t pkm_method_count = sizeof pkm_methods / sizeof pkm_methods[0];
