/*
 * trace_synth.h - synthetic attention traces with a known layer profile,
 * written in the trace file format (trace_io.h): `pyramidkv trace --make`.
 * A funnel trace spreads the attention of shallow layers over many keys
 * and concentrates deep layers on few (the PyramidKV observation), an
 * inverted trace does the opposite, a flat trace has one shape everywhere.
 * The construction is in docs/trace_format.md, "Synthetic traces".
 */
#ifndef PB_TRACE_SYNTH_H
#define PB_TRACE_SYNTH_H

#include <stddef.h>
#include <stdint.h>

typedef enum pb_trs_kind {
    PB_TRS_FUNNEL = 0,
    PB_TRS_INVERTED = 1,
    PB_TRS_FLAT = 2
} pb_trs_kind;

typedef struct pb_trs_params {
    pb_trs_kind kind;
    uint32_t layers;    /* 1 .. 4096 */
    uint32_t kv_heads;  /* 1 .. 64 */
    uint32_t group;     /* query heads per KV head written, 1 .. 64;
                           0: one record per KV head, the group reduced */
    uint32_t prompt;    /* prompt positions, >= window + 1 */
    uint32_t window;    /* observation-window rows of the prefill record */
    uint32_t decode;    /* decode rows after the prompt */
    uint32_t dtype;     /* PB_TR_F32 or PB_TR_F16 */
    uint32_t seed;
} pb_trs_params;

/* Parses "funnel", "inverted" or "flat". Returns 0 or -1. */
int pb_trs_kind_parse(const char *name, pb_trs_kind *out);

/* The sharpness exponent of layer l (documented in docs/trace_format.md). */
uint32_t pb_trs_gamma(pb_trs_kind kind, uint32_t layer, uint32_t layers);

/* Writes the trace to path. Returns 0, or -1 with a message. */
int pb_trs_write(const char *path, const pb_trs_params *p, char *err,
                 size_t err_len);

#endif /* PB_TRACE_SYNTH_H */
