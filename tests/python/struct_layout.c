/*
 * struct_layout.c - prints the size and every field offset of each public
 * struct as the C compiler lays it out, one "name size" or
 * "name.field offset" per line, for tests/python/test_binding.py to compare
 * with the package's ctypes mirrors (bench/python/pyramidkv/_lib.py). The
 * structs of the optional headers (the layer group, the runtime helpers)
 * are printed when the header is there.
 */
#include <stddef.h>
#include <stdio.h>

#include <pyramidkv/pyramidkv.h>

#define S(t) printf("%s %zu\n", #t, sizeof(t))
#define F(t, f) printf("%s.%s %zu\n", #t, #f, offsetof(t, f))

int main(void)
{
    S(pb_allocator); F(pb_allocator, alloc); F(pb_allocator, free);
    F(pb_allocator, ctx);
    S(pb_kvcache_pyramidkv_params); F(pb_kvcache_pyramidkv_params, budget);
    F(pb_kvcache_pyramidkv_params, layer);
    F(pb_kvcache_pyramidkv_params, num_layers);
    F(pb_kvcache_pyramidkv_params, pyramid_ratio);
    F(pb_kvcache_pyramidkv_params, recent_window);
    F(pb_kvcache_pyramidkv_params, obs_window);
    F(pb_kvcache_pyramidkv_params, pool_kernel);
    S(pb_kvcache_snapkv_params); F(pb_kvcache_snapkv_params, budget);
    F(pb_kvcache_snapkv_params, recent_window);
    F(pb_kvcache_snapkv_params, obs_window);
    F(pb_kvcache_snapkv_params, pool_kernel);
    S(pb_kvcache_h2o_params); F(pb_kvcache_h2o_params, budget);
    F(pb_kvcache_h2o_params, recent_window);
    S(pb_kvcache_scissorhands_params);
    F(pb_kvcache_scissorhands_params, budget);
    F(pb_kvcache_scissorhands_params, recent_window);
    S(pb_kvcache_tova_params); F(pb_kvcache_tova_params, budget);
    S(pb_kvcache_streaming_llm_params);
    F(pb_kvcache_streaming_llm_params, budget);
    F(pb_kvcache_streaming_llm_params, sinks);
    S(pb_kvcache_sliding_window_params);
    F(pb_kvcache_sliding_window_params, budget);
    S(pb_kvcache_options); F(pb_kvcache_options, capacity);
    F(pb_kvcache_options, pool); F(pb_kvcache_options, prefill_scope);
    F(pb_kvcache_options, prefill_max_len);
    S(pb_kvcache_config); F(pb_kvcache_config, struct_size);
    F(pb_kvcache_config, budget); F(pb_kvcache_config, layer);
    F(pb_kvcache_config, num_layers); F(pb_kvcache_config, pyramid_ratio);
    F(pb_kvcache_config, share); F(pb_kvcache_config, recent_window);
    F(pb_kvcache_config, obs_window); F(pb_kvcache_config, pool_kernel);
    F(pb_kvcache_config, pool); F(pb_kvcache_config, scorer);
    F(pb_kvcache_config, sinks); F(pb_kvcache_config, capacity);
    F(pb_kvcache_config, prefill_scope);
    F(pb_kvcache_config, prefill_max_len); F(pb_kvcache_config, row_stores);
    S(pb_schedule); F(pb_schedule, struct_size); F(pb_schedule, kind);
    F(pb_schedule, num_layers); F(pb_schedule, budget); F(pb_schedule, ratio);
    F(pb_schedule, window); F(pb_schedule, beta); F(pb_schedule, prompt_len);
    F(pb_schedule, sinks); F(pb_schedule, gamma_milli);
    F(pb_schedule, min_share); F(pb_schedule, taper_beta);
    F(pb_schedule, weights);
    S(pb_profile_params); F(pb_profile_params, struct_size);
    F(pb_profile_params, num_layers); F(pb_profile_params, max_len);
    S(pb_kvcache_vtable); F(pb_kvcache_vtable, create);
    F(pb_kvcache_vtable, on_decode_step); F(pb_kvcache_vtable, evict);
    F(pb_kvcache_vtable, memory_bytes); F(pb_kvcache_vtable, destroy);
#ifdef PYRAMIDKV_PYRAMIDKV_GROUP_H
    S(pb_kvcache_group_params); F(pb_kvcache_group_params, struct_size);
    F(pb_kvcache_group_params, num_heads);
    F(pb_kvcache_group_params, floor_permille);
    F(pb_kvcache_group_params, slack);
    F(pb_kvcache_group_params, prefill_max_len);
    S(pb_kvcache_group_plan_info);
    F(pb_kvcache_group_plan_info, struct_size);
    F(pb_kvcache_group_plan_info, num_heads);
    F(pb_kvcache_group_plan_info, head_share);
    F(pb_kvcache_group_plan_info, floor);
    F(pb_kvcache_group_plan_info, head_min);
    F(pb_kvcache_group_plan_info, head_max);
    F(pb_kvcache_group_plan_info, head_capacity);
    F(pb_kvcache_group_plan_info, reserved);
    F(pb_kvcache_group_plan_info, layer_total);
#endif
#ifdef PYRAMIDKV_PYRAMIDKV_RUNTIME_H
    S(pb_qk_config); F(pb_qk_config, struct_size); F(pb_qk_config, head_dim);
    F(pb_qk_config, group); F(pb_qk_config, key_type);
    F(pb_qk_config, reduce); F(pb_qk_config, scale);
    F(pb_qk_config, max_keys); F(pb_qk_config, max_rows);
#endif
    /* the defaults the package copies */
    {
        const pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
        const pb_schedule s = PB_SCHEDULE_DEFAULT;
        const pb_profile_params p = PB_PROFILE_PARAMS_DEFAULT;
        printf("default.pb_kvcache_config %u %u %u %u %u %u %u %u %u %u %u %u "
               "%u %u %u %u\n", c.struct_size, c.budget, c.layer,
               c.num_layers, c.pyramid_ratio, c.share, c.recent_window,
               c.obs_window, c.pool_kernel, c.pool, c.scorer, c.sinks,
               c.capacity, c.prefill_scope, c.prefill_max_len, c.row_stores);
        printf("default.pb_schedule %u %u %u %u %u %u %u %u %u %u %u %.17g\n",
               s.struct_size, s.kind, s.num_layers, s.budget, s.ratio,
               s.window, s.beta, s.prompt_len, s.sinks, s.gamma_milli,
               s.min_share, s.taper_beta);
        printf("default.pb_profile_params %u %u %u\n", p.struct_size,
               p.num_layers, p.max_len);
#ifdef PYRAMIDKV_PYRAMIDKV_GROUP_H
        const pb_kvcache_group_params g = PB_KVCACHE_GROUP_PARAMS_DEFAULT;
        printf("default.pb_kvcache_group_params %u %u %u %u %u\n",
               g.struct_size, g.num_heads, g.floor_permille, g.slack,
               g.prefill_max_len);
#endif
#ifdef PYRAMIDKV_PYRAMIDKV_RUNTIME_H
        const pb_qk_config q = PB_QK_CONFIG_DEFAULT;
        printf("default.pb_qk_config %u %u %u %u %u %.17g %u %u\n",
               q.struct_size, q.head_dim, q.group, q.key_type, q.reduce,
               (double)q.scale, q.max_keys, q.max_rows);
#endif
    }
    return 0;
}
