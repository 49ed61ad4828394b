/*
 * vector_policy_pyramidkv.c - the two per-layer policy families of the
 * first release: "kv-cache/pyramidkv" and "kv-cache/snapkv"
 * (docs/vectors.md). Each says which "params" keys it takes and how its
 * instance is made on the native surface (pb_kvcache_pyramidkv_create,
 * with options) and on the compatible one (its vtable's create).
 *
 * SnapKV params map onto one layer (layer 0 of 1, ratio at its default),
 * which is what SnapKV is (docs/spec.md), so both families share the
 * native create and every step. This file is the model for a new family:
 * a pb__vr_policy here or in a file of its own, and one entry in
 * vector_families.c.
 */
#include <stdint.h>

#include "vector_runner_internal.h"

static const char *const pyramidkv_param_keys[] = {
    "budget", "layer", "numLayers", "pyramidRatio", "recentWindow",
    "obsWindow", "poolKernel", NULL};
static const char *const snapkv_param_keys[] = {
    "budget", "recentWindow", "obsWindow", "poolKernel", NULL};

/* Reads params in the key set `keys` (a subset of pyramidkv_param_keys)
 * onto the defaults. */
static int parse_keys(case_state *c, const cJSON *jp, const char *const *keys,
                      vr_params *params) {
    pb_kvcache_pyramidkv_params *p = &params->pyramidkv;
    const pb_kvcache_pyramidkv_params d = PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
    *p = d;
    const int obj = pb__vr_object_keys(c, jp, "\"params\"", keys);
    if (obj <= 0) return obj < 0;
    uint32_t *const fields[] = {&p->budget, &p->layer, &p->num_layers,
                                &p->pyramid_ratio, &p->recent_window,
                                &p->obs_window, &p->pool_kernel};
    return pb__vr_read_u32s(c, jp, "params", pyramidkv_param_keys, fields,
                            sizeof fields / sizeof fields[0]);
}

static int parse_pyramidkv(case_state *c, const cJSON *jp, vr_params *p) {
    return parse_keys(c, jp, pyramidkv_param_keys, p);
}

static int parse_snapkv(case_state *c, const cJSON *jp, vr_params *p) {
    return parse_keys(c, jp, snapkv_param_keys, p);
}

static pb_status size_native(const vr_params *p, const pb_kvcache_options *o,
                             size_t *bytes) {
    return pb_kvcache_pyramidkv_size(&p->pyramidkv, o, bytes);
}

static pb_status create_native(const vr_params *p, const pb_kvcache_options *o,
                               pb_kvcache **out) {
    return pb_kvcache_pyramidkv_create(&p->pyramidkv, o, NULL, out);
}

static pb_kvcache *create_pyramidkv(const vr_params *p) {
    return pb_kvcache_pyramidkv.create(&p->pyramidkv, NULL, NULL);
}

static pb_kvcache *create_snapkv(const vr_params *p) {
    const pb_kvcache_snapkv_params sp = {p->pyramidkv.budget,
                                         p->pyramidkv.recent_window,
                                         p->pyramidkv.obs_window,
                                         p->pyramidkv.pool_kernel};
    return pb_kvcache_snapkv.create(&sp, NULL, NULL);
}

const pb__vr_policy pb__vr_policy_pyramidkv = {
    parse_pyramidkv, size_native, create_native, &pb_kvcache_pyramidkv,
    create_pyramidkv, NULL};

const pb__vr_policy pb__vr_policy_snapkv = {
    parse_snapkv, size_native, create_native, &pb_kvcache_snapkv,
    create_snapkv, NULL};
