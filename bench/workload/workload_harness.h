/*
 * workload_harness.h - drives libpyramidkv policies over a trace, one
 * policy instance per layer and per configuration, all in lockstep, and
 * measures what they keep. With one layer and the decode-4096 trace it is
 * exactly the policybook registry's harness; with L layers it is what a
 * runtime with per-layer caches does: layer l is evicted down to its own
 * share whenever it holds more than that.
 *
 * Each step's attention is generated once per layer and fed to every
 * configuration (budget, ratio), so comparing ratios costs one trace.
 *
 * Owns the harness; the traces are in trace_decode.h / trace_layered.h and
 * the measures in workload_metrics.h. Allocates with malloc (it is a tool,
 * not the library).
 */
#ifndef PB_WORKLOAD_HARNESS_H
#define PB_WORKLOAD_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "pyramidkv/pyramidkv.h"
#include "trace_layered.h"

/* One configuration compared by a run. */
typedef struct pb_wl_config {
    uint32_t budget; /* average positions per layer, > recent_window */
    uint32_t ratio;  /* pyramid ratio, >= 1; 1 is uniform (SnapKV) */
} pb_wl_config;

/* Which params struct the vtable's create takes. Every kind but the first
 * and the last gives the layer's effective share as the vtable's budget:
 * that is how a runtime puts the pyramid over any policybook policy. */
typedef enum pb_wl_params_kind {
    PB_WL_PARAMS_PYRAMIDKV = 0, /* pb_kvcache_pyramidkv_params for layer l */
    PB_WL_PARAMS_SNAPKV = 1,    /* pb_kvcache_snapkv_params */
    PB_WL_PARAMS_H2O = 2,       /* pb_kvcache_h2o_params {share, recent} */
    PB_WL_PARAMS_SCISSORHANDS = 3, /* ..._scissorhands_params {share,
                                      recent} */
    PB_WL_PARAMS_TOVA = 4,         /* pb_kvcache_tova_params {share} */
    PB_WL_PARAMS_STREAMING_LLM = 5, /* ..._streaming_llm_params {share,
                                       sinks} */
    PB_WL_PARAMS_SLIDING_WINDOW = 6, /* ..._sliding_window_params {share} */
    PB_WL_PARAMS_NATIVE = 7 /* no vtable: pb_kvcache_create with a
                               pb_kvcache_config {budget, layer, L, ratio,
                               recent, obs, kernel, scorer, sinks}, driven by
                               pb_kvcache_observe / pb_kvcache_evict */
} pb_wl_params_kind;

/* The fewest positions a layer of this kind keeps whatever its share:
 * recent + 1 for the kinds with a protected window, sinks + 1 for
 * StreamingLLM, 1 for TOVA and the sliding window. (The native kind's
 * effective share is the library's, pb_kvcache_effective_budget.) */
uint32_t pb_wl_floor_of(pb_wl_params_kind kind, uint32_t recent_window,
                        uint32_t sinks);

typedef struct pb_wl_run_params {
    pb_wl_profile profile;
    uint32_t layers;         /* 1 .. PB_WL_MAX_LAYERS */
    uint32_t positions;      /* PB_WL_POSITIONS for the published traces */
    uint32_t recent_window;  /* policy params, as in pyramidkv.h */
    uint32_t obs_window;
    uint32_t pool_kernel;
    const pb_kvcache_vtable *vtable; /* e.g. &pb_kvcache_pyramidkv; unused
                                        by PB_WL_PARAMS_NATIVE */
    pb_wl_params_kind params_kind;
    uint32_t sinks;  /* StreamingLLM's and the native config's sinks */
    uint32_t scorer; /* the native config's pb_scorer */
    /* Optional cross-check: if set, the harness compares it with its own
     * count of held positions after every step and fails on a mismatch
     * (e.g. pb_kvcache_kept_count for the library's vtables). */
    size_t (*kept_count)(const pb_kvcache *policy);
    const pb_wl_config *configs;
    size_t n_configs;
    /* Optional: called after every step t of steps (= positions - 1). */
    void (*progress)(void *ctx, uint32_t t, uint32_t steps);
    void *progress_ctx;
    /* Optional explicit shares: shares[c][l] is layer l's share in
     * configuration c (any schedule of pb_kvcache_schedule_shares), and
     * configuration c's ratio is then only a label. NULL (or a NULL
     * shares[c]): the pyramid formula of (budget, ratio). With the
     * pyramidkv and native kinds the instance is made by pb_kvcache_create
     * with that share; the other kinds get max(share, floor) as their
     * budget. */
    const uint32_t *const *shares;
} pb_wl_run_params;

/* What one layer of one configuration measured. */
typedef struct pb_wl_layer_stats {
    uint32_t share;        /* pb_kvcache_pyramid_budget(budget, l, L, r),
                              or the explicit share */
    uint32_t effective;    /* max(share, pb_wl_floor_of(...)), or the
                              library's effective share for the native kind:
                              the layer is evicted down to this whenever it
                              holds more */
    double retained_sum;   /* sum over steps of the retained weight */
    uint64_t hits;         /* sum over steps of heavy-hitter hits */
    uint64_t hit_slots;    /* sum over steps of min(32, t) */
    uint64_t evictions;    /* eviction calls */
    uint32_t peak_held;    /* most positions held (after admitting t) */
    double mass;           /* round6(retained_sum / steps) */
    double recall;         /* round6(hits / hit_slots) */
} pb_wl_layer_stats;

/* What one configuration measured over all layers. */
typedef struct pb_wl_result {
    pb_wl_config config;
    uint64_t share_total;     /* sum of shares (<= layers * budget) */
    uint64_t effective_total; /* sum of effective shares */
    uint32_t floors_binding;  /* layers whose effective share exceeds their
                                 share (the floor binds) */
    uint64_t evictions;       /* eviction calls, all layers */
    uint64_t peak_held;       /* most positions held by all layers at once,
                                 counted right after t is admitted */
    double mass;              /* round6 of the layers' mean retained mass */
    double recall;            /* round6 of the layers' mean recall */
    pb_wl_layer_stats *layers; /* [layers], owned by the result */
} pb_wl_result;

/* What the trace itself looked like, per layer. */
typedef struct pb_wl_layer_info {
    pb_wl_shape shape;
    double entropy;  /* mean over steps of the attention entropy, nats */
} pb_wl_layer_info;

/* Runs every configuration over the trace. results[0 .. n_configs-1] are
 * filled (free them with pb_wl_result_free); info[0 .. layers-1] too when
 * not NULL. Returns 0, or -1 with a one-line message in err (a refused
 * parameter, an out-of-memory, a policy that misbehaved) and nothing to
 * free. */
int pb_wl_run(const pb_wl_run_params *params, pb_wl_result *results,
              pb_wl_layer_info *info, char *err, size_t err_len);

/* Frees what pb_wl_run put into results[0 .. n-1]. */
void pb_wl_result_free(pb_wl_result *results, size_t n);

#endif /* PB_WORKLOAD_HARNESS_H */
