/*
 * header_compile.c - the public header compiled as strict C11 with
 * -Wall -Wextra -Wpedantic -Werror; test_header_compile.c calls the probe.
 */
#include <pyramidkv/pyramidkv.h>

int pb_header_probe_c11(void);

int pb_header_probe_c11(void) {
    const pb_kvcache_pyramidkv_params p = PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
    const pb_kvcache_snapkv_params s = PB_KVCACHE_SNAPKV_PARAMS_DEFAULT;
    const pb_kvcache_options o = PB_KVCACHE_OPTIONS_DEFAULT;
    const pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    const pb_kvcache_vtable *v = &pb_kvcache_pyramidkv;
    return (int)(p.budget + s.budget + o.capacity) + (v->create != NULL) +
           (pb_kvcache_snapkv.evict != NULL) +
           (c.struct_size == sizeof c);
}

int pb_header_probe_family_c11(void);

/* The rest of the family and the scorer introspection: their params and
 * _DEFAULT initialisers, the vtables and the new functions. */
int pb_header_probe_family_c11(void) {
    const pb_kvcache_h2o_params h = PB_KVCACHE_H2O_PARAMS_DEFAULT;
    const pb_kvcache_scissorhands_params s =
        PB_KVCACHE_SCISSORHANDS_PARAMS_DEFAULT;
    const pb_kvcache_tova_params t = PB_KVCACHE_TOVA_PARAMS_DEFAULT;
    const pb_kvcache_streaming_llm_params l =
        PB_KVCACHE_STREAMING_LLM_PARAMS_DEFAULT;
    const pb_kvcache_sliding_window_params w =
        PB_KVCACHE_SLIDING_WINDOW_PARAMS_DEFAULT;
    pb_status (*score)(const pb_kvcache *, uint32_t, double *) =
        pb_kvcache_score;
    size_t (*sinks)(const pb_kvcache *) = pb_kvcache_sink_count;
    return (int)(h.budget + h.recent_window + s.budget + s.recent_window +
                 t.budget + l.budget + l.sinks + w.budget) +
           (pb_kvcache_h2o.create != NULL) +
           (pb_kvcache_scissorhands.create != NULL) +
           (pb_kvcache_tova.evict != NULL) +
           (pb_kvcache_streaming_llm.create != NULL) +
           (pb_kvcache_sliding_window.destroy != NULL) + (score != NULL) +
           (sinks != NULL) + (int)PB_SCORER_NONE;
}

int pb_header_probe_runtime_c11(void);

/* The runtime helpers: the scorer's config and its _DEFAULT, the key
 * types, the share constant and the new functions. */
int pb_header_probe_runtime_c11(void) {
    const pb_qk_config c = PB_QK_CONFIG_DEFAULT;
    pb_status (*obs)(pb_qk *, pb_kvcache *, uint32_t, const float *, size_t,
                     const void *, size_t, size_t) = pb_qk_observe;
    pb_status (*slots)(pb_kvcache *, uint32_t, uint32_t *, uint32_t *, size_t,
                       size_t *) = pb_kvcache_evict_slots;
    pb_status (*compact)(const uint32_t *, size_t, size_t, void *, size_t,
                         size_t, void *, size_t, size_t) =
        pb_kvcache_compact_rows;
    return (int)(c.head_dim + c.group + c.max_rows) +
           (c.struct_size == sizeof c) + (obs != NULL) +
           (slots != NULL) + (compact != NULL) +
           (PB_KVCACHE_BUDGET_SHARE == UINT32_MAX) + (int)PB_KEYS_BF16;
}
