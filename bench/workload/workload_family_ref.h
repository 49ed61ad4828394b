/*
 * workload_family_ref.h - a naive reference of the rest of the policybook
 * family (H2O, Scissorhands, TOVA, StreamingLLM, sliding window), written
 * straight from the rules of their compatible vtables (docs/spec.md) with
 * none of the library's code: plain arrays, a linear scan per victim. It
 * is what the harness test and bench_decode_replay compare the library
 * with; it is slow on purpose and never used to produce a published figure.
 *
 * Each policy is offered behind a pb_kvcache_vtable whose create takes the
 * same params struct as the library's vtable of that name (NULL: the
 * defaults), so the harness can run it exactly as it runs the library. The
 * instance holds at most budget + 1 positions. Allocates with malloc at
 * create only.
 */
#ifndef PB_WORKLOAD_FAMILY_REF_H
#define PB_WORKLOAD_FAMILY_REF_H

#include <stddef.h>
#include <stdint.h>

#include "pyramidkv/pyramidkv.h"

extern const pb_kvcache_vtable pb_wl_ref_h2o;
extern const pb_kvcache_vtable pb_wl_ref_scissorhands;
extern const pb_kvcache_vtable pb_wl_ref_tova;
extern const pb_kvcache_vtable pb_wl_ref_streaming_llm;
extern const pb_kvcache_vtable pb_wl_ref_sliding_window;

/* The held count of an instance made by one of the vtables above. */
size_t pb_wl_ref_kept_count(const pb_kvcache *policy);

#endif /* PB_WORKLOAD_FAMILY_REF_H */
