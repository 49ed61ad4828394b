/*
 * bench_family_params.h - the params struct of a policybook family vtable
 * (H2O, Scissorhands, TOVA, StreamingLLM, sliding window) at a budget, the
 * rest the family's defaults; shared by bench_decode_replay and
 * bench_memory.
 */
#ifndef PB_BENCH_FAMILY_PARAMS_H
#define PB_BENCH_FAMILY_PARAMS_H

#include <stdint.h>

#include "pyramidkv/pyramidkv.h"

/* Every params struct of the family starts with the budget. */
typedef union bench_family_params {
    pb_kvcache_h2o_params h2o;
    pb_kvcache_scissorhands_params scissorhands;
    pb_kvcache_tova_params tova;
    pb_kvcache_streaming_llm_params streaming_llm;
    pb_kvcache_sliding_window_params sliding_window;
} bench_family_params;

/* The defaults of vt's params struct with `budget`, in *p; returns p for
 * vt->create. vt is one of the five family vtables. */
static inline const void *bench_family_params_of(const pb_kvcache_vtable *vt,
                                                 uint32_t budget,
                                                 bench_family_params *p) {
    static const pb_kvcache_h2o_params h2o = PB_KVCACHE_H2O_PARAMS_DEFAULT;
    static const pb_kvcache_scissorhands_params sh =
        PB_KVCACHE_SCISSORHANDS_PARAMS_DEFAULT;
    static const pb_kvcache_tova_params tova = PB_KVCACHE_TOVA_PARAMS_DEFAULT;
    static const pb_kvcache_streaming_llm_params sl =
        PB_KVCACHE_STREAMING_LLM_PARAMS_DEFAULT;
    static const pb_kvcache_sliding_window_params sw =
        PB_KVCACHE_SLIDING_WINDOW_PARAMS_DEFAULT;
    if (vt == &pb_kvcache_h2o) p->h2o = h2o;
    else if (vt == &pb_kvcache_scissorhands) p->scissorhands = sh;
    else if (vt == &pb_kvcache_tova) p->tova = tova;
    else if (vt == &pb_kvcache_streaming_llm) p->streaming_llm = sl;
    else p->sliding_window = sw;
    p->h2o.budget = budget; /* the common first member */
    return p;
}

#endif /* PB_BENCH_FAMILY_PARAMS_H */
