/*
 * trace_decode.h - the attention trace generator of the workload library.
 *
 * Generates, step by step, the normalised float32 attention weights of the
 * policybook decode-4096 trace (pb_wl_shape_decode4096) or of any layer of
 * the layered workload (trace_layered.h builds those shapes). A step t gives
 * t weights over positions 0 .. t-1 that sum to one. The exact definition is
 * in docs/traces.md; with the decode-4096 shape the FNV-1a hash of all 4,095
 * steps is PB_WL_DECODE4096_HASH.
 *
 * Owns the generator and the hash helper; not the metrics
 * (workload_metrics.h) nor the policy harness (workload_harness.h).
 *
 * Typical use:
 *     pb_wl_shape shape;
 *     pb_wl_trace tr;
 *     float w[PB_WL_POSITIONS];
 *     pb_wl_shape_decode4096(&shape);
 *     if (pb_wl_trace_init(&tr, &shape, PB_WL_POSITIONS) != 0) ...;
 *     for (uint32_t t; (t = pb_wl_trace_next(&tr, w)) != 0;)
 *         use(t, w);     (w[0 .. t-1])
 *     pb_wl_trace_free(&tr);
 */
#ifndef PB_WORKLOAD_TRACE_DECODE_H
#define PB_WORKLOAD_TRACE_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "workload_rng.h"

/* Positions of every trace of the workload; steps are t = 1 .. 4095. */
#define PB_WL_POSITIONS 4096u
/* The seed of decode-4096 (and of layer 0 of every layered profile). */
#define PB_WL_DECODE4096_SEED 7u
/* FNV-1a 32 of every decode-4096 weight, in step order. */
#define PB_WL_DECODE4096_HASH 3136039440u
/* Attention sinks: positions 0 .. 3. */
#define PB_WL_SINKS 4u
/* Most heavy hitters a shape may draw. */
#define PB_WL_MAX_HEAVY 256u

/* The mixture of one layer. Each step is the sum of four components whose
 * masses are given here (they need not add to exactly one: the step is
 * normalised by its float64 total). */
typedef struct pb_wl_shape {
    double sink_mass;      /* on positions 0 .. 3, split 0.4/0.3/0.2/0.1 */
    double local_mass;     /* on the newest local_width positions */
    double heavy_mass;     /* on heavy_count drawn positions, from
                              heavy_start on; before, it goes to local */
    double noise_mass;     /* spread evenly over every position */
    uint32_t local_width;  /* offsets d = 1 .. local_width, weight
                              proportional to local_width + 1 - d; >= 1 */
    uint32_t heavy_count;  /* distinct heavy hitters, 1 .. PB_WL_MAX_HEAVY;
                              the k-th drawn weighs proportional to 1/k */
    uint32_t heavy_start;  /* first draw step; redrawn at every multiple
                              of heavy_period above it. Must be at least
                              local_width + 4 + heavy_count */
    uint32_t heavy_period; /* >= 1 */
    uint32_t seed;         /* seeds the xoshiro128** heavy draws */
} pb_wl_shape;

/* The registry's decode-4096 shape: sink 0.15, local 0.55 (width 64),
 * heavy 0.25 (32 hitters, first drawn at t = 128, redrawn every 512),
 * noise 0.05, seed 7. */
void pb_wl_shape_decode4096(pb_wl_shape *shape);

/* 0 if the shape can generate `positions` positions (2 .. 2^24), -1
 * otherwise. */
int pb_wl_shape_check(const pb_wl_shape *shape, uint32_t positions);

typedef struct pb_wl_trace {
    pb_wl_shape shape;
    uint32_t positions;
    uint32_t t;                 /* the last step generated; 0 before any */
    pb_wl_rng rng;
    uint32_t heavy_n;           /* heavy hitters drawn; 0 before the first */
    uint32_t heavy_pos[PB_WL_MAX_HEAVY];
    double heavy_weight[PB_WL_MAX_HEAVY];
    double *v;                  /* [positions] the float64 step */
} pb_wl_trace;

/* Prepares a trace of `positions` positions (steps 1 .. positions-1).
 * Returns 0, or -1 if the shape is refused or memory runs out (then
 * nothing is left allocated). */
int pb_wl_trace_init(pb_wl_trace *tr, const pb_wl_shape *shape,
                     uint32_t positions);

/* Frees the buffer; accepts a zeroed or freed trace. */
void pb_wl_trace_free(pb_wl_trace *tr);

/* Back to before step 1 (same shape and seed). */
void pb_wl_trace_rewind(pb_wl_trace *tr);

/* Generates the next step t and writes its t weights to out[0 .. t-1]
 * (out must hold positions - 1 floats). Returns t, or 0 when every step
 * has been generated (out is then untouched). */
uint32_t pb_wl_trace_next(pb_wl_trace *tr, float *out);

/* FNV-1a 32 continued from `hash` (start with PB_WL_FNV_OFFSET) over the
 * float32 bits of w[0 .. n-1], four bytes little-endian each. */
#define PB_WL_FNV_OFFSET 0x811C9DC5u
uint32_t pb_wl_fnv1a_floats(uint32_t hash, const float *w, size_t n);

#endif /* PB_WORKLOAD_TRACE_DECODE_H */
