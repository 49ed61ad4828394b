/*
 * workload_ref_vtable.c - adapts ref_policy to pb_kvcache_vtable (see the
 * header). An instance is a malloc'd ref_policy handed out as an opaque
 * pb_kvcache pointer and converted back on every call.
 */
#include "workload_ref_vtable.h"

#include <stdlib.h>

#include "reference_model.h"

static pb_kvcache *ref_vt_create(const void *params,
                                 const pb_allocator *allocator, pb_rng *rng) {
    (void)allocator;
    (void)rng;
    ref_policy *r = malloc(sizeof *r);
    if (r == NULL) return NULL;
    if (ref_create(r, (const pb_kvcache_pyramidkv_params *)params, NULL) !=
        PB_OK) {
        free(r);
        return NULL;
    }
    return (pb_kvcache *)(void *)r;
}

static void ref_vt_decode(pb_kvcache *policy, uint32_t pos, const float *attn,
                          size_t attn_len) {
    if (policy != NULL)
        (void)ref_observe((ref_policy *)(void *)policy, pos, attn, attn_len);
}

static size_t ref_vt_evict(pb_kvcache *policy, uint32_t budget,
                           uint32_t *victims, size_t capacity) {
    size_t n = 0;
    if (policy == NULL) return 0;
    if (ref_evict((ref_policy *)(void *)policy, budget, victims, capacity,
                  &n) != PB_OK)
        return 0;
    return n;
}

static size_t ref_vt_memory(const pb_kvcache *policy) {
    (void)policy;
    return 0;
}

static void ref_vt_destroy(pb_kvcache *policy) {
    if (policy == NULL) return;
    ref_destroy((ref_policy *)(void *)policy);
    free(policy);
}

const pb_kvcache_vtable pb_wl_test_ref_vtable = {
    ref_vt_create, ref_vt_decode, ref_vt_evict, ref_vt_memory, ref_vt_destroy};

size_t pb_wl_test_ref_kept_count(const pb_kvcache *policy) {
    return policy == NULL ? 0 : ((const ref_policy *)(const void *)policy)->kept;
}
