/*
 * pkm_methods.c - the rows of the model evaluation: which schedule gives
 * each layer its share and which scorer picks the victims inside a layer.
 * This table is the one place to add a row: a schedule is a pb_schedule
 * kind with its parameters (sched_library), a scorer a pb_scorer value;
 * a row the linked library refuses is printed
 * as "not in this library" instead of failing the run. Every row of one
 * budget gets the same average budget, so the memory is equal up to the
 * schedule's rounding (printed beside each row).
 */
#include "pkm_cache.h"

uint32_t pkm_profile_weights[PKM_MAX_LAYERS];
int pkm_profile_ready;
uint32_t pkm_cake_weights[PKM_MAX_LAYERS];
int pkm_cake_ready;
const pb_profile *pkm_head_profile;

/* The evaluation's recent window (model_eval.c): budget / 4, at least 1.
 * kvfactory's observation window and the profile's per-layer base use it,
 * so those schedules reserve what the instances protect anyway. */
static uint32_t recent_of(uint32_t budget) { return budget / 4 ? budget / 4 : 1; }

/* Every row's shares come from the library's one schedule call
 * (pb_kvcache_schedule_shares, docs/spec.md §12); `arg` selects the kind
 * and its parameters below. */
enum {
    SCHED_UNIFORM, SCHED_ARITH2, SCHED_ARITH4, SCHED_ARITH8, SCHED_KVFACTORY,
    SCHED_KVFACTORY_BALANCED, SCHED_TAPER, SCHED_CURVE, SCHED_PROFILE,
    SCHED_CAKE
};

static int sched_library(uint32_t budget, uint32_t num_layers, uint32_t arg,
                         uint32_t *shares)
{
    pb_schedule s = PB_SCHEDULE_DEFAULT;
    s.num_layers = num_layers;
    s.budget = budget;
    switch (arg) {
    case SCHED_UNIFORM: s.kind = PB_SCHEDULE_UNIFORM; break;
    case SCHED_ARITH2: s.kind = PB_SCHEDULE_ARITHMETIC; s.ratio = 2; break;
    case SCHED_ARITH4: s.kind = PB_SCHEDULE_ARITHMETIC; s.ratio = 4; break;
    case SCHED_ARITH8: s.kind = PB_SCHEDULE_ARITHMETIC; s.ratio = 8; break;
    case SCHED_KVFACTORY:
    case SCHED_KVFACTORY_BALANCED:
        /* The paper's code with the KV size C = budget, its window = the
         * recent window, beta 20 and no prompt clamp (a long prompt). */
        s.kind = arg == SCHED_KVFACTORY ? PB_SCHEDULE_KVFACTORY
                                        : PB_SCHEDULE_KVFACTORY_BALANCED;
        s.window = recent_of(budget);
        s.beta = 20;
        break;
    case SCHED_TAPER:
        /* VeloxQuant-MLX's taper with 4 sinks and beta 2. */
        s.kind = PB_SCHEDULE_TAPER;
        s.sinks = 4;
        s.taper_beta = 2.0;
        break;
    case SCHED_CURVE:
        s.kind = PB_SCHEDULE_CURVE;
        s.ratio = 4;
        s.gamma_milli = 800;
        break;
    case SCHED_PROFILE:
        /* The weights `pyramidkv calibrate` derives (pb_profile_weights),
         * calibrated on this model by model_eval before anything is sized;
         * every layer's base is its recent window plus one. */
        if (!pkm_profile_ready) return -1;
        s.kind = PB_SCHEDULE_PROFILE;
        s.weights = pkm_profile_weights;
        s.min_share = recent_of(budget) + 1 <= budget ? recent_of(budget) + 1
                                                      : budget;
        break;
    case SCHED_CAKE:
        /* CAKE's layer preferences measured on this model's calibration
         * prompts (model_eval), the recent window in every layer. */
        if (!pkm_cake_ready) return -1;
        s.kind = PB_SCHEDULE_CAKE;
        s.weights = pkm_cake_weights;
        s.window = recent_of(budget) < budget ? recent_of(budget) : 0;
        break;
    default: return -1;
    }
    uint64_t total = 0;
    return pb_kvcache_schedule_shares(&s, shares, num_layers, &total) == PB_OK
               ? 0 : -1;
}

const pkm_method pkm_methods[] = {
    {"uniform", "SnapKV (uniform)", sched_library, SCHED_UNIFORM, PB_SCORER_WINDOW, 0, 0, 0},
    {"pyramid2", "PyramidKV r=2", sched_library, SCHED_ARITH2, PB_SCORER_WINDOW, 0, 0, 0},
    {"pyramid4", "PyramidKV r=4", sched_library, SCHED_ARITH4, PB_SCORER_WINDOW, 0, 0, 0},
    {"pyramid8", "PyramidKV r=8", sched_library, SCHED_ARITH8, PB_SCORER_WINDOW, 0, 0, 0},
    {"kvfactory", "kvfactory (paper code)", sched_library, SCHED_KVFACTORY,
     PB_SCORER_WINDOW, 0, 0, 0},
    {"kvfactory-balanced", "kvfactory-balanced", sched_library, SCHED_KVFACTORY_BALANCED,
     PB_SCORER_WINDOW, 0, 0, 0},
    {"taper", "taper (4 sinks, beta 2)", sched_library, SCHED_TAPER, PB_SCORER_WINDOW,
     0, 0, 0},
    {"curve", "curve r=4 gamma=0.8", sched_library, SCHED_CURVE, PB_SCORER_WINDOW, 0, 0, 0},
    {"profile", "profile (calibrated), window", sched_library, SCHED_PROFILE,
     PB_SCORER_WINDOW, 0, 0, 0},
    /* The other scorers of docs/spec.md §13: they have no one-shot prefill,
     * so the runtime feeds them the prompt's attention rows as decode steps
     * (pkm_cache.c). Uniform, and the pyramid over H2O with 4 sinks
     * (VeloxQuant's "PyramidKV-adapted"). */
    {"h2o", "H2O (uniform)", sched_library, SCHED_UNIFORM, PB_SCORER_CUMULATIVE, 0, 0, 0},
    {"h2o-pyramid4", "H2O r=4, 4 sinks", sched_library, SCHED_ARITH4, PB_SCORER_CUMULATIVE,
     4, 0, 0},
    {"tova", "TOVA (uniform)", sched_library, SCHED_UNIFORM, PB_SCORER_LAST, 0, 0, 0},
    {"scissorhands", "Scissorhands (uniform)", sched_library, SCHED_UNIFORM, PB_SCORER_VOTES,
     0, 0, 0},
    /* Head-adaptive (Ada-KV, docs/spec.md §15): each layer's share times
     * its KV heads is one pool the heads compete for, every head keeping
     * the library's default floor (alpha 0.2). */
    {"ada-snapkv", "Ada-SnapKV (uniform layers)", sched_library,
     SCHED_UNIFORM, PB_SCORER_WINDOW, 0, 1, 0},
    {"ada-pyramid4", "Ada-PyramidKV r=4", sched_library, SCHED_ARITH4,
     PB_SCORER_WINDOW, 0, 1, 0},
    {"ada-h2o", "Ada-H2O (uniform layers)", sched_library, SCHED_UNIFORM,
     PB_SCORER_CUMULATIVE, 0, 1, 0},
    /* Calibrated on this model (model_eval): CAKE's layer preferences as
     * the layer schedule, alone and under the head-adaptive pool, and
     * fixed per-head shares from a per-(layer, KV head) profile. */
    {"cake", "CAKE layers (calibrated), window", sched_library, SCHED_CAKE,
     PB_SCORER_WINDOW, 0, 0, 0},
    {"ada-cake", "Ada over CAKE layers", sched_library, SCHED_CAKE,
     PB_SCORER_WINDOW, 0, 1, 0},
    {"head-shares", "per-head shares (calibrated)", sched_library,
     SCHED_UNIFORM, PB_SCORER_WINDOW, 0, 0, 1},
    {"streaming", "StreamingLLM (uniform, 4 sinks)", sched_library, SCHED_UNIFORM,
     PB_SCORER_NONE, 4, 0, 0},
};

const size_t pkm_method_count = sizeof pkm_methods / sizeof pkm_methods[0];
