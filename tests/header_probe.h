/*
 * header_probe.h - the probes of the public header, one body compiled as
 * strict C11 (header_compile.c) and as C++ (header_compile.cpp), both with
 * -Wall -Wextra -Wpedantic -Werror; test_header_compile.c calls them.
 * Each probe names the _DEFAULT initialisers, vtables and functions of
 * one part of the header. The including file defines PB_PROBE(name) (the
 * probe's declaration and definition head, with its language's linkage
 * and suffix), PB_INT(x) (a cast to int) and PB_NULL (the null pointer).
 * No include guard: it is a body, included once per language.
 */

PB_PROBE(pb_header_probe) {
    const pb_kvcache_pyramidkv_params p = PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
    const pb_kvcache_snapkv_params s = PB_KVCACHE_SNAPKV_PARAMS_DEFAULT;
    const pb_kvcache_options o = PB_KVCACHE_OPTIONS_DEFAULT;
    const pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    const pb_kvcache_vtable *v = &pb_kvcache_pyramidkv;
    return PB_INT(p.budget + s.budget + o.capacity) +
           (v->create != PB_NULL) + (pb_kvcache_snapkv.evict != PB_NULL) +
           (c.struct_size == sizeof c);
}

/* The rest of the family and the scorer introspection: their params and
 * _DEFAULT initialisers, the vtables and the new functions. */
PB_PROBE(pb_header_probe_family) {
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
    return PB_INT(h.budget + h.recent_window + s.budget + s.recent_window +
                  t.budget + l.budget + l.sinks + w.budget) +
           (pb_kvcache_h2o.create != PB_NULL) +
           (pb_kvcache_scissorhands.create != PB_NULL) +
           (pb_kvcache_tova.evict != PB_NULL) +
           (pb_kvcache_streaming_llm.create != PB_NULL) +
           (pb_kvcache_sliding_window.destroy != PB_NULL) +
           (score != PB_NULL) + (sinks != PB_NULL) + PB_INT(PB_SCORER_NONE);
}

/* The runtime helpers: the scorer's config and its _DEFAULT, the key
 * types, the share constant and the new functions. */
PB_PROBE(pb_header_probe_runtime) {
    const pb_qk_config c = PB_QK_CONFIG_DEFAULT;
    pb_status (*obs)(pb_qk *, pb_kvcache *, uint32_t, const float *, size_t,
                     const void *, size_t, size_t) = pb_qk_observe;
    pb_status (*slots)(pb_kvcache *, uint32_t, uint32_t *, uint32_t *, size_t,
                       size_t *) = pb_kvcache_evict_slots;
    pb_status (*compact)(const uint32_t *, size_t, size_t, void *, size_t,
                         size_t, void *, size_t, size_t) =
        pb_kvcache_compact_rows;
    return PB_INT(c.head_dim + c.group + c.max_rows) +
           (c.struct_size == sizeof c) + (obs != PB_NULL) +
           (slots != PB_NULL) + (compact != PB_NULL) +
           (PB_KVCACHE_BUDGET_SHARE == UINT32_MAX) + PB_INT(PB_KEYS_BF16);
}

/* The layer group: its params' _DEFAULT, its plan info's _INIT, and its
 * decode doors (observe, evict, and the one-call step). */
PB_PROBE(pb_header_probe_group) {
    const pb_kvcache_group_params p = PB_KVCACHE_GROUP_PARAMS_DEFAULT;
    const pb_kvcache_group_plan_info i = PB_KVCACHE_GROUP_PLAN_INFO_INIT;
    pb_status (*obs)(pb_kvcache_group *, uint32_t, const float *, size_t,
                     const size_t *) = pb_kvcache_group_observe;
    pb_status (*ev)(pb_kvcache_group *, uint64_t, uint32_t *, size_t,
                    size_t *, size_t, size_t *) = pb_kvcache_group_evict;
    pb_status (*st)(pb_kvcache_group *, uint32_t, const float *, size_t,
                    const size_t *, uint64_t, uint32_t *, size_t, size_t *,
                    size_t, size_t *) = pb_kvcache_group_step;
    return PB_INT(p.num_heads + p.floor_permille + p.slack) +
           (p.struct_size == sizeof p) + (i.struct_size == sizeof i) +
           (obs != PB_NULL) + (ev != PB_NULL) + (st != PB_NULL);
}
