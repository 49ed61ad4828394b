// header_compile.cpp - the public header compiled as C++ with
// -Wall -Wextra -Wpedantic -Werror; test_header_compile.c calls the probe.
#include <pyramidkv/pyramidkv.h>

extern "C" int pb_header_probe_cxx(void);

extern "C" int pb_header_probe_cxx(void) {
    const pb_kvcache_pyramidkv_params p = PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
    const pb_kvcache_snapkv_params s = PB_KVCACHE_SNAPKV_PARAMS_DEFAULT;
    const pb_kvcache_options o = PB_KVCACHE_OPTIONS_DEFAULT;
    const pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    const pb_kvcache_vtable *v = &pb_kvcache_pyramidkv;
    return static_cast<int>(p.budget + s.budget + o.capacity) +
           (v->create != nullptr) + (pb_kvcache_snapkv.evict != nullptr) +
           (c.struct_size == sizeof c);
}

extern "C" int pb_header_probe_family_cxx(void);

extern "C" int pb_header_probe_family_cxx(void) {
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
    return static_cast<int>(h.budget + h.recent_window + s.budget +
                            s.recent_window + t.budget + l.budget + l.sinks +
                            w.budget) +
           (pb_kvcache_h2o.create != nullptr) +
           (pb_kvcache_scissorhands.create != nullptr) +
           (pb_kvcache_tova.evict != nullptr) +
           (pb_kvcache_streaming_llm.create != nullptr) +
           (pb_kvcache_sliding_window.destroy != nullptr) +
           (score != nullptr) + (sinks != nullptr) +
           static_cast<int>(PB_SCORER_NONE);
}

extern "C" int pb_header_probe_runtime_cxx(void);

extern "C" int pb_header_probe_runtime_cxx(void) {
    const pb_qk_config c = PB_QK_CONFIG_DEFAULT;
    pb_status (*obs)(pb_qk *, pb_kvcache *, uint32_t, const float *, size_t,
                     const void *, size_t, size_t) = pb_qk_observe;
    pb_status (*slots)(pb_kvcache *, uint32_t, uint32_t *, uint32_t *, size_t,
                       size_t *) = pb_kvcache_evict_slots;
    pb_status (*compact)(const uint32_t *, size_t, size_t, void *, size_t,
                         size_t, void *, size_t, size_t) =
        pb_kvcache_compact_rows;
    return static_cast<int>(c.head_dim + c.group + c.max_rows) +
           (c.struct_size == sizeof c) + (obs != nullptr) +
           (slots != nullptr) + (compact != nullptr) +
           (PB_KVCACHE_BUDGET_SHARE == UINT32_MAX) +
           static_cast<int>(PB_KEYS_BF16);
}
