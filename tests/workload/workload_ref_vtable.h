/*
 * workload_ref_vtable.h - the reference model (tests/reference_model.h)
 * behind a pb_kvcache_vtable, so the workload harness can run it exactly
 * as it runs the library. Test support only.
 */
#ifndef PB_TESTS_WORKLOAD_REF_VTABLE_H
#define PB_TESTS_WORKLOAD_REF_VTABLE_H

#include <stddef.h>

#include "pyramidkv/pyramidkv.h"

/* create takes pb_kvcache_pyramidkv_params (NULL: the defaults) and ignores
 * the allocator and rng; the rest follows the compatible surface. */
extern const pb_kvcache_vtable pb_wl_test_ref_vtable;

/* The held count of an instance made by pb_wl_test_ref_vtable. */
size_t pb_wl_test_ref_kept_count(const pb_kvcache *policy);

#endif /* PB_TESTS_WORKLOAD_REF_VTABLE_H */
