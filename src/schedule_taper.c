/*
 * schedule_taper.c - the taper schedule (docs/spec.md §12.7, VeloxQuant-MLX
 * `pyramid_budgets`): a water-filling in double arithmetic, followed
 * operation for operation as its reference computes it, then rounded half
 * to even. Its fields are checked by schedule.c before it runs.
 */
#include <stdint.h>

#include "pyramidkv/pyramidkv.h"
#include "schedule_internal.h"

#if defined(__clang__)
/* Taper must round each operation on its own, as its reference does (gcc:
 * -ffp-contract=off, src/CMakeLists.txt). */
#pragma STDC FP_CONTRACT OFF
#endif

#define TAPER_MAX_PASSES 256

/* The per-pass scalars of taper's water-filling. */
typedef struct taper_pass {
    double excess, slack;
} taper_pass;

typedef struct taper {
    uint32_t layers;
    double floor_v, hi, lo, target;
} taper;

static double taper_start(const taper *t, uint32_t i) {
    return t->hi + (t->lo - t->hi) * ((double)i / (double)(t->layers - 1u));
}

/* Layer i's value after `adjusted` passes that adjusted (clamping at the
 * start of each), then one more clamp if clamp_after; *marked tells
 * whether it was clamped. */
static double taper_replay(const taper *t, const taper_pass *passes,
                           uint32_t adjusted, int clamp_after, uint32_t i,
                           int *marked) {
    double v = taper_start(t, i);
    int m = 0;
    for (uint32_t j = 0; j < adjusted; ++j) {
        if (v < t->floor_v) {
            v = t->floor_v;
            m = 1;
        }
        if (!m) v -= passes[j].excess * (v - t->floor_v) / passes[j].slack;
    }
    if (clamp_after && v < t->floor_v) {
        v = t->floor_v;
        m = 1;
    }
    *marked = m;
    return v;
}

/* Python's round() to an integer (half to even) of a finite v > 0 that is
 * below 2^63, without libm: below 2^52 the fraction v - trunc(v) is exact. */
static uint64_t round_half_even(double v) {
    if (v >= 4503599627370496.0) return (uint64_t)v; /* 2^52: integral */
    uint64_t t = (uint64_t)v;
    const double frac = v - (double)t;
    if (frac > 0.5 || (frac == 0.5 && (t & 1u) != 0u)) ++t;
    return t;
}

pb_status pb__taper_shares(const pb_schedule *s, uint32_t *shares,
                              uint64_t *total) {
    const uint32_t n = s->num_layers;
    const uint64_t f = (uint64_t)s->sinks + 1u;
    if (n == 1u) {
        shares[0] = (uint32_t)(s->budget > f ? s->budget : f);
        *total = shares[0];
        return PB_OK;
    }
    taper t;
    t.layers = n;
    t.floor_v = (double)f;
    const double span =
        (double)((int64_t)s->budget - (int64_t)f) * (s->taper_beta - 1.0);
    t.hi = (double)s->budget + span;
    t.lo = (double)s->budget - span;
    t.target = (double)((uint64_t)s->budget * n);
    if (!pb__finite(t.hi) || !pb__finite(t.lo) || !pb__finite(t.lo - t.hi))
        return PB_ERR_TOO_LARGE;
    /* Passes only lower a value or raise it to the floor, so the largest
     * start decides whether every result fits. */
    double top = t.floor_v;
    for (uint32_t i = 0; i < n; ++i) {
        const double v = taper_start(&t, i);
        if (v > top) top = v;
    }
    if (top >= 4294967296.0 || round_half_even(top) > UINT32_MAX)
        return PB_ERR_TOO_LARGE;

    taper_pass passes[TAPER_MAX_PASSES];
    uint32_t adjusted = 0;
    int clamp_after = 0;
    for (uint32_t pass = 0; pass < n; ++pass) {
        double sum = 0.0, slack = 0.0;
        uint32_t free_n = 0;
        for (uint32_t i = 0; i < n; ++i) {
            int m;
            sum += taper_replay(&t, passes, adjusted, 1, i, &m);
        }
        const double excess = sum - t.target;
        if (excess <= 1e-9) {
            clamp_after = 1;
            break;
        }
        for (uint32_t i = 0; i < n; ++i) {
            int m;
            const double v = taper_replay(&t, passes, adjusted, 1, i, &m);
            if (!m) {
                slack += v - t.floor_v;
                ++free_n;
            }
        }
        if (free_n == 0u || slack <= 1e-9) {
            clamp_after = 1;
            break;
        }
        if (adjusted == TAPER_MAX_PASSES) return PB_ERR_TOO_LARGE;
        passes[adjusted].excess = excess;
        passes[adjusted].slack = slack;
        ++adjusted;
    }
    uint64_t sum = 0;
    for (uint32_t i = 0; i < n; ++i) {
        int m;
        const double v = taper_replay(&t, passes, adjusted, clamp_after, i, &m);
        const uint64_t r = v > t.floor_v ? round_half_even(v) : f;
        shares[i] = (uint32_t)(r > f ? r : f);
        sum += shares[i];
    }
    *total = sum;
    return PB_OK;
}

