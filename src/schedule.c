/*
 * schedule.c - the allocation family: pb_kvcache_schedule_shares and the
 * kind names. Every schedule of docs/spec.md §12 is computed here
 * into the caller's array with its exact total: integer arithmetic for all
 * but taper, whose reference is double arithmetic and is followed operation
 * for operation. No allocation, no libm, no state.
 *
 * Apportioned kinds (kvfactory-balanced, curve, geometric, profile, cake) give
 * every layer the floor of its exact rational share and hand the remaining
 * units to the largest remainders (ties: the lower layer); the selection
 * runs without scratch memory by a binary search on the remainder value.
 * The fixed-point powers are in schedule_fixed.c, taper in schedule_taper.c.
 */
#include <string.h>

#include "pyramidkv/pyramidkv.h"
#include "schedule_internal.h"
#include "struct_growth.h"

/* ------------------------------------------------------------------------ */
/* Apportionment                                                            */

enum source_kind { SRC_WEIGHTS, SRC_CURVE, SRC_GEOMETRIC, SRC_BALANCED };

/* Where the exact rational shares come from. Weighted sources give
 * raw_l = units * w_l / wsum; the balanced source gives
 * raw_l = mx - l * d / den. */
typedef struct source {
    int kind;
    uint32_t layers;
    uint32_t base;   /* added to every share */
    uint64_t units;  /* the sum of the raw shares, an integer */
    /* weighted */
    const uint32_t *w; /* SRC_WEIGHTS */
    uint64_t wsum;
    /* curve, geometric */
    uint64_t c[32];
    uint64_t log2_top; /* curve: log2(L-1); geometric: log2(r) */
    uint32_t ratio, gamma_milli;
    /* balanced */
    uint64_t mx, d, den;
} source;

static uint32_t weight_curve(const source *s, uint32_t l) {
    const uint32_t a = s->layers - 1u - l;
    uint32_t x = 0u;
    if (a != 0u) {
        /* (a / (L-1))^gamma = 2^-y, y = gamma * (log2(L-1) - log2(a)). */
        const uint64_t diff = s->log2_top - pb__log2_q32(a); /* < 2^37 */
        const uint64_t y = diff * s->gamma_milli / 1000u; /* < 2^57 */
        x = pb__exp2_neg_q31(y, s->c);
    }
    /* (C_min + (C_max - C_min) x) with C_max = 1, C_min = 1/r, in Q31. */
    const uint64_t num =
        (UINT64_C(1) << 31) + (uint64_t)(s->ratio - 1u) * x; /* < 2^63 */
    return (uint32_t)(num / s->ratio);
}

static uint32_t weight_geometric(const source *s, uint32_t l) {
    /* r^(-l/(L-1)) = 2^-y, y = floor(log2(r) * l / (L-1)). */
    uint64_t hi, lo, rem;
    pb__mul64(s->log2_top, l, &hi, &lo);
    const uint64_t y = pb__div128(hi, lo, (uint64_t)s->layers - 1u, &rem);
    return pb__exp2_neg_q31(y, s->c);
}

static uint32_t weight_of(const source *s, uint32_t l) {
    switch (s->kind) {
    case SRC_CURVE: return weight_curve(s, l);
    case SRC_GEOMETRIC: return weight_geometric(s, l);
    default: return s->w[l];
    }
}

/* Layer l's raw share as floor *fl and a remainder *rem that orders the
 * fractional parts (larger rem, larger fraction). */
static void part_of(const source *s, uint32_t l, uint64_t *fl, uint64_t *rem) {
    uint64_t hi, lo, r;
    if (s->kind == SRC_BALANCED) {
        pb__mul64(l, s->d, &hi, &lo);
        const uint64_t q = pb__div128(hi, lo, s->den, &r); /* <= d */
        *fl = r == 0u ? s->mx - q : s->mx - q - 1u;
        *rem = r == 0u ? 0u : s->den - r;
        return;
    }
    pb__mul64(s->units, weight_of(s, l), &hi, &lo);
    *fl = pb__div128(hi, lo, s->wsum, &r); /* <= units */
    *rem = r;
}

static uint64_t count_rem_at_least(const source *s, uint64_t t) {
    uint64_t n = 0, fl, rem;
    for (uint32_t l = 0; l < s->layers; ++l) {
        part_of(s, l, &fl, &rem);
        n += rem >= t;
    }
    return n;
}

/* Apportions s->units over the layers. With shares NULL it only checks
 * that every share fits; otherwise writes them (each layer's part is
 * computed before its slot is written, so a weight array may be `shares`
 * itself). Returns PB_OK or PB_ERR_TOO_LARGE. */
static pb_status apportion(const source *s, uint32_t *shares) {
    uint64_t floors = 0, fl, rem;
    for (uint32_t l = 0; l < s->layers; ++l) {
        part_of(s, l, &fl, &rem);
        if (fl + s->base > UINT32_MAX) return PB_ERR_TOO_LARGE;
        floors += fl;
    }
    const uint64_t extra = s->units - floors; /* < layers */
    /* The largest t with at least `extra` remainders >= t. */
    uint64_t t = 0, ties = 0;
    if (extra > 0u) {
        uint64_t lo_t = 0,
                 hi_t = (s->kind == SRC_BALANCED ? s->den : s->wsum) - 1u;
        while (lo_t < hi_t) {
            const uint64_t mid = lo_t + (hi_t - lo_t) / 2u + 1u;
            if (count_rem_at_least(s, mid) >= extra)
                lo_t = mid;
            else
                hi_t = mid - 1u;
        }
        t = lo_t;
        ties = extra - count_rem_at_least(s, t + 1u);
    }
    for (uint32_t l = 0; l < s->layers; ++l) {
        part_of(s, l, &fl, &rem);
        uint64_t v = fl + s->base;
        if (extra > 0u) {
            if (rem > t) {
                ++v;
            } else if (rem == t && ties > 0u) {
                ++v;
                --ties;
            }
        }
        if (shares == NULL) {
            if (v > UINT32_MAX) return PB_ERR_TOO_LARGE;
        } else {
            shares[l] = (uint32_t)v;
        }
    }
    return PB_OK;
}

/* ------------------------------------------------------------------------ */
/* The kinds                                                                */

static void fill(uint32_t *shares, uint32_t n, uint32_t v) {
    for (uint32_t l = 0; l < n; ++l) shares[l] = v;
}

static pb_status arithmetic(const pb_schedule *s, uint32_t *shares,
                            uint64_t *total) {
    /* Layer 0 is the largest: floor(2Br/(r+1)) = 2B - ceil(2B/(r+1)). */
    const uint64_t two_b = 2u * (uint64_t)s->budget, rp1 = (uint64_t)s->ratio + 1u;
    const uint64_t top = s->num_layers == 1u
                             ? s->budget
                             : two_b - (two_b + rp1 - 1u) / rp1;
    if (top > UINT32_MAX) return PB_ERR_TOO_LARGE;
    if (pb_kvcache_pyramid_budgets(s->budget, s->num_layers, s->ratio, shares,
                                   s->num_layers) != PB_OK)
        return PB_ERR_PARAM; /* unreachable: checked by the caller */
    *total = pb_kvcache_pyramid_total(s->budget, s->num_layers, s->ratio);
    return PB_OK;
}

/* kvfactory's endpoints in its third branch: *mx for layer 0, *mn for the
 * last, before the window is added. */
static void kvfactory_ends(const pb_schedule *s, uint64_t *mx, uint64_t *mn) {
    const uint64_t p = (uint64_t)s->budget - s->window;
    uint64_t lo = p / s->beta, hi = 2u * p - lo;
    if (s->prompt_len != 0u && hi >= (uint64_t)s->prompt_len - s->window) {
        hi = (uint64_t)s->prompt_len - s->window;
        lo = 2u * p - hi;
    }
    *mx = hi;
    *mn = lo;
}

/* The two branches before the schedule: every layer the same. Returns 1
 * and sets *v when one applies. */
static int kvfactory_flat(const pb_schedule *s, uint32_t *v) {
    const uint64_t p = (uint64_t)s->budget - s->window;
    if (s->prompt_len != 0u && s->prompt_len < s->budget) {
        *v = s->prompt_len;
        return 1;
    }
    if (s->prompt_len != 0u && s->prompt_len < 2u * p) {
        *v = s->budget;
        return 1;
    }
    if (s->num_layers == 1u) { /* the reference divides by zero here */
        *v = s->budget;
        return 1;
    }
    return 0;
}

/* Both kvfactory kinds where every layer gets the same share: 1 with the
 * shares and their total written, else 0. */
static int kvfactory_fill_flat(const pb_schedule *s, uint32_t *shares,
                               uint64_t *total) {
    uint32_t flat;
    if (!kvfactory_flat(s, &flat)) return 0;
    fill(shares, s->num_layers, flat);
    *total = (uint64_t)flat * s->num_layers;
    return 1;
}

static pb_status kvfactory(const pb_schedule *s, uint32_t *shares,
                           uint64_t *total) {
    if (kvfactory_fill_flat(s, shares, total)) return PB_OK;
    uint64_t mx, mn;
    kvfactory_ends(s, &mx, &mn);
    if (mx + s->window > UINT32_MAX) return PB_ERR_TOO_LARGE;
    const uint64_t steps = (mx - mn) / (s->num_layers - 1u);
    uint64_t sum = 0;
    for (uint32_t l = 0; l < s->num_layers; ++l) {
        const uint64_t v = mx - l * steps + s->window;
        shares[l] = (uint32_t)v;
        sum += v;
    }
    *total = sum;
    return PB_OK;
}

static pb_status kvfactory_balanced(const pb_schedule *s, uint32_t *shares,
                                    uint64_t *total) {
    if (kvfactory_fill_flat(s, shares, total)) return PB_OK;
    source src;
    memset(&src, 0, sizeof src);
    src.kind = SRC_BALANCED;
    src.layers = s->num_layers;
    src.base = s->window;
    kvfactory_ends(s, &src.mx, &src.d);
    src.d = src.mx - src.d;
    src.den = s->num_layers - 1u;
    src.units = ((uint64_t)s->budget - s->window) * s->num_layers;
    const pb_status st = apportion(&src, NULL);
    if (st != PB_OK) return st;
    apportion(&src, shares);
    *total = (uint64_t)s->budget * s->num_layers;
    return PB_OK;
}

/* Curve and geometric: the weights are computed once to sum and check
 * (computed again on the fly in the rare case where layer 0 sits exactly at
 * UINT32_MAX), then once into `shares`, used as scratch only after every
 * check has passed, to apportion from. */
static pb_status powered(const pb_schedule *s, int kind, uint32_t *shares,
                         uint64_t *total) {
    const uint32_t n = s->num_layers;
    *total = (uint64_t)s->budget * n;
    if (n == 1u) {
        shares[0] = s->budget;
        return PB_OK;
    }
    source src;
    memset(&src, 0, sizeof src);
    src.kind = kind;
    src.layers = n;
    src.units = *total;
    src.ratio = s->ratio;
    src.gamma_milli = s->gamma_milli;
    pb__exp2_constants(src.c);
    src.log2_top = kind == SRC_CURVE ? pb__log2_q32(n - 1u)
                                     : pb__log2_q32(s->ratio);
    for (uint32_t l = 0; l < n; ++l) src.wsum += weight_of(&src, l);
    /* Layer 0 has the largest weight (2^31) and the largest share. */
    uint64_t hi, lo, rem;
    pb__mul64(src.units, UINT64_C(1) << 31, &hi, &lo);
    const uint64_t top = pb__div128(hi, lo, src.wsum, &rem);
    if (top > UINT32_MAX) return PB_ERR_TOO_LARGE;
    if (top == UINT32_MAX) { /* fits only if layer 0 gets no extra unit */
        const pb_status st = apportion(&src, NULL);
        if (st != PB_OK) return st;
    }
    for (uint32_t l = 0; l < n; ++l) shares[l] = weight_of(&src, l);
    src.kind = SRC_WEIGHTS;
    src.w = shares;
    return apportion(&src, shares);
}

static pb_status profile(const pb_schedule *s, uint32_t *shares,
                         uint64_t *total) {
    source src;
    memset(&src, 0, sizeof src);
    src.kind = SRC_WEIGHTS;
    src.layers = s->num_layers;
    src.base = s->min_share;
    src.w = s->weights;
    for (uint32_t l = 0; l < s->num_layers; ++l) src.wsum += s->weights[l];
    src.units = ((uint64_t)s->budget - s->min_share) * s->num_layers;
    const pb_status st = apportion(&src, NULL);
    if (st != PB_OK) return st;
    apportion(&src, shares);
    *total = (uint64_t)s->budget * s->num_layers;
    return PB_OK;
}

/* CAKE (docs/spec.md §17.2): the window in every layer and the prefix
 * units apportioned by the preference weights, as profile with the window
 * as its base; a prompt no longer than the budget is kept whole. */
static pb_status cake(const pb_schedule *s, uint32_t *shares,
                      uint64_t *total) {
    if (s->prompt_len != 0u && s->prompt_len <= s->budget) {
        fill(shares, s->num_layers, s->prompt_len);
        *total = (uint64_t)s->prompt_len * s->num_layers;
        return PB_OK;
    }
    pb_schedule p = *s;
    p.min_share = s->window;
    return profile(&p, shares, total);
}

/* ------------------------------------------------------------------------ */
/* Validation and dispatch                                                  */

static const char *const kind_names[] = {
    "arithmetic", "uniform", "kvfactory", "kvfactory-balanced",
    "taper",      "curve",   "geometric", "profile", "cake"};
#define KIND_COUNT (sizeof kind_names / sizeof kind_names[0])

const char *pb_schedule_kind_name(uint32_t kind) {
    return kind < KIND_COUNT ? kind_names[kind] : NULL;
}

pb_status pb_schedule_kind_from_name(const char *name, uint32_t *kind) {
    if (name == NULL || kind == NULL) return PB_ERR_NULL;
    for (uint32_t k = 0; k < KIND_COUNT; ++k)
        if (strcmp(name, kind_names[k]) == 0) {
            *kind = k;
            return PB_OK;
        }
    return PB_ERR_PARAM;
}

/* The kind's own ranges (docs/spec.md §12). */
static pb_status check_fields(const pb_schedule *s) {
    switch (s->kind) {
    case PB_SCHEDULE_ARITHMETIC:
    case PB_SCHEDULE_GEOMETRIC:
        return s->ratio >= 1u ? PB_OK : PB_ERR_PARAM;
    case PB_SCHEDULE_CURVE:
        return s->ratio >= 1u && s->gamma_milli >= 1u &&
                       s->gamma_milli <= 1000000u
                   ? PB_OK
                   : PB_ERR_PARAM;
    case PB_SCHEDULE_KVFACTORY:
    case PB_SCHEDULE_KVFACTORY_BALANCED:
        return s->window < s->budget && s->beta >= 1u ? PB_OK : PB_ERR_PARAM;
    case PB_SCHEDULE_TAPER:
        /* NaN fails the comparison too. */
        return s->sinks < UINT32_MAX && s->taper_beta >= 1.0 &&
                       pb__finite(s->taper_beta)
                   ? PB_OK
                   : PB_ERR_PARAM;
    case PB_SCHEDULE_CAKE:
    case PB_SCHEDULE_PROFILE: {
        if (s->kind == PB_SCHEDULE_PROFILE ? s->min_share > s->budget
                                           : s->window >= s->budget)
            return PB_ERR_PARAM;
        for (uint32_t l = 0; l < s->num_layers; ++l)
            if (s->weights[l] != 0u) return PB_OK;
        return PB_ERR_PARAM;
    }
    default:
        return PB_OK; /* uniform */
    }
}

pb_status pb_kvcache_schedule_shares(const pb_schedule *schedule,
                                     uint32_t *shares, size_t shares_len,
                                     uint64_t *total) {
    if (schedule == NULL || shares == NULL) return PB_ERR_NULL;
    /* An older caller's struct is shorter than this library's: the fields
     * it did not know take their defaults. */
    pb_schedule full = PB_SCHEDULE_DEFAULT;
    if (pb__struct_read(schedule, PB__SCHEDULE_SIZE_0_2, sizeof full,
                        &full) != PB_OK)
        return PB_ERR_PARAM;
    const pb_schedule *s = &full;
    if (s->kind >= KIND_COUNT || s->num_layers == 0u) return PB_ERR_PARAM;
    if ((s->kind == PB_SCHEDULE_PROFILE || s->kind == PB_SCHEDULE_CAKE) &&
        s->weights == NULL)
        return PB_ERR_NULL;
    pb_status st = check_fields(s);
    if (st != PB_OK) return st;
    if (shares_len < s->num_layers) return PB_ERR_BUFFER;

    uint64_t sum = 0;
    switch (s->kind) {
    case PB_SCHEDULE_ARITHMETIC: st = arithmetic(s, shares, &sum); break;
    case PB_SCHEDULE_UNIFORM:
        fill(shares, s->num_layers, s->budget);
        sum = (uint64_t)s->budget * s->num_layers;
        break;
    case PB_SCHEDULE_KVFACTORY: st = kvfactory(s, shares, &sum); break;
    case PB_SCHEDULE_KVFACTORY_BALANCED:
        st = kvfactory_balanced(s, shares, &sum);
        break;
    case PB_SCHEDULE_TAPER: st = pb__taper_shares(s, shares, &sum); break;
    case PB_SCHEDULE_CURVE: st = powered(s, SRC_CURVE, shares, &sum); break;
    case PB_SCHEDULE_GEOMETRIC:
        st = powered(s, SRC_GEOMETRIC, shares, &sum);
        break;
    case PB_SCHEDULE_CAKE: st = cake(s, shares, &sum); break;
    default: st = profile(s, shares, &sum); break;
    }
    if (st == PB_OK && total != NULL) *total = sum;
    return st;
}
