/*
 * trace_decode.c - builds each step of a trace in float64 exactly as
 * docs/traces.md specifies (components added per position in the order
 * sink, local, heavy, noise; total summed in ascending position order;
 * every value divided by the total and rounded to float32). No
 * transcendental function is used, so the weights are the same on every
 * IEEE-754 platform.
 */
#include "trace_decode.h"

#include <stdlib.h>
#include <string.h>

/* How the sink mass is split over positions 0 .. 3. */
static const double sink_split[PB_WL_SINKS] = {0.4, 0.3, 0.2, 0.1};

void pb_wl_shape_decode4096(pb_wl_shape *shape) {
    shape->sink_mass = 0.15;
    shape->local_mass = 0.55;
    shape->heavy_mass = 0.25;
    shape->noise_mass = 0.05;
    shape->local_width = 64u;
    shape->heavy_count = 32u;
    shape->heavy_start = 128u;
    shape->heavy_period = 512u;
    shape->seed = PB_WL_DECODE4096_SEED;
}

int pb_wl_shape_check(const pb_wl_shape *s, uint32_t positions) {
    if (positions < 2u || positions > (1u << 24)) return -1;
    if (!(s->sink_mass >= 0.0) || !(s->local_mass >= 0.0) ||
        !(s->heavy_mass >= 0.0) || !(s->noise_mass > 0.0))
        return -1;
    if (s->local_width == 0u || s->local_width >= positions) return -1;
    if (s->heavy_count == 0u || s->heavy_count > PB_WL_MAX_HEAVY) return -1;
    if (s->heavy_period == 0u) return -1;
    /* The draw range [4, t - width - 1] must hold heavy_count positions. */
    if ((uint64_t)s->heavy_start <
        (uint64_t)s->local_width + PB_WL_SINKS + s->heavy_count)
        return -1;
    return 0;
}

int pb_wl_trace_init(pb_wl_trace *tr, const pb_wl_shape *shape,
                     uint32_t positions) {
    memset(tr, 0, sizeof *tr);
    if (pb_wl_shape_check(shape, positions) != 0) return -1;
    tr->v = malloc((size_t)positions * sizeof *tr->v);
    if (tr->v == NULL) return -1;
    tr->shape = *shape;
    tr->positions = positions;
    pb_wl_trace_rewind(tr);
    return 0;
}

void pb_wl_trace_free(pb_wl_trace *tr) {
    free(tr->v);
    tr->v = NULL;
}

void pb_wl_trace_rewind(pb_wl_trace *tr) {
    tr->t = 0;
    tr->heavy_n = 0;
    pb_wl_rng_seed(&tr->rng, tr->shape.seed);
}

/* Draws heavy_count distinct positions in [4, t - width - 1], keeping the
 * order of first appearance, and gives the k-th weight mass * (1/k) / H
 * with H = sum of 1/k in ascending k. */
static void draw_heavy(pb_wl_trace *tr, uint32_t t) {
    const pb_wl_shape *s = &tr->shape;
    const uint32_t bound = t - s->local_width - PB_WL_SINKS;
    uint32_t n = 0;
    while (n < s->heavy_count) {
        const uint32_t p = pb_wl_rng_next_int(&tr->rng, bound) + PB_WL_SINKS;
        int dup = 0;
        for (uint32_t j = 0; j < n; ++j)
            if (tr->heavy_pos[j] == p) {
                dup = 1;
                break;
            }
        if (!dup) tr->heavy_pos[n++] = p;
    }
    double harmonic = 0.0;
    for (uint32_t k = 1; k <= n; ++k) harmonic += 1.0 / (double)k;
    for (uint32_t k = 1; k <= n; ++k)
        tr->heavy_weight[k - 1] = s->heavy_mass * (1.0 / (double)k) / harmonic;
    tr->heavy_n = n;
}

static int is_draw_step(const pb_wl_shape *s, uint32_t t) {
    return t == s->heavy_start ||
           (t > s->heavy_start && t % s->heavy_period == 0u);
}

uint32_t pb_wl_trace_next(pb_wl_trace *tr, float *out) {
    if (tr->t + 1u >= tr->positions) return 0;
    const uint32_t t = ++tr->t;
    const pb_wl_shape *s = &tr->shape;
    double *v = tr->v;
    memset(v, 0, (size_t)t * sizeof *v);

    /* Sinks: scaled so the existing ones still carry sink_mass. */
    const uint32_t n_sinks = t < PB_WL_SINKS ? t : PB_WL_SINKS;
    double split_sum = 0.0;
    for (uint32_t i = 0; i < n_sinks; ++i) split_sum += sink_split[i];
    for (uint32_t i = 0; i < n_sinks; ++i)
        v[i] += s->sink_mass * sink_split[i] / split_sum;

    /* Local band; it also carries the heavy mass until hitters exist. */
    const int heavy_on = t >= s->heavy_start;
    const double local_mass =
        heavy_on ? s->local_mass : s->local_mass + s->heavy_mass;
    const uint32_t n_local = t < s->local_width ? t : s->local_width;
    /* sum over d = 1 .. n of (width + 1 - d), exact in double. */
    const double local_sum =
        (double)((uint64_t)n_local * (2u * (uint64_t)s->local_width + 1u -
                                      (uint64_t)n_local) /
                 2u);
    for (uint32_t d = 1; d <= n_local; ++d)
        v[t - d] += local_mass * (double)(s->local_width + 1u - d) / local_sum;

    if (is_draw_step(s, t)) draw_heavy(tr, t);
    if (heavy_on)
        for (uint32_t k = 0; k < tr->heavy_n; ++k)
            v[tr->heavy_pos[k]] += tr->heavy_weight[k];

    const double noise = s->noise_mass / (double)t;
    double total = 0.0;
    for (uint32_t i = 0; i < t; ++i) {
        v[i] += noise;
        total += v[i];
    }
    for (uint32_t i = 0; i < t; ++i) out[i] = (float)(v[i] / total);
    return t;
}

uint32_t pb_wl_fnv1a_floats(uint32_t hash, const float *w, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        uint32_t bits;
        memcpy(&bits, &w[i], sizeof bits);
        for (unsigned b = 0; b < 4u; ++b) {
            hash ^= (bits >> (8u * b)) & 0xFFu;
            hash *= 0x01000193u;
        }
    }
    return hash;
}
