/*
 * pyramid_budget.c - the per-layer share arithmetic of PyramidKV.
 *
 * Owns pb_kvcache_pyramid_budget, pb_kvcache_pyramid_budgets and
 * pb_kvcache_pyramid_total. No policy state, no allocation, no floating
 * point. Every product that can exceed 64 bits goes through the exact
 * 128-bit kit of pb__u128.h, so the results are the same on every platform
 * and compiler.
 */
#include "pyramidkv/pyramidkv.h"
#include "u128.h"

/* The unsaturated share written as floor((a*j + b) / m), where j counts
 * layers from the last one (j = L-1-k): a = 2B(r-1), b = 2B(L-1),
 * m = (r+1)(L-1). Valid for L > 1 and r >= 1. */
typedef struct share_line {
    pb__u128 a, b, m;
} share_line;

static share_line share_line_of(uint32_t budget, uint32_t num_layers,
                                uint32_t ratio) {
    const uint64_t two_b = 2u * (uint64_t)budget;
    const uint64_t lm1 = (uint64_t)num_layers - 1u;
    share_line s;
    s.a = pb__u128_mul64(two_b, (uint64_t)ratio - 1u);
    s.b = pb__u128_mul64(two_b, lm1);
    s.m = pb__u128_mul64((uint64_t)ratio + 1u, lm1);
    return s;
}

/* floor((a*j + b) / m): below 2^34, since a*j + b = 2B*M with M < m. */
static pb__u128 share_at(const share_line *s, uint64_t j) {
    const pb__u128 num = pb__u128_add(pb__u128_mul(s->a, pb__u128_of(j)), s->b);
    return pb__u128_divmod(num, s->m, NULL);
}

static uint32_t saturate(pb__u128 v) {
    return (v.hi != 0u || v.lo > UINT32_MAX) ? UINT32_MAX : (uint32_t)v.lo;
}

uint32_t pb_kvcache_pyramid_budget(uint32_t budget, uint32_t layer,
                                   uint32_t num_layers,
                                   uint32_t pyramid_ratio) {
    if (num_layers == 0u || layer >= num_layers || pyramid_ratio == 0u)
        return 0u;
    if (num_layers == 1u) return budget;
    const share_line s = share_line_of(budget, num_layers, pyramid_ratio);
    return saturate(share_at(&s, (uint64_t)(num_layers - 1u - layer)));
}

pb_status pb_kvcache_pyramid_budgets(uint32_t budget, uint32_t num_layers,
                                     uint32_t pyramid_ratio, uint32_t *shares,
                                     size_t shares_len) {
    if (shares == NULL) return PB_ERR_NULL;
    if (num_layers == 0u || pyramid_ratio == 0u) return PB_ERR_PARAM;
    if (shares_len < num_layers) return PB_ERR_BUFFER;
    for (uint32_t k = 0; k < num_layers; ++k)
        shares[k] =
            pb_kvcache_pyramid_budget(budget, k, num_layers, pyramid_ratio);
    return PB_OK;
}

/* sum_{i=0}^{n-1} floor((a*i + b) / m), the classic Euclid-like reduction.
 * Every partial sum is bounded by the full sum, which the caller knows fits
 * in 64 bits, and every intermediate fits in 128 bits (a, b, m < 2^66,
 * n < 2^33). */
static pb__u128 floor_sum(pb__u128 n, pb__u128 m, pb__u128 a, pb__u128 b) {
    pb__u128 ans = pb__u128_of(0u);
    for (;;) {
        if (!pb__u128_lt(a, m)) {
            pb__u128 rem;
            const pb__u128 q = pb__u128_divmod(a, m, &rem);
            /* n(n-1)/2 with n < 2^33 fits in 64 bits. */
            const uint64_t nn = n.lo, tri = (nn & 1u) ? nn * ((nn - 1u) / 2u)
                                                      : (nn / 2u) * (nn - 1u);
            if (nn != 0u) ans = pb__u128_add(ans, pb__u128_mul(pb__u128_of(tri), q));
            a = rem;
        }
        if (!pb__u128_lt(b, m)) {
            pb__u128 rem;
            const pb__u128 q = pb__u128_divmod(b, m, &rem);
            ans = pb__u128_add(ans, pb__u128_mul(n, q));
            b = rem;
        }
        const pb__u128 y_max = pb__u128_add(pb__u128_mul(a, n), b);
        if (pb__u128_lt(y_max, m)) break;
        pb__u128 rem;
        n = pb__u128_divmod(y_max, m, &rem);
        b = rem;
        const pb__u128 t = m;
        m = a;
        a = t;
    }
    return ans;
}

uint64_t pb_kvcache_pyramid_total(uint32_t budget, uint32_t num_layers,
                                  uint32_t pyramid_ratio) {
    if (num_layers == 0u || pyramid_ratio == 0u) return 0u;
    if (num_layers == 1u) return budget;
    const share_line s = share_line_of(budget, num_layers, pyramid_ratio);
    const pb__u128 cap = pb__u128_of(UINT32_MAX);
    /* Shares grow with j; find the first j whose share saturates. */
    uint64_t lo = 0u, hi = num_layers; /* answer in [lo, hi] */
    while (lo < hi) {
        const uint64_t mid = lo + (hi - lo) / 2u;
        if (pb__u128_lt(cap, share_at(&s, mid)))
            hi = mid;
        else
            lo = mid + 1u;
    }
    const pb__u128 exact = floor_sum(pb__u128_of(lo), s.m, s.a, s.b);
    return exact.lo + ((uint64_t)num_layers - lo) * (uint64_t)UINT32_MAX;
}
