/*
 * pkm_cache.h - the reference integration of libpyramidkv into a decoder:
 * one policy instance and one K/V slot per (layer, KV head), slots sized
 * from the instance's capacity (a head-adaptive layer: one group and one
 * pooled K/V store of the group's pool_rows rows, the heads' slots views
 * into it), the shares of every layer taken from one
 * schedule function, prefill compression from the observation-window rows
 * (head group reduced with pb_kvcache_head_reduce), gathering K/V by the kept
 * positions, then per decode step: observe, evict at a cadence, compact.
 * docs/model.md walks through it; a runtime author can copy this file.
 */
#ifndef PKM_CACHE_H
#define PKM_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include <pyramidkv/pyramidkv.h>

#include "pkm_model.h"

/* A schedule: writes the share of each of num_layers layers for an average
 * budget. Returns 0, or -1 if this library cannot compute it. `arg` is the
 * method's schedule argument (for example the pyramid ratio). Every per-layer
 * share the runtime uses comes from here. */
typedef int (*pkm_schedule_fn)(uint32_t budget, uint32_t num_layers,
                               uint32_t arg, uint32_t *shares);

/* One row family of the evaluation: a schedule and an in-layer scorer. */
typedef struct pkm_method {
    const char *key;       /* short name for model_eval --methods */
    const char *name;      /* row label */
    pkm_schedule_fn schedule;
    uint32_t schedule_arg;
    uint32_t scorer;       /* a pb_scorer */
    uint32_t sinks;        /* pb_kvcache_config.sinks */
    uint32_t adaptive;     /* 1: the layer's KV heads share one pool
                              (pb_kvcache_group, Ada-KV) with the library's
                              default floor; 0: one share per head */
    uint32_t head_shares;  /* 1: fixed per-head shares from the per-(layer,
                              KV head) profile (pb_profile_head_shares,
                              HeadKV-style offline calibration) */
} pkm_method;

/* The methods the evaluation runs (pkm_methods.c): the one place to add
 * rows for new schedules and scorers. */
#define PKM_MAX_LAYERS 64
/* The per-layer weights of the profile schedule (pb_profile_weights on
 * this model's attention), set by the caller before any pkm_cache_init of
 * that method; until pkm_profile_ready is set the schedule is unavailable. */
extern uint32_t pkm_profile_weights[PKM_MAX_LAYERS];
extern int pkm_profile_ready;
/* The cake schedule's weights (pb_cake_weights of this model's layer
 * preferences) and the per-(layer, KV head) profile the per-head shares
 * come from (profile layer l x n_kv + kv), both set by the caller before
 * any pkm_cache_init of those methods; until then they are unavailable. */
extern uint32_t pkm_cake_weights[PKM_MAX_LAYERS];
extern int pkm_cake_ready;
extern const pb_profile *pkm_head_profile;
extern const pkm_method pkm_methods[];
extern const size_t pkm_method_count;

typedef struct pkm_cache_params {
    const pkm_method *method; /* NULL: full cache, no library */
    uint32_t budget;          /* average positions per layer and KV head */
    uint32_t recent_window;
    uint32_t obs_window;
    uint32_t pool_kernel;
    uint32_t cadence;         /* evict every `cadence` decode steps */
    uint32_t max_len;         /* longest sequence (prompt + decode) */
} pkm_cache_params;

typedef struct pkm_cache {
    uint32_t n_layers, n_kv, group, head_dim;
    uint32_t cadence, since_evict, obs_window;
    int replay;         /* the scorer has no one-shot prefill (every scorer
                           but the window one, and any with sinks): the
                           prompt's rows are fed as decode steps instead */
    pb_kvcache **pol;   /* [layer * n_kv + kv]; NULL entries: full cache
                           or a head-adaptive row */
    pb_kvcache_group **grp; /* [layer] for a head-adaptive row, else NULL */
    float **store;      /* [layer] a pooled head-adaptive row's K/V: one
                           store of the group's pool_rows rows (keys, then
                           values), its heads' slots views into it; NULL
                           entries: per-head slots */
    uint32_t *store_rows; /* [layer] rows of each store */
    size_t *counts;     /* per-head victim / survivor counts, n_kv */
    size_t *lens;       /* per-head attention lengths, n_kv */
    size_t red_stride;  /* floats between two heads' blocks in red */
    pkm_slot *slots;    /* [layer * n_kv + kv] */
    uint32_t *shares;   /* effective share per layer (full: max_len) */
    float *red;         /* reduced attention scratch: obs_window x max_len,
                           or max_len x max_len when replaying; n_kv such
                           blocks, red_stride apart, for a head-adaptive
                           row */
    uint32_t *idx;      /* kept / victim positions scratch, idx_cap: max_len
                           (n_kv x max_len for a head-adaptive row) */
    size_t idx_cap;
    uint64_t positions; /* sum of effective shares over slots */
    uint64_t capacity;  /* K/V rows allocated (the peak rows held): the sum
                           of slot capacities, a pooled layer's store
                           counting its pool_rows once */
} pkm_cache;

/* Creates the instances and slots. Returns 0, 1 if the library refuses the
 * configuration (a scorer or schedule it does not have; err says why), or
 * -1 on any other failure. */
int pkm_cache_init(pkm_cache *kc, const pkm_model *m,
                   const pkm_cache_params *p, char *err, size_t errlen);
void pkm_cache_free(pkm_cache *kc);

/* Makes every instance fresh and every slot empty (no allocation). */
int pkm_cache_reset(pkm_cache *kc);

/* End of prompt: compresses each (layer, KV head) from the window rows and
 * gathers the survivors' K/V from `full` (slots holding the whole prompt,
 * positions 0 .. len-1). rows: [layer][query head][rows][len] softmax
 * weights of the last `rows` prompt tokens, zero beyond each row's own
 * position. The window scorer uses the last obs_window of them through
 * pb_kvcache_prefill; the other scorers are fed every row given as a decode
 * step (H2O's scores are the attention of all prompt rows when rows ==
 * len), then evicted once. A full cache copies everything. Returns 0 or
 * -1. */
int pkm_cache_prefill(pkm_cache *kc, const pkm_slot *full, const float *rows,
                      uint32_t n_rows, uint32_t len);

/* After pkm_model_step appended position pos to every slot: feeds the step's
 * attention (attn[(layer * n_heads + h) * stride + i] over slot rows, the
 * last row being pos itself) to each instance and, every `cadence` steps or
 * when an instance is full, evicts down to the shares and compacts K/V.
 * Returns 0 or -1 (a library error: a bug in the integration). */
int pkm_cache_after_step(pkm_cache *kc, const float *attn, size_t stride,
                         uint32_t pos);

#endif /* PKM_CACHE_H */
