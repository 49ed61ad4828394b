/*
 * trace_layered.c - the shape functions of the layered workload (see
 * trace_layered.h and docs/traces.md). Each layer interpolates linearly
 * between decode-4096's mixture and one of two anchors chosen once from
 * PyramidKV's description of pyramidal information funnelling: a broad
 * anchor (attention scattered widely: little sink mass, many heavy hitters,
 * much noise, a wide local band) and a concentrated anchor (attention massed
 * on a few tokens: much sink mass, few heavy hitters, little noise, a narrow
 * local band). Integer parameters are interpolated with exact integer
 * floors; masses in float64.
 */
#include "trace_layered.h"

#include <string.h>

typedef struct anchor {
    double sink, local, heavy, noise;
    uint32_t width, count;
} anchor;

/* decode-4096 itself, the middle of the scale. */
static const anchor mid = {0.15, 0.55, 0.25, 0.05, 64u, 32u};
/* Upper layers in the paper: attention massed on sinks and a few tokens. */
static const anchor concentrated = {0.45, 0.39, 0.15, 0.01, 16u, 8u};
/* Lower layers in the paper: attention scattered across the context. */
static const anchor broad = {0.05, 0.35, 0.35, 0.25, 256u, 128u};

static const char *const names[PB_WL_PROFILE_COUNT] = {
    "decode-4096", "funnel", "flat", "inverted"};

const char *pb_wl_profile_name(pb_wl_profile profile) {
    if ((unsigned)profile >= PB_WL_PROFILE_COUNT) return NULL;
    return names[profile];
}

int pb_wl_profile_parse(const char *name, pb_wl_profile *out) {
    for (unsigned i = 0; i < PB_WL_PROFILE_COUNT; ++i)
        if (strcmp(name, names[i]) == 0) {
            *out = (pb_wl_profile)i;
            return 0;
        }
    return -1;
}

uint32_t pb_wl_layer_seed(uint32_t layer) {
    return PB_WL_DECODE4096_SEED + 0x85EBCA6Bu * layer;
}

void pb_wl_layer_concentration(pb_wl_profile profile, uint32_t layer,
                               uint32_t layers, int64_t *num, int64_t *den) {
    *den = layers > 1u ? (int64_t)layers - 1 : 1;
    switch (profile) {
    case PB_WL_FUNNEL: *num = (int64_t)layer; break;
    case PB_WL_INVERTED: *num = -(int64_t)layer; break;
    default: *num = 0; break;
    }
}

/* a + floor((b - a) * num / den) for 0 <= num <= den, in exact integers;
 * b - a may be negative, in which case the floor is toward minus
 * infinity. */
static uint32_t lerp_u32(uint32_t a, uint32_t b, int64_t num, int64_t den) {
    const int64_t delta = ((int64_t)b - (int64_t)a) * num;
    int64_t q = delta / den;
    if (delta % den != 0 && delta < 0) q -= 1;
    return (uint32_t)((int64_t)a + q);
}

/* a * (1 - f) + b * f with f = num / den in float64: exactly a at f = 0
 * and exactly b at f = 1. */
static double lerp_f64(double a, double b, int64_t num, int64_t den) {
    const double f = (double)num / (double)den;
    return a * (1.0 - f) + b * f;
}

int pb_wl_layer_shape(pb_wl_profile profile, uint32_t layer, uint32_t layers,
                      pb_wl_shape *out) {
    if ((unsigned)profile >= PB_WL_PROFILE_COUNT || layer >= layers ||
        layers > PB_WL_MAX_LAYERS)
        return -1;
    pb_wl_shape_decode4096(out);
    if (profile == PB_WL_DECODE4096) return 0;
    out->seed = pb_wl_layer_seed(layer);

    int64_t num, den;
    pb_wl_layer_concentration(profile, layer, layers, &num, &den);
    if (num == 0) return 0; /* exactly decode-4096's mixture */
    const anchor *end = num > 0 ? &concentrated : &broad;
    const int64_t f = num > 0 ? num : -num;
    out->sink_mass = lerp_f64(mid.sink, end->sink, f, den);
    out->local_mass = lerp_f64(mid.local, end->local, f, den);
    out->heavy_mass = lerp_f64(mid.heavy, end->heavy, f, den);
    out->noise_mass = lerp_f64(mid.noise, end->noise, f, den);
    out->local_width = lerp_u32(mid.width, end->width, f, den);
    out->heavy_count = lerp_u32(mid.count, end->count, f, den);
    /* Hitters are first drawn at t = 128, or later if the draw range
     * [4, t - width - 1] would hold fewer than heavy_count positions. */
    const uint32_t need = out->local_width + PB_WL_SINKS + out->heavy_count;
    out->heavy_start = need > 128u ? need : 128u;
    return 0;
}
