/*
 * profile.c - the attention profile accumulator (pyramidkv_profile.h):
 * per-layer sums of row entropy and of the mass curve, the queries on them,
 * and the two derivations a schedule takes from a profile (the `profile`
 * weights and the best-fitting arithmetic ratio).
 *
 * Layout: one block from the allocator, five parts each starting on a
 * 64-byte line: the record itself, rows[L] (uint64), entropy[L] (double),
 * mass[L x M] (double; mass[l*M + k-1] sums m(k) over the rows of layer l
 * longer than k), count[L x M] (uint64; count[l*M + n-1] counts the rows of
 * length n) and the sorting row scratch[M] (float). The mean curve at k is
 * (mass[k] + the rows of length <= k) / rows: a row no longer than k holds
 * all its mass, exactly 1, without touching max_len - len sums per row.
 *
 * It owns nothing of the policy engine and does no I/O. libm is used for
 * log2 (entropy) and exp2 (support) only; the derivations read the mass
 * curve, quantised, and never those.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "allocator.h"
#include "struct_growth.h"
#include "weight_check.h"
#include "pyramidkv/pyramidkv.h"

#define PROFILE_ALIGN ((uint64_t)64)
#define PPM 1000000u

struct pb_profile {
    pb_allocator alloc;
    size_t bytes;
    uint32_t num_layers;
    uint32_t max_len;
    uint64_t *rows;
    double *entropy;
    double *mass;
    uint64_t *count;
    float *scratch;
};

static uint64_t round_up(uint64_t n) {
    return (n + PROFILE_ALIGN - 1u) / PROFILE_ALIGN * PROFILE_ALIGN;
}

/* The params with defaults filled, or PB_ERR_PARAM. */
static pb_status resolve(const pb_profile_params *in, pb_profile_params *out) {
    const pb_profile_params def = PB_PROFILE_PARAMS_DEFAULT;
    *out = def;
    if (in == NULL) return PB_OK;
    if (pb__struct_read(in, PB__PROFILE_PARAMS_SIZE_0_2, sizeof *out, out) !=
        PB_OK)
        return PB_ERR_PARAM;
    if (out->num_layers == 0u || out->num_layers > PB_PROFILE_MAX_LAYERS)
        return PB_ERR_PARAM;
    if (out->max_len == 0u || out->max_len > PB_PROFILE_MAX_LEN)
        return PB_ERR_PARAM;
    return PB_OK;
}

/* Byte offsets of the parts; returns the total (fits in 64 bits for every
 * accepted param: below 2^45). */
typedef struct layout {
    uint64_t rows, entropy, mass, count, scratch, total;
} layout;

static layout layout_of(const pb_profile_params *p) {
    const uint64_t l = p->num_layers, m = p->max_len;
    layout o;
    o.rows = round_up(sizeof(pb_profile));
    o.entropy = o.rows + round_up(8u * l);
    o.mass = o.entropy + round_up(8u * l);
    o.count = o.mass + round_up(8u * l * m);
    o.scratch = o.count + round_up(8u * l * m);
    o.total = o.scratch + round_up(4u * m);
    return o;
}

PB_API pb_status pb_profile_size(const pb_profile_params *params,
                                 size_t *bytes) {
    if (bytes == NULL) return PB_ERR_NULL;
    pb_profile_params p;
    if (resolve(params, &p) != PB_OK) return PB_ERR_PARAM;
    const layout o = layout_of(&p);
    if (o.total > (uint64_t)SIZE_MAX) return PB_ERR_TOO_LARGE;
    *bytes = (size_t)o.total;
    return PB_OK;
}

static void clear(pb_profile *p) {
    const size_t l = p->num_layers, m = p->max_len;
    memset(p->rows, 0, 8u * l);
    for (size_t i = 0; i < l; ++i) p->entropy[i] = 0.0;
    for (size_t i = 0; i < l * m; ++i) p->mass[i] = 0.0;
    memset(p->count, 0, 8u * l * m);
}

PB_API pb_status pb_profile_create(const pb_profile_params *params,
                                   const pb_allocator *allocator,
                                   pb_profile **out) {
    if (out == NULL) return PB_ERR_NULL;
    *out = NULL;
    pb_profile_params p;
    if (resolve(params, &p) != PB_OK) return PB_ERR_PARAM;
    pb_allocator a;
    if (!pb__allocator_of(allocator, &a)) return PB_ERR_PARAM;
    const layout o = layout_of(&p);
    if (o.total > (uint64_t)SIZE_MAX) return PB_ERR_TOO_LARGE;
    unsigned char *block = (unsigned char *)a.alloc(a.ctx, (size_t)o.total);
    if (block == NULL) return PB_ERR_NOMEM;
    pb_profile *prof = (pb_profile *)(void *)block;
    prof->alloc = a;
    prof->bytes = (size_t)o.total;
    prof->num_layers = p.num_layers;
    prof->max_len = p.max_len;
    prof->rows = (uint64_t *)(void *)(block + o.rows);
    prof->entropy = (double *)(void *)(block + o.entropy);
    prof->mass = (double *)(void *)(block + o.mass);
    prof->count = (uint64_t *)(void *)(block + o.count);
    prof->scratch = (float *)(void *)(block + o.scratch);
    clear(prof);
    *out = prof;
    return PB_OK;
}

PB_API void pb_profile_destroy(pb_profile *profile) {
    if (profile == NULL) return;
    const pb_allocator a = profile->alloc;
    a.free(a.ctx, profile, profile->bytes);
}

PB_API size_t pb_profile_memory_bytes(const pb_profile *profile) {
    return profile == NULL ? 0u : profile->bytes;
}

PB_API pb_status pb_profile_reset(pb_profile *profile) {
    if (profile == NULL) return PB_ERR_NULL;
    clear(profile);
    return PB_OK;
}

/* ------------------------------------------------------------------------ */
/* Adding a row                                                             */

/* Sorts v[0 .. n-1] into descending order: heapsort over a min-heap, in
 * place. Only values are sorted, so the result is the same whatever the
 * algorithm. */
static void sift_down(float *v, size_t root, size_t n) {
    for (;;) {
        size_t child = 2u * root + 1u;
        if (child >= n) return;
        if (child + 1u < n && v[child + 1u] < v[child]) child += 1u;
        if (!(v[child] < v[root])) return;
        const float t = v[root];
        v[root] = v[child];
        v[child] = t;
        root = child;
    }
}

static void sort_descending(float *v, size_t n) {
    if (n < 2u) return;
    for (size_t i = n / 2u; i-- > 0u;) sift_down(v, i, n);
    for (size_t end = n - 1u; end > 0u; --end) {
        const float t = v[0];
        v[0] = v[end];
        v[end] = t;
        sift_down(v, 0u, end);
    }
}

PB_API pb_status pb_profile_add_row(pb_profile *profile, uint32_t layer,
                                    const float *row, size_t len) {
    if (profile == NULL || row == NULL) return PB_ERR_NULL;
    if (layer >= profile->num_layers || len == 0u) return PB_ERR_PARAM;
    if (len > profile->max_len) return PB_ERR_LENGTH;
    double sum = 0.0;
    int ok = 1;
    for (size_t i = 0; i < len; ++i) {
        const float w = row[i];
        ok &= !pb__weight_bad(w);
        if (ok) sum += (double)w;
    }
    if (!ok || !(sum > 0.0)) return PB_ERR_WEIGHT;

    /* Entropy of the normalised row, ascending index order. */
    double h = 0.0;
    for (size_t i = 0; i < len; ++i) {
        if (row[i] > 0.0f) {
            const double pi = (double)row[i] / sum;
            h -= pi * log2(pi);
        }
    }

    /* m(k) for k < len: prefix sums of the descending values over S. */
    const size_t m = profile->max_len;
    double *mass = profile->mass + (size_t)layer * m;
    float *v = profile->scratch;
    memcpy(v, row, len * sizeof *v);
    sort_descending(v, len);
    double c = 0.0;
    for (size_t k = 1; k < len; ++k) {
        c += (double)v[k - 1u];
        mass[k - 1u] += c / sum;
    }
    profile->count[(size_t)layer * m + (len - 1u)] += 1u;
    profile->entropy[layer] += h;
    profile->rows[layer] += 1u;
    return PB_OK;
}

/* ------------------------------------------------------------------------ */
/* Queries                                                                  */

PB_API pb_status pb_profile_layer_rows(const pb_profile *profile,
                                       uint32_t layer, uint64_t *rows) {
    if (profile == NULL || rows == NULL) return PB_ERR_NULL;
    if (layer >= profile->num_layers) return PB_ERR_PARAM;
    *rows = profile->rows[layer];
    return PB_OK;
}

PB_API pb_status pb_profile_entropy(const pb_profile *profile, uint32_t layer,
                                    double *bits, double *support) {
    if (profile == NULL) return PB_ERR_NULL;
    if (layer >= profile->num_layers || profile->rows[layer] == 0u)
        return PB_ERR_PARAM;
    const double h = profile->entropy[layer] / (double)profile->rows[layer];
    if (bits != NULL) *bits = h;
    if (support != NULL) *support = exp2(h);
    return PB_OK;
}

/* Walks the mean curve of one layer k = 1, 2, ...: the rows of length
 * <= k accumulate as k grows. */
typedef struct curve_walk {
    const double *mass;
    const uint64_t *count;
    double rows;
    uint64_t short_rows; /* rows of length <= k */
    uint32_t k;
} curve_walk;

static curve_walk curve_start(const pb_profile *p, uint32_t layer) {
    curve_walk w;
    w.mass = p->mass + (size_t)layer * p->max_len;
    w.count = p->count + (size_t)layer * p->max_len;
    w.rows = (double)p->rows[layer];
    w.short_rows = 0u;
    w.k = 0u;
    return w;
}

/* Advances to k + 1 and returns the mean mass there. */
static double curve_next(curve_walk *w) {
    w->k += 1u;
    w->short_rows += w->count[w->k - 1u];
    return (w->mass[w->k - 1u] + (double)w->short_rows) / w->rows;
}

PB_API pb_status pb_profile_mass(const pb_profile *profile, uint32_t layer,
                                 uint32_t k, double *mass) {
    if (profile == NULL || mass == NULL) return PB_ERR_NULL;
    if (layer >= profile->num_layers || profile->rows[layer] == 0u ||
        k == 0u || k > profile->max_len)
        return PB_ERR_PARAM;
    curve_walk w = curve_start(profile, layer);
    double v = 0.0;
    while (w.k < k) v = curve_next(&w);
    *mass = v;
    return PB_OK;
}

PB_API pb_status pb_profile_mass_curve(const pb_profile *profile,
                                       uint32_t layer, double *out, size_t n) {
    if (profile == NULL || out == NULL) return PB_ERR_NULL;
    if (layer >= profile->num_layers || profile->rows[layer] == 0u ||
        n == 0u || n > profile->max_len)
        return PB_ERR_PARAM;
    curve_walk w = curve_start(profile, layer);
    for (size_t i = 0; i < n; ++i) out[i] = curve_next(&w);
    return PB_OK;
}

/* floor(x * 10^6 + 0.5) for x in [0, 1 + a little]. */
static uint32_t quantise_ppm(double x) {
    const double q = floor(x * (double)PPM + 0.5);
    if (!(q > 0.0)) return 0u;
    if (q >= (double)UINT32_MAX) return UINT32_MAX;
    return (uint32_t)q;
}

static uint32_t mass_k(const pb_profile *p, uint32_t layer, uint32_t ppm) {
    curve_walk w = curve_start(p, layer);
    while (w.k < p->max_len) {
        if (quantise_ppm(curve_next(&w)) >= ppm) return w.k;
    }
    return p->max_len; /* unreachable: the curve is 1 at max_len */
}

PB_API pb_status pb_profile_mass_k(const pb_profile *profile, uint32_t layer,
                                   uint32_t fraction_ppm, uint32_t *k) {
    if (profile == NULL || k == NULL) return PB_ERR_NULL;
    if (layer >= profile->num_layers || profile->rows[layer] == 0u ||
        fraction_ppm == 0u || fraction_ppm > PPM)
        return PB_ERR_PARAM;
    *k = mass_k(profile, layer, fraction_ppm);
    return PB_OK;
}

PB_API pb_status pb_profile_weights(const pb_profile *profile,
                                    uint32_t fraction_ppm, uint32_t floor_weight,
                                    uint32_t *weights, size_t weights_len) {
    if (profile == NULL || weights == NULL) return PB_ERR_NULL;
    if (fraction_ppm == 0u || fraction_ppm > PPM || floor_weight == 0u)
        return PB_ERR_PARAM;
    const uint32_t n = profile->num_layers;
    int any = 0;
    for (uint32_t l = 0; l < n; ++l) any |= profile->rows[l] != 0u;
    if (!any) return PB_ERR_PARAM;
    if (weights_len < n) return PB_ERR_BUFFER;
    /* First the layers with rows; 0 marks the others (k >= 1 always). */
    for (uint32_t l = 0; l < n; ++l)
        weights[l] = profile->rows[l] != 0u ? mass_k(profile, l, fraction_ppm)
                                            : 0u;
    /* A layer without rows takes the nearest measured layer's k, the lower
     * layer on a tie: scan outwards, below first. */
    for (uint32_t l = 0; l < n; ++l) {
        if (profile->rows[l] != 0u) continue;
        for (uint32_t d = 1; d < n; ++d) {
            if (d <= l && profile->rows[l - d] != 0u) {
                weights[l] = weights[l - d];
                break;
            }
            if (l + d < n && profile->rows[l + d] != 0u) {
                weights[l] = weights[l + d];
                break;
            }
        }
    }
    for (uint32_t l = 0; l < n; ++l)
        if (weights[l] < floor_weight) weights[l] = floor_weight;
    return PB_OK;
}

/* ------------------------------------------------------------------------ */
/* Best-fitting arithmetic ratio                                            */

#define FIT_SCALE ((uint64_t)1 << 24)
#define FIT_BUDGET ((uint64_t)1 << 20)

/* pb_kvcache_pyramid_budget(2^20, l, n, r), by its formula: with n <=
 * 2^16 and r <= 2^12 the numerator is below 2^49, so plain 64-bit
 * arithmetic is exact (the library function handles every uint32 input
 * with 128-bit steps, much slower). */
static uint64_t fit_share(uint64_t l, uint64_t n, uint64_t r) {
    if (n == 1u) return FIT_BUDGET;
    return 2u * FIT_BUDGET * (r * (n - 1u) - l * (r - 1u)) /
           ((r + 1u) * (n - 1u));
}

PB_API pb_status pb_profile_fit_ratio(const uint32_t *weights, size_t n,
                                      uint32_t max_ratio, uint32_t *ratio,
                                      uint64_t *distance) {
    if (weights == NULL || ratio == NULL) return PB_ERR_NULL;
    if (n == 0u || n > PB_PROFILE_MAX_LAYERS || max_ratio == 0u ||
        max_ratio > PB_PROFILE_MAX_FIT_RATIO)
        return PB_ERR_PARAM;
    uint64_t wsum = 0u; /* < 2^48 */
    for (size_t l = 0; l < n; ++l) wsum += weights[l];
    if (wsum == 0u) return PB_ERR_PARAM;
    const uint32_t layers = (uint32_t)n;
    uint32_t best_r = 1u;
    uint64_t best_d = UINT64_MAX;
    for (uint32_t r = 1; r <= max_ratio; ++r) {
        uint64_t asum = 0u; /* pb_kvcache_pyramid_total(2^20, n, r) */
        for (uint32_t l = 0; l < layers; ++l) asum += fit_share(l, layers, r);
        uint64_t d = 0u;
        for (uint32_t l = 0; l < layers; ++l) {
            /* w < 2^32 and a < 2^21, each times 2^24: below 2^56. */
            const uint64_t t = (uint64_t)weights[l] * FIT_SCALE / wsum;
            const uint64_t s = fit_share(l, layers, r) * FIT_SCALE / asum;
            d += t > s ? t - s : s - t;
        }
        if (d < best_d) {
            best_d = d;
            best_r = r;
        }
    }
    *ratio = best_r;
    if (distance != NULL) *distance = best_d;
    return PB_OK;
}
